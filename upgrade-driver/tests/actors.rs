//! The seeded **actor soak**: a roll runs while people, nodes and other controllers change the
//! cluster under it ([`nodejob_fake::schedule`]: cordons and uncordons, labels moving nodes in
//! and out of the selection, nodes deleted, added, rebooting by themselves, flapping, reporting
//! another version; budgets created, changed, deleted; Deployments created; Pods deleted; the
//! Lease taken by another holder; API faults), and the driver itself crashes before a drawn
//! call of a drawn verb and is resumed under another identity. Every write is checked against
//! the invariants below as it is made; each run's report against the cluster; the last run
//! must finish the roll once the actors are done and an operator removed the budgets they
//! left.
//!
//! # Invariants, checked at every write of the driver ([`Watch`])
//! 1. A host upgrade Job is created only on a cordoned node with no evictable Pod on it, and
//!    with no other host Pod live on it.
//! 2. At most `max_unavailable` nodes taken down (cordoned by us, or NotReady), and at most
//!    one control-plane node, over the nodes no actor touched (cordoned, uncordoned, flapped,
//!    rebooted, re-versioned, deleted or added: their state is not the driver's doing alone).
//! 3. An uncordon is only of a node our record says we cordoned.
//! 4. The done record is written only on a node that reports the target.
//! 5. At the start of every batch (its `BatchStarted` event, sent with no await after the
//!    driver's read of the nodes), over every node of the plan, touched or not: the nodes
//!    unavailable then and the batch are at most `max_unavailable`, and a control-plane node
//!    starts only while no other one is down.
//! 6. No write of any kind once the driver has read the Lease as another holder's (a Lease
//!    call after the theft), until it holds the Lease again.
//! 7. A node labelled quarantined is never uncordoned by us.
//!
//! And at the start of every batch of a run that keeps the version skew policy (until one is
//! refused by it: the operator then allows skew), 8: its nodes' move breaks no rule of the
//! policy against the apiserver's version then ([`SkewCheck`]).
//!
//! Invariant 1 holds for the rollback's host Job too.
//!
//! And 9: no node starts (its Cordon step) while the rolls are paused: in half the seeds an
//! operator pauses them ([`nodejob_core::pause`]) and lifts the switch minutes later
//! ([`pausing_operator`]), across runs, crashes and the Lease's thefts.
//!
//! # At the end of each run and of the seed
//! 10. The run ends within its bound.
//! 11. The report agrees with the cluster: a node reported upgraded has no in-progress record
//!     and carries the done record (if it still exists); a node failed or interrupted after it
//!     was marked keeps our record (if it still exists); a `Done` run leaves no record anywhere.
//! 12. The host upgrade ran at most once per node (deleted nodes included, by their retired
//!     host models), and exactly once on every node the last run reports upgraded.
//!
//! # Under the long-roll policies
//! Each seed runs twice: once with the plan's defaults (the digest of that soak changes only
//! when default behaviour does), and once under long-roll policies drawn for it from a stream
//! of its own (so the cluster, the actors and the crash are the same): `on_undrainable` skip
//! or quarantine with `max_blocked` 0 to 2; a soak of 1 to 5 minutes or none; `on_failure`
//! stop or rollback, with a host fault on one node (its upgrade fails, it boots the old
//! version, or it is unhealthy) half the time. The operator of the last runs then also fixes
//! that host and removes the quarantine labels. The report check gains: a node reported blocked
//! carries the blocked record and not ours, a quarantined one is still labelled; a node failed
//! or stopped at its soak carries the soak record; a node reported rolled back is at the version
//! it was rolled back to, and not ours.
//!
//! # Running
//! - `cargo test -p upgrade-driver --test actors`: seeds 0 to 63.
//! - The soak, in `.ci/run`: `NODEJOB_SOAK_SEEDS=1000 cargo test --release -p upgrade-driver
//!   --test actors -- --nocapture` prints the tally and each failing seed with its schedule.
//! - One seed, its schedule and each run's report: `NODEJOB_SEED=17 cargo test -p
//!   upgrade-driver --test actors -- --nocapture`.

