//! The command line: clap's types, and nothing else (what the flags mean for a plan is
//! [`crate::settings`]'s).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use upgrade_driver::{MaxUnavailable, VersionSource};

use crate::parse;
use crate::virtual_clock::Speed;

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
/// code and where to look); 2 bad usage or invalid input, refused before any change; 3 another holder
/// has the Lease (try later); 4 stopped with nothing failed, not now (outside the maintenance
/// window, the Lease lost, too many nodes unavailable, still paused by `nodejob pause` 12 hours
/// on: run again to resume); 5 the cluster's
/// apiserver cannot be reached (one whose certificate the kubeconfig's certificate-authority
/// does not trust, or a server that does not answer as one, is 2, at once); 130 interrupted (Ctrl-C); `run`: the container's exit code.
#[derive(Debug, Parser)]
#[command(
    name = "nodejob",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The exit codes of `upgrade` and `rotate-ca`, in their `--help`.
const EXIT_ROLL: &str = "Exit codes: 0 done; 1 a node failed (named, with the step, the exit \
    code, where to look and the command to retry); 2 bad usage or invalid input, refused before \
    any change (a --nodes or --selector that names no node of the cluster included); 3 another holder has the Lease (try later); 4 stopped with nothing failed, not now \
    (outside the maintenance window, the Lease lost, too many nodes unavailable, still paused \
    by `nodejob pause` 12 hours on; for `upgrade`, nodes left blocked by budgets \
    under --on-undrainable skip or quarantine): run \
    the same command again to resume; 5 the cluster's apiserver cannot be reached (one whose \
    certificate the kubeconfig's certificate-authority does not trust, or a server that does not \
    answer as one: 2, at once); 130 interrupted \
    (Ctrl-C): run the same command again to resume.";

/// The exit codes of `run`, in its `--help`.
const EXIT_RUN: &str = "Exit codes: the container's exit code (0 when it succeeded); 1 the Job \
    could not run or its end could not be read; 2 bad usage or invalid input, or a node the \
    cluster does not have, before any Job is created; 3 a roll is under way on the node, \
    before any Job is created (--force goes on); 5 the cluster's apiserver cannot be reached (one whose certificate the kubeconfig's \
    certificate-authority does not trust, or a server that does not answer as one: 2, at once); \
    130 interrupted (Ctrl-C; the Job goes on \
    in the cluster).";

/// The exit codes of `jobs` and `status`, in their `--help`.
const EXIT_READ: &str = "Exit codes: 0 done; 1 the cluster answered with an error (named); 2 bad \
    usage or invalid input, before any API call; 5 the cluster's apiserver cannot be reached (one \
    whose certificate the kubeconfig's certificate-authority does not trust, or a server that does \
    not answer as one: 2, at once).";

/// The exit codes of the commands that touch no cluster, in their `--help`.
const EXIT_LOCAL: &str = "Exit codes: 0 done; 2 bad usage or invalid input.";

/// The exit codes of `controller`, in its `--help`.
const EXIT_CONTROLLER: &str = "Exit codes: 0 stopped by Ctrl-C, or (--simulate) every resource \
    Ready; 1 a simulated resource Stalled, or the controller could not go on (the CRDs not \
    applied, no right to read them); 2 bad usage or a manifest that is neither a NodeUpgrade \
    nor a CARotation.";

/// The exit codes of `mcp`, in its `--help`.
const EXIT_MCP: &str = "Exit codes: 0 the client closed stdin; 1 the server could not start; 2 \
    bad usage. A tool's failure, an unreachable cluster included, is the tool's answer, not an \
    exit.";

/// The heading the global flags are listed under in every `--help`, apart from the command's.
const GLOBAL: &str = "Global options";

