//! Reboot and health: the node awaited back Ready on a boot other than the one its host
//! upgrade was launched on, at the target; then the health check, if the plan has one.
//!
//! ```text
//!  Rebooting ─new boot, Ready, at the target─▶ Checking? ─exit 0─▶ (finish)
//!     │ timed out, or at another version ──────────┴ else ─▶ (failed, or rolled back)
//!     │ its host Job lost to the reboot: at the target it took (on as after an exit 0),
//!     └ else a failure of the Upgrade step, its record kept so that a rerun retries it
//! ```
//!
//! The evidence that the host operation ran is our Launch record plus the Job or its recorded
//! result, never a `bootID` change alone, and the reboot awaited is the end of the boot read
//! at Launch: so a spurious reboot never makes a false failure.

use k8s_openapi::api::core::v1::Node;
use nodejob_core::{log_tail, ready, unready_taint};

use super::context::{LOG_TAIL_LINES, Next, Run, Seen};
use super::protocol::{Failure, FailureKind, Intent, Mark, Observation, UpgradeStep};
use crate::records::boot_id;
use crate::version::{same_version, version};

/// The node's reboot and health check.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Reboot {
    at: At,
    /// Why the host upgrade gave no answer, when its pod was lost to a reboot of the node: the
    /// node's version once it is back says whether it took.
    lost: Option<String>,
    /// An earlier run recorded the host upgrade's success: a node at the target that did not
    /// reboot within the whole reboot timeout since is taken as one that needed no reboot.
    earlier_success: bool,
}

/// Where the reboot and health check stand.
#[derive(Clone, Debug, PartialEq)]
enum At {
    Rebooting,
    Checking,
}

/// How the reboot and health check ended.
#[derive(Debug)]
pub(super) enum Checked {
    /// Back at the target, healthy: the finish.
    Passed,
    /// A failure after the host upgrade: rolled back if the plan says so and it can be.
    Failed(Failure),
}

type Step = Next<Reboot, Checked>;

impl Reboot {
    /// Waits for the node to be back Ready on a boot other than the one the host upgrade was
    /// launched on (`lost`, `earlier_success`: as the fields say).
    pub(super) fn await_(seen: &Seen, lost: Option<String>, earlier_success: bool) -> Step {
        let reboot = Reboot {
            at: At::Rebooting,
            lost,
            earlier_success,
        };
        let boot_id = seen.launched_boot().to_string();
        Next::stay(
            reboot,
            vec![Mark::Started(UpgradeStep::Reboot)],
            Intent::WaitReboot { boot_id },
        )
    }

    /// At the target: the health check, if any, then the finish.
    pub(super) fn check(run: &Run, mut marks: Vec<Mark>) -> Step {
        if !run.has_health {
            return Next::Leave(marks, Checked::Passed);
        }
        marks.push(Mark::Started(UpgradeStep::Health));
        let reboot = Reboot {
            at: At::Checking,
            lost: None,
            earlier_success: false,
        };
        Next::stay(reboot, marks, Intent::Health)
    }

    /// The step it is at.
    pub(super) fn at(&self) -> UpgradeStep {
        match self.at {
            At::Rebooting => UpgradeStep::Reboot,
            At::Checking => UpgradeStep::Health,
        }
    }

