//! [`Limits`]: what stops a roll from starting its next batch: a stop request, the failure
//! budget spent, the maintenance window closed. One value carries them all, so an option
//! written once (here) holds for every driver, and [`Limits::sleep`] is cut short by a stop.

use std::time::Duration;

use crate::Stop;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use nodejob_core::Clock;

use crate::window::Window;

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
        }
    }

    /// Why no further batch may start once `blocked` nodes were blocked: more than
    /// `max_blocked`; `None`: it may.
    pub fn past_blocked(&self, blocked: u32) -> Option<String> {
        (blocked > self.max_blocked).then(|| {
            format!(
                "{blocked} node(s) blocked by budgets allowing no disruption: more than \
                 max_blocked ({})",
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
            return Some("stopped on request; nodes in flight finished their step".into());
        }
        if let Some((window, tz)) = &self.window
            && !window.is_open(tz, now)
        {
            let next = window
                .next_open(tz, now)
                .map(|t| format!("; it next opens at {}", t.to_zoned(tz.clone())))
                .unwrap_or_default();
            return Some(format!("outside the maintenance window{next}"));
        }
        None
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
