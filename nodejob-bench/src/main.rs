//! `nodejob-bench`: prints the performance tables of `nodejob-bench/README.md` (the workspace
//! README's Performance section carries its headline figures).
//!
//! ```text
//! cargo run --release -p nodejob-bench                  everything (about 4 minutes on 2 cores)
//! cargo run --release -p nodejob-bench -- --runs 200 --sizes 100,1000 --no-micro
//! cargo run --release -p nodejob-bench -- rotation 100   one CA rotation: Jobs and calls per node
//! cargo run --release -p nodejob-bench -- command        the command beside the engine
//! e2e/bench                                             the real control plane (`real`)
//! e2e/bench hollow 100 500                              hollow nodes on it (`hollow`)
//! ```
//!
//! Each rolling upgrade and the micro benchmarks run in a child process of this same binary
//! (`roll NODES`, `micro DIR`), so each size's peak memory is its own; the command and the
//! engine beside it each under a `measure` child of its own, which waits for it alone.

use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::Context;
use criterion::Criterion;
use nodejob_bench::command::{self, Beside, Cost};
use nodejob_bench::hollow;
use nodejob_bench::latency::{Schedule, measure};
use nodejob_bench::micro;
use nodejob_bench::real::{Cluster, Connector};
use nodejob_bench::requests::{count, describe, total};
use nodejob_bench::roll::{Roll, Shape, roll};
use nodejob_bench::rotation::{CONCURRENCY, Rotation, rotate};
use nodejob_bench::scenario::{Call, Waiter};
use nodejob_bench::stats::Summary;
use upgrade_driver::MaxUnavailable;

const USAGE: &str = "usage: nodejob-bench [--runs N] [--sizes N,N,...] [--no-micro]
       nodejob-bench real [RUNS [COUNTED [HELD]]]   on the cluster of KUBECONFIG (e2e/bench);
                                 with NODEJOB_BENCH_CLI, also a 3-node `nodejob upgrade`
       nodejob-bench roll NODES [MAX_UNAVAILABLE [SHAPE]]   one rolling upgrade (default
                                 10%) of the bench's cluster (SHAPE `bench`, the default) or
                                 of the one `nodejob upgrade --simulate` rolls (`command`), as
                                 a line of JSON
       nodejob-bench rotation NODES  one CA rotation: host Jobs and API calls per node
       nodejob-bench command [N,N,...]   `nodejob upgrade --simulate N` beside the engine's
                                 roll, at 1 and 10% (default 100,1000,5000,10000); the
                                 command is NODEJOB_BENCH_CLI, else the `nodejob` beside
                                 this binary, built first under `cargo run`
       nodejob-bench measure -- PROGRAM ARGS...   one child's CPU, wall time and peak RSS,
                                 as a line of JSON
       nodejob-bench micro DIR       the micro benchmarks, criterion's estimates in DIR
       nodejob-bench hollow NODES [--json FILE]   on the cluster of KUBECONFIG, whose node
                                 agent registered NODES nodes (e2e/bench hollow): roll them
                                 with NODEJOB_BENCH_CLI at max_unavailable 10%, beside the
                                 fake's roll; FILE: append the figures as a line of JSON
       nodejob-bench hollow-table FILE  the table of the lines of FILE";

