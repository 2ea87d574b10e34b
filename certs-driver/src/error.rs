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

/// Why our Job could not be deleted ([`crate::cluster::delete_exactly`]): it names the Job and
/// its UID.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotDeleted {
    /// It could not be read, to tell whether it is still ours.
    #[error("reading job {namespace}/{name}: {cause}")]
    Reading {
        namespace: String,
        name: String,
        cause: ApiError,
    },
    /// The delete was refused.
    #[error("deleting job {namespace}/{name} (uid {uid}): {cause}")]
    Deleting {
        namespace: String,
        name: String,
        uid: String,
        cause: ApiError,
    },
    /// Every delete met a conflict: the Job controller kept writing it.
    #[error("deleting job {namespace}/{name} (uid {uid}): it kept changing ({rounds} conflicts)")]
    KeptChanging {
        namespace: String,
        name: String,
        uid: String,
        rounds: u32,
    },
}

/// Why our Job of a step could not be deleted: waited for until gone
/// ([`nodejob_roll::delete_job`]), or deleted for a later wait ([`NotDeleted`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Undeleted {
    /// Deleted and waited for.
    #[error(transparent)]
    Awaited(#[from] nodejob_roll::OpError),
    /// Deleted, its wait left for later.
    #[error(transparent)]
    Later(#[from] NotDeleted),
}

/// Why a node's status could not be recorded on it ([`records::LAST_STATUS`]).
///
/// [`records::LAST_STATUS`]: crate::records::LAST_STATUS
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unrecorded {
    /// The Lease is known lost: the run writes nothing more.
    #[error("could not record the status on node {node}: {lost}")]
    LeaseLost {
        node: String,
        lost: nodejob_roll::LeaseLost,
    },
    /// The node could not be read or patched.
    #[error("could not record the status on node {node}: {cause}")]
    Writing {
        node: String,
        cause: nodejob_roll::OpError,
    },
}

/// Why the mark ahead of a step's Job ([`crate::records::ROTATING`]) could not be written on a
/// node.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unmarked {
    /// The Lease is known lost: the run writes nothing more.
    #[error("could not mark node {node} as one the rotation may change from now on: {lost}")]
    LeaseLost {
        node: String,
        lost: nodejob_roll::LeaseLost,
    },
    /// The node could not be patched.
    #[error("could not mark node {node} as one the rotation may change from now on: {cause}")]
    Writing { node: String, cause: ApiError },
}

/// Why the run cannot say every Job of ours it deleted is gone.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotGone {
    /// Our Jobs could not be listed.
    #[error("our jobs could not be listed to see them gone: {0}")]
    Unlisted(ApiError),
    /// These are still there: each as [`Stuck`] says.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Stuck(Vec<Stuck>),
}

/// One of our Jobs not seen gone.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Stuck {
    /// Still there, being deleted, after the whole wait.
    #[error("job {namespace}/{name} is still being deleted after {after}")]
    StillDeleting {
        namespace: String,
        name: String,
        after: String,
    },
    /// Its watch failed.
    #[error("job {namespace}/{name} could not be watched going: {cause}")]
    Unwatched {
        namespace: String,
        name: String,
        cause: ApiError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages a person reads of each: the object, its UID where it has one, and why.
    #[test]
    fn each_names_the_object_and_why() {
        let cause = || ApiError::transient(503, "unavailable");
        let stuck = NotGone::Stuck(vec![
            Stuck::StillDeleting {
                namespace: "kube-system".into(),
                name: "ca-issue-n1".into(),
                after: "5m".into(),
            },
            Stuck::Unwatched {
                namespace: "kube-system".into(),
                name: "ca-issue-n2".into(),
                cause: cause(),
            },
        ]);
        let said = stuck.to_string();
        assert!(
            said.starts_with("job kube-system/ca-issue-n1 is still being deleted after 5m; job kube-system/ca-issue-n2 could not be watched going: "),
            "{said}"
        );
        let kept = NotDeleted::KeptChanging {
            namespace: "kube-system".into(),
            name: "ca-stage-n1".into(),
            uid: "u1".into(),
            rounds: 5,
        };
        assert_eq!(
            kept.to_string(),
            "deleting job kube-system/ca-stage-n1 (uid u1): it kept changing (5 conflicts)"
        );
        let lost = Unrecorded::LeaseLost {
            node: "n1".into(),
            lost: nodejob_roll::LeaseLost {
                why: "held by someone else".into(),
            },
        };
        assert_eq!(
            lost.to_string(),
            "could not record the status on node n1: the Lease was lost: held by someone else"
        );
        let unwritten = Unrecorded::Writing {
            node: "n1".into(),
            cause: nodejob_roll::OpError::NodeKeptChanging { node: "n1".into() },
        };
        assert!(
            unwritten
                .to_string()
                .starts_with("could not record the status on node n1: patching node n1: "),
            "{unwritten}"
        );
    }
}
