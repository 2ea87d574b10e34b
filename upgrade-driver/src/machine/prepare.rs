//! Prepare and launch: from the node as first read to the host Job's launch. The node is
//! skipped, or marked ours and cordoned (when schedulable) in one write, or carried on from
//! our record; its host Job is looked for (one that exists is adopted, never drained away nor
//! replaced); it is drained; the Launch write records the `bootID` read now, on the node as
//! drained; and the node and its Pods are read again right before the host Job
//! ([`preflight`]).
//!
//! ```text
//!  Inspect ─at target, or done──────────────────────────────▶ Skipped
//!     │ soak record toward the target ─▶ (soak)   labelled quarantined ─▶ (blocked)
//!     │ new: Vet ─▶ mark in-progress (+ cordon if schedulable), one write
//!     │ ours toward another target ─▶ its host Job ended? (its reboot awaited) ─▶ carry on
//!     ▼
//!  Marking ─▶ a rollback to resume ─▶ (rollback) │ host recorded exit 0 ─▶ (host: delete it)
//!     ▼
//!  Finding ─ours, running or ended─▶ (host: adopt)  │ ran without its job ─▶ (reboot)
//!     │ none / a failed one we recorded               │ at the target without us ─▶ (health)
//!     ▼
//!  Draining ─▶ Launching ─▶ Preflight ─▶ (host: create / replace it)
//!     ▲  budgets held it ─▶ (blocked)    │ the node changed since: cordon again, drain again
//!     └──────────────────────────────────┘ at most DRAIN_ROUNDS times
//! ```

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::{NodeChange, ready};

use super::context::{DRAIN_ROUNDS, Next, Run, Seen};
use super::protocol::{
    DrainFailed, Failure, FailureKind, Intent, Mark, NodeResult, Observation, Own, UpgradeStep,
};
use crate::plan::{OnFailure, Undrainable};
use crate::records::{
    self, DONE, Done, HOST_JOB, HostJob, IN_PROGRESS, InProgress, ROLLBACK, Rollback, boot_id,
    unschedulable,
};
use crate::version::{same_version, version};

mod preflight;

/// The node from its first read to its host Job's launch.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Prepare {
    at: At,
    /// The node carried nothing of ours when first read: the first write marks it.
    fresh: bool,
    /// The last find of the host Job read its name free: the Job launched next is created
    /// without a read of its own ([`Intent::Host`]'s `known_free`).
    free: bool,
    /// The host record of an earlier run toward another target, as first read.
    earlier_host: Option<HostJob>,
}

/// Where the preparation stands.
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
    Finding,
    Draining,
    Launching,
    /// Reading the node and its Pods again right before the host Job.
    Preflight,
}

/// Where the node goes once prepared: which sub-machine the root hands it to.
#[derive(Debug)]
pub(super) enum Prepared {
    /// Carrying a soak record toward the target, not ours in flight: the soak resumes.
    Soak(Box<Node>),
    /// Labelled quarantined, not ours in flight: left as it is, blocked.
    Quarantined(Box<Node>),
    /// A rollback stands to be resumed (or, failed before, to be decided).
    Rollback,
    /// Its drain was held by budgets, and the plan skips or quarantines such a node.
    Undrainable(DrainFailed),
    /// The host upgrade already succeeded: its Job deleted, then the reboot.
    Succeeded {
        /// The host Job's UID.
        uid: String,
    },
    /// Our host Job an earlier run started: adopted, its result the answer.
    Adopt {
        /// Its UID.
        uid: String,
    },
    /// Drained and checked: the host Job, created.
    Launch {
        /// The find read its name free.
        known_free: bool,
    },
    /// The host upgrade ran though its Job is gone: the reboot awaited.
    Reboot,
    /// At the target without our host upgrade: the health check (if any), then the finish.
    Check,
}

type Step = Next<Prepare, Prepared>;

