//! What `jobs` reads: the node Jobs in the namespace (node, status, exit code, age).
//!
//! A Job is a node Job when it names a node the way `build` writes it: the
//! [`NODE_ANNOTATION`], else (a Job written before that annotation existed) a label of the
//! `stratum.ciq.com/` domain whose value is the node ([`job_node`]). Its exit code is its Pod's
//! container's, from the terminated state the kubelet reported: read with one `LIST` of the
//! namespace's Job Pods, each matched to its Job by UID ([`is_pod_of_job`]).
//!
//! [`gather`] lists them as [`Row`]s; `crate::present::jobs` shows them to people, and `-o
//! json` prints each [`Row`] itself. The command `jobs` and the MCP tool `jobs` use both.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::selector::{LabelSelector, SelectorError};
use nodejob_core::{
    ApiError, CONTROLLER_UID_LABEL, ErrorKind, JobApi, NODE_ANNOTATION, container_exit_code,
    disruption, failed, is_pod_of_job, job_node, succeeded,
};
use serde::Serialize;

use super::ReadError;

/// The label domain of node Jobs: the drivers' and `nodejob run`'s label keys, and the Go
/// implementation's.
const LABEL_DOMAIN: &str = "stratum.ciq.com/";

/// Where a node Job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) enum State {
    /// Not finished: its Pod is pending or running.
    Running,
    /// Finished with success.
    Succeeded,
    /// Finished without success.
    Failed,
    /// Being deleted (foreground: kept until its Pod is gone).
    Deleting,
}

impl State {
    fn of(job: &Job) -> State {
        if job.metadata.deletion_timestamp.is_some() {
            State::Deleting
        } else if succeeded(job) {
            State::Succeeded
        } else if failed(job) {
            State::Failed
        } else {
            State::Running
        }
    }

    /// As `jobs` shows it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            State::Running => "Running",
            State::Succeeded => "Succeeded",
            State::Failed => "Failed",
            State::Deleting => "Deleting",
        }
    }
}

/// One node Job, as shown.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) node: String,
    /// The `stratum.ciq.com/` label that marks it (whose Job it is: `upgrade`, `carotate`,
    /// `run`), if any.
    pub(crate) label: Option<String>,
    pub(crate) status: State,
    /// The container's exit code, once it terminated.
    pub(crate) exit_code: Option<i32>,
    /// Whether its Pod was stopped from outside (deleted, evicted): then the exit code is the
    /// kill's, not the host program's answer.
    pub(crate) disrupted: bool,
    /// Why no exit code is known, when none is: `not finished`, `being deleted`, the reason
    /// of the Job's `Failed` condition (`DeadlineExceeded`: its deadline passed, the container
    /// killed), or that its Pod is gone (deleted, garbage-collected) or unread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) no_exit: Option<String>,
    pub(crate) uid: Option<String>,
    /// Its resourceVersion as listed: a delete of exactly this Job goes with it.
    #[serde(skip)]
    pub(crate) resource_version: Option<String>,
    /// `creationTimestamp`.
    pub(crate) created: Option<String>,
    pub(crate) age_seconds: Option<i64>,
}

/// The node Jobs [`gather`] found.
#[derive(Debug)]
pub(crate) struct Listed {
    /// One row per node Job, in the API's order.
    pub(crate) rows: Vec<Row>,
    /// Why their Pods could not be listed, when they could not: then no exit code is known.
    pub(crate) pods_unread: Option<ReadError>,
}

/// Why [`gather`] found no list. A selector refused is said without the selector, which each
/// front end names its way (`--selector`, `selector`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unlisted {
    /// The label selector does not parse (by the apiserver's grammar, before any call): bad
    /// input.
    #[error("{0}")]
    Selector(SelectorError),
    /// The API refused the selector (400): bad input.
    #[error("{0}")]
    SelectorRefused(ApiError),
    /// Listing failed: `listing jobs in NAMESPACE: …`.
    #[error(transparent)]
    Failed(ReadError),
}

impl Unlisted {
    /// Whether the selector was refused (bad input), rather than the list failing.
    pub(crate) fn is_selector(&self) -> bool {
        matches!(self, Unlisted::Selector(_) | Unlisted::SelectorRefused(_))
    }
}

