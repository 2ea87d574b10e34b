//! The soak: when the plan has one, an upgraded node goes back in service (uncordoned if
//! ours) with a soak record instead of the done record, and must stay Ready on the same boot
//! for the soak's length, the health check passing again at its end; then it is recorded
//! done. A node that breaks its soak fails at `Soak` (counted against the failure budget),
//! why recorded on it, so that a rerun soaks it again from the start.
//!
//! ```text
//!  Finish ─soaks─▶ uncordon + soak record - in-progress ─▶ Soak(since, boot) ─held─▶ Health? ─▶ done + - soak ─▶ Upgraded
//!                                                                        └─broke (NotReady, rebooted, gone, unhealthy)─▶ soak record failed ─▶ Failed(Soak)
//!  Inspect ─soak record toward the target─▶ resume from its start │ its last soak failed: soak again │ the plan soaks none: done
//! ```
//!
//! The soak's start is on the node, so a crash resumes the soak where it stood rather than
//! from the start; the done record is written on the node as read once it held (guarded).

use k8s_openapi::api::core::v1::Node;
use nodejob_core::{NodeChange, ready};

use super::context::{DRAIN_ROUNDS, Next, Run, Seen, unrecorded};
use super::protocol::{
    Cause, Failure, FailureKind, Intent, Mark, NodeResult, Observation, UpgradeStep,
};
use crate::records::{self, DONE, Done, SOAK, Soak as SoakRecord, boot_id};
use crate::version::{same_version, version};

/// The soak, under way.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Soak {
    at: At,
}

/// Where the soak stands.
#[derive(Clone, Debug, PartialEq)]
enum At {
    /// Its watch.
    Watching,
    /// The health check again, at its end.
    Checking,
    /// Writing the done record once it passed (guarded).
    Done,
    /// Writing a soak record afresh (a rerun after a failed soak), guarded.
    Restart,
    /// Recording why it failed, before failing with it.
    Failing(Failure),
}

/// The soak failed, and the node can be rolled back: the root rolls it back.
#[derive(Debug)]
pub(super) struct Broke(pub(super) Failure);

type Step = Next<Soak, Broke>;

impl Soak {
    fn go(at: At, marks: Vec<Mark>, intent: Intent) -> Step {
        Next::stay(Soak { at }, marks, intent)
    }

    /// The soak's watch, from the record's start on its boot, after `marks`.
    pub(super) fn watch(seen: &Seen, mut marks: Vec<Mark>) -> Step {
        let (since, boot_id) = (seen.soak.as_ref())
            .map(|s| (s.since.clone(), s.boot_id.clone()))
            .unwrap_or_default();
        marks.push(Mark::Started(UpgradeStep::Soak));
        Soak::go(At::Watching, marks, Intent::Soak { since, boot_id })
    }

    /// A node not ours in flight carrying a soak record toward the target (an earlier run's,
    /// stopped or crashed while it soaked, or failed at it): resume it; `None` when it has
    /// none toward the target.
    pub(super) fn resume(run: &Run, seen: &mut Seen, node: &Node) -> Option<Step> {
        let record = seen.soak.clone().filter(|s| s.target == run.target)?;
        seen.node = Some(Box::new(node.clone()));
        if !run.soaks {
            // The plan soaks none (a rerun without it): recorded done now.
            let marks = vec![Mark::Note(format!(
                "it was soaking since {} and this run soaks none: recording it done",
                record.since
            ))];
            return Some(record_done(run, seen, marks));
        }
        if let Some(why) = &record.failed {
            // Its last soak failed: soak it again, from now, on this boot.
            let fresh = SoakRecord {
                target: run.target.clone(),
                since: seen.now.clone(),
                boot_id: boot_id(node).to_string(),
                failed: None,
                ..record.clone()
            };
            let changes = vec![NodeChange::set_annotation(SOAK, records::value(&fresh))];
            seen.soak = Some(fresh);
            let marks = vec![Mark::Note(format!(
                "its last soak failed ({why}): soaking it again from the start"
            ))];
            let rv = records::rv(node);
            return Some(Soak::go(
                At::Restart,
                marks,
                Intent::Guarded { rv, changes },
            ));
        }
        let marks = vec![Mark::Note(format!(
            "resuming its soak, started at {} on boot {}",
            record.since, record.boot_id
        ))];
        Some(Soak::watch(seen, marks))
    }

