//! What the read-only commands read from a cluster, as data: `jobs` ([`jobs`]) and `status`
//! ([`status`]). The command and the MCP tool of each read through the same `gather` and show
//! the same data (`crate::present` for people, serde for programs).

pub(crate) mod jobs;
pub(crate) mod status;

use nodejob_core::ApiError;

use crate::exit::Exit;

/// Why what a read-only command (or an MCP preview's token) reads could not be read: the
/// read, its object, and the apiserver's answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// The nodes could not be listed.
    #[error("listing nodes: {cause}")]
    ListingNodes {
        /// The API's answer.
        cause: ApiError,
    },
    /// A kind of declarative roll could not be listed (other than not installed or not
    /// this user's to read, which `status` takes for none).
    #[error("listing {kinds}: {cause}")]
    ListingRolls {
        /// The kind, plural: `NodeUpgrades`.
        kinds: &'static str,
        /// The API's answer.
        cause: ApiError,
    },
    /// The node Jobs could not be listed.
    #[error("listing jobs in {}: {cause}", jobs::scope(namespace))]
    ListingJobs {
        /// The namespace (empty: every namespace).
        namespace: String,
        /// The API's answer.
        cause: ApiError,
    },
    /// The node Jobs' Pods could not be listed (so no exit code is known).
    #[error("listing the jobs' pods in {}: {cause}", jobs::scope(namespace))]
    ListingPods {
        /// The namespace (empty: every namespace).
        namespace: String,
        /// The API's answer.
        cause: ApiError,
    },
    /// The Lease could not be read (other than absent).
    #[error("reading lease {namespace}/{name}: {cause}")]
    ReadingLease {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API's answer.
        cause: ApiError,
    },
    /// The Job could not be read (other than absent).
    #[error("reading job {namespace}/{name}: {cause}")]
    ReadingJob {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API's answer.
        cause: ApiError,
    },
}

/// A read failed: the command failed (exit 1), the apiserver's answer said.
impl From<ReadError> for Exit {
    fn from(e: ReadError) -> Self {
        Exit::failed(e.to_string())
    }
}
