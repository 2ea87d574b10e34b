//! The rollback: when the plan rolls back on failure, the version and boot a node reports
//! right before its host upgrade are recorded in the Launch write ([`ROLLBACK`]); when its
//! host upgrade then fails, or it comes back at another version, or fails its health check or
//! its soak, the host's rollback (`stratum rollback --to V`) runs on it once, drained, and it
//! must come back at V on a new boot. Exactly once across crashes, as the upgrade: the
//! decision, the boot right before the rollback Job, and the Job's result are each on the
//! node before the next step, the Job is kept until its result is recorded, and a resumed run
//! adopts it.
//!
//! ```text
//!  failure ─▶ decide: why + cordon (if schedulable) + ours again ─▶ Drain ─▶ Launch: the boot now
//!        ─▶ rollback Job (create / adopt) ─▶ record its result ─▶ exit 0: delete it ─▶ a new boot Ready at V
//!        ─▶ uncordon (if ours) + done + - ours ─▶ RolledBack          └ else: Failed at Rollback (left cordoned)
//!  resume (ours, decided): result recorded 0 ─▶ delete ─▶ reboot │ launched ─▶ find its Job (adopt) │ else drain
//! ```
//!
//! A node that is not Ready when it fails, or has no version recorded (launched by a run that
//! did not roll back), is not rolled back: it fails as under `stop`, saying why.

use std::convert::Infallible;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::runner::Report;
use nodejob_core::{NodeChange, log_tail, ready};

use super::context::{DRAIN_ROUNDS, LOG_TAIL_LINES, Next, NoRollback, Run, Seen};
use super::protocol::{
    Failure, FailureKind, Intent, Mark, NodeResult, Observation, Own, UpgradeStep,
};
use crate::plan::OnFailure;
use crate::records::{
    self, HOST_JOB, IN_PROGRESS, InProgress, ROLLBACK, SOAK, boot_id, unschedulable,
};
use crate::version::{same_version, version};

/// A rollback under way: where it stands, and what it learnt on the way.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Rollback {
    at: Rb,
    /// The failure being rolled back.
    failure: Failure,
    /// Why the rollback Job gave no answer, when its pod was lost to a reboot of the node:
    /// the node's version once it is back says whether it rolled back.
    lost: Option<String>,
    /// The last find of the rollback Job read its name free: the Job launched next is created
    /// without a read of its own.
    free: bool,
}

/// Where a rollback stands.
#[derive(Clone, Debug, PartialEq)]
enum Rb {
    /// Writing the decision (why; cordoned, ours again).
    Deciding,
    Draining,
    /// Writing the boot read right before the rollback Job (guarded).
    Launching,
    /// Reading the node and its Pods again right before the rollback Job.
    Preflight,
    /// Reading the rollback Job an earlier run may have started.
    Finding,
    Hosting,
    /// The rollback Job gave no exit code: reading it, to record a failed one.
    Inquest(String),
    /// Writing its result: with why it failed (its exit code, its log's tail), if it did.
    Recording(Option<(String, Option<i32>, Option<String>)>),
    Deleting,
    Rebooting,
    /// Writing the end: uncordon (if ours), done, not ours (guarded).
    Finishing,
}

/// How the rollback answers: it never hands the node on, it ends it.
type Step = Next<Rollback, Infallible>;

/// `failure`, after the host upgrade was launched: rolled back when the plan says so and it
/// can be; failed otherwise.
pub(super) fn failed_or_rolled_back(run: &Run, seen: &mut Seen, failure: Failure) -> Step {
    match seen.can_roll_back(run) {
        Ok(()) => decide(run, seen, failure),
        Err(NoRollback::NotPlanned) => Next::fail(failure),
        Err(why) => Next::fail(Failure {
            message: format!("{}; not rolled back: {why}", failure.message),
            ..failure
        }),
    }
}

