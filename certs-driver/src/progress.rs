//! [`Progress`]: the typed events of a rotation; [`ProgressSink`] receives them; [`Report`] is
//! what a run (or an abort) ends with. The shape is the upgrade driver's: per node its steps
//! with durations and how it ended, totals, an outcome (done, failed with the command that
//! retries, stopped with why), and the Lease's history; a rotation adds its gates, every
//! node's fingerprints side by side.

use nodejob_roll::{EventSink, NodeLine, OwnEvents};
use serde::Serialize;

use crate::gate::{Gate, GateReport};
use crate::phase::CaStep;
use crate::status::CaStatus;

/// One event of a rotation: the engine's events over the rotation's steps and results, and
/// its own ([`CaEvent`]).
pub type Progress = nodejob_roll::Progress<CaStep, NodeResult, CaEvent>;

/// The events only a rotation tells, serialised as the others are (tagged by `event`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CaEvent {
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
    /// A gate was checked: every node side by side.
    Gate(GateReport),
}

/// A rotation tells its phases, not its batches.
impl OwnEvents for CaEvent {
    const TELLS_BATCHES: bool = false;
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
pub type Failure = nodejob_roll::Failure<CaStep>;

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

/// What a rotation adds to its [`Report`]: its gates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Gates {
    /// Each gate checked, in order, with every node's fingerprints side by side.
    pub gates: Vec<GateReport>,
}

/// What a rotation (or an abort) did: every node of the plan in the rotation's order, how it
/// ended, the gates (`own.gates`, serialised inline as `gates`), the totals and the Lease's
/// history. Its `target` is the new CA's fingerprint.
pub type Report = nodejob_roll::Report<NodeReport, Totals, Gates>;

impl NodeLine for NodeReport {
    fn name(&self) -> &str {
        &self.name
    }
}

impl nodejob_roll::Totals<NodeReport> for Totals {
    fn count(nodes: &[NodeReport], took_ms: u64) -> Self {
        let mut t = Totals {
            took_ms,
            ..Totals::default()
        };
        for n in nodes {
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
        t
    }
}