mod invariants;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use invariants::{Watch, check_report, our_record, short};
use nodejob_conformance::Crashing;
use nodejob_conformance::soak::{Summary, conclude, pausing_operator, run_seeds, seeds};
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_core::{ApiError, Clock, Verb};
use nodejob_fake::FakeCluster;
use nodejob_fake::schedule::{Act, ActorSchedule, Cast, Draw};
use nodejob_fake::stratum::{Fault, Operation};
use support::*;
use upgrade_driver::EventSink;
use upgrade_driver::records::{self, QUARANTINED};
use upgrade_driver::skew::{self, Kubelet, Workers, judge};
use upgrade_driver::{
    MaxUnavailable, OnFailure, Outcome, Plan, PlanSpec, Report, Skew, Undrainable, UpgradeStep, run,
};

/// Seeds run by `cargo test`.
const SEEDS: u64 = 64;
/// Runs at most per seed.
const RUNS: usize = 5;
/// A run that has not ended after this much virtual time hangs.
const RUN_BOUND: Duration = Duration::from_secs(4 * 3600);
/// The label that puts a node into the plan's selection, when the plan selects by label.
const SELECTED: (&str, &str) = ("upgrade", "yes");

/// A driver crash: before (or after) its `nth` call of `verb`.
#[derive(Clone, Debug)]
struct Crash {
    verb: Verb,
    nth: usize,
    after: bool,
}

/// Everything a seed decides.
#[derive(Clone, Debug)]
struct Draws {
    zones: Vec<(&'static str, usize)>,
    replicas: i32,
    max_unavailable: u32,
    by_label: bool,
    health_check: bool,
    /// Whether the reruns go toward another target than the first run's.
    retarget: bool,
    crash: Option<Crash>,
    actors: ActorSchedule,
}

const CRASH_VERBS: &[Verb] = &[
    Verb::PatchNode,
    Verb::CreateJob,
    Verb::DeleteJob,
    Verb::EvictPod,
    Verb::CreateEvent,
];

fn node_names(zones: &[(&str, usize)]) -> Vec<String> {
    let control = (0..2).map(|i| format!("cp-{i}"));
    let workers = zones
        .iter()
        .flat_map(|(zone, count)| (0..*count).map(move |i| format!("{zone}-{i}")));
    control.chain(workers).collect()
}

impl Draws {
    fn draw(seed: u64) -> Self {
        let mut rng = Draw::new(seed);
        let zones = if rng.chance(0.5) {
            vec![("zone-a", 3), ("zone-b", 3)]
        } else {
            vec![("zone-a", 4), ("zone-b", 2), ("zone-c", 2)]
        };
        let by_label = rng.chance(0.5);
        let crash = rng.chance(0.4).then(|| Crash {
            verb: *rng.pick(CRASH_VERBS),
            nth: rng.range(0, 6) as usize,
            after: rng.chance(0.5),
        });
        let mut cast = Cast::new(node_names(&zones));
        if by_label {
            cast.selection = Some((SELECTED.0.into(), SELECTED.1.into()));
        }
        let count = rng.range(4, 16) as usize;
        let span = rng.millis(60_000, 20 * 60_000);
        Draws {
            zones,
            replicas: rng.range(2, 5) as i32,
            max_unavailable: rng.range(1, 3) as u32,
            by_label,
            health_check: rng.chance(0.3),
            retarget: rng.chance(0.2),
            crash,
            actors: ActorSchedule::draw(seed, &cast, span, count),
        }
    }
}

fn build(seed: u64, draws: &Draws) -> Result<(Arc<FakeCluster>, Vec<String>), String> {
    let fake = FakeCluster::with_seed(seed);
    let names = node_names(&draws.zones);
    let err = |e: ApiError| e.to_string();
    for name in &names {
        fake.add_node(name).map_err(err)?;
        if name.starts_with("cp-") {
            fake.label_node(name, CONTROL_PLANE, "").map_err(err)?;
        } else {
            let zone = &name[..name.rfind('-').unwrap_or(name.len())];
            fake.label_node(name, ZONE, zone).map_err(err)?;
            fake.label_node(name, WORKER.0, WORKER.1).map_err(err)?;
        }
        if draws.by_label {
            fake.label_node(name, SELECTED.0, SELECTED.1).map_err(err)?;
        }
        let mut host = fake.host(name).ok_or(format!("no host on {name}"))?;
        host.timing = quick_host_timing();
        fake.set_host(name, host).map_err(err)?;
    }
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    fake.create_deployment_now(&deployment("default", "web", draws.replicas, &label))
        .map_err(err)?;
    fake.create_budget_now(&budget("default", "web", "web", draws.replicas - 1))
        .map_err(err)?;
    Ok((Arc::new(fake), names))
}

/// The target of the reruns that go elsewhere.
const OTHER_TARGET: &str = "v1.38.1";

/// The long-roll policies a seed runs under: the plan's defaults, or drawn for the seed from a
/// stream of its own ([`Policies::draw`]).
#[derive(Clone, Debug, Default)]
struct Policies {
    /// `on_undrainable` and `max_blocked`, when drawn.
    undrainable: Option<(Undrainable, u32)>,
    /// `soak`, when drawn.
    soak: Option<Duration>,
    /// `on_failure`, when drawn.
    on_failure: Option<OnFailure>,
    /// A node whose host fails so, until the operator of the last runs fixes it.
    fault: Option<(usize, Fault)>,
}

impl Policies {
    /// The policies of `seed`, from a stream of draws apart from the schedule's.
    fn draw(seed: u64) -> Self {
        let mut rng = Draw::new(seed ^ 0x4c4f_4e47_524f_4c4c);
        let policy = *rng.pick(&[Undrainable::Skip, Undrainable::Quarantine]);
        let undrainable = Some((policy, rng.range(0, 2) as u32));
        let soak = rng.chance(0.5).then(|| rng.millis(60_000, 300_000));
        let on_failure = Some(*rng.pick(&[OnFailure::Stop, OnFailure::Rollback]));
        let fault = rng.chance(0.5).then(|| {
            let fault = *rng.pick(&[
                Fault::UpgradeFails,
                Fault::BootsOldVersion,
                Fault::Unhealthy,
            ]);
            (rng.range(0, 100) as usize, fault)
        });
        Policies {
            undrainable,
            soak,
            on_failure,
            fault,
        }
    }

