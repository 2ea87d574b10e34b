//! Blocked nodes across the run: those an earlier run blocked (quarantined ones left as they
//! are, skipped ones put at the end), the skipped ones tried once more after the roll, and the
//! run's outcome when blocked nodes remain. A run of a plan that fails on an undrainable node
//! (the default), over a cluster no run blocked, has none of them.

use std::collections::BTreeSet;

use nodejob_core::{JobApi, LeaseApi, NodeApi, PodApi};
use nodejob_roll::{Group, Outcome, RollEvent, Tally};

use super::Run;
use crate::held::{HeldBack, ONCE_MORE, why};
use crate::machine::{HeldBy, NodeResult};
use crate::plan::Undrainable;
use crate::progress::Progress;
use crate::records::QUARANTINED;

/// The Event reason of a node skipped or quarantined.
pub(super) const REASON: &str = "NodejobUpgradeBlocked";

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
