//! [`Order`]: the rotation's order of nodes, the engine's ([`nodejob_roll::Order::Workers`]):
//! control-plane nodes one at a time, then the workers `concurrency` at a time, each in name
//! order. A leaf: the run, the preview and the reads of the cluster all list nodes in it.

use k8s_openapi::api::core::v1::Node;
use nodejob_roll::Group;

/// Nodes in the rotation's order, grouped as a phase rolls them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Order {
    groups: Vec<Group>,
}

impl Order {
    /// `nodes` in order, the workers `width` at a time.
    pub(crate) fn of(nodes: &[Node], width: usize) -> Order {
        let nodes: Vec<&Node> = nodes.iter().collect();
        let groups = nodejob_roll::Order::Workers.groups(&nodes, width, |_| false);
        Order { groups }
    }

    /// The names of `nodes`, in order.
    pub(crate) fn names(nodes: &[Node]) -> Vec<String> {
        Order::of(nodes, 1).all()
    }

    /// Every node, in order.
    pub(crate) fn all(&self) -> Vec<String> {
        (self.groups.iter())
            .flat_map(|g| g.nodes.iter().cloned())
            .collect()
    }

    /// The groups of a phase: each control-plane node alone, then the workers.
    pub(crate) fn groups(&self) -> &[Group] {
        &self.groups
    }
}
