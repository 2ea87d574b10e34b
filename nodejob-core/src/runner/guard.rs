//! The stale-Job guard: before creating ours, a Job of our name from an earlier run is
//! inspected, and deleted exactly once it has finished; one still running is waited for, never
//! killed; one being deleted is waited out.
//!
//! ```text
//!  Inspect ──none──────────────────────────────────────────▶ (the name is free)
//!     │ finished ─▶ Deleting ──accepted──▶ Going ──gone─────▶ (the name is free)
//!     │ deleting ─────────────────────────▶ Going
//!     └ running ──▶ Running ──finished──▶ Deleting
//! ```
//!
//! Every wait is bounded by the guard's deadline, counted from the run's start.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;

use super::context::{Next, Retries, Run, exact, rv_of, uid_of};
use super::protocol::{Intent, Observation};
use crate::api::{ApiResult, Change};
use crate::error::{Action, ObjectKind};
use crate::job_node;
use crate::spec::{Level, Note};
use crate::status::finished;

/// Precondition conflicts on one earlier Job's own status churn before giving up on deleting it.
const CONFLICT_RETRIES: u32 = 3;

/// What the guard waits for while an earlier Job runs.
const STILL_RUNNING: &str = "an earlier job to finish (it is still running and was left in place)";
/// What the guard waits for while an earlier Job is being deleted.
const BEING_DELETED: &str = "an earlier job to be deleted";

/// The guard is done.
#[derive(Debug)]
pub(super) enum Cleared {
    /// The name is free, and ours may be created. The guard's deadline bounds the create's
    /// retries.
    Free {
        /// The guard's deadline.
        deadline: Duration,
    },
    /// The earlier Job the policy adopts ([`Policy::adopt`](super::Policy::adopt)) is there:
    /// it is ours now.
    Adopted(Box<Job>),
}

/// The guard, waiting for the answer to one intent.
#[derive(Debug)]
pub(super) struct Guard {
    /// When the guard's wait bound runs out: the run's start plus the bound.
    deadline: Duration,
    at: At,
}

/// Where the guard is, with what that place needs.
#[derive(Debug)]
enum At {
    /// Reading the Job of our name.
    Inspect {
        /// After a delete precondition conflict: the UID the reading must find (another is
        /// another actor's Job), and the conflicts so far.
        after_conflict: Option<(String, u32)>,
    },
    /// An earlier run's Job is still running: waiting for it to finish, never killing it.
    Running { uid: String, rv: Option<String> },
    /// Deleting an earlier run's finished Job exactly.
    Deleting {
        uid: String,
        rv: Option<String>,
        conflicts: u32,
    },
    /// Waiting for an earlier run's Job to be gone.
    Going { uid: String, rv: Option<String> },
}

impl Guard {
    /// The guard of a run started at `now`, about to read the Job of our name
    /// ([`Intent::GetJob`]).
    pub(super) fn new(run: &Run, now: Duration) -> Guard {
        Guard::until(now.saturating_add(run.bound))
    }

    /// The guard of a run whose first create met a Job of its name
    /// ([`Policy::known_free`](super::Policy::known_free)), about to read it
    /// ([`Intent::GetJob`]), bounded by the run's `deadline`.
    pub(super) fn until(deadline: Duration) -> Guard {
        Guard {
            deadline,
            at: At::Inspect {
                after_conflict: None,
            },
        }
    }

    /// When the guard's bound runs out.
    pub(super) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Takes the answer to the guard's last intent.
    pub(super) fn step(mut self, run: &Run, now: Duration, obs: Observation) -> Step {
        let reading = At::Inspect {
            after_conflict: None,
        };
        match std::mem::replace(&mut self.at, reading) {
            At::Inspect { after_conflict } => self.on_inspect(run, now, after_conflict, obs),
            At::Running { uid, rv } => self.on_running(run, now, uid, rv, obs),
            At::Deleting { uid, rv, conflicts } => {
                self.on_deleting(run, now, uid, rv, conflicts, obs)
            }
            At::Going { uid, rv } => self.on_going(run, now, uid, rv, obs),
        }
    }

    /// How a transient failure may be retried: within the guard's bound.
    pub(super) fn retries(&self) -> Retries {
        Retries::Until(self.deadline)
    }

