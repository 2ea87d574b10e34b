//! One node through one piece of a rotation, sans-IO: [`NodeMachine`] takes [`Observation`]s
//! (our Job as read, a host Job's result, the node as watched, the Lease checked) and returns a
//! [`Step`] (marks for progress and the report, then one [`Intent`]). It never awaits and reads
//! no clock, so every decision is a row in a table test; `drive.rs` executes the intents.
//!
//! A machine is started for one [`Task`]:
//!
//! ```text
//!  Settle   for each leftover step: find our Job ─none─▶ next
//!             │ running/succeeded, Adopt ─▶ host (adopting it) ─────────────────────▶ next
//!             │ running/succeeded, WaitOut ─▶ wait for it ─▶ read it ─failed─▶ next (kept)
//!             │                                        └ ended ─▶ Lease? ─▶ delete ─▶ next
//!             │ being deleted, WaitOut ─▶ Lease? ─▶ delete ──────────────────────────▶ next
//!             └ otherwise ─▶ next                                  ... ─▶ Done(Acted(any))
//!  Phase    find our Job (not when the run's list of our Jobs had none of the step there)
//!             │ passed, no live Job ─▶ Done(Acted(false)) (skipped)
//!             │ running/succeeded ─▶ host (adopting it)
//!             └ none/failed ─▶ (ahead: the mark, with the step's condition; failed ─▶ Fail)
//!                 ─▶ host (creating it, the Lease read right before; `issue` with `--expect`)
//!  host     run ─exit ≠ 0─▶ Fail (Job kept)     (exit 0, log unread: read our Job; succeeded
//!             │ exit 0: its output's status line ─▶ wait for its exit code only; else Fail)
//!             │ (issue: and verify's verdict)
//!             │ issue: NotReady? (restart grace) ─▶ Ready (ready timeout)
//!             │ no status line in it ─▶ Lease? ─▶ read status
//!             │ record the status (issue: Lease-checked, the mark; failed ─▶ Lease? ─▶ Fail)
//!             │ issue (kept): delete our Job exactly, its going awaited by the run later
//!             └ Finished ─▶ (Settle: next; Phase: Done(Stepped: the status, the verdict))
//!             (the runner deletes the Job of any other step once it read its result; settling,
//!              only an issue's status is recorded)
//!  Read     Lease? ─▶ `carotate status`, parsed strictly ─▶ Done(Status)
//!  Verify   Lease? ─▶ `carotate verify` ─▶ Done(Verified)
//! ```
//!
//! `Lease?` is [`Intent::CheckLease`]: every write of a host step is fenced by it (an adopted
//! Job is waited for without one: it writes nothing until it is deleted; a runner's call is
//! one fenced write, its Job's create and, once read, its delete; the issue Job's delete
//! follows the Lease-checked record of its status at once). A new phase Job is fenced by the
//! read [`Intent::Host`] makes right before its create, after the step's `Started` condition
//! and any wait on the pause switch: no `Lease?` of the machine's precedes it. A record that is not the mark of
//! issue is written as the fenced writer writes: refused once the Lease is known lost. A Lease
//! known lost interrupts the node at its step, blaming it for nothing.
//! [`NodeMachine::in_flight`] says which step the node has under way, for the report of a run
//! cut short where it stood.

use k8s_openapi::api::batch::v1::Job;
use nodejob_core::log_tail;
use nodejob_core::runner::Report;

use crate::fingerprint::Fingerprint;
use crate::gate::Verified;
use crate::phase::{CaStep, Decision, decide};
use crate::plan::Plan;
use crate::progress::{Failure, NodeResult};
use crate::status::{CaStatus, parse_phase_output, parse_status};
pub use nodejob_roll::{Cause, FailureKind};

/// The last lines of a log kept in a failure.
const LOG_TAIL_LINES: usize = 20;

/// How a run takes a host Job of ours that an earlier run or abort left on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftover {
    /// A step of this run's own direction: its result is the step's, as its phase would take
    /// it (a failure fails the node).
    Adopt,
    /// A step of the other direction (an abort's, for a run; a run's, for an abort): waited
    /// for and deleted; its result is a note, and the status read after says where the node
    /// stands.
    WaitOut,
}

