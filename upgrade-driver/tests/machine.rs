//! Table tests of the per-node machine: `(state, observation) -> intent`, no I/O at all.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::NodeChange;
use nodejob_core::drain::Drained;
use nodejob_core::runner::Report;
use upgrade_driver::records::{
    DONE, FENCE_TAINT, HOST_JOB, HostJob, IN_PROGRESS, InProgress, value,
};
use upgrade_driver::{
    Cause, FailureKind, Intent, Mark, NodeMachine, NodeResult, Observation as Obs, Own, Plan,
    PlanSpec, Step, UpgradeStep,
};

const TARGET: &str = "v1.38.0";
const EPOCH: i32 = 4;

fn plan(health: bool) -> Plan {
    let mut spec = PlanSpec::new(TARGET);
    if health {
        spec.health_check = Some(vec!["/usr/local/bin/stratum".into(), "health".into()]);
    }
    Plan::build(spec).unwrap()
}

/// A node at `version`, boot `boot`, Ready, with `annotations`; rv "10".
fn node(version: &str, boot: &str, cordoned: bool, annotations: &[(&str, String)]) -> Box<Node> {
    Box::new(Node {
        metadata: ObjectMeta {
            name: Some("n1".into()),
            resource_version: Some("10".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
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

fn host_record(uid: &str, exit_code: i32) -> (&'static str, String) {
    let record = HostJob {
        target: TARGET.into(),
        uid: uid.into(),
        exit_code: Some(exit_code),
    };
    (HOST_JOB, value(&record))
}

fn job(uid: &str, condition: Option<&str>) -> Box<Job> {
    Box::new(Job {
        metadata: ObjectMeta {
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: condition.map(|c| JobStatus {
            conditions: Some(vec![JobCondition {
                type_: c.into(),
                status: "True".into(),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        }),
    })
}

fn report(uid: &str, exit_code: i32, log: &str) -> Report {
    Report {
        uid: uid.into(),
        exit_code,
        log: Some(log.into()),
        resource_version: None,
    }
}

fn failed_at(step: Step) -> (UpgradeStep, String, Option<i32>) {
    match step.intent {
        Intent::Done(NodeResult::Failed(f)) => (f.step, f.message, f.exit_code),
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// A machine that marked a fresh node (boot-1) and saw the patch answered.
fn marked(health: bool) -> NodeMachine {
    let mut m = NodeMachine::new(&plan(health), EPOCH);
    begin(&mut m, node("v1.37.2", "boot-1", false, &[]));
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])));
    assert_eq!(step.intent, Intent::FindJob);
    m
}

/// The node at `version` on `boot`, cordoned, as the launch write `launch` (an
/// [`Intent::Guarded`]) leaves it: its annotations set.
fn as_launched(launch: &Step, version: &str, boot: &str) -> Box<Node> {
    let Intent::Guarded { changes, .. } = &launch.intent else {
        panic!("expected the launch write, got {launch:?}")
    };
    let set: Vec<(&str, String)> = (changes.iter())
        .filter_map(|c| match c {
            NodeChange::SetAnnotation { key, value } => Some((key.as_str(), value.clone())),
            _ => None,
        })
        .collect();
    node(version, boot, true, &set)
}

/// The launch write `launch` answered, then the read right before the host Job answered with
/// the node as the write left it and no Pod on it: the step after (the host Job).
fn launch_answered(m: &mut NodeMachine, launch: &Step, version: &str, boot: &str) -> Step {
    let step = m.step(Obs::Node(as_launched(launch, version, boot)));
    assert_eq!(step.intent, Intent::Preflight, "{step:?}");
    assert_eq!(step.marks, vec![Mark::Started(UpgradeStep::Upgrade)]);
    let node = Some(as_launched(launch, version, boot));
    m.step(Obs::Preflight {
        node,
        pods: Vec::new(),
    })
}

/// Drained, `m` launches (our record with the boot read now, under the node's rv), and the
/// launch write is answered: the host Job is next, created at once if the find read its name
/// free (what this returns).
fn launched(m: &mut NodeMachine) -> bool {
    let launch = m.step(Obs::Drained(Ok(Drained::default())));
    assert!(
        matches!(launch.intent, Intent::Guarded { .. }),
        "{launch:?}"
    );
    let step = launch_answered(m, &launch, "v1.37.2", "boot-1");
    match step.intent {
        Intent::Host {
            adopt: None,
            known_free,
        } => known_free,
        other => panic!("expected the host Job, got {other:?}"),
    }
}

/// A machine whose host Job (uid `j`) succeeded, recorded and deleted: awaiting the reboot.
fn rebooting(health: bool) -> NodeMachine {
    let mut m = marked(health);
    m.step(Obs::Job(None));
    launched(&mut m);
    m.step(Obs::Host(Ok(report("j", 0, "upgraded\n"))));
    m.step(Obs::Node(node(
        "v1.37.2",
        "boot-1",
        true,
        &[ours(true), host_record("j", 0)],
    )));
    let step = m.step(Obs::Deleted);
    assert_eq!(
        step.intent,
        Intent::WaitReboot {
            boot_id: "boot-1".into()
        }
    );
    m
}

// --- inspect ------------------------------------------------------------------------------------

#[test]
fn a_node_at_the_target_or_recorded_done_is_skipped_with_no_write() {
    for n in [
        node("v1.38.0", "b", false, &[]),
        node("1.38.0", "b", false, &[]),
        node(
            "v1.37.2",
            "b",
            false,
            &[(DONE, r#"{"version":"v1.38.0","at":"x"}"#.into())],
        ),
    ] {
        let mut m = NodeMachine::new(&plan(false), EPOCH);
        assert!(matches!(
            begin(&mut m, n).intent,
            Intent::Done(NodeResult::Skipped { .. })
        ));
    }
}

#[test]
fn a_schedulable_node_is_marked_ours_and_cordoned_in_one_write() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let step = begin(&mut m, node("v1.37.2", "boot-1", false, &[]));
    // With the version it came from, for a resumed run's report.
    let record = InProgress {
        target: TARGET.into(),
        boot_id: "boot-1".into(),
        host_boot_id: None,
        epoch: EPOCH,
        cordoned: true,
        from: Some("v1.37.2".into()),
        evicted: None,
    };
    assert_eq!(
        step.intent,
        Intent::Patch {
            rv: "10".into(),
            changes: vec![
                NodeChange::set_annotation(IN_PROGRESS, value(&record)),
                NodeChange::Cordon,
                // The fence a person's uncordon cannot open, in the same write.
                NodeChange::TaintNoSchedule {
                    key: FENCE_TAINT.into()
                },
            ],
        }
    );
    assert_eq!(step.marks, vec![Mark::Started(UpgradeStep::Cordon)]);
}

#[test]
fn a_node_someone_else_cordoned_is_marked_not_cordoned_by_us() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let step = begin(&mut m, node("v1.37.2", "boot-1", true, &[]));
    let Intent::Patch { changes, .. } = step.intent else {
        panic!("{step:?}")
    };
    assert!(!changes.contains(&NodeChange::Cordon));
    assert!(
        matches!(&changes[0], NodeChange::SetAnnotation { value, .. } if value.contains("\"cordoned\":false"))
    );
}

#[test]
fn a_node_of_ours_resumes_without_writing_when_still_cordoned() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let step = begin(&mut m, node("v1.37.2", "boot-1", true, &[ours(true)]));
    assert_eq!(step.intent, Intent::FindJob);
    assert!(m.resumed());
}

#[test]
fn a_node_of_ours_uncordoned_meanwhile_is_cordoned_again_and_marked_so() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let step = begin(&mut m, node("v1.37.2", "boot-1", false, &[ours(false)]));
    let Intent::Patch { changes, .. } = step.intent else {
        panic!("{step:?}")
    };
    assert!(changes.contains(&NodeChange::Cordon));
    assert!(
        matches!(&changes[0], NodeChange::SetAnnotation { value, .. } if value.contains("\"cordoned\":true") && value.contains(&format!("\"epoch\":{EPOCH}")))
    );
}

#[test]
fn a_node_of_ours_toward_another_target_starts_again_from_this_boot() {
    let old = InProgress {
        target: "v1.37.9".into(),
        boot_id: "boot-0".into(),
        host_boot_id: None,
        epoch: 1,
        cordoned: true,
        from: None,
        evicted: None,
    };
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let step = begin(
        &mut m,
        node(
            "v1.37.2",
            "boot-1",
            true,
            &[(IN_PROGRESS, value(&old)), host_record("x", 0)],
        ),
    );
    // The earlier run's host Job toward its target first: ended, it is left as it is.
    assert_eq!(
        step.intent,
        Intent::FindPrevious {
            target: "v1.37.9".into()
        }
    );
    let step = m.step(Obs::Job(Some(job("x", Some("Complete")))));
    // Said as a move to another target, not as a plain resume.
    let note = format!(
        "carried on toward {TARGET}: an earlier run (Lease epoch 1) left it in flight toward \
         v1.37.9;"
    );
    assert!(
        (step.marks.iter()).any(|m| matches!(m, Mark::Note(n) if n.starts_with(&note))),
        "{:?}",
        step.marks
    );
    let Intent::Patch { changes, .. } = step.intent else {
        panic!("{step:?}")
    };
    assert!(changes.contains(&NodeChange::remove_annotation(HOST_JOB)));
    assert!(
        matches!(&changes[0], NodeChange::SetAnnotation { value, .. } if value.contains("boot-1") && value.contains(TARGET))
    );
}

#[test]
fn a_recorded_successful_host_step_is_never_run_again() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let step = begin(
        &mut m,
        node(
            "v1.37.2",
            "boot-1",
            true,
            &[ours(true), host_record("j", 0)],
        ),
    );
    assert_eq!(step.intent, Intent::DeleteJob { uid: "j".into() });
}

#[test]
fn an_unparsable_record_fails_the_node_naming_it() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let (step, message, _) = failed_at(begin(
        &mut m,
        node("v1.37.2", "b", true, &[(IN_PROGRESS, "{oops".into())]),
    ));
    assert_eq!(step, UpgradeStep::Cordon);
    assert!(message.contains(IN_PROGRESS), "{message}");
}

// --- the host Job -------------------------------------------------------------------------------

#[test]
fn no_host_job_drains_then_creates_one() {
    let mut m = marked(false);
    assert_eq!(m.step(Obs::Job(None)).intent, Intent::Drain);
    let drained = Drained {
        evicted: vec!["default/web-1".into()],
        ..Drained::default()
    };
    let launch = m.step(Obs::Drained(Ok(drained)));
    // The write right before the host Job keeps what the drain evicted, for a resumed run.
    let Intent::Guarded { changes, .. } = &launch.intent else {
        panic!("{launch:?}")
    };
    let record = changes.iter().find_map(|c| match c {
        NodeChange::SetAnnotation { key, value } if key == IN_PROGRESS => {
            Some(serde_json::from_str::<InProgress>(value).unwrap())
        }
        _ => None,
    });
    assert_eq!(record.and_then(|r| r.evicted), Some(1), "{changes:?}");
    assert!(
        launch
            .marks
            .contains(&Mark::Own(Own::Evicted(vec!["default/web-1".into()])))
    );
    let step = launch_answered(&mut m, &launch, "v1.37.2", "boot-1");
    assert_eq!(
        step.intent,
        Intent::Host {
            adopt: None,
            known_free: true
        }
    );
}

#[test]
fn an_existing_host_job_is_adopted_without_a_drain_whatever_its_state() {
    for existing in [
        job("j", None),
        job("j", Some("Complete")),
        job("j", Some("Failed")),
    ] {
        let mut m = marked(false);
        assert_eq!(
            m.step(Obs::Job(Some(existing))).intent,
            Intent::Host {
                adopt: Some("j".into()),
                known_free: false,
            }
        );
    }
}

#[test]
fn a_failed_host_job_we_recorded_is_replaced_after_a_drain() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let step = begin(
        &mut m,
        node(
            "v1.37.2",
            "boot-1",
            true,
            &[ours(true), host_record("j", 1)],
        ),
    );
    assert_eq!(step.intent, Intent::FindJob);
    assert_eq!(
        m.step(Obs::Job(Some(job("j", Some("Failed"))))).intent,
        Intent::Drain
    );
    // The failed Job is still there: the runner reads it and replaces exactly that one.
    assert!(!launched(&mut m), "a failed host job's name taken as free");
}

/// Our record as Launch wrote it: the host Job was about to start on `host_boot`.
fn launched_record(host_boot: &str) -> (&'static str, String) {
    let record = InProgress {
        target: TARGET.into(),
        boot_id: "boot-1".into(),
        host_boot_id: Some(host_boot.into()),
        epoch: 3,
        cordoned: true,
        from: None,
        evicted: None,
    };
    (IN_PROGRESS, value(&record))
}

#[test]
fn no_host_job_on_a_launched_node_at_the_target_on_another_boot_waits_for_it_instead() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    begin(
        &mut m,
        node("v1.38.0", "boot-3", true, &[launched_record("boot-2")]),
    );
    assert_eq!(
        m.step(Obs::Job(None)).intent,
        Intent::WaitReboot {
            boot_id: "boot-2".into()
        }
    );
}

#[test]
fn a_node_that_rebooted_by_itself_is_no_evidence_the_upgrade_ran() {
    // Rebooted since we started it (boot-1 -> boot-2), no host Job, never launched: a reboot
    // alone says nothing; it is drained and upgraded, and the reboot awaited is boot-2's end.
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    begin(&mut m, node("v1.37.2", "boot-2", true, &[ours(true)]));
    assert_eq!(m.step(Obs::Job(None)).intent, Intent::Drain);
    let launch = m.step(Obs::Drained(Ok(Drained::default())));
    let Intent::Guarded { changes, .. } = &launch.intent else {
        panic!("{launch:?}")
    };
    assert!(
        matches!(&changes[0], NodeChange::SetAnnotation { value, .. } if value.contains(r#""hostBootID":"boot-2""#)),
        "{changes:?}"
    );
    let step = launch_answered(&mut m, &launch, "v1.37.2", "boot-2");
    assert_eq!(
        step.intent,
        Intent::Host {
            adopt: None,
            known_free: true
        }
    );
    m.step(Obs::Host(Ok(report("j", 0, ""))));
    m.step(Obs::Node(node("v1.37.2", "boot-2", true, &[])));
    assert_eq!(
        m.step(Obs::Deleted).intent,
        Intent::WaitReboot {
            boot_id: "boot-2".into()
        }
    );
    // Launched on boot-2 but still at the old version on boot-3: not evidence either.
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    begin(
        &mut m,
        node("v1.37.2", "boot-3", true, &[launched_record("boot-2")]),
    );
    assert_eq!(m.step(Obs::Job(None)).intent, Intent::Drain);
}

#[test]
fn a_node_uncordoned_after_the_drain_is_cordoned_and_drained_again_before_the_host_job() {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    let step = m.step(Obs::Drained(Ok(Drained::default())));
    assert!(matches!(step.intent, Intent::Guarded { .. }));
    // The launch write conflicts: someone uncordoned the node meanwhile.
    let step = m.step(Obs::Changed(node(
        "v1.37.2",
        "boot-1",
        false,
        &[ours(true)],
    )));
    let Intent::Patch { changes, .. } = step.intent else {
        panic!("{step:?}")
    };
    assert!(changes.contains(&NodeChange::Cordon), "{changes:?}");
    assert!(
        step.marks
            .iter()
            .any(|m| matches!(m, Mark::Note(n) if n.contains("uncordoned")))
    );
    assert_eq!(
        m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[ours(true)])))
            .intent,
        Intent::FindJob
    );
    assert_eq!(m.step(Obs::Job(None)).intent, Intent::Drain);
    launched(&mut m);
}