/// Flags every subcommand takes.
#[derive(Clone, Debug, Args)]
pub(crate) struct Global {
    /// The kubeconfig file (as kubectl's `--kubeconfig`).
    #[arg(long, global = true, help_heading = GLOBAL, env = "KUBECONFIG", hide_env_values = true)]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (as kubectl's `--context`).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) context: Option<String>,
    /// Requests a second to the apiserver, on average, at most (client-go's QPS; a watch takes
    /// none). Default 100: a roll of about 4,500 nodes at max_unavailable 10% (some 40 requests
    /// per node over a 3-minute cycle) is not slowed by it. Not with --simulate.
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "N",
          allow_negative_numbers = true, value_parser = parse::qps)]
    pub(crate) qps: Option<f64>,
    /// Requests at once after an idle spell (client-go's Burst). Default 200: a batch of 50
    /// nodes opens at once. Not with --simulate.
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "N",
          allow_negative_numbers = true, value_parser = parse::burst)]
    pub(crate) burst: Option<u32>,
    /// The namespace of the Jobs, the Lease and the Events: `kube-system` as in `deploy/`
    /// (the apiserver takes Events about Nodes only there or in `default`).
    #[arg(short, long, global = true, help_heading = GLOBAL, default_value = "kube-system")]
    pub(crate) namespace: String,
    /// More logging on stderr: -v, -vv.
    #[arg(short, long, global = true, help_heading = GLOBAL, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// `text` for people; `json` for automation (`upgrade`, `rotate-ca`: one event per line,
    /// each with its `time`, RFC 3339 by the cluster's clock;
    /// `run`: one object, its exit code and log; `pause`, `resume`: one object, the switch
    /// before and after); `yaml`: `render`, `run --dry-run`, `status`, `pause`, `resume`, and
    /// `upgrade` (the NodeUpgrade its flags describe, nothing run) only.
    #[arg(short, long, global = true, help_heading = GLOBAL, value_enum, default_value = "text")]
    pub(crate) output: Format,
}

/// `e` without clap's tip for an unknown flag, "to pass '--flag' as a value, use '-- --flag'":
/// after `--` is the argv `run` and `upgrade --health-check` execute on a node, so following
/// the tip would run the flag rather than give it to nodejob (`run --dry-run` once ran the
/// Job so). The other tips (a similar flag) stay.
pub(crate) fn without_trailing_tip(e: clap::Error, command: &clap::Command) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    let is_trailing_tip =
        |tip: &clap::builder::StyledStr| tip.to_string().contains("as a value, use '");
    let Some(ContextValue::StyledStrs(tips)) = e.get(ContextKind::Suggested) else {
        return e;
    };
    if !tips.iter().any(is_trailing_tip) {
        return e;
    }
    let kept: Vec<_> = tips
        .iter()
        .filter(|t| !is_trailing_tip(t))
        .cloned()
        .collect();
    let mut without = clap::Error::new(e.kind()).with_cmd(command);
    for (kind, value) in e.context() {
        if kind != ContextKind::Suggested {
            without.insert(kind, value.clone());
        }
    }
    if !kept.is_empty() {
        without.insert(ContextKind::Suggested, ContextValue::StyledStrs(kept));
    }
    without
}

/// `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// For people: bars on a terminal, timestamped lines otherwise (`render`: YAML).
    Text,
    /// For automation: JSON.
    Json,
    /// YAML, as kubectl's `-o yaml` (`render`, `run --dry-run`, `status`, `pause`, `resume`).
    Yaml,
    /// The table with more columns, as kubectl's `-o wide` (`status`: roles, zone; `jobs`:
    /// UID, created).
    Wide,
}

/// The commands that print a table with a wide form (`-o wide`).
pub(crate) const WIDE: [&str; 2] = ["status", "jobs"];