    /// Takes the answer to the last intent.
    pub(super) fn step(self, run: &Run, seen: &mut Seen, obs: Observation) -> Step {
        match (&self.at, obs) {
            (At::Rebooting, Observation::Rebooted { node, met }) => {
                self.rebooted(run, seen, node, met)
            }
            (At::Checking, Observation::Health(Ok(0), _)) => {
                let marks = vec![Mark::Finished(UpgradeStep::Health, "passed".into())];
                Next::Leave(marks, Checked::Passed)
            }
            (At::Checking, Observation::Health(Ok(code), log)) => failed(Failure {
                step: UpgradeStep::Health,
                kind: FailureKind::Host,
                message: format!("the health check exited {code}; the node stays cordoned"),
                exit_code: Some(code),
                log_tail: (log.as_deref())
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| log_tail(l, LOG_TAIL_LINES)),
            }),
            (At::Checking, Observation::Health(Err(why), _)) => failed(Failure {
                step: UpgradeStep::Health,
                kind: FailureKind::Job,
                message: why,
                exit_code: None,
                log_tail: None,
            }),
            (at, obs) => Next::fail(Failure::new(
                self.at(),
                FailureKind::Internal,
                format!("internal: unexpected answer {obs:?} at {at:?}"),
            )),
        }
    }

    fn rebooted(self, run: &Run, seen: &mut Seen, node: Option<Box<Node>>, met: bool) -> Step {
        let reported = node
            .as_deref()
            .and_then(|n| version(n, &run.source))
            .unwrap_or("nothing")
            .to_string();
        let gone = node.is_none();
        if let Some(n) = node {
            seen.node = Some(n);
        }
        if gone {
            return Next::fail(Failure::new(
                UpgradeStep::Reboot,
                FailureKind::Node,
                "the node was deleted from the cluster while it rebooted",
            ));
        }
        if let Some(lost) = &self.lost {
            return lost_judged(run, seen, lost, &reported, met);
        }
        let at_target = (seen.node.as_deref())
            .is_some_and(|n| ready(n) && same_version(&reported, &run.target));
        if !met && self.earlier_success && at_target {
            // An earlier run saw the host upgrade exit 0; a whole reboot timeout later the node
            // is Ready at the target on the same boot: the upgrade needed no reboot (the host
            // was at the target already). Never taken on a first wait: a reboot may be pending.
            let marks = vec![Mark::Note(format!(
                "Ready at {reported} without a reboot a whole reboot timeout after its host \
                 upgrade exited 0: taken as needing none"
            ))];
            return Reboot::check(run, marks);
        }
        if !met {
            let before = seen.launched_boot();
            let why = match seen.node.as_deref() {
                None => "the node no longer exists".to_string(),
                Some(n) if boot_id(n) == before && !ready(n) => {
                    format!("it went NotReady and did not come back (bootID {before} unchanged)")
                }
                Some(n) if boot_id(n) == before => {
                    format!("it did not reboot (bootID {before} unchanged)")
                }
                Some(n) if !ready(n) => "it rebooted but is not Ready".to_string(),
                Some(n) if let Some(taint) = unready_taint(n) => format!(
                    "it rebooted and is Ready, but still carries the {taint} taint (the node \
                     lifecycle controller lifts it once it sees the node Ready)"
                ),
                Some(_) => "it did not come back".to_string(),
            };
            return failed(Failure {
                step: UpgradeStep::Reboot,
                kind: FailureKind::TimedOut,
                message: format!("{why} within the reboot timeout; the node stays cordoned"),
                exit_code: None,
                log_tail: None,
            });
        }
        if !same_version(&reported, &run.target) {
            return failed(Failure {
                step: UpgradeStep::Reboot,
                kind: FailureKind::Node,
                message: format!(
                    "it came back at {reported}, not {}: the upgrade did not take; the node \
                     stays cordoned",
                    run.target
                ),
                exit_code: None,
                log_tail: None,
            });
        }
        let marks = vec![Mark::Finished(
            UpgradeStep::Reboot,
            format!("rebooted, Ready at {reported}"),
        )];
        Reboot::check(run, marks)
    }
}

/// The node back (`met`) or not after a host upgrade lost to its reboot: at the target, the
/// upgrade took (the reboot was its own, or came after it did its work) and the roll goes on
/// as after an exit 0, never running it again; at another version it did not take: a failure
/// of the Upgrade step (rolled back when the plan says so), its record kept as a failure
/// without an exit code, so that a rerun retries it.
fn lost_judged(run: &Run, seen: &Seen, lost: &str, reported: &str, met: bool) -> Step {
    let job = seen.job_name(run);
    if !met {
        return failed(Failure {
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
    if !same_version(reported, &run.target) {
        return failed(Failure {
            step: UpgradeStep::Upgrade,
            kind: FailureKind::Node,
            message: format!(
                "{lost}; the node came back at {reported}, not {}: the upgrade did not take; \
                 the node stays cordoned; a rerun retries it, replacing that failed job {job}",
                run.target
            ),
            exit_code: None,
            log_tail: None,
        });
    }
    let marks = vec![
        Mark::Finished(
            UpgradeStep::Upgrade,
            format!(
                "its pod was lost to the node's reboot, and the node came back at {reported}: \
                 the upgrade took; its job {job} is left for inspection"
            ),
        ),
        Mark::Finished(
            UpgradeStep::Reboot,
            format!("rebooted, Ready at {reported}"),
        ),
    ];
    Reboot::check(run, marks)
}

/// A failure after the host upgrade: the root rolls it back or fails it.
fn failed(failure: Failure) -> Step {
    Next::leave(Checked::Failed(failure))
}
