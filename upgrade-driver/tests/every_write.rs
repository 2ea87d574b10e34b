//! The **exhaustive actor soak** (issue 30): an actor at every write. The seeded actor soak
//! (`tests/actors.rs`) has actors act at random instants; the defects it cannot reach live in
//! the instants between two of the driver's own writes, or right after one of its waits. Here
//! a small roll (three nodes: `cp-0`, workers `z-0` and `z-1`, selected by label; two replicas
//! behind a budget allowing one disruption, with a fourth node `z-2` outside the selection for
//! them to go to) is run once undisturbed and its writes counted,
//! 1..N; then, for each write n and each [`Action`], the same roll runs again with that action
//! done to the cluster right after write n was served (synchronously, before the driver's next
//! call), with every invariant of `tests/actors.rs` checked at every write ([`Watch`]).
//!
//! After the disturbed run an operator reruns the roll (under another identity, once the
//! Lease could have expired, the budgets and the pause the actors left removed) until it ends:
//! each run's report is checked against the cluster, and at the end the roll must be done, or
//! refused or failed naming only a node an actor moved to another version. At the end too: no
//! node we cordoned is left cordoned without a record saying why (ours, the blocked record or
//! the quarantine label), and the host upgrade ran at most once per node but for a retry of one
//! recorded killed, a rerun toward another target, or a node an actor moved back.
//!
//! # Running
//! - `cargo test -p upgrade-driver --test every_write`: every write, each with one action
//!   (rotating through them, so each action meets writes all along the roll).
//! - The whole table, in `.ci/run`: `NODEJOB_EVERY_WRITE_ALL=1 cargo test --release -p
//!   upgrade-driver --test every_write -- --nocapture` prints the count of runs, the wall
//!   time, and each failing (write, action) pair with its replay command.
//! - One pair, its story: `NODEJOB_SEED=<index> cargo test -p upgrade-driver --test every_write
//!   -- --nocapture` (the index a failure names).

mod invariants;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use invariants::{Watch, check_report, our_record, short};
use nodejob_conformance::soak::{Summary, conclude, env_u64, run_seed, run_seeds};
use nodejob_conformance::workloads::budget;
use nodejob_conformance::{Crashing, Observe, Write};
use nodejob_core::pause::{Pause, set_pause};
use nodejob_core::{Clock, NodeChange, Verb};
use nodejob_fake::FakeCluster;
use nodejob_fake::schedule::{Act, ActorSchedule, LEASE};
use nodejob_fake::stratum::{Fault, Operation};
use support::*;
use upgrade_driver::records::{self, BLOCKED, QUARANTINED};
use upgrade_driver::{OnFailure, Outcome, Plan, Report, Stop, run_until, skew};

/// The cluster's seed: the roll is the same in every run but for the action.
const SEED: u64 = 30;
/// The label the plan selects by (an action moves a node out of it).
const SELECTED: (&str, &str) = ("upgrade", "yes");
/// The target of a run started at once after a stopped one.
const NEWER: &str = "v1.38.1";
/// Runs at most after the disturbed one.
const RERUNS: usize = 3;
/// A run that has not ended after this much virtual time hangs.
const RUN_BOUND: Duration = Duration::from_secs(4 * 3600);
/// The identities of the disturbed run, the run started at once after it, the operator's.
const IDENTITIES: [&str; 3] = ["driver-a", "driver-b", "driver-c"];
/// Who takes the Lease in [`Action::StealLease`].
const THIEF: &str = "someone-else";
/// How long the rolls stay paused in [`Action::Pause`].
const PAUSED_FOR: Duration = Duration::from_secs(600);

/// The plan a table rolls under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Table {
    /// The plan's defaults.
    Defaults,
    /// The long-roll policies: each node soaks two minutes, a failed one is rolled back, and
    /// `z-1`'s host boots its old version after its upgrade (until the operator fixes it), so
    /// the rollback and the soak have writes of their own for the actions to follow.
    LongRoll,
}

/// What an actor does right after the write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// A person uncordons the node of the write.
    Uncordon,
    /// A person cordons it.
    Cordon,
    /// It is deleted.
    Delete,
    /// A node joins, selected.
    Add,
    /// It is relabelled out of the selection.
    Relabel,
    /// It reboots by itself.
    Reboot,
    /// It goes NotReady for two minutes.
    Flap,
    /// It reports a version older than the one it ran.
    Older,
    /// It reports a version newer than the target.
    Newer,
    /// A Pod on it is deleted.
    DeletePod,
    /// Another holder takes the Lease.
    StealLease,
    /// A budget allowing no disruption covers the workload.
    NoDisruption,
    /// The rolls are paused, and resumed ten minutes later.
    Pause,
    /// The run is stopped, and another started at once toward a newer target.
    Restart,
}

