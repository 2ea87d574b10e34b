//! [`Progress`]: the typed events of a rotation; [`ProgressSink`] receives them; [`Report`] is
//! what a run (or an abort) ends with. The shape is the upgrade driver's: per node its steps
//! with durations and how it ended, totals, an outcome (done, failed with the command that
//! retries, stopped with why), and the Lease's history; a rotation adds its gates, every
//! node's fingerprints side by side.

use nodejob_roll::{DriverEvent, EventSink, FenceEvent, Outcome};
use serde::Serialize;

use crate::gate::{Gate, GateReport};
use crate::phase::CaStep;
use crate::status::CaStatus;

/// One event of a rotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Progress {
    /// A phase starts on the nodes that have not passed it.
    PhaseStarted {
        /// The phase.
        phase: CaStep,
        /// The nodes it runs on, in order.
        nodes: Vec<String>,
    },
    /// A node needs nothing for a step.
    NodeSkipped {
        /// The node.
        node: String,
        /// The step.
        step: CaStep,
        /// Why.
        why: String,
    },
    /// A node's step starts.
    StepStarted {
        /// The node.
        node: String,
        /// The step.
        step: CaStep,
    },
    /// A node's step ended well.
    StepFinished {
        /// The node.
        node: String,
        /// The step.
        step: CaStep,
        /// How long it took, in milliseconds of the backend's clock.
        took_ms: u64,
        /// What it did.
        message: String,
    },
    /// A gate was checked: every node side by side.
    Gate(GateReport),
    /// A note: an adopted Job, a runner's warning.
    Note {
        /// The node it is about, if any.
        node: Option<String>,
        /// The text.
        message: String,
    },
    /// A node ended in this run.
    NodeFinished {
        /// The node.
        node: String,
        /// How.
        result: NodeResult,
    },
    /// No further node starts; the reason.
    Stopping {
        /// Why.
        why: String,
    },
    /// The Lease acquired, renewed, or lost (the run stops before its next write), as the
    /// [`Fence`](nodejob_roll::Fence) tells it; serialised as the event itself:
    /// `lease_acquired`, `lease_renewed`, `lease_lost`.
    // Untagged, so last: serde wants untagged variants at the end.
    #[serde(untagged)]
    Lease(FenceEvent),
}

impl DriverEvent for Progress {
    fn note(node: &str, message: String) -> Self {
        Progress::Note {
            node: Some(node.to_string()),
            message,
        }
    }

    fn lease(event: &FenceEvent) -> Self {
        Progress::Lease(event.clone())
    }
}

impl nodejob_roll::RollEvent for Progress {
    /// A rotation tells its phases, not its batches.
    fn batch_started(_: usize, _: &str, _: &[String]) -> Option<Self> {
        None
    }

    fn notice(message: String) -> Self {
        Progress::Note {
            node: None,
            message,
        }
    }
}

/// Where a run's [`Progress`] goes: any [`EventSink`] of it (a closure `Fn(&Progress)` is
/// one).
pub trait ProgressSink: EventSink<Progress> {}

impl<S: EventSink<Progress> + ?Sized> ProgressSink for S {}

/// A sink that drops everything.
pub fn quiet() -> std::sync::Arc<dyn ProgressSink> {
    std::sync::Arc::new(|_: &Progress| {})
}

/// How a node ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum NodeResult {
    /// It trusts the new CA alone, which issues its leaves (whether this run did it or not).
    Rotated,
    /// An abort left it as before the rotation: the new CA not trusted.
    Restored,
    /// A step failed on it.
    Failed(Failure),
    /// A gate found it disagreeing.
    Disagrees {
        /// The gate.
        gate: Gate,
        /// With what.
        what: String,
    },
    /// Stopped before `step` without failing (a stop request, the Lease lost): a rerun
    /// carries it on from what it reports.
    Interrupted {
        /// The step it would have taken next.
        step: CaStep,
        /// Why.
        why: String,
    },
}