/// The decision, in one write: why, on the rollback record; the node cordoned if it is
/// schedulable (a soaking node is in service) and ours in flight again; a soak's record gone.
fn decide(run: &Run, seen: &mut Seen, mut failure: Failure) -> Step {
    let (Some(node), Some(mut record)) = (seen.node.clone(), seen.rollback.clone()) else {
        return Next::fail(Failure {
            log_tail: None,
            ..failure
        });
    };
    // Rolled back, it does not stay cordoned: the failure says what happened, not that.
    failure.message = failure
        .message
        .replace("; the node stays cordoned and job", "; job")
        .replace("; the node stays cordoned", "");
    record.why = Some(failure.message.clone());
    record.step = Some(failure.step.to_string());
    let cordon = !unschedulable(&node);
    let progress = match seen.progress.clone() {
        Some(mut p) => {
            p.cordoned = p.cordoned || cordon;
            p
        }
        None => InProgress {
            target: run.target.clone(),
            boot_id: boot_id(&node).to_string(),
            host_boot_id: None,
            epoch: run.epoch,
            cordoned: cordon,
            from: Some(record.to.clone()),
            evicted: None,
        },
    };
    let mut changes = vec![
        NodeChange::set_annotation(ROLLBACK, records::value(&record)),
        NodeChange::set_annotation(IN_PROGRESS, records::value(&progress)),
    ];
    if cordon {
        changes.push(NodeChange::Cordon);
    }
    if seen.soak.take().is_some() {
        changes.push(NodeChange::remove_annotation(SOAK));
    }
    let marks = vec![
        Mark::Note(format!(
            "failed at {}: {}; rolling it back to {}",
            failure.step, failure.message, record.to
        )),
        Mark::Started(UpgradeStep::Rollback),
    ];
    seen.rollback = Some(record);
    seen.progress = Some(progress);
    let rv = records::rv(&node);
    Rollback::new(failure).go(Rb::Deciding, marks, Intent::Patch { rv, changes })
}

/// Ours in flight with a rollback decided and not done (an earlier run's, stopped or crashed
/// while it rolled back): carried on where it stood. Or, when the plan rolls back, with a
/// failed host upgrade an earlier run recorded but did not roll back yet (it stopped in
/// between): rolled back now, not retried. `None` otherwise.
pub(super) fn resume(run: &Run, seen: &mut Seen) -> Option<Step> {
    let record = seen.rollback.clone()?;
    let failed_host = (seen.host.as_ref())
        .filter(|h| h.target == run.target && h.exit_code != Some(0))
        .map(|h| h.exit_code);
    if record.why.is_none()
        && record.from == run.target
        && run.on_failure == OnFailure::Rollback
        && let Some(exit_code) = failed_host
    {
        let failure = Failure {
            step: UpgradeStep::Upgrade,
            kind: FailureKind::host_or_job(exit_code),
            message: match exit_code {
                Some(code) => format!(
                    "the host upgrade exited {code} (recorded by an earlier run); job {} is \
                     left for inspection",
                    seen.job_name(run)
                ),
                None => format!(
                    "the host upgrade failed without an exit code (recorded by an earlier run); \
                     job {} is left for inspection",
                    seen.job_name(run)
                ),
            },
            exit_code,
            log_tail: None,
        };
        return Some(failed_or_rolled_back(run, seen, failure));
    }
    let why = record.why.clone()?;
    if record.done.is_some() {
        return None;
    }
    let step = record.step.clone().unwrap_or_default();
    let rollback = Rollback::new(Failure {
        step: failed_step(&step),
        kind: kind_of(failed_step(&step)),
        message: why.clone(),
        exit_code: None,
        log_tail: None,
    });
    let mut marks = vec![Mark::Note(format!(
        "resuming its rollback to {} (it failed at {step}: {why})",
        record.to
    ))];
    Some(
        match (&record.uid, record.exit_code, &record.rollback_boot_id) {
            (Some(uid), Some(0), _) => {
                let uid = uid.clone();
                rollback.go(Rb::Deleting, marks, Intent::DeleteRollbackJob { uid })
            }
            // Its rollback Job failed without an answer (lost to a reboot), yet the node is
            // back at its version on another boot: it ran. Never run again.
            (Some(_), _, Some(launched)) if rollback.ran(run, seen, launched) => {
                marks.push(Mark::Note(
                    "the rollback we launched ran (at its version on another boot), though its \
                     job failed without an answer; not running it again"
                        .into(),
                ));
                rollback.await_reboot(seen, marks)
            }
            // Its rollback Job failed: drained, it is run again (the failed Job replaced).
            (Some(_), _, _) => rollback.drain(marks),
            (None, _, Some(_)) => rollback.go(Rb::Finding, marks, Intent::FindRollbackJob),
            (None, _, None) => {
                marks.push(Mark::Started(UpgradeStep::Rollback));
                rollback.drain(marks)
            }
        },
    )
}

