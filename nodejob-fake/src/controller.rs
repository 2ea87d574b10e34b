//! The Job controller and the garbage collector, as far as a one-pod Job needs them.
//!
//! Modelled (after `syncJob` and `trackJobStatusAndRemoveFinalizers` in
//! `pkg/controller/job/job_controller.go`): one pod per Job (`parallelism` and `completions`
//! 1); `backoffLimit` 0 (the first failed pod fails the Job, whatever the field says); the
//! interim conditions of Kubernetes 1.31 and later (`SuccessCriteriaMet`, `FailureTarget`)
//! before the terminal ones, which wait until no pod terminates; `activeDeadlineSeconds`;
//! `FailedCreate` retries; a suspended Job creating no pod; foreground deletion; and pod
//! tracking with the `batch.kubernetes.io/job-tracking` finalizer, which the controller removes
//! (`canRemoveFinalizer`), counting the pod as it does:
//!
//! - from a pod that succeeded: counted succeeded;
//! - from a pod considered failed (`isPodFailed`: phase `Failed`, or deleted before it
//!   succeeded unless `podReplacementPolicy: Failed` or a `podFailurePolicy` is set): counted
//!   failed;
//! - from every pod of a Job with its interim condition, at once, running or not: after
//!   `FailureTarget` every pod that did not succeed is counted failed;
//! - from every pod of a Job being deleted, at once: counted only as above.
//!
//! Not modelled: retries after a failed pod, indexed Jobs, `podFailurePolicy`,
//! `successPolicy`, `ttlSecondsAfterFinished`, resuming a suspended Job, orphan deletion.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use nodejob_core::ApiResult;

use crate::admission;
use crate::ctx::Ctx;
use crate::store::{FOREGROUND_DELETION, Key, Store, key_of};
use crate::timers::{Action, ObjRef};
use crate::timing::stamp;

/// The Job controller's name in the Events it records.
const JOB_CONTROLLER: &str = "job-controller";

/// The finalizer with which the Job controller tracks a pod until it has counted it.
pub(crate) const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

const COMPLETIONS_REACHED: (&str, &str) = (
    "CompletionsReached",
    "Reached expected number of succeeded pods",
);
const BACKOFF_LIMIT_EXCEEDED: (&str, &str) = (
    "BackoffLimitExceeded",
    "Job has reached the specified backoff limit",
);
const DEADLINE_EXCEEDED: (&str, &str) = (
    "DeadlineExceeded",
    "Job was active longer than specified deadline",
);

/// What the Job controller remembers outside the objects (its workqueue's rate limiter and
/// pending requeues).
#[derive(Debug, Default)]
pub(crate) struct Controller {
    create_attempts: BTreeMap<String, u32>,
    finishing: BTreeSet<String>,
    /// Per Job UID, the [`Inputs`] its last level-triggered sync read: a Job whose inputs have
    /// not changed since is not synced again, as the real controller syncs only the Jobs its
    /// informers report changed (a Job's own event, or one of its pods').
    synced: BTreeMap<String, Inputs>,
}

/// What a Job's sync reads, in brief: the highest resourceVersion among the Job and its pods,
/// and how many pods it has. Any write to either raises the first (resourceVersions only grow);
/// a pod removed without another write lowers the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Inputs {
    newest: u64,
    pods: usize,
}

impl Inputs {
    fn of(store: &Store, job: &Job) -> Inputs {
        let rv = |m: &ObjectMeta| (m.resource_version.as_deref()?.parse::<u64>()).ok();
        let uid = job.metadata.uid.as_deref().unwrap_or_default();
        let (mut newest, mut pods) = (rv(&job.metadata).unwrap_or(0), 0);
        for pod in store.owned_by(uid) {
            newest = newest.max(rv(&pod.metadata).unwrap_or(0));
            pods += 1;
        }
        Inputs { newest, pods }
    }
}

/// Why a Job is synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// A pod or the Job changed.
    Change,
    /// `startTime + activeDeadlineSeconds` has passed.
    Deadline,
}

fn true_condition<'a>(status: Option<&'a JobStatus>, type_: &str) -> Option<&'a JobCondition> {
    status?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job has its terminal condition (`Complete` or `Failed`).
fn finished(job: &Job) -> bool {
    let status = job.status.as_ref();
    true_condition(status, "Complete").is_some() || true_condition(status, "Failed").is_some()
}

