//! What the exhaustive actor soak does and checks, shared by the driver's
//! (`tests/every_write.rs`) and the same table run through the controller
//! (`nodejob-controller/tests/every_write.rs`): the small roll ([`build`], [`plan_for`]), the
//! actions ([`Action`]) and the (write, action) pairs ([`Pair`]), the actor at the write
//! ([`AtWrite`]), the operator's fixes before a rerun ([`operator_fixes`]), the checks at the
//! end ([`left_as_said`]) and the table's runner ([`table`]).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodejob_conformance::soak::{Summary, conclude, env_u64, run_seed, run_seeds};
use nodejob_conformance::workloads::budget;
use nodejob_conformance::{Observe, Write};
use nodejob_core::pause::{Pause, set_pause};
use nodejob_core::{Clock, NodeChange, Verb};
use nodejob_fake::FakeCluster;
use nodejob_fake::schedule::{Act, ActorSchedule, LEASE};
use nodejob_fake::stratum::{Fault, Operation};
use upgrade_driver::records::{self, BLOCKED, QUARANTINED};
use upgrade_driver::{OnFailure, Plan, Stop};

use crate::invariants::{Watch, our_record};
use crate::support::*;

/// The cluster's seed: the roll is the same in every run but for the action.
pub(crate) const SEED: u64 = 30;
/// The label the plan selects by (an action moves a node out of it).
pub(crate) const SELECTED: (&str, &str) = ("upgrade", "yes");
/// The target of a run started at once after a stopped one.
pub(crate) const NEWER: &str = "v1.38.1";
/// Runs at most after the disturbed one.
pub(crate) const RERUNS: usize = 3;
/// A run that has not ended after this much virtual time hangs.
pub(crate) const RUN_BOUND: Duration = Duration::from_secs(4 * 3600);
/// The identities of the disturbed run, the run started at once after it, the operator's.
pub(crate) const IDENTITIES: [&str; 3] = ["driver-a", "driver-b", "driver-c"];
/// Who takes the Lease in [`Action::StealLease`].
pub(crate) const THIEF: &str = "someone-else";
/// How long the rolls stay paused in [`Action::Pause`].
pub(crate) const PAUSED_FOR: Duration = Duration::from_secs(600);

/// The plan a table rolls under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Table {
    /// The plan's defaults.
    Defaults,
    /// The long-roll policies: each node soaks two minutes, a failed one is rolled back, and
    /// `z-1`'s host boots its old version after its upgrade (until the operator fixes it), so
    /// the rollback and the soak have writes of their own for the actions to follow.
    LongRoll,
}

/// What an actor does right after the write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
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