/// A node's failure, as the report names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The step.
    pub step: CaStep,
    /// What happened.
    pub message: String,
    /// The host Job's exit code, when it gave one.
    pub exit_code: Option<i32>,
    /// The end of its log, when read.
    pub log_tail: Option<String>,
}

/// One node in the [`Report`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    /// The node.
    pub name: String,
    /// What it reported when the run began.
    pub before: Option<CaStatus>,
    /// What it reported last.
    pub after: Option<CaStatus>,
    /// How it ended; `None`: the run stopped before it got there (see `after` for where it
    /// stands).
    pub result: Option<NodeResult>,
    /// Each host-mutating step this run ran (or adopted) on it, with how long it took
    /// (milliseconds of the backend's clock).
    pub steps: Vec<(CaStep, u64)>,
}

impl NodeReport {
    /// The failure, when it failed.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.result {
            Some(NodeResult::Failed(f)) => Some(f),
            _ => None,
        }
    }

    /// Its total time in steps, in milliseconds.
    pub fn took_ms(&self) -> u64 {
        self.steps.iter().map(|(_, ms)| ms).sum()
    }
}

/// The totals of a [`Report`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Nodes on the new CA alone at the end.
    pub rotated: usize,
    /// Nodes an abort restored.
    pub restored: usize,
    /// Nodes that failed a step.
    pub failed: usize,
    /// Nodes a gate found disagreeing.
    pub disagreed: usize,
    /// Nodes stopped in flight.
    pub interrupted: usize,
    /// Nodes the run did not finish (it stopped elsewhere first).
    pub unfinished: usize,
    /// Host-mutating steps run (or adopted) in all.
    pub steps: usize,
    /// The run's duration, milliseconds of the backend's clock.
    pub took_ms: u64,
}

/// What a rotation (or an abort) did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The new CA's fingerprint.
    pub target: String,
    /// Every node of the plan, in the rotation's order.
    pub nodes: Vec<NodeReport>,
    /// Each gate checked, in order, with every node's fingerprints side by side.
    pub gates: Vec<GateReport>,
    /// How it ended.
    pub outcome: Outcome,
    /// The totals.
    pub totals: Totals,
    /// The Lease's history in this run, in order: acquired (how), renewals, released or lost.
    pub lease: Vec<String>,
}

impl Report {
    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeReport> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The totals of the nodes as they stand, and `took_ms`.
    pub(crate) fn total(&mut self, took_ms: u64) {
        let mut t = Totals {
            took_ms,
            ..Totals::default()
        };
        for n in &self.nodes {
            match &n.result {
                None => t.unfinished += 1,
                Some(NodeResult::Rotated) => t.rotated += 1,
                Some(NodeResult::Restored) => t.restored += 1,
                Some(NodeResult::Failed(_)) => t.failed += 1,
                Some(NodeResult::Disagrees { .. }) => t.disagreed += 1,
                Some(NodeResult::Interrupted { .. }) => t.interrupted += 1,
            }
            t.steps += n.steps.len();
        }
        self.totals = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_events_serialise_as_events_of_their_own() {
        let json = |e: FenceEvent| serde_json::to_string(&Progress::Lease(e)).unwrap();
        let acquired = FenceEvent::Acquired {
            lease: "kube-system/nodejob".into(),
            epoch: 1,
            how: "taken over from a (epoch 0)".into(),
        };
        assert_eq!(
            json(acquired),
            r#"{"event":"lease_acquired","lease":"kube-system/nodejob","epoch":1,"how":"taken over from a (epoch 0)"}"#
        );
        assert_eq!(
            json(FenceEvent::Renewed { epoch: 1 }),
            r#"{"event":"lease_renewed","epoch":1}"#
        );
        assert_eq!(
            json(FenceEvent::Lost {
                message: "held by b".into()
            }),
            r#"{"event":"lease_lost","message":"held by b"}"#
        );
        let stopping = Progress::Stopping { why: "w".into() };
        assert_eq!(
            serde_json::to_string(&stopping).unwrap(),
            r#"{"event":"stopping","why":"w"}"#
        );
    }
}
