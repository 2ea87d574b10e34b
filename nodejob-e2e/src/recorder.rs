//! What a scenario saw while a driver ran: every version of the objects a watch sees
//! ([`Recorder`]; with deletions and relists, [`Seen`]), and every progress event the driver
//! reported ([`ProgressLog`]).

use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use kube::api::Api;
use kube::runtime::watcher;
use nodejob_conformance::Failure;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::conventions::SETTLE;

/// Every version of the objects a watch sees, from the moment [`record`] returns until
/// [`Recorder::stop`]: what a driver created and deleted, or how a workload fared, while it
/// ran.
pub struct Recorder<K> {
    seen: Arc<Mutex<Vec<K>>>,
    task: JoinHandle<()>,
}

impl<K: Clone> Recorder<K> {
    /// Stops watching; every version seen, in order.
    pub fn stop(self) -> Vec<K> {
        self.task.abort();
        self.seen.lock().unwrap().clone()
    }
}

impl<K> Drop for Recorder<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts recording the objects of `api` that `config` selects; returns once the watch has
/// listed what exists, so nothing written after is missed.
pub async fn record<K>(api: Api<K>, config: watcher::Config) -> Result<Recorder<K>, Failure>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync,
    K: 'static,
{
    record_as(api, config, |event| match event {
        watcher::Event::Apply(k) | watcher::Event::InitApply(k) => Some(k),
        _ => None,
    })
    .await
}

/// What a watch saw, deletions and relists included ([`record_changes`]).
#[derive(Clone, Debug)]
pub enum Seen<K> {
    /// A version of an object, as created or changed (or listed).
    Applied(K),
    /// An object's last version, as it was deleted.
    Deleted(K),
    /// The watch lists again from scratch (at its start, or after it lost its place): what
    /// follows up to [`Seen::Listed`] is every object that exists, and an object deleted
    /// meanwhile is not told.
    Listing,
    /// The list is over.
    Listed,
}

/// [`record`], keeping deletions and relists: what a scenario needs to know which objects
/// existed at each moment.
pub async fn record_changes<K>(
    api: Api<K>,
    config: watcher::Config,
) -> Result<Recorder<Seen<K>>, Failure>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync,
    K: 'static,
{
    record_as(api, config, |event| {
        Some(match event {
            watcher::Event::Apply(k) | watcher::Event::InitApply(k) => Seen::Applied(k),
            watcher::Event::Delete(k) => Seen::Deleted(k),
            watcher::Event::Init => Seen::Listing,
            watcher::Event::InitDone => Seen::Listed,
        })
    })
    .await
}

async fn record_as<K, T>(
    api: Api<K>,
    config: watcher::Config,
    keep: impl Fn(watcher::Event<K>) -> Option<T> + Send + 'static,
) -> Result<Recorder<T>, Failure>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync,
    K: 'static,
    T: Send + 'static,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let (listed, listing) = oneshot::channel();
    let what = format!("{:?} {:?}", config.label_selector, config.field_selector);
    let watching = what.clone();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed);
        let mut stream = std::pin::pin!(watcher::watcher(api, config));
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    let done = matches!(event, watcher::Event::InitDone);
                    if let Some(t) = keep(event) {
                        sink.lock().unwrap().push(t);
                    }
                    if let Some(listed) = listed.take_if(|_| done) {
                        let _ = listed.send(());
                    }
                }
                Err(e) => eprintln!("watching {watching}: {e}"),
            }
        }
    });
    let recorder = Recorder { seen, task };
    match tokio::time::timeout(SETTLE, listing).await {
        Ok(Ok(())) => Ok(recorder),
        _ => Err(Failure(format!("the watch of {what} did not list"))),
    }
}

/// What a driver reports as it runs: each event printed as a timestamped JSON line after a
/// prefix (the scenario's), and kept, in order.
pub struct ProgressLog<P> {
    seen: Arc<Mutex<Vec<P>>>,
    prefix: &'static str,
}

impl<P: serde::Serialize + std::fmt::Debug + Clone + Send + 'static> ProgressLog<P> {
    /// An empty log whose lines start with `prefix`.
    pub fn new(prefix: &'static str) -> Self {
        ProgressLog {
            seen: Arc::default(),
            prefix,
        }
    }

    /// What the driver reports to: prints and keeps each event.
    pub fn sink(&self) -> impl Fn(&P) + Send + Sync + 'static {
        let (sink, prefix) = (self.seen.clone(), self.prefix);
        move |p: &P| {
            let line = serde_json::to_string(p).unwrap_or_else(|_| format!("{p:?}"));
            eprintln!("{} {prefix}: {line}", k8s_openapi::jiff::Timestamp::now());
            sink.lock().unwrap().push(p.clone());
        }
    }

    /// Every event so far, in order.
    pub fn events(&self) -> Vec<P> {
        self.seen.lock().unwrap().clone()
    }
}
