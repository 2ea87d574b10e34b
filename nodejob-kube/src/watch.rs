//! Waiting for the next change of one named object over a watch that stays open across waits.
//!
//! ```text
//!  wait(since) ── open watch positioned at `since`? ──yes──▶ read on ──┐
//!                        │ no                                         │
//!                        ▼                                            ▼
//!        WATCH ?fieldSelector=metadata.name=<name>      ADDED/MODIFIED ─▶ Applied
//!              &resourceVersion=<since>                  DELETED ───────▶ Deleted
//!              &allowWatchBookmarks=true                 BOOKMARK ──────▶ position only, read on
//!                                                        end of stream ─▶ reopen at position
//!                                                        410 ───────────▶ re-list by name, reopen
//! ```
//!
//! One [`OpenWatch`] per object is kept between waits, positioned at the resourceVersion of the
//! last change it returned; a wait whose `since` is that resourceVersion reads on from the same
//! stream, so a whole run costs one watch request however many status changes its Job goes
//! through. A wait with another `since` closes it and opens a new one from `since`.
//!
//! A change that ends the waiting on its object ([`ends_waiting`]: its deletion, a Job finished)
//! closes the stream once it is answered: a run's watch ends with the run, so a client that runs
//! thousands of Jobs holds no apiserver watcher (nor connection) per finished one. Its position
//! is kept: a later wait from it opens a new watch there and misses nothing.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::core::Request;
use kube::{Client, Resource, ResourceExt};
use nodejob_core::{ApiError, ApiResult, Change, finished};
use tokio::time::Instant;

use crate::classify::{from_kube, from_status};
use crate::transport::call_json;

/// The watch's `timeoutSeconds`: the apiserver ends the watch after this long, and it is reopened
/// from the last resourceVersion. Independent of any one wait's timeout, so that the stream
/// outlives the wait that opened it and the next wait reads on. kube's own default (290s): under
/// the 300s idle timeout common to load balancers in front of apiservers.
pub(crate) const WATCH_TIMEOUT_SECS: u32 = 290;

/// A stream that ends sooner than this after it was opened is reopened only once this has passed,
/// so a server (or proxy) that closes watches at once costs one request a second, not a busy loop.
const MIN_WATCH_SPAN: Duration = Duration::from_secs(1);

/// Open watches (and last-seen objects) kept at most: the least recently used is dropped beyond.
const MAX_TRACKED: usize = 32;

pub(crate) type Events<K> = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<K>>> + Send>>;

/// An object whose state can end the waiting on it.
pub(crate) trait Settled {
    /// Whether whoever waits on this object stops once it is in this state.
    fn settled(&self) -> bool;
}

/// A Job that has finished (and is not being deleted): its run reads the result by other verbs
/// and never waits on it again. One being deleted is waited on until it is gone.
impl Settled for Job {
    fn settled(&self) -> bool {
        finished(self) && self.metadata.deletion_timestamp.is_none()
    }
}

/// Nodes are waited on until Ready again, and again for the next reboot: never settled.
impl Settled for Node {
    fn settled(&self) -> bool {
        false
    }
}

/// Pods are waited on until they are gone: only their deletion ends the waiting.
impl Settled for Pod {
    fn settled(&self) -> bool {
        false
    }
}

/// Whether `change` ends the waiting on its object, so that its watch is closed once the change
/// is answered: its deletion, or a state it is [`Settled`] in.
pub(crate) fn ends_waiting<K: Settled>(change: &Change<K>) -> bool {
    match change {
        Change::Deleted(_) => true,
        Change::Applied(object) => object.settled(),
        Change::TimedOut => false,
    }
}

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub(crate) type Key = (String, String);

/// A watch on one object, between waits.
pub(crate) struct OpenWatch<K> {
    /// The resourceVersion of the object state the caller last had from this watch (its `since`,
    /// then each change returned): a wait with this `since` reads on.
    seen: Option<String>,
    /// Where the stream stands: the last event's or bookmark's resourceVersion. A reopened stream
    /// starts here.
    position: String,
    /// The response being read; `None` once it ended or broke.
    stream: Option<Events<K>>,
    /// When `stream` was opened.
    opened_at: Instant,
}

