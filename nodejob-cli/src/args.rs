//! The command line: clap's types, and nothing else (what the flags mean for a plan is
//! [`crate::settings`]'s).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use upgrade_driver::MaxUnavailable;

use crate::parse;

/// Run privileged, node-pinned Kubernetes Jobs: rolling node upgrades, cluster CA rotations and
/// one-off host commands.
///
/// Against a cluster, the kubeconfig is loaded as kubectl loads it (`--kubeconfig`, else
/// `KUBECONFIG`, else `~/.kube/config`, else the in-cluster service account). Installed as
/// `kubectl-nodejob` on the PATH, it also runs as a kubectl plugin: `kubectl nodejob ...`.
///
/// No cluster? `--simulate N` runs `upgrade`, `rotate-ca`, `run`, `jobs` and `status` against an
/// in-memory cluster of N nodes: `nodejob upgrade --simulate 5 --to v1.38.0`.
///
/// Exit codes: 0 done; 1 the operation failed (the message names the node, the step, the exit
/// code and where to look); 2 bad usage or invalid input, before any API call; 3 another holder
/// has the Lease (try later); `run`: the container's exit code.
#[derive(Debug, Parser)]
#[command(name = "nodejob", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Flags every subcommand takes.
#[derive(Clone, Debug, Args)]
pub(crate) struct Global {
    /// The kubeconfig file (as kubectl's `--kubeconfig`).
    #[arg(long, global = true, env = "KUBECONFIG", hide_env_values = true)]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (as kubectl's `--context`).
    #[arg(long, global = true)]
    pub(crate) context: Option<String>,
    /// The namespace of the Jobs, the Lease and the Events: `kube-system` as in `deploy/`
    /// (the apiserver takes Events about Nodes only there or in `default`).
    #[arg(short, long, global = true, default_value = "kube-system")]
    pub(crate) namespace: String,
    /// More logging on stderr: -v, -vv.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// `text` for people; `json`: one event per line, for automation.
    #[arg(short, long, global = true, value_enum, default_value = "text")]
    pub(crate) output: Format,
}

/// `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// For people: bars on a terminal, timestamped lines otherwise.
    Text,
    /// For automation: one JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Roll nodes to a new version: cordon, drain, the host upgrade, reboot, health, uncordon,
    /// node by node (control-plane nodes first, one at a time; then zone by zone).
    Upgrade(Upgrade),
    /// Rotate the cluster CA node by node: stage the new CA beside the old one, reissue every
    /// node's leaves from it, then finalize (drop the old CA), each phase gated on what every
    /// node reports.
    RotateCa(RotateCa),
    /// Run one privileged Job on a node and exit with its container's exit code.
    Run(Run),
    /// Print the Job `run` would create, without touching a cluster.
    Render(Render),
    /// The node Jobs in the namespace: node, status, exit code, age.
    Jobs(Jobs),
    /// Who holds the Lease (operation, target, epoch, last renewal), and each node's state
    /// from the drivers' records (version, cordoned by us, upgrade, CA phase).
    Status(Status),
    /// Serve these operations as Model Context Protocol tools over stdio, for assistants and
    /// automation: read-only `status`, `jobs`, `render`, `upgrade_preview`,
    /// `rotate_ca_preview`; `upgrade`, `rotate_ca`, `rotate_ca_abort` and `run` only with the
    /// `preview_token` their preview returned, while the cluster is as previewed.
    Mcp(Mcp),
    /// Shell completions: `nodejob completions bash > /etc/bash_completion.d/nodejob`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `--simulate N` and its companions.
#[derive(Debug, Args, Clone)]
pub(crate) struct Simulate {
    /// Run against an in-memory cluster of N nodes (3 control-plane when N >= 3, two zones, a
    /// Deployment behind a budget), in virtual time shown 100x faster.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=5000))]
    pub(crate) simulate: Option<u16>,
}

/// `--simulate N` for the commands that look at a cluster rather than change it.
#[derive(Debug, Args, Clone)]
pub(crate) struct SimulateHistory {
    /// Look at an in-memory cluster of N nodes (as `upgrade --simulate N` builds it) after a
    /// simulated history, each step run by the real drivers: an upgrade to v1.38.0 whose host
    /// step failed on the last node, a CA rotation whose `carotate issue` failed on that node,
    /// and a 10-minute host probe (`nodejob run`) still running on the first node. Their Jobs
    /// are what a real cluster would keep: the failed ones for inspection, the running one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=5000))]
    pub(crate) simulate: Option<u16>,
}