#[test]
fn a_node_changed_after_the_drain_is_drained_again_and_fails_after_the_rounds() {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    m.step(Obs::Drained(Ok(Drained::default())));
    for _ in 0..upgrade_driver::DRAIN_ROUNDS {
        let step = m.step(Obs::Changed(node("v1.37.2", "boot-1", true, &[ours(true)])));
        assert_eq!(step.intent, Intent::Drain, "{step:?}");
        let step = m.step(Obs::Drained(Ok(Drained::default())));
        assert!(matches!(step.intent, Intent::Guarded { .. }), "{step:?}");
    }
    let (step, message, _) = failed_at(m.step(Obs::Changed(node(
        "v1.37.2",
        "boot-1",
        false,
        &[ours(true)],
    ))));
    assert_eq!(step, UpgradeStep::Drain);
    assert!(message.contains("uncordoned"), "{message}");
    assert!(message.contains("not started"), "{message}");
}

#[test]
fn a_host_result_is_recorded_before_its_job_is_deleted() {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    let step = m.step(Obs::Host(Ok(report("j", 0, "ok\n"))));
    assert_eq!(
        step.intent,
        Intent::Patch {
            rv: "10".into(),
            changes: vec![NodeChange::set_annotation(
                HOST_JOB,
                value(&HostJob {
                    target: TARGET.into(),
                    uid: "j".into(),
                    exit_code: Some(0)
                })
            )],
        }
    );
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[])));
    assert_eq!(step.intent, Intent::DeleteJob { uid: "j".into() });
}

