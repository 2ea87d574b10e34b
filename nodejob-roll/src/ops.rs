//! The operations both drivers take on a node of a run, each with a typed error naming the
//! operation and the object: a node patched under its resourceVersion again after a
//! conflict, a host Job deleted exactly, an Event written on a node. (A host Job run with its
//! notes in the run's progress, and an Event only while the Lease is held, read right before
//! it, are [`Context`](crate::Context)'s.)

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
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
    let mut rv = resource_version.to_string();
    for _ in 0..WRITE_ROUNDS {
        match retry(api, || api.patch_node(name, &rv, changes)).await {
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

/// Deletes the host Job `namespace/name` of `uid` and waits until it is gone; gone already, or
/// replaced by another Job of the name, is done.
///
/// - `seen`, the Job's resourceVersion as the caller last saw it (the runner's
///   [`Report::resource_version`](nodejob_core::runner::Report::resource_version)): deleted by
///   its UID alone and waited for from that version, with no read first
///   ([`nodejob_core::delete_seen_and_wait`]). Its deletion decides nothing on its state (a
///   finished Job whose result is recorded), only on its identity.
/// - Else, or when that delete meets a Conflict: read first, then deleted exactly (UID and
///   resourceVersion as preconditions); a conflict (the Job controller wrote to it since it
///   was read) reads it again: still `uid`, the delete is tried again with the new
///   resourceVersion.
///
/// # Errors
/// The Job could not be read or deleted, or kept changing.
pub async fn delete_job<A: JobApi + ?Sized>(
    api: &A,
    namespace: &str,
    name: &str,
    uid: &str,
    seen: Option<&str>,
) -> Result<(), OpError> {
    if let Some(rv) = seen {
        let job = Job {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                uid: Some(uid.into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            ..Job::default()
        };
        match nodejob_core::delete_seen_and_wait(api, &job).await {
            Ok(()) => return Ok(()),
            // Another Job of the name, or a refusal to tell apart: read below.
            Err(nodejob_core::Error::Api { cause, .. }) if cause.is_conflict() => {}
            Err(e) => return Err(OpError::DeletingJob(e)),
        }
    }
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
