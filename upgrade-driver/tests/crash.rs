//! Exactly once, under crashes: the driver is stopped dead at every write of a roll (before
//! the write is sent, and after it was served but before its answer was seen), and at instants
//! drawn over the whole roll (the host Jobs' lifetimes included); a second run then resumes
//! from the cluster alone. Whatever the crash point, the resumed run reaches the same final
//! state, the host models count exactly one upgrade per node, no node is left cordoned by us,
//! and the invariants held throughout.

mod support;

use std::sync::Arc;
use std::time::Duration;

use nodejob_core::Clock;
use nodejob_fake::FakeCluster;
use proptest::prelude::*;
use support::*;
use upgrade_driver::{Outcome, Plan, run};

/// One control-plane node and two workers, two `web` replicas behind a budget allowing one
/// disruption, settled.
async fn base(seed: u64) -> (Arc<FakeCluster>, Vec<String>) {
    let (fake, names) = cluster(seed, 1, &[("z", 2)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    (fake, names)
}

/// Resumes with a fresh driver (the same identity, as a restarted one) and checks the end.
async fn resume_and_check(
    fake: &Arc<FakeCluster>,
    names: &[String],
    plan: &Plan,
    first: &Harness,
) -> Result<(), String> {
    let api = harness(fake.clone(), names.to_vec(), 1);
    let report = run(&api, plan, upgrade_driver::quiet())
        .await
        .map_err(|e| format!("resume refused: {e}"))?;
    if report.outcome != Outcome::Done {
        let failures: Vec<String> = report
            .nodes
            .iter()
            .filter_map(|n| {
                n.failure()
                    .map(|f| format!("{}: {} {}", n.name, f.step, f.message))
            })
            .collect();
        return Err(format!("resume ended {:?}: {failures:?}", report.outcome));
    }
    let mut problems = Vec::new();
    // A node the crashed run started says where it came from, whatever it reports now.
    for n in &report.nodes {
        if n.result == Some(upgrade_driver::NodeResult::Upgraded) && n.from.as_deref() != Some(FROM)
        {
            problems.push(format!("{} reported from {:?}", n.name, n.from));
        }
    }
    for name in names {
        let node = fake.node(name).ok_or(format!("{name} is gone"))?;
        if kubelet_version(&node) != TARGET {
            problems.push(format!("{name} at {}", kubelet_version(&node)));
        }
        if api.upgrades(name) != 1 {
            problems.push(format!("{name} upgraded {} times", api.upgrades(name)));
        }
        if upgrade_driver::records::unschedulable(&node) {
            problems.push(format!("{name} left cordoned"));
        }
        let annotations = node.metadata.annotations.unwrap_or_default();
        if annotations.contains_key(upgrade_driver::records::IN_PROGRESS)
            || annotations.contains_key(upgrade_driver::records::HOST_JOB)
        {
            problems.push(format!("{name} keeps our in-flight records"));
        }
        if fake.job(NS, &plan.job_name(name)).is_some() {
            problems.push(format!("{name}'s host job left behind"));
        }
    }
    problems.extend(first.violations());
    problems.extend(api.violations());
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// How many writes a roll makes when nothing crashes.
async fn writes_of_a_clean_roll() -> usize {
    let (fake, names) = base(1).await;
    let api = harness(fake, names, 1);
    let report = run(&api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done);
    api.writes()
}

#[tokio::test(start_paused = true)]
async fn a_crash_at_every_write_resumes_to_the_same_end_with_one_upgrade_per_node() {
    let writes = writes_of_a_clean_roll().await;
    assert!(writes > 20, "a roll of three nodes makes {writes} writes");
    let plan = plan(plan_spec());
    let mut failures = Vec::new();
    for at in 0..writes {
        for after in [false, true] {
            let (fake, names) = base(1).await;
            let first = harness(fake.clone(), names.clone(), 1).crashing_at(at, after);
            tokio::select! {
                report = run(&first, &plan, upgrade_driver::quiet()) => {
                    failures.push(format!("write {at} (after: {after}): the run ended without reaching it: {report:?}"));
                    continue;
                }
                _ = first.crashed() => {}
            }
            if let Err(e) = resume_and_check(&fake, &names, &plan, &first).await {
                failures.push(format!("crash at write {at} (after: {after}): {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A crash at virtual time `at` after the roll's start (the future dropped then).
async fn crash_at_instant(at: Duration) -> Result<(), String> {
    let (fake, names) = base(2).await;
    let plan = plan(plan_spec());
    let first = harness(fake.clone(), names.clone(), 1);
    let started = fake.now();
    if let Ok(report) = tokio::time::timeout(at, run(&first, &plan, upgrade_driver::quiet())).await
    {
        // The roll ended before the crash: nothing to resume, but it must have succeeded.
        let report = report.map_err(|e| e.to_string())?;
        if report.outcome != Outcome::Done {
            return Err(format!("ended {:?}", report.outcome));
        }
    }
    let _ = started;
    resume_and_check(&fake, &names, &plan, &first).await
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// A roll of three nodes takes about three minutes of virtual time; crashes are drawn over
    /// its whole length, in milliseconds, so they land inside host Jobs, drains and reboots.
    #[test]
    fn a_crash_at_any_instant_resumes_with_one_upgrade_per_node(ms in 0u64..200_000) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let outcome = runtime.block_on(crash_at_instant(Duration::from_millis(ms)));
        prop_assert!(outcome.is_ok(), "crash at {}ms: {}", ms, outcome.unwrap_err());
    }
}

// ---- a rollback's crash points --------------------------------------------------------------

/// One control-plane node and two workers, `z-0`'s host upgrade failing, under a plan that
/// rolls back on failure.
async fn failing(seed: u64) -> (Arc<FakeCluster>, Vec<String>, Plan) {
    let (fake, names) = base(seed).await;
    let host = fake
        .host("z-0")
        .unwrap()
        .with_fault(nodejob_fake::stratum::Fault::UpgradeFails);
    fake.set_host("z-0", host).unwrap();
    let mut spec = plan_spec();
    spec.on_failure = upgrade_driver::OnFailure::Rollback;
    (fake, names, plan(spec))
}

fn rollbacks(fake: &FakeCluster, node: &str) -> u32 {
    fake.host_state(node)
        .map(|s| s.executions(nodejob_fake::stratum::Operation::Rollback))
        .unwrap_or(0)
}

/// Resumes the roll of [`failing`] and checks its end: z-0 rolled back to [`FROM`] (once per
/// failed upgrade: its host upgrade fails each time, so a rerun after a finished rollback
/// retries it and rolls it back again), uncordoned, not ours, no rollback Job left; z-1
/// never started (the failure budget); and the invariants held throughout.
async fn resume_rolled_back(
    fake: &Arc<FakeCluster>,
    names: &[String],
    plan: &Plan,
    first: &Harness,
) -> Result<(), String> {
    let api = harness(fake.clone(), names.to_vec(), 1);
    let report = run(&api, plan, upgrade_driver::quiet())
        .await
        .map_err(|e| format!("resume refused: {e}"))?;
    let z0 = report.node("z-0").and_then(|n| n.result.clone());
    if !matches!(z0, Some(upgrade_driver::NodeResult::RolledBack { .. })) {
        return Err(format!("z-0 ended {z0:?}: {:?}", report.outcome));
    }
    let mut problems = Vec::new();
    let (upgrades, rolled) = (api.upgrades("z-0"), rollbacks(fake, "z-0"));
    if upgrades != rolled || rolled == 0 {
        problems.push(format!(
            "z-0: {upgrades} failed upgrade(s), {rolled} rollback(s)"
        ));
    }
    let node = fake.node("z-0").ok_or("z-0 is gone")?;
    if kubelet_version(&node) != FROM || upgrade_driver::records::unschedulable(&node) {
        problems.push(format!(
            "z-0 at {}, cordoned {}",
            kubelet_version(&node),
            upgrade_driver::records::unschedulable(&node)
        ));
    }
    if upgrade_driver::records::in_flight(&node) {
        problems.push("z-0 keeps our in-flight record".into());
    }
    if fake.job(NS, &plan.rollback_job_name("z-0")).is_some() {
        problems.push("z-0's rollback job left behind".into());
    }
    if api.upgrades("z-1") != 0 {
        problems.push("z-1 upgraded past the failure budget".into());
    }
    problems.extend(first.violations());
    problems.extend(api.violations());
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[tokio::test(start_paused = true)]
async fn a_crash_at_every_write_of_a_rollback_resumes_it_rolling_back_once_per_failure() {
    let writes = {
        let (fake, names, plan) = failing(1).await;
        let api = harness(fake.clone(), names, 1);
        let report = run(&api, &plan, upgrade_driver::quiet()).await.unwrap();
        assert!(
            matches!(report.outcome, Outcome::Failed { .. }),
            "{:?}",
            report.outcome
        );
        assert_eq!(rollbacks(&fake, "z-0"), 1);
        api.writes()
    };
    let mut failures = Vec::new();
    for at in 0..writes {
        for after in [false, true] {
            let (fake, names, plan) = failing(1).await;
            let first = harness(fake.clone(), names.clone(), 1).crashing_at(at, after);
            tokio::select! {
                report = run(&first, &plan, upgrade_driver::quiet()) => {
                    failures.push(format!("write {at} (after: {after}): the run ended without reaching it: {report:?}"));
                    continue;
                }
                _ = first.crashed() => {}
            }
            if let Err(e) = resume_rolled_back(&fake, &names, &plan, &first).await {
                failures.push(format!("crash at write {at} (after: {after}): {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A crash at virtual time `at` after the start of a roll that rolls z-0 back.
async fn rollback_crash_at_instant(at: Duration) -> Result<(), String> {
    let (fake, names, plan) = failing(2).await;
    let first = harness(fake.clone(), names.clone(), 1);
    if let Ok(report) = tokio::time::timeout(at, run(&first, &plan, upgrade_driver::quiet())).await
    {
        // The roll ended before the crash: it rolled z-0 back, nothing is left to resume but
        // the rerun's own retry.
        report.map_err(|e| e.to_string())?;
    }
    // The Lease of the dead driver runs out first.
    fake.sleep(plan.spec().lease_duration).await;
    resume_rolled_back(&fake, &names, &plan, &first).await
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

    /// Crashes drawn over the whole roll (about three and a half minutes: the control-plane
    /// node, z-0's failed upgrade, its rollback), inside host Jobs, drains and reboots.
    #[test]
    fn a_crash_at_any_instant_of_a_rollback_resumes_it_once_per_failure(ms in 0u64..240_000) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let outcome = runtime.block_on(rollback_crash_at_instant(Duration::from_millis(ms)));
        prop_assert!(outcome.is_ok(), "crash at {}ms: {}", ms, outcome.unwrap_err());
    }
}
