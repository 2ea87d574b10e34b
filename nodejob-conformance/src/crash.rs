//! [`Crashing`]: a [`Layer`] over any backend, so a wrapper of every API trait, that stops its
//! caller at its Nth write, as a driver that crashed there would stop, and shows every write to
//! an [`Observe`]r as it is made. It is how the drivers' tests prove that a rerun after a crash
//! at any step resumes, and check their invariants after every write.
//!
//! A write is a call that changes the cluster: create or delete a Job, create an Event, patch
//! a Node, evict a Pod, create or replace a Lease. The crash point is either *before* the write
//! is sent (the cluster never saw it) or *after* it was served and before its answer is seen
//! (the cluster has it, the driver does not know).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nodejob_core::{Answer, ApiResult, Layer, Request, Verb};

/// One write of a [`Crashing`] API, as its [`Observe`]r sees it.
#[derive(Clone, Debug)]
pub struct Write {
    /// Writes counted from 0.
    pub index: usize,
    /// The verb.
    pub verb: Verb,
    /// What it writes to: `namespace/name`, or a Node's name.
    pub target: String,
    /// What it sends: the object as JSON, a node patch's changes; empty for a delete or an
    /// eviction.
    pub body: String,
    /// A node patch's resourceVersion precondition: the apiserver refuses the patch (409)
    /// unless the node is still at it, so a patch decided on an older read changes nothing.
    pub precondition: Option<String>,
}

impl std::fmt::Display for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "write {} ({:?} {})", self.index, self.verb, self.target)
    }
}

/// Sees each write of a [`Crashing`] API.
pub trait Observe: Send + Sync {
    /// Before the write is sent.
    fn before(&self, write: &Write) {
        let _ = write;
    }
    /// After it was served, whatever the answer.
    fn after(&self, write: &Write) {
        let _ = write;
    }
}

/// Observes nothing.
impl Observe for () {}

/// Every API trait over `A`, stopping its caller forever at a chosen write and showing every
/// write to `O`. See the module docs.
pub struct Crashing<A, O = ()> {
    inner: Arc<A>,
    observer: O,
    /// The write to stop at (0-based), and whether after it was served.
    at: Option<(usize, bool)>,
    /// Or the `n`-th (0-based) write of a verb to stop at, and whether after it was served.
    at_verb: Option<(Verb, usize, bool)>,
    /// Writes of each verb begun so far.
    by_verb: std::sync::Mutex<std::collections::BTreeMap<Verb, usize>>,
    crashed: tokio::sync::Notify,
    writes: AtomicUsize,
}

impl<A, O: Observe> Crashing<A, O> {
    /// `inner`, its writes shown to `observer`, never stopping.
    pub fn new(inner: Arc<A>, observer: O) -> Self {
        Crashing {
            inner,
            observer,
            at: None,
            at_verb: None,
            by_verb: std::sync::Mutex::default(),
            crashed: tokio::sync::Notify::new(),
            writes: AtomicUsize::new(0),
        }
    }

    /// Stops the caller forever at write `write` (0-based): before it is sent, or (`after`)
    /// after it was served and before its answer is returned.
    pub fn crashing_at(mut self, write: usize, after: bool) -> Self {
        self.at = Some((write, after));
        self
    }

    /// Stops the caller forever at its `nth` (0-based) write of `verb`: before it is sent, or
    /// (`after`) after it was served and before its answer is returned. E.g. a driver that
    /// crashes right before it creates its first Job: `crashing_at_verb(Verb::CreateJob,
    /// 0, false)`, whatever writes came before.
    pub fn crashing_at_verb(mut self, verb: Verb, nth: usize, after: bool) -> Self {
        self.at_verb = Some((verb, nth, after));
        self
    }

    /// Resolves once the crash point was reached (at once if it already was).
    pub async fn crashed(&self) {
        self.crashed.notified().await;
    }

    /// How many writes were made (begun) so far.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    /// The observer.
    pub fn observer(&self) -> &O {
        &self.observer
    }

    /// The backend below.
    pub fn inner(&self) -> &Arc<A> {
        &self.inner
    }

    /// Serves one write: observed before and after, and stopped at the crash point.
    async fn write(
        &self,
        request: Request<'_>,
        served: impl Future<Output = ApiResult<Answer>>,
    ) -> ApiResult<Answer> {
        let verb = request.verb();
        let write = Write {
            index: self.writes.fetch_add(1, Ordering::SeqCst),
            verb,
            target: match request.namespace() {
                Some(namespace) => format!("{namespace}/{}", request.subject()),
                None => request.subject().to_string(),
            },
            body: body(&request),
            precondition: match &request {
                Request::PatchNode {
                    resource_version, ..
                } => Some(resource_version.to_string()),
                _ => None,
            },
        };
        let nth = {
            let mut by_verb = self.by_verb.lock().unwrap();
            let n = by_verb.entry(verb).or_default();
            *n += 1;
            *n - 1
        };
        self.observer.before(&write);
        self.stop_if(write.index, verb, nth, false).await;
        let answer = served.await;
        self.observer.after(&write);
        self.stop_if(write.index, verb, nth, true).await;
        answer
    }

    async fn stop_if(&self, index: usize, verb: Verb, nth: usize, after: bool) {
        if self.at == Some((index, after)) || self.at_verb == Some((verb, nth, after)) {
            // notify_one keeps a permit when nobody waits yet, so `crashed` still sees it.
            self.crashed.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

/// What a write sends, for an observer: the object as JSON, a node patch's changes; empty for
/// a delete or an eviction.
fn body(request: &Request<'_>) -> String {
    match *request {
        Request::CreateJob { job } => json(job),
        Request::CreateEvent { event } => json(event),
        Request::CreateLease { lease } | Request::ReplaceLease { lease } => json(lease),
        Request::PatchNode { changes, .. } => format!("{changes:?}"),
        _ => String::new(),
    }
}

/// `object` as JSON.
fn json<T: serde::Serialize>(object: &T) -> String {
    serde_json::to_string(object).unwrap_or_else(|e| format!("<not JSON: {e}>"))
}

impl<A: Send + Sync, O: Observe> Layer for Crashing<A, O> {
    type Below = A;

    fn below(&self) -> &A {
        &self.inner
    }

    /// A write ([`Request::writes`]: a dry run is not one) is observed and may stop the caller;
    /// anything else passes.
    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        if request.writes() {
            self.write(request, serve).await
        } else {
            serve.await
        }
    }
}
