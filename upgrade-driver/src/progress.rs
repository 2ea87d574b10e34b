//! [`Progress`]: the typed events of a run, as a terminal draws bars from them and a server
//! streams them; [`ProgressSink`] receives them; [`Report`] is what a run ends with.

use nodejob_roll::{EventSink, NodeLine, OwnEvents};
use serde::Serialize;

use crate::machine::{Failure, NodeResult, UpgradeStep};

/// One event of a run: the engine's events over this driver's steps and results, and its own
/// ([`UpgradeEvent`]).
pub type Progress = nodejob_roll::Progress<UpgradeStep, NodeResult, UpgradeEvent>;

/// The events only the upgrade tells, serialised as the others are (tagged by `event`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum UpgradeEvent {
    /// A node needs nothing.
    NodeSkipped {
        /// The node.
        node: String,
        /// Why.
        why: String,
    },
    /// A drain evicted these Pods.
    PodsEvicted {
        /// The node.
        node: String,
        /// `namespace/name` of each.
        pods: Vec<String>,
    },
    /// A node soaks: how long is left (told as it starts, then every tenth of the soak, at
    /// least every 30 s of it).
    Soaking {
        /// The node.
        node: String,
        /// Milliseconds of the soak left, by the backend's clock.
        left_ms: u64,
    },
}

impl OwnEvents for UpgradeEvent {
    const TELLS_BATCHES: bool = true;
}

impl From<UpgradeEvent> for Progress {
    fn from(event: UpgradeEvent) -> Self {
        Progress::Driver(event)
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

/// One node in the [`Report`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    /// The node.
    pub name: String,
    /// The version it reported when it was started: when the run began, or, for a node an
    /// earlier run left in flight (by then at the target, maybe), as that run recorded it.
    pub from: Option<String>,
    /// The version it reported when it ended (for an upgraded node, the target).
    pub to: Option<String>,
    /// How it ended; `None`: not started.
    pub result: Option<NodeResult>,
    /// Each step it ran, with how long it took (milliseconds of the backend's clock).
    pub steps: Vec<(UpgradeStep, u64)>,
    /// The Pods its drain evicted.
    pub pods_evicted: Vec<String>,
    /// How many Pods an earlier run's drain evicted from it toward the target, as that run
    /// recorded on the node: a resumed node drained then is not drained again.
    #[serde(skip_serializing_if = "is_zero")]
    pub pods_evicted_earlier: u32,
    /// From its start to its end, milliseconds of the backend's clock (0: not started), less
    /// its waits on the pause switch ([`NodeReport::paused_ms`]).
    pub took_ms: u64,
    /// How long it waited on the pause switch between its steps, milliseconds.
    #[serde(skip_serializing_if = "is_zero")]
    pub paused_ms: u64,
    /// What its move broke of the version skew policy, as the plan allowed (`--allow-skew`):
    /// each rule, with the versions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skew: Vec<String>,
}

impl NodeReport {
    /// `name`, not started, at `from`.
    pub fn not_started(name: String, from: Option<String>) -> Self {
        NodeReport {
            name,
            from,
            to: None,
            result: None,
            steps: Vec::new(),
            pods_evicted: Vec::new(),
            pods_evicted_earlier: 0,
            took_ms: 0,
            paused_ms: 0,
            skew: Vec::new(),
        }
    }

    /// The Pods its drains evicted toward the target: in this run and, as recorded, in
    /// earlier ones.
    pub fn evicted_in_all(&self) -> usize {
        self.pods_evicted.len() + self.pods_evicted_earlier as usize
    }

    /// The failure, when it failed (and was rolled back, or not).
    pub fn failure(&self) -> Option<&Failure> {
        match &self.result {
            Some(NodeResult::Failed(f) | NodeResult::RolledBack { failure: f, .. }) => Some(f),
            _ => None,
        }
    }
}

/// The totals of a [`Report`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Nodes upgraded by this run.
    pub upgraded: usize,
    /// Nodes at the target already.
    pub skipped: usize,
    /// Nodes that failed.
    pub failed: usize,
    /// Nodes stopped in flight (a stop request, the Lease lost): a rerun carries them on.
    pub interrupted: usize,
    /// Nodes not started.
    pub not_started: usize,
    /// Pods evicted by this run.
    pub pods_evicted: usize,
    /// Pods evicted by earlier runs from the nodes this run carried on.
    #[serde(skip_serializing_if = "is_zero")]
    pub pods_evicted_earlier: usize,
    /// The run's duration, milliseconds of the backend's clock.
    pub took_ms: u64,
    /// Nodes blocked (skipped or quarantined: budgets held their drain). Left out when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub blocked: usize,
    /// Nodes that failed and were rolled back (failures too, not counted in `failed`). Left
    /// out when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub rolled_back: usize,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// What a run did: every node of the plan in the order of the roll, how it ended, the totals
/// and the Lease's history.
pub type Report = nodejob_roll::Report<NodeReport, Totals>;

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
                None => t.not_started += 1,
                Some(NodeResult::Upgraded) => t.upgraded += 1,
                Some(NodeResult::Skipped { .. }) => t.skipped += 1,
                Some(NodeResult::Failed(_)) => t.failed += 1,
                Some(NodeResult::Interrupted { .. }) => t.interrupted += 1,
                Some(NodeResult::Blocked { .. }) => t.blocked += 1,
                Some(NodeResult::RolledBack { .. }) => t.rolled_back += 1,
            }
            t.pods_evicted += n.pods_evicted.len();
            t.pods_evicted_earlier += n.pods_evicted_earlier as usize;
        }
        t
    }
}