/// What a machine is started for, on one node.
#[derive(Clone, Debug, PartialEq)]
pub enum Task {
    /// Settle our host Jobs an earlier run or abort left, for each step, taken as its
    /// [`Leftover`] says, before anything is read or decided on the node.
    Settle(Vec<(CaStep, Leftover)>),
    /// Read `carotate status`.
    Read,
    /// A phase's step, on a node that reported `status` (`None`: it did not say).
    Phase {
        /// The step.
        step: CaStep,
        /// What the node reported before the phase.
        status: Option<CaStatus>,
        /// Whether this run took the step on it already (adopted its Job while settling).
        took: bool,
        /// `issue`: the CAs the `carotate verify` after it expects besides the new one (what
        /// the gate before finalize asks, answered by the issue Job itself); the other steps
        /// take none.
        also: Vec<Fingerprint>,
        /// No Job of ours of the step was on the node when the run listed our Jobs, and none
        /// is created but by this step: it is not read again before the step.
        absent: bool,
        /// No run of the rotation has begun anywhere ([`crate::ROTATING`]): the node was not
        /// read before the step, whose own output says where it stood. The mark that the step
        /// may change the host from now on ([`crate::ROTATING`]) is written before
        /// its Job (with the step's condition), and failing to fails the node, with no Job.
        ahead: bool,
    },
    /// `carotate verify --expect <new> --expect <also>…`.
    Verify {
        /// The CAs expected besides the new one.
        also: Vec<Fingerprint>,
    },
}

/// How a task ended well.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Settled, or a phase with nothing to do: whether a host Job of ours ran or was adopted.
    Acted(bool),
    /// A phase's host step ran (or was adopted) and exited 0: what the node reports after it.
    Stepped(Stepped),
    /// What the node reports.
    Status(CaStatus),
    /// `verify`'s answer (the Lease lost is one too: it says nothing about the node).
    Verified(Verified),
}

/// What a node reports after a phase's host step, read from the step's own output (else from a
/// `carotate status` after it): what the next gate reads of it, with no status Job of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stepped {
    /// Where the node stood as the step started, as its output began. `None` when it did not
    /// say (a host that predates the protocol, a log unread).
    pub before: Option<CaStatus>,
    /// Where the node stands after the step.
    pub status: CaStatus,
    /// After `issue --expect`: the CAs its `carotate verify` expected besides the new one, and
    /// its answer. `None` when it did not say (the gate then runs `carotate verify`).
    pub verified: Option<(Vec<Fingerprint>, Verified)>,
}

/// How the node's wait after `issue` ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Watched {
    /// The node is as waited for.
    Met,
    /// The Node watch reported it deleted.
    Deleted,
    /// The bound passed first.
    TimedOut,
    /// The watch failed: why.
    Failed(String),
}

/// One action for the loop, on this machine's node.
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    /// `get_job` of our Job of `step`.
    FindJob {
        /// The step.
        step: CaStep,
    },
    /// Check that the Lease is still ours (renewed when due): the fence before a write.
    CheckLease,
    /// Write the mark that `step` may change the host from now on
    /// ([`crate::ROTATING`]), with the step's `Started` condition, before its Job
    /// (see [`Task::Phase`]'s `ahead`). No Lease read before it: a mark written in vain only
    /// makes a rerun read the node.
    MarkAhead {
        /// The step.
        step: CaStep,
    },
    /// Run our host Job of `step` (`carotate <step>`, its exit code and log), kept on success;
    /// adopting the Job of this UID if set (waited for, never killed). A new Job is created
    /// only after a read of the Lease right before it (a Lease lost then: the fenced writer
    /// refuses the create).
    Host {
        /// The step.
        step: CaStep,
        /// The Job to adopt.
        adopt: Option<String>,
        /// `issue`: `--expect` the new CA and these after it (see [`Task::Phase`]).
        also: Vec<Fingerprint>,
        /// Kept once it succeeded, for the machine to delete once done with it (`issue`: the
        /// mark that issue began, until its status is recorded); else the runner deletes it as
        /// soon as it has read its result.
        keep: bool,
        /// No Job of ours of the step is there (read just before, or absent from the run's
        /// list): created without reading its name again
        /// ([`nodejob_core::runner::Policy::known_free`]).
        known_free: bool,
    },
    /// Wait for our Job of `step` and UID `uid` to end, and read its exit code only; kept.
    WaitJob {
        /// The step.
        step: CaStep,
        /// Its UID.
        uid: String,
    },
    /// Delete our Job of `step` and UID `uid` exactly (a Job deleted in the foreground stays
    /// until its Pod is gone).
    DeleteJob {
        /// The step.
        step: CaStep,
        /// Its UID.
        uid: String,
        /// When it is waited for to be gone.
        gone: Gone,
    },
    /// After `issue`: wait, at most the restart grace, for the node to go NotReady (or be
    /// deleted).
    WaitNotReady,
    /// After `issue`: wait, at most the ready timeout, for the node to be Ready (or deleted).
    WaitReady,
    /// Run `carotate status` (its exit code and log).
    ReadStatus,
    /// Record the status on the node ([`crate::LAST_STATUS`]).
    Record {
        /// What the node reports.
        status: CaStatus,
        /// The record is the cluster's mark that `issue` began there: the Lease is checked
        /// right before it is written, and a failure fails the node. Otherwise it is what a
        /// preview shows: written as the fenced writer writes (refused once the Lease is known
        /// lost), a failure a note.
        mark: bool,
        /// After `finalize`: written in the write of the node's condition that says it rotated
        /// (the run's end writes no other there).
        rotated: bool,
    },
    /// Run `carotate verify --expect <new> --expect <also>…` (its exit code).
    Verify {
        /// The CAs expected besides the new one.
        also: Vec<Fingerprint>,
    },
    /// The node failed: a Warning Event names it (unless the Lease is known lost: then it is
    /// interrupted at the step, not failed), and the task ends with it.
    Fail(Failure),
    /// The task ends: answered, or with the node's result (failed without an Event: a Job
    /// that could not be read; interrupted).
    Done(Result<Answer, NodeResult>),
}

