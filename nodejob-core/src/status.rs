//! Reading state: what a Job, its Pod and a Node say, as the runner reads them.
//!
//! - the vocabulary, as enums: [`JobConditionType`], [`JobConditionReason`], [`PodPhase`],
//!   [`PodConditionType`], [`NodeConditionType`], [`ConditionStatus`], each with `as_str` and
//!   `parse`;
//! - Jobs: [`condition`], [`failure_condition`], [`finished`], [`succeeded`], [`failed`],
//!   [`job_node`];
//! - Pods: [`is_pod_of_job`] (the one rule for "the Pod of this Job"), [`pod_phase`],
//!   [`pod_condition`], [`container_exit_code`], [`lost_in_reboot`], [`disruption`];
//! - Nodes: [`ready`].
//!
//! A Job has run to an end when the host operation has: its Pod is no longer running. Since
//! Kubernetes 1.31 the Job controller sets `FailureTarget` or `SuccessCriteriaMet` first and the
//! terminal `Failed` or `Complete` only once every Pod has terminated, so those interim
//! conditions alone never count; nor does a deletion timestamp.

use std::fmt;
use std::str::FromStr;

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::{CONTROLLER_UID_LABEL, NODE_ANNOTATION};

/// A value the API wrote that a [`JobConditionType`] (or another enum of this module) does not
/// know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}")]
pub struct UnknownValue {
    /// What was parsed, e.g. `job condition type`.
    pub what: &'static str,
    /// The value, verbatim.
    pub value: String,
}

/// Declares a string-valued API enum with `ALL`, `as_str`, `parse`, `Display` and `FromStr`.
macro_rules! api_enum {
    (
        $(#[$meta:meta])*
        $name:ident ($what:literal) {
            $($(#[$vmeta:meta])* $variant:ident => $s:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The value as the API writes it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $s,)*
                }
            }

            /// The value the API wrote; `None` for one this crate does not know.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($s => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;

            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                Self::parse(s).ok_or_else(|| UnknownValue {
                    what: $what,
                    value: s.to_string(),
                })
            }
        }
    };
}

api_enum! {
    /// The `type` of a Job condition (`batch/v1` `JobConditionType`).
    JobConditionType ("job condition type") {
        /// The Job completed: terminal.
        Complete => "Complete",
        /// The Job failed: terminal.
        Failed => "Failed",
        /// The Job will fail once its Pods have terminated (Kubernetes 1.31+): interim.
        FailureTarget => "FailureTarget",
        /// The Job will complete once its Pods have terminated (Kubernetes 1.31+): interim.
        SuccessCriteriaMet => "SuccessCriteriaMet",
        /// The Job is suspended.
        Suspended => "Suspended",
    }
}

api_enum! {
    /// The `reason` of a Job's `Failed`, `FailureTarget`, `Complete` or `SuccessCriteriaMet`
    /// condition, as the Job controller writes it.
    JobConditionReason ("job condition reason") {
        /// More Pods failed than `backoffLimit` allows (0 for nodejob's Jobs: its one Pod
        /// failed, whatever ended it).
        BackoffLimitExceeded => "BackoffLimitExceeded",
        /// `activeDeadlineSeconds` passed: the Job controller deleted the Pods still running.
        DeadlineExceeded => "DeadlineExceeded",
        /// A rule of `podFailurePolicy` failed the Job.
        PodFailurePolicy => "PodFailurePolicy",
        /// More indexes failed than `maxFailedIndexes` allows (indexed Jobs).
        MaxFailedIndexesExceeded => "MaxFailedIndexesExceeded",
        /// Some indexes failed (indexed Jobs with `backoffLimitPerIndex`).
        FailedIndexes => "FailedIndexes",
        /// `completions` Pods succeeded.
        CompletionsReached => "CompletionsReached",
        /// The Job's `successPolicy` was met.
        SuccessPolicy => "SuccessPolicy",
    }
}

api_enum! {
    /// A Pod's `status.phase`.
    PodPhase ("pod phase") {
        /// Accepted, not every container started.
        Pending => "Pending",
        /// Bound to a node, a container is running (or starting, or restarting).
        Running => "Running",
        /// Every container ended with exit 0.
        Succeeded => "Succeeded",
        /// Every container ended, at least one not with exit 0 (or was killed).
        Failed => "Failed",
        /// The Pod's state could not be obtained.
        Unknown => "Unknown",
    }
}

