//! [`Weighed`]: a backend's calls passed through, each answer weighed as the JSON of the
//! objects it carries: about the bytes the apiserver would send for it (a list's envelope, a
//! watch event's frame and a Status are left out). What a roll costs the apiserver and the
//! network grows with this, where a count of requests does not show it: a LIST of every node
//! is one request at any size.

use std::collections::BTreeMap;
use std::sync::Mutex;

use nodejob_core::{Answer, ApiResult, Change, Layer, Request, Verb};
use serde::Serialize;

/// A backend, its answers weighed by verb.
pub struct Weighed<'a, A: ?Sized> {
    inner: &'a A,
    bytes: Mutex<BTreeMap<Verb, u64>>,
}

impl<'a, A: ?Sized> Weighed<'a, A> {
    /// Calls go to `inner`.
    pub fn new(inner: &'a A) -> Self {
        Weighed {
            inner,
            bytes: Mutex::new(BTreeMap::new()),
        }
    }

    /// The bytes answered so far, by verb.
    pub fn bytes(&self) -> BTreeMap<Verb, u64> {
        self.bytes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl<A: ?Sized + Sync> Layer for Weighed<'_, A> {
    type Below = A;

    fn below(&self) -> &A {
        self.inner
    }

    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let answer = serve.await;
        if let Ok(answer) = &answer {
            let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
            *bytes.entry(request.verb()).or_default() += weight(answer);
        }
        answer
    }
}

/// The JSON bytes of the objects `answer` carries.
pub fn weight(answer: &Answer) -> u64 {
    match answer {
        Answer::Job(o) => size(o),
        Answer::Jobs(o) => size(o),
        Answer::Pods(o) => size(o),
        Answer::Log(o) => o.len() as u64,
        Answer::Events(o) => size(o),
        Answer::Event(o) => size(o),
        Answer::JobChange(c) => change(c),
        Answer::Node(o) => size(o),
        Answer::Nodes(o) => size(o),
        Answer::NodeChange(c) => change(c),
        Answer::NodesAt(o) => size(&o.nodes),
        Answer::NodeChanges(o) => o.changes.iter().map(change).sum(),
        Answer::Pod(o) => size(o),
        Answer::PodChange(c) => change(c),
        Answer::Lease(o) => size(o),
        // A Status, or nothing.
        _ => 0,
    }
}

fn change<K: Serialize>(c: &Change<K>) -> u64 {
    match c {
        Change::Applied(o) | Change::Deleted(o) => size(o),
        Change::TimedOut => 0,
    }
}

fn size<T: Serialize + ?Sized>(o: &T) -> u64 {
    serde_json::to_vec(o).map_or(0, |v| v.len() as u64)
}
