//! Blocked nodes across the run: those an earlier run blocked (quarantined ones left as they
//! are, skipped ones put at the end), the skipped ones tried once more after the roll, and the
//! run's outcome when blocked nodes remain. A run of a plan that fails on an undrainable node
//! (the default), over a cluster no run blocked, has none of them.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use nodejob_core::{JobApi, LeaseApi, NodeApi, PodApi};
use nodejob_roll::{Group, Outcome, RollEvent, Tally};

use super::Run;
use crate::machine::{HeldBy, NodeResult, blocked_why};
use crate::plan::{Plan, Undrainable};
use crate::progress::Progress;
use crate::records::at_target;
use crate::records::{self, BLOCKED, Blocked, QUARANTINED};

/// The Event reason of a node skipped or quarantined.
pub(super) const REASON: &str = "NodejobUpgradeBlocked";

/// The group the skipped nodes are tried once more in, after the roll.
const ONCE_MORE: &str = "skipped, once more";

/// What held a drain, when budgets did: core's timeout naming the budgets that allowed no
/// disruption, or the refusal of a Pod that more than one budget covers (its budgets
/// unnamed: the apiserver does not name them).
pub(super) fn held_by(e: &nodejob_core::Error) -> Option<HeldBy> {
    match e {
        nodejob_core::Error::DrainTimeout {
            budgets, pods_left, ..
        } if !budgets.is_empty() => Some(HeldBy {
            budgets: budgets.clone(),
            pods: pods_left.clone(),
        }),
        other => nodejob_core::drain::covered_twice(other).map(|pod| HeldBy {
            budgets: Vec::new(),
            pods: vec![pod],
        }),
    }
}

/// The nodes of a run that an earlier run blocked, not at the target and not in flight.
///
/// Those quarantined toward this target count against `max_blocked` from the start (a crash
/// does not reset it); those skipped do not until blocked again, since the run tries them
/// again: a rerun after a roll stopped past `max_blocked` can then make progress once the
/// budgets allow it.
#[derive(Debug, Default)]
pub(crate) struct HeldBack {
    /// Labelled quarantined: left as they are, reported blocked.
    quarantined: Vec<(String, NodeResult)>,
    /// Of those, how many toward this target (this roll's).
    quarantined_here: u32,
    /// Skipped toward this target: tried again once, at the end.
    skipped: Vec<(String, NodeResult)>,
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
    pub(super) fn names(&self) -> impl Iterator<Item = &String> {
        (self.quarantined.iter())
            .chain(&self.skipped)
            .map(|(n, _)| n)
    }

    /// How many blocked nodes the run starts with: those quarantined toward its target.
    pub(super) fn count(&self) -> u32 {
        self.quarantined_here
    }

    /// Whether an earlier run skipped the node `name` (it does not count until blocked
    /// again).
    fn skipped_before(&self, name: &str) -> bool {
        self.skipped.iter().any(|(n, _)| n == name)
    }

    /// The groups the admission counts unavailable nodes over: the order's and the skipped
    /// nodes, tried again at the end.
    pub(super) fn admitted(&self, order: &[Group], width: usize) -> Vec<Group> {
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

impl<A> Run<'_, A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    /// Reports the nodes an earlier run blocked as they stand, before the roll.
    pub(super) fn held_back(&self, held: &HeldBack) {
        for (name, result) in &held.quarantined {
            self.note(name, format!("not rolled: {}", why(result)));
            self.finish_node(name, result.clone(), None);
        }
        for (name, result) in &held.skipped {
            self.note(name, format!("{}; tried again at the end", why(result)));
            self.finish_node(name, result.clone(), None);
        }
    }

    /// The nodes skipped so far (by this run, or an earlier one toward this target), as the
    /// group that tries each once more; those this run counted leave the blocked count until
    /// blocked again. `None` when there are none, or the roll is past `max_blocked`.
    pub(super) fn skipped_once_more(
        &self,
        tally: &mut Tally,
        width: usize,
        held: &HeldBack,
    ) -> Option<Group> {
        if tally.blocked > self.plan.spec().max_blocked {
            return None;
        }
        let nodes: Vec<String> = self.ledger.read(|nodes| {
            (nodes.iter())
                .filter(|n| {
                    matches!(
                        n.result,
                        Some(NodeResult::Blocked {
                            policy: Undrainable::Skip,
                            ..
                        })
                    )
                })
                .map(|n| n.name.clone())
                .collect()
        });
        if nodes.is_empty() {
            return None;
        }
        let counted = nodes.iter().filter(|n| !held.skipped_before(n)).count();
        tally.blocked = tally.blocked.saturating_sub(counted as u32);
        self.ctx.tell(&Progress::notice(format!(
            "trying the node(s) skipped once more: {}",
            nodes.join(", ")
        )));
        Some(Group {
            name: ONCE_MORE.into(),
            width,
            nodes,
        })
    }

    /// When the roll went through but nodes remain blocked: stopped, naming them (a rerun
    /// tries the skipped ones again; a quarantined one waits for its label to go).
    pub(super) fn blocked_outcome(&self) -> Option<Outcome> {
        let blocked: Vec<(String, Undrainable)> = self.ledger.read(|nodes| {
            (nodes.iter())
                .filter_map(|n| match &n.result {
                    Some(NodeResult::Blocked { policy, .. }) => Some((n.name.clone(), *policy)),
                    _ => None,
                })
                .collect()
        });
        if blocked.is_empty() {
            return None;
        }
        let said: Vec<String> = (blocked.iter())
            .map(|(n, p)| format!("{n} ({})", past(*p)))
            .collect();
        let policies: BTreeSet<Undrainable> = blocked.iter().map(|(_, p)| *p).collect();
        let mut then = Vec::new();
        if policies.contains(&Undrainable::Skip) {
            then.push("a rerun tries the skipped ones again".to_string());
        }
        let quarantined: Vec<&str> = (blocked.iter())
            .filter(|(_, p)| *p == Undrainable::Quarantine)
            .map(|(n, _)| n.as_str())
            .collect();
        if !quarantined.is_empty() {
            then.push(format!(
                "a quarantined one is rolled once its label is removed (`kubectl label node {} \
                 {QUARANTINED}-`)",
                quarantined.join(" ")
            ));
        }
        Some(Outcome::Stopped {
            why: format!(
                "{} node(s) not upgraded, their drain blocked by budgets allowing no \
                 disruption: {}; {}",
                blocked.len(),
                said.join(", "),
                then.join("; ")
            ),
        })
    }
}

fn past(policy: Undrainable) -> &'static str {
    match policy {
        Undrainable::Quarantine => "quarantined",
        _ => "skipped",
    }
}

fn why(result: &NodeResult) -> &str {
    match result {
        NodeResult::Blocked { why, .. } => why,
        _ => "",
    }
}
