//! [`NodeApi`] for [`KubeApi`]: Nodes read, listed, watched, and patched under a
//! resourceVersion precondition.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
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
        let patch = merge_patch(resource_version, changes)?;
        let request =
            collection::<Node>(None).patch(name, &PatchParams::default(), &Patch::Merge(&patch));
        let answer = call_json(&self.client, request).await;
        if let Ok(node) = &answer {
            self.nodes.saw(&cluster_key(name), node);
        }
        answer
    }

    /// One `GET /version`, as `kubectl version` reads the server's.
    async fn version(&self) -> ApiResult<Info> {
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
pub(crate) fn merge_patch(resource_version: &str, changes: &[NodeChange]) -> ApiResult<Value> {
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
            merge_patch("42", &changes)?,
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
            merge_patch("42", &[])?,
            json!({ "metadata": { "resourceVersion": "42" } })
        );
        Ok(())
    }
}
