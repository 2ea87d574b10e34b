//! [`Context::drive`]: the per-node executor both drivers run on. A driver's node machine is
//! sans IO: given what was observed, it answers a [`Turn`] (the [`Mark`]s of what happened,
//! then one intent). The driver's [`Hands`] perform an intent on the cluster; everything
//! around the intents is written here once, in this order, for every turn:
//!
//! ```text
//!   in flight at machine.in_flight()            (what a run cut short reports)
//!   the fence, when the intent writes           lost  -> interrupted at the step
//!     (read unless the node read it with no wait since: Hands::waits)
//!   marks of what already happened, told        (progress, the report, Events: fenced by
//!                                               that read when there was one)
//!     (a finish said with the next: kept, and said in the node's next Event)
//!   a step begins here (Hands::gate)?
//!     the pause switch (Hands::paused)          paused out, stopped, lost -> interrupted
//!     resumed: the node read again              deleted, replaced -> as the driver says
//!     a stop asked                              -> interrupted where the step would begin
//!   the rest of the marks, told
//!   Act::Do(intent)    -> Hands::perform -> machine.step(observation) -> next turn
//!   Act::Failed        -> interrupted when the Lease is lost, else a Warning Event; ends
//!   Act::End           -> its Warning Event, if any; ends
//! ```
//!
//! A step acts on what it has just read: a step that waited on the pause switch starts only
//! on the node it was decided for, read again after the wait ([`crate::read_again`]); the
//! intents that must see the node fresh at their write (a host Job's preflight) are the
//! machine's own, read by the hands right before it.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use nodejob_core::pause::Pause;
use nodejob_core::{ApiError, EventType, JobApi, LeaseApi, NodeApi};

use crate::call::millis;
use crate::context::{Context, EventFence, Source};
use crate::engine::RollEvent;
use crate::pause::{Passed, ReadAgain, Waiting, pause_before, read_again};
use crate::progress::{Failure, OwnEvents, Progress};

/// A driver's step, as progress, the report and the node's Events name it.
pub trait RollStep: Copy + Eq + fmt::Display + Send + Sync + 'static {
    /// The reason of the node's Events about it (`UpgradeDrain`, `CARotationIssue`).
    fn reason(&self) -> String;
}

/// Something a node machine reports, in order, before its intent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mark<S, O> {
    /// A step begins: told, and the node's condition says it.
    Started(S),
    /// A step ended well, with a message: told, counted in the report, a Normal Event.
    Finished(S, String),
    /// A note worth an operator's eye.
    Note(String),
    /// What only the driver tells ([`Hands::own`]).
    Own(O),
}

/// What a node machine wants next: the marks of what happened, then the one thing to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn<S, O, I> {
    /// Progress, in order, before the intent.
    pub marks: Vec<Mark<S, O>>,
    /// The one thing to do.
    pub intent: I,
}

/// A driver's sans-IO node machine, as the executor drives it.
pub trait Machine: Send {
    /// The driver's step.
    type Step: RollStep;
    /// The marks only the driver tells.
    type Own: Send;
    /// One thing to do.
    type Intent: Send;
    /// The answer to an intent.
    type Observation: Send;

    /// The step at hand: under way, or the next to begin.
    fn at(&self) -> Self::Step;

    /// The step under way, if any: what a run cut short reports the node interrupted at.
    fn in_flight(&self) -> Option<Self::Step> {
        Some(self.at())
    }

    /// The time, on the cluster's clock, of what the machine writes next (a record's).
    fn now(&mut self, _now: String) {}

    /// The next turn, given the answer to the last intent.
    fn step(&mut self, obs: Self::Observation) -> Turn<Self::Step, Self::Own, Self::Intent>;
}

/// A Warning Event on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
}

/// What a turn's intent comes to, as the executor handles it ([`Hands::act`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Act<I, S, E> {
    /// Performed by the hands; the machine takes the answer.
    Do(I),
    /// The node failed at a step: a Warning Event names it (with the exit code, when it
    /// gave one), and it ends with `end`. Once the Lease is lost it is interrupted at the
    /// step instead: the step may have failed of the loss (a write refused), and blames no
    /// node.
    Failed {
        /// The failure.
        failure: Failure<S>,
        /// How the node ends.
        end: E,
    },
    /// The node ends so, after the Warning Event, if any.
    End {
        /// How the node ends.
        end: E,
        /// What the node's Events say of it.
        warning: Option<Warning>,
    },
}