impl Format {
    /// Refuses `-o yaml` for `command`, which prints text or JSON only.
    pub(crate) fn text_or_json(self, command: &str) -> Result<Format, crate::exit::Exit> {
        match self {
            Format::Yaml => Err(crate::exit::Exit::usage(format!(
                "-o yaml: `nodejob {command}` prints text or json (-o json); yaml is for \
                 `render`, `run --dry-run`, `status`, `pause`, `resume`, `upgrade` and \
                 `rotate-ca` (the NodeUpgrade or CARotation its flags describe)"
            ))),
            format => Ok(format),
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Roll nodes to a new version: cordon, drain, the host upgrade, reboot, health, uncordon,
    /// node by node (control-plane nodes first, one at a time; then zone by zone).
    #[command(after_help = EXIT_ROLL)]
    Upgrade(Upgrade),
    /// Rotate the cluster CA node by node: stage the new CA beside the old one, reissue every
    /// node's leaves from it, then finalize (drop the old CA), each phase gated on what every
    /// node reports.
    ///
    /// The long-roll options of `upgrade` do not apply here: no --on-undrainable or
    /// --max-blocked (a rotation drains no node, so no budget blocks one), no --soak (its nodes
    /// neither reboot nor change version, and its gates read every node's own report after
    /// each phase before the next starts), no --on-failure rollback (--abort undoes a rotation
    /// until any node has begun `issue`; after that, only forward is safe).
    #[command(after_help = EXIT_ROLL)]
    RotateCa(RotateCa),
    /// Run one privileged Job on a node and exit with its container's exit code.
    #[command(after_help = EXIT_RUN)]
    Run(Run),
    /// Print the Job `run` would create, without touching a cluster.
    #[command(after_help = EXIT_LOCAL)]
    Render(Render),
    /// The node Jobs in the namespace: node, status, exit code, age.
    #[command(after_help = EXIT_READ)]
    Jobs(Jobs),
    /// Who holds the Lease (operation, target, epoch, last renewal), and each node's state
    /// from the drivers' records (version, cordoned by us, upgrade, CA phase).
    #[command(after_help = EXIT_READ)]
    Status(Status),
    /// Pause every roll until `nodejob resume`: the step under way finishes, no other starts.
    ///
    /// `upgrade` and `rotate-ca`, in flight or to come, finish the step under way on each node
    /// and start no other until `nodejob resume`. Kept in the cluster as an annotation on the
    /// shared Lease object (who, when, why), whoever holds the Lease; a paused run says so in
    /// its progress, goes on when resumed, and ends paused (exit 4) if still paused 12 hours
    /// after it began to wait. `status` shows it.
    #[command(after_help = EXIT_READ)]
    Pause(PauseArgs),
    /// Lift the pause switch `nodejob pause` set: paused runs go on with their next step.
    #[command(after_help = EXIT_READ)]
    Resume(ResumeArgs),
    /// Serve these operations as Model Context Protocol tools over stdio, for assistants and
    /// automation: read-only `status`, `jobs`, `render`, `upgrade_preview`,
    /// `rotate_ca_preview`, `pause_preview`; `upgrade`, `rotate_ca`, `rotate_ca_abort`, `run`,
    /// `pause` and `resume` only with the `preview_token` their preview returned, while the
    /// cluster is as previewed.
    #[command(after_help = EXIT_MCP)]
    Mcp(Mcp),
    /// Reconcile NodeUpgrade and CARotation resources: each is rolled as `nodejob upgrade` or
    /// `nodejob rotate-ca` would roll its spec, one at a time under the shared Lease, its
    /// status written as it goes.
    ///
    /// On the kubeconfig's cluster it runs until Ctrl-C (the run under way stops at a step
    /// boundary), printing each resource's status as it changes; the CRDs must be applied
    /// first (`nodejob render-crds | kubectl apply --server-side -f -`). Replicas elect a
    /// leader through the Lease `nodejob-controller` in --namespace (15 s; the others wait,
    /// and take over once a leader is gone); a leader stopped releases it. With --simulate N
    /// -f FILE it applies the NodeUpgrades and CARotations of FILE to an in-memory cluster and
    /// runs until each is Ready or Stalled, then prints them as `kubectl get nu` and
    /// `kubectl get car` do.
    #[command(after_help = EXIT_CONTROLLER)]
    Controller(ControllerArgs),
    /// Print the CustomResourceDefinitions of the declarative rolls (NodeUpgrade, CARotation),
    /// touching no cluster: `nodejob render-crds | kubectl apply --server-side -f -`. They are
    /// what `deploy/controller/crds.yaml` holds.
    #[command(after_help = EXIT_LOCAL)]
    RenderCrds,
    /// Shell completions: `nodejob completions bash > /etc/bash_completion.d/nodejob`.
    #[command(after_help = EXIT_LOCAL)]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `nodejob controller`'s flags.
#[derive(Debug, Args)]
pub(crate) struct ControllerArgs {
    /// With --simulate: the NodeUpgrade and CARotation manifests to apply to the simulated
    /// cluster first (on a real cluster, apply them with kubectl).
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        requires = "simulate"
    )]
    pub(crate) files: Vec<std::path::PathBuf>,
    /// Where `/metrics` is served (Prometheus text, or OpenMetrics when the scraper asks):
    /// HOST:PORT or :PORT; 0 serves none. Default: :8080 on a cluster, none with --simulate.
    #[arg(long, value_name = "ADDR")]
    pub(crate) metrics_bind_address: Option<String>,
    /// Where `/healthz` (the process answers) and `/readyz` (the apiserver answered it) are
    /// served: HOST:PORT or :PORT; 0 serves none. Default: :8081 on a cluster, none with
    /// --simulate.
    #[arg(long, value_name = "ADDR")]
    pub(crate) health_probe_bind_address: Option<String>,
    /// How log lines on stderr are written: text for a person, json (one object per line) for
    /// a log collector.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) log_format: LogFormat,
    #[command(flatten)]
    pub(crate) sim: Simulate,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// A line a person reads.
    Text,
    /// One JSON object per line.
    Json,
}

/// `--dry-run[=client|server]`, as kubectl users type it: `--preview` by another name.
#[derive(Debug, Args, Clone)]
pub(crate) struct DryRunArg {
    /// As kubectl's: `--dry-run`, `--dry-run=client` and `--dry-run=server` all mean
    /// --preview (which reads the cluster and writes nothing); `--dry-run=none` is no dry run.
    #[arg(
        long,
        value_name = "WHERE",
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "client"
    )]
    pub(crate) dry_run: Option<DryRun>,
}

