//! `nodejob controller` on the real control plane, as a process acting as a ServiceAccount
//! bound by `deploy/rbac.yaml` and `deploy/controller/rbac.yaml`, the CRDs of
//! `deploy/controller/` installed: a `NodeUpgrade` written rolls three nodes of the scenario's
//! own; the controller killed (SIGKILL) once a node is up to date, and started again, resumes
//! and ends with the resource Ready, each host upgraded once; `kubectl get nu` shows it
//! (the apiserver's Table, which kubectl prints); deleted, it goes once the controller removed
//! its finalizer. Run by `e2e/run`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use nodejob_conformance::{Failure, ensure};
use nodejob_e2e::{
    CONTEXT, KubeconfigFile, Kubelets, ThreeNodes, Workers, cli, controller_account, free_port,
    nodejob, one_driver, sa_kubeconfig, unique, upgrade_condition, wait_for, write_node_upgrade,
};
use serde_json::Value;
use tokio::process::{Child, Command};

nodejob_e2e::on_kubelets! {
    source: include_str!("controller.rs");
    both: a_node_upgrade_is_rolled_by_the_controller_killed_and_started_again_mid_roll;
    agent_only: ;
    no_nodes:
        the_controllers_deployment_is_taken_by_the_apiserver_as_written =>
            "a server-side dry run of manifests: no node is read";
}

/// The version the nodes are rolled to.
const TARGET: &str = "v1.96.0";
/// How long the roll may take, a controller restart (the Lease of the killed one waited out)
/// included.
const ROLL: Duration = Duration::from_secs(420);

const DEPLOYMENT: &str = include_str!("../../deploy/controller/deployment.yaml");

/// Each object of `deploy/controller/deployment.yaml` (the Deployment, its budget, the metrics
/// Service) applied server-side as a dry run with strict field validation: a field the
/// apiserver does not know, or a value it refuses, fails here rather than at a user's apply.
async fn the_controllers_deployment_is_taken_by_the_apiserver_as_written() -> Result<(), Failure> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::api::{Patch, PatchParams};
    let admin = nodejob_e2e::admin().await?;
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(DEPLOYMENT).map_err(|e| Failure(e.to_string()))?;
    let params = PatchParams::apply("nodejob-e2e")
        .dry_run()
        .validation_strict();
    let mut kinds = Vec::new();
    for doc in &docs {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let namespace = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or("kube-system");
        let patch = Patch::Apply(doc);
        let what = format!("{kind} {namespace}/{name} (server-side dry run, strict)");
        match kind.as_str() {
            "Deployment" => {
                let api = Api::<Deployment>::namespaced(admin.clone(), namespace);
                let taken = api
                    .patch(&name, &params, &patch)
                    .await
                    .map_err(fail(&what))?;
                let spec = taken.spec.unwrap_or_default();
                ensure!(spec.replicas == Some(2), "{what}: {spec:?}");
            }
            "PodDisruptionBudget" => {
                let api = Api::<PodDisruptionBudget>::namespaced(admin.clone(), namespace);
                api.patch(&name, &params, &patch)
                    .await
                    .map_err(fail(&what))?;
            }
            "Service" => {
                let api = Api::<Service>::namespaced(admin.clone(), namespace);
                api.patch(&name, &params, &patch)
                    .await
                    .map_err(fail(&what))?;
            }
            other => return Err(Failure(format!("deployment.yaml: unexpected kind {other}"))),
        }
        kinds.push(kind);
    }
    ensure!(
        kinds == ["Deployment", "PodDisruptionBudget", "Service"],
        "deployment.yaml holds {kinds:?}"
    );
    Ok(())
}

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

/// `nodejob controller` as a process, in context [`CONTEXT`] of `kubeconfig`, its metrics
/// and probes on free ports of 127.0.0.1 and its JSON log lines in `log`; killed if dropped.
struct Started {
    child: Child,
    metrics: String,
    probes: String,
}

fn start_controller(kubeconfig: &KubeconfigFile, log: &Path) -> Result<Started, Failure> {
    let metrics = format!("127.0.0.1:{}", free_port()?);
    let probes = format!("127.0.0.1:{}", free_port()?);
    let log = std::fs::File::create(log).map_err(|e| Failure(format!("{}: {e}", log.display())))?;
    let child = Command::new(cli()?)
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .arg("--kubeconfig")
        .arg(&kubeconfig.path)
        .args(["--context", CONTEXT, "controller", "--log-format", "json"])
        .args(["--metrics-bind-address", &metrics])
        .args(["--health-probe-bind-address", &probes])
        .stdin(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure(format!("starting nodejob controller: {e}")))?;
    Ok(Started {
        child,
        metrics: format!("http://{metrics}"),
        probes: format!("http://{probes}"),
    })
}