const ACTIONS: [Action; 14] = [
    Action::Uncordon,
    Action::Cordon,
    Action::Delete,
    Action::Add,
    Action::Relabel,
    Action::Reboot,
    Action::Flap,
    Action::Older,
    Action::Newer,
    Action::DeletePod,
    Action::StealLease,
    Action::NoDisruption,
    Action::Pause,
    Action::Restart,
];

/// The roll's three nodes, and `z-2`, a worker outside the selection where the replicas can
/// go while the others are down (or gone: an action deletes a node).
fn build(table: Table) -> Arc<FakeCluster> {
    let (fake, names) = cluster(SEED, 1, &[("z", 3)], 2);
    for name in &names {
        if name != "z-2" {
            fake.label_node(name, SELECTED.0, SELECTED.1).unwrap();
        }
        let mut host = fake.host(name).unwrap();
        host.timing = quick_host_timing();
        if table == Table::LongRoll && name == "z-1" {
            host = host.with_fault(Fault::BootsOldVersion);
        }
        fake.set_host(name, host).unwrap();
    }
    fake
}

fn plan_for(table: Table, identity: &str, target: &str) -> Plan {
    let mut spec = plan_spec();
    spec.identity = identity.into();
    spec.target = target.into();
    spec.selector = Some(format!("{}={}", SELECTED.0, SELECTED.1));
    if table == Table::LongRoll {
        spec.soak = Some(Duration::from_secs(120));
        spec.on_failure = OnFailure::Rollback;
    }
    plan(spec)
}

fn operator_pause() -> Pause {
    Pause {
        by: "operator@console".into(),
        at: None,
        reason: "a change freeze".into(),
    }
}

/// One (write, action) pair, as its index in the table.
#[derive(Clone, Copy, Debug)]
struct Pair {
    /// The write after which the actor acts, from 1.
    write: usize,
    action: Action,
}

impl Pair {
    fn of(index: u64) -> Pair {
        let i = usize::try_from(index).unwrap();
        Pair {
            write: i / ACTIONS.len() + 1,
            action: ACTIONS[i % ACTIONS.len()],
        }
    }

    fn replay(table: Table, index: u64) -> String {
        let pair = Pair::of(index);
        let test = match table {
            Table::Defaults => "a_small_roll",
            Table::LongRoll => "rolls_back",
        };
        format!(
            "{:?} right after write {}; replay: NODEJOB_SEED={index} cargo test -p \
             upgrade-driver --test every_write {test} -- --nocapture",
            pair.action, pair.write
        )
    }
}

/// The node a write is to: the node patched, the node of a Job created, the node of a Pod
/// evicted; else the first node we hold, else `z-0`.
fn node_of(fake: &FakeCluster, write: &Write) -> String {
    let held = || {
        (fake.node_names().into_iter())
            .find(|n| fake.node(n).as_ref().and_then(our_record).is_some())
            .unwrap_or_else(|| "z-0".into())
    };
    match write.verb {
        Verb::PatchNode | Verb::PatchNodeConditions => write.target.clone(),
        Verb::CreateJob => serde_json::from_str::<k8s_openapi::api::batch::v1::Job>(&write.body)
            .ok()
            .and_then(|j| j.spec?.template.spec?.node_name)
            .unwrap_or_else(held),
        Verb::EvictPod => {
            let (ns, name) = write.target.split_once('/').unwrap_or_default();
            (fake.pod(ns, name))
                .and_then(|p| p.spec?.node_name)
                .unwrap_or_else(held)
        }
        _ => held(),
    }
}

/// What the actor did, for the checks after the runs.
#[derive(Debug, Default)]
struct Acted {
    /// The node it acted on.
    node: Option<String>,
    /// Nodes it moved to another version.
    versioned: BTreeSet<String>,
    /// Nodes it cordoned itself.
    cordoned: BTreeSet<String>,
    /// Whether it asked the run to stop.
    stopped: bool,
}

/// The invariants at every write, and the action right after write `pair.write`.
struct AtWrite {
    watch: Watch,
    pair: Option<Pair>,
    seen: AtomicUsize,
    stop: Stop,
    acted: Mutex<Acted>,
}

impl Observe for AtWrite {
    fn before(&self, write: &Write) {
        self.watch.before(write);
    }

    fn after(&self, write: &Write) {
        self.watch.after(write);
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(pair) = self.pair.filter(|p| p.write == n) {
            self.act(pair.action, write);
        }
    }
}

