//! [`NodeApi`]: Nodes, read, watched and patched under a resourceVersion precondition.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::version::Info;

use super::{ApiResult, Change, Clock};

/// One typed change to a Node, as [`NodeApi::patch_node`] sends it.
///
/// Several changes go in one patch, so a driver can cordon a node and record that it did so in
/// one write: a node is then never cordoned without the record, nor the record without the
/// cordon.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeChange {
    /// `spec.unschedulable: true`, as `kubectl cordon` does.
    Cordon,
    /// `spec.unschedulable` removed (false), as `kubectl uncordon` does.
    Uncordon,
    /// Sets `metadata.annotations[key] = value`.
    SetAnnotation {
        /// The annotation key.
        key: String,
        /// Its value.
        value: String,
    },
    /// Removes `metadata.annotations[key]` (no error when it is absent).
    RemoveAnnotation {
        /// The annotation key.
        key: String,
    },
    /// Sets `metadata.labels[key] = value` (a label value: at most 63 characters of
    /// alphanumerics, `-`, `_` and `.`, beginning and ending with an alphanumeric, else the
    /// apiserver refuses the write as Invalid).
    SetLabel {
        /// The label key.
        key: String,
        /// Its value.
        value: String,
    },
    /// Adds the taint `key` (no value) with the effect `NoSchedule` to `spec.taints`, unless a
    /// taint of that key and effect is there already. A `NoSchedule` taint keeps every Pod that
    /// does not tolerate it from being scheduled to the node, whoever uncordons it: kube-scheduler's
    /// `TaintToleration` filter, and the DaemonSet controller's `nodeShouldRunDaemonPod`, which
    /// creates no new daemon Pod on it (the Pods already there stay: only `NoExecute` evicts).
    /// The kubelet's admission rejects only untolerated `NoExecute` taints, so a Pod bound by
    /// name alone still starts (`pkg/kubelet/lifecycle/predicate.go`).
    TaintNoSchedule {
        /// The taint key.
        key: String,
    },
    /// Removes every taint of `key` from `spec.taints` (no error when there is none).
    Untaint {
        /// The taint key.
        key: String,
    },
    /// Removes `metadata.labels[key]` (no error when it is absent).
    RemoveLabel {
        /// The label key.
        key: String,
    },
}

impl NodeChange {
    /// [`NodeChange::SetAnnotation`].
    pub fn set_annotation(key: impl Into<String>, value: impl Into<String>) -> Self {
        NodeChange::SetAnnotation {
            key: key.into(),
            value: value.into(),
        }
    }

    /// [`NodeChange::RemoveAnnotation`].
    pub fn remove_annotation(key: impl Into<String>) -> Self {
        NodeChange::RemoveAnnotation { key: key.into() }
    }

    /// [`NodeChange::SetLabel`].
    pub fn set_label(key: impl Into<String>, value: impl Into<String>) -> Self {
        NodeChange::SetLabel {
            key: key.into(),
            value: value.into(),
        }
    }

    /// [`NodeChange::RemoveLabel`].
    pub fn remove_label(key: impl Into<String>) -> Self {
        NodeChange::RemoveLabel { key: key.into() }
    }

