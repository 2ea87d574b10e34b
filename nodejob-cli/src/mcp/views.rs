//! What the read-only `status` and `jobs` tools answer, in the shapes `nodejob status -o json`
//! and `nodejob jobs -o json` print, gathered with the same core and driver functions.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::lease::{OPERATION_ANNOTATION, TARGET_ANNOTATION, holder};
use nodejob_core::{
    CONTROLLER_UID_LABEL, ErrorKind, JobApi, LeaseApi, NODE_ANNOTATION, NodeApi,
    container_exit_code, disruption, failed, is_pod_of_job, job_node, succeeded,
};
use nodejob_fake::FakeCluster;
use serde_json::{Value, json};
use upgrade_driver::records::{self, DONE, IN_PROGRESS};

use crate::output::table;
use crate::sim;

/// The label domain of node Jobs (the drivers', `nodejob run`'s and the Go implementation's).
const LABEL_DOMAIN: &str = "stratum.ciq.com/";

/// The Lease both drivers share: their plans' default.
pub(crate) fn lease_name() -> String {
    upgrade_driver::PlanSpec::new(String::new()).lease_name
}

/// `status`: the Lease (who holds it, for what, epoch, renewal) and every node's state from the
/// drivers' records.
pub(crate) async fn status<A>(api: &A, namespace: &str) -> Result<Value, String>
where
    A: NodeApi + LeaseApi + ?Sized,
{
    let name = lease_name();
    let lease = match api.get_lease(namespace, &name).await {
        Ok(lease) => Some(lease),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(format!("reading lease {namespace}/{name}: {e}")),
    };
    let now = api.wall_time();
    let nodes = api
        .list_nodes("")
        .await
        .map_err(|e| format!("listing nodes: {e}"))?;
    let lease = lease.map(|l| {
        let annotation = |k: &str| (l.metadata.annotations.as_ref()).and_then(|a| a.get(k));
        let held = holder(&l);
        let spec = l.spec.clone().unwrap_or_default();
        json!({
            "name": format!("{namespace}/{name}"),
            "holder": held.as_ref().map(|h| h.identity.clone()),
            "expired": held.as_ref().and_then(|h| h.expires).map(|t| t < now),
            "operation": annotation(OPERATION_ANNOTATION),
            "target": annotation(TARGET_ANNOTATION),
            "epoch": spec.lease_transitions.unwrap_or(0),
            "renewed": spec.renew_time.map(|t| t.0.to_string()),
            "expires": held.and_then(|h| h.expires).map(|t| t.to_string()),
        })
    });
    let nodes: Vec<Value> = nodes.iter().map(node).collect();
    Ok(json!({"lease": lease, "nodes": nodes}))
}

fn node(n: &Node) -> Value {
    let annotation = |k: &str| (n.metadata.annotations.as_ref()).and_then(|a| a.get(k));
    let name = records::name(n);
    let ca = match certs_driver::last_reported(n, name) {
        Ok(Some((status, at))) => json!({
            "phase": status.phase,
            "trusted": status.trusted,
            "issuer": status.issuer,
            "at": at,
        }),
        Ok(None) => Value::Null,
        Err(why) => json!({ "unreadable": why }),
    };
    json!({
        "node": name,
        "version": records::version(n, &upgrade_driver::VersionSource::KubeletVersion),
        "ready": nodejob_core::ready(n),
        "cordoned": records::unschedulable(n),
        "in_progress": annotation(IN_PROGRESS),
        "done": annotation(DONE),
        "ca": ca,
    })
}

/// What `status` adds under `--simulate`: the simulated cluster's API calls so far (every tool
/// call's), how many were writes (creates, deletes, patches, evictions (a preview's dry-run
/// ones included), Events, the Lease), and the store's resourceVersion, which any write moves.
pub(crate) fn simulated(fake: &FakeCluster, nodes: usize) -> Value {
    json!({
        "nodes": nodes,
        "api_calls": fake.calls().len(),
        "writes": sim::writes_since(fake, 0).len(),
        "resource_version": fake.resource_version(),
    })
}

