//! [`Engine::pass`]: one pass of a roll over its [`Group`]s, the loop both drivers run on.
//! Before each batch it asks the [`Limits`] (failure budget, stop, window) and the
//! [`Admission`] (a fixed width, or what may go unavailable now); it runs the batch's nodes
//! together through the driver's step for one node, counts the failures, and ends at once
//! when the Lease is lost. The step is the driver's; the loop, its concurrency and its
//! shutdown are written here once (kube-runtime's `Controller::run` and the reconciler).
//!
//! ```text
//!   for each group, until its queue is empty:
//!     limits.why_not(failed, now)?  -> Stopping(why)  (told by the driver)
//!     limits.past_blocked(blocked)? -> Stopping(why)
//!     admission.admit(group, queue) -> Batch | Drained | Again | Refused(why)
//!     join_all(step(node) for node in batch); failed += failures
//!     fence lost?                   -> LeaseLost(why)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use crate::{DriverEvent, EventSink, Fence, is_control_plane};
use async_trait::async_trait;
use futures::future::join_all;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::{Clock, ready};

use crate::limits::Limits;
use crate::order::Group;

/// The events the engine itself tells, beside the driver's own: a driver's progress type
/// makes them.
pub trait RollEvent: DriverEvent + Sized {
    /// A batch starts (`index` from 0 over the whole run); `None`: the driver does not tell
    /// batches.
    fn batch_started(index: usize, group: &str, nodes: &[String]) -> Option<Self>;
    /// A note about the roll, not one node.
    fn notice(message: String) -> Self;
}

/// How one node of a batch ended, as the engine counts it.
pub trait NodeEnd {
    /// Whether it counts against the failure budget.
    fn failed(&self) -> bool;
    /// Whether it was blocked (its drain held past its timeout by budgets allowing no
    /// disruption, the node skipped or quarantined): it counts against `max_blocked`, not
    /// the failure budget.
    fn blocked(&self) -> bool {
        false
    }
}

/// What an [`Admission`] lets start now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admit {
    /// These nodes, together (taken out of the queue by the engine).
    Batch(Vec<String>),
    /// The group's queue is empty: every node left needs nothing now.
    Drained,
    /// Nothing now, after a wait: ask again (the limits are checked first).
    Again,
    /// Nothing, and nothing will: the roll stops, why.
    Refused(String),
}

/// Decides, before each batch, which nodes of a group start.
#[async_trait]
pub trait Admission: Send {
    /// The next batch of `group` from `queue` (its nodes not started yet, in order). May drop
    /// from `queue` nodes that need nothing now (the driver reports them).
    async fn admit(&mut self, group: &Group, queue: &mut Vec<String>) -> Admit;
}

/// A fixed width: the group's next `width` nodes, whatever the cluster says.
#[derive(Clone, Copy, Debug, Default)]
pub struct FixedWidth;

#[async_trait]
impl Admission for FixedWidth {
    async fn admit(&mut self, group: &Group, queue: &mut Vec<String>) -> Admit {
        if queue.is_empty() {
            return Admit::Drained;
        }
        Admit::Batch(queue.iter().take(group.width.max(1)).cloned().collect())
    }
}

/// What a driver tells [`MaxUnavailable`] of its nodes.
#[async_trait]
pub trait Fleet: Send + Sync {
    /// The plan's nodes as they are now: those the plan selects now, and those of `plan` (every
    /// name the roll began with) it no longer selects that still exist. Also answers the names
    /// selected now.
    async fn current(
        &self,
        plan: &BTreeSet<String>,
    ) -> Result<(Vec<Node>, BTreeSet<String>), String>;
    /// Whether the node named `name` stays in the queue: `node` is `None` when it is gone
    /// from the cluster; `selected` whether the plan selects it now. A node dropped is
    /// reported by the driver, here.
    fn keep(&self, name: &str, node: Option<&Node>, selected: bool) -> bool;
    /// Whether the driver holds `node` down: it cordoned it and has not finished it.
    fn held(&self, node: &Node) -> bool;
    /// Whether `node`, not Ready, may start all the same (the driver's own, in flight).
    fn resumable(&self, node: &Node) -> bool;
    /// Waits, bounded, until the node named `name` is Ready or gone; the answer is read again.
    async fn wait_ready(&self, name: &str);
}

/// `max_unavailable`, read again before each batch: never more than `width` nodes of the plan
/// unavailable at once (NotReady, or held down by the driver) counting the batch, a
/// control-plane node never beside another one down, and a node down that is not the
/// driver's own never started. Nodes down that the driver did not take down (a flap, a
/// kubelet restart) are waited for once, before the roll gives up.
pub struct MaxUnavailable<'f, F: ?Sized, E> {
    fleet: &'f F,
    width: usize,
    plan: BTreeSet<String>,
    progress: Arc<dyn EventSink<E>>,
    waited: bool,
}

impl<'f, F: Fleet + ?Sized, E: RollEvent> MaxUnavailable<'f, F, E> {
    /// At most `width` of `groups`' nodes unavailable at once.
    pub fn new(
        fleet: &'f F,
        width: usize,
        groups: &[Group],
        progress: Arc<dyn EventSink<E>>,
    ) -> Self {
        let plan = groups
            .iter()
            .flat_map(|g| g.nodes.iter().cloned())
            .collect();
        MaxUnavailable {
            fleet,
            width,
            plan,
            progress,
            waited: false,
        }
    }
}

fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

