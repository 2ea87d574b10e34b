//! A `CARotation` reconciled: its spec read by the [`Planner`] as `nodejob rotate-ca` reads
//! its flags, run by the CA rotation's driver (or its abort, with `spec.abort`), its status
//! (the phase, the nodes by phase passed, each gate's verdict) from the run's
//! [`RotationTracker`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use certs_driver::{CaEvent, CaStep, Fingerprint, NodeResult, Plan, Progress};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use nodejob_crd::{
    CARotation, CARotationStatus, Disagreeing, FailedNode, GateVerdict, InFlight, LIST_CAP,
    PhaseCounts, Reason, RotationPhase,
};
use tokio::task::JoinHandle;
use upgrade_driver::{EventSink, Window};

use crate::informer::{Informer, Informers};
use crate::kind::{Apis, Declared, Ended, Hooks, held_by, said};
use crate::metrics::{Metrics, ROTATE_CA};
use crate::planner::Planner;
use crate::status::{Verdict, conditions, held, times};

/// What a rotation's run has done so far, as its progress told it.
#[derive(Debug, Default)]
pub struct RotationTracker {
    state: Mutex<Tracked>,
}

#[derive(Clone, Debug, Default)]
struct Tracked {
    /// The new CA's fingerprint and notAfter, once the run started.
    ca: Option<(Fingerprint, Timestamp)>,
    /// Whether the run is an abort.
    abort: bool,
    planned: usize,
    phase: Option<CaStep>,
    passed: BTreeMap<CaStep, BTreeSet<String>>,
    in_flight: BTreeMap<String, String>,
    failed: Vec<FailedNode>,
    failed_count: usize,
    gates: Vec<GateVerdict>,
    version: u64,
}

impl RotationTracker {
    fn started(&self, fingerprint: Fingerprint, not_after: Timestamp, abort: bool) {
        let mut t = self.state.lock().unwrap();
        t.ca = Some((fingerprint, not_after));
        t.abort = abort;
        t.version += 1;
    }

    fn snapshot(&self) -> Tracked {
        self.state.lock().unwrap().clone()
    }

    fn counts(t: &Tracked) -> PhaseCounts {
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let passed = |step| count(t.passed.get(&step).map_or(0, BTreeSet::len));
        PhaseCounts {
            nodes: count(t.planned),
            staged: passed(CaStep::Stage),
            issued: passed(CaStep::Issue),
            finalized: passed(CaStep::Finalize),
            failed: count(t.failed_count),
        }
    }
}

impl EventSink<Progress> for RotationTracker {
    fn event(&self, event: &Progress) {
        let mut t = self.state.lock().unwrap();
        match event {
            Progress::Planned { nodes } => t.planned = *nodes,
            Progress::StepStarted { node, step } => {
                t.in_flight.insert(node.clone(), step.to_string());
            }
            Progress::StepFinished { node, step, .. } => {
                t.in_flight.remove(node);
                t.passed.entry(*step).or_default().insert(node.clone());
            }
            Progress::Driver(CaEvent::PhaseStarted { phase, .. }) => t.phase = Some(*phase),
            Progress::Driver(CaEvent::NodeSkipped { node, step, .. }) => {
                if !t.passed.entry(*step).or_default().insert(node.clone()) {
                    return;
                }
            }
            Progress::Driver(CaEvent::Gate(report)) => {
                let verdict = GateVerdict {
                    gate: report.gate.to_string(),
                    passed: report.passed(),
                    disagreeing: (report.disagreements.iter())
                        .take(LIST_CAP)
                        .map(|d| Disagreeing {
                            node: d.node.clone(),
                            what: d.what.clone(),
                        })
                        .collect(),
                };
                t.gates.retain(|g| g.gate != verdict.gate);
                t.gates.push(verdict);
            }
            Progress::NodeFinished { node, result, .. } => {
                t.in_flight.remove(node);
                let failed = match result {
                    NodeResult::Failed(f) => Some(FailedNode {
                        node: node.clone(),
                        step: f.step.to_string(),
                        reason: "HostStepFailed".into(),
                        message: f.message.clone(),
                        job: None,
                        exit_code: f.exit_code,
                    }),
                    NodeResult::Disagrees { gate, what } => Some(FailedNode {
                        node: node.clone(),
                        step: gate.to_string(),
                        reason: Reason::GateDisagrees.as_str().into(),
                        message: what.clone(),
                        job: None,
                        exit_code: None,
                    }),
                    _ => None,
                };
                if let Some(f) = failed {
                    t.failed_count += 1;
                    if t.failed.len() < LIST_CAP {
                        t.failed.push(f);
                    }
                }
            }
            _ => return,
        }
        t.version += 1;
    }
}

