//! A roll of hundreds of hollow nodes on the real control plane (`e2e/bench hollow N`): the
//! node agent registered N nodes and keeps them alive at the kubelet's intervals (a Lease
//! renewed every 10 s, the status every 5 minutes or on a change); this rolls them with the
//! release `nodejob` binary at `max_unavailable` 10%, the same cluster as the fake's roll
//! ([`crate::roll`]: 3 control-plane nodes, the workers in 4 zones, a Deployment of a replica
//! per 10 workers behind a budget allowing a tenth of them down), and measures:
//!
//! - the wall time against its floor: the host's own times (`stratum upgrade`, the wait before
//!   the reboot, the reboot) once per batch, the batches being one after the other;
//! - where the time went along the critical path: per batch, the steps of its slowest node,
//!   and what passed between batches;
//! - the driver's requests and response bytes by kind, through a [`CountingProxy`];
//! - the apiserver's p99 request latency, from its own `apiserver_request_duration_seconds`
//!   histogram (scraped before and after, the difference's buckets interpolated as
//!   Prometheus' `histogram_quantile` does), every client's requests but the long-running ones
//!   (`WATCH`, `CONNECT`);
//! - the driver's peak memory (`VmHWM`, read every 50 ms while it runs) and the CPU each
//!   process of the machine's control plane spent during the roll;
//! - the same roll on the fake, in a child process (`nodejob-bench roll N 10%`), side by side.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use http::Request;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_e2e::{AGENT_LABEL, deployment_available, wait_for};
use nodejob_fake::labels;
use nodejob_fake::stratum::StratumTiming;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use crate::critical::{self, Span};
use crate::real::CountingProxy;
use crate::roll::Roll;

/// The version the roll goes to (the agent's nodes start at the apiserver's, v1.37.2).
const TARGET: &str = "v1.38.0";
/// The namespace of the workload.
const NAMESPACE: &str = "hollow-bench";
/// The Deployment and its budget.
const APP: &str = "web";
/// The label the agent gives the nodes it registers (`--node-labels role=worker`), the
/// workload's node selector.
pub const WORKER: (&str, &str) = ("role", "worker");
/// Control-plane nodes, as in the fake's roll: the first three by name.
const CONTROL_PLANE: usize = 3;
/// Workers per replica of the Deployment, as in the fake's roll.
const WORKERS_PER_REPLICA: usize = 10;
/// How often the driver's memory and CPU are read while it runs.
const SAMPLE: Duration = Duration::from_millis(50);

/// What one hollow-node roll measured, as written for the table (`hollow-table`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Hollow {
    /// Nodes rolled.
    pub nodes: usize,
    /// `max_unavailable`.
    pub max_unavailable: String,
    /// Batches of the roll.
    pub batches: usize,
    /// The host's own time per node: upgrade, the wait before the reboot, the reboot (s).
    pub host_secs: f64,
    /// From starting the command to its exit (s).
    pub wall_secs: f64,
    /// Along the critical path (s), by what: each batch's slowest node's steps, `between
    /// batches`.
    pub critical_secs: BTreeMap<String, f64>,
    /// The driver's requests by kind.
    pub requests: BTreeMap<String, usize>,
    /// The bytes of their responses by kind.
    pub bytes: BTreeMap<String, u64>,
    /// The apiserver's p99 latency (s) and request count during the roll: `all` (but the
    /// long-running verbs), then by verb.
    pub apiserver: BTreeMap<String, (f64, u64)>,
    /// Every client's requests to the apiserver during the roll (its histogram's count).
    pub apiserver_requests: u64,
    /// The driver's peak resident memory (KiB).
    pub driver_peak_kib: u64,
    /// CPU seconds during the roll, by process.
    pub cpu_secs: BTreeMap<String, f64>,
    /// Peak resident memory (KiB) by process of the machine's control plane, read after the
    /// roll (`VmHWM`: since each started).
    #[serde(default)]
    pub peak_kib: BTreeMap<String, u64>,
    /// Pods evicted.
    pub evicted: usize,
    /// `/proc/loadavg` before and after.
    pub load: (String, String),
    /// The command's last line of text: its totals.
    pub totals: String,
    /// The same roll on the fake ([`Roll::to_json`]).
    pub fake: Value,
}

