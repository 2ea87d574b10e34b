//! The nodes an earlier run blocked, held back from the roll's order ([`HeldBack`]): read from
//! their records, the same for the run and the preview. Quarantined ones are left as they are;
//! skipped ones go once more at the end.

use k8s_openapi::api::core::v1::Node;
use nodejob_roll::Group;

use crate::machine::{NodeResult, blocked_why};
use crate::plan::{Plan, Undrainable};
use crate::records::at_target;
use crate::records::{self, BLOCKED, Blocked, QUARANTINED};

/// The group the skipped nodes are tried once more in, after the roll.
pub(crate) const ONCE_MORE: &str = "skipped, once more";

/// The nodes of a run that an earlier run blocked, not at the target and not in flight.
///
/// Those quarantined toward this target count against `max_blocked` from the start (a crash
/// does not reset it); those skipped do not until blocked again, since the run tries them
/// again: a rerun after a roll stopped past `max_blocked` can then make progress once the
/// budgets allow it.
#[derive(Debug, Default)]
pub(crate) struct HeldBack {
    /// Labelled quarantined: left as they are, reported blocked.
    pub(crate) quarantined: Vec<(String, NodeResult)>,
    /// Of those, how many toward this target (this roll's).
    quarantined_here: u32,
    /// Skipped toward this target: tried again once, at the end.
    pub(crate) skipped: Vec<(String, NodeResult)>,
}

impl HeldBack {
    /// Those of `nodes`.
    pub(crate) fn of(plan: &Plan, nodes: &[Node]) -> Self {
        let mut held = HeldBack::default();
        for node in nodes {
            if records::in_flight(node) || at_target(plan, node).is_some() {
                continue;
            }
            let name = records::name(node).to_string();
            let record = records::read::<Blocked>(node, BLOCKED).ok().flatten();
            if records::quarantined(node) {
                if record.as_ref().is_some_and(|r| r.target == plan.target()) {
                    held.quarantined_here += 1;
                }
                let result = match record {
                    Some(r) => result_of(
                        &Blocked {
                            policy: Undrainable::Quarantine,
                            ..r
                        },
                        &name,
                    ),
                    None => NodeResult::Blocked {
                        policy: Undrainable::Quarantine,
                        budgets: Vec::new(),
                        pods: Vec::new(),
                        why: format!("labelled {QUARANTINED} (by someone): left as it is"),
                    },
                };
                held.quarantined.push((name, result));
            } else if let Some(r) =
                record.filter(|r| r.policy == Undrainable::Skip && r.target == plan.target())
            {
                let result = result_of(&r, &name);
                held.skipped.push((name, result));
            }
        }
        held
    }

    /// Whether it holds the node `name` back from the roll's order.
    pub(crate) fn holds(&self, name: &str) -> bool {
        (self.quarantined.iter())
            .chain(&self.skipped)
            .any(|(n, _)| n == name)
    }

    /// Whether the node `name` is quarantined.
    pub(crate) fn quarantines(&self, name: &str) -> bool {
        self.quarantined.iter().any(|(n, _)| n == name)
    }

    /// The quarantined nodes, each with why.
    pub(crate) fn quarantined_why(&self) -> Vec<(String, String)> {
        (self.quarantined.iter())
            .map(|(n, r)| (n.clone(), why(r).to_string()))
            .collect()
    }

    /// The skipped nodes, as the group that tries them once more; `None` when none.
    pub(crate) fn skipped_group(&self, width: usize) -> Option<Group> {
        (!self.skipped.is_empty()).then(|| Group {
            name: ONCE_MORE.into(),
            width,
            nodes: self.skipped.iter().map(|(n, _)| n.clone()).collect(),
        })
    }

    /// Its nodes' names.
    pub(crate) fn names(&self) -> impl Iterator<Item = &String> {
        (self.quarantined.iter())
            .chain(&self.skipped)
            .map(|(n, _)| n)
    }

    /// How many blocked nodes the run starts with: those quarantined toward its target.
    pub(crate) fn count(&self) -> u32 {
        self.quarantined_here
    }

    /// Whether an earlier run skipped the node `name` (it does not count until blocked
    /// again).
    pub(crate) fn skipped_before(&self, name: &str) -> bool {
        self.skipped.iter().any(|(n, _)| n == name)
    }

    /// The groups the admission counts unavailable nodes over: the order's and the skipped
    /// nodes, tried again at the end.
    pub(crate) fn admitted(&self, order: &[Group], width: usize) -> Vec<Group> {
        let mut groups = order.to_vec();
        groups.extend(self.skipped_group(width));
        groups
    }
}

fn result_of(record: &Blocked, node: &str) -> NodeResult {
    NodeResult::Blocked {
        policy: record.policy,
        budgets: record.budgets.clone(),
        pods: record.pods.clone(),
        why: blocked_why(record, true, node),
    }
}

pub(crate) fn why(result: &NodeResult) -> &str {
    match result {
        NodeResult::Blocked { why, .. } => why,
        _ => "",
    }
}
