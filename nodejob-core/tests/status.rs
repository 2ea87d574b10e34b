//! `finished`, `succeeded`, `failed`, `condition`, `ready`, `job_node`, `unready_taint`: tables
//! over Job and Node states as the Job controller, the kubelet and the node lifecycle controller
//! write them.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use nodejob_core::{
    JobConditionType, NODE_ANNOTATION, NOT_READY_TAINT, UNREACHABLE_TAINT, condition, failed,
    finished, job_node, ready, succeeded, unready_taint,
};

/// A Job state: conditions as `(type, status)`, then the pod counters (`None` is unset).
#[derive(Clone, Copy, Default)]
struct State {
    conditions: &'static [(&'static str, &'static str)],
    active: Option<i32>,
    terminating: Option<i32>,
    ready: Option<i32>,
    succeeded: Option<i32>,
    failed: Option<i32>,
    deleting: bool,
}

impl State {
    fn job(self) -> Job {
        let conditions = self
            .conditions
            .iter()
            .map(|(type_, status)| JobCondition {
                type_: type_.to_string(),
                status: status.to_string(),
                ..JobCondition::default()
            })
            .collect();
        Job {
            metadata: ObjectMeta {
                name: Some("upgrade-worker-1".into()),
                deletion_timestamp: self.deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(JobStatus {
                conditions: Some(conditions),
                active: self.active,
                terminating: self.terminating,
                ready: self.ready,
                succeeded: self.succeeded,
                failed: self.failed,
                ..JobStatus::default()
            }),
        }
    }
}

const T: &str = "True";
const F: &str = "False";

/// What each state must read as: (case, state, finished, succeeded, failed).
fn table() -> Vec<(&'static str, State, bool, bool, bool)> {
    let s = State::default();
    vec![
        ("new job, no status counters", s, false, false, false),
        (
            "pod running",
            State {
                active: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "pod running and ready",
            State {
                active: Some(1),
                ready: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        // Terminal conditions.
        (
            "Complete",
            State {
                conditions: &[("Complete", T)],
                ..s
            },
            true,
            true,
            false,
        ),
        (
            "Complete with counters",
            State {
                conditions: &[("SuccessCriteriaMet", T), ("Complete", T)],
                succeeded: Some(1),
                ..s
            },
            true,
            true,
            false,
        ),
        (
            "Failed",
            State {
                conditions: &[("Failed", T)],
                ..s
            },
            true,
            false,
            true,
        ),
        (
            "Failed by deadline while the pod still terminates",
            State {
                conditions: &[("Failed", T)],
                terminating: Some(1),
                ..s
            },
            true,
            false,
            true,
        ),
        (
            "Failed wins over a succeeded counter",
            State {
                conditions: &[("Failed", T)],
                succeeded: Some(1),
                ..s
            },
            true,
            false,
            true,
        ),
        (
            "Complete False",
            State {
                conditions: &[("Complete", F)],
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "Failed False",
            State {
                conditions: &[("Failed", F)],
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "Failed Unknown",
            State {
                conditions: &[("Failed", "Unknown")],
                ..s
            },
            false,
            false,
            false,
        ),
        // Interim conditions (Kubernetes 1.31+): not an end while pods terminate.
        (
            "FailureTarget alone",
            State {
                conditions: &[("FailureTarget", T)],
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "FailureTarget with the pod terminating",
            State {
                conditions: &[("FailureTarget", T)],
                terminating: Some(1),
                failed: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "FailureTarget with the pod still active",
            State {
                conditions: &[("FailureTarget", T)],
                active: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "SuccessCriteriaMet alone",
            State {
                conditions: &[("SuccessCriteriaMet", T)],
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "SuccessCriteriaMet with the pod terminating",
            State {
                conditions: &[("SuccessCriteriaMet", T)],
                succeeded: Some(1),
                terminating: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        // Counters alone.
        (
            "succeeded, nothing running",
            State {
                succeeded: Some(1),
                ..s
            },
            true,
            true,
            false,
        ),
        (
            "succeeded, explicit zeros",
            State {
                succeeded: Some(1),
                active: Some(0),
                terminating: Some(0),
                ready: Some(0),
                ..s
            },
            true,
            true,
            false,
        ),
        (
            "failed, nothing running",
            State {
                failed: Some(1),
                ..s
            },
            true,
            false,
            true,
        ),
        (
            "failed twice",
            State {
                failed: Some(2),
                ..s
            },
            true,
            false,
            true,
        ),
        (
            "failed, pod terminating",
            State {
                failed: Some(1),
                terminating: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "succeeded, another pod active",
            State {
                succeeded: Some(1),
                active: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "failed, a pod ready",
            State {
                failed: Some(1),
                ready: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "succeeded zero",
            State {
                succeeded: Some(0),
                failed: Some(0),
                ..s
            },
            false,
            false,
            false,
        ),
        // A deletion timestamp changes nothing.
        (
            "deleting, pod active",
            State {
                deleting: true,
                active: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "deleting, pod terminating",
            State {
                deleting: true,
                terminating: Some(1),
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "deleting, nothing at all",
            State {
                deleting: true,
                ..s
            },
            false,
            false,
            false,
        ),
        (
            "deleting after success",
            State {
                deleting: true,
                conditions: &[("Complete", T)],
                succeeded: Some(1),
                ..s
            },
            true,
            true,
            false,
        ),
    ]
}

#[test]
fn finished_succeeded_failed() {
    for (case, state, want_finished, want_succeeded, want_failed) in table() {
        let job = state.job();
        assert_eq!(finished(&job), want_finished, "finished: {case}");
        assert_eq!(succeeded(&job), want_succeeded, "succeeded: {case}");
        assert_eq!(failed(&job), want_failed, "failed: {case}");
    }
}

#[test]
fn succeeded_and_failed_partition_finished() {
    for (case, state, ..) in table() {
        let job = state.job();
        assert_eq!(finished(&job), succeeded(&job) ^ failed(&job), "{case}");
    }
}

#[test]
fn a_job_without_status_is_not_finished() {
    let job = Job::default();
    assert!(!finished(&job) && !succeeded(&job) && !failed(&job));
    assert!(condition(&job, JobConditionType::Complete).is_none());
}

#[test]
fn condition_returns_only_true_conditions() {
    let job = State {
        conditions: &[("Complete", F), ("Failed", T)],
        ..State::default()
    }
    .job();
    assert!(condition(&job, JobConditionType::Complete).is_none());
    assert!(condition(&job, JobConditionType::Suspended).is_none());
    let failed =
        condition(&job, JobConditionType::Failed).map(|c| (c.type_.as_str(), c.status.as_str()));
    assert_eq!(failed, Some(("Failed", "True")));
}

fn node(conditions: &[(&str, &str)]) -> Node {
    Node {
        status: Some(NodeStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(type_, status)| NodeCondition {
                        type_: type_.to_string(),
                        status: status.to_string(),
                        ..NodeCondition::default()
                    })
                    .collect(),
            ),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

#[test]
fn ready_reads_the_ready_condition() {
    let cases: &[(&str, Node, bool)] = &[
        ("Ready True", node(&[("Ready", T)]), true),
        (
            "Ready among others",
            node(&[("MemoryPressure", F), ("Ready", T)]),
            true,
        ),
        ("Ready False", node(&[("Ready", F)]), false),
        ("Ready Unknown", node(&[("Ready", "Unknown")]), false),
        (
            "only other conditions True",
            node(&[("DiskPressure", T), ("PIDPressure", T)]),
            false,
        ),
        ("no conditions", node(&[]), false),
        ("no status", Node::default(), false),
    ];
    for (case, n, want) in cases {
        assert_eq!(ready(n), *want, "{case}");
    }
}

const LABEL_KEY: &str = "stratum.ciq.com/upgrade";

fn labelled(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Job {
    let map = |pairs: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
    };
    Job {
        metadata: ObjectMeta {
            labels: map(labels),
            annotations: map(annotations),
            ..ObjectMeta::default()
        },
        ..Job::default()
    }
}

#[test]
fn job_node_prefers_the_annotation_then_the_legacy_label() {
    let long = format!("{}.example.com", "n".repeat(100));
    let cases: &[(&str, Job, Option<&str>)] = &[
        (
            "annotation and hashed label",
            labelled(
                &[(LABEL_KEY, "nnnn-0123456789")],
                &[(NODE_ANNOTATION, &long)],
            ),
            Some(&long),
        ),
        (
            "annotation only",
            labelled(&[], &[(NODE_ANNOTATION, "worker-1")]),
            Some("worker-1"),
        ),
        (
            "legacy label-only job",
            labelled(&[(LABEL_KEY, "worker-2")], &[]),
            Some("worker-2"),
        ),
        (
            "legacy label among other labels",
            labelled(&[("app", "x"), (LABEL_KEY, "worker-3")], &[("other", "y")]),
            Some("worker-3"),
        ),
        (
            "another label key",
            labelled(&[("stratum.ciq.com/carotate", "worker-4")], &[]),
            None,
        ),
        (
            "empty annotation falls back",
            labelled(&[(LABEL_KEY, "worker-5")], &[(NODE_ANNOTATION, "")]),
            Some("worker-5"),
        ),
        ("empty label", labelled(&[(LABEL_KEY, "")], &[]), None),
        ("neither", labelled(&[], &[]), None),
    ];
    for (case, job, want) in cases {
        assert_eq!(job_node(job, LABEL_KEY), *want, "{case}");
    }
}

/// The node lifecycle controller's taints of a node not Ready, the first it still carries:
/// `not-ready` before `unreachable`; any other taint is not one of them.
#[test]
fn unready_taint_names_the_lifecycle_controllers_taint_a_node_carries() {
    let tainted = |keys: &[&str]| {
        let mut n = node(&[("Ready", "True")]);
        n.spec = Some(NodeSpec {
            taints: Some(
                (keys.iter())
                    .map(|k| Taint {
                        key: k.to_string(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    })
                    .collect(),
            ),
            ..NodeSpec::default()
        });
        n
    };
    // (taints, the one named)
    let table: [(&[&str], Option<&str>); 5] = [
        (&[], None),
        (&["example.com/dedicated"], None),
        (&[NOT_READY_TAINT], Some(NOT_READY_TAINT)),
        (&[UNREACHABLE_TAINT], Some(UNREACHABLE_TAINT)),
        (
            &["example.com/dedicated", UNREACHABLE_TAINT, NOT_READY_TAINT],
            Some(NOT_READY_TAINT),
        ),
    ];
    for (keys, want) in table {
        assert_eq!(unready_taint(&tainted(keys)), want, "{keys:?}");
    }
    assert_eq!(unready_taint(&node(&[("Ready", "True")])), None, "no spec");
}
