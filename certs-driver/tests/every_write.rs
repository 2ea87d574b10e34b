//! The exhaustive **every-write soak** of the CA rotation (issue 30): one act of another actor
//! right after each write of the driver, every act at every write. The seeded actor soak
//! (`actors.rs`) draws its instants at random, and random instants never fall between two
//! writes of the driver made with no await between them; here, a small rotation (one
//! control-plane node, two workers, the workers' Deployment under a budget, two nodes at once,
//! no actor, no crash) is run undisturbed once and its writes counted, N; then for each write
//! `n` in `1..=N` and each [`Action`], a fresh identical cluster is rotated with the act done
//! on the fake synchronously in the `after` hook of the driver's n-th write (the write was
//! served; the driver has not seen its answer yet).
//!
//! The acts ([`Action`]), on the node the write touched (a node patched, a Job pinned to it or
//! named for it, an Event about it), or `w-0` when the write was to no node: uncordon, cordon,
//! delete the node, add a new node, take the plan's label off the node (only for the plan that
//! selects by label), reboot it, have it NotReady for two minutes, have it report another
//! version, delete a Pod on it, take the Lease (another holder), pause the rolls for ten
//! minutes, stop the run and start another at once; and one act during a wait: the rolls
//! paused for ten minutes while a phase's host Job runs (its Job created at the write).
//!
//! Every write of every run is checked against the invariants of [`invariants`] as it is made
//! ([`Watch`], told of the act as it is done: the Lease check needs the instant of the theft),
//! and one more here, 6b: a phase Job created after the theft follows a read of the Lease
//! made after it (the driver checks the Lease right before each phase; invariant 6 judges a
//! write by what the driver read, so it cannot see a check left out). Then each run's report against the cluster ([`check_report`], [`check_done`]), and the steps
//! started against the pause (12). After the disrupted run an operator reruns under another
//! identity, once the act is over (the node Ready again, the pause lifted) and the last
//! holder's Lease expired, until a run that started after the act ends `Done` (at most
//! [`RUNS`] runs); a plan left unable to end as [`impossible`] says is accepted. Then no phase
//! ran twice on any node (11).
//!
//! Two plans: the whole cluster (no selector), and the nodes labelled `ca=yes` (all of them)
//! covering the cluster, where an act may take the label off a node.
//!
//! # Running
//! - `cargo test -p certs-driver --test every_write`: every write, with the acts of [`SHORT`]
//!   on the cluster plan (60 writes: 369 pairs, about 740 runs of the driver, some 20 s in a
//!   debug build on two cores).
//! - The whole table, both plans and every act: `NODEJOB_EVERY_WRITE_ALL=1 cargo test
//!   --release -p certs-driver --test every_write -- --nocapture` (CI runs it: 1,398 pairs,
//!   about 3,000 runs; some 80 s in a debug build).
//! - One pair, verbosely (the write, the act, each run's report): `NODEJOB_EVERY_WRITE=12:cordon
//!   cargo test -p certs-driver --test every_write -- --nocapture`; `label:12:relabel` for
//!   the label plan. The soak prints this line for every pair that fails.

mod invariants;
mod support;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use certs_driver::{CaEvent, Gate, Outcome, Progress, ProgressSink, Stop, run_until};
use futures::FutureExt;
use invariants::{
    Mode, RUN_BOUND, SELECTED, Scope, Shape, Starts, Watch, build, ca, check_done, check_once,
    check_report, impossible, kind, live, node_names, phase_of, plan_for, pod_job, short,
};
use nodejob_conformance::soak::{PauseWindow, Summary, run_seed, run_seeds};
use nodejob_conformance::{Crashing, Observe, Write};
use nodejob_core::pause::{Pause, set_pause};
use nodejob_core::{Clock, Verb};
use nodejob_fake::FakeCluster;
use nodejob_fake::schedule::{Act, ActorSchedule, LEASE, WORKER};
use support::NS;