/// When a Job the machine deletes is waited for until it is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gone {
    /// Before the machine goes on: a leftover of the other direction, or one being deleted
    /// already, whose Pod may still run.
    Awaited,
    /// Not by the machine: the run waits for every Job of ours being deleted before
    /// `finalize` begins and before it ends. A step's own Job, finished.
    Later,
}

/// The answer to the last intent.
#[derive(Clone, Debug)]
pub enum Observation {
    /// Our Job of the step, if any.
    Job(Option<Box<Job>>),
    /// The Lease is still ours.
    LeaseHeld,
    /// The Lease is lost.
    LeaseLost(nodejob_roll::LeaseLost),
    /// The host Job's report, or why it gave none.
    Host(Result<Report, String>),
    /// The host Job exited 0 but its log could not be read (its Pod gone): the error.
    Unread(String),
    /// How a wait on the node ended.
    Watched(Watched),
    /// `carotate status`: its exit code and log, or why it gave none.
    Status(Result<(i32, String), String>),
    /// `carotate verify`'s exit code, or why it gave none.
    Exit(Result<i32, String>),
    /// The write (a delete, a record) is done.
    Written,
    /// The last intent failed: why.
    Failed(Cause),
}

/// Something for progress, the report and the node's Events: the engine's marks, with the
/// rotation's own.
pub type Mark = nodejob_roll::Mark<CaStep, Own>;

/// The marks only the rotation tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Own {
    /// The node needs nothing for this step: why.
    Skipped(CaStep, String),
    /// What the node reports now.
    Reported(CaStatus),
}

/// What the machine wants next: its marks, then the one thing to do.
pub type Step = nodejob_roll::Turn<CaStep, Own, Intent>;

/// A host step that exited 0, on its way to done.
#[derive(Clone, Debug, PartialEq)]
struct Ran {
    /// Its Job's UID.
    uid: String,
    /// What it did, for its Finished mark.
    message: String,
    /// What the node reported as it started: its output's first line, if it said.
    before: Option<CaStatus>,
    /// What the node reports after it: its output's status line, or `carotate status` read
    /// after it; `None` until known.
    status: Option<CaStatus>,
    /// What its `verify` answered (`issue --expect`), with the CAs expected besides the new one.
    verified: Option<(Vec<Fingerprint>, Verified)>,
    /// Its Job is still there, for the machine to delete.
    kept: bool,
}

/// What a Lease check clears the way for.
#[derive(Clone, Debug, PartialEq)]
enum Then {
    /// Read the status (after `issue`: of this host step).
    ReadStatus(Option<Ran>),
    /// Delete our Job: the end of a host step (`Some`), or of one waited out.
    Delete { uid: String, ran: Option<Ran> },
    /// Delete a leftover Job being deleted already (not a step under way).
    Clear { uid: String },
    /// Fail the node (the status after `issue` could not be recorded), unless the Lease is
    /// lost.
    Fail(Failure),
    /// Run `verify`.
    Verify(Vec<Fingerprint>),
}

/// Where the machine is.
#[derive(Clone, Debug, PartialEq)]
enum At {
    Start,
    /// Reading our Job of the step: the phase's, or a leftover's.
    Finding,
    /// Writing the mark ahead of a new host Job (whether no Job of ours of the step is
    /// there, for [`Intent::Host`]'s `known_free`).
    Marking(bool),
    Fencing(Then),
    /// The host Job runs (created, or adopted).
    Hosting,
    /// It exited 0 with its log unread (this error): reading our Job.
    Unread(String),
    /// It succeeded: waiting for its exit code alone.
    Answering,
    Restarting(Ran),
    Readying(Ran),
    Reading(Option<Ran>),
    Recording(Ran),
    Deleting(Option<Ran>),
    /// Waiting for a leftover of the other direction to end.
    WaitingOut(String),
    /// It ended (how): reading it, to delete it unless it failed.
    Ended {
        uid: String,
        ended: String,
    },
    /// Deleting a leftover being deleted already.
    Clearing,
    Verifying,
    /// Ended; the step that was under way then, if any.
    Over(Option<CaStep>),
}