/// One sample of a scrape, as the Prometheus project's parser read it.
#[derive(Debug, serde::Deserialize)]
struct Sample {
    name: String,
    labels: std::collections::BTreeMap<String, String>,
    value: f64,
}

/// What `e2e/scrape.py` read from the controller's endpoints.
#[derive(Debug, serde::Deserialize)]
struct Scrape {
    healthz: u16,
    readyz: u16,
    content_type: String,
    openmetrics_content_type: String,
    prometheus: Vec<Sample>,
    openmetrics: Vec<Sample>,
}

impl Scrape {
    /// The value of `name` with exactly these `labels`, in the Prometheus text format.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: std::collections::BTreeMap<String, String> = (labels.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (self.prometheus.iter())
            .find(|s| s.name == name && s.labels == wanted)
            .map(|s| s.value)
    }
}

/// Scrapes `started`'s endpoints with `e2e/scrape.py` (the python `e2e/run` prepared, with the
/// Prometheus project's `prometheus_client`).
async fn scrape(started: &Started) -> Result<Scrape, Failure> {
    let python = std::env::var("NODEJOB_E2E_PYTHON").map_err(|_| {
        Failure(
            "NODEJOB_E2E_PYTHON is not set: run the suite with e2e/run, which prepares it".into(),
        )
    })?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../e2e/scrape.py");
    let out = Command::new(python)
        .args([script, &started.metrics, &started.probes])
        .output()
        .await
        .map_err(|e| Failure(format!("running {script}: {e}")))?;
    ensure!(
        out.status.success(),
        "{script} {}: {}",
        started.metrics,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).map_err(|e| {
        Failure(format!(
            "{script}: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        ))
    })
}

/// A directory of this test's own under the run's (`NODEJOB_E2E_RUN`), or the system's
/// temporary one: where the controllers' logs are kept (e2e/run keeps the run's directory
/// when a test fails).
fn tempfile_dir() -> Result<PathBuf, Failure> {
    let base = std::env::var_os("NODEJOB_E2E_RUN")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(unique("controller-logs"));
    std::fs::create_dir_all(&dir).map_err(|e| Failure(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

async fn a_node_upgrade_is_rolled_by_the_controller_killed_and_started_again_mid_roll(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let _one = one_driver().await;
    let trio = ThreeNodes::of(kubelets, Workers::InTwoZones).await?;
    let admin = trio.admin.clone();
    let sa = controller_account(&admin).await?;
    let kubeconfig = sa_kubeconfig(&admin, &sa).await?;

    let name = unique("nu");
    let rolls =
        write_node_upgrade(&admin, &name, TARGET, &trio.names, kubelets.version_from()).await?;

    let logs = tempfile_dir()?;
    let mut first = start_controller(&kubeconfig, &logs.join("first.log"))?;
    let one_done = wait_for(rolls.clone(), &name, "a node up to date", ROLL, |r| {
        (r.status.as_ref()).is_some_and(|s| s.counts.up_to_date >= 1)
    })
    .await?;
    eprintln!("controller: {:?} before the kill", one_done.status);
    first
        .child
        .kill()
        .await
        .map_err(|e| Failure(format!("killing the controller: {e}")))?;
    let second = start_controller(&kubeconfig, &logs.join("second.log"))?;
    // `kubectl wait --for=condition=Ready nu/NAME`.
    let ready = wait_for(rolls.clone(), &name, "Ready", ROLL, |r| {
        upgrade_condition(r, "Ready").is_some_and(|(s, _)| s == "True")
    })
    .await?;
    let status = ready.status.clone().unwrap_or_default();
    ensure!(
        upgrade_condition(&ready, "Ready") == Some(("True".into(), "Completed".into()))
            && status.counts.nodes == 3
            && status.counts.up_to_date == 3
            && status.observed_generation == ready.metadata.generation,
        "{status:#?}"
    );
    ensure!(
        (ready.metadata.finalizers.iter().flatten()).any(|f| f == nodejob_controller::FINALIZER),
        "{:?}",
        ready.metadata.finalizers
    );
    for node in &trio.names {
        let host = trio.host(node).await?;
        ensure!(
            host.executions("upgrade") == 1,
            "{node}: the host upgrade ran {} times: {host:?}",
            host.executions("upgrade")
        );
    }

    // Its endpoints, read by a parser that is not ours; its log, JSON lines.
    let scraped = scrape(&second).await?;
    ensure!(
        scraped.healthz == 200 && scraped.readyz == 200,
        "healthz {} readyz {}",
        scraped.healthz,
        scraped.readyz
    );
    ensure!(
        scraped
            .content_type
            .starts_with("text/plain; version=0.0.4")
            && scraped
                .openmetrics_content_type
                .starts_with("application/openmetrics-text")
            && !scraped.openmetrics.is_empty(),
        "{} / {}",
        scraped.content_type,
        scraped.openmetrics_content_type
    );
    // Some of the scrape, as the Prometheus project's parser read it, for the log.
    for s in (scraped.prometheus.iter()).filter(|s| {
        [
            "nodejob_operations_total",
            "nodejob_nodes",
            "nodejob_leader",
        ]
        .contains(&s.name.as_str())
            || (s.name == "nodejob_api_requests_total" && s.value > 0.0)
    }) {
        let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        eprintln!(
            "controller: /metrics {}{{{}}} {}",
            s.name,
            labels.join(","),
            s.value
        );
    }
    let upgrade = ("operation", "upgrade");
    for (name, labels, wanted) in [
        (
            "nodejob_operations_total",
            vec![upgrade, ("outcome", "completed")],
            1.0,
        ),
        ("nodejob_nodes", vec![upgrade, ("state", "up_to_date")], 3.0),
        ("nodejob_nodes", vec![upgrade, ("state", "failed")], 0.0),
        ("nodejob_leader", vec![], 1.0),
        ("nodejob_paused", vec![], 0.0),
    ] {
        let got = scraped.value(name, &labels);
        ensure!(
            got == Some(wanted),
            "{name}{labels:?}: {got:?}, not {wanted}: {scraped:#?}"
        );
    }
    let applied = scraped.value(
        "nodejob_api_requests_total",
        &[("verb", "apply_custom_status"), ("code", "2xx")],
    );
    ensure!(
        applied.is_some_and(|n| n >= 1.0),
        "status writes: {applied:?}"
    );
    for node in &trio.names {
        ensure!(
            !scraped
                .prometheus
                .iter()
                .any(|s| s.labels.values().any(|v| v == node)),
            "{node} is a label value: {scraped:#?}"
        );
    }
    let log = std::fs::read_to_string(logs.join("second.log"))
        .map_err(|e| Failure(format!("the second controller's log: {e}")))?;
    let lines: Vec<Value> = (log.lines())
        .map(|l| serde_json::from_str(l).map_err(|e| Failure(format!("not JSON: {l:?}: {e}"))))
        .collect::<Result<_, _>>()?;
    ensure!(
        lines.iter().any(|l| l["message"] == "leading")
            && lines.iter().any(|l| l["message"] == "run ended"
                && l["outcome"] == "completed"
                && l["kind"] == "NodeUpgrade"
                && l["name"] == name.as_str()),
        "the second controller's log:\n{log}"
    );

    // `nodejob status` as the controller's ServiceAccount lists it as `kubectl get nu` does.
    let shown = nodejob(&kubeconfig.path, CONTEXT, &["status"]).await?;
    shown.exited(0)?;
    let row = (shown.stdout.lines()).find(|l| l.starts_with(&name));
    ensure!(
        row.is_some_and(|r| {
            let cells: Vec<&str> = r.split_whitespace().collect();
            cells == [name.as_str(), TARGET, "True", "Completed", "3", "3", "0"]
        }),
        "nodejob status shows {row:?}:\n{}",
        shown.stdout
    );

    // Deleted, it stays until the controller removed its finalizer, then goes.
    let uid = ready.uid().unwrap_or_default();
    rolls
        .delete(&name, &DeleteParams::default())
        .await
        .map_err(fail(format!("deleting NodeUpgrade {name}")))?;
    let gone = kube::runtime::wait::await_condition(
        rolls.clone(),
        &name,
        kube::runtime::wait::conditions::is_deleted(&uid),
    );
    tokio::time::timeout(Duration::from_secs(60), gone)
        .await
        .map_err(|_| {
            Failure(format!(
                "NodeUpgrade {name} still there 60s after its delete"
            ))
        })?
        .map_err(|e| Failure(format!("watching {name} go: {e}")))?;
    trio.remove().await
}
