//! The run state machine, sans-IO: [`Machine`], the root that owns the run's three
//! sub-machines, one at a time, and delegates each observation to the one in charge.
//!
//! A [`Machine`] takes [`Observation`]s (the answer to the last intent, with the backend's
//! current time) and returns a [`Step`]: notes for the operator and exactly one [`Intent`]. It
//! never awaits, reads no clock and talks to no cluster, so every race is a row in a table test.
//!
//! ```text
//!  guard (guard.rs) ──name free──▶ ours (ours.rs) ──finished──▶ result (result.rs) ──▶ done
//!  the stale Job: inspect,          create, wait (event-          its Pod, exit code, log;
//!  delete exactly, wait it out      driven, bounded), its node    delete ours if it succeeded
//!        ▲                              │
//!        └──── name taken ──────────────┘  (created unguarded: Policy::known_free)
//! ```
//!
//! The root itself does only what is the same in every phase: it repeats an intent after a
//! transient failure, with capped backoff (or after the server's `Retry-After`, when it is
//! longer: [`crate::ApiError::retry_pause`]), as the phase in charge allows ([`Retries`]), and
//! passes the failure on to it when it does not.

use std::time::Duration;

use super::context::{Next, Retries, Run, rv_of, uid_of};
use super::guard::{Cleared, Guard};
use super::ours::{Left, Ours};
use super::protocol::{Intent, Mode, Observation, Policy, Report, Step};
use super::result::{Reading, Step as ReadingStep};
use crate::build;
use crate::error::Result;
use crate::spec::{Level, Note, Spec};
use crate::status::finished;

/// First backoff after a transient failure; doubles up to [`BACKOFF_CAP`].
const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// Longest backoff between retries.
const BACKOFF_CAP: Duration = Duration::from_secs(5);

/// The pause before retry number `attempt` (0-based) of a transient failure: 250ms doubling,
/// capped at 5s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    BACKOFF_BASE
        .saturating_mul(1 << attempt.min(16))
        .min(BACKOFF_CAP)
}

/// The run state machine for one [`Spec`]. See the module docs.
#[derive(Debug)]
pub struct Machine {
    run: Run,
    phase: Phase,
    /// The intent in flight, to repeat after a backoff.
    pending: Option<Intent>,
    /// Consecutive transient failures of it.
    retries: u32,
}

/// The sub-machine in charge; each holds the data of its own phase.
#[derive(Debug)]
enum Phase {
    /// An earlier run's Job of our name.
    Guard(Guard),
    /// Ours, from its creation until it finishes.
    Ours(Ours),
    /// Ours has finished: its result.
    Result(Reading),
    /// Finished.
    Done,
}

impl Machine {
    /// A machine for `spec` (already validated) in `mode`, starting at `now`, with the default
    /// [`Policy`].
    pub fn new(spec: &Spec, mode: Mode, now: Duration) -> Self {
        Machine::with_policy(spec, mode, now, Policy::default())
    }

    /// A machine for `spec` (already validated) in `mode`, starting at `now`, that treats an
    /// earlier Job and its own as `policy` says.
    pub fn with_policy(spec: &Spec, mode: Mode, now: Duration, policy: Policy) -> Self {
        let run = Run {
            job: spec.job_ref(),
            container: spec.container.clone(),
            mode,
            bound: spec.wait_bound(),
            desired: build(spec),
            policy,
        };
        let guard = Guard::new(&run, now);
        // The caller read the name free: ours is created at once, the guard's bound on it.
        let phase = if run.policy.known_free && run.policy.adopt.is_none() {
            Phase::Ours(Ours::create(&run, guard.deadline(), false).0)
        } else {
            Phase::Guard(guard)
        };
        Machine {
            phase,
            run,
            pending: None,
            retries: 0,
        }
    }

    /// The first step: read the Job of our name, or, when the caller read it free
    /// ([`Policy::known_free`]), create ours.
    pub fn start(&mut self) -> Step {
        let intent = match &self.phase {
            Phase::Ours(_) => Intent::CreateJob(Box::new(self.run.desired.clone())),
            _ => Intent::GetJob,
        };
        self.issue(Vec::new(), intent)
    }