/// One node through one [`Task`]. See the module docs.
#[derive(Clone, Debug)]
pub struct NodeMachine<'p> {
    plan: &'p Plan,
    node: String,
    task: Task,
    /// The step at hand: the phase's, or the leftover's.
    step: CaStep,
    /// Settling: the leftover at hand, and whether any was acted on.
    leftover: usize,
    acted: bool,
    at: At,
}

impl<'p> NodeMachine<'p> {
    /// A machine for `task` on the node `node` under `plan`.
    pub fn new(plan: &'p Plan, node: &str, task: Task) -> Self {
        let step = match &task {
            Task::Settle(steps) => steps.first().map_or(CaStep::Status, |(s, _)| *s),
            Task::Read => CaStep::Status,
            Task::Phase { step, .. } => *step,
            Task::Verify { .. } => CaStep::Verify,
        };
        NodeMachine {
            plan,
            node: node.to_string(),
            task,
            step,
            leftover: 0,
            acted: false,
            at: At::Start,
        }
    }

    /// The first step.
    pub fn start(&mut self) -> Step {
        match &self.task {
            Task::Settle(_) => self.leftover_at_hand(Vec::new()),
            Task::Phase {
                step,
                status,
                took,
                absent,
                ..
            } => {
                let step = *step;
                if *absent {
                    let (status, took) = (status.clone(), *took);
                    return self.phase(None, status.as_ref(), took);
                }
                self.go(At::Finding, Vec::new(), Intent::FindJob { step })
            }
            Task::Read => self.fence(Vec::new(), Then::ReadStatus(None)),
            Task::Verify { also } => {
                let also = also.clone();
                self.fence(Vec::new(), Then::Verify(also))
            }
        }
    }

    /// The step the node has under way (a host Job, a status read, a verify), if any: what a
    /// run cut short where it stood reports it interrupted at. Reading our Job before a
    /// step, and clearing a leftover, are not one.
    pub fn in_flight(&self) -> Option<CaStep> {
        match &self.at {
            At::Start
            | At::Finding
            | At::Marking(_)
            | At::Clearing
            | At::Fencing(Then::Clear { .. }) => None,
            At::Fencing(Then::ReadStatus(_)) | At::Reading(_) => Some(CaStep::Status),
            At::Fencing(Then::Verify(_)) | At::Verifying => Some(CaStep::Verify),
            At::Over(step) => *step,
            _ => Some(self.step),
        }
    }

    /// The step the machine is at: the one a Lease lost now interrupts.
    pub fn current_step(&self) -> CaStep {
        self.in_flight().unwrap_or(self.step)
    }