impl Rollback {
    fn new(failure: Failure) -> Self {
        Rollback {
            at: Rb::Deciding,
            failure,
            lost: None,
            free: false,
        }
    }

    fn go(mut self, at: Rb, marks: Vec<Mark>, intent: Intent) -> Step {
        self.at = at;
        Next::stay(self, marks, intent)
    }

    fn drain(self, marks: Vec<Mark>) -> Step {
        self.go(Rb::Draining, marks, Intent::Drain)
    }

    /// A step of the rollback.
    pub(super) fn step(self, run: &Run, seen: &mut Seen, obs: Observation) -> Step {
        match (self.at.clone(), obs) {
            (Rb::Deciding, Observation::Node(node)) => {
                seen.node = Some(node);
                self.drain(Vec::new())
            }
            (Rb::Draining, Observation::Drained(Ok(drained))) => {
                let step = self.launch(seen);
                if drained.evicted.is_empty() {
                    return step;
                }
                step.after(vec![Mark::Own(Own::Evicted(drained.evicted))])
            }
            (Rb::Draining, Observation::Drained(Err(failed))) => {
                let step = self.failed(
                    FailureKind::Drain,
                    format!("it could not be drained for it: {}", failed.message),
                    None,
                    None,
                );
                if failed.evicted.is_empty() {
                    return step;
                }
                step.then(Mark::Own(Own::Evicted(failed.evicted)))
            }
            (Rb::Launching, Observation::Node(node)) => {
                seen.node = Some(node);
                self.go(Rb::Preflight, Vec::new(), Intent::Preflight)
            }
            // Right before the rollback Job, as before the host upgrade's: the node the run
            // began with, cordoned, fenced by our taint, with no Pod a drain would evict.
            (Rb::Preflight, Observation::Preflight { node: None, .. }) => self.failed(
                FailureKind::Node,
                "it was deleted from the cluster after its drain; the rollback was not started"
                    .into(),
                None,
                None,
            ),
            (
                Rb::Preflight,
                Observation::Preflight {
                    node: Some(node),
                    pods,
                },
            ) => {
                let uid = node.metadata.uid.as_deref().unwrap_or_default();
                if uid != seen.uid {
                    let why = format!(
                        "it was replaced by another node of the same name (uid {}, now {uid}) \
                         after its drain; the rollback was not started",
                        seen.uid
                    );
                    seen.node = Some(node);
                    return self.failed(FailureKind::Node, why, None, None);
                }
                let fenced = unschedulable(&node)
                    && nodejob_core::tainted_no_schedule(&node, records::FENCE_TAINT);
                if !fenced || !pods.is_empty() {
                    let step = self.changed(seen, node);
                    if pods.is_empty() {
                        return step;
                    }
                    return step.after(vec![Mark::Note(format!(
                        "pod(s) {} landed on it after the drain",
                        pods.join(", ")
                    ))]);
                }
                seen.node = Some(node);
                let to = rollback_to(seen);
                let mut rollback = self;
                let known_free = std::mem::take(&mut rollback.free);
                rollback.go(
                    Rb::Hosting,
                    Vec::new(),
                    Intent::RollbackJob {
                        adopt: None,
                        to,
                        known_free,
                    },
                )
            }
            (Rb::Launching, Observation::Changed(node)) => self.changed(seen, node),
            (Rb::Finding, Observation::Job(job)) => self.found(run, seen, job),
            (Rb::Hosting, Observation::Host(Ok(report))) => self.record(run, seen, report),
            (Rb::Hosting, Observation::Host(Err(why))) => {
                self.go(Rb::Inquest(why), Vec::new(), Intent::FindRollbackJob)
            }
            // Lost to a reboot: recorded as a failure without an exit code, then the node,
            // once back, says whether it rolled back.
            (Rb::Hosting, Observation::Lost(why)) => {
                let mut rollback = self;
                rollback.lost = Some(why.clone());
                rollback.go(Rb::Inquest(why), Vec::new(), Intent::FindRollbackJob)
            }
            (Rb::Inquest(why), Observation::Job(Some(job))) if nodejob_core::failed(&job) => {
                let uid = job.metadata.uid.clone().unwrap_or_default();
                self.write_result(seen, uid, None, Some((why, None, None)))
            }
            (Rb::Inquest(_), Observation::Job(Some(job))) if nodejob_core::succeeded(&job) => {
                let report = Report {
                    uid: job.metadata.uid.clone().unwrap_or_default(),
                    exit_code: 0,
                    log: None,
                    resource_version: None,
                };
                self.record(run, seen, report)
            }
            (Rb::Inquest(why), Observation::Job(_)) => {
                self.failed(FailureKind::Job, why, None, None)
            }
            (Rb::Recording(failed), Observation::Node(node)) => {
                seen.node = Some(node);
                let uid = (seen.rollback.as_ref())
                    .and_then(|r| r.uid.clone())
                    .unwrap_or_default();
                if let Some(lost) = &self.lost
                    && failed.is_some()
                {
                    let marks = vec![Mark::Note(format!(
                        "the rollback's pod was lost to a reboot of the node (job {}): waiting \
                         for the node to be back; its version then says whether it rolled back \
                         ({lost})",
                        seen.rollback_job_name(run)
                    ))];
                    return self.await_reboot(seen, marks);
                }
                if let Some((why, exit_code, log)) = failed {
                    return self.failed(FailureKind::host_or_job(exit_code), why, exit_code, log);
                }
                self.go(Rb::Deleting, Vec::new(), Intent::DeleteRollbackJob { uid })
            }
            (Rb::Deleting, Observation::Deleted) => self.await_reboot(seen, Vec::new()),
            (Rb::Rebooting, Observation::Rebooted { node, met }) => {
                self.rolled_back(run, seen, node, met)
            }
            (Rb::Finishing, Observation::Node(node)) => {
                seen.node = Some(node);
                let to = rollback_to(seen);
                let message = format!("rolled back to {to}, on a new boot");
                Next::Finish(
                    vec![Mark::Finished(UpgradeStep::Rollback, message)],
                    NodeResult::RolledBack {
                        failure: self.failure,
                        version: to,
                    },
                )
            }
            (Rb::Finishing, Observation::Changed(node)) => {
                seen.refinishes += 1;
                let back = back_at(run, seen, &node);
                seen.node = Some(node);
                if !back || seen.refinishes > DRAIN_ROUNDS {
                    return self.failed(
                        FailureKind::Node,
                        "it no longer showed the version rolled back to, Ready on a new boot, \
                         when it was to be recorded"
                            .into(),
                        None,
                        None,
                    );
                }
                self.finish(seen)
            }
            (rb, obs) => self.failed(
                FailureKind::Internal,
                format!("internal: unexpected answer {obs:?} at {rb:?}"),
                None,
                None,
            ),
        }
    }

