//! The in-memory cluster as a conformance [`Backend`].

use std::sync::Arc;

use async_trait::async_trait;
use nodejob_fake::{FakeCluster, LogEndpoint, NodeScript, labels};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::{Backend, Customs, Failure, Object, Workloads};

/// A fresh [`FakeCluster`] with one Ready node, `node-a`, in namespace `conformance` (three,
/// `node-a` to `node-c`, for the [`Workloads`] scenarios).
pub struct FakeBackend {
    cluster: Arc<FakeCluster>,
    nodes: Vec<String>,
}

/// The label on the scenario's nodes.
const SCENARIO_LABEL: (&str, &str) = ("nodejob.test/scenario", "fake");

impl FakeBackend {
    /// A fresh cluster (call inside a tokio runtime with paused time).
    pub fn new(seed: u64) -> Self {
        let cluster = FakeCluster::with_seed(seed);
        cluster.add_namespace("conformance");
        cluster
            .add_node("node-a")
            .expect("a fresh cluster takes a node");
        FakeBackend {
            cluster: Arc::new(cluster),
            nodes: vec!["node-a".into()],
        }
    }

    /// A fresh cluster with three Ready nodes labelled for workloads (call inside a tokio
    /// runtime with paused time).
    pub fn for_workloads(seed: u64) -> Self {
        let cluster = FakeCluster::with_seed(seed);
        cluster.add_namespace("conformance");
        let nodes: Vec<String> = ["node-a", "node-b", "node-c"].map(String::from).into();
        for node in &nodes {
            cluster
                .add_node(node)
                .expect("a fresh cluster takes a node");
            cluster
                .label_node(node, SCENARIO_LABEL.0, SCENARIO_LABEL.1)
                .expect("the node was just added");
        }
        FakeBackend {
            cluster: Arc::new(cluster),
            nodes,
        }
    }
}

impl FakeBackend {
    /// A fresh cluster with the declarative rolls' kinds installed, for the [`Customs`]
    /// scenarios.
    pub fn for_customs(seed: u64) -> Self {
        use nodejob_crd::Roll;
        let backend = Self::new(seed);
        backend
            .cluster
            .install_custom_kind(nodejob_crd::NodeUpgrade::KIND);
        backend
            .cluster
            .install_custom_kind(nodejob_crd::CARotation::KIND);
        backend
    }
}

impl Customs for FakeBackend {
    type Api = FakeCluster;
    fn api(&self) -> Arc<FakeCluster> {
        self.cluster.clone()
    }
    fn prefix(&self) -> String {
        "conformance".into()
    }
}

#[async_trait]
impl Backend for FakeBackend {
    type Api = FakeCluster;

    fn api(&self) -> Arc<FakeCluster> {
        self.cluster.clone()
    }
    fn namespace(&self) -> String {
        "conformance".into()
    }
    fn node(&self) -> String {
        "node-a".into()
    }
    async fn set_kubelet_reachable(&self, node: &str, reachable: bool) -> Result<(), Failure> {
        let script = NodeScript {
            log_endpoint: if reachable {
                LogEndpoint::Reachable
            } else {
                LogEndpoint::Unreachable
            },
            ..self.cluster.script(node)
        };
        self.cluster.set_script(node, script);
        Ok(())
    }
    async fn set_node_ready(&self, node: &str, ready: bool) -> Result<(), Failure> {
        self.cluster
            .set_node_ready(node, ready)
            .map_err(Failure::from)
    }
    async fn forbid_privileged_pods(&self) -> Result<String, Failure> {
        // As on a real cluster: a namespace whose PodSecurity level is `baseline`, whose
        // admission refuses privileged pods with the plugin's own message.
        let name = format!("{}-baseline", self.namespace());
        self.cluster.add_namespace(&name);
        self.cluster
            .label_namespace(&name, labels::POD_SECURITY_ENFORCE, "baseline")
            .map_err(Failure::from)?;
        Ok(name)
    }
    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), Failure> {
        self.cluster
            .delete_pod_now(namespace, name)
            .map_err(Failure::from)
    }
    async fn remove_node(&self, node: &str) -> Result<(), Failure> {
        self.cluster.remove_node(node).map_err(Failure::from)
    }
    async fn reboot_node(&self, node: &str) -> Result<(), Failure> {
        self.cluster
            .reboot_node(node)
            .map(drop)
            .map_err(Failure::from)
    }
}

#[async_trait]
impl Workloads for FakeBackend {
    fn nodes(&self) -> Vec<String> {
        self.nodes.clone()
    }
    fn node_label(&self) -> (String, String) {
        (SCENARIO_LABEL.0.into(), SCENARIO_LABEL.1.into())
    }
    async fn create(&self, object: Object) -> Result<(), Failure> {
        let namespaced = |meta: &mut ObjectMeta| {
            meta.namespace.get_or_insert_with(|| "conformance".into());
        };
        match object {
            Object::Deployment(mut d) => {
                namespaced(&mut d.metadata);
                self.cluster.create_deployment_now(&d).map(drop)
            }
            Object::Budget(mut b) => {
                namespaced(&mut b.metadata);
                self.cluster.create_budget_now(&b).map(drop)
            }
            Object::DaemonSet(mut d) => {
                namespaced(&mut d.metadata);
                self.cluster.create_daemon_set_now(&d).map(drop)
            }
            Object::Pod(mut p) => {
                namespaced(&mut p.metadata);
                self.cluster.create_pod_now(&p).map(drop)
            }
        }
        .map_err(Failure::from)
    }
}
