//! Reading state: [`finished`], [`succeeded`], [`failed`], [`condition`], [`ready`],
//! [`job_node`].
//!
//! A Job has run to an end when the host operation has: its Pod is no longer running. Since
//! Kubernetes 1.31 the Job controller sets `FailureTarget` or `SuccessCriteriaMet` first and the
//! terminal `Failed` or `Complete` only once every Pod has terminated, so those interim
//! conditions alone never count; nor does a deletion timestamp.

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::Node;

use crate::NODE_ANNOTATION;

/// The Job's condition of type `type_` (`Complete`, `Failed`, `FailureTarget`, ...) when its
/// status is `"True"`; `None` when it is absent, `"False"` or `"Unknown"`.
pub fn condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether a Job has run to an end: a `Complete` or `Failed` condition is `"True"`, or a Pod
/// succeeded or failed and none is active, terminating or ready.
///
/// `FailureTarget` and `SuccessCriteriaMet` alone are not an end: since Kubernetes 1.31 they
/// precede the terminal condition while Pods still terminate. A Job being deleted is not
/// finished until its Pod is: a deletion timestamp alone says nothing about the host.
pub fn finished(job: &Job) -> bool {
    if condition(job, "Complete").is_some() || condition(job, "Failed").is_some() {
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

/// Whether a Job has succeeded: its `Complete` condition is `"True"`, or it has [`finished`]
/// with a succeeded Pod and no `Failed` condition (the controller's terminal condition wins over
/// the counters).
pub fn succeeded(job: &Job) -> bool {
    if condition(job, "Complete").is_some() {
        return true;
    }
    let succeeded_pods = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    condition(job, "Failed").is_none() && succeeded_pods >= 1 && finished(job)
}

/// Whether a Job has failed: it has [`finished`] and not [`succeeded`].
pub fn failed(job: &Job) -> bool {
    finished(job) && !succeeded(job)
}

/// Whether a Node's `Ready` condition is `"True"`.
pub fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
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