/// `status` for people: the Lease, then a table of the nodes.
pub(crate) fn status_text(status: &Value) -> String {
    let lease = &status["lease"];
    let mut out = match lease["name"].as_str() {
        None => "lease: free (never taken)\n".to_string(),
        Some(name) => match lease["holder"].as_str() {
            Some(holder) => format!(
                "lease {name}: held by {holder} for {} {}, epoch {}, renewed {}\n",
                lease["operation"].as_str().unwrap_or("?"),
                lease["target"].as_str().unwrap_or(""),
                lease["epoch"],
                lease["renewed"].as_str().unwrap_or("?"),
            ),
            None => format!(
                "lease {name}: free (last: {} {}, epoch {})\n",
                lease["operation"].as_str().unwrap_or("?"),
                lease["target"].as_str().unwrap_or(""),
                lease["epoch"],
            ),
        },
    };
    let mut rows = vec![
        [
            "NODE",
            "VERSION",
            "READY",
            "CORDONED",
            "CA (LAST READ)",
            "UPGRADE",
        ]
        .map(String::from),
    ];
    let yes = |v: &Value| if v == &json!(true) { "yes" } else { "no" }.to_string();
    for n in status["nodes"].as_array().into_iter().flatten() {
        let upgrade = match (n["in_progress"].as_str(), n["done"].as_str()) {
            (Some(_), _) => "in progress".to_string(),
            (None, Some(_)) => "done".into(),
            (None, None) => "-".into(),
        };
        rows.push([
            n["node"].as_str().unwrap_or("?").to_string(),
            n["version"].as_str().unwrap_or("?").to_string(),
            yes(&n["ready"]),
            yes(&n["cordoned"]),
            n["ca"]["phase"].as_str().unwrap_or("-").to_string(),
            upgrade,
        ]);
    }
    out.push_str(&table(&rows));
    if let Some(sim) = status.get("simulated") {
        out.push_str(&format!(
            "simulated cluster: {} API calls so far, {} of them writes; resourceVersion {}\n",
            sim["api_calls"], sim["writes"], sim["resource_version"]
        ));
    }
    out
}

/// `jobs`: the node Jobs of `namespace` matching `selector`: node (annotation, else the
/// `stratum.ciq.com/` label), status, exit code (from the Pods, one `LIST`), age.
pub(crate) async fn jobs<A>(api: &A, namespace: &str, selector: &str) -> Result<Vec<Value>, String>
where
    A: JobApi + ?Sized,
{
    let jobs = api.list_jobs(namespace, selector).await.map_err(|e| {
        if e.kind == ErrorKind::BadRequest {
            format!("selector: {selector:?}: {e}")
        } else {
            format!("listing jobs in {namespace}: {e}")
        }
    })?;
    let jobs: Vec<(&Job, &str)> = (jobs.iter())
        .filter_map(|j| {
            let label = label_of(j);
            job_node(j, label.unwrap_or(NODE_ANNOTATION)).map(|node| (j, node))
        })
        .collect();
    let pods = if jobs.is_empty() {
        Vec::new()
    } else {
        api.list_pods(namespace, CONTROLLER_UID_LABEL)
            .await
            .map_err(|e| format!("listing the jobs' pods in {namespace}: {e}"))?
    };
    let now = api.wall_time();
    Ok(jobs
        .into_iter()
        .map(|(job, node)| {
            let meta = &job.metadata;
            let container = (job.spec.as_ref())
                .and_then(|s| s.template.spec.as_ref())
                .and_then(|p| p.containers.first())
                .map(|c| c.name.as_str());
            let ended = meta.uid.as_deref().and_then(|uid| {
                (pods.iter())
                    .filter(|p| is_pod_of_job(p, uid))
                    .filter_map(|p| Some((p, container_exit_code(p, container?)?)))
                    .max_by_key(|(p, _)| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
            });
            let status = if meta.deletion_timestamp.is_some() {
                "Deleting"
            } else if succeeded(job) {
                "Succeeded"
            } else if failed(job) {
                "Failed"
            } else {
                "Running"
            };
            let created = meta.creation_timestamp.as_ref().map(|t| t.0);
            json!({
                "name": meta.name,
                "namespace": meta.namespace,
                "node": node,
                "label": label_of(job),
                "status": status,
                "exit_code": ended.map(|(_, code)| code),
                "disrupted": ended.is_some_and(|(p, _)| disruption(p).is_some()),
                "uid": meta.uid,
                "created": created.map(|t| t.to_string()),
                "age_seconds": created.map(|t| now.duration_since(t).as_secs().max(0)),
            })
        })
        .collect())
}

/// The `stratum.ciq.com/` label key of a Job, if it has one.
fn label_of(job: &Job) -> Option<&str> {
    (job.metadata.labels.iter().flatten())
        .map(|(k, _)| k.as_str())
        .find(|k| k.starts_with(LABEL_DOMAIN))
}

/// `jobs` for people: a table.
pub(crate) fn jobs_text(jobs: &[Value], namespace: &str) -> String {
    if jobs.is_empty() {
        return format!("no node jobs in namespace {namespace}\n");
    }
    let mut rows = vec![["NAME", "NODE", "STATUS", "EXIT", "AGE (S)"].map(String::from)];
    for j in jobs {
        let text = |k: &str| j[k].as_str().unwrap_or("-").to_string();
        rows.push([
            text("name"),
            text("node"),
            text("status"),
            match (j["exit_code"].as_i64(), j["disrupted"] == json!(true)) {
                (Some(c), false) => c.to_string(),
                (Some(c), true) => format!("{c} (killed)"),
                (None, _) => "-".into(),
            },
            j["age_seconds"]
                .as_i64()
                .map_or_else(|| "?".into(), |s| s.to_string()),
        ]);
    }
    table(&rows)
}
