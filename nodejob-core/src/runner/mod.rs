//! The runner: [`run`], [`run_exit_code`], [`run_exit_code_logs`], [`logs`].
//!
//! Each is a thin async loop that executes the [`Machine`]'s intents through a [`JobApi`] (and,
//! for the Job's node, a [`NodeApi`]) and feeds the answers back. All decisions live in the
//! machine, which is pure.
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | the async loops, and `retrying` for the crate's other loops |
//! | `protocol.rs` | [`Intent`], [`Observation`], [`Step`], [`Mode`], [`Report`]: machine <-> loop |
//! | `machine.rs` | [`Machine`], the root: which sub-machine is in charge; retries and backoff |
//! | `context.rs` | what the run is about, and how a sub-machine answers (shared, owned by none) |
//! | `guard.rs` | the stale-Job guard: inspect, delete exactly, wait out |
//! | `ours.rs` | ours: create, wait (event-driven, bounded), its node when the Job goes quiet |
//! | `result.rs` | the result: its Pod, the exit code, the log; delete ours if it succeeded |
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
//! # The node
//! The Job's node is read, never watched, and only when the Job says nothing or says its Pod is
//! in trouble: when a wait on the Job times out (the loop reads the node then, so a run that
//! times out says whether its node is NotReady or gone), and when the Job reports its Pod no
//! longer ready while it runs (what the node lifecycle controller does to the Pods of a node
//! gone NotReady), and when a failed Job of ours has no Pod left (the pod garbage collector
//! deletes the Pods of a deleted node after a 40 s quarantine, `gcOrphaned`). A node that no
//! longer exists ends the run with [`Error::NodeDeleted`]. A run whose Job finishes within its
//! wait with its Pod there reads no node: it costs the
//! same requests as without this, and a long Job no more than a short one (a watch on the node
//! would be woken by every status update of the node).
//!
//! # Guarantees
//! - A Job is identified by UID once created: a Job replaced under the same name ends the run
//!   with an error at once, and nothing of it is read.
//! - The runner never deletes a Job it did not inspect: every delete carries UID and
//!   resourceVersion preconditions. A Job another actor created or replaced is left alone.
//! - An exit code is the host operation's answer only when its container ended on its own: a
//!   Pod deleted or disrupted ([`Error::PodDeleted`]), or a Job failed by its deadline, give
//!   none.
//! - Transient API errors (429, 5xx, timeouts) are retried with capped backoff inside the bound,
//!   never sooner than the server's `Retry-After` when it sent one.
//! - A log is at most [`crate::LOG_LIMIT_BYTES`], cut on a character boundary.
//!
//! # Errors
//! See [`crate::Error`]: invalid spec, contention, vanished Job, timeout (saying when the node
//! is NotReady), node deleted, pod creation refused, pod deleted, failure without exit status,
//! log unread (with the exit code), API errors with their operation.

mod context;
mod guard;
mod machine;
mod ours;
mod protocol;
mod result;

use std::time::Duration;

pub use machine::Machine;
pub use protocol::{Intent, Mode, Observation, Policy, Report, Step};
pub use result::log_text;

use crate::api::{Clock, JobApi, NodeApi};
use crate::error::{Action, ApiError, Error, ObjectKind, Operation, Result};
use crate::spec::Spec;
use crate::status::{is_pod_of_job, pods_selector};
use crate::{Change, LOG_LIMIT_BYTES};

/// Creates the Job (replacing a stale one from an earlier run), waits for it to finish, deletes
/// it when it succeeded, and returns an error when it failed or timed out. A failed Job is left
/// in place for inspection.
pub async fn run<A: JobApi + NodeApi + ?Sized>(api: &A, spec: &Spec) -> Result<()> {
    drive(api, spec, Mode::Run).await.map(|_| ())
}

/// Runs a Job whose answer is its exit status rather than its success, and returns the
/// container's exit code: 0 when the Job succeeded, the code it failed with otherwise. A failed
/// Job is left in place for inspection; the next run replaces it. An error means no exit status
/// could be established.
pub async fn run_exit_code<A: JobApi + NodeApi + ?Sized>(api: &A, spec: &Spec) -> Result<i32> {
    drive(api, spec, Mode::ExitCode).await.map(|r| r.exit_code)
}

/// [`run_exit_code`] that also returns the log of the Job's Pod, read before a succeeded Job is
/// deleted. [`Error::LogUnread`] carries the exit status when only the log is missing; the Job is
/// then left in place.
pub async fn run_exit_code_logs<A: JobApi + NodeApi + ?Sized>(
    api: &A,
    spec: &Spec,
) -> Result<(i32, String)> {
    let report = drive(api, spec, Mode::ExitCodeLogs).await?;
    Ok((report.exit_code, report.log.unwrap_or_default()))
}

