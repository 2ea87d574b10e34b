//! Fixtures for the runner's tests: a spec, and Jobs/Pods in the states the machine reads.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Event, Node, NodeCondition,
    NodeStatus, ObjectReference, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use nodejob_core::{CONTROLLER_UID_LABEL, Spec, build};

pub fn spec() -> Spec {
    Spec {
        namespace: "kube-system".into(),
        name: "upgrade-node-a".into(),
        node: "node-a".into(),
        label_key: "stratum.ciq.com/upgrade".into(),
        container: "upgrade".into(),
        argv: vec![
            "nsenter".into(),
            "-t".into(),
            "1".into(),
            "--".into(),
            "stratum".into(),
        ],
        active_deadline: Duration::from_secs(600),
        poll_attempts: 12,
        kind: "per-node upgrade".into(),
        critical: false,
        image: None,
        output: Some(std::sync::Arc::new(|_: &nodejob_core::Note| {})),
    }
}

/// The Job `build(spec)` would create, as the apiserver returns it: with a UID and an RV.
pub fn job(uid: &str, rv: u32) -> Box<Job> {
    let mut job = build(&spec());
    job.metadata.uid = Some(uid.into());
    job.metadata.resource_version = Some(rv.to_string());
    Box::new(job)
}

pub fn with_status(mut job: Box<Job>, status: JobStatus) -> Box<Job> {
    job.status = Some(status);
    job
}

pub fn cond(type_: &str, reason: &str, message: &str) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        ..Default::default()
    }
}

pub fn running(uid: &str, rv: u32) -> Box<Job> {
    with_status(
        job(uid, rv),
        JobStatus {
            active: Some(1),
            ready: Some(1),
            ..Default::default()
        },
    )
}

pub fn complete(uid: &str, rv: u32) -> Box<Job> {
    with_status(
        job(uid, rv),
        JobStatus {
            succeeded: Some(1),
            conditions: Some(vec![
                cond("SuccessCriteriaMet", "CompletionsReached", ""),
                cond("Complete", "CompletionsReached", ""),
            ]),
            ..Default::default()
        },
    )
}

pub fn failed(uid: &str, rv: u32) -> Box<Job> {
    let msg = "Job has reached the specified backoff limit";
    with_status(
        job(uid, rv),
        JobStatus {
            failed: Some(1),
            conditions: Some(vec![
                cond("FailureTarget", "BackoffLimitExceeded", msg),
                cond("Failed", "BackoffLimitExceeded", msg),
            ]),
            ..Default::default()
        },
    )
}

pub fn deadline_exceeded(uid: &str, rv: u32) -> Box<Job> {
    let msg = "Job was active longer than specified deadline";
    with_status(
        job(uid, rv),
        JobStatus {
            failed: Some(1),
            conditions: Some(vec![cond("Failed", "DeadlineExceeded", msg)]),
            ..Default::default()
        },
    )
}

pub fn deleting(job: Box<Job>) -> Box<Job> {
    let mut job = job;
    job.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    job.metadata.finalizers = Some(vec!["foregroundDeletion".into()]);
    job
}

/// A Pod of the Job `uid` whose container `container` terminated with `exit`.
pub fn pod(name: &str, uid: &str, container: &str, exit: Option<i32>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("kube-system".into()),
            labels: Some(BTreeMap::from([(
                CONTROLLER_UID_LABEL.to_string(),
                uid.to_string(),
            )])),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name: "upgrade-node-a".into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        status: Some(PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: container.into(),
                state: exit.map(|code| ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: code,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn event(uid: &str, reason: &str, message: &str) -> Event {
    Event {
        involved_object: ObjectReference {
            uid: Some(uid.into()),
            kind: Some("Job".into()),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        ..Default::default()
    }
}

/// Ours, still running, whose Pod is no longer ready (what the node lifecycle controller does to
/// the Pods of a node gone NotReady).
pub fn unready(uid: &str, rv: u32) -> Box<Job> {
    with_status(
        job(uid, rv),
        JobStatus {
            active: Some(1),
            ready: Some(0),
            ..Default::default()
        },
    )
}

/// `pod`, deleted by someone: a deletion timestamp.
pub fn deleted(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    pod.metadata.deletion_grace_period_seconds = Some(30);
    pod
}

/// `pod`, disrupted: a `DisruptionTarget` condition `"True"` with `reason`, no deletion.
pub fn disrupted(mut pod: Pod, reason: &str, message: &str) -> Pod {
    let status = pod.status.get_or_insert_default();
    status.phase = Some("Failed".into());
    status
        .conditions
        .get_or_insert_default()
        .push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            ..Default::default()
        });
    pod
}

/// The node `node-a`, its `Ready` condition `"True"`, or `"Unknown"` as when its kubelet stopped
/// posting status.
pub fn node(ready: bool) -> Node {
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status")
    } else {
        (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    };
    Node {
        metadata: ObjectMeta {
            name: Some("node-a".into()),
            resource_version: Some("70".into()),
            ..Default::default()
        },
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: status.into(),
                reason: Some(reason.into()),
                message: Some(message.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}