    /// Takes the answer to the last intent.
    pub fn step(&mut self, obs: Observation) -> Step {
        let step = self.step;
        // Until the next intent, the machine is over at the step under way: a failure now is
        // the failure of that step.
        let flying = self.in_flight();
        match (std::mem::replace(&mut self.at, At::Over(flying)), obs) {
            (At::Fencing(then), Observation::LeaseLost(lost)) => {
                let why = lost.to_string();
                if let Then::Verify(_) = then {
                    return self.done(Ok(Answer::Verified(Verified::Error(why))));
                }
                let step = self.current_step();
                self.done(Err(NodeResult::Interrupted { step, why }))
            }
            (At::Fencing(then), Observation::LeaseHeld) => self.cleared(then),
            (At::Marking(known_free), Observation::Written) => self.host(known_free),
            (At::Marking(_), Observation::Failed(why)) => {
                let message = format!("{}; no {} job was created", why.message, command(step));
                self.fail(failure(step, why.kind, message, None, None))
            }
            (At::Finding, Observation::Job(job)) => match &self.task {
                Task::Phase { status, took, .. } => {
                    let (status, took) = (status.clone(), *took);
                    self.phase(job, status.as_ref(), took)
                }
                _ => self.settle(job),
            },
            // Our Job unreadable: the node fails, named, with no Event.
            (At::Finding | At::Ended { .. }, Observation::Failed(why)) => {
                self.done(Err(NodeResult::Failed(Failure::of(step, why))))
            }
            (At::Hosting, Observation::Host(Ok(report))) => {
                let kept = self.keeps();
                self.hosted(report, kept)
            }
            (At::Answering, Observation::Host(Ok(report))) => self.hosted(report, true),
            (At::Hosting | At::Answering, Observation::Host(Err(why))) => {
                self.fail(failure(step, FailureKind::Job, why, None, None))
            }
            (At::Hosting, Observation::Unread(unread)) => {
                self.go(At::Unread(unread), Vec::new(), Intent::FindJob { step })
            }
            // Exit 0 is the step's answer, and its log only ever explains a failure: a Job that
            // succeeded and whose Pod is gone since is taken as succeeded, adopted by its UID
            // and read without the log. Never a new Job.
            (At::Unread(unread), Observation::Job(Some(job)))
                if nodejob_core::succeeded(&job) && job.metadata.uid.is_some() =>
            {
                let uid = job.metadata.uid.unwrap_or_default();
                let marks = vec![Mark::Note(format!(
                    "{unread}; the job {} succeeded: exit 0 is the answer",
                    self.job()
                ))];
                self.go(At::Answering, marks, Intent::WaitJob { step, uid })
            }
            (At::Unread(unread), Observation::Job(_) | Observation::Failed(_)) => {
                self.fail(failure(step, FailureKind::Job, unread, None, None))
            }
            (At::Restarting(_), Observation::Watched(Watched::Deleted)) => {
                self.fail(self.deleted())
            }
            (At::Restarting(ran), Observation::Watched(_)) => {
                self.go(At::Readying(ran), Vec::new(), Intent::WaitReady)
            }
            (At::Readying(mut ran), Observation::Watched(watched)) => match watched {
                Watched::Met => {
                    ran.message
                        .push_str("; its components restarted and it is Ready");
                    self.report(ran)
                }
                Watched::Deleted => self.fail(self.deleted()),
                Watched::TimedOut => {
                    let message = format!(
                        "node {} did not come back Ready within {} of `carotate issue` \
                         restarting its components",
                        self.node,
                        nodejob_core::duration::said(self.plan.spec().ready_timeout)
                    );
                    self.fail(failure(
                        CaStep::Issue,
                        FailureKind::TimedOut,
                        message,
                        None,
                        None,
                    ))
                }
                Watched::Failed(why) => {
                    self.fail(failure(CaStep::Issue, FailureKind::Api, why, None, None))
                }
            },
            (At::Reading(ran), Observation::Status(read)) => self.read(ran, read),
            (At::Recording(ran), Observation::Written) => self.recorded(ran, Vec::new()),
            // Recording is for a preview to show; only after `issue` is it the cluster's mark.
            (At::Recording(ran), Observation::Failed(why)) if step != CaStep::Issue => {
                self.recorded(ran, vec![Mark::Note(why.message)])
            }
            (At::Recording(_), Observation::Failed(why)) => {
                let message = format!(
                    "{why}; the issue job {} is kept as the mark that issue began on node {}",
                    self.job(),
                    self.node
                );
                self.fence(
                    Vec::new(),
                    Then::Fail(failure(step, why.kind, message, None, None)),
                )
            }
            (At::Deleting(ran), Observation::Written) => {
                let mut marks = Vec::new();
                if let Some(ran) = &ran {
                    marks.push(Mark::Finished(step, ran.message.clone()));
                }
                self.stepped(marks, ran)
            }
            (At::Deleting(_) | At::Clearing, Observation::Failed(why)) => {
                self.fail(Failure::of(step, why))
            }
            (At::Clearing, Observation::Written) => self.stepped(Vec::new(), None),
            (At::WaitingOut(uid), Observation::Host(result)) => {
                let ended = match result {
                    Ok(report) => format!("exited {}", report.exit_code),
                    Err(why) => why,
                };
                self.go(
                    At::Ended { uid, ended },
                    Vec::new(),
                    Intent::FindJob { step },
                )
            }
            (At::Ended { uid, ended }, Observation::Job(job)) => self.ended(uid, ended, job),
            (At::Verifying, Observation::Exit(exit)) => {
                let verified = match exit {
                    Ok(code) => Verified::Exit(code),
                    Err(why) => Verified::Error(why),
                };
                self.done(Ok(Answer::Verified(verified)))
            }
            (at, obs) => {
                let step = self.current_step();
                let why = format!("internal: unexpected answer {obs:?} at {at:?}");
                self.fail(failure(step, FailureKind::Internal, why, None, None))
            }
        }
    }

    /// The Lease is ours: on to the write it fenced.
    fn cleared(&mut self, then: Then) -> Step {
        let step = self.step;
        match then {
            Then::ReadStatus(ran) => self.go(At::Reading(ran), Vec::new(), Intent::ReadStatus),
            Then::Delete { uid, ran } => {
                // A step's own Job, finished; else a leftover waited out.
                let gone = if ran.is_some() {
                    Gone::Later
                } else {
                    Gone::Awaited
                };
                let intent = Intent::DeleteJob { step, uid, gone };
                self.go(At::Deleting(ran), Vec::new(), intent)
            }
            Then::Clear { uid } => {
                let gone = Gone::Awaited;
                let intent = Intent::DeleteJob { step, uid, gone };
                self.go(At::Clearing, Vec::new(), intent)
            }
            Then::Fail(f) => self.fail(f),
            Then::Verify(also) => self.go(At::Verifying, Vec::new(), Intent::Verify { also }),
        }
    }