impl<K> OpenWatch<K> {
    fn at(seen: Option<String>, position: String) -> Self {
        OpenWatch {
            seen,
            position,
            stream: None,
            opened_at: Instant::now(),
        }
    }
}

/// What is known of one object between calls.
struct Tracked<K> {
    /// The last state seen through any verb (get, create, watch).
    last: Option<K>,
    /// Whether the object was seen gone after `last` (a DELETED, a 404, a re-list without it).
    gone: bool,
    watch: Option<OpenWatch<K>>,
    used: u64,
}

/// What is known of one object's last state.
enum Last<K> {
    /// Its last state seen.
    Present(K),
    /// It was seen gone since (a DELETED, a 404, a re-list without it).
    Gone,
    /// Never seen through this backend (the caller had it from elsewhere, e.g. a list).
    Unknown,
}

/// The objects of one kind that were read or waited on, by name.
pub(crate) struct Tracker<K> {
    inner: Mutex<Inner<K>>,
}

struct Inner<K> {
    tracked: HashMap<Key, Tracked<K>>,
    tick: u64,
}

impl<K: Clone> Tracker<K> {
    pub(crate) fn new() -> Self {
        Tracker {
            inner: Mutex::new(Inner {
                tracked: HashMap::new(),
                tick: 0,
            }),
        }
    }

    fn with<T>(&self, key: &Key, f: impl FnOnce(&mut Tracked<K>) -> T) -> T {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        if !inner.tracked.contains_key(key) && inner.tracked.len() >= MAX_TRACKED {
            let oldest = inner
                .tracked
                .iter()
                .min_by_key(|(_, t)| t.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                inner.tracked.remove(&oldest);
            }
        }
        let tracked = inner.tracked.entry(key.clone()).or_insert(Tracked {
            last: None,
            gone: false,
            watch: None,
            used: tick,
        });
        tracked.used = tick;
        f(tracked)
    }

    /// Records `obj` as the object's current state.
    pub(crate) fn saw(&self, key: &Key, obj: &K) {
        self.with(key, |t| {
            t.last = Some(obj.clone());
            t.gone = false;
        });
    }

    /// Records that the object is gone.
    pub(crate) fn saw_gone(&self, key: &Key) {
        self.with(key, |t| t.gone = true);
    }

    /// What is known of the object's last state.
    fn last(&self, key: &Key) -> Last<K> {
        self.with(key, |t| match (&t.last, t.gone) {
            (_, true) => Last::Gone,
            (Some(obj), false) => Last::Present(obj.clone()),
            (None, false) => Last::Unknown,
        })
    }

    /// The object's last state seen, if it is the state of resourceVersion `rv`: a
    /// resourceVersion names one state of the object, so this is what a GET of that version
    /// would answer.
    pub(crate) fn at_version(&self, key: &Key, rv: &str) -> Option<K>
    where
        K: Resource,
    {
        match self.last(key) {
            Last::Present(obj) if obj.meta().resource_version.as_deref() == Some(rv) => Some(obj),
            _ => None,
        }
    }

    /// The open watch positioned at `since`; any other watch of the object is closed.
    fn take(&self, key: &Key, since: &str) -> Option<OpenWatch<K>> {
        self.with(key, |t| t.watch.take())
            .filter(|w| w.seen.as_deref() == Some(since))
    }

    fn put(&self, key: &Key, watch: OpenWatch<K>) {
        self.with(key, |t| t.watch = Some(watch));
    }

    /// How many watches are open (or resumable) right now.
    #[cfg(test)]
    fn open(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tracked.values().filter(|t| t.watch.is_some()).count()
    }
}

/// One object to wait on: what is known of it, and where to watch and list it. Any resource
/// type: Jobs, Nodes and Pods are waited on the same way.
pub(crate) struct Watched<'a, K: Clone> {
    /// Sends the watch and the re-list.
    pub(crate) client: &'a Client,
    /// What is known of the objects of this kind.
    pub(crate) tracker: &'a Tracker<K>,
    /// The collection's URL path (namespaced or cluster-wide), watched and listed by name.
    pub(crate) collection: Request,
    /// The object's `(namespace, name)`, the namespace empty for cluster-scoped kinds.
    pub(crate) key: Key,
}

