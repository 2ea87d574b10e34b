//! [`Interposed`]: a [`Layer`] over any backend, so a wrapper of every API trait, that records
//! every call, answers injected errors, and runs another actor's writes between two calls. It
//! is what lets a race be staged the same way on the in-memory cluster and on a real apiserver.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::{Answer, ApiError, ApiResult, Clock, ErrorKind, Layer, Request, Verb};

/// One call that went through an [`Interposed`] API.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The verb.
    pub verb: Verb,
    /// The Job, Pod or Node the call names (an Event's `generateName` when it has no name);
    /// the selector for [`Verb::ListJobs`] and [`Verb::ListPods`], the UID for
    /// [`Verb::ListEvents`].
    pub name: String,
    /// The preconditions of a [`Verb::DeleteJob`]; the UID of a [`Verb::EvictPod`]; the
    /// resourceVersion of a [`Verb::ReplaceLease`].
    pub preconditions: Option<Preconditions>,
    /// The backend's time when the call began.
    pub at: Duration,
    /// How it failed, if it did (filled in when it returns).
    pub error: Option<ErrorKind>,
}

/// Another actor's action, run with the backend's API just before a call is served.
pub type Action<A> = Box<dyn FnOnce(Arc<A>) -> BoxFuture<'static, ()> + Send>;

struct Hook<A> {
    verb: Verb,
    /// How many more calls of the verb pass before the hook runs.
    skip: usize,
    action: Action<A>,
}

struct State<A> {
    calls: Vec<Call>,
    hooks: Vec<Hook<A>>,
    faults: VecDeque<(Verb, ApiError)>,
}

/// Every API trait over `A`, recording, injecting and interposing. See the module docs.
pub struct Interposed<A> {
    inner: Arc<A>,
    state: Mutex<State<A>>,
}

impl<A: Clock + 'static> Interposed<A> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<A>) -> Self {
        Interposed {
            inner,
            state: Mutex::new(State {
                calls: Vec::new(),
                hooks: Vec::new(),
                faults: VecDeque::new(),
            }),
        }
    }

    /// The backend below, for another actor's writes (not recorded).
    pub fn inner(&self) -> &Arc<A> {
        &self.inner
    }

    /// Runs `action` before the `(skip + 1)`-th next call of `verb` is served.
    pub fn before<F>(&self, verb: Verb, skip: usize, action: F)
    where
        F: FnOnce(Arc<A>) -> BoxFuture<'static, ()> + Send + 'static,
    {
        self.lock().hooks.push(Hook {
            verb,
            skip,
            action: Box::new(action),
        });
    }

    /// Answers the next `times` calls of `verb` with `error` instead of serving them.
    pub fn fail(&self, verb: Verb, error: ApiError, times: usize) {
        let mut state = self.lock();
        for _ in 0..times {
            state.faults.push_back((verb, error.clone()));
        }
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// How many calls of `verb` were made.
    pub fn count(&self, verb: Verb) -> usize {
        self.lock().calls.iter().filter(|c| c.verb == verb).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<A>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the call, runs a due hook, answers a due fault; returns the call's index.
    async fn enter(&self, request: &Request<'_>) -> Result<usize, ApiError> {
        let verb = request.verb();
        let (index, action) = {
            let mut state = self.lock();
            state.calls.push(Call {
                verb,
                name: request.subject().to_string(),
                preconditions: preconditions(request),
                at: self.inner.now(),
                error: None,
            });
            let due = state
                .hooks
                .iter()
                .position(|h| h.verb == verb && h.skip == 0);
            for hook in state
                .hooks
                .iter_mut()
                .filter(|h| h.verb == verb && h.skip > 0)
            {
                hook.skip -= 1;
            }
            (
                state.calls.len() - 1,
                due.map(|i| state.hooks.remove(i).action),
            )
        };
        if let Some(action) = action {
            action(self.inner.clone()).await;
        }
        let mut state = self.lock();
        if let Some(i) = state.faults.iter().position(|(v, _)| *v == verb) {
            let (_, error) = state.faults.remove(i).expect("position is in range");
            state.calls[index].error = Some(error.kind);
            return Err(error);
        }
        Ok(index)
    }
}

/// The precondition a call carries: a [`Verb::DeleteJob`]'s own, the UID of a
/// [`Verb::EvictPod`], the resourceVersion of a [`Verb::ReplaceLease`].
fn preconditions(request: &Request<'_>) -> Option<Preconditions> {
    match *request {
        Request::DeleteJob { preconditions, .. } => preconditions.cloned(),
        Request::EvictPod { uid, .. } => Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        Request::ReplaceLease { lease } => Some(Preconditions {
            uid: None,
            resource_version: lease.metadata.resource_version.clone(),
        }),
        _ => None,
    }
}

impl<A: Clock + 'static> Layer for Interposed<A> {
    type Below = A;

    fn below(&self) -> &A {
        &self.inner
    }

    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let index = self.enter(&request).await?;
        let answer = serve.await;
        if let Err(e) = &answer {
            self.lock().calls[index].error = Some(e.kind);
        }
        answer
    }
}