impl Hollow {
    /// The floor: the host's time once per batch (s).
    pub fn floor_secs(&self) -> f64 {
        self.batches as f64 * self.host_secs
    }

    /// The fake's roll.
    ///
    /// # Errors
    /// When [`Hollow::fake`] is not a roll's JSON.
    pub fn fake_roll(&self) -> anyhow::Result<Roll> {
        Roll::from_json(&self.fake.to_string())
    }
}

/// Where the processes of the run are, to read their CPU time: the control plane's pid files
/// (`NODEJOB_E2E_RUN`), the agent's pid (`NODEJOB_BENCH_AGENT_PID`).
#[derive(Clone, Debug, Default)]
pub struct Processes {
    /// Name and pid.
    pub pids: Vec<(String, u32)>,
}

impl Processes {
    /// From the environment `e2e/bench` sets.
    pub fn from_env() -> Processes {
        let mut pids = Vec::new();
        if let Some(run) = std::env::var_os("NODEJOB_E2E_RUN") {
            for c in [
                "etcd",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
            ] {
                let file = Path::new(&run).join(format!("{c}.pid"));
                if let Some(pid) = std::fs::read_to_string(file)
                    .ok()
                    .and_then(|p| p.trim().parse().ok())
                {
                    pids.push((c.to_string(), pid));
                }
            }
        }
        if let Some(pid) = std::env::var("NODEJOB_BENCH_AGENT_PID")
            .ok()
            .and_then(|p| p.parse().ok())
        {
            pids.push(("nodejob-node-agent".to_string(), pid));
        }
        pids.push(("nodejob-bench (proxy)".to_string(), std::process::id()));
        Processes { pids }
    }

    fn peak_kib(&self) -> BTreeMap<String, u64> {
        (self.pids.iter())
            .filter_map(|(name, pid)| Some((name.clone(), vm_hwm_kib(*pid)?)))
            .collect()
    }

    fn cpu(&self) -> BTreeMap<String, f64> {
        (self.pids.iter())
            .filter_map(|(name, pid)| Some((name.clone(), cpu_secs(*pid)?)))
            .collect()
    }
}

