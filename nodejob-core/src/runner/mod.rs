//! The runner: [`run`], [`run_exit_code`], [`run_exit_code_logs`], [`logs`].
//!
//! Each is a thin async loop that executes the [`Machine`]'s intents through a [`JobApi`] and
//! feeds the answers back. All decisions live in the machine ([`state`]), which is pure.
//!
//! # Expected flow
//! 1. Read the Job of the spec's name. None: create ours. A finished one from an earlier run:
//!    delete exactly that object (its UID and resourceVersion as preconditions, foreground) and
//!    wait until it is gone, then create. One being deleted: wait until it is gone. One still
//!    running: warn, wait for it to finish (never kill a host operation), then replace it.
//! 2. Wait for ours, event-driven, at most `poll_attempts` x [`crate::POLL_INTERVAL`] from its
//!    creation. While it has no Pod, look for a `FailedCreate` event once per interval.
//! 3. Once finished, read its Pod by its UID, the container's exit code and (when asked) the log.
//! 4. Delete it when it succeeded; leave it for inspection when it failed.
//!
//! # Guarantees
//! - A Job is identified by UID once created: a Job replaced under the same name ends the run
//!   with an error at once, and nothing of it is read.
//! - The runner never deletes a Job it did not inspect: every delete carries UID and
//!   resourceVersion preconditions. A Job another actor created or replaced is left alone.
//! - Transient API errors (429, 5xx, timeouts) are retried with capped backoff inside the bound.
//!
//! # Errors
//! See [`crate::Error`]: invalid spec, contention, vanished Job, timeout, pod creation refused,
//! failure without exit status, log unread (with the exit code), API errors with their operation.

pub mod state;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

pub use state::{Intent, Machine, Mode, Observation, Report, Step};

use crate::api::JobApi;
use crate::error::{ApiError, Error, Result};
use crate::spec::Spec;
use crate::{CONTROLLER_UID_LABEL, Change, LOG_LIMIT_BYTES};

/// Creates the Job (replacing a stale one from an earlier run), waits for it to finish, deletes
/// it when it succeeded, and returns an error when it failed or timed out. A failed Job is left
/// in place for inspection.
pub async fn run<A: JobApi + ?Sized>(api: &A, spec: &Spec) -> Result<()> {
    drive(api, spec, Mode::Run).await.map(|_| ())
}

/// Runs a Job whose answer is its exit status rather than its success, and returns the
/// container's exit code: 0 when the Job succeeded, the code it failed with otherwise. A failed
/// Job is left in place for inspection; the next run replaces it. An error means no exit status
/// could be established.
pub async fn run_exit_code<A: JobApi + ?Sized>(api: &A, spec: &Spec) -> Result<i32> {
    drive(api, spec, Mode::ExitCode).await.map(|r| r.exit_code)
}

/// [`run_exit_code`] that also returns the log of the Job's Pod, read before a succeeded Job is
/// deleted. [`Error::LogUnread`] carries the exit status when only the log is missing; the Job is
/// then left in place.
pub async fn run_exit_code_logs<A: JobApi + ?Sized>(api: &A, spec: &Spec) -> Result<(i32, String)> {
    let report = drive(api, spec, Mode::ExitCodeLogs).await?;
    Ok((report.exit_code, report.log.unwrap_or_default()))
}

