//! The rotation under other actors of a shared cluster, on the fake in paused time: a host
//! that prints a megabyte, a node that joins while `finalize` runs, a node deleted while the
//! driver waits for it, a host Job's Pod deleted after it succeeded, the Lease taken while
//! nodes take a step together.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use certs_driver::{
    CaEvent, CaStep, NodeResult, Outcome, PlanSpec, Progress, ProgressSink, quiet, run,
};
use nodejob_core::Clock;
use nodejob_core::QUOTE_LIMIT;
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Fault;
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A mebibyte: what a host prints in these tests.
const MIB: usize = 1 << 20;

/// The most bytes of any one text that quotes host output: one quotation (at most
/// [`QUOTE_LIMIT`] characters, ASCII here, so as many bytes; with the escapes of the status
/// line's quotes in `{:?}` and JSON, and its "… (N more characters)") and the sentence around
/// it fit; a text that quotes twice, or the whole line, does not.
const BOUND: usize = 2 * QUOTE_LIMIT;

/// `text`'s size when it is within [`BOUND`], else why not.
fn within(what: &str, text: &str) -> Result<(), String> {
    if text.len() <= BOUND {
        return Ok(());
    }
    let start: String = text.chars().take(200).collect();
    Err(format!("{what}: {} bytes: {start}…", text.len()))
}

#[tokio::test(start_paused = true)]
async fn a_one_mebibyte_host_field_is_quoted_within_the_limit() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(41, 1, 3);
    // w-0's leaves chain to a "CA" of a mebibyte; w-1 trusts one. Both are what
    // `carotate status` prints as it reads them, one JSON line.
    let mut host = fake.host("w-0").ok_or("no w-0")?;
    host.state.issuer = "x".repeat(MIB);
    fake.set_host("w-0", host)?;
    let mut host = fake.host("w-1").ok_or("no w-1")?;
    host.state.trusted.insert("y".repeat(MIB));
    fake.set_host("w-1", host)?;

    let events = Arc::new(Events::default());
    let report = run(
        &harness(fake.clone()),
        &plan(plan_spec(&ca)),
        events.clone(),
    )
    .await?;

    let Outcome::Failed { retry, .. } = &report.outcome else {
        return Err(format!("ended {:?}", report.outcome).into());
    };
    within("the retry text", retry)?;
    assert!(retry.contains("w-0") && retry.contains("w-1"), "{retry}");
    for (name, field) in [("w-0", "issuer"), ("w-1", "trusted[")] {
        let node = report.node(name).ok_or("not in the report")?;
        let failure = node.failure().ok_or(format!("{name} did not fail"))?;
        assert_eq!(failure.step, CaStep::Status, "{name}");
        assert!(failure.message.contains(&format!("node {name}")));
        assert!(
            failure.message.contains(field) && failure.message.contains("more characters"),
            "{name}: the field is not named, or the line not quoted as cut: {}",
            failure.message
        );
        within(&format!("{name}'s failure"), &failure.message)?;
        within(
            &format!("{name}'s log tail"),
            failure.log_tail.as_deref().unwrap_or(""),
        )?;
    }
    for event in events.all() {
        within("a progress event", &serde_json::to_string(&event)?)?;
    }
    let written = fake.events(NS);
    assert!(
        written
            .iter()
            .any(|e| e.message.as_deref().is_some_and(|m| m.contains("w-0"))),
        "no Event names w-0"
    );
    for event in written {
        within("an Event", event.message.as_deref().unwrap_or(""))?;
    }
    Ok(())
}

