//! The host upgrade: its Job run (created, or adopted from an earlier run), its result
//! recorded on the node before anything else, then, on exit 0, the Job deleted.
//!
//! ```text
//!  Hosting ─exit code─▶ Recording ─exit 0─▶ Deleting ─▶ (reboot)
//!     │                     └ else ─▶ (failed, or rolled back)
//!     │ no exit code (its Pod deleted, its deadline; or lost to a reboot of the node)
//!     ▼
//!  Inquest: its Job ─failed─▶ Recording, a failure without an exit code (a rerun replaces it)
//!                   │         (lost to a reboot: the node, once back, says whether it took)
//!                   ├succeeded─▶ as an exit 0
//!                   └else─▶ failed
//! ```
//!
//! Exactly once: the host Job is kept after it succeeded until its result is recorded on the
//! node ([`HOST_JOB`]); a resumed run finding our Job adopts it and takes its result.

use nodejob_core::runner::Report;
use nodejob_core::{NodeChange, log_tail};

use super::context::{LOG_TAIL_LINES, Next, Run, Seen, unrecorded};
use super::protocol::{Cause, Failure, FailureKind, Intent, Mark, Observation, UpgradeStep};
use crate::records::{self, HOST_JOB, HostJob};

/// The host upgrade's Job, from its launch to its delete.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Host {
    at: At,
    /// Why the host upgrade gave no answer, when its pod was lost to a reboot of the node:
    /// the node's version once it is back says whether it took.
    lost: Option<String>,
    /// An earlier run recorded its success: only its Job is left to delete.
    earlier_success: bool,
}

/// Where the host upgrade stands.
#[derive(Clone, Debug, PartialEq)]
enum At {
    Hosting,
    /// The host step gave no exit code: reading its Job, to record a failed one.
    Inquest(String),
    /// Writing its result: with the failure it is, if it failed (reported once recorded).
    Recording(HostJob, Option<Failure>),
    Deleting,
}

/// Where the node goes after its host upgrade.
#[derive(Debug)]
pub(super) enum Hosted {
    /// To its reboot: awaited, then judged.
    Reboot {
        /// Its pod was lost to a reboot of the node, with why: the node's version says
        /// whether it took.
        lost: Option<String>,
        /// An earlier run recorded its success: a node at the target that did not reboot
        /// within the whole reboot timeout is taken as one that needed no reboot.
        earlier_success: bool,
    },
    /// It failed: rolled back if the plan says so and it can be, failed otherwise.
    Failed(Failure),
}

type Step = Next<Host, Hosted>;

impl Host {
    fn at(at: At) -> Self {
        Host {
            at,
            lost: None,
            earlier_success: false,
        }
    }

    fn go(mut self, at: At, marks: Vec<Mark>, intent: Intent) -> Step {
        self.at = at;
        Next::stay(self, marks, intent)
    }

    /// Our host Job, created (drained and checked; `known_free`: its name read free).
    pub(super) fn launch(known_free: bool) -> Step {
        let adopt = None;
        Next::stay(
            Host::at(At::Hosting),
            Vec::new(),
            Intent::Host { adopt, known_free },
        )
    }

    /// Our host Job of UID `uid` an earlier run started, adopted: its result is the answer.
    pub(super) fn adopt(uid: String) -> Step {
        let (adopt, known_free) = (Some(uid), false);
        Next::stay(
            Host::at(At::Hosting),
            Vec::new(),
            Intent::Host { adopt, known_free },
        )
    }

    /// The host Job of UID `uid` succeeded, recorded by an earlier run: deleted, not run again.
    pub(super) fn succeeded_before(uid: String) -> Step {
        let host = Host {
            earlier_success: true,
            ..Host::at(At::Deleting)
        };
        Next::stay(host, Vec::new(), Intent::DeleteJob { uid })
    }

    /// What a failure of the last intent is, when it is not that intent's own: the host step's
    /// failure, when reading its Job or recording its result failed too.
    pub(super) fn news(&self, why: &Cause) -> Option<Failure> {
        match &self.at {
            At::Inquest(own) => Some(Failure::new(
                UpgradeStep::Upgrade,
                FailureKind::Job,
                own.clone(),
            )),
            At::Recording(_, Some(failure)) => Some(unrecorded(failure, "its result", why)),
            _ => None,
        }
    }

    /// Whether the write at hand is a successful host Job's record, after which the Reboot
    /// starts with nothing between but that Job's delete.
    pub(super) fn recording_success(&self) -> bool {
        matches!(self.at, At::Recording(_, None)) && self.lost.is_none()
    }