/// Rolls the `nodes` hollow nodes of the cluster of `KUBECONFIG` with the `nodejob` binary
/// `cli`, and rolls the same on the fake (`bench` is this binary, `roll` its mode).
///
/// # Errors
/// When the nodes or the workload do not settle, or either roll fails.
pub async fn roll(nodes: usize, cli: &Path, bench: &Path) -> anyhow::Result<Hollow> {
    anyhow::ensure!(
        nodes > CONTROL_PLANE,
        "a roll needs more than {CONTROL_PLANE} nodes"
    );
    let mut config = kube::Config::infer()
        .await
        .context("loading the kubeconfig")?;
    config.default_retry = false;
    let admin = Client::try_from(config.clone())?;
    let names = ready_nodes(&admin, nodes, Duration::from_secs(600)).await?;
    eprintln!("hollow: {} nodes Ready", names.len());
    mark_control_plane(&admin, &names[..CONTROL_PLANE]).await?;
    let replicas = workload(&admin, nodes).await?;
    eprintln!("hollow: Deployment {APP} of {replicas} available behind its budget");

    let processes = Processes::from_env();
    let before = apiserver_histogram(&admin).await?;
    let load_before = loadavg();
    let cpu_before = processes.cpu();
    let proxy = CountingProxy::start(&config).await?;
    let kubeconfig = std::env::temp_dir().join(format!("hollow-{}-kubeconfig", std::process::id()));
    std::fs::write(
        &kubeconfig,
        serde_json::to_string(&json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "bench",
            "clusters": [{"name": "bench", "cluster": {"server": proxy.url()?.to_string()}}],
            "users": [{"name": "bench", "user": {}}],
            "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        }))?,
    )?;
    eprintln!("hollow: rolling {nodes} nodes to {TARGET} at max_unavailable 10%");
    let driven = drive(cli, &kubeconfig).await;
    let _ = std::fs::remove_file(&kubeconfig);
    let driven = driven?;
    let cpu_after = processes.cpu();
    let peak_kib = processes.peak_kib();
    let load_after = loadavg();
    let after = apiserver_histogram(&admin).await?;

    let mut cpu_secs: BTreeMap<String, f64> = cpu_after
        .iter()
        .map(|(k, v)| (k.clone(), v - cpu_before.get(k).copied().unwrap_or(0.0)))
        .collect();
    cpu_secs.insert("nodejob (driver)".to_string(), driven.cpu_secs);
    let (apiserver, apiserver_requests) = latencies(&before, &after);
    let report = &driven.report;
    let evicted = report["totals"]["pods_evicted"].as_u64().unwrap_or(0) as usize;
    let upgraded = report["totals"]["upgraded"].as_u64().unwrap_or(0) as usize;
    anyhow::ensure!(
        upgraded == nodes,
        "{upgraded} of {nodes} nodes upgraded: {}",
        driven.totals
    );
    let timing = StratumTiming::default();
    let host = timing.upgrade_time + timing.reboot_delay + timing.reboot_time;

    eprintln!("hollow: the same roll on the fake");
    let out = tokio::process::Command::new(bench)
        .args(["roll", &nodes.to_string(), "10%"])
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "the fake's roll: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fake: Value = serde_json::from_slice(&out.stdout).context("the fake's roll")?;

    Ok(Hollow {
        nodes,
        max_unavailable: "10%".to_string(),
        batches: driven.batches.len(),
        host_secs: host.as_secs_f64(),
        wall_secs: driven.wall.as_secs_f64(),
        critical_secs: critical_path(&driven),
        requests: proxy.counts(),
        bytes: proxy.bytes(),
        apiserver,
        apiserver_requests,
        driver_peak_kib: driven.peak_kib,
        cpu_secs,
        peak_kib,
        evicted,
        load: (load_before, load_after),
        totals: driven.totals,
        fake,
    })
}

/// Waits (at most `limit`) until `nodes` nodes labelled for the agent are Ready: their names,
/// sorted.
async fn ready_nodes(admin: &Client, nodes: usize, limit: Duration) -> anyhow::Result<Vec<String>> {
    let api = Api::<Node>::all(admin.clone());
    let params = ListParams::default().labels(&format!("{AGENT_LABEL}=true"));
    let started = Instant::now();
    loop {
        let listed = api
            .list(&params)
            .await
            .context("listing the agent's nodes")?;
        let mut ready: Vec<String> = (listed.items.iter())
            .filter(|n| is_ready(n))
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        if ready.len() >= nodes {
            ready.sort();
            ready.truncate(nodes);
            return Ok(ready);
        }
        anyhow::ensure!(
            started.elapsed() < limit,
            "{} of {nodes} nodes Ready after {limit:?} (is the agent running with --register {nodes}?)",
            ready.len()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn is_ready(node: &Node) -> bool {
    (node.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        && !(node.spec.as_ref())
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| t.key == "node.kubernetes.io/not-ready"))
}

/// Labels `names` control-plane as kubeadm does after their kubelets registered, and makes
/// them the fake's control-plane nodes: no worker label, no zone.
async fn mark_control_plane(admin: &Client, names: &[String]) -> anyhow::Result<()> {
    let api = Api::<Node>::all(admin.clone());
    let patch = json!({"metadata": {"labels": {
        labels::CONTROL_PLANE: "",
        WORKER.0: null,
        labels::ZONE: null,
    }}});
    for name in names {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("labelling node {name} control-plane"))?;
    }
    Ok(())
}

/// The fake roll's workload on `nodes` nodes: a Deployment of a replica per 10 workers behind
/// a budget allowing a tenth of them down, available. Its replicas.
async fn workload(admin: &Client, nodes: usize) -> anyhow::Result<i32> {
    let replicas = ((nodes - CONTROL_PLANE) / WORKERS_PER_REPLICA).max(1);
    let disruptions = i32::try_from((replicas / 10).max(1))?;
    let replicas = i32::try_from(replicas)?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .context("creating the namespace")?;
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    Api::namespaced(admin.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &deployment(NAMESPACE, APP, replicas, &label),
        )
        .await
        .context("creating the Deployment")?;
    Api::<PodDisruptionBudget>::namespaced(admin.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &budget(NAMESPACE, APP, APP, replicas - disruptions),
        )
        .await
        .context("creating the budget")?;
    let limit = Duration::from_secs(300);
    deployment_available(admin, NAMESPACE, APP, replicas, limit, "before the roll")
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.0))?;
    let budgets = Api::<PodDisruptionBudget>::namespaced(admin.clone(), NAMESPACE);
    wait_for(budgets, APP, "its disruptions allowed", limit, move |b| {
        b.status.as_ref().is_some_and(|s| {
            s.observed_generation >= b.metadata.generation && s.disruptions_allowed == disruptions
        })
    })
    .await
    .map_err(|e| anyhow::anyhow!("{}", e.0))?;
    Ok(replicas)
}

