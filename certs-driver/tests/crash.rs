//! Resume, under crashes: the driver is stopped dead at every write of a rotation (before the
//! write is sent, and after it was served but before its answer was seen), and at instants
//! drawn over the whole rotation (host Jobs and restarts included); a second run then resumes
//! from what the nodes report alone. Whatever the crash point, it ends with every node on the
//! new CA alone, the host models count exactly one execution of each phase per node, no
//! phase Job is left behind, and the resumed run reports each step of a node as skipped or
//! started (its Job adopted), never both.

mod support;

use std::sync::Arc;
use std::time::Duration;

use certs_driver::{CaEvent, CaStep, Outcome, Plan, Progress, quiet, run};
use nodejob_fake::FakeCluster;
use proptest::prelude::*;
use support::*;

/// One control-plane node and two workers.
fn base(seed: u64) -> (Arc<FakeCluster>, Vec<String>) {
    cluster(seed, 1, 2)
}

/// Resumes with a fresh driver (the same identity, as a restarted one) and checks the end.
async fn resume_and_check(
    fake: &Arc<FakeCluster>,
    names: &[String],
    plan: &Plan,
) -> Result<(), String> {
    let api = harness(fake.clone());
    let events = Arc::new(Events::default());
    let report = run(&api, plan, events.clone())
        .await
        .map_err(|e| format!("resume refused: {e}"))?;
    if report.outcome != Outcome::Done {
        return Err(format!("resume ended {:?}", report.outcome));
    }
    let new = plan.fingerprint().to_string();
    let mut problems = Vec::new();
    // Each step of a node is skipped or started (its job adopted), never both.
    let all = events.all();
    for e in &all {
        if let Progress::Driver(CaEvent::NodeSkipped { node, step, .. }) = e {
            let started = all.iter().any(
                |s| matches!(s, Progress::StepStarted { node: n, step: t } if n == node && t == step),
            );
            if started {
                problems.push(format!("{node} both skipped and started {step}"));
            }
        }
    }
    for name in names {
        let state = fake.host_state(name).ok_or(format!("{name} is gone"))?;
        if !on_new_ca(&state, &new) {
            problems.push(format!("{name} ends {state:?}"));
        }
        let runs = phase_runs(fake, name);
        if runs != [1, 1, 1, 0] {
            problems.push(format!(
                "{name} ran stage, issue, finalize, abort {runs:?} times"
            ));
        }
        for step in CaStep::PHASES {
            if fake.job(NS, &plan.job_name(step, name)).is_some() {
                problems.push(format!("{name}'s {step} job left behind"));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// How many writes a rotation makes when nothing crashes.
async fn writes_of_a_clean_rotation(ca: &NewCa) -> usize {
    let (fake, _) = base(1);
    let api = harness(fake);
    let report = run(&api, &plan(plan_spec(ca)), quiet()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done);
    api.writes()
}

/// Crashes the first run at write `at` (`after`: once it was served), then resumes.
async fn crash_at_write(ca: &NewCa, at: usize, after: bool) -> Result<(), String> {
    let plan = plan(plan_spec(ca));
    let (fake, names) = base(1);
    let first = harness(fake.clone()).crashing_at(at, after);
    tokio::select! {
        report = run(&first, &plan, quiet()) => {
            return Err(format!("the run ended without reaching write {at}: {report:?}"));
        }
        _ = first.crashed() => {}
    }
    resume_and_check(&fake, &names, &plan).await
}

#[tokio::test(start_paused = true)]
async fn a_crash_at_every_write_resumes_to_the_same_end_with_each_phase_once_per_node() {
    let ca = new_ca();
    let writes = writes_of_a_clean_rotation(&ca).await;
    assert!(
        writes > 40,
        "a rotation of three nodes makes {writes} writes"
    );
    let mut failures = Vec::new();
    for at in 0..writes {
        for after in [false, true] {
            if let Err(e) = crash_at_write(&ca, at, after).await {
                failures.push(format!("crash at write {at} (after: {after}): {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A crash at virtual time `at` after the rotation's start (the future dropped then).
async fn crash_at_instant(ca: &NewCa, at: Duration) -> Result<(), String> {
    let (fake, names) = base(2);
    let plan = plan(plan_spec(ca));
    let first = harness(fake.clone());
    if let Ok(report) = tokio::time::timeout(at, run(&first, &plan, quiet())).await {
        // The rotation ended before the crash: nothing to resume, but it must have succeeded.
        let report = report.map_err(|e| e.to_string())?;
        if report.outcome != Outcome::Done {
            return Err(format!("ended {:?}", report.outcome));
        }
    }
    resume_and_check(&fake, &names, &plan).await
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// A rotation of three nodes takes about 52s of virtual time; crashes are drawn over
    /// its whole length, in milliseconds, so they land inside host Jobs, restarts and reads.
    #[test]
    fn a_crash_at_any_instant_resumes_with_each_phase_once_per_node(ms in 0u64..55_000) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let ca = new_ca();
        let outcome = runtime.block_on(crash_at_instant(&ca, Duration::from_millis(ms)));
        prop_assert!(outcome.is_ok(), "crash at {}ms: {}", ms, outcome.unwrap_err());
    }
}
