//! `soak` on the fake, in paused time: each upgraded node, back in service, must stay Ready on
//! the same boot (and pass the health check again at the end) for the soak before the next
//! batch starts; the time left is told as it goes; a node that breaks its soak fails at `Soak`
//! and counts against the failure budget; a stop or a crash during the soak resumes it from
//! the start recorded on the node. Every write is checked against the roll's invariants.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_core::Clock;
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Fault;
use support::*;
use upgrade_driver::records::{self, DONE, IN_PROGRESS, SOAK, Soak};
use upgrade_driver::{
    EventSink, NodeResult, Outcome, PlanSpec, Progress, Report, Stop, UpgradeEvent, UpgradeStep,
    run, run_until,
};

const SOAK_FOR: Duration = Duration::from_secs(600);

fn soaking(edit: impl FnOnce(&mut PlanSpec)) -> PlanSpec {
    let mut spec = plan_spec();
    spec.soak = Some(SOAK_FOR);
    edit(&mut spec);
    spec
}

fn result(report: &Report, node: &str) -> NodeResult {
    (report.node(node).and_then(|n| n.result.clone()))
        .unwrap_or_else(|| panic!("{node} has no result: {report:#?}"))
}

/// What a test does on each event.
type Actor = Box<dyn Fn(&FakeCluster, &Progress) + Send + Sync>;

/// Progress, each event with the virtual time it was told at.
struct Timeline {
    fake: Arc<FakeCluster>,
    events: Mutex<Vec<(Duration, Progress)>>,
    /// Called with each event (a test's actor).
    on: Actor,
}

impl Timeline {
    fn new(fake: &Arc<FakeCluster>) -> Arc<Self> {
        Self::acting(fake, |_, _| {})
    }

    fn acting(
        fake: &Arc<FakeCluster>,
        on: impl Fn(&FakeCluster, &Progress) + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Timeline {
            fake: fake.clone(),
            events: Mutex::default(),
            on: Box::new(on),
        })
    }

    fn events(&self) -> Vec<(Duration, Progress)> {
        self.events.lock().unwrap().clone()
    }

    /// When `node`'s step `step` started, and finished.
    fn step_at(&self, node: &str, step: UpgradeStep, started: bool) -> Option<Duration> {
        self.events().into_iter().find_map(|(at, e)| match e {
            Progress::StepStarted { node: n, step: s } if started && n == node && s == step => {
                Some(at)
            }
            Progress::StepFinished {
                node: n, step: s, ..
            } if !started && n == node && s == step => Some(at),
            _ => None,
        })
    }

    fn soaking(&self, node: &str) -> Vec<u64> {
        (self.events().into_iter())
            .filter_map(|(_, e)| match e {
                Progress::Driver(UpgradeEvent::Soaking { node: n, left_ms }) if n == node => {
                    Some(left_ms)
                }
                _ => None,
            })
            .collect()
    }
}

impl EventSink<Progress> for Timeline {
    fn event(&self, event: &Progress) {
        self.events
            .lock()
            .unwrap()
            .push((self.fake.now(), event.clone()));
        (self.on)(&self.fake, event);
    }
}

fn soak_record(fake: &FakeCluster, node: &str) -> Option<Soak> {
    records::read(&fake.node(node).unwrap(), SOAK).unwrap()
}

#[tokio::test(start_paused = true)]
async fn each_node_soaks_before_the_next_batch_starts_and_the_time_left_is_told() {
    let (fake, names) = cluster(41, 1, &[("z", 2)], 0);
    let api = harness(fake.clone(), names.clone(), 1);
    let timeline = Timeline::new(&fake);
    let report = run(&api, &plan(soaking(|_| {})), timeline.clone())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for pair in names.windows(2) {
        let back = timeline
            .step_at(&pair[0], UpgradeStep::Uncordon, false)
            .unwrap();
        let soaked = timeline
            .step_at(&pair[0], UpgradeStep::Soak, false)
            .unwrap();
        let next = timeline
            .step_at(&pair[1], UpgradeStep::Cordon, true)
            .unwrap();
        assert!(
            soaked - back >= SOAK_FOR,
            "{}: soaked {:?}",
            pair[0],
            soaked - back
        );
        assert!(
            next >= soaked,
            "{} started before {} soaked",
            pair[1],
            pair[0]
        );
    }
    for name in &names {
        // Counting down: from the whole soak, every tenth of it (60 s here).
        let left = timeline.soaking(name);
        assert_eq!(left.first().copied(), Some(600_000), "{name}: {left:?}");
        assert!(left.windows(2).all(|w| w[1] < w[0]), "{name}: {left:?}");
        assert_eq!(left.len(), 10, "{name}: {left:?}");
        let node = fake.node(name).unwrap();
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        assert!(annotations.contains_key(DONE) && !annotations.contains_key(SOAK));
        assert!(!records::unschedulable(&node));
        let steps = &report.node(name).unwrap().steps;
        assert!(
            steps
                .iter()
                .any(|(s, ms)| *s == UpgradeStep::Soak && *ms >= 600_000),
            "{name}: {steps:?}"
        );
    }
    assert_eq!(api.violations(), Vec::<String>::new());
}

