//! Abort (before `issue`: the old trust everywhere again; once `issue` began: refused) and
//! preview (no write; what the nodes last reported; the next phase and where; who disagrees).

mod support;

use std::sync::Arc;

use certs_driver::{
    CaPhase, CaStep, Error, Next, NodeResult, Outcome, Progress, ProgressSink, Stop, abort,
    preview, quiet, run, run_until,
};
use nodejob_fake::stratum::{CaPhase as HostPhase, FOREIGN_CA, INITIAL_CA};
use nodejob_fake::{FakeCluster, Verb};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Runs the rotation until `at` says to stop (the run stops before its next batch).
async fn run_stopping_at(
    fake: &Arc<FakeCluster>,
    ca: &NewCa,
    at: impl Fn(&Progress) -> bool + Send + Sync + 'static,
) -> Result<Outcome, Error> {
    let stop = Stop::new();
    let handle = stop.clone();
    let sink: Arc<dyn ProgressSink> = Arc::new(move |e: &Progress| {
        if at(e) {
            handle.request();
        }
    });
    let report = run_until(
        &Harness::new(fake.clone()),
        &plan(plan_spec(ca)),
        sink,
        &stop,
    )
    .await?;
    Ok(report.outcome)
}

fn issue_starts(e: &Progress) -> bool {
    matches!(
        e,
        Progress::PhaseStarted {
            phase: CaStep::Issue,
            ..
        }
    )
}

#[tokio::test(start_paused = true)]
async fn abort_after_stage_restores_the_old_trust_everywhere() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(11, 2, 3);
    let outcome = run_stopping_at(&fake, &ca, issue_starts).await?;
    assert!(matches!(outcome, Outcome::Stopped { .. }), "{outcome:?}");
    for name in &names {
        let state = fake.host_state(name).ok_or("gone")?;
        assert!(state.trusted.contains(&ca.fingerprint), "{name} not staged");
        assert_eq!(phase_runs(&fake, name), [1, 0, 0, 0]);
    }
    let report = abort(&Harness::new(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for name in &names {
        let state = fake.host_state(name).ok_or("gone")?;
        let before: std::collections::BTreeSet<String> = [INITIAL_CA.to_string()].into();
        assert_eq!(state.trusted, before, "{name}");
        assert_eq!(state.issuer, INITIAL_CA, "{name}");
        assert_eq!(state.phase, HostPhase::Idle, "{name}");
        assert_eq!(phase_runs(&fake, name), [1, 0, 0, 1], "{name}");
        assert_eq!(
            report.node(name).and_then(|n| n.result.clone()),
            Some(NodeResult::Restored)
        );
    }
    assert_eq!(report.lease.last().map(String::as_str), Some("released"));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn abort_once_issue_has_begun_is_refused_and_only_forward_is_safe() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(12, 2, 2);
    // Stop once the first node finished issue: the others are staged, not issued.
    let outcome = run_stopping_at(&fake, &ca, |e| {
        matches!(
            e,
            Progress::StepFinished {
                step: CaStep::Issue,
                ..
            }
        )
    })
    .await?;
    assert!(matches!(outcome, Outcome::Stopped { .. }), "{outcome:?}");
    assert_eq!(phase_runs(&fake, "cp-0")[1], 1);
    assert_eq!(phase_runs(&fake, "cp-1")[1], 0);
    let refused = abort(&Harness::new(fake.clone()), &plan(plan_spec(&ca)), quiet()).await;
    let Err(e @ Error::AbortRefused { .. }) = refused else {
        return Err(format!("not refused: {refused:?}").into());
    };
    let message = e.to_string();
    assert!(message.contains("cp-0"), "{message}");
    assert!(!message.contains("cp-1 ("), "{message}");
    assert!(message.contains("only forward is safe"), "{message}");
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[3], 0, "{name} aborted");
    }
    // The Lease is free again, and forward finishes the rotation.
    let lease = fake.lease(NS, "nodejob").ok_or("no lease")?;
    assert_eq!(lease.spec.and_then(|s| s.holder_identity), None);
    let report = run(&Harness::new(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    assert_eq!(report.outcome, Outcome::Done);
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [1, 1, 1, 0], "{name}");
    }
    Ok(())
}

