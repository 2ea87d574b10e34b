//! `on_failure: rollback` on the fake, in paused time: a node whose host upgrade fails, that
//! comes back at another version, or fails its health check or its soak, is rolled back once
//! (`stratum rollback --to V`, V the version recorded before its host upgrade), drained, and
//! must come back at V on a new boot; it is then uncordoned if we cordoned it and reported
//! rolled back, a failure for the failure budget. A node that cannot be (not Ready) fails as
//! before, saying why; a rollback that fails leaves the node cordoned. Every write is checked
//! against the roll's invariants.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_conformance::workloads::deployment;
use nodejob_core::Clock;
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::{Fault, Operation};
use support::*;
use upgrade_driver::records::{self, HOST_JOB, IN_PROGRESS, ROLLBACK, Rollback};
use upgrade_driver::{
    EventSink, NodeResult, OnFailure, Outcome, PlanSpec, Progress, Report, UpgradeEvent,
    UpgradeStep, run,
};

fn rolling_back(edit: impl FnOnce(&mut PlanSpec)) -> PlanSpec {
    let mut spec = plan_spec();
    spec.on_failure = OnFailure::Rollback;
    edit(&mut spec);
    spec
}

/// Two workers, `z-0`'s host with `faults`.
fn two_workers(seed: u64, faults: &[Fault]) -> (Arc<FakeCluster>, Vec<String>) {
    let (fake, names) = cluster(seed, 0, &[("z", 2)], 0);
    let mut host = fake.host("z-0").unwrap();
    for fault in faults {
        host = host.with_fault(*fault);
    }
    fake.set_host("z-0", host).unwrap();
    (fake, names)
}

fn result(report: &Report, node: &str) -> NodeResult {
    (report.node(node).and_then(|n| n.result.clone()))
        .unwrap_or_else(|| panic!("{node} has no result: {report:#?}"))
}

fn rollbacks(fake: &FakeCluster, node: &str) -> u32 {
    fake.host_state(node)
        .map(|s| s.executions(Operation::Rollback))
        .unwrap_or(0)
}

/// Checks that `node` was rolled back once after failing at `step`, and ends as a rolled-back
/// node does: at [`FROM`] on a boot other than `before`, uncordoned, not ours, the rollback
/// recorded done, its Job gone.
fn rolled_back_once(
    fake: &FakeCluster,
    report: &Report,
    node: &str,
    step: UpgradeStep,
    before: &str,
) -> Rollback {
    let NodeResult::RolledBack { failure, version } = result(report, node) else {
        panic!("{node} was not rolled back: {report:#?}")
    };
    assert_eq!(
        (failure.step, version.as_str()),
        (step, FROM),
        "{failure:?}"
    );
    assert!(
        !failure.message.contains("stays cordoned"),
        "{}",
        failure.message
    );
    assert_eq!(rollbacks(fake, node), 1);
    let n = fake.node(node).unwrap();
    assert_eq!(kubelet_version(&n), FROM);
    assert_ne!(records::boot_id(&n), before, "a new boot");
    assert!(!records::unschedulable(&n), "uncordoned");
    assert!(!records::in_flight(&n));
    let record: Rollback = records::read(&n, ROLLBACK).unwrap().unwrap();
    assert!(
        record.done.is_some() && record.exit_code == Some(0),
        "{record:?}"
    );
    assert_eq!((record.from.as_str(), record.to.as_str()), (TARGET, FROM));
    assert!(fake.job(NS, &format!("rollback-{node}")).is_none());
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{report:#?}"
    );
    assert_eq!(report.totals.rolled_back, 1);
    record
}

fn boot(fake: &FakeCluster, node: &str) -> String {
    records::boot_id(&fake.node(node).unwrap()).to_string()
}