impl DryRunArg {
    /// Whether `--dry-run` was given, in any of its forms but `none` (kubectl's "no dry run").
    pub(crate) fn given(&self) -> bool {
        self.dry_run.is_some_and(|d| d != DryRun::None)
    }
}

/// `--dry-run`'s values, as kubectl's (both mean the preview here: it reads the cluster and
/// writes nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DryRun {
    // kubectl: nothing sent to the server.
    Client,
    // kubectl: sent with `dryRun=All`.
    Server,
    // kubectl: no dry run; the operation runs.
    None,
}

/// The most nodes `--simulate N` builds: the roll of 10,000 costs what the engine's does
/// (`nodejob-bench`'s command-beside-engine table).
const MAX_SIMULATED_NODES: u16 = 10_000;

/// `--simulate N`'s parser: 1 to [`MAX_SIMULATED_NODES`], as the help says.
fn simulated_nodes() -> clap::builder::RangedI64ValueParser<u16> {
    clap::value_parser!(u16).range(1..=i64::from(MAX_SIMULATED_NODES))
}

/// `--simulate N` and its companions.
#[derive(Debug, Args, Clone)]
pub(crate) struct Simulate {
    /// Run against an in-memory cluster of N nodes, 1 to 10000 (3 control-plane when N >= 3,
    /// the workers in two zones, a Deployment `web` with a replica per worker behind a
    /// budget allowing a tenth of them, at least one, down), in virtual time. The first line of output says so. Its host programs are simulated too: `stratum`
    /// is modelled (upgrade, reboot, health, the CA steps) and any other command (`/bin/false`
    /// included) runs 2 s and exits 0, unless directives in its argv script it:
    /// `nodejob-test:exit=N` (exit status N), `nodejob-test:log=TEXT` (print a line; one per
    /// directive), `nodejob-test:run=SECONDS` (run that long), `nodejob-test:sigterm=ignore`
    /// (run on after SIGTERM until the kill), e.g.
    /// `--health-check -- check nodejob-test:exit=1`.
    #[arg(long, value_name = "N", value_parser = simulated_nodes())]
    pub(crate) simulate: Option<u16>,
    /// With --simulate: how fast virtual time is shown: `100` (or `100x`) for 100 virtual
    /// seconds a real second, `max` for no pacing. Default: 100 when stdout is a terminal and
    /// the output is text (a person watches) and under `mcp` (an assistant relays the
    /// progress), max otherwise (a file, a pipe, -o json).
    #[arg(long, value_name = "SPEED", requires = "simulate", value_parser = parse::speed)]
    pub(crate) speed: Option<Speed>,
    #[command(flatten)]
    pub(crate) start: SimulateStart,
}

/// `--simulate-start`: where a simulated cluster's virtual clock starts.
#[derive(Debug, Args, Clone)]
pub(crate) struct SimulateStart {
    /// With --simulate: when the virtual clock starts, an RFC 3339 instant from Thu
    /// 2026-01-01T00:00:00Z on. Default: now, by the machine's clock (so that a CA made today
    /// is valid in the simulation). Given, every simulated run prints the same lines (the
    /// tests set NODEJOB_SIMULATE_START, which a run without --simulate ignores). The clock,
    /// not the machine's, is what --window is checked against.
    #[arg(
        long,
        value_name = "INSTANT",
        env = "NODEJOB_SIMULATE_START",
        hide_env_values = true,
        value_parser = parse::simulate_start
    )]
    pub(crate) simulate_start: Option<jiff::Timestamp>,
}

/// `--simulate N` for the commands that look at a cluster rather than change it.
#[derive(Debug, Args, Clone)]
pub(crate) struct SimulateHistory {
    /// Look at an in-memory cluster of N nodes, 1 to 10000 (as `upgrade --simulate N` builds
    /// it), after a simulated history, each step run by the real drivers: an upgrade to v1.38.0
    /// whose host step failed on the last node, a CA rotation whose `carotate issue` failed on
    /// that node, and a 10-minute host probe (`nodejob run`) still running on the first node.
    /// Their Jobs
    /// are what a real cluster would keep: the failed ones for inspection, the running one.
    #[arg(long, value_name = "N", value_parser = simulated_nodes())]
    pub(crate) simulate: Option<u16>,
    #[command(flatten)]
    pub(crate) start: SimulateStart,
}

