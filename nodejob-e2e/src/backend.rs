//! [`KubeBackend`]: the conformance suite's backend on the real cluster.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config};
use nodejob_conformance::{Backend, Failure, Object, Workloads};
use nodejob_core::{Clock, NodeApi};
use nodejob_kube::KubeApi;

use crate::admin::{annotate_node, client, config, fail, labelled_node, namespace, unique};
use crate::conventions::{
    KUBELET_ANNOTATION, READY_ANNOTATION, REBOOT_ANNOTATION, SA_NAME, SA_NAMESPACE, SCENARIO_LABEL,
    SETTLE,
};
use crate::host::kubelet_address;
use crate::rbac::Rbac;

/// The conformance backend on the real cluster: the runner's API acts as a ServiceAccount bound
/// by `deploy/rbac.yaml` (or a variant of it); each scenario has its own namespace and Node.
pub struct KubeBackend {
    admin: Client,
    api: Arc<KubeApi>,
    rbac: Rbac,
    sa: String,
    namespace: String,
    node: String,
    /// For [`Workloads`]: the scenario's nodes (the first is `node`) and their label.
    nodes: Vec<String>,
    label: (String, String),
}

impl KubeBackend {
    /// A backend acting as the ServiceAccount of `deploy/rbac.yaml` as committed.
    pub async fn new() -> Result<Self, Failure> {
        Self::with_rbac(Rbac::committed(), SA_NAME).await
    }

    /// A backend acting as ServiceAccount `sa`, bound by `rbac`.
    pub async fn with_rbac(rbac: Rbac, sa: &str) -> Result<Self, Failure> {
        Self::with_nodes(config(None).await?, rbac, sa, 1).await
    }

    /// A backend for the [`Workloads`] scenarios: three nodes of the scenario's own, labelled
    /// [`SCENARIO_LABEL`], acting as the ServiceAccount of `deploy/rbac.yaml`.
    pub async fn for_workloads() -> Result<Self, Failure> {
        Self::for_workloads_on(config(None).await?).await
    }

    /// [`KubeBackend::for_workloads`] on the cluster that `admin`, an administrator's
    /// [`Config`], reaches (not necessarily the admin kubeconfig of `NODEJOB_E2E_KUBECONFIG`).
    pub async fn for_workloads_on(admin: Config) -> Result<Self, Failure> {
        Self::with_nodes(admin, Rbac::committed(), SA_NAME, 3).await
    }

    async fn with_nodes(
        admin_config: Config,
        rbac: Rbac,
        sa: &str,
        count: usize,
    ) -> Result<Self, Failure> {
        let admin = client(admin_config.clone())?;
        let name = unique("nj");
        namespace(&admin, &name, "privileged").await?;
        // The Role in the scenario's namespace, and where deploy/rbac.yaml puts it, the
        // drivers' namespace: the only one (with default) where an Event about a Node is taken.
        rbac.apply(&admin, sa, &[&name, SA_NAMESPACE]).await?;
        let label = (SCENARIO_LABEL.to_string(), name.clone());
        let nodes: Vec<String> = (0..count)
            .map(|i| {
                if i == 0 {
                    name.clone()
                } else {
                    format!("{name}-{i}")
                }
            })
            .collect();
        for node in &nodes {
            labelled_node(&admin, node, Some(&label)).await?;
        }
        let user = format!("system:serviceaccount:{SA_NAMESPACE}:{sa}");
        let mut as_sa = admin_config;
        as_sa.auth_info.impersonate = Some(user.clone());
        let api =
            KubeApi::from_config(as_sa).map_err(|e| Failure(format!("client as {user}: {e}")))?;
        Ok(KubeBackend {
            admin,
            api: Arc::new(api),
            rbac,
            sa: sa.into(),
            namespace: name.clone(),
            node: name,
            nodes,
            label,
        })
    }
}

#[async_trait]
impl Backend for KubeBackend {
    type Api = KubeApi;

