//! The roll engine both drivers run on: the order of a roll (control-plane nodes one at a
//! time, then groups of a width), admission per batch (a fixed width, or `max_unavailable`
//! read again before each batch), the [`Limits`] that stop the next batch (a stop request,
//! the failure budget, the maintenance window; sleeps cut short by a stop), and
//! [`Engine::pass`], the fenced loop over the batches. A driver supplies its per-node step (a
//! sans-IO machine of its own, executed through the API traits) and, for the upgrade, what it
//! knows of its nodes ([`Fleet`]).
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
//! The run context the drivers share (the fence, placement, plan errors, node selection, the
//! host-Job, Event and node-patch helpers) is re-exported here from `nodejob-core`'s `drive`
//! module, whence it moves into this crate.

pub mod context;
pub mod engine;
pub mod limits;
pub mod ops;
pub mod order;
pub mod window;

pub use context::{Closed, Context, Ledger};
pub use engine::{
    Admission, Admit, End, Engine, FixedWidth, Fleet, MaxUnavailable, NodeEnd, RollEvent, Tally,
};
pub use limits::{Limits, Slept};
pub use nodejob_core::drive::{
    CONTROL_PLANE_LABEL, DriverEvent, EventSink, Fence, FenceEvent, FenceEvents, NoteSink, NoteTo,
    Outcome, Placement, PlanError, Selecting, Stop, check_selection, delete_job_of, fence_events,
    identity, is_control_plane, lease_holder, log_tail, millis, patch_node_again, quote, retry,
    select_nodes, write_node_event,
};
pub use ops::{OpError, WRITE_ROUNDS, delete_job, patch_node};
pub use order::{Group, Order, ZONE_LABEL, batches};
pub use window::{Window, time_zone};
