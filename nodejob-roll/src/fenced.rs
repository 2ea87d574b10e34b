//! [`Fenced`]: the API verbs a driver's steps use, each write fenced by the Lease without a
//! request: once any step of the run has seen the Lease lost ([`Fence::lost`]), a step in
//! flight on another node (a drain between two evictions, a host Job's runner deleting its
//! finished Job) writes nothing more (its write answers an error naming the loss), so no write
//! of the run follows the driver's knowledge of the loss, even within the instant it learns it.
//! Both drivers write through it. A [`Layer`]: reads pass through untouched.

use nodejob_core::{Answer, ApiError, ApiResult, ErrorKind, Layer, Request, Verb};

use crate::fence::Fence;

/// `api`'s verbs, writes refused once `fence` knows the Lease lost.
pub struct Fenced<'a, A: ?Sized> {
    api: &'a A,
    fence: &'a Fence,
}

impl<'a, A: ?Sized> Fenced<'a, A> {
    /// `api`, its writes fenced by `fence`.
    pub fn new(api: &'a A, fence: &'a Fence) -> Self {
        Fenced { api, fence }
    }
}

impl<A: ?Sized + Sync> Layer for Fenced<'_, A> {
    type Below = A;

    fn below(&self) -> &A {
        self.api
    }

    /// A write (a dry run too) answers an error naming the loss if the Lease is known lost:
    /// not a passing fault, never retried.
    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let verb = request.verb();
        if verb.writes()
            && let Some(lost) = self.fence.lost()
        {
            let message = format!("not {}: {lost}", doing(verb));
            return Err(ApiError::new(ErrorKind::Other, 0, message));
        }
        serve.await
    }
}

/// What a write does, for the refusal's message.
fn doing(verb: Verb) -> &'static str {
    match verb {
        Verb::CreateJob => "creating a job",
        Verb::DeleteJob => "deleting a job",
        Verb::CreateEvent => "recording an event",
        Verb::PatchNode => "patching a node",
        Verb::PatchNodeConditions => "setting a node's condition",
        Verb::EvictPod => "evicting a pod",
        Verb::CreateLease => "creating a lease",
        Verb::ReplaceLease => "replacing a lease",
        other => other.method(),
    }
}