/// The fake's seed: every pair's cluster is the same.
const SEED: u64 = 7;
/// Runs at most per pair: the disrupted run, the one started at once after a stop, and the
/// operator's.
const RUNS: usize = 5;
/// The identities the runs take in turn (the run started at once after a stop keeps the
/// first).
const IDENTITIES: [&str; RUNS] = ["driver-a", "driver-b", "driver-c", "driver-d", "driver-e"];
/// How long a flapped node stays NotReady.
const FLAP: Duration = Duration::from_secs(120);
/// How long the rolls stay paused.
const PAUSED_FOR: Duration = Duration::from_secs(600);
/// How far into its phase Job the wait's pause comes: the fake starts a Job's container 1.2 s
/// after its creation and a `carotate` phase exits 1 s later.
const INTO_JOB: Duration = Duration::from_millis(1700);
/// The node [`Action::AddNode`] adds.
const JOINED: &str = "joined-1";
/// Who [`Action::StealLease`] gives the Lease to.
const INTRUDER: &str = "intruder";
/// The acts the default run tries at every write.
const SHORT: [Action; 7] = [
    Action::DeleteNode,
    Action::Reboot,
    Action::Flap,
    Action::StealLease,
    Action::Pause,
    Action::StopRun,
    Action::PauseInJob,
];

/// What another actor does right after the driver's n-th write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Uncordon,
    Cordon,
    DeleteNode,
    AddNode,
    /// The plan's label taken off the node (a plan selecting by label only).
    Relabel,
    Reboot,
    Flap,
    ReportVersion,
    DeletePod,
    StealLease,
    /// The rolls paused at once, lifted [`PAUSED_FOR`] later.
    Pause,
    /// The run asked to stop, and another started as soon as it ended.
    StopRun,
    /// The write created a phase's host Job: the rolls paused [`INTO_JOB`] later, while it
    /// runs, lifted [`PAUSED_FOR`] after.
    PauseInJob,
}

impl Action {
    const ALL: [Action; 13] = [
        Action::Uncordon,
        Action::Cordon,
        Action::DeleteNode,
        Action::AddNode,
        Action::Relabel,
        Action::Reboot,
        Action::Flap,
        Action::ReportVersion,
        Action::DeletePod,
        Action::StealLease,
        Action::Pause,
        Action::StopRun,
        Action::PauseInJob,
    ];

    fn name(self) -> &'static str {
        match self {
            Action::Uncordon => "uncordon",
            Action::Cordon => "cordon",
            Action::DeleteNode => "delete-node",
            Action::AddNode => "add-node",
            Action::Relabel => "relabel",
            Action::Reboot => "reboot",
            Action::Flap => "flap",
            Action::ReportVersion => "report-version",
            Action::DeletePod => "delete-pod",
            Action::StealLease => "steal-lease",
            Action::Pause => "pause",
            Action::StopRun => "stop-run",
            Action::PauseInJob => "pause-in-job",
        }
    }

    /// Whether it can be done after `write` (of the baseline) under `scope`.
    fn applies(self, scope: Scope, write: &Seen) -> bool {
        match self {
            Action::Relabel => scope != Scope::Cluster,
            Action::PauseInJob => write.phase_job.is_some(),
            _ => true,
        }
    }
}

/// One entry of the table: the plan, the write (from 1), the act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pair {
    scope: Scope,
    write: usize,
    action: Action,
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Cluster => "cluster",
        Scope::LabelCoveringCluster => "label",
        Scope::LabelDomain => "domain",
    }
}

impl fmt::Display for Pair {
    /// As [`Pair::parse`] reads it: `12:cordon`, `label:12:relabel`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scope != Scope::Cluster {
            write!(f, "{}:", scope_name(self.scope))?;
        }
        write!(f, "{}:{}", self.write, self.action.name())
    }
}

impl Pair {
    fn parse(text: &str) -> Result<Pair, String> {
        let parts: Vec<&str> = text.split(':').collect();
        let (scope, write, action) = match parts[..] {
            [write, action] => (Scope::Cluster, write, action),
            ["cluster", write, action] => (Scope::Cluster, write, action),
            ["label", write, action] => (Scope::LabelCoveringCluster, write, action),
            _ => return Err(format!("{text:?} is not [label:]WRITE:ACTION")),
        };
        let write = (write.parse().ok())
            .filter(|n| *n >= 1)
            .ok_or_else(|| format!("{write:?} is not a write number (from 1)"))?;
        let action = (Action::ALL.into_iter())
            .find(|a| a.name() == action)
            .ok_or_else(|| {
                let names: Vec<&str> = Action::ALL.iter().map(|a| a.name()).collect();
                format!("{action:?} is none of {names:?}")
            })?;
        Ok(Pair {
            scope,
            write,
            action,
        })
    }