impl AtWrite {
    fn act(&self, action: Action, write: &Write) {
        let fake = &self.watch.fake;
        let node = node_of(fake, write);
        let mut acted = self.acted.lock().unwrap();
        acted.node = Some(node.clone());
        let version = |v: &str| Act::ReportVersion {
            node: node.clone(),
            version: v.into(),
        };
        let act = match action {
            Action::Uncordon => Some(Act::Uncordon(node.clone())),
            Action::Cordon => {
                acted.cordoned.insert(node.clone());
                Some(Act::Cordon(node.clone()))
            }
            Action::Delete => Some(Act::DeleteNode(node.clone())),
            Action::Add => Some(Act::AddNode {
                name: "z-9".into(),
                labels: vec![
                    (SELECTED.0.into(), SELECTED.1.into()),
                    (WORKER.0.into(), WORKER.1.into()),
                    (ZONE.into(), "z".into()),
                ],
            }),
            Action::Relabel => Some(Act::Unlabel {
                node: node.clone(),
                key: SELECTED.0.into(),
            }),
            Action::Reboot => Some(Act::Reboot(node.clone())),
            Action::Flap => Some(Act::Flap {
                node: node.clone(),
                down_for: Duration::from_secs(120),
            }),
            Action::Older => {
                acted.versioned.insert(node.clone());
                Some(version("v1.36.9"))
            }
            Action::Newer => {
                acted.versioned.insert(node.clone());
                Some(version("v1.39.0"))
            }
            Action::DeletePod => Some(Act::DeletePod(node.clone())),
            Action::StealLease => Some(Act::StealLease(THIEF.into())),
            Action::NoDisruption => Some(Act::CreateBudget {
                name: "pinned".into(),
                app: "web".into(),
                min_available: 2,
            }),
            Action::Pause => {
                let fake = fake.clone();
                tokio::spawn(async move {
                    let _ = set_pause(&*fake, LEASE.0, LEASE.1, Some(&operator_pause())).await;
                    fake.sleep(PAUSED_FOR).await;
                    let _ = set_pause(&*fake, LEASE.0, LEASE.1, None).await;
                });
                None
            }
            Action::Restart => {
                acted.stopped = true;
                self.stop.request();
                None
            }
        };
        if let Some(act) = act {
            if matches!(act, Act::StealLease(_)) {
                // The Lease check of every write after needs the instant of the theft.
                (self.watch.schedule.lock().unwrap())
                    .acts
                    .push((fake.now(), act.clone()));
            }
            // The Deployment of `Act::CreateBudget` is in the schedule's namespace: ours is
            // `default`, so the budget is made here.
            if let Act::CreateBudget { name, .. } = &act {
                let _ = fake.create_budget_now(&budget("default", name, "web", 2));
            } else {
                act.apply(fake);
            }
        }
    }
}

fn watch(fake: &Arc<FakeCluster>, target: &str) -> Watch {
    Watch {
        fake: fake.clone(),
        target: target.into(),
        width: 1,
        ours: IDENTITIES.iter().map(|s| s.to_string()).collect(),
        schedule: Mutex::new(ActorSchedule { acts: Vec::new() }),
        versioned: BTreeSet::new(),
        touched: BTreeSet::new(),
        killed: Mutex::new(BTreeMap::new()),
        violations: Mutex::new(Vec::new()),
    }
}

/// One run through `api`, at most [`RUN_BOUND`].
async fn one_run(
    api: &Crashing<FakeCluster, AtWrite>,
    plan: &Plan,
) -> Result<Result<Report, upgrade_driver::Error>, String> {
    let stop = api.observer().stop.clone();
    let running = run_until(api, plan, upgrade_driver::quiet(), &stop);
    tokio::time::timeout(RUN_BOUND, running)
        .await
        .map_err(|_| format!("a run did not end within {RUN_BOUND:?}"))
}

/// How many writes the undisturbed roll makes.
async fn undisturbed(table: Table) -> Result<Summary, String> {
    let fake = build(table);
    fake.sleep(Duration::from_secs(30)).await;
    let api = Crashing::new(fake.clone(), at_write(&fake, TARGET, None));
    let report = one_run(&api, &plan_for(table, IDENTITIES[0], TARGET))
        .await?
        .map_err(|e| e.to_string())?;
    // Under the long-roll policies z-1 is rolled back: the roll fails naming it alone.
    let expected = match table {
        Table::Defaults => report.outcome == Outcome::Done,
        Table::LongRoll => {
            matches!(&report.outcome, Outcome::Failed { nodes, .. } if nodes == &["z-1"])
        }
    };
    if !expected {
        return Err(format!("the undisturbed roll: {report:#?}"));
    }
    let violations = api.observer().watch.violations.lock().unwrap().clone();
    if !violations.is_empty() {
        return Err(format!("the undisturbed roll broke: {violations:#?}"));
    }
    Ok(Summary {
        runs: vec![short(&Ok(report))],
        calls: api.observer().seen.load(Ordering::SeqCst),
        took: fake.now(),
    })
}

