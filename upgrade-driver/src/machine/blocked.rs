//! A node whose drain budgets block: what the plan's `on_undrainable` makes of it.
//!
//! ```text
//!  Draining ─drain held past its timeout by budgets─▶ fail (the default)
//!                                                   ├▶ skip: uncordon (if ours) + blocked record - in-progress ─▶ Blocked
//!                                                   └▶ quarantine: label + blocked record - in-progress ────────▶ Blocked
//!  Inspect ─labelled quarantined, not ours in flight─▶ Blocked (nothing written)
//! ```
//!
//! One write each: the node is never uncordoned without its record, nor labelled without it.
//! The in-progress record goes in the same write, so the node is no longer ours in flight: a
//! rerun does not carry it on, and a quarantined node is never uncordoned by us while it is
//! labelled.

use k8s_openapi::api::core::v1::Node;
use nodejob_core::NodeChange;

use super::context::{Next, Run, Seen};
use super::protocol::{
    DrainFailed, Failure, FailureKind, Intent, Mark, NodeResult, Observation, Own, UpgradeStep,
};
use crate::plan::Undrainable;
use crate::records::{
    self, BLOCKED, Blocked as Record, IN_PROGRESS, QUARANTINED, QUARANTINED_VALUE,
};

/// The blocked record being written (skipped: uncordoned if ours; quarantined: labelled).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Blocked(Record);

type Step = Next<Blocked, std::convert::Infallible>;

impl Blocked {
    /// The drain failed, held past its timeout by budgets (`failed.held`), and the plan skips
    /// or quarantines such a node: the write that does so.
    pub(super) fn start(run: &Run, seen: &Seen, failed: DrainFailed) -> Step {
        let held = failed.held.clone().unwrap_or_default();
        let policy = run.on_undrainable;
        let cordoned = seen.cordoned();
        let record = Record {
            target: run.target.clone(),
            policy,
            budgets: held.budgets,
            pods: held.pods,
            at: seen.now.clone(),
            cordoned,
        };
        let mut changes = Vec::new();
        match policy {
            Undrainable::Skip if cordoned => changes.push(NodeChange::Uncordon),
            Undrainable::Quarantine => {
                changes.push(NodeChange::set_label(QUARANTINED, QUARANTINED_VALUE));
            }
            _ => {}
        }
        changes.push(NodeChange::set_annotation(BLOCKED, records::value(&record)));
        changes.push(NodeChange::remove_annotation(IN_PROGRESS));
        let mut marks = Vec::new();
        if !failed.evicted.is_empty() {
            marks.push(Mark::Own(Own::Evicted(failed.evicted.clone())));
        }
        marks.push(Mark::Note(format!(
            "{}; {}",
            failed.message,
            match policy {
                Undrainable::Skip if cordoned => "skipping it: uncordoning it, recording why",
                Undrainable::Skip => "skipping it: recording why (left cordoned: not ours)",
                _ => "quarantining it: left cordoned, labelled, recording why",
            }
        )));
        let rv = seen.rv();
        Next::stay(Blocked(record), marks, Intent::Patch { rv, changes })
    }

    /// A node labelled quarantined, not ours in flight: left as it is, reported blocked with
    /// what its record says.
    pub(super) fn quarantined(seen: &Seen, node: &Node) -> Step {
        let record = seen.blocked_before.clone();
        let (budgets, pods) = record
            .as_ref()
            .map(|r| (r.budgets.clone(), r.pods.clone()))
            .unwrap_or_default();
        let why = match &record {
            Some(r) => blocked_why(r, true, records::name(node)),
            None => format!("labelled {QUARANTINED} (by someone): left as it is"),
        };
        Next::done(NodeResult::Blocked {
            policy: Undrainable::Quarantine,
            budgets,
            pods,
            why,
        })
    }

    /// The blocked record written: the node ends blocked.
    pub(super) fn step(self, seen: &mut Seen, obs: Observation) -> Step {
        let Blocked(record) = self;
        let Observation::Node(node) = obs else {
            return Next::fail(Failure::new(
                UpgradeStep::Drain,
                FailureKind::Internal,
                format!("internal: unexpected answer {obs:?} at Blocking({record:?})"),
            ));
        };
        let why = blocked_why(&record, false, records::name(&node));
        seen.node = Some(node);
        Next::done(NodeResult::Blocked {
            policy: record.policy,
            budgets: record.budgets,
            pods: record.pods,
            why,
        })
    }
}

/// What was done with the blocked node `node`, in words; `earlier`: by an earlier run.
pub(crate) fn blocked_why(record: &Record, earlier: bool, node: &str) -> String {
    let by = if record.budgets.is_empty() {
        // The apiserver refuses the eviction of a Pod more than one budget covers, naming none.
        "more than one budget covering a Pod (the eviction API refuses it)".to_string()
    } else {
        format!("budget(s) {}", record.budgets.join(", "))
    };
    let when = if earlier {
        format!("an earlier run toward {} (at {})", record.target, record.at)
    } else if record.budgets.is_empty() {
        "its drain was refused".to_string()
    } else {
        "the drain's timeout".to_string()
    };
    match record.policy {
        Undrainable::Quarantine => format!(
            "quarantined after {when}: {by} kept {} on it; left cordoned with the label \
             {QUARANTINED}={QUARANTINED_VALUE} (`kubectl label node {node} {QUARANTINED}-` \
             removes it, to have the node rolled)",
            pods_said(&record.pods)
        ),
        _ => format!(
            "skipped after {when}: {by} kept {} on it; {}",
            pods_said(&record.pods),
            if record.cordoned {
                "uncordoned"
            } else {
                "left as it was"
            }
        ),
    }
}

fn pods_said(pods: &[String]) -> String {
    match pods {
        [] => "Pods".into(),
        pods => pods.join(", "),
    }
}
