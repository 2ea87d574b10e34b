//! The pause switch as a run honours it ([`nodejob_core::pause`]): before every step starts on
//! a node, the Lease as last read is asked whether the rolls are paused: no call is added while
//! nothing is paused. The first write after every wait reads the Lease (the executor's fence),
//! and so does the Event that tells a step finished after a wait, before the next step starts;
//! the renewal, when due, is that read ([`nodejob_core::lease::Held::check`]). Paused, the node waits where it
//! stands (the step before it finished), the Lease read again every [`PAUSE_POLL`] (and kept
//! renewed by that read), until the switch is lifted, a stop is asked, the Lease is lost, or
//! the run's pause deadline ([`crate::Limits::pause_deadline`]) passes: the run then ends with
//! an outcome of its own ([`crate::Outcome::Paused`]). A node that waited is read again before
//! its step starts ([`read_again`]).

use std::time::Duration;

use futures::future::{Either, select};
use k8s_openapi::api::core::v1::Node;
use nodejob_core::pause::Pause;
use nodejob_core::{ApiError, LeaseApi, NodeApi};

use crate::call::retry;
use crate::fence::{Fence, LeaseLost};
use crate::limits::Limits;

/// How often a paused run reads the Lease again.
pub const PAUSE_POLL: Duration = Duration::from_secs(10);

/// What a node's wait on the switch came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Not paused (or no longer): the step starts.
    Go,
    /// Still paused at the deadline: the node stops where it stands, and the run ends paused.
    Deadline(Pause),
    /// A stop was asked while paused.
    Stopped(Pause),
    /// The Lease was lost while paused.
    Lost(LeaseLost),
}

/// What a node's wait tells, for the run's progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Paused (told when the wait begins, and again when who or why changes).
    Paused(Pause),
    /// The switch was lifted after `waited`.
    Resumed {
        /// How long the node waited.
        waited: Duration,
    },
}

/// Waits while the rolls are paused, before a step starts: at once [`Gate::Go`] when the Lease
/// as last read carries no switch; else waits as the module says, under `limits` (its stop, its
/// pause deadline, counted from when the run's nodes began to wait, so that nodes waiting
/// together end together).
pub async fn wait_unpaused<A: LeaseApi + ?Sized>(
    api: &A,
    fence: &Fence,
    limits: &Limits,
    tell: impl Fn(Waiting),
) -> Gate {
    let (deadline, since) = (limits.pause_deadline, &limits.paused.since);
    let Some(mut pause) = fence.paused().await else {
        return Gate::Go;
    };
    let began = api.now();
    let first = *since
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert(began);
    tell(Waiting::Paused(pause.clone()));
    loop {
        let waited = api.now().saturating_sub(first);
        if waited >= deadline {
            limits.paused.end(pause.clone());
            return Gate::Deadline(pause);
        }
        let nap = PAUSE_POLL.min(deadline - waited);
        let slept = std::pin::pin!(api.sleep(nap));
        if let Either::Right(_) = select(slept, limits.stop.asked()).await {
            return Gate::Stopped(pause);
        }
        if let Err(lost) = fence.check(api).await {
            return Gate::Lost(lost);
        }
        match fence.paused().await {
            None => {
                *since.lock().unwrap_or_else(|e| e.into_inner()) = None;
                tell(Waiting::Resumed {
                    waited: api.now().saturating_sub(began),
                });
                return Gate::Go;
            }
            Some(now) if now != pause => {
                tell(Waiting::Paused(now.clone()));
                pause = now;
            }
            Some(_) => {}
        }
    }
}

/// How a node went past the pause switch before a step ([`pause_before`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passed {
    /// The rolls were not paused: nothing was waited for.
    Unpaused,
    /// The node waited `waited` until the switch was lifted: what was read before is stale,
    /// and the step reads what it acts on again.
    Resumed {
        /// How long it waited.
        waited: Duration,
    },
}

/// The pause gate of one node, as both drivers' executors pass it before a step starts on it:
/// [`wait_unpaused`], what the wait tells passed on to `tell` (the executor makes it the
/// progress events `paused` and `resumed`). `Err(why)` when the node goes no further: still
/// paused at the run's pause deadline, a stop asked while paused, the Lease lost while it
/// waited.
pub async fn pause_before<A: LeaseApi + ?Sized>(
    api: &A,
    fence: &Fence,
    limits: &Limits,
    tell: impl Fn(Waiting),
) -> Result<Passed, String> {
    // A mutex, not a Cell: the future holds it across the wait, and is Send.
    let resumed = std::sync::Mutex::new(None);
    let told = |w: Waiting| {
        if let Waiting::Resumed { waited } = &w {
            *resumed.lock().unwrap_or_else(|e| e.into_inner()) = Some(*waited);
        }
        tell(w);
    };
    let gate = wait_unpaused(api, fence, limits, told).await;
    let resumed = resumed.into_inner().unwrap_or_else(|e| e.into_inner());
    match gate {
        Gate::Go if let Some(waited) = resumed => Ok(Passed::Resumed { waited }),
        Gate::Go => Ok(Passed::Unpaused),
        Gate::Deadline(p) => Err(crate::limits::paused_out(&p, limits.pause_deadline)),
        Gate::Stopped(p) => Err(format!("stopped on request while {p}")),
        Gate::Lost(lost) => Err(lost.to_string()),
    }
}

/// The node a step was decided for, read again after the node waited ([`Passed::Resumed`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ReadAgain {
    /// Still the node of the UID the run first read, as it is now.
    Same(Box<Node>),
    /// Another node of the same name (created after a delete): its UID.
    Replaced {
        /// The UID of the node there now.
        now: Option<String>,
    },
    /// Deleted.
    Deleted,
}

/// Reads node `name` again (transient errors retried) after a wait, and says whether it is
/// still the node of UID `uid` the step was decided for. Both drivers' executors ask it
/// before a step that waited starts: a node deleted or replaced meanwhile does not start it.
///
/// # Errors
/// The read failed otherwise than with NotFound.
pub async fn read_again<A: NodeApi + ?Sized>(
    api: &A,
    name: &str,
    uid: Option<&str>,
) -> Result<ReadAgain, ApiError> {
    match retry(api, || api.get_node(name)).await {
        Ok(node) if node.metadata.uid.as_deref() == uid => Ok(ReadAgain::Same(Box::new(node))),
        Ok(node) => Ok(ReadAgain::Replaced {
            now: node.metadata.uid,
        }),
        Err(e) if e.is_not_found() => Ok(ReadAgain::Deleted),
        Err(e) => Err(e),
    }
}