/// A worker that reboots (or goes NotReady) some time into its soak.
async fn breaking(
    seed: u64,
    act: fn(&FakeCluster, &str),
) -> (Arc<FakeCluster>, Vec<String>, Report, Harness) {
    let (fake, names) = cluster(seed, 0, &[("z", 2)], 0);
    let api = harness(fake.clone(), names.clone(), 1);
    let armed = Mutex::new(false);
    let timeline = Timeline::acting(&fake, move |fake, e| {
        if let Progress::Driver(UpgradeEvent::Soaking { node, .. }) = e
            && node == "z-0"
            && !std::mem::replace(&mut *armed.lock().unwrap(), true)
        {
            fake.schedule(fake.now() + Duration::from_secs(90), move |c| act(c, "z-0"));
        }
    });
    let report = run(&api, &plan(soaking(|_| {})), timeline).await.unwrap();
    (fake, names, report, api)
}

#[tokio::test(start_paused = true)]
async fn a_node_that_reboots_during_its_soak_fails_and_counts_against_the_failure_budget() {
    let (fake, names, report, api) = breaking(42, |c, n| {
        c.reboot_node(n).unwrap();
    })
    .await;
    let NodeResult::Failed(f) = result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(f.step, UpgradeStep::Soak);
    assert!(
        f.message.contains("rebooted during its soak"),
        "{}",
        f.message
    );
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{report:#?}"
    );
    assert_eq!(report.node("z-1").unwrap().result, None, "no node after it");
    let record = soak_record(&fake, "z-0").unwrap();
    assert!(record.failed.is_some(), "{record:?}");
    // Left in service, at the target, not ours.
    let node = fake.node("z-0").unwrap();
    assert!(!records::unschedulable(&node) && records::in_flight(&node));
    // A rerun soaks it again, from the start, then goes on.
    let again = harness(fake.clone(), names, 1);
    let report = run(&again, &plan(soaking(|_| {})), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(api.upgrades("z-0"), 1, "the host upgrade is not run again");
    assert_eq!(api.violations(), Vec::<String>::new());
    assert_eq!(again.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_node_that_goes_not_ready_during_its_soak_fails_at_soak() {
    let (_, _, report, _) = breaking(43, |c, n| c.set_node_ready(n, false).unwrap()).await;
    let NodeResult::Failed(f) = result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(f.step, UpgradeStep::Soak);
    assert!(f.message.contains("NotReady"), "{}", f.message);
}

#[tokio::test(start_paused = true)]
async fn the_health_check_runs_again_at_the_end_of_the_soak() {
    let (fake, names) = cluster(44, 0, &[("z", 2)], 0);
    let api = harness(fake.clone(), names, 1);
    // The host turns unhealthy once its soak began (after the first health check passed).
    let armed = Mutex::new(false);
    let timeline = Timeline::acting(&fake, move |fake, e| {
        if let Progress::Driver(UpgradeEvent::Soaking { node, .. }) = e
            && node == "z-0"
            && !std::mem::replace(&mut *armed.lock().unwrap(), true)
        {
            let host = fake.host("z-0").unwrap().with_fault(Fault::Unhealthy);
            fake.set_host("z-0", host).unwrap();
        }
    });
    let spec = soaking(|s| {
        s.health_check = Some(vec![s.binary.clone(), "health".into()]);
    });
    let report = run(&api, &plan(spec), timeline.clone()).await.unwrap();
    let NodeResult::Failed(f) = result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!((f.step, f.exit_code), (UpgradeStep::Soak, Some(1)));
    assert!(
        f.message.contains("at the end of its soak"),
        "{}",
        f.message
    );
    // It was checked once after the reboot, and again only once the soak was over.
    let health = timeline.step_at("z-0", UpgradeStep::Health, false).unwrap();
    let back = timeline
        .step_at("z-0", UpgradeStep::Uncordon, false)
        .unwrap();
    assert!(health <= back);
    let failed_at = (timeline.events().into_iter())
        .find_map(|(at, e)| {
            matches!(e, Progress::NodeFinished { node, .. } if node == "z-0").then_some(at)
        })
        .unwrap();
    assert!(failed_at - back >= SOAK_FOR, "{:?}", failed_at - back);
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_the_soak_leaves_it_to_a_rerun_which_resumes_it_from_its_recorded_start() {
    let (fake, names) = cluster(45, 0, &[("z", 2)], 0);
    let stop = Stop::new();
    let asker = stop.clone();
    // Asked to stop 4 minutes into z-0's soak.
    let timeline = Timeline::acting(&fake, move |_, e| {
        if let Progress::Driver(UpgradeEvent::Soaking { node, left_ms }) = e
            && node == "z-0"
            && *left_ms <= 360_000
        {
            asker.request();
        }
    });
    let first = harness(fake.clone(), names.clone(), 1);
    let report = run_until(&first, &plan(soaking(|_| {})), timeline.clone(), &stop)
        .await
        .unwrap();
    let NodeResult::Interrupted { step, .. } = result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(step, UpgradeStep::Soak);
    let record = soak_record(&fake, "z-0").unwrap();
    assert_eq!(record.failed, None);
    assert!(
        records::in_flight(&fake.node("z-0").unwrap()),
        "soaking: carried on"
    );
    let stopped_at = fake.now();
    // The rerun, 2 minutes later: z-0 soaks the rest (4 minutes), not a whole soak again.
    fake.sleep(Duration::from_secs(120)).await;
    let timeline = Timeline::new(&fake);
    let second = harness(fake.clone(), names, 1);
    let report = run(&second, &plan(soaking(|_| {})), timeline.clone())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let left = timeline.soaking("z-0");
    assert!(
        left.first().is_some_and(|l| *l <= 240_000),
        "the rerun counts from the recorded start: {left:?}"
    );
    // Stopped 4 minutes in, resumed 2 minutes later: done 6 minutes after the stop (a whole
    // soak again would be 12).
    let soaked = timeline.step_at("z-0", UpgradeStep::Soak, false).unwrap();
    assert!(
        soaked - stopped_at <= Duration::from_secs(370),
        "{:?}",
        soaked - stopped_at
    );
    assert_eq!(second.upgrades("z-0"), 1);
    let node = fake.node("z-0").unwrap();
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key(DONE) && !annotations.contains_key(SOAK));
    assert!(!annotations.contains_key(IN_PROGRESS));
    assert_eq!(first.violations(), Vec::<String>::new());
    assert_eq!(second.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_crash_during_the_soak_resumes_it_from_its_recorded_start() {
    let (fake, names) = cluster(46, 0, &[("z", 1)], 0);
    let first = harness(fake.clone(), names.clone(), 1);
    let plan = plan(soaking(|_| {}));
    // The driver dies (its future dropped) well into z-0's soak.
    let started = fake.now();
    let crashed = tokio::time::timeout(
        Duration::from_secs(60 + 300),
        run(&first, &plan, upgrade_driver::quiet()),
    )
    .await;
    assert!(crashed.is_err(), "the roll ended before the crash");
    let record = soak_record(&fake, "z-0").expect("crashed while soaking");
    let since: jiff::Timestamp = record.since.parse().unwrap();
    // The Lease it held runs out; a restarted driver resumes.
    fake.sleep(plan.spec().lease_duration).await;
    let second = harness(fake.clone(), names, 1);
    let report = run(&second, &plan, upgrade_driver::quiet()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let done: records::Done = records::read(&fake.node("z-0").unwrap(), DONE)
        .unwrap()
        .unwrap();
    let done_at: jiff::Timestamp = done.at.parse().unwrap();
    let soaked = since.duration_until(done_at).unsigned_abs();
    assert!(
        soaked >= SOAK_FOR
            && soaked < SOAK_FOR + plan.spec().lease_duration + Duration::from_secs(60),
        "done {soaked:?} after its soak began"
    );
    let _ = started;
    assert_eq!(second.upgrades("z-0"), 1);
}
