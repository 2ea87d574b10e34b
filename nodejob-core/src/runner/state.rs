//! The run state machine, sans-IO.
//!
//! A [`Machine`] takes [`Observation`]s (the answer to the last intent, with the backend's
//! current time) and returns a [`Step`]: notes for the operator and exactly one [`Intent`]. It
//! never awaits, reads no clock and talks to no cluster, so every race is a row in a table test.
//!
//! ```text
//!  Inspect ──none──────────────────────────────────────────────▶ Create ──▶ Wait ──▶ Pods ─┬─▶ Log ─┬─▶ DeleteOurs ─▶ done
//!     │ finished ─▶ DeleteStale ─▶ StaleGone ──gone────────────▶   ▲         │ FailedCreate?        └─▶ done (failed: left in place)
//!     │ deleting ─────────────────▶ StaleGone                      │         └─▶ Events
//!     └ running ──▶ StaleWait ──finished──▶ DeleteStale            │
//! ```

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;

use crate::error::{ApiError, Error, JobRef, Result};
use crate::spec::{Level, Note, Spec};
use crate::status::{condition, failed, finished, succeeded};
use crate::{CONTROLLER_UID_LABEL, Change, NODE_ANNOTATION, POLL_INTERVAL, build};

/// What a run reports: which runner function asked decides how much of it is filled.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// [`crate::run`]: success or an error; a failed Job is an error.
    Run,
    /// [`crate::run_exit_code`]: the container's exit code.
    ExitCode,
    /// [`crate::run_exit_code_logs`]: the exit code and the log.
    ExitCodeLogs,
}

/// How a Job ended, as far as the mode asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The container's exit code: 0 when the Job succeeded.
    pub exit_code: i32,
    /// The container's log, in [`Mode::ExitCodeLogs`].
    pub log: Option<String>,
}

/// One action for the async loop to perform on the Job the spec names.
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    /// `get_job(namespace, name)`.
    GetJob,
    /// `create_job(job)`.
    CreateJob(Box<Job>),
    /// `delete_job(namespace, name, Some(preconditions))`: always exact.
    DeleteJob(Preconditions),
    /// `wait_job(namespace, name, since, timeout)`.
    WaitJob {
        /// The resourceVersion last seen.
        since: Option<String>,
        /// How long to wait at most.
        timeout: Duration,
    },
    /// `list_pods(namespace, selector)`.
    ListPods {
        /// `batch.kubernetes.io/controller-uid=<uid>`.
        selector: String,
    },
    /// `pod_log(namespace, pod, container)`.
    ReadLog {
        /// The Pod's name.
        pod: String,
    },
    /// `list_events(namespace, uid)`.
    ListEvents {
        /// The Job's UID.
        uid: String,
    },
    /// Back off before retrying a transient failure.
    Sleep(Duration),
    /// The run is over.
    Finish(Result<Report>),
}

/// The answer to the last [`Intent`].
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    /// `GetJob` or `CreateJob` answered with this Job.
    Job(Box<Job>),
    /// `DeleteJob` was accepted.
    Deleted,
    /// `WaitJob` saw this.
    Changed(Change<Box<Job>>),
    /// `ListPods` answered.
    Pods(Vec<Pod>),
    /// `ReadLog` answered.
    Log(String),
    /// `ListEvents` answered.
    Events(Vec<Event>),
    /// `Sleep` is over.
    Slept,
    /// The last intent's API call failed.
    Failed(ApiError),
}

/// What the machine wants next: notes for the operator, then one intent.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Progress and warnings, in order, before the intent.
    pub notes: Vec<Note>,
    /// The one thing to do.
    pub intent: Intent,
}