/// A rotation's run: its plan, and whether it is the abort (`spec.abort`).
pub struct Rotation {
    plan: Plan,
    abort: bool,
}

impl Declared for CARotation {
    type Plan = Rotation;
    type Tracker = RotationTracker;
    const OPERATION: &'static str = ROTATE_CA;

    fn paused(&self) -> bool {
        self.spec.paused
    }

    fn current(&self) -> Option<&CARotationStatus> {
        self.status.as_ref()
    }

    fn said(status: &CARotationStatus) -> (Option<i64>, &[Condition]) {
        (status.observed_generation, &status.conditions)
    }

    fn plan(&self, planner: &dyn Planner, _node: Option<&str>) -> Result<Rotation, String> {
        // A rotation drains nothing: the node the controller runs on needs no place of its own.
        Ok(Rotation {
            plan: planner.rotate(&self.spec)?,
            abort: self.spec.abort,
        })
    }

    /// A rotation waits for its window; its abort, which takes the nodes back to what they
    /// trusted before, does not.
    fn informer(informers: &dyn Informers) -> Box<dyn Informer<Self>> {
        informers.rotations()
    }

    fn window(rotation: &Rotation) -> Option<&Window> {
        (!rotation.abort)
            .then(|| rotation.plan.spec().window.as_ref())
            .flatten()
    }

    fn spawn<A: Apis + ?Sized>(
        api: Arc<A>,
        rotation: Rotation,
        tracker: Arc<RotationTracker>,
        hooks: Hooks,
    ) -> JoinHandle<Ended> {
        // No step of a rotation evicts anything: it never hands over (`hooks.own`).
        let Hooks {
            metrics,
            stop,
            planner,
            ..
        } = hooks;
        let Rotation { plan, abort } = rotation;
        tracker.started(plan.fingerprint().clone(), plan.ca_validity().1, abort);
        tokio::spawn(async move {
            let told = api.clone();
            let figures = metrics.clone();
            let sink: Arc<dyn certs_driver::ProgressSink> = Arc::new(move |event: &Progress| {
                tracker.event(event);
                let now = told.wall_time().as_millisecond() as f64 / 1000.0;
                if let Progress::StepFinished { step, took_ms, .. } = event {
                    figures.step(ROTATE_CA, step.as_str(), *took_ms);
                }
                figures.moved(now);
            });
            let result = if abort {
                certs_driver::abort(&*api, &plan, sink).await
            } else {
                certs_driver::run_until(&*api, &plan, sink, &stop).await
            };
            ended(result, stop.requested(), &*planner)
        })
    }

    fn moved(tracker: &RotationTracker) -> u64 {
        tracker.state.lock().unwrap().version
    }

    fn status(
        before: Option<&CARotationStatus>,
        generation: i64,
        verdict: &Verdict,
        tracker: &RotationTracker,
        now: Timestamp,
    ) -> CARotationStatus {
        rotation_status(before, generation, verdict, &tracker.snapshot(), now)
    }

    fn figures(tracker: &RotationTracker, metrics: &Metrics) {
        let counts = RotationTracker::counts(&tracker.snapshot());
        metrics.rotation_counts(&counts);
    }
}

