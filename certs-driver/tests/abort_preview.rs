//! Abort (before `issue`: the old trust everywhere again; once `issue` began: refused) and
//! preview (no write; what the nodes last reported; the next phase and where; who disagrees).

mod support;

use std::sync::Arc;
use std::time::Duration;

use certs_driver::{
    CaEvent, CaPhase, CaStep, Error, Next, NodeResult, Outcome, Progress, ProgressSink, abort,
    preview, quiet, run,
};
use nodejob_fake::stratum::{CaPhase as HostPhase, FOREIGN_CA, INITIAL_CA};
use nodejob_fake::{ContainerStart, FakeCluster, NodeScript, Verb};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn issue_starts(e: &Progress) -> bool {
    matches!(
        e,
        Progress::Driver(CaEvent::PhaseStarted {
            phase: CaStep::Issue,
            ..
        })
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
    let report = abort(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
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
    assert_eq!(
        report.lease.as_ref().map(|l| &l.ended),
        Some(&certs_driver::LeaseEnd::Released)
    );
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
    let refused = abort(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await;
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
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
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

    // Never read, no run begun: nothing written; a run stages every node, each read by its
    // stage.
    let first = preview(&*fake, &plan).await?;
    assert_eq!(writes(&fake), []);
    assert_eq!(
        first.next,
        Next::Phase {
            phase: CaStep::Stage,
            nodes: names.clone()
        }
    );
    assert_eq!(first.lease, None);
    // A run began (a node marked, nothing recorded): a run reads every node first.
    mark_begun(&fake, "w-0", &ca)?;
    let marked = preview(&*fake, &plan).await?;
    assert_eq!(
        marked.next,
        Next::Unknown {
            unreported: names.clone()
        }
    );

    // Staged everywhere, then stopped: issue is next, on every node.
    run_stopping_at(&fake, &ca, issue_starts).await?;
    let before = fake.calls().len();
    let staged = preview(&*fake, &plan).await?;
    let after: Vec<Verb> = fake.calls()[before..].iter().map(|c| c.verb).collect();
    assert!(
        after
            .iter()
            .all(|v| matches!(v, Verb::ListNodes | Verb::GetLease | Verb::GetJob)),
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
    run_stopping_at(&fake, &ca, |e| {
        matches!(e, Progress::Driver(CaEvent::PhaseStarted { .. }))
    })
    .await?;
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

#[tokio::test(start_paused = true)]
async fn abort_is_refused_when_issue_began_on_a_node_outside_its_plan() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(14, 2, 2);
    // cp-0 presents leaves of the new CA; the others trust it beside the old one.
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
    assert_eq!(phase_runs(&fake, "cp-0"), [1, 1, 0, 0]);
    // An abort of the workers alone: they have no issue job and the old issuer, but they
    // must keep trusting the new CA that cp-0 presents.
    let mut spec = plan_spec(&ca);
    spec.nodes = vec!["w-0".into(), "w-1".into()];
    let refused = abort(&harness(fake.clone()), &plan(spec), quiet()).await;
    let Err(e @ Error::AbortRefused { .. }) = refused else {
        return Err(format!("not refused: {refused:?}").into());
    };
    let message = e.to_string();
    assert!(message.contains("cp-0 ("), "{message}");
    assert!(message.contains("only forward is safe"), "{message}");
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[3], 0, "{name} aborted");
        let state = fake.host_state(name).ok_or("gone")?;
        assert!(state.trusted.contains(&ca.fingerprint), "{name}");
    }
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    assert_eq!(report.outcome, Outcome::Done);
    Ok(())
}

/// The index of the first write of a clean rotation on `cluster(seed, 1, 2)` that `is`.
async fn write_index(ca: &NewCa, seed: u64, is: &str) -> Result<usize, String> {
    let (fake, _) = cluster(seed, 1, 2);
    let api = harness(fake);
    run(&api, &plan(plan_spec(ca)), quiet())
        .await
        .map_err(|e| e.to_string())?;
    api.written()
        .iter()
        .position(|w| w.contains(is))
        .ok_or(format!("no write {is}"))
}

#[tokio::test(start_paused = true)]
async fn abort_is_refused_while_an_issue_job_exists_though_its_host_is_unchanged() -> TestResult {
    let ca = new_ca();
    let plan = plan(plan_spec(&ca));
    let issue_job = plan.job_name(CaStep::Issue, "cp-0");
    let at = write_index(&ca, 15, &format!("(CreateJob {NS}/{issue_job})")).await?;
    // The run crashes once the issue job's create was served; its pod never starts.
    let (fake, names) = cluster(15, 1, 2);
    let first = harness(fake.clone()).crashing_at(at, true);
    tokio::select! {
        report = run(&first, &plan, quiet()) => {
            return Err(format!("the run ended without reaching write {at}: {report:?}").into());
        }
        _ = first.crashed() => {}
    }
    let stuck = NodeScript {
        start: ContainerStart::Never,
        ..NodeScript::default()
    };
    fake.set_script("cp-0", stuck);

    // A preview (no write) shows the step in flight and that an abort would be refused.
    let before = fake.calls().len();
    let seen = preview(&*fake, &plan).await?;
    assert!(fake.calls()[before..].iter().all(|c| !writes_verb(c.verb)));
    let cp0 = seen.nodes.first().ok_or("no node")?;
    assert_eq!(
        (cp0.name.as_str(), cp0.in_flight.as_slice()),
        ("cp-0", &[CaStep::Issue][..])
    );
    assert!(seen.nodes[1..].iter().all(|n| n.in_flight.is_empty()));
    let begun: Vec<&str> = seen.issue_begun.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(begun, ["cp-0"]);

    let refused = abort(&harness(fake.clone()), &plan, quiet()).await;
    let Err(e @ Error::AbortRefused { .. }) = refused else {
        return Err(format!("not refused: {refused:?}").into());
    };
    let message = e.to_string();
    assert!(
        message.contains(&format!(
            "cp-0 (its `carotate issue` job {issue_job} exists)"
        )),
        "{message}"
    );
    // Refused on the job alone: the host has not run issue (and no host read was needed).
    let state = fake.host_state("cp-0").ok_or("gone")?;
    assert_eq!(state.issuer, INITIAL_CA);
    assert_eq!(phase_runs(&fake, "cp-0"), [1, 0, 0, 0]);
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[3], 0, "{name} aborted");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_run_after_an_abort_left_its_job_waits_that_job_out_before_it_decides() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(16, 1, 1);
    run_stopping_at(&fake, &ca, issue_starts).await?;
    let plan = plan(plan_spec(&ca));
    let abort_job = plan.job_name(CaStep::Abort, "w-0");
    // The abort's job on w-0 is created, its pod never starts (an image that does not pull),
    // and the abort dies waiting for it.
    let kubelet = fake.clone();
    let api = acting_before(fake.clone(), move |w| {
        if creates_job(w, "ca-abort-w-0-") {
            let stuck = NodeScript {
                start: ContainerStart::Never,
                ..NodeScript::default()
            };
            kubelet.set_script("w-0", stuck);
        }
    });
    let aborting = tokio::time::timeout(Duration::from_secs(30), abort(&api, &plan, quiet())).await;
    assert!(aborting.is_err(), "the abort ended: {aborting:?}");
    let job = fake.job(NS, &abort_job).ok_or("no abort job")?;
    assert!(!nodejob_core::finished(&job));
    assert_eq!(phase_runs(&fake, "cp-0"), [1, 0, 0, 1]);
    assert_eq!(phase_runs(&fake, "w-0"), [1, 0, 0, 0]);
    fake.set_script("w-0", NodeScript::default());

    // No issue may start while that job could still drop the new CA from w-0.
    let overlaps = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (seen, cluster_view, job_name) = (overlaps.clone(), fake.clone(), abort_job.clone());
    let sink: Arc<dyn ProgressSink> = Arc::new(move |e: &Progress| {
        if let Progress::StepStarted { node, step } = e
            && let Some(job) = cluster_view.job(NS, &job_name)
            && !nodejob_core::finished(&job)
        {
            seen.lock()
                .unwrap()
                .push(format!("{step} started on {node}"));
        }
    });
    let report = run(&harness(fake.clone()), &plan, sink).await?;
    assert_eq!(
        *overlaps.lock().unwrap(),
        Vec::<String>::new(),
        "while the abort job was pending"
    );
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for name in ["cp-0", "w-0"] {
        let state = fake.host_state(name).ok_or("gone")?;
        assert!(on_new_ca(&state, &ca.fingerprint), "{name}: {state:?}");
    }
    assert_eq!(phase_runs(&fake, "cp-0"), [2, 1, 1, 1]);
    assert_eq!(phase_runs(&fake, "w-0"), [1, 1, 1, 0]);
    // It never ran: failed by its deadline, it is left for inspection, as every failed job.
    let job = fake
        .job(NS, &abort_job)
        .ok_or("the failed abort job is gone")?;
    assert!(nodejob_core::failed(&job), "{:?}", job.status);
    Ok(())
}

/// Issue 30, item 2: an abort refused because `issue` has begun names every node where it
/// had, whatever shows it: cp-0 finished issue (its Job deleted, its status recorded on it, the
/// mark), and the run died as it created the workers' issue Jobs (each Job is the mark). All
/// three are named, once each, in name order.
#[tokio::test(start_paused = true)]
async fn an_abort_refused_names_every_node_where_issue_began_whatever_shows_it() -> TestResult {
    let ca = new_ca();
    let plan = plan(plan_spec(&ca));
    let issue_w0 = plan.job_name(CaStep::Issue, "w-0");
    let at = write_index(&ca, 17, &format!("(CreateJob {NS}/{issue_w0})")).await?;
    let (fake, names) = cluster(17, 1, 2);
    let first = harness(fake.clone()).crashing_at(at, true);
    tokio::select! {
        report = run(&first, &plan, quiet()) => {
            return Err(format!("the run ended without reaching write {at}: {report:?}").into());
        }
        _ = first.crashed() => {}
    }
    nodejob_core::Clock::sleep(&*fake, Duration::from_secs(30)).await;
    // What shows it: cp-0's record alone, the workers' Jobs alone.
    let issue_cp0 = plan.job_name(CaStep::Issue, "cp-0");
    assert!(
        fake.job(NS, &issue_cp0).is_none(),
        "cp-0's issue job is left"
    );
    let cp0 = fake.node("cp-0").ok_or("no cp-0")?;
    let (recorded, _) = certs_driver::last_reported(&cp0, "cp-0")?.ok_or("no record on cp-0")?;
    assert_eq!(recorded.issuer.to_string(), ca.fingerprint);
    assert!(fake.job(NS, &issue_w0).is_some(), "w-0's issue job is gone");
    let issued: Vec<&str> = (names.iter())
        .filter(|n| fake.job(NS, &plan.job_name(CaStep::Issue, n)).is_some())
        .map(String::as_str)
        .collect();
    assert_eq!(issued, ["w-0", "w-1"], "issue jobs");

    let refused = abort(&harness(fake.clone()), &plan, quiet()).await;
    let Err(Error::AbortRefused { nodes }) = refused else {
        return Err(format!("not refused: {refused:?}").into());
    };
    let named: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(named, ["cp-0", "w-0", "w-1"], "{nodes:#?}");
    assert!(
        nodes[0].1.starts_with("its status recorded at"),
        "{nodes:#?}"
    );
    for (name, why) in &nodes[1..] {
        let job = plan.job_name(CaStep::Issue, name);
        assert_eq!(*why, format!("its `carotate issue` job {job} exists"));
    }
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[3], 0, "{name} aborted");
    }
    Ok(())
}