#[derive(Debug, Args)]
pub(crate) struct Upgrade {
    /// The version to move the nodes to, e.g. v1.38.0.
    #[arg(long)]
    pub(crate) to: String,
    /// Only nodes matching this label selector.
    #[arg(short = 'l', long)]
    pub(crate) selector: Option<String>,
    /// Only these nodes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(crate) nodes: Vec<String>,
    /// How many nodes may be unavailable at once: a count or a percentage (25%).
    #[arg(long, default_value = "1", value_parser = parse::max_unavailable)]
    pub(crate) max_unavailable: MaxUnavailable,
    /// The drain's bound per node (90s, 10m, 1h).
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) drain_timeout: Duration,
    /// Evict Pods with emptyDir volumes (their data is lost).
    #[arg(long)]
    pub(crate) delete_emptydir_data: bool,
    /// Evict Pods no controller manages (they are not recreated).
    #[arg(long)]
    pub(crate) force: bool,
    /// The host upgrade Job's deadline.
    #[arg(long, default_value = "30m", value_parser = parse::duration)]
    pub(crate) deadline: Duration,
    /// How long a node has to reboot and come back Ready at the target.
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) reboot_timeout: Duration,
    /// The on-host binary.
    #[arg(long, default_value = "/usr/local/bin/stratum")]
    pub(crate) binary: String,
    /// A maintenance window: `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 Europe/Berlin`.
    /// No node starts outside it; a node in flight finishes.
    #[arg(long)]
    pub(crate) window: Option<String>,
    /// Stop starting nodes after this many failed. At most --max-unavailable: a failed node
    /// stays cordoned and counts as unavailable, so a larger budget is refused (raise
    /// --max-unavailable with it).
    #[arg(long, default_value = "1")]
    pub(crate) failure_budget: u32,
    /// Check each upgraded node with the command after `--` (exit 0 passes) before the next.
    #[arg(long, requires = "health_argv")]
    pub(crate) health_check: bool,
    /// The health check's argv.
    #[arg(last = true, value_name = "ARGV")]
    pub(crate) health_argv: Vec<String>,
    /// Print what would happen, change nothing.
    #[arg(long)]
    pub(crate) preview: bool,
    #[command(flatten)]
    pub(crate) sim: Simulate,
    /// With --simulate: this node's host upgrade fails, to show the failure path.
    #[arg(long, value_name = "NODE", requires = "simulate")]
    pub(crate) simulate_fail: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RotateCa {
    /// The new CA's public certificate: a PEM file holding one CERTIFICATE block and nothing
    /// else (never its private key). The hosts get its fingerprint only (sha256 of the DER).
    /// Required, except with --simulate: the simulation then rotates to a built-in example CA
    /// (a public certificate made for it, whose key was discarded), the same every run.
    #[arg(long, value_name = "FILE", required_unless_present = "simulate")]
    pub(crate) new_ca: Option<PathBuf>,
    /// Only nodes matching this label selector.
    #[arg(short = 'l', long)]
    pub(crate) selector: Option<String>,
    /// Only these nodes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(crate) nodes: Vec<String>,
    /// How many workers run a phase at once (control-plane nodes: always one at a time).
    #[arg(long, default_value = "1")]
    pub(crate) concurrency: u32,
    /// Each host Job's deadline.
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) deadline: Duration,
    /// After `issue`, how long a node has to restart its components and be Ready again.
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) ready_timeout: Duration,
    /// The on-host binary.
    #[arg(long, default_value = "/usr/local/bin/stratum")]
    pub(crate) binary: String,
    /// A maintenance window: `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 Europe/Berlin`.
    /// No batch starts outside it; a node in flight finishes; a rerun resumes.
    #[arg(long)]
    pub(crate) window: Option<String>,
    /// Stop a phase after this many nodes failed (the phase goes on over the others until
    /// then); no phase starts after a failure.
    #[arg(long, default_value = "1")]
    pub(crate) failure_budget: u32,
    /// Print what a run would do (what each node last reported, the next phase and where,
    /// who disagrees, the Lease), change nothing.
    #[arg(long, conflicts_with = "abort")]
    pub(crate) preview: bool,
    /// Undo a rotation that has not begun `issue`: remove the staged new CA from every node.
    /// Refused once any node has begun `issue` (only forward is safe then). With --simulate,
    /// the simulated cluster is first staged (a rotation stopped before `issue`), so that
    /// there is something to undo.
    #[arg(long)]
    pub(crate) abort: bool,
    #[command(flatten)]
    pub(crate) sim: Simulate,
    /// With --simulate: this node's `carotate issue` fails, to show the failure path.
    #[arg(long, value_name = "NODE", requires = "simulate")]
    pub(crate) simulate_fail: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct Jobs {
    /// Only Jobs matching this label selector (as `kubectl get jobs -l`), e.g.
    /// `stratum.ciq.com/upgrade` for the upgrade's host Jobs.
    #[arg(short = 'l', long)]
    pub(crate) selector: Option<String>,
    #[command(flatten)]
    pub(crate) sim: SimulateHistory,
}

#[derive(Debug, Args)]
pub(crate) struct JobArgs {
    /// The node to run on.
    #[arg(long)]
    pub(crate) node: String,
    /// Admit the pod as system-node-critical (only on a drained node: it may evict workloads).
    #[arg(long)]
    pub(crate) critical: bool,
    /// The Job's deadline.
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) deadline: Duration,
    /// The Job's name (default: `nodejob-run-<node>`).
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// The image, pinned by @sha256: digest (default: nodejob's pinned image).
    #[arg(long)]
    pub(crate) image: Option<String>,
    /// The command, after `--`: `nsenter --target 1 ... -- /usr/local/bin/stratum health`.
    #[arg(last = true, required = true, value_name = "ARGV")]
    pub(crate) argv: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct Run {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// Print nothing of the log: only exit with the container's code.
    #[arg(long)]
    pub(crate) exit_code_only: bool,
    #[command(flatten)]
    pub(crate) sim: Simulate,
}

#[derive(Debug, Args)]
pub(crate) struct Render {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// yaml or json.
    #[arg(short = 'f', long = "format", default_value = "yaml", value_parser = ["yaml", "json"])]
    pub(crate) format: String,
}

#[derive(Debug, Args)]
pub(crate) struct Mcp {
    /// Serve one in-memory cluster of N nodes (as `upgrade --simulate N` builds it), kept for
    /// the whole session, so that a preview and the run after it see the same cluster.
    #[command(flatten)]
    pub(crate) sim: Simulate,
}

#[derive(Debug, Args)]
pub(crate) struct Status {
    #[command(flatten)]
    pub(crate) sim: SimulateHistory,
}