impl Prepare {
    /// At the node's first read.
    pub(super) fn new() -> Self {
        Prepare {
            at: At::Inspect,
            fresh: false,
            free: false,
            earlier_host: None,
        }
    }

    fn go(mut self, at: At, marks: Vec<Mark>, intent: Intent) -> Step {
        self.at = at;
        Next::stay(self, marks, intent)
    }

    /// Whether this is the first write to a node that carried nothing of ours (marking it
    /// ours, cordoning it).
    pub(super) fn untouched(&self) -> bool {
        self.fresh && self.at == At::Marking
    }

    /// Whether the write at hand is Launch, the last before the host Job.
    pub(super) fn launching(&self) -> bool {
        self.at == At::Launching
    }

    /// The step the preparation is at.
    pub(super) fn at(&self) -> UpgradeStep {
        match self.at {
            At::Inspect | At::Vetting | At::Previous | At::Settling | At::Marking => {
                UpgradeStep::Cordon
            }
            At::Draining | At::Launching => UpgradeStep::Drain,
            At::Preflight | At::Finding => UpgradeStep::Upgrade,
        }
    }

    /// Takes the answer to the last intent.
    pub(super) fn step(self, run: &Run, seen: &mut Seen, obs: Observation) -> Step {
        match (self.at.clone(), obs) {
            (At::Inspect, Observation::Node(node)) => self.inspect(run, seen, node),
            (At::Vetting, Observation::Refusals(refused)) => self.vetted(run, seen, refused),
            (At::Previous, Observation::Job(job)) => self.previous(run, seen, job),
            (At::Settling, Observation::Rebooted { node, met }) => {
                self.settled(run, seen, node, met)
            }
            (At::Marking, Observation::Node(node)) => {
                let mut prepare = self;
                prepare.fresh = false;
                seen.node = Some(node);
                let message = if seen.cordoned() {
                    "cordoned"
                } else {
                    "already cordoned by someone else; left as it is"
                };
                let marks = vec![Mark::Finished(UpgradeStep::Cordon, message.into())];
                prepare.resume(run, seen).after(marks)
            }
            (At::Draining, Observation::Drained(Ok(drained))) => {
                count_evicted(seen, drained.evicted.len());
                let message = format!(
                    "evicted {} pod(s), left {}",
                    drained.evicted.len(),
                    drained.skipped.len()
                );
                let marks = vec![
                    Mark::Own(Own::Evicted(drained.evicted)),
                    Mark::Finished(UpgradeStep::Drain, message),
                ];
                self.launch(run, seen, marks)
            }
            (At::Draining, Observation::Drained(Err(failed))) => {
                if failed.held.is_some()
                    && run.on_undrainable != Undrainable::Fail
                    && seen.node.is_some()
                {
                    return Next::leave(Prepared::Undrainable(failed));
                }
                let step = Next::fail(Failure::new(
                    UpgradeStep::Drain,
                    FailureKind::Drain,
                    failed.message,
                ));
                if failed.evicted.is_empty() {
                    return step;
                }
                count_evicted(seen, failed.evicted.len());
                step.then(Mark::Own(Own::Evicted(failed.evicted)))
            }
            // The Upgrade step starts with a read: what a pause (or any wait) before it left
            // is judged afresh, right before the create.
            (At::Launching, Observation::Node(node)) => {
                seen.node = Some(node);
                self.go(
                    At::Preflight,
                    vec![Mark::Started(UpgradeStep::Upgrade)],
                    Intent::Preflight,
                )
            }
            (At::Launching, Observation::Changed(node)) => self.changed(run, seen, node),
            (At::Preflight, Observation::Preflight { node, pods }) => {
                self.preflight(run, seen, node, pods)
            }
            (At::Finding, Observation::Job(job)) => self.found(run, seen, job),
            (at, obs) => {
                let step = self.at();
                Next::fail(Failure::new(
                    step,
                    FailureKind::Internal,
                    format!("internal: unexpected answer {obs:?} at {at:?}"),
                ))
            }
        }
    }