#[test]
fn a_failed_host_step_is_recorded_then_fails_the_node_with_its_exit_code_and_log_tail() {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    let log: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    let step = m.step(Obs::Host(Ok(report("j", 3, &log))));
    assert!(matches!(step.intent, Intent::Patch { ref changes, .. } if changes.len() == 1));
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[])));
    let Intent::Done(NodeResult::Failed(f)) = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!((f.step, f.exit_code), (UpgradeStep::Upgrade, Some(3)));
    // The Job by the name `kubectl get job` finds it by, never by its UID.
    let job = plan(false).job_name("n1");
    assert!(
        f.message
            .ends_with(&format!("job {job} is left for inspection")),
        "{}",
        f.message
    );
    assert!(!f.message.contains(" j "), "{}", f.message);
    let tail = f.log_tail.unwrap();
    assert!(
        tail.starts_with("line 11") && tail.ends_with("line 30"),
        "{tail}"
    );
}

#[test]
fn a_drain_or_host_error_fails_the_node_at_that_step() {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    let (step, message, _) = failed_at(m.step(Obs::Drained(Err("drain timed out".into()))));
    assert_eq!(
        (step, message.as_str()),
        (UpgradeStep::Drain, "drain timed out")
    );

    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    assert_eq!(
        m.step(Obs::Host(Err("timed out".into()))).intent,
        Intent::FindJob
    );
    let (step, message, code) = failed_at(m.step(Obs::Job(Some(job("j", None)))));
    assert_eq!((step, code), (UpgradeStep::Upgrade, None));
    assert_eq!(message, "timed out");
}

