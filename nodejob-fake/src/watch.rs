//! Watch history: every ADDED / MODIFIED / DELETED of a watched object, with its
//! resourceVersion, kept per name so a wait can resume from any `since`.
//!
//! Each change is kept as the object's JSON, decoded when a wait reports it.
//!
//! The fake keeps the whole history, so a watch never expires: the 410 Gone a real apiserver
//! answers for a resourceVersion older than its watch cache is not modelled (the trait's
//! backends resume it anyway).

use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;

use tokio::sync::watch;

use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;

use nodejob_core::{ApiError, Change};

/// Where a wait starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Since {
    /// The first event after resourceVersion `rv`.
    After(u64),
    /// `resourceVersion` `""` or `"0"`: apiserver semantics "start at any / most recent": the
    /// current object as a synthetic ADDED if it exists, else the next event.
    Any,
}

impl Since {
    /// Parses `since`; `None` starts after `current`, the latest resourceVersion.
    pub(crate) fn parse(since: Option<&str>, current: u64) -> Result<Since, ApiError> {
        match since {
            None => Ok(Since::After(current)),
            Some("" | "0") => Ok(Since::Any),
            Some(rv) => rv.parse::<u64>().map(Since::After).map_err(|e| {
                // apiserver: APIObjectVersioner.ParseResourceVersion refuses a non-decimal
                // resourceVersion as an invalid field.
                ApiError::bad_request(format!(
                    "resourceVersion: Invalid value: \"{rv}\": strconv.ParseUint: parsing \"{rv}\": {e}"
                ))
            }),
        }
    }
}

/// The key the watches of every node wait on: no node has an empty name.
pub(crate) fn every_node() -> (String, String) {
    (String::new(), String::new())
}

/// The events of one object name: each change with its resourceVersion, oldest first.
type Events = Vec<(u64, Entry)>;

/// One recorded change, kept as the JSON the apiserver would send (a third or less of the
/// memory of the object itself, which matters when every version of every object of a
/// thousands-of-nodes simulation is kept), and decoded again when a wait reports it.
#[derive(Debug)]
struct Entry {
    deleted: bool,
    json: Box<[u8]>,
}

/// The events of one kind of object, by `(namespace, name)`.
#[derive(Debug)]
pub(crate) struct History<K> {
    by_name: BTreeMap<(String, String), Events>,
    /// Every change of every name, in resourceVersion order: what a watch of the whole
    /// collection delivers ([`History::all_after`]).
    log: Vec<(u64, (String, String))>,
    /// The names recorded since [`History::take_touched`] last ran: whose waiters to wake.
    touched: Vec<(String, String)>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Default for History<K> {
    fn default() -> Self {
        History {
            by_name: BTreeMap::new(),
            log: Vec::new(),
            touched: Vec::new(),
            kind: PhantomData,
        }
    }
}

impl<K> History<K> {
    /// The names that changed since the last call, each once.
    pub(crate) fn take_touched(&mut self) -> Vec<(String, String)> {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        touched
    }
}

impl<K: Serialize + DeserializeOwned> History<K> {
    /// Records that `key` changed at `rv`: `Change::Applied` for ADDED/MODIFIED, `Change::Deleted`
    /// with the last state for DELETED.
    pub(crate) fn record(&mut self, key: (String, String), rv: u64, change: Change<&K>) {
        let (deleted, object) = match change {
            Change::Applied(object) => (false, object),
            Change::Deleted(object) => (true, object),
            Change::TimedOut => return,
        };
        let json = serde_json::to_vec(object)
            .expect("a Kubernetes object encodes as JSON")
            .into_boxed_slice();
        self.touched.push(key.clone());
        self.log.push((rv, key.clone()));
        self.by_name
            .entry(key)
            .or_default()
            .push((rv, Entry { deleted, json }));
    }

    /// Every event of every name with a resourceVersion greater than `since`, oldest first,
    /// with its resourceVersion: what a watch of the collection started at `since` delivers.
    pub(crate) fn all_after(&self, since: u64) -> Vec<(u64, Change<K>)> {
        let from = self.log.partition_point(|(rv, _)| *rv <= since);
        self.log[from..]
            .iter()
            .map(|(rv, key)| {
                let events = &self.by_name[key];
                let at = events.partition_point(|(r, _)| r < rv);
                (*rv, decode(&events[at].1))
            })
            .collect()
    }

