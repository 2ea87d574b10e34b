//! A `NodeUpgrade`'s status from its run: [`Tracker`] follows the driver's progress events
//! (the counts, the nodes in flight, failed and blocked), and [`Verdict`] says what the
//! conditions are; [`status`] puts them together. Pure, but for the tracker's lock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use nodejob_crd::{
    Blocked, ConditionType, FailedNode, InFlight, LIST_CAP, NodeUpgradeStatus, Paused, Reason,
    UpgradeCounts,
};
use upgrade_driver::{EventSink, NodeResult, Progress, UpgradeEvent};

/// What a run has done so far, as its progress told it.
#[derive(Debug, Default)]
pub struct Tracker {
    state: Mutex<Tracked>,
}

#[derive(Clone, Debug, Default)]
struct Tracked {
    planned: usize,
    in_flight: BTreeMap<String, String>,
    soaking: BTreeMap<String, ()>,
    /// Each node's last result, in the order they first ended: a node tried once more (a
    /// skipped one, at the end of the run) counts by its last.
    ended: Vec<(String, NodeResult)>,
    /// The nodes the driver told at the target already (no result of theirs is told).
    at_target: BTreeSet<String>,
    /// Bumped at each event that changes the status.
    version: u64,
}

impl Tracked {
    /// Node `node` ended with `result`; whether that changed what it was.
    fn ended(&mut self, node: &str, result: &NodeResult) -> bool {
        self.in_flight.remove(node);
        self.soaking.remove(node);
        match self.ended.iter_mut().find(|(n, _)| n == node) {
            Some((_, was)) if was == result => false,
            Some((_, was)) => {
                *was = result.clone();
                true
            }
            None => {
                self.ended.push((node.to_string(), result.clone()));
                true
            }
        }
    }
}

impl Tracker {
    /// Bumped at each change: a writer compares it with the one it wrote last.
    pub fn version(&self) -> u64 {
        self.state.lock().unwrap().version
    }

    /// Whether no run told anything yet.
    pub fn is_empty(&self) -> bool {
        self.state.lock().unwrap().planned == 0
    }

    /// The run ended with `report`: each node's result as the report says it. Some results
    /// are told by no progress event (the nodes an earlier run quarantined, reported as they
    /// stand), and the status must count them.
    pub fn reported(&self, report: &upgrade_driver::Report) {
        let mut t = self.state.lock().unwrap();
        let mut moved = false;
        for n in &report.nodes {
            if let Some(result) = &n.result {
                moved |= t.ended(&n.name, result);
            }
        }
        if moved {
            t.version += 1;
        }
    }

    /// The counts and the lists, capped.
    pub fn counts(&self) -> (UpgradeCounts, Vec<InFlight>, Vec<FailedNode>, Vec<Blocked>) {
        let t = self.state.lock().unwrap().clone();
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let mut up_to_date = t.at_target.clone();
        let (mut failed, mut blocked) = (Vec::new(), Vec::new());
        let (mut failed_count, mut blocked_count, mut rolled_back) = (0, 0, 0);
        for (node, result) in &t.ended {
            match result {
                NodeResult::Upgraded => {
                    up_to_date.insert(node.clone());
                }
                NodeResult::Skipped { why } if at_target(why) => {
                    up_to_date.insert(node.clone());
                }
                NodeResult::Failed(f) | NodeResult::RolledBack { failure: f, .. } => {
                    up_to_date.remove(node);
                    if matches!(result, NodeResult::RolledBack { .. }) {
                        rolled_back += 1;
                    }
                    failed_count += 1;
                    if failed.len() < LIST_CAP {
                        failed.push(FailedNode {
                            node: node.clone(),
                            step: f.step.to_string(),
                            reason: reason_of(&f.kind.to_string()),
                            message: f.message.clone(),
                            job: None,
                            exit_code: f.exit_code,
                        });
                    }
                }
                NodeResult::Blocked {
                    policy, budgets, ..
                } => {
                    blocked_count += 1;
                    if blocked.len() < LIST_CAP {
                        blocked.push(Blocked {
                            node: node.clone(),
                            outcome: policy.to_string(),
                            budgets: budgets.clone(),
                        });
                    }
                }
                NodeResult::Skipped { .. } | NodeResult::Interrupted { .. } => {}
            }
        }
        let counts = UpgradeCounts {
            nodes: count(t.planned),
            up_to_date: count(up_to_date.len()),
            in_progress: count(t.in_flight.len()),
            soaking: count(t.soaking.len()),
            failed: count(failed_count),
            blocked: count(blocked_count),
            rolled_back: count(rolled_back),
        };
        let in_flight = (t.in_flight.into_iter())
            .take(LIST_CAP)
            .map(|(node, step)| InFlight { node, step })
            .collect();
        (counts, in_flight, failed, blocked)
    }
}