/// What the `nodejob` command did.
struct Driven {
    wall: Duration,
    /// The batches as the driver's events told them, timed as they arrived.
    batches: Vec<Span>,
    /// Its last event: the report (per node, its steps and their times).
    report: Value,
    totals: String,
    peak_kib: u64,
    cpu_secs: f64,
}

/// Runs `cli upgrade` on the agent's nodes through `kubeconfig`, its events read as they come.
async fn drive(cli: &Path, kubeconfig: &Path) -> anyhow::Result<Driven> {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(cli)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        // The agent's kubelets go to a release the apiserver (v1.37.2) is not at: past the
        // version skew policy, as asked. (The fake's apiserver reports its control plane's
        // oldest kubelet, so its roll, control plane first, passes the gate without.)
        .args([
            "upgrade",
            "--to",
            TARGET,
            "--allow-skew",
            "--max-unavailable",
            "10%",
        ])
        .args(["--selector", &format!("{AGENT_LABEL}=true"), "-o", "json"])
        .env_remove("KUBECONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("running {}", cli.display()))?;
    let pid = child.id().context("the driver's pid")?;
    let stdout = child.stdout.take().context("the driver's stdout")?;
    let mut stderr = child.stderr.take().context("the driver's stderr")?;
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        text
    });
    let (mut peak_kib, mut cpu) = (0, 0.0);
    let mut batches: Vec<Span> = Vec::new();
    let mut report = Value::Null;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut sample = tokio::time::interval(SAMPLE);
    loop {
        tokio::select! {
            line = lines.next_line() => {
                let Some(line) = line? else { break };
                let at = started.elapsed();
                let Ok(event) = serde_json::from_str::<Value>(&line) else { continue };
                match event["event"].as_str() {
                    Some("batch_started") => {
                        let nodes = (event["nodes"].as_array().into_iter().flatten())
                            .filter_map(|n| n.as_str().map(str::to_string))
                            .collect();
                        batches.push(Span::new(nodes, at));
                    }
                    Some("step_started") => {
                        Span::step_started(&mut batches, event["node"].as_str().unwrap_or_default(), at);
                    }
                    Some("node_finished") => {
                        Span::node_finished(&mut batches, event["node"].as_str().unwrap_or_default(), at);
                    }
                    Some("report") => report = event["report"].clone(),
                    _ => {}
                }
            }
            _ = sample.tick() => {
                // Monotonic: the last read before the exit holds all but its last 50 ms.
                if let Some(kib) = vm_hwm_kib(pid) {
                    peak_kib = peak_kib.max(kib);
                }
                if let Some(secs) = cpu_secs(pid) {
                    cpu = secs;
                }
            }
        }
    }
    let status = child.wait().await?;
    let wall = started.elapsed();
    let errors = errors.await.unwrap_or_default();
    anyhow::ensure!(
        status.success(),
        "nodejob upgrade exited {status}:\n{}",
        errors
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    anyhow::ensure!(
        !report.is_null(),
        "nodejob upgrade ended without its report"
    );
    let totals = report["totals"].to_string();
    Ok(Driven {
        wall,
        batches,
        report,
        totals,
        peak_kib,
        cpu_secs: cpu,
    })
}

