//! [`Probe`]: a backend's calls, passed through, noting when one first answered a finished
//! Job: the moment a run learnt that its Job finished.

use std::sync::Mutex;
use std::time::Instant;

use nodejob_core::{Answer, ApiResult, Change, Layer, Request, Verb, finished};

/// A backend, noting when one of the calls made through it first answered a finished Job.
pub(crate) struct Probe<'a, A: ?Sized> {
    inner: &'a A,
    finished_at: Mutex<Option<Instant>>,
}

impl<'a, A: ?Sized> Probe<'a, A> {
    /// Calls go to `inner`.
    pub(crate) fn new(inner: &'a A) -> Self {
        Probe {
            inner,
            finished_at: Mutex::new(None),
        }
    }

    /// When a call first answered a finished Job, if one did.
    pub(crate) fn finished_at(&self) -> Option<Instant> {
        *self.finished_at.lock().unwrap()
    }
}

impl<A: ?Sized + Sync> Layer for Probe<'_, A> {
    type Below = A;

    fn below(&self) -> &A {
        self.inner
    }

    /// Notes a finished Job read ([`Verb::GetJob`]) or seen changed ([`Verb::WaitJob`]).
    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let answer = serve.await;
        let job = match (request.verb(), &answer) {
            (Verb::GetJob, Ok(Answer::Job(job)))
            | (Verb::WaitJob, Ok(Answer::JobChange(Change::Applied(job)))) => job,
            _ => return answer,
        };
        if finished(job) {
            (self.finished_at.lock().unwrap()).get_or_insert_with(Instant::now);
        }
        answer
    }
}
