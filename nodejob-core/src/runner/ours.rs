//! Ours: create the Job, then wait for it to finish, event-driven, at most the bound from its
//! creation.
//!
//! ```text
//!  Creating ──created──────────────────▶ Waiting ──finished──▶ (its result is read)
//!     │ AlreadyExists, unguarded ─────▶ (back to the guard: an earlier Job took the name)
//!     │ AlreadyExists after a lost answer     at Change (WaitJob), and from there:
//!     ▼                                        ├ timed out, podless ─▶ Events ─▶ Change
//!  Checking ──the same work: adopt it──▶       ├ watch expired ──────▶ Reread ─▶ Change
//!                                              ├ pod no longer ready ▶ Node ───▶ Change
//!                                              ├ running, log wanted ▶ Pods ───▶ Change
//!                                              ├ its Pod succeeded ──▶ Log ────▶ Change
//!                                              │   (SuccessCriteriaMet, none running)
//!                                              └ timed out (the loop read the node):
//!                                                  node gone, or the bound: done
//! ```
//!
//! Once created, the Job is ours by UID: a Job deleted, being deleted or replaced under our name
//! ends the run at once, and nothing of it is read. So does our node's deletion, seen when a
//! wait times out (the loop reads the node then) or when the Job reports its Pod no longer ready.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node};

use super::context::{Next, Retries, Run, rv_of, uid_of};
use super::protocol::{Intent, Mode, Observation};
use crate::POLL_INTERVAL;
use crate::api::{ApiResult, Change};
use crate::error::{Action, Error, ObjectKind};
use crate::job::same_work;
use crate::quote::quote;
use crate::spec::{Level, Note};
use crate::status::{
    active_and_ready, finished, has_had_pod, is_pod_of_job, not_ready_because,
    pod_terminating_by_another, pods_selector, succeeding,
};

/// Ours has finished: its result is to be read.
#[derive(Debug)]
pub(super) struct Finished {
    /// Its UID.
    pub(super) uid: String,
    /// Its last resourceVersion.
    pub(super) rv: Option<String>,
    /// Its finished state.
    pub(super) job: Box<Job>,
    /// Whether, while it ran, it reported its Pod terminating by another actor's hand.
    pub(super) pod_deleted: bool,
    /// The name of its Pod, listed while it ran when its log is wanted: a Job that succeeded
    /// ran that one Pod only (`backoffLimit: 0`, replaced only once failed), so its log is read
    /// at once, with no list after the finish.
    pub(super) pod: Option<String>,
    /// That Pod's log, when it was read as the Job reported its success, before the terminal
    /// condition ([`Await::Log`]): the finish then costs the delete only.
    pub(super) log: Option<String>,
}

/// Ours has left: finished, or, created unguarded, found the name taken.
#[derive(Debug)]
pub(super) enum Left {
    /// Ours has finished.
    Finished(Finished),
    /// Created without the guard's read ([`Policy::known_free`](super::Policy::known_free)),
    /// ours met a Job of its name: the guard inspects it, within `deadline`, as any earlier
    /// Job.
    Taken { deadline: Duration },
}

/// Ours, from its creation until it finishes.
#[derive(Debug)]
pub(super) enum Ours {
    /// Creating it. `deadline` is the guard's: it bounds the create's retries.
    Creating {
        deadline: Duration,
        /// An attempt failed in a way that does not say whether it created the Job.
        uncertain: bool,
        /// The guard read the name free before (else the caller did).
        guarded: bool,
    },
    /// A create whose answer was lost met AlreadyExists: is the Job there ours?
    Checking { deadline: Duration },
    /// Created: waiting for it to finish.
    Waiting(Waiting),
}

