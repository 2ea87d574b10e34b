//! [`NodeLifecycle`]: kube-controller-manager's node lifecycle controller, run for one test
//! beside the control plane's own controller manager (`e2e/cluster`, which does not run it):
//! what turns a Node whose kubelet stopped posting `Ready` `Unknown` and taints it
//! unreachable, as on a real cluster.
//!
//! Not enabled in `e2e/cluster` for the whole suite: it acts on every Node, and on a node
//! agent's Node that posts `Ready` `False` (its host "down", the ready annotation) it marks every
//! Pod there NotReady (`MarkPodsNotReady` on any transition from `True`,
//! `pkg/controller/nodelifecycle/node_lifecycle_controller.go`), which the agent, unlike a real
//! kubelet, never posts back: the budgets of the agent suites would stay broken. It runs for
//! the length of one test of a binary whose nodes are all real (`tests/real_node_drivers.rs`;
//! e2e/lanes runs a binary that starts it alone).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::TryStreamExt as _;
use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use nodejob_conformance::Failure;

/// kube-controller-manager running the node lifecycle controller alone, until
/// [`NodeLifecycle::stop`] or drop.
pub struct NodeLifecycle {
    child: Option<Child>,
    log: PathBuf,
}

fn run_dir() -> PathBuf {
    std::env::var_os("NODEJOB_E2E_RUN")
        .map(PathBuf::from)
        .expect("NODEJOB_E2E_RUN is not set: run the suite with e2e/run (e2e/cluster run)")
}

/// A value of the run's `env` file (`e2e/cluster up` writes it: `BIN`, the ports).
fn run_env(key: &str) -> Result<String, Failure> {
    let path = run_dir().join("env");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure(format!("reading {}: {e}", path.display())))?;
    (text.lines())
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(String::from)
        .ok_or_else(|| Failure(format!("no {key} in {}", path.display())))
}

impl NodeLifecycle {
    /// Starts the controller, `monitor_grace` its `--node-monitor-grace-period`; returns once
    /// it has seen Node `node` (its `RegisteredNode` Event about it).
    ///
    /// The flags, as kube-controller-manager documents them
    /// (`cmd/kube-controller-manager/app/options/nodelifecyclecontroller.go`):
    /// - `--node-monitor-grace-period` (default 50s): "Amount of time which we allow running
    ///   Node to be unresponsive before marking it unhealthy. Must be N times more than
    ///   kubelet's nodeStatusUpdateFrequency, where N means number of retries allowed for
    ///   kubelet to post node status." The real nodes' kubelets post every 10 s (their
    ///   `nodeStatusUpdateFrequency` and Lease renewal, the defaults), as the node agent
    ///   renews its Nodes' Leases: a grace of 20 s allows one missed post. (The doc's other
    ///   bound, above the HTTP/2 ping and read-idle timeouts, is for a kubelet whose
    ///   connection hangs; a stopped kubelet's closes.)
    /// - `--node-monitor-period` (default 5s): "The period for syncing NodeStatus in
    ///   NodeLifecycleController": `monitor_period`; 1 s, and the transition comes within a
    ///   second of the grace. It is also how long the `unreachable` taint of effect `NoExecute`
    ///   may outlast a node's return: the controller lifts it on its next pass after the
    ///   kubelet posts Ready (`processTaintBaseEviction` in `monitorNodeHealth`), where the
    ///   `NoSchedule` one goes on the node's update.
    /// - `--node-startup-grace-period` (default 1m): "Amount of time which we allow starting
    ///   Node to be unresponsive before marking it unhealthy": left as it is (the nodes are
    ///   Ready before it starts).
    pub async fn start(
        admin: &Client,
        node: &str,
        monitor_grace: Duration,
        monitor_period: Duration,
        limit: Duration,
    ) -> Result<Self, Failure> {
        let run = run_dir();
        let bin = PathBuf::from(run_env("BIN")?);
        let kubeconfig = run.join("kube-controller-manager.kubeconfig");
        let pki = run.join("pki");
        let port = free_port()?;
        let log_path = run.join("logs/node-lifecycle-controller.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| Failure(format!("{}: {e}", log_path.display())))?;
        let arg = |flag: &str, value: &std::path::Path| format!("--{flag}={}", value.display());
        let child = Command::new(bin.join("kube-controller-manager"))
            .arg(arg("kubeconfig", &kubeconfig))
            .arg(arg("authentication-kubeconfig", &kubeconfig))
            .arg(arg("authorization-kubeconfig", &kubeconfig))
            .arg("--authentication-skip-lookup")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(arg(
                "tls-cert-file",
                &pki.join("kube-controller-manager.crt"),
            ))
            .arg(arg(
                "tls-private-key-file",
                &pki.join("kube-controller-manager.key"),
            ))
            .arg("--controllers=node-lifecycle-controller")
            .arg("--use-service-account-credentials=true")
            .arg("--leader-elect=false")
            .arg(format!(
                "--node-monitor-grace-period={}s",
                monitor_grace.as_secs()
            ))
            .arg(format!(
                "--node-monitor-period={}s",
                monitor_period.as_secs()
            ))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| Failure(e.to_string()))?)
            .stderr(log)
            .spawn()
            .map_err(|e| Failure(format!("starting the node lifecycle controller: {e}")))?;
        let lifecycle = NodeLifecycle {
            child: Some(child),
            log: log_path,
        };
        // Its first pass over the Nodes records `RegisteredNode` for each.
        let events = Api::<Event>::namespaced(admin.clone(), "default");
        let config = watcher::Config::default()
            .fields(&format!("involvedObject.name={node},reason=RegisteredNode"));
        let stream = watcher(events, config).applied_objects();
        let seen = tokio::time::timeout(limit, async {
            let mut stream = std::pin::pin!(stream);
            stream.try_next().await.map_err(|e| Failure(e.to_string()))
        })
        .await;
        match seen {
            Ok(Ok(Some(_))) => Ok(lifecycle),
            other => Err(Failure(format!(
                "the node lifecycle controller did not register node {node} within {limit:?} \
                 ({other:?}; log in {})",
                lifecycle.log.display()
            ))),
        }
    }

    /// Stops the controller (what it wrote on the Nodes stays).
    pub fn stop(mut self) -> Result<(), Failure> {
        self.halt()
    }

    fn halt(&mut self) -> Result<(), Failure> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _ = child.kill();
        child
            .wait()
            .map(drop)
            .map_err(|e| Failure(format!("stopping the node lifecycle controller: {e}")))
    }
}

impl Drop for NodeLifecycle {
    fn drop(&mut self) {
        if let Err(e) = self.halt() {
            eprintln!("{e}");
        }
    }
}

/// A TCP port on 127.0.0.1 free now, for a component that binds it a moment later: drawn
/// below the kernel's ephemeral range, where no outgoing connection takes a local port
/// between its choice and the bind (`e2e/free-ports` says why), bound here to be sure.
pub fn free_port() -> Result<u16, Failure> {
    use std::hash::{BuildHasher, Hasher};
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .map_err(|e| Failure(format!("reading the ephemeral port range: {e}")))?;
    let ephemeral: u16 = (range.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| Failure(format!("the ephemeral port range {range:?}")))?;
    let (low, high) = (10_000u16, ephemeral.saturating_sub(1));
    for _ in 0..10_000 {
        if high <= low {
            break;
        }
        let mut draw = std::collections::hash_map::RandomState::new().build_hasher();
        draw.write_u64(u64::from(std::process::id()));
        let port = low + (draw.finish() % u64::from(high - low)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Failure(format!("a free port: {e}")))
}
