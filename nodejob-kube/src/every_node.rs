//! The watch of every Node behind [`NodeApi::wait_nodes`]: a reader task that keeps one watch
//! open and reads it as events come, as a reflector (client-go's informer, kube-runtime's
//! `watcher`) does, and a buffer the calls take from.
//!
//! ```text
//!  reader task: WATCH /api/v1/nodes?resourceVersion=<position>&allowWatchBookmarks=true
//!                 ADDED/MODIFIED/DELETED ─▶ buffered, position moves, callers woken
//!                 BOOKMARK ───────────────▶ position moves
//!                 end of stream, transient ▶ reopen at position (paced)
//!                 410 Gone, other errors ──▶ kept for the next call, reader ends
//!  wait_nodes(since):  since is where the buffer starts? ─no─▶ restart the reader at since
//!                      buffered changes ─▶ all of them; none ─▶ wait for one, at most timeout
//! ```
//!
//! Reading as events come (not when a call asks) is what makes a zero timeout mean "what has
//! happened until now, give or take the network's latency": a watch opened by the call itself
//! could not have answered yet. A whole run costs one watch request (and one more per
//! `timeoutSeconds`), however many changes its nodes go through.
//!
//! [`NodeApi::wait_nodes`]: nodejob_core::NodeApi::wait_nodes

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{WatchEvent, WatchParams};
use kube::{Client, Resource, ResourceExt};
use nodejob_core::{ApiError, ApiResult, Change, NodeChanges};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::classify::{from_kube, from_status};
use crate::watch::{Events, WATCH_TIMEOUT_SECS, open_events, pace};

/// The reader of every node's watch, and what it read that no call took yet.
#[derive(Default)]
pub(crate) struct EveryNode {
    shared: Arc<Shared>,
    reader: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Woken when something is buffered or the reader failed.
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// Where the calls stand: the resourceVersion the buffer starts after. A call from any
    /// other restarts the reader there.
    taken: String,
    /// Changes read and not yet taken, oldest first.
    buffered: Vec<Change<Node>>,
    /// Where the reader stands: the last event's or bookmark's resourceVersion.
    position: String,
    /// Why the reader ended (a 410 Gone, an error not worth resuming): the next call's answer.
    failed: Option<ApiError>,
    /// Bumped at each restart, so a reader left over from before changes nothing.
    generation: u64,
}

impl Drop for EveryNode {
    fn drop(&mut self) {
        if let Some(reader) = self.lock_reader().take() {
            reader.abort();
        }
    }
}

impl EveryNode {
    /// The changes after `since`, at most `timeout` for the first: see the module docs.
    pub(crate) async fn wait(
        &self,
        client: &Client,
        since: &str,
        timeout: Duration,
    ) -> ApiResult<NodeChanges> {
        let deadline = Instant::now() + timeout;
        self.from(client, since);
        loop {
            // Registered before the look, so a change between the look and the wait wakes it.
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = self.shared.lock();
                if let Some(e) = state.failed.take() {
                    // The reader has ended: the next call restarts it.
                    state.taken.clear();
                    return Err(e);
                }
                if !state.buffered.is_empty() || Instant::now() >= deadline {
                    let changes = std::mem::take(&mut state.buffered);
                    state.taken = state.position.clone();
                    return Ok(NodeChanges {
                        changes,
                        resource_version: state.taken.clone(),
                    });
                }
            }
            let _ = tokio::time::timeout_at(deadline, changed).await;
        }
    }

    /// Makes sure a reader runs from `since` on: the one running, if `since` is where the
    /// calls stand, else a new one.
    fn from(&self, client: &Client, since: &str) {
        let mut reader = self.lock_reader();
        let generation = {
            let mut state = self.shared.lock();
            let running = reader.as_ref().is_some_and(|r| !r.is_finished());
            if running && state.taken == since && state.failed.is_none() {
                return;
            }
            state.generation += 1;
            state.taken = since.to_string();
            state.position = since.to_string();
            state.buffered.clear();
            state.failed = None;
            state.generation
        };
        if let Some(old) = reader.take() {
            old.abort();
        }
        let shared = self.shared.clone();
        let client = client.clone();
        *reader = Some(tokio::spawn(read(shared, client, generation)));
    }

    fn lock_reader(&self) -> std::sync::MutexGuard<'_, Option<JoinHandle<()>>> {
        self.reader.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies what the reader of `generation` saw; `false` when that reader is outdated.
    fn record(&self, generation: u64, f: impl FnOnce(&mut State)) -> bool {
        let mut state = self.lock();
        if state.generation != generation {
            return false;
        }
        f(&mut state);
        drop(state);
        self.changed.notify_waiters();
        true
    }
}