    fn replay(&self) -> String {
        format!(
            "NODEJOB_EVERY_WRITE={self} cargo test -p certs-driver --test every_write -- \
             --nocapture"
        )
    }
}

/// The small rotation: one control-plane node, two workers, two at once.
fn shape(scope: Scope) -> Shape {
    let labelled = match scope {
        Scope::Cluster => Vec::new(),
        _ => node_names(1, 2),
    };
    Shape {
        control: 1,
        workers: 2,
        replicas: 2,
        concurrency: 2,
        scope,
        labelled,
    }
}

/// One write of the disrupted run, as the act saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    /// `#n Verb target`, counted from 1 as the table counts (a [`Write`]'s index is n - 1).
    what: String,
    /// The phase Job it creates, if it creates one.
    phase_job: Option<String>,
    verb: Verb,
    target: String,
}

impl Seen {
    fn of(write: &Write) -> Seen {
        let job = write.target.split_once('/').map_or("", |(_, n)| n);
        let phase_job =
            (write.verb == Verb::CreateJob && phase_of(job).is_some()).then(|| job.to_string());
        Seen {
            what: format!("#{} {:?} {}", write.index + 1, write.verb, write.target),
            phase_job,
            verb: write.verb,
            target: write.target.clone(),
        }
    }
}

/// The node a write is about: the node patched, the node a Job is pinned to (or, deleted,
/// named for), the node an Event is about.
fn touched(write: &Write, nodes: &[String]) -> Option<String> {
    match write.verb {
        Verb::PatchNode | Verb::PatchNodeConditions => Some(write.target.clone()),
        Verb::CreateJob => Watch::node_of_job(write),
        Verb::CreateEvent => {
            let event: serde_json::Value = serde_json::from_str(&write.body).ok()?;
            let about = (event.get("involvedObject")).or_else(|| event.get("regarding"))?;
            (about.get("kind")? == "Node").then(|| about.get("name")?.as_str().map(String::from))?
        }
        Verb::DeleteJob => {
            let job = write.target.split_once('/').map_or("", |(_, n)| n);
            (nodes.iter())
                .find(|n| job.contains(&format!("-{n}-")))
                .cloned()
        }
        _ => None,
    }
}

/// What the act did and when it is over (the node Ready again, the pause lifted).
#[derive(Clone, Debug)]
struct Done {
    what: String,
    at: Duration,
    over: Duration,
}

impl fmt::Display for Done {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {:?}", self.what, self.at)
    }
}

/// What a pair's runs share with the act.
struct World {
    fake: Arc<FakeCluster>,
    scope: Scope,
    nodes: Vec<String>,
    /// The disrupted run's stop.
    stop: Stop,
    /// The acts done, at the cluster's times: the [`Watch`]es read them.
    schedule: Arc<Mutex<ActorSchedule>>,
    /// When the rolls were paused.
    pause: Arc<Mutex<PauseWindow>>,
    done: Mutex<Option<Done>>,
    /// What went wrong in the act itself.
    problems: Arc<Mutex<Vec<String>>>,
    /// When the Lease was stolen, if it was: how many calls the fake had recorded then.
    theft: Mutex<Option<usize>>,
}

impl World {
    /// The act done, for a failure's message.
    fn acted(&self) -> String {
        match &*self.done.lock().unwrap() {
            Some(done) => format!("the act: {done}"),
            None => "no act".into(),
        }
    }

    /// Records `act` in the schedule and does it.
    fn apply(&self, act: Act) -> String {
        let what = act.to_string();
        let now = self.fake.now();
        self.schedule.lock().unwrap().acts.push((now, act.clone()));
        act.apply(&self.fake);
        what
    }