    /// The node of the drawn fault, among `names`.
    fn faulty<'n>(&self, names: &'n [String]) -> Option<(&'n String, Fault)> {
        let (i, fault) = self.fault?;
        Some((&names[i % names.len()], fault))
    }

    fn apply(&self, spec: &mut PlanSpec) {
        if let Some((policy, max)) = self.undrainable {
            spec.on_undrainable = policy;
            spec.max_blocked = max;
        }
        if self.soak.is_some() {
            spec.soak = self.soak;
        }
        if let Some(policy) = self.on_failure {
            spec.on_failure = policy;
        }
    }

    fn drawn(&self) -> bool {
        self.undrainable.is_some() || self.soak.is_some() || self.on_failure.is_some()
    }
}

fn plan_for(draws: &Draws, policies: &Policies, identity: &str, target: &str, skew: Skew) -> Plan {
    let mut spec = plan_spec();
    spec.skew = skew;
    spec.target = target.into();
    spec.identity = identity.into();
    spec.max_unavailable = MaxUnavailable::Count(draws.max_unavailable);
    if draws.by_label {
        spec.selector = Some(format!("{}={}", SELECTED.0, SELECTED.1));
    }
    if draws.health_check {
        spec.health_check = Some(vec![spec.binary.clone(), "health".into()]);
    }
    policies.apply(&mut spec);
    plan(spec)
}

// ---- the version skew policy (issue 22) ----

/// Invariant 8: at the start of every batch of a run that keeps the version skew policy (its
/// `BatchStarted` event, sent with no wait after the driver's reads of the nodes and of the
/// apiserver's version), moving the batch's nodes to the target, as the cluster has them then,
/// breaks no rule of the policy against the version the apiserver answers then.
struct SkewCheck {
    fake: Arc<FakeCluster>,
    target: String,
    skew: Skew,
    violations: Mutex<Vec<String>>,
}