#[test]
fn a_host_job_failed_without_exit_code_is_recorded_and_retried_by_a_rerun() {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    let step = m.step(Obs::Host(Err(
        "pod deleted before the host operation ended".into(),
    )));
    assert_eq!(step.intent, Intent::FindJob);
    let step = m.step(Obs::Job(Some(job("j", Some("Failed")))));
    let record = HostJob {
        target: TARGET.into(),
        uid: "j".into(),
        exit_code: None,
    };
    assert_eq!(
        step.intent,
        Intent::Patch {
            rv: "10".into(),
            changes: vec![NodeChange::set_annotation(HOST_JOB, value(&record))],
        }
    );
    assert!(value(&record).contains(r#""exitCode":null"#));
    let (step, message, _) = failed_at(m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[]))));
    assert_eq!(step, UpgradeStep::Upgrade);
    assert!(message.contains("a rerun retries it"), "{message}");

    // The rerun replaces exactly that Job, after a drain, instead of adopting its failure.
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let recorded = (HOST_JOB, value(&record));
    assert_eq!(
        begin(
            &mut m,
            node("v1.37.2", "boot-1", true, &[ours(true), recorded])
        )
        .intent,
        Intent::FindJob
    );
    assert_eq!(
        m.step(Obs::Job(Some(job("j", Some("Failed"))))).intent,
        Intent::Drain
    );
}

// --- a host Job lost to a reboot of its node ---------------------------------------------------

const LOST: &str = "pod upgrade-n1-x of per-node upgrade job kube-system/upgrade-n1 on node n1 \
                    was running when its node rebooted";