api_enum! {
    /// The `type` of a Pod condition.
    PodConditionType ("pod condition type") {
        /// Scheduled to a node.
        PodScheduled => "PodScheduled",
        /// The sandbox is ready and the containers may start.
        PodReadyToStartContainers => "PodReadyToStartContainers",
        /// Every init container succeeded.
        Initialized => "Initialized",
        /// Every container is ready.
        ContainersReady => "ContainersReady",
        /// The Pod is ready.
        Ready => "Ready",
        /// The Pod is about to be terminated by a disruption: eviction, preemption, deletion by
        /// the taint manager or the pod garbage collector, or termination by the kubelet.
        DisruptionTarget => "DisruptionTarget",
    }
}

api_enum! {
    /// The `type` of a Node condition.
    NodeConditionType ("node condition type") {
        /// The kubelet is healthy and ready to run Pods.
        Ready => "Ready",
        /// The node is short of memory.
        MemoryPressure => "MemoryPressure",
        /// The node is short of disk.
        DiskPressure => "DiskPressure",
        /// The node is short of process IDs.
        PIDPressure => "PIDPressure",
        /// The node's network is not configured.
        NetworkUnavailable => "NetworkUnavailable",
    }
}

api_enum! {
    /// The `status` of any condition.
    ConditionStatus ("condition status") {
        /// The condition holds.
        True => "True",
        /// It does not.
        False => "False",
        /// Nobody knows (for a Node's `Ready`: its kubelet stopped posting status).
        Unknown => "Unknown",
    }
}

fn is_true(status: &str) -> bool {
    ConditionStatus::parse(status) == Some(ConditionStatus::True)
}

// --- Jobs -------------------------------------------------------------------------------------

/// The Job's condition of type `type_` when its status is `"True"`; `None` when it is absent,
/// `"False"` or `"Unknown"`.
pub fn condition(job: &Job, type_: JobConditionType) -> Option<&JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| JobConditionType::parse(&c.type_) == Some(type_) && is_true(&c.status))
}

/// The condition a failed Job failed with: its `Failed` condition, else its interim
/// `FailureTarget` (both carry the reason and the message).
pub fn failure_condition(job: &Job) -> Option<&JobCondition> {
    condition(job, JobConditionType::Failed)
        .or_else(|| condition(job, JobConditionType::FailureTarget))
}

/// Whether a Job has run to an end: a `Complete` or `Failed` condition is `"True"`, or a Pod
/// succeeded or failed and none is active, terminating or ready.
///
/// `FailureTarget` and `SuccessCriteriaMet` alone are not an end: since Kubernetes 1.31 they
/// precede the terminal condition while Pods still terminate. A Job being deleted is not
/// finished until its Pod is: a deletion timestamp alone says nothing about the host.
pub fn finished(job: &Job) -> bool {
    if condition(job, JobConditionType::Complete).is_some()
        || condition(job, JobConditionType::Failed).is_some()
    {
        return true;
    }
    let Some(status) = &job.status else {
        return false;
    };
    let count = |n: Option<i32>| n.unwrap_or(0);
    let ended = count(status.succeeded) >= 1 || count(status.failed) >= 1;
    let running =
        count(status.active) > 0 || count(status.terminating) > 0 || count(status.ready) > 0;
    ended && !running
}

/// Whether a Job reports its Pod succeeded ahead of its terminal condition: `SuccessCriteriaMet`
/// is `"True"` and no Pod of it is active, ready or terminating. Kubernetes 1.31 and later write
/// it in the sync that sees the Pod succeeded, then `Complete` once the Pod's tracking finalizer
/// is removed (`trackJobStatusAndRemoveFinalizers`, `pkg/controller/job`). Not an end (see
/// [`finished`]): what it allows is reading the log of a Pod that has ended, before the end is
/// written.
pub(crate) fn succeeding(job: &Job) -> bool {
    let Some(status) = &job.status else {
        return false;
    };
    let count = |n: Option<i32>| n.unwrap_or(0);
    let running =
        count(status.active) > 0 || count(status.terminating) > 0 || count(status.ready) > 0;
    condition(job, JobConditionType::SuccessCriteriaMet).is_some() && !running && !finished(job)
}

/// Whether a Job has succeeded: its `Complete` condition is `"True"`, or it has [`finished`]
/// with a succeeded Pod and no `Failed` condition (the controller's terminal condition wins over
/// the counters).
pub fn succeeded(job: &Job) -> bool {
    if condition(job, JobConditionType::Complete).is_some() {
        return true;
    }
    let succeeded_pods = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    condition(job, JobConditionType::Failed).is_none() && succeeded_pods >= 1 && finished(job)
}

/// Whether a Job has failed: it has [`finished`] and not [`succeeded`].
pub fn failed(job: &Job) -> bool {
    finished(job) && !succeeded(job)
}

