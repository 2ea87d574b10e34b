//! Seeded fault schedules on a 20-node cluster: the roll's invariants hold under API errors,
//! node flaps, slow replacement pods and slow reboots, every run ends at the target or with a
//! report naming the cause, and reruns (which resume) finish the roll.
//!
//! Each seed draws its schedule with a small PRNG written here (splitmix64), so a seed is the
//! whole of a failure's reproduction:
//! - the cluster: 3 control-plane nodes and 17 workers in 2 or 3 zones, a Deployment `web` of
//!   4 to 8 replicas on the workers behind a budget allowing one disruption; every host
//!   upgrades in 10 s and reboots in 15 s unless drawn slow (the model's defaults are 20 s and
//!   30 s: quicker keeps the seeds cheap, and a fault does the same);
//! - the plan: `max_unavailable` 1 to 3 (or 10%, 15%), a health check or not;
//! - transient API errors (500, 503, 504, 429) with a probability of 1% to 8% on a few verbs,
//!   sometimes 1% to 2% on every verb ([`FakeCluster::fail_randomly`]);
//! - node flaps: up to 3 nodes (any, control plane included) going NotReady for 5 s to 2 min
//!   and Ready again, at some time within the first 25 minutes;
//! - slow replacement pods: `replica_create` up to 10 s and `container_start` up to 25 s;
//! - slow reboots: some nodes take 1 to 4 minutes to come back (within the plan's 5-minute
//!   reboot timeout), and sometimes one node takes 5.3 to 8 minutes (beyond it).
//!
//! Then [`upgrade_driver::run`], and up to 3 reruns while it has not ended `Done`, each after a
//! 5-minute pause (an operator reading the report): the first rerun keeps the API errors or not
//! (drawn), the later ones run with none and after the last flap is over, as an operator who
//! fixed the cause would. The slow pods and reboots stay: they are how the cluster is.
//!
//! # What is checked
//! - After every API write ([`Harness`]): at most `max_unavailable` nodes of the plan cordoned
//!   by us or NotReady, at most one control-plane node so, at most one host upgrade pod per
//!   node; over the nodes **no flap touches**, since a flapped node is NotReady by no doing of
//!   the driver's and the harness cannot tell.
//! - At the start of every batch (from its `BatchStarted` event, emitted with no await between
//!   the driver's read of the nodes and it, so the cluster is as the driver saw it), over
//!   **every** node, flapped ones included: the nodes unavailable then plus the batch are at
//!   most `max_unavailable`, and a control-plane batch starts only while no other
//!   control-plane node is unavailable.
//! - Every run: `Done` with every node at the target; or `Failed` naming every failed node in
//!   its retry command, each failure with its message; or `Stopped` with its reason; or an
//!   [`upgrade_driver::Error`] (the nodes could not be listed) with its message. A node the
//!   report calls upgraded is at the target and not cordoned by us.
//! - At the end: the last run `Done`; every node at the target, schedulable, without our
//!   in-progress record, its host Job deleted; the Lease released; and the host upgrade ran
//!   **exactly once** per node: the host model counts one `upgrade` execution per node (no
//!   host fault is drawn, so no execution fails and none may be repeated; one at the target
//!   already would count too), and the node's whole watch history shows exactly one new
//!   `bootID`, at the target.
//!
//! # Running
//! - `cargo test -p upgrade-driver --test faults`: seeds 0 to 63.
//! - The soak, in `.ci/run`: `NODEJOB_SOAK_SEEDS=1000 cargo test --release -p upgrade-driver
//!   --test faults -- --nocapture` runs seeds 0 to 999 and prints each failing seed with why.
//! - One seed, with its schedule and each run's report: `NODEJOB_SEED=17 cargo test -p
//!   upgrade-driver --test faults -- --nocapture`.
//!
//! Each seed runs in a fresh paused current-thread runtime, so it replays alone as it ran in
//! the loop (`a_seed_replays_exactly` checks that), and seeds are spread over the machine's
//! cores.

mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use nodejob_conformance::soak::{Summary, conclude, run_seed, run_seeds, seeds};
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_core::{ApiError, Change, Clock, NodeApi};
use nodejob_fake::schedule::Draw;
use nodejob_fake::{Config, FakeCluster, Timing, Verb, Verbs};
use support::*;
use upgrade_driver::records::{self, IN_PROGRESS};
use upgrade_driver::{MaxUnavailable, NodeResult, Outcome, Plan, Report, run};