    /// Does `action` right after `write`, as [`Action`] says.
    fn act(&self, action: Action, write: &Write) -> Done {
        let fake = &self.fake;
        let at = fake.now();
        let node = touched(write, &self.nodes).unwrap_or_else(|| "w-0".into());
        let mut over = at;
        let what = match action {
            Action::Uncordon => self.apply(Act::Uncordon(node)),
            Action::Cordon => self.apply(Act::Cordon(node)),
            Action::DeleteNode => self.apply(Act::DeleteNode(node)),
            Action::AddNode => {
                let mut labels = vec![(WORKER.0.to_string(), WORKER.1.to_string())];
                if self.scope != Scope::Cluster {
                    labels.push((SELECTED.0.to_string(), SELECTED.1.to_string()));
                }
                self.apply(Act::AddNode {
                    name: JOINED.into(),
                    labels,
                })
            }
            Action::Relabel => self.apply(Act::Unlabel {
                node,
                key: SELECTED.0.into(),
            }),
            Action::Reboot => self.apply(Act::Reboot(node)),
            Action::Flap => {
                over = at + FLAP;
                self.apply(Act::Flap {
                    node,
                    down_for: FLAP,
                })
            }
            Action::ReportVersion => {
                let now = (fake.node(&node))
                    .and_then(|n| n.status?.node_info)
                    .map(|i| i.kubelet_version)
                    .unwrap_or_default();
                let version = if now == "v1.38.0" {
                    "v1.36.9"
                } else {
                    "v1.38.0"
                };
                self.apply(Act::ReportVersion {
                    node,
                    version: version.into(),
                })
            }
            Action::DeletePod => {
                let first = (fake.pods_on(&node).first())
                    .and_then(|p| p.metadata.name.clone())
                    .unwrap_or_else(|| "none".into());
                format!("{} ({first})", self.apply(Act::DeletePod(node)))
            }
            Action::StealLease => {
                *self.theft.lock().unwrap() = Some(fake.calls().len());
                self.apply(Act::StealLease(INTRUDER.into()))
            }
            Action::Pause => {
                over = at + PAUSED_FOR;
                pause_now(fake, &self.pause, &self.problems);
                format!("the rolls paused for {PAUSED_FOR:?}")
            }
            Action::StopRun => {
                self.stop.request();
                "the run asked to stop".into()
            }
            Action::PauseInJob => {
                let job = Seen::of(write).phase_job.unwrap_or_default();
                over = at + INTO_JOB + PAUSED_FOR;
                let (fake, pause, problems) =
                    (fake.clone(), self.pause.clone(), self.problems.clone());
                let what = format!(
                    "the rolls paused for {PAUSED_FOR:?} {INTO_JOB:?} into {job}, on {node}"
                );
                tokio::spawn(async move {
                    fake.sleep(INTO_JOB).await;
                    let running = (fake.pods(NS).iter())
                        .any(|p| live(p) && pod_job(p).is_some_and(|(_, j)| j == job));
                    if !running {
                        (problems.lock().unwrap())
                            .push(format!("no pod of {job} runs {INTO_JOB:?} after it"));
                    }
                    pause_now(&fake, &pause, &problems);
                });
                what
            }
        };
        Done { what, at, over }
    }
}

/// Sets the pause switch now (the fake answers at once) and lifts it [`PAUSED_FOR`] later,
/// noting both in `window`.
fn pause_now(
    fake: &Arc<FakeCluster>,
    window: &Arc<Mutex<PauseWindow>>,
    problems: &Mutex<Vec<String>>,
) {
    let pause = Pause {
        by: "operator".into(),
        at: Some(fake.wall_time()),
        reason: "the every-write soak pulls the cord".into(),
    };
    let (ns, name) = LEASE;
    match set_pause(&**fake, ns, name, Some(&pause)).now_or_never() {
        Some(Ok(_)) => window.lock().unwrap().set = Some(fake.now()),
        Some(Err(e)) => problems.lock().unwrap().push(format!("pausing: {e}")),
        None => (problems.lock().unwrap()).push("pausing: the fake did not answer at once".into()),
    }
    let (fake, window) = (fake.clone(), window.clone());
    tokio::spawn(async move {
        fake.sleep(PAUSED_FOR).await;
        window.lock().unwrap().lifting = Some(fake.now());
        while set_pause(&*fake, ns, name, None).await.is_err() {
            fake.sleep(Duration::from_secs(1)).await;
        }
    });
}

