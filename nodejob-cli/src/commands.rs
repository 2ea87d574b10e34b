//! The subcommands: each validates its input first (exit 2, no API call), then runs against
//! the backend `--simulate` or the kubeconfig chose.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use clap::CommandFactory;
use jiff::civil::{Time, Weekday};
use nodejob_core::drain::{EmptyDir, Unreplicated};
use nodejob_core::{
    Clock, JobApi, LeaseApi, NodeApi, PodApi, Spec, build, run_exit_code, run_exit_code_logs,
    trunc_name,
};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Fault;
use nodejob_kube::KubeApi;
use upgrade_driver::{Outcome, Plan, PlanSpec, Preview, Stop, Window};

use crate::args::{Cli, Command, Global, JobArgs, Render, Run, Upgrade};
use crate::output::{Format, Renderer, UPGRADE_STEPS, WallClock, summary};
use crate::sim::{self, Pacer};
use crate::{Exit, code};

/// The label key of `nodejob run`'s Jobs (its value: the node, as core hashes it).
pub(crate) const RUN_LABEL_KEY: &str = "stratum.ciq.com/run";

/// Runs the command line.
pub(crate) fn dispatch(cli: Cli) -> Result<Exit, Exit> {
    let global = cli.global;
    match cli.command {
        Command::Upgrade(args) => upgrade(&global, args),
        Command::RotateCa(args) => crate::rotate::rotate_ca(&global, args),
        Command::Run(args) => run(&global, args),
        Command::Render(args) => render(&global, args),
        Command::Jobs(args) => crate::jobs::jobs(&global, args),
        Command::Status(args) => crate::status::status(&global, args),
        Command::Mcp(args) => crate::mcp::serve(&global, args),
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "nodejob", &mut std::io::stdout());
            Ok(Exit::with(code::OK, ""))
        }
    }
}

/// A runtime for a simulated cluster: one thread, paused virtual time.
pub(crate) fn simulated_runtime() -> Result<tokio::runtime::Runtime, Exit> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| Exit::failed(format!("starting the runtime: {e}")))
}

/// A runtime for a real cluster.
pub(crate) fn real_runtime() -> Result<tokio::runtime::Runtime, Exit> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Exit::failed(format!("starting the runtime: {e}")))
}

/// Connects as kubectl would: `--kubeconfig` (or `KUBECONFIG`), `--context`.
pub(crate) async fn connect(global: &Global) -> Result<KubeApi, Exit> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = KubeConfigOptions {
        context: global.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &global.kubeconfig {
        Some(path) => {
            // KUBECONFIG may be a list: kubectl merges the files in order.
            let mut merged: Option<Kubeconfig> = None;
            for file in std::env::split_paths(path) {
                let kc = Kubeconfig::read_from(&file).map_err(|e| {
                    Exit::usage(format!("--kubeconfig: reading {}: {e}", file.display()))
                })?;
                merged = Some(match merged {
                    None => kc,
                    Some(m) => m
                        .merge(kc)
                        .map_err(|e| Exit::usage(format!("--kubeconfig: {e}")))?,
                });
            }
            let kc = merged.ok_or_else(|| Exit::usage("--kubeconfig: no file given"))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| context_error(global, e.to_string()))?
        }
        None => nodejob_kube::load_config(global.context.as_deref())
            .await
            .map_err(|e| context_error(global, format!("{e:#}")))?,
    };
    KubeApi::from_config(config).map_err(|e| Exit::failed(format!("connecting: {e:#}")))
}

fn context_error(global: &Global, e: String) -> Exit {
    match &global.context {
        Some(context) => Exit::usage(format!(
            "--context {context}: {e}; `kubectl config get-contexts` lists the contexts"
        )),
        None => Exit::usage(format!(
            "loading the kubeconfig: {e}; pass --kubeconfig or set KUBECONFIG, or try --simulate 5"
        )),
    }
}