fn at_write(fake: &Arc<FakeCluster>, target: &str, pair: Option<Pair>) -> AtWrite {
    AtWrite {
        watch: watch(fake, target),
        pair,
        seen: AtomicUsize::new(0),
        stop: Stop::new(),
        acted: Mutex::new(Acted::default()),
    }
}

/// Whether a run's end is one an actor's re-versioning explains: refused or stopped by the
/// version skew policy (a control-plane node moved back takes the apiserver with it), refused
/// as a downgrade, or failed naming only nodes it moved.
fn explained(result: &Result<Report, upgrade_driver::Error>, versioned: &BTreeSet<String>) -> bool {
    if versioned.is_empty() {
        return false;
    }
    match result {
        Err(upgrade_driver::Error::Plan(p)) if p.field == "skew" => true,
        Err(upgrade_driver::Error::Plan(p)) => versioned.iter().any(|n| p.rule.contains(n)),
        Ok(r) if matches!(&r.outcome, Outcome::Stopped { why } if why.contains(skew::POLICY)) => {
            true
        }
        Ok(r) => {
            let failed: Vec<&str> = (r.nodes.iter())
                .filter(|n| n.failure().is_some())
                .map(|n| n.name.as_str())
                .collect();
            matches!(r.outcome, Outcome::Failed { .. })
                && failed.iter().all(|n| versioned.contains(*n))
        }
        Err(_) => false,
    }
}

