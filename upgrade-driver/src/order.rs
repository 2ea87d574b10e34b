//! The order of a roll: the nodes an earlier run left in flight first (carried on, so that
//! what it took down comes back before anything else goes down); then control-plane nodes, one
//! at a time; then workers grouped by zone, one zone at a time, zones and nodes in name order.
//! Deterministic: the same nodes give the same order.

use k8s_openapi::api::core::v1::Node;

use crate::records::{CONTROL_PLANE, ZONE, in_flight, label, name};

/// A group of nodes rolled together before the next group starts.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Group {
    /// `control-plane`, `zone <name>`, or `no zone`.
    pub name: String,
    /// At most this many of its nodes at once (1 for the control plane).
    pub width: usize,
    /// Its nodes, in order.
    pub nodes: Vec<String>,
}

/// Whether `node` is a control-plane node.
pub fn is_control_plane(node: &Node) -> bool {
    label(node, CONTROL_PLANE).is_some()
}

/// The groups of `nodes`, in order, workers `width` at a time.
pub fn groups(nodes: &[&Node], width: usize) -> Vec<Group> {
    let mut carried: Vec<String> = (nodes.iter())
        .filter(|n| in_flight(n))
        .map(|n| name(n).to_string())
        .collect();
    carried.sort();
    let nodes: Vec<&Node> = nodes.iter().copied().filter(|n| !in_flight(n)).collect();
    let mut control: Vec<String> = nodes
        .iter()
        .filter(|n| is_control_plane(n))
        .map(|n| name(n).to_string())
        .collect();
    control.sort();
    let mut zones: std::collections::BTreeMap<(bool, String), Vec<String>> = Default::default();
    for n in nodes.iter().filter(|n| !is_control_plane(n)) {
        // Nodes with no zone come last.
        let zone = label(n, ZONE).map(str::to_string);
        zones
            .entry((zone.is_none(), zone.unwrap_or_default()))
            .or_default()
            .push(name(n).to_string());
    }
    let mut out = Vec::new();
    if !carried.is_empty() {
        // Control-plane nodes among them still go one at a time (the batch rule).
        out.push(Group {
            name: "carried on".into(),
            width: width.max(1),
            nodes: carried,
        });
    }
    if !control.is_empty() {
        out.push(Group {
            name: "control-plane".into(),
            width: 1,
            nodes: control,
        });
    }
    for ((none, zone), mut names) in zones {
        names.sort();
        out.push(Group {
            name: if none {
                "no zone".into()
            } else {
                format!("zone {zone}")
            },
            width: width.max(1),
            nodes: names,
        });
    }
    out
}

/// The static batches of `groups`: each group cut into runs of its width.
pub fn batches(groups: &[Group]) -> Vec<(String, Vec<String>)> {
    groups
        .iter()
        .flat_map(|g| {
            g.nodes
                .chunks(g.width)
                .map(|c| (g.name.clone(), c.to_vec()))
                .collect::<Vec<_>>()
        })
        .collect()
}