/// Whether a Job has (had) a Pod, by its counters: one is or was active, ready, terminating,
/// succeeded or failed, or has ended and is not yet counted (`uncountedTerminatedPods`, where
/// the Job controller holds a Pod's UID between its end and the removal of its tracking
/// finalizer).
pub(crate) fn has_had_pod(job: &Job) -> bool {
    let Some(status) = &job.status else {
        return false;
    };
    let uncounted = (status.uncounted_terminated_pods.iter()).any(|u| {
        [&u.succeeded, &u.failed]
            .iter()
            .any(|l| l.as_ref().is_some_and(|l| !l.is_empty()))
    });
    uncounted
        || [
            status.active,
            status.ready,
            status.terminating,
            status.succeeded,
            status.failed,
        ]
        .iter()
        .any(|n| n.unwrap_or(0) > 0)
}

/// The Job's `(active, ready)` Pod counters.
/// Whether the Job reports a Pod terminating (`status.terminating`) other than by its deadline:
/// the Job controller deletes nothing of a running Job but at `activeDeadlineSeconds`, so such a
/// Pod is being deleted by another actor (`kubectl delete pod`, an eviction, a preemption).
pub(crate) fn pod_terminating_by_another(job: &Job) -> bool {
    let terminating = job.status.as_ref().and_then(|s| s.terminating).unwrap_or(0);
    let deadline = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.reason.as_deref() == Some(JobConditionReason::DeadlineExceeded.as_str()))
        });
    terminating > 0 && !deadline
}

pub(crate) fn active_and_ready(job: &Job) -> (i32, i32) {
    let status = job.status.as_ref();
    (
        status.and_then(|s| s.active).unwrap_or(0),
        status.and_then(|s| s.ready).unwrap_or(0),
    )
}

/// The node a Job targets: its [`NODE_ANNOTATION`], which carries the name verbatim; else, for
/// Jobs written before that annotation existed, its `label_key` label, which could carry the
/// name only because a node whose name did not fit a label value could not have such a Job at
/// all. `None` when it has neither (an empty value counts as none: no node has an empty name).
pub fn job_node<'a>(job: &'a Job, label_key: &str) -> Option<&'a str> {
    let meta = &job.metadata;
    let get = |map: &'a Option<std::collections::BTreeMap<String, String>>, key: &str| {
        map.as_ref()?
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    get(&meta.annotations, NODE_ANNOTATION).or_else(|| get(&meta.labels, label_key))
}

// --- Pods -------------------------------------------------------------------------------------

/// Whether `pod` is the Pod of the Job whose UID is `job_uid`: it carries the Job controller's
/// [`CONTROLLER_UID_LABEL`] with that UID **and** a controller ownerReference to that UID.
///
/// This is the one rule: the label alone is what a selector finds (and anyone can write it); the
/// ownerReference alone survives an orphaning delete. No other Job's Pod, and no Pod released
/// by our Job, ever answers for it.
pub fn is_pod_of_job(pod: &Pod, job_uid: &str) -> bool {
    let by_label = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CONTROLLER_UID_LABEL))
        .map(String::as_str)
        == Some(job_uid);
    let by_owner = pod.metadata.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.uid == job_uid && r.controller == Some(true))
    });
    by_label && by_owner
}

/// The label selector that lists the Pods of the Job whose UID is `job_uid` (a superset of
/// those [`is_pod_of_job`] accepts).
pub(crate) fn pods_selector(job_uid: &str) -> String {
    format!("{CONTROLLER_UID_LABEL}={job_uid}")
}

/// The Pod's phase; `None` when it has none or one this crate does not know.
pub fn pod_phase(pod: &Pod) -> Option<PodPhase> {
    PodPhase::parse(pod.status.as_ref()?.phase.as_deref()?)
}

/// The Pod's condition of type `type_` when its status is `"True"`.
pub fn pod_condition(pod: &Pod, type_: PodConditionType) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| PodConditionType::parse(&c.type_) == Some(type_) && is_true(&c.status))
}

/// The exit code of `container` in `pod`, once it terminated.
pub fn container_exit_code(pod: &Pod, container: &str) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let status = statuses.iter().find(|s| s.name == container)?;
    let terminated = status.state.as_ref()?.terminated.as_ref()?;
    Some(terminated.exit_code)
}

/// The exit code containerd gives a container whose task it finds gone, as after a reboot of
/// its node: `unknownExitCode` (`internal/cri/server/helpers.go`), reported by the kubelet as
/// the container's `terminated.exitCode`.
pub const UNKNOWN_EXIT_CODE: i32 = 255;
/// The `terminated.reason` of such a container: containerd's `unknownExitReason`. A container
/// that exited by itself has `Completed` or `Error` (or `OOMKilled`) instead.
pub const UNKNOWN_EXIT_REASON: &str = "Unknown";

