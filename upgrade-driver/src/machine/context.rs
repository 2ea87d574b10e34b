//! What every sub-machine shares and none owns: [`Run`], what the plan fixes; [`Seen`], the
//! node as last seen and what it carries of ours; and [`Next`], how a sub-machine answers an
//! observation. The sub-machines import this file and the protocol, nothing of each other or
//! of the root.

use k8s_openapi::api::core::v1::Node;
use nodejob_core::{NodeChange, ready};

use super::protocol::{Cause, Failure, Intent, Mark, NodeResult};
use crate::plan::{OnFailure, Plan, Undrainable};
use crate::records::{self, HostJob, IN_PROGRESS, InProgress};

/// The last lines of a log kept in a failure.
pub(super) const LOG_TAIL_LINES: usize = 20;

/// How many times a node may be drained again because it changed (was uncordoned, or
/// rebooted) between a drain and the host Job, before it fails.
pub const DRAIN_ROUNDS: u32 = 3;

/// What a node's upgrade is about: fixed by the plan when the machine is made.
#[derive(Clone, Debug)]
pub(super) struct Run {
    /// The version the plan moves the node to.
    pub(super) target: String,
    /// Where the node reports its version.
    pub(super) source: crate::plan::VersionSource,
    /// The Lease epoch our records carry.
    pub(super) epoch: i32,
    /// Whether the plan has a health check.
    pub(super) has_health: bool,
    /// What the plan does with a node whose drain budgets block.
    pub(super) on_undrainable: Undrainable,
    /// Whether the plan soaks each node.
    pub(super) soaks: bool,
    /// What the plan does with a node that fails after its host upgrade.
    pub(super) on_failure: OnFailure,
    /// Whether the plan allows moving a node to an older version.
    pub(super) downgrade: crate::plan::Downgrade,
}

/// The node as last seen and what it carries of ours (our records, as read or as written):
/// the cluster's state, which every phase reads and writes, owned by none.
#[derive(Clone, Debug, Default)]
pub(super) struct Seen {
    /// The node as last seen.
    pub(super) node: Option<Box<Node>>,
    /// The node's UID as first read: a node of the same name with another UID is another
    /// node, to which nothing of this run applies.
    pub(super) uid: String,
    /// The wall time, RFC 3339, for the records written next.
    pub(super) now: String,
    /// Our record, once read or written.
    pub(super) progress: Option<InProgress>,
    /// The host record, once read or written.
    pub(super) host: Option<HostJob>,
    /// The node's blocked record, as first read (an earlier attempt's).
    pub(super) blocked_before: Option<records::Blocked>,
    /// The node's soak record, as first read or as written.
    pub(super) soak: Option<records::Soak>,
    /// The node's rollback record, as first read or as written.
    pub(super) rollback: Option<records::Rollback>,
    /// Drains begun again because the node changed before a host Job (the upgrade's or the
    /// rollback's): one bound, [`DRAIN_ROUNDS`], over the node's whole upgrade.
    pub(super) redrains: u32,
    /// Last writes (done, soak, rolled back) decided again because the node changed before
    /// they were written: one bound over the node's whole upgrade.
    pub(super) refinishes: u32,
}

/// How a sub-machine in state `S` answers an observation.
#[derive(Debug)]
pub(super) enum Next<S, X> {
    /// It goes on, now in state `S`: these marks, then this intent.
    Stay(S, Vec<Mark>, Intent),
    /// It is done: these marks, then the root hands `X` to the next sub-machine.
    Leave(Vec<Mark>, X),
    /// The node is finished.
    Finish(Vec<Mark>, NodeResult),
}

impl<S, X> Next<S, X> {
    /// Stays in `state`, issuing `intent` after `marks`.
    pub(super) fn stay(state: S, marks: Vec<Mark>, intent: Intent) -> Self {
        Next::Stay(state, marks, intent)
    }

    /// Leaves for `x`, with no marks.
    pub(super) fn leave(x: X) -> Self {
        Next::Leave(Vec::new(), x)
    }

    /// The node fails with `failure`.
    pub(super) fn fail(failure: Failure) -> Self {
        Next::Finish(Vec::new(), NodeResult::Failed(failure))
    }

    /// The node ends with `result`, with no marks.
    pub(super) fn done(result: NodeResult) -> Self {
        Next::Finish(Vec::new(), result)
    }

    /// The same answer, `marks` told first.
    pub(super) fn after(self, mut marks: Vec<Mark>) -> Self {
        let mut put = |own: Vec<Mark>| {
            marks.extend(own);
            std::mem::take(&mut marks)
        };
        match self {
            Next::Stay(s, own, intent) => Next::Stay(s, put(own), intent),
            Next::Leave(own, x) => Next::Leave(put(own), x),
            Next::Finish(own, result) => Next::Finish(put(own), result),
        }
    }