    /// The first event of `key` with a resourceVersion greater than `since`: what a watch on
    /// that name started at `since` reports first. If the object was deleted and recreated
    /// since, that is the deletion, as a real watch would deliver it.
    pub(crate) fn first_after(&self, key: &(String, String), since: u64) -> Option<Change<K>> {
        let events = self.by_name.get(key)?;
        let (_, entry) = events.iter().find(|(rv, _)| *rv > since)?;
        Some(decode(entry))
    }
}

/// The change `entry` recorded.
fn decode<K: DeserializeOwned>(entry: &Entry) -> Change<K> {
    let object: K = serde_json::from_slice(&entry.json).expect("the JSON `record` encoded decodes");
    if entry.deleted {
        Change::Deleted(object)
    } else {
        Change::Applied(object)
    }
}

/// The kinds of object a wait can watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Watched {
    Job,
    Node,
    Pod,
    /// Every object of a custom kind, by its plural (waited on under [`every_node`]'s key:
    /// the collection's).
    Custom(&'static str),
}

/// What a wait waits on: one object by kind and `(namespace, name)`.
pub(crate) type WaitKey = (Watched, (String, String));

/// The waits in progress, by the object each watches: a write wakes only the waits on the
/// objects it changed, as an apiserver's watch on one name (a `metadata.name` field selector)
/// delivers only that object's events. Waking every wait on every write made a roll of
/// thousands of nodes quadratic: each write woke the hundreds of waits in flight, each of
/// which looked at the store again.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    by_key: HashMap<WaitKey, watch::Sender<()>>,
    /// Entries kept after the last sweep of those no wait holds any more.
    swept: usize,
}

impl Waiters {
    /// A receiver that changes on the next write of `key` after this call.
    pub(crate) fn subscribe(&mut self, key: WaitKey) -> watch::Receiver<()> {
        if self.by_key.len() > 2 * self.swept + 64 {
            self.by_key.retain(|_, sender| sender.receiver_count() > 0);
            self.swept = self.by_key.len();
        }
        (self.by_key.entry(key))
            .or_insert_with(|| watch::Sender::new(()))
            .subscribe()
    }

    /// Wakes the waits on each of `keys`.
    pub(crate) fn wake(&mut self, keys: impl IntoIterator<Item = WaitKey>) {
        for key in keys {
            if let Some(sender) = self.by_key.get(&key) {
                if sender.receiver_count() == 0 {
                    self.by_key.remove(&key);
                } else {
                    sender.send_replace(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::timing::stamp;

    fn key() -> (String, String) {
        ("default".into(), "up".into())
    }

    #[test]
    fn a_change_reads_back_as_it_was_recorded() {
        let job = Job {
            metadata: ObjectMeta {
                name: Some("up".into()),
                finalizers: Some(Vec::new()),
                creation_timestamp: Some(stamp(std::time::Duration::from_secs(61))),
                ..ObjectMeta::default()
            },
            spec: Some(JobSpec {
                backoff_limit: Some(0),
                ..JobSpec::default()
            }),
            status: Some(JobStatus {
                succeeded: Some(1),
                conditions: Some(vec![JobCondition {
                    type_: "Complete".into(),
                    status: "True".into(),
                    ..JobCondition::default()
                }]),
                ..JobStatus::default()
            }),
        };
        let mut history = History::<Job>::default();
        history.record(key(), 7, Change::Applied(&job));
        history.record(key(), 9, Change::Deleted(&job));
        assert_eq!(
            history.first_after(&key(), 6),
            Some(Change::Applied(job.clone()))
        );
        assert_eq!(history.first_after(&key(), 7), Some(Change::Deleted(job)));
        assert_eq!(history.first_after(&key(), 9), None);
        assert_eq!(
            history.first_after(&("default".into(), "other".into()), 0),
            None
        );
    }
}