/// Launched on boot-1, its pod lost to a reboot: recorded as a failure without an exit code,
/// then the wait for the node, back on a boot other than boot-1.
fn lost() -> NodeMachine {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    assert_eq!(m.step(Obs::Lost(LOST.into())).intent, Intent::FindJob);
    let step = m.step(Obs::Job(Some(job("j", Some("Failed")))));
    let record = HostJob {
        target: TARGET.into(),
        uid: "j".into(),
        exit_code: None,
    };
    assert_eq!(
        step.intent,
        Intent::Patch {
            rv: "10".into(),
            changes: vec![NodeChange::set_annotation(HOST_JOB, value(&record))],
        }
    );
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[])));
    assert_eq!(
        step.intent,
        Intent::WaitReboot {
            boot_id: "boot-1".into()
        }
    );
    assert!(
        matches!(&step.marks[0], Mark::Note(n) if n.contains("lost to a reboot")),
        "{step:?}"
    );
    m
}

#[test]
fn a_host_job_lost_to_a_reboot_after_the_upgrade_took_is_an_upgrade_never_run_again() {
    let mut m = lost();
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.38.0", "boot-2", true, &[])),
        met: true,
    });
    assert!(
        matches!(&step.marks[0], Mark::Finished(UpgradeStep::Upgrade, why) if why.contains("the upgrade took")),
        "{step:?}"
    );
    let Intent::Guarded { changes, .. } = step.intent else {
        panic!("{step:?}")
    };
    assert!(changes.contains(&NodeChange::remove_annotation(HOST_JOB)));
    let step = m.step(Obs::Node(node("v1.38.0", "boot-2", false, &[])));
    assert_eq!(step.intent, Intent::Done(NodeResult::Upgraded));
}

#[test]
fn a_host_job_lost_to_a_reboot_that_left_the_old_version_fails_the_upgrade_for_a_rerun() {
    let mut m = lost();
    let (step, message, code) = failed_at(m.step(Obs::Rebooted {
        node: Some(node("v1.37.2", "boot-2", true, &[])),
        met: true,
    }));
    assert_eq!((step, code), (UpgradeStep::Upgrade, None));
    for part in [
        LOST,
        "came back at v1.37.2, not v1.38.0",
        "did not take",
        "a rerun retries it",
        &format!("replacing that failed job {}", plan(false).job_name("n1")),
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }

    let mut m = lost();
    let (step, message, _) = failed_at(m.step(Obs::Rebooted {
        node: Some(node("v1.37.2", "boot-2", false, &[])),
        met: false,
    }));
    assert_eq!(step, UpgradeStep::Upgrade);
    assert!(message.contains("did not come back Ready"), "{message}");
}

/// A run that crashed after recording the lost Job: the rerun finds the node at the target on
/// a boot other than the one it was launched on, and does not run the upgrade again; at the
/// old version it retries it, as a killed one.
#[test]
fn a_rerun_after_a_lost_host_job_runs_it_again_only_if_the_node_did_not_take_it() {
    let record = HostJob {
        target: TARGET.into(),
        uid: "j".into(),
        exit_code: None,
    };
    let recorded = || (HOST_JOB, value(&record));
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let at_target = node(
        "v1.38.0",
        "boot-2",
        true,
        &[launched_record("boot-1"), recorded()],
    );
    assert_eq!(begin(&mut m, at_target).intent, Intent::FindJob);
    let step = m.step(Obs::Job(Some(job("j", Some("Failed")))));
    assert_eq!(
        step.intent,
        Intent::WaitReboot {
            boot_id: "boot-1".into()
        }
    );
    assert!(
        matches!(&step.marks[0], Mark::Note(n) if n.contains("not running it again")),
        "{step:?}"
    );

    let mut m = NodeMachine::new(&plan(false), EPOCH);
    let old = node(
        "v1.37.2",
        "boot-2",
        true,
        &[launched_record("boot-1"), recorded()],
    );
    assert_eq!(begin(&mut m, old).intent, Intent::FindJob);
    assert_eq!(
        m.step(Obs::Job(Some(job("j", Some("Failed"))))).intent,
        Intent::Drain
    );
}

// --- the reboot, the health check, the finish -------------------------------------------------------

#[test]
fn back_at_the_target_finishes_with_uncordon_done_and_our_records_removed_in_one_write() {
    let mut m = rebooting(false);
    m.set_now("2026-01-01T00:05:00Z".into());
    let step = m.step(Obs::Rebooted {
        node: Some(node(
            "v1.38.0",
            "boot-2",
            true,
            &[launched_record("boot-1")],
        )),
        met: true,
    });
    let Intent::Guarded { changes, .. } = step.intent else {
        panic!("{step:?}")
    };
    assert_eq!(
        changes,
        vec![
            NodeChange::Uncordon,
            NodeChange::set_annotation(
                DONE,
                r#"{"version":"v1.38.0","at":"2026-01-01T00:05:00Z"}"#
            ),
            NodeChange::remove_annotation(IN_PROGRESS),
            NodeChange::remove_annotation(HOST_JOB),
            // Our taint leaves with our record.
            NodeChange::Untaint {
                key: FENCE_TAINT.into()
            },
        ]
    );
    let step = m.step(Obs::Node(node("v1.38.0", "boot-2", false, &[])));
    assert_eq!(step.intent, Intent::Done(NodeResult::Upgraded));
}

