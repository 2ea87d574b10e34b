//! A cluster CA rotation, node by node, that a crash cannot make run a phase twice and that a
//! node disagreeing stops.
//!
//! Built on `nodejob-core` (its API traits, its runner: a privileged, node-pinned Job that
//! `nsenter`s the host and runs `stratum carotate <phase> …`) and on the roll engine,
//! [`nodejob_roll`]: each phase (stage, issue, finalize) is one pass of the engine, behind a
//! gate on what every node reports, under the fenced Lease the rolling upgrade holds too.
//! [`preview`] says what a run would do without writing anything; [`run`] does it; [`abort`]
//! undoes a rotation that has not begun `issue`.
//!
//! The phases and gates, the flow, the guarantees, the assumptions and the errors:
//! [`contract`]. Where each part of the driver lives: `ARCHITECTURE.md`, its code map.

mod cluster;
pub mod contract;
mod drive;
mod error;
mod fingerprint;
mod gate;
mod machine;
mod order;
mod phase;
mod plan;
mod preview;
mod progress;
mod records;
mod status;

use std::sync::Arc;

use nodejob_core::{JobApi, LeaseApi, NodeApi};

pub use drive::{COMPONENT, OPERATION};
pub use error::Error;
pub use fingerprint::Fingerprint;
pub use gate::{Disagreement, Gate, GateReport, Reported, Verified, check, expected, old_trust};
pub use machine::{
    Answer, Cause, FailureKind, Gone, Intent, Leftover, Mark, NodeMachine, Observation, Own, Step,
    Stepped, Task, Watched,
};
pub use nodejob_roll::NSENTER;
pub use nodejob_roll::Window;
pub use nodejob_roll::{
    EventSink, FenceEvent, LeaseEnd, LeaseHistory, Outcome, Placement, PlanError, Selecting, Stop,
};
pub use phase::{CaStep, Decision, decide};
pub use plan::{CA_EXPIRY_WARNING, CaSummary, Plan, PlanSpec};
pub use preview::{Next, NodePreview, Preview};
pub use progress::{
    CaEvent, Failure, Gates, NodeReport, NodeResult, Progress, ProgressSink, Report, Totals, quiet,
};
pub use records::{LAST_STATUS, ROTATING, last_reported};
pub use status::{
    CaPhase, CaStatus, PhaseOutput, StatusError, Verdict, parse_phase_output, parse_status,
};

/// Rotates the plan's nodes to its new CA, as the [`contract`] says. Progress goes to `progress`.
///
/// # Errors
/// See the [`contract`]: an [`Error`] means nothing was done; a run that started answers a
/// [`Report`], whose [`Outcome`] says whether it finished.
pub async fn run<A>(api: &A, plan: &Plan, progress: Arc<dyn ProgressSink>) -> Result<Report, Error>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    run_until(api, plan, progress, &Stop::new()).await
}

/// [`run`], stopping to start nodes once `stop` is requested (nodes in flight finish their
/// step; a rerun carries on from what the nodes report).
pub async fn run_until<A>(
    api: &A,
    plan: &Plan,
    progress: Arc<dyn ProgressSink>,
    stop: &Stop,
) -> Result<Report, Error>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    drive::run(api, plan, progress, stop).await
}

/// Removes the plan's staged CA from the plan's nodes, as the [`contract`] says: until the first
/// node of the cluster has begun `issue`, they are then as before the rotation.
///
/// # Errors
/// [`Error::AbortRefused`] once `issue` has begun on any node of the cluster, in the plan or
/// not (only forward is safe); [`Error::Selecting`] or [`Error::Reading`] when the cluster's
/// nodes or our issue Jobs cannot be read; each after releasing the Lease. Otherwise as
/// [`run`].
pub async fn abort<A>(
    api: &A,
    plan: &Plan,
    progress: Arc<dyn ProgressSink>,
) -> Result<Report, Error>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    drive::abort(api, plan, progress).await
}

/// What [`run`] would do, with no write of any kind: per node what it last reported (phase,
/// trusted set, issuer) and its steps in flight (our host Jobs, read), which phase would run
/// next and where, any node that already disagrees, where in the cluster `issue` has begun
/// (so whether [`abort`] would be refused), the nodes the plan leaves out, and the Lease's
/// holder.
pub async fn preview<A>(api: &A, plan: &Plan) -> Result<Preview, Error>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    preview::preview(api, plan).await
}