    /// The node changed between the drain and the rollback Job: drained again (cordoned
    /// again first if someone uncordoned it), at most [`DRAIN_ROUNDS`] times.
    fn changed(self, seen: &mut Seen, node: Box<Node>) -> Step {
        seen.redrains += 1;
        if seen.redrains > DRAIN_ROUNDS {
            seen.node = Some(node);
            return self.failed(
                FailureKind::Node,
                "it kept changing between its drain and the rollback job; the rollback was \
                 not started"
                    .into(),
                None,
                None,
            );
        }
        let schedulable = !unschedulable(&node);
        seen.node = Some(node);
        if schedulable {
            return self.recordon(seen);
        }
        let marks = vec![Mark::Note(
            "it changed after the drain: draining it again before the rollback job".into(),
        )];
        self.drain(marks)
    }

    /// Someone uncordoned it between the drain and the rollback Job: cordoned again (ours to
    /// uncordon at the end), then drained again.
    fn recordon(self, seen: &mut Seen) -> Step {
        let (Some(node), Some(mut progress)) = (seen.node.clone(), seen.progress.clone()) else {
            return self.failed(
                FailureKind::Internal,
                "internal: no record to cordon again".into(),
                None,
                None,
            );
        };
        progress.cordoned = true;
        let changes = vec![
            NodeChange::set_annotation(IN_PROGRESS, records::value(&progress)),
            NodeChange::Cordon,
        ];
        seen.progress = Some(progress);
        let marks = vec![Mark::Note(
            "it was uncordoned before its rollback: cordoning it again and draining it again"
                .into(),
        )];
        let rv = records::rv(&node);
        self.go(Rb::Deciding, marks, Intent::Patch { rv, changes })
    }