    /// Takes the answer to the last intent at time `now`, returns what to do next.
    pub fn step(&mut self, now: Duration, obs: Observation) -> Step {
        match &obs {
            // Repeat what failed, with a wait timeout recomputed for the time now.
            Observation::Slept => return self.repeat(now),
            Observation::Failed(e) if e.is_retryable() => {
                if let Some(step) = self.retry(now, e.retry_pause(backoff(self.retries))) {
                    return step;
                }
                // Not retried: the phase takes the failure as its answer.
            }
            Observation::Failed(_) => {}
            _ => self.retries = 0,
        }
        let run = &self.run;
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Guard(guard) => match guard.step(run, now, obs) {
                Next::Stay(guard, notes, intent) => self.go(Phase::Guard(guard), notes, intent),
                Next::Leave(Cleared::Free { deadline }) => {
                    let (ours, intent) = Ours::create(run, deadline, true);
                    self.go(Phase::Ours(ours), Vec::new(), intent)
                }
                Next::Leave(Cleared::Adopted(job)) if finished(&job) => {
                    let (uid, rv) = (uid_of(&job), rv_of(&job));
                    let note = run.note(
                        Level::Info,
                        format!("adopted {} (uid {uid}), which has finished", run.job),
                    );
                    let step = Reading::start(run, uid, rv, job, false, None, None);
                    self.read(vec![note], step)
                }
                Next::Leave(Cleared::Adopted(job)) => match Ours::adopted(run, now, job) {
                    Next::Stay(ours, notes, intent) => self.go(Phase::Ours(ours), notes, intent),
                    Next::Leave(_) | Next::Finish(..) => {
                        let err = self.run.internal("adopting a running job");
                        self.finish(Vec::new(), Err(err))
                    }
                },
                Next::Finish(notes, outcome) => self.finish(notes, outcome),
            },
            Phase::Ours(ours) => match ours.step(run, now, obs) {
                Next::Stay(ours, notes, intent) => self.go(Phase::Ours(ours), notes, intent),
                Next::Leave(Left::Finished(done)) => {
                    let step = Reading::start(
                        run,
                        done.uid,
                        done.rv,
                        done.job,
                        done.pod_deleted,
                        done.pod,
                        done.log,
                    );
                    self.read(Vec::new(), step)
                }
                Next::Leave(Left::Taken { deadline }) => {
                    let guard = Guard::until(deadline);
                    self.go(Phase::Guard(guard), Vec::new(), Intent::GetJob)
                }
                Next::Finish(notes, outcome) => self.finish(notes, outcome),
            },
            Phase::Result(reading) => {
                let step = reading.step(run, obs);
                self.read(Vec::new(), step)
            }
            Phase::Done => {
                let err = self.run.internal("step after the run ended");
                self.finish(Vec::new(), Err(err))
            }
        }
    }

    /// A backoff is over: the failed intent again.
    fn repeat(&mut self, now: Duration) -> Step {
        match self.pending.take() {
            Some(Intent::WaitJob { since, .. }) => {
                let timeout = match &self.phase {
                    Phase::Guard(guard) => guard.wait_timeout(now),
                    Phase::Ours(ours) => ours.wait_timeout(now),
                    Phase::Result(_) | Phase::Done => Duration::ZERO,
                };
                self.issue(Vec::new(), Intent::WaitJob { since, timeout })
            }
            Some(intent) => self.issue(Vec::new(), intent),
            None => {
                let err = self.run.internal("slept with nothing to retry");
                self.finish(Vec::new(), Err(err))
            }
        }
    }

    /// Backs off for `pause` (the backoff, or longer when the server said `Retry-After`)
    /// before repeating the intent that failed transiently, if the phase allows; `None` when it
    /// does not.
    fn retry(&mut self, now: Duration, pause: Duration) -> Option<Step> {
        self.retries += 1;
        let retries = match &mut self.phase {
            Phase::Guard(guard) => guard.retries(),
            Phase::Ours(ours) => {
                ours.retrying();
                ours.retries()
            }
            Phase::Result(reading) => reading.retries(),
            Phase::Done => Retries::Never,
        };
        let allowed = match retries {
            // Inside the wait bound: the backoff must end before the deadline.
            Retries::Until(deadline) => now.saturating_add(pause) < deadline,
            Retries::Times(n) => self.retries <= n,
            Retries::Never => false,
        };
        // A wait's own retry is the next wait: the backend resumed it already, or could not.
        allowed.then(|| Step {
            notes: Vec::new(),
            intent: Intent::Sleep(pause),
        })
    }

    /// The reading's step, after `notes`.
    fn read(&mut self, mut notes: Vec<Note>, step: ReadingStep) -> Step {
        match step {
            Next::Stay(reading, more, intent) => {
                notes.extend(more);
                self.go(Phase::Result(reading), notes, intent)
            }
            Next::Leave(never) => match never {},
            Next::Finish(more, outcome) => {
                notes.extend(more);
                self.finish(notes, outcome)
            }
        }
    }

    fn go(&mut self, phase: Phase, notes: Vec<Note>, intent: Intent) -> Step {
        self.phase = phase;
        self.issue(notes, intent)
    }

    fn issue(&mut self, notes: Vec<Note>, intent: Intent) -> Step {
        self.pending = Some(intent.clone());
        Step { notes, intent }
    }

    fn finish(&mut self, notes: Vec<Note>, outcome: Result<Report>) -> Step {
        self.phase = Phase::Done;
        self.pending = None;
        Step {
            notes,
            intent: Intent::Finish(outcome),
        }
    }
}
