//! `nodejob-node-agent`: plays the kubelet of test Nodes for nodejob's end-to-end suite, many
//! in one process and cheaply (hundreds of hollow nodes for the benchmarks, a host model whose
//! faults and timing a test scripts by annotations), beside the suite's real nodes (a real
//! kubelet, containerd and runc each, `e2e/node/node`), which cost about 166 MiB each and
//! cannot be steered so. Not for production: it runs no container.
//!
//! It adopts every Node labelled `nodejob.test/agent=true` (made by the test harness, or
//! registered by the agent itself with `--register N`, as N kubelets would register theirs:
//! kubemark's hollow nodes, many in one process), gives it a loopback address (127.0.0.2, .3, …, or the loopback
//! `InternalIP` it already has) and posts its status as a Ready kubelet would, with what
//! kube-scheduler needs to place pods there (capacity and allocatable, `nodeInfo` with the
//! kubelet version and a boot ID); it lifts the `node.kubernetes.io/not-ready` taint every new
//! Node is created with once the node is Ready (the node lifecycle controller's part). For
//! every Pod bound to an adopted node (by a test, or by kube-scheduler) it does what the fake
//! kubelet of `nodejob-fake` does, by the rules both take from `nodejob-host`: the first
//! container of a node Job's pod plays the host program its argv describes (the
//! `nodejob-test:` directives: exit code, log lines, run time; else, for an argv that execs
//! `stratum`, the node's host model; else 2s, exit 0, no output); any other container (a
//! Deployment's, a DaemonSet's) is a workload that runs, Ready, until its pod is deleted. It
//! writes the pod's status (Running, then terminated), honours graceful
//! deletion (SIGTERM; SIGKILL at the end of the grace period for a container that ignores
//! SIGTERM), deletes the pod for good once nothing runs in it, and serves the container's log
//! over HTTPS at
//! `<node address>:<port>/containerLogs/{namespace}/{pod}/{container}`, which the apiserver's
//! `pods/log` reads.
//!
//! It keeps each node alive as a kubelet does, at the kubelet's intervals (`heartbeat.rs`):
//! the node's Lease in `kube-node-lease` renewed every 10 s for 40 s (`lease.rs`; not while its
//! host is down), its status computed every 10 s and patched when it changed, else every 5
//! minutes. Two watches serve every node (the labelled Nodes, every Pod), however many it
//! plays: not one per node, as N kubelets would open.
//!
//! Each node has a host, kept in memory for as long as the agent runs (a restarted agent
//! starts every host afresh, a new boot): the `stratum` model of `nodejob_host::stratum`, at the
//! `--kubelet-version` (else the apiserver's version), booted as the node's `bootID`,
//! trusting and issuing from `nodejob_host::stratum::INITIAL_CA` (`sha256:` and 64 `1`s), with
//! the model's default timing and no fault. A Job's `stratum upgrade --to V` runs 20s and
//! exits 0; 5s later the agent posts the node `Ready` `False` (message `nodejob test: host
//! down (stratum)`), 30s later a new `bootID`, `kubeletVersion` V and `Ready` `True`.
//! `stratum carotate issue` restarts the node's components (NotReady 1s after the exit, Ready
//! 5s later); `carotate status` prints the node's trust as one JSON line. While the host is
//! down the node's pods wait as on any NotReady node; on each new boot the containers still
//! running there in pods of `restartPolicy: Never` (a Job's) are lost, as a real kubelet
//! reports them: pod `Failed`, exit 255, reason `Unknown`, no message
//! (`nodejob_host::status::lost_in_reboot`), their programs' later output and host effects
//! never happening. The model documents every command.
//!
//! The harness steers a node through annotations: `nodejob.test/ready: "false"` (NotReady:
//! no container starts, nothing is reported until Ready again),
//! `nodejob.test/kubelet: "unreachable"` (the log server stops listening: `pods/log` answers
//! 500), `nodejob.test/sigterm: "ignore"` (containers started from then on ignore SIGTERM) and
//! `nodejob.test/stratum-timing: "upgrade=2s,reboot-delay=1s,reboot=3s"` (the host model's
//! timing for the programs started from then on; fields left out keep the default) and
//! `nodejob.test/reboot: "<any new value>"` (the host reboots by itself: NotReady at once, the
//! model's reboot time later a new `bootID` at the same version, Ready). It reads a host
//! through the node's log server: `GET /stratum` at the node's address answers its version,
//! boot, whether it is up and how many times each `stratum` operation ran there, as one JSON
//! object (not through the apiserver: its node proxy refuses loopback addresses).
//!
//! ```text
//! nodejob-node-agent --kubeconfig /tmp/run/kubeconfig --port 10250
//! nodejob-node-agent --kubeconfig /tmp/run/kubeconfig --port 10250 --register 500 \
//!     --node-labels role=worker --zones zone-a,zone-b,zone-c,zone-d
//! ```
//!
//! Every action is one line on stderr. SIGTERM or SIGINT stops it.

/// Writes one line to stderr: an RFC 3339 time and the message.
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!(
            "{} {}",
            k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.3fZ"),
            format_args!($($arg)*)
        )
    };
}

mod addresses;
mod agent;
mod apiserver;
mod args;
mod heartbeat;
mod host;
mod lease;
mod logbook;
mod logserver;
mod node;
mod node_state;
mod pod;
mod register;
mod status;
mod task;
mod writer;

use std::process::ExitCode;

use anyhow::Context as _;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::args::{Args, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let args = match args::parse(std::env::args().skip(1)) {
        Ok(Command::Run(args)) => args,
        Ok(Command::Help) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("nodejob-node-agent: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("nodejob-node-agent: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = connect(&args).await?;
    let version = client
        .apiserver_version()
        .await
        .context("reading the apiserver's /version")?
        .git_version;
    say!(
        "connected to the apiserver ({version}); adopting nodes labelled {}; log servers on port {}",
        agent::AGENT_LABEL,
        args.port
    );
    let version = args.kubelet_version.clone().unwrap_or(version);
    if let Some(registration) = args.register.clone() {
        say!(
            "registering {} nodes, {} to {}",
            registration.count,
            registration.name(0),
            registration.name(registration.count - 1)
        );
        let api = apiserver::Apiserver::new(client.clone());
        tokio::spawn(async move { register::register_all(&api, &registration).await });
    }
    tokio::select! {
        () = agent::run(client, args.port, version) => Ok(()),
        signal = shutdown() => {
            say!("{}: stopping", signal?);
            Ok(())
        }
    }
}

async fn connect(args: &Args) -> anyhow::Result<Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading the kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("loading the cluster configuration")?,
    };
    let cluster = config.cluster_url.to_string();
    Client::try_from(config).with_context(|| format!("building a client for {cluster}"))
}

/// Returns the name of the first SIGTERM or SIGINT.
async fn shutdown() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}
