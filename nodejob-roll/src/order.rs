//! The order of a roll: [`Group`]s of nodes, each rolled in batches of its width. Control-plane
//! nodes go one at a time, before the workers; what a driver adds (nodes carried on from an
//! earlier run, zones) is a choice of [`Order`]. Deterministic: the same nodes give the same
//! groups.

use std::collections::BTreeMap;

use crate::is_control_plane;
use k8s_openapi::api::core::v1::Node;

/// The label that names a node's zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Nodes rolled together, `width` at a time.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Group {
    /// `carried on`, `control-plane`, `workers`, `zone <name>` or `no zone`.
    pub name: String,
    /// How many of its nodes a batch takes at most.
    pub width: usize,
    /// Its nodes, in order.
    pub nodes: Vec<String>,
}

/// How the workers are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// All workers one group, in name order.
    Workers,
    /// One group per zone ([`ZONE_LABEL`]), zones in name order, nodes with no zone last.
    ByZone,
}

fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

fn sorted<'a>(nodes: impl Iterator<Item = &'a Node>) -> Vec<String> {
    let mut names: Vec<String> = nodes.map(|n| name(n).to_string()).collect();
    names.sort();
    names
}

impl Order {
    /// The groups of `nodes` for a roll `width` wide: those `carried` says an earlier run left
    /// in flight first (so that what it took down comes back before anything else goes down;
    /// control-plane nodes among them still go one at a time, by the admission's rule), then
    /// control-plane nodes one at a time, then the workers. Empty groups are left out.
    pub fn groups(
        self,
        nodes: &[&Node],
        width: usize,
        carried: impl Fn(&Node) -> bool,
    ) -> Vec<Group> {
        let width = width.max(1);
        let mut out = Vec::new();
        let mut push = |name: String, width: usize, nodes: Vec<String>| {
            if !nodes.is_empty() {
                out.push(Group { name, width, nodes });
            }
        };
        push(
            "carried on".into(),
            width,
            sorted(nodes.iter().copied().filter(|n| carried(n))),
        );
        let rest: Vec<&Node> = nodes.iter().copied().filter(|n| !carried(n)).collect();
        push(
            "control-plane".into(),
            1,
            sorted(rest.iter().copied().filter(|n| is_control_plane(n))),
        );
        let workers = rest.iter().copied().filter(|n| !is_control_plane(n));
        match self {
            Order::Workers => push("workers".into(), width, sorted(workers)),
            Order::ByZone => {
                let mut zones: BTreeMap<(bool, String), Vec<&Node>> = BTreeMap::new();
                for n in workers {
                    let zone = (n.metadata.labels.as_ref()).and_then(|l| l.get(ZONE_LABEL));
                    // Nodes with no zone come last.
                    zones
                        .entry((zone.is_none(), zone.cloned().unwrap_or_default()))
                        .or_default()
                        .push(n);
                }
                for ((none, zone), members) in zones {
                    let name = if none {
                        "no zone".into()
                    } else {
                        format!("zone {zone}")
                    };
                    push(name, width, sorted(members.into_iter()));
                }
            }
        }
        out
    }
}

/// The batches of `groups` at their full widths, in order, each with its group's name: what a
/// roll does when every node is available.
pub fn batches(groups: &[Group]) -> Vec<(String, Vec<String>)> {
    groups
        .iter()
        .flat_map(|g| (g.nodes.chunks(g.width.max(1))).map(|c| (g.name.clone(), c.to_vec())))
        .collect()
}
