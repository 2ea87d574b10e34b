//! [`Progress`]: the typed events of a run of either driver, generic over the driver's step
//! (`S`), its node result (`R`) and the events only it tells (`X`); and [`Failure`], a node's
//! failure at a step. A terminal draws bars from them, a server streams them as JSON (tagged by
//! `event`: `step_started`, `node_finished`, ..., the driver's own events and the Lease's
//! inline).

use std::sync::Arc;

use crate::engine::RollEvent;
use crate::events::{DriverEvent, EventSink};
use crate::fence::FenceEvent;

/// One event of a run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Progress<S, R, X> {
    /// A batch of nodes starts (a driver that tells its phases instead tells none).
    BatchStarted {
        /// Its index, from 0.
        index: usize,
        /// Its group: `control-plane`, `zone <name>`, ...
        group: String,
        /// Its nodes, in order.
        nodes: Vec<String>,
    },
    /// A node's step starts.
    StepStarted {
        /// The node.
        node: String,
        /// The step.
        step: S,
    },
    /// A node's step ended well.
    StepFinished {
        /// The node.
        node: String,
        /// The step.
        step: S,
        /// How long it took, in milliseconds of the backend's clock.
        took_ms: u64,
        /// What it did.
        message: String,
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
        result: R,
        /// How long its steps took, in milliseconds of the backend's clock.
        took_ms: u64,
    },
    /// No further node starts; the reason.
    Stopping {
        /// Why.
        why: String,
    },
    /// An event only this driver tells, serialised as its own (tagged by `event` too).
    // Untagged, so last: serde wants untagged variants at the end.
    #[serde(untagged)]
    Driver(X),
    /// The Lease acquired, renewed, or lost, as the [`Fence`](crate::Fence) tells it;
    /// serialised as the event itself: `lease_acquired`, `lease_renewed`, `lease_lost`.
    #[serde(untagged)]
    Lease(FenceEvent),
}

impl<S, R, X> DriverEvent for Progress<S, R, X> {
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

/// The events only a driver tells (the `X` of its [`Progress`]).
pub trait OwnEvents {
    /// Whether the driver tells its batches (a rotation tells its phases instead).
    const TELLS_BATCHES: bool;
}

impl<S, R, X: OwnEvents> RollEvent for Progress<S, R, X> {
    fn batch_started(index: usize, group: &str, nodes: &[String]) -> Option<Self> {
        X::TELLS_BATCHES.then(|| Progress::BatchStarted {
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

/// A sink that drops everything.
pub fn quiet<E: 'static>() -> Arc<dyn EventSink<E>> {
    Arc::new(|_: &E| {})
}

/// A node's failure at a step, as the report names it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Failure<S> {
    /// The step.
    pub step: S,
    /// What happened.
    pub message: String,
    /// The host Job's (or a check's) exit code, when it gave one.
    pub exit_code: Option<i32>,
    /// The end of its log, when read.
    pub log_tail: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
    #[serde(tag = "event", rename_all = "snake_case")]
    enum Own {
        PodsEvicted { node: String },
    }

    type P = Progress<u8, String, Own>;

    #[test]
    fn every_event_serialises_tagged_by_event_the_lease_and_the_drivers_inline() {
        let json = |e: P| serde_json::to_string(&e).unwrap();
        let acquired = FenceEvent::Acquired {
            lease: "kube-system/nodejob".into(),
            epoch: 1,
            how: "taken over from a (epoch 0)".into(),
        };
        assert_eq!(
            json(P::Lease(acquired)),
            r#"{"event":"lease_acquired","lease":"kube-system/nodejob","epoch":1,"how":"taken over from a (epoch 0)"}"#
        );
        assert_eq!(
            json(P::Lease(FenceEvent::Renewed { epoch: 1 })),
            r#"{"event":"lease_renewed","epoch":1}"#
        );
        assert_eq!(
            json(P::Lease(FenceEvent::Lost {
                message: "held by b".into()
            })),
            r#"{"event":"lease_lost","message":"held by b"}"#
        );
        assert_eq!(
            json(P::Stopping { why: "w".into() }),
            r#"{"event":"stopping","why":"w"}"#
        );
        assert_eq!(
            json(P::Driver(Own::PodsEvicted { node: "n".into() })),
            r#"{"event":"pods_evicted","node":"n"}"#
        );
        assert_eq!(
            json(P::NodeFinished {
                node: "n".into(),
                result: "ok".into(),
                took_ms: 5
            }),
            r#"{"event":"node_finished","node":"n","result":"ok","took_ms":5}"#
        );
    }
}
