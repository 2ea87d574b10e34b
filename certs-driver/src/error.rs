//! [`Error`]: why a run could not start, or an abort was refused. A leaf, so that every
//! module can name it without importing the crate root.

use nodejob_core::ApiError;
use nodejob_roll::{PlanError, Selecting};

/// Why a run could not start (or an abort was refused).
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
    /// The abort is refused: `issue` has begun on these nodes (each with what shows it).
    #[error(
        "abort refused: `carotate issue` has begun on {}: leaves issued by the new CA cannot be \
         taken back, so only forward is safe; run the rotation to its end",
        nodes.iter().map(|(n, why)| format!("{n} ({why})")).collect::<Vec<_>>().join(", ")
    )]
    AbortRefused {
        /// Each node, and what shows that `issue` began there.
        nodes: Vec<(String, String)>,
    },
    /// Core's error: the Lease held by another ([`nodejob_core::Error::LeaseHeld`]), an API
    /// error with its operation.
    #[error(transparent)]
    Core(#[from] nodejob_core::Error),
}
