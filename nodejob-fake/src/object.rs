//! What every part of the fake asks of a stored object: its key, its controller, whether a pod
//! has ended, is live or Ready, whether a node is Ready. A leaf: the store, its index, the
//! controllers and the kubelets all read these, and this module reads none of them.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// `(namespace, name)`; Nodes use an empty namespace.
pub(crate) type Key = (String, String);

/// The key of an object's metadata.
pub(crate) fn key_of(meta: &ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The controller ownerReference of `meta`, if any.
pub(crate) fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Whether `pod` has phase `Succeeded` or `Failed`.
pub(crate) fn pod_is_terminal(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether `pod` is live: not ended, not being deleted (`controller.FilterActivePods`).
pub(crate) fn pod_is_live(pod: &Pod) -> bool {
    !pod_is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// Whether `pod`'s `Ready` condition is `"True"` (`podutil.IsPodReady`).
pub(crate) fn pod_is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether `node`'s Ready condition is `"True"`.
pub(crate) fn node_is_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}