#[derive(Debug, Args)]
pub(crate) struct Upgrade {
    /// The version to move the nodes to, e.g. v1.38.0: with --version-from kubelet (the
    /// default) a Kubernetes version vMAJOR.MINOR.PATCH[-pre]. A target the selected nodes'
    /// versions cannot be ordered against, or a node reporting none, is refused before any
    /// write (exit 2), naming the nodes.
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
    /// The drain's bound per node; a duration: 90s, 10m, 1.5h, 1h30m.
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) drain_timeout: Duration,
    /// Evict Pods with emptyDir volumes (their data is lost).
    #[arg(long)]
    pub(crate) delete_emptydir_data: bool,
    /// Evict Pods no controller manages (they are not recreated).
    #[arg(long)]
    pub(crate) force: bool,
    /// The host upgrade Job's deadline; a duration: 90s, 10m, 1.5h, 1h30m.
    #[arg(long, default_value = "30m", value_parser = parse::duration)]
    pub(crate) deadline: Duration,
    /// How long a node has to reboot and come back Ready at the target; a duration: 90s, 10m, 1.5h, 1h30m.
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) reboot_timeout: Duration,
    /// The on-host binary.
    #[arg(long, default_value = "/usr/local/bin/stratum")]
    pub(crate) binary: String,
    /// Where each node reports the version --to names: `kubelet` (its kubelet's version, for
    /// an upgrade that moves the kubelet), `os-image` (its osImage, the os-release PRETTY_NAME,
    /// for an OS upgrade that does not), or `label=KEY` (its label KEY, set by the host after
    /// a boot).
    #[arg(long, default_value = "kubelet", value_name = "SOURCE", value_parser = parse::version_source)]
    pub(crate) version_from: VersionSource,
    /// A maintenance window: `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 Europe/Berlin`.
    /// No node starts outside it; a node in flight finishes. It is checked against the
    /// cluster's clock: under --simulate the virtual one, which starts now unless
    /// --simulate-start says otherwise.
    #[arg(long)]
    pub(crate) window: Option<String>,
    /// Stop starting nodes after this many failed. At most --max-unavailable: a failed node
    /// stays cordoned and counts as unavailable, so a larger budget is refused (raise
    /// --max-unavailable with it).
    #[arg(long, default_value = "1")]
    pub(crate) failure_budget: u32,
    /// Move nodes to a version older than the one they run. Without it, a --to older than any
    /// selected node's version is refused, naming the nodes and their versions, before any
    /// write.
    #[arg(long)]
    pub(crate) allow_downgrade: bool,
    /// Go past the Kubernetes version skew policy (kubernetes.io/releases/version-skew-policy,
    /// kubelet). Without it, a kubelet
    /// upgrade (the default: nodes report their kubelet's version) is refused, naming the rule,
    /// the nodes and the versions, when a worker would run a kubelet newer than the apiserver,
    /// more than three minor versions older than it, or a minor version past the one after its
    /// own: before any write (exit 2) and again before each batch (exit 4). Control-plane nodes
    /// go first and may carry the apiserver: their workers are judged once they had their turn.
    /// With it, every breach is said in the preview, the progress and the report.
    #[arg(long)]
    pub(crate) allow_skew: bool,
    /// Check each upgraded node with the command after `--` (exit 0 passes) before the next.
    #[arg(long, requires = "health_argv")]
    pub(crate) health_check: bool,
    /// The health check's argv.
    #[arg(last = true, value_name = "ARGV")]
    pub(crate) health_argv: Vec<String>,
    /// Print what would happen, change nothing. It exits as the run would: 2 for a plan the
    /// run refuses, 4 where a run now would start no node (the window closed, the rolls
    /// paused: said with the window's next opening, or who paused, when and why).
    #[arg(long)]
    pub(crate) preview: bool,
    #[command(flatten)]
    pub(crate) dry_run: DryRunArg,
    #[command(flatten)]
    pub(crate) sim: Simulate,
    /// With --simulate: this node's host upgrade fails, to show the failure path.
    #[arg(long, value_name = "NODE", requires = "simulate")]
    pub(crate) simulate_fail: Option<String>,
    /// Write this roll as a NodeUpgrade resource for `nodejob controller` instead of running it
    /// here: the preview is shown first and refuses as it would; then the resource is created,
    /// or its spec replaced. With -o yaml, the resource is printed and nothing is read or
    /// written (to keep it in Git).
    #[arg(long, conflicts_with_all = ["preview", "simulate"])]
    pub(crate) apply: bool,
    /// The NodeUpgrade's name, with --apply or -o yaml. Default: upgrade-to-TARGET
    /// (`upgrade-to-v1-38-0`).
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
    #[command(flatten)]
    pub(crate) long_roll: LongRoll,
}

