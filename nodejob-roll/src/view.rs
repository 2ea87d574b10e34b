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

use std::collections::{BTreeMap, HashMap};
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

/// Where a reader of [`NodeView::changed_since`] stands: the changes it has taken in. A new
/// one stands before every node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor(u64);

#[derive(Debug, Default)]
struct Nodes {
    by_name: BTreeMap<String, Node>,
    position: String,
    /// The number of each node's last change, a node deleted included; numbered from 1.
    changed: HashMap<String, u64>,
    /// The same, by number: one entry per node, its last change (for the changes since a
    /// cursor, in the order they came, without a pass over every node).
    journal: BTreeMap<u64, String>,
    last: u64,
}

impl Nodes {
    fn listed(listed: NodesAt) -> Self {
        let mut nodes = Nodes::default();
        nodes.relisted(listed);
        nodes
    }

    /// A list replaces what the view held: every node in it, and every node gone from it,
    /// counts as changed (what happened in between is not known).
    fn relisted(&mut self, listed: NodesAt) {
        let by_name: BTreeMap<String, Node> = (listed.nodes.into_iter())
            .map(|n| (n.metadata.name.clone().unwrap_or_default(), n))
            .collect();
        let old = std::mem::replace(&mut self.by_name, by_name);
        let mut names: Vec<String> = old.into_keys().collect();
        names.extend(self.by_name.keys().cloned());
        names.sort();
        names.dedup();
        for name in names {
            self.touch(name);
        }
        self.position = listed.resource_version;
    }

    fn apply(&mut self, answer: NodeChanges) {
        for change in answer.changes {
            match change {
                Change::Applied(node) => {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    self.by_name.insert(name.clone(), node);
                    self.touch(name);
                }
                Change::Deleted(node) => {
                    let name = node.metadata.name.unwrap_or_default();
                    self.by_name.remove(&name);
                    self.touch(name);
                }
                Change::TimedOut => {}
            }
        }
        self.position = answer.resource_version;
    }

    fn touch(&mut self, name: String) {
        self.last += 1;
        if let Some(before) = self.changed.insert(name.clone(), self.last) {
            self.journal.remove(&before);
        }
        self.journal.insert(self.last, name);
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
                self.lock().relisted(listed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The node named `name`, as last seen; `None` when it is not in the cluster.
    pub fn node(&self, name: &str) -> Option<Node> {
        self.lock().by_name.get(name).cloned()
    }

    /// The names of the nodes that changed (added, modified or deleted) since `cursor`, each
    /// once, in the order of their last change; moves `cursor` past them. A new cursor gets
    /// every node. Costs the changes, not the nodes: a reader that keeps what it derives from
    /// each node (the roll's admission) stays up to date in time proportional to what
    /// changed, as an informer's event handlers do.
    pub fn changed_since(&self, cursor: &mut Cursor) -> Vec<String> {
        let nodes = self.lock();
        let names = (nodes.journal.range(cursor.0 + 1..))
            .map(|(_, name)| name.clone())
            .collect();
        cursor.0 = nodes.last;
        names
    }

    /// What `f` makes of every node, in name order, as last seen.
    pub fn read<T>(&self, f: impl FnOnce(&mut dyn Iterator<Item = &Node>) -> T) -> T {
        let nodes = self.lock();
        f(&mut nodes.by_name.values())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Nodes> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