/// Lists the node Jobs of `namespace` that match `selector`, with their exit codes: one `LIST`
/// of the Jobs, one of the namespace's Job Pods.
pub(crate) async fn gather<A>(api: &A, namespace: &str, selector: &str) -> Result<Listed, Unlisted>
where
    A: JobApi + ?Sized,
{
    // Refused here as the apiserver would refuse it (`labels.Parse`), before any call.
    LabelSelector::parse(selector).map_err(Unlisted::Selector)?;
    let jobs = super::read(api, || api.list_jobs(namespace, selector))
        .await
        .map_err(|cause| {
            if cause.kind == ErrorKind::BadRequest {
                Unlisted::SelectorRefused(cause)
            } else {
                Unlisted::Failed(ReadError::ListingJobs {
                    namespace: namespace.into(),
                    cause,
                })
            }
        })?;
    let jobs: Vec<(&Job, &str)> = jobs
        .iter()
        .filter_map(|j| node_of(j).map(|node| (j, node)))
        .collect();
    let (pods, pods_unread) = if jobs.is_empty() {
        (Vec::new(), None)
    } else {
        // Every Job Pod of the namespace at once (the Job controller labels each with its
        // Job's UID): one request, whatever the number of Jobs.
        match super::read(api, || api.list_pods(namespace, CONTROLLER_UID_LABEL)).await {
            Ok(pods) => (pods, None),
            Err(cause) => (
                Vec::new(),
                Some(ReadError::ListingPods {
                    namespace: namespace.into(),
                    cause,
                }),
            ),
        }
    };
    let now = api.wall_time();
    let rows = jobs
        .into_iter()
        .map(|(job, node)| row(job, node, &pods, pods_unread.is_none(), now))
        .collect();
    Ok(Listed { rows, pods_unread })
}

/// Where a list looks, in words: `namespace NS`, or (empty) `every namespace`.
pub(super) fn scope(namespace: &str) -> String {
    match namespace {
        "" => "every namespace".into(),
        ns => format!("namespace {ns}"),
    }
}

/// The reason of the Job's `Failed` condition (`DeadlineExceeded`, `BackoffLimitExceeded`,
/// `PodFailurePolicy`), as the Job controller set it.
fn failed_reason(job: &Job) -> Option<String> {
    (job.status.as_ref()?.conditions.iter().flatten())
        .find(|c| c.type_ == "Failed" && c.status == "True")
        .and_then(|c| c.reason.clone())
}

/// The node a node Job names: its annotation, else a `stratum.ciq.com/` label's value.
fn node_of(job: &Job) -> Option<&str> {
    job_node(job, label_of(job).unwrap_or(NODE_ANNOTATION))
}

/// The `stratum.ciq.com/` label key of a Job, if it has one.
fn label_of(job: &Job) -> Option<&str> {
    (job.metadata.labels.iter().flatten())
        .map(|(k, _)| k.as_str())
        .find(|k| k.starts_with(LABEL_DOMAIN))
}

