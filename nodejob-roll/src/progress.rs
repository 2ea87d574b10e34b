//! [`Progress`]: the typed events of a run of either driver, generic over the driver's step
//! (`S`), its node result (`R`) and the events only it tells (`X`); and [`Failure`], a node's
//! failure at a step. A terminal draws bars from them, a server streams them as JSON (tagged by
//! `event`: `step_started`, `node_finished`, ..., the driver's own events and the Lease's
//! inline).

use std::fmt;
use std::sync::Arc;

use crate::engine::RollEvent;
use crate::events::{DriverEvent, EventSink};
use crate::fence::FenceEvent;

/// One event of a run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Progress<S, R, X> {
    /// The run's nodes are chosen, told once before the first starts: how many, so that a
    /// board shows the whole (`35 of 100 done`).
    Planned {
        /// The nodes the run takes: those selected, and those an earlier run left in flight.
        nodes: usize,
    },
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
    /// A node waits on the pause switch before its step: told when the wait begins, and
    /// again when who paused or why changes.
    Paused {
        /// The node.
        node: String,
        /// The step it waits before.
        before: S,
        /// Who paused the rolls.
        by: String,
        /// When, on the cluster's clock (RFC 3339), if the switch says.
        #[serde(skip_serializing_if = "Option::is_none")]
        at: Option<String>,
        /// Why, as given (may be empty).
        reason: String,
    },
    /// The pause switch was lifted: the node goes on with its step.
    Resumed {
        /// The node.
        node: String,
        /// The step it waited before, which starts now.
        before: S,
        /// How long it waited, in milliseconds of the backend's clock.
        waited_ms: u64,
    },
    /// A note: an adopted Job, a node read again, a runner's warning.
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

/// What kind of failure a node's is: what a script branches on (`"kind"` in the JSON report),
/// and what the run decides on, carried typed from the intent that failed through the node's
/// machine to its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The host program (the upgrade, a rotation's step, a check) exited non-zero: its exit
    /// code and log tail say how.
    Host,
    /// A host Job could not be run: not created, replaced, lost to a reboot, or its result
    /// not read.
    Job,
    /// A read or a write of the cluster failed, after its retries.
    Api,
    /// The drain did not empty the node: refused by kubectl's rules, or held past its
    /// timeout.
    Drain,
    /// A wait passed its bound: the node not back on a new boot, not Ready, not gone.
    TimedOut,
    /// The node is not as the step needs it: deleted, replaced, at a version it should not
    /// be, another operation in flight on it, a record of ours on it unreadable.
    Node,
    /// An answer the machine did not expect: a defect of nodejob, to report.
    Internal,
}

impl FailureKind {
    /// A host Job's failure: [`FailureKind::Host`] when the host program gave an exit code,
    /// else [`FailureKind::Job`] (it did not run to its end, or its result was not read).
    pub fn host_or_job(exit_code: Option<i32>) -> Self {
        match exit_code {
            Some(_) => FailureKind::Host,
            None => FailureKind::Job,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Host => "host",
            FailureKind::Job => "job",
            FailureKind::Api => "api",
            FailureKind::Drain => "drain",
            FailureKind::TimedOut => "timed_out",
            FailureKind::Node => "node",
            FailureKind::Internal => "internal",
        })
    }
}

/// Why an intent gave no answer: its kind and its words (a machine takes it as its step's
/// failure, or decides otherwise on its kind).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// The kind.
    pub kind: FailureKind,
    /// What happened, naming the object.
    pub message: String,
}

impl Cause {
    /// A cause of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Cause {
            kind,
            message: message.into(),
        }
    }

    /// A read or a write of the cluster that failed.
    pub fn api(message: impl Into<String>) -> Self {
        Cause::new(FailureKind::Api, message)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A node's failure at a step, as the report names it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Failure<S> {
    /// The step.
    pub step: S,
    /// Its kind.
    pub kind: FailureKind,
    /// What happened.
    pub message: String,
    /// The host Job's (or a check's) exit code, when it gave one.
    pub exit_code: Option<i32>,
    /// The end of its log, when read.
    pub log_tail: Option<String>,
}

impl<S> Failure<S> {
    /// A failure of `kind` at `step`, with no exit code or log.
    pub fn new(step: S, kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            step,
            kind,
            message: message.into(),
            exit_code: None,
            log_tail: None,
        }
    }

    /// `cause`, at `step`.
    pub fn of(step: S, cause: Cause) -> Self {
        Failure::new(step, cause.kind, cause.message)
    }

    /// With the exit code the host gave, if any.
    pub fn exit(mut self, code: Option<i32>) -> Self {
        self.exit_code = code;
        self
    }

    /// With the end of its log, if read.
    pub fn log(mut self, tail: Option<String>) -> Self {
        self.log_tail = tail;
        self
    }
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
