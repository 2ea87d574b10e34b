//! `nodejob jobs`: the node Jobs in the namespace (node, status, exit code, age), as a table
//! or one JSON object per line.
//!
//! A Job is a node Job when it names a node the way `build` writes it: the
//! [`NODE_ANNOTATION`], else (a Job written before that annotation existed) a label of the
//! `stratum.ciq.com/` domain whose value is the node ([`job_node`]). Its exit code is its Pod's
//! container's, from the terminated state the kubelet reported: read with one `LIST` of the
//! namespace's Job Pods, each matched to its Job by UID ([`is_pod_of_job`]).
//!
//! [`gather`] lists them as [`Row`]s; [`text`] shows them to people, and `-o json` prints each
//! [`Row`] itself. The MCP tool `jobs` answers with the same two.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::selector::LabelSelector;
use nodejob_core::{
    CONTROLLER_UID_LABEL, ErrorKind, JobApi, NODE_ANNOTATION, container_exit_code, disruption,
    failed, is_pod_of_job, job_node, succeeded,
};
use serde::Serialize;

use crate::args::{Global, Jobs};
use crate::commands::{connect, real_runtime, simulated_runtime};
use crate::output::{Format, table};
use crate::sim;
use crate::{Exit, code};

/// The label domain of node Jobs: the drivers' and `nodejob run`'s label keys, and the Go
/// implementation's.
const LABEL_DOMAIN: &str = "stratum.ciq.com/";

/// Where a node Job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
enum State {
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

    fn as_str(self) -> &'static str {
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
    name: String,
    namespace: String,
    node: String,
    /// The `stratum.ciq.com/` label that marks it (whose Job it is: `upgrade`, `carotate`,
    /// `run`), if any.
    label: Option<String>,
    status: State,
    /// The container's exit code, once it terminated.
    exit_code: Option<i32>,
    /// Whether its Pod was stopped from outside (deleted, evicted): then the exit code is the
    /// kill's, not the host program's answer.
    disrupted: bool,
    uid: Option<String>,
    /// `creationTimestamp`.
    created: Option<String>,
    age_seconds: Option<i64>,
}

/// The node Jobs [`gather`] found.
#[derive(Debug)]
pub(crate) struct Listed {
    /// One row per node Job, in the API's order.
    pub(crate) rows: Vec<Row>,
    /// Why their Pods could not be listed, when they could not: then no exit code is known.
    pub(crate) pods_unread: Option<String>,
}

/// Why [`gather`] found no list.
#[derive(Debug)]
pub(crate) enum Unlisted {
    /// The label selector does not parse (by the apiserver's grammar, before any call), or
    /// the API refused it: bad input.
    Selector(String),
    /// Listing failed: `listing jobs in NAMESPACE: …`.
    Failed(String),
}

/// Runs `nodejob jobs`.
pub(crate) fn jobs(global: &Global, args: Jobs) -> Result<Exit, Exit> {
    let selector = args.selector.unwrap_or_default();
    match args.sim.simulate {
        Some(n) => simulated_runtime()?.block_on(async {
            let n = usize::from(n);
            let fake = sim::cluster(n, &sim::history_faults(&sim::node_names(n)))?;
            sim::history(&fake, n, &global.namespace).await?;
            show(&*fake, global, &selector).await
        }),
        None => real_runtime()?.block_on(async {
            let api = connect(global).await?;
            show(&api, global, &selector).await
        }),
    }
}

async fn show<A: JobApi + ?Sized>(api: &A, global: &Global, selector: &str) -> Result<Exit, Exit> {
    let ns = &global.namespace;
    let listed = gather(api, ns, selector).await.map_err(|e| match e {
        Unlisted::Selector(e) => Exit::usage(format!("--selector {selector:?}: {e}")),
        Unlisted::Failed(why) => Exit::failed(why),
    })?;
    if let Some(why) = &listed.pods_unread {
        eprintln!("{why}; exit codes unknown");
    }
    let rows = &listed.rows;
    if global.output == Format::Json {
        for row in rows {
            outln!("{}", serde_json::to_string(row).unwrap_or_default());
        }
    } else if rows.is_empty() {
        eprint!("{}", text(rows, ns));
    } else {
        out!("{}", text(rows, ns));
    }
    Ok(Exit::with(code::OK, ""))
}