/// Runs the Job of `spec` in `mode` as `policy` says, and returns its [`Report`] (with the
/// UID of the Job that answered). With the default [`Policy`] this is what [`run`],
/// [`run_exit_code`] and [`run_exit_code_logs`] do; a caller that must never run a host
/// operation twice adopts the Job it started before a crash ([`Policy::adopt`]) and keeps a
/// succeeded Job until it has recorded the result ([`Policy::keep`]), then deletes it exactly
/// itself ([`crate::delete_exact_and_wait`]).
///
/// In [`Mode::Run`] a failed Job is an error; in the other modes its exit code is the answer.
pub async fn run_with<A: JobApi + NodeApi + ?Sized>(
    api: &A,
    spec: &Spec,
    mode: Mode,
    policy: Policy,
) -> Result<Report> {
    spec.validate()?;
    let (ns, name) = (spec.namespace.as_str(), spec.name.as_str());
    let mut machine = Machine::with_policy(spec, mode, api.now(), policy);
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
            Intent::WaitJob { since, timeout } => {
                match api.wait_job(ns, name, since.as_deref(), timeout).await {
                    // The Job said nothing: its node may say why (one read, on a timeout only).
                    Ok(Change::TimedOut) => Ok(Observation::TimedOut(
                        api.get_node(&spec.node).await.map(Box::new),
                    )),
                    other => other.map(|change| Observation::Changed(boxed(change))),
                }
            }
            Intent::GetNode => api
                .get_node(&spec.node)
                .await
                .map(|n| Observation::Node(Box::new(n))),
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

/// Runs the machine for `spec` in `mode` to its end, with the default policy.
async fn drive<A: JobApi + NodeApi + ?Sized>(api: &A, spec: &Spec, mode: Mode) -> Result<Report> {
    run_with(api, spec, mode, Policy::default()).await
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
    let op = |verb, kind| Operation::of_job(verb, kind, job_ref.clone());
    let ns = spec.namespace.as_str();
    let bound = spec.wait_bound();
    let job = retrying(api, bound, || api.get_job(ns, &spec.name))
        .await
        .map_err(|cause| Error::Api {
            op: op(Action::Reading, ObjectKind::Job),
            cause,
        })?;
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let selector = pods_selector(&uid);
    let pods = retrying(api, bound, || api.list_pods(ns, &selector))
        .await
        .map_err(|cause| Error::Api {
            op: op(Action::Listing, ObjectKind::Pod),
            cause,
        })?;
    let pod = newest_pod_of_job(&pods, &uid).ok_or_else(|| Error::Api {
        op: op(Action::Listing, ObjectKind::Pod),
        cause: ApiError::not_found(format!("no pod of job uid {uid} exists")),
    })?;
    retrying(api, bound, || {
        api.pod_log(ns, pod, &spec.container, LOG_LIMIT_BYTES)
    })
    .await
    .map(|log| result::within_limit(log, LOG_LIMIT_BYTES))
    .map_err(|cause| Error::Api {
        op: op(Action::Reading, ObjectKind::Log).with_detail(format!("pod {pod}")),
        cause,
    })
}

/// The name of the latest Pod of the Job with `uid` ([`is_pod_of_job`]).
fn newest_pod_of_job<'p>(
    pods: &'p [k8s_openapi::api::core::v1::Pod],
    uid: &str,
) -> Option<&'p str> {
    pods.iter()
        .filter(|p| is_pod_of_job(p, uid))
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .and_then(|p| p.metadata.name.as_deref())
}

/// Calls `op` until it answers something other than a transient error, backing off between
/// attempts, for at most `bound` of the backend's time.
///
/// A failure whose server said `Retry-After` (API Priority and Fairness' 429, a 503) is sent
/// again only once that has passed ([`ApiError::retry_pause`], at most
/// [`crate::RETRY_AFTER_CAP`]), as client-go does (`checkWait`,
/// `k8s.io/client-go/rest/request.go`); when that would end past `bound`, the failure is the
/// answer at once, rather than a retry the server said it would refuse.
pub(crate) async fn retrying<A, T, F, Fut>(
    api: &A,
    bound: Duration,
    mut op: F,
) -> Result<T, ApiError>
where
    A: Clock + ?Sized,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let deadline = api.now().saturating_add(bound);
    let mut attempt = 0;
    loop {
        match op().await {
            Err(e) if e.is_retryable() => {
                let pause = e.retry_pause(machine::backoff(attempt));
                if api.now().saturating_add(pause) >= deadline {
                    return Err(e);
                }
                api.sleep(pause).await;
                attempt += 1;
            }
            other => return other,
        }
    }
}
