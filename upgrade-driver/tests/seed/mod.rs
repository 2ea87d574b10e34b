//! What a seed of the upgrade's actor soak decides, and what its operator does, shared by the
//! soak of the driver (`tests/actors.rs`) and the same soak run through the controller
//! (`nodejob-controller/tests/actors.rs`): the cluster and the actors' schedule ([`Draws`]), the
//! long-roll policies ([`Policies`]), the plan of a run ([`plan_for`]), the checks made at the
//! start of every batch ([`SkewCheck`], with the support's `BatchCheck`), the operator's fixes
//! before the later runs ([`operator_fixes`]) and the end's count of host upgrades
//! ([`at_most_once`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_conformance::soak::{PauseWindow, Summary, conclude, run_seeds, seeds};
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_core::{ApiError, Clock, Verb};
use nodejob_fake::FakeCluster;
use nodejob_fake::schedule::{Act, ActorSchedule, Cast, Draw};
use nodejob_fake::stratum::{Fault, Operation};
use upgrade_driver::records::{self, QUARANTINED};
use upgrade_driver::skew::{Kubelet, Workers, judge};
use upgrade_driver::{EventSink, MaxUnavailable, OnFailure, Plan, PlanSpec, Skew, Undrainable};

use crate::invariants::{Watch, our_record};
use crate::support::*;

/// Runs at most per seed.
pub(crate) const RUNS: usize = 5;
/// A run that has not ended after this much virtual time hangs.
pub(crate) const RUN_BOUND: Duration = Duration::from_secs(4 * 3600);
/// The label that puts a node into the plan's selection, when the plan selects by label.
pub(crate) const SELECTED: (&str, &str) = ("upgrade", "yes");

/// A driver crash: before (or after) its `nth` call of `verb`.
#[derive(Clone, Debug)]
pub(crate) struct Crash {
    pub(crate) verb: Verb,
    pub(crate) nth: usize,
    pub(crate) after: bool,
}

