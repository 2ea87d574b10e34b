//! [`PodApi`]: the Pods bound to a node, and their eviction.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

use super::{ApiResult, Change, Clock};

/// Whether a request is only checked (`dryRun=All`: admission and validation run, nothing is
/// stored) or carried out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DryRun {
    /// Carry it out.
    #[default]
    No,
    /// `dryRun: ["All"]`: the apiserver answers as it would, and changes nothing.
    All,
}

/// How the apiserver answered an eviction (`POST .../pods/{name}/eviction`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Eviction {
    /// 200/201: the pod is being deleted (gracefully, with its grace period). With
    /// [`DryRun::All`]: it would be.
    Evicted,
    /// 429: a PodDisruptionBudget would be violated. `message` is the apiserver's, with the
    /// causes it gives, which name the budget: `Cannot evict pod as it would violate the pod's
    /// disruption budget. The disruption budget web needs 2 healthy pods and has 2 currently`.
    Blocked {
        /// The apiserver's message.
        message: String,
    },
    /// 404: the pod is already gone.
    Gone,
}

/// The Kubernetes API verbs on Pods a drain needs. Errors are core's
/// [`ApiError`](crate::ApiError).
#[async_trait]
pub trait PodApi: Clock {
    /// `LIST /api/v1/pods?fieldSelector=spec.nodeName={node}`: the Pods bound to `node`, in
    /// every namespace, in `(namespace, name)` order.
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>>;

    /// `GET /api/v1/namespaces/{ns}/pods/{name}`. NotFound when there is none of that name.
    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod>;

    /// Waits for the next change of the Pod `namespace/name` after resourceVersion `since`
    /// (after now when `None`), at most `timeout`. A watch that breaks is resumed by the
    /// backend. One that expired (410 Gone) is resumed too, except when the backend cannot tell
    /// what happened meanwhile (the Pod is gone and its last state was never read through this
    /// method): then it answers Gone, and the caller reads the Pod again, as
    /// [`watch_until`](crate::watch::watch_until) does.
    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>>;

    /// `POST /api/v1/namespaces/{ns}/pods/{name}/eviction` (policy/v1), with the pod's `uid` as
    /// a precondition (Conflict when the name now holds another pod), the grace period to give
    /// it (the pod's own when `None`), and `dry_run`.
    ///
    /// A 429 (a budget would be violated) is [`Eviction::Blocked`] and a 404
    /// [`Eviction::Gone`]; anything else that fails is an error, for instance the 500 for a pod
    /// that several budgets cover.
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction>;
}