/// The heading of the options that let a long roll run by itself, in `upgrade --help`.
const LONG_ROLL: &str = "Long rolls (blocked nodes, soak, rollback)";

/// `upgrade`'s options for a roll that runs by itself, over nights: what a node a budget
/// blocks comes to, how long each node soaks, what a failed node comes to. (`rotate-ca` takes none: it drains nothing, so
/// no budget blocks one of its nodes, and its gates already read every node's report between
/// phases.)
#[derive(Debug, Args, Clone)]
pub(crate) struct LongRoll {
    /// What a node comes to whose drain PodDisruptionBudgets allowing no disruption hold past
    /// --drain-timeout. The report and `nodejob status` name each blocked node, the budgets
    /// that blocked it and the Pods left.
    #[arg(long, value_name = "POLICY", value_enum, default_value = "fail", help_heading = LONG_ROLL)]
    pub(crate) on_undrainable: OnUndrainable,
    /// With --on-undrainable skip or quarantine: how many blocked nodes (skipped or
    /// quarantined; those an earlier run quarantined toward the same version included) the
    /// roll goes on past (default 1); one more stops it as a failure does (exit 1, naming
    /// them). Refused with fail, where a blocked drain fails its node.
    #[arg(long, value_name = "N", help_heading = LONG_ROLL)]
    pub(crate) max_blocked: Option<u32>,
    /// With --simulate: a Pod pinned to each of these nodes (comma-separated, or the flag
    /// repeated) behind a budget that never allows a disruption, so that their drains are
    /// blocked (to show --on-undrainable and --max-blocked).
    #[arg(
        long,
        value_name = "NODES",
        value_delimiter = ',',
        requires = "simulate",
        help_heading = LONG_ROLL
    )]
    pub(crate) simulate_undrainable: Vec<String>,
    /// How long each upgraded node, back in service, must stay Ready on the same boot (and
    /// pass the health check again at the end) before the next batch starts; a duration: 90s,
    /// 10m, 1.5h, 1h30m (at most 24h). A node that breaks its soak (NotReady, rebooted,
    /// unhealthy) fails, counted against --failure-budget. The time left is shown as it goes;
    /// the soak's start is recorded on the node (annotation stratum.ciq.com/upgrade-soak), so
    /// a rerun resumes it. Default: no soak.
    #[arg(long, value_name = "DURATION", value_parser = parse::duration, help_heading = LONG_ROLL)]
    pub(crate) soak: Option<Duration>,
    /// With --simulate: this node reboots by itself some time into its soak (to show --soak
    /// failing a node).
    #[arg(long, value_name = "NODE", requires = "simulate", help_heading = LONG_ROLL)]
    pub(crate) simulate_soak_reboot: Option<String>,
    /// With --simulate: an operator pauses the rolls (`nodejob pause`) as this node's drain
    /// starts, and resumes them 5 minutes later (to show the pause switch).
    #[arg(long, value_name = "NODE", requires = "simulate", help_heading = LONG_ROLL)]
    pub(crate) simulate_pause: Option<String>,
    /// What a node comes to whose host upgrade fails, or that comes back at another version
    /// than --to, or fails its health check or its soak.
    #[arg(long, value_name = "POLICY", value_enum, default_value = "stop", help_heading = LONG_ROLL)]
    pub(crate) on_failure: OnFailure,
}

/// `--on-failure`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TrustDomain {
    /// Every node of the cluster (a cluster's CA is): `issue` and `finalize` are refused
    /// while any node is outside --selector/--nodes, as a node left out would stop trusting
    /// what the others present.
    Cluster,
    /// Only the nodes --selector/--nodes select, for a cluster whose other nodes trust
    /// another CA; `--abort` still looks for a begun `issue` on every node.
    Selected,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnFailure {
    /// It stays as it is (cordoned, its Job left for inspection) and the roll stops (as before
    /// this option).
    Stop,
    /// The host's rollback (`stratum rollback --to V`, V the version recorded on the node
    /// before its host upgrade) runs on it once, drained; it must come back at V on a new
    /// boot; it is then uncordoned if we cordoned it and reported rolled back, still a failure
    /// for --failure-budget. A node that is not Ready is not rolled back.
    Rollback,
}