/// A rotation's status.
fn rotation_status(
    before: Option<&CARotationStatus>,
    generation: i64,
    verdict: &Verdict,
    t: &Tracked,
    now: Timestamp,
) -> CARotationStatus {
    // A verdict with no run behind it keeps what the last run said of the nodes.
    let fresh = t.ca.is_some();
    let kept = before.filter(|b| !fresh && b.observed_generation == Some(generation));
    let counts = match kept {
        Some(b) => b.counts,
        None => RotationTracker::counts(t),
    };
    let progress = if counts.nodes == 0 {
        "no node taken yet".to_string()
    } else {
        format!(
            "{} nodes: {} staged, {} issued, {} finalized, {} failed",
            counts.nodes, counts.staged, counts.issued, counts.finalized, counts.failed
        )
    };
    let disagrees = t.gates.iter().any(|g| !g.passed);
    let degraded = if counts.failed > 0 && disagrees {
        Some(Reason::GateDisagrees)
    } else if counts.failed > 0 {
        Some(Reason::NodeFailed)
    } else {
        None
    };
    let before_conditions = before.map_or(&[][..], |b| &b.conditions[..]);
    let conditions = conditions(
        before_conditions,
        generation,
        verdict,
        &progress,
        degraded,
        now,
    );
    let (lease_holder, paused, next_window) = held(verdict);
    let (started_at, completed_at) = times(
        before.map(|b| (b.started_at.as_ref(), b.completed_at.as_ref())),
        verdict,
        now,
    );
    let phase = match verdict {
        Verdict::Completed if t.abort => RotationPhase::Aborted,
        Verdict::Completed => RotationPhase::Completed,
        Verdict::Stalled(..) => RotationPhase::Failed,
        _ if t.abort && fresh => RotationPhase::Aborting,
        _ => match t.phase {
            Some(CaStep::Stage) => RotationPhase::Staging,
            Some(CaStep::Issue) => RotationPhase::Issuing,
            Some(CaStep::Finalize) => RotationPhase::Finalizing,
            _ => kept.map_or(RotationPhase::Pending, |b| b.phase),
        },
    };
    let (fingerprint, short_fingerprint, not_after) = match (&t.ca, kept) {
        (Some((fp, not_after)), _) => (
            Some(fp.to_string()),
            Some(fp.short().to_string()),
            Some(Time(*not_after)),
        ),
        (None, Some(b)) => (
            b.fingerprint.clone(),
            b.short_fingerprint.clone(),
            b.not_after.clone(),
        ),
        (None, None) => (None, None, None),
    };
    CARotationStatus {
        observed_generation: Some(generation),
        phase,
        conditions,
        short_fingerprint,
        fingerprint,
        not_after,
        counts,
        gates: match kept {
            Some(b) => b.gates.clone(),
            None => t.gates.clone(),
        },
        in_flight: (t.in_flight.iter())
            .take(LIST_CAP)
            .map(|(node, step)| InFlight {
                node: node.clone(),
                step: step.clone(),
            })
            .collect(),
        failed: match kept {
            Some(b) => b.failed.clone(),
            None => t.failed.clone(),
        },
        lease_holder,
        paused,
        next_window,
        started_at,
        completed_at,
    }
}

/// How a run's `result` is said; `asked`: the controller asked it to stop.
fn ended(
    result: Result<certs_driver::Report, certs_driver::Error>,
    asked: bool,
    planner: &dyn Planner,
) -> Ended {
    let (outcome, verdict, holder) = match result {
        Ok(report) => {
            let failed = if report.totals.disagreed > 0 {
                Reason::GateDisagrees
            } else {
                Reason::NodeFailed
            };
            let (outcome, verdict) = said(report.outcome, asked, failed);
            (outcome, verdict, None)
        }
        Err(certs_driver::Error::Core(nodejob_core::Error::LeaseHeld { holder, .. })) => {
            held_by(holder)
        }
        Err(e @ certs_driver::Error::AbortRefused { .. }) => (
            "refused",
            Some(Verdict::Stalled(
                Reason::AbortRefused,
                planner.said(e.to_string()),
            )),
            None,
        ),
        Err(e) => (
            "refused",
            Some(Verdict::Stalled(
                Reason::InvalidSpec,
                planner.said(e.to_string()),
            )),
            None,
        ),
    };
    Ended {
        verdict,
        outcome,
        versions: Vec::new(),
        holder,
    }
}