    /// Our Job of the phase's step, if any: nothing (passed), adopt it, or run the step.
    fn phase(&mut self, job: Option<Box<Job>>, status: Option<&CaStatus>, took: bool) -> Step {
        let step = self.step;
        let passed = status.filter(|s| step.passed(s, self.plan.fingerprint()));
        match decide(job.as_deref(), passed.is_some()) {
            Decision::Nothing => {
                let mut marks = Vec::new();
                if job.is_some() {
                    marks.push(Mark::Note(format!(
                        "passed {step} already; its failed job {} is left for inspection",
                        self.job()
                    )));
                }
                if let Some(status) = passed
                    && !took
                {
                    let why = format!("passed already: it reports {}", status.describe());
                    marks.push(Mark::Own(Own::Skipped(step, why)));
                }
                self.done_with(marks, Ok(Answer::Acted(false)))
            }
            Decision::Adopt(uid) => self.adopt(uid),
            // A failed Job of ours left for inspection is replaced: the runner reads it first.
            Decision::Run if self.ahead() => {
                let intent = Intent::MarkAhead { step };
                self.go(At::Marking(job.is_none()), Vec::new(), intent)
            }
            Decision::Run => self.host(job.is_none()),
        }
    }

    /// Creates the step's host Job (`known_free`: no Job of ours of the step is there). The
    /// Lease is read right before the create, after the step's `Started` condition and any wait
    /// on the pause switch (the hands' read: [`Intent::Host`]), so no read of the machine's own
    /// precedes it: that one fenced only the condition, a write the fenced writer refuses once
    /// the Lease is known lost, as every record and condition of the run.
    fn host(&mut self, known_free: bool) -> Step {
        let step = self.step;
        let (also, keep) = (self.also(), self.keeps());
        self.go(
            At::Hosting,
            vec![Mark::Started(step)],
            Intent::Host {
                step,
                adopt: None,
                also,
                keep,
                known_free,
            },
        )
    }

    /// Our Job of the leftover step at hand, if any, settled as its [`Leftover`] says.
    fn settle(&mut self, job: Option<Box<Job>>) -> Step {
        let step = self.step;
        let how = self.how();
        let Some(job) = job else {
            return self.next_leftover(Vec::new());
        };
        match (decide(Some(&job), true), how) {
            (Decision::Adopt(uid), Leftover::Adopt) => self.adopt(uid),
            (Decision::Adopt(uid), Leftover::WaitOut) => {
                let marks = vec![Mark::Note(format!(
                    "waiting for the {} job {} an earlier run left on node {}: \
                     nothing is read or decided there before it ended",
                    command(step),
                    self.job(),
                    self.node
                ))];
                let intent = Intent::WaitJob {
                    step,
                    uid: uid.clone(),
                };
                self.go(At::WaitingOut(uid), marks, intent)
            }
            // Being deleted, its pod may still run: waited out until it is gone. (One of the
            // rotation's own steps is waited out by the runner before it is replaced.)
            _ if how == Leftover::WaitOut && job.metadata.deletion_timestamp.is_some() => {
                let uid = job.metadata.uid.clone().unwrap_or_default();
                self.fence(Vec::new(), Then::Clear { uid })
            }
            _ => self.next_leftover(Vec::new()),
        }
    }

    /// A leftover of the other direction ended (`ended`): our Job of `uid` as read now.
    fn ended(&mut self, uid: String, ended: String, job: Option<Box<Job>>) -> Step {
        let step = self.step;
        let (command, name) = (command(step), self.job());
        let job = job.filter(|j| j.metadata.uid.as_deref() == Some(uid.as_str()));
        match job {
            Some(job) if !nodejob_core::finished(&job) => {
                let message = format!(
                    "the {command} job {name} an earlier run left on node {} has not \
                     ended ({ended}); nothing is done there before it has",
                    self.node
                );
                self.fail(failure(step, FailureKind::Node, message, None, None))
            }
            Some(job) if nodejob_core::failed(&job) => {
                let note =
                    format!("the {command} job {name} ended: {ended}; it is left for inspection");
                self.acted = true;
                self.next_leftover(vec![Mark::Note(note)])
            }
            _ => {
                let note = format!("the {command} job {name} ended: {ended}");
                self.fence(vec![Mark::Note(note)], Then::Delete { uid, ran: None })
            }
        }
    }

    /// Adopts our Job of `uid`: its result is the step's.
    fn adopt(&mut self, uid: String) -> Step {
        let step = self.step;
        let marks = vec![
            Mark::Note(format!(
                "adopting the `carotate {}` job {} an earlier run started: its result is the \
                 answer",
                step.subcommand(),
                self.job()
            )),
            Mark::Started(step),
        ];
        let (adopt, also, keep) = (Some(uid), self.also(), self.keeps());
        let intent = Intent::Host {
            step,
            adopt,
            also,
            keep,
            known_free: false,
        };
        self.go(At::Hosting, marks, intent)
    }

