//! The verbs the runner needs from a cluster, one method each.
//!
//! Composite behaviour ("replace the stale Job, then wait") is never a trait method: it is a
//! function over these traits in [`crate::runner`] or [`crate::wait`], so every backend gets it
//! the same way.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;

use crate::error::ApiError;

/// What a backend verb returns.
pub type ApiResult<T> = std::result::Result<T, ApiError>;

/// The backend's clock. Core never reads a clock of its own, so the fake cluster can run a whole
/// rolling upgrade in virtual time.
#[async_trait]
pub trait Clock: Send + Sync {
    /// Monotonic time since an origin fixed for the backend's life.
    fn now(&self) -> Duration;
    /// Sleeps for `duration` on this clock.
    async fn sleep(&self, duration: Duration);
}

/// The next change of one named object, as a watch reports it.
#[derive(Clone, Debug, PartialEq)]
pub enum Change<K> {
    /// The object was created or modified; this is its new state.
    Applied(K),
    /// The object was deleted; this is its last state.
    Deleted(K),
    /// Nothing changed before the timeout.
    TimedOut,
}

/// One [`JobApi`] method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Verb {
    /// [`JobApi::create_job`](JobApi::create_job).
    CreateJob,
    /// [`JobApi::get_job`](JobApi::get_job).
    GetJob,
    /// [`JobApi::delete_job`](JobApi::delete_job).
    DeleteJob,
    /// [`JobApi::list_pods`](JobApi::list_pods).
    ListPods,
    /// [`JobApi::pod_log`](JobApi::pod_log).
    PodLog,
    /// [`JobApi::list_events`](JobApi::list_events).
    ListEvents,
    /// [`JobApi::get_node`](JobApi::get_node).
    GetNode,
    /// [`JobApi::wait_job`](JobApi::wait_job).
    WaitJob,
    /// [`JobApi::wait_node`](JobApi::wait_node).
    WaitNode,
}

impl Verb {
    /// Every verb, in declaration order.
    pub const ALL: [Verb; 9] = [
        Verb::CreateJob,
        Verb::GetJob,
        Verb::DeleteJob,
        Verb::ListPods,
        Verb::PodLog,
        Verb::ListEvents,
        Verb::GetNode,
        Verb::WaitJob,
        Verb::WaitNode,
    ];
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// The Kubernetes API verbs the node-Job runner uses.
///
/// Errors are core's [`ApiError`], classified the same whatever backend sits below, so callers
/// branch on NotFound / Conflict / Gone rather than on a backend's error type.
#[async_trait]
pub trait JobApi: Clock {
    /// `POST /apis/batch/v1/namespaces/{ns}/jobs`. AlreadyExists when the name is taken.
    async fn create_job(&self, job: &Job) -> ApiResult<Job>;

    /// `GET` one Job. NotFound when there is none of that name.
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job>;

    /// `DELETE` one Job with `propagationPolicy: Foreground`, so the Job stays (with a
    /// `deletionTimestamp` and the `foregroundDeletion` finalizer) until its Pods are gone.
    ///
    /// With `preconditions`, the apiserver refuses with Conflict unless the stored object has
    /// that UID and resourceVersion. NotFound when there is none of that name. Deleting a Job
    /// that is already being deleted succeeds.
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<()>;

    /// `LIST` Pods in `namespace` matching a label selector (`key=value[,key=value]`).
    async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>>;

    /// `GET .../pods/{pod}/log?container={container}&limitBytes={limit_bytes}`.
    ///
    /// The apiserver reads the log from the node's kubelet: when it cannot reach it, this fails
    /// with a 500 (classified transient) although the Pod's status is known.
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String>;

    /// `LIST` Events in `namespace` whose `involvedObject.uid` is `involved_uid`.
    async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>>;

    /// `GET` one Node. NotFound when there is none of that name.
    async fn get_node(&self, name: &str) -> ApiResult<Node>;

    /// Waits for the next change of the Job `namespace/name` after resourceVersion `since`
    /// (after now when `None`), at most `timeout`. A watch that breaks or expires (410 Gone)
    /// is resumed by the backend, never reported.
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>>;

    /// Waits for the next change of the Node `name` after resourceVersion `since`, as
    /// [`JobApi::wait_job`] does for a Job.
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>>;
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<T: Clock + ?Sized> Clock for $ptr {
            fn now(&self) -> Duration {
                (**self).now()
            }
            async fn sleep(&self, duration: Duration) {
                (**self).sleep(duration).await
            }
        }

        #[async_trait]
        impl<T: JobApi + ?Sized> JobApi for $ptr {
            async fn create_job(&self, job: &Job) -> ApiResult<Job> {
                (**self).create_job(job).await
            }
            async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
                (**self).get_job(namespace, name).await
            }
            async fn delete_job(
                &self,
                namespace: &str,
                name: &str,
                preconditions: Option<&Preconditions>,
            ) -> ApiResult<()> {
                (**self).delete_job(namespace, name, preconditions).await
            }
            async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>> {
                (**self).list_pods(namespace, label_selector).await
            }
            async fn pod_log(
                &self,
                namespace: &str,
                pod: &str,
                container: &str,
                limit_bytes: u64,
            ) -> ApiResult<String> {
                (**self).pod_log(namespace, pod, container, limit_bytes).await
            }
            async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>> {
                (**self).list_events(namespace, involved_uid).await
            }
            async fn get_node(&self, name: &str) -> ApiResult<Node> {
                (**self).get_node(name).await
            }
            async fn wait_job(
                &self,
                namespace: &str,
                name: &str,
                since: Option<&str>,
                timeout: Duration,
            ) -> ApiResult<Change<Job>> {
                (**self).wait_job(namespace, name, since, timeout).await
            }
            async fn wait_node(
                &self,
                name: &str,
                since: Option<&str>,
                timeout: Duration,
            ) -> ApiResult<Change<Node>> {
                (**self).wait_node(name, since, timeout).await
            }
        }
    )*};
}

forward!(&T, Arc<T>, Box<T>);
