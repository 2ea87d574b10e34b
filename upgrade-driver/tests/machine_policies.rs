//! Table tests of the per-node machine under the plan's long-roll policies (`on_undrainable`,
//! `soak`, `on_failure`): `(state, observation) -> intent`, no I/O at all.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::NodeChange;
use upgrade_driver::records::{
    BLOCKED, Blocked, IN_PROGRESS, InProgress, QUARANTINED, QUARANTINED_VALUE, value,
};
use upgrade_driver::{
    DrainFailed, HeldBy, Intent, Mark, NodeMachine, NodeResult, Observation as Obs, Plan, PlanSpec,
    Undrainable, UpgradeStep,
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
    };
    (IN_PROGRESS, value(&record))
}

/// A machine under `plan` that marked a fresh node (`cordoned`: whether someone else had
/// cordoned it first), found no host Job, and is draining it.
fn draining(plan: &Plan, cordoned_by_someone: bool) -> NodeMachine {
    let mut m = NodeMachine::new(plan, EPOCH);
    m.start(node("v1.37.2", "boot-1", cordoned_by_someone, &[]));
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
            .contains(&Mark::Evicted(vec!["default/web-1".into()]))
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
    let step = m.step(Obs::Failed("node n1 not found".into()));
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
        let step = m.start(node_with(
            "v1.37.2",
            "boot-1",
            true,
            &[(BLOCKED, value(&record))],
            &[(QUARANTINED, QUARANTINED_VALUE)],
        ));
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
    let step = m.start(node(
        "v1.37.2",
        "boot-1",
        true,
        &[(BLOCKED, value(&record))],
    ));
    let Intent::Patch { changes, .. } = &step.intent else {
        panic!("{step:?}")
    };
    assert!(!changes.contains(&NodeChange::Cordon), "cordoned already");
    assert!(
        matches!(&changes[0], NodeChange::SetAnnotation { value, .. } if value.contains("\"cordoned\":true")),
        "{changes:?}"
    );
}