/// Lists the node Jobs of `namespace` that match `selector`, with their exit codes: one `LIST`
/// of the Jobs, one of the namespace's Job Pods.
pub(crate) async fn gather<A>(api: &A, namespace: &str, selector: &str) -> Result<Listed, Unlisted>
where
    A: JobApi + ?Sized,
{
    // Refused here as the apiserver would refuse it (`labels.Parse`), before any call.
    LabelSelector::parse(selector).map_err(|e| Unlisted::Selector(e.to_string()))?;
    let jobs = api.list_jobs(namespace, selector).await.map_err(|e| {
        if e.kind == ErrorKind::BadRequest {
            Unlisted::Selector(e.to_string())
        } else {
            Unlisted::Failed(format!("listing jobs in {namespace}: {e}"))
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
        match api.list_pods(namespace, CONTROLLER_UID_LABEL).await {
            Ok(pods) => (pods, None),
            Err(e) => (
                Vec::new(),
                Some(format!("listing the jobs' pods in {namespace}: {e}")),
            ),
        }
    };
    let now = api.wall_time();
    let rows = jobs
        .into_iter()
        .map(|(job, node)| row(job, node, &pods, now))
        .collect();
    Ok(Listed { rows, pods_unread })
}

/// `jobs` for people: a table, or a line saying there is no node Job in `namespace`.
pub(crate) fn text(rows: &[Row], namespace: &str) -> String {
    if rows.is_empty() {
        return format!("no node jobs in namespace {namespace}\n");
    }
    let mut lines = vec![["NAME", "NODE", "STATUS", "EXIT", "AGE"].map(String::from)];
    for r in rows {
        lines.push([
            r.name.clone(),
            r.node.clone(),
            r.status.as_str().to_string(),
            match (r.exit_code, r.disrupted) {
                (Some(c), false) => c.to_string(),
                (Some(c), true) => format!("{c} (killed)"),
                (None, _) => "-".into(),
            },
            r.age_seconds.map_or_else(|| "?".into(), age),
        ]);
    }
    table(&lines)
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

fn row(job: &Job, node: &str, pods: &[Pod], now: Timestamp) -> Row {
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
    Row {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        node: node.to_string(),
        label: label_of(job).map(str::to_string),
        status: State::of(job),
        exit_code: ended.map(|(_, code)| code),
        disrupted: ended.is_some_and(|(p, _)| disruption(p).is_some()),
        uid: meta.uid.clone(),
        created: created.map(|t| t.to_string()),
        age_seconds: created.map(|t| now.duration_since(t).as_secs().max(0)),
    }
}

/// An age as kubectl shows one: `45s`, `3m20s`, `47m`, `5h12m`, `2d3h`, `12d`.
fn age(seconds: i64) -> String {
    let (m, h, d) = (seconds / 60, seconds / 3600, seconds / 86_400);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if m < 10 => match s % 60 {
            0 => format!("{m}m"),
            rest => format!("{m}m{rest}s"),
        },
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            rest => format!("{h}h{rest}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => match h % 24 {
            0 => format!("{d}d"),
            rest => format!("{d}d{rest}h"),
        },
        _ => format!("{d}d"),
    }
}

#[cfg(test)]
mod tests {
    use super::age;

    #[test]
    fn ages_read_as_kubectl_shows_them() {
        let table = [
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 12 * 60, "5h12m"),
            (47 * 3600, "47h"),
            (2 * 86_400 + 3 * 3600, "2d3h"),
            (12 * 86_400, "12d"),
        ];
        for (seconds, want) in table {
            assert_eq!(age(seconds), want, "{seconds}s");
        }
    }
}
