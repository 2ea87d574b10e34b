//! [`NodeApi`] for [`KubeApi`]: Nodes read, listed, watched, and patched under a
//! resourceVersion precondition.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::api::{GetParams, ListParams, ObjectList, Patch, PatchParams};
use nodejob_core::{ApiError, ApiResult, Change, NodeApi, NodeChange, NodeChanges, NodesAt};
use serde_json::{Value, json};

use super::{KubeApi, cluster_key, collection};
use crate::transport::call_json;

#[async_trait]
impl NodeApi for KubeApi {
    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        let request = collection::<Node>(None).get(name, &GetParams::default());
        self.get_tracked(&self.nodes, cluster_key(name), request)
            .await
    }

    /// One `GET /api/v1/nodes[?labelSelector=...]`, unpaged: the selector is sent only when it
    /// is not empty.
    async fn list_nodes(&self, label_selector: &str) -> ApiResult<Vec<Node>> {
        let mut lp = ListParams::default();
        if !label_selector.is_empty() {
            lp = lp.labels(label_selector);
        }
        let list: ObjectList<Node> =
            call_json(&self.client, collection::<Node>(None).list(&lp)).await?;
        let mut nodes = list.items;
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(nodes)
    }

    /// One `GET /api/v1/nodes`, unpaged, with the list's resourceVersion.
    async fn list_nodes_at(&self) -> ApiResult<NodesAt> {
        let request = collection::<Node>(None).list(&ListParams::default());
        let list: ObjectList<Node> = call_json(&self.client, request).await?;
        let mut nodes = list.items;
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(NodesAt {
            nodes,
            resource_version: list.metadata.resource_version.unwrap_or_default(),
        })
    }

    /// The watch of every node, kept open across calls (see `every_node`).
    async fn wait_nodes(&self, since: &str, timeout: Duration) -> ApiResult<NodeChanges> {
        self.every_node.wait(&self.client, since, timeout).await
    }

    /// As [`JobApi::wait_job`](nodejob_core::JobApi::wait_job), for a Node: one watch kept open
    /// across calls, resumed after it ends, a 410 recovered by a re-list by name.
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>> {
        self.wait_on(
            &self.nodes,
            collection::<Node>(None),
            cluster_key(name),
            since,
            timeout,
        )
        .await
    }

    /// One `PATCH /api/v1/nodes/{name}` with `Content-Type: application/merge-patch+json` (RFC
    /// 7386), built by `merge_patch` below. The apiserver applies a merge patch to the stored
    /// object's JSON, so the patch's `metadata.resourceVersion` replaces the stored one, and its
    /// update then refuses with 409 Conflict ("the object has been modified") unless they were
    /// equal (`Store.Update`, `apiserver/pkg/registry/generic/registry/store.go`).
    async fn patch_node(
        &self,
        name: &str,
        resource_version: &str,
        changes: &[NodeChange],
    ) -> ApiResult<Node> {
        // `spec.taints` is an atomic list: a merge patch replaces it whole. It is written as the
        // node at `resource_version` holds it with the changes applied: that version as this
        // client last saw it (a read's, a write's or a watch's answer at exactly that version,
        // which names one state of the node), else read first (one GET more, only for a change
        // of taints); the patch's own precondition then refuses it if the node changed since.
        let taints = if changes.iter().any(NodeChange::to_taints) {
            let key = cluster_key(name);
            let mut node = match self.nodes.at_version(&key, resource_version) {
                Some(node) => node,
                None => self.get_node(name).await?,
            };
            if node.metadata.resource_version.as_deref() != Some(resource_version) {
                return Err(ApiError::conflict(format!(
                    "Operation cannot be fulfilled on nodes \"{name}\": the object has been \
                     modified; please apply your changes to the latest version and try again"
                )));
            }
            for change in changes.iter().filter(|c| c.to_taints()) {
                change.apply(&mut node);
            }
            Some(node.spec.and_then(|s| s.taints).unwrap_or_default())
        } else {
            None
        };
        let patch = merge_patch(resource_version, changes, taints.as_deref())?;
        let request =
            collection::<Node>(None).patch(name, &PatchParams::default(), &Patch::Merge(&patch));
        let answer = call_json(&self.client, request).await;
        if let Ok(node) = &answer {
            self.nodes.saw(&cluster_key(name), node);
        }
        answer
    }

    /// One `PATCH /api/v1/nodes/{name}/status` with `Content-Type:
    /// application/strategic-merge-patch+json` and `{"status": {"conditions": [...]}}` (and
    /// `metadata.resourceVersion` when given, the update's precondition as in a merge patch):
    /// the list merges by `type`, so the kubelet's conditions stay (see the trait's docs). The
    /// metadata `changes` go in `metadata.annotations` and `metadata.labels`, maps that a
    /// strategic merge patch merges by key (`null` removes one), as a merge patch does.
    async fn patch_node_conditions(
        &self,
        name: &str,
        resource_version: Option<&str>,
        changes: &[NodeChange],
        conditions: &[NodeCondition],
    ) -> ApiResult<Node> {
        if let Some(change) = changes.iter().find(|c| !c.to_metadata()) {
            return Err(ApiError::invalid(format!(
                "a patch of node {name}'s status cannot carry {change:?}: the status \
                 subresource resets the spec"
            )));
        }
        // Only metadata changes: the merge patch's metadata is the strategic one's too.
        let mut patch = merge_patch(resource_version.unwrap_or_default(), changes, None)?;
        if resource_version.is_none()
            && let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("resourceVersion");
        }
        if patch["metadata"].as_object().is_some_and(|m| m.is_empty())
            && let Some(p) = patch.as_object_mut()
        {
            p.remove("metadata");
        }
        patch["status"] = json!({ "conditions": conditions });
        let request = collection::<Node>(None).patch_subresource(
            "status",
            name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        );
        let answer = call_json(&self.client, request).await;
        if let Ok(node) = &answer {
            self.nodes.saw(&cluster_key(name), node);
        }
        answer
    }

    /// One `GET /version`, as `kubectl version` reads the server's.
    async fn version(&self) -> ApiResult<Info> {
        if let Some(info) = self.reached() {
            return Ok(info);
        }
        let request = http::Request::get("/version")
            .body(Vec::new())
            .map_err(kube::core::request::Error::BuildRequest);
        call_json(&self.client, request).await
    }
}