    /// What a failure of the last intent is, when it is not that intent's own: the soak's
    /// failure, when recording it failed too.
    pub(super) fn news(&self, why: &Cause) -> Option<Failure> {
        match &self.at {
            At::Failing(failure) => Some(unrecorded(failure, "it", why)),
            _ => None,
        }
    }

    /// Takes the answer to the last intent.
    pub(super) fn step(self, run: &Run, seen: &mut Seen, obs: Observation) -> Step {
        match (self.at, obs) {
            (At::Watching, Observation::Soaked { node, held }) => soaked(run, seen, node, held),
            (At::Checking, Observation::Health(result, _)) => checked(run, seen, result),
            // Recorded done: upgraded.
            (At::Done, Observation::Node(node)) => {
                seen.node = Some(node);
                let boot = (seen.soak.as_ref())
                    .map(|s| s.boot_id.clone())
                    .unwrap_or_default();
                let message = format!(
                    "stayed Ready on boot {boot} at {}; recorded done",
                    run.target
                );
                Next::Finish(
                    vec![Mark::Finished(UpgradeStep::Soak, message)],
                    NodeResult::Upgraded,
                )
            }
            (At::Done, Observation::Changed(node)) => done_again(run, seen, node),
            // The fresh soak record written: the soak begins.
            (At::Restart, Observation::Node(node)) => {
                seen.node = Some(node);
                Soak::watch(seen, Vec::new())
            }
            (At::Restart, Observation::Changed(node)) => restart_again(run, seen, node),
            (At::Failing(failure), Observation::Node(node)) => {
                seen.node = Some(node);
                Next::fail(failure)
            }
            (at, obs) => Next::fail(Failure::new(
                UpgradeStep::Soak,
                FailureKind::Internal,
                format!("internal: unexpected answer {obs:?} at {at:?}"),
            )),
        }
    }
}

/// The node changed before the fresh soak record was written: decided again.
fn restart_again(run: &Run, seen: &mut Seen, node: Box<Node>) -> Step {
    seen.refinishes += 1;
    if seen.refinishes > DRAIN_ROUNDS {
        return Next::fail(Failure::new(
            UpgradeStep::Soak,
            FailureKind::Node,
            "it kept changing when its soak was to start again",
        ));
    }
    seen.soak = seen.soak.take().map(|s| SoakRecord {
        failed: Some("soaking again".into()),
        ..s
    });
    Soak::resume(run, seen, &node).unwrap_or_else(|| {
        Next::fail(Failure::new(
            UpgradeStep::Soak,
            FailureKind::Internal,
            "internal: no soak record to start again",
        ))
    })
}

/// The soak's watch ended.
fn soaked(run: &Run, seen: &mut Seen, node: Option<Box<Node>>, held: bool) -> Step {
    let Some(node) = node else {
        return Next::fail(Failure::new(
            UpgradeStep::Soak,
            FailureKind::Node,
            "the node was deleted from the cluster during its soak",
        ));
    };
    let why = broke(run, seen, &node, held);
    seen.node = Some(node);
    if let Some(why) = why {
        return failed(run, seen, FailureKind::Node, why, None);
    }
    if run.has_health {
        let marks = vec![Mark::Note(
            "its soak held: the health check again, at its end".into(),
        )];
        return Soak::go(At::Checking, marks, Intent::Health);
    }
    record_done(run, seen, Vec::new())
}