/// The roll's wall time along its critical path ([`critical::path`]), from the driver's
/// events as they arrived and its report.
fn critical_path(driven: &Driven) -> BTreeMap<String, f64> {
    critical::path(
        &driven.batches,
        &critical::report_steps(&driven.report),
        driven.wall,
    )
}

/// `apiserver_request_duration_seconds` as `/metrics` says it now: cumulative bucket counts by
/// verb and upper bound.
type Histogram = BTreeMap<String, BTreeMap<Bound, u64>>;

/// A bucket's upper bound, ordered (`+Inf` last).
#[derive(Clone, Copy, Debug)]
struct Bound(f64);

impl PartialEq for Bound {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Bound {}

impl PartialOrd for Bound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

async fn apiserver_histogram(admin: &Client) -> anyhow::Result<Histogram> {
    let request = Request::get("/metrics").body(Vec::new())?;
    let text = admin
        .request_text(request)
        .await
        .context("reading the apiserver's /metrics")?;
    Ok(parse_histogram(&text))
}

/// The `apiserver_request_duration_seconds_bucket` lines of `text`, summed by verb and bound.
fn parse_histogram(text: &str) -> Histogram {
    let mut h: Histogram = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_duration_seconds_bucket{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |key: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=\"")))
                .and_then(|v| v.strip_suffix('"'))
        };
        let (Some(verb), Some(le)) = (label("verb"), label("le")) else {
            continue;
        };
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or(f64::INFINITY)
        };
        let Ok(count) = value.trim().parse::<f64>() else {
            continue;
        };
        *h.entry(verb.to_string())
            .or_default()
            .entry(Bound(bound))
            .or_default() += count as u64;
    }
    h
}

/// The verbs whose requests last as long as their client wants: left out of the latencies.
const LONG_RUNNING: [&str; 2] = ["WATCH", "CONNECT"];

/// The p99 latency and count of the requests between `before` and `after`: of every verb but
/// the long-running ones (`all`), then by verb; and every request's count.
fn latencies(before: &Histogram, after: &Histogram) -> (BTreeMap<String, (f64, u64)>, u64) {
    let mut out = BTreeMap::new();
    let mut all: BTreeMap<Bound, u64> = BTreeMap::new();
    let mut total = 0;
    for (verb, buckets) in after {
        let delta: BTreeMap<Bound, u64> = (buckets.iter())
            .map(|(le, n)| {
                let was = before
                    .get(verb)
                    .and_then(|b| b.get(le))
                    .copied()
                    .unwrap_or(0);
                (*le, n.saturating_sub(was))
            })
            .collect();
        let count = delta.get(&Bound(f64::INFINITY)).copied().unwrap_or(0);
        total += count;
        if count == 0 || LONG_RUNNING.contains(&verb.as_str()) {
            continue;
        }
        for (le, n) in &delta {
            *all.entry(*le).or_default() += n;
        }
        out.insert(verb.clone(), (quantile(0.99, &delta), count));
    }
    let count = all.get(&Bound(f64::INFINITY)).copied().unwrap_or(0);
    out.insert("all".to_string(), (quantile(0.99, &all), count));
    (out, total)
}

/// Prometheus' `histogram_quantile(q, …)` over cumulative `buckets`: linear within the bucket
/// the rank falls in; the highest finite bound if it falls in `+Inf`'s.
fn quantile(q: f64, buckets: &BTreeMap<Bound, u64>) -> f64 {
    let total = buckets.get(&Bound(f64::INFINITY)).copied().unwrap_or(0);
    if total == 0 {
        return f64::NAN;
    }
    let rank = q * total as f64;
    let (mut lower, mut below) = (0.0, 0u64);
    for (Bound(le), n) in buckets {
        if *n as f64 >= rank {
            if le.is_infinite() {
                return lower;
            }
            let within = (*n - below) as f64;
            return lower + (le - lower) * (rank - below as f64) / within.max(1.0);
        }
        (lower, below) = (*le, *n);
    }
    lower
}