    /// The timeout of a wait issued at `now`: the rest of the bound.
    pub(super) fn wait_timeout(&self, now: Duration) -> Duration {
        self.deadline.saturating_sub(now)
    }

    fn go(self, at: At, notes: Vec<Note>, intent: Intent) -> Step {
        Next::Stay(
            Guard {
                deadline: self.deadline,
                at,
            },
            notes,
            intent,
        )
    }

    fn on_inspect(
        self,
        run: &Run,
        now: Duration,
        after_conflict: Option<(String, u32)>,
        obs: Observation,
    ) -> Step {
        match obs {
            Observation::Job(job) => match after_conflict {
                Some((uid, _)) if uid != uid_of(&job) => Next::fail(run.contended(format!(
                    "the earlier job (uid {uid}) was replaced by uid {} between our inspection \
                     and our delete",
                    uid_of(&job)
                ))),
                // The same Job, its status touched: judged again, its conflicts counted on.
                Some((_, conflicts)) => self.judge(run, now, job, conflicts),
                None => self.judge(run, now, job, 0),
            },
            Observation::Failed(e) if e.is_not_found() => match &run.policy.adopt {
                Some(uid) => Next::fail(run.vanished(uid, "was deleted".to_string())),
                None => self.free(),
            },
            other => run.unexpected(other, Action::Reading, ObjectKind::Job),
        }
    }

    /// Decides what to do with a Job of our name that we did not create.
    fn judge(self, run: &Run, now: Duration, job: Box<Job>, conflicts: u32) -> Step {
        let (uid, rv) = (uid_of(&job), rv_of(&job));
        if let Some(adopt) = &run.policy.adopt {
            // The caller started this Job and recorded it: its result is the answer, whatever
            // it is. Replacing it would run its host operation a second time.
            return if *adopt != uid {
                Next::fail(run.vanished(adopt, format!("was replaced by uid {uid}")))
            } else if job.metadata.deletion_timestamp.is_some() {
                Next::fail(run.vanished(adopt, "is being deleted".to_string()))
            } else {
                Next::Leave(Cleared::Adopted(job))
            };
        }
        let what = describe(&job);
        let timeout = self.wait_timeout(now);
        if job.metadata.deletion_timestamp.is_some() {
            let note = run.note(
                Level::Info,
                format!("an earlier {what} (uid {uid}) is being deleted; waiting for it to go"),
            );
            let since = rv.clone();
            self.go(
                At::Going { uid, rv },
                vec![note],
                Intent::WaitJob { since, timeout },
            )
        } else if finished(&job) {
            let note = run.note(
                Level::Warn,
                format!("replacing an earlier {what} (uid {uid}) that has finished"),
            );
            let delete = Intent::DeleteJob(exact(uid.clone(), rv.clone()));
            self.go(At::Deleting { uid, rv, conflicts }, vec![note], delete)
        } else {
            let note = run.note(
                Level::Warn,
                format!(
                    "an earlier {what} (uid {uid}) is still running on node {}; waiting for it \
                     to finish rather than killing a host operation",
                    job_node(&job, "").unwrap_or("?")
                ),
            );
            let since = rv.clone();
            self.go(
                At::Running { uid, rv },
                vec![note],
                Intent::WaitJob { since, timeout },
            )
        }
    }

    fn on_running(
        self,
        run: &Run,
        now: Duration,
        uid: String,
        rv: Option<String>,
        obs: Observation,
    ) -> Step {
        match obs {
            Observation::Changed(Change::Applied(job)) => {
                if uid_of(&job) != uid {
                    return Next::fail(run.contended(format!(
                        "the earlier job (uid {uid}) was replaced by uid {} while we waited",
                        uid_of(&job)
                    )));
                }
                if job.metadata.deletion_timestamp.is_some() || finished(&job) {
                    return self.judge(run, now, job, 0);
                }
                let rv = rv_of(&job);
                self.rewait(run, now, At::Running { uid, rv }, STILL_RUNNING, None)
            }
            Observation::Changed(Change::Deleted(job)) if uid_of(&job) == uid => self.free(),
            // Another object of that name came and went: look again.
            Observation::Changed(Change::Deleted(_)) => self.reinspect(),
            Observation::Changed(Change::TimedOut) => {
                self.rewait(run, now, At::Running { uid, rv }, STILL_RUNNING, None)
            }
            Observation::TimedOut(node) => {
                let at = At::Running { uid, rv };
                self.rewait(run, now, at, STILL_RUNNING, Some(&node))
            }
            Observation::Failed(e) if e.is_gone() => self.reinspect(),
            other => run.unexpected(other, Action::Watching, ObjectKind::Job),
        }
    }