impl<K> Watched<'_, K>
where
    K: Resource<DynamicType = ()>
        + Settled
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    fn name(&self) -> &str {
        &self.key.1
    }

    /// `pod namespace/name`, or `node name` for a cluster-scoped object.
    fn describe(&self) -> String {
        let kind = K::kind(&()).to_lowercase();
        match &self.key {
            (ns, name) if ns.is_empty() => format!("{kind} {name}"),
            (ns, name) => format!("{kind} {ns}/{name}"),
        }
    }

    /// The next change after `since` (after now when `None`), at most `timeout`.
    pub(crate) async fn wait(
        &self,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<K>> {
        let deadline = Instant::now() + timeout;
        let mut watch = match since {
            Some(rv) => self
                .tracker
                .take(&self.key, rv)
                .unwrap_or_else(|| OpenWatch::at(Some(rv.to_string()), rv.to_string())),
            // "After now": the object as it is and the collection's resourceVersion, from which a
            // watch delivers exactly the changes that follow (the list-then-watch pattern of
            // https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).
            None => match tokio::time::timeout_at(deadline, self.relist()).await {
                Err(_elapsed) => return Ok(Change::TimedOut),
                Ok(listed) => {
                    let (obj, list_rv) = listed?;
                    let seen = obj.as_ref().and_then(|o| o.resource_version());
                    OpenWatch::at(seen, list_rv)
                }
            },
        };
        let answer = match tokio::time::timeout_at(deadline, self.next_change(&mut watch)).await {
            Ok(answer) => answer,
            Err(_elapsed) => Ok(Change::TimedOut),
        };
        if let Ok(change) = &answer {
            if let Change::Applied(obj) | Change::Deleted(obj) = change {
                watch.seen = obj.resource_version();
            }
            if ends_waiting(change) {
                // Closes the response: the apiserver's watcher and the connection go with it.
                watch.stream = None;
            }
        }
        self.tracker.put(&self.key, watch);
        answer
    }

    /// Reads `watch` (opening or reopening it as needed) until a change of the object.
    ///
    /// Cancel-safe at every await: dropped by the wait's timeout, `watch` still describes where
    /// to resume.
    async fn next_change(&self, watch: &mut OpenWatch<K>) -> ApiResult<Change<K>> {
        loop {
            let stream = match &mut watch.stream {
                Some(stream) => stream,
                None => {
                    let wp = WatchParams::default()
                        .fields(&format!("metadata.name={}", self.name()))
                        .timeout(WATCH_TIMEOUT_SECS);
                    debug_assert!(wp.bookmarks, "kube asks for bookmarks by default");
                    match self.open(&wp, &watch.position).await {
                        Ok(stream) => {
                            watch.opened_at = Instant::now();
                            watch.stream.insert(stream)
                        }
                        // An apiserver may refuse the watch request itself with 410 (rather
                        // than start it and send an ERROR event): same recovery.
                        Err(err) => {
                            let err = from_kube(err);
                            if !err.is_gone() {
                                return Err(err);
                            }
                            match self.recover(watch).await? {
                                Some(change) => return Ok(change),
                                None => continue,
                            }
                        }
                    }
                }
            };
            match stream.next().await {
                Some(Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj))) => {
                    self.advance(watch, &obj);
                    self.tracker.saw(&self.key, &obj);
                    return Ok(Change::Applied(obj));
                }
                Some(Ok(WatchEvent::Deleted(obj))) => {
                    // The object as it was last, with the resourceVersion of its deletion.
                    self.advance(watch, &obj);
                    self.tracker.saw(&self.key, &obj);
                    self.tracker.saw_gone(&self.key);
                    return Ok(Change::Deleted(obj));
                }
                // A bookmark carries only a resourceVersion; a watch restarted from it neither
                // repeats nor misses an event (meta/v1 `WatchEvent` docs, api-concepts
                // #watch-bookmarks): only the position moves.
                Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                    watch.position = bookmark.metadata.resource_version;
                }
                // An expired resourceVersion comes as an ERROR event carrying a 410 `Expired`
                // Status, after which the apiserver ends the stream. The documented recovery is
                // to read the object(s) again and watch from the resourceVersion that read
                // returned (api-concepts#efficient-detection-of-changes): see `recover`.
                Some(Ok(WatchEvent::Error(status))) => {
                    if let Some(change) = self.on_stream_error(watch, from_status(&status)).await? {
                        return Ok(change);
                    }
                }
                Some(Err(err)) => {
                    if let Some(change) = self.on_stream_error(watch, from_kube(err)).await? {
                        return Ok(change);
                    }
                }
                // The apiserver ends every watch after `timeoutSeconds` (and may end it sooner):
                // reopen from the position.
                None => {
                    watch.stream = None;
                    pace(watch.opened_at).await;
                }
            }
        }
    }

    /// [`open_events`] on this object's collection.
    async fn open(&self, wp: &WatchParams, position: &str) -> kube::Result<Events<K>> {
        open_events(self.client, &self.collection, wp, position).await
    }

    fn advance(&self, watch: &mut OpenWatch<K>, obj: &K) {
        if let Some(rv) = obj.resource_version() {
            watch.position = rv;
        }
    }

    /// A watch stream that failed (an ERROR event, or a broken connection) is closed. A 410
    /// Gone is recovered ([`Self::recover`]); a transient failure is resumed from the position,
    /// paced, never reported; anything else is the caller's.
    async fn on_stream_error(
        &self,
        watch: &mut OpenWatch<K>,
        err: ApiError,
    ) -> ApiResult<Option<Change<K>>> {
        watch.stream = None;
        if err.is_gone() {
            self.recover(watch).await
        } else if err.is_retryable() {
            pace(watch.opened_at).await;
            Ok(None)
        } else {
            Err(err)
        }
    }

    /// After a 410: re-reads the object by a list on its name, so the watch resumes from the
    /// list's resourceVersion (current, unlike the object's own, which is as old as its last
    /// change and would be refused again). Returns the change the watch missed, if any: the
    /// object when its resourceVersion is not the one the caller has, its last known state when
    /// it is gone.
    ///
    /// One change cannot be answered: an object the caller had (it waits from a
    /// resourceVersion) that is gone now, whose last state this backend never saw (the caller
    /// read it through a list, e.g. the Pods of a node). Then the 410 is the caller's, with the
    /// watch already resumed: a `Change::Deleted` needs the object, and waiting on would miss
    /// the deletion for good. Core's `watch_until` and the runner re-read on a 410.
    async fn recover(&self, watch: &mut OpenWatch<K>) -> ApiResult<Option<Change<K>>> {
        let last = self.tracker.last(&self.key);
        let (obj, list_rv) = self.relist().await?;
        watch.stream = None;
        match obj {
            Some(obj) => {
                watch.position = if list_rv.is_empty() {
                    obj.resource_version().unwrap_or_default()
                } else {
                    list_rv
                };
                if obj.resource_version() == watch.seen {
                    Ok(None)
                } else {
                    Ok(Some(Change::Applied(obj)))
                }
            }
            None => {
                if !list_rv.is_empty() {
                    watch.position = list_rv;
                }
                match last {
                    // Gone since: its last known state is what was deleted.
                    Last::Present(obj) => Ok(Some(Change::Deleted(obj))),
                    // Already known gone, or absent when the caller started waiting: nothing
                    // changed that the caller could have had.
                    Last::Gone => Ok(None),
                    Last::Unknown if watch.seen.is_none() => Ok(None),
                    Last::Unknown => Err(ApiError::gone(format!(
                        "{} was deleted while its watch had expired, and its last state was \
                         never read here: read it again",
                        self.describe()
                    ))),
                }
            }
        }
    }

    /// `LIST ?fieldSelector=metadata.name=<name>`: the object if it exists, and the collection's
    /// resourceVersion. `metadata.name` is a field selector every resource type supports
    /// (<https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/>).
    async fn relist(&self) -> ApiResult<(Option<K>, String)> {
        let lp = ListParams::default().fields(&format!("metadata.name={}", self.name()));
        let list: ObjectList<K> = call_json(self.client, self.collection.list(&lp)).await?;
        let obj = list
            .items
            .into_iter()
            .find(|o| o.meta().name.as_deref() == Some(self.name()));
        match &obj {
            Some(obj) => self.tracker.saw(&self.key, obj),
            None => self.tracker.saw_gone(&self.key),
        }
        Ok((obj, list.metadata.resource_version.unwrap_or_default()))
    }
}

