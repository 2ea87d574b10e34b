//! What the read-only commands read from a cluster, as data: `jobs` ([`jobs`]) and `status`
//! ([`status`]). The command and the MCP tool of each read through the same `gather` and show
//! the same data (`crate::present` for people, serde for programs).

pub(crate) mod jobs;
pub(crate) mod status;

use std::future::Future;

use nodejob_core::{ApiError, Clock};

use crate::exit::Exit;

/// How many times [`read`] sends a read again: client-go's default (`maxRetries: 10` in
/// `NewRequest`, `k8s.io/client-go/rest/request.go`).
const READ_RETRIES: u32 = 10;

/// One read of a read-only command, sent again as `kubectl`'s would be: only when the
/// apiserver answered a 429 or a 5xx with a `Retry-After` (the answer of API Priority and
/// Fairness, and of a resource whose storage is still initializing, as a CRD's is for a moment
/// after it is created: 429 "storage is (re)initializing", `Retry-After: 1`), once that has
/// passed ([`ApiError::retry_pause`]), at most [`READ_RETRIES`] times. client-go's rule
/// (`IsRetryableResponse` and `checkWait`, `k8s.io/client-go/rest/with_retry.go`): an answer
/// without `Retry-After` is the answer at once, so a command against a cluster that is down
/// says so without waiting.
pub(crate) async fn read<A, T, F, Fut>(api: &A, mut op: F) -> Result<T, ApiError>
where
    A: Clock + ?Sized,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ApiError>>,
{
    let mut retries = 0;
    loop {
        match op().await {
            Err(e) if e.is_retryable() && e.retry_after().is_some() && retries < READ_RETRIES => {
                retries += 1;
                api.sleep(e.retry_pause(std::time::Duration::ZERO)).await;
            }
            other => return other,
        }
    }
}

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
