//! [`Probe`]: a backend's calls, passed through, noting when one first answered a finished
//! Job: the moment a run learnt that its Job finished.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::{ApiResult, Change, Clock, JobApi, NodeApi, NodeChange, finished};

/// A backend, noting when one of the calls made through it first answered a finished Job.
pub(crate) struct Probe<'a, A: ?Sized> {
    inner: &'a A,
    finished_at: Mutex<Option<Instant>>,
}

impl<'a, A: ?Sized> Probe<'a, A> {
    /// Calls go to `inner`.
    pub(crate) fn new(inner: &'a A) -> Self {
        Probe {
            inner,
            finished_at: Mutex::new(None),
        }
    }

    /// When a call first answered a finished Job, if one did.
    pub(crate) fn finished_at(&self) -> Option<Instant> {
        *self.finished_at.lock().unwrap()
    }

    fn saw(&self, job: &Job) {
        if finished(job) {
            self.finished_at
                .lock()
                .unwrap()
                .get_or_insert_with(Instant::now);
        }
    }
}

#[async_trait]
impl<A: Clock + ?Sized> Clock for Probe<'_, A> {
    fn now(&self) -> Duration {
        self.inner.now()
    }
    async fn sleep(&self, duration: Duration) {
        self.inner.sleep(duration).await;
    }
    fn wall_time(&self) -> k8s_openapi::jiff::Timestamp {
        self.inner.wall_time()
    }
}

#[async_trait]
impl<A: JobApi + ?Sized> JobApi for Probe<'_, A> {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        self.inner.create_job(job).await
    }
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        let job = self.inner.get_job(namespace, name).await;
        if let Ok(job) = &job {
            self.saw(job);
        }
        job
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
        self.inner.delete_job(namespace, name, preconditions).await
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
        self.inner.create_event(event).await
    }
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        let change = self.inner.wait_job(namespace, name, since, timeout).await;
        if let Ok(Change::Applied(job)) = &change {
            self.saw(job);
        }
        change
    }
}

#[async_trait]
impl<A: NodeApi + ?Sized> NodeApi for Probe<'_, A> {
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
        self.inner.patch_node(name, resource_version, changes).await
    }
}