/// Ours exists: what is known of it while it runs.
#[derive(Debug)]
pub(super) struct Waiting {
    uid: String,
    /// Its last resourceVersion.
    rv: Option<String>,
    /// Its last state.
    last: Box<Job>,
    /// When the wait bound runs out: its creation plus the bound.
    deadline: Duration,
    /// False once listing events was forbidden: the fast FailedCreate check is then skipped.
    events_allowed: bool,
    /// Whether it reported its Pod terminating by another actor's hand (`status.terminating`
    /// with no deadline): what the Pod then exits with is the kill's.
    pod_deleted: bool,
    /// Its Pod's name, once listed ([`Await::Pods`]).
    pod: Option<String>,
    /// Whether its Pods were listed while it ran: once per run at most, whatever it found.
    listed: bool,
    /// Its Pod's log, read as the Job reported its success before its terminal condition; or
    /// whether that read was tried (once per run at most).
    log: Early,
    at: Await,
}

/// The log read early, as the Job reports its Pod succeeded ([`succeeding`]).
#[derive(Debug)]
enum Early {
    /// Not tried.
    Unread,
    /// Tried, and failed: the finish reads it.
    Failed,
    /// Read.
    Read(String),
}

/// The answer the wait is at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Await {
    /// The next change of the Job (`WaitJob`).
    Change,
    /// The Job re-read after its watch expired (`GetJob`).
    Reread,
    /// Its `FailedCreate` events (`ListEvents`).
    Events,
    /// Its node, the Job having reported its Pod no longer ready (`GetNode`).
    Node,
    /// Its Pods, the Job having reported one active and its log being wanted (`ListPods`):
    /// the list a finished Job's log needs, made while the host operation runs rather than
    /// after it finished, so the finish costs the log's read and the delete only.
    Pods,
    /// Its Pod's log (`ReadLog`), the Job having reported the Pod succeeded and no other Pod
    /// left, before its terminal condition ([`succeeding`]): the Job controller writes
    /// `Complete` only after its next pod write (the tracking finalizer's removal), and the
    /// read overlaps those two round trips, so the finish costs the delete only.
    Log,
}

impl Ours {
    /// An earlier run's Job, still running, that the policy adopts: ours from `now`, its bound
    /// starting now.
    pub(super) fn adopted(run: &Run, now: Duration, job: Box<Job>) -> Step {
        let note = format!(
            "adopted {} (uid {}), started by an earlier run; waiting for it",
            run.job,
            uid_of(&job)
        );
        wait_for(run, now, job, note)
    }

    /// Creates ours; the guard's `deadline` bounds the retries. `guarded`: the guard read the
    /// name free; else the caller did ([`Policy::known_free`](super::Policy::known_free)), and
    /// a Job met there goes to the guard.
    pub(super) fn create(run: &Run, deadline: Duration, guarded: bool) -> (Ours, Intent) {
        let ours = Ours::Creating {
            deadline,
            uncertain: false,
            guarded,
        };
        (ours, Intent::CreateJob(Box::new(run.desired.clone())))
    }

    /// Takes the answer to the last intent.
    pub(super) fn step(self, run: &Run, now: Duration, obs: Observation) -> Step {
        match self {
            Ours::Creating {
                deadline,
                uncertain,
                guarded,
            } => on_create(run, now, deadline, uncertain, guarded, obs),
            Ours::Checking { deadline } => on_check(run, now, deadline, obs),
            Ours::Waiting(w) => match w.at {
                Await::Change => w.on_change(run, now, obs),
                Await::Reread => w.on_reread(run, now, obs),
                Await::Events => w.on_events(run, now, obs),
                Await::Node => w.on_node(run, now, obs),
                Await::Pods => w.on_pods(now, obs),
                Await::Log => w.on_log(now, obs),
            },
        }
    }

    /// How a transient failure may be retried: within the bound; never for the node read or the
    /// early list of Pods (neither is a reason to stop waiting).
    pub(super) fn retries(&self) -> Retries {
        match self {
            Ours::Creating { deadline, .. } | Ours::Checking { deadline } => {
                Retries::Until(*deadline)
            }
            Ours::Waiting(w) if matches!(w.at, Await::Node | Await::Pods | Await::Log) => {
                Retries::Never
            }
            Ours::Waiting(w) => Retries::Until(w.deadline),
        }
    }

    /// A transient failure is being retried: a create that failed so may have happened.
    pub(super) fn retrying(&mut self) {
        if let Ours::Creating { uncertain, .. } = self {
            *uncertain = true;
        }
    }