    /// Right before the rollback Job: the boot read now on the rollback record, under the
    /// resourceVersion of the node as drained. A node someone uncordoned is cordoned again and
    /// drained again first.
    fn launch(self, seen: &mut Seen) -> Step {
        let (Some(node), Some(mut record)) = (seen.node.clone(), seen.rollback.clone()) else {
            return self.failed(
                FailureKind::Internal,
                "internal: no record to launch from".into(),
                None,
                None,
            );
        };
        if !unschedulable(&node) {
            return self.recordon(seen);
        }
        record.rollback_boot_id = Some(boot_id(&node).to_string());
        record.uid = None;
        record.exit_code = None;
        let changes = vec![NodeChange::set_annotation(
            ROLLBACK,
            records::value(&record),
        )];
        seen.rollback = Some(record);
        let rv = records::rv(&node);
        self.go(Rb::Launching, Vec::new(), Intent::Guarded { rv, changes })
    }

    /// Waits for the node to be back Ready on a boot other than the one the rollback was
    /// launched on.
    fn await_reboot(self, seen: &Seen, marks: Vec<Mark>) -> Step {
        let boot_id = (seen.rollback.as_ref())
            .and_then(|r| r.rollback_boot_id.clone())
            .unwrap_or_default();
        self.go(Rb::Rebooting, marks, Intent::WaitReboot { boot_id })
    }

    /// Whether the rollback launched on `launched` ran: the node is back at its version,
    /// Ready, on another boot.
    fn ran(&self, run: &Run, seen: &Seen, launched: &str) -> bool {
        (seen.node.as_deref()).is_some_and(|n| {
            !launched.is_empty() && boot_id(n) != launched && back_at(run, seen, n)
        })
    }

    /// The rollback Job an earlier run launched, if any: adopted; none: it ran if the node is
    /// at the version on another boot, else drained and created.
    fn found(mut self, run: &Run, seen: &Seen, job: Option<Box<Job>>) -> Step {
        self.free = job.is_none();
        let Some(job) = job.filter(|j| j.metadata.deletion_timestamp.is_none()) else {
            let launched = (seen.rollback.as_ref())
                .and_then(|r| r.rollback_boot_id.clone())
                .unwrap_or_default();
            if self.ran(run, seen, &launched) {
                let marks = vec![Mark::Note(
                    "the rollback we launched ran (at its version on another boot, its job \
                     gone); not running it again"
                        .into(),
                )];
                return self.go(
                    Rb::Rebooting,
                    marks,
                    Intent::WaitReboot { boot_id: launched },
                );
            }
            return self.drain(Vec::new());
        };
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let marks = vec![Mark::Note(format!(
            "adopting the rollback job {} an earlier run started: its result is the answer",
            job.metadata.name.as_deref().unwrap_or_default()
        ))];
        let to = rollback_to(seen);
        self.go(
            Rb::Hosting,
            marks,
            Intent::RollbackJob {
                adopt: Some(uid),
                to,
                known_free: false,
            },
        )
    }

    /// The rollback Job's result, recorded on the node before anything else.
    fn record(self, run: &Run, seen: &mut Seen, report: Report) -> Step {
        let failed = (report.exit_code != 0).then(|| {
            let why = format!(
                "the rollback exited {}; the node stays cordoned and job {} is left for \
                 inspection",
                report.exit_code,
                seen.rollback_job_name(run)
            );
            let log = report.log.as_deref().map(|l| log_tail(l, LOG_TAIL_LINES));
            (why, Some(report.exit_code), log)
        });
        let exit_code = Some(report.exit_code);
        self.write_result(seen, report.uid, exit_code, failed)
    }

    /// Records the rollback Job `uid`'s result (`exit_code`; `None`: failed without one),
    /// then goes on, or fails as `failed` says.
    fn write_result(
        self,
        seen: &mut Seen,
        uid: String,
        exit_code: Option<i32>,
        failed: Option<(String, Option<i32>, Option<String>)>,
    ) -> Step {
        let Some(mut record) = seen.rollback.clone() else {
            return self.failed(
                FailureKind::Internal,
                "internal: no rollback record".into(),
                None,
                None,
            );
        };
        record.uid = Some(uid);
        record.exit_code = exit_code;
        let changes = vec![NodeChange::set_annotation(
            ROLLBACK,
            records::value(&record),
        )];
        seen.rollback = Some(record);
        let rv = seen.rv();
        self.go(
            Rb::Recording(failed),
            Vec::new(),
            Intent::Patch { rv, changes },
        )
    }