/// `VmHWM` of process `pid`, in KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The CPU time process `pid` has used (user and system), in seconds: `/proc/PID/stat`'s
/// `utime` and `stime`, in the kernel's `USER_HZ` of 100 ticks a second.
fn cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // utime and stime are the 14th and 15th fields; the 3rd is the first after the command.
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// `/proc/loadavg`'s three averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The HTTP verb of a kind (`GET nodes/NAME` -> `GET`).
fn verb_of(kind: &str) -> &str {
    kind.split(' ').next().unwrap_or(kind)
}

/// The request a verb of the fake's makes on a real apiserver through `nodejob-kube`.
pub fn http_kind(method: &str) -> &'static str {
    match method {
        "create_job" => "POST jobs",
        "get_job" => "GET jobs/NAME",
        "list_jobs" => "LIST jobs",
        "delete_job" => "DELETE jobs/NAME",
        "list_pods" | "list_node_pods" => "LIST pods",
        "pod_log" => "GET pods/NAME/log",
        "list_events" => "LIST events",
        "create_event" => "POST events",
        "wait_job" => "WATCH jobs",
        "get_node" => "GET nodes/NAME",
        "list_nodes" | "list_nodes_at" => "LIST nodes",
        "wait_nodes" | "wait_node" => "WATCH nodes",
        "patch_node" => "PATCH nodes/NAME",
        "patch_node_conditions" => "PATCH nodes/NAME/status",
        "get_pod" => "GET pods/NAME",
        "wait_pod" => "WATCH pods",
        "evict_pod" => "POST pods/NAME/eviction",
        "get_lease" => "GET leases/NAME",
        "create_lease" => "POST leases",
        "replace_lease" => "PUT leases/NAME",
        "version" => "GET /version",
        // The declarative rolls' kinds, whichever (a roll of the command reads none).
        "get_custom" => "GET rolls/NAME",
        "list_custom_at" => "LIST rolls",
        "wait_custom" => "WATCH rolls",
        "create_custom" => "POST rolls",
        "replace_custom" => "PUT rolls/NAME",
        "apply_custom_status" => "PATCH rolls/NAME/status",
        "delete_custom" => "DELETE rolls/NAME",
        _ => "?",
    }
}

/// Per node, by HTTP verb: the real requests, the fake's calls (mapped by [`http_kind`]), the
/// real bytes and the fake's (KB).
pub fn by_verb(h: &Hollow, fake: &Roll) -> BTreeMap<String, [f64; 4]> {
    let n = h.nodes as f64;
    let mut out: BTreeMap<String, [f64; 4]> = BTreeMap::new();
    for (kind, count) in &h.requests {
        out.entry(verb_of(kind).to_string()).or_default()[0] += *count as f64 / n;
    }
    for (kind, bytes) in &h.bytes {
        out.entry(verb_of(kind).to_string()).or_default()[2] += *bytes as f64 / n / 1e3;
    }
    for (method, count) in &fake.calls {
        out.entry(verb_of(http_kind(method)).to_string())
            .or_default()[1] += *count as f64 / n;
    }
    for (method, bytes) in &fake.bytes {
        out.entry(verb_of(http_kind(method)).to_string())
            .or_default()[3] += *bytes as f64 / n / 1e3;
    }
    out
}

/// Per node, by kind of request: the real requests and the fake's calls mapped to it.
pub fn by_kind(h: &Hollow, fake: &Roll) -> BTreeMap<String, [f64; 2]> {
    let n = h.nodes as f64;
    let mut out: BTreeMap<String, [f64; 2]> = BTreeMap::new();
    for (kind, count) in &h.requests {
        out.entry(kind.clone()).or_default()[0] += *count as f64 / n;
    }
    for (method, count) in &fake.calls {
        out.entry(http_kind(method).to_string()).or_default()[1] += *count as f64 / n;
    }
    out
}