    /// Applies the change to `node` as the apiserver would (used by in-memory backends, and to
    /// predict the result).
    pub fn apply(&self, node: &mut Node) {
        match self {
            NodeChange::Cordon => node.spec.get_or_insert_default().unschedulable = Some(true),
            NodeChange::Uncordon => {
                if let Some(spec) = node.spec.as_mut() {
                    spec.unschedulable = None;
                }
            }
            NodeChange::SetAnnotation { key, value } => {
                node.metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(key.clone(), value.clone());
            }
            NodeChange::RemoveAnnotation { key } => {
                if let Some(annotations) = node.metadata.annotations.as_mut() {
                    annotations.remove(key);
                    if annotations.is_empty() {
                        node.metadata.annotations = None;
                    }
                }
            }
            NodeChange::SetLabel { key, value } => {
                node.metadata
                    .labels
                    .get_or_insert_default()
                    .insert(key.clone(), value.clone());
            }
            NodeChange::RemoveLabel { key } => {
                if let Some(labels) = node.metadata.labels.as_mut() {
                    labels.remove(key);
                    if labels.is_empty() {
                        node.metadata.labels = None;
                    }
                }
            }
            NodeChange::TaintNoSchedule { key } => {
                let taints = node
                    .spec
                    .get_or_insert_default()
                    .taints
                    .get_or_insert_default();
                let there = (taints.iter()).any(|t| t.key == *key && t.effect == NO_SCHEDULE);
                if !there {
                    taints.push(Taint {
                        key: key.clone(),
                        effect: NO_SCHEDULE.to_string(),
                        ..Taint::default()
                    });
                }
            }
            NodeChange::Untaint { key } => {
                if let Some(spec) = node.spec.as_mut()
                    && let Some(taints) = spec.taints.as_mut()
                {
                    taints.retain(|t| t.key != *key);
                    if taints.is_empty() {
                        spec.taints = None;
                    }
                }
            }
        }
    }

    /// Whether the change is to the node's metadata (an annotation or a label), which a
    /// patch of its status carries too ([`NodeApi::patch_node_conditions`]); the others are
    /// to its spec.
    pub fn to_metadata(&self) -> bool {
        matches!(
            self,
            NodeChange::SetAnnotation { .. }
                | NodeChange::RemoveAnnotation { .. }
                | NodeChange::SetLabel { .. }
                | NodeChange::RemoveLabel { .. }
        )
    }

    /// Whether the change is to `spec.taints`, an atomic list (`+listType=atomic`): a patch
    /// replaces it whole, so a backend writes it from the node as read at the patch's
    /// resourceVersion.
    pub fn to_taints(&self) -> bool {
        matches!(
            self,
            NodeChange::TaintNoSchedule { .. } | NodeChange::Untaint { .. }
        )
    }
}

/// The `NoSchedule` taint effect.
pub const NO_SCHEDULE: &str = "NoSchedule";

/// Whether `node` carries the taint `key` with the effect `NoSchedule`.
pub fn tainted_no_schedule(node: &Node, key: &str) -> bool {
    (node.spec.as_ref().and_then(|s| s.taints.as_ref()))
        .is_some_and(|ts| ts.iter().any(|t| t.key == key && t.effect == NO_SCHEDULE))
}

/// Every node, and the resourceVersion of the list: [`NodeApi::list_nodes_at`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodesAt {
    /// The nodes, in name order.
    pub nodes: Vec<Node>,
    /// The list's resourceVersion: a watch from it misses no change after the list.
    pub resource_version: String,
}

/// Changes of Nodes after a resourceVersion: [`NodeApi::wait_nodes`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeChanges {
    /// Each change, oldest first: [`Change::Applied`] (added or modified) or
    /// [`Change::Deleted`] (its last state).
    pub changes: Vec<Change<Node>>,
    /// Where the next wait resumes: the last change's resourceVersion (or a later one the
    /// apiserver marked, a bookmark), or `since` when nothing changed.
    pub resource_version: String,
}

/// The Kubernetes API verbs on Nodes (cluster-scoped). Errors are core's
/// [`ApiError`](crate::ApiError).
#[async_trait]
pub trait NodeApi: Clock {
    /// `GET /api/v1/nodes/{name}`. NotFound when there is none of that name.
    async fn get_node(&self, name: &str) -> ApiResult<Node>;

    /// `LIST /api/v1/nodes?labelSelector=...`; an empty selector lists every node. In name
    /// order.
    async fn list_nodes(&self, label_selector: &str) -> ApiResult<Vec<Node>>;

    /// `LIST /api/v1/nodes`, every node in name order, with the list's resourceVersion: where
    /// a watch of every node starts ([`NodeApi::wait_nodes`]), as a reflector's list does.
    async fn list_nodes_at(&self) -> ApiResult<NodesAt>;

