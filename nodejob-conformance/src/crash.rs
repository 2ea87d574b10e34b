//! [`Crashing`]: a wrapper of every API trait over any backend that stops its caller at its
//! Nth write, as a driver that crashed there would stop, and shows every write to an
//! [`Observe`]r as it is made. It is how the drivers' tests prove that a rerun after a crash
//! at any step resumes, and check their invariants after every write.
//!
//! A write is a call that changes the cluster: create or delete a Job, create an Event, patch
//! a Node, evict a Pod, create or replace a Lease. The crash point is either *before* the write
//! is sent (the cluster never saw it) or *after* it was served and before its answer is seen
//! (the cluster has it, the driver does not know).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::{
    ApiResult, Change, Clock, DryRun, Eviction, JobApi, LeaseApi, NodeApi, NodeChange, PodApi, Verb,
};

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
    async fn write<T>(
        &self,
        verb: Verb,
        target: String,
        body: String,
        served: impl Future<Output = ApiResult<T>>,
    ) -> ApiResult<T> {
        let write = Write {
            index: self.writes.fetch_add(1, Ordering::SeqCst),
            verb,
            target,
            body,
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

/// `object` as JSON, for an observer.
fn json<T: serde::Serialize>(object: &T) -> String {
    serde_json::to_string(object).unwrap_or_else(|e| format!("<not JSON: {e}>"))
}

/// `namespace/name` of an object.
fn target(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let name = meta
        .name
        .as_deref()
        .or(meta.generate_name.as_deref())
        .unwrap_or_default();
    format!("{namespace}/{name}")
}

#[async_trait]
impl<A: Clock, O: Observe> Clock for Crashing<A, O> {
    fn now(&self) -> Duration {
        self.inner.now()
    }
    async fn sleep(&self, duration: Duration) {
        self.inner.sleep(duration).await
    }
    fn wall_time(&self) -> Timestamp {
        self.inner.wall_time()
    }
}

#[async_trait]
impl<A: JobApi, O: Observe> JobApi for Crashing<A, O> {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let served = self.inner.create_job(job);
        self.write(Verb::CreateJob, target(&job.metadata), json(job), served)
            .await
    }
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.inner.get_job(namespace, name).await
    }
    async fn list_jobs(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Job>> {
        self.inner.list_jobs(namespace, label_selector).await
    }
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<()> {
        let served = self.inner.delete_job(namespace, name, preconditions);
        let target = format!("{namespace}/{name}");
        self.write(Verb::DeleteJob, target, String::new(), served)
            .await
    }
    async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>> {
        self.inner.list_pods(namespace, label_selector).await
    }
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        self.inner
            .pod_log(namespace, pod, container, limit_bytes)
            .await
    }
    async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>> {
        self.inner.list_events(namespace, involved_uid).await
    }
    async fn create_event(&self, event: &Event) -> ApiResult<Event> {
        let served = self.inner.create_event(event);
        self.write(
            Verb::CreateEvent,
            target(&event.metadata),
            json(event),
            served,
        )
        .await
    }
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        self.inner.wait_job(namespace, name, since, timeout).await
    }
}

#[async_trait]
impl<A: NodeApi, O: Observe> NodeApi for Crashing<A, O> {
    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        self.inner.get_node(name).await
    }
    async fn list_nodes(&self, label_selector: &str) -> ApiResult<Vec<Node>> {
        self.inner.list_nodes(label_selector).await
    }
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>> {
        self.inner.wait_node(name, since, timeout).await
    }
    async fn patch_node(
        &self,
        name: &str,
        resource_version: &str,
        changes: &[NodeChange],
    ) -> ApiResult<Node> {
        let served = self.inner.patch_node(name, resource_version, changes);
        let body = format!("{changes:?}");
        self.write(Verb::PatchNode, name.to_string(), body, served)
            .await
    }
}

#[async_trait]
impl<A: PodApi, O: Observe> PodApi for Crashing<A, O> {
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        self.inner.list_node_pods(node).await
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        self.inner.get_pod(namespace, name).await
    }
    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        self.inner.wait_pod(namespace, name, since, timeout).await
    }
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        let served = self
            .inner
            .evict_pod(namespace, name, uid, grace_period, dry_run);
        match dry_run {
            // A server-side dry run changes nothing: not a write.
            DryRun::All => served.await,
            DryRun::No => {
                let target = format!("{namespace}/{name}");
                self.write(Verb::EvictPod, target, String::new(), served)
                    .await
            }
        }
    }
}

#[async_trait]
impl<A: LeaseApi, O: Observe> LeaseApi for Crashing<A, O> {
    async fn get_lease(&self, namespace: &str, name: &str) -> ApiResult<Lease> {
        self.inner.get_lease(namespace, name).await
    }
    async fn create_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let served = self.inner.create_lease(lease);
        self.write(
            Verb::CreateLease,
            target(&lease.metadata),
            json(lease),
            served,
        )
        .await
    }
    async fn replace_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let served = self.inner.replace_lease(lease);
        self.write(
            Verb::ReplaceLease,
            target(&lease.metadata),
            json(lease),
            served,
        )
        .await
    }
}