/// The JSON merge patch that applies `changes` in order (a later change to the same field wins)
/// under the precondition `metadata.resourceVersion: resource_version`:
///
/// | change | in the patch |
/// |---|---|
/// | `Cordon` | `spec.unschedulable: true` |
/// | `Uncordon` | `spec.unschedulable: null` (removed, as `kubectl uncordon` leaves it) |
/// | `SetAnnotation {key, value}` | `metadata.annotations[key]: value` |
/// | `RemoveAnnotation {key}` | `metadata.annotations[key]: null` (removed; absent is fine) |
/// | `SetLabel {key, value}` | `metadata.labels[key]: value` |
/// | `RemoveLabel {key}` | `metadata.labels[key]: null` (removed; absent is fine) |
/// | `TaintNoSchedule {key}`, `Untaint {key}` | `spec.taints: taints` (the whole list, as the node at that version holds it with the changes applied; `null` when empty) |
pub(crate) fn merge_patch(
    resource_version: &str,
    changes: &[NodeChange],
    taints: Option<&[Taint]>,
) -> ApiResult<Value> {
    let mut patch = json!({ "metadata": { "resourceVersion": resource_version } });
    for change in changes {
        match change {
            NodeChange::Cordon => patch["spec"]["unschedulable"] = json!(true),
            NodeChange::Uncordon => patch["spec"]["unschedulable"] = Value::Null,
            NodeChange::SetAnnotation { key, value } => {
                patch["metadata"]["annotations"][key.as_str()] = json!(value);
            }
            NodeChange::RemoveAnnotation { key } => {
                patch["metadata"]["annotations"][key.as_str()] = Value::Null;
            }
            NodeChange::SetLabel { key, value } => {
                patch["metadata"]["labels"][key.as_str()] = json!(value);
            }
            NodeChange::RemoveLabel { key } => {
                patch["metadata"]["labels"][key.as_str()] = Value::Null;
            }
            NodeChange::TaintNoSchedule { .. } | NodeChange::Untaint { .. }
                if let Some(taints) = taints =>
            {
                patch["spec"]["taints"] = if taints.is_empty() {
                    Value::Null
                } else {
                    json!(taints)
                };
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "node change {other:?} has no merge patch in this backend"
                )));
            }
        }
    }
    Ok(patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_apply_in_order_under_the_resource_version() -> ApiResult<()> {
        let changes = [
            NodeChange::Cordon,
            NodeChange::set_annotation("stratum.ciq.com/upgrade", "cordoned"),
            NodeChange::remove_annotation("stratum.ciq.com/old"),
            NodeChange::set_annotation("stratum.ciq.com/old", "back"),
            NodeChange::Uncordon,
            NodeChange::set_label("stratum.ciq.com/quarantined", "yes"),
            NodeChange::remove_label("stratum.ciq.com/gone"),
        ];
        assert_eq!(
            merge_patch("42", &changes, None)?,
            json!({
                "metadata": {
                    "resourceVersion": "42",
                    "annotations": {
                        "stratum.ciq.com/upgrade": "cordoned",
                        "stratum.ciq.com/old": "back"
                    },
                    "labels": {
                        "stratum.ciq.com/quarantined": "yes",
                        "stratum.ciq.com/gone": null
                    }
                },
                "spec": { "unschedulable": null }
            })
        );
        // No change at all: the patch still checks the resourceVersion.
        assert_eq!(
            merge_patch("42", &[], None)?,
            json!({ "metadata": { "resourceVersion": "42" } })
        );
        Ok(())
    }

    #[test]
    fn a_change_of_taints_writes_the_whole_list_as_given_and_none_as_null() -> ApiResult<()> {
        let taint = Taint {
            key: "stratum.ciq.com/upgrade".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        let add = [
            NodeChange::Cordon,
            NodeChange::TaintNoSchedule {
                key: taint.key.clone(),
            },
        ];
        assert_eq!(
            merge_patch("7", &add, Some(std::slice::from_ref(&taint)))?,
            json!({
                "metadata": { "resourceVersion": "7" },
                "spec": {
                    "unschedulable": true,
                    "taints": [{ "key": "stratum.ciq.com/upgrade", "effect": "NoSchedule" }]
                }
            })
        );
        let remove = [NodeChange::Untaint {
            key: taint.key.clone(),
        }];
        assert_eq!(
            merge_patch("8", &remove, Some(&[]))?,
            json!({ "metadata": { "resourceVersion": "8" }, "spec": { "taints": null } })
        );
        // Without the list as read, a change of taints is refused, never sent as a guess.
        assert!(merge_patch("8", &remove, None).is_err());
        Ok(())
    }
}