/// Ctrl-C once: stop starting nodes (`stop`; without one, an operation that cannot stop
/// midway, such as an abort, says so and carries on); twice: exit at once.
pub(crate) fn on_interrupt(stop: Option<Stop>) {
    let presses = Arc::new(AtomicU32::new(0));
    let _ = ctrlc::set_handler(move || {
        if presses.fetch_add(1, Ordering::SeqCst) == 0 {
            match &stop {
                Some(stop) => {
                    stop.request();
                    eprintln!(
                        "\nstopping: no further node starts; the step in flight finishes \
                         (Ctrl-C again to exit at once)"
                    );
                }
                None => eprintln!(
                    "\nan abort does not stop midway: it finishes restoring the nodes (Ctrl-C \
                     again to exit at once; run it again to resume)"
                ),
            }
        } else {
            eprintln!(
                "\nexiting now; the cluster keeps the run's state: run the same command again \
                 to resume"
            );
            std::process::exit(130);
        }
    });
}

// ---- upgrade ----------------------------------------------------------------------------------

fn plan_of(global: &Global, args: &Upgrade) -> Result<Plan, Exit> {
    let mut spec = PlanSpec::new(args.to.clone());
    spec.selector = args.selector.clone();
    spec.nodes = args.nodes.clone();
    spec.max_unavailable = args.max_unavailable;
    spec.drain.timeout = args.drain_timeout;
    if args.delete_emptydir_data {
        spec.drain.empty_dir = EmptyDir::Delete;
    }
    if args.force {
        spec.drain.unreplicated = Unreplicated::Force;
    }
    spec.deadline = args.deadline;
    spec.reboot_timeout = args.reboot_timeout;
    spec.binary = args.binary.clone();
    spec.failure_budget = args.failure_budget;
    spec.namespace = global.namespace.clone();
    spec.identity = identity();
    if args.health_check {
        spec.health_check = Some(args.health_argv.clone());
    }
    if let Some(window) = &args.window {
        spec.window =
            Some(parse_window(window).map_err(|e| Exit::usage(format!("--window: {e}")))?);
    }
    Plan::build(spec).map_err(|e| Exit::usage(format!("{e}")))
}

/// `host/pid`: unique per process, stable for its life.
pub(crate) fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "nodejob".into());
    format!("nodejob-{host}-{}", std::process::id())
}

