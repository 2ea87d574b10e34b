//! The steps of a rotation, when a node has passed each, and what to do with the host Job a
//! step may have left on a node: pure decisions, each a row in a table test.
//!
//! ```text
//!  our Job of the step:  running ─────────────▶ Adopt (never killed; its result is the answer)
//!                        succeeded ───────────▶ Adopt (its result, then delete it exactly)
//!                        failed, step passed ─▶ Nothing (left for inspection)
//!                        failed / none / being deleted, step not passed ─▶ Run
//!                        none, step passed ───▶ Nothing
//! ```

use std::fmt;

use k8s_openapi::api::batch::v1::Job;
use nodejob_core::finished;

use crate::fingerprint::Fingerprint;
use crate::status::CaStatus;

/// A step of the rotation on one node, as progress, the report and the Events
/// (`NodejobCa<Step>`) name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum CaStep {
    /// Read `carotate status`.
    Status,
    /// Install the new CA beside the old one in every trust bundle.
    Stage,
    /// Reissue the node's leaves from the new CA, restart what uses them, Ready again.
    Issue,
    /// `carotate verify`: the leaves chain to the new CA and the trusted set is the one
    /// expected.
    Verify,
    /// Remove the old CA.
    Finalize,
    /// Remove the staged new CA (an abort before `issue`).
    Abort,
}

impl CaStep {
    /// The three phases of a rotation, in order.
    pub const PHASES: [CaStep; 3] = [CaStep::Stage, CaStep::Issue, CaStep::Finalize];

    /// `Status`, `Stage`, …
    pub fn as_str(self) -> &'static str {
        match self {
            CaStep::Status => "Status",
            CaStep::Stage => "Stage",
            CaStep::Issue => "Issue",
            CaStep::Verify => "Verify",
            CaStep::Finalize => "Finalize",
            CaStep::Abort => "Abort",
        }
    }

    /// The `carotate` subcommand: `status`, `stage`, …
    pub fn subcommand(self) -> &'static str {
        match self {
            CaStep::Status => "status",
            CaStep::Stage => "stage",
            CaStep::Issue => "issue",
            CaStep::Verify => "verify",
            CaStep::Finalize => "finalize",
            CaStep::Abort => "abort",
        }
    }

    /// The Event reason: `NodejobCa<Step>`.
    pub fn reason(self) -> String {
        format!("NodejobCa{}", self.as_str())
    }

    /// Whether a node reporting `status` has passed this step toward (or, for
    /// [`CaStep::Abort`], away from) `new`: staged when it trusts `new`; issued when `new`
    /// issues its leaves; finalized when `new` is the one CA it trusts; aborted when it does
    /// not trust `new`. Reads never pass.
    pub fn passed(self, status: &CaStatus, new: &Fingerprint) -> bool {
        match self {
            CaStep::Stage => status.trusts(new),
            CaStep::Issue => &status.issuer == new,
            CaStep::Finalize => status.trusted.len() == 1 && status.trusts(new),
            CaStep::Abort => !status.trusts(new),
            CaStep::Status | CaStep::Verify => false,
        }
    }
}

impl fmt::Display for CaStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to do on a node for a step, given the step's Job of ours there (if any) and whether
/// the node has passed the step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: passed, and no Job of ours to finish.
    Nothing,
    /// Take the result of our Job of this UID (running: wait for it), then delete it.
    Adopt(String),
    /// Run the step (the runner replaces a finished or deleted Job of the name).
    Run,
}

/// The decision for a step on a node (see the module docs).
pub fn decide(job: Option<&Job>, passed: bool) -> Decision {
    let live = job.filter(|j| j.metadata.deletion_timestamp.is_none());
    match live {
        Some(job) if !finished(job) || nodejob_core::succeeded(job) => {
            Decision::Adopt(job.metadata.uid.clone().unwrap_or_default())
        }
        _ if passed => Decision::Nothing,
        _ => Decision::Run,
    }
}

impl nodejob_roll::RollStep for CaStep {
    fn reason(&self) -> String {
        CaStep::reason(*self)
    }
}