impl OnFailure {
    /// The driver's policy.
    pub(crate) fn policy(self) -> upgrade_driver::OnFailure {
        match self {
            OnFailure::Stop => upgrade_driver::OnFailure::Stop,
            OnFailure::Rollback => upgrade_driver::OnFailure::Rollback,
        }
    }
}

/// `--on-undrainable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnUndrainable {
    /// The node stays cordoned and fails; the roll stops (as before this option).
    Fail,
    /// Uncordoned if we cordoned it, why recorded on it (annotation
    /// stratum.ciq.com/upgrade-blocked); the roll goes on, and tries every skipped node once
    /// more at the end; a rerun tries it again.
    Skip,
    /// Left cordoned, labelled (stratum.ciq.com/upgrade-quarantined, value drain-blocked),
    /// why recorded; the roll goes on; no run touches it until the label is removed.
    Quarantine,
}

impl OnUndrainable {
    /// The driver's policy.
    pub(crate) fn policy(self) -> upgrade_driver::Undrainable {
        match self {
            OnUndrainable::Fail => upgrade_driver::Undrainable::Fail,
            OnUndrainable::Skip => upgrade_driver::Undrainable::Skip,
            OnUndrainable::Quarantine => upgrade_driver::Undrainable::Quarantine,
        }
    }
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
    /// Each host Job's deadline; a duration: 90s, 10m, 1.5h, 1h30m.
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) deadline: Duration,
    /// After `issue`, how long a node has to restart its components and be Ready again; a duration: 90s, 10m, 1.5h, 1h30m.
    #[arg(long, default_value = "10m", value_parser = parse::duration)]
    pub(crate) ready_timeout: Duration,
    /// After `issue`, how long a node may take to begin restarting its components (to go
    /// NotReady); a node that stays Ready through it is taken as restarted. A short restart
    /// may never show NotReady (the node lifecycle controller marks a node NotReady only
    /// after its grace period, 40 s by default), so this is waited out in full on such a node.
    #[arg(long, default_value = "30s", value_parser = parse::duration)]
    pub(crate) restart_grace: Duration,
    /// Which nodes trust the CA being replaced.
    #[arg(long, value_enum, default_value = "cluster")]
    pub(crate) trust_domain: TrustDomain,
    /// The on-host binary.
    #[arg(long, default_value = "/usr/local/bin/stratum")]
    pub(crate) binary: String,
    /// A maintenance window: `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 Europe/Berlin`.
    /// No batch starts outside it; a node in flight finishes; a rerun resumes. It is checked
    /// against the cluster's clock: under --simulate the virtual one, which starts now unless
    /// --simulate-start says otherwise.
    #[arg(long)]
    pub(crate) window: Option<String>,
    /// Stop a phase after this many nodes failed (the phase goes on over the others until
    /// then); no phase starts after a failure.
    #[arg(long, default_value = "1")]
    pub(crate) failure_budget: u32,
    /// Print what a run would do (what each node last reported, the next phase and where,
    /// who disagrees, the Lease), change nothing. With --abort: what the abort would find
    /// (each node's staged CA), as the MCP tool `rotate_ca_preview` with `abort`. It exits
    /// as the run would: 2 for a plan the run refuses (nodes left out of a cluster-wide
    /// rotation), 1 for an abort refused, 4 where a run now would start no node (the window
    /// closed, the rolls paused), after printing the preview.
    #[arg(long)]
    pub(crate) preview: bool,
    #[command(flatten)]
    pub(crate) dry_run: DryRunArg,
    /// Write this rotation as a CARotation resource for `nodejob controller` instead of running
    /// it here (its CA's certificate in `spec.ca.pem`): the preview is shown first and refuses
    /// as it would; then the resource is created, or its spec replaced. With -o yaml, the
    /// resource is printed and nothing is read or written (to keep it in Git).
    #[arg(long, conflicts_with_all = ["preview", "simulate"])]
    pub(crate) apply: bool,
    /// The CARotation's name, with --apply or -o yaml. Default: ca- and the first 12 hex
    /// digits of the new CA's fingerprint (`ca-d4501ab39bde`).
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
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
    /// With --simulate: an operator pauses the rolls (`nodejob pause`) as this node's `issue`
    /// starts, and resumes them 5 minutes later (to show the pause switch: the issue in
    /// flight finishes, no other step starts until the resume).
    #[arg(
        long,
        value_name = "NODE",
        requires = "simulate",
        conflicts_with = "abort"
    )]
    pub(crate) simulate_pause: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct Jobs {
    /// Only Jobs matching this label selector (as `kubectl get jobs -l`), e.g.
    /// `stratum.ciq.com/upgrade` for the upgrade's host Jobs.
    #[arg(short = 'l', long)]
    pub(crate) selector: Option<String>,
    /// The node Jobs of every namespace, with a NAMESPACE column (as `kubectl get jobs -A`;
    /// `--namespace` then says nothing). Needs a grant to list Jobs and Pods cluster-wide,
    /// which `deploy/rbac.yaml`'s per-namespace Role is not.
    #[arg(short = 'A', long)]
    pub(crate) all_namespaces: bool,
    /// Delete the failed node Jobs listed (each exactly the Job listed: its UID and
    /// resourceVersion as preconditions, foreground, waited until gone), with their Pods and
    /// logs. A failed Job is kept for inspection, never deleted by nodejob on its own (no
    /// TTL); a rerun retries its work with a new Job whether or not it is there.
    #[arg(long)]
    pub(crate) delete_failed: bool,
    /// With --delete-failed: only those that failed at least this long ago (by their
    /// creation), e.g. 24h.
    #[arg(long, value_name = "AGE", requires = "delete_failed", value_parser = parse::duration)]
    pub(crate) older_than: Option<Duration>,
    /// With --delete-failed: say what would be deleted, and delete nothing (as kubectl's
    /// `--dry-run`; `client` and `server` the same here).
    #[arg(
        long,
        value_name = "WHERE",
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "client",
        requires = "delete_failed"
    )]
    pub(crate) dry_run: Option<DryRun>,
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
    /// The Job's deadline; a duration: 90s, 10m, 1.5h, 1h30m.
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
    /// Run even while a roll is under way on the node. Without it, a node with a host
    /// operation of ours in flight (a node Job running), or an upgrade in flight on it
    /// (cordoned, drained, awaiting its reboot), is refused (exit 3), naming what shows it and
    /// who holds the Lease: the roll's reboot would kill what this starts.
    #[arg(long)]
    pub(crate) force: bool,
    /// As kubectl's: print the Job as `render` does (`-o json|yaml`), create nothing.
    /// `--dry-run` and `--dry-run=client` touch no cluster; `--dry-run=server` first reads
    /// the node, refusing one the cluster does not have as the run would.
    #[arg(
        long,
        value_name = "WHERE",
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "client"
    )]
    pub(crate) dry_run: Option<DryRun>,
    #[command(flatten)]
    pub(crate) sim: Simulate,
}