    /// Takes the answer to the last intent.
    pub(super) fn step(self, run: &Run, seen: &mut Seen, obs: Observation) -> Step {
        match (self.at.clone(), obs) {
            (At::Hosting, Observation::Host(Ok(report))) => self.record(run, seen, report),
            // No exit code: if our Job failed (its Pod deleted, its deadline), record that, so
            // that a rerun retries it by replacing exactly that Job instead of adopting the
            // same failure for ever; if it runs or is gone, a rerun finds it as it is.
            (At::Hosting, Observation::Host(Err(why))) => {
                self.go(At::Inquest(why), Vec::new(), Intent::FindJob)
            }
            // Lost to a reboot: recorded as a failure without an exit code (a rerun would
            // retry it, as a killed one), then the node, once back, says whether it took.
            (At::Hosting, Observation::Lost(why)) => {
                let mut host = self;
                host.lost = Some(why.clone());
                host.go(At::Inquest(why), Vec::new(), Intent::FindJob)
            }
            (At::Inquest(why), Observation::Job(Some(job))) if nodejob_core::failed(&job) => {
                let record = HostJob {
                    target: run.target.clone(),
                    uid: job.metadata.uid.clone().unwrap_or_default(),
                    exit_code: None,
                };
                let failure = Failure {
                    step: UpgradeStep::Upgrade,
                    kind: FailureKind::Job,
                    message: format!(
                        "{why}; a rerun retries it, replacing that failed job {}",
                        seen.job_name(run)
                    ),
                    exit_code: None,
                    log_tail: None,
                };
                let changes = vec![NodeChange::set_annotation(
                    HOST_JOB,
                    records::value(&record),
                )];
                let rv = seen.rv();
                self.go(
                    At::Recording(record, Some(failure)),
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
                    resource_version: None,
                };
                self.record(run, seen, report)
            }
            (At::Inquest(why), Observation::Job(_)) => {
                Next::fail(Failure::new(UpgradeStep::Upgrade, FailureKind::Job, why))
            }
            (At::Recording(record, failure), Observation::Node(node)) => {
                seen.node = Some(node);
                let uid = record.uid.clone();
                seen.host = Some(record);
                match failure {
                    Some(_) if self.lost.is_some() => self.await_lost(run, seen),
                    Some(failure) => Next::leave(Hosted::Failed(failure)),
                    None => self.go(At::Deleting, Vec::new(), Intent::DeleteJob { uid }),
                }
            }
            (At::Deleting, Observation::Deleted) => {
                let job = seen.job_name(run);
                let done = format!("the host upgrade exited 0; its job {job} deleted");
                self.leave_for_reboot(vec![Mark::Finished(UpgradeStep::Upgrade, done)])
            }
            (at, obs) => Next::fail(Failure::new(
                UpgradeStep::Upgrade,
                FailureKind::Internal,
                format!("internal: unexpected answer {obs:?} at {at:?}"),
            )),
        }
    }

    /// The host Job's result, recorded on the node before anything else: a failed one so that
    /// a rerun replaces exactly this Job (a retry), reported once recorded.
    fn record(self, run: &Run, seen: &mut Seen, report: Report) -> Step {
        let record = HostJob {
            target: run.target.clone(),
            uid: report.uid.clone(),
            exit_code: Some(report.exit_code),
        };
        let changes = vec![NodeChange::set_annotation(
            HOST_JOB,
            records::value(&record),
        )];
        let rv = seen.rv();
        let failure = (report.exit_code != 0).then(|| {
            seen.host = Some(record.clone());
            let message = format!(
                "the host upgrade exited {}; the node stays cordoned and job {} is left for \
                 inspection",
                report.exit_code,
                seen.job_name(run)
            );
            let log_tail = report.log.as_deref().map(|l| log_tail(l, LOG_TAIL_LINES));
            Failure {
                step: UpgradeStep::Upgrade,
                kind: FailureKind::Host,
                message,
                exit_code: Some(report.exit_code),
                log_tail,
            }
        });
        self.go(
            At::Recording(record, failure),
            Vec::new(),
            Intent::Patch { rv, changes },
        )
    }

    /// The host upgrade's pod was lost to a reboot, its failure recorded: the reboot awaited,
    /// the node's version then saying whether the upgrade took.
    fn await_lost(self, run: &Run, seen: &Seen) -> Step {
        let job = seen.job_name(run);
        let marks = vec![Mark::Note(format!(
            "the host upgrade's pod was lost to a reboot of the node (job {job}): waiting for \
             the node to be back; its version then says whether the upgrade took"
        ))];
        self.leave_for_reboot(marks)
    }

    /// Done here: on to the reboot, with what this phase learned of the host Job.
    fn leave_for_reboot(self, marks: Vec<Mark>) -> Step {
        Next::Leave(
            marks,
            Hosted::Reboot {
                lost: self.lost,
                earlier_success: self.earlier_success,
            },
        )
    }
}