fn writes_verb(verb: Verb) -> bool {
    matches!(
        verb,
        Verb::CreateJob
            | Verb::DeleteJob
            | Verb::CreateEvent
            | Verb::PatchNode
            | Verb::EvictPod
            | Verb::CreateLease
            | Verb::ReplaceLease
    )
}

fn writes(fake: &FakeCluster) -> Vec<Verb> {
    fake.calls()
        .iter()
        .map(|c| c.verb)
        .filter(|v| writes_verb(*v))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn preview_makes_no_write_and_says_what_would_run_next_and_where() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(13, 1, 2);
    let plan = plan(plan_spec(&ca));

    // Never read: nothing known, nothing written.
    let first = preview(&*fake, &plan).await?;
    assert_eq!(writes(&fake), []);
    assert_eq!(
        first.next,
        Next::Unknown {
            unreported: names.clone()
        }
    );
    assert_eq!(first.lease, None);

    // Staged everywhere, then stopped: issue is next, on every node.
    run_stopping_at(&fake, &ca, issue_starts).await?;
    let before = fake.calls().len();
    let staged = preview(&*fake, &plan).await?;
    let after: Vec<Verb> = fake.calls()[before..].iter().map(|c| c.verb).collect();
    assert!(
        after
            .iter()
            .all(|v| matches!(v, Verb::ListNodes | Verb::GetLease)),
        "{after:?}"
    );
    assert_eq!(
        staged.next,
        Next::Phase {
            phase: CaStep::Issue,
            nodes: names.clone()
        }
    );
    assert!(
        staged.disagreements.is_empty(),
        "{:?}",
        staged.disagreements
    );
    for node in &staged.nodes {
        let reported = node.reported.as_ref().ok_or("not reported")?;
        assert_eq!(reported.phase, CaPhase::Staged);
        assert_eq!(reported.trusted.len(), 2);
        assert_eq!(reported.issuer.as_str(), INITIAL_CA);
        assert!(node.at.is_some());
    }
    assert_eq!(staged.nodes[0].name, "cp-0");
    assert!(staged.nodes[0].control_plane);

    // A node that reports something else since (its host changed behind the driver's back)
    // shows as it was last read; one whose record says it does not trust the new CA while
    // the others do disagrees before issue.
    let mut host = fake.host("w-1").ok_or("gone")?;
    host.state.trusted.remove(&ca.fingerprint);
    host.state.phase = HostPhase::Idle;
    fake.set_host("w-1", host)?;
    run_stopping_at(&fake, &ca, |e| matches!(e, Progress::PhaseStarted { .. })).await?;
    let mixed = preview(&*fake, &plan).await?;
    assert_eq!(
        mixed.next,
        Next::Phase {
            phase: CaStep::Stage,
            nodes: vec!["w-1".to_string()]
        }
    );
    assert!(mixed.disagreements.is_empty(), "{:?}", mixed.disagreements);

    // A node whose leaves chain to a CA it does not trust: the run's start gate stops, and a
    // preview names it from its record.
    let mut host = fake.host("cp-0").ok_or("gone")?;
    host.state.issuer = FOREIGN_CA.to_string();
    fake.set_host("cp-0", host)?;
    let outcome = run_stopping_at(&fake, &ca, |_| false).await?;
    assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
    let before = fake.calls().len();
    let foreign = preview(&*fake, &plan).await?;
    assert!(fake.calls()[before..].iter().all(|c| !writes_verb(c.verb)));
    let named: Vec<&str> = foreign
        .disagreements
        .iter()
        .map(|d| d.node.as_str())
        .collect();
    assert_eq!(named, ["cp-0"]);
    assert!(foreign.disagreements[0].what.contains(FOREIGN_CA));
    Ok(())
}
