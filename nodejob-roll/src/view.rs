//! [`NodeView`]: every node of the cluster as a run sees it, kept by a watch instead of a list
//! per batch, as the field's controllers keep theirs (client-go's informers, kube-runtime's
//! reflectors): one LIST at the start, then only the changes.
//!
//! ```text
//!  start:    list_nodes_at ───────────────▶ nodes + resourceVersion
//!  refresh:  wait_nodes(resourceVersion, 0) ─▶ changes applied, resourceVersion moved
//!            410 Gone ────────────────────▶ list again (the watch fell behind the apiserver)
//! ```
//!
//! A refresh takes what the watch has already delivered, without waiting: a read of the view
//! costs no request when nothing changed, and a roll's reads cost in all about one answer per
//! change of its nodes, not one list of every node per batch.
//!
//! How stale it may be, and why that is safe for admission: a change made by someone else
//! reaches the view as late as it reaches any informer (a LIST could be as stale a moment
//! later). The run's own writes at the end of a node (uncordon, Ready again) only make a node
//! available: until the view has them, it counts the node down, which holds a batch back and
//! never lets one exceed `max_unavailable`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nodejob_core::{ApiError, Change, NodeApi, NodeChanges, NodesAt};

use crate::call::retry;

/// Every node, and the resourceVersion the view stands at. Shared by a run's tasks; each read
/// follows a [`NodeView::refresh`].
#[derive(Debug)]
pub struct NodeView {
    inner: Mutex<Nodes>,
}

#[derive(Debug, Default)]
struct Nodes {
    by_name: BTreeMap<String, Node>,
    position: String,
}

impl Nodes {
    fn listed(listed: NodesAt) -> Self {
        Nodes {
            by_name: (listed.nodes.into_iter())
                .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
                .collect(),
            position: listed.resource_version,
        }
    }

    fn apply(&mut self, answer: NodeChanges) {
        for change in answer.changes {
            match change {
                Change::Applied(node) => {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    self.by_name.insert(name, node);
                }
                Change::Deleted(node) => {
                    self.by_name
                        .remove(node.metadata.name.as_deref().unwrap_or_default());
                }
                Change::TimedOut => {}
            }
        }
        self.position = answer.resource_version;
    }
}

impl NodeView {
    /// Lists every node: the view's start.
    ///
    /// # Errors
    /// When the nodes cannot be listed (transient errors retried within the call bound).
    pub async fn list<A: NodeApi + ?Sized>(api: &A) -> Result<Self, ApiError> {
        let listed = retry(api, || api.list_nodes_at()).await?;
        Ok(NodeView {
            inner: Mutex::new(Nodes::listed(listed)),
        })
    }

    /// Takes in the changes the watch has delivered since the view's resourceVersion, without
    /// waiting for more; lists again after a 410 Gone. Two refreshes at once are safe: an
    /// answer from a position the view has left is dropped.
    ///
    /// # Errors
    /// When the nodes can be neither watched nor listed (transient errors retried).
    pub async fn refresh<A: NodeApi + ?Sized>(&self, api: &A) -> Result<(), ApiError> {
        let from = self.lock().position.clone();
        match retry(api, || api.wait_nodes(&from, Duration::ZERO)).await {
            Ok(answer) => {
                let mut nodes = self.lock();
                if nodes.position == from {
                    nodes.apply(answer);
                }
                Ok(())
            }
            Err(e) if e.is_gone() => {
                let listed = retry(api, || api.list_nodes_at()).await?;
                *self.lock() = Nodes::listed(listed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The node named `name`, as last seen; `None` when it is not in the cluster.
    pub fn node(&self, name: &str) -> Option<Node> {
        self.lock().by_name.get(name).cloned()
    }

    /// What `f` makes of every node, in name order, as last seen.
    pub fn read<T>(&self, f: impl FnOnce(&mut dyn Iterator<Item = &Node>) -> T) -> T {
        let nodes = self.lock();
        f(&mut nodes.by_name.values())
    }

    /// The resourceVersion the view stands at.
    pub fn position(&self) -> String {
        self.lock().position.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Nodes> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