    /// The same answer, `mark` told last.
    pub(super) fn then(mut self, mark: Mark) -> Self {
        match &mut self {
            Next::Stay(_, marks, _) | Next::Leave(marks, _) | Next::Finish(marks, _) => {
                marks.push(mark);
            }
        }
        self
    }
}

/// `failure`, whose record failed to be written with `why`: the failure is the news, the write
/// said after it (`what`: what could not be recorded).
pub(super) fn unrecorded(failure: &Failure, what: &str, why: &Cause) -> Failure {
    let mut failure = failure.clone();
    failure.message = format!(
        "{}; {what} could not be recorded on the node: {why}",
        failure.message
    );
    failure
}

impl Run {
    /// What `plan` fixes for a node, the Lease held at `epoch`.
    pub(super) fn new(plan: &Plan, epoch: i32) -> Self {
        let spec = plan.spec();
        Run {
            target: plan.target().to_string(),
            source: spec.version_source.clone(),
            epoch,
            has_health: spec.health_check.is_some(),
            on_undrainable: spec.on_undrainable,
            soaks: spec.soak.is_some(),
            on_failure: spec.on_failure,
            downgrade: spec.downgrade,
        }
    }
}

impl Seen {
    /// Our `NoSchedule` taint ([`records::FENCE_TAINT`]) goes with our in-progress record, in
    /// the same write: added where the record is written, or any write is made while it is
    /// there, on a node that lacks the taint (someone removed it); removed where the record is
    /// removed. Written once here, for every write of the machine.
    pub(super) fn fence_with_record(&self, changes: &mut Vec<NodeChange>) {
        let record = |set: bool| {
            changes.iter().any(|c| match c {
                NodeChange::SetAnnotation { key, .. } => set && key == IN_PROGRESS,
                NodeChange::RemoveAnnotation { key } => !set && key == IN_PROGRESS,
                _ => false,
            })
        };
        let (sets, removes) = (record(true), record(false));
        let node = self.node.as_deref();
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

    /// The resourceVersion of the node as last seen.
    pub(super) fn rv(&self) -> String {
        self.node.as_deref().map(records::rv).unwrap_or_default()
    }

    /// The node's name, as last seen.
    pub(super) fn node_name(&self) -> &str {
        (self.node.as_deref())
            .and_then(|n| n.metadata.name.as_deref())
            .unwrap_or_default()
    }

    /// The name of our host Job on this node: what a line names, so that `kubectl get job
    /// NAME` finds it (a UID is found by nothing a person types).
    pub(super) fn job_name(&self, run: &Run) -> String {
        crate::plan::host_job_name(self.node_name(), &run.target)
    }

    /// The name of our rollback Job on this node, likewise.
    pub(super) fn rollback_job_name(&self, run: &Run) -> String {
        crate::plan::rollback_job_name(self.node_name(), &run.target)
    }

    /// Whether we cordoned the node (ours to uncordon at the end).
    pub(super) fn cordoned(&self) -> bool {
        self.progress.as_ref().is_some_and(|p| p.cordoned)
    }

    /// The boot the host upgrade started on: read at Launch (an older record: when we started).
    pub(super) fn launched_boot(&self) -> &str {
        self.progress
            .as_ref()
            .map(|p| p.host_boot_id.as_deref().unwrap_or(&p.boot_id))
            .unwrap_or_default()
    }

    /// Whether the node can be rolled back now; why not otherwise.
    pub(super) fn can_roll_back(&self, run: &Run) -> Result<(), NoRollback> {
        if run.on_failure != OnFailure::Rollback {
            return Err(NoRollback::NotPlanned);
        }
        let recorded =
            (self.rollback.as_ref()).is_some_and(|r| r.from == run.target && !r.to.is_empty());
        if !recorded {
            return Err(NoRollback::NoVersionRecorded);
        }
        if !self.node.as_deref().is_some_and(ready) {
            return Err(NoRollback::NotReady);
        }
        Ok(())
    }

    /// Whether `node`, cordoned, is so because we quarantined it earlier (the label now gone):
    /// then it is ours to uncordon at the end.
    pub(super) fn cordoned_when_quarantined(&self, node: &Node) -> bool {
        records::unschedulable(node)
            && !records::quarantined(node)
            && (self.blocked_before.as_ref())
                .is_some_and(|b| b.policy == Undrainable::Quarantine && b.cordoned)
    }
}

/// Why a node that failed is not rolled back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoRollback {
    /// The plan's `on_failure` is not `rollback`.
    #[error("the plan does not roll back")]
    NotPlanned,
    /// No version was recorded before the host upgrade: nothing to go back to.
    #[error("no version was recorded before its host upgrade")]
    NoVersionRecorded,
    /// The node is not Ready: a rollback Job could not run there.
    #[error("the node is not Ready")]
    NotReady,
}
