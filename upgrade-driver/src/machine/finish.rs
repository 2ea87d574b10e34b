//! The finish: uncordon if we cordoned it, record it done, remove our records, in one write
//! guarded by the node as read at the target. When the plan soaks, the soak record instead of
//! the done record (done once the soak passed).
//!
//! ```text
//!  Finishing ─written─▶ Upgraded  (soaks: ─▶ the soak)
//!     │ the node changed since its read: written again if it still shows the target,
//!     └ rebooted and Ready, at most DRAIN_ROUNDS times; failed otherwise
//! ```

use k8s_openapi::api::core::v1::Node;
use nodejob_core::{NodeChange, ready};

use super::context::{DRAIN_ROUNDS, Next, Run, Seen};
use super::protocol::{Failure, FailureKind, Intent, Mark, NodeResult, Observation, UpgradeStep};
use crate::records::{self, DONE, Done, HOST_JOB, IN_PROGRESS, SOAK, Soak, boot_id};
use crate::version::{same_version, version};

/// The finish's one write, under way.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Finish;

/// The finish was written with the soak record: the soak begins.
#[derive(Debug)]
pub(super) struct Soaking;

type Step = Next<Finish, Soaking>;

impl Finish {
    /// The Uncordon step starts: the finish's write, after `marks`.
    pub(super) fn uncordon(run: &Run, seen: &mut Seen, mut marks: Vec<Mark>) -> Step {
        marks.push(Mark::Started(UpgradeStep::Uncordon));
        write(run, seen, marks)
    }

    /// Takes the answer to the last intent.
    pub(super) fn step(self, run: &Run, seen: &mut Seen, obs: Observation) -> Step {
        match obs {
            Observation::Changed(node) => again(run, seen, node),
            Observation::Node(node) => {
                seen.node = Some(node);
                let (target, soaking) = (&run.target, if run.soaks { "; soaking" } else { "" });
                let message = if seen.cordoned() {
                    format!("uncordoned; at {target}{soaking}")
                } else {
                    format!("at {target}; left cordoned (someone else cordoned it){soaking}")
                };
                let marks = vec![Mark::Finished(UpgradeStep::Uncordon, message)];
                if run.soaks {
                    Next::Leave(marks, Soaking)
                } else {
                    Next::Finish(marks, NodeResult::Upgraded)
                }
            }
            obs => Next::fail(Failure::new(
                UpgradeStep::Uncordon,
                FailureKind::Internal,
                format!("internal: unexpected answer {obs:?} at {self:?}"),
            )),
        }
    }
}

/// Uncordon if we cordoned it, record it done, remove our records: one write. When the plan
/// soaks, the soak record instead of the done record. The Uncordon step is started by the
/// caller ([`Finish::uncordon`]), once: a write decided again is the same step.
fn write(run: &Run, seen: &mut Seen, marks: Vec<Mark>) -> Step {
    if run.soaks {
        return write_into_soak(run, seen, marks);
    }
    let mut changes = Vec::new();
    if seen.cordoned() {
        changes.push(NodeChange::Uncordon);
    }
    let done = Done {
        version: run.target.clone(),
        at: seen.now.clone(),
    };
    changes.push(NodeChange::set_annotation(DONE, records::value(&done)));
    changes.push(NodeChange::remove_annotation(IN_PROGRESS));
    changes.push(NodeChange::remove_annotation(HOST_JOB));
    if seen.blocked_before.is_some() {
        changes.push(NodeChange::remove_annotation(records::BLOCKED));
    }
    if seen.soak.is_some() {
        // An earlier soak's record (toward another target): ours no longer.
        changes.push(NodeChange::remove_annotation(records::SOAK));
    }
    if seen.rollback.is_some() {
        // What a rollback would have gone back to: no longer needed.
        changes.push(NodeChange::remove_annotation(records::ROLLBACK));
    }
    let rv = seen.rv();
    Next::stay(Finish, marks, Intent::Guarded { rv, changes })
}

/// The finish when the plan soaks: uncordon if ours, the soak record from now on this boot,
/// our in-flight records gone: one guarded write. The done record waits for the soak.
fn write_into_soak(run: &Run, seen: &mut Seen, marks: Vec<Mark>) -> Step {
    let mut changes = Vec::new();
    if seen.cordoned() {
        changes.push(NodeChange::Uncordon);
    }
    let record = Soak {
        target: run.target.clone(),
        since: seen.now.clone(),
        boot_id: (seen.node.as_deref())
            .map(boot_id)
            .unwrap_or_default()
            .to_string(),
        failed: None,
        from: seen.progress.as_ref().and_then(|p| p.from.clone()),
        evicted: seen.progress.as_ref().and_then(|p| p.evicted),
    };
    changes.push(NodeChange::set_annotation(SOAK, records::value(&record)));
    changes.push(NodeChange::remove_annotation(IN_PROGRESS));
    changes.push(NodeChange::remove_annotation(HOST_JOB));
    if seen.blocked_before.is_some() {
        changes.push(NodeChange::remove_annotation(records::BLOCKED));
    }
    seen.soak = Some(record);
    let rv = seen.rv();
    Next::stay(Finish, marks, Intent::Guarded { rv, changes })
}

/// The node changed between the read that showed it at the target and the done record:
/// recorded done only if it still shows it (rebooted, Ready, at the target).
fn again(run: &Run, seen: &mut Seen, node: Box<Node>) -> Step {
    seen.refinishes += 1;
    let reported = version(&node, &run.source).map(str::to_string);
    let launched = seen.launched_boot().to_string();
    let still = reported
        .as_deref()
        .is_some_and(|v| same_version(v, &run.target))
        && ready(&node)
        && boot_id(&node) != launched;
    seen.node = Some(node);
    if !still || seen.refinishes > DRAIN_ROUNDS {
        let why = if still {
            "it kept changing".to_string()
        } else {
            format!(
                "it no longer shows {} rebooted and Ready (reports {})",
                run.target,
                reported.as_deref().unwrap_or("nothing")
            )
        };
        return Next::fail(Failure::new(
            UpgradeStep::Uncordon,
            FailureKind::Node,
            format!("{why} when it was to be recorded done; the node stays cordoned"),
        ));
    }
    // The Uncordon started (and was told) at the first write: this is the same step's write
    // again, not a second start (`Uncordon...` twice on a real cluster, whose kubelet changes
    // the node between the read and the write).
    write(run, seen, Vec::new())
}
