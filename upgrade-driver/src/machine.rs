//! The per-node upgrade, sans-IO: [`NodeMachine`] takes [`Observation`]s (the node as read, a
//! step's result) and returns a [`Step`] (marks for progress, then one [`Intent`]). It never
//! awaits and reads no clock, so every decision is a row in a table test.
//!
//! ```text
//!  Inspect ─at target, or done─────────────────────────────────────────▶ Skipped
//!     │ new: mark in-progress (+ cordon if schedulable), one write
//!     ▼
//!  Resume ─host recorded exit 0─▶ Delete its Job ─▶ Reboot ─▶ Health? ─▶ Finish ─▶ Upgraded
//!     ▼
//!  Find the host Job ─ours, running or ended─▶ Host (adopt: its result is the answer)
//!     │ none, launched, now at the target on another boot ─▶ Reboot
//!     │ none / a failed one we recorded ─────▶ Drain ─▶ Launch ─▶ Host (create / replace it)
//!     ▼                                          ▲        │ the node changed since: drain again
//!  Host ─▶ record its result ─▶ exit 0: …        └────────┘ (cordon again if uncordoned)
//!                             └ else: Failed (left cordoned, Job left)
//! ```
//!
//! Launch is the write right before the host Job is created: our record with the `bootID` read
//! now, under the resourceVersion of the node as last read (cordoned, drained). A Conflict is
//! not written again: the node is read again and, since a person may have uncordoned it and
//! Pods landed meanwhile, cordoned again if it is schedulable and drained again, before the
//! next Launch. So the host Job is only ever created on a node that was cordoned, drained and
//! unchanged since, at most [`DRAIN_ROUNDS`] times over.
//!
//! Exactly once: the host Job is kept after it succeeded until its result is recorded on the
//! node ([`HOST_JOB`]); a resumed run finding our Job adopts it and takes its result. The
//! evidence that the host operation ran is our Launch record plus the Job or its recorded
//! result, never a `bootID` change alone: a node that rebooted by itself during the drain is
//! drained and upgraded as any other, and the reboot awaited is the end of the boot read at
//! Launch. So a crash at any instant never runs the upgrade twice, and a spurious reboot never
//! makes a false failure.

use std::fmt;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::drain::Drained;
use nodejob_core::log_tail;
use nodejob_core::runner::Report;
use nodejob_core::{NodeChange, ready};
pub use nodejob_roll::{Cause, FailureKind};

mod blocked;
mod preflight;
mod rollback;
mod soak;

pub(crate) use blocked::blocked_why;

use crate::plan::{OnFailure, Plan, Undrainable};
use crate::records::{
    self, DONE, Done, HOST_JOB, HostJob, IN_PROGRESS, InProgress, boot_id, unschedulable,
};
use crate::version::{same_version, version};

/// One step of a node's upgrade, as progress, Events (`NodejobUpgrade<Step>`) and the report
/// name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum UpgradeStep {
    /// Mark the node ours, and cordon it if it is schedulable.
    Cordon,
    /// Evict its Pods.
    Drain,
    /// The host upgrade Job.
    Upgrade,
    /// Wait for a new boot, Ready, at the target.
    Reboot,
    /// The health check Job.
    Health,
    /// Uncordon (if we cordoned it) and record it done.
    Uncordon,
    /// Stay Ready on the same boot for the plan's soak, the health check passing again at its
    /// end, then record it done (only when the plan soaks).
    Soak,
    /// Roll it back to the version it ran before its host upgrade, after a failure (only when
    /// the plan rolls back on failure): drain, the host's rollback Job, a new boot Ready at
    /// that version, uncordon (if we cordoned it).
    Rollback,
}

impl UpgradeStep {
    /// The step's name: `Cordon`, `Drain`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            UpgradeStep::Cordon => "Cordon",
            UpgradeStep::Drain => "Drain",
            UpgradeStep::Upgrade => "Upgrade",
            UpgradeStep::Reboot => "Reboot",
            UpgradeStep::Health => "Health",
            UpgradeStep::Uncordon => "Uncordon",
            UpgradeStep::Soak => "Soak",
            UpgradeStep::Rollback => "Rollback",
        }
    }

    /// The Event reason: `NodejobUpgrade<Step>`.
    pub fn reason(self) -> String {
        format!("NodejobUpgrade{}", self.as_str())
    }
}

impl nodejob_roll::RollStep for UpgradeStep {
    fn reason(&self) -> String {
        UpgradeStep::reason(*self)
    }
}

impl fmt::Display for UpgradeStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One action for the loop, on this machine's node.
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    /// `patch_node(node, rv, changes)`, fenced by the Lease. A Conflict is read again and the
    /// same changes applied to the new version (they are idempotent).
    Patch {
        /// The resourceVersion the changes were decided on.
        rv: String,
        /// What to change, in one write.
        changes: Vec<NodeChange>,
    },
    /// Drain the node (core's drain), fenced.
    Drain,
    /// A write that holds only for the node as read: `patch_node(node, rv, changes)` once,
    /// fenced. A Conflict is not written again: the node is read again and answered as
    /// [`Observation::Changed`], for the machine to decide again. The write right before the
    /// host Job (Launch: our record with the `bootID` read now, on the node as drained), and the
    /// done record (on the node as read at the target).
    Guarded {
        /// The resourceVersion of the node the write was decided on.
        rv: String,
        /// What to change, in one write.
        changes: Vec<NodeChange>,
    },
    /// A fresh node's Pods read before the first write on it, and what kubectl's drain rules
    /// would refuse judged (a Pod with `emptyDir` data, one with no controller, under the
    /// plan's drain options): answered [`Observation::Refusals`]. A node whose drain would be
    /// refused fails untouched: never cordoned, never marked.
    Vet,
    /// Read the node and the Pods on it again, right before the host Job is created (after
    /// the pause gate, the last wait before it): answered [`Observation::Preflight`], for the
    /// machine to judge the host Job's preconditions on what is there now.
    Preflight,
    /// `get_job` of the host Job's name.
    FindJob,
    /// `get_job` of the host Job's name toward `target` (an earlier run's, toward another).
    FindPrevious {
        /// That run's target.
        target: String,
    },
    /// Run the host Job (keep it on success), adopting the Job of this UID if set; fenced
    /// unless adopting.
    Host {
        /// The Job to adopt.
        adopt: Option<String>,
        /// This run's find read the Job's name free (404), and nothing of that name was
        /// created since (only the run under the Lease creates it): created at once, with no
        /// read of its own (`nodejob_core::runner::Policy::known_free`; a Job met there all
        /// the same is judged by the runner's guard).
        known_free: bool,
    },
    /// Delete the host Job of this UID exactly, and wait until it is gone; fenced.
    DeleteJob {
        /// Its UID.
        uid: String,
    },
    /// Wait until the node's `bootID` is not this one and it is Ready, within the reboot
    /// timeout.
    WaitReboot {
        /// The `bootID` before the upgrade.
        boot_id: String,
    },
    /// Run the health check Job; fenced.
    Health,
    /// The node is finished.
    Done(NodeResult),
    /// Watch the node until the plan's soak, counted from `since`, has passed: it must stay
    /// Ready on boot `boot_id` (and exist) all along. Answered [`Observation::Soaked`].
    Soak {
        /// When the soak started (RFC 3339).
        since: String,
        /// The boot it must stay on.
        boot_id: String,
    },
    /// `get_job` of the rollback Job's name.
    FindRollbackJob,
    /// Run the rollback Job toward `to` (keep it on success), adopting the Job of this UID if
    /// set; fenced unless adopting. Answered [`Observation::Host`].
    RollbackJob {
        /// The Job to adopt.
        adopt: Option<String>,
        /// The version it rolls back to.
        to: String,
        /// As [`Intent::Host`]'s: this run's find read the rollback Job's name free.
        known_free: bool,
    },
    /// Delete the rollback Job of this UID exactly, and wait until it is gone; fenced.
    DeleteRollbackJob {
        /// Its UID.
        uid: String,
    },
}

