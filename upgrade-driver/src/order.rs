//! The order of a roll: the nodes an earlier run left in flight first (carried on, so that
//! what it took down comes back before anything else goes down); then control-plane nodes, one
//! at a time; then workers grouped by zone, one zone at a time, zones and nodes in name order.
//! Deterministic: the same nodes give the same order. The engine's [`Order::ByZone`], with
//! this driver's in-flight record as what is carried on.

use k8s_openapi::api::core::v1::Node;
use nodejob_roll::{Group, Order};

use crate::records::in_flight;

/// The groups of a roll of `nodes`, `width` wide (zones and the nodes carried on), in order.
pub fn groups(nodes: &[&Node], width: usize) -> Vec<Group> {
    Order::ByZone.groups(nodes, width, in_flight)
}