    fn on_deleting(
        self,
        run: &Run,
        now: Duration,
        uid: String,
        rv: Option<String>,
        conflicts: u32,
        obs: Observation,
    ) -> Step {
        match obs {
            Observation::Deleted => {
                let since = rv.clone();
                let timeout = self.wait_timeout(now);
                self.go(
                    At::Going { uid, rv },
                    Vec::new(),
                    Intent::WaitJob { since, timeout },
                )
            }
            // Someone else removed it: nothing of ours to wait for. Create refuses if a new one
            // took the name meanwhile.
            Observation::Failed(e) if e.is_not_found() => self.free(),
            // The precondition failed: read it again. Another UID means another actor's Job,
            // which we leave alone; the same UID only had its status touched (the Job controller
            // still writes to a finished Job), so the inspection is repeated, not skipped.
            Observation::Failed(e) if e.is_conflict() => {
                let conflicts = conflicts + 1;
                if conflicts > CONFLICT_RETRIES {
                    return Next::fail(run.contended(format!(
                        "deleting the earlier job (uid {uid}) kept conflicting: {e}"
                    )));
                }
                let at = At::Inspect {
                    after_conflict: Some((uid, conflicts)),
                };
                self.go(at, Vec::new(), Intent::GetJob)
            }
            other => run.unexpected(other, Action::Deleting, ObjectKind::Job),
        }
    }

    fn on_going(
        self,
        run: &Run,
        now: Duration,
        uid: String,
        rv: Option<String>,
        obs: Observation,
    ) -> Step {
        match obs {
            Observation::Changed(Change::Applied(job)) => {
                if uid_of(&job) != uid {
                    return Next::fail(run.contended(format!(
                        "a new job (uid {}) took the name while the earlier one (uid {uid}) was \
                         being deleted",
                        uid_of(&job)
                    )));
                }
                let rv = rv_of(&job);
                self.rewait(run, now, At::Going { uid, rv }, BEING_DELETED, None)
            }
            Observation::Changed(Change::Deleted(job)) if uid_of(&job) == uid => self.free(),
            Observation::Changed(Change::Deleted(_)) => self.reinspect(),
            Observation::Changed(Change::TimedOut) => {
                self.rewait(run, now, At::Going { uid, rv }, BEING_DELETED, None)
            }
            Observation::TimedOut(node) => {
                let at = At::Going { uid, rv };
                self.rewait(run, now, at, BEING_DELETED, Some(&node))
            }
            Observation::Failed(e) if e.is_gone() => self.reinspect(),
            other => run.unexpected(other, Action::Watching, ObjectKind::Job),
        }
    }

    /// Waits on in `at`, or times out waiting for `what` at the deadline, with what a timed-out
    /// wait learnt of the node.
    fn rewait(
        self,
        run: &Run,
        now: Duration,
        at: At,
        what: &str,
        node: Option<&ApiResult<Box<Node>>>,
    ) -> Step {
        if now >= self.deadline {
            return Next::fail(run.timeout(format!("{what}{}", run.node_state(node))));
        }
        let since = match &at {
            At::Running { rv, .. } | At::Going { rv, .. } => rv.clone(),
            At::Inspect { .. } | At::Deleting { .. } => None,
        };
        let timeout = self.wait_timeout(now);
        self.go(at, Vec::new(), Intent::WaitJob { since, timeout })
    }

    /// The name is free: leave for ours.
    fn free(&self) -> Step {
        Next::Leave(Cleared::Free {
            deadline: self.deadline,
        })
    }

    fn reinspect(self) -> Step {
        let at = At::Inspect {
            after_conflict: None,
        };
        self.go(at, Vec::new(), Intent::GetJob)
    }
}

/// The guard's answer to an observation.
pub(super) type Step = Next<Guard, Cleared>;

fn describe(job: &Job) -> String {
    format!(
        "job {}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    )
}