impl EventSink<upgrade_driver::Progress> for SkewCheck {
    fn event(&self, event: &upgrade_driver::Progress) {
        let upgrade_driver::Progress::BatchStarted { nodes: batch, .. } = event else {
            return;
        };
        if self.skew == Skew::Allow {
            return;
        }
        let server = self.fake.server_version();
        let kubelets: Vec<Kubelet> = (batch.iter())
            .filter_map(|n| self.fake.node(n))
            .map(|n| Kubelet::of(&n))
            .collect();
        let breaches = judge(&self.target, &server, &kubelets, Workers::Now);
        if !breaches.is_empty() {
            let said: Vec<String> = breaches.iter().map(|b| b.to_string()).collect();
            self.violations.lock().unwrap().push(format!(
                "batch {batch:?} started breaking the version skew policy (apiserver at \
                 {server}): {said:?}"
            ));
        }
    }
}

/// Whether a run was refused, or stopped, by the version skew policy.
fn refused_by_the_skew_policy(result: &Result<Report, upgrade_driver::Error>) -> bool {
    match result {
        Err(upgrade_driver::Error::Plan(p)) => p.field == "skew",
        Ok(r) => matches!(&r.outcome, Outcome::Stopped { why } if why.contains(skew::POLICY)),
        Err(_) => false,
    }
}

// ---- one seed ----