/// Seeds run by `cargo test`.
const SEEDS: u64 = 64;
/// Runs at most: the first and 3 reruns.
const RUNS: usize = 4;
/// The pause before a rerun.
const PAUSE: Duration = Duration::from_secs(5 * 60);
/// A run that has not ended after this much virtual time hangs (a roll here takes well under an
/// hour).
const RUN_BOUND: Duration = Duration::from_secs(6 * 3600);
/// The plan's reboot timeout (the test plan's).
const REBOOT_TIMEOUT: Duration = Duration::from_secs(300);

// ---- the seed's draws ----

/// A node NotReady from `at` for `down_for`, then Ready again.
#[derive(Clone, Debug)]
struct Flap {
    node: String,
    at: Duration,
    down_for: Duration,
}

/// Everything a seed decides.
#[derive(Clone, Debug)]
struct Schedule {
    zones: Vec<(&'static str, usize)>,
    replicas: i32,
    timing: Timing,
    max_unavailable: MaxUnavailable,
    health_check: bool,
    api_errors: Vec<(Verbs, ApiError, f64)>,
    /// Whether the first rerun still meets the API errors.
    errors_on_first_rerun: bool,
    flaps: Vec<Flap>,
    /// Nodes whose reboot takes this long (the others' takes 15 s, [`host_timing`]).
    slow_reboots: Vec<(String, Duration)>,
}

/// The verbs the driver's runs lean on, for drawn API errors.
const VERBS: &[Verb] = &[
    Verb::GetNode,
    Verb::ListNodes,
    Verb::WaitNode,
    Verb::PatchNode,
    Verb::CreateJob,
    Verb::GetJob,
    Verb::WaitJob,
    Verb::DeleteJob,
    Verb::ListPods,
    Verb::PodLog,
    Verb::CreateEvent,
    Verb::ListNodePods,
    Verb::GetPod,
    Verb::WaitPod,
    Verb::EvictPod,
    Verb::GetLease,
    Verb::ReplaceLease,
];

fn transient(rng: &mut Draw) -> ApiError {
    let errors = [
        (500, "etcdserver: request timed out"),
        (503, "the server is currently unable to handle the request"),
        (
            504,
            "the server was unable to return a response in the time allotted",
        ),
        (
            429,
            "the server has received too many requests and has asked us to try again later",
        ),
    ];
    let (code, message) = *rng.pick(&errors);
    ApiError::transient(code, message)
}

impl Schedule {
    fn draw(seed: u64) -> Self {
        let mut rng = Draw::new(seed);
        let zones = if rng.chance(0.5) {
            vec![("zone-a", 6), ("zone-b", 6), ("zone-c", 5)]
        } else {
            vec![("zone-a", 9), ("zone-b", 8)]
        };
        let names = node_names(&zones);
        let replicas = rng.range(4, 8) as i32;
        let mut timing = Timing::default();
        if rng.chance(0.5) {
            timing.replica_create = rng.millis(200, 10_000);
            timing.container_start = rng.millis(1_000, 25_000);
        }
        let max_unavailable = *rng.pick(&[
            MaxUnavailable::Count(1),
            MaxUnavailable::Count(2),
            MaxUnavailable::Count(3),
            MaxUnavailable::Percent(10),
            MaxUnavailable::Percent(15),
        ]);
        let health_check = rng.chance(0.3);
        let mut api_errors = Vec::new();
        if rng.chance(0.75) {
            for _ in 0..rng.range(1, 4) {
                let verb = *rng.pick(VERBS);
                let p = rng.range(1, 8) as f64 / 100.0;
                api_errors.push((Verbs::Only(verb), transient(&mut rng), p));
            }
        }
        if rng.chance(0.15) {
            let p = rng.range(1, 2) as f64 / 100.0;
            api_errors.push((Verbs::All, transient(&mut rng), p));
        }
        let errors_on_first_rerun = rng.chance(0.5);
        let flaps = (0..rng.range(0, 3))
            .map(|_| Flap {
                node: rng.pick(&names).clone(),
                at: rng.millis(0, 25 * 60_000),
                down_for: rng.millis(5_000, 120_000),
            })
            .collect();
        let mut slow_reboots = Vec::new();
        for name in &names {
            if rng.chance(0.15) {
                slow_reboots.push((name.clone(), rng.millis(60_000, 240_000)));
            }
        }
        if rng.chance(0.2) {
            let name = rng.pick(&names).clone();
            slow_reboots.retain(|(n, _)| *n != name);
            slow_reboots.push((name, rng.millis(320_000, 480_000)));
        }
        Schedule {
            zones,
            replicas,
            timing,
            max_unavailable,
            health_check,
            api_errors,
            errors_on_first_rerun,
            flaps,
            slow_reboots,
        }
    }

