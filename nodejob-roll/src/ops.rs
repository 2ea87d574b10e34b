//! The operations both drivers take on a node of a run, each with a typed error naming the
//! operation and the object: a node patched under its resourceVersion again after a
//! conflict, a host Job deleted exactly, an Event written on a node. (A host Job run with its
//! notes in the run's progress, and an Event only while the Lease is held, read right before
//! it, are [`Context`](crate::Context)'s.)

use k8s_openapi::api::core::v1::Node;
use nodejob_core::{ApiError, EventType, JobApi, NodeApi, NodeChange, node_event};

use crate::call::retry;

/// How many times [`patch_node`] and [`delete_job`] read their object again after a conflict
/// before giving up.
pub const WRITE_ROUNDS: u32 = 5;

/// Why an operation on a node of a run did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// The node could not be read.
    #[error("reading node {node}: {cause}")]
    ReadingNode {
        /// The node.
        node: String,
        /// The API's answer.
        cause: ApiError,
    },
    /// The node could not be patched.
    #[error("patching node {node}: {cause}")]
    PatchingNode {
        /// The node.
        node: String,
        /// The API's answer.
        cause: ApiError,
    },
    /// Every patch met a conflict: others kept writing the node.
    #[error(
        "patching node {node}: it kept changing under other writers ({WRITE_ROUNDS} conflicts)"
    )]
    NodeKeptChanging {
        /// The node.
        node: String,
    },
    /// The host Job could not be read.
    #[error("reading the host job {namespace}/{name}: {cause}")]
    ReadingJob {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API's answer.
        cause: ApiError,
    },
    /// The host Job could not be deleted (core's error names the Job).
    #[error(transparent)]
    DeletingJob(nodejob_core::Error),
    /// Every delete met a conflict: the Job controller kept writing the Job.
    #[error(
        "deleting the host job {namespace}/{name}: it kept changing ({WRITE_ROUNDS} conflicts)"
    )]
    JobKeptChanging {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// Patches node `name` with `changes` under `resource_version`; a conflict (someone wrote the
/// node since) reads it again and applies the same changes, which must be idempotent (set or
/// remove an annotation, cordon, uncordon), to the version read, at most [`WRITE_ROUNDS`]
/// times. Transient errors are retried ([`retry`]).
///
/// # Errors
/// The node could not be read or patched, or kept changing.
pub async fn patch_node<A: NodeApi + ?Sized>(
    api: &A,
    name: &str,
    resource_version: &str,
    changes: &[NodeChange],
) -> Result<Node, OpError> {
    let write = |rv: String| async move { retry(api, || api.patch_node(name, &rv, changes)).await };
    write_node(api, name, resource_version, write).await
}

/// [`patch_node`]'s rounds with another write of the same idempotent changes: `write(rv)`
/// makes it under `rv` (transient errors retried by it), first under `resource_version`, then
/// under the version a conflict's read answers, at most [`WRITE_ROUNDS`] times. A driver's
/// record sent with its condition through `nodes/status`
/// ([`NodeApi::patch_node_conditions`]) is written so.
///
/// # Errors
/// The node could not be read or written, or kept changing.
pub async fn write_node<A, F, W>(
    api: &A,
    name: &str,
    resource_version: &str,
    write: W,
) -> Result<Node, OpError>
where
    A: NodeApi + ?Sized,
    F: Future<Output = Result<Node, ApiError>>,
    W: Fn(String) -> F,
{
    let mut rv = resource_version.to_string();
    for _ in 0..WRITE_ROUNDS {
        match write(rv.clone()).await {
            Ok(node) => return Ok(node),
            Err(e) if e.is_conflict() => {
                let node = retry(api, || api.get_node(name)).await.map_err(|cause| {
                    OpError::ReadingNode {
                        node: name.into(),
                        cause,
                    }
                })?;
                rv = node.metadata.resource_version.unwrap_or_default();
            }
            Err(cause) => {
                return Err(OpError::PatchingNode {
                    node: name.into(),
                    cause,
                });
            }
        }
    }
    Err(OpError::NodeKeptChanging { node: name.into() })
}

/// Deletes the host Job `namespace/name` of `uid` exactly (UID and resourceVersion as
/// preconditions) and waits until it is gone; gone already, or replaced by another Job of the
/// name, is done. A conflict (the Job controller wrote to it since it was read) reads it
/// again: still `uid`, the delete is tried again with the new resourceVersion.
///
/// # Errors
/// The Job could not be read or deleted, or kept changing.
pub async fn delete_job<A: JobApi + ?Sized>(
    api: &A,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<(), OpError> {
    for _ in 0..WRITE_ROUNDS {
        let job = match retry(api, || api.get_job(namespace, name)).await {
            Ok(job) if job.metadata.uid.as_deref() == Some(uid) => job,
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(cause) => {
                return Err(OpError::ReadingJob {
                    namespace: namespace.into(),
                    name: name.into(),
                    cause,
                });
            }
        };
        match nodejob_core::delete_exact_and_wait(api, &job).await {
            Ok(()) => return Ok(()),
            Err(nodejob_core::Error::Api { cause, .. }) if cause.is_conflict() => continue,
            Err(e) => return Err(OpError::DeletingJob(e)),
        }
    }
    Err(OpError::JobKeptChanging {
        namespace: namespace.into(),
        name: name.into(),
    })
}

/// Writes a [`node_event`] about `node` in `namespace` from `component`, retried on transient
/// errors. The caller decides what a failure means (for the drivers: a note, never a node's
/// failure) and fences it: the Lease read right before ([`Fence::check`](crate::Fence::check)),
/// no Event once it is lost.
pub async fn write_node_event<A: JobApi + ?Sized>(
    api: &A,
    namespace: &str,
    node: &str,
    kind: EventType,
    reason: &str,
    message: &str,
    component: &str,
) -> std::result::Result<(), ApiError> {
    let event = node_event(
        namespace,
        node,
        kind,
        reason,
        message,
        component,
        api.wall_time(),
    );
    retry(api, || api.create_event(&event)).await.map(|_| ())
}