    /// The host Job's report: a failure (its Job kept), or on to done with it.
    fn hosted(&mut self, report: Report, kept: bool) -> Step {
        let step = self.step;
        if report.exit_code != 0 {
            let message = format!(
                "`carotate {}` exited {} on node {}; job {} is left for inspection",
                step.subcommand(),
                report.exit_code,
                self.node,
                self.job()
            );
            let log_tail = report.log.as_deref().map(|l| log_tail(l, LOG_TAIL_LINES));
            return self.fail(failure(
                step,
                FailureKind::Host,
                message,
                Some(report.exit_code),
                log_tail,
            ));
        }
        // Its output ends with where the node stands now, and after `issue --expect` with
        // what `verify` said: the gates read them from here.
        let out = (report.log.as_deref())
            .map(|log| parse_phase_output(&self.node, log))
            .unwrap_or_default();
        let new = self.plan.fingerprint();
        let verified = out.verdict.and_then(|v| match v.expect.split_first() {
            Some((first, also)) if first == new => {
                Some((also.to_vec(), Verified::Exit(v.exit_code)))
            }
            _ => None,
        });
        let ran = Ran {
            uid: report.uid,
            message: format!("`carotate {}` exited 0", step.subcommand()),
            before: out.before,
            status: out.status,
            verified,
            kept,
        };
        if step != CaStep::Issue {
            return self.report(ran);
        }
        // `issue` restarts the node's components: NotReady within the grace (a node that
        // stays Ready through it is taken as restarted), then Ready again.
        if self.plan.spec().restart_grace.is_zero() {
            return self.go(At::Readying(ran), Vec::new(), Intent::WaitReady);
        }
        self.go(At::Restarting(ran), Vec::new(), Intent::WaitNotReady)
    }

    /// What `carotate status` answered: a status (done, or after `issue`: recorded on the node,
    /// the cluster's mark that issue began there once its Job is deleted), or a failure.
    fn read(&mut self, ran: Option<Ran>, read: Result<(i32, String), String>) -> Step {
        let node = &self.node;
        let read = match read {
            Ok((0, log)) => parse_status(node, &log).map_err(|e| {
                failure(
                    CaStep::Status,
                    FailureKind::Host,
                    e.to_string(),
                    Some(0),
                    None,
                )
            }),
            Ok((code, log)) => Err(failure(
                CaStep::Status,
                FailureKind::Host,
                format!("`carotate status` exited {code} on node {node}"),
                Some(code),
                Some(log_tail(&log, LOG_TAIL_LINES)),
            )),
            Err(e) => Err(failure(
                CaStep::Status,
                FailureKind::Job,
                format!("reading `carotate status` on node {node}: {e}"),
                None,
                None,
            )),
        };
        let status = match read {
            Ok(status) => status,
            Err(f) => return self.fail(f),
        };
        match ran {
            None => self.done(Ok(Answer::Status(status))),
            Some(mut ran) => {
                ran.status = Some(status);
                self.report(ran)
            }
        }
    }

    /// A host step that exited 0 (after `issue`, its node Ready again): what the node reports
    /// now recorded on it (after `finalize`, with the condition that says it rotated), then
    /// its Job deleted if kept. What it reports is the step's output's status line; a step
    /// whose output did not end with one is followed by a `carotate status` read. Settling,
    /// only an `issue` is recorded: the run reads every node after.
    fn report(&mut self, ran: Ran) -> Step {
        let settling = matches!(self.task, Task::Settle(_));
        if settling && self.step != CaStep::Issue {
            return self.recorded(ran, Vec::new());
        }
        match ran.status.clone() {
            Some(status) => {
                let marks = vec![Mark::Own(Own::Reported(status.clone()))];
                let mark = self.step == CaStep::Issue;
                let rotated = self.step == CaStep::Finalize;
                let intent = Intent::Record {
                    status,
                    mark,
                    rotated,
                };
                self.go(At::Recording(ran), marks, intent)
            }
            None => {
                let note = format!(
                    "`carotate {}` left no status line to read on node {} (its log unread, or \
                     a host that does not print one): reading `carotate status`",
                    self.step.subcommand(),
                    self.node
                );
                self.fence(vec![Mark::Note(note)], Then::ReadStatus(Some(ran)))
            }
        }
    }

    /// The status after a host step recorded (or not needed): its Job deleted if kept (after
    /// `issue`, at once: the record's own Lease check fences it), else the step is finished.
    fn recorded(&mut self, ran: Ran, marks: Vec<Mark>) -> Step {
        if !ran.kept {
            let finished = Mark::Finished(self.step, ran.message.clone());
            let marks = marks.into_iter().chain([finished]).collect();
            return self.stepped(marks, Some(ran));
        }
        let uid = ran.uid.clone();
        let ran = Some(ran);
        if self.step == CaStep::Issue {
            let step = self.step;
            let intent = Intent::DeleteJob {
                step,
                uid,
                gone: Gone::Later,
            };
            return self.go(At::Deleting(ran), marks, intent);
        }
        self.fence(marks, Then::Delete { uid, ran })
    }

