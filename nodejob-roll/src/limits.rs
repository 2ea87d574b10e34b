//! [`Limits`]: what stops a roll from starting its next batch: a stop request, the failure
//! budget spent, the maintenance window closed, a pause past its deadline. One value carries them all, so an option
//! written once (here) holds for every driver, and [`Limits::sleep`] is cut short by a stop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_core::pause::Pause;

use crate::Stop;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use nodejob_core::Clock;

use crate::window::Window;

/// How long a paused run waits, by default, before it ends paused ([`crate::pause`]): a night.
pub const PAUSE_DEADLINE: Duration = Duration::from_secs(12 * 3600);

/// What may keep the next batch from starting.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The stop request (a signal handler holds another handle of it).
    pub stop: Stop,
    /// How many failed nodes stop the roll (at least one).
    pub failure_budget: u32,
    /// When nodes may start, with its time zone (validated by the plan).
    pub window: Option<(Window, TimeZone)>,
    /// How many blocked nodes (undrainable: skipped or quarantined) a roll goes on past;
    /// one more stops it as a failure does.
    pub max_blocked: u32,
    /// How long the run waits while paused ([`crate::pause`]) before it ends paused.
    pub pause_deadline: Duration,
    /// The run's pauses, shared by its nodes.
    pub paused: Arc<Paused>,
}

/// A run's pauses, shared by its nodes.
#[derive(Debug, Default)]
pub struct Paused {
    /// When the nodes began to wait (on the backend's clock); `None` while not paused.
    pub since: Mutex<Option<Duration>>,
    /// The pause still on when the deadline passed: no further node starts.
    out: Mutex<Option<Pause>>,
}

impl Paused {
    /// The pause the run ended on, if it did.
    pub fn ended(&self) -> Option<Pause> {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The run ends on `pause`, still on at the deadline.
    pub fn end(&self, pause: Pause) {
        *self.out.lock().unwrap_or_else(|e| e.into_inner()) = Some(pause);
    }
}

/// How a [`Limits::sleep`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slept {
    /// The whole duration passed.
    Elapsed,
    /// A stop was requested first.
    Stopped,
}

impl Limits {
    /// No window, a failure budget of one, under `stop`.
    pub fn new(stop: Stop) -> Self {
        Limits {
            stop,
            failure_budget: 1,
            window: None,
            max_blocked: 1,
            pause_deadline: PAUSE_DEADLINE,
            paused: Arc::new(Paused::default()),
        }
    }

    /// Why no further batch may start once `blocked` nodes were blocked: more than
    /// `max_blocked`; `None`: it may.
    pub fn past_blocked(&self, blocked: u32) -> Option<String> {
        (blocked > self.max_blocked).then(|| {
            format!(
                "{blocked} node(s) blocked by budgets allowing no disruption: more than the plan \
                 allows (at most {} blocked)",
                self.max_blocked
            )
        })
    }

    /// Why no further batch may start, once `failed` nodes failed, at `now`; `None`: it may.
    /// In this order: the failure budget, a stop request, the window.
    pub fn why_not(&self, failed: u32, now: Timestamp) -> Option<String> {
        if failed >= self.failure_budget {
            return Some(format!(
                "{failed} node(s) failed: the failure budget ({}) is spent",
                self.failure_budget
            ));
        }
        if self.stop.requested() {
            return Some("as asked; the nodes in flight finished their step".into());
        }
        if let Some(pause) = self.paused.ended() {
            return Some(paused_out(&pause, self.pause_deadline));
        }
        let (window, tz) = self.window.as_ref()?;
        crate::not_now::window_closed(window, tz, now).map(|closed| closed.to_string())
    }

    /// Sleeps `duration` on the backend's clock, or less when a stop is requested.
    pub async fn sleep<C: Clock + ?Sized>(&self, clock: &C, duration: Duration) -> Slept {
        let slept = std::pin::pin!(clock.sleep(duration));
        match futures::future::select(slept, self.stop.asked()).await {
            futures::future::Either::Left(_) => Slept::Elapsed,
            futures::future::Either::Right(_) => Slept::Stopped,
        }
    }
}

/// Why a run ended paused: `pause`, still on after `deadline`.
pub fn paused_out(pause: &Pause, deadline: Duration) -> String {
    format!(
        "{pause}; still paused after {}, the run's pause deadline: nodes in flight finished \
         their step; `nodejob resume`, then run again to carry on",
        nodejob_core::duration::said(deadline)
    )
}
