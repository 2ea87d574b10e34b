//! The same figures on a real control plane (`e2e/bench` starts one and the node agent): the
//! completion latency and the requests per run of `run_exit_code_logs` through `nodejob-kube`,
//! with kube's own connector (Nagle's algorithm on) and with `TCP_NODELAY` (what
//! [`KubeApi::from_config`] builds), and what one `KubeApi` holds open once its runs are over.
//!
//! - Latency: from the first watcher to see the Job finished (a second client watching it, or
//!   the run's own wait) to the call returning.
//! - Requests: counted on the apiserver's side of the client, by a proxy in front of the
//!   apiserver that the runs of that phase go through ([`CountingProxy`]).
//! - Held open: this process's TCP connections to the apiserver (`/proc/net/tcp*`), and the
//!   apiserver's own count of its WATCH requests on Jobs (`apiserver_longrunning_requests` in
//!   `/metrics`) beside the count before the runs.
//! - The Pod's answer: a third watcher, on the run's Pod, notes when its container is first
//!   seen terminated, which the kubelet writes before the Job controller marks the Job: how
//!   much sooner a runner answering from the Pod would return ([`Latency::pod_lead`]).
//! - A rolling upgrade: the `nodejob` command rolls three nodes of their own (the end-to-end
//!   suite's [`ThreeNodes`]: one control-plane, two zones, quick hosts) under a budget, through
//!   the counting proxy ([`Cluster::roll`]).
//! - Priority levels: the proxy also counts the roll's requests by the API Priority and
//!   Fairness priority level the apiserver put each in (its `X-Kubernetes-PF-PriorityLevel-UID`
//!   response header, set by the APF filter, `k8s.io/apiserver/pkg/server/filters/
//!   priority-and-fairness.go`), named by a list of the `flowcontrol.apiserver.k8s.io/v1`
//!   PriorityLevelConfigurations when the bench may read them, else by UID
//!   ([`Roll::levels`]). The proxy reaches the apiserver with the kubeconfig's identity (the
//!   cluster admin under `e2e/bench`, whose requests APF puts in `exempt`): the levels are
//!   those of that identity, not of the ServiceAccount `deploy/rbac.yaml` grants.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt as _;
use http::{Request, Response, Uri};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use kube::client::ConfigExt;
use nodejob_core::{Change, JobApi, finished};
use nodejob_e2e::{AGENT_LABEL, ThreeNodes, Workers};
use nodejob_fake::host;
use nodejob_kube::KubeApi;
use serde_json::json;

use crate::probe::Probe;
use crate::scenario::{Call, Waiter, spec};

/// The Deployment (and budget) the roll drains.
const APP: &str = "web";
/// Its replicas: one per node of the roll, the budget allowing one down.
const REPLICAS: i32 = 3;
/// The version the roll goes to (the node agent's nodes start at another).
const TARGET: &str = "v1.97.0";

/// One run's latency, and how much sooner its Pod said the same.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    /// From the first watcher to see the Job finished to the call returning.
    pub returned: Duration,
    /// From the Pod's container first seen terminated to the Job first seen finished: what
    /// answering from the Pod would save (zero if the Pod was not seen first).
    pub pod_lead: Option<Duration>,
}

/// What the 3-node `nodejob upgrade` cost.
#[derive(Debug)]
pub struct Roll {
    /// The nodes rolled.
    pub nodes: usize,
    /// From starting the command to its exit.
    pub wall: Duration,
    /// Its requests, by kind, counted by the proxy.
    pub counts: BTreeMap<String, usize>,
    /// Its requests by API Priority and Fairness priority level: the level's name, its UID
    /// when it cannot be named, `(no priority level)` for answers without the header.
    pub levels: BTreeMap<String, usize>,
    /// The command's last line (its totals).
    pub totals: String,
}

/// How a run's client reaches the apiserver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connector {
    /// kube's default client: its connector leaves Nagle's algorithm on.
    Kube,
    /// [`KubeApi::from_config`]: `TCP_NODELAY` on.
    NoDelay,
}

impl std::fmt::Display for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Connector::Kube => "kube's connector (Nagle on)",
            Connector::NoDelay => "TCP_NODELAY (KubeApi::from_config)",
        })
    }
}

/// A namespace and a Node (played by the node agent) for the runs, removed by
/// [`Cluster::tear_down`].
pub struct Cluster {
    config: kube::Config,
    admin: Client,
    /// The namespace of the runs.
    pub namespace: String,
    /// The node of the runs.
    pub node: String,
}