/// Runs the machine for `spec` in `mode` to its end.
async fn drive<A: JobApi + ?Sized>(api: &A, spec: &Spec, mode: Mode) -> Result<Report> {
    spec.validate()?;
    let (ns, name) = (spec.namespace.as_str(), spec.name.as_str());
    let mut machine = Machine::new(spec, mode, api.now());
    let mut step = machine.start();
    loop {
        for note in step.notes {
            spec.emit(note.level, note.message);
        }
        let answer = match step.intent {
            Intent::Finish(outcome) => return outcome,
            Intent::GetJob => api
                .get_job(ns, name)
                .await
                .map(|j| Observation::Job(Box::new(j))),
            Intent::CreateJob(job) => api
                .create_job(&job)
                .await
                .map(|j| Observation::Job(Box::new(j))),
            Intent::DeleteJob(pre) => api
                .delete_job(ns, name, Some(&pre))
                .await
                .map(|()| Observation::Deleted),
            Intent::WaitJob { since, timeout } => api
                .wait_job(ns, name, since.as_deref(), timeout)
                .await
                .map(|change| Observation::Changed(boxed(change))),
            Intent::ListPods { selector } => {
                api.list_pods(ns, &selector).await.map(Observation::Pods)
            }
            Intent::ReadLog { pod } => api
                .pod_log(ns, &pod, &spec.container, LOG_LIMIT_BYTES)
                .await
                .map(Observation::Log),
            Intent::ListEvents { uid } => api.list_events(ns, &uid).await.map(Observation::Events),
            Intent::Sleep(d) => {
                api.sleep(d).await;
                Ok(Observation::Slept)
            }
        };
        step = machine.step(api.now(), answer.unwrap_or_else(Observation::Failed));
    }
}

fn boxed<K>(change: Change<K>) -> Change<Box<K>> {
    match change {
        Change::Applied(k) => Change::Applied(Box::new(k)),
        Change::Deleted(k) => Change::Deleted(Box::new(k)),
        Change::TimedOut => Change::TimedOut,
    }
}

/// Returns the log of `spec.container` in the Pod of the Job named `spec.name`, found as
/// [`run_exit_code`] finds its exit code: by the Job's UID, so an earlier Job's Pod cannot
/// answer.
pub async fn logs<A: JobApi + ?Sized>(api: &A, spec: &Spec) -> Result<String> {
    spec.validate()?;
    let job_ref = spec.job_ref();
    let ns = spec.namespace.as_str();
    let bound = spec.wait_bound();
    let job = retrying(api, bound, || api.get_job(ns, &spec.name))
        .await
        .map_err(|cause| Error::Api {
            action: format!("reading {job_ref}"),
            cause,
        })?;
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let selector = format!("{CONTROLLER_UID_LABEL}={uid}");
    let pods = retrying(api, bound, || api.list_pods(ns, &selector))
        .await
        .map_err(|cause| Error::Api {
            action: format!("listing pods of {job_ref}"),
            cause,
        })?;
    let pod = newest_owned(&pods, &uid).ok_or_else(|| Error::Api {
        action: format!("finding the pod of {job_ref}"),
        cause: ApiError::not_found(format!("no pod of job uid {uid} exists")),
    })?;
    retrying(api, bound, || {
        api.pod_log(ns, pod, &spec.container, LOG_LIMIT_BYTES)
    })
    .await
    .map_err(|cause| Error::Api {
        action: format!("reading the log of {job_ref} (pod {pod})"),
        cause,
    })
}

/// The name of the latest Pod controlled by the Job with `uid`.
fn newest_owned<'p>(pods: &'p [Pod], uid: &str) -> Option<&'p str> {
    pods.iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .as_ref()
                .is_some_and(|r| r.iter().any(|o| o.uid == uid && o.controller == Some(true)))
        })
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .and_then(|p| p.metadata.name.as_deref())
}

/// Calls `op` until it answers something other than a transient error, backing off between
/// attempts, for at most `bound` of the backend's time.
pub(crate) async fn retrying<A, T, F, Fut>(
    api: &A,
    bound: Duration,
    mut op: F,
) -> Result<T, ApiError>
where
    A: JobApi + ?Sized,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let deadline = api.now().saturating_add(bound);
    let mut attempt = 0;
    loop {
        let pause = state::backoff(attempt);
        match op().await {
            Err(e) if e.is_retryable() && api.now().saturating_add(pause) < deadline => {
                api.sleep(pause).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}
