//! Table tests of the per-node machine under the plan's long-roll policies (`on_undrainable`,
//! `soak`, `on_failure`): `(state, observation) -> intent`, no I/O at all.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::NodeChange;
use upgrade_driver::records::{
    BLOCKED, Blocked, DONE, FENCE_TAINT, IN_PROGRESS, InProgress, QUARANTINED, QUARANTINED_VALUE,
    ROLLBACK, Rollback, SOAK, Soak, value,
};
use upgrade_driver::{
    Cause, DrainFailed, HeldBy, Intent, Mark, NodeMachine, NodeResult, Observation as Obs, Own,
    Plan, PlanSpec, Undrainable, UpgradeStep,
};

const TARGET: &str = "v1.38.0";
const EPOCH: i32 = 4;

fn plan(edit: impl FnOnce(&mut PlanSpec)) -> Plan {
    let mut spec = PlanSpec::new(TARGET);
    edit(&mut spec);
    Plan::build(spec).unwrap()
}

/// A node at `version`, boot `boot`, Ready as `ready` says, with `annotations` and `labels`;
/// rv "10".
fn node_with(
    version: &str,
    boot: &str,
    cordoned: bool,
    annotations: &[(&str, String)],
    labels: &[(&str, &str)],
) -> Box<Node> {
    Box::new(Node {
        metadata: ObjectMeta {
            name: Some("n1".into()),
            resource_version: Some("10".into()),
            annotations: Some(
                (annotations.iter())
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            labels: Some(
                (labels.iter())
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            unschedulable: cordoned.then_some(true),
            // Our taint goes with our record, as our writes leave a node.
            taints: (annotations.iter())
                .any(|(k, _)| *k == IN_PROGRESS)
                .then(|| vec![our_taint()]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..NodeCondition::default()
            }]),
            node_info: Some(NodeSystemInfo {
                kubelet_version: version.into(),
                boot_id: boot.into(),
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    })
}

fn node(version: &str, boot: &str, cordoned: bool, annotations: &[(&str, String)]) -> Box<Node> {
    node_with(version, boot, cordoned, annotations, &[])
}

fn ours(cordoned: bool) -> (&'static str, String) {
    let record = InProgress {
        target: TARGET.into(),
        boot_id: "boot-1".into(),
        host_boot_id: None,
        epoch: 3,
        cordoned,
        from: None,
        evicted: None,
    };
    (IN_PROGRESS, value(&record))
}

/// A machine under `plan` that marked a fresh node (`cordoned`: whether someone else had
/// cordoned it first), found no host Job, and is draining it.
fn draining(plan: &Plan, cordoned_by_someone: bool) -> NodeMachine {
    let mut m = NodeMachine::new(plan, EPOCH);
    begin(&mut m, node("v1.37.2", "boot-1", cordoned_by_someone, &[]));
    let step = m.step(Obs::Node(node(
        "v1.37.2",
        "boot-1",
        true,
        &[ours(!cordoned_by_someone)],
    )));
    assert_eq!(step.intent, Intent::FindJob);
    let step = m.step(Obs::Job(None));
    assert_eq!(step.intent, Intent::Drain);
    m
}

fn held() -> DrainFailed {
    DrainFailed {
        evicted: vec!["default/web-1".into()],
        message: "drain of node n1 timed out after 120s: pods left: default/db-0".into(),
        held: Some(HeldBy {
            budgets: vec!["default/db".into()],
            pods: vec!["default/db-0".into()],
        }),
    }
}

fn blocked_record(changes: &[NodeChange]) -> Blocked {
    let value = changes
        .iter()
        .find_map(|c| match c {
            NodeChange::SetAnnotation { key, value } if key == BLOCKED => Some(value.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no blocked record in {changes:?}"));
    serde_json::from_str(&value).unwrap()
}

// --- on_undrainable ------------------------------------------------------------------------

#[test]
fn a_drain_held_by_budgets_fails_the_node_by_default_and_left_cordoned() {
    let mut m = draining(&plan(|_| {}), false);
    let step = m.step(Obs::Drained(Err(held())));
    let Intent::Done(NodeResult::Failed(f)) = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(f.step, UpgradeStep::Drain);
}

#[test]
fn a_drain_failed_otherwise_fails_the_node_whatever_the_policy() {
    for policy in [Undrainable::Skip, Undrainable::Quarantine] {
        let mut m = draining(&plan(|s| s.on_undrainable = policy), false);
        let refused = DrainFailed::from("drain of node n1 refused before any eviction");
        let step = m.step(Obs::Drained(Err(refused)));
        assert!(
            matches!(step.intent, Intent::Done(NodeResult::Failed(_))),
            "{policy}: {step:?}"
        );
    }
}

#[test]
fn skip_uncordons_what_we_cordoned_records_why_and_drops_our_record_in_one_write() {
    let mut m = draining(&plan(|s| s.on_undrainable = Undrainable::Skip), false);
    let step = m.step(Obs::Drained(Err(held())));
    assert!(
        step.marks
            .contains(&Mark::Own(Own::Evicted(vec!["default/web-1".into()])))
    );
    let Intent::Patch { rv, changes } = &step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(rv, "10");
    assert_eq!(changes[0], NodeChange::Uncordon);
    assert!(changes.contains(&NodeChange::remove_annotation(IN_PROGRESS)));
    let record = blocked_record(changes);
    assert_eq!(
        (record.policy, record.cordoned, record.target.as_str()),
        (Undrainable::Skip, true, TARGET)
    );
    assert_eq!(
        (record.budgets, record.pods),
        (
            vec!["default/db".to_string()],
            vec!["default/db-0".to_string()]
        )
    );
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", false, &[])));
    let Intent::Done(NodeResult::Blocked {
        policy, budgets, ..
    }) = step.intent
    else {
        panic!("{step:?}")
    };
    assert_eq!(
        (policy, budgets),
        (Undrainable::Skip, vec!["default/db".into()])
    );
}

#[test]
fn skip_never_uncordons_a_node_someone_else_cordoned() {
    let mut m = draining(&plan(|s| s.on_undrainable = Undrainable::Skip), true);
    let step = m.step(Obs::Drained(Err(held())));
    let Intent::Patch { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(!changes.contains(&NodeChange::Uncordon), "{changes:?}");
    assert!(!blocked_record(changes).cordoned);
}

#[test]
fn quarantine_labels_the_node_and_leaves_it_cordoned_in_one_write() {
    let mut m = draining(&plan(|s| s.on_undrainable = Undrainable::Quarantine), false);
    let step = m.step(Obs::Drained(Err(held())));
    let Intent::Patch { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(!changes.contains(&NodeChange::Uncordon), "{changes:?}");
    assert!(changes.contains(&NodeChange::set_label(QUARANTINED, QUARANTINED_VALUE)));
    assert!(changes.contains(&NodeChange::remove_annotation(IN_PROGRESS)));
    let record = blocked_record(changes);
    assert_eq!(
        (record.policy, record.cordoned),
        (Undrainable::Quarantine, true)
    );
    // The write failing (the node deleted) fails the node at its drain.
    let step = m.step(Obs::Failed(Cause::api("node n1 not found")));
    let Intent::Done(NodeResult::Failed(f)) = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(f.step, UpgradeStep::Drain);
}

#[test]
fn a_quarantined_node_is_left_as_it_is_with_no_write_whatever_the_policy() {
    let record = Blocked {
        target: TARGET.into(),
        policy: Undrainable::Quarantine,
        budgets: vec!["default/db".into()],
        pods: vec!["default/db-0".into()],
        at: "2026-01-01T00:00:00Z".into(),
        cordoned: true,
    };
    for policy in [
        Undrainable::Fail,
        Undrainable::Skip,
        Undrainable::Quarantine,
    ] {
        let mut m = NodeMachine::new(&plan(|s| s.on_undrainable = policy), EPOCH);
        let step = begin(
            &mut m,
            node_with(
                "v1.37.2",
                "boot-1",
                true,
                &[(BLOCKED, value(&record))],
                &[(QUARANTINED, QUARANTINED_VALUE)],
            ),
        );
        let Intent::Done(NodeResult::Blocked {
            policy: p, budgets, ..
        }) = step.intent
        else {
            panic!("{policy}: {step:?}")
        };
        assert_eq!(
            (p, budgets),
            (Undrainable::Quarantine, vec!["default/db".into()])
        );
    }
}

#[test]
fn a_node_we_quarantined_whose_label_is_gone_is_ours_to_uncordon_when_rolled() {
    let record = Blocked {
        target: TARGET.into(),
        policy: Undrainable::Quarantine,
        budgets: vec![],
        pods: vec![],
        at: "2026-01-01T00:00:00Z".into(),
        cordoned: true,
    };
    let mut m = NodeMachine::new(&plan(|_| {}), EPOCH);
    let step = begin(
        &mut m,
        node("v1.37.2", "boot-1", true, &[(BLOCKED, value(&record))]),
    );
    let Intent::Patch { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(!changes.contains(&NodeChange::Cordon), "cordoned already");
    assert!(
        matches!(&changes[0], NodeChange::SetAnnotation { value, .. } if value.contains("\"cordoned\":true")),
        "{changes:?}"
    );
}

// --- soak ----------------------------------------------------------------------------------

/// A machine under `plan` that upgraded the node (its host Job exited 0, recorded, deleted)
/// and saw it back Ready at the target on boot-2: the step after the reboot.
fn back_at_target(plan: &Plan) -> (NodeMachine, upgrade_driver::Step) {
    let mut m = draining(plan, false);
    let launch = m.step(Obs::Drained(Ok(nodejob_core::drain::Drained::default())));
    let step = launch_answered(&mut m, &launch);
    assert_eq!(
        step.intent,
        Intent::Host {
            adopt: None,
            known_free: true
        }
    );
    let report = nodejob_core::runner::Report {
        uid: "j".into(),
        exit_code: 0,
        log: Some("upgraded\n".into()),
        resource_version: None,
    };
    let step = m.step(Obs::Host(Ok(report)));
    assert!(matches!(step.intent, Intent::Patch { .. }), "{step:?}");
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
    assert!(matches!(step.intent, Intent::DeleteJob { .. }), "{step:?}");
    let step = m.step(Obs::Deleted);
    assert!(matches!(step.intent, Intent::WaitReboot { .. }), "{step:?}");
    m.set_now("2026-01-01T01:00:00Z".into());
    let step = m.step(Obs::Rebooted {
        node: Some(node(TARGET, "boot-2", true, &[ours(true)])),
        met: true,
    });
    (m, step)
}

fn soaking(health: bool) -> Plan {
    plan(|s| {
        s.soak = Some(std::time::Duration::from_secs(600));
        if health {
            s.health_check = Some(vec!["/usr/local/bin/stratum".into(), "health".into()]);
        }
    })
}

fn soak_record(changes: &[NodeChange]) -> Soak {
    let value = changes
        .iter()
        .find_map(|c| match c {
            NodeChange::SetAnnotation { key, value } if key == SOAK => Some(value.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no soak record in {changes:?}"));
    serde_json::from_str(&value).unwrap()
}

#[test]
fn without_a_soak_the_finish_records_done_as_before() {
    let (_, step) = back_at_target(&plan(|_| {}));
    let Intent::Guarded { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(
        changes
            .iter()
            .any(|c| matches!(c, NodeChange::SetAnnotation { key, .. } if key == DONE))
    );
    assert!(
        !changes
            .iter()
            .any(|c| matches!(c, NodeChange::SetAnnotation { key, .. } if key == SOAK))
    );
}

#[test]
fn with_a_soak_the_finish_uncordons_and_starts_the_soak_in_one_write_and_done_waits_for_it() {
    let (mut m, step) = back_at_target(&soaking(false));
    let Intent::Guarded { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(changes[0], NodeChange::Uncordon);
    assert!(changes.contains(&NodeChange::remove_annotation(IN_PROGRESS)));
    assert!(
        !changes
            .iter()
            .any(|c| matches!(c, NodeChange::SetAnnotation { key, .. } if key == DONE)),
        "no done record before the soak: {changes:?}"
    );
    let record = soak_record(changes);
    assert_eq!(
        (
            record.since.as_str(),
            record.boot_id.as_str(),
            record.failed
        ),
        ("2026-01-01T01:00:00Z", "boot-2", None)
    );
    let step = m.step(Obs::Node(node(TARGET, "boot-2", false, &[])));
    assert!(
        step.marks.contains(&Mark::Started(UpgradeStep::Soak)),
        "{step:?}"
    );
    assert_eq!(
        step.intent,
        Intent::Soak {
            since: "2026-01-01T01:00:00Z".into(),
            boot_id: "boot-2".into()
        }
    );
    // It held: done, the soak record gone, on the node as read.
    let step = m.step(Obs::Soaked {
        node: Some(node(TARGET, "boot-2", false, &[])),
        held: true,
    });
    let Intent::Guarded { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(changes.contains(&NodeChange::remove_annotation(SOAK)));
    assert!(
        changes
            .iter()
            .any(|c| matches!(c, NodeChange::SetAnnotation { key, .. } if key == DONE))
    );
    let step = m.step(Obs::Node(node(TARGET, "boot-2", false, &[])));
    assert_eq!(step.intent, Intent::Done(NodeResult::Upgraded));
}

#[test]
fn a_soak_held_runs_the_health_check_again_and_a_failing_one_fails_the_node_at_soak() {
    let (mut m, step) = back_at_target(&soaking(true));
    // The health check after the reboot, first.
    assert_eq!(step.intent, Intent::Health);
    let step = m.step(Obs::Health(Ok(0), None));
    assert!(matches!(step.intent, Intent::Guarded { .. }), "{step:?}");
    m.step(Obs::Node(node(TARGET, "boot-2", false, &[])));
    let step = m.step(Obs::Soaked {
        node: Some(node(TARGET, "boot-2", false, &[])),
        held: true,
    });
    assert_eq!(step.intent, Intent::Health, "again, at the end of the soak");
    let step = m.step(Obs::Health(Ok(3), None));
    let Intent::Patch { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(soak_record(changes).failed.unwrap().contains("exited 3"));
    let step = m.step(Obs::Node(node(TARGET, "boot-2", false, &[])));
    let Intent::Done(NodeResult::Failed(f)) = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!((f.step, f.exit_code), (UpgradeStep::Soak, Some(3)));
}

#[test]
fn a_node_that_reboots_goes_not_ready_or_is_deleted_during_its_soak_fails_at_soak() {
    let cases = [
        (
            Some(node(TARGET, "boot-3", false, &[])),
            "rebooted during its soak",
        ),
        (
            Some(not_ready(node(TARGET, "boot-2", false, &[]))),
            "NotReady",
        ),
        (None, "deleted"),
    ];
    for (seen, want) in cases {
        let (mut m, _) = back_at_target(&soaking(false));
        m.step(Obs::Node(node(TARGET, "boot-2", false, &[])));
        let gone = seen.is_none();
        let mut step = m.step(Obs::Soaked {
            node: seen,
            held: false,
        });
        if !gone {
            let Intent::Patch { changes, .. } = &step.intent else {
                panic!("{want}: {step:?}")
            };
            assert!(
                soak_record(changes).failed.unwrap().contains(want),
                "{changes:?}"
            );
            step = m.step(Obs::Node(node(TARGET, "boot-2", false, &[])));
        }
        let Intent::Done(NodeResult::Failed(f)) = step.intent else {
            panic!("{want}: {step:?}")
        };
        assert_eq!(f.step, UpgradeStep::Soak);
        assert!(f.message.contains(want), "{}", f.message);
    }
}

/// A failure whose record cannot be written (the write's own failure the second half of the
/// news): for the soak as for the host step (`machine.rs`'s
/// `a_failed_host_step_whose_record_cannot_be_written_names_the_host_failure`), one rule.
#[test]
fn a_failed_soak_whose_record_cannot_be_written_names_the_soak_failure() {
    let (mut m, _) = back_at_target(&soaking(false));
    m.step(Obs::Node(node(TARGET, "boot-2", false, &[])));
    let step = m.step(Obs::Soaked {
        node: Some(node(TARGET, "boot-3", false, &[])),
        held: false,
    });
    assert!(matches!(step.intent, Intent::Patch { .. }), "{step:?}");
    let step = m.step(Obs::Failed(Cause::api("patching node n1: not found (404)")));
    let Intent::Done(NodeResult::Failed(f)) = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(f.step, UpgradeStep::Soak);
    assert!(
        f.message.starts_with("it rebooted during its soak"),
        "{}",
        f.message
    );
    assert!(
        f.message
            .ends_with("; it could not be recorded on the node: patching node n1: not found (404)"),
        "{}",
        f.message
    );
}

fn not_ready(mut n: Box<Node>) -> Box<Node> {
    if let Some(c) = n.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        c[0].status = "False".into();
    }
    n
}

#[test]
fn a_rerun_resumes_a_soak_from_its_recorded_start_or_soaks_again_after_a_failed_one() {
    let record = Soak {
        target: TARGET.into(),
        since: "2026-01-01T01:00:00Z".into(),
        boot_id: "boot-2".into(),
        failed: None,
        from: Some("v1.37.2".into()),
        evicted: Some(2),
    };
    // Resumed where it stood: no write.
    let mut m = NodeMachine::new(&soaking(false), EPOCH);
    let step = begin(
        &mut m,
        node(TARGET, "boot-2", false, &[(SOAK, value(&record))]),
    );
    assert_eq!(
        step.intent,
        Intent::Soak {
            since: record.since.clone(),
            boot_id: "boot-2".into()
        }
    );
    // Its last soak failed: soaked again from now, on the boot it is on.
    let failed = Soak {
        failed: Some("it rebooted during its soak".into()),
        ..record.clone()
    };
    let mut m = NodeMachine::new(&soaking(false), EPOCH);
    m.set_now("2026-01-02T00:00:00Z".into());
    let step = begin(
        &mut m,
        node(TARGET, "boot-3", false, &[(SOAK, value(&failed))]),
    );
    let Intent::Guarded { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    let fresh = soak_record(changes);
    assert_eq!(
        (fresh.since.as_str(), fresh.boot_id.as_str(), fresh.failed),
        ("2026-01-02T00:00:00Z", "boot-3", None)
    );
    let step = m.step(Obs::Node(node(TARGET, "boot-3", false, &[])));
    assert!(matches!(step.intent, Intent::Soak { .. }), "{step:?}");
    // A rerun that soaks none records it done.
    let mut m = NodeMachine::new(&plan(|_| {}), EPOCH);
    let step = begin(
        &mut m,
        node(TARGET, "boot-2", false, &[(SOAK, value(&record))]),
    );
    let Intent::Guarded { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(changes.contains(&NodeChange::remove_annotation(SOAK)));
}

// --- rollback ------------------------------------------------------------------------------

fn rolling_back() -> Plan {
    plan(|s| s.on_failure = upgrade_driver::OnFailure::Rollback)
}

fn rollback_record(changes: &[NodeChange]) -> Rollback {
    let value = changes
        .iter()
        .find_map(|c| match c {
            NodeChange::SetAnnotation { key, value } if key == ROLLBACK => Some(value.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no rollback record in {changes:?}"));
    serde_json::from_str(&value).unwrap()
}

/// The launch write `launch` answered with the node at v1.37.2 on boot-1 as it leaves it,
/// then the read right before the host Job with that node and no Pod: the step after.
fn launch_answered(m: &mut NodeMachine, launch: &upgrade_driver::Step) -> upgrade_driver::Step {
    let Intent::Guarded { changes, .. } = &launch.intent else {
        panic!("expected the launch write, got {launch:?}")
    };
    let set: Vec<(&str, String)> = (changes.iter())
        .filter_map(|c| match c {
            NodeChange::SetAnnotation { key, value } => Some((key.as_str(), value.clone())),
            _ => None,
        })
        .collect();
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &set)));
    assert_eq!(step.intent, Intent::Preflight, "{step:?}");
    let node = Some(node("v1.37.2", "boot-1", true, &set));
    m.step(Obs::Preflight {
        node,
        pods: Vec::new(),
    })
}

/// Drained under `plan`: the Launch write, then its answer.
fn launched(plan: &Plan) -> (NodeMachine, Vec<NodeChange>) {
    let mut m = draining(plan, false);
    let launch = m.step(Obs::Drained(Ok(nodejob_core::drain::Drained::default())));
    let Intent::Guarded { changes, .. } = launch.intent.clone() else {
        panic!("{launch:?}")
    };
    let step = launch_answered(&mut m, &launch);
    assert_eq!(
        step.intent,
        Intent::Host {
            adopt: None,
            known_free: true
        }
    );
    (m, changes)
}

#[test]
fn the_launch_records_what_a_rollback_goes_back_to_only_when_the_plan_rolls_back() {
    let (_, changes) = launched(&rolling_back());
    let record = rollback_record(&changes);
    assert_eq!(
        (
            record.from.as_str(),
            record.to.as_str(),
            record.boot_id.as_str()
        ),
        (TARGET, "v1.37.2", "boot-1")
    );
    assert_eq!(record.why, None);
    let (_, changes) = launched(&plan(|_| {}));
    assert_eq!(changes.len(), 1, "our record alone: {changes:?}");
}

#[test]
fn a_failed_host_upgrade_is_rolled_back_step_by_step_each_recorded_first() {
    let (mut m, _) = launched(&rolling_back());
    let report = nodejob_core::runner::Report {
        uid: "j".into(),
        exit_code: 1,
        log: Some("failed\n".into()),
        resource_version: None,
    };
    let step = m.step(Obs::Host(Ok(report)));
    assert!(
        matches!(step.intent, Intent::Patch { .. }),
        "the failure recorded first"
    );
    // The decision, one write: why on the rollback record, the node ours (still cordoned).
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
    assert!(
        step.marks.contains(&Mark::Started(UpgradeStep::Rollback)),
        "{step:?}"
    );
    let Intent::Patch { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(!changes.contains(&NodeChange::Cordon), "cordoned already");
    let decided = rollback_record(changes);
    assert!(decided.why.unwrap().contains("exited 1"));
    assert_eq!(decided.step.as_deref(), Some("Upgrade"));
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
    assert_eq!(step.intent, Intent::Drain);
    // Right before the rollback Job: the boot now, guarded.
    let step = m.step(Obs::Drained(Ok(nodejob_core::drain::Drained::default())));
    let Intent::Guarded { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(
        rollback_record(changes).rollback_boot_id.as_deref(),
        Some("boot-1")
    );
    let step = preflighted(&mut m, node("v1.37.2", "boot-1", true, &[ours(true)]));
    assert_eq!(
        step.intent,
        Intent::RollbackJob {
            adopt: None,
            to: "v1.37.2".into(),
            // Not read by the machine: an earlier rollback's Job, kept, may hold the name.
            known_free: false,
        }
    );
    let report = nodejob_core::runner::Report {
        uid: "r".into(),
        exit_code: 0,
        log: None,
        resource_version: None,
    };
    let step = m.step(Obs::Host(Ok(report)));
    let Intent::Patch { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    let recorded = rollback_record(changes);
    assert_eq!(
        (recorded.uid.as_deref(), recorded.exit_code),
        (Some("r"), Some(0))
    );
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
    assert_eq!(step.intent, Intent::DeleteRollbackJob { uid: "r".into() });
    let step = m.step(Obs::Deleted);
    assert_eq!(
        step.intent,
        Intent::WaitReboot {
            boot_id: "boot-1".into()
        }
    );
    // Back at the recorded version on a new boot: uncordoned, done, not ours; the failed host
    // Job's record kept (a rerun replaces exactly that Job).
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.37.2", "boot-3", true, &[ours(true)])),
        met: true,
    });
    let Intent::Guarded { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(changes[0], NodeChange::Uncordon);
    assert!(changes.contains(&NodeChange::remove_annotation(IN_PROGRESS)));
    assert!(!changes.contains(&NodeChange::remove_annotation(
        upgrade_driver::records::HOST_JOB
    )));
    assert!(rollback_record(changes).done.is_some());
    let step = m.step(Obs::Node(node("v1.37.2", "boot-3", false, &[])));
    let Intent::Done(NodeResult::RolledBack { failure, version }) = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(
        (failure.step, version.as_str()),
        (UpgradeStep::Upgrade, "v1.37.2")
    );
}

#[test]
fn a_rollback_that_comes_back_at_another_version_fails_at_rollback() {
    let mut m = rollback_drained();
    preflighted(&mut m, node("v1.37.2", "boot-1", true, &[ours(true)]));
    let ok = nodejob_core::runner::Report {
        uid: "r".into(),
        exit_code: 0,
        log: None,
        resource_version: None,
    };
    m.step(Obs::Host(Ok(ok)));
    m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
    m.step(Obs::Deleted);
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.36.0", "boot-3", true, &[ours(true)])),
        met: true,
    });
    let Intent::Done(NodeResult::Failed(f)) = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(f.step, UpgradeStep::Rollback);
    assert!(
        f.message.contains("came back at v1.36.0, not v1.37.2"),
        "{}",
        f.message
    );
}

/// The rollback's Job lost to a reboot of the node: recorded as failed without an exit code,
/// then the node, once back on a new boot, says whether it rolled back: at the recorded version,
/// rolled back (never run again); at another, failed at Rollback, saying both.
#[test]
fn a_rollback_job_lost_to_a_reboot_is_judged_by_the_version_the_node_comes_back_at() {
    let to_the_rollback_job = || {
        let mut m = rollback_drained();
        preflighted(&mut m, node("v1.37.2", "boot-1", true, &[ours(true)]));
        let lost = "pod rollback-n1-x of job kube-system/rollback-n1 on node n1 was running \
                    when its node rebooted";
        let step = m.step(Obs::Lost(lost.into()));
        assert_eq!(step.intent, Intent::FindRollbackJob);
        let failed = Box::new(k8s_openapi::api::batch::v1::Job {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                uid: Some("r".into()),
                ..Default::default()
            },
            status: Some(k8s_openapi::api::batch::v1::JobStatus {
                conditions: Some(vec![k8s_openapi::api::batch::v1::JobCondition {
                    type_: "Failed".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        let step = m.step(Obs::Job(Some(failed)));
        let Intent::Patch { changes, .. } = &step.intent else {
            panic!("{step:?}")
        };
        let recorded = rollback_record(changes);
        assert_eq!(
            (recorded.uid.as_deref(), recorded.exit_code),
            (Some("r"), None)
        );
        let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
        assert_eq!(
            step.intent,
            Intent::WaitReboot {
                boot_id: "boot-1".into()
            }
        );
        m
    };
    let mut m = to_the_rollback_job();
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.37.2", "boot-3", true, &[ours(true)])),
        met: true,
    });
    assert!(matches!(step.intent, Intent::Guarded { .. }), "{step:?}");
    let step = m.step(Obs::Node(node("v1.37.2", "boot-3", false, &[])));
    assert!(
        matches!(step.intent, Intent::Done(NodeResult::RolledBack { .. })),
        "{step:?}"
    );

    let mut m = to_the_rollback_job();
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.38.0", "boot-3", true, &[ours(true)])),
        met: true,
    });
    let Intent::Done(NodeResult::Failed(f)) = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(f.step, UpgradeStep::Rollback);
    for part in [
        "when its node rebooted",
        "came back at v1.38.0, not v1.37.2",
    ] {
        assert!(f.message.contains(part), "{part:?} not in {}", f.message);
    }
}

/// The rollback record of a node whose failed health check was being rolled back (from the
/// target to v1.37.2, the node on boot-1 then), launched on boot-2, its result not recorded.
fn launched_rollback() -> Rollback {
    Rollback {
        from: TARGET.into(),
        to: "v1.37.2".into(),
        boot_id: "boot-1".into(),
        why: Some("the health check exited 1".into()),
        step: Some("Health".into()),
        rollback_boot_id: Some("boot-2".into()),
        uid: None,
        exit_code: None,
        done: None,
    }
}

#[test]
fn a_resumed_rollback_adopts_the_rollback_job_an_earlier_run_launched() {
    let record = launched_rollback();
    let mut m = NodeMachine::new(&rolling_back(), EPOCH);
    let step = begin(
        &mut m,
        node(
            TARGET,
            "boot-2",
            true,
            &[ours(true), (ROLLBACK, value(&record))],
        ),
    );
    assert_eq!(step.intent, Intent::FindRollbackJob, "{step:?}");
    let job = Box::new(k8s_openapi::api::batch::v1::Job {
        metadata: ObjectMeta {
            uid: Some("r".into()),
            ..ObjectMeta::default()
        },
        ..Default::default()
    });
    let step = m.step(Obs::Job(Some(job)));
    assert_eq!(
        step.intent,
        Intent::RollbackJob {
            adopt: Some("r".into()),
            to: "v1.37.2".into(),
            known_free: false,
        }
    );
    // A rollback whose result was recorded goes on from it: its Job deleted, then the reboot.
    let done = Rollback {
        uid: Some("r".into()),
        exit_code: Some(0),
        ..record
    };
    let mut m = NodeMachine::new(&rolling_back(), EPOCH);
    let step = begin(
        &mut m,
        node(
            TARGET,
            "boot-2",
            true,
            &[ours(true), (ROLLBACK, value(&done))],
        ),
    );
    assert_eq!(step.intent, Intent::DeleteRollbackJob { uid: "r".into() });
}

/// A resumed rollback whose Job the find reads free (launched on boot-2, the node still on it
/// at the target: it never ran) is drained and launched again, its Job created at once, with
/// no read of its own (`known_free`); a Job that ran is never run again, as the test above.
#[test]
fn a_resumed_rollback_whose_job_is_not_there_creates_it_without_reading_the_name_again() {
    let record = launched_rollback();
    let on = |boot: &str| {
        node(
            TARGET,
            boot,
            true,
            &[ours(true), (ROLLBACK, value(&record))],
        )
    };
    let mut m = NodeMachine::new(&rolling_back(), EPOCH);
    assert_eq!(begin(&mut m, on("boot-2")).intent, Intent::FindRollbackJob);
    assert_eq!(m.step(Obs::Job(None)).intent, Intent::Drain);
    let step = m.step(Obs::Drained(Ok(nodejob_core::drain::Drained::default())));
    assert!(matches!(step.intent, Intent::Guarded { .. }), "{step:?}");
    assert_eq!(
        preflighted(&mut m, on("boot-2")).intent,
        Intent::RollbackJob {
            adopt: None,
            to: "v1.37.2".into(),
            known_free: true,
        }
    );
}

/// Our `NoSchedule` taint, as our first write puts it on a node.
fn our_taint() -> Taint {
    Taint {
        key: FENCE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Taint::default()
    }
}

/// Right before the rollback Job, as before the host upgrade's: a node uncordoned after the
/// rollback's drain is cordoned (and tainted) again, then drained again; one deleted fails the
/// rollback with no Job created.
#[test]
fn the_rollback_job_waits_for_a_fresh_read_of_a_fenced_node() {
    let to_the_rollback_launch = || {
        let mut m = rollback_drained();
        let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
        assert_eq!(step.intent, Intent::Preflight, "{step:?}");
        m
    };
    let mut m = to_the_rollback_launch();
    let uncordoned = node("v1.37.2", "boot-1", false, &[ours(true)]);
    let step = m.step(Obs::Preflight {
        node: Some(uncordoned),
        pods: Vec::new(),
    });
    let Intent::Patch { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(changes.contains(&NodeChange::Cordon), "{changes:?}");
    let mut m = to_the_rollback_launch();
    let step = m.step(Obs::Preflight {
        node: None,
        pods: Vec::new(),
    });
    let Intent::Done(NodeResult::Failed(f)) = &step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(f.step, UpgradeStep::Rollback);
    assert!(f.message.contains("deleted"), "{}", f.message);
}

/// The rollback's launch write answered with `node`, then the read right before the rollback
/// Job answered with the same node and no Pod on it: the step after (the rollback Job).
fn preflighted(m: &mut NodeMachine, node: Box<Node>) -> upgrade_driver::Step {
    let step = m.step(Obs::Node(node.clone()));
    assert_eq!(step.intent, Intent::Preflight, "{step:?}");
    m.step(Obs::Preflight {
        node: Some(node),
        pods: Vec::new(),
    })
}

/// A machine under the rollback policy whose host upgrade exited 1, the rollback decided,
/// recorded and drained: its launch write is next.
fn rollback_drained() -> NodeMachine {
    let (mut m, _) = launched(&rolling_back());
    let report = nodejob_core::runner::Report {
        uid: "j".into(),
        exit_code: 1,
        log: None,
        resource_version: None,
    };
    m.step(Obs::Host(Ok(report)));
    m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
    m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
    m.step(Obs::Drained(Ok(nodejob_core::drain::Drained::default())));
    m
}

/// `m` started on `node`; a fresh node's Pods read ([`Intent::Vet`]) and found with nothing a
/// drain would refuse, so that the step is the machine's first write or its resume.
fn begin(m: &mut NodeMachine, node: Box<Node>) -> upgrade_driver::Step {
    let step = m.start(node);
    match step.intent {
        Intent::Vet => m.step(upgrade_driver::Observation::Refusals(Vec::new())),
        _ => step,
    }
}