/// Where the machine is. Each variant is waiting for the answer to one intent.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    /// Read the Job of our name before creating one.
    Inspect,
    /// An earlier run's Job is still running: wait for it to finish, never kill it.
    StaleWait { uid: String },
    /// Deleting an earlier run's finished Job exactly.
    DeleteStale { uid: String },
    /// Waiting for an earlier run's Job to be gone.
    StaleGone { uid: String },
    /// Creating ours.
    Create,
    /// A create failed in a way that may have created it after all: is the Job there ours?
    CheckCreate,
    /// Waiting for ours to finish.
    Wait,
    /// Re-reading ours after its watch expired.
    Reread,
    /// Looking for `FailedCreate` on ours.
    Events,
    /// Finding our Job's Pod and its exit code.
    Pods,
    /// Reading our Job's log.
    Log,
    /// Deleting ours (succeeded) exactly.
    DeleteOurs,
    /// Re-reading ours after a delete precondition conflict.
    RereadForDelete,
    /// Finished.
    Done,
}

/// Consecutive transient failures allowed once the Job has finished and only reading and
/// cleaning up remain (no wait bound applies there).
const POST_FINISH_RETRIES: u32 = 5;
/// Transient failures reading the log before it is reported unread.
const LOG_RETRIES: u32 = 2;
/// Precondition conflicts on one Job's own status churn before giving up on deleting it.
const CONFLICT_RETRIES: u32 = 3;
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
    job: Box<JobRef>,
    container: String,
    mode: Mode,
    bound: Duration,
    /// The Job we create: built once, so every retry creates the same object.
    desired: Job,
    phase: Phase,
    /// The intent in flight, to repeat after a backoff.
    pending: Option<Intent>,
    /// When the current phase's wait bound runs out: the guard's from the start, ours from create.
    deadline: Duration,
    /// Consecutive transient failures.
    retries: u32,
    /// Precondition conflicts seen on one delete.
    conflicts: u32,
    /// A create attempt failed in a way that does not say whether it happened.
    create_uncertain: bool,
    /// False once listing events was forbidden: the fast FailedCreate check is then skipped.
    events_allowed: bool,
    /// Ours, once created: its UID, last resourceVersion and last state.
    uid: Option<String>,
    rv: Option<String>,
    last: Option<Box<Job>>,
    /// The stale Job's last resourceVersion.
    stale_rv: Option<String>,
    /// After a delete precondition conflict: the UID the re-inspection must find, or contend.
    expect_uid: Option<String>,
    /// The result, once known.
    exit_code: i32,
    log: Option<String>,
}

impl Machine {
    /// A machine for `spec` (already validated) in `mode`, starting at `now`.
    pub fn new(spec: &Spec, mode: Mode, now: Duration) -> Self {
        let bound = spec.wait_bound();
        Machine {
            job: spec.job_ref(),
            container: spec.container.clone(),
            mode,
            bound,
            desired: build(spec),
            phase: Phase::Inspect,
            pending: None,
            deadline: now.saturating_add(bound),
            retries: 0,
            conflicts: 0,
            create_uncertain: false,
            events_allowed: true,
            uid: None,
            rv: None,
            last: None,
            stale_rv: None,
            expect_uid: None,
            exit_code: 0,
            log: None,
        }
    }

    /// The first step: read the Job of our name.
    pub fn start(&mut self) -> Step {
        self.phase = Phase::Inspect;
        self.issue(Vec::new(), Intent::GetJob)
    }

    /// Takes the answer to the last intent at time `now`, returns what to do next.
    pub fn step(&mut self, now: Duration, obs: Observation) -> Step {
        if let Observation::Slept = obs {
            // Repeat what failed, with a wait timeout recomputed for the time now.
            return match self.pending.take() {
                Some(Intent::WaitJob { since, .. }) => {
                    let timeout = self.wait_timeout(now);
                    self.issue(Vec::new(), Intent::WaitJob { since, timeout })
                }
                Some(intent) => self.issue(Vec::new(), intent),
                None => self.finish(
                    Vec::new(),
                    Err(self.internal("slept with nothing to retry")),
                ),
            };
        }
        if let Observation::Failed(err) = &obs {
            if err.is_retryable() {
                return self.retry(now, err.clone());
            }
        } else {
            self.retries = 0;
        }
        match self.phase.clone() {
            Phase::Inspect => self.on_inspect(now, obs),
            Phase::StaleWait { uid } => self.on_stale_wait(now, uid, obs),
            Phase::DeleteStale { uid } => self.on_delete_stale(now, uid, obs),
            Phase::StaleGone { uid } => self.on_stale_gone(now, uid, obs),
            Phase::Create => self.on_create(now, obs),
            Phase::CheckCreate => self.on_check_create(now, obs),
            Phase::Wait => self.on_wait(now, obs),
            Phase::Reread => self.on_reread(now, obs),
            Phase::Events => self.on_events(now, obs),
            Phase::Pods => self.on_pods(obs),
            Phase::Log => self.on_log(obs),
            Phase::DeleteOurs => self.on_delete_ours(obs),
            Phase::RereadForDelete => self.on_reread_for_delete(obs),
            Phase::Done => self.finish(Vec::new(), Err(self.internal("step after the run ended"))),
        }
    }

