//! What the agent's writes go through: the two writes a kubelet makes to a pod
//! ([`PodWriter`], over kube in `apiserver.rs`, a recorder in the pod worker's tests) and why a
//! write did not happen ([`WriteError`], which the node and pod workers branch on). A leaf: it
//! imports none of the workers, so the apiserver and the workers do not import each other.

use std::future::Future;

use serde_json::Value;

use crate::logbook::PodKey;

/// Why a write did not happen.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// The pod is gone (404), or is another pod now (409 on the uid precondition).
    Gone,
    /// The apiserver refused the write for good (422, 403, ...): retrying will not help.
    Refused(String),
    /// Anything else (connection, timeout, 5xx): worth retrying.
    Failed(String),
}

/// The two writes a kubelet makes to a pod. Implemented over kube for the apiserver, and by a
/// recorder in tests.
pub(crate) trait PodWriter: Send + Sync + 'static {
    /// `PATCH pods/{name}/status` with a JSON merge patch.
    fn patch_status(
        &self,
        pod: &PodKey,
        patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// `DELETE pods/{name}` with `gracePeriodSeconds: 0` and the pod's uid as precondition.
    fn delete_now(&self, pod: &PodKey) -> impl Future<Output = Result<(), WriteError>> + Send;
}