/// A sink that adds node `name` to the cluster (labelled `label`, when given) as `finalize`
/// starts, once.
fn join_at_finalize(
    fake: &Arc<FakeCluster>,
    name: &'static str,
    label: Option<(&'static str, &'static str)>,
) -> Arc<dyn ProgressSink> {
    let fake = fake.clone();
    let joined = AtomicBool::new(false);
    Arc::new(move |e: &Progress| {
        let finalize = matches!(
            e,
            Progress::Driver(CaEvent::PhaseStarted {
                phase: CaStep::Finalize,
                ..
            })
        );
        if finalize && !joined.swap(true, Ordering::SeqCst) {
            fake.add_node(name).unwrap();
            if let Some((key, value)) = label {
                fake.label_node(name, key, value).unwrap();
            }
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_node_joining_while_finalize_runs_is_named_and_the_rotation_is_not_done() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(42, 1, 2);
    let sink = join_at_finalize(&fake, "w-9", None);
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), sink).await?;
    let Outcome::Failed { retry, .. } = &report.outcome else {
        return Err(format!("ended {:?} with w-9 on the old CA", report.outcome).into());
    };
    assert!(retry.contains("w-9"), "{retry}");
    assert!(retry.contains("joined"), "{retry}");
    let joined = fake.host_state("w-9").ok_or("no w-9")?;
    assert!(!on_new_ca(&joined, &ca.fingerprint), "{joined:?}");
    // The plan's nodes went through the rotation; none is blamed.
    for name in &names {
        let state = fake.host_state(name).ok_or("node gone")?;
        assert!(on_new_ca(&state, &ca.fingerprint), "{name}: {state:?}");
        let node = report.node(name).ok_or("not in the report")?;
        assert!(
            !matches!(
                node.result,
                Some(NodeResult::Failed(_) | NodeResult::Disagrees { .. })
            ),
            "{name} blamed: {:?}",
            node.result
        );
    }
    // The node that joined is told, on itself.
    assert!(
        fake.events(NS).iter().any(|e| {
            e.involved_object.name.as_deref() == Some("w-9")
                && e.type_.as_deref() == Some("Warning")
        }),
        "no Warning Event on w-9"
    );

    // Run again: the rotation takes the new node through every phase, and no other node again.
    let again = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    assert_eq!(again.outcome, Outcome::Done, "{again:#?}");
    let joined = fake.host_state("w-9").ok_or("no w-9")?;
    assert!(on_new_ca(&joined, &ca.fingerprint), "{joined:?}");
    assert_eq!(phase_runs(&fake, "w-9"), [1, 1, 1, 0]);
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [1, 1, 1, 0], "{name}");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_joining_the_selection_while_finalize_runs_is_named() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(43, 1, 2);
    // The plan's nodes are those labelled `trust=a` (a trust domain of their own), and a node
    // of that label joins while finalize runs.
    for name in ["cp-0", "w-0"] {
        fake.label_node(name, "trust", "a")?;
    }
    let mut spec: PlanSpec = plan_spec(&ca);
    spec.selector = Some("trust=a".into());
    spec.cluster_wide = false;
    let sink = join_at_finalize(&fake, "w-9", Some(("trust", "a")));
    let report = run(&harness(fake.clone()), &plan(spec), sink).await?;
    let Outcome::Failed { retry, .. } = &report.outcome else {
        return Err(format!("ended {:?} with w-9 on the old CA", report.outcome).into());
    };
    assert!(retry.contains("w-9"), "{retry}");
    assert!(
        !retry.contains("w-1"),
        "w-1 is outside the selection: {retry}"
    );
    assert_eq!(phase_runs(&fake, "w-1"), [0; 4]);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_deleted_while_awaited_ready_after_issue_fails_at_once_naming_the_deletion()
-> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(44, 1, 2);
    // w-1 stays NotReady after issue restarts its components; then it is deleted, while the
    // driver waits (up to `ready_timeout`) for it to be Ready again.
    fault(&fake, "w-1", Fault::DownAfterIssue);
    let deleted_at = Arc::new(std::sync::Mutex::new(None));
    let sink: Arc<dyn ProgressSink> = {
        let (fake, deleted_at) = (fake.clone(), deleted_at.clone());
        Arc::new(move |e: &Progress| {
            if let Progress::StepStarted {
                node,
                step: CaStep::Issue,
            } = e
                && node == "w-1"
            {
                let at = fake.now() + Duration::from_secs(60);
                *deleted_at.lock().unwrap() = Some(at);
                fake.schedule(at, |c| c.remove_node("w-1").unwrap());
            }
        })
    };
    let spec = plan_spec(&ca);
    let ready_timeout = spec.ready_timeout;
    let report = run(&harness(fake.clone()), &plan(spec), sink).await?;
    let ended = fake.now();
    let deleted_at = deleted_at
        .lock()
        .unwrap()
        .ok_or("issue never started on w-1")?;

    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{:?}",
        report.outcome
    );
    let failure = report
        .node("w-1")
        .and_then(|n| n.failure())
        .ok_or("w-1 did not fail")?;
    assert_eq!(failure.step, CaStep::Issue);
    assert!(
        failure
            .message
            .contains("node w-1 was deleted from the cluster"),
        "{}",
        failure.message
    );
    let after = ended.saturating_sub(deleted_at);
    assert!(
        after < Duration::from_secs(10),
        "the run ended {after:?} after the deletion (ready timeout {ready_timeout:?})"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_lease_lost_while_a_host_job_runs_interrupts_its_node_at_that_phase() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(45, 1, 2);
    // w-0's `carotate stage` runs five minutes; the Lease is taken as its Job is created.
    let mut host = fake.host("w-0").ok_or("no w-0")?;
    host.timing.op_time = Duration::from_secs(5 * 60);
    fake.set_host("w-0", host)?;
    let spec = plan_spec(&ca);
    let lease = spec.lease_duration;
    let stage_w0 = format!("{NS}/{}", plan(spec.clone()).job_name(CaStep::Stage, "w-0"));
    let taken_at = Arc::new(std::sync::Mutex::new(None));
    let (thief, at) = (fake.clone(), taken_at.clone());
    let api = acting_before(fake.clone(), move |w| {
        if w.verb == nodejob_fake::Verb::CreateJob && w.target == stage_w0 {
            take_the_lease(&thief);
            *at.lock().unwrap() = Some(thief.now());
        }
    });
    let report = run(&api, &plan(spec), quiet()).await?;
    let ended = fake.now();
    let taken_at = taken_at.lock().unwrap().ok_or("stage never ran on w-0")?;

    let Outcome::Stopped { why } = &report.outcome else {
        return Err(format!("not stopped: {:?}", report.outcome).into());
    };
    assert!(why.contains("the Lease was lost"), "{why}");
    let node = report.node("w-0").ok_or("not in the report")?;
    assert!(
        matches!(
            &node.result,
            Some(NodeResult::Interrupted { step: CaStep::Stage, why }) if why.contains("the Lease was lost")
        ),
        "w-0: {:?}",
        node.result
    );
    // w-1, in w-0's batch, checked the Lease before its own stage Job and found it lost: it
    // is reported interrupted there too, as it ended, and has no stage Job.
    let beside = report.node("w-1").ok_or("not in the report")?;
    assert!(
        matches!(
            &beside.result,
            Some(NodeResult::Interrupted { step: CaStep::Stage, why }) if why.contains("the Lease was lost")
        ),
        "w-1: {:?}",
        beside.result
    );
    assert!(beside.steps.is_empty(), "w-1 ran {:?}", beside.steps);
    assert_eq!(report.totals.interrupted, 2, "{:?}", report.totals);
    // The run stops at the renewer's next check, not when the host Job ends.
    let after = ended.saturating_sub(taken_at);
    assert!(after <= lease / 3 + Duration::from_secs(5), "{after:?}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_succeeded_host_job_whose_pod_was_deleted_is_taken_as_succeeded() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(46, 1, 2);
    let plan = plan(plan_spec(&ca));
    let stage = plan.job_name(CaStep::Stage, "cp-0");
    // The driver dies right after it created cp-0's stage Job (its first Job: no run had begun,
    // so no node is read before its stage).
    let first = harness(fake.clone()).crashing_at_verb(nodejob_fake::Verb::CreateJob, 0, true);
    tokio::select! {
        report = run(&first, &plan, quiet()) => {
            return Err(format!("ended before the crash: {report:?}").into());
        }
        _ = first.crashed() => {}
    }
    // The Job succeeds; then someone deletes its Pod (`kubectl delete pod`): the Job stays,
    // succeeded, with no Pod and no log.
    fake.sleep(Duration::from_secs(30)).await;
    let job = fake.job(NS, &stage).ok_or("no stage job on cp-0")?;
    assert!(nodejob_core::succeeded(&job), "{:?}", job.status);
    let owned = |p: &k8s_openapi::api::core::v1::Pod| {
        (p.metadata.owner_references.iter().flatten()).any(|o| o.name == stage)
    };
    for pod in fake.pods(NS).into_iter().filter(|p| owned(p)) {
        fake.delete_pod_now(NS, pod.metadata.name.as_deref().unwrap_or_default())?;
    }
    fake.sleep(Duration::from_secs(5)).await;
    assert!(!fake.pods(NS).iter().any(owned), "the pod is still there");

    // The rerun adopts the Job, takes its exit 0 as the step's answer, and ends the rotation.
    let report = run(&harness(fake.clone()), &plan, quiet()).await?;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for name in &names {
        let state = fake.host_state(name).ok_or("node gone")?;
        assert!(on_new_ca(&state, &ca.fingerprint), "{name}: {state:?}");
        assert_eq!(phase_runs(&fake, name), [1, 1, 1, 0], "{name}");
    }
    assert!(fake.job(NS, &stage).is_none(), "the stage job is left");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn once_one_node_sees_the_lease_lost_no_node_writes_again() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(47, 1, 2);
    let plan = plan(plan_spec(&ca));
    // The workers take `issue` together (two at a time); each one's issue Job ends, and each
    // node is Ready again, at the same instants, and each then records the status its Job
    // printed. The Lease is taken as w-1's issue Job is created: w-0's step, ending first,
    // reads the Lease lost as it records its status, while w-1's ends in the same instant.
    let issue_w1 = format!("{NS}/{}", plan.job_name(CaStep::Issue, "w-1"));
    let lease_calls = |f: &FakeCluster| {
        f.count(nodejob_fake::Verb::GetLease) + f.count(nodejob_fake::Verb::ReplaceLease)
    };
    let taken = Arc::new(std::sync::Mutex::new(None::<usize>));
    let after_known = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (thief, at, late) = (fake.clone(), taken.clone(), after_known.clone());
    let api = acting_before(fake.clone(), move |w| {
        let mut at = at.lock().unwrap();
        match *at {
            None if w.verb == nodejob_fake::Verb::CreateJob && w.target == issue_w1 => {
                take_the_lease(&thief);
                *at = Some(lease_calls(&thief));
            }
            // A Lease read since the theft: the driver knows, and writes nothing more.
            Some(then) if lease_calls(&thief) > then => late.lock().unwrap().push(w.to_string()),
            _ => {}
        }
    });
    let report = run(&api, &plan, quiet()).await?;
    assert!(taken.lock().unwrap().is_some(), "w-1's issue never began");
    let late = after_known.lock().unwrap().clone();
    assert!(
        late.is_empty(),
        "written after the Lease was read lost: {late:?}"
    );
    let Outcome::Stopped { why } = &report.outcome else {
        return Err(format!("not stopped: {:?}", report.outcome).into());
    };
    assert!(why.contains("the Lease was lost"), "{why}");
    // No node is blamed for the loss.
    for node in &report.nodes {
        assert!(
            !matches!(node.result, Some(NodeResult::Failed(_))),
            "{} blamed: {:?}",
            node.name,
            node.result
        );
    }
    Ok(())
}

/// Issue 30, item 1: an Event is a write, fenced as every other. The Lease is taken as the
/// runner deletes cp-0's finished stage Job, before the step's Normal Event: no check of the
/// run has read the Lease since, and the Event must not be written by a driver that no longer
/// holds it.
#[tokio::test(start_paused = true)]
async fn no_event_is_written_once_another_identity_took_the_lease() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(48, 1, 2);
    let plan = plan(plan_spec(&ca));
    let stage_cp0 = format!("{NS}/{}", plan.job_name(CaStep::Stage, "cp-0"));
    let taken = Arc::new(AtomicBool::new(false));
    let late = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (thief, stolen, events) = (fake.clone(), taken.clone(), late.clone());
    let api = acting_before(fake.clone(), move |w| {
        if stolen.load(Ordering::SeqCst) {
            if w.verb == nodejob_fake::Verb::CreateEvent && w.body.contains(certs_driver::COMPONENT)
            {
                events.lock().unwrap().push(format!("{w}: {}", w.body));
            }
        } else if w.verb == nodejob_fake::Verb::DeleteJob && w.target == stage_cp0 {
            take_the_lease(&thief);
            stolen.store(true, Ordering::SeqCst);
        }
    });
    let report = run(&api, &plan, quiet()).await?;
    assert!(
        taken.load(Ordering::SeqCst),
        "cp-0's stage job was never deleted"
    );
    let late = late.lock().unwrap().clone();
    assert!(
        late.is_empty(),
        "events written after the Lease was taken: {late:#?}"
    );
    let Outcome::Stopped { why } = &report.outcome else {
        return Err(format!("not stopped: {:?}", report.outcome).into());
    };
    assert!(why.contains("the Lease was lost"), "{why}");
    Ok(())
}