/// The reader: reads the watch from the position on, reopening it as it ends, until an error
/// it cannot resume from (kept for the calls) or a restart.
async fn read(shared: Arc<Shared>, client: Client, generation: u64) {
    let mut opened_at = Instant::now();
    loop {
        let position = shared.lock().position.clone();
        let mut stream = match open_watch(&client, &position).await {
            Ok(stream) => stream,
            // A 410 is not retryable: it is the caller's, who lists again.
            Err(e) if e.is_retryable() => {
                pace(opened_at).await;
                opened_at = Instant::now();
                continue;
            }
            Err(e) => {
                shared.record(generation, |s| s.failed = Some(e));
                return;
            }
        };
        opened_at = Instant::now();
        loop {
            let outcome = match stream.next().await {
                Some(Ok(WatchEvent::Added(node) | WatchEvent::Modified(node))) => {
                    Seen::Change(node.resource_version(), Change::Applied(node))
                }
                // The node as it was last, with the resourceVersion of its deletion.
                Some(Ok(WatchEvent::Deleted(node))) => {
                    Seen::Change(node.resource_version(), Change::Deleted(node))
                }
                // A restart from a bookmark's resourceVersion neither repeats nor misses an
                // event (api-concepts#watch-bookmarks).
                Some(Ok(WatchEvent::Bookmark(b))) => Seen::Position(b.metadata.resource_version),
                // An expired resourceVersion comes as an ERROR event with a 410 `Expired`
                // Status; the recovery is a new list
                // (api-concepts#efficient-detection-of-changes): the caller's.
                Some(Ok(WatchEvent::Error(status))) => Seen::Failed(from_status(&status)),
                Some(Err(e)) => Seen::Failed(from_kube(e)),
                // The apiserver ends every watch after `timeoutSeconds`, and may sooner.
                None => Seen::Ended,
            };
            let recorded = match outcome {
                Seen::Change(rv, change) => shared.record(generation, |s| {
                    if let Some(rv) = rv {
                        s.position = rv;
                    }
                    s.buffered.push(change);
                }),
                Seen::Position(rv) => shared.record(generation, |s| s.position = rv),
                Seen::Failed(e) if e.is_retryable() => break,
                Seen::Failed(e) => {
                    shared.record(generation, |s| s.failed = Some(e));
                    return;
                }
                Seen::Ended => break,
            };
            if !recorded {
                return;
            }
        }
        pace(opened_at).await;
    }
}

/// What the reader saw.
#[allow(clippy::large_enum_variant)] // One at a time, moved at once.
enum Seen {
    Change(Option<String>, Change<Node>),
    Position(String),
    Failed(ApiError),
    Ended,
}

/// `GET /api/v1/nodes?watch=true&resourceVersion=<position>&allowWatchBookmarks=true`. An
/// apiserver may refuse the request itself with 410 rather than send an ERROR event.
async fn open_watch(client: &Client, position: &str) -> ApiResult<Events<Node>> {
    let wp = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
    debug_assert!(wp.bookmarks, "kube asks for bookmarks by default");
    let every_node = kube::core::Request::new(Node::url_path(&(), None));
    open_events(client, &every_node, &wp, position)
        .await
        .map_err(from_kube)
}
