//! The roll both drivers run: their nodes in batches, each node through its driver's machine,
//! under one fenced Lease.
//!
//! The engine: the order of a roll (control-plane nodes one at a time, then groups of a
//! width), admission per batch (a fixed width, or `max_unavailable` read again before each
//! batch), the [`Limits`] that stop the next batch (a stop request, the failure budget, the
//! maintenance window; sleeps cut short by a stop), and [`Engine::pass`], the fenced loop over
//! the batches. A driver supplies its per-node step (a sans-IO machine of its own, executed
//! through the API traits) and, for the upgrade, what it knows of its nodes ([`Fleet`]).
//!
//! What this crate is not: it talks to no cluster of its own (the API traits do, as
//! `nodejob-core` defines them), and it knows no driver's steps or records.
//!
//! ```text
//!   driver: plan -> select nodes -> Fence::acquire -> Order::groups
//!             -> Engine::pass(groups, admission, step) ... (one pass, or one per phase)
//!             -> Fence::release -> report
//! ```
//!
//! One node of a batch runs through [`Context::drive`], the per-node executor both drivers
//! share: the driver's sans-IO machine says what to do ([`Machine`], [`Turn`], [`Mark`]),
//! its [`Hands`] do it; the fence, the pause switch, the stop, the read after a wait, the
//! progress and the Events around each step are the executor's.
//!
//! The run context the drivers share is here too: the Lease as a [`Fence`] (and the [`Fenced`]
//! writer), the plan's [`Placement`] and [`PlanError`], node selection, the [`Stop`], the
//! host-Job, Event and node-patch operations with typed errors ([`OpError`]), the progress
//! plumbing ([`EventSink`], [`NoteSink`]), the run's [`Outcome`], and the events and report
//! generic over a driver's step and result ([`Progress`], [`Report`]).

pub mod call;
pub mod condition;
pub mod context;
pub mod engine;
pub mod events;
pub mod executor;
pub mod fence;
pub mod fenced;
pub mod limits;
pub mod not_now;
pub mod ops;
pub mod order;
pub mod pause;
pub mod placement;
pub mod progress;
pub mod report;
pub mod select;
pub mod stop;
pub mod view;
pub mod window;

pub use call::{CALL_BOUND, millis, retry};
pub use condition::{Conditions, Held, Standing};
pub use context::{Closed, Context, EventFence, Ledger, Source};
pub use engine::{
    Admission, Admit, End, Engine, FixedWidth, Fleet, MaxUnavailable, NodeEnd, RollEvent, Tally,
};
pub use events::{DriverEvent, EventSink, NoteSink, NoteTo, Outcome, fence_events};
pub use executor::{Act, Hands, Machine, Mark, RollStep, Turn, Warning};
pub use fence::{
    Fence, FenceEvent, FenceEvents, LeaseEnd, LeaseHistory, LeaseLost, lease_holder, read_lease,
};
pub use fenced::Fenced;
pub use limits::{Limits, Paused, Slept, paused_out};
pub use not_now::{NotNow, lease_now, not_now};
pub use ops::{OpError, WRITE_ROUNDS, delete_job, patch_node, write_node_event};
pub use order::{Group, Order, ZONE_LABEL, batches};
pub use pause::{Gate, Passed, ReadAgain, Waiting, pause_before, read_again, wait_unpaused};
pub use placement::{
    CONTROL_PLANE_LABEL, DEFAULT_LEASE_NAME, DEFAULT_NAMESPACE, MAX_LEASE_DURATION,
    MIN_LEASE_DURATION, NSENTER, Placement, PlanError, identity, is_control_plane,
};
pub use progress::{Cause, Failure, FailureKind, OwnEvents, Progress, quiet};
pub use report::{NodeLine, Nothing, Report, Totals};
pub use select::{Selecting, Selection, check_selection, select_from, select_nodes};
pub use stop::{Asked, Stop};
pub use view::{Cursor, NodeView};
pub use window::{Window, time_zone};
