//! [`Error`]: why a run could not start, or an abort was refused. A leaf, so that every
//! module can name it without importing the crate root.

use std::collections::BTreeMap;

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
        /// Each node, and what shows that `issue` began there: every such node, once, in
        /// name order.
        nodes: Vec<(String, String)>,
    },
    /// Core's error: the Lease held by another ([`nodejob_core::Error::LeaseHeld`]), an API
    /// error with its operation.
    #[error(transparent)]
    Core(#[from] nodejob_core::Error),
}

impl Error {
    /// [`Error::AbortRefused`] on `begun`, each node with what shows that `issue` began there:
    /// every node named once (what shows it joined with `; ` when several things do), in name
    /// order.
    pub(crate) fn abort_refused(begun: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut nodes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (node, why) in begun {
            let whys = nodes.entry(node).or_default();
            if !whys.contains(&why) {
                whys.push(why);
            }
        }
        Error::AbortRefused {
            nodes: (nodes.into_iter())
                .map(|(node, whys)| (node, whys.join("; ")))
                .collect(),
        }
    }
}
