//! The in-memory cluster as a conformance [`Backend`].

use std::sync::Arc;

use async_trait::async_trait;
use nodejob_fake::{FakeCluster, NodeScript};

use crate::{Backend, Failure};

/// A fresh [`FakeCluster`] with one Ready node, `node-a`, in namespace `conformance`.
pub struct FakeBackend {
    cluster: Arc<FakeCluster>,
}

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
        }
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
            log_unreachable: !reachable,
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
        // The fake has no admission chain: its kubelet script refuses pods with the message the
        // PodSecurity admission plugin writes for a privileged container under `baseline`.
        let refusal = "violates PodSecurity \"baseline:latest\": privileged (container \"host\" must not set securityContext.privileged=true), host namespaces (hostNetwork=true, hostPID=true)";
        let node = self.node();
        let script = NodeScript {
            refuse_pods: Some(refusal.into()),
            ..self.cluster.script(&node)
        };
        self.cluster.set_script(&node, script);
        Ok(self.namespace())
    }
}