fn row(job: &Job, node: &str, pods: &[Pod], pods_read: bool, now: Timestamp) -> Row {
    let meta = &job.metadata;
    let container = (job.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .map(|c| c.name.as_str());
    // The newest of its Pods that says how its container ended.
    let ended = meta.uid.as_deref().and_then(|uid| {
        (pods.iter())
            .filter(|p| is_pod_of_job(p, uid))
            .filter_map(|p| Some((p, container_exit_code(p, container?)?)))
            .max_by_key(|(p, _)| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
    });
    let created = meta.creation_timestamp.as_ref().map(|t| t.0);
    let status = State::of(job);
    let has_pod =
        (meta.uid.as_deref()).is_some_and(|uid| pods.iter().any(|p| is_pod_of_job(p, uid)));
    let no_exit = ended.is_none().then(|| match (status, failed_reason(job)) {
        (State::Running, _) => "not finished".to_string(),
        (State::Deleting, _) => "being deleted".to_string(),
        _ if !pods_read => "its Pod unread".to_string(),
        (_, Some(reason)) if !has_pod => format!("{reason}; its Pod is gone"),
        (_, Some(reason)) => reason,
        _ if !has_pod => "its Pod is gone".to_string(),
        _ => "its container reported none".to_string(),
    });
    Row {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        node: node.to_string(),
        label: label_of(job).map(str::to_string),
        status,
        exit_code: ended.map(|(_, code)| code),
        disrupted: ended.is_some_and(|(p, _)| disruption(p).is_some()),
        no_exit,
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        created: created.map(|t| t.to_string()),
        age_seconds: created.map(|t| now.duration_since(t).as_secs().max(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(status: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "kube-system", "uid": "u-1",
                         "annotations": {NODE_ANNOTATION: "n1"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": status,
        }))
        .unwrap()
    }

    fn pod(exit: Option<i32>) -> Pod {
        let state = match exit {
            Some(code) => serde_json::json!({"terminated": {"exitCode": code}}),
            None => serde_json::json!({"running": {}}),
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j-x", "labels": {CONTROLLER_UID_LABEL: "u-1"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": "j", "uid": "u-1", "controller": true}]},
            "status": {"containerStatuses": [{"name": "c", "image": "", "imageID": "",
                        "ready": false, "restartCount": 0, "state": state}]},
        }))
        .unwrap()
    }

    /// Where `jobs` shows no exit code, it says why: the Job's `Failed` reason (its deadline
    /// passed), its Pod gone, or not finished.
    #[test]
    fn no_exit_code_is_said_with_why() {
        let failed = |reason: &str| {
            job(serde_json::json!({"failed": 1, "conditions": [
                {"type": "Failed", "status": "True", "reason": reason}]}))
        };
        let now = Timestamp::now();
        let cases = [
            (
                job(serde_json::json!({"active": 1})),
                vec![pod(None)],
                Some("not finished"),
            ),
            (
                failed("DeadlineExceeded"),
                vec![],
                Some("DeadlineExceeded; its Pod is gone"),
            ),
            (
                failed("DeadlineExceeded"),
                vec![pod(None)],
                Some("DeadlineExceeded"),
            ),
            (failed("BackoffLimitExceeded"), vec![pod(Some(1))], None),
            (
                job(serde_json::json!({"succeeded": 1, "conditions": [
                    {"type": "Complete", "status": "True"}]})),
                vec![],
                Some("its Pod is gone"),
            ),
        ];
        for (job, pods, want) in cases {
            let row = row(&job, "n1", &pods, true, now);
            assert_eq!(row.no_exit.as_deref(), want, "{row:?}");
            assert_eq!(row.exit_code.is_some(), want.is_none(), "{row:?}");
        }
        let unread = row(&failed("DeadlineExceeded"), "n1", &[], false, now);
        assert_eq!(unread.no_exit.as_deref(), Some("its Pod unread"));
    }

    /// A selector refused is told apart from a list that failed; each failure names the list.
    #[tokio::test(start_paused = true)]
    async fn a_list_refused_or_failed_says_which_and_names_the_list() -> anyhow::Result<()> {
        use nodejob_fake::{Times, Verb};
        const NS: &str = "kube-system";
        let fake = crate::sim::cluster(3, &[])?;
        crate::sim::history(&fake, 3, NS)
            .await
            .map_err(|e| anyhow::anyhow!(e.message))?;
        let unlisted =
            |r: Result<Listed, Unlisted>| r.err().map(|e| (e.is_selector(), e.to_string()));

        let parse = gather(&*fake, NS, "a in (").await;
        assert!(matches!(unlisted(parse), Some((true, _))));
        fake.fail(
            Verb::ListJobs,
            ApiError::bad_request("bad selector"),
            Times::Once,
        );
        assert_eq!(
            unlisted(gather(&*fake, NS, "a").await),
            Some((true, "bad selector (400 BadRequest)".into()))
        );
        fake.fail(
            Verb::ListJobs,
            ApiError::transient(500, "down"),
            Times::Once,
        );
        assert_eq!(
            unlisted(gather(&*fake, "", "").await),
            Some((
                false,
                "listing jobs in every namespace: down (500 InternalError)".into()
            ))
        );
        fake.fail(
            Verb::ListPods,
            ApiError::transient(500, "down"),
            Times::Once,
        );
        let listed = gather(&*fake, NS, "")
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        assert!(!listed.rows.is_empty());
        assert_eq!(
            listed.pods_unread.map(|e| e.to_string()).as_deref(),
            Some("listing the jobs' pods in namespace kube-system: down (500 InternalError)")
        );
        Ok(())
    }
}