async fn scenario(seed: u64, verbose: bool, policies: &Policies) -> Result<Summary, String> {
    let draws = Draws::draw(seed);
    if verbose {
        println!("seed {seed}: {draws:#?}\nschedule:\n{}", draws.actors);
    }
    let (fake, names) = build(seed, &draws)?;
    if let Some((node, fault)) = policies.faulty(&names) {
        let host = fake.host(node).ok_or(format!("no host on {node}"))?;
        fake.set_host(node, host.with_fault(fault))
            .map_err(|e| e.to_string())?;
    }
    fake.sleep(Duration::from_secs(30)).await;
    // Drawn times are from the roll's start.
    let start = fake.now();
    let shifted = ActorSchedule {
        acts: (draws.actors.acts.iter())
            .map(|(at, act)| (start + *at, act.clone()))
            .collect(),
    };
    shifted.arm(&fake);
    let pauses = pausing_operator(&fake, seed, start);
    let identities = ["driver-a", "driver-b", "driver-c"];
    let versioned: BTreeSet<String> = (draws.actors.acts.iter())
        .filter_map(|(_, act)| match act {
            Act::ReportVersion { node, .. } => Some(node.clone()),
            _ => None,
        })
        .collect();
    let mut killed: BTreeMap<String, u32> = BTreeMap::new();
    let watch = |fake: &Arc<FakeCluster>, target: &str| Watch {
        fake: fake.clone(),
        target: target.to_string(),
        width: draws.max_unavailable as usize,
        ours: identities.iter().map(|s| s.to_string()).collect(),
        schedule: Mutex::new(shifted.clone()),
        versioned: versioned.clone(),
        touched: draws.actors.touched(),
        killed: Mutex::new(BTreeMap::new()),
        violations: Mutex::new(Vec::new()),
    };
    // Nodes an actor set to another version than the target: one our upgrade reached may be
    // rolled back under it, and then must be failed and named, never upgraded twice.
    let mut rolled_back: BTreeSet<String> = (draws.actors.acts.iter())
        .filter_map(|(_, act)| match act {
            Act::ReportVersion { node, version } if version != TARGET || draws.retarget => {
                Some(node.clone())
            }
            _ => None,
        })
        .collect();
    // A host that booted its old version after an upgrade that exited 0 is failed and named
    // by every run that does not roll it back (the upgrade is not run twice): as above.
    if let Some((node, Fault::BootsOldVersion)) = policies.faulty(&names) {
        rolled_back.insert(node.clone());
    }
    let mut runs = Vec::new();
    let mut violations = Vec::new();
    let mut done = false;
    // Each node's start (its Cordon step), with when: none may fall while paused.
    let starts: Arc<Mutex<Vec<(Duration, String)>>> = Arc::new(Mutex::new(Vec::new()));
    // The version skew policy is kept until a run is refused by it (an actor made a node, or
    // the control plane, report a version the target cannot follow): the operator then
    // allows skew for the runs after.
    let mut skew = Skew::Enforce;
    for attempt in 0..RUNS {
        let identity = identities[attempt.min(identities.len() - 1)];
        let target = if draws.retarget && attempt > 0 {
            OTHER_TARGET
        } else {
            TARGET
        };
        let plan = plan_for(&draws, policies, identity, target, skew);
        if attempt > 0 {
            // A rerun under another identity: the previous holder's Lease expires first.
            fake.sleep(plan.spec().lease_duration + Duration::from_secs(5))
                .await;
        }
        if attempt >= 2 {
            // The operator waits for the actors to be done, then removes the budgets they
            // left (one may block a drain for ever) before trying again.
            let over = start + shifted.over();
            fake.sleep(over.saturating_sub(fake.now())).await;
            fake.clear_faults();
            for (_, act) in &shifted.acts {
                if let Act::CreateBudget { name, .. } = act {
                    let _ = fake.delete_budget_now("default", name);
                }
            }
            // And, under the policies, fixes the faulty host and lets the nodes the runs
            // quarantined be rolled.
            if let Some((node, _)) = policies.faulty(&names)
                && let Some(mut host) = fake.host(node)
            {
                host.faults.clear();
                let _ = fake.set_host(node, host);
            }
            if policies.drawn() {
                for name in fake.node_names() {
                    if fake.node(&name).as_ref().is_some_and(records::quarantined) {
                        let unlabel = [nodejob_core::NodeChange::remove_label(QUARANTINED)];
                        let _ = fake.patch_node_now(&name, &unlabel);
                    }
                }
            }
        }
        let mut api = Crashing::new(fake.clone(), watch(&fake, target));
        // The plan's nodes as the run will select them (and those it carries on), for the
        // check at the start of every batch: over every one of them, touched or not.
        let plan_nodes: Vec<String> = (fake.node_names().into_iter())
            .filter(|n| {
                fake.node(n).is_some_and(|node| {
                    let selected =
                        !draws.by_label || records::label(&node, SELECTED.0) == Some(SELECTED.1);
                    selected || our_record(&node).is_some()
                })
            })
            .collect();
        let batches = Arc::new(BatchCheck {
            fake: fake.clone(),
            nodes: plan_nodes,
            width: draws.max_unavailable as usize,
            violations: Mutex::new(Vec::new()),
        });
        let skews = Arc::new(SkewCheck {
            fake: fake.clone(),
            target: target.to_string(),
            skew,
            violations: Mutex::new(Vec::new()),
        });
        let sinks: Arc<dyn upgrade_driver::ProgressSink> = {
            let (batches, skews, starts) = (batches.clone(), skews.clone(), starts.clone());
            let fake = fake.clone();
            Arc::new(move |e: &upgrade_driver::Progress| {
                batches.event(e);
                skews.event(e);
                if let upgrade_driver::Progress::StepStarted {
                    node,
                    step: UpgradeStep::Cordon,
                } = e
                {
                    starts.lock().unwrap().push((fake.now(), node.clone()));
                }
            })
        };
        let crash = draws.crash.clone().filter(|_| attempt == 0);
        if let Some(c) = &crash {
            api = api.crashing_at_verb(c.verb, c.nth, c.after);
        }
        let result = tokio::select! {
            result = tokio::time::timeout(RUN_BOUND, run(&api, &plan, sinks)) => {
                match result {
                    Ok(result) => Some(result),
                    Err(_) => return Err(format!("run {attempt} did not end within {RUN_BOUND:?}; runs {runs:#?}")),
                }
            }
            _ = api.crashed() => None,
        };
        violations.extend(api.observer().violations.lock().unwrap().clone());
        violations.extend(batches.violations.lock().unwrap().clone());
        violations.extend(skews.violations.lock().unwrap().clone());
        for (node, n) in api.observer().killed.lock().unwrap().iter() {
            *killed.entry(node.clone()).or_default() += n;
        }
        let Some(result) = result else {
            runs.push(format!("crashed at {:?}", crash));
            continue;
        };
        runs.push(short(&result));
        if refused_by_the_skew_policy(&result) {
            skew = Skew::Allow;
        }
        if verbose {
            println!("run {attempt} at {:?}: {result:#?}", fake.now());
        }
        if let Ok(report) = &result {
            check_report(&fake, report, &versioned)
                .map_err(|e| format!("run {attempt}: {e}; runs {runs:#?}"))?;
            if report.outcome == Outcome::Done && attempt >= 2 {
                done = true;
                break;
            }
            let failed: Vec<&str> = (report.nodes.iter())
                .filter(|n| n.failure().is_some())
                .map(|n| n.name.as_str())
                .collect();
            let named_rollbacks = matches!(report.outcome, Outcome::Failed { .. })
                && failed.iter().all(|n| rolled_back.contains(*n));
            if named_rollbacks && attempt >= 2 {
                // Rolled back out of band after our upgrade: failed and named, as it must be.
                done = true;
                break;
            }
        }
    }
    // 11. No node starts while paused.
    let paused = *pauses.lock().unwrap();
    for (at, node) in starts.lock().unwrap().iter() {
        if paused.paused_at(*at) {
            violations.push(format!(
                "9: {node} started at {at:?}, while paused: {paused:?}"
            ));
        }
    }
    let fail = |what: String| Err(format!("{what}; runs: {runs:#?}"));
    if !violations.is_empty() {
        return fail(format!("invariants broken: {violations:#?}"));
    }
    if !done {
        return fail(format!("not done after {RUNS} runs"));
    }
    // 8. At most once per node, deleted ones included, but for the retries of host Jobs
    // recorded killed (their Pod deleted before the host operation ended).
    let mut all: BTreeSet<String> = names.iter().cloned().collect();
    all.extend(fake.node_names());
    for name in &all {
        let executions = fake
            .host_state(name)
            .map(|s| s.executions(Operation::Upgrade))
            .unwrap_or(0);
        // Each rollback lets a later run try the upgrade again; the faulty host's upgrade is
        // retried by each run while it fails (a failed one changed nothing).
        let rolled_back = fake
            .host_state(name)
            .map(|s| s.executions(Operation::Rollback))
            .unwrap_or(0);
        let faulty = policies.faulty(&names).is_some_and(|(n, _)| n == name);
        let retries = killed.get(name).copied().unwrap_or(0)
            + u32::from(draws.retarget)
            + rolled_back
            + if faulty { RUNS as u32 } else { 0 };
        if executions > 1 + retries {
            return fail(format!(
                "{name}: {executions} upgrade executions, {retries} of them after a killed one"
            ));
        }
    }
    Ok(Summary {
        runs,
        calls: fake.calls().len(),
        took: fake.now(),
    })
}

