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

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::client::ConfigExt;
use nodejob_core::{Change, JobApi, finished};
use nodejob_fake::host;
use nodejob_kube::KubeApi;
use serde_json::json;

use crate::probe::Probe;
use crate::scenario::{Call, Waiter, spec};

/// The label the node agent adopts Nodes by.
const AGENT_LABEL: &str = "nodejob.test/agent";

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
    pub async fn latencies(&self, api: &KubeApi, runs: usize) -> anyhow::Result<Vec<Duration>> {
        let observer = self.client(Connector::NoDelay)?;
        let mut out = Vec::with_capacity(runs);
        for _ in 0..runs {
            out.push(self.one(api, &observer).await?);
        }
        Ok(out)
    }

    async fn one(&self, api: &KubeApi, observer: &KubeApi) -> anyhow::Result<Duration> {
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
        let (seen_by_observer, (result, returned)) = tokio::join!(observer_task, run);
        result.with_context(|| format!("run {name}"))?;
        let seen_by_run = probe.finished_at();
        let first = [seen_by_observer, seen_by_run]
            .into_iter()
            .flatten()
            .min()
            .with_context(|| format!("{name}: no one saw it finish"))?;
        Ok(returned.saturating_duration_since(first))
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
/// through it, by kind (`GET jobs/NAME`, `WATCH jobs`, `GET pods/log`, ...). It reaches the
/// apiserver with the kubeconfig's TLS identity; its clients send no credentials.
pub struct CountingProxy {
    addr: SocketAddr,
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

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
        let counted = Arc::clone(&counts);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let (upstream, base, counted) =
                    (upstream.clone(), base.clone(), Arc::clone(&counted));
                tokio::spawn(async move {
                    let service = service_fn(move |mut request: Request<Incoming>| {
                        let (upstream, counted) = (upstream.clone(), Arc::clone(&counted));
                        let base = base.clone();
                        async move {
                            *counted.lock().unwrap().entry(kind(&request)).or_insert(0) += 1;
                            *request.uri_mut() = rebase(&base, request.uri())?;
                            let response: Response<Incoming> = upstream.request(request).await?;
                            anyhow::Ok(response)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(CountingProxy { addr, counts, task })
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
/// `LIST pods`, `GET pods/NAME/log`, `DELETE jobs/NAME`.
fn kind(request: &Request<Incoming>) -> String {
    let watch = request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true"));
    let parts: Vec<&str> = request.uri().path().split('/').collect();
    // .../namespaces/NS/RESOURCE[/NAME[/SUB]]
    let at = parts.iter().position(|p| *p == "namespaces").map(|i| i + 2);
    let rest: Vec<&str> = at
        .map(|i| parts[i.min(parts.len())..].to_vec())
        .unwrap_or_default();
    let verb = match (request.method().as_str(), rest.len(), watch) {
        (_, _, true) => "WATCH",
        ("GET", 1, false) => "LIST",
        (m, _, false) => m,
    };
    match rest.as_slice() {
        [resource] => format!("{verb} {resource}"),
        [resource, _] => format!("{verb} {resource}/NAME"),
        [resource, _, sub, ..] => format!("{verb} {resource}/NAME/{sub}"),
        [] => format!("{verb} {}", request.uri().path()),
    }
}
