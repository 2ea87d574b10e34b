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

use super::{
    At, DRAIN_ROUNDS, Failure, FailureKind, Intent, Mark, NodeMachine, NodeResult, Step,
    UpgradeStep,
};
use crate::records::{self, DONE, Done, HOST_JOB, IN_PROGRESS, SOAK, Soak, boot_id};
use crate::version::{same_version, version};

impl NodeMachine {
    /// The finish when the plan soaks: uncordon if ours, the soak record from now on this
    /// boot, our in-flight records gone: one guarded write. The done record waits for the
    /// soak.
    pub(super) fn finish_into_soak(&mut self, marks: Vec<Mark>) -> Step {
        let mut changes = Vec::new();
        if self.seen.progress.as_ref().is_some_and(|p| p.cordoned) {
            changes.push(NodeChange::Uncordon);
        }
        let record = Soak {
            target: self.run.target.clone(),
            since: self.seen.now.clone(),
            boot_id: self
                .seen
                .node
                .as_deref()
                .map(boot_id)
                .unwrap_or_default()
                .to_string(),
            failed: None,
            from: self.seen.progress.as_ref().and_then(|p| p.from.clone()),
            evicted: self.seen.progress.as_ref().and_then(|p| p.evicted),
        };
        changes.push(NodeChange::set_annotation(SOAK, records::value(&record)));
        changes.push(NodeChange::remove_annotation(IN_PROGRESS));
        changes.push(NodeChange::remove_annotation(HOST_JOB));
        if self.seen.blocked_before.is_some() {
            changes.push(NodeChange::remove_annotation(records::BLOCKED));
        }
        self.seen.soak = Some(record);
        let rv = self.rv();
        self.go(At::Finishing, marks, Intent::Guarded { rv, changes })
    }

    /// Back in service with the soak record: the soak begins.
    pub(super) fn soak_started(&mut self, node: Box<Node>) -> Step {
        self.seen.node = Some(node);
        let message = if self.seen.progress.as_ref().is_some_and(|p| p.cordoned) {
            format!("uncordoned; at {}; soaking", self.run.target)
        } else {
            format!(
                "at {}; left cordoned (someone else cordoned it); soaking",
                self.run.target
            )
        };
        let mut step = self.soak_watch(Vec::new());
        step.marks
            .insert(0, Mark::Finished(UpgradeStep::Uncordon, message));
        step
    }

    /// The soak's watch, from the record's start on its boot.
    fn soak_watch(&mut self, mut marks: Vec<Mark>) -> Step {
        let (since, boot_id) = self
            .seen
            .soak
            .as_ref()
            .map(|s| (s.since.clone(), s.boot_id.clone()))
            .unwrap_or_default();
        marks.push(Mark::Started(UpgradeStep::Soak));
        self.go(At::Soaking, marks, Intent::Soak { since, boot_id })
    }

    /// A node not ours in flight carrying a soak record toward the target (an earlier run's,
    /// stopped or crashed while it soaked, or failed at it): resume it; `None` when it has
    /// none toward the target.
    pub(super) fn resume_soak(&mut self, node: &Node) -> Option<Step> {
        let record = self
            .seen
            .soak
            .clone()
            .filter(|s| s.target == self.run.target)?;
        self.seen.node = Some(Box::new(node.clone()));
        if !self.run.soaks {
            // The plan soaks none (a rerun without it): recorded done now.
            let marks = vec![Mark::Note(format!(
                "it was soaking since {} and this run soaks none: recording it done",
                record.since
            ))];
            return Some(self.soak_record_done(marks));
        }
        if let Some(why) = &record.failed {
            // Its last soak failed: soak it again, from now, on this boot.
            let fresh = Soak {
                target: self.run.target.clone(),
                since: self.seen.now.clone(),
                boot_id: boot_id(node).to_string(),
                failed: None,
                ..record.clone()
            };
            let changes = vec![NodeChange::set_annotation(SOAK, records::value(&fresh))];
            self.seen.soak = Some(fresh);
            let marks = vec![Mark::Note(format!(
                "its last soak failed ({why}): soaking it again from the start"
            ))];
            let rv = records::rv(node);
            return Some(self.go(At::SoakRestart, marks, Intent::Guarded { rv, changes }));
        }
        let marks = vec![Mark::Note(format!(
            "resuming its soak, started at {} on boot {}",
            record.since, record.boot_id
        ))];
        Some(self.soak_watch(marks))
    }

    /// The fresh soak record written: the soak begins.
    pub(super) fn soak_restarted(&mut self, node: Box<Node>) -> Step {
        self.seen.node = Some(node);
        self.soak_watch(Vec::new())
    }

    /// The node changed before the fresh soak record was written: decided again.
    pub(super) fn soak_restart_again(&mut self, node: Box<Node>) -> Step {
        self.refinishes += 1;
        if self.refinishes > DRAIN_ROUNDS {
            return self.fail(Failure::new(
                UpgradeStep::Soak,
                FailureKind::Node,
                "it kept changing when its soak was to start again",
            ));
        }
        self.seen.soak = self.seen.soak.take().map(|s| Soak {
            failed: Some("soaking again".into()),
            ..s
        });
        self.resume_soak(&node).unwrap_or_else(|| {
            self.fail(Failure::new(
                UpgradeStep::Soak,
                FailureKind::Internal,
                "internal: no soak record to start again",
            ))
        })
    }