#[async_trait]
impl<F: Fleet + ?Sized, E: RollEvent + 'static> Admission for MaxUnavailable<'_, F, E> {
    async fn admit(&mut self, group: &Group, queue: &mut Vec<String>) -> Admit {
        let (nodes, selected) = match self.fleet.current(&self.plan).await {
            Ok(read) => read,
            Err(why) => return Admit::Refused(why),
        };
        let by_name: BTreeMap<&str, &Node> = nodes.iter().map(|n| (name(n), n)).collect();
        queue.retain(|n| {
            (self.fleet).keep(n, by_name.get(n.as_str()).copied(), selected.contains(n))
        });
        if queue.is_empty() {
            return Admit::Drained;
        }
        let unavailable: BTreeSet<String> = nodes
            .iter()
            .filter(|n| self.plan.contains(name(n)))
            .filter(|n| !ready(n) || self.fleet.held(n))
            .map(|n| name(n).to_string())
            .collect();
        let control: BTreeSet<&str> = nodes
            .iter()
            .filter(|n| is_control_plane(n))
            .map(name)
            .collect();
        let mut batch: Vec<String> = Vec::new();
        // Nodes of the batch not unavailable already: each takes one more down.
        let mut taken_down = 0;
        for n in queue.iter() {
            if batch.len() >= group.width {
                break;
            }
            let adds = usize::from(!unavailable.contains(n));
            let would = unavailable.len() + taken_down + adds;
            // A control-plane node that is not down already (the driver's, carried on) starts
            // only while no other one is down, and never beside another in a batch.
            let other_control_down = control.contains(n.as_str())
                && (batch.iter().any(|b| control.contains(b.as_str()))
                    || (!unavailable.contains(n)
                        && unavailable
                            .iter()
                            .any(|u| u != n && control.contains(u.as_str()))));
            // A node down that is not the driver's own in flight cannot start: not now.
            let startable = (by_name.get(n.as_str()))
                .is_some_and(|node| ready(node) || self.fleet.resumable(node));
            if would <= self.width && !other_control_down && startable {
                batch.push(n.clone());
                taken_down += adds;
            }
        }
        if !batch.is_empty() {
            self.waited = false;
            return Admit::Batch(batch);
        }
        if !self.waited {
            let down: Vec<String> = nodes
                .iter()
                .filter(|n| unavailable.contains(name(n)) && !self.fleet.held(n))
                .map(|n| name(n).to_string())
                .collect();
            if !down.is_empty() {
                self.waited = true;
                self.progress.event(&E::notice(format!(
                    "waiting for {} to be Ready before starting another node",
                    down.join(", ")
                )));
                join_all(down.iter().map(|n| self.fleet.wait_ready(n))).await;
                return Admit::Again;
            }
        }
        let names: Vec<_> = unavailable.into_iter().collect();
        Admit::Refused(format!(
            "{} node(s) of the plan are unavailable ({}): starting another would exceed \
             max_unavailable {}, or take a second control-plane node down, or needs a node that \
             is down",
            names.len(),
            names.join(", "),
            self.width
        ))
    }
}

/// How a pass ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Every group's queue emptied.
    Done,
    /// No further batch started (the limits, or the admission): why. Not told: the driver
    /// tells it as its outcome needs (a failed run names its failed nodes).
    Stopping(String),
    /// The Lease was lost during a batch: `the Lease was lost: <why>`. Not told: the fence
    /// told it.
    LeaseLost(String),
}

/// What passes of one run share: the failures counted against the budget, the batches
/// started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Nodes failed so far.
    pub failed: u32,
    /// Batches started so far.
    pub batches: usize,
    /// Nodes blocked so far (counted against [`Limits::max_blocked`]).
    pub blocked: u32,
}

/// The engine of one run: the API (for its clock), the Lease, the limits, the progress.
pub struct Engine<'a, A: ?Sized, E> {
    /// The backend; the engine reads its clock only.
    pub api: &'a A,
    /// The Lease of the run.
    pub fence: &'a Fence,
    /// What may keep the next batch from starting.
    pub limits: &'a Limits,
    /// Where the engine's events go.
    pub progress: Arc<dyn EventSink<E>>,
}

impl<A: Clock + ?Sized, E: RollEvent> Engine<'_, A, E> {
    /// Rolls `groups` in order, each in batches that `admission` lets start, running `step` on
    /// every node of a batch together; `tally` carries the failures (and the batch count)
    /// from pass to pass.
    pub async fn pass<R, S, Fut>(
        &self,
        tally: &mut Tally,
        groups: &[Group],
        admission: &mut dyn Admission,
        step: S,
    ) -> End
    where
        R: NodeEnd,
        S: Fn(String) -> Fut,
        Fut: Future<Output = R>,
    {
        for group in groups {
            let mut queue = group.nodes.clone();
            while !queue.is_empty() {
                if let Some(why) = self.limits.why_not(tally.failed, self.api.wall_time()) {
                    return End::Stopping(why);
                }
                if let Some(why) = self.limits.past_blocked(tally.blocked) {
                    return End::Stopping(why);
                }
                let batch = match admission.admit(group, &mut queue).await {
                    Admit::Batch(batch) => batch,
                    Admit::Drained => break,
                    Admit::Again => continue,
                    Admit::Refused(why) => return End::Stopping(why),
                };
                queue.retain(|n| !batch.contains(n));
                if let Some(event) = E::batch_started(tally.batches, &group.name, &batch) {
                    self.progress.event(&event);
                }
                tally.batches += 1;
                let ends = join_all(batch.iter().map(|n| step(n.clone()))).await;
                tally.failed += ends.iter().filter(|r| r.failed()).count() as u32;
                tally.blocked += ends.iter().filter(|r| r.blocked()).count() as u32;
                if let Some(why) = self.fence.lost() {
                    return End::LeaseLost(format!("the Lease was lost: {why}"));
                }
            }
        }
        End::Done
    }
}