/// The answer to the last intent.
#[derive(Clone, Debug)]
pub enum Observation {
    /// The node as read (first) or as a patch left it.
    Node(Box<Node>),
    /// The drain's result.
    Drained(Result<Drained, DrainFailed>),
    /// An [`Intent::Guarded`] met a Conflict: the node as read again.
    Changed(Box<Node>),
    /// The node as read right before the host Job ([`Intent::Preflight`]; `None`: deleted),
    /// and the Pods on it that a drain would evict (`namespace/name`; ended ones are not).
    Preflight {
        /// The node, if it exists.
        node: Option<Box<Node>>,
        /// The Pods the drain would evict.
        pods: Vec<String>,
    },
    /// What a drain of the node would refuse, each `namespace/name: why` ([`Intent::Vet`]);
    /// empty: nothing.
    Refusals(Vec<String>),
    /// The Job of the host Job's name, if any.
    Job(Option<Box<Job>>),
    /// The host Job's report, or why it gave none.
    Host(Result<Report, String>),
    /// The host Job (the upgrade's or the rollback's) gave no answer because its node rebooted
    /// under it ([`nodejob_core::Error::LostInReboot`]), with why: what it did is for the node
    /// to tell once it is back.
    Lost(String),
    /// The host Job is gone.
    Deleted,
    /// The node after the reboot wait: met, or the last state seen when it timed out.
    Rebooted {
        /// The node as last seen.
        node: Option<Box<Node>>,
        /// Whether it rebooted and is Ready.
        met: bool,
    },
    /// The health check's exit code, or why it gave none; and its log, when it was read.
    Health(Result<i32, String>, Option<String>),
    /// The last intent failed (an API error, or the Lease lost), with why.
    Failed(Cause),
    /// The soak's watch ended: `held` when the soak passed with the node Ready on the same
    /// boot all along; else the node as it broke it (`None`: deleted).
    Soaked {
        /// The node as last seen.
        node: Option<Box<Node>>,
        /// Whether it held to the end.
        held: bool,
    },
}

/// A drain that failed, with the Pods it had evicted by then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrainFailed {
    /// The Pods evicted before it failed, `namespace/name`.
    pub evicted: Vec<String>,
    /// Why it failed.
    pub message: String,
    /// When PodDisruptionBudgets held it: budgets allowing no disruption past its timeout
    /// (they, and the Pods left), or more than one budget covering a Pod, whose eviction the
    /// apiserver refuses until the budgets change (no budget named, that Pod). `None` for any
    /// other failure (a refusal of the drain's filters, an API error, evicted Pods that did
    /// not go in time).
    pub held: Option<HeldBy>,
}

/// What held a drain past its timeout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeldBy {
    /// The budgets that refused the evictions, `namespace/name`.
    pub budgets: Vec<String>,
    /// The Pods left on the node, `namespace/name`.
    pub pods: Vec<String>,
}

impl From<&str> for DrainFailed {
    fn from(message: &str) -> Self {
        DrainFailed {
            evicted: Vec::new(),
            message: message.to_string(),
            held: None,
        }
    }
}

/// How a node ended. As JSON one object whatever the end, tagged by `result` (`upgraded`,
/// `failed`, ...), as the rotation's.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum NodeResult {
    /// At the target already: nothing done.
    Skipped {
        /// Why.
        why: String,
    },
    /// Upgraded, rebooted at the target, checked, uncordoned if we cordoned it.
    Upgraded,
    /// Failed at `step`: the node stays cordoned, the Job stays for inspection.
    Failed(Failure),
    /// Stopped before `step` without failing (a stop request, the Lease lost): a rerun
    /// carries it on from the cluster's records.
    Interrupted {
        /// The step it would have taken next.
        step: UpgradeStep,
        /// Why.
        why: String,
    },
    /// Failed after its host upgrade was launched, and rolled back: the host's rollback ran
    /// once, and it came back at `version` (what it ran before) on a new boot, uncordoned if we
    /// cordoned it. Still a failure for the failure budget.
    RolledBack {
        /// The failure that was rolled back.
        failure: Failure,
        /// The version it is back at.
        version: String,
    },
    /// Not upgraded: PodDisruptionBudgets allowing no disruption held its drain past the
    /// timeout, and the plan's `on_undrainable` skips (uncordoned if we cordoned it, tried
    /// again at the end) or quarantines (left cordoned, labelled) such a node. Recorded on the
    /// node ([`BLOCKED`](crate::records::BLOCKED)); counted against `max_blocked`.
    Blocked {
        /// `skip` or `quarantine`.
        policy: Undrainable,
        /// The budgets that refused the evictions, `namespace/name`.
        budgets: Vec<String>,
        /// The Pods left on the node, `namespace/name`.
        pods: Vec<String>,
        /// What was done, in words.
        why: String,
    },
}

impl nodejob_roll::NodeEnd for NodeResult {
    fn failed(&self) -> bool {
        matches!(self, NodeResult::Failed(_) | NodeResult::RolledBack { .. })
    }

    fn blocked(&self) -> bool {
        matches!(self, NodeResult::Blocked { .. })
    }

    fn interrupted(&self) -> bool {
        matches!(self, NodeResult::Interrupted { .. })
    }
}

/// A node's failure, as the report names it.
pub type Failure = nodejob_roll::Failure<UpgradeStep>;

/// Something for progress, the report and the node's Events: the engine's marks, with the
/// upgrade's own.
pub type Mark = nodejob_roll::Mark<UpgradeStep, Own>;

/// The marks only the upgrade tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Own {
    /// Pods evicted by the drain (`namespace/name`).
    Evicted(Vec<String>),
}

/// What the machine wants next: its marks, then the one thing to do.
pub type Step = nodejob_roll::Turn<UpgradeStep, Own, Intent>;

/// Where the machine is.
#[derive(Clone, Debug, PartialEq)]
enum At {
    Inspect,
    /// Reading a fresh node's Pods before its first write, for what its drain would refuse.
    Vetting,
    /// Reading the host Job an earlier run started toward another target.
    Previous,
    /// Waiting for the reboot an earlier run's host upgrade began.
    Settling,
    Marking,
    Draining,
    Launching,
    /// Reading the node and its Pods again right before the host Job.
    Preflight,
    Finding,
    Hosting,
    /// The host step gave no exit code: reading its Job, to record a failed one.
    Inquest(String),
    Recording(HostJob),
    Deleting,
    Rebooting,
    Checking,
    Finishing,
    /// Writing the blocked record (skipped: uncordoned if ours; quarantined: labelled).
    Blocking(crate::records::Blocked),
    /// Soaking: its watch.
    Soaking,
    /// The health check again, at the end of the soak.
    SoakChecking,
    /// Writing the done record once the soak passed (guarded).
    SoakDone,
    /// Writing a soak record afresh (a rerun after a failed soak), guarded.
    SoakRestart,
    /// Recording why the soak failed, before failing with it.
    SoakFailing(Failure),
    /// Rolling back after a failure.
    RollingBack(rollback::Rb),
    Over,
}

/// The last lines of a log kept in a failure.
const LOG_TAIL_LINES: usize = 20;

/// How many times a node may be drained again because it changed (was uncordoned, or
/// rebooted) between a drain and the host Job, before it fails.
pub const DRAIN_ROUNDS: u32 = 3;