#[test]
fn a_node_we_did_not_cordon_is_not_uncordoned() {
    let mut m = NodeMachine::new(&plan(false), EPOCH);
    begin(&mut m, node("v1.37.2", "boot-1", true, &[]));
    m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[])));
    m.step(Obs::Job(None));
    launched(&mut m);
    m.step(Obs::Host(Ok(report("j", 0, ""))));
    m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[])));
    m.step(Obs::Deleted);
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.38.0", "boot-2", true, &[])),
        met: true,
    });
    let Intent::Guarded { changes, .. } = step.intent else {
        panic!("{step:?}")
    };
    assert!(!changes.contains(&NodeChange::Uncordon));
}

#[test]
fn back_at_the_old_version_or_not_back_at_all_fails_at_reboot() {
    let mut m = rebooting(false);
    let (step, message, _) = failed_at(m.step(Obs::Rebooted {
        node: Some(node("v1.37.2", "boot-2", true, &[])),
        met: true,
    }));
    assert_eq!(step, UpgradeStep::Reboot);
    assert!(message.contains("came back at v1.37.2"), "{message}");

    let mut m = rebooting(false);
    let (_, message, _) = failed_at(m.step(Obs::Rebooted {
        node: Some(node("v1.37.2", "boot-1", true, &[])),
        met: false,
    }));
    assert!(message.contains("did not reboot"), "{message}");

    let mut m = rebooting(false);
    let (_, message, _) = failed_at(m.step(Obs::Rebooted {
        node: None,
        met: false,
    }));
    assert!(message.contains("deleted from the cluster"), "{message}");

    // Ready on a new boot, but the control plane never lifted its not-ready taint: said so,
    // not "did not come back".
    let mut m = rebooting(false);
    let tainted = tainted_ready(nodejob_core::NOT_READY_TAINT, "NoSchedule");
    let (step, message, _) = failed_at(m.step(Obs::Rebooted {
        node: Some(tainted),
        met: false,
    }));
    assert_eq!(step, UpgradeStep::Reboot);
    assert!(
        message.contains("is Ready, but still carries the node.kubernetes.io/not-ready taint"),
        "{message}"
    );

    // The same for the taint of a node whose kubelet stopped posting through the reboot.
    let mut m = rebooting(false);
    let tainted = tainted_ready(nodejob_core::UNREACHABLE_TAINT, "NoExecute");
    let (_, message, _) = failed_at(m.step(Obs::Rebooted {
        node: Some(tainted),
        met: false,
    }));
    assert!(
        message.contains("is Ready, but still carries the node.kubernetes.io/unreachable taint"),
        "{message}"
    );
}

/// The node at the target on its new boot, Ready, still carrying `key` (`effect`): a taint the
/// node lifecycle controller has not lifted yet.
fn tainted_ready(key: &str, effect: &str) -> Box<Node> {
    let mut tainted = node("v1.38.0", "boot-2", true, &[]);
    (tainted
        .spec
        .get_or_insert_default()
        .taints
        .get_or_insert_default())
    .push(Taint {
        key: key.into(),
        effect: effect.into(),
        ..Taint::default()
    });
    tainted
}

#[test]
fn the_health_check_gates_the_finish() {
    let mut m = rebooting(true);
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.38.0", "boot-2", true, &[])),
        met: true,
    });
    assert_eq!(step.intent, Intent::Health);
    let (step, _, code) = failed_at(m.clone().step(Obs::Health(Ok(1), None)));
    assert_eq!((step, code), (UpgradeStep::Health, Some(1)));
    // A failed check keeps its log's tail, as a failed host upgrade does.
    let log: String = (1..=30).map(|i| format!("check line {i}\n")).collect();
    let failed = m.clone().step(Obs::Health(Ok(1), Some(log)));
    let Intent::Done(NodeResult::Failed(f)) = failed.intent else {
        panic!("{failed:?}")
    };
    let tail = f.log_tail.expect("the log's tail");
    assert!(
        tail.contains("check line 30") && !tail.contains("check line 1\n"),
        "{tail}"
    );
    assert!(matches!(
        m.step(Obs::Health(Ok(0), None)).intent,
        Intent::Guarded { .. }
    ));
}

#[test]
fn an_api_failure_fails_the_node_at_the_step_it_was_in() {
    let mut m = rebooting(false);
    let (step, message, _) = failed_at(m.step(Obs::Failed(Cause::api("watch refused"))));
    assert_eq!(
        (step, message.as_str()),
        (UpgradeStep::Reboot, "watch refused")
    );
}

