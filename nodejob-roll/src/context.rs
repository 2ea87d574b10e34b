//! [`Context`]: what one run of a driver shares with every node future: the API, the Lease
//! as a [`Fence`], the [`Limits`], the progress, the nodes in flight with the step each is at;
//! and [`Ledger`], the per-node entries of the run's report. The start (acquire the Lease)
//! and the finish (release it, the history, how long it took) are written here once, and the
//! operations that tell the run's progress: a host Job with its notes, an Event on a node
//! (fenced by a read of the Lease right before it).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_core::lease::Claim;
use nodejob_core::runner::{Mode, Policy, Report, run_with};
use nodejob_core::{EventType, JobApi, LeaseApi, NodeApi, Spec};

use crate::call::millis;
use crate::engine::{Engine, RollEvent};
use crate::events::{EventSink, NoteSink, fence_events};
use crate::fence::{Fence, LeaseHistory, LeaseLost};
use crate::limits::Limits;
use crate::ops::write_node_event;
use crate::placement::Placement;

/// One run of a driver: begun with the Lease acquired ([`Context::begin`]), ended with it
/// released ([`Context::end`]). `S` is the driver's step: what the report says of a node in
/// flight when the run is cut short.
pub struct Context<'a, A: ?Sized, E, S> {
    /// The backend.
    pub api: &'a A,
    /// The Lease: every write is fenced by it; once lost, nothing more is written.
    pub fence: Fence,
    /// What keeps the next batch from starting.
    pub limits: Limits,
    /// Where the run's events go.
    pub progress: Arc<dyn EventSink<E>>,
    started: Duration,
    in_flight: Mutex<BTreeMap<String, S>>,
}

/// Where a node's Events come from: the namespace they are written in, the component they
/// name.
#[derive(Clone, Copy, Debug)]
pub struct Source<'s> {
    /// The namespace.
    pub namespace: &'s str,
    /// The component.
    pub component: &'s str,
}

/// How an Event is fenced ([`Context::event`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventFence {
    /// The Lease is read right before it ([`Fence::check`]).
    Read,
    /// Right after a [`Fence::check`] that passed, with nothing awaited between but writes:
    /// that read of the Lease is the Event's too, as it is the next write's (the executor's
    /// turn: the check, the Events of the step that finished, the intent's write).
    Checked,
}

/// What [`Context::end`] answers for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Closed {
    /// The Lease's history in this run: acquired (how), renewals, released or lost.
    pub lease: LeaseHistory,
    /// From [`Context::begin`] to the Lease released, milliseconds of the backend's clock.
    pub took_ms: u64,
}

impl<'a, A, E, S> Context<'a, A, E, S>
where
    A: LeaseApi + ?Sized,
    E: RollEvent + 'static,
    S: Clone,
{
    /// Acquires the Lease of `placement` for `claim` (its events told to `progress`); the
    /// run's time counts from `started` (on the backend's clock, before the nodes were read).
    ///
    /// # Errors
    /// The Lease is held by another, or could not be read or written.
    pub async fn begin(
        api: &'a A,
        placement: &Placement,
        claim: &Claim,
        limits: Limits,
        progress: Arc<dyn EventSink<E>>,
        started: Duration,
    ) -> Result<Self, nodejob_core::Error> {
        let fence = Fence::acquire(
            api,
            &placement.lease_config(),
            claim,
            fence_events(&progress),
        )
        .await?;
        Ok(Context {
            api,
            fence,
            limits,
            progress,
            started,
            in_flight: Mutex::new(BTreeMap::new()),
        })
    }

    /// The engine over this run's Lease, limits and progress.
    pub fn engine(&self) -> Engine<'_, A, E> {
        Engine {
            api: self.api,
            fence: &self.fence,
            limits: &self.limits,
            progress: self.progress.clone(),
        }
    }

    /// Runs `work` with the Lease renewed while it waits; `Err`: the Lease was lost and `work`
    /// was dropped where it stood (the nodes in flight are [`Context::cut_short`]).
    pub async fn renewing<F: Future>(&self, work: F) -> Result<F::Output, LeaseLost> {
        self.fence.renewing(self.api, work).await
    }

    /// Tells one event.
    pub fn tell(&self, event: &E) {
        self.progress.event(event);
    }

    /// `node` is in flight at `step`.
    pub fn flying(&self, node: &str, step: S) {
        self.in_flight_map().insert(node.to_string(), step);
    }

    /// `node` is no longer in flight.
    pub fn landed(&self, node: &str) {
        self.in_flight_map().remove(node);
    }

    /// The nodes in flight when the run was cut short, each with its step; none after.
    pub fn cut_short(&self) -> BTreeMap<String, S> {
        std::mem::take(&mut *self.in_flight_map())
    }

    fn in_flight_map(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, S>> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Milliseconds of the backend's clock since `since`.
    pub fn since(&self, since: Duration) -> u64 {
        millis(self.api.now().saturating_sub(since))
    }

    /// Releases the Lease (a lost one is not written to); answers its history and the run's
    /// duration.
    pub async fn end(self) -> Closed {
        let lease = self.fence.release(self.api).await;
        Closed {
            lease,
            took_ms: millis(self.api.now().saturating_sub(self.started)),
        }
    }
}