/// `DAYS START-END [TZ]`: `sat,sun 01:00-05:00 Europe/Berlin`.
pub(crate) fn parse_window(s: &str) -> Result<Window, String> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let (days, span, tz) = match parts.as_slice() {
        [days, span] => (*days, *span, "UTC"),
        [days, span, tz] => (*days, *span, *tz),
        _ => {
            return Err(format!(
                "{s:?} is not `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 UTC`"
            ));
        }
    };
    let days = days
        .split(',')
        .map(|d| match d.to_ascii_lowercase().get(..3) {
            Some("mon") => Ok(Weekday::Monday),
            Some("tue") => Ok(Weekday::Tuesday),
            Some("wed") => Ok(Weekday::Wednesday),
            Some("thu") => Ok(Weekday::Thursday),
            Some("fri") => Ok(Weekday::Friday),
            Some("sat") => Ok(Weekday::Saturday),
            Some("sun") => Ok(Weekday::Sunday),
            _ => Err(format!("{d:?} is not a day (mon..sun)")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (start, end) = span
        .split_once('-')
        .ok_or_else(|| format!("{span:?} is not START-END, e.g. 01:00-05:00"))?;
    let time = |t: &str| t.parse::<Time>().map_err(|e| format!("{t:?}: {e}"));
    Ok(Window {
        days,
        start: time(start)?,
        end: time(end)?,
        time_zone: tz.to_string(),
    })
}

fn upgrade(global: &Global, args: Upgrade) -> Result<Exit, Exit> {
    let plan = plan_of(global, &args)?;
    let stop = Stop::new();
    on_interrupt(Some(stop.clone()));
    match args.sim.simulate {
        Some(n) => {
            let n = usize::from(n);
            let fail = args.simulate_fail.as_deref();
            if let Some(node) = fail
                && !sim::node_names(n).iter().any(|x| x == node)
            {
                return Err(Exit::usage(format!(
                    "--simulate-fail {node}: no such node in the simulated cluster ({})",
                    sim::node_names(n).join(", ")
                )));
            }
            let runtime = simulated_runtime()?;
            runtime.block_on(async {
                let faults: Vec<(&str, Fault)> =
                    fail.map(|f| (f, Fault::UpgradeFails)).into_iter().collect();
                let fake = sim::cluster(n, &faults)?;
                sim::settle(&fake).await;
                let clock = fake_clock(&fake);
                let pacer = (global.output == Format::Text).then(|| Pacer::new(fake.clone()));
                drive_upgrade(&*fake, &plan, global, &args, clock, pacer, &stop).await
            })
        }
        None => {
            let runtime = real_runtime()?;
            runtime.block_on(async {
                let api = connect(global).await?;
                let clock: WallClock = Arc::new(jiff::Timestamp::now);
                drive_upgrade(&api, &plan, global, &args, clock, None, &stop).await
            })
        }
    }
}

/// The simulated cluster's (virtual) wall clock.
pub(crate) fn fake_clock(fake: &Arc<FakeCluster>) -> WallClock {
    let fake = fake.clone();
    Arc::new(move || fake.wall_time())
}

async fn drive_upgrade<A>(
    api: &A,
    plan: &Plan,
    global: &Global,
    args: &Upgrade,
    clock: WallClock,
    pacer: Option<Pacer>,
    stop: &Stop,
) -> Result<Exit, Exit>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    if args.preview {
        let preview = upgrade_driver::preview(api, plan)
            .await
            .map_err(driver_error)?;
        print_preview(&preview, global.output);
        return Ok(Exit::with(code::OK, ""));
    }
    let terminal = std::io::stdout().is_terminal();
    let renderer = Arc::new(Renderer::new(
        global.output,
        terminal,
        clock,
        pacer,
        UPGRADE_STEPS,
    ));
    let report = upgrade_driver::run_until(api, plan, renderer.clone(), stop)
        .await
        .map_err(driver_error)?;
    renderer.finish();
    if global.output == Format::Json {
        let line = serde_json::json!({"event": "report", "report": report});
        outln!("{line}");
    } else {
        out!("{}", summary(&report));
    }
    Ok(match &report.outcome {
        Outcome::Done => Exit::with(code::OK, ""),
        Outcome::Failed { retry } => {
            let mut lines = Vec::new();
            for n in &report.nodes {
                if let Some(f) = n.failure() {
                    lines.push(format!(
                        "node {} failed at {}{}: {}",
                        n.name,
                        f.step,
                        f.exit_code
                            .map(|c| format!(" with exit code {c}"))
                            .unwrap_or_default(),
                        f.message
                    ));
                    if let Some(tail) = &f.log_tail {
                        lines.push(format!("  log tail:\n    {}", tail.replace('\n', "\n    ")));
                    }
                    lines.push(format!(
                        "  look at: kubectl -n {} logs job/{}; kubectl describe node {}",
                        plan.spec().namespace,
                        plan.job_name(&n.name),
                        n.name
                    ));
                }
            }
            lines.push(format!("retry: {retry}"));
            Exit::failed(lines.join("\n"))
        }
        Outcome::Stopped { why } => Exit::failed(format!(
            "stopped: {why}\nthe cluster keeps the run's state: run the same command again to resume"
        )),
    })
}

fn driver_error(e: upgrade_driver::Error) -> Exit {
    match &e {
        upgrade_driver::Error::Plan(_) => Exit::usage(e.to_string()),
        upgrade_driver::Error::Core(nodejob_core::Error::LeaseHeld { .. }) => {
            Exit::with(code::LEASE_HELD, format!("{e}; try again later"))
        }
        upgrade_driver::Error::Selecting(upgrade_driver::Selecting::NotFound { .. }) => {
            Exit::usage(e.to_string())
        }
        _ => Exit::failed(e.to_string()),
    }
}

fn print_preview(preview: &Preview, format: Format) {
    if format == Format::Json {
        outln!("{}", serde_json::to_string(preview).unwrap_or_default());
        return;
    }
    out!("{}", preview_text(preview));
}

/// An upgrade's preview for people, a line each: the Lease, the nodes skipped, the batches,
/// then every node and what the drain would do with its Pods. `upgrade --preview` prints it;
/// the MCP tool `upgrade_preview` answers it.
pub(crate) fn preview_text(preview: &Preview) -> String {
    use upgrade_driver::PodPlan;
    let mut lines = vec![format!(
        "upgrade to {}: preview (nothing changed)",
        preview.target
    )];
    lines.push(match &preview.lease {
        Some(holder) => format!("lease: held by {holder}"),
        None => "lease: free".into(),
    });
    for (node, why) in &preview.skipped {
        lines.push(format!("skip {node}: {why}"));
    }
    for (i, (group, nodes)) in preview.batches.iter().enumerate() {
        lines.push(format!("batch {} ({group}): {}", i + 1, nodes.join(", ")));
    }
    for node in &preview.nodes {
        lines.push(format!(
            "{} at {}{}{}",
            node.name,
            node.version.as_deref().unwrap_or("?"),
            if node.cordoned { ", cordoned" } else { "" },
            if node.in_progress {
                ", an earlier run of ours in flight"
            } else {
                ""
            }
        ));
        for pod in &node.pods {
            lines.push(match pod {
                PodPlan::Evict { pod } => format!("  evict {pod}"),
                PodPlan::Leave { pod, why } => format!("  leave {pod}: {why}"),
                PodPlan::Refuse { pod, why } => format!("  REFUSE {pod}: {why}"),
                PodPlan::Blocked { pod, message } => format!("  blocked now {pod}: {message}"),
            });
        }
    }
    lines.join("\n") + "\n"
}

// ---- run and render ---------------------------------------------------------------------------

pub(crate) fn spec_of(global: &Global, job: &JobArgs) -> Result<Spec, Exit> {
    let spec = Spec {
        namespace: global.namespace.clone(),
        name: job
            .name
            .clone()
            .unwrap_or_else(|| trunc_name(&format!("nodejob-run-{}", job.node))),
        node: job.node.clone(),
        label_key: RUN_LABEL_KEY.into(),
        container: "run".into(),
        argv: job.argv.clone(),
        active_deadline: job.deadline,
        poll_attempts: u32::try_from(
            (job.deadline.as_secs() + 60).div_ceil(nodejob_core::POLL_INTERVAL.as_secs()),
        )
        .unwrap_or(u32::MAX),
        kind: "node".into(),
        critical: job.critical,
        image: job.image.clone(),
        output: Some(Arc::new(|note: &nodejob_core::Note| {
            eprintln!("{}", note.message)
        })),
    };
    spec.validate().map_err(|e| Exit::usage(e.to_string()))?;
    Ok(spec)
}

fn run(global: &Global, args: Run) -> Result<Exit, Exit> {
    let spec = spec_of(global, &args.job)?;
    let exit_code_only = args.exit_code_only;
    let outcome = match args.sim.simulate {
        Some(n) => {
            let n = usize::from(n);
            if !sim::node_names(n).contains(&spec.node) {
                return Err(Exit::usage(format!(
                    "--node {}: no such node in the simulated cluster ({})",
                    spec.node,
                    sim::node_names(n).join(", ")
                )));
            }
            simulated_runtime()?.block_on(async {
                let fake = sim::cluster(n, &[])?;
                Ok::<_, Exit>(run_one(&*fake, &spec, exit_code_only).await)
            })?
        }
        None => real_runtime()?.block_on(async {
            let api = connect(global).await?;
            Ok::<_, Exit>(run_one(&api, &spec, exit_code_only).await)
        })?,
    };
    match outcome {
        Ok((exit, log)) => {
            if let Some(log) = log {
                out!("{log}");
            }
            Ok(Exit::with(u8::try_from(exit).unwrap_or(code::FAILED), ""))
        }
        Err(e) => Err(Exit::failed(e.to_string())),
    }
}

async fn run_one<A: JobApi + NodeApi + ?Sized>(
    api: &A,
    spec: &Spec,
    exit_code_only: bool,
) -> Result<(i32, Option<String>), nodejob_core::Error> {
    if exit_code_only {
        run_exit_code(api, spec).await.map(|c| (c, None))
    } else {
        run_exit_code_logs(api, spec)
            .await
            .map(|(c, l)| (c, Some(l)))
    }
}

fn render(global: &Global, args: Render) -> Result<Exit, Exit> {
    let spec = spec_of(global, &args.job)?;
    let job = build(&spec);
    let text = if args.format == "json" {
        serde_json::to_string_pretty(&job).map_err(|e| Exit::failed(e.to_string()))? + "\n"
    } else {
        serde_saphyr::to_string(&job).map_err(|e| Exit::failed(e.to_string()))?
    };
    out!("{text}");
    Ok(Exit::with(code::OK, ""))
}