#[test]
fn job_names_are_pinned_per_node_and_target() {
    let plan = plan(false);
    // Golden: these names reach clusters, and a resumed run finds its Job by them.
    assert_eq!(plan.job_name("node-a"), "upgrade-node-a-v1-38-0-bc1a8f4a3a");
    assert_eq!(
        plan.health_job_name("node-a"),
        "health-node-a-v1-38-0-421260e401"
    );
    let long = "a".repeat(60);
    let name = plan.job_name(&long);
    assert_eq!(name.len(), 63, "{name}");
    assert_eq!(
        name,
        "upgrade-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-6a7f901c36"
    );
    // Targets that differ only in punctuation get different names.
    let a = Plan::build(PlanSpec::new("v1.38.0-k3s1")).unwrap();
    let b = Plan::build(PlanSpec::new("v1.38.0+k3s1")).unwrap();
    assert_ne!(a.job_name("n"), b.job_name("n"));
}

#[test]
fn a_node_that_changed_version_before_the_done_record_is_not_recorded_done() {
    let mut m = rebooting(false);
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.38.0", "boot-2", true, &[])),
        met: true,
    });
    assert!(matches!(step.intent, Intent::Guarded { .. }), "{step:?}");
    assert!(step.marks.contains(&Mark::Started(UpgradeStep::Uncordon)));
    // Still at the target, rebooted and Ready: decided again on the new version, the same
    // Uncordon written again, not started (and told) a second time.
    let step = m
        .clone()
        .step(Obs::Changed(node("v1.38.0", "boot-2", true, &[])));
    assert!(matches!(step.intent, Intent::Guarded { .. }), "{step:?}");
    assert!(step.marks.is_empty(), "{step:?}");
    // Reporting another version now: not recorded done.
    let (step, message, _) = failed_at(m.step(Obs::Changed(node("v1.37.2", "boot-2", true, &[]))));
    assert_eq!(step, UpgradeStep::Uncordon);
    assert!(message.contains("no longer shows"), "{message}");
}

#[test]
fn a_host_job_toward_another_target_still_running_fails_the_node_without_a_second() {
    let old = InProgress {
        target: "v1.37.9".into(),
        boot_id: "boot-0".into(),
        host_boot_id: Some("boot-0".into()),
        epoch: 1,
        cordoned: true,
        from: None,
        evicted: None,
    };
    for running in [job("x", None), {
        let mut j = job("x", Some("Complete"));
        j.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        j
    }] {
        let mut m = NodeMachine::new(&plan(false), EPOCH);
        begin(
            &mut m,
            node("v1.37.2", "boot-0", true, &[(IN_PROGRESS, value(&old))]),
        );
        let (step, message, _) = failed_at(m.step(Obs::Job(Some(running))));
        assert_eq!(step, UpgradeStep::Cordon);
        assert!(message.contains("still running"), "{message}");
    }
}

#[test]
fn a_failed_host_step_whose_record_cannot_be_written_names_the_host_failure() {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    m.step(Obs::Host(Err(
        "pod deleted before the host operation ended".into(),
    )));
    m.step(Obs::Job(Some(job("j", Some("Failed")))));
    let (step, message, _) =
        failed_at(m.step(Obs::Failed(Cause::api("patching node n1: not found (404)"))));
    assert_eq!(step, UpgradeStep::Upgrade);
    assert!(message.starts_with("pod deleted before"), "{message}");
    assert!(message.contains("could not be recorded"), "{message}");
}

#[test]
fn a_host_job_that_succeeded_without_a_readable_exit_is_taken_as_exit_0() {
    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    m.step(Obs::Host(Err(
        "exited with code 0 but its log could not be read".into(),
    )));
    let step = m.step(Obs::Job(Some(job("j", Some("Complete")))));
    let Intent::Patch { changes, .. } = step.intent else {
        panic!("{step:?}")
    };
    assert!(
        matches!(&changes[0], NodeChange::SetAnnotation { value, .. } if value.contains(r#""exitCode":0"#)),
        "{changes:?}"
    );
    let step = m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[])));
    assert_eq!(step.intent, Intent::DeleteJob { uid: "j".into() });
}

/// Our `NoSchedule` taint, as our first write puts it on a node.
fn our_taint() -> Taint {
    Taint {
        key: FENCE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Taint::default()
    }
}