/// What a node's upgrade is about: fixed by the plan when the machine is made.
#[derive(Clone, Debug)]
struct Run {
    target: String,
    source: crate::plan::VersionSource,
    epoch: i32,
    has_health: bool,
    /// What the plan does with a node whose drain budgets block.
    on_undrainable: Undrainable,
    /// Whether the plan soaks each node.
    soaks: bool,
    /// What the plan does with a node that fails after its host upgrade.
    on_failure: OnFailure,
    /// Whether the plan allows moving a node to an older version.
    downgrade: crate::plan::Downgrade,
}

/// The node as last seen and what it carries of ours (our records, as read or as written):
/// the cluster's state, which every phase reads and writes, owned by none.
#[derive(Clone, Debug, Default)]
struct Seen {
    /// The node as last seen.
    node: Option<Box<Node>>,
    /// The node's UID as first read: a node of the same name with another UID is another
    /// node, to which nothing of this run applies.
    uid: String,
    /// The wall time, RFC 3339, for the records written next.
    now: String,
    /// Our record, once read or written.
    progress: Option<InProgress>,
    /// The host record, once read or written.
    host: Option<HostJob>,
    /// The node's blocked record, as first read (an earlier attempt's).
    blocked_before: Option<crate::records::Blocked>,
    /// The node's soak record, as first read or as written.
    soak: Option<crate::records::Soak>,
    /// The node's rollback record, as first read or as written.
    rollback: Option<crate::records::Rollback>,
}

/// One node's upgrade. See the module docs.
#[derive(Clone, Debug)]
pub struct NodeMachine {
    run: Run,
    seen: Seen,
    at: At,
    /// A failed host Job, reported once its result is recorded.
    pending_failure: Option<Failure>,
    /// Drains begun again because the node changed before the host Job.
    redrains: u32,
    /// Done records decided again because the node changed before they were written.
    refinishes: u32,
    /// An earlier run recorded the host upgrade's success: a node at the target that did not
    /// reboot within the whole reboot timeout since is taken as one that needed no reboot.
    earlier_success: bool,
    /// The failure being rolled back.
    rolling_back: Option<Failure>,
    /// Why the host upgrade gave no answer, when its pod was lost to a reboot of the node: the
    /// node's version once it is back says whether it took.
    lost: Option<String>,
    /// The same, for the rollback's Job.
    lost_rollback: Option<String>,
    /// The node carried nothing of ours when first read: the first write marks it.
    fresh: bool,
    /// The last find of the host Job read its name free: the Job launched next is created
    /// without a read of its own ([`Intent::Host`]'s `known_free`).
    host_free: bool,
    /// The same, for the rollback Job.
    rollback_free: bool,
    /// The host record of an earlier run toward another target, as first read.
    earlier_host: Option<HostJob>,
}

impl NodeMachine {
    /// A machine for one node under `plan`, holding the Lease at `epoch`.
    pub fn new(plan: &Plan, epoch: i32) -> Self {
        let spec = plan.spec();
        NodeMachine {
            run: Run {
                target: plan.target().to_string(),
                source: spec.version_source.clone(),
                epoch,
                has_health: spec.health_check.is_some(),
                on_undrainable: spec.on_undrainable,
                soaks: spec.soak.is_some(),
                on_failure: spec.on_failure,
                downgrade: spec.downgrade,
            },
            seen: Seen::default(),
            at: At::Inspect,
            pending_failure: None,
            redrains: 0,
            refinishes: 0,
            earlier_success: false,
            rolling_back: None,
            lost: None,
            lost_rollback: None,
            fresh: false,
            host_free: false,
            rollback_free: false,
            earlier_host: None,
        }
    }

    /// The first step: given the node as read, decide.
    pub fn start(&mut self, node: Box<Node>) -> Step {
        self.step(Observation::Node(node))
    }

    /// Whether the node's state was already ours when we started (a resumed node).
    pub fn resumed(&self) -> bool {
        self.seen.progress.is_some()
    }

    /// Whether the machine is making its first write to a node that carried nothing of ours
    /// (marking it ours, cordoning it): nothing of ours is on it yet.
    pub fn untouched(&self) -> bool {
        self.fresh && self.at == At::Marking
    }

    /// Sets the wall time written in the done record (RFC 3339).
    pub fn set_now(&mut self, now: String) {
        self.seen.now = now;
    }