    /// The node as first read: skip it, or mark it ours, or carry on from our record.
    fn inspect(mut self, run: &Run, seen: &mut Seen, node: Box<Node>) -> Step {
        seen.uid = node.metadata.uid.clone().unwrap_or_default();
        let progress = match records::read::<InProgress>(&node, IN_PROGRESS) {
            Ok(p) => p,
            Err(why) => {
                return Next::fail(Failure::new(UpgradeStep::Cordon, FailureKind::Node, why));
            }
        };
        let at_target = version(&node, &run.source).is_some_and(|v| same_version(v, &run.target));
        let done = records::read::<Done>(&node, DONE)
            .ok()
            .flatten()
            .is_some_and(|d| same_version(&d.version, &run.target));
        match records::read::<HostJob>(&node, HOST_JOB) {
            Ok(host) => {
                self.earlier_host = host.clone().filter(|h| h.target != run.target);
                seen.host = host.filter(|h| h.target == run.target);
            }
            Err(why) => {
                return Next::fail(Failure::new(UpgradeStep::Cordon, FailureKind::Node, why));
            }
        }
        seen.blocked_before = records::read(&node, records::BLOCKED).ok().flatten();
        seen.soak = records::read(&node, records::SOAK).ok().flatten();
        seen.rollback = records::read(&node, records::ROLLBACK).ok().flatten();
        let soaking = (seen.soak.as_ref()).is_some_and(|s| s.target == run.target);
        if progress.is_none() && soaking {
            return Next::leave(Prepared::Soak(node));
        }
        if progress.is_none() && !(at_target || done) && records::quarantined(&node) {
            return Next::leave(Prepared::Quarantined(node));
        }
        match progress {
            None if at_target || done => {
                let why = match version(&node, &run.source) {
                    Some(v) if at_target => format!("reports {v} already"),
                    _ => format!("recorded done at {}", run.target),
                };
                Next::done(NodeResult::Skipped { why })
            }
            None => {
                seen.node = Some(node);
                self.go(At::Vetting, Vec::new(), Intent::Vet)
            }
            // Ours from an earlier run toward another target: its host Job first, which must
            // have ended before one toward ours starts.
            Some(record) if record.target != run.target => {
                let target = record.target.clone();
                seen.node = Some(node);
                seen.progress = Some(record);
                self.go(At::Previous, Vec::new(), Intent::FindPrevious { target })
            }
            Some(record) => self.carry_on(run, seen, record, node),
        }
    }

    /// The host Job an earlier run started toward another target, if any: one still running
    /// (or being deleted) fails the node, since two host operations never overlap on a node;
    /// one that ended is left for inspection, and the node starts again toward our target.
    fn previous(self, run: &Run, seen: &mut Seen, job: Option<Box<Job>>) -> Step {
        let (Some(record), Some(node)) = (seen.progress.take(), seen.node.take()) else {
            return Next::fail(Failure::new(
                UpgradeStep::Cordon,
                FailureKind::Internal,
                "internal: no record before the previous host job",
            ));
        };
        if let Some(job) = job
            && (!nodejob_core::finished(&job) || job.metadata.deletion_timestamp.is_some())
        {
            let name = job.metadata.name.clone().unwrap_or_default();
            seen.node = Some(node);
            return Next::fail(Failure::new(
                UpgradeStep::Cordon,
                FailureKind::Node,
                format!(
                    "a host upgrade toward {} (job {name}) an earlier run started is still \
                     running on it: one toward {} starts only once it ended; rerun then",
                    record.target, run.target
                ),
            ));
        }
        // Its host upgrade succeeded and the node is still on the boot it started on: the
        // reboot that upgrade began is still to come, and would kill whatever starts now.
        let succeeded = (self.earlier_host.as_ref())
            .is_some_and(|h| h.target == record.target && h.exit_code == Some(0));
        let launched = record.host_boot_id.clone().unwrap_or_default();
        if succeeded && !launched.is_empty() && boot_id(&node) == launched {
            let marks = vec![Mark::Note(format!(
                "the host upgrade toward {} an earlier run started succeeded and its reboot is \
                 still to come (boot {launched}): waiting for it before anything starts toward {}",
                record.target, run.target
            ))];
            seen.node = Some(node);
            seen.progress = Some(record);
            return self.go(
                At::Settling,
                marks,
                Intent::WaitReboot { boot_id: launched },
            );
        }
        self.carry_on(run, seen, record, node)
    }