    /// The soak's watch ended.
    pub(super) fn soaked(&mut self, node: Option<Box<Node>>, held: bool) -> Step {
        let Some(node) = node else {
            return self.fail(Failure::new(
                UpgradeStep::Soak,
                FailureKind::Node,
                "the node was deleted from the cluster during its soak",
            ));
        };
        let why = self.broke(&node, held);
        self.seen.node = Some(node);
        if let Some(why) = why {
            return self.soak_failed(FailureKind::Node, why, None);
        }
        if self.run.has_health {
            let marks = vec![Mark::Note(
                "its soak held: the health check again, at its end".into(),
            )];
            return self.go(At::SoakChecking, marks, Intent::Health);
        }
        self.soak_record_done(Vec::new())
    }

    /// Why `node` broke its soak (`held`: the watch saw it hold to the end), if it did.
    fn broke(&self, node: &Node, held: bool) -> Option<String> {
        let soak_boot = (self.seen.soak.as_ref())
            .map(|s| s.boot_id.clone())
            .unwrap_or_default();
        let reported = version(node, &self.run.source)
            .unwrap_or("nothing")
            .to_string();
        if !ready(node) {
            Some("it went NotReady during its soak".to_string())
        } else if boot_id(node) != soak_boot {
            Some(format!(
                "it rebooted during its soak (bootID {soak_boot} -> {})",
                boot_id(node)
            ))
        } else if !same_version(&reported, &self.run.target) {
            Some(format!(
                "it reports {reported}, not {}, at the end of its soak",
                self.run.target
            ))
        } else if !held {
            Some("it did not stay Ready on the same boot for its soak".to_string())
        } else {
            None
        }
    }

    /// The health check at the end of the soak.
    pub(super) fn soak_checked(&mut self, result: Result<i32, String>) -> Step {
        match result {
            Ok(0) => self.soak_record_done(Vec::new()),
            Ok(code) => self.soak_failed(
                FailureKind::Host,
                format!("the health check at the end of its soak exited {code}"),
                Some(code),
            ),
            Err(why) => self.soak_failed(
                FailureKind::Job,
                format!("the health check at the end of its soak: {why}"),
                None,
            ),
        }
    }

    /// The soak held: the done record, the soak record gone, on the node as last read.
    fn soak_record_done(&mut self, marks: Vec<Mark>) -> Step {
        let done = Done {
            version: self.run.target.clone(),
            at: self.seen.now.clone(),
        };
        let mut changes = vec![
            NodeChange::set_annotation(DONE, records::value(&done)),
            NodeChange::remove_annotation(SOAK),
        ];
        if self.seen.rollback.is_some() {
            changes.push(NodeChange::remove_annotation(records::ROLLBACK));
        }
        let rv = self.rv();
        self.go(At::SoakDone, marks, Intent::Guarded { rv, changes })
    }

    /// Recorded done: upgraded.
    pub(super) fn soak_done(&mut self, node: Box<Node>) -> Step {
        self.seen.node = Some(node);
        let boot = self
            .seen
            .soak
            .as_ref()
            .map(|s| s.boot_id.clone())
            .unwrap_or_default();
        let message = format!(
            "stayed Ready on boot {boot} at {}; recorded done",
            self.run.target
        );
        self.go(
            At::Over,
            vec![Mark::Finished(UpgradeStep::Soak, message)],
            Intent::Done(NodeResult::Upgraded),
        )
    }

    /// The node changed between the read that ended its soak and the done record: recorded
    /// done only if it still shows its soak held (Ready, same boot, at the target).
    pub(super) fn soak_done_again(&mut self, node: Box<Node>) -> Step {
        self.refinishes += 1;
        let why = self.broke(&node, true);
        self.seen.node = Some(node);
        if let Some(why) = why {
            return self.soak_failed(FailureKind::Node, why, None);
        }
        if self.refinishes > DRAIN_ROUNDS {
            return self.soak_failed(
                FailureKind::Node,
                "it kept changing when it was to be recorded done".into(),
                None,
            );
        }
        self.soak_record_done(Vec::new())
    }

    /// The soak failed: why recorded on the node (a rerun soaks it again), then the node
    /// fails at `Soak`, left as it is (in service).
    fn soak_failed(&mut self, kind: FailureKind, why: String, exit_code: Option<i32>) -> Step {
        if self.can_roll_back().is_ok() {
            return self.failed_or_rolled_back(Failure {
                step: UpgradeStep::Soak,
                kind,
                message: why,
                exit_code,
                log_tail: None,
            });
        }
        let message = format!("{why}; the node is left as it is, in service");
        let failure = Failure {
            step: UpgradeStep::Soak,
            kind,
            message,
            exit_code,
            log_tail: None,
        };
        let Some(record) = self.seen.soak.clone() else {
            return self.fail(failure);
        };
        let failed = Soak {
            failed: Some(why),
            ..record
        };
        let changes = vec![NodeChange::set_annotation(SOAK, records::value(&failed))];
        self.seen.soak = Some(failed);
        let rv = self.rv();
        self.go(
            At::SoakFailing(failure),
            Vec::new(),
            Intent::Patch { rv, changes },
        )
    }
}