#[tokio::test(start_paused = true)]
async fn a_failed_host_upgrade_is_rolled_back_once_to_the_recorded_version_on_a_new_boot() {
    let (fake, names) = two_workers(51, &[Fault::UpgradeFails]);
    let before = boot(&fake, "z-0");
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(rolling_back(|_| {})), upgrade_driver::quiet())
        .await
        .unwrap();
    let record = rolled_back_once(&fake, &report, "z-0", UpgradeStep::Upgrade, &before);
    assert_eq!(
        record.boot_id, before,
        "the boot recorded before the host upgrade"
    );
    assert_eq!(api.upgrades("z-0"), 1);
    // The failed upgrade's Job and its Pod are kept for inspection, and recorded failed so
    // that a rerun replaces exactly it.
    let plan = plan(plan_spec());
    let job = fake
        .job(NS, &plan.job_name("z-0"))
        .expect("the failed job is kept");
    assert!(nodejob_core::failed(&job));
    assert!(
        fake.pods(NS).iter().any(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("upgrade-z-0"))
        }),
        "its pod is kept"
    );
    let annotations = fake
        .node("z-0")
        .unwrap()
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(annotations.contains_key(HOST_JOB), "{annotations:?}");
    assert_eq!(
        report.node("z-1").unwrap().result,
        None,
        "the failure budget is spent"
    );
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_node_back_at_another_version_or_failing_its_health_check_is_rolled_back() {
    // Back at the version it had (the upgrade did not take): a clean boot of it.
    let (fake, names) = two_workers(52, &[Fault::BootsOldVersion]);
    let before = boot(&fake, "z-0");
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(rolling_back(|_| {})), upgrade_driver::quiet())
        .await
        .unwrap();
    rolled_back_once(&fake, &report, "z-0", UpgradeStep::Reboot, &before);
    assert_eq!(api.violations(), Vec::<String>::new());

    // At the target but unhealthy: back to the version it ran before.
    let (fake, names) = two_workers(53, &[Fault::Unhealthy]);
    let before = boot(&fake, "z-0");
    let api = harness(fake.clone(), names, 1);
    let spec = rolling_back(|s| s.health_check = Some(vec![s.binary.clone(), "health".into()]));
    let report = run(&api, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    rolled_back_once(&fake, &report, "z-0", UpgradeStep::Health, &before);
    assert_eq!(api.violations(), Vec::<String>::new());
}

/// What the cluster looked like right before a Job was created on a node: whether the node
/// was cordoned, and the evictable Pods on it.
type AtJob = Arc<Mutex<Option<(bool, Vec<String>)>>>;

#[tokio::test(start_paused = true)]
async fn a_node_failing_its_soak_is_cordoned_drained_and_rolled_back() {
    let (fake, names) = cluster(54, 0, &[("z", 2)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    let before = boot(&fake, "z-0");
    let api = harness(fake.clone(), names, 1);
    // As z-0 soaks, back in service, a workload lands on it; it reboots by itself a minute
    // and a half into its soak. Right before the rollback Job: cordoned, nothing evictable
    // left on it.
    let armed = Arc::new(Mutex::new(false));
    let at_job: AtJob = Arc::default();
    let seen = at_job.clone();
    let sink = Arc::new({
        let fake = fake.clone();
        move |e: &Progress| {
            if let Progress::StepStarted {
                node,
                step: UpgradeStep::Rollback,
            } = e
                && node == "z-0"
            {
                let seen = seen.clone();
                fake.before(nodejob_core::Verb::CreateJob, move |c| {
                    let cordoned = c.node("z-0").is_some_and(|n| records::unschedulable(&n));
                    *seen.lock().unwrap() = Some((cordoned, evictable_on(c, "z-0")));
                });
            }
            if let Progress::Driver(UpgradeEvent::Soaking { node, .. }) = e
                && node == "z-0"
                && !std::mem::replace(&mut *armed.lock().unwrap(), true)
            {
                let pinned = ("kubernetes.io/hostname".to_string(), "z-0".to_string());
                fake.create_deployment_now(&deployment("default", "late", 1, &pinned))
                    .unwrap();
                fake.schedule(fake.now() + Duration::from_secs(90), |c| {
                    c.reboot_node("z-0").unwrap();
                });
            }
        }
    });
    let spec = rolling_back(|s| s.soak = Some(Duration::from_secs(600)));
    let report = run(&api, &plan(spec), sink).await.unwrap();
    rolled_back_once(&fake, &report, "z-0", UpgradeStep::Soak, &before);
    let n = fake.node("z-0").unwrap();
    let annotations = n.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key(records::SOAK), "{annotations:?}");
    // The workload that landed during the soak was evicted before the rollback Job.
    let evicted = &report.node("z-0").unwrap().pods_evicted;
    assert!(
        evicted.iter().any(|p| p.starts_with("default/late-")),
        "drained for the rollback: {evicted:?}"
    );
    assert_eq!(
        at_job.lock().unwrap().clone(),
        Some((true, Vec::new())),
        "cordoned and drained at the rollback job"
    );
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_rollback_that_fails_leaves_the_node_cordoned_naming_both_failures() {
    let (fake, names) = two_workers(55, &[Fault::UpgradeFails, Fault::RollbackFails]);
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(rolling_back(|_| {})), upgrade_driver::quiet())
        .await
        .unwrap();
    let NodeResult::Failed(f) = result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!((f.step, f.exit_code), (UpgradeStep::Rollback, Some(1)));
    assert!(
        f.message.contains("the rollback exited 1") && f.message.contains("failing at Upgrade"),
        "{}",
        f.message
    );
    assert!(
        f.log_tail
            .as_deref()
            .is_some_and(|l| l.contains("injected fault"))
    );
    assert!(cordoned_by_us(&fake.node("z-0").unwrap()));
    assert_eq!(rollbacks(&fake, "z-0"), 1);
    let plan = plan(plan_spec());
    assert!(
        fake.job(NS, &plan.rollback_job_name("z-0")).is_some(),
        "kept for inspection"
    );
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_node_that_never_comes_back_is_not_rolled_back_and_by_default_none_is() {
    let (fake, names) = two_workers(56, &[Fault::StaysDown]);
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(rolling_back(|_| {})), upgrade_driver::quiet())
        .await
        .unwrap();
    let NodeResult::Failed(f) = result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(f.step, UpgradeStep::Reboot);
    assert!(
        f.message.contains("not rolled back: the node is not Ready"),
        "{}",
        f.message
    );
    assert_eq!(rollbacks(&fake, "z-0"), 0);

    let (fake, names) = two_workers(57, &[Fault::UpgradeFails]);
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(matches!(result(&report, "z-0"), NodeResult::Failed(_)));
    assert_eq!(rollbacks(&fake, "z-0"), 0);
    let n = fake.node("z-0").unwrap();
    assert!(cordoned_by_us(&n));
    let annotations = n.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key(ROLLBACK),
        "nothing recorded by default"
    );
}

