//! [`Order`]: the rotation's order of nodes, control-plane nodes first. A leaf: the run, the
//! preview and the reads of the cluster all list nodes in it.

use k8s_openapi::api::core::v1::Node;
use nodejob_core::drive::is_control_plane;

/// Nodes in the rotation's order: control-plane nodes (one at a time), then workers
/// (`concurrency` at a time), each in name order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Order {
    pub(crate) control: Vec<String>,
    pub(crate) workers: Vec<String>,
}

impl Order {
    pub(crate) fn of(nodes: &[Node]) -> Order {
        let name = |n: &Node| n.metadata.name.clone().unwrap_or_default();
        let mut control: Vec<String> = nodes
            .iter()
            .filter(|n| is_control_plane(n))
            .map(name)
            .collect();
        let mut workers: Vec<String> = nodes
            .iter()
            .filter(|n| !is_control_plane(n))
            .map(name)
            .collect();
        control.sort();
        workers.sort();
        Order { control, workers }
    }

    pub(crate) fn all(&self) -> Vec<String> {
        self.control.iter().chain(&self.workers).cloned().collect()
    }

    /// The batches of a phase: each control-plane node alone, then workers `width` at a time.
    pub(crate) fn batches(&self, width: usize) -> Vec<Vec<String>> {
        let control = self.control.iter().map(|n| vec![n.clone()]);
        let workers = self.workers.chunks(width.max(1)).map(<[String]>::to_vec);
        control.chain(workers).collect()
    }
}
