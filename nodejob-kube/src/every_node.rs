//! The watch of every Node, kept open across [`NodeApi::wait_nodes`] calls: what a reflector
//! (client-go's informer, kube-runtime's `watcher`) holds open after its list.
//!
//! ```text
//!  wait_nodes(since) ── open stream at `since`? ──yes──▶ read on ─┐
//!                          │ no                                  │
//!                          ▼                                     ▼
//!       WATCH /api/v1/nodes?resourceVersion=<since>    ADDED/MODIFIED ─▶ Applied
//!             &allowWatchBookmarks=true                DELETED ───────▶ Deleted
//!                                                      BOOKMARK ──────▶ position only
//!                                                      end of stream ─▶ reopen at position
//!                                                      410 ───────────▶ Gone: the caller lists
//! ```
//!
//! A call waits for the first change, then takes every event already received behind it
//! without waiting, so a burst costs one answer. The stream stays open between calls,
//! positioned at the resourceVersion last answered: a whole roll costs one watch request (and
//! one more per `timeoutSeconds`), however many changes its nodes go through.
//!
//! [`NodeApi::wait_nodes`]: nodejob_core::NodeApi::wait_nodes

use std::sync::Mutex;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use nodejob_core::{ApiError, ApiResult, Change, NodeChanges};
use tokio::time::Instant;

use crate::classify::{from_kube, from_status};
use crate::watch::{Events, WATCH_TIMEOUT_SECS, pace};

/// The open watch of every node, if any, and where it stands.
#[derive(Default)]
pub(crate) struct EveryNode {
    open: Mutex<Option<Open>>,
}

struct Open {
    /// The resourceVersion last answered (or the stream's start): a call from it reads on.
    position: String,
    stream: Option<Events<Node>>,
    opened_at: Instant,
}

/// What one event does to the answer being built.
#[allow(clippy::large_enum_variant)] // One at a time, moved at once.
enum Step {
    /// A change, and the resourceVersion after it.
    Change(Change<Node>, Option<String>),
    /// Only the position moves (a bookmark).
    Position(String),
    /// The stream ended or broke (transient): reopen from the position.
    Reopen,
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
        let mut open = self
            .take(since)
            .unwrap_or_else(|| Open::at(since.to_string()));
        let mut changes = Vec::new();
        let answer = loop {
            let first = changes.is_empty();
            let stream = match open.stream.as_mut() {
                Some(stream) => stream,
                None => {
                    let opened =
                        tokio::time::timeout_at(deadline, open_watch(client, &open.position)).await;
                    match opened {
                        Err(_elapsed) => break Ok(()),
                        Ok(Err(e)) => break Err(e),
                        Ok(Ok(stream)) => {
                            open.opened_at = Instant::now();
                            open.stream.insert(stream)
                        }
                    }
                }
            };
            // The first change is waited for, until the deadline; those behind it are taken
            // only when already there.
            let event = if first {
                match tokio::time::timeout_at(deadline, stream.next()).await {
                    Err(_elapsed) => break Ok(()),
                    Ok(event) => event,
                }
            } else {
                match stream.next().now_or_never() {
                    None => break Ok(()),
                    Some(event) => event,
                }
            };
            match step(event) {
                Ok(Step::Change(change, rv)) => {
                    if let Some(rv) = rv {
                        open.position = rv;
                    }
                    changes.push(change);
                }
                Ok(Step::Position(rv)) => open.position = rv,
                Ok(Step::Reopen) => {
                    open.stream = None;
                    if !first {
                        break Ok(());
                    }
                    let paced = tokio::time::timeout_at(deadline, pace(open.opened_at)).await;
                    if paced.is_err() {
                        break Ok(());
                    }
                }
                // Gone: the caller lists again; the stream is over.
                Err(e) => {
                    open.stream = None;
                    break Err(e);
                }
            }
        };
        let resource_version = open.position.clone();
        match answer {
            // Changes already taken are answered; a failure behind them is met again on the
            // next call, from the position after them.
            Err(e) if changes.is_empty() => Err(e),
            _ => {
                self.put(open);
                Ok(NodeChanges {
                    changes,
                    resource_version,
                })
            }
        }
    }

    fn take(&self, since: &str) -> Option<Open> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.take().filter(|o| o.position == since)
    }

    fn put(&self, open: Open) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = Some(open);
    }
}

impl Open {
    fn at(position: String) -> Self {
        Open {
            position,
            stream: None,
            opened_at: Instant::now(),
        }
    }
}

/// What `event` does: a change, a position, a reopen, or the caller's error (410 Gone, or
/// anything not worth resuming).
fn step(event: Option<kube::Result<WatchEvent<Node>>>) -> ApiResult<Step> {
    match event {
        Some(Ok(WatchEvent::Added(node) | WatchEvent::Modified(node))) => {
            let rv = node.resource_version();
            Ok(Step::Change(Change::Applied(node), rv))
        }
        // The node as it was last, with the resourceVersion of its deletion.
        Some(Ok(WatchEvent::Deleted(node))) => {
            let rv = node.resource_version();
            Ok(Step::Change(Change::Deleted(node), rv))
        }
        // A restart from a bookmark's resourceVersion neither repeats nor misses an event
        // (api-concepts#watch-bookmarks).
        Some(Ok(WatchEvent::Bookmark(bookmark))) => {
            Ok(Step::Position(bookmark.metadata.resource_version))
        }
        // An expired resourceVersion comes as an ERROR event with a 410 `Expired` Status, then
        // the stream ends; the recovery is a new list (api-concepts#efficient-detection-of-changes).
        Some(Ok(WatchEvent::Error(status))) => resumable(from_status(&status)),
        Some(Err(e)) => resumable(from_kube(e)),
        // The apiserver ends every watch after `timeoutSeconds`, and may sooner.
        None => Ok(Step::Reopen),
    }
}

/// A transient failure is resumed from the position; a 410 and the rest are the caller's.
fn resumable(e: ApiError) -> ApiResult<Step> {
    if e.is_retryable() && !e.is_gone() {
        Ok(Step::Reopen)
    } else {
        Err(e)
    }
}

/// `GET /api/v1/nodes?watch=true&resourceVersion=<position>&allowWatchBookmarks=true`. An
/// apiserver may refuse the request itself with 410 rather than send an ERROR event.
async fn open_watch(client: &Client, position: &str) -> ApiResult<Events<Node>> {
    let wp = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
    debug_assert!(wp.bookmarks, "kube asks for bookmarks by default");
    let mut request = kube::core::Request::new("/api/v1/nodes")
        .watch(&wp, position)
        .map_err(|e| from_kube(kube::Error::BuildRequest(e)))?;
    request.extensions_mut().insert("watch");
    let events = client
        .request_events::<Node>(request)
        .await
        .map_err(from_kube)?;
    Ok(Box::pin(events))
}
