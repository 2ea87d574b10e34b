//! [`RealNode`]: a real node of the run's cluster (a kubelet, containerd and runc in a PID and
//! mount namespace of its own, `e2e/node/node`); [`RealNodeBackend`], the conformance
//! suites' backend on one (three for the node scenarios); [`RealNodes`], the drivers' scenario
//! on several.
//!
//! A node's PID 1 (`e2e/node/init`) is "the host" its privileged Jobs `nsenter`: their
//! `nsenter --target 1 --mount --uts --ipc --net --pid` reaches it and execs the node's
//! `/usr/local/bin/stratum` (`src/bin/stratum.rs`), the `stratum` model of `nodejob-host`
//! on a state kept in the node's directory ([`RealNode::host_state`]). [`RealNode::stop`] (or
//! its drop) ends every process of the node and removes its cgroups; nothing it mounted
//! outlives its mount namespace. `e2e/run` sweeps the run's nodes again at the end, for a test
//! killed before its teardown.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use nodejob_conformance::workloads::MIRROR_ANNOTATION;
use nodejob_conformance::{Backend, Failure, Object, Workloads};
use nodejob_host::stratum::StratumState;
use nodejob_kube::KubeApi;
use serde_json::json;

use crate::admin::{client, config, fail, label_node, namespace, unique};
use crate::backend::create_workload;
use crate::conventions::{NOT_READY_TAINT, SA_NAME, SA_NAMESPACE, SCENARIO_LABEL};
use crate::host::boot_id;
use crate::rbac::Rbac;
use crate::waits::wait_for;
use crate::workload::deployment_behind_budget;

/// The conformance scenarios that turn a real node NotReady and Ready again
/// ([`RealNodeBackend`]'s `set_node_ready`): `tests/real_node_ready.rs` runs them with the node
/// lifecycle controller running, which only a binary run alone may start (`e2e/lanes`), so
/// they are not among `tests/real_node.rs`'s.
pub const NOT_READY_SCENARIOS: &[&str] = &[
    "wait_ready_sees_the_node_turn_ready",
    "wait_ready_times_out_on_a_not_ready_node",
    "a_node_condition_merges_by_type_and_outlives_the_kubelets_posts",
];

/// How long a real node may take to boot and post Ready (about 1 s on 2 idle cores; on a
/// failure past it, the node's boot logs' last lines are in the failure).
pub const BOOT_LIMIT: Duration = Duration::from_secs(90);

/// The image of a node Job on a real node: `e2e/build`'s Job image (a static busybox, whose
/// `nsenter` the argv runs), by its digest (`NODEJOB_E2E_JOB_IMAGE`, set by `e2e/run`).
pub fn job_image() -> String {
    std::env::var("NODEJOB_E2E_JOB_IMAGE").expect(
        "NODEJOB_E2E_JOB_IMAGE is not set: run the real-node suite with e2e/run, which builds the \
         node images and sets it",
    )
}

fn node_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../e2e/node/node")
}

fn run_dir() -> PathBuf {
    std::env::var_os("NODEJOB_E2E_RUN")
        .map(PathBuf::from)
        .expect("NODEJOB_E2E_RUN is not set: run the real-node suite with e2e/run")
}

/// One real node, booted until [`RealNode::stop`] or drop.
pub struct RealNode {
    name: String,
    dir: PathBuf,
    boot: Option<Child>,
    admin: Client,
}

