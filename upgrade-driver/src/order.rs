//! The order of a roll: the nodes an earlier run left in flight first (carried on, so that
//! what it took down comes back before anything else goes down); then control-plane nodes, one
//! at a time; then workers grouped by zone, one zone at a time, zones and nodes in name order.
//! Deterministic: the same nodes give the same order. The engine's [`Order::ByZone`], with
//! this driver's in-flight record as what is carried on, and a node held to the end
//! ([`crate::PlanSpec::last`]).

use k8s_openapi::api::core::v1::Node;
use nodejob_roll::{Group, Order, is_control_plane};

use crate::records::{self, in_flight};

/// The name of the group of the node held to the end, a worker.
pub(crate) const HELD_TO_THE_END: &str = "held to the end";

/// The groups of a roll of `nodes`, `width` wide (zones and the nodes carried on), in order;
/// `last`, if one of them, held to the end (see [`crate::PlanSpec::last`]).
pub fn groups(nodes: &[&Node], width: usize, last: Option<&str>) -> Vec<Group> {
    let mut groups = Order::ByZone.groups(nodes, width, in_flight);
    let held = last.and_then(|last| nodes.iter().find(|n| records::name(n) == last));
    let Some(node) = held else {
        return groups;
    };
    let last = records::name(node);
    if in_flight(node) {
        return groups;
    }
    let Some(at) = groups
        .iter()
        .position(|g| g.nodes.iter().any(|n| n == last))
    else {
        return groups;
    };
    groups[at].nodes.retain(|n| n != last);
    if is_control_plane(node) {
        groups[at].nodes.push(last.to_string());
        return groups;
    }
    if groups[at].nodes.is_empty() {
        groups.remove(at);
    }
    groups.push(Group {
        name: HELD_TO_THE_END.into(),
        width: 1,
        nodes: vec![last.to_string()],
    });
    groups
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use nodejob_roll::ZONE_LABEL;

    use super::*;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let labels: BTreeMap<String, String> = (labels.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn said(groups: &[Group]) -> Vec<(String, usize, Vec<String>)> {
        (groups.iter())
            .map(|g| (g.name.clone(), g.width, g.nodes.clone()))
            .collect()
    }

    fn cluster() -> Vec<Node> {
        let cp = ("node-role.kubernetes.io/control-plane", "");
        vec![
            node("cp-0", &[cp]),
            node("cp-1", &[cp]),
            node("a-0", &[(ZONE_LABEL, "a")]),
            node("a-1", &[(ZONE_LABEL, "a")]),
            node("b-0", &[(ZONE_LABEL, "b")]),
        ]
    }

    fn group(name: &str, width: usize, nodes: &[&str]) -> (String, usize, Vec<String>) {
        let nodes = nodes.iter().map(|n| n.to_string()).collect();
        (name.to_string(), width, nodes)
    }

    #[test]
    fn a_worker_held_to_the_end_goes_alone_after_every_other_node() {
        let nodes = cluster();
        let refs: Vec<&Node> = nodes.iter().collect();
        assert_eq!(
            said(&groups(&refs, 2, Some("a-0"))),
            [
                group("control-plane", 1, &["cp-0", "cp-1"]),
                group("zone a", 2, &["a-1"]),
                group("zone b", 2, &["b-0"]),
                group(HELD_TO_THE_END, 1, &["a-0"]),
            ]
        );
        // Alone in its zone: the zone's group goes with it.
        assert_eq!(
            said(&groups(&refs, 2, Some("b-0"))),
            [
                group("control-plane", 1, &["cp-0", "cp-1"]),
                group("zone a", 2, &["a-0", "a-1"]),
                group(HELD_TO_THE_END, 1, &["b-0"]),
            ]
        );
    }

    #[test]
    fn a_control_plane_node_held_to_the_end_goes_last_of_the_control_plane_before_any_worker() {
        let nodes = cluster();
        let refs: Vec<&Node> = nodes.iter().collect();
        assert_eq!(
            said(&groups(&refs, 2, Some("cp-0"))),
            [
                group("control-plane", 1, &["cp-1", "cp-0"]),
                group("zone a", 2, &["a-0", "a-1"]),
                group("zone b", 2, &["b-0"]),
            ]
        );
    }

    #[test]
    fn a_node_held_to_the_end_that_an_earlier_run_left_in_flight_is_carried_on_first() {
        let mut nodes = cluster();
        nodes[2].metadata.annotations =
            Some([(records::IN_PROGRESS.to_string(), "{}".to_string())].into());
        let refs: Vec<&Node> = nodes.iter().collect();
        assert_eq!(
            said(&groups(&refs, 2, Some("a-0")))[0],
            group("carried on", 2, &["a-0"])
        );
    }

    #[test]
    fn no_node_held_or_one_not_in_the_roll_leaves_the_order_as_it_is() {
        let nodes = cluster();
        let refs: Vec<&Node> = nodes.iter().collect();
        let plain = said(&groups(&refs, 2, None));
        assert_eq!(said(&groups(&refs, 2, Some("elsewhere"))), plain);
        assert_eq!(plain.len(), 3);
    }
}
