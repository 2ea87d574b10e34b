//! The seeded **actor soak** of the CA rotation: a rotation runs while people, nodes and other
//! controllers change the cluster under it ([`nodejob_fake::schedule`]: cordons and
//! uncordons, labels moving nodes in and out of the selection, nodes deleted, added, rebooting
//! by themselves, flapping; budgets and Deployments; Pods deleted, our host Pods included; the
//! Lease taken by another holder; API faults), and the driver itself crashes before (or after)
//! a drawn call of a drawn verb and is resumed under another identity, with the same plan or,
//! drawn, with an abort (refused once `issue` has begun: then the rotation goes on). Every
//! write is checked against the invariants below as it is made, each run's report against the
//! cluster, and the runs after the actors are over must end the rotation (or the abort).
//!
//! # Invariants
//! The twelve of [`invariants`]: 1 to 6 at every write of the driver ([`Watch`]), 7 to 10 at
//! the end of each run, 11 at the end of the seed, and 12, no step started while the rolls are
//! paused: in half the seeds an operator pauses them ([`nodejob_core::pause`]) a drawn time
//! after the start and lifts the switch minutes later ([`pausing_operator`]), across runs,
//! crashes, aborts and the Lease's thefts. What the soak accepts of a seed that cannot end is
//! [`impossible`]'s.
//!
//! # Running
//! - `cargo test -p certs-driver --test actors`: seeds 0 to 63.
//! - The soak: `NODEJOB_SOAK_SEEDS=1000 cargo test --release -p certs-driver --test actors --
//!   --nocapture` prints the tally and each failing seed with its schedule.
//! - One seed, its schedule and each run's report: `NODEJOB_SEED=17 cargo test -p
//!   certs-driver --test actors -- --nocapture`.

mod invariants;
mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use certs_driver::{CaEvent, Error, Gate, Outcome, Progress, ProgressSink};
use invariants::{
    Mode, RUN_BOUND, SELECTED, Scope, Shape, Starts, Watch, added_by, build, ca, check_done,
    check_once, check_refusal, check_report, impossible, kind, node_names, plan_for, short,
};
use nodejob_conformance::Crashing;
use nodejob_conformance::soak::{
    Summary, conclude, pause_draw, pausing_operator, run_seed, run_seeds, seeds,
};
use nodejob_core::{Clock, Verb};
use nodejob_fake::schedule::{ActorSchedule, Cast, Draw};

/// Seeds run by `cargo test`.
const SEEDS: u64 = 64;
/// Runs at most per seed.
const RUNS: usize = 6;
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
    shape: Shape,
    crash: Option<Crash>,
    /// The run after the first is an abort.
    abort: bool,
    actors: ActorSchedule,
}

const CRASH_VERBS: &[Verb] = &[
    Verb::CreateJob,
    Verb::DeleteJob,
    Verb::PatchNode,
    Verb::CreateEvent,
    Verb::ReplaceLease,
];

impl Draws {
    fn draw(seed: u64) -> Self {
        let mut rng = Draw::new(seed);
        let control = rng.range(1, 3) as usize;
        let workers = rng.range(2, 6) as usize;
        let names = node_names(control, workers);
        let scope = *rng.pick(&[
            Scope::Cluster,
            Scope::Cluster,
            Scope::LabelCoveringCluster,
            Scope::LabelDomain,
        ]);
        let labelled = match scope {
            Scope::Cluster => Vec::new(),
            Scope::LabelCoveringCluster => names.clone(),
            Scope::LabelDomain => (names.iter())
                .filter(|n| n.starts_with("cp-") || rng.chance(0.7))
                .cloned()
                .collect(),
        };
        let crash = rng.chance(0.5).then(|| {
            let verb = *rng.pick(CRASH_VERBS);
            let most = if verb == Verb::CreateJob { 16 } else { 6 };
            Crash {
                verb,
                nth: rng.range(0, most) as usize,
                after: rng.chance(0.5),
            }
        });
        let abort = rng.chance(0.3);
        let mut cast = Cast::new(names);
        if scope != Scope::Cluster {
            cast.selection = Some((SELECTED.0.into(), SELECTED.1.into()));
        }
        let count = rng.range(4, 16) as usize;
        let span = rng.millis(30_000, 10 * 60_000);
        Draws {
            shape: Shape {
                control,
                workers,
                replicas: rng.range(2, 4) as i32,
                concurrency: rng.range(1, 3) as u32,
                scope,
                labelled,
            },
            crash,
            abort,
            actors: ActorSchedule::draw(seed, &cast, span, count),
        }
    }
}