    /// Takes the answer to the last intent.
    pub fn step(&mut self, obs: Observation) -> Step {
        if let (At::Inquest(why), Observation::Failed(_)) = (&self.at, &obs) {
            // The host step's own failure is the news, not the read after it.
            let why = why.clone();
            return self.fail(Failure::new(UpgradeStep::Upgrade, FailureKind::Job, why));
        }
        if let (At::Recording(_), Some(failure), Observation::Failed(why)) =
            (&self.at, &self.pending_failure, &obs)
        {
            // Recording a failed host step failed too (the node deleted, say): the host step's
            // failure is the news.
            let mut failure = failure.clone();
            failure.message = format!(
                "{}; its result could not be recorded on the node: {why}",
                failure.message
            );
            return self.fail(failure);
        }
        if let (At::SoakFailing(failure), Observation::Failed(why)) = (&self.at, &obs) {
            // Recording a failed soak failed too: the soak's failure is the news.
            let mut failure = failure.clone();
            failure.message = format!(
                "{}; it could not be recorded on the node: {why}",
                failure.message
            );
            return self.fail(failure);
        }
        if let Observation::Failed(why) = obs {
            let step = self.current_step();
            return self.fail(Failure::of(step, why));
        }
        match (std::mem::replace(&mut self.at, At::Over), obs) {
            (At::Inspect, Observation::Node(node)) => self.inspect(node),
            (At::Vetting, Observation::Refusals(refused)) => self.vetted(refused),
            (At::Previous, Observation::Job(job)) => self.previous(job),
            (At::Settling, Observation::Rebooted { node, met }) => self.settled(node, met),
            (At::Marking, Observation::Node(node)) => {
                self.fresh = false;
                self.seen.node = Some(node);
                let message = if self.seen.progress.as_ref().is_some_and(|p| p.cordoned) {
                    "cordoned"
                } else {
                    "already cordoned by someone else; left as it is"
                };
                let mut step = self.resume();
                step.marks
                    .insert(0, Mark::Finished(UpgradeStep::Cordon, message.into()));
                step
            }
            (At::Draining, Observation::Drained(Ok(drained))) => {
                self.count_evicted(drained.evicted.len());
                let message = format!(
                    "evicted {} pod(s), left {}",
                    drained.evicted.len(),
                    drained.skipped.len()
                );
                let marks = vec![
                    Mark::Own(Own::Evicted(drained.evicted)),
                    Mark::Finished(UpgradeStep::Drain, message),
                ];
                self.launch(marks)
            }
            (At::Draining, Observation::Drained(Err(failed))) => {
                if let Some(step) = self.undrainable(&failed) {
                    return step;
                }
                let mut step = self.fail(Failure::new(
                    UpgradeStep::Drain,
                    FailureKind::Drain,
                    failed.message,
                ));
                if !failed.evicted.is_empty() {
                    self.count_evicted(failed.evicted.len());
                    step.marks.push(Mark::Own(Own::Evicted(failed.evicted)));
                }
                step
            }
            // The Upgrade step starts with a read: what a pause (or any wait) before it left
            // is judged afresh, right before the create.
            (At::Launching, Observation::Node(node)) => {
                self.seen.node = Some(node);
                self.go(
                    At::Preflight,
                    vec![Mark::Started(UpgradeStep::Upgrade)],
                    Intent::Preflight,
                )
            }
            (At::Preflight, Observation::Preflight { node, pods }) => self.preflight(node, pods),
            (At::Launching, Observation::Changed(node)) => self.changed(node),
            (At::Finding, Observation::Job(job)) => self.found(job),
            (At::Hosting, Observation::Host(Ok(report))) => {
                let record = HostJob {
                    target: self.run.target.clone(),
                    uid: report.uid.clone(),
                    exit_code: Some(report.exit_code),
                };
                let log_tail = report.log.as_deref().map(|l| log_tail(l, LOG_TAIL_LINES));
                let changes = vec![NodeChange::set_annotation(
                    HOST_JOB,
                    records::value(&record),
                )];
                let rv = self.rv();
                if report.exit_code != 0 {
                    // Recorded, so that a rerun replaces exactly this failed Job (a retry).
                    self.seen.host = Some(record.clone());
                    let message = format!(
                        "the host upgrade exited {}; the node stays cordoned and job {} is \
                         left for inspection",
                        report.exit_code,
                        self.job_name()
                    );
                    self.pending_failure = Some(Failure {
                        step: UpgradeStep::Upgrade,
                        kind: FailureKind::Host,
                        message,
                        exit_code: Some(report.exit_code),
                        log_tail,
                    });
                    return self.go(
                        At::Recording(record),
                        Vec::new(),
                        Intent::Patch { rv, changes },
                    );
                }
                self.go(
                    At::Recording(record),
                    Vec::new(),
                    Intent::Patch { rv, changes },
                )
            }
            // No exit code: if our Job failed (its Pod deleted, its deadline), record that,
            // so that a rerun retries it by replacing exactly that Job instead of adopting the
            // same failure for ever; if it runs or is gone, a rerun finds it as it is.
            (At::Hosting, Observation::Host(Err(why))) => {
                self.go(At::Inquest(why), Vec::new(), Intent::FindJob)
            }
            // Lost to a reboot: recorded as a failure without an exit code (a rerun would
            // retry it, as a killed one), then the node, once back, says whether it took.
            (At::Hosting, Observation::Lost(why)) => {
                self.lost = Some(why.clone());
                self.go(At::Inquest(why), Vec::new(), Intent::FindJob)
            }
            (At::Inquest(why), Observation::Job(Some(job))) if nodejob_core::failed(&job) => {
                let record = HostJob {
                    target: self.run.target.clone(),
                    uid: job.metadata.uid.clone().unwrap_or_default(),
                    exit_code: None,
                };
                self.pending_failure = Some(Failure {
                    step: UpgradeStep::Upgrade,
                    kind: FailureKind::Job,
                    message: format!(
                        "{why}; a rerun retries it, replacing that failed job {}",
                        self.job_name()
                    ),
                    exit_code: None,
                    log_tail: None,
                });
                let changes = vec![NodeChange::set_annotation(
                    HOST_JOB,
                    records::value(&record),
                )];
                let rv = self.rv();
                self.go(
                    At::Recording(record),
                    Vec::new(),
                    Intent::Patch { rv, changes },
                )
            }
            // It succeeded though no exit code was read (its Pod deleted after it ended, its
            // log unreadable): the Job controller's Complete is the exit 0. Recorded and
            // carried on as any success: never run again.
            (At::Inquest(_), Observation::Job(Some(job))) if nodejob_core::succeeded(&job) => {
                let report = Report {
                    uid: job.metadata.uid.clone().unwrap_or_default(),
                    exit_code: 0,
                    log: None,
                };
                self.at = At::Hosting;
                self.step(Observation::Host(Ok(report)))
            }
            (At::Inquest(why), Observation::Job(_)) => {
                self.fail(Failure::new(UpgradeStep::Upgrade, FailureKind::Job, why))
            }
            (At::Recording(record), Observation::Node(node)) => {
                self.seen.node = Some(node);
                self.seen.host = Some(record.clone());
                if let Some(failure) = self.pending_failure.take() {
                    if self.lost.is_some() {
                        return self.await_lost();
                    }
                    return self.failed_or_rolled_back(failure);
                }
                let uid = record.uid;
                self.go(At::Deleting, Vec::new(), Intent::DeleteJob { uid })
            }
            (At::Deleting, Observation::Deleted) => {
                let job = self.job_name();
                let mut step = self.await_reboot();
                let done = format!("the host upgrade exited 0; its job {job} deleted");
                step.marks
                    .insert(0, Mark::Finished(UpgradeStep::Upgrade, done));
                step
            }
            (At::Rebooting, Observation::Rebooted { node, met }) => self.on_reboot(node, met),
            (At::Checking, Observation::Health(Ok(0), _)) => {
                let marks = vec![Mark::Finished(UpgradeStep::Health, "passed".into())];
                self.uncordon(marks)
            }
            (At::Checking, Observation::Health(Ok(code), log)) => {
                self.failed_or_rolled_back(Failure {
                    step: UpgradeStep::Health,
                    kind: FailureKind::Host,
                    message: format!("the health check exited {code}; the node stays cordoned"),
                    exit_code: Some(code),
                    log_tail: (log.as_deref())
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| log_tail(l, LOG_TAIL_LINES)),
                })
            }
            (At::Checking, Observation::Health(Err(why), _)) => {
                self.failed_or_rolled_back(Failure {
                    step: UpgradeStep::Health,
                    kind: FailureKind::Job,
                    message: why,
                    exit_code: None,
                    log_tail: None,
                })
            }
            (At::Blocking(record), Observation::Node(node)) => self.blocked(record, node),
            (At::Soaking, Observation::Soaked { node, held }) => self.soaked(node, held),
            (At::SoakChecking, Observation::Health(result, _)) => self.soak_checked(result),
            (At::SoakDone, Observation::Node(node)) => self.soak_done(node),
            (At::SoakDone, Observation::Changed(node)) => self.soak_done_again(node),
            (At::SoakRestart, Observation::Node(node)) => self.soak_restarted(node),
            (At::SoakRestart, Observation::Changed(node)) => self.soak_restart_again(node),
            (At::SoakFailing(failure), Observation::Node(node)) => {
                self.seen.node = Some(node);
                self.fail(failure)
            }
            (At::RollingBack(rb), obs) => self.rollback_step(rb, obs),
            (At::Finishing, Observation::Changed(node)) => self.finish_again(node),
            (At::Finishing, Observation::Node(node)) if self.run.soaks => self.soak_started(node),
            (At::Finishing, Observation::Node(node)) => {
                self.seen.node = Some(node);
                let message = if self.seen.progress.as_ref().is_some_and(|p| p.cordoned) {
                    format!("uncordoned; at {}", self.run.target)
                } else {
                    format!(
                        "at {}; left cordoned (someone else cordoned it)",
                        self.run.target
                    )
                };
                self.go(
                    At::Over,
                    vec![Mark::Finished(UpgradeStep::Uncordon, message)],
                    Intent::Done(NodeResult::Upgraded),
                )
            }
            (at, obs) => {
                let step = self.step_of(&at);
                self.fail(Failure::new(
                    step,
                    FailureKind::Internal,
                    format!("internal: unexpected answer {obs:?} at {at:?}"),
                ))
            }
        }
    }

    /// The node as first read: skip it, or mark it ours, or carry on from our record.
    fn inspect(&mut self, node: Box<Node>) -> Step {
        self.seen.uid = node.metadata.uid.clone().unwrap_or_default();
        let progress = match records::read::<InProgress>(&node, IN_PROGRESS) {
            Ok(p) => p,
            Err(why) => {
                return self.fail(Failure::new(UpgradeStep::Cordon, FailureKind::Node, why));
            }
        };
        let at_target =
            version(&node, &self.run.source).is_some_and(|v| same_version(v, &self.run.target));
        let done = records::read::<Done>(&node, DONE)
            .ok()
            .flatten()
            .is_some_and(|d| same_version(&d.version, &self.run.target));
        match records::read::<HostJob>(&node, HOST_JOB) {
            Ok(host) => {
                self.earlier_host = host.clone().filter(|h| h.target != self.run.target);
                self.seen.host = host.filter(|h| h.target == self.run.target);
            }
            Err(why) => {
                return self.fail(Failure::new(UpgradeStep::Cordon, FailureKind::Node, why));
            }
        }
        self.seen.blocked_before = records::read(&node, records::BLOCKED).ok().flatten();
        self.seen.soak = records::read(&node, records::SOAK).ok().flatten();
        self.seen.rollback = records::read(&node, records::ROLLBACK).ok().flatten();
        if progress.is_none()
            && let Some(step) = self.resume_soak(&node)
        {
            return step;
        }
        if progress.is_none()
            && !(at_target || done)
            && let Some(step) = self.leave_quarantined(&node)
        {
            return step;
        }
        match progress {
            None if at_target || done => {
                let why = match version(&node, &self.run.source) {
                    Some(v) if at_target => format!("reports {v} already"),
                    _ => format!("recorded done at {}", self.run.target),
                };
                self.go(
                    At::Over,
                    Vec::new(),
                    Intent::Done(NodeResult::Skipped { why }),
                )
            }
            None => {
                self.seen.node = Some(node);
                self.go(At::Vetting, Vec::new(), Intent::Vet)
            }
            // Ours from an earlier run toward another target: its host Job first, which must
            // have ended before one toward ours starts.
            Some(record) if record.target != self.run.target => {
                let target = record.target.clone();
                self.seen.node = Some(node);
                self.seen.progress = Some(record);
                self.go(At::Previous, Vec::new(), Intent::FindPrevious { target })
            }
            Some(record) => self.carry_on(record, node),
        }
    }

    /// The host Job an earlier run started toward another target, if any: one still running
    /// (or being deleted) fails the node, since two host operations never overlap on a node;
    /// one that ended is left for inspection, and the node starts again toward our target.
    fn previous(&mut self, job: Option<Box<Job>>) -> Step {
        let (Some(record), Some(node)) = (self.seen.progress.take(), self.seen.node.take()) else {
            return self.fail(Failure::new(
                UpgradeStep::Cordon,
                FailureKind::Internal,
                "internal: no record before the previous host job",
            ));
        };
        if let Some(job) = job
            && (!nodejob_core::finished(&job) || job.metadata.deletion_timestamp.is_some())
        {
            let name = job.metadata.name.clone().unwrap_or_default();
            self.seen.node = Some(node);
            return self.fail(Failure::new(
                UpgradeStep::Cordon,
                FailureKind::Node,
                format!(
                    "a host upgrade toward {} (job {name}) an earlier run started is \
                     still running on it: one toward {} starts only once it ended; rerun then",
                    record.target, self.run.target
                ),
            ));
        }
        // Its host upgrade succeeded and the node is still on the boot it started on: the
        // reboot that upgrade began is still to come, and would kill whatever starts now.
        let succeeded = self
            .earlier_host
            .as_ref()
            .is_some_and(|h| h.target == record.target && h.exit_code == Some(0));
        let launched = record.host_boot_id.clone().unwrap_or_default();
        if succeeded && !launched.is_empty() && boot_id(&node) == launched {
            let marks = vec![Mark::Note(format!(
                "the host upgrade toward {} an earlier run started succeeded and its reboot is \
                 still to come (boot {launched}): waiting for it before anything starts toward {}",
                record.target, self.run.target
            ))];
            self.seen.node = Some(node);
            self.seen.progress = Some(record);
            return self.go(
                At::Settling,
                marks,
                Intent::WaitReboot { boot_id: launched },
            );
        }
        self.carry_on(record, node)
    }

    /// The reboot an earlier run's host upgrade began, waited for before ours: on its new boot
    /// (or, not rebooted within the reboot timeout, on the same: taken as one that needed
    /// none), the node starts again toward our target.
    fn settled(&mut self, node: Option<Box<Node>>, met: bool) -> Step {
        let (Some(record), Some(node)) = (self.seen.progress.take(), node) else {
            return self.go(
                At::Over,
                Vec::new(),
                Intent::Done(NodeResult::Skipped {
                    why: "deleted from the cluster while the reboot of an earlier run's host \
                          upgrade was awaited: nothing of this run was started on it"
                        .into(),
                }),
            );
        };
        let mut step = self.carry_on(record, node);
        if !met {
            step.marks.insert(
                0,
                Mark::Note(
                    "it did not reboot within the reboot timeout: taken as an upgrade that \
                     needed none"
                        .into(),
                ),
            );
        }
        step
    }

    /// A fresh node's Pods judged ([`Intent::Vet`]): a drain that would be refused fails the
    /// node untouched, at its drain, naming each Pod and why; else the node is marked ours and
    /// cordoned (when schedulable) in one write.
    fn vetted(&mut self, refused: Vec<String>) -> Step {
        if !refused.is_empty() {
            let why = format!(
                "its drain would be refused, so it was left untouched (not cordoned): {}",
                refused.join("; ")
            );
            return self.fail(Failure::new(UpgradeStep::Drain, FailureKind::Drain, why));
        }
        let Some(node) = self.seen.node.as_deref() else {
            let why = "vetted with no node read".to_string();
            return self.fail(Failure::new(
                UpgradeStep::Cordon,
                FailureKind::Internal,
                why,
            ));
        };
        let cordon = !unschedulable(node);
        let record = InProgress {
            target: self.run.target.clone(),
            boot_id: boot_id(node).to_string(),
            host_boot_id: None,
            epoch: self.run.epoch,
            cordoned: cordon || self.cordoned_when_quarantined(node),
            from: version(node, &self.run.source).map(str::to_string),
            evicted: None,
        };
        let mut changes = vec![NodeChange::set_annotation(
            IN_PROGRESS,
            records::value(&record),
        )];
        if cordon {
            changes.push(NodeChange::Cordon);
        }
        let rv = records::rv(node);
        self.seen.progress = Some(record);
        self.fresh = true;
        self.go(
            At::Marking,
            vec![Mark::Started(UpgradeStep::Cordon)],
            Intent::Patch { rv, changes },
        )
    }

    /// Ours from an earlier run: carry on. Toward another target, start again from this boot;
    /// re-cordon if someone uncordoned it meanwhile.
    fn carry_on(&mut self, mut record: InProgress, node: Box<Node>) -> Step {
        let mut changes = Vec::new();
        let said = if record.target == self.run.target {
            format!(
                "resuming: started under Lease epoch {} toward {}",
                record.epoch, record.target
            )
        } else {
            format!(
                "carried on toward {}: an earlier run (Lease epoch {}) left it in flight toward \
                 {}; it starts again from its host step toward {} (what that run did on its \
                 host, a rerun does not undo)",
                self.run.target, record.epoch, record.target, self.run.target
            )
        };
        let mut marks = vec![Mark::Note(said)];
        if record.target != self.run.target {
            record.target = self.run.target.clone();
            record.boot_id = boot_id(&node).to_string();
            record.host_boot_id = None;
            record.from = version(&node, &self.run.source).map(str::to_string);
            record.evicted = None;
            changes.push(NodeChange::remove_annotation(HOST_JOB));
            self.seen.host = None;
        }
        if !unschedulable(&node) {
            record.cordoned = true;
            changes.push(NodeChange::Cordon);
            marks.push(Mark::Note("cordoning again: it was uncordoned".into()));
        }
        let rv = records::rv(&node);
        self.seen.node = Some(node);
        if changes.is_empty() {
            self.seen.progress = Some(record);
            let mut step = self.resume();
            marks.append(&mut step.marks);
            step.marks = marks;
            return step;
        }
        record.epoch = self.run.epoch;
        changes.insert(
            0,
            NodeChange::set_annotation(IN_PROGRESS, records::value(&record)),
        );
        self.seen.progress = Some(record);
        marks.push(Mark::Started(UpgradeStep::Cordon));
        self.go(At::Marking, marks, Intent::Patch { rv, changes })
    }

    /// Marked ours: where to go on, from what the node and our records say.
    fn resume(&mut self) -> Step {
        if let Some(step) = self.resume_rollback() {
            return step;
        }
        match &self.seen.host {
            Some(h) if h.exit_code == Some(0) => {
                let uid = h.uid.clone();
                self.earlier_success = true;
                let marks = vec![Mark::Note(format!(
                    "the host upgrade already succeeded (job {}); not running it again",
                    self.job_name()
                ))];
                self.go(At::Deleting, marks, Intent::DeleteJob { uid })
            }
            // Our host Job first: one that exists is adopted, never drained away nor replaced.
            _ => self.go(At::Finding, Vec::new(), Intent::FindJob),
        }
    }

    /// `n` more Pods evicted by its drain: kept in our record, which the write right before
    /// the host Job carries to the node.
    fn count_evicted(&mut self, n: usize) {
        if let Some(p) = self.seen.progress.as_mut() {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            p.evicted = Some(p.evicted.unwrap_or(0).saturating_add(n));
        }
    }

    /// The version the node reports, as last read.
    fn reported(&self) -> Option<String> {
        (self.seen.node.as_deref())
            .and_then(|n| version(n, &self.run.source))
            .map(str::to_string)
    }

    /// Whether the node reports the target, Ready, though we never launched our host upgrade
    /// (no Launch record, no host result).
    fn at_target_without_us(&self) -> bool {
        let launched = self
            .seen
            .progress
            .as_ref()
            .is_some_and(|p| p.host_boot_id.is_some());
        let at_target = (self.reported()).is_some_and(|v| same_version(&v, &self.run.target));
        !launched
            && self.seen.host.is_none()
            && at_target
            && self.seen.node.as_deref().is_some_and(ready)
    }

    /// Whether the host upgrade ran though its Job is gone: we launched it (our record holds
    /// the boot it started on) and the node now reports the target on another boot. A reboot
    /// alone is no evidence: a node reboots by itself too.
    fn ran_without_job(&self) -> bool {
        let (Some(n), Some(p)) = (self.seen.node.as_deref(), &self.seen.progress) else {
            return false;
        };
        let at_target =
            version(n, &self.run.source).is_some_and(|v| same_version(v, &self.run.target));
        p.host_boot_id
            .as_deref()
            .is_some_and(|launched| !launched.is_empty() && boot_id(n) != launched && at_target)
    }

    /// Right before the host Job: write our record with the `bootID` read now, under the
    /// resourceVersion of the node as last read. A node seen schedulable is cordoned and
    /// drained first.
    fn launch(&mut self, mut marks: Vec<Mark>) -> Step {
        let Some(node) = self.seen.node.clone() else {
            return self.fail(Failure::new(
                UpgradeStep::Drain,
                FailureKind::Internal,
                "internal: no node read before the host job",
            ));
        };
        if unschedulable(&node) {
            let Some(record) = self.seen.progress.as_mut() else {
                return self.fail(Failure::new(
                    UpgradeStep::Drain,
                    FailureKind::Internal,
                    "internal: no record before the host job",
                ));
            };
            record.host_boot_id = Some(boot_id(&node).to_string());
            let mut changes = vec![NodeChange::set_annotation(
                IN_PROGRESS,
                records::value(&*record),
            )];
            // What a rollback would go back to: the version and boot now.
            changes.extend(self.record_for_rollback(&node));
            let rv = records::rv(&node);
            return self.go(At::Launching, marks, Intent::Guarded { rv, changes });
        }
        marks.push(Mark::Note(format!(
            "it was uncordoned{} while drained: cordoning it again and draining it again",
            uncordoned_by(&node)
        )));
        self.recordon(node, marks)
    }

    /// The node changed between the drain and the host Job (a Conflict at Launch): drain it
    /// again (cordoned again first if someone uncordoned it), at most [`DRAIN_ROUNDS`] times.
    fn changed(&mut self, node: Box<Node>) -> Step {
        let kept = if unschedulable(&node) {
            "it kept changing".to_string()
        } else {
            format!("it kept being uncordoned{}", uncordoned_by(&node))
        };
        let node = match self.drain_round(node, kept) {
            Ok(node) => node,
            Err(failed) => return failed,
        };
        if !unschedulable(&node) {
            let marks = vec![Mark::Note(format!(
                "it was uncordoned{} after the drain: cordoning it again and draining it again \
                 before the host job",
                uncordoned_by(&node)
            ))];
            return self.recordon(node, marks);
        }
        let marks = vec![Mark::Note(
            "it changed after the drain (a reboot, a write): draining it again before the host \
             job"
            .into(),
        )];
        self.seen.node = Some(node);
        self.drain(marks)
    }

    /// The node, still cordoned, is not as drained right before the host Job (`why`): drain it
    /// again, at most [`DRAIN_ROUNDS`] times, as [`NodeMachine::changed`] does.
    fn redrain(&mut self, node: Box<Node>, why: String) -> Step {
        let node = match self.drain_round(node, format!("{why}, again and again")) {
            Ok(node) => node,
            Err(failed) => return failed,
        };
        self.seen.node = Some(node);
        let marks = vec![Mark::Note(format!(
            "{why}: draining it again before the host job"
        ))];
        self.drain(marks)
    }

    /// One more drain before the host Job: `node` back while [`DRAIN_ROUNDS`] allow it, else
    /// the node failed at Drain, `kept` saying what kept happening.
    fn drain_round(&mut self, node: Box<Node>, kept: String) -> Result<Box<Node>, Step> {
        self.redrains += 1;
        if self.redrains <= DRAIN_ROUNDS {
            return Ok(node);
        }
        self.seen.node = Some(node);
        Err(self.fail(Failure::new(
            UpgradeStep::Drain,
            FailureKind::Drain,
            format!(
                "{kept} between the drain and the host job ({DRAIN_ROUNDS} drains again); the \
                 host upgrade was not started"
            ),
        )))
    }

    /// Cordons `node` again (we cordoned it now, so we uncordon it at the end), then drains it.
    fn recordon(&mut self, node: Box<Node>, mut marks: Vec<Mark>) -> Step {
        let Some(record) = self.seen.progress.as_mut() else {
            return self.fail(Failure::new(
                UpgradeStep::Drain,
                FailureKind::Internal,
                "internal: no record before the host job",
            ));
        };
        record.cordoned = true;
        record.epoch = self.run.epoch;
        let changes = vec![
            NodeChange::set_annotation(IN_PROGRESS, records::value(&*record)),
            NodeChange::Cordon,
        ];
        let rv = records::rv(&node);
        self.seen.node = Some(node);
        marks.push(Mark::Started(UpgradeStep::Cordon));
        self.go(At::Marking, marks, Intent::Patch { rv, changes })
    }

    /// Drain, then the host Job, created (replacing a failed one we recorded).
    fn drain(&mut self, mut marks: Vec<Mark>) -> Step {
        marks.push(Mark::Started(UpgradeStep::Drain));
        self.go(At::Draining, marks, Intent::Drain)
    }

    /// The Job of the host Job's name, if any: adopt it; or drain, then replace or create it.
    fn found(&mut self, job: Option<Box<Job>>) -> Step {
        self.host_free = job.is_none();
        let Some(job) = job else {
            if self.at_target_without_us() {
                // Upgraded out of band (by a person, another tool) before we launched ours:
                // nothing to run; finish what we started (uncordon if we cordoned it).
                let reported = self.reported().unwrap_or_default();
                let marks = vec![Mark::Note(format!(
                    "it reports {reported} already, reached without our host upgrade (never \
                     launched): finishing without running it"
                ))];
                return self.check_then_finish(marks);
            }
            if self.ran_without_job() {
                // The host step ran (its Job is gone, deleted by someone): wait for the node.
                let marks = vec![Mark::Note(
                    "the host upgrade we launched ran (at the target on another boot, its job \
                     gone); not running it again"
                        .into(),
                )];
                let mut step = self.await_reboot();
                step.marks.splice(0..0, marks);
                return step;
            }
            return self.drain(Vec::new());
        };
        let uid = job.metadata.uid.clone().unwrap_or_default();
        if job.metadata.deletion_timestamp.is_some() {
            // Being deleted: the runner waits it out, then creates ours.
            return self.drain(Vec::new());
        }
        let recorded_failure = self
            .seen
            .host
            .as_ref()
            .is_some_and(|h| h.uid == uid && h.exit_code != Some(0));
        if recorded_failure && nodejob_core::failed(&job) && self.ran_without_job() {
            // Its pod was lost to the reboot the upgrade itself began (or another one after
            // the upgrade took): the node says it ran. Never run again.
            let marks = vec![Mark::Note(format!(
                "the host upgrade we launched took (the node reports {} on another boot), though \
                 its job {} failed without an answer; not running it again",
                self.run.target,
                self.job_name()
            ))];
            let mut step = self.await_reboot();
            step.marks.splice(0..0, marks);
            return step;
        }
        if recorded_failure && nodejob_core::failed(&job) {
            let marks = vec![Mark::Note(format!(
                "retrying: replacing the failed host job {} reported earlier",
                self.job_name()
            ))];
            return self.drain(marks);
        }
        // Started by an earlier run after its drain: its result is the answer. Draining now
        // would evict its pod.
        let marks = vec![
            Mark::Note(format!(
                "adopting the host job {} an earlier run started: its result is the answer",
                job.metadata.name.as_deref().unwrap_or_default()
            )),
            Mark::Started(UpgradeStep::Upgrade),
        ];
        let adopt = Some(uid);
        let known_free = false;
        self.go(At::Hosting, marks, Intent::Host { adopt, known_free })
    }

    /// The boot the host upgrade started on: read at Launch (an older record: when we started).
    fn launched_boot(&self) -> &str {
        self.seen
            .progress
            .as_ref()
            .map(|p| p.host_boot_id.as_deref().unwrap_or(&p.boot_id))
            .unwrap_or_default()
    }

    fn await_reboot(&mut self) -> Step {
        let boot_id = self.launched_boot().to_string();
        self.go(
            At::Rebooting,
            vec![Mark::Started(UpgradeStep::Reboot)],
            Intent::WaitReboot { boot_id },
        )
    }

    fn on_reboot(&mut self, node: Option<Box<Node>>, met: bool) -> Step {
        let reported = node
            .as_deref()
            .and_then(|n| version(n, &self.run.source))
            .unwrap_or("nothing")
            .to_string();
        let gone = node.is_none();
        if let Some(n) = node {
            self.seen.node = Some(n);
        }
        if gone {
            return self.fail(Failure::new(
                UpgradeStep::Reboot,
                FailureKind::Node,
                "the node was deleted from the cluster while it rebooted",
            ));
        }
        if let Some(lost) = self.lost.take() {
            return self.lost_judged(&lost, &reported, met);
        }
        let at_target = self
            .seen
            .node
            .as_deref()
            .is_some_and(|n| ready(n) && same_version(&reported, &self.run.target));
        if !met && self.earlier_success && at_target {
            // An earlier run saw the host upgrade exit 0; a whole reboot timeout later the node
            // is Ready at the target on the same boot: the upgrade needed no reboot (the host
            // was at the target already). Never taken on a first wait: a reboot may be pending.
            let marks = vec![Mark::Note(format!(
                "Ready at {reported} without a reboot a whole reboot timeout after its host \
                 upgrade exited 0: taken as needing none"
            ))];
            return self.check_then_finish(marks);
        }
        if !met {
            let before = self.launched_boot();
            let why = match self.seen.node.as_deref() {
                None => "the node no longer exists".to_string(),
                Some(n) if boot_id(n) == before && !ready(n) => {
                    format!("it went NotReady and did not come back (bootID {before} unchanged)")
                }
                Some(n) if boot_id(n) == before => {
                    format!("it did not reboot (bootID {before} unchanged)")
                }
                Some(n) if !ready(n) => "it rebooted but is not Ready".to_string(),
                Some(_) => "it did not come back".to_string(),
            };
            return self.failed_or_rolled_back(Failure {
                step: UpgradeStep::Reboot,
                kind: FailureKind::TimedOut,
                message: format!("{why} within the reboot timeout; the node stays cordoned"),
                exit_code: None,
                log_tail: None,
            });
        }
        if !same_version(&reported, &self.run.target) {
            return self.failed_or_rolled_back(Failure {
                step: UpgradeStep::Reboot,
                kind: FailureKind::Node,
                message: format!(
                    "it came back at {reported}, not {}: the upgrade did not take; the node \
                     stays cordoned",
                    self.run.target
                ),
                exit_code: None,
                log_tail: None,
            });
        }
        let marks = vec![Mark::Finished(
            UpgradeStep::Reboot,
            format!("rebooted, Ready at {reported}"),
        )];
        self.check_then_finish(marks)
    }

    /// The host upgrade's pod was lost to a reboot, its failure recorded (the Job `uid`): wait
    /// for the node to be back, Ready on a boot other than the one it was launched on, and
    /// let its version say whether the upgrade took ([`Self::lost_judged`]).
    fn await_lost(&mut self) -> Step {
        let job = self.job_name();
        let mut step = self.await_reboot();
        step.marks.insert(
            0,
            Mark::Note(format!(
                "the host upgrade's pod was lost to a reboot of the node (job {job}): \
                 waiting for the node to be back; its version then says whether the upgrade took"
            )),
        );
        step
    }

    /// The node back (`met`) or not after a host upgrade lost to its reboot: at the target,
    /// the upgrade took (the reboot was its own, or came after it did its work) and the roll
    /// goes on as after an exit 0, never running it again; at another version it did not
    /// take: a failure of the Upgrade step (rolled back when the plan says so), its record
    /// kept as a failure without an exit code, so that a rerun retries it.
    fn lost_judged(&mut self, lost: &str, reported: &str, met: bool) -> Step {
        let job = self.job_name();
        if !met {
            return self.failed_or_rolled_back(Failure {
                step: UpgradeStep::Upgrade,
                kind: FailureKind::TimedOut,
                message: format!(
                    "{lost}; the node did not come back Ready on a new boot within the reboot \
                     timeout; the node stays cordoned"
                ),
                exit_code: None,
                log_tail: None,
            });
        }
        if !same_version(reported, &self.run.target) {
            return self.failed_or_rolled_back(Failure {
                step: UpgradeStep::Upgrade,
                kind: FailureKind::Node,
                message: format!(
                    "{lost}; the node came back at {reported}, not {}: the upgrade did not \
                     take; the node stays cordoned; a rerun retries it, replacing that failed \
                     job {job}",
                    self.run.target
                ),
                exit_code: None,
                log_tail: None,
            });
        }
        let marks = vec![
            Mark::Finished(
                UpgradeStep::Upgrade,
                format!(
                    "its pod was lost to the node's reboot, and the node came back at \
                     {reported}: the upgrade took; its job {job} is left for inspection"
                ),
            ),
            Mark::Finished(
                UpgradeStep::Reboot,
                format!("rebooted, Ready at {reported}"),
            ),
        ];
        self.check_then_finish(marks)
    }

    /// At the target: the health check, if any, then the finish.
    fn check_then_finish(&mut self, mut marks: Vec<Mark>) -> Step {
        if self.run.has_health {
            marks.push(Mark::Started(UpgradeStep::Health));
            return self.go(At::Checking, marks, Intent::Health);
        }
        self.uncordon(marks)
    }

    /// The Uncordon step starts: [`NodeMachine::finish`]'s write.
    fn uncordon(&mut self, mut marks: Vec<Mark>) -> Step {
        marks.push(Mark::Started(UpgradeStep::Uncordon));
        self.finish(marks)
    }

    /// Uncordon if we cordoned it, record it done, remove our records: one write. When the
    /// plan soaks, the soak record instead of the done record (done once it passed). The
    /// Uncordon step is started by the caller ([`NodeMachine::uncordon`]), once: a write
    /// decided again is the same step.
    fn finish(&mut self, marks: Vec<Mark>) -> Step {
        if self.run.soaks {
            return self.finish_into_soak(marks);
        }
        let mut changes = Vec::new();
        if self.seen.progress.as_ref().is_some_and(|p| p.cordoned) {
            changes.push(NodeChange::Uncordon);
        }
        let done = Done {
            version: self.run.target.clone(),
            at: self.seen.now.clone(),
        };
        changes.push(NodeChange::set_annotation(DONE, records::value(&done)));
        changes.push(NodeChange::remove_annotation(IN_PROGRESS));
        changes.push(NodeChange::remove_annotation(HOST_JOB));
        if self.seen.blocked_before.is_some() {
            changes.push(NodeChange::remove_annotation(records::BLOCKED));
        }
        if self.seen.soak.is_some() {
            // An earlier soak's record (toward another target): ours no longer.
            changes.push(NodeChange::remove_annotation(records::SOAK));
        }
        if self.seen.rollback.is_some() {
            // What a rollback would have gone back to: no longer needed.
            changes.push(NodeChange::remove_annotation(records::ROLLBACK));
        }
        let rv = self.rv();
        self.go(At::Finishing, marks, Intent::Guarded { rv, changes })
    }

    /// The node changed between the read that showed it at the target and the done record:
    /// recorded done only if it still shows it (rebooted, Ready, at the target).
    fn finish_again(&mut self, node: Box<Node>) -> Step {
        self.refinishes += 1;
        let reported = version(&node, &self.run.source).map(str::to_string);
        let launched = self.launched_boot().to_string();
        let still = reported
            .as_deref()
            .is_some_and(|v| same_version(v, &self.run.target))
            && ready(&node)
            && boot_id(&node) != launched;
        self.seen.node = Some(node);
        if !still || self.refinishes > DRAIN_ROUNDS {
            let why = if still {
                "it kept changing".to_string()
            } else {
                format!(
                    "it no longer shows {} rebooted and Ready (reports {})",
                    self.run.target,
                    reported.as_deref().unwrap_or("nothing")
                )
            };
            return self.fail(Failure::new(
                UpgradeStep::Uncordon,
                FailureKind::Node,
                format!("{why} when it was to be recorded done; the node stays cordoned"),
            ));
        }
        // The Uncordon started (and was told) at the first write: this is the same step's
        // write again, not a second start (`Uncordon...` twice on a real cluster, whose
        // kubelet changes the node between the read and the write).
        self.finish(Vec::new())
    }

    fn fail(&mut self, failure: Failure) -> Step {
        self.at = At::Over;
        Step {
            marks: Vec::new(),
            intent: Intent::Done(NodeResult::Failed(failure)),
        }
    }

    fn go(&mut self, at: At, marks: Vec<Mark>, mut intent: Intent) -> Step {
        if let Intent::Patch { changes, .. } | Intent::Guarded { changes, .. } = &mut intent {
            self.fence_with_record(changes);
        }
        self.at = at;
        Step { marks, intent }
    }

    /// Our `NoSchedule` taint ([`records::FENCE_TAINT`]) goes with our in-progress record, in
    /// the same write: added where the record is written, or any write is made while it is
    /// there, on a node that lacks the taint (someone removed it); removed where the record is
    /// removed. Written once here, for every write of the machine.
    fn fence_with_record(&self, changes: &mut Vec<NodeChange>) {
        let record = |set: bool| {
            changes.iter().any(|c| match c {
                NodeChange::SetAnnotation { key, .. } => set && key == IN_PROGRESS,
                NodeChange::RemoveAnnotation { key } => !set && key == IN_PROGRESS,
                _ => false,
            })
        };
        let (sets, removes) = (record(true), record(false));
        let node = self.seen.node.as_deref();
        let held = node.is_some_and(|n| {
            (records::read::<InProgress>(n, IN_PROGRESS).ok().flatten()).is_some()
        });
        let tainted =
            node.is_some_and(|n| nodejob_core::tainted_no_schedule(n, records::FENCE_TAINT));
        let key = records::FENCE_TAINT.to_string();
        if removes {
            if tainted {
                changes.push(NodeChange::Untaint { key });
            }
        } else if (sets || held) && !tainted {
            changes.push(NodeChange::TaintNoSchedule { key });
        }
    }

    fn rv(&self) -> String {
        self.seen
            .node
            .as_deref()
            .map(records::rv)
            .unwrap_or_default()
    }

    /// The node's name, as last seen.
    fn node_name(&self) -> &str {
        (self.seen.node.as_deref())
            .and_then(|n| n.metadata.name.as_deref())
            .unwrap_or_default()
    }

    /// The name of our host Job on this node: what a line names, so that `kubectl get job
    /// NAME` finds it (a UID is found by nothing a person types).
    fn job_name(&self) -> String {
        crate::plan::host_job_name(self.node_name(), &self.run.target)
    }

    /// The name of our rollback Job on this node, likewise.
    fn rollback_job_name(&self) -> String {
        crate::plan::rollback_job_name(self.node_name(), &self.run.target)
    }

    /// The step the machine is at.
    pub fn current_step(&self) -> UpgradeStep {
        self.step_of(&self.at)
    }

    /// The step this machine starts once the write at hand lands, with nothing between but
    /// requests and, after the host Job's record, that Job's delete: the Upgrade after the
    /// launch record, the Reboot after a successful host Job's record. Its condition can go
    /// in that write (the driver's hands send it there). `None` elsewhere.
    pub fn starts_after_write(&self) -> Option<UpgradeStep> {
        match &self.at {
            At::Launching => Some(UpgradeStep::Upgrade),
            At::Recording(_) if self.pending_failure.is_none() && self.lost.is_none() => {
                Some(UpgradeStep::Reboot)
            }
            _ => None,
        }
    }

    fn step_of(&self, at: &At) -> UpgradeStep {
        match at {
            At::Inspect | At::Vetting | At::Previous | At::Settling | At::Marking => {
                UpgradeStep::Cordon
            }
            At::Draining | At::Launching | At::Blocking(_) => UpgradeStep::Drain,
            At::Preflight
            | At::Finding
            | At::Hosting
            | At::Inquest(_)
            | At::Recording(_)
            | At::Deleting => UpgradeStep::Upgrade,
            At::Rebooting => UpgradeStep::Reboot,
            At::Checking => UpgradeStep::Health,
            At::Finishing | At::Over => UpgradeStep::Uncordon,
            At::Soaking
            | At::SoakChecking
            | At::SoakDone
            | At::SoakRestart
            | At::SoakFailing(_) => UpgradeStep::Soak,
            At::RollingBack(_) => UpgradeStep::Rollback,
        }
    }
}

/// ` (by <manager>)` when the Node's `managedFields` name who wrote it last, else nothing.
fn uncordoned_by(node: &Node) -> String {
    records::last_manager(node)
        .map(|m| format!(" (the node's last writer, by its managedFields: {m})"))
        .unwrap_or_default()
}

/// The machine as the engine's executor drives it ([`nodejob_roll::Context::drive`]).
impl nodejob_roll::Machine for NodeMachine {
    type Step = UpgradeStep;
    type Own = Own;
    type Intent = Intent;
    type Observation = Observation;

    fn at(&self) -> UpgradeStep {
        self.current_step()
    }

    fn now(&mut self, now: String) {
        self.set_now(now);
    }

    fn step(&mut self, obs: Observation) -> Step {
        NodeMachine::step(self, obs)
    }
}