    fn api(&self) -> Arc<KubeApi> {
        self.api.clone()
    }
    fn namespace(&self) -> String {
        self.namespace.clone()
    }
    fn node(&self) -> String {
        self.node.clone()
    }
    async fn set_kubelet_reachable(&self, node: &str, reachable: bool) -> Result<(), Failure> {
        annotate_node(
            &self.admin,
            node,
            KUBELET_ANNOTATION,
            (!reachable).then_some("unreachable"),
        )
        .await?;
        // The agent closes or reopens the node's log listener on the annotation's watch event:
        // wait until a connection to the address the apiserver dials is refused, or accepted.
        let api = KubeApi::new(self.admin.clone());
        let address = kubelet_address(&api.get_node(node).await?)
            .ok_or_else(|| Failure(format!("node {node} has no InternalIP or kubelet port")))?;
        let deadline = api.now() + SETTLE;
        while tokio::net::TcpStream::connect(address).await.is_ok() != reachable {
            if api.now() > deadline {
                return Err(Failure(format!(
                    "node {node}: the agent did not make {address} reachable={reachable}"
                )));
            }
            api.sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
    async fn set_node_ready(&self, node: &str, ready: bool) -> Result<(), Failure> {
        annotate_node(
            &self.admin,
            node,
            READY_ANNOTATION,
            Some(if ready { "true" } else { "false" }),
        )
        .await?;
        // Wait (on the Node's watch) until the agent has posted the condition, so the scenario
        // sees a settled node.
        let api = KubeApi::new(self.admin.clone());
        let deadline = api.now() + SETTLE;
        loop {
            let seen = api.get_node(node).await?;
            if nodejob_core::ready(&seen) == ready {
                return Ok(());
            }
            let left = deadline.saturating_sub(api.now());
            if left.is_zero() {
                return Err(Failure(format!(
                    "node {node}: the agent did not post Ready={ready}"
                )));
            }
            let since = seen.metadata.resource_version;
            api.wait_node(node, since.as_deref(), left).await?;
        }
    }
    async fn forbid_privileged_pods(&self) -> Result<String, Failure> {
        let name = format!("{}-baseline", self.namespace);
        namespace(&self.admin, &name, "baseline").await?;
        self.rbac.apply(&self.admin, &self.sa, &[&name]).await?;
        Ok(name)
    }
    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), Failure> {
        Api::<Pod>::namespaced(self.admin.clone(), namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(fail("deleting a pod"))
    }
    async fn remove_node(&self, node: &str) -> Result<(), Failure> {
        Api::<Node>::all(self.admin.clone())
            .delete(node, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(fail("deleting a node"))
    }
    /// The agent reboots the node's host when its reboot annotation takes a new value.
    async fn reboot_node(&self, node: &str) -> Result<(), Failure> {
        annotate_node(
            &self.admin,
            node,
            REBOOT_ANNOTATION,
            Some(&unique("reboot")),
        )
        .await
    }
}

#[async_trait]
impl Workloads for KubeBackend {
    fn nodes(&self) -> Vec<String> {
        self.nodes.clone()
    }
    fn node_label(&self) -> (String, String) {
        self.label.clone()
    }
    async fn create(&self, object: Object) -> Result<(), Failure> {
        create_workload(&self.admin, &self.namespace, object).await
    }
}

/// Creates a workload `object` in `namespace` as an administrator (`kubectl create`).
pub(crate) async fn create_workload(
    admin: &Client,
    namespace: &str,
    object: Object,
) -> Result<(), Failure> {
    let (admin, ns) = (admin.clone(), namespace);
    let params = PostParams::default();
    let result = match object {
        Object::Deployment(d) => Api::<Deployment>::namespaced(admin, ns)
            .create(&params, &d)
            .await
            .map(drop),
        Object::Budget(b) => Api::<PodDisruptionBudget>::namespaced(admin, ns)
            .create(&params, &b)
            .await
            .map(drop),
        Object::DaemonSet(d) => Api::<DaemonSet>::namespaced(admin, ns)
            .create(&params, &d)
            .await
            .map(drop),
        Object::Pod(p) => Api::<Pod>::namespaced(admin, ns)
            .create(&params, &p)
            .await
            .map(drop),
        other => return Err(Failure(format!("cannot create {other:?}"))),
    };
    result.map_err(fail("creating a workload"))
}