async fn scenario(seed: u64, verbose: bool) -> Result<Summary, String> {
    let draws = Draws::draw(seed);
    if verbose {
        println!("seed {seed}: {draws:#?}\nschedule:\n{}", draws.actors);
    }
    let (fake, names) = build(seed, &draws.shape)?;
    fake.sleep(Duration::from_secs(30)).await;
    // Drawn times are from the rotation's start.
    let start = fake.now();
    let shifted = Arc::new(ActorSchedule {
        acts: (draws.actors.acts.iter())
            .map(|(at, act)| (start + *at, act.clone()))
            .collect(),
    });
    shifted.arm(&fake);
    let pauses = pausing_operator(&fake, seed, start);
    let starts = Arc::new(Mutex::new(Starts::default()));
    let new = ca().fingerprint.clone();
    let identities = ["driver-a", "driver-b", "driver-c"];
    let mut runs = Vec::new();
    let mut violations = Vec::new();
    let mut mode = Mode::Rotate;
    let mut ended = None;
    let mut last = None;
    for attempt in 0..RUNS {
        let identity = identities[attempt.min(identities.len() - 1)];
        let plan = plan_for(&draws.shape, identity);
        if attempt >= 2 {
            // The operator waits for the actors to be done before trying again.
            let over = start + shifted.over();
            fake.sleep(over.saturating_sub(fake.now())).await;
            fake.clear_faults();
        }
        if attempt > 0 {
            // A rerun under another identity: the previous holder's Lease expires first.
            fake.sleep(plan.spec().lease_duration + Duration::from_secs(5))
                .await;
        }
        if attempt == 1 && draws.abort {
            mode = Mode::Abort;
        }
        let run_nodes = Arc::new(Mutex::new(None));
        let watch = Watch {
            fake: fake.clone(),
            plan: plan.clone(),
            new: new.clone(),
            cluster_wide: draws.shape.scope.cluster_wide(),
            width: draws.shape.concurrency as usize,
            ours: identities.iter().map(|s| s.to_string()).collect(),
            schedule: Arc::new(Mutex::new((*shifted).clone())),
            run_nodes: run_nodes.clone(),
            violations: Mutex::new(Vec::new()),
        };
        let (clock, starts) = (fake.clone(), starts.clone());
        let sink: Arc<dyn ProgressSink> = Arc::new(move |e: &Progress| {
            starts.lock().unwrap().event(clock.now(), e);
            if let Progress::Driver(CaEvent::Gate(g)) = e
                && g.gate == Gate::Start
            {
                let nodes = g.nodes.iter().map(|r| r.node.clone()).collect();
                *run_nodes.lock().unwrap() = Some(nodes);
            }
        });
        let mut api = Crashing::new(fake.clone(), watch);
        let crash = draws.crash.clone().filter(|_| attempt == 0);
        if let Some(c) = &crash {
            api = api.crashing_at_verb(c.verb, c.nth, c.after);
        }
        let started = fake.now();
        let go = async {
            match mode {
                Mode::Rotate => certs_driver::run(&api, &plan, sink).await,
                Mode::Abort => certs_driver::abort(&api, &plan, sink).await,
            }
        };
        let result = tokio::select! {
            result = tokio::time::timeout(RUN_BOUND, go) => match result {
                Ok(result) => Some(result),
                Err(_) => return Err(format!(
                    "run {attempt} did not end within {RUN_BOUND:?}; runs {runs:#?}"
                )),
            },
            _ = api.crashed() => None,
        };
        violations.extend(api.observer().violations.lock().unwrap().clone());
        let Some(result) = result else {
            runs.push(format!("crashed: at {crash:?}"));
            continue;
        };
        runs.push(short(mode, &result));
        if verbose {
            println!("run {attempt} ({mode:?}) at {:?}: {result:#?}", fake.now());
        }
        let fail = |what: String| format!("run {attempt}: {what}; runs {runs:#?}");
        match &result {
            Ok(report) => {
                check_report(&fake, mode, report, &new).map_err(fail)?;
                if report.outcome == Outcome::Done {
                    check_done(&fake, draws.shape.scope, mode, report, &shifted, started)
                        .map_err(fail)?;
                    if attempt >= 2 {
                        ended = Some(mode);
                        break;
                    }
                }
            }
            Err(Error::AbortRefused { nodes }) => {
                check_refusal(&fake, &plan, nodes).map_err(fail)?;
                mode = Mode::Rotate;
            }
            Err(_) => {}
        }
        last = Some(result);
    }
    let accepted = (ended.is_none())
        .then(|| {
            last.as_ref()
                .and_then(|l| impossible(&fake, draws.shape.scope, l))
        })
        .flatten();
    if let Some(why) = &accepted {
        runs.push(format!("accepted: {why}"));
    }
    // 12. No step starts while paused.
    let window = *pauses.lock().unwrap();
    if verbose {
        println!("paused: {window:?}");
    }
    violations.extend(starts.lock().unwrap().while_paused(&window));
    let fail = |what: String| Err(format!("{what}; runs: {runs:#?}"));
    if !violations.is_empty() {
        return fail(format!("invariants broken: {violations:#?}"));
    }
    if ended.is_none() && accepted.is_none() {
        return fail(format!("not done after {RUNS} runs"));
    }
    // 11. Each phase at most once per node, deleted ones included.
    let mut all: BTreeSet<String> = names.iter().cloned().collect();
    all.extend(added_by(&shifted));
    all.extend(fake.node_names());
    if let Err(why) = check_once(&fake, &all) {
        return fail(why);
    }
    Ok(Summary {
        runs,
        calls: fake.calls().len(),
        took: fake.now(),
    })
}

#[test]
fn seeded_actor_schedules_keep_every_invariant_and_every_rotation_ends() {
    let (seeds, verbose) = seeds(SEEDS);
    let started = Instant::now();
    let results = run_seeds(seeds.clone(), |seed| scenario(seed, verbose));
    let wall = started.elapsed();
    conclude(
        "actor soak (CA rotation)",
        seeds,
        wall,
        &results,
        kind,
        |seed| {
            format!(
                "pause (after, lasting): {:?}\nschedule:\n{}",
                pause_draw(seed),
                Draws::draw(seed).actors
            )
        },
    );
}

#[test]
fn an_actor_seed_replays_exactly() {
    let first = run_seed(5, &|seed| scenario(seed, false));
    let second = run_seed(5, &|seed| scenario(seed, false));
    assert_eq!(first, second);
}