/// The observer of a run: the [`Watch`], and (the disrupted run) the act after write `n`.
struct Acting {
    watch: Watch,
    world: Arc<World>,
    at: Option<(usize, Action)>,
    /// Writes served so far (`after` calls), each as seen.
    seen: Mutex<Vec<Seen>>,
    count: AtomicUsize,
}

impl Observe for Acting {
    fn before(&self, write: &Write) {
        self.watch.before(write);
        // 6b, here only: a phase starts on a fresh read of the Lease. The driver reads the
        // Lease as a phase's step begins (its Lease check, with the pause switch), so a phase
        // Job created after the theft follows a Lease call of the driver's answered after it
        // (which finds the Lease another's: then no Job). Invariant 6 alone cannot see a check
        // left out: it judges a write by what the driver read. (The window this found, the
        // step's `Started` condition written between that check and the Job, is closed: the
        // Lease is read again right before a new phase Job.)
        let theft = *self.world.theft.lock().unwrap();
        if let Some(calls_then) = theft
            && Seen::of(write).phase_job.is_some()
        {
            let calls = self.world.fake.calls();
            let read = (calls.iter().skip(calls_then)).any(|c| {
                matches!(
                    c.verb,
                    Verb::GetLease | Verb::ReplaceLease | Verb::CreateLease
                ) && c.error.is_none()
            });
            if !read {
                (self.watch.violations.lock().unwrap()).push(format!(
                    "6b: {write}: a phase job with no read of the Lease since it was stolen"
                ));
            }
        }
    }

    fn after(&self, write: &Write) {
        self.watch.after(write);
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        self.seen.lock().unwrap().push(Seen::of(write));
        if let Some((at, action)) = self.at
            && at == n
        {
            let done = self.world.act(action, write);
            *self.world.done.lock().unwrap() = Some(done);
        }
    }
}

/// What a pair (or the baseline) did.
struct Ran {
    summary: Summary,
    /// The writes of the first run.
    writes: Vec<Seen>,
}