    /// The changes of any Node after resourceVersion `since`, as a watch of the collection
    /// delivers them (`WATCH /api/v1/nodes?resourceVersion=since`), oldest first: waits at most
    /// `timeout` for the first, then answers it with every change already there behind it;
    /// none when the timeout ran out (a zero timeout: only what is there now). Answers the
    /// resourceVersion to resume from. Gone (410 Expired) when `since` is older than the
    /// apiserver keeps: list again.
    async fn wait_nodes(&self, since: &str, timeout: Duration) -> ApiResult<NodeChanges>;

    /// Waits for the next change of the Node `name` after resourceVersion `since` (after now
    /// when `None`), at most `timeout`. A watch that breaks or expires (410 Gone) is resumed by
    /// the backend, never reported.
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>>;

    /// `PATCH /api/v1/nodes/{name}` (a JSON merge patch) applying `changes` in order, with
    /// `metadata.resourceVersion: resource_version` in the patch: the apiserver refuses with
    /// Conflict when the node changed since it was read at that version. NotFound when there is
    /// no such node. Answers the node as written.
    async fn patch_node(
        &self,
        name: &str,
        resource_version: &str,
        changes: &[NodeChange],
    ) -> ApiResult<Node>;

    /// `GET /version`: the apiserver's release (`gitVersion`, `major`, `minor`), what the
    /// Kubernetes version skew policy judges a kubelet against
    /// (<https://kubernetes.io/releases/version-skew-policy/#kubelet>). Here beside the Nodes
    /// because that is what it is read for; it needs no grant of its own: every authenticated
    /// user may read it (the `system:public-info-viewer` ClusterRole, bound to
    /// `system:authenticated` and `system:unauthenticated` by default).
    async fn version(&self) -> ApiResult<Info>;

    /// `PATCH /api/v1/nodes/{name}/status` with a strategic-merge patch of
    /// `status.conditions` (`{"status": {"conditions": [...]}}`), as node-problem-detector sets
    /// its own conditions (and `SetNodeCondition` of `k8s.io/kubernetes/pkg/util/node`): the
    /// list is declared `patchStrategy=merge` with `patchMergeKey=type`
    /// (`NodeStatus.Conditions` in `k8s.io/api/core/v1/types.go`), so each condition sent
    /// replaces the one of its type, or is added, and every other condition (the kubelet's
    /// `Ready`, `MemoryPressure`, ...) is kept. A JSON merge patch (what
    /// [`NodeApi::patch_node`] sends) would replace the whole list (RFC 7386 replaces arrays)
    /// and drop them until the kubelet's next post.
    ///
    /// With `resource_version`, the patch carries `metadata.resourceVersion` and the apiserver
    /// refuses with Conflict when the node changed since: a caller that holds the node's
    /// resourceVersion for a later guarded write uses it, so that the write of its condition is
    /// the only change between the two and the guard may move on to the version it answers.
    /// Without, no precondition: a condition type has one writer (the driver that owns it).
    /// NotFound when there is no such node. Answers the node as written.
    ///
    /// `changes` to the node's metadata (annotations, labels: [`NodeChange::to_metadata`]) go
    /// in the same patch, so a driver's record and its condition are one write: the status
    /// subresource keeps the metadata a patch sends and resets only `spec`
    /// (`nodeStatusStrategy.PrepareForUpdate` in `pkg/registry/core/node/strategy.go`,
    /// v1.37.2: `newNode.Spec = oldNode.Spec`; its `GetResetFields` names `spec` alone). A
    /// change to the spec would be dropped there without a word, so it is refused before any
    /// request (Invalid).
    async fn patch_node_conditions(
        &self,
        name: &str,
        resource_version: Option<&str>,
        changes: &[NodeChange],
        conditions: &[NodeCondition],
    ) -> ApiResult<Node>;
}
