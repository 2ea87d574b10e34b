//! [`watch_until`]: wait until one named object satisfies a predicate, event-driven, bounded,
//! re-reading the object after a watch expired (410 Gone). Every wait of the crate is this one
//! loop: a Node turning Ready, a Job or a Pod being gone, a Lease changing hands.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{ApiResult, Change, Clock};
use crate::error::ApiError;
use crate::runner::retrying;

/// Where a wait starts.
#[derive(Clone, Debug, PartialEq)]
pub enum From<K> {
    /// Read the object first (one GET; NotFound is "absent").
    Read,
    /// The object as the caller last saw it (`None`: absent): no GET, the watch starts after its
    /// resourceVersion.
    Seen(Option<K>),
}

/// How a [`watch_until`] ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Until<K> {
    /// The predicate held on this state (`None`: the object is absent).
    Met(Option<K>),
    /// The bound ran out; this is the last state seen.
    TimedOut(Option<K>),
}

/// The verb that failed, for the caller's error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reading the object (the first read, or after an expired watch).
    Read,
    /// Watching it.
    Watch,
}

/// Waits until `done` holds on the object `get` reads and `wait` watches, at most `bound` of
/// the backend's time.
///
/// - `get()` reads the object; NotFound means absent.
/// - `wait(since, timeout)` answers the next change after resourceVersion `since`
///   (`JobApi::wait_job`, `NodeApi::wait_node`, `PodApi::wait_pod`, ...).
/// - `done(state)` is asked of the starting state and of every state seen since; `None` is
///   "absent".
///
/// Transient errors are retried with backoff inside the bound. A watch that expired (410) is
/// followed by a fresh read and resumes after that object's resourceVersion, so no change is
/// missed and none reported twice. Other errors end the wait with the step that failed.
pub async fn watch_until<A, K, G, GF, W, WF, P>(
    api: &A,
    bound: Duration,
    from: From<K>,
    get: G,
    wait: W,
    mut done: P,
) -> Result<Until<K>, (Step, ApiError)>
where
    A: Clock + ?Sized,
    K: Metadata<Ty = ObjectMeta> + Clone,
    G: Fn() -> GF,
    GF: Future<Output = ApiResult<K>>,
    W: Fn(Option<String>, Duration) -> WF,
    WF: Future<Output = ApiResult<Change<K>>>,
    P: FnMut(Option<&K>) -> bool,
{
    let deadline = api.now().saturating_add(bound);
    let read = || async {
        match retrying(api, deadline.saturating_sub(api.now()), &get).await {
            Ok(k) => Ok(Some(k)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err((Step::Read, e)),
        }
    };
    let mut state = match from {
        From::Read => read().await?,
        From::Seen(state) => state,
    };
    // After the object's own resourceVersion; an absent object: from now.
    let mut since = state.as_ref().and_then(version);
    loop {
        if done(state.as_ref()) {
            return Ok(Until::Met(state));
        }
        let timeout = deadline.saturating_sub(api.now());
        if timeout.is_zero() {
            return Ok(Until::TimedOut(state));
        }
        // Each attempt waits only what is left: a retry after a backoff must not carry the
        // timeout worked out before it, or the wait would overrun the bound by the backoffs.
        let change = retrying(api, timeout, || {
            wait(since.clone(), deadline.saturating_sub(api.now()))
        })
        .await;
        match change {
            Ok(Change::Applied(k)) => {
                since = version(&k);
                state = Some(k);
            }
            Ok(Change::Deleted(k)) => {
                since = version(&k);
                state = None;
            }
            Ok(Change::TimedOut) => {}
            Err(e) if e.is_gone() => {
                state = read().await?;
                since = state.as_ref().and_then(version);
            }
            Err(e) => return Err((Step::Watch, e)),
        }
    }
}

fn version<K: Metadata<Ty = ObjectMeta>>(k: &K) -> Option<String> {
    k.metadata().resource_version.clone()
}
