//! `nodejob-node-agent`: plays the kubelet of test Nodes for nodejob's end-to-end suite, on a
//! machine where no kubelet can run. Not for production: it runs no container.
//!
//! It registers nothing itself: it adopts every Node labelled `nodejob.test/agent=true` (made
//! by the test harness), gives it a loopback address (127.0.0.2, .3, …, or the loopback
//! `InternalIP` it already has) and posts its status as a Ready kubelet would. For every Pod
//! bound to an adopted node it does what the fake kubelet of `nodejob-fake` does: it plays
//! the host program that the first container's argv describes (`nodejob_fake::host`: exit
//! code, log lines, run time), writes the pod's status (Running, then terminated), honours
//! graceful deletion, and serves the container's log over HTTPS at
//! `<node address>:<port>/containerLogs/{namespace}/{pod}/{container}`, which the apiserver's
//! `pods/log` reads.
//!
//! The harness steers a node through annotations: `nodejob.test/ready: "false"` (NotReady:
//! no container starts, nothing is reported until Ready again) and
//! `nodejob.test/kubelet: "unreachable"` (the log server stops listening: `pods/log` answers
//! 500).
//!
//! ```text
//! nodejob-node-agent --kubeconfig /tmp/run/kubeconfig --port 10250
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
mod logbook;
mod logserver;
mod node;
mod plan;
mod pod;
mod status;

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