/// The interim condition, `SuccessCriteriaMet` or `FailureTarget`, if set.
fn interim(status: Option<&JobStatus>) -> Option<&JobCondition> {
    true_condition(status, "SuccessCriteriaMet").or_else(|| true_condition(status, "FailureTarget"))
}

fn condition(type_: &str, (reason, message): (&str, &str), now: Duration) -> JobCondition {
    JobCondition {
        type_: type_.to_string(),
        status: "True".to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_probe_time: Some(stamp(now)),
        last_transition_time: Some(stamp(now)),
    }
}

fn involved(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".to_string()),
        kind: Some("Job".to_string()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

fn is_tracked(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

/// Whether the controller counts `pod` failed (`isPodFailed`): its phase is `Failed`; or it was
/// deleted before it succeeded ("count deleted Pods as failures to account for orphan Pods that
/// never have a chance to reach the Failed phase"), unless the Job replaces only failed pods
/// (`onlyReplaceFailedPods`: `podReplacementPolicy: Failed`, or a `podFailurePolicy`).
fn counts_as_failed(pod: &Pod, job: &Job) -> bool {
    if phase(pod) == "Failed" {
        return true;
    }
    let only_failed = job.spec.as_ref().is_some_and(|s| {
        s.pod_replacement_policy.as_deref() == Some("Failed") || s.pod_failure_policy.is_some()
    });
    !only_failed && pod.metadata.deletion_timestamp.is_some() && phase(pod) != "Succeeded"
}

fn count_of(counter: Option<i32>) -> usize {
    usize::try_from(counter.unwrap_or(0)).unwrap_or(0)
}

fn bump(counter: &mut Option<i32>) {
    *counter = Some(counter.unwrap_or(0).saturating_add(1));
}

fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

impl Controller {
    /// `POST .../jobs` through the store, then the controller's first sync after its batch
    /// period.
    pub(crate) fn create_job(&mut self, cx: &mut Ctx<'_>, job: &Job) -> ApiResult<Job> {
        let created = cx.store.create_job(job, cx.now)?;
        let at = cx.now + cx.timing.pod_create;
        cx.timers
            .at(at, Action::CreatePod(ObjRef::of(&created.metadata)));
        Ok(created)
    }

    /// Writes `status` into `job` unless unchanged (the status subresource: no generation bump).
    fn write_status(&mut self, cx: &mut Ctx<'_>, job: &Job, status: JobStatus) {
        if job.status.as_ref() != Some(&status) {
            let mut job = job.clone();
            job.status = Some(status);
            cx.store.write_job(job);
        }
    }

    /// The controller's sync of a Job without a pod: `startTime` (arming the deadline), then
    /// the pod, or a `FailedCreate` event and a retry with backoff. `node_refusal` says what
    /// admission answers for a pod bound to a node beyond the namespace's PodSecurity.
    pub(crate) fn sync_new_job(
        &mut self,
        cx: &mut Ctx<'_>,
        node_refusal: &dyn Fn(&str) -> Option<String>,
        r: &ObjRef,
    ) {
        let (namespace, name) = (&r.key.0, &r.key.1);
        let Some(job) = cx.store.job_with_uid(namespace, name, &r.uid).cloned() else {
            return;
        };
        let spec = job.spec.clone().unwrap_or_default();
        if job.metadata.deletion_timestamp.is_some()
            || spec.suspend == Some(true)
            || finished(&job)
            || interim(job.status.as_ref()).is_some()
            || !cx.store.pods_owned_by(&r.uid).is_empty()
        {
            return;
        }
        let now = cx.now;
        let mut status = job.status.clone().unwrap_or_default();
        if status.start_time.is_none() {
            status.start_time = Some(stamp(now));
            if let Some(secs) = spec.active_deadline_seconds {
                let deadline = Duration::from_secs(u64::try_from(secs).unwrap_or(0));
                cx.timers.at(now + deadline, Action::Deadline(r.clone()));
            }
        }
        status.ready.get_or_insert(0);
        status.terminating.get_or_insert(0);
        status.uncounted_terminated_pods.get_or_insert_default();

        let prefix = format!("{name}-");
        let pod_name = cx.store.generate_name(&prefix);
        let node = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone());
        // Admission: the namespace's PodSecurity, then the node's scripted refusal.
        let labels = cx.store.namespace_labels(namespace);
        let template = spec.template.spec.as_ref();
        let refusal = template
            .and_then(|s| admission::pod_security(&labels, s))
            .or_else(|| node.and_then(|n| node_refusal(&n)));
        if let Some(refusal) = refusal {
            // The create was refused (admission): the controller records the apiserver's
            // error and its workqueue retries the sync with exponential backoff.
            let message = format!("Error creating: pods \"{pod_name}\" is forbidden: {refusal}");
            cx.store.record_event(
                JOB_CONTROLLER,
                &involved(&job),
                "Warning",
                "FailedCreate",
                &message,
                now,
            );
            let attempt = self.create_attempts.entry(r.uid.clone()).or_default();
            let delay = cx.timing.create_retry(*attempt);
            *attempt += 1;
            cx.timers.at(now + delay, Action::CreatePod(r.clone()));
            self.write_status(cx, &job, status);
            return;
        }
        let pod = self.new_pod(cx, &job, &spec.template, pod_name.clone(), prefix);
        let pod = cx.store.write_pod(pod);
        let message = format!("Created pod: {pod_name}");
        cx.store.record_event(
            JOB_CONTROLLER,
            &involved(&job),
            "Normal",
            "SuccessfulCreate",
            &message,
            now,
        );
        status.active = Some(1);
        self.write_status(cx, &job, status);
        let at = now + cx.timing.container_start;
        cx.timers
            .at(at, Action::StartContainer(ObjRef::of(&pod.metadata)));
    }

    /// The pod of `job` from its template, as the controller creates it.
    fn new_pod(
        &mut self,
        cx: &mut Ctx<'_>,
        job: &Job,
        template: &PodTemplateSpec,
        name: String,
        generate_name: String,
    ) -> Pod {
        let meta = template.metadata.clone().unwrap_or_default();
        let owner = OwnerReference {
            api_version: "batch/v1".to_string(),
            kind: "Job".to_string(),
            name: job.metadata.name.clone().unwrap_or_default(),
            uid: job.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        Pod {
            metadata: ObjectMeta {
                name: Some(name),
                generate_name: Some(generate_name),
                namespace: job.metadata.namespace.clone(),
                uid: Some(cx.store.uid()),
                creation_timestamp: Some(stamp(cx.now)),
                labels: meta.labels,
                annotations: meta.annotations,
                owner_references: Some(vec![owner]),
                finalizers: Some(vec![TRACKING_FINALIZER.to_string()]),
                ..ObjectMeta::default()
            },
            spec: template.spec.clone(),
            status: Some(PodStatus {
                phase: Some("Pending".to_string()),
                ..PodStatus::default()
            }),
        }
    }

    /// `activeDeadlineSeconds` passed.
    pub(crate) fn deadline(&mut self, cx: &mut Ctx<'_>, r: &ObjRef) {
        if let Some(job) = cx.store.job_with_uid(&r.key.0, &r.key.1, &r.uid).cloned() {
            self.sync_job(cx, job, Trigger::Deadline);
        }
    }

    /// The level-triggered sync of every Job the controller has seen, and the removal of
    /// tracking finalizers from pods whose Job is gone.
    pub(crate) fn sync_jobs(&mut self, cx: &mut Ctx<'_>) {
        // What the informers queued: the Jobs written, or whose pods were, since the last pass
        // (the index's `touched_jobs`), in key order. Looking at every Job (and every pod for
        // orphans) on every pass made a 5,000-node roll quadratic in the Jobs in flight.
        let touched = cx.store.index.take_touched_jobs();
        let store = &*cx.store;
        let mut orphans = Vec::new();
        let mut due = Vec::new();
        for (key, uid) in touched {
            let Some(job) = store.job_with_uid(&key.0, &key.1, &uid) else {
                // The owner is gone: its pods that still carry the tracking finalizer.
                self.synced.remove(&uid);
                let tracked = store.owned_by(&uid).filter(|p| is_tracked(p));
                orphans.extend(tracked.map(|p| key_of(&p.metadata)));
                continue;
            };
            // Only a Job whose inputs changed since its last sync.
            let inputs = Inputs::of(store, job);
            if self.synced.get(&uid) != Some(&inputs) {
                due.push((uid, inputs, job.clone()));
            }
        }
        orphans.sort();
        for key in orphans {
            self.remove_tracking_finalizer(cx, &key);
        }
        for (uid, inputs, job) in due {
            // What this sync read: a write it makes changes the inputs, so the next pass syncs
            // the Job again, as the controller's own write comes back through its informer.
            self.synced.insert(uid, inputs);
            self.sync_job(cx, job, Trigger::Change);
        }
    }

    /// One sync (job controller `syncJob`): picks the interim condition (`FailureTarget` for a
    /// failed pod, then for a passed deadline; else `SuccessCriteriaMet` for a succeeded pod),
    /// deletes the active pods of a failing Job (`deleteActivePods`), writes `active` / `ready`
    /// / `terminating` and the counters, removes the finalizers of the pods it counted or may
    /// release (`canRemoveFinalizer`), and arms the terminal update once no pod is left
    /// running or terminating (`enactJobFinished`).
    fn sync_job(&mut self, cx: &mut Ctx<'_>, job: Job, trigger: Trigger) {
        let Some(uid) = job.metadata.uid.clone() else {
            return;
        };
        let Some(old) = job.status.clone() else {
            return;
        };
        if old.start_time.is_none() {
            // Not synced yet: the first sync is Action::CreatePod, after the batch period.
            return;
        }
        let pods = cx.store.pods_owned_by(&uid);
        if finished(&job) {
            let uncounted = (pods.iter()).filter(|p| is_terminal(p) && is_tracked(p));
            for key in uncounted.map(|p| key_of(&p.metadata)).collect::<Vec<_>>() {
                self.remove_tracking_finalizer(cx, &key);
            }
            return;
        }
        let now = cx.now;
        let mut status = old;
        if interim(Some(&status)).is_none() {
            // The counters as they will be once the finished tracked pods are counted.
            let tracked = || pods.iter().filter(|p| is_tracked(p));
            let new_failed = tracked().filter(|p| counts_as_failed(p, &job)).count();
            let new_succeeded = tracked().filter(|p| phase(p) == "Succeeded").count();
            let target = if count_of(status.failed) + new_failed >= 1 {
                Some(("FailureTarget", BACKOFF_LIMIT_EXCEEDED))
            } else if trigger == Trigger::Deadline {
                Some(("FailureTarget", DEADLINE_EXCEEDED))
            } else if count_of(status.succeeded) + new_succeeded >= 1 {
                Some(("SuccessCriteriaMet", COMPLETIONS_REACHED))
            } else {
                None
            };
            if let Some((type_, why)) = target {
                status
                    .conditions
                    .get_or_insert_default()
                    .push(condition(type_, why, now));
            }
        }
        let failing = true_condition(Some(&status), "FailureTarget").is_some();
        if failing {
            let doomed = pods
                .iter()
                .filter(|p| !is_terminal(p) && p.metadata.deletion_timestamp.is_none());
            for pod in doomed {
                let message = format!(
                    "Deleted pod: {}",
                    pod.metadata.name.as_deref().unwrap_or_default()
                );
                cx.store.delete_pod(&key_of(&pod.metadata), None, cx.now);
                cx.store.record_event(
                    JOB_CONTROLLER,
                    &involved(&job),
                    "Normal",
                    "SuccessfulDelete",
                    &message,
                    now,
                );
            }
        }
        let pods = cx.store.pods_owned_by(&uid);
        // canRemoveFinalizer: the whole Job is being deleted or has its interim condition, or
        // the pod succeeded or is considered failed. A released pod is counted succeeded or,
        // if considered failed or the Job is failing, failed; else (a running pod of a Job
        // being deleted) not at all.
        let deleting = job.metadata.deletion_timestamp.is_some();
        let has_interim = interim(Some(&status)).is_some();
        let mut release = Vec::new();
        for pod in pods.iter().filter(|p| is_tracked(p)) {
            let succeeded = phase(pod) == "Succeeded";
            let failed = counts_as_failed(pod, &job);
            if !(deleting || has_interim || succeeded || failed) {
                continue;
            }
            release.push(key_of(&pod.metadata));
            if succeeded {
                bump(&mut status.succeeded);
            } else if failed || failing {
                bump(&mut status.failed);
            }
        }
        let running = || pods.iter().filter(|p| !is_terminal(p));
        let active = running()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count();
        let ready = running().filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p));
        let ready = ready.count();
        // controller.CountTerminatingPods: deleted and not terminal.
        let terminating = running().count() - active;
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        status.active = (active > 0).then(|| count(active));
        status.ready = Some(count(ready));
        status.terminating = Some(count(terminating));
        self.write_status(cx, &job, status);
        for key in &release {
            self.remove_tracking_finalizer(cx, key);
        }
        if has_interim && active == 0 && terminating == 0 && self.finishing.insert(uid) {
            let r = ObjRef::of(&job.metadata);
            cx.timers.at(now + cx.timing.finish, Action::Finish(r));
        }
    }

    /// The separate, later update that adds the terminal condition (and `completionTime` on
    /// success) once every pod is terminal and counted.
    pub(crate) fn finish(&mut self, cx: &mut Ctx<'_>, r: &ObjRef) {
        self.finishing.remove(&r.uid);
        let Some(job) = cx.store.job_with_uid(&r.key.0, &r.key.1, &r.uid).cloned() else {
            return;
        };
        if finished(&job) {
            return;
        }
        let Some(target) = interim(job.status.as_ref()).cloned() else {
            return;
        };
        let pods = cx.store.pods_owned_by(&r.uid);
        if pods.iter().any(|p| !is_terminal(p) || is_tracked(p)) {
            return;
        }
        let now = cx.now;
        let reason = target.reason.clone().unwrap_or_default();
        let message = target.message.clone().unwrap_or_default();
        let mut status = job.status.clone().unwrap_or_default();
        let success = target.type_ == "SuccessCriteriaMet";
        let type_ = if success { "Complete" } else { "Failed" };
        let conditions = status.conditions.get_or_insert_default();
        conditions.push(condition(type_, (&reason, &message), now));
        if success {
            status.completion_time = Some(stamp(now));
        }
        self.write_status(cx, &job, status);
        if success {
            cx.store.record_event(
                JOB_CONTROLLER,
                &involved(&job),
                "Normal",
                "Completed",
                "Job completed",
                now,
            );
        } else {
            cx.store.record_event(
                JOB_CONTROLLER,
                &involved(&job),
                "Warning",
                &reason,
                &message,
                now,
            );
        }
        self.create_attempts.remove(&r.uid);
    }

    fn remove_tracking_finalizer(&mut self, cx: &mut Ctx<'_>, key: &Key) {
        let Some(mut pod) = cx.store.pods.get(key).cloned() else {
            return;
        };
        let finalizers = pod.metadata.finalizers.get_or_insert_default();
        finalizers.retain(|f| f != TRACKING_FINALIZER);
        if finalizers.is_empty() {
            pod.metadata.finalizers = None;
        }
        cx.store.write_pod(pod);
    }

    /// The garbage collector: deletes the dependents of a Job in foreground deletion and, once
    /// none is left, drops the `foregroundDeletion` finalizer, which removes the Job; deletes
    /// pods whose controller (Job, ReplicaSet, DaemonSet) no longer exists (background
    /// deletion).
    pub(crate) fn collect_garbage(&mut self, cx: &mut Ctx<'_>) {
        let deleting: Vec<Job> = (cx.store.index.deleting_jobs.iter())
            .filter_map(|key| cx.store.jobs.get(key))
            .cloned()
            .collect();
        for job in &deleting {
            let foreground = job
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FOREGROUND_DELETION);
            let Some(uid) = job.metadata.uid.as_deref().filter(|_| foreground) else {
                continue;
            };
            let dependents = cx.store.pods_owned_by(uid);
            for pod in dependents
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
            {
                cx.store.delete_pod(&key_of(&pod.metadata), None, cx.now);
            }
            if dependents.is_empty() {
                let mut job = job.clone();
                let finalizers = job.metadata.finalizers.get_or_insert_default();
                finalizers.retain(|f| f != FOREGROUND_DELETION);
                if finalizers.is_empty() {
                    // apiserver (generic registry Store.Update): an update that empties the
                    // finalizers of an object with a deletionTimestamp is not written; the
                    // object is deleted instead, so the one DELETED event carries the state
                    // last stored, finalizer included.
                    cx.store.remove_job(&key_of(&job.metadata));
                } else {
                    cx.store.write_job(job);
                }
            }
        }
        // Orphans appear only when an owner goes or a pod with an owner comes: the pods of
        // the owners the index suspects.
        let suspects = std::mem::take(&mut cx.store.index.orphan_suspects);
        if suspects.is_empty() {
            return;
        }
        let live = cx.store.owner_uids();
        let mut orphans: Vec<Key> = (suspects.iter())
            .filter(|uid| !live.contains(uid.as_str()))
            .flat_map(|uid| cx.store.owned_by(uid))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| key_of(&p.metadata))
            .collect();
        orphans.sort();
        for key in orphans {
            cx.store.delete_pod(&key, None, cx.now);
        }
    }
}