impl EventSink<Progress> for Tracker {
    fn event(&self, event: &Progress) {
        let mut t = self.state.lock().unwrap();
        match event {
            Progress::Planned { nodes } => t.planned = *nodes,
            Progress::StepStarted { node, step } => {
                t.in_flight.insert(node.clone(), step.to_string());
            }
            Progress::NodeFinished { node, result, .. } => {
                t.ended(node, result);
            }
            // A node at the target already is told by the driver alone (no NodeFinished).
            Progress::Driver(UpgradeEvent::NodeSkipped { node, why }) => {
                if !at_target(why) || !t.at_target.insert(node.clone()) {
                    return;
                }
            }
            Progress::Driver(UpgradeEvent::Soaking { node, .. }) => {
                if t.soaking.insert(node.clone(), ()).is_some() {
                    return;
                }
            }
            _ => return,
        }
        t.version += 1;
    }
}

/// Whether a node skipped is at the target (not gone from the cluster, or from the
/// selection: `upgrade-driver`'s `Run::keep` says those so).
fn at_target(why: &str) -> bool {
    !(why.starts_with("deleted from the cluster") || why.starts_with("no longer selected"))
}

/// A failure's kind as a condition reason: `host` -> `HostFailed`.
fn reason_of(kind: &str) -> String {
    let mut out = String::new();
    for word in kind.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    out.push_str("Failed");
    out
}

/// Where the resource's operation stands, for its conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its nodes are being taken through their steps.
    Progressing,
    /// Every node at the target.
    Completed,
    /// Stopped for good until the spec changes: why, in one word and in words.
    Stalled(Reason, String),
    /// Waiting to go on by itself (a window, the Lease of another, the pause switch).
    Waiting(Reason, String),
    /// `spec.paused`.
    PausedBySpec,
    /// The maintenance window is closed; it opens then.
    Window(Timestamp),
}