#[tokio::test(start_paused = true)]
async fn a_rerun_after_a_rollback_retries_the_upgrade_replacing_the_failed_job() {
    let (fake, names) = two_workers(58, &[Fault::UpgradeFails]);
    let first = harness(fake.clone(), names.clone(), 1);
    let spec = rolling_back(|_| {});
    let report = run(&first, &plan(spec.clone()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(matches!(
        result(&report, "z-0"),
        NodeResult::RolledBack { .. }
    ));
    // The operator fixes the host, then runs it again.
    let host = fake.host("z-0").unwrap();
    let mut fixed = host.clone();
    fixed.faults.clear();
    fake.set_host("z-0", fixed).unwrap();
    let second = harness(fake.clone(), names, 1);
    let report = run(&second, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(second.upgrades("z-0"), 2, "the failed one, then the retry");
    assert_eq!(rollbacks(&fake, "z-0"), 1);
    let n = fake.node("z-0").unwrap();
    assert_eq!(kubelet_version(&n), TARGET);
    let annotations = n.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key(ROLLBACK) && !annotations.contains_key(IN_PROGRESS),
        "{annotations:?}"
    );
    assert_eq!(first.violations(), Vec::<String>::new());
    assert_eq!(second.violations(), Vec::<String>::new());
}

/// Collects events.
#[derive(Default)]
struct Seen(Mutex<Vec<Progress>>);

impl EventSink<Progress> for Seen {
    fn event(&self, e: &Progress) {
        self.0.lock().unwrap().push(e.clone());
    }
}

#[tokio::test(start_paused = true)]
async fn the_rollback_is_told_as_a_step_and_an_event_on_the_node() {
    let (fake, names) = two_workers(59, &[Fault::UpgradeFails]);
    let api = harness(fake.clone(), names, 1);
    let seen = Arc::new(Seen::default());
    run(&api, &plan(rolling_back(|_| {})), seen.clone())
        .await
        .unwrap();
    let events = seen.0.lock().unwrap().clone();
    let started = events.iter().any(|e| {
        matches!(e, Progress::StepStarted { node, step: UpgradeStep::Rollback } if node == "z-0")
    });
    let finished = events.iter().any(|e| {
        matches!(e, Progress::StepFinished { node, step: UpgradeStep::Rollback, .. } if node == "z-0")
    });
    assert!(started && finished, "{events:#?}");
    let reasons: Vec<String> = (fake.events(NS).into_iter())
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        reasons.iter().any(|r| r == "NodejobUpgradeRollback"),
        "{reasons:?}"
    );
}