    /// A host step (or a leftover) done with: the next leftover, or the phase's answer.
    fn stepped(&mut self, marks: Vec<Mark>, ran: Option<Ran>) -> Step {
        self.acted = true;
        match (&self.task, ran) {
            (Task::Settle(_), _) => self.next_leftover(marks),
            (
                _,
                Some(Ran {
                    before,
                    status: Some(status),
                    verified,
                    ..
                }),
            ) => {
                let stepped = Stepped {
                    before,
                    status,
                    verified,
                };
                self.done_with(marks, Ok(Answer::Stepped(stepped)))
            }
            _ => self.done_with(marks, Ok(Answer::Acted(true))),
        }
    }

    /// Whether the host Job of the step at hand is kept once it succeeded: `issue`'s, the mark
    /// that issue began until its status is recorded on the node.
    fn keeps(&self) -> bool {
        self.step == CaStep::Issue
    }

    /// Whether the mark is written ahead of the step's Job (see [`Task::Phase`]).
    fn ahead(&self) -> bool {
        matches!(self.task, Task::Phase { ahead: true, .. })
    }

    /// What `issue`'s verify expects besides the new CA.
    fn also(&self) -> Vec<Fingerprint> {
        match &self.task {
            Task::Phase { also, .. } if self.step == CaStep::Issue => also.clone(),
            _ => Vec::new(),
        }
    }

    /// The next leftover step to settle.
    fn next_leftover(&mut self, marks: Vec<Mark>) -> Step {
        self.leftover += 1;
        self.leftover_at_hand(marks)
    }

    /// Our Job of the leftover step at hand, to read; the answer when none is left.
    fn leftover_at_hand(&mut self, marks: Vec<Mark>) -> Step {
        let Task::Settle(steps) = &self.task else {
            return self.done_with(marks, Ok(Answer::Acted(self.acted)));
        };
        let Some(&(step, _)) = steps.get(self.leftover) else {
            let acted = self.acted;
            return self.done_with(marks, Ok(Answer::Acted(acted)));
        };
        self.step = step;
        self.go(At::Finding, marks, Intent::FindJob { step })
    }

    /// How the leftover at hand is taken.
    fn how(&self) -> Leftover {
        match &self.task {
            Task::Settle(steps) => steps
                .get(self.leftover)
                .map_or(Leftover::Adopt, |(_, h)| *h),
            _ => Leftover::Adopt,
        }
    }

    /// The name of our Job of the step at hand.
    fn job(&self) -> String {
        self.plan.job_name(self.step, &self.node)
    }

    /// The node deleted while waiting for it after `issue`.
    fn deleted(&self) -> Failure {
        // The runs of spaces are in the message as it has always been written.
        let message = format!(
            "node {} was deleted from the cluster while waiting for it to be Ready again                  after `carotate issue` restarted its components; its issue job is kept as the                  mark that issue began there",
            self.node
        );
        failure(CaStep::Issue, FailureKind::Node, message, None, None)
    }

    /// Checks the Lease (after `marks`), then `then`.
    fn fence(&mut self, marks: Vec<Mark>, then: Then) -> Step {
        self.go(At::Fencing(then), marks, Intent::CheckLease)
    }

    fn fail(&mut self, f: Failure) -> Step {
        let flying = self.in_flight();
        self.at = At::Over(flying);
        Step {
            marks: Vec::new(),
            intent: Intent::Fail(f),
        }
    }

    fn done(&mut self, end: Result<Answer, NodeResult>) -> Step {
        self.done_with(Vec::new(), end)
    }

    fn done_with(&mut self, marks: Vec<Mark>, end: Result<Answer, NodeResult>) -> Step {
        let flying = self.in_flight();
        self.at = At::Over(flying);
        Step {
            marks,
            intent: Intent::Done(end),
        }
    }

    fn go(&mut self, at: At, marks: Vec<Mark>, intent: Intent) -> Step {
        self.at = at;
        Step { marks, intent }
    }
}

/// `` `carotate <step>` ``.
fn command(step: CaStep) -> String {
    format!("`carotate {}`", step.subcommand())
}

fn failure(
    step: CaStep,
    kind: FailureKind,
    message: String,
    exit_code: Option<i32>,
    log_tail: Option<String>,
) -> Failure {
    Failure {
        step,
        kind,
        message,
        exit_code,
        log_tail,
    }
}

/// The machine as the engine's executor drives it ([`nodejob_roll::Context::drive`]).
impl nodejob_roll::Machine for NodeMachine<'_> {
    type Step = CaStep;
    type Own = Own;
    type Intent = Intent;
    type Observation = Observation;

    fn at(&self) -> CaStep {
        self.current_step()
    }

    fn in_flight(&self) -> Option<CaStep> {
        NodeMachine::in_flight(self)
    }

    fn step(&mut self, obs: Observation) -> Step {
        NodeMachine::step(self, obs)
    }
}