/// Prints one roll's block: its row, then the detail.
pub fn print(h: &Hollow) -> anyhow::Result<()> {
    let fake = h.fake_roll()?;
    let n = h.nodes as f64;
    let requests: usize = h.requests.values().sum();
    let bytes: u64 = h.bytes.values().sum();
    println!(
        "hollow nodes: {} nodes, max_unavailable {}, {} batches; load before {}, after {}",
        h.nodes, h.max_unavailable, h.batches, h.load.0, h.load.1
    );
    println!(
        "  wall {:.0} s, floor {:.0} s ({} batches x {:.0} s of host time), wall/floor {:.2}; fake: {:.0} s virtual",
        h.wall_secs,
        h.floor_secs(),
        h.batches,
        h.host_secs,
        h.wall_secs / h.floor_secs(),
        fake.virtual_time.as_secs_f64()
    );
    println!(
        "  the driver: {requests} requests, {:.1} per node, {:.1} KB per node; peak RSS {} MB; {:.1} s CPU",
        requests as f64 / n,
        bytes as f64 / n / 1e3,
        h.driver_peak_kib / 1024,
        h.cpu_secs.get("nodejob (driver)").copied().unwrap_or(0.0)
    );
    println!(
        "  the fake's roll: {:.1} calls per node, {:.1} KB per node; peak RSS {} MB (fake and driver in one process)",
        fake.total_calls() as f64 / n,
        fake.total_bytes() as f64 / n / 1e3,
        fake.peak_rss_kib / 1024
    );
    println!("  per node, by verb        real req   fake calls    real KB    fake KB");
    for (verb, [r, f, rb, fb]) in by_verb(h, &fake) {
        println!("    {verb:<20} {r:>10.2} {f:>12.2} {rb:>10.1} {fb:>10.1}");
    }
    println!("  per node, by kind        real req   fake calls");
    for (kind, [r, f]) in by_kind(h, &fake) {
        println!("    {kind:<26} {r:>6.2} {f:>12.2}");
    }
    println!(
        "  apiserver ({} requests from every client during the roll): p99 latency, count",
        h.apiserver_requests
    );
    for (verb, (p99, count)) in &h.apiserver {
        println!("    {verb:<10} {:>9.1} ms {count:>9}", p99 * 1e3);
    }
    println!(
        "  along the critical path (s)           real     fake ({} batches, virtual)",
        fake.batches
    );
    let whats: std::collections::BTreeSet<&String> = h
        .critical_secs
        .keys()
        .chain(fake.critical_secs.keys())
        .collect();
    for what in whats {
        let secs = |m: &BTreeMap<String, f64>| m.get(what).copied().unwrap_or(0.0);
        println!(
            "    {what:<32} {:>8.1} {:>8.1}",
            secs(&h.critical_secs),
            secs(&fake.critical_secs)
        );
    }
    let total_cpu: f64 = h.cpu_secs.values().sum();
    println!(
        "  CPU during the roll: {total_cpu:.0} s in all, {:.2} cores on average",
        total_cpu / h.wall_secs
    );
    for (who, secs) in &h.cpu_secs {
        let peak =
            (h.peak_kib.get(who)).map_or(String::new(), |k| format!(", peak RSS {} MB", k / 1024));
        println!("    {who:<28} {secs:>8.1} s{peak}");
    }
    println!("  its totals: {}", h.totals);
    Ok(())
}