    fn flapped(&self) -> BTreeSet<String> {
        self.flaps.iter().map(|f| f.node.clone()).collect()
    }

    /// When the last flap is over.
    fn flaps_over(&self) -> Duration {
        self.flaps
            .iter()
            .map(|f| f.at + f.down_for)
            .max()
            .unwrap_or_default()
    }
}

/// The names of the cluster's nodes, as [`build`] makes them.
fn node_names(zones: &[(&str, usize)]) -> Vec<String> {
    let control = (0..3).map(|i| format!("cp-{i}"));
    let workers = zones
        .iter()
        .flat_map(|(zone, count)| (0..*count).map(move |i| format!("{zone}-{i}")));
    control.chain(workers).collect()
}

/// The cluster of `schedule`, faults armed and flaps scheduled (as `support::cluster`, with the
/// schedule's timing).
fn build(seed: u64, schedule: &Schedule) -> Result<(Arc<FakeCluster>, Vec<String>), String> {
    let fake = FakeCluster::with_config(Config {
        seed,
        timing: schedule.timing.clone(),
    });
    let names = node_names(&schedule.zones);
    let err = |e: ApiError| e.to_string();
    for name in &names {
        fake.add_node(name).map_err(err)?;
        match name.strip_prefix("cp-") {
            Some(_) => {
                fake.label_node(name, CONTROL_PLANE, "").map_err(err)?;
            }
            None => {
                let zone = &name[..name.rfind('-').unwrap_or(name.len())];
                fake.label_node(name, ZONE, zone).map_err(err)?;
                fake.label_node(name, WORKER.0, WORKER.1).map_err(err)?;
            }
        }
    }
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    let replicas = schedule.replicas;
    fake.create_deployment_now(&deployment("default", "web", replicas, &label))
        .map_err(err)?;
    fake.create_budget_now(&budget("default", "web", "web", replicas - 1))
        .map_err(err)?;
    for name in &names {
        let mut host = fake.host(name).ok_or(format!("no host model on {name}"))?;
        host.timing = quick_host_timing();
        if let Some((_, slow)) = schedule.slow_reboots.iter().find(|(n, _)| n == name) {
            host.timing.reboot_time = *slow;
        }
        fake.set_host(name, host).map_err(err)?;
    }
    for (verbs, error, p) in &schedule.api_errors {
        fake.fail_randomly(*verbs, error.clone(), *p);
    }
    for flap in &schedule.flaps {
        let (down, up) = (flap.node.clone(), flap.node.clone());
        fake.schedule(flap.at, move |c| {
            let _ = c.set_node_ready(&down, false);
        });
        fake.schedule(flap.at + flap.down_for, move |c| {
            let _ = c.set_node_ready(&up, true);
        });
    }
    Ok((Arc::new(fake), names))
}

fn plan_for(schedule: &Schedule) -> Plan {
    let mut spec = plan_spec();
    spec.max_unavailable = schedule.max_unavailable;
    spec.reboot_timeout = REBOOT_TIMEOUT;
    if schedule.health_check {
        spec.health_check = Some(vec![spec.binary.clone(), "health".into()]);
    }
    plan(spec)
}

// ---- one seed ----

/// A run's outcome in short: `done`, `failed: <node> <step>: <message>`, `stopped: <why>`,
/// `error: <error>`.
fn short(result: &Result<Report, upgrade_driver::Error>) -> String {
    match result {
        Err(e) => format!("error: {e}"),
        Ok(r) => match &r.outcome {
            Outcome::Done => "done".into(),
            Outcome::Stopped { why } => format!("stopped: {why}"),
            Outcome::Paused { why } => format!("paused: {why}"),
            Outcome::Failed { .. } => {
                let failures: Vec<String> = r
                    .nodes
                    .iter()
                    .filter_map(|n| {
                        let f = n.failure()?;
                        Some(format!("{} {}: {}", n.name, f.step, f.message))
                    })
                    .collect();
                format!("failed: {}", failures.join("; "))
            }
        },
    }
}

/// What every run must end with (see the driver's `contract`). Answers whether it is `Done`.
fn check_run(
    fake: &FakeCluster,
    names: &[String],
    result: &Result<Report, upgrade_driver::Error>,
) -> Result<bool, String> {
    let report = match result {
        Err(e) if e.to_string().is_empty() => return Err("an error without a message".into()),
        Err(_) => return Ok(false),
        Ok(report) => report,
    };
    for n in &report.nodes {
        if n.result != Some(NodeResult::Upgraded) {
            continue;
        }
        let node = fake.node(&n.name).ok_or(format!("{} is gone", n.name))?;
        if kubelet_version(&node) != TARGET || cordoned_by_us(&node) {
            return Err(format!(
                "{} reported upgraded, but it is at {} and cordoned by us: {}",
                n.name,
                kubelet_version(&node),
                cordoned_by_us(&node)
            ));
        }
    }
    match &report.outcome {
        Outcome::Done => {
            for name in names {
                let node = fake.node(name).ok_or(format!("{name} is gone"))?;
                if kubelet_version(&node) != TARGET {
                    return Err(format!("done, but {name} is at {}", kubelet_version(&node)));
                }
            }
            let unfinished: Vec<&str> = report
                .nodes
                .iter()
                .filter(|n| {
                    !matches!(
                        n.result,
                        Some(NodeResult::Upgraded | NodeResult::Skipped { .. })
                    )
                })
                .map(|n| n.name.as_str())
                .collect();
            if !unfinished.is_empty() {
                return Err(format!("done, but not finished: {unfinished:?}"));
            }
            Ok(true)
        }
        Outcome::Failed { nodes, .. } => {
            let failed: Vec<_> = report
                .nodes
                .iter()
                .filter(|n| n.failure().is_some())
                .collect();
            if failed.is_empty() {
                return Err(format!("failed, naming no failed node: {report:#?}"));
            }
            for n in failed {
                let message = &n.failure().map(|f| f.message.clone()).unwrap_or_default();
                if message.is_empty() || !nodes.contains(&n.name) {
                    return Err(format!(
                        "failed node {} without a message ({message:?}) or not among the \
                         nodes to retry ({nodes:?})",
                        n.name
                    ));
                }
            }
            Ok(false)
        }
        Outcome::Stopped { why } if why.is_empty() => Err("stopped without a reason".into()),
        Outcome::Stopped { .. } => Ok(false),
        Outcome::Paused { why } => Err(format!("paused, yet nobody pauses here: {why}")),
    }
}

/// The `bootID`s `node` went through from the state given, with the version it reported on
/// each, from its whole watch history.
async fn boots(fake: &FakeCluster, node: &Node) -> Result<Vec<(String, String)>, String> {
    let name = records::name(node);
    let last = fake.node(name).map(|n| records::rv(&n)).unwrap_or_default();
    let mut since = records::rv(node);
    let mut boots = vec![(records::boot_id(node).to_string(), kubelet_version(node))];
    while since != last {
        let change = fake
            .wait_node(name, Some(&since), Duration::from_millis(1))
            .await
            .map_err(|e| format!("replaying {name}: {e}"))?;
        let Change::Applied(node) = change else {
            return Err(format!("replaying {name}: {change:?}"));
        };
        let boot = records::boot_id(&node).to_string();
        if boots.last().is_none_or(|(b, _)| *b != boot) {
            boots.push((boot, kubelet_version(&node)));
        }
        since = records::rv(&node);
    }
    Ok(boots)
}

/// One seed: its schedule, the runs, the checks. `Err` says what went wrong.
async fn scenario(seed: u64, verbose: bool) -> Result<Summary, String> {
    let schedule = Schedule::draw(seed);
    if verbose {
        println!("seed {seed}: {schedule:#?}");
    }
    let (fake, names) = build(seed, &schedule)?;
    let initial: Vec<Node> = names.iter().filter_map(|n| fake.node(n)).collect();
    let plan = plan_for(&schedule);
    let width = schedule.max_unavailable.of(names.len());
    let flapped = schedule.flapped();
    let watched: Vec<String> = names
        .iter()
        .filter(|n| !flapped.contains(*n))
        .cloned()
        .collect();
    let api = harness(fake.clone(), watched, width);
    let check = Arc::new(BatchCheck {
        fake: fake.clone(),
        nodes: names.clone(),
        width,
        violations: Mutex::new(Vec::new()),
    });

    let mut runs = Vec::new();
    let mut last: Option<Report> = None;
    for attempt in 0..RUNS {
        if attempt > 0 {
            if attempt > 1 || !schedule.errors_on_first_rerun {
                fake.clear_faults();
            }
            if attempt > 1 {
                let over = schedule.flaps_over();
                api.sleep(over.saturating_sub(api.now())).await;
            }
            api.sleep(PAUSE).await;
        }
        let Ok(result) = tokio::time::timeout(RUN_BOUND, run(&api, &plan, check.clone())).await
        else {
            return Err(format!(
                "run {attempt} did not end within {RUN_BOUND:?} of virtual time; runs: {runs:#?}"
            ));
        };
        runs.push(short(&result));
        if verbose {
            println!("run {attempt} at {:?}: {result:#?}", api.now());
        }
        let done = check_run(&fake, &names, &result)
            .map_err(|e| format!("run {attempt}: {e}; runs: {runs:#?}"))?;
        if let Ok(report) = result {
            last = Some(report);
        }
        if done {
            break;
        }
    }
    let fail = |what: String| Err(format!("{what}; runs: {runs:#?}"));

    let violations: Vec<String> = api
        .violations()
        .into_iter()
        .chain(check.violations.lock().unwrap().clone())
        .collect();
    if !violations.is_empty() {
        return fail(format!("invariants broken: {violations:#?}"));
    }
    if last.as_ref().map(|r| &r.outcome) != Some(&Outcome::Done) {
        return fail(format!("not done after {RUNS} runs"));
    }
    if let Some(report) = &last
        && report.lease.as_ref().map(|l| &l.ended) != Some(&upgrade_driver::LeaseEnd::Released)
    {
        return fail(format!("the Lease was not released: {:?}", report.lease));
    }
    fake.clear_faults();
    for (name, before) in names.iter().zip(&initial) {
        let node: Node = fake.get_node(name).await.map_err(|e| e.to_string())?;
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        if kubelet_version(&node) != TARGET
            || records::unschedulable(&node)
            || annotations.contains_key(IN_PROGRESS)
        {
            return fail(format!(
                "{name} at {}, cordoned {}, annotations {annotations:?}",
                kubelet_version(&node),
                records::unschedulable(&node)
            ));
        }
        if let Some(job) = fake.job(NS, &plan.job_name(name)) {
            return fail(format!("{name}'s host job is left: {:?}", job.status));
        }
        let executions = api.upgrades(name);
        let boots = boots(&fake, before).await?;
        let new_boots: Vec<&(String, String)> = boots.iter().skip(1).collect();
        if executions != 1 || new_boots.len() != 1 || new_boots[0].1 != TARGET {
            return fail(format!(
                "{name}: {executions} upgrade execution(s) and boots {boots:?}: not exactly one \
                 upgrade to {TARGET}"
            ));
        }
    }
    if verbose {
        let mut by_verb: std::collections::BTreeMap<String, usize> = Default::default();
        for call in fake.calls() {
            *by_verb.entry(call.verb.to_string()).or_default() += 1;
        }
        println!(
            "seed {seed}: API calls by verb {by_verb:?}, {} writes",
            api.writes()
        );
    }
    Ok(Summary {
        runs,
        calls: fake.calls().len(),
        took: fake.now(),
    })
}

#[test]
fn seeded_fault_schedules_keep_the_invariants_and_every_roll_ends_at_the_target() {
    let (seeds, verbose) = seeds(SEEDS);
    let started = Instant::now();
    let results = run_seeds(seeds.clone(), |seed| scenario(seed, verbose));
    let wall = started.elapsed();

    conclude("fault soak", seeds, wall, &results, kind, |seed| {
        format!("schedule: {:#?}", Schedule::draw(seed))
    });
}

#[test]
fn a_seed_replays_exactly() {
    let first = run_seed(3, &|seed| scenario(seed, false));
    let second = run_seed(3, &|seed| scenario(seed, false));
    assert_eq!(first, second);
    let summary = first.unwrap_or_else(|e| panic!("seed 3 failed: {e}"));
    assert!(summary.calls > 0 && !summary.runs.is_empty(), "{summary:?}");
}