/// The per-node entries of a run's report, in the order of the roll, each found by name.
#[derive(Debug)]
pub struct Ledger<N> {
    nodes: Mutex<Vec<N>>,
    slots: BTreeMap<String, usize>,
}

impl<N> Ledger<N> {
    /// The entries `nodes`, each under its name.
    pub fn new(nodes: Vec<(String, N)>) -> Self {
        let slots = (nodes.iter().enumerate())
            .map(|(i, (name, _))| (name.clone(), i))
            .collect();
        Ledger {
            nodes: Mutex::new(nodes.into_iter().map(|(_, n)| n).collect()),
            slots,
        }
    }

    /// Updates the entry of `name`; a name not in the ledger is ignored.
    pub fn update(&self, name: &str, update: impl FnOnce(&mut N)) {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = self.slots.get(name).and_then(|&i| nodes.get_mut(i)) {
            update(n);
        }
    }

    /// Reads the entries.
    pub fn read<T>(&self, read: impl FnOnce(&[N]) -> T) -> T {
        read(&self.nodes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The entries, in order.
    pub fn into_inner(self) -> Vec<N> {
        self.nodes.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl<A, E, S> Context<'_, A, E, S>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
    E: RollEvent + 'static,
    S: Clone,
{
    /// Runs the host Job of `spec` for `node` through `api` (the run's backend, or a fenced
    /// writer over it), its notes (the runner's warnings, an adopted Job) told as the node's.
    ///
    /// # Errors
    /// Core's: the Job could not be created, was replaced, timed out, or its result read.
    pub async fn host_job<W: JobApi + NodeApi + ?Sized>(
        &self,
        api: &W,
        node: &str,
        mut spec: Spec,
        mode: Mode,
        policy: Policy,
    ) -> Result<Report, nodejob_core::Error> {
        spec.output = Some(Arc::new(NoteSink::to(node, &self.progress)));
        run_with(api, &spec, mode, policy).await
    }

    /// Records an Event on `node` from `source` (its namespace and component); a failure to is
    /// told as a note about the node, never its failure. An Event is a write, fenced as every
    /// other (`fence`): nothing is written once the Lease is lost (another identity took it
    /// since the run last looked, too).
    pub async fn event(
        &self,
        fence: EventFence,
        source: Source<'_>,
        node: &str,
        kind: EventType,
        reason: &str,
        message: &str,
    ) {
        let lost = match fence {
            EventFence::Read => self.fence.check(self.api).await.is_err(),
            EventFence::Checked => self.fence.lost().is_some(),
        };
        if lost {
            return;
        }
        let Source {
            namespace,
            component,
        } = source;
        let written =
            write_node_event(self.api, namespace, node, kind, reason, message, component).await;
        if let Err(e) = written {
            self.tell(&E::note(
                node,
                format!("could not record event {reason} on node {node}: {e}"),
            ));
        }
    }
}
