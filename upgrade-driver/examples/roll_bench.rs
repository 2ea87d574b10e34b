//! A benchmark, not a test: a whole roll of a 1,000-node simulated cluster, in paused virtual
//! time, measured in wall time, API requests and peak memory.
//!
//! ```text
//! cargo run --release -p upgrade-driver --example roll_bench [-- NODES]
//! ```
//!
//! The cluster ([`nodejob_fake::FakeCluster`], seed 1, default timings): 3 control-plane nodes
//! and the rest of `NODES` (1,000 unless given) as workers in 4 zones, a Deployment `web` of
//! 100 replicas on the workers behind a budget allowing one disruption. The plan: every node to
//! `v1.38.0`, `max_unavailable` 10%. It prints the nodes, the virtual duration of the roll, the
//! wall time, the API requests in all and per node by verb, and the peak resident memory of the
//! process (`VmHWM` of `/proc/self/status`: the cluster's store and its whole watch history
//! included). It exits 1 when the roll does not end `Done` with every node at the target.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use nodejob_conformance::workloads::{budget, deployment};
use nodejob_fake::{Clock, FakeCluster, labels};
use upgrade_driver::{MaxUnavailable, Outcome, Plan, PlanSpec, VersionSource, quiet, run};

const TARGET: &str = "v1.38.0";
const ZONES: [&str; 4] = ["zone-a", "zone-b", "zone-c", "zone-d"];
const CONTROL_PLANE: usize = 3;
const REPLICAS: i32 = 100;
const WORKER: (&str, &str) = ("role", "worker");

fn main() -> ExitCode {
    let nodes: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 1_000,
        Some(Ok(n)) if n > CONTROL_PLANE => n,
        Some(_) => {
            eprintln!("usage: roll_bench [NODES], NODES more than {CONTROL_PLANE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(bench(nodes)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("roll_bench: {why}");
            ExitCode::FAILURE
        }
    }
}

async fn bench(nodes: usize) -> Result<(), String> {
    let setup = Instant::now();
    let fake = FakeCluster::with_seed(1);
    let names = cluster(&fake, nodes)?;
    // Let the Deployment's pods start before the roll.
    fake.sleep(Duration::from_secs(10)).await;
    let setup = setup.elapsed();

    let mut spec = PlanSpec::new(TARGET);
    spec.identity = "roll-bench".into();
    spec.max_unavailable = MaxUnavailable::Percent(10);
    let plan = Plan::build(spec).map_err(|e| e.to_string())?;
    let width = plan.spec().max_unavailable.of(names.len());

    let calls_before = fake.calls().len();
    let started_virtual = fake.now();
    let started = Instant::now();
    let report = run(&fake, &plan, quiet())
        .await
        .map_err(|e| e.to_string())?;
    let wall = started.elapsed();
    let virtual_time = fake.now() - started_virtual;

    if report.outcome != Outcome::Done {
        return Err(format!("the roll ended {:?}", report.outcome));
    }
    let behind: Vec<&String> = names
        .iter()
        .filter(|n| {
            fake.node(n).as_ref().and_then(|node| {
                upgrade_driver::version::version(node, &VersionSource::KubeletVersion)
                    .map(str::to_string)
            }) != Some(TARGET.to_string())
        })
        .collect();
    if !behind.is_empty() {
        return Err(format!(
            "{} node(s) not at {TARGET}: {behind:?}",
            behind.len()
        ));
    }

    let calls = fake.calls();
    let roll_calls = &calls[calls_before..];
    let mut by_verb: BTreeMap<String, usize> = BTreeMap::new();
    for call in roll_calls {
        *by_verb.entry(call.verb.to_string()).or_default() += 1;
    }
    let n = names.len() as f64;
    println!("nodes                 {}", names.len());
    println!(
        "control plane, zones  {CONTROL_PLANE}, {} ({}), max_unavailable {width}",
        ZONES.len(),
        ZONES.join(", ")
    );
    println!(
        "pods                  {REPLICAS} web replicas behind a budget; {} evicted",
        report.totals.pods_evicted
    );
    println!("upgraded              {}", report.totals.upgraded);
    println!("virtual time          {}", minutes(virtual_time));
    println!("wall time             {wall:.2?} (cluster setup {setup:.2?} more)");
    println!(
        "API requests          {} in all, {:.1} per node",
        roll_calls.len(),
        roll_calls.len() as f64 / n
    );
    for (verb, count) in &by_verb {
        println!(
            "  {verb:<20}{count:>8}  {:>6.2} per node",
            *count as f64 / n
        );
    }
    println!("peak memory (VmHWM)   {}", peak_memory());
    Ok(())
}

/// Adds `nodes` nodes (3 control-plane, the rest workers spread over the zones) and the
/// Deployment behind its budget. Answers the node names.
fn cluster(fake: &FakeCluster, nodes: usize) -> Result<Vec<String>, String> {
    let err = |e: nodejob_core::ApiError| e.to_string();
    let mut names = Vec::with_capacity(nodes);
    for i in 0..CONTROL_PLANE {
        let name = format!("cp-{i}");
        fake.add_node(&name).map_err(err)?;
        fake.label_node(&name, labels::CONTROL_PLANE, "")
            .map_err(err)?;
        names.push(name);
    }
    for i in 0..nodes - CONTROL_PLANE {
        let zone = ZONES[i % ZONES.len()];
        let name = format!("{zone}-{:03}", i / ZONES.len());
        fake.add_node(&name).map_err(err)?;
        fake.label_node(&name, labels::ZONE, zone).map_err(err)?;
        fake.label_node(&name, WORKER.0, WORKER.1).map_err(err)?;
        names.push(name);
    }
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    fake.create_deployment_now(&deployment("default", "web", REPLICAS, &label))
        .map_err(err)?;
    fake.create_budget_now(&budget("default", "web", "web", REPLICAS - 1))
        .map_err(err)?;
    Ok(names)
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}h {:02}m {:02}s ({s} s)", s / 3600, s / 60 % 60, s % 60)
}

/// `VmHWM` of `/proc/self/status`: the peak resident set size.
fn peak_memory() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l["VmHWM:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "unknown (no /proc/self/status)".into())
}