    /// The timeout of a wait issued at `now`.
    pub(super) fn wait_timeout(&self, now: Duration) -> Duration {
        match self {
            Ours::Creating { deadline, .. } | Ours::Checking { deadline } => {
                deadline.saturating_sub(now)
            }
            Ours::Waiting(w) => w.wait_timeout(now),
        }
    }
}

/// Ours' answer to an observation.
pub(super) type Step = Next<Ours, Left>;

fn on_create(
    run: &Run,
    now: Duration,
    deadline: Duration,
    uncertain: bool,
    guarded: bool,
    obs: Observation,
) -> Step {
    match obs {
        Observation::Job(job) => adopt(run, now, job),
        // An earlier attempt may have created it before its answer was lost: look.
        Observation::Failed(e) if e.is_already_exists() && uncertain => {
            Next::stay(Ours::Checking { deadline }, Intent::GetJob)
        }
        // The first create, unguarded: an earlier Job has the name, for the guard to judge.
        Observation::Failed(e) if e.is_already_exists() && !guarded => {
            Next::Leave(Left::Taken { deadline })
        }
        Observation::Failed(e) if e.is_already_exists() => Next::fail(run.contended(format!(
            "a job of that name was created between our check and our create: {e}"
        ))),
        other => run.unexpected(other, Action::Creating, ObjectKind::Job),
    }
}

fn on_check(run: &Run, now: Duration, deadline: Duration, obs: Observation) -> Step {
    match obs {
        // Ours is the only Job that can be exactly the one we asked for and not being deleted.
        Observation::Job(job)
            if job.metadata.deletion_timestamp.is_none() && same_work(&job, &run.desired) =>
        {
            adopt(run, now, job)
        }
        Observation::Job(job) => Next::fail(run.contended(format!(
            "after a create whose answer was lost, the job there (uid {}) is not the one we asked for",
            uid_of(&job)
        ))),
        Observation::Failed(e) if e.is_not_found() => {
            let ours = Ours::Creating {
                deadline,
                uncertain: true,
                guarded: true,
            };
            Next::stay(ours, Intent::CreateJob(Box::new(run.desired.clone())))
        }
        other => run.unexpected(other, Action::Reading, ObjectKind::Job),
    }
}

/// Ours exists (created, or found after a lost answer): its bound starts now.
fn adopt(run: &Run, now: Duration, job: Box<Job>) -> Step {
    let note = format!("created {} (uid {})", run.job, uid_of(&job));
    wait_for(run, now, job, note)
}

/// Waits for `job`, ours from now, with `note` saying how it became ours.
fn wait_for(run: &Run, now: Duration, job: Box<Job>, note: String) -> Step {
    let uid = uid_of(&job);
    let note = run.note(Level::Info, note);
    let w = Waiting {
        uid,
        rv: rv_of(&job),
        last: job,
        deadline: now.saturating_add(run.bound),
        events_allowed: true,
        pod_deleted: false,
        pod: None,
        listed: false,
        log: Early::Unread,
        at: Await::Change,
    };
    w.rewait(now, vec![note])
}