/// Waits until a stream opened at `opened_at`, now closed, may be reopened.
/// `GET <collection>?watch=true&...&resourceVersion=<position>`, its event lines read by kube
/// (as `Api::watch` does, without needing an `Api<K>`). Marked as a watch, so the client's rate
/// limit lets it through (`throttle`).
pub(crate) async fn open_events<K>(
    client: &Client,
    collection: &Request,
    wp: &WatchParams,
    position: &str,
) -> kube::Result<Events<K>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut request = collection
        .watch(wp, position)
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("watch");
    let events = client.request_events::<K>(request).await?;
    Ok(Box::pin(events))
}

pub(crate) async fn pace(opened_at: Instant) {
    tokio::time::sleep_until(opened_at + MIN_WATCH_SPAN).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_is_taken_only_at_the_version_it_stands_at() {
        let tracker = Tracker::<String>::new();
        let key: Key = ("ns".into(), "a".into());
        tracker.put(&key, OpenWatch::at(Some("7".into()), "7".into()));
        assert!(tracker.take(&key, "6").is_none());
        // Taking at another version closed it.
        assert_eq!(tracker.open(), 0);
        tracker.put(&key, OpenWatch::at(Some("7".into()), "9".into()));
        let w = tracker.take(&key, "7").expect("positioned at 7");
        assert_eq!(w.position, "9");
    }

    fn job(conditions: &[&str], deleting: bool) -> Job {
        use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
        let condition = |c: &&str| JobCondition {
            type_: (*c).into(),
            status: "True".into(),
            ..JobCondition::default()
        };
        Job {
            metadata: ObjectMeta {
                deletion_timestamp: deleting
                    .then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                ..ObjectMeta::default()
            },
            status: Some(JobStatus {
                conditions: Some(conditions.iter().map(condition).collect()),
                ..JobStatus::default()
            }),
            ..Job::default()
        }
    }

    #[test]
    fn a_finished_job_or_a_deletion_ends_the_waiting_and_its_watch() {
        let done = ["SuccessCriteriaMet", "Complete"];
        assert!(ends_waiting(&Change::Applied(job(&done, false))));
        assert!(ends_waiting(&Change::Applied(job(&["Failed"], false))));
        assert!(ends_waiting(&Change::Deleted(job(&[], false))));
        // Running, or finished but being deleted (waited on until it is gone): read on.
        assert!(!ends_waiting(&Change::Applied(job(&[], false))));
        assert!(!ends_waiting(&Change::Applied(job(
            &["SuccessCriteriaMet"],
            false
        ))));
        assert!(!ends_waiting(&Change::Applied(job(&done, true))));
        assert!(!ends_waiting::<Job>(&Change::TimedOut));
        // Nodes and Pods: only their deletion.
        assert!(!ends_waiting(&Change::Applied(Node::default())));
        assert!(!ends_waiting(&Change::Applied(Pod::default())));
        assert!(ends_waiting(&Change::Deleted(Pod::default())));
    }

    #[test]
    fn tracking_is_bounded_least_recently_used_first() {
        let tracker = Tracker::<String>::new();
        for i in 0..MAX_TRACKED + 5 {
            let key: Key = (String::new(), format!("n{i}"));
            tracker.put(&key, OpenWatch::at(Some("1".into()), "1".into()));
        }
        assert_eq!(tracker.open(), MAX_TRACKED);
        assert!(tracker.take(&(String::new(), "n0".into()), "1").is_none());
        let newest = (String::new(), format!("n{}", MAX_TRACKED + 4));
        assert!(tracker.take(&newest, "1").is_some());
    }
}
