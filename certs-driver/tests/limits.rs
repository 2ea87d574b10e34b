//! The rotation on the roll engine's limits: a failure budget lets a phase finish on the other
//! nodes (and no phase starts after a failure), a closed maintenance window starts nothing,
//! and both are refused when they make no sense.

mod support;

use certs_driver::{CaStep, Outcome, Plan, Window, quiet, run};
use k8s_openapi::jiff::civil::{Time, Weekday};
use nodejob_fake::stratum::Fault;
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(start_paused = true)]
async fn a_failure_budget_of_two_lets_the_phase_finish_on_the_other_nodes_then_stops() -> TestResult
{
    let ca = new_ca();
    let (fake, _) = cluster(7, 1, 4);
    fault(&fake, "w-0", Fault::IssueFails);
    let mut spec = plan_spec(&ca);
    spec.concurrency = 1;
    spec.failure_budget = 2;
    let report = run(&harness(fake.clone()), &plan(spec), quiet()).await?;
    let Outcome::Failed { retry, .. } = &report.outcome else {
        return Err(format!("ended {:?}", report.outcome).into());
    };
    assert!(retry.contains("w-0"), "{retry}");
    let failure = (report.node("w-0").and_then(|n| n.failure())).ok_or("w-0 did not fail")?;
    assert_eq!(failure.step, CaStep::Issue);
    // One failure of a budget of two: issue went on over the workers after w-0, in order.
    for name in ["cp-0", "w-1", "w-2", "w-3"] {
        assert_eq!(phase_runs(&fake, name)[1], 1, "{name} was not issued");
    }
    // No phase starts after a failure: nobody was finalized.
    for name in ["cp-0", "w-0", "w-1", "w-2", "w-3"] {
        assert_eq!(phase_runs(&fake, name)[2], 0, "{name} was finalized");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn with_the_default_budget_the_first_failure_stops_the_phase() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(7, 1, 4);
    fault(&fake, "w-0", Fault::IssueFails);
    let mut spec = plan_spec(&ca);
    spec.concurrency = 1;
    let report = run(&harness(fake.clone()), &plan(spec), quiet()).await?;
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{:?}",
        report.outcome
    );
    for name in ["w-1", "w-2", "w-3"] {
        assert_eq!(phase_runs(&fake, name)[1], 0, "{name} was issued");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_closed_window_starts_no_batch_and_says_when_it_opens() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(7, 1, 2);
    let mut spec = plan_spec(&ca);
    // The fake's clock starts on Thursday 2026-01-01: a Sunday-night window is closed.
    spec.window = Some(Window {
        days: vec![Weekday::Sunday],
        start: Time::constant(1, 0, 0, 0),
        end: Time::constant(2, 0, 0, 0),
        time_zone: "UTC".into(),
    });
    let report = run(&harness(fake.clone()), &plan(spec), quiet()).await?;
    let Outcome::Stopped { why } = &report.outcome else {
        return Err(format!("ended {:?}", report.outcome).into());
    };
    assert!(
        why == "outside the maintenance window; it next opens at 2026-01-04 01:00 UTC",
        "{why}"
    );
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [0, 0, 0, 0], "{name} ran a phase");
    }
    assert_eq!(
        report.lease.as_ref().map(|l| &l.ended),
        Some(&certs_driver::LeaseEnd::Released)
    );
    Ok(())
}

#[test]
fn a_zero_budget_and_a_window_without_days_are_refused_by_field() {
    let ca = new_ca();
    let mut spec = plan_spec(&ca);
    spec.failure_budget = 0;
    let refused = Plan::build(spec).err().map(|e| e.field);
    assert_eq!(refused, Some("failure_budget"));
    let mut spec = plan_spec(&ca);
    spec.window = Some(Window {
        days: vec![],
        start: Time::constant(1, 0, 0, 0),
        end: Time::constant(2, 0, 0, 0),
        time_zone: "UTC".into(),
    });
    let refused = Plan::build(spec).err().map(|e| e.field);
    assert_eq!(refused, Some("window.days"));
}