/// Another process of the same identity held the Lease and staged `w-0` (its mark, then its
/// Job, done and deleted) after this run selected its nodes and before it took the Lease over:
/// this run reads its nodes again after the Lease, finds the mark, and reads every node before
/// any step. `w-0` is not staged a second time.
#[tokio::test(start_paused = true)]
async fn a_node_staged_by_another_holder_before_the_lease_is_taken_over_is_read_not_staged_again()
-> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(48, 1, 2);
    let spec = plan_spec(&ca);
    let other = fake.clone();
    let new = ca.fingerprint.clone();
    let acted = Arc::new(AtomicBool::new(false));
    let once = acted.clone();
    // Before this run's first write (its Lease): the other process's stage of w-0 happened.
    let api = acting_before(fake.clone(), move |_| {
        if once.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut host = other.host("w-0").expect("w-0");
        let add = format!("nsenter -t 1 -- stratum carotate stage --add {new}");
        let argv: Vec<String> = add.split(' ').map(String::from).collect();
        host.exec(&argv).expect("stratum");
        other.set_host("w-0", host).expect("w-0");
        let value = format!("{{\"ca\":\"{new}\",\"at\":\"2026-01-01T00:00:00Z\"}}");
        let mark = nodejob_core::NodeChange::set_annotation(certs_driver::ROTATING, value);
        other.patch_node_now("w-0", &[mark]).expect("w-0");
    });
    let report = run(&api, &plan(spec), quiet()).await?;
    assert!(acted.load(Ordering::SeqCst), "the other holder never acted");
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [1, 1, 1, 0], "{name}");
        let state = fake.host_state(name).ok_or("gone")?;
        let reads = state.executions(nodejob_fake::stratum::Operation::CaStatus);
        assert_eq!(reads, 1, "{name}: read before any step");
    }
    Ok(())
}