/// What the table is made of.
struct Options {
    runs: usize,
    sizes: Vec<usize>,
    micro: bool,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("roll") => one_roll(&args[1..]),
        Some("rotation") => one_rotation(&args[1..]),
        Some("command") => command_only(&args[1..]),
        Some("measure") => one_measure(&args[1..]),
        Some("micro") => one_micro(&args[1..]),
        Some("real") => real(&args[1..]),
        Some("hollow") => hollow(&args[1..]),
        Some("hollow-table") => hollow_table(&args[1..]),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => options(&args).and_then(|o| table(&o)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nodejob-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn options(args: &[String]) -> anyhow::Result<Options> {
    let mut o = Options {
        runs: 1_000,
        sizes: vec![100, 1_000, 5_000],
        micro: true,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--runs" => o.runs = value()?.parse().context("--runs")?,
            "--sizes" => {
                o.sizes = (value()?.split(','))
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .context("--sizes")?;
            }
            "--no-micro" => o.micro = false,
            other => anyhow::bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    Ok(o)
}

/// A current-thread runtime (time and I/O), its time paused (virtual) or real.
fn runtime(paused: bool) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(paused)
        .build()?)
}

fn table(o: &Options) -> anyhow::Result<()> {
    println!("nodejob-bench: {}", machine());
    println!();
    latency_table(o.runs)?;
    println!();
    requests_table()?;
    println!();
    roll_table(&o.sizes)?;
    println!();
    command_table(COMMAND_SIZES)?;
    println!();
    rotation_table()?;
    if o.micro {
        println!();
        micro_table()?;
    }
    Ok(())
}

fn latency_table(runs: usize) -> anyhow::Result<()> {
    println!(
        "Completion latency: the Job's finished status written -> the call returned \
         (fake, real time, {runs} runs)"
    );
    let spacing = Duration::from_millis(5);
    let staggered = Schedule::Staggered { spacing };
    let rows = [
        (Waiter::Watch, Call::Run, Schedule::Serial),
        (Waiter::Watch, Call::ExitCodeLogs, Schedule::Serial),
        (Waiter::BOTH[0], Call::Run, staggered),
        (Waiter::BOTH[1], Call::Run, staggered),
        (Waiter::BOTH[0], Call::ExitCodeLogs, staggered),
        (Waiter::BOTH[1], Call::ExitCodeLogs, staggered),
    ];
    println!(
        "  {:<15} {:<19} {:<40} {:>9} {:>9} {:>9}",
        "waiter", "call", "runs laid out", "p50", "p99", "max"
    );
    let rt = runtime(false)?;
    for (waiter, call, schedule) in rows {
        let latencies = rt.block_on(measure(waiter, call, runs, schedule))?;
        let s = Summary::of(&latencies);
        let layout = match schedule {
            Schedule::Serial => "one at a time, host op instant".to_string(),
            Schedule::Staggered { spacing } => {
                format!("one every {} ms, host op U[0, 5 s)", spacing.as_millis())
            }
        };
        println!(
            "  {:<15} {:<19} {:<40} {:>9} {:>9} {:>9}",
            waiter.to_string(),
            call.to_string(),
            layout,
            ms(s.p50),
            ms(s.p99),
            ms(s.max)
        );
    }
    Ok(())
}

fn requests_table() -> anyhow::Result<()> {
    println!("API requests per run (fake call record, virtual time; default cluster timing)");
    let short = Duration::from_secs(1);
    let long = Duration::from_secs(30 * 60);
    println!(
        "  {:<19} {:<15} {:>9} {:>11}   calls at 30 min, by verb",
        "call", "waiter", "host 1 s", "host 30 min"
    );
    let rt = runtime(true)?;
    for call in Call::ALL {
        for waiter in Waiter::BOTH {
            let a = rt.block_on(count(waiter, call, short))?;
            let b = rt.block_on(count(waiter, call, long))?;
            println!(
                "  {:<19} {:<15} {:>9} {:>11}   {}",
                call.to_string(),
                waiter.to_string(),
                total(&a),
                total(&b),
                describe(&b)
            );
        }
    }
    Ok(())
}

fn roll_table(sizes: &[usize]) -> anyhow::Result<()> {
    println!(
        "Rolling upgrade (fake, paused time; a replica per 10 workers behind a budget of 10%; \
         one process per size; KB/node: the objects answered, as JSON)"
    );
    println!(
        "  {:>6} {:>6} {:>9} {:>9} {:>9} {:>10} {:>13} {:>8} {:>14}",
        "nodes",
        "max_u",
        "virtual",
        "wall",
        "setup",
        "peak RSS",
        "requests/node",
        "KB/node",
        "overhead/node"
    );
    let exe = std::env::current_exe()?;
    for (width, &nodes) in ["1", "10%"]
        .into_iter()
        .flat_map(|w| sizes.iter().map(move |n| (w, n)))
    {
        let out = Command::new(&exe)
            .arg("roll")
            .arg(nodes.to_string())
            .arg(width)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "roll {nodes}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = Roll::from_json(String::from_utf8_lossy(&out.stdout).trim())?;
        let n = r.nodes as f64;
        println!(
            "  {:>6} {:>6} {:>9} {:>9} {:>9} {:>7} MB {:>13.1} {:>8.1} {:>14}",
            r.nodes,
            r.max_unavailable,
            format!("{:.0} min", r.virtual_time.as_secs_f64() / 60.0),
            format!("{:.2} s", r.wall.as_secs_f64()),
            format!("{:.2} s", r.setup.as_secs_f64()),
            r.peak_rss_kib / 1024,
            r.total_calls() as f64 / n,
            r.total_bytes() as f64 / n / 1000.0,
            ms(r.wall.div_f64(n)),
        );
    }
    Ok(())
}

/// The sizes of the command-beside-engine table.
const COMMAND_SIZES: &[usize] = &[100, 1_000, 5_000, 10_000];

/// `command [N,N,...]`: the command-beside-engine table alone.
fn command_only(args: &[String]) -> anyhow::Result<()> {
    let sizes: Vec<usize> = match args.first() {
        Some(list) => (list.split(','))
            .map(str::parse)
            .collect::<Result<_, _>>()
            .context("N,N,...")?,
        None => COMMAND_SIZES.to_vec(),
    };
    println!("nodejob-bench: {}", machine());
    println!();
    command_table(&sizes)
}

/// The `nodejob` binary to measure: `NODEJOB_BENCH_CLI`, else the one beside this binary, built
/// first when run by `cargo run` (so that it is not stale).
fn cli() -> anyhow::Result<std::path::PathBuf> {
    if let Some(cli) = std::env::var_os("NODEJOB_BENCH_CLI") {
        return Ok(cli.into());
    }
    let exe = std::env::current_exe()?;
    let beside = exe.with_file_name("nodejob");
    if let Some(cargo) = std::env::var_os("CARGO") {
        let mut build = Command::new(cargo);
        build.args(["build", "--quiet", "-p", "nodejob-cli"]);
        if !cfg!(debug_assertions) {
            build.arg("--release");
        }
        let status = build.status()?;
        anyhow::ensure!(status.success(), "building nodejob-cli: {status}");
    }
    anyhow::ensure!(
        beside.exists(),
        "no {}: build it (cargo build --release -p nodejob-cli) or set NODEJOB_BENCH_CLI",
        beside.display()
    );
    Ok(beside)
}

/// `program args` under a `measure` child of this binary.
fn measured(program: &Path, args: &[String]) -> anyhow::Result<Cost> {
    let out = Command::new(std::env::current_exe()?)
        .arg("measure")
        .arg("--")
        .arg(program)
        .args(args)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "measure {} {}: {}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Cost::from_json(String::from_utf8_lossy(&out.stdout).trim())
}

/// `measure -- PROGRAM ARGS...`: the child, measured, as a line of JSON.
fn one_measure(args: &[String]) -> anyhow::Result<()> {
    let [dashes, program, args @ ..] = args else {
        anyhow::bail!("{USAGE}");
    };
    anyhow::ensure!(dashes == "--", "{USAGE}");
    println!("{}", command::measure(Path::new(program), args)?.to_json());
    Ok(())
}

fn command_table(sizes: &[usize]) -> anyhow::Result<()> {
    println!(
        "The command beside its engine, on the same cluster (a replica per worker behind a \
         budget of 10%): `nodejob upgrade --simulate N --to v1.38.0` (output piped) and the \
         engine's roll of it (`nodejob-bench roll N WIDTH command`), each in a process of its \
         own"
    );
    println!(
        "  {:>6} {:>6} | {:>9} {:>9} {:>8} | {:>9} {:>9} {:>8} {:>4} | {:>5} {:>9} {:>9} | {:>6} \
         {:>7}",
        "nodes",
        "max_u",
        "engine",
        "wall",
        "peak RSS",
        "command",
        "wall",
        "peak RSS",
        "exit",
        "ratio",
        "KB/node",
        "KB/node",
        "calls",
        "evicted"
    );
    println!(
        "  {:>6} {:>6} | {:>9} {:>9} {:>8} | {:>9} {:>9} {:>8} {:>4} | {:>5} {:>9} {:>9} | {:>6} \
         {:>7}",
        "", "", "CPU", "", "", "CPU", "", "", "", "CPU", "engine", "command", "/node", "/node"
    );
    let (exe, cli) = (std::env::current_exe()?, cli()?);
    for width in ["1", "10%"] {
        let mut rows: Vec<Beside> = Vec::new();
        for &nodes in sizes {
            let roll = [
                "roll".into(),
                nodes.to_string(),
                width.into(),
                "command".into(),
            ];
            let engine = measured(&exe, &roll)?;
            anyhow::ensure!(
                engine.exit == 0,
                "roll {nodes} {width}: exit {}",
                engine.exit
            );
            let command = measured(&cli, &command::upgrade_args(nodes, width))?;
            let row = Beside {
                nodes,
                engine,
                command,
            };
            let mb = |c: &Cost| format!("{} MB", c.peak_rss_kib / 1024);
            let per_node = |c: &Cost| c.peak_rss_kib as f64 * 1.024 / nodes as f64;
            let work = |f: fn(&command::Work) -> u64| {
                (engine.work).map_or("-".to_string(), |w| {
                    format!("{:.2}", f(&w) as f64 / nodes as f64)
                })
            };
            println!(
                "  {:>6} {:>6} | {:>9} {:>9} {:>8} | {:>9} {:>9} {:>8} {:>4} | {:>5.2} {:>9.1} \
                 {:>9.1} | {:>6} {:>7}",
                nodes,
                width,
                secs(engine.cpu),
                secs(engine.wall),
                mb(&engine),
                secs(command.cpu),
                secs(command.wall),
                mb(&command),
                command.exit,
                row.ratio(),
                per_node(&engine),
                per_node(&command),
                work(|w| w.calls),
                work(|w| w.evicted),
            );
            rows.push(row);
        }
        let growth: Vec<String> = (rows.windows(2))
            .map(|w| {
                let nodes = (w[0].nodes, w[1].nodes);
                let (e, n) = command::growth(&w[0].engine, &w[1].engine, nodes);
                let (c, _) = command::growth(&w[0].command, &w[1].command, nodes);
                let call = command::per_call_growth(&w[0].engine, &w[1].engine)
                    .map_or(String::new(), |g| format!(" (engine CPU per call {g:.2}x)"));
                format!("{n:.0}x the nodes: engine {e:.1}x, command {c:.1}x{call}")
            })
            .collect();
        println!("  CPU at max_u {width}: {}", growth.join("; "));
    }
    Ok(())
}

/// `1.23 s`.
fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// The nodes of the rotation in the table.
const ROTATION_NODES: usize = 100;

fn rotation_table() -> anyhow::Result<()> {
    let r = runtime(true)?.block_on(rotate(ROTATION_NODES))?;
    print_rotation(&r);
    Ok(())
}

/// What one rotation cost, per node.
fn print_rotation(r: &Rotation) {
    println!(
        "CA rotation (fake, paused time; 3 control-plane nodes, the rest workers, concurrency \
         {CONCURRENCY})"
    );
    println!(
        "  {} nodes: {:.0} min virtual, {:.2} s wall; {} host Jobs, {} API calls",
        r.nodes,
        r.virtual_time.as_secs_f64() / 60.0,
        r.wall.as_secs_f64(),
        r.host_jobs(),
        r.total_calls()
    );
    println!("  {}", r.per_node_line());
    println!("  calls per node: {}", r.calls_by_verb());
    println!("  host commands per node: {}", r.commands_by_kind());
}

/// `rotation NODES`: one CA rotation and its figures.
fn one_rotation(args: &[String]) -> anyhow::Result<()> {
    let nodes: usize = args.first().context(USAGE)?.parse().context("NODES")?;
    let r = runtime(true)?.block_on(rotate(nodes))?;
    print_rotation(&r);
    Ok(())
}

fn micro_table() -> anyhow::Result<()> {
    println!("Micro (criterion, time per call: median of the estimate)");
    let dir = std::env::temp_dir().join(format!("nodejob-bench-micro-{}", std::process::id()));
    let exe = std::env::current_exe()?;
    let out = Command::new(exe).arg("micro").arg(&dir).output()?;
    anyhow::ensure!(
        out.status.success(),
        "micro: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in micro::NAMES {
        let ns = median_ns(&dir, name)?;
        println!("  {name:<19} {ns:>10.1} ns");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Criterion's median estimate for `name`, in ns.
fn median_ns(dir: &Path, name: &str) -> anyhow::Result<f64> {
    let path = dir.join(name).join("new").join("estimates.json");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    v["median"]["point_estimate"]
        .as_f64()
        .with_context(|| format!("no median in {}", path.display()))
}

/// The child: one roll, printed as a line of JSON.
fn one_roll(args: &[String]) -> anyhow::Result<()> {
    let nodes: usize = args.first().context(USAGE)?.parse().context("NODES")?;
    let width = match args.get(1) {
        Some(w) => w
            .parse()
            .map_err(|e| anyhow::anyhow!("MAX_UNAVAILABLE {w:?}: {e}"))?,
        None => MaxUnavailable::Percent(10),
    };
    let shape = args.get(2).map_or(Ok(Shape::Bench), |s| Shape::parse(s))?;
    let r = runtime(true)?.block_on(roll(nodes, width, shape))?;
    println!("{}", r.to_json());
    Ok(())
}

/// The child: the micro benchmarks, criterion's files in `args[0]`.
fn one_micro(args: &[String]) -> anyhow::Result<()> {
    let dir = args.first().context(USAGE)?;
    let mut c = Criterion::default()
        .output_directory(Path::new(dir))
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    micro::benches(&mut c);
    c.final_summary();
    Ok(())
}

/// The real control plane: `RUNS` timed runs per connector (100), `COUNTED` through the
/// counting proxy (20), and what the `TCP_NODELAY` client holds once it has made `HELD` runs in
/// all (`RUNS`).
fn real(args: &[String]) -> anyhow::Result<()> {
    let arg = |i: usize, default: usize, what: &str| {
        args.get(i)
            .map_or(Ok(default), |a| a.parse())
            .with_context(|| what.to_string())
    };
    let runs = arg(0, 100, "RUNS")?;
    let counted = arg(1, 20, "COUNTED")?;
    let held = arg(2, runs, "HELD")?.max(runs);
    let rt = runtime(false)?;
    let cluster = rt.block_on(Cluster::set_up())?;
    let result = rt.block_on(real_table(&cluster, runs, counted, held)).and_then(|()| {
        // The same scenario on the fake, for comparison.
        let fake =
            runtime(true)?.block_on(count(Waiter::Watch, Call::ExitCodeLogs, Duration::ZERO))?;
        println!(
            "  on the fake, the same run: {} calls ({}); each wait_job call there is one change \
             of the Job, read on one open watch here",
            total(&fake),
            describe(&fake)
        );
        rt.block_on(roll_on(&cluster))
    });
    rt.block_on(cluster.tear_down())?;
    result
}

async fn real_table(
    cluster: &Cluster,
    runs: usize,
    counted: usize,
    held: usize,
) -> anyhow::Result<()> {
    println!("nodejob-bench real: {}", machine());
    println!(
        "Real control plane: run_exit_code_logs through nodejob-kube, host op exits at once, \
         runs one at a time"
    );
    println!();
    println!(
        "Completion latency: first watcher saw the Job finished -> the call returned ({runs} runs \
         per connector)"
    );
    println!(
        "  {:<38} {:>9} {:>9} {:>9}",
        "connector", "p50", "p99", "max"
    );
    let watchers_before = cluster.job_watchers().await?;
    let mut leads = Vec::new();
    for connector in [Connector::Kube, Connector::NoDelay] {
        let api = cluster.client(connector)?;
        let latencies = cluster.latencies(&api, runs).await?;
        let returned: Vec<Duration> = latencies.iter().map(|l| l.returned).collect();
        leads.extend(latencies.iter().filter_map(|l| l.pod_lead));
        let s = Summary::of(&returned);
        println!(
            "  {:<38} {:>9} {:>9} {:>9}",
            connector.to_string(),
            ms(s.p50),
            ms(s.p99),
            ms(s.max)
        );
        if connector == Connector::NoDelay {
            // More runs through the same client, untimed, then what it still holds, once the
            // observer's connections have closed.
            cluster.latencies(&api, held - runs).await?;
            tokio::time::sleep(Duration::from_secs(2)).await;
            println!();
            println!(
                "Held by that one KubeApi after {held} runs: {} TCP connection(s) to the \
                 apiserver; the apiserver's WATCH requests on Jobs: {} (all clients; {} before \
                 the runs)",
                cluster.connections()?,
                cluster.job_watchers().await?,
                watchers_before
            );
        }
    }
    if !leads.is_empty() {
        let s = Summary::of(&leads);
        println!();
        println!(
            "The Pod's container seen terminated -> the Job seen finished ({} of {} runs seen \
             both): p50 {}, p99 {}, max {}",
            leads.len(),
            2 * runs,
            ms(s.p50),
            ms(s.p99),
            ms(s.max)
        );
    }
    println!();
    let counts = cluster.requests(counted).await?;
    let total: usize = counts.values().sum();
    let by_kind: Vec<String> = counts
        .iter()
        .map(|(k, n)| format!("{k} {:.2}", *n as f64 / counted as f64))
        .collect();
    println!(
        "Requests per run, counted by a proxy in front of the apiserver ({counted} runs): {:.2}",
        total as f64 / counted as f64
    );
    println!("  {}", by_kind.join(", "));
    Ok(())
}

/// The `nodejob` command rolling three nodes: `NODEJOB_BENCH_CLI`, set by e2e/bench.
async fn roll_on(cluster: &Cluster) -> anyhow::Result<()> {
    let Some(cli) = std::env::var_os("NODEJOB_BENCH_CLI") else {
        println!();
        println!("(no NODEJOB_BENCH_CLI: the 3-node `nodejob upgrade` is left out)");
        return Ok(());
    };
    let roll = cluster.roll(Path::new(&cli)).await?;
    let total: usize = roll.counts.values().sum();
    let per_node = |n: usize| n as f64 / roll.nodes as f64;
    println!();
    println!(
        "`nodejob upgrade` of {} nodes (a Deployment of 3 behind a budget of 1, quick hosts), \
         through the proxy: {:.1} s, {total} requests, {:.1} per node",
        roll.nodes,
        roll.wall.as_secs_f64(),
        per_node(total)
    );
    let by_kind: Vec<String> = roll
        .counts
        .iter()
        .map(|(k, n)| format!("{k} {:.1}", per_node(*n)))
        .collect();
    println!("  per node: {}", by_kind.join(", "));
    println!("  by API Priority and Fairness priority level (the proxy's identity's):");
    println!(
        "    {:<32} {:>9} {:>9}",
        "priority level", "requests", "per node"
    );
    for (level, n) in &roll.levels {
        println!("    {level:<32} {n:>9} {:>9.1}", per_node(*n));
    }
    println!("  its summary: {}", roll.totals);
    Ok(())
}

/// `hollow NODES [--json FILE]`: the hollow nodes of the cluster of `KUBECONFIG` rolled.
fn hollow(args: &[String]) -> anyhow::Result<()> {
    let nodes: usize = args.first().context(USAGE)?.parse().context("NODES")?;
    let json = match &args[1..] {
        [] => None,
        [flag, file] if flag == "--json" => Some(std::path::PathBuf::from(file)),
        _ => anyhow::bail!("{USAGE}"),
    };
    let cli = std::env::var_os("NODEJOB_BENCH_CLI")
        .context("NODEJOB_BENCH_CLI: the nodejob binary to roll with (e2e/bench sets it)")?;
    let exe = std::env::current_exe()?;
    println!("nodejob-bench hollow: {}", machine());
    let rolled = runtime(false)?.block_on(hollow::roll(nodes, Path::new(&cli), &exe))?;
    hollow::print(&rolled)?;
    if let Some(file) = json {
        hollow::append(&file, &rolled)?;
    }
    Ok(())
}

/// `hollow-table FILE`: a row per line of `FILE` (`hollow NODES --json FILE`'s).
fn hollow_table(args: &[String]) -> anyhow::Result<()> {
    let file = args.first().context(USAGE)?;
    let text = std::fs::read_to_string(file).with_context(|| file.clone())?;
    let rolls: Vec<hollow::Hollow> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {file}"))?;
    println!(
        "Hollow nodes on a real control plane: `nodejob upgrade` (release) at max_unavailable \
         10%, a replica per 10 workers behind a budget of 10%, beside the same roll on the fake"
    );
    hollow::print_table(&rolls)
}

/// `0.123 ms`, or `1.23 s` from a second on.
fn ms(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{:.3} ms", d.as_secs_f64() * 1e3)
    }
}

/// The CPU, its cores and the memory, as `/proc` tells them.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let build = if cfg!(debug_assertions) {
        "debug build (use --release)"
    } else {
        "release build"
    };
    format!("{model}, {cores} cores, {mem_gib:.0} GiB; {build}")
}