/// Rotates a fresh cluster of `scope`, with `pair`'s act in the first run (none: the
/// baseline), and checks everything the module docs say.
async fn scenario(scope: Scope, pair: Option<Pair>, verbose: bool) -> Result<Ran, String> {
    let shape = shape(scope);
    let (fake, names) = build(SEED, &shape)?;
    fake.sleep(Duration::from_secs(30)).await;
    let world = Arc::new(World {
        fake: fake.clone(),
        scope,
        nodes: names.clone(),
        stop: Stop::new(),
        schedule: Arc::new(Mutex::new(ActorSchedule { acts: Vec::new() })),
        pause: Arc::default(),
        done: Mutex::new(None),
        problems: Arc::default(),
        theft: Mutex::new(None),
    });
    let starts = Arc::new(Mutex::new(Starts::default()));
    let new = ca().fingerprint.clone();
    let ours: BTreeSet<String> = IDENTITIES.iter().map(|s| s.to_string()).collect();
    let mut runs = Vec::new();
    let mut violations = Vec::new();
    let mut writes = Vec::new();
    let mut ended = false;
    let mut last = None;
    for (attempt, own) in IDENTITIES.into_iter().enumerate() {
        let at_once = attempt == 1 && pair.is_some_and(|p| p.action == Action::StopRun);
        let identity = if at_once { IDENTITIES[0] } else { own };
        let plan = plan_for(&shape, identity);
        if attempt > 0 && !at_once {
            // The operator: once the act is over, and the last holder's Lease expired.
            let over = (world.done.lock().unwrap().as_ref()).map_or(Duration::ZERO, |d| d.over);
            fake.sleep(over.saturating_sub(fake.now())).await;
            fake.sleep(plan.spec().lease_duration + Duration::from_secs(5))
                .await;
        }
        let run_nodes = Arc::new(Mutex::new(None));
        let watch = Watch {
            fake: fake.clone(),
            plan: plan.clone(),
            new: new.clone(),
            cluster_wide: scope.cluster_wide(),
            width: shape.concurrency as usize,
            ours: ours.clone(),
            schedule: world.schedule.clone(),
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
        let api = Crashing::new(
            fake.clone(),
            Acting {
                watch,
                world: world.clone(),
                at: pair.filter(|_| attempt == 0).map(|p| (p.write, p.action)),
                seen: Mutex::new(Vec::new()),
                count: AtomicUsize::new(0),
            },
        );
        let stop = if attempt == 0 {
            world.stop.clone()
        } else {
            Stop::new()
        };
        let started = fake.now();
        let result = tokio::time::timeout(RUN_BOUND, run_until(&api, &plan, sink, &stop))
            .await
            .map_err(|_| {
                format!(
                    "{}; run {attempt} did not end within {RUN_BOUND:?}; runs {runs:#?}",
                    world.acted()
                )
            })?;
        violations.extend(api.observer().watch.violations.lock().unwrap().clone());
        if attempt == 0 {
            writes = api.observer().seen.lock().unwrap().clone();
            if verbose {
                for seen in &writes {
                    println!("  {} (phase job: {:?})", seen.what, seen.phase_job);
                }
            }
            if verbose && let Some(p) = pair {
                let write = writes.get(p.write - 1).map(|s| s.what.clone());
                let write = write.unwrap_or_default();
                println!("{p}: right after {write}: {}", world.acted());
            }
        }
        runs.push(short(Mode::Rotate, &result));
        if verbose {
            println!(
                "run {attempt} ({identity}) at {:?}: {result:#?}",
                fake.now()
            );
        }
        let fail =
            |what: String| format!("{}; run {attempt}: {what}; runs {runs:#?}", world.acted());
        if attempt == 0
            && let Some(p) = pair
            && world.done.lock().unwrap().is_none()
        {
            return Err(fail(format!(
                "the act never came: the run made {} writes, not {}",
                writes.len(),
                p.write
            )));
        }
        if let Ok(report) = &result {
            check_report(&fake, Mode::Rotate, report, &new).map_err(fail)?;
            if report.outcome == Outcome::Done {
                let schedule = world.schedule.lock().unwrap().clone();
                check_done(&fake, scope, Mode::Rotate, report, &schedule, started).map_err(fail)?;
                let over = (world.done.lock().unwrap().as_ref()).map_or(Duration::ZERO, |d| d.over);
                if started >= over {
                    ended = true;
                    break;
                }
            }
        }
        last = Some(result);
    }
    let accepted = (!ended)
        .then(|| last.as_ref().and_then(|l| impossible(&fake, scope, l)))
        .flatten();
    if let Some(why) = &accepted {
        runs.push(format!("accepted: {why}"));
    }
    // 12. No step starts while paused.
    let window = *world.pause.lock().unwrap();
    if verbose {
        println!(
            "acts: {:?}\npaused: {window:?}",
            world.schedule.lock().unwrap().acts
        );
    }
    violations.extend(starts.lock().unwrap().while_paused(&window));
    violations.extend(world.problems.lock().unwrap().clone());
    let fail = |what: String| Err(format!("{}; {what}; runs: {runs:#?}", world.acted()));
    if !violations.is_empty() {
        return fail(format!("invariants broken: {violations:#?}"));
    }
    if !ended && accepted.is_none() {
        return fail(format!("not done after {RUNS} runs"));
    }
    // 11. Each phase at most once per node, deleted ones included.
    let mut all: BTreeSet<String> = names.iter().cloned().collect();
    all.insert(JOINED.into());
    all.extend(fake.node_names());
    if let Err(why) = check_once(&fake, &all) {
        return fail(why);
    }
    Ok(Ran {
        summary: Summary {
            runs,
            calls: fake.calls().len(),
            took: fake.now(),
        },
        writes,
    })
}

/// Runs one scenario in a fresh paused runtime, as the seeded soaks do.
fn run_one(scope: Scope, pair: Option<Pair>, verbose: bool) -> Result<Ran, String> {
    run_seed(0, &|_| scenario(scope, pair, verbose))
}

#[test]
fn an_act_right_after_every_write_keeps_every_invariant_and_the_rotation_ends() {
    if let Ok(text) = std::env::var("NODEJOB_EVERY_WRITE") {
        let pair = Pair::parse(&text).unwrap();
        let ran = run_one(pair.scope, Some(pair), true);
        match &ran {
            Ok(ran) => println!("{pair}: passed: {:#?}", ran.summary),
            Err(why) => println!("{pair}: FAILED: {why}"),
        }
        assert!(ran.is_ok(), "{pair} failed (above)");
        return;
    }
    let all = std::env::var("NODEJOB_EVERY_WRITE_ALL").is_ok_and(|v| v == "1");
    let (scopes, actions): (&[Scope], &[Action]) = if all {
        (&[Scope::Cluster, Scope::LabelCoveringCluster], &Action::ALL)
    } else {
        (&[Scope::Cluster], &SHORT)
    };
    let wall = Instant::now();
    let mut pairs = Vec::new();
    let mut skipped = 0;
    for &scope in scopes {
        // The undisturbed rotation: it ends Done in its one run, every invariant kept.
        let base = run_one(scope, None, false)
            .unwrap_or_else(|why| panic!("the undisturbed rotation ({scope:?}) fails: {why}"));
        assert_eq!(base.summary.runs, ["done:"], "{scope:?}");
        assert!(base.writes.len() >= 20, "{scope:?}: {:?}", base.writes);
        println!(
            "every-write soak (CA rotation): the {} plan's undisturbed rotation makes {} writes",
            scope_name(scope),
            base.writes.len()
        );
        for (i, seen) in base.writes.iter().enumerate() {
            for &action in actions {
                if action.applies(scope, seen) {
                    pairs.push(Pair {
                        scope,
                        write: i + 1,
                        action,
                    });
                } else {
                    skipped += 1;
                }
            }
        }
    }
    let results = run_seeds(0..pairs.len() as u64, |i| {
        let pair = pairs[i as usize];
        async move {
            let ran = scenario(pair.scope, Some(pair), false).await;
            ran.map(|r| r.summary)
        }
    });
    let wall = wall.elapsed();
    let mut tally: std::collections::BTreeMap<String, usize> = Default::default();
    let mut failures = Vec::new();
    let mut runs = 0;
    for (i, result) in &results {
        let pair = pairs[*i as usize];
        match result {
            Ok(summary) => {
                runs += summary.runs.len();
                for run in &summary.runs {
                    *tally.entry(kind(run)).or_default() += 1;
                }
            }
            Err(why) => failures.push(format!(
                "FAILED write {}, {} ({} plan): {why}\n  replay: {}",
                pair.write,
                pair.action.name(),
                scope_name(pair.scope),
                pair.replay()
            )),
        }
    }
    println!(
        "every-write soak (CA rotation): {} pairs (write, act) over {} act(s) and {} plan(s) \
         ({skipped} not applicable) in {wall:.1?}: {runs} runs of the driver; {} failed; runs \
         by outcome {tally:?}",
        pairs.len(),
        actions.len(),
        scopes.len(),
        failures.len()
    );
    for failure in &failures {
        println!("{failure}");
    }
    assert_eq!(results.len(), pairs.len(), "every pair ran");
    assert!(
        failures.is_empty(),
        "{} of {} pairs failed:\n{}",
        failures.len(),
        pairs.len(),
        failures.join("\n")
    );
}

#[test]
fn a_pair_reads_as_it_prints() {
    for pair in [
        Pair {
            scope: Scope::Cluster,
            write: 12,
            action: Action::Cordon,
        },
        Pair {
            scope: Scope::LabelCoveringCluster,
            write: 3,
            action: Action::PauseInJob,
        },
    ] {
        assert_eq!(Pair::parse(&pair.to_string()), Ok(pair));
    }
    assert!(Pair::parse("12:dance").is_err());
    assert!(Pair::parse("x:cordon").is_err());
    assert!(Pair::parse("0:cordon").is_err());
}