/// Everything a seed decides.
#[derive(Clone, Debug)]
pub(crate) struct Draws {
    pub(crate) zones: Vec<(&'static str, usize)>,
    pub(crate) replicas: i32,
    pub(crate) max_unavailable: u32,
    pub(crate) by_label: bool,
    pub(crate) health_check: bool,
    /// Whether the reruns go toward another target than the first run's.
    pub(crate) retarget: bool,
    pub(crate) crash: Option<Crash>,
    pub(crate) actors: ActorSchedule,
}

pub(crate) const CRASH_VERBS: &[Verb] = &[
    Verb::PatchNode,
    Verb::CreateJob,
    Verb::DeleteJob,
    Verb::EvictPod,
    Verb::CreateEvent,
];

pub(crate) fn node_names(zones: &[(&str, usize)]) -> Vec<String> {
    let control = (0..2).map(|i| format!("cp-{i}"));
    let workers = zones
        .iter()
        .flat_map(|(zone, count)| (0..*count).map(move |i| format!("{zone}-{i}")));
    control.chain(workers).collect()
}

impl Draws {
    pub(crate) fn draw(seed: u64) -> Self {
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

pub(crate) fn build(seed: u64, draws: &Draws) -> Result<(Arc<FakeCluster>, Vec<String>), String> {
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
pub(crate) const OTHER_TARGET: &str = "v1.38.1";

/// The long-roll policies a seed runs under: the plan's defaults, or drawn for the seed from a
/// stream of its own ([`Policies::draw`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Policies {
    /// `on_undrainable` and `max_blocked`, when drawn.
    pub(crate) undrainable: Option<(Undrainable, u32)>,
    /// `soak`, when drawn.
    pub(crate) soak: Option<Duration>,
    /// `on_failure`, when drawn.
    pub(crate) on_failure: Option<OnFailure>,
    /// A node whose host fails so, until the operator of the last runs fixes it.
    pub(crate) fault: Option<(usize, Fault)>,
}

impl Policies {
    /// The policies of `seed`, from a stream of draws apart from the schedule's.
    pub(crate) fn draw(seed: u64) -> Self {
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
    pub(crate) fn faulty<'n>(&self, names: &'n [String]) -> Option<(&'n String, Fault)> {
        let (i, fault) = self.fault?;
        Some((&names[i % names.len()], fault))
    }

    pub(crate) fn apply(&self, spec: &mut PlanSpec) {
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

    pub(crate) fn drawn(&self) -> bool {
        self.undrainable.is_some() || self.soak.is_some() || self.on_failure.is_some()
    }
}

pub(crate) fn plan_for(
    draws: &Draws,
    policies: &Policies,
    identity: &str,
    target: &str,
    skew: Skew,
) -> Plan {
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
pub(crate) struct SkewCheck {
    pub(crate) fake: Arc<FakeCluster>,
    pub(crate) target: String,
    pub(crate) skew: Skew,
    pub(crate) violations: Mutex<Vec<String>>,
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

impl Draws {
    /// The nodes an actor makes report a version of its own.
    pub(crate) fn versioned(&self) -> BTreeSet<String> {
        (self.actors.acts.iter())
            .filter_map(|(_, act)| match act {
                Act::ReportVersion { node, .. } => Some(node.clone()),
                _ => None,
            })
            .collect()
    }

    /// The nodes that may end failed and named rather than upgraded: one an actor set to
    /// another version than the target may be rolled back under our upgrade (and must then be
    /// failed and named, never upgraded twice), as may a host that booted its old version
    /// after an upgrade that exited 0, by every run that does not roll it back.
    pub(crate) fn rolled_back(&self, policies: &Policies, names: &[String]) -> BTreeSet<String> {
        let mut nodes: BTreeSet<String> = (self.actors.acts.iter())
            .filter_map(|(_, act)| match act {
                Act::ReportVersion { node, version } if version != TARGET || self.retarget => {
                    Some(node.clone())
                }
                _ => None,
            })
            .collect();
        if let Some((node, Fault::BootsOldVersion)) = policies.faulty(names) {
            nodes.insert(node.clone());
        }
        nodes
    }

    /// The plan's nodes as a run starting now selects them (and those it carries on), for the
    /// check at the start of every batch: over every one of them, touched or not.
    pub(crate) fn plan_nodes(&self, fake: &FakeCluster) -> Vec<String> {
        (fake.node_names().into_iter())
            .filter(|n| {
                fake.node(n).is_some_and(|node| {
                    let selected =
                        !self.by_label || records::label(&node, SELECTED.0) == Some(SELECTED.1);
                    selected || our_record(&node).is_some()
                })
            })
            .collect()
    }

    /// The invariants at every write of a run toward `target` under one of `identities`, the
    /// actors' schedule as armed (`shifted`).
    pub(crate) fn watch(
        &self,
        fake: &Arc<FakeCluster>,
        target: &str,
        identities: &[&str],
        shifted: &ActorSchedule,
    ) -> Watch {
        Watch {
            fake: fake.clone(),
            target: Mutex::new(target.to_string()),
            width: self.max_unavailable as usize,
            ours: identities.iter().map(|s| s.to_string()).collect(),
            schedule: Mutex::new(shifted.clone()),
            versioned: self.versioned(),
            touched: self.actors.touched(),
            killed: Mutex::new(BTreeMap::new()),
            violations: Mutex::new(Vec::new()),
        }
    }
}

/// Arms the actors' schedule from now (its drawn times are from the roll's start); the
/// schedule as armed.
pub(crate) fn arm(fake: &FakeCluster, draws: &Draws) -> ActorSchedule {
    let start = fake.now();
    let shifted = ActorSchedule {
        acts: (draws.actors.acts.iter())
            .map(|(at, act)| (start + *at, act.clone()))
            .collect(),
    };
    shifted.arm(fake);
    shifted
}

/// What the operator does before the later runs: waits for the actors to be done, lifts the
/// API faults, removes the budgets they left (one may block a drain for ever) and, under the
/// policies, fixes the faulty host and lets the nodes the runs quarantined be rolled.
pub(crate) async fn operator_fixes(
    fake: &FakeCluster,
    shifted: &ActorSchedule,
    start: Duration,
    policies: &Policies,
    names: &[String],
) {
    let over = start + shifted.over();
    fake.sleep(over.saturating_sub(fake.now())).await;
    fake.clear_faults();
    for (_, act) in &shifted.acts {
        if let Act::CreateBudget { name, .. } = act {
            let _ = fake.delete_budget_now("default", name);
        }
    }
    if let Some((node, _)) = policies.faulty(names)
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

/// Invariant 12: the host upgrade ran at most once per node, deleted ones included, but for the
/// retries of host Jobs recorded killed (`killed`: their Pod deleted before the host operation
/// ended), of a retarget, of each rollback (which lets a later run try again) and of the faulty
/// host (retried by each run while it fails: a failed one changed nothing).
pub(crate) fn at_most_once(
    fake: &FakeCluster,
    names: &[String],
    draws: &Draws,
    policies: &Policies,
    killed: &BTreeMap<String, u32>,
) -> Result<(), String> {
    let mut all: BTreeSet<String> = names.iter().cloned().collect();
    all.extend(fake.node_names());
    for name in &all {
        let executions = fake
            .host_state(name)
            .map(|s| s.executions(Operation::Upgrade))
            .unwrap_or(0);
        let rolled_back = fake
            .host_state(name)
            .map(|s| s.executions(Operation::Rollback))
            .unwrap_or(0);
        let faulty = policies.faulty(names).is_some_and(|(n, _)| n == name);
        let retries = killed.get(name).copied().unwrap_or(0)
            + u32::from(draws.retarget)
            + rolled_back
            + if faulty { RUNS as u32 } else { 0 };
        if executions > 1 + retries {
            return Err(format!(
                "{name}: {executions} upgrade executions, {retries} of them after a killed one"
            ));
        }
    }
    Ok(())
}

/// The soak of `title`: the seeds of `cargo test` (`default_seeds`, or as the environment
/// says: `nodejob_conformance::soak::seeds`) each through `scenario`, under the plan's
/// defaults or, `long_roll`, under policies drawn for the seed; then the tally, failing with
/// each failing seed, its draws and schedule. `kind`: a run's outcome in a word.
pub(crate) fn soak<Fut>(
    title: &str,
    default_seeds: u64,
    long_roll: bool,
    scenario: impl Fn(u64, bool, Policies) -> Fut + Sync,
    kind: impl Fn(&str) -> String,
) where
    Fut: Future<Output = Result<Summary, String>>,
{
    let policies = |seed| {
        if long_roll {
            Policies::draw(seed)
        } else {
            Policies::default()
        }
    };
    let (seeds, verbose) = seeds(default_seeds);
    let started = std::time::Instant::now();
    let results = run_seeds(seeds.clone(), |seed| {
        scenario(seed, verbose, policies(seed))
    });
    let wall = started.elapsed();
    conclude(title, seeds, wall, &results, kind, |seed| {
        let schedule = Draws::draw(seed).actors;
        if long_roll {
            format!("policies: {:?}\nschedule:\n{schedule}", policies(seed))
        } else {
            format!("schedule:\n{schedule}")
        }
    });
}

/// A seed at its end, as both soaks judge it ([`Ended::judged`]).
pub(crate) struct Ended<'a> {
    pub(crate) fake: &'a FakeCluster,
    pub(crate) names: &'a [String],
    pub(crate) draws: &'a Draws,
    pub(crate) policies: &'a Policies,
    /// Host Jobs recorded killed, by node.
    pub(crate) killed: &'a BTreeMap<String, u32>,
    /// Each node's start (its Cordon step), with when.
    pub(crate) starts: &'a [(Duration, String)],
    /// When the rolls were paused.
    pub(crate) paused: PauseWindow,
    /// The invariants broken along the way.
    pub(crate) violations: Vec<String>,
    /// Whether the roll ended as it must.
    pub(crate) done: bool,
    /// Each run's end, in a line.
    pub(crate) runs: Vec<String>,
}

impl Ended<'_> {
    /// 9 (no node started while paused), the invariants broken along the way, the roll done,
    /// and 12 ([`at_most_once`]); the seed's summary, or each failure with its runs.
    pub(crate) fn judged(self) -> Result<Summary, String> {
        let Ended {
            fake,
            mut violations,
            runs,
            ..
        } = self;
        for (at, node) in self.starts {
            if self.paused.paused_at(*at) {
                violations.push(format!(
                    "9: {node} started at {at:?}, while paused: {:?}",
                    self.paused
                ));
            }
        }
        let fail = |what: String| Err(format!("{what}; runs: {runs:#?}"));
        if !violations.is_empty() {
            return fail(format!("invariants broken: {violations:#?}"));
        }
        if !self.done {
            return fail(format!("not done after {RUNS} runs"));
        }
        if let Err(e) = at_most_once(fake, self.names, self.draws, self.policies, self.killed) {
            return fail(e);
        }
        Ok(Summary {
            runs,
            calls: fake.calls().len(),
            took: fake.now(),
        })
    }
}
