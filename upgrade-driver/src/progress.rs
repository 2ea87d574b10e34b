//! [`Progress`]: the typed events of a run, as a terminal draws bars from them and a server
//! streams them; [`ProgressSink`] receives them; [`Report`] is what a run ends with.

use std::time::Duration;

use serde::Serialize;

use crate::machine::{Failure, NodeResult, UpgradeStep};

/// One event of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Progress {
    /// The Lease is ours.
    LeaseAcquired {
        /// `namespace/name`.
        lease: String,
        /// The epoch we hold.
        epoch: i32,
        /// `free`, `taken over from <holder>`, or `resumed from <holder>`.
        how: String,
    },
    /// The Lease was renewed.
    LeaseRenewed {
        /// The epoch we hold.
        epoch: i32,
    },
    /// The Lease is no longer ours: the run stops before its next write.
    LeaseLost {
        /// Who holds it now, as the Lease says.
        message: String,
    },
    /// A batch of nodes starts.
    BatchStarted {
        /// Its index, from 0.
        index: usize,
        /// `control-plane`, or `zone <name>`.
        group: String,
        /// Its nodes, in order.
        nodes: Vec<String>,
    },
    /// A node needs nothing.
    NodeSkipped {
        /// The node.
        node: String,
        /// Why.
        why: String,
    },
    /// A node's step starts.
    StepStarted {
        /// The node.
        node: String,
        /// The step.
        step: UpgradeStep,
    },
    /// A node's step ended well.
    StepFinished {
        /// The node.
        node: String,
        /// The step.
        step: UpgradeStep,
        /// How long it took, in milliseconds of the backend's clock.
        took_ms: u64,
        /// What it did.
        message: String,
    },
    /// A drain evicted these Pods.
    PodsEvicted {
        /// The node.
        node: String,
        /// `namespace/name` of each.
        pods: Vec<String>,
    },
    /// A note: a resumed node, an adopted Job, a runner's warning.
    Note {
        /// The node it is about, if any.
        node: Option<String>,
        /// The text.
        message: String,
    },
    /// A node ended.
    NodeFinished {
        /// The node.
        node: String,
        /// How.
        result: NodeResult,
        /// How long its steps took, in milliseconds.
        took_ms: u64,
    },
    /// No further node starts; the reason.
    Stopping {
        /// Why.
        why: String,
    },
}

/// Where a run's [`Progress`] goes.
pub trait ProgressSink: Send + Sync {
    /// Receives one event.
    fn event(&self, event: &Progress);
}

impl<F: Fn(&Progress) + Send + Sync> ProgressSink for F {
    fn event(&self, event: &Progress) {
        self(event)
    }
}

/// A sink that drops everything.
pub fn quiet() -> std::sync::Arc<dyn ProgressSink> {
    std::sync::Arc::new(|_: &Progress| {})
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Every node of the plan is at the target.
    Done,
    /// Nodes failed; no further node was started.
    Failed {
        /// The command that retries (a rerun resumes: finished nodes are skipped).
        retry: String,
    },
    /// Stopped before the end without a node failing: the reason (a closed window, a stop
    /// request, the Lease lost, too many nodes unavailable). A rerun resumes.
    Stopped {
        /// Why.
        why: String,
    },
}

/// One node in the [`Report`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    /// The node.
    pub name: String,
    /// The version it reported when the run began.
    pub from: Option<String>,
    /// The version it reported when it ended (for an upgraded node, the target).
    pub to: Option<String>,
    /// How it ended; `None`: not started.
    pub result: Option<NodeResult>,
    /// Each step it ran, with how long it took (milliseconds of the backend's clock).
    pub steps: Vec<(UpgradeStep, u64)>,
    /// The Pods its drain evicted.
    pub pods_evicted: Vec<String>,
    /// From its start to its end, milliseconds of the backend's clock (0: not started).
    pub took_ms: u64,
}

impl NodeReport {
    /// The failure, when it failed.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.result {
            Some(NodeResult::Failed(f)) => Some(f),
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
    /// Pods evicted in all.
    pub pods_evicted: usize,
    /// The run's duration, milliseconds of the backend's clock.
    pub took_ms: u64,
}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The target version.
    pub target: String,
    /// Every node of the plan, in the order of the roll.
    pub nodes: Vec<NodeReport>,
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
}

pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