    // --- the guard: an earlier run's Job of the same name -------------------------------------

    fn on_inspect(&mut self, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Job(job) => match self.expect_uid.take() {
                Some(uid) if uid != uid_of(&job) => self.contended(format!(
                    "the earlier job (uid {uid}) was replaced by uid {} between our inspection \
                     and our delete",
                    uid_of(&job)
                )),
                _ => self.judge_stale(now, job, Vec::new()),
            },
            Observation::Failed(e) if e.is_not_found() => self.create(Vec::new()),
            other => self.unexpected(other, "reading"),
        }
    }

    /// Decides what to do with a Job of our name that we did not create.
    fn judge_stale(&mut self, now: Duration, job: Box<Job>, mut notes: Vec<Note>) -> Step {
        let uid = uid_of(&job);
        let rv = rv_of(&job);
        self.stale_rv = rv.clone();
        let what = describe(&job);
        if job.metadata.deletion_timestamp.is_some() {
            notes.push(self.note(
                Level::Info,
                format!("an earlier {what} (uid {uid}) is being deleted; waiting for it to go"),
            ));
            self.phase = Phase::StaleGone { uid };
            let timeout = self.guard_timeout(now);
            self.issue(notes, Intent::WaitJob { since: rv, timeout })
        } else if finished(&job) {
            notes.push(self.note(
                Level::Warn,
                format!("replacing an earlier {what} (uid {uid}) that has finished"),
            ));
            self.conflicts = 0;
            self.phase = Phase::DeleteStale { uid: uid.clone() };
            self.issue(notes, Intent::DeleteJob(exact(uid, rv)))
        } else {
            notes.push(self.note(
                Level::Warn,
                format!(
                    "an earlier {what} (uid {uid}) is still running on node {}; waiting for it \
                     to finish rather than killing a host operation",
                    crate::job_node(&job, "").unwrap_or("?")
                ),
            ));
            self.phase = Phase::StaleWait { uid };
            let timeout = self.guard_timeout(now);
            self.issue(notes, Intent::WaitJob { since: rv, timeout })
        }
    }

    fn on_stale_wait(&mut self, now: Duration, uid: String, obs: Observation) -> Step {
        match obs {
            Observation::Changed(Change::Applied(job)) => {
                if uid_of(&job) != uid {
                    return self.contended(format!(
                        "the earlier job (uid {uid}) was replaced by uid {} while we waited",
                        uid_of(&job)
                    ));
                }
                if job.metadata.deletion_timestamp.is_some() || finished(&job) {
                    return self.judge_stale(now, job, Vec::new());
                }
                self.stale_rv = rv_of(&job);
                self.rewait_stale(
                    now,
                    "an earlier job to finish (it is still running and was left in place)",
                )
            }
            Observation::Changed(Change::Deleted(job)) if uid_of(&job) == uid => {
                self.create(Vec::new())
            }
            // Another object of that name came and went: look again.
            Observation::Changed(Change::Deleted(_)) => self.reinspect(),
            Observation::Changed(Change::TimedOut) => self.rewait_stale(
                now,
                "an earlier job to finish (it is still running and was left in place)",
            ),
            Observation::Failed(e) if e.is_gone() => self.reinspect(),
            other => self.unexpected(other, "watching"),
        }
    }

    fn on_delete_stale(&mut self, now: Duration, uid: String, obs: Observation) -> Step {
        match obs {
            Observation::Deleted => {
                self.phase = Phase::StaleGone { uid };
                let timeout = self.guard_timeout(now);
                let since = self.stale_rv.clone();
                self.issue(Vec::new(), Intent::WaitJob { since, timeout })
            }
            // Someone else removed it: nothing of ours to wait for. Create refuses if a new one
            // took the name meanwhile.
            Observation::Failed(e) if e.is_not_found() => self.create(Vec::new()),
            // The precondition failed: read it again. Another UID means another actor's Job,
            // which we leave alone; the same UID only had its status touched (the Job controller
            // still writes to a finished Job), so the inspection is repeated, not skipped.
            Observation::Failed(e) if e.is_conflict() => {
                self.conflicts += 1;
                if self.conflicts > CONFLICT_RETRIES {
                    return self.contended(format!(
                        "deleting the earlier job (uid {uid}) kept conflicting: {e}"
                    ));
                }
                self.phase = Phase::Inspect;
                self.expect_uid = Some(uid);
                self.issue(Vec::new(), Intent::GetJob)
            }
            other => self.unexpected(other, "deleting"),
        }
    }

    fn on_stale_gone(&mut self, now: Duration, uid: String, obs: Observation) -> Step {
        match obs {
            Observation::Changed(Change::Applied(job)) => {
                if uid_of(&job) != uid {
                    return self.contended(format!(
                        "a new job (uid {}) took the name while the earlier one (uid {uid}) was being deleted",
                        uid_of(&job)
                    ));
                }
                self.stale_rv = rv_of(&job);
                self.rewait_stale(now, "an earlier job to be deleted")
            }
            Observation::Changed(Change::Deleted(job)) if uid_of(&job) == uid => {
                self.create(Vec::new())
            }
            Observation::Changed(Change::Deleted(_)) => self.reinspect(),
            Observation::Changed(Change::TimedOut) => {
                self.rewait_stale(now, "an earlier job to be deleted")
            }
            Observation::Failed(e) if e.is_gone() => self.reinspect(),
            other => self.unexpected(other, "watching"),
        }
    }

    fn rewait_stale(&mut self, now: Duration, what: &str) -> Step {
        if now >= self.deadline {
            return self.finish(
                Vec::new(),
                Err(Error::Timeout {
                    job: self.job.clone(),
                    what: what.to_string(),
                    waited: self.bound,
                }),
            );
        }
        let timeout = self.guard_timeout(now);
        let since = self.stale_rv.clone();
        self.issue(Vec::new(), Intent::WaitJob { since, timeout })
    }

    fn reinspect(&mut self) -> Step {
        self.phase = Phase::Inspect;
        self.issue(Vec::new(), Intent::GetJob)
    }

    // --- ours ---------------------------------------------------------------------------------

    fn create(&mut self, notes: Vec<Note>) -> Step {
        self.phase = Phase::Create;
        let job = Box::new(self.desired.clone());
        self.issue(notes, Intent::CreateJob(job))
    }

    fn on_create(&mut self, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Job(job) => self.adopt(now, job),
            // An earlier attempt may have created it before its answer was lost: look.
            Observation::Failed(e) if e.is_already_exists() && self.create_uncertain => {
                self.phase = Phase::CheckCreate;
                self.issue(Vec::new(), Intent::GetJob)
            }
            Observation::Failed(e) if e.is_already_exists() => self.contended(format!(
                "a job of that name was created between our check and our create: {e}"
            )),
            other => self.unexpected(other, "creating"),
        }
    }

    fn on_check_create(&mut self, now: Duration, obs: Observation) -> Step {
        match obs {
            // Ours is the only Job that can be exactly the one we asked for and not being deleted.
            Observation::Job(job)
                if job.metadata.deletion_timestamp.is_none() && same_work(&job, &self.desired) =>
            {
                self.adopt(now, job)
            }
            Observation::Job(job) => self.contended(format!(
                "after a create whose answer was lost, the job there (uid {}) is not the one we asked for",
                uid_of(&job)
            )),
            Observation::Failed(e) if e.is_not_found() => self.create(Vec::new()),
            other => self.unexpected(other, "reading"),
        }
    }

    fn adopt(&mut self, now: Duration, job: Box<Job>) -> Step {
        let uid = uid_of(&job);
        let notes = vec![self.note(Level::Info, format!("created {} (uid {uid})", self.job))];
        self.uid = Some(uid);
        self.rv = rv_of(&job);
        self.last = Some(job);
        self.deadline = now.saturating_add(self.bound);
        self.phase = Phase::Wait;
        let timeout = self.wait_timeout(now);
        let since = self.rv.clone();
        self.issue(notes, Intent::WaitJob { since, timeout })
    }

    fn on_wait(&mut self, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Changed(Change::Applied(job)) => self.observe_ours(now, job),
            Observation::Changed(Change::Deleted(job)) => {
                let detail = if Some(uid_of(&job)) == self.uid {
                    "was deleted".to_string()
                } else {
                    format!("was replaced by uid {}", uid_of(&job))
                };
                self.vanished(detail)
            }
            Observation::Changed(Change::TimedOut) => {
                if now >= self.deadline {
                    return self.timeout_ours();
                }
                if self.events_allowed && !self.pod_seen() {
                    self.phase = Phase::Events;
                    let uid = self.uid.clone().unwrap_or_default();
                    return self.issue(Vec::new(), Intent::ListEvents { uid });
                }
                self.rewait(now, Vec::new())
            }
            Observation::Failed(e) if e.is_gone() => {
                self.phase = Phase::Reread;
                self.issue(Vec::new(), Intent::GetJob)
            }
            other => self.unexpected(other, "watching"),
        }
    }

    fn on_reread(&mut self, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Job(job) => self.observe_ours(now, job),
            Observation::Failed(e) if e.is_not_found() => self.vanished("was deleted".to_string()),
            other => self.unexpected(other, "reading"),
        }
    }

    /// A state of the Job of our name, while we wait for ours.
    fn observe_ours(&mut self, now: Duration, job: Box<Job>) -> Step {
        let uid = uid_of(&job);
        if Some(&uid) != self.uid.as_ref() {
            return self.vanished(format!("was replaced by uid {uid}"));
        }
        // We never delete ours before reading its result, so a deletion timestamp means another
        // actor is removing it: its pod is being killed, and what it ends with is no answer.
        if job.metadata.deletion_timestamp.is_some() {
            return self.vanished("is being deleted by another actor".to_string());
        }
        self.rv = rv_of(&job);
        let done = finished(&job);
        self.last = Some(job);
        if done {
            self.phase = Phase::Pods;
            let selector = format!("{CONTROLLER_UID_LABEL}={uid}");
            return self.issue(Vec::new(), Intent::ListPods { selector });
        }
        if now >= self.deadline {
            return self.timeout_ours();
        }
        self.rewait(now, Vec::new())
    }

    fn on_events(&mut self, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Events(events) => {
                let uid = self.uid.as_deref().unwrap_or_default();
                let refused = events
                    .iter()
                    .filter(|e| e.involved_object.uid.as_deref() == Some(uid))
                    .find(|e| e.reason.as_deref() == Some("FailedCreate"));
                if let Some(event) = refused {
                    let message = event.message.clone().unwrap_or_default();
                    let hint = if message.contains("PodSecurity") {
                        format!(
                            "; the namespace's PodSecurity level refuses privileged pods: label it \
                             with `kubectl label namespace {} pod-security.kubernetes.io/enforce=privileged`",
                            self.job.namespace
                        )
                    } else {
                        String::new()
                    };
                    return self.finish(
                        Vec::new(),
                        Err(Error::PodCreateRefused {
                            job: self.job.clone(),
                            reason: "FailedCreate".to_string(),
                            message,
                            hint,
                        }),
                    );
                }
                self.rewait(now, Vec::new())
            }
            Observation::Failed(e) if e.kind == crate::ErrorKind::Forbidden => {
                self.events_allowed = false;
                let note = self.note(
                    Level::Warn,
                    format!(
                        "cannot list events in namespace {} ({e}); a pod the job controller cannot \
                         create will only be reported at the deadline",
                        self.job.namespace
                    ),
                );
                self.rewait(now, vec![note])
            }
            other => self.unexpected(other, "listing events of"),
        }
    }

    fn rewait(&mut self, now: Duration, notes: Vec<Note>) -> Step {
        self.phase = Phase::Wait;
        let timeout = self.wait_timeout(now);
        let since = self.rv.clone();
        self.issue(notes, Intent::WaitJob { since, timeout })
    }

    fn on_pods(&mut self, obs: Observation) -> Step {
        let pods = match obs {
            Observation::Pods(pods) => pods,
            other => return self.unexpected(other, "listing pods of"),
        };
        let Some(job) = self.last.clone() else {
            return self.finish(Vec::new(), Err(self.internal("finished without a job")));
        };
        let uid = self.uid.clone().unwrap_or_default();
        // The selector already names our UID; the owner reference is checked as well, so that
        // no other Job's Pod can ever answer for ours.
        let ours: Vec<&Pod> = pods.iter().filter(|p| owned_by(p, &uid)).collect();
        let terminated = ours
            .iter()
            .find_map(|p| exit_code_of(p, &self.container).map(|c| (*p, c)));
        let pod = terminated
            .map(|(p, _)| p)
            .or(ours.first().copied())
            .and_then(|p| p.metadata.name.clone());

        if succeeded(&job) {
            self.exit_code = 0;
        } else if failed(&job) {
            let cond = condition(&job, "Failed").or_else(|| condition(&job, "FailureTarget"));
            let reason = cond
                .and_then(|c| c.reason.clone())
                .unwrap_or_else(|| "Failed".to_string());
            let message = cond.and_then(|c| c.message.clone()).unwrap_or_default();
            match terminated {
                // A container the deadline killed said nothing about the host operation.
                Some((_, code)) if reason != "DeadlineExceeded" => self.exit_code = code,
                Some((_, code)) => {
                    return self.finish(
                        Vec::new(),
                        Err(Error::FailedWithoutExit {
                            job: self.job.clone(),
                            reason,
                            message: format!(
                                "{message} (its container was killed, exit code {code})"
                            ),
                        }),
                    );
                }
                None => {
                    return self.finish(
                        Vec::new(),
                        Err(Error::FailedWithoutExit {
                            job: self.job.clone(),
                            reason,
                            message,
                        }),
                    );
                }
            }
        } else {
            return self.finish(
                Vec::new(),
                Err(self.internal("finished neither succeeded nor failed")),
            );
        }

        match self.mode {
            Mode::Run if self.exit_code != 0 => self.finish(
                Vec::new(),
                Err(Error::Failed {
                    job: self.job.clone(),
                    exit_code: self.exit_code,
                }),
            ),
            Mode::ExitCodeLogs => match pod {
                Some(pod) => {
                    self.phase = Phase::Log;
                    self.issue(Vec::new(), Intent::ReadLog { pod })
                }
                None => self.finish(
                    Vec::new(),
                    Err(Error::LogUnread {
                        exit_code: self.exit_code,
                        job: self.job.clone(),
                        detail: format!("no pod of job uid {uid} remains"),
                    }),
                ),
            },
            _ => self.after_result(),
        }
    }

    fn on_log(&mut self, obs: Observation) -> Step {
        match obs {
            Observation::Log(log) => {
                self.log = Some(log);
                self.after_result()
            }
            Observation::Failed(e) => self.log_unread(e.to_string()),
            other => self.unexpected(other, "reading the log of"),
        }
    }

    fn log_unread(&mut self, detail: String) -> Step {
        self.finish(
            Vec::new(),
            Err(Error::LogUnread {
                exit_code: self.exit_code,
                job: self.job.clone(),
                detail,
            }),
        )
    }

    /// The result is known: delete ours when it succeeded, leave it for inspection otherwise.
    fn after_result(&mut self) -> Step {
        let succeeded = self.last.as_deref().is_some_and(succeeded);
        if succeeded {
            self.conflicts = 0;
            self.phase = Phase::DeleteOurs;
            let pre = exact(self.uid.clone().unwrap_or_default(), self.rv.clone());
            return self.issue(Vec::new(), Intent::DeleteJob(pre));
        }
        let note = self.note(
            Level::Info,
            format!(
                "{} failed with exit code {}; left in place for inspection",
                self.job, self.exit_code
            ),
        );
        let report = self.report();
        self.finish(vec![note], Ok(report))
    }

    fn on_delete_ours(&mut self, obs: Observation) -> Step {
        match obs {
            Observation::Deleted => {
                let note = self.note(Level::Info, format!("{} succeeded; deleted it", self.job));
                let report = self.report();
                self.finish(vec![note], Ok(report))
            }
            Observation::Failed(e) if e.is_not_found() => {
                let report = self.report();
                self.finish(Vec::new(), Ok(report))
            }
            Observation::Failed(e) if e.is_conflict() => {
                self.conflicts += 1;
                if self.conflicts > CONFLICT_RETRIES {
                    return self.api_error("deleting", e);
                }
                self.phase = Phase::RereadForDelete;
                self.issue(Vec::new(), Intent::GetJob)
            }
            other => self.unexpected(other, "deleting"),
        }
    }

    fn on_reread_for_delete(&mut self, obs: Observation) -> Step {
        match obs {
            Observation::Job(job) if Some(uid_of(&job)) == self.uid => {
                self.rv = rv_of(&job);
                self.phase = Phase::DeleteOurs;
                let pre = exact(self.uid.clone().unwrap_or_default(), self.rv.clone());
                self.issue(Vec::new(), Intent::DeleteJob(pre))
            }
            // Ours is gone; whatever holds the name now is not ours to delete.
            Observation::Job(_) => {
                let report = self.report();
                self.finish(Vec::new(), Ok(report))
            }
            Observation::Failed(e) if e.is_not_found() => {
                let report = self.report();
                self.finish(Vec::new(), Ok(report))
            }
            other => self.unexpected(other, "reading"),
        }
    }

    // --- shared -------------------------------------------------------------------------------

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

    fn note(&self, level: Level, message: String) -> Note {
        Note { level, message }
    }

    fn report(&self) -> Report {
        Report {
            exit_code: self.exit_code,
            log: self.log.clone(),
        }
    }

    /// Retries a transient failure after a capped backoff, while the bound allows.
    fn retry(&mut self, now: Duration, err: ApiError) -> Step {
        let backoff = backoff(self.retries);
        self.retries += 1;
        let allowed = match self.phase {
            Phase::Pods | Phase::DeleteOurs | Phase::RereadForDelete => {
                self.retries <= POST_FINISH_RETRIES
            }
            Phase::Log => self.retries <= LOG_RETRIES,
            // Inside the wait bound: the backoff must end before the deadline.
            _ => now.saturating_add(backoff) < self.deadline,
        };
        if matches!(self.phase, Phase::Create) {
            self.create_uncertain = true;
        }
        if !allowed {
            return match self.phase {
                Phase::Log => self.log_unread(err.to_string()),
                Phase::Events => self.rewait(now, Vec::new()),
                _ => self.api_error(self.verb(), err),
            };
        }
        // A wait's own retry is the next wait: the backend resumed it already, or could not.
        Step {
            notes: Vec::new(),
            intent: Intent::Sleep(backoff),
        }
    }

    /// The verb of the phase, for error messages.
    fn verb(&self) -> &'static str {
        match self.phase {
            Phase::Inspect | Phase::CheckCreate | Phase::Reread | Phase::RereadForDelete => {
                "reading"
            }
            Phase::StaleWait { .. } | Phase::StaleGone { .. } | Phase::Wait => "watching",
            Phase::DeleteStale { .. } | Phase::DeleteOurs => "deleting",
            Phase::Create => "creating",
            Phase::Events => "listing events of",
            Phase::Pods => "listing pods of",
            Phase::Log => "reading the log of",
            Phase::Done => "running",
        }
    }

    /// An answer the phase does not expect: an API error is reported with its operation; any
    /// other observation is a bug in the loop.
    fn unexpected(&mut self, obs: Observation, verb: &'static str) -> Step {
        match obs {
            Observation::Failed(e) => self.api_error(verb, e),
            other => {
                let err = self.internal(&format!("unexpected {other:?} while {verb}"));
                self.finish(Vec::new(), Err(err))
            }
        }
    }

    fn api_error(&mut self, verb: &str, cause: ApiError) -> Step {
        let action = format!("{verb} {}", self.job);
        self.finish(Vec::new(), Err(Error::Api { action, cause }))
    }

    fn contended(&mut self, detail: String) -> Step {
        self.finish(
            Vec::new(),
            Err(Error::Contended {
                job: self.job.clone(),
                detail,
            }),
        )
    }

    fn vanished(&mut self, detail: String) -> Step {
        let uid = self.uid.clone().unwrap_or_default();
        self.finish(
            Vec::new(),
            Err(Error::Vanished {
                job: self.job.clone(),
                uid,
                detail,
            }),
        )
    }

    fn timeout_ours(&mut self) -> Step {
        let what = if self.pod_seen() {
            "to finish"
        } else {
            "to start a pod"
        };
        self.finish(
            Vec::new(),
            Err(Error::Timeout {
                job: self.job.clone(),
                what: what.to_string(),
                waited: self.bound,
            }),
        )
    }

    fn internal(&self, what: &str) -> Error {
        Error::Api {
            action: format!("running {}", self.job),
            cause: ApiError::new(crate::ErrorKind::Other, 0, format!("internal: {what}")),
        }
    }

    /// Whether ours has (had) a Pod, by its counters.
    fn pod_seen(&self) -> bool {
        let Some(status) = self.last.as_ref().and_then(|j| j.status.as_ref()) else {
            return false;
        };
        [
            status.active,
            status.ready,
            status.terminating,
            status.succeeded,
            status.failed,
        ]
        .iter()
        .any(|n| n.unwrap_or(0) > 0)
    }

    /// How long the next wait on ours may take: the rest of the bound, or one
    /// [`POLL_INTERVAL`] while no Pod exists, so a `FailedCreate` is noticed within it.
    fn wait_timeout(&self, now: Duration) -> Duration {
        let rest = self.deadline.saturating_sub(now);
        if self.uid.is_some() && self.events_allowed && !self.pod_seen() {
            rest.min(POLL_INTERVAL)
        } else {
            rest
        }
    }

    fn guard_timeout(&self, now: Duration) -> Duration {
        self.deadline.saturating_sub(now)
    }
}

