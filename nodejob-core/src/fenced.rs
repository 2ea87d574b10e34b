//! [`Fenced`]: the Job, Node and Pod verbs a driver's steps use, each write fenced by the
//! Lease without a request: once any step of the run has seen the Lease lost
//! ([`Fence::lost`]), a step in flight on another node (a drain between two evictions, a host
//! Job's runner deleting its finished Job) writes nothing more (its write answers an error
//! naming the loss), so no write of the run follows the driver's knowledge of the loss, even
//! within the instant it learns it. Both drivers write through it.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use k8s_openapi::jiff::Timestamp;

use crate::api::{ApiResult, Change, Clock, DryRun, Eviction, JobApi, NodeApi, NodeChange, PodApi};
use crate::drive::Fence;
use crate::error::{ApiError, ErrorKind};

/// `api`'s Job, Node and Pod verbs, writes refused once `fence` knows the Lease lost.
pub struct Fenced<'a, A: ?Sized> {
    api: &'a A,
    fence: &'a Fence,
}

impl<'a, A: ?Sized> Fenced<'a, A> {
    /// `api`, its writes fenced by `fence`.
    pub fn new(api: &'a A, fence: &'a Fence) -> Self {
        Fenced { api, fence }
    }
}

impl<A: ?Sized> Fenced<'_, A> {
    /// An error naming the loss, if the Lease is known lost: not a passing fault, never
    /// retried.
    fn refused(&self, what: &str) -> ApiResult<()> {
        match self.fence.lost() {
            Some(why) => Err(ApiError::new(
                ErrorKind::Other,
                0,
                format!("not {what}: the Lease was lost: {why}"),
            )),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl<A: Clock + ?Sized> Clock for Fenced<'_, A> {
    fn now(&self) -> Duration {
        self.api.now()
    }
    async fn sleep(&self, duration: Duration) {
        self.api.sleep(duration).await
    }
    fn wall_time(&self) -> Timestamp {
        self.api.wall_time()
    }
}

#[async_trait]
impl<A: JobApi + ?Sized> JobApi for Fenced<'_, A> {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        self.refused("creating a job")?;
        self.api.create_job(job).await
    }
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.api.get_job(namespace, name).await
    }
    async fn list_jobs(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Job>> {
        self.api.list_jobs(namespace, label_selector).await
    }
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<()> {
        self.refused("deleting a job")?;
        self.api.delete_job(namespace, name, preconditions).await
    }
    async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>> {
        self.api.list_pods(namespace, label_selector).await
    }
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        self.api
            .pod_log(namespace, pod, container, limit_bytes)
            .await
    }
    async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>> {
        self.api.list_events(namespace, involved_uid).await
    }
    async fn create_event(&self, event: &Event) -> ApiResult<Event> {
        self.refused("recording an event")?;
        self.api.create_event(event).await
    }
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        self.api.wait_job(namespace, name, since, timeout).await
    }
}

#[async_trait]
impl<A: NodeApi + ?Sized> NodeApi for Fenced<'_, A> {
    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        self.api.get_node(name).await
    }
    async fn list_nodes(&self, label_selector: &str) -> ApiResult<Vec<Node>> {
        self.api.list_nodes(label_selector).await
    }
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>> {
        self.api.wait_node(name, since, timeout).await
    }
    async fn patch_node(
        &self,
        name: &str,
        resource_version: &str,
        changes: &[NodeChange],
    ) -> ApiResult<Node> {
        self.refused("patching a node")?;
        self.api.patch_node(name, resource_version, changes).await
    }
}

#[async_trait]
impl<A: PodApi + ?Sized> PodApi for Fenced<'_, A> {
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        self.api.list_node_pods(node).await
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        self.api.get_pod(namespace, name).await
    }
    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        self.api.wait_pod(namespace, name, since, timeout).await
    }
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        self.refused("evicting a pod")?;
        (self.api)
            .evict_pod(namespace, name, uid, grace_period, dry_run)
            .await
    }
}