impl Cluster {
    /// Connects with the kubeconfig (`KUBECONFIG`), makes a privileged namespace and a Node,
    /// and waits until the node agent has made it Ready.
    ///
    /// # Errors
    /// When the cluster cannot be reached or the agent does not adopt the node.
    pub async fn set_up() -> anyhow::Result<Cluster> {
        let mut config = kube::Config::infer()
            .await
            .context("loading the kubeconfig")?;
        config.default_retry = false;
        let admin = Client::try_from(config.clone())?;
        let id = format!("bench-{}", std::process::id());
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": id, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}
        }))?;
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &ns)
            .await
            .context("creating the namespace")?;
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": id, "labels": {AGENT_LABEL: "true"}}
        }))?;
        Api::<Node>::all(admin.clone())
            .create(&PostParams::default(), &node)
            .await
            .context("creating the node")?;
        let api = KubeApi::from_config(config.clone())?;
        nodejob_core::wait_ready(&api, &id, 12)
            .await
            .context("waiting for the node agent to adopt the node (is it running?)")?;
        Ok(Cluster {
            config,
            admin,
            namespace: id.clone(),
            node: id,
        })
    }

    /// A client for the runs, connecting as `connector` says.
    ///
    /// # Errors
    /// When no client can be built from the kubeconfig.
    pub fn client(&self, connector: Connector) -> anyhow::Result<KubeApi> {
        Ok(match connector {
            Connector::Kube => KubeApi::new(Client::try_from(self.config.clone())?),
            Connector::NoDelay => KubeApi::from_config(self.config.clone())?,
        })
    }

    /// `runs` runs of `run_exit_code_logs` through `api`, one after the other, each with a
    /// host operation that exits at once: their latencies.
    ///
    /// # Errors
    /// The first run that failed or was not seen finished.
    pub async fn latencies(&self, api: &KubeApi, runs: usize) -> anyhow::Result<Vec<Latency>> {
        let observer = self.client(Connector::NoDelay)?;
        let mut out = Vec::with_capacity(runs);
        for _ in 0..runs {
            out.push(self.one(api, &observer).await?);
        }
        Ok(out)
    }

    async fn one(&self, api: &KubeApi, observer: &KubeApi) -> anyhow::Result<Latency> {
        let name = unique_name();
        let argv = vec![
            "nsenter".into(),
            "-t".into(),
            "1".into(),
            "--".into(),
            "/usr/local/bin/bench-op".into(),
            host::run(Duration::ZERO),
            host::log("done"),
            host::exit(0),
        ];
        let mut spec = spec(&name, &self.node, argv, Duration::from_secs(120));
        spec.namespace.clone_from(&self.namespace);
        let probe = Probe::new(api);
        let ns = self.namespace.clone();
        let watched = name.clone();
        // The observer watches from "now": before the Job exists, so it sees every change.
        let observer_task = async {
            let mut since: Option<String> = None;
            loop {
                let timeout = Duration::from_secs(120);
                match observer
                    .wait_job(&ns, &watched, since.as_deref(), timeout)
                    .await
                {
                    Ok(Change::Applied(job)) if finished(&job) => return Some(Instant::now()),
                    Ok(Change::Applied(job) | Change::Deleted(job)) => {
                        since = job.metadata.resource_version;
                    }
                    Ok(Change::TimedOut) | Err(_) => return None,
                }
            }
        };
        let run = async {
            // Let the observer's first wait (a LIST by name) answer before the Job exists.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let result = Waiter::Watch.run(&probe, &spec, Call::ExitCodeLogs).await;
            (result, Instant::now())
        };
        let pod_task = self.pod_terminated(&name);
        let (seen_by_observer, (result, returned), pod_seen) =
            tokio::join!(observer_task, run, pod_task);
        result.with_context(|| format!("run {name}"))?;
        let seen_by_run = probe.finished_at();
        let first = [seen_by_observer, seen_by_run]
            .into_iter()
            .flatten()
            .min()
            .with_context(|| format!("{name}: no one saw it finish"))?;
        Ok(Latency {
            returned: returned.saturating_duration_since(first),
            pod_lead: pod_seen.map(|p| first.saturating_duration_since(p)),
        })
    }

    /// When Job `job`'s Pod was first seen with a container terminated, on a watch of the
    /// Pods with the Job controller's `batch.kubernetes.io/job-name` label, opened before the
    /// Job exists; `None` if not within two minutes.
    async fn pod_terminated(&self, job: &str) -> Option<Instant> {
        let pods = Api::<Pod>::namespaced(self.admin.clone(), &self.namespace);
        let params = WatchParams::default()
            .labels(&format!("batch.kubernetes.io/job-name={job}"))
            .timeout(120);
        let terminated = |pod: &Pod| {
            (pod.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
                })
        };
        let mut stream = pods.watch(&params, "0").await.ok()?.boxed();
        while let Some(Ok(event)) = stream.next().await {
            if let WatchEvent::Added(pod) | WatchEvent::Modified(pod) = event
                && terminated(&pod)
            {
                return Some(Instant::now());
            }
        }
        None
    }

    /// `runs` runs through a [`CountingProxy`] with `TCP_NODELAY`: the requests of each run, by
    /// kind, and their total per run.
    ///
    /// # Errors
    /// When the proxy cannot start or a run fails.
    pub async fn requests(&self, runs: usize) -> anyhow::Result<BTreeMap<String, usize>> {
        let proxy = CountingProxy::start(&self.config).await?;
        let mut config = kube::Config::new(proxy.url()?);
        config.default_namespace.clone_from(&self.namespace);
        config.default_retry = false;
        let api = KubeApi::from_config(config)?;
        let observer = self.client(Connector::NoDelay)?;
        for _ in 0..runs {
            self.one(&api, &observer).await?;
        }
        Ok(proxy.counts())
    }

    /// This process's established TCP connections to the apiserver.
    ///
    /// # Errors
    /// When `/proc` cannot be read.
    pub fn connections(&self) -> anyhow::Result<usize> {
        let port = self.config.cluster_url.port_u16().unwrap_or(443);
        established_to(port)
    }

    /// The apiserver's WATCH requests on Jobs in flight (every client's).
    ///
    /// # Errors
    /// When `/metrics` cannot be read.
    pub async fn job_watchers(&self) -> anyhow::Result<u64> {
        let request = Request::get("/metrics").body(Vec::new())?;
        let text = self.admin.request_text(request).await?;
        Ok(text
            .lines()
            .filter(|l| l.starts_with("apiserver_longrunning_requests{"))
            .filter(|l| l.contains("resource=\"jobs\"") && l.contains("verb=\"WATCH\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64)
    }

    /// Deletes the namespace and the Node.
    ///
    /// # Errors
    /// When either cannot be deleted.
    pub async fn tear_down(self) -> anyhow::Result<()> {
        let dp = DeleteParams::default();
        Api::<Namespace>::all(self.admin.clone())
            .delete(&self.namespace, &dp)
            .await?;
        Api::<Node>::all(self.admin.clone())
            .delete(&self.node, &dp)
            .await?;
        Ok(())
    }

    /// Rolls three nodes of their own (the end-to-end suite's [`ThreeNodes`]: one
    /// control-plane, two zones, quick `stratum` hosts), running a Deployment behind a budget
    /// that allows one disruption, to `v1.97.0` with the `nodejob` binary `cli`, through a
    /// [`CountingProxy`]: the command's wall time and requests. The nodes and their namespace
    /// are deleted after, whatever the outcome.
    ///
    /// # Errors
    /// When the nodes or the workload do not settle, or the command does not exit 0.
    pub async fn roll(&self, cli: &Path) -> anyhow::Result<Roll> {
        let trio = ThreeNodes::on(self.config.clone(), Workers::InTwoZones).await?;
        let rolled = self.roll_on(&trio, cli).await;
        let removed = trio.remove().await;
        let roll = rolled?;
        removed?;
        Ok(roll)
    }

    async fn roll_on(&self, trio: &ThreeNodes, cli: &Path) -> anyhow::Result<Roll> {
        let settle = Duration::from_secs(120);
        trio.deployment_behind_budget(APP, REPLICAS, settle).await?;
        let names = &trio.names;

        let proxy = CountingProxy::start(&self.config).await?;
        let kubeconfig = std::env::temp_dir().join(format!("{}-kubeconfig", self.node));
        std::fs::write(
            &kubeconfig,
            serde_json::to_string(&json!({
                "apiVersion": "v1", "kind": "Config", "current-context": "bench",
                "clusters": [{"name": "bench", "cluster": {"server": proxy.url()?.to_string()}}],
                "users": [{"name": "bench", "user": {}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
            }))?,
        )?;
        let started = Instant::now();
        let output = tokio::process::Command::new(cli)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            // The agent's kubelets go to a release the apiserver is not at: past the version
            // skew policy, as asked.
            .args([
                "upgrade",
                "--to",
                TARGET,
                "--allow-skew",
                "--nodes",
                &names.join(","),
            ])
            .args([
                "--drain-timeout",
                "60s",
                "--reboot-timeout",
                "60s",
                "--deadline",
                "2m",
            ])
            .env_remove("KUBECONFIG")
            .kill_on_drop(true)
            .output()
            .await
            .with_context(|| format!("running {}", cli.display()))?;
        let wall = started.elapsed();
        let _ = std::fs::remove_file(&kubeconfig);
        let stdout = String::from_utf8_lossy(&output.stdout);
        anyhow::ensure!(
            output.status.success(),
            "nodejob upgrade exited {}:\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let named = self.priority_level_names().await;
        let mut levels = BTreeMap::new();
        for (uid, n) in proxy.priority_levels() {
            let level = match uid {
                None => "(no priority level)".to_string(),
                Some(uid) => named.get(&uid).cloned().unwrap_or(uid),
            };
            *levels.entry(level).or_insert(0) += n;
        }
        Ok(Roll {
            nodes: names.len(),
            wall,
            counts: proxy.counts(),
            levels,
            totals: stdout.lines().last().unwrap_or_default().to_string(),
        })
    }

    /// The names of the priority levels by UID: one `LIST
    /// /apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations`. Empty when that is
    /// refused (RBAC) or fails: the levels are then shown by UID.
    async fn priority_level_names(&self) -> BTreeMap<String, String> {
        let listed = async {
            let request =
                Request::get("/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations")
                    .body(Vec::new())?;
            let text = self.admin.request_text(request).await?;
            anyhow::Ok(serde_json::from_str::<serde_json::Value>(&text)?)
        };
        let list = match listed.await {
            Ok(list) => list,
            Err(e) => {
                eprintln!("priority levels shown by UID: listing them failed: {e:#}");
                return BTreeMap::new();
            }
        };
        let items = list["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .filter_map(|item| {
                let meta = &item["metadata"];
                Some((
                    meta["uid"].as_str()?.to_string(),
                    meta["name"].as_str()?.to_string(),
                ))
            })
            .collect()
    }
}

/// `b-<nanos>`: a Job name no earlier run used.
fn unique_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("b-{nanos:x}")
}

/// Established TCP connections of this process whose remote port is `port`.
fn established_to(port: u16) -> anyhow::Result<usize> {
    let mut ours = BTreeSet::new();
    for fd in std::fs::read_dir("/proc/self/fd")? {
        let target = std::fs::read_link(fd?.path()).unwrap_or_default();
        let target = target.to_string_lossy();
        if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
        {
            ours.insert(inode.to_string());
        }
    }
    let mut count = 0;
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(remote), Some(state), Some(inode)) =
                (fields.get(2), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let remote_port = remote
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // 01: ESTABLISHED.
            if remote_port == Some(port) && *state == "01" && ours.contains(*inode) {
                count += 1;
            }
        }
    }
    Ok(count)
}

/// A plain-HTTP proxy on loopback in front of the apiserver that counts the requests sent
/// through it, by kind (`GET jobs/NAME`, `WATCH jobs`, `GET pods/log`, ...), and the bytes of
/// their response bodies as they pass (a watch's as its events stream). It reaches the
/// apiserver with the kubeconfig's TLS identity; its clients send no credentials.
pub struct CountingProxy {
    addr: SocketAddr,
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
    bytes: Arc<Mutex<BTreeMap<String, u64>>>,
    levels: Arc<Mutex<BTreeMap<Option<String>, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

/// The response header naming the API Priority and Fairness priority level a request was
/// classified into (`X-Kubernetes-PF-PriorityLevel-UID`; its sibling
/// `X-Kubernetes-PF-FlowSchema-UID` names the FlowSchema).
const PRIORITY_LEVEL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";

impl CountingProxy {
    /// Starts the proxy on a free loopback port.
    ///
    /// # Errors
    /// When the port cannot be bound or the kubeconfig's TLS identity cannot be loaded.
    pub async fn start(config: &kube::Config) -> anyhow::Result<CountingProxy> {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        let https = config.rustls_https_connector_with_connector(tcp)?;
        let upstream: HttpClient<_, Incoming> =
            HttpClient::builder(TokioExecutor::new()).build(https);
        let base = config.cluster_url.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let bytes = Arc::new(Mutex::new(BTreeMap::new()));
        let levels = Arc::new(Mutex::new(BTreeMap::new()));
        let counted = Arc::clone(&counts);
        let weighed = Arc::clone(&bytes);
        let leveled = Arc::clone(&levels);
        // NODEJOB_BENCH_PROXY_LOG=FILE: each request also appended to FILE as it comes, as
        // `SECONDS METHOD PATH?QUERY`, to see where a count comes from.
        let log = match std::env::var_os("NODEJOB_BENCH_PROXY_LOG") {
            Some(path) => Some(Arc::new(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ))),
            None => None,
        };
        let began = std::time::Instant::now();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let (upstream, base, counted, weighed, leveled) = (
                    upstream.clone(),
                    base.clone(),
                    Arc::clone(&counted),
                    Arc::clone(&weighed),
                    Arc::clone(&leveled),
                );
                let log = log.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |mut request: Request<Incoming>| {
                        let (upstream, counted) = (upstream.clone(), Arc::clone(&counted));
                        let (weighed, leveled) = (Arc::clone(&weighed), Arc::clone(&leveled));
                        let base = base.clone();
                        if let Some(log) = &log {
                            use std::io::Write as _;
                            let at = began.elapsed().as_secs_f64();
                            let (method, uri) = (request.method(), request.uri());
                            let _ = writeln!(log.lock().unwrap(), "{at:.3} {method} {uri}");
                        }
                        async move {
                            let kind = kind(&request);
                            *counted.lock().unwrap().entry(kind.clone()).or_insert(0) += 1;
                            *request.uri_mut() = rebase(&base, request.uri())?;
                            let response: Response<Incoming> = upstream.request(request).await?;
                            let level = response
                                .headers()
                                .get(PRIORITY_LEVEL_UID)
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_string);
                            *leveled.lock().unwrap().entry(level).or_insert(0) += 1;
                            let response = response.map(move |body| {
                                body.map_frame(move |frame| {
                                    if let Some(data) = frame.data_ref() {
                                        *weighed
                                            .lock()
                                            .unwrap()
                                            .entry(kind.clone())
                                            .or_insert(0) += data.len() as u64;
                                    }
                                    frame
                                })
                            });
                            anyhow::Ok(response)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(CountingProxy {
            addr,
            counts,
            bytes,
            levels,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`.
    ///
    /// # Errors
    /// Never for a bound address.
    pub fn url(&self) -> anyhow::Result<Uri> {
        Ok(format!("http://{}", self.addr).parse()?)
    }

    /// The requests so far, by kind.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        self.counts.lock().unwrap().clone()
    }

    /// The bytes of the response bodies so far (as sent: this apiserver compresses none for
    /// a client that asks for no gzip), by kind.
    pub fn bytes(&self) -> BTreeMap<String, u64> {
        self.bytes.lock().unwrap().clone()
    }

    /// The requests answered so far, by the UID of the priority level the apiserver's API
    /// Priority and Fairness put them in (`None`: the answer had no such header).
    pub fn priority_levels(&self) -> BTreeMap<Option<String>, usize> {
        self.levels.lock().unwrap().clone()
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `base` (the apiserver's URL) with the path and query of `uri`.
fn rebase(base: &Uri, uri: &Uri) -> anyhow::Result<Uri> {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let base = base.to_string();
    Ok(format!("{}{path}", base.trim_end_matches('/')).parse()?)
}

/// `VERB resource[/name][/subresource]`, the name elided: `GET jobs/NAME`, `WATCH jobs`,
/// `LIST pods`, `GET pods/NAME/log`, `DELETE jobs/NAME`, `PATCH nodes/NAME`, for namespaced
/// (`.../namespaces/NS/RESOURCE/...`) and cluster-scoped (`/api/v1/RESOURCE/...`,
/// `/apis/GROUP/VERSION/RESOURCE/...`) paths alike.
fn kind(request: &Request<Incoming>) -> String {
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true"));
    let parts: Vec<&str> = request.uri().path().trim_matches('/').split('/').collect();
    let at = match parts.as_slice() {
        ["api", _version, "namespaces", _ns, _, ..] => 4,
        ["apis", _group, _version, "namespaces", _ns, _, ..] => 5,
        ["api", _version, ..] => 2,
        ["apis", _group, _version, ..] => 3,
        _ => parts.len(),
    };
    let rest = &parts[at.min(parts.len())..];
    let verb = match (request.method().as_str(), rest.len(), watch) {
        (_, _, true) => "WATCH",
        ("GET", 1, false) => "LIST",
        (m, _, false) => m,
    };
    match rest {
        [resource] => format!("{verb} {resource}"),
        [resource, _] => format!("{verb} {resource}/NAME"),
        [resource, _, sub, ..] => format!("{verb} {resource}/NAME/{sub}"),
        [] => format!("{verb} {}", request.uri().path()),
    }
}