async fn pair_run(table: Table, index: u64, verbose: bool) -> Result<Summary, String> {
    let pair = Pair::of(index);
    let fake = build(table);
    fake.sleep(Duration::from_secs(30)).await;
    let mut runs = Vec::new();
    let mut violations = Vec::new();
    let mut killed: BTreeMap<String, u32> = BTreeMap::new();
    let fail = |what: String, runs: &[String]| format!("{what}; runs: {runs:#?}");

    // The disturbed run.
    let api = Crashing::new(fake.clone(), at_write(&fake, TARGET, Some(pair)));
    let first = one_run(&api, &plan_for(table, IDENTITIES[0], TARGET)).await?;
    let observer = api.observer();
    violations.extend(observer.watch.violations.lock().unwrap().clone());
    killed.extend(observer.watch.killed.lock().unwrap().clone());
    let acted = std::mem::take(&mut *observer.acted.lock().unwrap());
    runs.push(short(&first));
    if verbose {
        println!("{pair:?} (on {:?}): {first:#?}", acted.node);
    }
    if let Ok(report) = &first {
        check_report(&fake, report, &acted.versioned)
            .map_err(|e| fail(format!("run 0: {e}"), &runs))?;
    }
    let mut last = first;
    // Stopped, another run at once toward a newer target; else the operator's reruns.
    let mut target = TARGET;
    for attempt in 1..=RERUNS {
        let done = matches!(&last, Ok(r) if r.outcome == Outcome::Done && target == TARGET)
            || matches!(&last, Ok(r) if r.outcome == Outcome::Done && attempt > 1);
        if done || (attempt > 1 && explained(&last, &acted.versioned)) {
            break;
        }
        let identity = IDENTITIES[attempt.min(IDENTITIES.len() - 1)];
        if acted.stopped && attempt == 1 {
            target = NEWER;
        } else {
            // The operator: once the Lease could have expired, the actors' leftovers gone,
            // the faulty host fixed.
            let plan = plan_for(table, identity, target);
            fake.sleep(plan.spec().lease_duration + PAUSED_FOR).await;
            for name in fake.node_names() {
                if let Some(mut host) = fake.host(&name)
                    && !host.faults.is_empty()
                {
                    host.faults.clear();
                    let _ = fake.set_host(&name, host);
                }
            }
            let _ = fake.delete_budget_now("default", "pinned");
            let _ = set_pause(&*fake, LEASE.0, LEASE.1, None).await;
            for name in fake.node_names() {
                if fake.node(&name).as_ref().is_some_and(records::quarantined) {
                    let _ = fake.patch_node_now(&name, &[NodeChange::remove_label(QUARANTINED)]);
                }
            }
        }
        let api = Crashing::new(fake.clone(), at_write(&fake, target, None));
        let result = one_run(&api, &plan_for(table, identity, target)).await?;
        violations.extend(api.observer().watch.violations.lock().unwrap().clone());
        for (node, n) in api.observer().watch.killed.lock().unwrap().iter() {
            *killed.entry(node.clone()).or_default() += n;
        }
        runs.push(short(&result));
        if verbose {
            println!("run {attempt} toward {target}: {result:#?}");
        }
        if let Ok(report) = &result {
            check_report(&fake, report, &acted.versioned)
                .map_err(|e| fail(format!("run {attempt}: {e}"), &runs))?;
        }
        last = result;
    }
    if !violations.is_empty() {
        return Err(fail(format!("invariants broken: {violations:#?}"), &runs));
    }
    let done = matches!(&last, Ok(r) if r.outcome == Outcome::Done);
    if !done && !explained(&last, &acted.versioned) {
        return Err(fail(format!("not done after {RERUNS} reruns"), &runs));
    }
    // No node we cordoned is left cordoned without a record saying why.
    for name in fake.node_names() {
        let Some(node) = fake.node(&name) else {
            continue;
        };
        let said = our_record(&node).is_some()
            || records::quarantined(&node)
            || (node.metadata.annotations.as_ref()).is_some_and(|a| a.contains_key(BLOCKED))
            || acted.cordoned.contains(&name);
        if records::unschedulable(&node) && !said {
            return Err(fail(
                format!("{name} left cordoned with no record of why"),
                &runs,
            ));
        }
    }
    // At most one upgrade a node, but for a retry of one recorded killed, the run toward the
    // newer target, and a node an actor moved back.
    let mut all: BTreeSet<String> = ["cp-0", "z-0", "z-1", "z-9"].map(String::from).into();
    all.extend(fake.node_names());
    for name in &all {
        let executions = (fake.host_state(name))
            .map(|s| s.executions(Operation::Upgrade))
            .unwrap_or(0);
        // Each rollback lets a later run try the upgrade again.
        let rolled_back = (fake.host_state(name))
            .map(|s| s.executions(Operation::Rollback))
            .unwrap_or(0);
        let retries = killed.get(name).copied().unwrap_or(0)
            + u32::from(acted.stopped)
            + u32::from(acted.versioned.contains(name))
            + rolled_back;
        if executions > 1 + retries {
            return Err(fail(
                format!("{name}: {executions} upgrade executions, {retries} retries allowed"),
                &runs,
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
fn an_actor_right_after_every_write_of_a_small_roll_breaks_no_invariant() {
    every_write(Table::Defaults);
}

/// The same, under the long-roll policies: the soak's writes and waits, and a rollback's.
#[test]
fn an_actor_right_after_every_write_of_a_roll_that_soaks_and_rolls_back_breaks_no_invariant() {
    every_write(Table::LongRoll);
}

fn every_write(table: Table) {
    let title = match table {
        Table::Defaults => "every write",
        Table::LongRoll => "every write (long-roll policies)",
    };
    let writes = run_seed(0, &|_| undisturbed(table))
        .unwrap_or_else(|e| panic!("{e}"))
        .calls;
    let total = (writes * ACTIONS.len()) as u64;
    let all = std::env::var_os("NODEJOB_EVERY_WRITE_ALL").is_some();
    // One pair alone, verbosely; the whole table; or each write with one action, rotating.
    let (indices, verbose): (Vec<u64>, bool) = match env_u64("NODEJOB_SEED") {
        Some(index) => (vec![index], true),
        None if all => ((0..total).collect(), false),
        None => (
            (0..writes as u64)
                .map(|w| w * ACTIONS.len() as u64 + w % ACTIONS.len() as u64)
                .collect(),
            false,
        ),
    };
    let started = Instant::now();
    let count = indices.len() as u64;
    let results: Vec<(u64, Result<Summary, String>)> = run_seeds(0..count, |k| {
        let index = indices[usize::try_from(k).unwrap()];
        pair_run(table, index, verbose)
    })
    .into_iter()
    .map(|(k, r)| (indices[usize::try_from(k).unwrap()], r))
    .collect();
    let wall = started.elapsed();
    println!(
        "{title}: the undisturbed roll makes {writes} writes; {count} of the {total} (write, \
         action) pairs run in {wall:.1?}"
    );
    let replay = |index| Pair::replay(table, index);
    conclude(title, 0..count, wall, &results, kind, replay);
}