/// The read right before the host Job, table by table: what the node is then decides whether
/// the host Job is created, or the node drained again, skipped or failed without it.
#[test]
fn the_host_job_is_created_only_on_the_node_as_drained_read_right_before_it() {
    /// A machine at the read right before its host Job, and the node as launched.
    fn at_preflight() -> (NodeMachine, Box<Node>) {
        let mut m = marked(false);
        m.step(Obs::Job(None));
        let launch = m.step(Obs::Drained(Ok(Drained::default())));
        let step = m.step(Obs::Node(as_launched(&launch, "v1.37.2", "boot-1")));
        assert_eq!(step.intent, Intent::Preflight, "{step:?}");
        (m, as_launched(&launch, "v1.37.2", "boot-1"))
    }
    let host = Intent::Host {
        adopt: None,
        known_free: true,
    };
    let (mut m, node) = at_preflight();
    let step = m.step(Obs::Preflight {
        node: Some(node),
        pods: Vec::new(),
    });
    assert_eq!(step.intent, host);
    type Change = fn(&mut Node, &mut Vec<String>);
    let cases: [(&str, Change, &str); 5] = [
        (
            "uncordoned",
            |n, _| n.spec.as_mut().unwrap().unschedulable = None,
            "cordon again",
        ),
        (
            "untainted",
            |n, _| n.spec.as_mut().unwrap().taints = None,
            "drain again",
        ),
        (
            "a pod landed",
            |_, pods| pods.push("default/web-9".into()),
            "drain again",
        ),
        (
            "rebooted",
            |n, _| {
                n.status
                    .as_mut()
                    .unwrap()
                    .node_info
                    .as_mut()
                    .unwrap()
                    .boot_id = "boot-9".into()
            },
            "drain again",
        ),
        (
            "our record removed",
            |n, _| n.metadata.annotations = None,
            "drain again",
        ),
    ];
    for (what, change, then) in cases {
        let (mut m, mut node) = at_preflight();
        let mut pods = Vec::new();
        change(&mut node, &mut pods);
        let step = m.step(Obs::Preflight {
            node: Some(node),
            pods,
        });
        match then {
            "cordon again" => {
                let Intent::Patch { changes, .. } = &step.intent else {
                    panic!("{what}: {step:?}")
                };
                assert!(changes.contains(&NodeChange::Cordon), "{what}: {changes:?}");
            }
            _ => assert_eq!(step.intent, Intent::Drain, "{what}: {step:?}"),
        }
    }
    // Gone, or another node of the name: skipped, no host Job.
    let (mut m, mut node) = at_preflight();
    node.metadata.uid = Some("another".into());
    for node in [None, Some(node)] {
        let (mut m2, _) = at_preflight();
        let step = m2.step(Obs::Preflight {
            node,
            pods: Vec::new(),
        });
        assert!(
            matches!(step.intent, Intent::Done(NodeResult::Skipped { .. })),
            "{step:?}"
        );
    }
    // Newer than the target, a downgrade not allowed: failed at Upgrade, not started.
    let newer = launched_at("v1.39.0");
    let (step, message, _) = failed_at(m.step(Obs::Preflight {
        node: Some(newer),
        pods: Vec::new(),
    }));
    assert_eq!(step, UpgradeStep::Upgrade);
    assert!(message.contains("newer than v1.38.0"), "{message}");
}

/// The node as a fresh machine's launch leaves it (boot-1), reporting `version` now.
fn launched_at(version: &str) -> Box<Node> {
    let record = InProgress {
        target: TARGET.into(),
        boot_id: "boot-1".into(),
        host_boot_id: Some("boot-1".into()),
        epoch: EPOCH,
        cordoned: true,
        from: None,
        evicted: None,
    };
    node(version, "boot-1", true, &[(IN_PROGRESS, value(&record))])
}

#[test]
fn each_failure_carries_its_kind_from_the_observation_to_the_result() {
    let kind = |step: Step| match step.intent {
        Intent::Done(NodeResult::Failed(f)) => f.kind,
        other => panic!("expected a failure, got {other:?}"),
    };
    // The host program exited non-zero: recorded, then the failure.
    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    m.step(Obs::Host(Ok(report("j", 3, "boom"))));
    let host = kind(m.step(Obs::Node(node("v1.37.2", "boot-1", true, &[]))));
    // The drain did not empty the node.
    let mut m = marked(false);
    m.step(Obs::Job(None));
    let drain = kind(m.step(Obs::Drained(Err("drain timed out".into()))));
    // The host Job gave no exit code, and failed.
    let mut m = marked(false);
    m.step(Obs::Job(None));
    launched(&mut m);
    m.step(Obs::Host(Err("timed out".into())));
    let job = kind(m.step(Obs::Job(Some(job("j", None)))));
    let rebooted =
        |node: Option<Box<Node>>, met| kind(rebooting(false).step(Obs::Rebooted { node, met }));
    let table = [
        ("the host upgrade exited 3", host, FailureKind::Host),
        ("the drain failed", drain, FailureKind::Drain),
        (
            "the host job failed without an exit code",
            job,
            FailureKind::Job,
        ),
        (
            "back at the old version",
            rebooted(Some(node("v1.37.2", "boot-2", true, &[])), true),
            FailureKind::Node,
        ),
        (
            "not back on a new boot within the reboot timeout",
            rebooted(Some(node("v1.37.2", "boot-1", true, &[])), false),
            FailureKind::TimedOut,
        ),
        (
            "deleted while it rebooted",
            rebooted(None, false),
            FailureKind::Node,
        ),
        (
            "the health check exited 1",
            kind(health_checking().step(Obs::Health(Ok(1), None))),
            FailureKind::Host,
        ),
        (
            "an API call failed",
            kind(rebooting(false).step(Obs::Failed(Cause::api("watch refused")))),
            FailureKind::Api,
        ),
        (
            "the host job was lost",
            kind(rebooting(false).step(Obs::Failed(Cause::new(FailureKind::Job, "lost")))),
            FailureKind::Job,
        ),
    ];
    for (what, got, want) in table {
        assert_eq!(got, want, "{what}");
    }
}

/// A machine back on its new boot at the target, its health check asked.
fn health_checking() -> NodeMachine {
    let mut m = rebooting(true);
    let step = m.step(Obs::Rebooted {
        node: Some(node("v1.38.0", "boot-2", true, &[])),
        met: true,
    });
    assert_eq!(step.intent, Intent::Health);
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
