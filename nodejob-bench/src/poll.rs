//! The polling baseline: the runner itself ([`nodejob_core::run_with`]), over a [`Layer`] that
//! answers its waits for the Job by reading it every `interval`, as the Go original
//! (`PollAttempts` x `pollInterval`) and kured do, instead of watching it.
//!
//! Everything but the wait is the runner's own: the same machine decides what to read, create
//! and delete, and the same loop carries it out. So the two differ in one thing only, how the
//! end of a Job is noticed, and a difference in latency or requests between them is the price
//! of polling.
//!
//! ```text
//!   runner ──wait_job(since, timeout)──▶ sleep(interval); GET job ─┬ rv changed ─▶ Applied
//!      ▲                                       ▲                   ├ 404 ────────▶ Deleted
//!      │                                       └─────── unchanged ─┤
//!      └──────────────────── Change ◀──────────────────────────────┴ timeout ───▶ TimedOut
//! ```

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use nodejob_core::runner::{Mode, Policy, Report};
use nodejob_core::{
    Answer, ApiResult, Change, JobApi, Layer, NodeApi, Request, Result, Spec, run_with,
};

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
    let polling = Polling {
        api,
        interval,
        last: Mutex::default(),
    };
    run_with(&polling, spec, mode, Policy::default()).await
}

/// `api`, its [`JobApi::wait_job`] answered by polling; every other verb passed on.
struct Polling<'a, A: ?Sized> {
    api: &'a A,
    interval: Duration,
    /// Each Job as last answered, by `(namespace, name)`, for the `Deleted` a 404 stands for.
    last: Mutex<BTreeMap<(String, String), Job>>,
}

impl<A: JobApi + ?Sized> Layer for Polling<'_, A> {
    type Below = A;

    fn below(&self) -> &A {
        self.api
    }

    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let answer = match request {
            Request::WaitJob {
                namespace,
                name,
                since,
                timeout,
            } => (self.poll(namespace, name, since, timeout).await).map(Answer::JobChange),
            _ => serve.await,
        };
        // The Job as the runner last saw it: read, created, or changed (only a Job's verbs
        // answer a Job).
        let key = || {
            let namespace = request.namespace().unwrap_or_default();
            (namespace.to_string(), request.subject().to_string())
        };
        match &answer {
            Ok(Answer::Job(job) | Answer::JobChange(Change::Applied(job))) => {
                self.last.lock().unwrap().insert(key(), job.clone());
            }
            Ok(Answer::JobChange(Change::Deleted(_))) => {
                self.last.lock().unwrap().remove(&key());
            }
            _ => {}
        }
        answer
    }
}

impl<A: JobApi + ?Sized> Polling<'_, A> {
    /// One wait, polled: reads the Job every `interval` until it differs from `since`, is gone,
    /// or `timeout` has passed (one last read at the deadline).
    async fn poll(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        let deadline = self.api.now().saturating_add(timeout);
        loop {
            let rest = deadline.saturating_sub(self.api.now());
            if rest.is_zero() {
                return Ok(Change::TimedOut);
            }
            self.api.sleep(self.interval.min(rest)).await;
            match self.api.get_job(namespace, name).await {
                Ok(job) if job.metadata.resource_version.as_deref() != since => {
                    return Ok(Change::Applied(job));
                }
                Ok(_) => {}
                Err(e) if e.is_not_found() => {
                    let key = (namespace.to_string(), name.to_string());
                    if let Some(job) = self.last.lock().unwrap().get(&key) {
                        return Ok(Change::Deleted(job.clone()));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}