fn uid_of(job: &Job) -> String {
    job.metadata.uid.clone().unwrap_or_default()
}

fn rv_of(job: &Job) -> Option<String> {
    job.metadata.resource_version.clone()
}

fn exact(uid: String, resource_version: Option<String>) -> Preconditions {
    Preconditions {
        uid: Some(uid),
        resource_version,
    }
}

fn describe(job: &Job) -> String {
    format!(
        "job {}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether `pod` is controlled by the Job with `uid`.
fn owned_by(pod: &Pod, uid: &str) -> bool {
    let by_label = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CONTROLLER_UID_LABEL))
        .map(String::as_str)
        == Some(uid);
    let by_owner = pod.metadata.owner_references.as_ref().is_some_and(|refs| {
        refs.iter()
            .any(|r| r.uid == uid && r.controller == Some(true))
    });
    by_label && by_owner
}

/// The exit code of `container` in `pod`, once it terminated.
fn exit_code_of(pod: &Pod, container: &str) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let status = statuses.iter().find(|s| s.name == container)?;
    let terminated = status.state.as_ref()?.terminated.as_ref()?;
    Some(terminated.exit_code)
}

/// Whether `job` does exactly the work `desired` asks for, on the same node: the test that lets a
/// run adopt a Job whose create answer it lost.
fn same_work(job: &Job, desired: &Job) -> bool {
    let node = |j: &Job| {
        j.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODE_ANNOTATION))
            .cloned()
    };
    let pod = |j: &Job| {
        j.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|p| {
                (
                    p.node_name.clone(),
                    p.containers
                        .iter()
                        .map(|c| (c.name.clone(), c.image.clone(), c.command.clone()))
                        .collect::<Vec<_>>(),
                )
            })
    };
    node(job) == node(desired) && pod(job).is_some() && pod(job) == pod(desired)
}
