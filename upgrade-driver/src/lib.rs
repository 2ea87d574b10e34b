//! A rolling node upgrade that no crash, race or PodDisruptionBudget can make unsafe.
//!
//! Built on `nodejob-core` (its API traits, its runner: a privileged, node-pinned Job that
//! `nsenter`s the host and runs `stratum upgrade --to <version>`; its drain; its fenced Lease)
//! and on the roll engine, [`nodejob_roll`]. [`preview`] says what a run would do without
//! writing anything; [`run`] does it, node by node through [`NodeMachine`].
//!
//! The flow, the guarantees, the assumptions and the errors: [`contract`]. Where each part of
//! the driver lives: `ARCHITECTURE.md`, its code map.

pub mod contract;
mod drive;
mod held;
mod machine;
mod order;
mod plan;
mod preview;
mod progress;
pub mod records;
mod select;
pub mod skew;
pub mod version;

use std::sync::Arc;

use nodejob_core::{ApiError, JobApi, LeaseApi, NodeApi, PodApi};

pub use drive::COMPONENT;
pub use machine::{
    Cause, DRAIN_ROUNDS, DrainFailed, Failure, FailureKind, HeldBy, Intent, Mark, NodeMachine,
    NodeResult, Observation, Own, Step, UpgradeStep,
};
pub use nodejob_roll::NSENTER;
pub use nodejob_roll::Window;
pub use nodejob_roll::is_control_plane;
pub use nodejob_roll::{
    EventSink, FenceEvent, LeaseEnd, LeaseHistory, Outcome, Placement, PlanError, Selecting, Stop,
};
pub use nodejob_roll::{Group, batches};
pub use order::groups;
pub use plan::{
    Downgrade, MaxUnavailable, NotCountOrPercent, OnFailure, Plan, PlanSpec, Undrainable,
    VersionSource,
};
pub use preview::{NodePreview, PodPlan, Preview, WouldBlock};
pub use progress::{NodeReport, Progress, ProgressSink, Report, Totals, UpgradeEvent, quiet};
pub use skew::Skew;

/// Why a run could not start, or stopped before its Lease was acquired.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A field of the plan is refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The plan's nodes could not be selected: it selects none, a node named in the plan
    /// does not exist (or does not match the selector), or the nodes could not be listed.
    #[error(transparent)]
    Selecting(#[from] Selecting),
    /// Something could not be read.
    #[error("reading {what}: {cause}")]
    Reading {
        /// What.
        what: String,
        /// Why.
        cause: ApiError,
    },
    /// Core's error: the Lease held by another ([`nodejob_core::Error::LeaseHeld`]), an API
    /// error with its operation.
    #[error(transparent)]
    Core(#[from] nodejob_core::Error),
}

/// Rolls the plan's nodes to its target, as the [`contract`] says. Progress goes to `progress`.
///
/// # Errors
/// See the [`contract`]: an [`Error`] means nothing was done; a run that started answers a
/// [`Report`], whose [`Outcome`] says whether it finished.
pub async fn run<A>(api: &A, plan: &Plan, progress: Arc<dyn ProgressSink>) -> Result<Report, Error>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    run_until(api, plan, progress, &Stop::new()).await
}

/// [`run`], stopping to start nodes once `stop` is requested (nodes in flight finish their
/// current step; a rerun carries them on).
pub async fn run_until<A>(
    api: &A,
    plan: &Plan,
    progress: Arc<dyn ProgressSink>,
    stop: &Stop,
) -> Result<Report, Error>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    drive::run(api, plan, progress, stop).await
}

/// What [`run`] would do, with no write of any kind: the batches in order, the nodes at the
/// target, per node the Pods the drain would evict, leave or refuse (and those a budget blocks
/// now, by a server-side dry-run eviction), and the Lease's holder.
pub async fn preview<A>(api: &A, plan: &Plan) -> Result<Preview, Error>
where
    A: NodeApi + PodApi + LeaseApi + ?Sized,
{
    preview::preview(api, plan).await
}
