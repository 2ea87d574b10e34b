//! What the machine and its loop say to each other: the steps of a node's upgrade, the
//! intents the machine returns, the observations that answer them, and how a node ends.

use std::fmt;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::NodeChange;
use nodejob_core::drain::Drained;
use nodejob_core::runner::Report;
pub use nodejob_roll::{Cause, FailureKind};

use crate::plan::Undrainable;

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