/// Why `node` broke its soak (`held`: the watch saw it hold to the end), if it did.
fn broke(run: &Run, seen: &Seen, node: &Node, held: bool) -> Option<String> {
    let soak_boot = (seen.soak.as_ref())
        .map(|s| s.boot_id.clone())
        .unwrap_or_default();
    let reported = version(node, &run.source).unwrap_or("nothing").to_string();
    if !ready(node) {
        Some("it went NotReady during its soak".to_string())
    } else if boot_id(node) != soak_boot {
        Some(format!(
            "it rebooted during its soak (bootID {soak_boot} -> {})",
            boot_id(node)
        ))
    } else if !same_version(&reported, &run.target) {
        Some(format!(
            "it reports {reported}, not {}, at the end of its soak",
            run.target
        ))
    } else if !held {
        Some("it did not stay Ready on the same boot for its soak".to_string())
    } else {
        None
    }
}

/// The health check at the end of the soak.
fn checked(run: &Run, seen: &mut Seen, result: Result<i32, String>) -> Step {
    match result {
        Ok(0) => record_done(run, seen, Vec::new()),
        Ok(code) => failed(
            run,
            seen,
            FailureKind::Host,
            format!("the health check at the end of its soak exited {code}"),
            Some(code),
        ),
        Err(why) => failed(
            run,
            seen,
            FailureKind::Job,
            format!("the health check at the end of its soak: {why}"),
            None,
        ),
    }
}

/// The soak held: the done record, the soak record gone, on the node as last read.
fn record_done(run: &Run, seen: &Seen, marks: Vec<Mark>) -> Step {
    let done = Done {
        version: run.target.clone(),
        at: seen.now.clone(),
    };
    let mut changes = vec![
        NodeChange::set_annotation(DONE, records::value(&done)),
        NodeChange::remove_annotation(SOAK),
    ];
    if seen.rollback.is_some() {
        changes.push(NodeChange::remove_annotation(records::ROLLBACK));
    }
    let rv = seen.rv();
    Soak::go(At::Done, marks, Intent::Guarded { rv, changes })
}

/// The node changed between the read that ended its soak and the done record: recorded done
/// only if it still shows its soak held (Ready, same boot, at the target).
fn done_again(run: &Run, seen: &mut Seen, node: Box<Node>) -> Step {
    seen.refinishes += 1;
    let why = broke(run, seen, &node, true);
    seen.node = Some(node);
    if let Some(why) = why {
        return failed(run, seen, FailureKind::Node, why, None);
    }
    if seen.refinishes > DRAIN_ROUNDS {
        return failed(
            run,
            seen,
            FailureKind::Node,
            "it kept changing when it was to be recorded done".into(),
            None,
        );
    }
    record_done(run, seen, Vec::new())
}

/// The soak failed: rolled back when it can be (by the root); else why recorded on the node
/// (a rerun soaks it again), then the node fails at `Soak`, left as it is (in service).
fn failed(
    run: &Run,
    seen: &mut Seen,
    kind: FailureKind,
    why: String,
    exit_code: Option<i32>,
) -> Step {
    if seen.can_roll_back(run).is_ok() {
        return Next::leave(Broke(Failure {
            step: UpgradeStep::Soak,
            kind,
            message: why,
            exit_code,
            log_tail: None,
        }));
    }
    let message = format!("{why}; the node is left as it is, in service");
    let failure = Failure {
        step: UpgradeStep::Soak,
        kind,
        message,
        exit_code,
        log_tail: None,
    };
    let Some(record) = seen.soak.clone() else {
        return Next::fail(failure);
    };
    let failed = SoakRecord {
        failed: Some(why),
        ..record
    };
    let changes = vec![NodeChange::set_annotation(SOAK, records::value(&failed))];
    seen.soak = Some(failed);
    let rv = seen.rv();
    Soak::go(
        At::Failing(failure),
        Vec::new(),
        Intent::Patch { rv, changes },
    )
}
