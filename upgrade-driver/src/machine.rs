//! The per-node upgrade, sans-IO: [`NodeMachine`] takes [`Observation`]s (the node as read, a
//! step's result) and returns a [`Step`] (marks for progress, then one [`Intent`]). It never
//! awaits and reads no clock, so every decision is a row in a table test.
//!
//! [`NodeMachine`] is a root that owns one sub-machine at a time, each holding the state of
//! its own phase in its variants, and hands each observation to the one in charge:
//!
//! ```text
//!  prepare (prepare.rs) ──launch / adopt──▶ host (host.rs) ──exit 0──▶ reboot (reboot.rs) ──▶ finish (finish.rs) ─▶ Upgraded
//!  inspect, vet, mark,                     its Job, its result         new boot, Ready at the   uncordon + done    │ soaks
//!  find, drain, Launch, preflight          recorded, then deleted      target; health check                       ▼
//!     │ budgets held the drain                   │ failed                    │ failed            soak (soak.rs) ─▶ Upgraded
//!     ▼                                          ▼                           ▼                      │ failed
//!  blocked (blocked.rs) ─▶ Blocked       ┌─ the plan rolls back and it can be: rollback (rollback.rs) ─▶ RolledBack
//!                                        └─ else Failed (left cordoned, the Job left)
//! ```
//!
//! The root does only what is the same in every phase: a failed intent fails the node at the
//! step under way (or, while a failure is being recorded, with that failure:
//! [`context::unrecorded`]), our fence taint goes with our record in every write, and the
//! hand-off from one sub-machine to the next. What every phase reads and writes, the node as
//! last seen and our records on it, the root owns and lends ([`context::Seen`]).
//!
//! Launch is the write right before the host Job is created: our record with the `bootID` read
//! now, under the resourceVersion of the node as last read (cordoned, drained). A Conflict is
//! not written again: the node is read again and, since a person may have uncordoned it and
//! Pods landed meanwhile, cordoned again if it is schedulable and drained again, before the
//! next Launch. So the host Job is only ever created on a node that was cordoned, drained and
//! unchanged since, at most [`DRAIN_ROUNDS`] times over.
//!
//! Exactly once: the host Job is kept after it succeeded until its result is recorded on the
//! node ([`HOST_JOB`](crate::records::HOST_JOB)); a resumed run finding our Job adopts it and
//! takes its result. The evidence that the host operation ran is our Launch record plus the
//! Job or its recorded result, never a `bootID` change alone: a node that rebooted by itself
//! during the drain is drained and upgraded as any other, and the reboot awaited is the end of
//! the boot read at Launch. So a crash at any instant never runs the upgrade twice, and a
//! spurious reboot never makes a false failure.

mod blocked;
mod context;
mod finish;
mod host;
mod prepare;
mod protocol;
mod reboot;
mod rollback;
mod soak;

pub(crate) use blocked::blocked_why;
pub use context::DRAIN_ROUNDS;
pub use protocol::{
    Cause, DrainFailed, Failure, FailureKind, HeldBy, Intent, Mark, NodeResult, Observation, Own,
    Step, UpgradeStep,
};

use blocked::Blocked;
use context::{Next, Run, Seen};
use finish::{Finish, Soaking};
use host::{Host, Hosted};
use prepare::{Prepare, Prepared};
use reboot::{Checked, Reboot};
use rollback::Rollback;
use soak::{Broke, Soak};

use crate::plan::Plan;

/// One node's upgrade. See the module docs.
#[derive(Clone, Debug)]
pub struct NodeMachine {
    run: Run,
    seen: Seen,
    phase: Phase,
}

/// The sub-machine in charge; each holds the data of its own phase.
#[derive(Clone, Debug)]
enum Phase {
    /// From the node's first read to its host Job's launch.
    Prepare(Prepare),
    /// The host Job, its result recorded, then deleted.
    Host(Host),
    /// The reboot, then the health check.
    Reboot(Reboot),
    /// Uncordon and the done (or soak) record.
    Finish(Finish),
    /// Back in service, soaking.
    Soak(Soak),
    /// Rolling back after a failure.
    Rollback(Rollback),
    /// Writing the blocked record.
    Blocked(Blocked),
    /// Finished.
    Over,
}

impl NodeMachine {
    /// A machine for one node under `plan`, holding the Lease at `epoch`.
    pub fn new(plan: &Plan, epoch: i32) -> Self {
        NodeMachine {
            run: Run::new(plan, epoch),
            seen: Seen::default(),
            phase: Phase::Prepare(Prepare::new()),
        }
    }

