//! Deleting a Job and waiting until it is gone; waiting for a Pod to be gone; waiting for a Node
//! to be Ready. Every wait is [`crate::watch::watch_until`].

use std::future::Future;
use std::time::Duration;

use k8s_openapi::Metadata;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Preconditions};

use crate::api::{ApiResult, Change, Clock, JobApi, NodeApi, PodApi};
use crate::error::{Action, ApiError, Error, ObjectKind, Operation, Result};
use crate::runner::retrying;
use crate::watch::{From, Step, Until, watch_until};
use crate::{POLL_INTERVAL, ready};

/// How long [`delete_and_wait`], [`delete_exact_and_wait`] and [`delete_seen_and_wait`] wait for a Job to be gone: its
/// Pod's termination grace period (30s by default) with room to spare.
pub const DELETE_TIMEOUT: Duration = Duration::from_secs(300);

/// Foreground-deletes the Job `namespace/name`, whatever its UID, and waits until it is gone, so
/// a fresh create cannot race the old object. A Job that does not exist is not an error.
pub async fn delete_and_wait<A: JobApi + ?Sized>(
    api: &A,
    namespace: &str,
    name: &str,
) -> Result<()> {
    let op = |verb| Operation::named(verb, ObjectKind::Job, namespace, name);
    match retrying(api, DELETE_TIMEOUT, || {
        api.delete_job(namespace, name, None)
    })
    .await
    {
        Err(e) if e.is_not_found() => return Ok(()),
        Err(cause) => {
            return Err(Error::Api {
                op: op(Action::Deleting),
                cause,
            });
        }
        Ok(()) => {}
    }
    let job = match retrying(api, DELETE_TIMEOUT, || api.get_job(namespace, name)).await {
        Err(e) if e.is_not_found() => return Ok(()),
        Err(cause) => {
            return Err(Error::Api {
                op: op(Action::Reading),
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
    let op =
        Operation::named(Action::Deleting, ObjectKind::Job, namespace, name).with_detail(format!(
            "uid {}, resourceVersion {}",
            pre.uid.as_deref().unwrap_or("?"),
            pre.resource_version.as_deref().unwrap_or("?")
        ));
    if pre.uid.is_none() || pre.resource_version.is_none() {
        let cause = ApiError::invalid("an exact delete needs the job's uid and resourceVersion");
        return Err(Error::Api { op, cause });
    }
    delete_under(api, job, &pre, op).await
}

/// Deletes the Job object it is given by its UID alone, then waits until it is gone, from its
/// resourceVersion as given: the Job as its caller last saw it, with no read first. A change
/// to it since (the Job controller's own status writes on a finished Job) does not refuse the
/// delete; another Job of its name does (UID mismatch: [`Error::Api`] with a Conflict, as in
/// [`delete_exact_and_wait`]). For a caller that no longer decides anything on the Job's
/// state, only on its identity: a finished Job whose result it has recorded.
///
/// # Errors
/// The delete failed (a Conflict included), or the Job was not gone within
/// [`DELETE_TIMEOUT`].
pub async fn delete_seen_and_wait<A: JobApi + ?Sized>(api: &A, job: &Job) -> Result<()> {
    let (namespace, name) = names(job);
    let pre = Preconditions {
        uid: job.metadata.uid.clone(),
        resource_version: None,
    };
    let op = Operation::named(Action::Deleting, ObjectKind::Job, namespace, name)
        .with_detail(format!("uid {}", pre.uid.as_deref().unwrap_or("?")));
    if pre.uid.is_none() {
        let cause = ApiError::invalid("a delete by UID needs the job's uid");
        return Err(Error::Api { op, cause });
    }
    delete_under(api, job, &pre, op).await
}

/// Deletes `job` under `pre` (its failure named as `op`), then waits until it is gone; gone
/// already is done.
async fn delete_under<A: JobApi + ?Sized>(
    api: &A,
    job: &Job,
    pre: &Preconditions,
    op: Operation,
) -> Result<()> {
    let (namespace, name) = names(job);
    match retrying(api, DELETE_TIMEOUT, || {
        api.delete_job(namespace, name, Some(pre))
    })
    .await
    {
        Err(e) if e.is_not_found() => Ok(()),
        Err(cause) => Err(Error::Api { op, cause }),
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
    let gone = until_gone(
        api,
        job,
        ObjectKind::Job,
        DELETE_TIMEOUT,
        || api.get_job(namespace, name),
        |since, timeout| async move {
            api.wait_job(namespace, name, since.as_deref(), timeout)
                .await
        },
    )
    .await?;
    if gone {
        return Ok(());
    }
    Err(Error::Timeout {
        job: Box::new(crate::JobRef {
            kind: String::new(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            node: crate::job_node(job, "").unwrap_or("?").to_string(),
        }),
        what: "to be deleted".to_string(),
        waited: DELETE_TIMEOUT,
    })
}

/// Waits until the Pod `pod` (by UID) is gone: deleted, or its name taken by another UID, as
/// `kubectl drain` waits for an evicted Pod. Answers whether it is gone (`false`: `bound` ran
/// out with it still there).
pub async fn wait_pod_gone<A: PodApi + ?Sized>(
    api: &A,
    pod: &Pod,
    bound: Duration,
) -> Result<bool> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    until_gone(
        api,
        pod,
        ObjectKind::Pod,
        bound,
        || api.get_pod(namespace, name),
        |since, timeout| async move {
            api.wait_pod(namespace, name, since.as_deref(), timeout)
                .await
        },
    )
    .await
}

/// Waits until the object `seen` (by UID) is gone, read by `get` and watched by `wait`: deleted,
/// or its name taken by another UID. Answers whether it is gone within `bound`.
async fn until_gone<A, K, G, GF, W, WF>(
    api: &A,
    seen: &K,
    kind: ObjectKind,
    bound: Duration,
    get: G,
    wait: W,
) -> Result<bool>
where
    A: Clock + ?Sized,
    K: Metadata<Ty = ObjectMeta> + Clone,
    G: Fn() -> GF,
    GF: Future<Output = ApiResult<K>>,
    W: Fn(Option<String>, Duration) -> WF,
    WF: Future<Output = ApiResult<Change<K>>>,
{
    let meta = seen.metadata();
    let uid = meta.uid.clone();
    let until = watch_until(
        api,
        bound,
        From::Seen(Some(seen.clone())),
        get,
        wait,
        |now| now.is_none_or(|k| k.metadata().uid != uid),
    )
    .await;
    match until {
        Ok(Until::Met(_)) => Ok(true),
        Ok(Until::TimedOut(_)) => Ok(false),
        Err((step, cause)) => {
            let namespace = meta.namespace.as_deref().unwrap_or_default();
            let name = meta.name.as_deref().unwrap_or_default();
            let op = match step {
                Step::Read => Operation::named(Action::Reading, kind, namespace, name),
                Step::Watch => Operation::named(Action::Watching, kind, namespace, name)
                    .with_detail("until it is gone"),
            };
            Err(Error::Api { op, cause })
        }
    }
}

/// Waits until the Node `name` is Ready, at most `attempts` x [`POLL_INTERVAL`], event-driven.
/// A node that does not exist (yet) is waited for too: it may be re-registering after a reboot.
pub async fn wait_ready<A: NodeApi + ?Sized>(api: &A, name: &str, attempts: u32) -> Result<()> {
    let bound = POLL_INTERVAL.saturating_mul(attempts);
    let until = watch_until(
        api,
        bound,
        From::Read,
        || api.get_node(name),
        |since, timeout| async move { api.wait_node(name, since.as_deref(), timeout).await },
        |seen| seen.is_some_and(ready),
    )
    .await;
    match until {
        Ok(Until::Met(_)) => Ok(()),
        Ok(Until::TimedOut(last)) => Err(Error::NodeNotReady {
            node: name.to_string(),
            state: match last {
                Some(_) => "is NotReady",
                None => "does not exist",
            }
            .to_string(),
            waited: bound,
        }),
        Err((step, cause)) => Err(Error::Api {
            op: Operation::named(
                match step {
                    Step::Read => Action::Reading,
                    Step::Watch => Action::Watching,
                },
                ObjectKind::Node,
                "",
                name,
            ),
            cause,
        }),
    }
}