impl RealNode {
    /// Prepares and boots node `nj-real-…`, waits until it is registered and Ready, and gives
    /// it the address the apiserver dials for its kubelet (127.0.0.1: the kubelet refuses a
    /// loopback `--node-ip` and posts none, `pkg/kubelet/nodestatus/setters.go`
    /// `validateNodeIP`, so the harness posts it once, as a cloud controller would). Then it
    /// lifts the `not-ready` taint the apiserver gave the new Node (admission plugin
    /// TaintNodesByCondition), as the node lifecycle controller would once the node is Ready:
    /// none runs here, and the scheduler would place no workload there.
    pub async fn start(admin: &Client) -> Result<Self, Failure> {
        let name = unique("nj-real");
        let dir = run_dir().join("nodes").join(&name);
        let prepared = tokio::process::Command::new(node_script())
            .arg("prepare")
            .arg(&dir)
            .arg(&name)
            .output()
            .await
            .map_err(|e| Failure(format!("preparing node {name}: {e}")))?;
        if !prepared.status.success() {
            return Err(Failure(format!(
                "preparing node {name}: {}",
                String::from_utf8_lossy(&prepared.stderr)
            )));
        }
        let log = std::fs::File::create(dir.join("boot.log"))
            .map_err(|e| Failure(format!("node {name}: boot log: {e}")))?;
        let boot = Command::new(node_script())
            .arg("boot")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| Failure(e.to_string()))?)
            .stderr(log)
            .spawn()
            .map_err(|e| Failure(format!("booting node {name}: {e}")))?;
        let node = RealNode {
            name,
            dir,
            boot: Some(boot),
            admin: admin.clone(),
        };
        node.until_ready(None).await?;
        let address = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": node.name},
        ]}});
        let nodes = Api::<Node>::all(admin.clone());
        nodes
            .patch_status(&node.name, &PatchParams::default(), &Patch::Merge(&address))
            .await
            .map_err(fail("posting a real node's address"))?;
        let read = nodes
            .get(&node.name)
            .await
            .map_err(fail("reading a real node"))?;
        let taints = read.spec.and_then(|s| s.taints).unwrap_or_default();
        let kept: Vec<_> = taints.iter().filter(|t| t.key != NOT_READY_TAINT).collect();
        if kept.len() < taints.len() {
            // Under the resourceVersion read: a taint put there meanwhile is not lost.
            let patch = json!({
                "metadata": {"resourceVersion": read.metadata.resource_version},
                "spec": {"taints": kept},
            });
            nodes
                .patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(fail("lifting a real node's not-ready taint"))?;
        }
        Ok(node)
    }

    /// Where the node keeps what it is (`e2e/node/node prepare`'s DIR).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Imports the image of the OCI image layout tarball `tar` into the node's containerd, in
    /// its namespace `k8s.io` where the kubelet finds its images, as an administrator does on a
    /// host with no registry (`ctr images import`, as `e2e/node/init` imports the node's own
    /// images at boot): a Pod naming it with `imagePullPolicy: Never` then runs it. `tar` is a
    /// path of this machine, which the node's mount namespace sees too.
    pub async fn import_image(&self, tar: &Path) -> Result<(), Failure> {
        let pid = std::fs::read_to_string(self.dir.join("pid1"))
            .map_err(|e| Failure(format!("node {}: no PID 1: {e}", self.name)))?;
        let bin = std::env::var_os("NODEJOB_E2E_NODE_BIN")
            .ok_or_else(|| Failure("NODEJOB_E2E_NODE_BIN is not set (run e2e/run)".into()))?;
        let out = tokio::process::Command::new("nsenter")
            .args(["--target", pid.trim(), "--mount", "--"])
            .arg(Path::new(&bin).join("ctr"))
            .args([
                "--address",
                "/run/containerd/containerd.sock",
                "-n",
                "k8s.io",
            ])
            .args(["images", "import", "--local"])
            .arg(tar)
            .output()
            .await
            .map_err(|e| Failure(format!("node {}: ctr images import: {e}", self.name)))?;
        if !out.status.success() {
            return Err(Failure(format!(
                "node {}: ctr images import {}: {}{}",
                self.name,
                tar.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// What the node's `stratum` keeps (`DIR/host/state.json`): the model's state as the last
    /// command left it, every command counted; `None` when none ran yet. Its version and boot
    /// are those of that command's time.
    pub fn host_state(&self) -> Result<Option<StratumState>, Failure> {
        let path = self.dir.join("host/state.json");
        match std::fs::read_to_string(&path) {
            Ok(record) => StratumState::from_record(&record)
                .map(Some)
                .map_err(|e| Failure(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Failure(format!("{}: {e}", path.display()))),
        }
    }

    /// How many times the node's PID 1 started the kubelet (`DIR/log/init.log`): once a boot,
    /// once more for each restart the host asked for (`carotate issue`).
    pub fn kubelet_starts(&self) -> Result<usize, Failure> {
        Ok(self.log_lines("init.log", "kubelet started")?.len())
    }

    /// When the node's PID 1 started the kubelet, each time (`DIR/log/init.log`, the machine's
    /// clock), in order.
    pub fn kubelet_started_at(&self) -> Result<Vec<Timestamp>, Failure> {
        (self.log_lines("init.log", "kubelet started")?.iter())
            .map(|l| {
                let at = l.split(' ').next().unwrap_or_default();
                at.parse::<Timestamp>()
                    .map_err(|e| Failure(format!("node {}: {l:?}: {e}", self.name)))
            })
            .collect()
    }

    /// Keeps the machine off for `seconds` at each of its reboots from now on, between its PID
    /// 1's end and its next boot, as a slow firmware or disk would (`DIR/host/down`, which
    /// `e2e/node/node boot` reads): long enough, and the control plane's node lifecycle
    /// controller sees the node go.
    pub fn stay_down_at_reboot(&self, seconds: u64) -> Result<(), Failure> {
        let path = self.dir.join("host/down");
        std::fs::write(&path, format!("{seconds}\n"))
            .map_err(|e| Failure(format!("node {}: {}: {e}", self.name, path.display())))
    }

    /// Returns once the kubelet serves (`serves`) or refuses a client holding the apiserver's
    /// kubelet client certificate (`GET /pods` on its port, as the apiserver asks for a log),
    /// within [`BOOT_LIMIT`]: the kubelet reads its client CA bundle again as the file changes.
    async fn until_kubelet_serves_the_apiserver(&self, serves: bool) -> Result<(), Failure> {
        let pki = run_dir().join("pki");
        let pem = |name: &str| {
            crate::pki::read(&pki.join(name)).map(|text| crate::pki::base64(text.as_bytes()))
        };
        let url: http::Uri = format!("https://127.0.0.1:{}", self.kubelet_port()?)
            .parse()
            .map_err(|e| Failure(format!("node {}: {e}", self.name)))?;
        let mut config = kube::Config::new(url);
        config.accept_invalid_certs = true;
        config.auth_info = kube::config::AuthInfo {
            client_certificate_data: Some(
                pem("kube-apiserver-kubelet-client.crt").map_err(Failure)?,
            ),
            client_key_data: Some(
                pem("kube-apiserver-kubelet-client.key")
                    .map_err(Failure)?
                    .into(),
            ),
            ..kube::config::AuthInfo::default()
        };
        let kubelet = client(config)?;
        let deadline = tokio::time::Instant::now() + BOOT_LIMIT;
        let mut every = tokio::time::interval(Duration::from_millis(250));
        loop {
            every.tick().await;
            let request = http::Request::get("/pods")
                .body(Vec::new())
                .map_err(|e| Failure(e.to_string()))?;
            let answer = kubelet.request_text(request).await;
            if answer.is_ok() == serves {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                let want = if serves { "serve" } else { "refuse" };
                return Err(Failure(format!(
                    "node {}: the kubelet does not {want} the apiserver's client after \
                     {BOOT_LIMIT:?}: {answer:?}",
                    self.name
                )));
            }
        }
    }

    /// Asks the node's PID 1 to restart the kubelet now, down for a second, as the host asks
    /// it after `stratum carotate issue`.
    pub fn restart_kubelet(&self) -> Result<(), Failure> {
        self.stop_kubelet_for(1)
    }

    /// Asks the node's PID 1 to stop the kubelet now and start it again `seconds` later, as a
    /// kubelet that crashed and was started again by its supervisor (`e2e/node/init`:
    /// `/run/stratum/request`, SIGUSR2), the request written into the node's own `/run`
    /// through its PID 1's root. The node keeps its boot; its containers run on.
    pub fn stop_kubelet_for(&self, seconds: u64) -> Result<(), Failure> {
        self.ask_pid1(&format!("restart 0 {seconds}"))
    }

    /// Asks the node's PID 1 to stop the kubelet until [`RealNode::start_kubelet`]: a kubelet
    /// that stopped posting, as [`RealNode::stop_kubelet_for`] but for no set time.
    pub fn stop_kubelet(&self) -> Result<(), Failure> {
        self.ask_pid1("stop")
    }

    /// Asks the node's PID 1 to start the kubelet that [`RealNode::stop_kubelet`] stopped.
    pub fn start_kubelet(&self) -> Result<(), Failure> {
        self.ask_pid1("start")
    }

    /// Writes `request` into the node's own `/run/stratum/request`, through its PID 1's root,
    /// and tells PID 1 (SIGUSR2), as the node's host does (`e2e/node/init`).
    fn ask_pid1(&self, request: &str) -> Result<(), Failure> {
        let pid = std::fs::read_to_string(self.dir.join("pid1"))
            .map_err(|e| Failure(format!("node {}: no PID 1: {e}", self.name)))?;
        let pid = pid.trim();
        let path = format!("/proc/{pid}/root/run/stratum/request");
        std::fs::write(&path, format!("{request}\n"))
            .map_err(|e| Failure(format!("node {}: {path}: {e}", self.name)))?;
        signal("-USR2", pid)
    }

    /// The port its kubelet serves on (`DIR/node.env`).
    pub fn kubelet_port(&self) -> Result<u16, Failure> {
        let path = self.dir.join("node.env");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Failure(format!("{}: {e}", path.display())))?;
        (text.lines())
            .find_map(|l| l.strip_prefix("NODE_PORT="))
            .and_then(|p| p.trim().parse().ok())
            .ok_or_else(|| Failure(format!("{}: no NODE_PORT", path.display())))
    }

    /// How many times the node rebooted because its host asked (`DIR/log/boots.log`: its PID 1
    /// ended with 100, `stratum upgrade`'s reboot), and how many times for another reason (a
    /// power cut: [`RealNode::power_cycle`]).
    pub fn reboots(&self) -> Result<(usize, usize), Failure> {
        let all = self.log_lines("boots.log", "PID 1 ended")?;
        let asked = all
            .iter()
            .filter(|l| l.contains("PID 1 ended (100)"))
            .count();
        Ok((asked, all.len() - asked))
    }

    fn log_lines(&self, log: &str, containing: &str) -> Result<Vec<String>, Failure> {
        let path = self.dir.join("log").join(log);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok((text.lines())
                .filter(|l| l.contains(containing))
                .map(String::from)
                .collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Failure(format!("{}: {e}", path.display()))),
        }
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until the Node is Ready with a `bootID` other than `old` (any, when `None`).
    pub async fn until_ready(&self, old: Option<String>) -> Result<Node, Failure> {
        self.power_switch().until_ready(old).await
    }

    /// Reboots the node as a power cut would: its PID 1 is killed (and with it every process
    /// of the node, its containers included), then it boots again with a new boot ID. Returns
    /// once the Node reports the new boot, Ready.
    pub async fn power_cycle(&self) -> Result<Node, Failure> {
        self.power_switch().cycle().await
    }

    /// The node's power switch, for another task to cut its power with.
    pub fn power_switch(&self) -> PowerSwitch {
        PowerSwitch {
            admin: self.admin.clone(),
            name: self.name.clone(),
            dir: self.dir.clone(),
        }
    }

    /// What the node's processes hold in memory (the sum of their resident sets: kubelet,
    /// containerd, shims, containers, its PID 1), and how many there are: every process in the
    /// node's PID namespace, as `/proc` shows it.
    pub fn memory(&self) -> Result<(u64, usize), Failure> {
        let read = |e: std::io::Error| Failure(format!("node {}: {e}", self.name));
        let pid1 = std::fs::read_to_string(self.dir.join("pid1")).map_err(read)?;
        let ns = std::fs::read_link(format!("/proc/{}/ns/pid", pid1.trim())).map_err(read)?;
        let (mut bytes, mut count) = (0, 0);
        for entry in std::fs::read_dir("/proc").map_err(read)?.flatten() {
            let path = entry.path();
            // Processes come and go as this reads: one gone is skipped.
            if std::fs::read_link(path.join("ns/pid")).ok().as_ref() != Some(&ns) {
                continue;
            }
            let Ok(status) = std::fs::read_to_string(path.join("status")) else {
                continue;
            };
            let rss_kib = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            if let Some(kib) = rss_kib {
                bytes += kib * 1024;
                count += 1;
            }
        }
        Ok((bytes, count))
    }

    /// Stops the node: every process of it ends and its cgroups are removed. The Node object
    /// stays (as after a machine is switched off).
    pub fn stop(mut self) -> Result<(), Failure> {
        self.halt()
    }

    fn halt(&mut self) -> Result<(), Failure> {
        let Some(mut boot) = self.boot.take() else {
            return Ok(());
        };
        // SIGTERM: the boot loop kills the node's PID 1, waits for the namespace to be gone
        // and removes the cgroups (e2e/node/node).
        signal("-TERM", &boot.id().to_string())?;
        let status = boot
            .wait()
            .map_err(|e| Failure(format!("stopping node {}: {e}", self.name)))?;
        if !status.success() {
            return Err(Failure(format!(
                "node {}'s boot loop ended {status} (log in {})",
                self.name,
                self.dir.display()
            )));
        }
        Ok(())
    }
}

/// A real node's power, cut by [`PowerSwitch::cycle`]: a handle that outlives no node's
/// process (the node's PID 1 is read as it is cut), for an actor in a task of its own.
#[derive(Clone)]
pub struct PowerSwitch {
    admin: Client,
    name: String,
    dir: PathBuf,
}

impl PowerSwitch {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// [`RealNode::power_cycle`].
    pub async fn cycle(&self) -> Result<Node, Failure> {
        let nodes = Api::<Node>::all(self.admin.clone());
        let before = nodes
            .get(&self.name)
            .await
            .map_err(fail("reading a node"))?;
        let pid = std::fs::read_to_string(self.dir.join("pid1"))
            .map_err(|e| Failure(format!("node {}: no PID 1: {e}", self.name)))?;
        signal("-KILL", pid.trim())?;
        self.until_ready(Some(boot_id(&before).to_string())).await
    }

    /// Returns once the node is off: its PID 1 has ended (a reboot's shutdown done, a power
    /// cut), before its next boot. Its Node says nothing of it while no node lifecycle
    /// controller runs (the kubelet's last `Ready` stands), so the node's own PID 1 is what is
    /// awaited, by its pidfd (`pidfd_open(2)`: readable once the process has exited); a node
    /// between two boots (no `DIR/pid1`, its boot loop waiting out `DIR/host/down`) is off
    /// already. Called on a running node, not on one just starting (whose new PID 1 has not
    /// yet written `DIR/pid1`).
    pub async fn off(&self) -> Result<(), Failure> {
        let path = self.dir.join("pid1");
        let pid = match std::fs::read_to_string(&path) {
            Ok(pid) => pid,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Failure(format!("{}: {e}", path.display()))),
        };
        let pid = (pid.trim().parse().ok())
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| Failure(format!("{}: no PID in {pid:?}", path.display())))?;
        let pidfd = match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::SRCH) => return Ok(()),
            Err(e) => {
                return Err(Failure(format!(
                    "node {}: pidfd_open({pid:?}): {e}",
                    self.name
                )));
            }
        };
        // poll(2) on a thread of its own, as long as PID 1 lives (the node is halted, and its
        // PID 1 ended, when its test is done): tokio's `AsyncFd` takes a descriptor only in
        // unsafe code, which the workspace forbids.
        let name = self.name.clone();
        tokio::task::spawn_blocking(move || {
            use rustix::event::{PollFd, PollFlags, poll};
            loop {
                match poll(&mut [PollFd::new(&pidfd, PollFlags::IN)], None) {
                    Ok(_) => return Ok(()),
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => {
                        return Err(Failure(format!("node {name}: awaiting PID 1's end: {e}")));
                    }
                }
            }
        })
        .await
        .map_err(|e| Failure(format!("awaiting PID 1's end: {e}")))?
    }

    async fn until_ready(&self, old: Option<String>) -> Result<Node, Failure> {
        let what = format!(
            "node {} Ready after boot (log in {})",
            self.name,
            self.dir.display()
        );
        wait_for(
            Api::<Node>::all(self.admin.clone()),
            &self.name,
            &what,
            BOOT_LIMIT,
            move |n: &Node| {
                nodejob_core::ready(n)
                    && !boot_id(n).is_empty()
                    && old.as_deref().is_none_or(|old| boot_id(n) != old)
            },
        )
        .await
        .map_err(|Failure(why)| Failure(format!("{why}\n{}", self.boot_story())))
    }

    /// What the node's boot said, for a boot that did not end Ready: the last lines of its
    /// boot loop's output, of its PID 1's steps and of its kubelet's log (the node's
    /// directory is kept when the run fails, but a CI log is all that is left of a CI run).
    fn boot_story(&self) -> String {
        let tail = |path: PathBuf, lines: usize| -> String {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| format!("({e})"));
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            format!(
                "--- {} (last {lines} lines)\n{}",
                path.display(),
                all[from..].join("\n")
            )
        };
        [
            tail(self.dir.join("boot.log"), 10),
            tail(self.dir.join("log/boots.log"), 5),
            tail(self.dir.join("log/init.log"), 10),
            tail(self.dir.join("log/kubelet.log"), 25),
        ]
        .join("\n")
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if let Err(e) = self.halt() {
            eprintln!("{e}");
        }
    }
}