/// A driver's hands on one node: what the executor cannot know of its intents, and how each is
/// performed. One per node of a run, so what they keep of the node (the node as last
/// written, a wait's end) is the node's own.
#[async_trait]
pub trait Hands: Send {
    /// The machine they perform for.
    type Machine: Machine;
    /// How the node ends, as the driver reports it.
    type End: Send;

    /// The node's name.
    fn node(&self) -> &str;

    /// The step this turn begins, which waits on the pause switch and ends the node where a
    /// stop is asked; `None` when no step begins here, or one that always runs (the
    /// uncordon that puts a node back, a rollback decided on a failure, a Job adopted).
    fn gate(&self, turn: &Turn<Step<Self>, Own<Self>, Intent<Self>>) -> Option<Step<Self>>;

    /// Whether the Lease is read right before `intent` (a write of its own; the host Jobs a
    /// fenced writer creates need no read of their own).
    fn fenced(&self, _intent: &Intent<Self>) -> bool {
        false
    }

    /// Whether the Event of `step`'s finish is said in the node's next Event (its message
    /// first, then `; ` and the next's, under the next's reason), not in one of its own: a
    /// step whose finish a person reads best with the next's (the cordon with the drain it
    /// begins, as `kubectl drain` cordons first). Said on its own if the node has no Event
    /// after it. The progress and the report tell every step as before.
    fn said_with_next(&self, _step: Step<Self>) -> bool {
        false
    }

    /// Whether performing `intent` waits (on a drain, a Job, a watch, a sleep), so that the
    /// Lease is read again before the next write. `false` for an intent that is a request or
    /// a few, a read or a write, with nothing waited on between (transient errors retried
    /// within their bound): the Lease read before it still fences what follows. Every intent
    /// waits unless the driver says otherwise.
    fn waits(&self, _intent: &Intent<Self>) -> bool {
        true
    }

    /// What `intent` comes to: performed, or the node's end.
    fn act(
        &mut self,
        machine: &Self::Machine,
        intent: Intent<Self>,
    ) -> Act<Intent<Self>, Step<Self>, Self::End>;

    /// Performs `intent` on the cluster: its answer, or the node's end at once.
    async fn perform(
        &mut self,
        machine: &mut Self::Machine,
        intent: Intent<Self>,
    ) -> Result<Observation<Self>, Self::End>;

    /// The node was read again after it waited on the pause switch, before `step` starts on
    /// it: `Ok` when the step starts; else how the node ends (deleted or replaced, it was not
    /// the node the step was decided for).
    async fn resumed(
        &mut self,
        step: Step<Self>,
        read: Result<ReadAgain, ApiError>,
    ) -> Result<(), Self::End>;

    /// The node ends interrupted at `step`: why.
    fn interrupted(&self, step: Step<Self>, why: String) -> Self::End;

    /// `step` began on the node (told already): the node's condition says it.
    async fn started(&mut self, _step: Step<Self>) {}

    /// The rolls are paused (`pause`) where `step` would begin on the node: its condition
    /// says so while it waits, on a node that carries one of ours already.
    async fn paused(&mut self, _step: Step<Self>, _pause: &Pause) {}

    /// `step` ended well after `took_ms`: the report counts it.
    fn finished(&mut self, _step: Step<Self>, _took_ms: u64) {}

    /// The node waited `waited_ms` on the pause switch before `before` began: time the node's
    /// own figure leaves out.
    fn waited(&mut self, _before: Step<Self>, _waited_ms: u64) {}

    /// A mark only the driver tells.
    async fn own(&mut self, own: Own<Self>);
}

/// What telling a mark reads and moves of the node's drive: when the step under way started
/// (set by a start, read by a finish), whether the last read of the Lease is fresh, and the
/// finish held for the next Event.
struct Told<'t, S> {
    step_started: &'t mut Duration,
    fresh: &'t mut bool,
    held: &'t mut Option<(S, String)>,
}

/// `message` after the held finish's, if any: `cordoned; evicted 2 pod(s), left 0`.
fn with_held<S>(held: Option<(S, String)>, message: &str) -> String {
    match held {
        Some((_, first)) => format!("{first}; {message}"),
        None => message.to_string(),
    }
}

/// The step of hands' machine.
pub type Step<H> = <<H as Hands>::Machine as Machine>::Step;
/// The driver's own marks of hands' machine.
pub type Own<H> = <<H as Hands>::Machine as Machine>::Own;
/// The intent of hands' machine.
pub type Intent<H> = <<H as Hands>::Machine as Machine>::Intent;
/// The observation of hands' machine.
pub type Observation<H> = <<H as Hands>::Machine as Machine>::Observation;