/// The table of several rolls (`hollow-table`): one row each.
pub fn print_table(rolls: &[Hollow]) -> anyhow::Result<()> {
    println!(
        "  {:>5} {:>7} {:>8} {:>8} {:>6} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>14}",
        "nodes",
        "batches",
        "wall",
        "floor",
        "ratio",
        "req/node",
        "fake",
        "KB/node",
        "fake",
        "api p99",
        "driver",
        "load 1m"
    );
    for h in rolls {
        let fake = h.fake_roll()?;
        let n = h.nodes as f64;
        let requests: usize = h.requests.values().sum();
        let bytes: u64 = h.bytes.values().sum();
        println!(
            "  {:>5} {:>7} {:>6.0} s {:>6.0} s {:>6.2} {:>9.1} {:>9.1} {:>8.1} {:>8.1} {:>6.0} ms {:>6} MB {:>14}",
            h.nodes,
            h.batches,
            h.wall_secs,
            h.floor_secs(),
            h.wall_secs / h.floor_secs(),
            requests as f64 / n,
            fake.total_calls() as f64 / n,
            bytes as f64 / n / 1e3,
            fake.total_bytes() as f64 / n / 1e3,
            h.apiserver.get("all").map_or(f64::NAN, |(p, _)| p * 1e3),
            h.driver_peak_kib / 1024,
            format!("{} -> {}", first(&h.load.0), first(&h.load.1)),
        );
    }
    Ok(())
}

fn first(load: &str) -> &str {
    load.split(' ').next().unwrap_or(load)
}

/// Where `hollow N --json FILE` appends its line.
pub fn append(file: &PathBuf, h: &Hollow) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .with_context(|| format!("opening {}", file.display()))?;
    writeln!(f, "{}", serde_json::to_string(h)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_the_bucket_as_prometheus_does() {
        let b = |pairs: &[(f64, u64)]| -> BTreeMap<Bound, u64> {
            pairs.iter().map(|(le, n)| (Bound(*le), *n)).collect()
        };
        // 100 requests: 90 under 5 ms, 9 more under 25 ms, the last under 50 ms.
        let h = b(&[(0.005, 90), (0.025, 99), (0.05, 100), (f64::INFINITY, 100)]);
        // Rank 99 is the top of the second bucket.
        assert!((quantile(0.99, &h) - 0.025).abs() < 1e-12);
        // Rank 50 falls in the first: 5 ms * 50/90.
        assert!((quantile(0.5, &h) - 0.005 * 50.0 / 90.0).abs() < 1e-12);
        // In +Inf's bucket: the highest finite bound.
        let h = b(&[(0.005, 1), (60.0, 1), (f64::INFINITY, 100)]);
        assert_eq!(quantile(0.99, &h), 60.0);
        assert!(quantile(0.99, &b(&[(f64::INFINITY, 0)])).is_nan());
    }

    #[test]
    fn the_histogram_is_read_by_verb_and_its_difference_taken() {
        let text = |get: u64, watch: u64| {
            format!(
                "# HELP apiserver_request_duration_seconds x\n\
                 apiserver_request_duration_seconds_bucket{{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"nodes\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\",le=\"0.005\"}} {get}\n\
                 apiserver_request_duration_seconds_bucket{{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"nodes\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\",le=\"+Inf\"}} {get}\n\
                 apiserver_request_duration_seconds_bucket{{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\",le=\"0.005\"}} 1\n\
                 apiserver_request_duration_seconds_bucket{{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\",le=\"+Inf\"}} 2\n\
                 apiserver_request_duration_seconds_bucket{{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"cluster\",subresource=\"\",verb=\"WATCH\",version=\"v1\",le=\"+Inf\"}} {watch}\n\
                 apiserver_request_duration_seconds_sum{{verb=\"GET\"}} 3\n"
            )
        };
        let before = parse_histogram(&text(10, 1));
        assert_eq!(before["GET"][&Bound(0.005)], 11);
        assert_eq!(before["GET"][&Bound(f64::INFINITY)], 12);
        let after = parse_histogram(&text(30, 4));
        let (by_verb, total) = latencies(&before, &after);
        // 20 GETs under 5 ms and 3 watches: every request counted, the watches in no latency.
        assert_eq!(total, 23);
        assert_eq!(by_verb["GET"].1, 20);
        assert_eq!(by_verb["all"].1, 20);
        assert!(!by_verb.contains_key("WATCH"));
        assert!(by_verb["all"].0 <= 0.005);
    }

    #[test]
    fn every_verb_of_the_fake_maps_to_a_request() {
        for verb in nodejob_core::Verb::ALL {
            assert_ne!(http_kind(verb.method()), "?", "{verb:?}");
        }
    }
}