    /// The first step: given the node as read, decide.
    pub fn start(&mut self, node: Box<k8s_openapi::api::core::v1::Node>) -> Step {
        self.step(Observation::Node(node))
    }

    /// Whether the node's state was already ours when we started (a resumed node).
    pub fn resumed(&self) -> bool {
        self.seen.progress.is_some()
    }

    /// Whether the machine is making its first write to a node that carried nothing of ours
    /// (marking it ours, cordoning it): nothing of ours is on it yet.
    pub fn untouched(&self) -> bool {
        matches!(&self.phase, Phase::Prepare(p) if p.untouched())
    }

    /// Sets the wall time written in the done record (RFC 3339).
    pub fn set_now(&mut self, now: String) {
        self.seen.now = now;
    }

    /// Takes the answer to the last intent.
    pub fn step(&mut self, obs: Observation) -> Step {
        let obs = match obs {
            Observation::Failed(why) => return self.failed(why),
            obs => obs,
        };
        let (run, seen) = (&self.run, &mut self.seen);
        match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Prepare(p) => {
                let next = p.step(run, seen, obs);
                self.prepared(next)
            }
            Phase::Host(h) => {
                let next = h.step(run, seen, obs);
                self.hosted(next)
            }
            Phase::Reboot(r) => {
                let next = r.step(run, seen, obs);
                self.checked(next)
            }
            Phase::Finish(f) => {
                let next = f.step(run, seen, obs);
                self.finished(next)
            }
            Phase::Soak(s) => {
                let next = s.step(run, seen, obs);
                self.soaked(next)
            }
            Phase::Rollback(r) => {
                let next = r.step(run, seen, obs);
                self.enter(next, Phase::Rollback, |_, never| match never {})
            }
            Phase::Blocked(b) => {
                let next = b.step(seen, obs);
                self.enter(next, Phase::Blocked, |_, never| match never {})
            }
            Phase::Over => self.end(
                Vec::new(),
                NodeResult::Failed(Failure::new(
                    UpgradeStep::Uncordon,
                    FailureKind::Internal,
                    format!("internal: unexpected answer {obs:?} at Over"),
                )),
            ),
        }
    }

    /// The last intent failed: the node fails at the step under way, with the failure the
    /// phase was recording if it was recording one (that failure is the news).
    fn failed(&mut self, why: Cause) -> Step {
        let news = match &self.phase {
            Phase::Host(host) => host.news(&why),
            Phase::Soak(soak) => soak.news(&why),
            _ => None,
        };
        let failure = news.unwrap_or_else(|| Failure::of(self.current_step(), why));
        self.end(Vec::new(), NodeResult::Failed(failure))
    }

    /// Prepared: to the sub-machine the preparation names.
    fn prepared(&mut self, next: Next<Prepare, Prepared>) -> Step {
        self.enter(next, Phase::Prepare, |m, to| {
            let (run, seen) = (&m.run, &mut m.seen);
            match to {
                Prepared::Soak(node) => match Soak::resume(run, seen, &node) {
                    Some(next) => m.soaked(next),
                    None => m.internal(UpgradeStep::Soak, "no soak record to resume"),
                },
                Prepared::Quarantined(node) => {
                    let next = Blocked::quarantined(seen, &node);
                    m.enter(next, Phase::Blocked, |_, never| match never {})
                }
                Prepared::Rollback => match rollback::resume(run, seen) {
                    Some(next) => m.enter(next, Phase::Rollback, |_, never| match never {}),
                    None => m.internal(UpgradeStep::Rollback, "no rollback to resume"),
                },
                Prepared::Undrainable(failed) => {
                    let next = Blocked::start(run, seen, failed);
                    m.enter(next, Phase::Blocked, |_, never| match never {})
                }
                Prepared::Succeeded { uid } => m.hosted(Host::succeeded_before(uid)),
                Prepared::Adopt { uid } => m.hosted(Host::adopt(uid)),
                Prepared::Launch { known_free } => m.hosted(Host::launch(known_free)),
                Prepared::Reboot => {
                    let next = Reboot::await_(seen, None, false);
                    m.checked(next)
                }
                Prepared::Check => {
                    let next = Reboot::check(run, Vec::new());
                    m.checked(next)
                }
            }
        })
    }

    /// Out of the host step: its reboot, or its failure.
    fn hosted(&mut self, next: Next<Host, Hosted>) -> Step {
        self.enter(next, Phase::Host, |m, to| match to {
            Hosted::Reboot {
                lost,
                earlier_success,
            } => m.checked(Reboot::await_(&m.seen, lost, earlier_success)),
            Hosted::Failed(failure) => m.rolled_back(failure),
        })
    }

    /// Out of the reboot and health check: the finish, or the failure.
    fn checked(&mut self, next: Next<Reboot, Checked>) -> Step {
        self.enter(next, Phase::Reboot, |m, to| match to {
            Checked::Passed => {
                let next = Finish::uncordon(&m.run, &mut m.seen, Vec::new());
                m.finished(next)
            }
            Checked::Failed(failure) => m.rolled_back(failure),
        })
    }

    /// Out of the finish: into the soak.
    fn finished(&mut self, next: Next<Finish, Soaking>) -> Step {
        self.enter(next, Phase::Finish, |m, Soaking| {
            m.soaked(Soak::watch(&m.seen, Vec::new()))
        })
    }

    /// Out of the soak: it broke, and can be rolled back.
    fn soaked(&mut self, next: Next<Soak, Broke>) -> Step {
        self.enter(next, Phase::Soak, |m, Broke(failure)| {
            m.rolled_back(failure)
        })
    }

    /// A failure after the host upgrade was launched: rolled back, or failed.
    fn rolled_back(&mut self, failure: Failure) -> Step {
        let next = rollback::failed_or_rolled_back(&self.run, &mut self.seen, failure);
        self.enter(next, Phase::Rollback, |_, never| match never {})
    }

    /// A sub-machine's answer: it stays in charge (`phase` of its state), hands the node on
    /// (`leave`, its marks told first), or ends it.
    fn enter<S, X>(
        &mut self,
        next: Next<S, X>,
        phase: impl FnOnce(S) -> Phase,
        leave: impl FnOnce(&mut Self, X) -> Step,
    ) -> Step {
        match next {
            Next::Stay(state, marks, intent) => self.go(phase(state), marks, intent),
            Next::Leave(mut marks, to) => {
                let mut step = leave(self, to);
                marks.append(&mut step.marks);
                step.marks = marks;
                step
            }
            Next::Finish(marks, result) => self.end(marks, result),
        }
    }

    fn internal(&mut self, step: UpgradeStep, what: &str) -> Step {
        let failure = Failure::new(step, FailureKind::Internal, format!("internal: {what}"));
        self.end(Vec::new(), NodeResult::Failed(failure))
    }

    fn go(&mut self, phase: Phase, marks: Vec<Mark>, mut intent: Intent) -> Step {
        if let Intent::Patch { changes, .. } | Intent::Guarded { changes, .. } = &mut intent {
            self.seen.fence_with_record(changes);
        }
        self.phase = phase;
        Step { marks, intent }
    }

    fn end(&mut self, marks: Vec<Mark>, result: NodeResult) -> Step {
        self.phase = Phase::Over;
        Step {
            marks,
            intent: Intent::Done(result),
        }
    }

    /// The step the machine is at.
    pub fn current_step(&self) -> UpgradeStep {
        match &self.phase {
            Phase::Prepare(prepare) => prepare.at(),
            Phase::Host(_) => UpgradeStep::Upgrade,
            Phase::Reboot(reboot) => reboot.at(),
            Phase::Finish(_) | Phase::Over => UpgradeStep::Uncordon,
            Phase::Soak(_) => UpgradeStep::Soak,
            Phase::Rollback(_) => UpgradeStep::Rollback,
            Phase::Blocked(_) => UpgradeStep::Drain,
        }
    }

    /// The step this machine starts once the write at hand lands, with nothing between but
    /// requests and, after the host Job's record, that Job's delete: the Upgrade after the
    /// launch record, the Reboot after a successful host Job's record. Its condition can go
    /// in that write (the driver's hands send it there). `None` elsewhere.
    pub fn starts_after_write(&self) -> Option<UpgradeStep> {
        match &self.phase {
            Phase::Prepare(prepare) if prepare.launching() => Some(UpgradeStep::Upgrade),
            Phase::Host(host) if host.recording_success() => Some(UpgradeStep::Reboot),
            _ => None,
        }
    }
}

/// The machine as the engine's executor drives it ([`nodejob_roll::Context::drive`]).
impl nodejob_roll::Machine for NodeMachine {
    type Step = UpgradeStep;
    type Own = Own;
    type Intent = Intent;
    type Observation = Observation;

    fn at(&self) -> UpgradeStep {
        self.current_step()
    }

    fn now(&mut self, now: String) {
        self.set_now(now);
    }

    fn step(&mut self, obs: Observation) -> Step {
        NodeMachine::step(self, obs)
    }
}
