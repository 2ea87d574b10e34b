//! [`Progress`]: the typed events of a run, as a terminal draws bars from them and a server
//! streams them; [`ProgressSink`] receives them; [`Report`] is what a run ends with.

use nodejob_roll::{DriverEvent, EventSink, FenceEvent, Outcome};
use serde::Serialize;

use crate::machine::{Failure, NodeResult, UpgradeStep};

/// One event of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Progress {
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
    fn batch_started(index: usize, group: &str, nodes: &[String]) -> Option<Self> {
        Some(Progress::BatchStarted {
            index,
            group: group.to_string(),
            nodes: nodes.to_vec(),
        })
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
