//! [`Order`]: the rotation's order of nodes, control-plane nodes first. A leaf: the run, the
//! preview and the reads of the cluster all list nodes in it.

use k8s_openapi::api::core::v1::Node;
use nodejob_roll::{Group, is_control_plane};

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

    /// The groups of a phase: each control-plane node alone, then workers `width` at a time.
    pub(crate) fn groups(&self, width: usize) -> [Group; 2] {
        [
            Group {
                name: "control-plane".into(),
                width: 1,
                nodes: self.control.clone(),
            },
            Group {
                name: "workers".into(),
                width: width.max(1),
                nodes: self.workers.clone(),
            },
        ]
    }
}