fn signal(signal: &str, pid: &str) -> Result<(), Failure> {
    let status = Command::new("kill")
        .args([signal, pid])
        .status()
        .map_err(|e| Failure(format!("kill {signal} {pid}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure(format!("kill {signal} {pid}: {status}")))
    }
}

/// The conformance backend on real nodes ([`RealNode`]): the runner's API acts as the
/// ServiceAccount of `deploy/rbac.yaml` in a namespace of the scenario's own. Only the hooks a
/// real kubelet can stage are offered: a PodSecurity refusal, a Pod or a Node deleted by
/// another actor, a power cut, a kubelet that stops posting (NotReady by the node lifecycle
/// controller, which the test runs) and starts again, a kubelet that refuses the apiserver's
/// log requests while it goes on reporting its Pods.
/// For the [`Workloads`] scenarios ([`RealNodeBackend::for_workloads`]), three real nodes; a
/// mirror Pod is what a kubelet makes of a static Pod's manifest on its node.
pub struct RealNodeBackend {
    admin: Client,
    api: Arc<KubeApi>,
    rbac: Rbac,
    namespace: String,
    /// The scenario's node ([`Backend::node`]).
    pub node: RealNode,
    /// For [`Workloads`]: the scenario's other nodes.
    others: Vec<RealNode>,
    label: (String, String),
    /// The apiserver's trust in the CAs its scenario's hosts rotate to
    /// ([`Backend::rotation_ca`]), taken back when the backend is dropped.
    trusts: std::sync::Mutex<Vec<crate::ControlPlaneTrust>>,
}

impl RealNodeBackend {
    /// A namespace and a real node of the scenario's own.
    pub async fn new() -> Result<Self, Failure> {
        Self::with_nodes(1).await
    }

    /// A backend for the [`Workloads`] scenarios: a namespace and three real nodes of the
    /// scenario's own, booted side by side, labelled [`SCENARIO_LABEL`] with the namespace's
    /// name.
    pub async fn for_workloads() -> Result<Self, Failure> {
        Self::with_nodes(3).await
    }

    async fn with_nodes(count: usize) -> Result<Self, Failure> {
        let admin_config = config(None).await?;
        let admin = client(admin_config.clone())?;
        let name = unique("nj");
        namespace(&admin, &name, "privileged").await?;
        let rbac = Rbac::committed();
        rbac.apply(&admin, SA_NAME, &[&name, SA_NAMESPACE]).await?;
        let mut nodes =
            futures::future::try_join_all((0..count).map(|_| RealNode::start(&admin))).await?;
        let label = (SCENARIO_LABEL.to_string(), name.clone());
        for node in &nodes {
            label_node(&admin, node.name(), &label.0, &label.1).await?;
        }
        let node = nodes.remove(0);
        let user = format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}");
        let mut as_sa = admin_config;
        as_sa.auth_info.impersonate = Some(user.clone());
        let api =
            KubeApi::from_config(as_sa).map_err(|e| Failure(format!("client as {user}: {e}")))?;
        Ok(RealNodeBackend {
            admin,
            api: Arc::new(api),
            rbac,
            namespace: name,
            node,
            others: nodes,
            label,
            trusts: std::sync::Mutex::default(),
        })
    }

    /// An admin client.
    pub fn admin(&self) -> Client {
        self.admin.clone()
    }

    /// The scenario's real nodes: its node, then the others.
    pub fn real_nodes(&self) -> Vec<&RealNode> {
        std::iter::once(&self.node).chain(&self.others).collect()
    }

    /// The real node named `name`, of this backend's.
    pub fn real_node(&self, name: &str) -> Result<&RealNode, Failure> {
        (self.real_nodes().into_iter())
            .find(|n| n.name == name)
            .ok_or_else(|| {
                Failure(format!(
                    "node {name} is not one of the scenario's real nodes"
                ))
            })
    }

    /// Stops every node ([`RealNode::stop`]).
    pub fn stop(self) -> Result<(), Failure> {
        let RealNodeBackend { node, others, .. } = self;
        std::iter::once(node)
            .chain(others)
            .try_for_each(RealNode::stop)
    }

    /// A static Pod, as an administrator makes one: its manifest written into the static Pod
    /// directory of its node (`spec.nodeName`), whose kubelet runs it and creates its mirror
    /// Pod (`NAME-NODE`, annotated `kubernetes.io/config.mirror`). Returns once the mirror Pod
    /// exists.
    async fn static_pod(&self, mut pod: Pod) -> Result<(), Failure> {
        let on = pod.spec.as_mut().and_then(|s| s.node_name.take());
        let node = std::iter::once(&self.node)
            .chain(&self.others)
            .find(|n| on.as_deref() == Some(n.name()))
            .ok_or_else(|| Failure(format!("a static pod for no node of ours: {on:?}")))?;
        // What the kubelet adds itself; a manifest does not carry it.
        if let Some(a) = pod.metadata.annotations.as_mut() {
            a.remove(MIRROR_ANNOTATION);
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let manifest = node
            .dir()
            .join("manifests")
            .join(format!("{}-{name}.json", self.namespace));
        let text = serde_json::to_vec(&pod).map_err(|e| Failure(e.to_string()))?;
        std::fs::write(&manifest, text)
            .map_err(|e| Failure(format!("writing {}: {e}", manifest.display())))?;
        let mirror = format!("{name}-{}", node.name());
        let what = format!("the mirror pod of {}", manifest.display());
        let pods = Api::<Pod>::namespaced(self.admin.clone(), &self.namespace);
        wait_for(pods, &mirror, &what, BOOT_LIMIT, |_| true)
            .await
            .map(drop)
    }
}

#[async_trait]
impl Workloads for RealNodeBackend {
    fn nodes(&self) -> Vec<String> {
        (std::iter::once(&self.node).chain(&self.others))
            .map(|n| n.name().to_string())
            .collect()
    }
    fn node_label(&self) -> (String, String) {
        self.label.clone()
    }
    async fn create(&self, object: Object) -> Result<(), Failure> {
        match object {
            Object::Pod(pod)
                if (pod.metadata.annotations.as_ref())
                    .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION)) =>
            {
                self.static_pod(*pod).await
            }
            Object::Pod(mut pod) => {
                played_for_real(&mut pod);
                create_workload(&self.admin, &self.namespace, Object::Pod(pod)).await
            }
            other => create_workload(&self.admin, &self.namespace, other).await,
        }
    }
}