impl<A, S, R, X> Context<'_, A, Progress<S, R, X>, S>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
    S: RollStep,
    R: Send + 'static,
    X: OwnEvents + Send + 'static,
    Progress<S, R, X>: RollEvent,
{
    /// Drives one node's machine from `turn` to its end, through `hands`, as the module says;
    /// `uid`: the node's UID as the run first read it (a node read again after a pause with
    /// another is not the node the step was decided for). The node is in flight until it
    /// ends.
    pub async fn drive<H>(
        &self,
        events: Source<'_>,
        hands: &mut H,
        machine: &mut H::Machine,
        mut turn: Turn<S, Own<H>, Intent<H>>,
        uid: Option<&str>,
    ) -> H::End
    where
        H: Hands,
        H::Machine: Machine<Step = S>,
    {
        let node = hands.node().to_string();
        // A finish said with the node's next Event (`Hands::said_with_next`): its step and its
        // message.
        let mut held: Option<(S, String)> = None;
        // Every return in the block ends the node; it lands after it, whichever it was.
        let end = async {
            let mut step_started = self.api.now();
            // Whether this node's last read of the Lease (a fence check that passed) was made
            // with nothing waited on since: only requests (`Hands::waits`). Such a read fences
            // the writes that follow it, and the Events told with them, as the turn's own check
            // always fenced the writes of its turn; the first write after a wait reads the
            // Lease again. So a node reads the Lease once per stretch of writes between two
            // waits, not once per write: the read of a write that follows another with no wait
            // between is replaced by the read that fenced the first.
            let mut fresh = false;
            loop {
                match machine.in_flight() {
                    Some(step) => self.flying(&node, step),
                    None => self.landed(&node),
                }
                // The fence first: once the Lease is lost, not even an Event is written. The
                // Events told next, before any wait, are fenced by this same read (or by the one
                // still fresh, `fresh`; a loss any other check has seen since still counts).
                if hands.fenced(&turn.intent) {
                    let checked = match self.fence.lost() {
                        Some(lost) => Err(lost),
                        None if fresh => Ok(()),
                        None => self.fence.check(self.api).await,
                    };
                    if let Err(lost) = checked {
                        return hands.interrupted(machine.at(), lost.to_string());
                    }
                    fresh = true;
                }
                // What already happened (the step before finished, a note) is told now, when it
                // happened; only the marks from the start of the next step on wait for the pause
                // switch, and a stop asked ends the node there, before the step's start is told.
                let starting = hands.gate(&turn);
                let Turn { mut marks, intent } = turn;
                let at = (marks.iter())
                    .position(|m| matches!(m, Mark::Started(s) if Some(*s) == starting))
                    .unwrap_or(marks.len());
                let next = marks.split_off(at);
                for mark in marks {
                    let told = Told {
                        step_started: &mut step_started,
                        fresh: &mut fresh,
                        held: &mut held,
                    };
                    (self.tell_mark(events, hands, mark, told)).await;
                }
                let stop = &self.limits.stop;
                if let Some(step) = starting
                    && !stop.requested()
                {
                    // Paused: the node says so where `kubectl describe node` shows it (the
                    // hands write it on a node of ours), not the step before, while it waits.
                    if let Some(pause) = self.fence.paused().await {
                        hands.paused(step, &pause).await;
                    }
                    let tell = |waiting| self.tell_waiting(&node, step, waiting);
                    let passed = pause_before(self.api, &self.fence, &self.limits, tell).await;
                    let passed = match passed {
                        Ok(Passed::Unpaused) => Ok(()),
                        // The step was decided on what was read before the wait.
                        Ok(Passed::Resumed { waited }) => {
                            fresh = false;
                            hands.waited(step, millis(waited));
                            let read = read_again(self.api, &node, uid).await;
                            hands.resumed(step, read).await
                        }
                        Err(why) => Err(hands.interrupted(step, why)),
                    };
                    if let Err(end) = passed {
                        return end;
                    }
                }
                let stop_here = starting.is_some() && stop.requested();
                for mark in next {
                    if !(stop_here && matches!(mark, Mark::Started(_))) {
                        // Past the pause switch: read again if it waited.
                        let told = Told {
                            step_started: &mut step_started,
                            fresh: &mut fresh,
                            held: &mut held,
                        };
                        (self.tell_mark(events, hands, mark, told)).await;
                    }
                }
                if stop_here {
                    return hands.interrupted(machine.at(), "stopped on request".into());
                }
                match hands.act(machine, intent) {
                    Act::Do(intent) => {
                        // After a wait, the next write reads the Lease again.
                        fresh &= !hands.waits(&intent);
                        match hands.perform(machine, intent).await {
                            Ok(obs) => {
                                // What the machine writes next (a record's time) is of now.
                                machine.now(self.api.wall_time().to_string());
                                turn = machine.step(obs);
                            }
                            Err(end) => return end,
                        }
                    }
                    Act::Failed { failure, end } => {
                        if let Some(lost) = self.fence.lost() {
                            let why = format!("{lost}; the step then: {}", failure.message);
                            return hands.interrupted(failure.step, why);
                        }
                        let message = match failure.exit_code {
                            Some(code) => format!("{} (exit code {code})", failure.message),
                            None => failure.message.clone(),
                        };
                        let reason = failure.step.reason();
                        let message = with_held(held.take(), &message);
                        self.warn(events, &node, &reason, &message).await;
                        return end;
                    }
                    Act::End { end, warning } => {
                        if let Some(w) = warning {
                            let message = with_held(held.take(), &w.message);
                            self.warn(events, &node, &w.reason, &message).await;
                        }
                        return end;
                    }
                }
            }
        }
        .await;
        // A finish kept for an Event that never came (the node ended without one): said on
        // its own, the Lease read first.
        if let Some((step, message)) = held {
            let (kind, reason) = (EventType::Normal, step.reason());
            (self.event(EventFence::Read, events, &node, kind, &reason, &message)).await;
        }
        self.landed(&node);
        end
    }

    /// Tells one mark of `hands`' node: progress, the report, an Event, the condition. The
    /// Event reads the Lease first unless `told.fresh`: a read of it with no wait since
    /// fences it (the turn's own check, or the last one); a read it makes is fresh for what
    /// follows. A finish said with the next Event is kept in `told.held` instead, and said
    /// first in the next.
    async fn tell_mark<H>(
        &self,
        events: Source<'_>,
        hands: &mut H,
        mark: Mark<S, Own<H>>,
        told: Told<'_, S>,
    ) where
        H: Hands,
        H::Machine: Machine<Step = S>,
    {
        let node = hands.node().to_string();
        let Told {
            step_started,
            fresh,
            held,
        } = told;
        match mark {
            Mark::Started(step) => {
                *step_started = self.api.now();
                self.tell(&Progress::StepStarted {
                    node: node.clone(),
                    step,
                });
                hands.started(step).await;
            }
            Mark::Finished(step, message) => {
                let took = millis(self.api.now().saturating_sub(*step_started));
                hands.finished(step, took);
                self.tell(&Progress::StepFinished {
                    node: node.clone(),
                    step,
                    took_ms: took,
                    message: message.clone(),
                });
                let message = with_held(held.take(), &message);
                if hands.said_with_next(step) {
                    *held = Some((step, message));
                    return;
                }
                let reason = step.reason();
                let fence = if *fresh {
                    EventFence::Checked
                } else {
                    EventFence::Read
                };
                let kind = EventType::Normal;
                (self.event(fence, events, &node, kind, &reason, &message)).await;
                // A read that passed: the Event's check is the next write's too.
                *fresh = self.fence.lost().is_none();
            }
            Mark::Note(message) => self.tell_note(&node, message),
            Mark::Own(own) => hands.own(own).await,
        }
    }

    /// What a node's wait on the pause switch before `before` tells, as progress.
    fn tell_waiting(&self, node: &str, before: S, waiting: Waiting) {
        let node = node.to_string();
        self.tell(&match waiting {
            Waiting::Paused(pause) => Progress::Paused {
                node,
                before,
                by: pause.by,
                at: pause.at.map(|t| t.to_string()),
                reason: pause.reason,
            },
            Waiting::Resumed { waited } => Progress::Resumed {
                node,
                before,
                waited_ms: millis(waited),
            },
        });
    }

    fn tell_note(&self, node: &str, message: String) {
        self.tell(&Progress::Note {
            node: Some(node.to_string()),
            message,
        });
    }

    async fn warn(&self, events: Source<'_>, node: &str, reason: &str, message: &str) {
        let kind = EventType::Warning;
        (self.event(EventFence::Read, events, node, kind, reason, message)).await;
    }
}
