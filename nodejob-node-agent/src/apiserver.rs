//! The agent's writes, over kube.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::lease::{self, LeaseWriter};
use crate::logbook::PodKey;
use crate::register::{Created, NodeRegistrar};
use crate::writer::{PodWriter, WriteError};

/// A client for the agent's writes.
#[derive(Clone)]
pub(crate) struct Apiserver {
    client: Client,
}

impl Apiserver {
    pub(crate) fn new(client: Client) -> Self {
        Apiserver { client }
    }

    /// `PATCH nodes/{name}/status` with a strategic-merge patch, as the kubelet posts its
    /// status (`PatchNodeStatus` of `k8s.io/component-helpers/node/util`, a
    /// `StrategicMergePatchType` patch of the `status` subresource): `status.conditions` merges
    /// by `type`, so the kubelet's own conditions are replaced and every other one (a
    /// driver's `NodejobUpgrade`, a node-problem-detector's) is kept, as the kubelet's setters
    /// keep them (`pkg/kubelet/nodestatus/setters.go` updates its conditions in place). A JSON
    /// merge patch would replace the whole list and drop them. The node as written.
    pub(crate) async fn patch_node_status(
        &self,
        name: &str,
        patch: &Value,
    ) -> Result<Node, WriteError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map_err(classify)
    }

    /// `PATCH nodes/{name}` setting `spec.taints` to `taints`, if the node is still at
    /// `resource_version` (a merge patch that carries it is refused with 409 otherwise):
    /// `Ok(false)` when it is not, the node having changed since it was read.
    pub(crate) async fn patch_node_taints(
        &self,
        name: &str,
        resource_version: &str,
        taints: &[Taint],
    ) -> Result<bool, WriteError> {
        let taints = if taints.is_empty() {
            Value::Null
        } else {
            json!(taints)
        };
        let patch = json!({
            "metadata": {"resourceVersion": resource_version},
            "spec": {"taints": taints},
        });
        let nodes: Api<Node> = Api::all(self.client.clone());
        match nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            // Not gone: changed since it was read.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(e) => Err(classify(e)),
        }
    }

    fn pods(&self, pod: &PodKey) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &pod.namespace)
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), lease::NAMESPACE)
    }
}

impl LeaseWriter for Apiserver {
    async fn get(&self, name: &str) -> Result<Option<Lease>, WriteError> {
        self.leases().get_opt(name).await.map_err(classify)
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, WriteError> {
        self.leases()
            .create(&PostParams::default(), lease)
            .await
            .map_err(classify)
    }

    async fn update(&self, lease: &Lease) -> Result<Lease, WriteError> {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        self.leases()
            .replace(name, &PostParams::default(), lease)
            .await
            .map_err(classify)
    }
}

impl NodeRegistrar for Apiserver {
    async fn create(&self, node: &Node) -> Result<Created, WriteError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        match nodes.create(&PostParams::default(), node).await {
            Ok(_) => Ok(Created::New),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Created::Exists),
            Err(e) => Err(classify(e)),
        }
    }

    async fn get(&self, name: &str) -> Result<Node, WriteError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes.get(name).await.map_err(classify)
    }

    async fn set_labels(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), WriteError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let patch = json!({"metadata": {"labels": labels}});
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(classify)
    }
}

impl PodWriter for Apiserver {
    async fn patch_status(&self, pod: &PodKey, patch: &Value) -> Result<(), WriteError> {
        self.pods(pod)
            .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(drop)
            .map_err(classify)
    }

    async fn delete_now(&self, pod: &PodKey) -> Result<(), WriteError> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(pod.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        self.pods(pod)
            .delete(&pod.name, &params)
            .await
            .map(drop)
            .map_err(classify)
    }
}

/// 404, and 409 (the uid precondition: another pod has the name now), mean the object is
/// gone; other 4xx but 429 will not pass on a retry; the rest may.
fn classify(error: kube::Error) -> WriteError {
    match error {
        kube::Error::Api(status) => match status.code {
            404 | 409 => WriteError::Gone,
            429 => WriteError::Failed(status.message),
            400..=499 => WriteError::Refused(format!(
                "{} {}: {}",
                status.code, status.reason, status.message
            )),
            _ => WriteError::Failed(format!(
                "{} {}: {}",
                status.code, status.reason, status.message
            )),
        },
        other => WriteError::Failed(other.to_string()),
    }
}