/// Whether `container` of `pod` was lost, not ended: terminated with containerd's unknown exit
/// ([`UNKNOWN_EXIT_CODE`], reason [`UNKNOWN_EXIT_REASON`]), as a real kubelet reports the
/// container of a `restartPolicy: Never` Pod that was running when its node rebooted (seen on a
/// real node: `nodejob-e2e/tests/real_node.rs`). Its program's own end was never seen: the
/// exit code is no answer, and the program may have done all, some or none of its work.
pub fn lost_in_reboot(pod: &Pod, container: &str) -> bool {
    let terminated = (pod.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    terminated.is_some_and(|t| {
        t.exit_code == UNKNOWN_EXIT_CODE && t.reason.as_deref() == Some(UNKNOWN_EXIT_REASON)
    })
}

/// Why a Pod is being (or was) stopped from outside: what makes its containers' exits the
/// kill's rather than their own. See [`disruption`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Disruption<'a> {
    /// Its `DisruptionTarget` condition is `"True"`: evicted, preempted, garbage-collected
    /// (its node was deleted) or terminated by the kubelet.
    Target(&'a PodCondition),
    /// It has a `deletionTimestamp`: someone deleted it.
    Deleted(&'a Time),
}

impl fmt::Display for Disruption<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disruption::Target(c) => {
                write!(f, "{}", PodConditionType::DisruptionTarget)?;
                for part in [&c.reason, &c.message].into_iter().flatten() {
                    write!(f, ": {part}")?;
                }
                Ok(())
            }
            Disruption::Deleted(at) => write!(f, "deleted, deletionTimestamp {}", at.0),
        }
    }
}

/// Whether `pod` is being stopped from outside, and how: a `DisruptionTarget` condition that is
/// `"True"` (preferred: it says who and why), else a `deletionTimestamp`. `None` for a Pod
/// nothing stops, whose containers end on their own.
///
/// A container that ends in a Pod so marked may have been killed: its exit code is no answer.
pub fn disruption(pod: &Pod) -> Option<Disruption<'_>> {
    pod_condition(pod, PodConditionType::DisruptionTarget)
        .map(Disruption::Target)
        .or_else(|| {
            pod.metadata
                .deletion_timestamp
                .as_ref()
                .map(Disruption::Deleted)
        })
}

// --- Nodes ------------------------------------------------------------------------------------

fn node_condition(node: &Node, type_: NodeConditionType) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| NodeConditionType::parse(&c.type_) == Some(type_))
}

/// Whether a Node's `Ready` condition is `"True"`.
pub fn ready(node: &Node) -> bool {
    node_condition(node, NodeConditionType::Ready).is_some_and(|c| is_true(&c.status))
}

/// The taint the node lifecycle controller keeps on a Node whose `Ready` is not `"True"`, and
/// lifts once it is (`doNoScheduleTaintingPass`, `pkg/controller/nodelifecycle`); the
/// `TaintNodesByCondition` admission plugin puts it on every new Node
/// (<https://kubernetes.io/docs/reference/labels-annotations-taints/#node-kubernetes-io-not-ready>).
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The taint the node lifecycle controller keeps on a Node whose `Ready` is `"Unknown"` (its
/// kubelet stopped posting status, as through a reboot longer than the monitor grace period),
/// and lifts once it is `"True"` (`pkg/controller/nodelifecycle`,
/// <https://kubernetes.io/docs/reference/labels-annotations-taints/#node-kubernetes-io-unreachable>).
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Which of the node lifecycle controller's taints of a Node not Ready ([`NOT_READY_TAINT`],
/// [`UNREACHABLE_TAINT`]) a Node still carries, if any: Ready or not by its condition, the
/// control plane has not yet said so in its taints (the controller lifts them a moment after
/// the kubelet posts Ready).
pub fn unready_taint(node: &Node) -> Option<&'static str> {
    let taints: Vec<&str> = (node.spec.iter())
        .flat_map(|s| s.taints.iter().flatten())
        .map(|t| t.key.as_str())
        .collect();
    [NOT_READY_TAINT, UNREACHABLE_TAINT]
        .into_iter()
        .find(|key| taints.contains(key))
}

/// Why a Node is not Ready, for a message: its `Ready` condition's status, reason and message
/// (`"Unknown: NodeStatusUnknown: Kubelet stopped posting node status."`); `None` when it is
/// Ready.
pub(crate) fn not_ready_because(node: &Node) -> Option<String> {
    if ready(node) {
        return None;
    }
    let Some(c) = node_condition(node, NodeConditionType::Ready) else {
        return Some("it has no Ready condition".to_string());
    };
    let mut why = format!("Ready is {}", c.status);
    for part in [&c.reason, &c.message].into_iter().flatten() {
        why.push_str(": ");
        why.push_str(part);
    }
    Some(why)
}