    /// The reboot an earlier run's host upgrade began, waited for before ours: on its new boot
    /// (or, not rebooted within the reboot timeout, on the same: taken as one that needed
    /// none), the node starts again toward our target.
    fn settled(self, run: &Run, seen: &mut Seen, node: Option<Box<Node>>, met: bool) -> Step {
        let (Some(record), Some(node)) = (seen.progress.take(), node) else {
            return Next::done(NodeResult::Skipped {
                why: "deleted from the cluster while the reboot of an earlier run's host \
                      upgrade was awaited: nothing of this run was started on it"
                    .into(),
            });
        };
        let step = self.carry_on(run, seen, record, node);
        if met {
            return step;
        }
        step.after(vec![Mark::Note(
            "it did not reboot within the reboot timeout: taken as an upgrade that needed none"
                .into(),
        )])
    }

    /// A fresh node's Pods judged ([`Intent::Vet`]): a drain that would be refused fails the
    /// node untouched, at its drain, naming each Pod and why; else the node is marked ours and
    /// cordoned (when schedulable) in one write.
    fn vetted(mut self, run: &Run, seen: &mut Seen, refused: Vec<String>) -> Step {
        if !refused.is_empty() {
            let why = format!(
                "its drain would be refused, so it was left untouched (not cordoned): {}",
                refused.join("; ")
            );
            return Next::fail(Failure::new(UpgradeStep::Drain, FailureKind::Drain, why));
        }
        let Some(node) = seen.node.as_deref() else {
            let why = "vetted with no node read".to_string();
            return Next::fail(Failure::new(
                UpgradeStep::Cordon,
                FailureKind::Internal,
                why,
            ));
        };
        let cordon = !unschedulable(node);
        let record = InProgress {
            target: run.target.clone(),
            boot_id: boot_id(node).to_string(),
            host_boot_id: None,
            epoch: run.epoch,
            cordoned: cordon || seen.cordoned_when_quarantined(node),
            from: version(node, &run.source).map(str::to_string),
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
        seen.progress = Some(record);
        self.fresh = true;
        self.go(
            At::Marking,
            vec![Mark::Started(UpgradeStep::Cordon)],
            Intent::Patch { rv, changes },
        )
    }

    /// Ours from an earlier run: carry on. Toward another target, start again from this boot;
    /// re-cordon if someone uncordoned it meanwhile.
    fn carry_on(self, run: &Run, seen: &mut Seen, mut record: InProgress, node: Box<Node>) -> Step {
        let mut changes = Vec::new();
        let said = if record.target == run.target {
            format!(
                "resuming: started under Lease epoch {} toward {}",
                record.epoch, record.target
            )
        } else {
            format!(
                "carried on toward {}: an earlier run (Lease epoch {}) left it in flight toward \
                 {}; it starts again from its host step toward {} (what that run did on its \
                 host, a rerun does not undo)",
                run.target, record.epoch, record.target, run.target
            )
        };
        let mut marks = vec![Mark::Note(said)];
        if record.target != run.target {
            record.target = run.target.clone();
            record.boot_id = boot_id(&node).to_string();
            record.host_boot_id = None;
            record.from = version(&node, &run.source).map(str::to_string);
            record.evicted = None;
            changes.push(NodeChange::remove_annotation(HOST_JOB));
            seen.host = None;
        }
        if !unschedulable(&node) {
            record.cordoned = true;
            changes.push(NodeChange::Cordon);
            marks.push(Mark::Note("cordoning again: it was uncordoned".into()));
        }
        let rv = records::rv(&node);
        seen.node = Some(node);
        if changes.is_empty() {
            seen.progress = Some(record);
            return self.resume(run, seen).after(marks);
        }
        record.epoch = run.epoch;
        changes.insert(
            0,
            NodeChange::set_annotation(IN_PROGRESS, records::value(&record)),
        );
        seen.progress = Some(record);
        marks.push(Mark::Started(UpgradeStep::Cordon));
        self.go(At::Marking, marks, Intent::Patch { rv, changes })
    }

    /// Marked ours: where to go on, from what the node and our records say.
    fn resume(self, run: &Run, seen: &mut Seen) -> Step {
        if rollback_to_resume(run, seen) {
            return Next::leave(Prepared::Rollback);
        }
        match &seen.host {
            Some(h) if h.exit_code == Some(0) => {
                let uid = h.uid.clone();
                let marks = vec![Mark::Note(format!(
                    "the host upgrade already succeeded (job {}); not running it again",
                    seen.job_name(run)
                ))];
                Next::Leave(marks, Prepared::Succeeded { uid })
            }
            // Our host Job first: one that exists is adopted, never drained away nor replaced.
            _ => self.go(At::Finding, Vec::new(), Intent::FindJob),
        }
    }

    /// Right before the host Job: write our record with the `bootID` read now, under the
    /// resourceVersion of the node as last read. A node seen schedulable is cordoned and
    /// drained first.
    fn launch(self, run: &Run, seen: &mut Seen, mut marks: Vec<Mark>) -> Step {
        let Some(node) = seen.node.clone() else {
            return Next::fail(Failure::new(
                UpgradeStep::Drain,
                FailureKind::Internal,
                "internal: no node read before the host job",
            ));
        };
        if unschedulable(&node) {
            let Some(record) = seen.progress.as_mut() else {
                return Next::fail(Failure::new(
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
            changes.extend(record_for_rollback(run, seen, &node));
            let rv = records::rv(&node);
            return self.go(At::Launching, marks, Intent::Guarded { rv, changes });
        }
        marks.push(Mark::Note(format!(
            "it was uncordoned{} while drained: cordoning it again and draining it again",
            uncordoned_by(&node)
        )));
        self.recordon(run, seen, node, marks)
    }

    /// The node changed between the drain and the host Job (a Conflict at Launch): drain it
    /// again (cordoned again first if someone uncordoned it), at most [`DRAIN_ROUNDS`] times.
    fn changed(self, run: &Run, seen: &mut Seen, node: Box<Node>) -> Step {
        let kept = if unschedulable(&node) {
            "it kept changing".to_string()
        } else {
            format!("it kept being uncordoned{}", uncordoned_by(&node))
        };
        let node = match drain_round(seen, node, kept) {
            Ok(node) => node,
            Err(failure) => return Next::fail(failure),
        };
        if !unschedulable(&node) {
            let marks = vec![Mark::Note(format!(
                "it was uncordoned{} after the drain: cordoning it again and draining it again \
                 before the host job",
                uncordoned_by(&node)
            ))];
            return self.recordon(run, seen, node, marks);
        }
        let marks = vec![Mark::Note(
            "it changed after the drain (a reboot, a write): draining it again before the host \
             job"
            .into(),
        )];
        seen.node = Some(node);
        self.drain(marks)
    }

    /// The node, still cordoned, is not as drained right before the host Job (`why`): drain it
    /// again, at most [`DRAIN_ROUNDS`] times, as [`Prepare::changed`] does.
    fn redrain(self, seen: &mut Seen, node: Box<Node>, why: String) -> Step {
        let node = match drain_round(seen, node, format!("{why}, again and again")) {
            Ok(node) => node,
            Err(failure) => return Next::fail(failure),
        };
        seen.node = Some(node);
        let marks = vec![Mark::Note(format!(
            "{why}: draining it again before the host job"
        ))];
        self.drain(marks)
    }

    /// Cordons `node` again (we cordoned it now, so we uncordon it at the end), then drains it.
    fn recordon(self, run: &Run, seen: &mut Seen, node: Box<Node>, mut marks: Vec<Mark>) -> Step {
        let Some(record) = seen.progress.as_mut() else {
            return Next::fail(Failure::new(
                UpgradeStep::Drain,
                FailureKind::Internal,
                "internal: no record before the host job",
            ));
        };
        record.cordoned = true;
        record.epoch = run.epoch;
        let changes = vec![
            NodeChange::set_annotation(IN_PROGRESS, records::value(&*record)),
            NodeChange::Cordon,
        ];
        let rv = records::rv(&node);
        seen.node = Some(node);
        marks.push(Mark::Started(UpgradeStep::Cordon));
        self.go(At::Marking, marks, Intent::Patch { rv, changes })
    }

    /// Drain, then the host Job, created (replacing a failed one we recorded).
    fn drain(self, mut marks: Vec<Mark>) -> Step {
        marks.push(Mark::Started(UpgradeStep::Drain));
        self.go(At::Draining, marks, Intent::Drain)
    }

    /// The Job of the host Job's name, if any: adopt it; or drain, then replace or create it.
    fn found(mut self, run: &Run, seen: &mut Seen, job: Option<Box<Job>>) -> Step {
        self.free = job.is_none();
        let Some(job) = job else {
            if at_target_without_us(run, seen) {
                // Upgraded out of band (by a person, another tool) before we launched ours:
                // nothing to run; finish what we started (uncordon if we cordoned it).
                let reported = reported(run, seen).unwrap_or_default();
                let marks = vec![Mark::Note(format!(
                    "it reports {reported} already, reached without our host upgrade (never \
                     launched): finishing without running it"
                ))];
                return Next::Leave(marks, Prepared::Check);
            }
            if ran_without_job(run, seen) {
                // The host step ran (its Job is gone, deleted by someone): wait for the node.
                let marks = vec![Mark::Note(
                    "the host upgrade we launched ran (at the target on another boot, its job \
                     gone); not running it again"
                        .into(),
                )];
                return Next::Leave(marks, Prepared::Reboot);
            }
            return self.drain(Vec::new());
        };
        let uid = job.metadata.uid.clone().unwrap_or_default();
        if job.metadata.deletion_timestamp.is_some() {
            // Being deleted: the runner waits it out, then creates ours.
            return self.drain(Vec::new());
        }
        let recorded_failure =
            (seen.host.as_ref()).is_some_and(|h| h.uid == uid && h.exit_code != Some(0));
        if recorded_failure && nodejob_core::failed(&job) && ran_without_job(run, seen) {
            // Its pod was lost to the reboot the upgrade itself began (or another one after
            // the upgrade took): the node says it ran. Never run again.
            let marks = vec![Mark::Note(format!(
                "the host upgrade we launched took (the node reports {} on another boot), though \
                 its job {} failed without an answer; not running it again",
                run.target,
                seen.job_name(run)
            ))];
            return Next::Leave(marks, Prepared::Reboot);
        }
        if recorded_failure && nodejob_core::failed(&job) {
            let marks = vec![Mark::Note(format!(
                "retrying: replacing the failed host job {} reported earlier",
                seen.job_name(run)
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
        Next::Leave(marks, Prepared::Adopt { uid })
    }
}

/// Ours in flight with a rollback decided and not done (an earlier run's), or, when the plan
/// rolls back, with a failed host upgrade an earlier run recorded but did not roll back yet:
/// the rollback's to resume ([`super::rollback::resume`]).
fn rollback_to_resume(run: &Run, seen: &Seen) -> bool {
    let Some(record) = &seen.rollback else {
        return false;
    };
    let failed_host =
        (seen.host.as_ref()).is_some_and(|h| h.target == run.target && h.exit_code != Some(0));
    let undecided = record.why.is_none()
        && record.from == run.target
        && run.on_failure == OnFailure::Rollback
        && failed_host;
    undecided || (record.why.is_some() && record.done.is_none())
}

/// The changes of the Launch write that record what a rollback goes back to, when the plan
/// rolls back on failure and the node reports a version; none otherwise.
fn record_for_rollback(run: &Run, seen: &mut Seen, node: &Node) -> Vec<NodeChange> {
    if run.on_failure != OnFailure::Rollback {
        return Vec::new();
    }
    let Some(to) = version(node, &run.source) else {
        return Vec::new();
    };
    let record = Rollback {
        from: run.target.clone(),
        to: to.to_string(),
        boot_id: boot_id(node).to_string(),
        why: None,
        step: None,
        rollback_boot_id: None,
        uid: None,
        exit_code: None,
        done: None,
    };
    let change = NodeChange::set_annotation(ROLLBACK, records::value(&record));
    seen.rollback = Some(record);
    vec![change]
}

/// One more drain before the host Job: `node` back while [`DRAIN_ROUNDS`] allow it, else the
/// node failed at Drain, `kept` saying what kept happening.
fn drain_round(seen: &mut Seen, node: Box<Node>, kept: String) -> Result<Box<Node>, Failure> {
    seen.redrains += 1;
    if seen.redrains <= DRAIN_ROUNDS {
        return Ok(node);
    }
    seen.node = Some(node);
    Err(Failure::new(
        UpgradeStep::Drain,
        FailureKind::Drain,
        format!(
            "{kept} between the drain and the host job ({DRAIN_ROUNDS} drains again); the host \
             upgrade was not started"
        ),
    ))
}

/// `n` more Pods evicted by its drain: kept in our record, which the write right before the
/// host Job carries to the node.
fn count_evicted(seen: &mut Seen, n: usize) {
    if let Some(p) = seen.progress.as_mut() {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        p.evicted = Some(p.evicted.unwrap_or(0).saturating_add(n));
    }
}

/// The version the node reports, as last read.
fn reported(run: &Run, seen: &Seen) -> Option<String> {
    (seen.node.as_deref())
        .and_then(|n| version(n, &run.source))
        .map(str::to_string)
}

/// Whether the node reports the target, Ready, though we never launched our host upgrade (no
/// Launch record, no host result).
fn at_target_without_us(run: &Run, seen: &Seen) -> bool {
    let launched = (seen.progress.as_ref()).is_some_and(|p| p.host_boot_id.is_some());
    let at_target = reported(run, seen).is_some_and(|v| same_version(&v, &run.target));
    !launched && seen.host.is_none() && at_target && seen.node.as_deref().is_some_and(ready)
}

/// Whether the host upgrade ran though its Job is gone: we launched it (our record holds the
/// boot it started on) and the node now reports the target on another boot. A reboot alone is
/// no evidence: a node reboots by itself too.
fn ran_without_job(run: &Run, seen: &Seen) -> bool {
    let (Some(n), Some(p)) = (seen.node.as_deref(), &seen.progress) else {
        return false;
    };
    let at_target = version(n, &run.source).is_some_and(|v| same_version(v, &run.target));
    p.host_boot_id
        .as_deref()
        .is_some_and(|launched| !launched.is_empty() && boot_id(n) != launched && at_target)
}

/// ` (by <manager>)` when the Node's `managedFields` name who wrote it last, else nothing.
fn uncordoned_by(node: &Node) -> String {
    records::last_manager(node)
        .map(|m| format!(" (the node's last writer, by its managedFields: {m})"))
        .unwrap_or_default()
}
