//! The polling baseline: core's run [`Machine`] driven by a loop that answers its waits by
//! reading the Job every `interval`, as the Go original (`PollAttempts` x `pollInterval`) and
//! kured do, instead of watching it.
//!
//! Everything but the wait is the runner's own: the same machine decides what to read, create
//! and delete, and every other intent is executed exactly as [`nodejob_core::run_with`] does.
//! So the two differ in one thing only, how the end of a Job is noticed, and a difference in
//! latency or requests between them is the price of polling.
//!
//! ```text
//!   Machine ──WaitJob { since, timeout }──▶ sleep(interval); GET job ─┬ rv changed ─▶ Applied
//!      ▲                                          ▲                   ├ 404 ────────▶ Deleted
//!      │                                          └─────── unchanged ─┤
//!      └───────────────────── Observation ◀───────────────────────────┴ timeout ───▶ TimedOut
//! ```

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use nodejob_core::runner::{Intent, Machine, Mode, Observation, Policy, Report};
use nodejob_core::{ApiResult, Change, JobApi, LOG_LIMIT_BYTES, NodeApi, Result, Spec};

/// Runs the Job of `spec` in `mode` as [`nodejob_core::run_with`] does with the default
/// [`Policy`], except that each wait for the Job reads it every `interval` (first after one
/// `interval`) until its resourceVersion differs from the one last seen, it is gone, or the
/// wait's timeout has passed.
pub async fn run_polling<A: JobApi + NodeApi + ?Sized>(
    api: &A,
    spec: &Spec,
    mode: Mode,
    interval: Duration,
) -> Result<Report> {
    spec.validate()?;
    let (ns, name) = (spec.namespace.as_str(), spec.name.as_str());
    let mut machine = Machine::with_policy(spec, mode, api.now(), Policy::default());
    let mut step = machine.start();
    // The Job as last read, for the `Deleted` a 404 stands for.
    let mut last: Option<Box<Job>> = None;
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
                match poll_job(api, ns, name, since.as_deref(), timeout, interval, &last).await {
                    // As the runner's loop: the node is read when a wait times out.
                    Ok(Change::TimedOut) => Ok(Observation::TimedOut(
                        api.get_node(&spec.node).await.map(Box::new),
                    )),
                    Ok(Change::Applied(job)) => Ok(Observation::Changed(Change::Applied(job))),
                    Ok(Change::Deleted(job)) => Ok(Observation::Changed(Change::Deleted(job))),
                    Err(e) => Err(e),
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
        match &answer {
            Ok(Observation::Job(job) | Observation::Changed(Change::Applied(job))) => {
                last = Some(job.clone());
            }
            Ok(Observation::Changed(Change::Deleted(_))) => last = None,
            _ => {}
        }
        step = machine.step(api.now(), answer.unwrap_or_else(Observation::Failed));
    }
}

/// One wait, polled: reads the Job every `interval` until it differs from `since`, is gone, or
/// `timeout` has passed (one last read at the deadline).
async fn poll_job<A: JobApi + ?Sized>(
    api: &A,
    ns: &str,
    name: &str,
    since: Option<&str>,
    timeout: Duration,
    interval: Duration,
    last: &Option<Box<Job>>,
) -> ApiResult<Change<Box<Job>>> {
    let deadline = api.now().saturating_add(timeout);
    loop {
        let rest = deadline.saturating_sub(api.now());
        if rest.is_zero() {
            return Ok(Change::TimedOut);
        }
        api.sleep(interval.min(rest)).await;
        match api.get_job(ns, name).await {
            Ok(job) if job.metadata.resource_version.as_deref() != since => {
                return Ok(Change::Applied(Box::new(job)));
            }
            Ok(_) => {}
            Err(e) if e.is_not_found() => {
                if let Some(job) = last {
                    return Ok(Change::Deleted(job.clone()));
                }
            }
            Err(e) => return Err(e),
        }
    }
}