    /// After the rollback's reboot wait: at its version on a new boot, finished; else failed.
    fn rolled_back(
        mut self,
        run: &Run,
        seen: &mut Seen,
        node: Option<Box<Node>>,
        met: bool,
    ) -> Step {
        let Some(node) = node else {
            return self.failed(
                FailureKind::Node,
                "the node was deleted from the cluster while it rebooted".into(),
                None,
                None,
            );
        };
        let to = rollback_to(seen);
        let reported = version(&node, &run.source).unwrap_or("nothing").to_string();
        let back = back_at(run, seen, &node);
        seen.node = Some(node);
        // Its Job lost to a reboot: that is the first half of the news.
        let lost = (self.lost.take())
            .map(|l| format!("{l}; "))
            .unwrap_or_default();
        if !met {
            return self.failed(
                FailureKind::TimedOut,
                format!(
                    "{lost}it did not come back Ready on a new boot within the reboot timeout; \
                     the node stays cordoned"
                ),
                None,
                None,
            );
        }
        if !back {
            return self.failed(
                FailureKind::Node,
                format!("{lost}it came back at {reported}, not {to}; the node stays cordoned"),
                None,
                None,
            );
        }
        self.finish(seen)
    }

    /// Uncordon if we cordoned it, the rollback recorded done, not ours any more: one guarded
    /// write. A failed host Job's record stays, so that a rerun replaces exactly that Job.
    fn finish(self, seen: &mut Seen) -> Step {
        let mut changes = Vec::new();
        if seen.cordoned() {
            changes.push(NodeChange::Uncordon);
        }
        let now = seen.now.clone();
        if let Some(record) = seen.rollback.as_mut() {
            record.done = Some(now);
            changes.push(NodeChange::set_annotation(
                ROLLBACK,
                records::value(&*record),
            ));
        }
        changes.push(NodeChange::remove_annotation(IN_PROGRESS));
        if seen.host.as_ref().is_none_or(|h| h.exit_code == Some(0)) {
            changes.push(NodeChange::remove_annotation(HOST_JOB));
        }
        let rv = seen.rv();
        self.go(Rb::Finishing, Vec::new(), Intent::Guarded { rv, changes })
    }

    /// The rollback failed: the node fails at `Rollback`, left cordoned, the failure it was
    /// rolled back for said too.
    fn failed(
        self,
        kind: FailureKind,
        why: String,
        exit_code: Option<i32>,
        log_tail: Option<String>,
    ) -> Step {
        let before = format!(
            "; it was rolled back after failing at {}: {}",
            self.failure.step, self.failure.message
        );
        let message = format!("the rollback failed: {why}{before}");
        let failure = Failure::new(UpgradeStep::Rollback, kind, message);
        Next::fail(failure.exit(exit_code).log(log_tail))
    }
}

/// The version the rollback goes back to.
fn rollback_to(seen: &Seen) -> String {
    (seen.rollback.as_ref())
        .map(|r| r.to.clone())
        .unwrap_or_default()
}

/// Whether `node` is back at the version rolled back to, Ready.
fn back_at(run: &Run, seen: &Seen, node: &Node) -> bool {
    let to = rollback_to(seen);
    ready(node) && version(node, &run.source).is_some_and(|v| same_version(v, &to))
}

/// The kind of a failure a rollback record names by its step alone (the record keeps no
/// kind): a host program's at the host upgrade and the health check, the node's otherwise.
fn kind_of(step: UpgradeStep) -> FailureKind {
    match step {
        UpgradeStep::Upgrade | UpgradeStep::Health => FailureKind::Host,
        UpgradeStep::Drain => FailureKind::Drain,
        _ => FailureKind::Node,
    }
}

/// The step a rollback record names.
fn failed_step(step: &str) -> UpgradeStep {
    match step {
        "Reboot" => UpgradeStep::Reboot,
        "Health" => UpgradeStep::Health,
        "Soak" => UpgradeStep::Soak,
        _ => UpgradeStep::Upgrade,
    }
}