/// A workload container whose argv is a `nodejob-test:` directive the node agent plays (the
/// suite's only one: a program that ignores SIGTERM, `nodejob_host::directives::ignore_sigterm`)
/// is given a program that does it for real: a shell of the Job image (busybox; the pause image
/// has none) that ignores SIGTERM and runs until killed.
fn played_for_real(pod: &mut Pod) {
    let ignoring = nodejob_host::directives::ignore_sigterm();
    let containers = pod.spec.iter_mut().flat_map(|s| s.containers.iter_mut());
    for container in containers {
        if container
            .command
            .as_ref()
            .is_some_and(|c| c.contains(&ignoring))
        {
            container.image = Some(job_image());
            container.command = Some(
                ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"]
                    .map(String::from)
                    .into(),
            );
        }
    }
}

#[async_trait]
impl Backend for RealNodeBackend {
    type Api = KubeApi;

    fn api(&self) -> Arc<KubeApi> {
        self.api.clone()
    }
    fn namespace(&self) -> String {
        self.namespace.clone()
    }
    fn node(&self) -> String {
        self.node.name().to_string()
    }
    /// A real kubelet unreachable for logs, as one whose client CA no longer holds the
    /// apiserver's: the node's trust bundle (`DIR/pki/ca.crt`, which the kubelet reads again as
    /// it changes for its clients, `authentication.x509.clientCAFile`) swapped for a CA of its
    /// own, kept aside and put back for `true`. The kubelet answers the apiserver's log request
    /// 401, which the apiserver relays (`GenericHttpResponseChecker`,
    /// `k8s.io/apiserver/pkg/registry/generic/rest/response_checker.go`); its own connections
    /// to the apiserver stay up (client-go read the bundle once, as it started), so it goes on
    /// reporting its Pods. Returns once the kubelet answers as asked: a client holding the
    /// apiserver's kubelet client certificate refused, or served (`GET /pods`).
    async fn set_kubelet_reachable(&self, node: &str, reachable: bool) -> Result<(), Failure> {
        let real = self.real_node(node)?;
        let bundle = crate::pki::KubeletPki::at(real.dir().join("pki")).bundle_path();
        let aside = bundle.with_extension("crt.reachable");
        if reachable {
            if aside.exists() {
                let kept = crate::pki::read(&aside).map_err(Failure)?;
                crate::pki::write(&bundle, &kept).map_err(Failure)?;
                std::fs::remove_file(&aside)
                    .map_err(|e| Failure(format!("{}: {e}", aside.display())))?;
            }
        } else if !aside.exists() {
            let kept = crate::pki::read(&bundle).map_err(Failure)?;
            crate::pki::write(&aside, &kept).map_err(Failure)?;
            let stranger = crate::pki::Ca::generate(&format!("nodejob-e2e {node} stranger"))
                .map_err(Failure)?;
            crate::pki::write(&bundle, &stranger.certificate_pem()).map_err(Failure)?;
        }
        real.until_kubelet_serves_the_apiserver(reachable).await
    }
    /// A real node's Ready is not scripted: its kubelet stops (`false`) or starts again
    /// (`true`), and this returns once the Node shows it, as the control plane makes it: Ready
    /// no longer True once the node lifecycle controller has missed the kubelet's posts for
    /// its grace (`Unknown`, "Kubelet stopped posting node status"; a test that turns a node
    /// NotReady runs that controller, [`NodeLifecycle`](crate::NodeLifecycle)), Ready True
    /// once the kubelet posts it again.
    async fn set_node_ready(&self, node: &str, ready: bool) -> Result<(), Failure> {
        let real = self.real_node(node)?;
        let what = if ready {
            real.start_kubelet()?;
            format!("node {node} Ready again, its kubelet started")
        } else {
            real.stop_kubelet()?;
            format!(
                "node {node} no longer Ready, its kubelet stopped (only the node lifecycle \
                 controller turns it: is one running? NodeLifecycle::start)"
            )
        };
        wait_for(
            Api::<Node>::all(self.admin.clone()),
            node,
            &what,
            BOOT_LIMIT,
            move |n: &Node| nodejob_core::ready(n) == ready,
        )
        .await
        .map(drop)
    }
    async fn forbid_privileged_pods(&self) -> Result<String, Failure> {
        let name = format!("{}-baseline", self.namespace);
        namespace(&self.admin, &name, "baseline").await?;
        self.rbac.apply(&self.admin, SA_NAME, &[&name]).await?;
        Ok(name)
    }
    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), Failure> {
        Api::<Pod>::namespaced(self.admin.clone(), namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(fail("deleting a pod"))
    }
    async fn remove_node(&self, node: &str) -> Result<(), Failure> {
        Api::<Node>::all(self.admin.clone())
            .delete(node, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(fail("deleting a node"))
    }
    /// A real CA, placed in the node's keyring (`DIR/host/ca`), as an administrator places it
    /// out of band; and the control plane extended to it
    /// ([`ControlPlaneTrust`](crate::ControlPlaneTrust): its client trust, and chains to it
    /// from its serving and kubelet client certificates) until the backend is dropped, so that
    /// the kubelet `carotate issue` re-keys is still let in, and still lets the apiserver in
    /// once `finalize` leaves it trusting the new CA alone.
    async fn rotation_ca(&self, node: &str) -> Result<String, Failure> {
        let real = self.real_node(node)?;
        let ca =
            crate::pki::Ca::generate(&format!("nodejob-e2e {node} rotation")).map_err(Failure)?;
        crate::pki::Keyring::at(real.dir().join("host/ca"))
            .place(&ca)
            .map_err(Failure)?;
        let trust = crate::ControlPlaneTrust::extend(&ca).await?;
        (self.trusts.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(trust);
        Ok(ca.fingerprint())
    }
    /// A real node's kubelet is the one binary built for the run: its host's version is its
    /// os-release, which the kubelet reports as `osImage` (`stratum upgrade` stages it for the
    /// reboot).
    fn host_version(&self, node: &Node) -> String {
        (node.status.as_ref())
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.os_image.clone())
            .unwrap_or_default()
    }
    /// A power cut: the node's PID 1 killed, a new boot; returns once it is back, Ready.
    async fn reboot_node(&self, node: &str) -> Result<(), Failure> {
        let real = self.real_node(node)?;
        real.power_cycle().await.map(drop)
    }
}

/// The drivers' scenario on real nodes: nodes of the scenario's own, labelled
/// [`SCENARIO_LABEL`] with the name of its namespace, where the ServiceAccount of
/// `deploy/rbac.yaml` is bound (and in the drivers' namespace).
pub struct RealNodes {
    /// An admin client.
    pub admin: Client,
    /// The scenario's namespace.
    pub namespace: String,
    /// The label every node of the scenario carries.
    pub label: (String, String),
    /// The nodes.
    pub nodes: Vec<RealNode>,
}

impl RealNodes {
    /// Boots `count` real nodes at once ([`RealNode::start`]), labels them and binds the
    /// ServiceAccount.
    pub async fn start(count: usize) -> Result<Self, Failure> {
        let admin = client(config(None).await?)?;
        let name = unique("nj-real");
        namespace(&admin, &name, "privileged").await?;
        Rbac::committed()
            .apply(&admin, SA_NAME, &[&name, SA_NAMESPACE])
            .await?;
        let nodes =
            futures::future::try_join_all((0..count).map(|_| RealNode::start(&admin))).await?;
        let label = (SCENARIO_LABEL.to_string(), name.clone());
        for node in &nodes {
            label_node(&admin, node.name(), &label.0, &label.1).await?;
        }
        Ok(RealNodes {
            admin,
            namespace: name,
            label,
            nodes,
        })
    }

    /// The nodes' names.
    pub fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name().to_string()).collect()
    }

    /// Deployment `app` of `replicas` real Pods (the pause image) on the nodes, behind a
    /// budget allowing one disruption ([`deployment_behind_budget`]).
    pub async fn deployment_behind_budget(
        &self,
        app: &str,
        replicas: i32,
        limit: Duration,
    ) -> Result<(), Failure> {
        let ns = &self.namespace;
        deployment_behind_budget(&self.admin, ns, &self.label, app, replicas, limit).await
    }

    /// Stops every node ([`RealNode::stop`]).
    pub fn stop(self) -> Result<(), Failure> {
        self.nodes.into_iter().try_for_each(RealNode::stop)
    }
}