#[test]
fn seeded_actor_schedules_keep_every_invariant_and_every_roll_finishes() {
    let (seeds, verbose) = seeds(SEEDS);
    let started = Instant::now();
    let defaults = Policies::default();
    let results = run_seeds(seeds.clone(), |seed| scenario(seed, verbose, &defaults));
    let wall = started.elapsed();
    conclude("actor soak", seeds, wall, &results, kind, |seed| {
        format!("schedule:\n{}", Draws::draw(seed).actors)
    });
}

/// The same seeds under long-roll policies drawn for each (see the module docs).
#[test]
fn seeded_actor_schedules_under_the_long_roll_policies_keep_every_invariant() {
    let (seeds, verbose) = seeds(SEEDS);
    let started = Instant::now();
    let results = run_seeds(seeds.clone(), |seed| {
        let policies = Policies::draw(seed);
        async move { scenario(seed, verbose, &policies).await }
    });
    let wall = started.elapsed();
    conclude(
        "actor soak (long-roll policies)",
        seeds,
        wall,
        &results,
        kind,
        |seed| {
            format!(
                "policies: {:?}\nschedule:\n{}",
                Policies::draw(seed),
                Draws::draw(seed).actors
            )
        },
    );
}

#[test]
fn an_actor_seed_replays_exactly() {
    let policies = Policies::draw(5);
    for policies in [Policies::default(), policies] {
        let scenario = |seed| {
            let policies = policies.clone();
            async move { scenario(seed, false, &policies).await }
        };
        let first = nodejob_conformance::soak::run_seed(5, &scenario);
        let second = nodejob_conformance::soak::run_seed(5, &scenario);
        assert_eq!(first, second);
    }
}