/// The status of a resource at `generation`: the conditions `verdict` says (each keeping its
/// last transition time from `before` while its status stays), the tracker's counts and lists.
pub fn status(
    before: Option<&NodeUpgradeStatus>,
    generation: i64,
    verdict: &Verdict,
    tracker: &Tracker,
    now: Timestamp,
) -> NodeUpgradeStatus {
    // A verdict with no run behind it (waiting for the Lease, paused) keeps what the last run
    // said of the nodes: they did not move back.
    let (counts, in_flight, failed, blocked) = match before {
        Some(b) if tracker.is_empty() && b.observed_generation == Some(generation) => (
            UpgradeCounts {
                in_progress: 0,
                soaking: 0,
                ..b.counts
            },
            Vec::new(),
            b.failed.clone(),
            b.blocked.clone(),
        ),
        _ => tracker.counts(),
    };
    let progress = if counts.nodes == 0 {
        "no node taken yet".to_string()
    } else {
        format!(
            "{} of {} nodes up to date, {} in progress, {} failed",
            counts.up_to_date, counts.nodes, counts.in_progress, counts.failed
        )
    };
    let degraded = if counts.failed > 0 {
        Some(Reason::NodeFailed)
    } else if counts.blocked + counts.rolled_back > 0 {
        Some(Reason::TooManyBlocked)
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
    NodeUpgradeStatus {
        observed_generation: Some(generation),
        conditions,
        counts,
        in_flight,
        failed,
        blocked,
        lease_holder,
        paused,
        next_window,
        started_at,
        completed_at,
    }
}

/// The conditions `verdict` says at `generation`, each keeping its last transition time from
/// `before` while its status stays: `progress` says where the nodes stand, `degraded` why
/// some did not get there (if any did not). Both kinds' statuses carry them.
pub fn conditions(
    before: &[Condition],
    generation: i64,
    verdict: &Verdict,
    progress: &str,
    degraded: Option<Reason>,
    now: Timestamp,
) -> Vec<Condition> {
    let mut conditions = Vec::new();
    let mut set = |type_: ConditionType, on: bool, reason: Reason, message: String| {
        let status = if on { "True" } else { "False" };
        let kept = (before.iter())
            .find(|c| c.type_ == type_.as_str() && c.status == status)
            .map(|c| c.last_transition_time.clone());
        conditions.push(Condition {
            type_: type_.as_str().into(),
            status: status.into(),
            reason: reason.as_str().into(),
            message,
            last_transition_time: kept.unwrap_or(Time(now)),
            observed_generation: Some(generation),
        });
    };
    let (ready, reconciling, stalled) = match verdict {
        Verdict::Completed => ((true, Reason::Completed), None, None),
        Verdict::Progressing => (
            (false, Reason::Progressing),
            Some(Reason::Progressing),
            None,
        ),
        Verdict::Waiting(reason, _) => ((false, *reason), Some(*reason), None),
        Verdict::PausedBySpec => ((false, Reason::PausedBySpec), None, None),
        Verdict::Window(_) => (
            (false, Reason::WindowClosed),
            Some(Reason::WindowClosed),
            None,
        ),
        Verdict::Stalled(reason, _) => ((false, *reason), None, Some(*reason)),
    };
    let said = match verdict {
        Verdict::Stalled(_, why) | Verdict::Waiting(_, why) => format!("{progress}: {why}"),
        Verdict::Window(opens) => format!("{progress}: the window is closed; it opens at {opens}"),
        _ => progress.to_string(),
    };
    set(ConditionType::Ready, ready.0, ready.1, said.clone());
    set(
        ConditionType::Reconciling,
        reconciling.is_some(),
        reconciling.unwrap_or(Reason::Completed),
        said.clone(),
    );
    set(
        ConditionType::Stalled,
        stalled.is_some(),
        stalled.unwrap_or(Reason::Progressing),
        said.clone(),
    );
    let invalid = matches!(verdict, Verdict::Stalled(Reason::InvalidSpec, _));
    set(
        ConditionType::Validated,
        !invalid,
        if invalid {
            Reason::InvalidSpec
        } else {
            Reason::Progressing
        },
        match verdict {
            Verdict::Stalled(Reason::InvalidSpec, why) => why.clone(),
            _ => "the spec is a plan the command would run".into(),
        },
    );
    let paused = matches!(
        verdict,
        Verdict::PausedBySpec | Verdict::Waiting(Reason::PausedBySwitch, _)
    );
    set(
        ConditionType::Paused,
        paused,
        match verdict {
            Verdict::Waiting(Reason::PausedBySwitch, _) => Reason::PausedBySwitch,
            _ => Reason::PausedBySpec,
        },
        if paused {
            said.clone()
        } else {
            "not paused".into()
        },
    );
    let window = matches!(
        verdict,
        Verdict::Window(_) | Verdict::Waiting(Reason::WindowClosed, _)
    );
    set(
        ConditionType::WaitingForWindow,
        window,
        Reason::WindowClosed,
        if window {
            said.clone()
        } else {
            "the window does not hold it".into()
        },
    );
    set(
        ConditionType::Degraded,
        degraded.is_some(),
        degraded.unwrap_or(Reason::Progressing),
        progress.to_string(),
    );
    conditions
}

/// `status.leaseHolder`, `status.paused` and `status.nextWindow` of `verdict`.
pub fn held(verdict: &Verdict) -> (Option<String>, Option<Paused>, Option<Time>) {
    (
        match verdict {
            Verdict::Waiting(Reason::LeaseHeldByOther, why) => Some(why.clone()),
            _ => None,
        },
        match verdict {
            Verdict::PausedBySpec => Some(Paused {
                by: "spec".into(),
                why: None,
                since: None,
            }),
            _ => None,
        },
        match verdict {
            Verdict::Window(opens) => Some(Time(*opens)),
            _ => None,
        },
    )
}

/// `status.startedAt` and `status.completedAt`, from what `before` said of them (`None`: no
/// status yet): started once, completed while `verdict` says so.
pub fn times(
    before: Option<(Option<&Time>, Option<&Time>)>,
    verdict: &Verdict,
    now: Timestamp,
) -> (Option<Time>, Option<Time>) {
    let (started, completed) = before.unwrap_or_default();
    (
        started.cloned().or(Some(Time(now))),
        match verdict {
            Verdict::Completed => completed.cloned().or(Some(Time(now))),
            _ => None,
        },
    )
}

/// How the operation ended for `generation`, as `status` says it: `Some(true)` Ready,
/// `Some(false)` Stalled (until the spec changes), `None` not ended (or said of another
/// generation).
pub fn outcome(status: Option<&NodeUpgradeStatus>, generation: i64) -> Option<bool> {
    let status = status?;
    outcome_of(status.observed_generation, &status.conditions, generation)
}

/// [`outcome`] of a status's `observedGeneration` and conditions (either kind's).
pub fn outcome_of(
    observed: Option<i64>,
    conditions: &[Condition],
    generation: i64,
) -> Option<bool> {
    if observed != Some(generation) {
        return None;
    }
    let on =
        |t: ConditionType| (conditions.iter()).any(|c| c.type_ == t.as_str() && c.status == "True");
    if on(ConditionType::Ready) {
        Some(true)
    } else if on(ConditionType::Stalled) {
        Some(false)
    } else {
        None
    }
}