impl Waiting {
    fn on_change(self, run: &Run, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Changed(Change::Applied(job)) => self.observe(run, now, job),
            Observation::Changed(Change::Deleted(job)) => {
                let detail = if uid_of(&job) == self.uid {
                    "was deleted".to_string()
                } else {
                    format!("was replaced by uid {}", uid_of(&job))
                };
                Next::fail(run.vanished(&self.uid, detail))
            }
            Observation::Changed(Change::TimedOut) => self.quiet(run, now, None),
            Observation::TimedOut(node) => self.quiet(run, now, Some(node)),
            Observation::Failed(e) if e.is_gone() => self.go(Await::Reread, Intent::GetJob),
            other => run.unexpected(other, Action::Watching, ObjectKind::Job),
        }
    }

    /// The wait timed out with no change; `node` is the node as the loop read it then, if it
    /// did.
    fn quiet(self, run: &Run, now: Duration, node: Option<ApiResult<Box<Node>>>) -> Step {
        if let Some(Err(e)) = &node
            && e.is_not_found()
        {
            return Next::fail(self.node_deleted(run));
        }
        if now >= self.deadline {
            return Next::fail(self.timed_out(run, node.as_ref()));
        }
        if self.events_allowed && !has_had_pod(&self.last) {
            let uid = self.uid.clone();
            return self.go(Await::Events, Intent::ListEvents { uid });
        }
        self.rewait(now, Vec::new())
    }

    fn on_reread(self, run: &Run, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Job(job) => self.observe(run, now, job),
            Observation::Failed(e) if e.is_not_found() => {
                Next::fail(run.vanished(&self.uid, "was deleted".to_string()))
            }
            other => run.unexpected(other, Action::Reading, ObjectKind::Job),
        }
    }

    /// A state of the Job of our name, while we wait for ours.
    fn observe(mut self, run: &Run, now: Duration, job: Box<Job>) -> Step {
        let uid = uid_of(&job);
        if uid != self.uid {
            return Next::fail(run.vanished(&self.uid, format!("was replaced by uid {uid}")));
        }
        // We never delete ours before reading its result, so a deletion timestamp means another
        // actor is removing it: its pod is being killed, and what it ends with is no answer.
        if job.metadata.deletion_timestamp.is_some() {
            let detail = "is being deleted by another actor".to_string();
            return Next::fail(run.vanished(&self.uid, detail));
        }
        self.pod_deleted |= pod_terminating_by_another(&job);
        if finished(&job) {
            let rv = rv_of(&job);
            let pod_deleted = self.pod_deleted;
            let log = match self.log {
                Early::Read(log) => Some(log),
                Early::Unread | Early::Failed => None,
            };
            return Next::Leave(Left::Finished(Finished {
                uid,
                rv,
                job,
                pod_deleted,
                pod: self.pod,
                log,
            }));
        }
        let (_, was_ready) = active_and_ready(&self.last);
        let (active, ready) = active_and_ready(&job);
        self.rv = rv_of(&job);
        self.last = job;
        if now >= self.deadline {
            return Next::fail(self.timed_out(run, None));
        }
        // Its Pod was ready and no longer is, yet still runs: what the node lifecycle
        // controller does to the Pods of a node gone NotReady. Look at the node (one read,
        // only then).
        if was_ready > 0 && ready == 0 && active > 0 {
            return self.go(Await::Node, Intent::GetNode);
        }
        if run.mode == Mode::ExitCodeLogs && !self.listed && active > 0 {
            self.listed = true;
            let selector = pods_selector(&self.uid);
            return self.go(Await::Pods, Intent::ListPods { selector });
        }
        if run.mode == Mode::ExitCodeLogs
            && matches!(self.log, Early::Unread)
            && !self.pod_deleted
            && succeeding(&self.last)
            && let Some(pod) = self.pod.clone()
        {
            return self.go(Await::Log, Intent::ReadLog { pod });
        }
        self.rewait(now, Vec::new())
    }

    /// Its Pod's log, read early: a failure is no reason to stop waiting, nor to read it
    /// again before the finish, which reads it then.
    fn on_log(mut self, now: Duration, obs: Observation) -> Step {
        self.log = match obs {
            Observation::Log(log) => Early::Read(log),
            _ => Early::Failed,
        };
        self.rewait(now, Vec::new())
    }

    /// Its Pods, listed while it runs (once): the one of our UID is the one whose log is read
    /// once the Job succeeded. A list that failed, or found none, is no reason to stop waiting,
    /// nor to list again: the finish lists them then.
    fn on_pods(mut self, now: Duration, obs: Observation) -> Step {
        if let Observation::Pods(pods) = obs {
            self.pod = pods
                .iter()
                .find(|p| is_pod_of_job(p, &self.uid))
                .and_then(|p| p.metadata.name.clone());
        }
        self.rewait(now, Vec::new())
    }

    fn on_events(mut self, run: &Run, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Events(events) => match failed_create(&events, &self.uid) {
                Some(event) => Next::fail(pod_create_refused(run, event)),
                None => self.rewait(now, Vec::new()),
            },
            // Listing events kept failing: the fast check is skipped this time, not the run.
            Observation::Failed(e) if e.is_retryable() => self.rewait(now, Vec::new()),
            Observation::Failed(e) if e.is_forbidden() => {
                self.events_allowed = false;
                let note = run.note(
                    Level::Warn,
                    format!(
                        "cannot list events in namespace {} ({e}); a pod the job controller cannot \
                         create will only be reported at the deadline",
                        run.job.namespace
                    ),
                );
                self.rewait(now, vec![note])
            }
            other => run.unexpected(other, Action::Listing, ObjectKind::Event),
        }
    }

    fn on_node(self, run: &Run, now: Duration, obs: Observation) -> Step {
        match obs {
            Observation::Node(node) => {
                let notes = match not_ready_because(&node) {
                    Some(why) => vec![run.note(
                        Level::Warn,
                        format!(
                            "the pod of {} is no longer ready: node {} is NotReady ({}); \
                             waiting for it until the bound",
                            run.job,
                            run.job.node,
                            quote(&why)
                        ),
                    )],
                    None => Vec::new(),
                };
                self.rewait(now, notes)
            }
            Observation::Failed(e) if e.is_not_found() => Next::fail(self.node_deleted(run)),
            // The node read is a diagnosis, never a reason to stop waiting.
            Observation::Failed(_) => self.rewait(now, Vec::new()),
            other => run.unexpected(other, Action::Reading, ObjectKind::Node),
        }
    }

    fn go(mut self, at: Await, intent: Intent) -> Step {
        self.at = at;
        Next::stay(Ours::Waiting(self), intent)
    }

    fn rewait(mut self, now: Duration, notes: Vec<Note>) -> Step {
        self.at = Await::Change;
        let since = self.rv.clone();
        let timeout = self.wait_timeout(now);
        Next::Stay(
            Ours::Waiting(self),
            notes,
            Intent::WaitJob { since, timeout },
        )
    }

    /// How long the next wait may take: the rest of the bound, or one [`POLL_INTERVAL`] while
    /// no Pod exists, so a `FailedCreate` is noticed within it.
    fn wait_timeout(&self, now: Duration) -> Duration {
        let rest = self.deadline.saturating_sub(now);
        if self.events_allowed && !has_had_pod(&self.last) {
            rest.min(POLL_INTERVAL)
        } else {
            rest
        }
    }

    /// What the wait is for: the Pod to start, or the Job to finish.
    fn what(&self) -> &'static str {
        if has_had_pod(&self.last) {
            "to finish"
        } else {
            "to start a pod"
        }
    }

    fn timed_out(&self, run: &Run, node: Option<&ApiResult<Box<Node>>>) -> Error {
        run.timeout(format!("{}{}", self.what(), run.node_state(node)))
    }

    fn node_deleted(&self, run: &Run) -> Error {
        Error::NodeDeleted {
            job: run.job.clone(),
            node: run.job.node.clone(),
            what: self.what().to_string(),
        }
    }
}

/// The `FailedCreate` event of the Job `uid`, if any.
fn failed_create<'e>(events: &'e [Event], uid: &str) -> Option<&'e Event> {
    events
        .iter()
        .filter(|e| e.involved_object.uid.as_deref() == Some(uid))
        .find(|e| e.reason.as_deref() == Some("FailedCreate"))
}

fn pod_create_refused(run: &Run, event: &Event) -> Error {
    let message = event.message.as_deref().unwrap_or_default();
    let hint = if message.contains("PodSecurity") {
        format!(
            "; the namespace's PodSecurity level refuses privileged pods: label it with \
             `kubectl label namespace {} pod-security.kubernetes.io/enforce=privileged`",
            run.job.namespace
        )
    } else {
        String::new()
    };
    Error::PodCreateRefused {
        job: run.job.clone(),
        reason: "FailedCreate".to_string(),
        // Another actor's text (an admission plugin's, through the Job controller): quoted.
        message: quote(message),
        hint,
    }
}
