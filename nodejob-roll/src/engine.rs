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
//!     a node interrupted, and limits.why_not? -> Stopping(why)
//! ```

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use crate::{DriverEvent, EventSink, Fence, LeaseLost, is_control_plane};
use async_trait::async_trait;
use futures::future::join_all;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::{Clock, ready};

use crate::limits::Limits;
use crate::order::Group;
use crate::view::Cursor;

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
    /// Whether it was cut short where a step would begin (a stop asked, still paused at the
    /// pause deadline): the pass then does not end done, even after its last batch.
    fn interrupted(&self) -> bool {
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
    /// A group's pass begins: its queue is new (nothing of an earlier group's holds for it).
    fn begin(&mut self, _group: &Group) {}
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

/// What a driver tells [`MaxUnavailable`] of its nodes: its view of them (the changes since
/// the last look, then one node at a time), and its judgement of one node. Each judgement is
/// of the node alone (its labels, status and the driver's records on it), so an answer given
/// stays true until the node changes: the admission asks again only of the nodes that changed.
#[async_trait]
pub trait Fleet: Send + Sync {
    /// Reads the nodes again and answers the names of those that changed (deleted included)
    /// since `since`, moving it on; a new cursor gets every node.
    async fn changed(&self, since: &mut Cursor) -> Result<Vec<String>, String>;
    /// The node named `name` as last read; `None` when it is gone.
    fn node(&self, name: &str) -> Option<Node>;
    /// Whether the plan selects `node` now.
    fn selects(&self, node: &Node) -> bool;
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
///
/// What it knows of each node of the plan is kept from batch to batch and brought up to date
/// from the nodes that changed since the last batch ([`Fleet::changed`]): a batch costs what
/// changed and the nodes it looks at, not a pass over every node, so a roll of `n` nodes one
/// at a time costs time in proportion to `n`, not `n` squared.
pub struct MaxUnavailable<'f, F: ?Sized, E> {
    fleet: &'f F,
    width: usize,
    /// Every node the roll began with, and its place in the order.
    plan: HashMap<String, usize>,
    progress: Arc<dyn EventSink<E>>,
    waited: bool,
    since: Cursor,
    /// The nodes of the plan that exist, as last read.
    seen: HashMap<String, Seen>,
    /// The nodes of the plan unavailable now (NotReady, or held down by the driver).
    unavailable: BTreeSet<String>,
    /// The queue of the group in hand, as a set; `None` until its first batch.
    queued: Option<HashSet<String>>,
}

/// What the admission keeps of one node of the plan: the fleet's judgements of it.
#[derive(Clone, Copy, Debug)]
struct Seen {
    selected: bool,
    control: bool,
    held: bool,
    startable: bool,
}

impl<'f, F: Fleet + ?Sized, E: RollEvent> MaxUnavailable<'f, F, E> {
    /// At most `width` of `groups`' nodes unavailable at once.
    pub fn new(
        fleet: &'f F,
        width: usize,
        groups: &[Group],
        progress: Arc<dyn EventSink<E>>,
    ) -> Self {
        let plan = (groups.iter().flat_map(|g| g.nodes.iter().cloned()))
            .enumerate()
            .map(|(i, name)| (name, i))
            .collect();
        MaxUnavailable {
            fleet,
            width,
            plan,
            progress,
            waited: false,
            since: Cursor::default(),
            seen: HashMap::new(),
            unavailable: BTreeSet::new(),
            queued: None,
        }
    }

    /// Takes in what the fleet says of `name` now; answers whether the plan selects it.
    fn take_in(&mut self, name: &str, node: Option<&Node>) -> bool {
        let Some(node) = node else {
            self.seen.remove(name);
            self.unavailable.remove(name);
            return false;
        };
        let held = self.fleet.held(node);
        let seen = Seen {
            selected: self.fleet.selects(node),
            control: is_control_plane(node),
            held,
            startable: ready(node) || self.fleet.resumable(node),
        };
        match !ready(node) || held {
            true => self.unavailable.insert(name.to_string()),
            false => self.unavailable.remove(name),
        };
        self.seen.insert(name.to_string(), seen);
        seen.selected
    }

    fn control(&self, name: &str) -> bool {
        self.seen.get(name).is_some_and(|s| s.control)
    }

    /// Brings what it knows up to date, and drops from `queue` the nodes the fleet no longer
    /// keeps: every queued node on a group's first batch, then those that changed.
    async fn look(&mut self, queue: &mut Vec<String>) -> Result<(), String> {
        // The queue in hand is the one kept as a set, or a new one (a group begun through an
        // admission that wraps this one and did not say so): then judged whole.
        let same = self
            .queued
            .as_ref()
            .is_some_and(|q| q.len() == queue.len() && queue.first().is_none_or(|n| q.contains(n)));
        if !same {
            self.queued = None;
        }
        let mut changed: Vec<(usize, String)> = (self.fleet.changed(&mut self.since).await?)
            .into_iter()
            .filter_map(|name| self.plan.get(&name).map(|&at| (at, name)))
            .collect();
        // In the order of the roll, as the queue is: the drops are reported in that order.
        changed.sort_unstable();
        let mut dropped: HashSet<String> = HashSet::new();
        for (_, name) in changed {
            let node = self.fleet.node(&name);
            let selected = self.take_in(&name, node.as_ref());
            let queued = self.queued.as_ref().is_some_and(|q| q.contains(&name));
            if queued && !self.fleet.keep(&name, node.as_ref(), selected) {
                dropped.insert(name);
            }
        }
        if self.queued.is_none() {
            for name in queue.iter() {
                let selected = self.seen.get(name).is_some_and(|s| s.selected);
                if !(self.fleet).keep(name, self.fleet.node(name).as_ref(), selected) {
                    dropped.insert(name.clone());
                }
            }
            self.queued = Some(queue.iter().cloned().collect());
        }
        if !dropped.is_empty() {
            queue.retain(|n| !dropped.contains(n));
            let queued = self.queued.get_or_insert_default();
            queued.retain(|n| !dropped.contains(n));
        }
        Ok(())
    }
}

#[async_trait]
impl<F: Fleet + ?Sized, E: RollEvent + 'static> Admission for MaxUnavailable<'_, F, E> {
    fn begin(&mut self, _group: &Group) {
        self.queued = None;
    }

    async fn admit(&mut self, group: &Group, queue: &mut Vec<String>) -> Admit {
        if let Err(why) = self.look(queue).await {
            return Admit::Refused(why);
        }
        if queue.is_empty() {
            return Admit::Drained;
        }
        // The control-plane nodes down now (few: at most the width, or the roll stops).
        let control_down: Vec<&str> = (self.unavailable.iter())
            .filter(|u| self.control(u))
            .map(String::as_str)
            .collect();
        let mut batch: Vec<String> = Vec::new();
        // Nodes of the batch not unavailable already: each takes one more down.
        let mut taken_down = 0;
        for n in queue.iter() {
            if batch.len() >= group.width {
                break;
            }
            let down = self.unavailable.contains(n);
            let adds = usize::from(!down);
            let would = self.unavailable.len() + taken_down + adds;
            // A control-plane node that is not down already (the driver's, carried on) starts
            // only while no other one is down, and never beside another in a batch.
            let other_control_down = self.control(n)
                && (batch.iter().any(|b| self.control(b))
                    || (!down && control_down.iter().any(|u| u != n)));
            // A node down that is not the driver's own in flight cannot start: not now.
            let startable = self.seen.get(n).is_some_and(|s| s.startable);
            if would <= self.width && !other_control_down && startable {
                batch.push(n.clone());
                taken_down += adds;
            }
        }
        if !batch.is_empty() {
            self.waited = false;
            if let Some(queued) = self.queued.as_mut() {
                for n in &batch {
                    queued.remove(n);
                }
            }
            return Admit::Batch(batch);
        }
        if !self.waited {
            let down: Vec<String> = (self.unavailable.iter())
                .filter(|n| self.seen.get(*n).is_some_and(|s| !s.held))
                .cloned()
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
        let names: Vec<_> = self.unavailable.iter().cloned().collect();
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
    /// The Lease was lost during a batch. Not told: the fence told it.
    LeaseLost(LeaseLost),
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
            admission.begin(group);
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
                if let Some(lost) = self.fence.lost() {
                    return End::LeaseLost(lost);
                }
                // A node of this batch cut short by a stop (or a pause past its deadline)
                // asked during it: the pass ends so, not done, though its queue is empty.
                if ends.iter().any(NodeEnd::interrupted)
                    && let Some(why) = self.limits.why_not(tally.failed, self.api.wall_time())
                {
                    return End::Stopping(why);
                }
            }
        }
        End::Done
    }
}
