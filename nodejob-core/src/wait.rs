//! Deleting a Job and waiting until it is gone; waiting for a Node to be Ready.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;

use crate::api::JobApi;
use crate::error::{ApiError, Error, Result};
use crate::runner::retrying;
use crate::{Change, POLL_INTERVAL, ready};

/// How long [`delete_and_wait`] and [`delete_exact_and_wait`] wait for a Job to be gone: its
/// Pod's termination grace period (30s by default) with room to spare.
pub const DELETE_TIMEOUT: Duration = Duration::from_secs(300);

/// Foreground-deletes the Job `namespace/name`, whatever its UID, and waits until it is gone, so
/// a fresh create cannot race the old object. A Job that does not exist is not an error.
pub async fn delete_and_wait<A: JobApi + ?Sized>(
    api: &A,
    namespace: &str,
    name: &str,
) -> Result<()> {
    let what = format!("job {namespace}/{name}");
    match retrying(api, DELETE_TIMEOUT, || {
        api.delete_job(namespace, name, None)
    })
    .await
    {
        Err(e) if e.is_not_found() => return Ok(()),
        Err(cause) => {
            return Err(Error::Api {
                action: format!("deleting {what}"),
                cause,
            });
        }
        Ok(()) => {}
    }
    let job = match retrying(api, DELETE_TIMEOUT, || api.get_job(namespace, name)).await {
        Err(e) if e.is_not_found() => return Ok(()),
        Err(cause) => {
            return Err(Error::Api {
                action: format!("reading {what}"),
                cause,
            });
        }
        Ok(job) => job,
    };
    wait_gone(api, &job).await
}

/// Deletes exactly the Job object it is given, with its UID and resourceVersion as
/// preconditions, so a Job recreated or changed since it was inspected is never the one removed
/// (that answers [`Error::Api`] with a Conflict). Then waits until it is gone.
pub async fn delete_exact_and_wait<A: JobApi + ?Sized>(api: &A, job: &Job) -> Result<()> {
    let (namespace, name) = names(job);
    let pre = Preconditions {
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
    };
    let action = format!(
        "deleting job {namespace}/{name} (uid {}, resourceVersion {})",
        pre.uid.as_deref().unwrap_or("?"),
        pre.resource_version.as_deref().unwrap_or("?")
    );
    if pre.uid.is_none() || pre.resource_version.is_none() {
        let cause = ApiError::invalid("an exact delete needs the job's uid and resourceVersion");
        return Err(Error::Api { action, cause });
    }
    match retrying(api, DELETE_TIMEOUT, || {
        api.delete_job(namespace, name, Some(&pre))
    })
    .await
    {
        Err(e) if e.is_not_found() => Ok(()),
        Err(cause) => Err(Error::Api { action, cause }),
        Ok(()) => wait_gone(api, job).await,
    }
}

fn names(job: &Job) -> (&str, &str) {
    (
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Waits until the Job with `job`'s UID is gone: deleted, or its name taken by another UID.
async fn wait_gone<A: JobApi + ?Sized>(api: &A, job: &Job) -> Result<()> {
    let (namespace, name) = names(job);
    let uid = job.metadata.uid.clone();
    let deadline = api.now().saturating_add(DELETE_TIMEOUT);
    let mut since = job.metadata.resource_version.clone();
    loop {
        let timeout = deadline.saturating_sub(api.now());
        if timeout.is_zero() {
            return Err(Error::Timeout {
                job: Box::new(crate::JobRef {
                    kind: String::new(),
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    node: crate::job_node(job, "").unwrap_or("?").to_string(),
                }),
                what: "to be deleted".to_string(),
                waited: DELETE_TIMEOUT,
            });
        }
        let change = retrying(api, timeout, || {
            api.wait_job(namespace, name, since.as_deref(), timeout)
        })
        .await;
        match change {
            Ok(Change::Deleted(_)) => return Ok(()),
            Ok(Change::Applied(j)) if j.metadata.uid != uid => return Ok(()),
            Ok(Change::Applied(j)) => since = j.metadata.resource_version,
            Ok(Change::TimedOut) => {}
            // The watch expired: read the object again and go on from it.
            Err(e) if e.is_gone() => {
                match retrying(api, timeout, || api.get_job(namespace, name)).await {
                    Err(e) if e.is_not_found() => return Ok(()),
                    Ok(j) if j.metadata.uid != uid => return Ok(()),
                    Ok(j) => since = j.metadata.resource_version,
                    Err(cause) => {
                        return Err(Error::Api {
                            action: format!("reading job {namespace}/{name}"),
                            cause,
                        });
                    }
                }
            }
            Err(cause) => {
                return Err(Error::Api {
                    action: format!("watching job {namespace}/{name} being deleted"),
                    cause,
                });
            }
        }
    }
}

/// Waits until the Node `name` is Ready, at most `attempts` x [`POLL_INTERVAL`], event-driven.
/// A node that does not exist (yet) is waited for too: it may be re-registering after a reboot.
pub async fn wait_ready<A: JobApi + ?Sized>(api: &A, name: &str, attempts: u32) -> Result<()> {
    let bound = POLL_INTERVAL.saturating_mul(attempts);
    let deadline = api.now().saturating_add(bound);
    let (mut state, mut since) = match retrying(api, bound, || api.get_node(name)).await {
        Ok(node) if ready(&node) => return Ok(()),
        Ok(node) => ("is NotReady".to_string(), node.metadata.resource_version),
        Err(e) if e.is_not_found() => ("does not exist".to_string(), None),
        Err(cause) => {
            return Err(Error::Api {
                action: format!("reading node {name}"),
                cause,
            });
        }
    };
    loop {
        let timeout = deadline.saturating_sub(api.now());
        if timeout.is_zero() {
            return Err(Error::NodeNotReady {
                node: name.to_string(),
                state,
                waited: bound,
            });
        }
        match retrying(api, timeout, || {
            api.wait_node(name, since.as_deref(), timeout)
        })
        .await
        {
            Ok(Change::Applied(node)) if ready(&node) => return Ok(()),
            Ok(Change::Applied(node)) => {
                state = "is NotReady".to_string();
                since = node.metadata.resource_version;
            }
            Ok(Change::Deleted(node)) => {
                state = "does not exist".to_string();
                since = node.metadata.resource_version;
            }
            Ok(Change::TimedOut) => {}
            Err(e) if e.is_gone() => match retrying(api, timeout, || api.get_node(name)).await {
                Ok(node) if ready(&node) => return Ok(()),
                Ok(node) => since = node.metadata.resource_version,
                Err(e) if e.is_not_found() => since = None,
                Err(cause) => {
                    return Err(Error::Api {
                        action: format!("reading node {name}"),
                        cause,
                    });
                }
            },
            Err(cause) => {
                return Err(Error::Api {
                    action: format!("watching node {name}"),
                    cause,
                });
            }
        }
    }
}
