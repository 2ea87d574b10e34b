//! [`JobApi`]: Jobs, their Pods' logs and Events.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;

use super::{ApiResult, Change, Clock};

/// The Kubernetes API verbs the node-Job runner uses.
///
/// Errors are core's [`ApiError`](crate::ApiError), classified the same whatever backend sits below, so callers
/// branch on NotFound / Conflict / Gone rather than on a backend's error type.
#[async_trait]
pub trait JobApi: Clock {
    /// `POST /apis/batch/v1/namespaces/{ns}/jobs`. AlreadyExists when the name is taken.
    async fn create_job(&self, job: &Job) -> ApiResult<Job>;

    /// `GET` one Job. NotFound when there is none of that name.
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job>;

    /// `LIST /apis/batch/v1/namespaces/{ns}/jobs?labelSelector={label_selector}`: the Jobs in
    /// `namespace` matching a label selector (`key=value[,key=value]`, `key!=value`, `key`,
    /// `!key`; empty: every Job), Jobs being deleted included. A namespace that does not exist
    /// has no Jobs: the answer is an empty list, not NotFound. A selector the apiserver cannot
    /// parse is a 400 BadRequest. An empty `namespace` is every namespace (`LIST
    /// /apis/batch/v1/jobs`, as `kubectl get jobs -A`), which needs a grant to list Jobs
    /// cluster-wide (403 for `deploy/rbac.yaml`'s Role, per namespace).
    ///
    /// Neither the runner nor the drivers list Jobs (they read one by name, then by UID); the
    /// command line's `nodejob jobs` does.
    async fn list_jobs(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Job>>;

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

    /// `LIST` Pods in `namespace` matching a label selector (`key=value[,key=value]`); an empty
    /// `namespace` is every namespace, as for [`JobApi::list_jobs`].
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

    /// `POST /api/v1/namespaces/{ns}/events`, `ns` being `event.metadata.namespace`: the Event
    /// as the apiserver stored it (its name drawn from `generateName`, its UID and
    /// resourceVersion). NotFound when the namespace does not exist, Invalid when the apiserver's
    /// rules for Events refuse it (see [`node_event`](crate::node_event) for those of an Event
    /// about a Node), AlreadyExists when its name is taken.
    async fn create_event(&self, event: &Event) -> ApiResult<Event>;

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
}