pub(crate) const ACTIONS: [Action; 14] = [
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
pub(crate) fn build(table: Table) -> Arc<FakeCluster> {
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

pub(crate) fn plan_for(table: Table, identity: &str, target: &str) -> Plan {
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

pub(crate) fn operator_pause() -> Pause {
    Pause {
        by: "operator@console".into(),
        at: None,
        reason: "a change freeze".into(),
    }
}

/// One (write, action) pair, as its index in the table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pair {
    /// The write after which the actor acts, from 1.
    pub(crate) write: usize,
    pub(crate) action: Action,
}

impl Pair {
    pub(crate) fn of(index: u64) -> Pair {
        let i = usize::try_from(index).unwrap();
        Pair {
            write: i / ACTIONS.len() + 1,
            action: ACTIONS[i % ACTIONS.len()],
        }
    }

    /// The pair's story, and the command that replays it (`binary`: `-p PACKAGE --test
    /// NAME`).
    pub(crate) fn replay(binary: &str, table: Table, index: u64) -> String {
        let pair = Pair::of(index);
        let test = match table {
            Table::Defaults => "a_small_roll",
            Table::LongRoll => "rolls_back",
        };
        format!(
            "{:?} right after write {}; replay: NODEJOB_SEED={index} cargo test {binary} \
             {test} -- --nocapture",
            pair.action, pair.write
        )
    }
}

/// The node a write is to: the node patched, the node of a Job created, the node of a Pod
/// evicted; else the first node we hold, else `z-0`.
pub(crate) fn node_of(fake: &FakeCluster, write: &Write) -> String {
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
pub(crate) struct Acted {
    /// The node it acted on.
    pub(crate) node: Option<String>,
    /// Nodes it moved to another version.
    pub(crate) versioned: BTreeSet<String>,
    /// Nodes it cordoned itself.
    pub(crate) cordoned: BTreeSet<String>,
    /// Whether it asked the run to stop.
    pub(crate) stopped: bool,
}

/// The invariants at every write, and the action right after write `pair.write`.
pub(crate) struct AtWrite {
    pub(crate) watch: Watch,
    pub(crate) pair: Option<Pair>,
    pub(crate) seen: AtomicUsize,
    /// What stops the run at a step boundary (a driver's run is run until it).
    pub(crate) stop: Stop,
    /// How [`Action::Restart`] stops the run and starts another toward [`NEWER`]: by
    /// default `stop` requested (the caller starts the next run); a controller's test edits
    /// the resource's target instead.
    pub(crate) restart: Box<dyn Fn() + Send + Sync>,
    pub(crate) acted: Mutex<Acted>,
}

/// The roll's writes: a controller's writes of its own resource (its status, its finalizer)
/// are neither checked nor counted.
fn of_the_roll(write: &Write) -> bool {
    write.verb.api() != "CustomApi"
}

impl Observe for AtWrite {
    fn before(&self, write: &Write) {
        if of_the_roll(write) {
            self.watch.before(write);
        }
    }

    fn after(&self, write: &Write) {
        if !of_the_roll(write) {
            return;
        }
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
                (self.restart)();
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

pub(crate) fn watch(fake: &Arc<FakeCluster>, target: &str) -> Watch {
    Watch {
        fake: fake.clone(),
        target: Mutex::new(target.into()),
        width: 1,
        ours: IDENTITIES.iter().map(|s| s.to_string()).collect(),
        schedule: Mutex::new(ActorSchedule { acts: Vec::new() }),
        versioned: BTreeSet::new(),
        touched: BTreeSet::new(),
        killed: Mutex::new(BTreeMap::new()),
        violations: Mutex::new(Vec::new()),
    }
}

pub(crate) fn at_write(fake: &Arc<FakeCluster>, target: &str, pair: Option<Pair>) -> AtWrite {
    let stop = Stop::new();
    let restart: Box<dyn Fn() + Send + Sync> = {
        let stop = stop.clone();
        Box::new(move || stop.request())
    };
    AtWrite {
        watch: watch(fake, target),
        pair,
        seen: AtomicUsize::new(0),
        stop,
        restart,
        acted: Mutex::new(Acted::default()),
    }
}

/// The operator before a rerun: once the Lease could have expired (`lease_duration`) and the
/// pause lifted, the faulty host fixed, the actor's budget and pause removed, the quarantined
/// nodes let go.
pub(crate) async fn operator_fixes(fake: &FakeCluster, lease_duration: Duration) {
    fake.sleep(lease_duration + PAUSED_FOR).await;
    for name in fake.node_names() {
        if let Some(mut host) = fake.host(&name)
            && !host.faults.is_empty()
        {
            host.faults.clear();
            let _ = fake.set_host(&name, host);
        }
    }
    let _ = fake.delete_budget_now("default", "pinned");
    let _ = set_pause(fake, LEASE.0, LEASE.1, None).await;
    for name in fake.node_names() {
        if fake.node(&name).as_ref().is_some_and(records::quarantined) {
            let _ = fake.patch_node_now(&name, &[NodeChange::remove_label(QUARANTINED)]);
        }
    }
}

/// At the end: no node we cordoned is left cordoned without a record saying why, and at most
/// one upgrade a node, but for a retry of one recorded killed (`killed`), the run toward the
/// newer target, a node the actor moved back, and each rollback (which lets a later run try
/// the upgrade again).
pub(crate) fn left_as_said(
    fake: &FakeCluster,
    acted: &Acted,
    killed: &BTreeMap<String, u32>,
) -> Result<(), String> {
    for name in fake.node_names() {
        let Some(node) = fake.node(&name) else {
            continue;
        };
        let said = our_record(&node).is_some()
            || records::quarantined(&node)
            || (node.metadata.annotations.as_ref()).is_some_and(|a| a.contains_key(BLOCKED))
            || acted.cordoned.contains(&name);
        if records::unschedulable(&node) && !said {
            return Err(format!("{name} left cordoned with no record of why"));
        }
    }
    let mut all: BTreeSet<String> = ["cp-0", "z-0", "z-1", "z-9"].map(String::from).into();
    all.extend(fake.node_names());
    for name in &all {
        let executions = (fake.host_state(name))
            .map(|s| s.executions(Operation::Upgrade))
            .unwrap_or(0);
        let rolled_back = (fake.host_state(name))
            .map(|s| s.executions(Operation::Rollback))
            .unwrap_or(0);
        let retries = killed.get(name).copied().unwrap_or(0)
            + u32::from(acted.stopped)
            + u32::from(acted.versioned.contains(name))
            + rolled_back;
        if executions > 1 + retries {
            return Err(format!(
                "{name}: {executions} upgrade executions, {retries} retries allowed"
            ));
        }
    }
    Ok(())
}

/// Runs the table of `table` (its title `name`, and the policies it runs under):
/// `undisturbed` counts the writes of the roll left alone, then
/// `pair_run` runs each (write, action) pair by its index (with `NODEJOB_SEED=INDEX`, that
/// one, verbosely; with `NODEJOB_EVERY_WRITE_ALL`, all of them; else each write with one
/// action, rotating through them), and the tally fails naming each failing pair with the
/// command that replays it (`binary`: `-p PACKAGE --test NAME`).
pub(crate) fn table<U, P>(
    name: &str,
    binary: &str,
    table: Table,
    undisturbed: impl Fn() -> U + Sync,
    pair_run: impl Fn(u64, bool) -> P + Sync,
    kind: impl Fn(&str) -> String,
) where
    U: Future<Output = Result<Summary, String>>,
    P: Future<Output = Result<Summary, String>>,
{
    let title = match table {
        Table::Defaults => name.to_string(),
        Table::LongRoll => format!("{name} (long-roll policies)"),
    };
    let title = title.as_str();
    let writes = run_seed(0, &|_| undisturbed())
        .unwrap_or_else(|e| panic!("{e}"))
        .calls;
    let total = (writes * ACTIONS.len()) as u64;
    let all = std::env::var_os("NODEJOB_EVERY_WRITE_ALL").is_some();
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
        pair_run(index, verbose)
    })
    .into_iter()
    .map(|(k, r)| (indices[usize::try_from(k).unwrap()], r))
    .collect();
    let wall = started.elapsed();
    println!(
        "{title}: the undisturbed roll makes {writes} writes; {count} of the {total} (write, \
         action) pairs run in {wall:.1?}"
    );
    let replay = |index| Pair::replay(binary, table, index);
    conclude(title, 0..count, wall, &results, kind, replay);
}