#[derive(Debug, Args)]
pub(crate) struct Render {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// Deprecated: -o yaml|json (`-f` is gone: kubectl's `-f` is `--filename`).
    #[arg(long = "format", hide = true, value_parser = ["yaml", "json"])]
    pub(crate) format: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct Mcp {
    /// Serve one in-memory cluster of N nodes (as `upgrade --simulate N` builds it), kept for
    /// the whole session, so that a preview and the run after it see the same cluster.
    #[command(flatten)]
    pub(crate) sim: Simulate,
    /// With --simulate: a Pod pinned to each of these nodes (comma-separated, or the flag
    /// repeated) behind a budget that never allows a disruption, so that their drains are
    /// blocked (to show the upgrade tools' `on_undrainable`), as `upgrade
    /// --simulate-undrainable` sets it up.
    #[arg(
        long,
        value_name = "NODES",
        value_delimiter = ',',
        requires = "simulate"
    )]
    pub(crate) simulate_undrainable: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct PauseArgs {
    /// Why, for whoever finds the rolls paused (`status`, every paused run's progress).
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: Option<String>,
    /// Who pauses, as said with it. Default: who the apiserver takes the kubeconfig's
    /// credentials for (as `kubectl auth whoami` says), else `$USER@host`.
    #[arg(long, value_name = "WHO")]
    pub(crate) by: Option<String>,
    #[command(flatten)]
    pub(crate) sim: SimulateHistory,
}

#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    #[command(flatten)]
    pub(crate) sim: SimulateHistory,
}

#[derive(Debug, Args)]
pub(crate) struct Status {
    /// Only these nodes (as `kubectl get nodes NAME...`), each with its conditions block.
    /// Without: every node in the table, and the conditions of those not in a clean final
    /// state (a step under way, failed, stopped) only.
    #[arg(value_name = "NODE")]
    pub(crate) nodes: Vec<String>,
    #[command(flatten)]
    pub(crate) sim: SimulateHistory,
}
