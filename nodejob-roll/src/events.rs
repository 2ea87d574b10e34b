//! How a run speaks: a driver's progress events go to an [`EventSink`]; core's notes reach
//! it through a [`NoteSink`]; the [`Fence`](crate::Fence)'s events through [`fence_events`];
//! and a run ends with an [`Outcome`].

use std::sync::Arc;

use nodejob_core::{Level, Note, Sink, quote};

use crate::fence::{FenceEvent, FenceEvents};

/// How a driver's run ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Every node of the plan is where the plan wants it.
    Done,
    /// Nodes failed (or, for a rotation, a gate found nodes disagreeing); nothing further was
    /// started.
    Failed {
        /// The nodes that failed (or disagree), in the order of the roll: what a retry names.
        nodes: Vec<String>,
        /// What to do, in words (a rerun resumes). No command-line syntax: the command that
        /// runs the driver formats its own retry command from `nodes`.
        retry: String,
    },
    /// Stopped before the end without a node failing: why (a closed window, a stop request,
    /// the Lease lost, too many nodes unavailable). A rerun resumes.
    Stopped {
        /// Why.
        why: String,
    },
    /// Still paused (`nodejob pause`) at the run's pause deadline: nodes in flight finished
    /// their step, none started after. `nodejob resume`, then a rerun resumes.
    Paused {
        /// Who paused, when, why, and the deadline.
        why: String,
    },
}

/// Receives a node's notes as `(node, message)`.
pub type NoteTo = Arc<dyn Fn(&str, String) + Send + Sync>;

/// Core's notes (the runner's, the drain's) about one node, handed to a driver's progress as
/// `(node, message)`; a warning's message starts with `warning: `.
pub struct NoteSink {
    node: String,
    to: NoteTo,
}

impl NoteSink {
    /// Notes about `node`, to `to`.
    pub fn new(node: impl Into<String>, to: NoteTo) -> Self {
        NoteSink {
            node: node.into(),
            to,
        }
    }
}

impl NoteSink {
    /// Notes about `node`, as [`DriverEvent::note`] events to `sink`.
    pub fn to<E, S>(node: impl Into<String>, sink: &Arc<S>) -> Self
    where
        E: DriverEvent,
        S: EventSink<E> + ?Sized + 'static,
    {
        let sink = sink.clone();
        NoteSink::new(
            node,
            Arc::new(move |node: &str, message: String| sink.event(&E::note(node, message))),
        )
    }
}

impl Sink for NoteSink {
    /// Passes the note on, bounded as a quotation of host output ([`quote`]): the runner
    /// quotes what a host or another actor wrote into its notes (a node's NotReady message),
    /// and a progress event stays that size whatever they wrote.
    fn note(&self, note: &Note) {
        let message = match note.level {
            Level::Warn => format!("warning: {}", note.message),
            _ => note.message.clone(),
        };
        (self.to)(&self.node, quote(&message));
    }
}

/// Where a driver's progress events go: any `Fn(&E)` is one. Each driver names it for its own
/// events (its `ProgressSink`), and core's helpers ([`NoteSink::to`], [`fence_events`]) feed it.
pub trait EventSink<E>: Send + Sync {
    /// Receives one event.
    fn event(&self, event: &E);
}

impl<E, F: Fn(&E) + Send + Sync> EventSink<E> for F {
    fn event(&self, event: &E) {
        self(event)
    }
}

/// What a driver's progress events must be for core's helpers to make some: a note about a
/// node, a [`Fence`](crate::Fence)'s event carried as it is.
pub trait DriverEvent {
    /// A note about `node`: a runner's warning, an adopted Job.
    fn note(node: &str, message: String) -> Self;
    /// The Lease acquired, renewed or lost, as the [`Fence`](crate::Fence) tells it.
    fn lease(event: &FenceEvent) -> Self;
}

/// A [`Fence`](crate::Fence)'s events, as [`DriverEvent::lease`] events to `sink`.
pub fn fence_events<E, S>(sink: &Arc<S>) -> FenceEvents
where
    E: DriverEvent,
    S: EventSink<E> + ?Sized + 'static,
{
    let sink = sink.clone();
    Box::new(move |e: &FenceEvent| sink.event(&E::lease(e)))
}
