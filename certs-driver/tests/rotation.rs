//! Whole rotations on the fake, in paused time: the happy path, a failing phase, a foreign CA,
//! garbage from `status`, no key material anywhere, a competing Lease holder.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use certs_driver::{CaEvent, CaStep, Error, Gate, NodeResult, Outcome, Progress, quiet, run};
use nodejob_core::Clock;
use nodejob_core::lease::{Claim, LeaseConfig, acquire};
use nodejob_fake::FakeCluster;
use nodejob_fake::Verb;
use nodejob_fake::stratum::{FOREIGN_CA, Fault, INITIAL_CA, Operation};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test(start_paused = true)]
async fn a_full_rotation_on_three_control_plane_and_three_workers_ends_on_the_new_ca() -> TestResult
{
    let ca = new_ca();
    let (fake, names) = cluster(1, 3, 3);
    let api = harness(fake.clone());
    let events = Arc::new(Events::default());
    let report = run(&api, &plan(plan_spec(&ca)), events.clone()).await?;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for name in &names {
        let state = fake.host_state(name).ok_or("node gone")?;
        assert!(on_new_ca(&state, &ca.fingerprint), "{name}: {state:?}");
        assert_eq!(
            phase_runs(&fake, name),
            [1, 1, 1, 0],
            "{name} ran each phase once"
        );
        let node = report.node(name).ok_or("node not in the report")?;
        assert_eq!(node.result, Some(NodeResult::Rotated));
        let steps: Vec<CaStep> = node.steps.iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, CaStep::PHASES);
        let before = node.before.as_ref().ok_or("no status before")?;
        assert_eq!(before.issuer.as_str(), INITIAL_CA);
    }
    let gates: Vec<Gate> = report.own.gates.iter().map(|g| g.gate).collect();
    assert_eq!(
        gates,
        [
            Gate::Start,
            Gate::BeforeIssue,
            Gate::BeforeFinalize,
            Gate::AfterFinalize
        ]
    );
    assert!(
        report
            .own
            .gates
            .iter()
            .all(|g| g.passed() && g.nodes.len() == 6)
    );
    let verified: Vec<Option<i32>> = report.own.gates[2].nodes.iter().map(|n| n.verify).collect();
    assert_eq!(verified, vec![Some(0); 6]);
    // Three host Jobs a node: no run had begun, so no status read; each phase's Job answers
    // the node's status (stage's, where it stood too; issue's, its verify) in its own output.
    for name in &names {
        let state = fake.host_state(name).ok_or("node gone")?;
        let reads = [Operation::CaStatus, Operation::CaVerify].map(|op| state.executions(op));
        assert_eq!(reads, [0, 0], "{name}: status reads and verifies");
        // The mark that the rotation may have changed it, written before its stage Job.
        let node = fake.node(name).ok_or("node gone")?;
        let mark = (node.metadata.annotations.as_ref()).and_then(|a| a.get(certs_driver::ROTATING));
        let mark = mark.ok_or(format!("{name}: no mark"))?;
        assert!(mark.contains(ca.fingerprint.as_str()), "{name}: {mark}");
    }
    let created = fake.count(Verb::CreateJob);
    assert_eq!(created, 3 * names.len(), "host jobs");
    assert_eq!(report.totals.rotated, 6);
    assert_eq!(report.totals.steps, 18);
    assert_eq!(
        report.lease.as_ref().map(|l| &l.ended),
        Some(&certs_driver::LeaseEnd::Released)
    );

    // Order: no phase starts anywhere before the previous one finished everywhere; control-plane
    // nodes first and one at a time; at most two workers at once.
    let all = events.all();
    let mut running: Vec<(String, CaStep)> = Vec::new();
    let mut finished: Vec<(String, CaStep)> = Vec::new();
    for e in &all {
        match e {
            Progress::StepStarted { node, step } => {
                let previous = CaStep::PHASES
                    .iter()
                    .position(|p| p == step)
                    .and_then(|i| i.checked_sub(1))
                    .map(|i| CaStep::PHASES[i]);
                if let Some(previous) = previous {
                    for n in &names {
                        assert!(
                            finished.contains(&(n.clone(), previous)),
                            "{step} started on {node} before {previous} finished on {n}"
                        );
                    }
                }
                let control_running = running.iter().any(|(n, _)| n.starts_with("cp-"));
                assert!(
                    running.is_empty() || !node.starts_with("cp-") && !control_running,
                    "{node} started {step} while {running:?} ran"
                );
                let workers_of_phase_left = names
                    .iter()
                    .filter(|n| n.starts_with("cp-"))
                    .any(|n| !finished.contains(&(n.clone(), *step)));
                assert!(
                    node.starts_with("cp-") || !workers_of_phase_left,
                    "worker {node} started {step} before every control-plane node"
                );
                running.push((node.clone(), *step));
                assert!(running.len() <= 2, "{running:?} at once");
            }
            Progress::StepFinished { node, step, .. } => {
                running.retain(|r| r != &(node.clone(), *step));
                finished.push((node.clone(), *step));
            }
            _ => {}
        }
    }
    // The steps are Events on the Nodes.
    let reasons: Vec<String> = fake
        .events(NS)
        .iter()
        .filter_map(|e| e.reason.clone())
        .collect();
    for reason in ["NodejobCaStage", "NodejobCaIssue", "NodejobCaFinalize"] {
        assert_eq!(
            reasons.iter().filter(|r| *r == reason).count(),
            6,
            "{reason}"
        );
    }
    // A second run finds the marks, reads every node first, and finds everything done: no
    // phase again.
    let again = run(&api, &plan(plan_spec(&ca)), quiet()).await?;
    assert_eq!(again.outcome, Outcome::Done);
    for name in &names {
        assert_eq!(
            phase_runs(&fake, name),
            [1, 1, 1, 0],
            "{name} after a rerun"
        );
        let state = fake.host_state(name).ok_or("node gone")?;
        assert_eq!(state.executions(Operation::CaStatus), 1, "{name} read");
    }
    Ok(())
}

/// Checks every second of virtual time whether `w-0`'s first `carotate status` runs (its only
/// execution so far, its pod Running), and then reboots `w-0`, once.
fn reboot_w0_in_its_first_status(fake: &Arc<FakeCluster>, done: Arc<AtomicBool>) {
    let at = fake.now() + std::time::Duration::from_secs(1);
    let again = fake.clone();
    fake.schedule(at, move |c| {
        let reads = c
            .host_state("w-0")
            .map(|s| s.executions(Operation::CaStatus));
        let running = (c.pods_on("w-0").into_iter())
            .any(|p| p.status.and_then(|s| s.phase).as_deref() == Some("Running"));
        if reads == Some(1) && running {
            c.reboot_node("w-0").unwrap();
            done.store(true, Ordering::SeqCst);
        } else if reads.unwrap_or(0) <= 1 {
            reboot_w0_in_its_first_status(&again, done);
        }
    });
}

/// `w-0` reboots by itself while its first `carotate status` runs (slowed to 30 s), as soon as its pod runs: the kubelet
/// ends that pod as lost, and a read, which changes nothing on the host, is read once more
/// when the node is back. The rotation ends on the new CA, each phase run once.
#[tokio::test(start_paused = true)]
async fn a_status_read_lost_to_a_reboot_is_read_again_and_the_rotation_goes_on() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(3, 1, 2);
    let mut host = fake.host("w-0").ok_or("no host")?;
    host.timing.op_time = std::time::Duration::from_secs(30);
    fake.set_host("w-0", host)?;
    // An earlier run marked cp-0 (and crashed before its stage Job): this run reads every
    // node before any step.
    mark_begun(&fake, "cp-0", &ca)?;
    let rebooted = Arc::new(AtomicBool::new(false));
    reboot_w0_in_its_first_status(&fake, rebooted.clone());
    let events = Arc::new(Events::default());
    let report = run(
        &harness(fake.clone()),
        &plan(plan_spec(&ca)),
        events.clone(),
    )
    .await?;
    assert!(rebooted.load(Ordering::SeqCst), "the reboot never came");
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [1, 1, 1, 0], "{name}");
    }
    let state = fake.host_state("w-0").ok_or("node gone")?;
    assert_eq!(
        state.executions(Operation::CaStatus),
        2,
        "read twice: {state:?}"
    );
    let said = format!("{:?}", events.all());
    assert!(
        said.contains("reading it again once the node is Ready"),
        "{said}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_phase_failing_on_one_node_stops_everything_before_the_next_phase() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(2, 3, 3);
    fault(&fake, "w-1", Fault::IssueFails);
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    let Outcome::Failed { retry, .. } = &report.outcome else {
        return Err(format!("ended {:?}", report.outcome).into());
    };
    assert!(retry.contains("w-1"), "{retry}");
    let failure = report
        .node("w-1")
        .and_then(|n| n.failure())
        .ok_or("w-1 did not fail")?;
    assert_eq!((failure.step, failure.exit_code), (CaStep::Issue, Some(1)));
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[2], 0, "{name} was finalized");
    }
    // The failed Job is left for inspection; the Lease is released.
    let job = plan(plan_spec(&ca)).job_name(CaStep::Issue, "w-1");
    assert!(fake.job(NS, &job).is_some(), "the failed issue job is gone");
    assert_eq!(
        report.lease.as_ref().map(|l| &l.ended),
        Some(&certs_driver::LeaseEnd::Released)
    );
    let warned = fake.events(NS).iter().any(|e| {
        e.type_.as_deref() == Some("Warning")
            && e.reason.as_deref() == Some("NodejobCaIssue")
            && e.involved_object.name.as_deref() == Some("w-1")
    });
    assert!(warned, "no Warning event on w-1");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_reporting_a_foreign_ca_is_caught_by_the_gate_and_named() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(3, 1, 3);
    fault(&fake, "w-2", Fault::ForeignCa);
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{:?}",
        report.outcome
    );
    let gate = report.own.gates.last().ok_or("no gate")?;
    assert_eq!(gate.gate, Gate::BeforeFinalize);
    let named: Vec<&str> = gate.disagreements.iter().map(|d| d.node.as_str()).collect();
    assert_eq!(named, ["w-2"]);
    assert!(
        gate.disagreements[0].what.contains(FOREIGN_CA),
        "{:?}",
        gate.disagreements
    );
    let side_by_side = gate
        .nodes
        .iter()
        .find(|n| n.node == "w-2")
        .ok_or("w-2 not reported")?;
    assert_eq!(side_by_side.issuer.as_str(), FOREIGN_CA);
    assert!(matches!(
        report.node("w-2").and_then(|n| n.result.clone()),
        Some(NodeResult::Disagrees {
            gate: Gate::BeforeFinalize,
            ..
        })
    ));
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[2], 0, "{name} was finalized");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn garbage_from_status_is_an_error_that_quotes_it_and_names_the_node() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(4, 3, 1);
    fault(&fake, "cp-1", Fault::GarbledStatus);
    // Read before any step: an earlier run marked a node.
    mark_begun(&fake, "cp-0", &ca)?;
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{:?}",
        report.outcome
    );
    let failure = report
        .node("cp-1")
        .and_then(|n| n.failure())
        .ok_or("cp-1 did not fail")?;
    assert_eq!(failure.step, CaStep::Status);
    assert!(failure.message.contains("node cp-1"), "{}", failure.message);
    assert!(
        failure.message.contains("iss\u{fffd}"),
        "the line is not quoted: {}",
        failure.message
    );
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [0; 4], "{name} ran a phase");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn no_private_key_appears_in_anything_the_driver_wrote() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(5, 1, 2);
    let api = harness(fake.clone());
    let events = Arc::new(Events::default());
    let report = run(&api, &plan(plan_spec(&ca)), events.clone()).await?;
    assert_eq!(report.outcome, Outcome::Done);
    // Every object the driver wrote (each Job whole, each Event, each node patch: the
    // annotations), every object the fake keeps, the progress and the report.
    let mut haystack = api.written();
    assert!(haystack.len() > 30, "only {} writes", haystack.len());
    haystack.extend(
        fake.events(NS)
            .iter()
            .map(|e| serde_json::to_string(e).unwrap()),
    );
    haystack.extend(
        fake.pods(NS)
            .iter()
            .map(|p| serde_json::to_string(p).unwrap()),
    );
    for name in &names {
        haystack.push(serde_json::to_string(&fake.node(name)).unwrap());
    }
    haystack.push(serde_json::to_string(&fake.lease(NS, "nodejob")).unwrap());
    haystack.extend(events.all().iter().map(|e| format!("{e:?}")));
    haystack.push(serde_json::to_string(&report).unwrap());
    // The needles: the base64 lines of the key and of the certificate (the hosts get
    // fingerprints only, never the certificate), each long enough to occur by chance nowhere.
    let body = |pem: &str| -> Vec<String> {
        pem.lines()
            .filter(|l| !l.starts_with("-----") && l.len() > 16)
            .map(String::from)
            .collect()
    };
    let (key_lines, cert_lines) = (body(&ca.key_pem), body(&ca.pem));
    assert!(key_lines.len() > 1 && cert_lines.len() > 1);
    let found = |text: &str, lines: &[String]| lines.iter().any(|l| text.contains(l.as_str()));
    // The search finds what it looks for: the plan itself holds the certificate.
    assert!(found(
        &plan(plan_spec(&ca)).spec().ca_certificate,
        &cert_lines
    ));
    assert!(found(&ca.key_pem, &key_lines));
    for text in &haystack {
        assert!(!text.contains("PRIVATE KEY"), "key material in {text}");
        assert!(
            !text.contains("BEGIN CERTIFICATE"),
            "a certificate in {text}"
        );
        assert!(!found(text, &key_lines), "key material in {text}");
        assert!(!found(text, &cert_lines), "the CA certificate in {text}");
    }
    // What the hosts were given: fingerprints.
    let argv_with_new = haystack
        .iter()
        .filter(|t| t.contains(&ca.fingerprint))
        .count();
    assert!(argv_with_new > 0);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_competing_holder_of_the_lease_blocks_the_run() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(6, 1, 2);
    let config = LeaseConfig {
        namespace: NS.into(),
        name: "nodejob".into(),
        identity: "upgrade-driver-elsewhere".into(),
        duration: std::time::Duration::from_secs(600),
    };
    let claim = Claim {
        operation: "upgrade".into(),
        target: "v1.38.0".into(),
    };
    acquire(&*fake, &config, &claim).await?;
    let refused = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await;
    match refused {
        Err(Error::Core(nodejob_core::Error::LeaseHeld { holder, .. })) => {
            assert!(holder.contains("upgrade-driver-elsewhere"), "{holder}");
        }
        other => return Err(format!("not refused: {other:?}").into()),
    }
    assert_eq!(fake.count(Verb::CreateJob), 0);
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [0; 4]);
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn issue_and_finalize_refuse_a_plan_that_leaves_out_nodes_of_the_cluster() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(21, 2, 2);
    // Issue may not run on a subset (the other nodes do not trust the new CA), so the plan is
    // refused before anything is written: not after `stage` wrote to its nodes.
    let mut spec = plan_spec(&ca);
    spec.nodes = vec!["cp-0".into()];
    let refused = run(&harness(fake.clone()), &plan(spec), quiet())
        .await
        .expect_err("a plan that leaves out nodes of the cluster");
    let Error::Plan(refusal) = &refused else {
        return Err(format!("not a plan error: {refused:?}").into());
    };
    assert_eq!(refusal.field, "nodes");
    assert!(
        refusal.rule.contains("every node of the cluster"),
        "{refusal}"
    );
    assert!(
        refusal.rule.contains("outside the plan: cp-1, w-0, w-1"),
        "{refusal}"
    );
    let writes: Vec<_> = (fake.calls().into_iter())
        .filter(|c| c.verb.writes())
        .collect();
    assert!(
        writes.is_empty(),
        "nothing written, the Lease included: {writes:?}"
    );
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [0; 4], "{name}");
    }

    // The whole cluster, stopped once every node is issued: finalize on a subset is refused
    // too (the others would still present leaves of the old CA).
    let outcome = run_stopping_at(&fake, &ca, |e| {
        matches!(
            e,
            Progress::Driver(CaEvent::PhaseStarted {
                phase: CaStep::Finalize,
                ..
            })
        )
    })
    .await?;
    assert!(matches!(outcome, Outcome::Stopped { .. }), "{outcome:?}");
    let mut spec = plan_spec(&ca);
    spec.nodes = vec!["w-0".into(), "w-1".into()];
    let refused = run(&harness(fake.clone()), &plan(spec), quiet())
        .await
        .expect_err("a plan that leaves out nodes of the cluster");
    assert!(
        refused.to_string().contains("outside the plan: cp-0, cp-1"),
        "{refused}"
    );
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [1, 1, 0, 0], "{name}");
    }

    // Every node: the rotation goes on from there, no phase twice.
    let whole = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    assert_eq!(whole.outcome, Outcome::Done, "{whole:#?}");
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [1, 1, 1, 0], "{name}");
    }

    // Opted out (`cluster_wide: false`, for nodes of another trust domain): the plan's nodes
    // alone go through every phase, and the others are left untouched.
    let (fake, names) = cluster(22, 2, 2);
    let mut spec = plan_spec(&ca);
    spec.nodes = vec!["cp-0".into()];
    spec.cluster_wide = false;
    let report = run(&harness(fake.clone()), &plan(spec), quiet()).await?;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(phase_runs(&fake, "cp-0"), [1, 1, 1, 0]);
    for name in &names[1..] {
        assert_eq!(phase_runs(&fake, name), [0; 4], "{name}");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_not_ready_again_after_issue_fails_the_rotation_there() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(22, 3, 2);
    fault(&fake, "cp-1", Fault::DownAfterIssue);
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    let Outcome::Failed { retry, .. } = &report.outcome else {
        return Err(format!("ended {:?}", report.outcome).into());
    };
    assert!(retry.contains("cp-1"), "{retry}");
    let failure = report
        .node("cp-1")
        .and_then(|n| n.failure())
        .ok_or("cp-1 did not fail")?;
    assert_eq!(failure.step, CaStep::Issue);
    assert!(
        failure.message.contains("did not come back Ready"),
        "{}",
        failure.message
    );
    // Control-plane nodes one at a time: nothing was issued after cp-1.
    assert_eq!(phase_runs(&fake, "cp-0"), [1, 1, 0, 0]);
    assert_eq!(phase_runs(&fake, "cp-1"), [1, 1, 0, 0]);
    for name in ["cp-2", "w-0", "w-1"] {
        assert_eq!(phase_runs(&fake, name), [1, 0, 0, 0], "{name}");
    }
    // Its issue job is kept: the mark that issue began there.
    let job = plan(plan_spec(&ca)).job_name(CaStep::Issue, "cp-1");
    assert!(
        fake.job(NS, &job).is_some(),
        "the issue job of cp-1 is gone"
    );
    Ok(())
}

/// Stages and issues the new CA on every node's host, as an earlier run did (its Jobs gone):
/// the run finds them issued, skips both phases, and has no answer of `verify` from an issue
/// Job, so the gate before finalize runs `carotate verify` as a Job of its own.
fn issued_before(fake: &FakeCluster, names: &[String], ca: &NewCa) -> TestResult {
    let fp = &ca.fingerprint;
    for name in names {
        let mut host = fake.host(name).ok_or("no host")?;
        for line in [format!("stage --add {fp}"), format!("issue --ca {fp}")] {
            let mut argv = vec!["stratum".to_string(), "carotate".into()];
            argv.extend(line.split(' ').map(String::from));
            let ran = host.exec(&argv).ok_or("not stratum")?;
            assert_eq!(ran.exit_code, 0, "{line}: {}", ran.log);
        }
        fake.set_host(name, host)?;
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_while_verifying_stops_the_run_and_blames_no_node() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(23, 1, 2);
    issued_before(&fake, &names, &ca)?;
    let taken = std::sync::atomic::AtomicBool::new(false);
    let thief = fake.clone();
    // Two verifies at once: the first one's Job is created, then the Lease is taken; the second
    // one's fence check finds it lost.
    let api = acting_before(fake.clone(), move |w| {
        if creates_job(w, "ca-verify-") && !taken.swap(true, std::sync::atomic::Ordering::SeqCst) {
            take_the_lease(&thief);
        }
    });
    let report = run(&api, &plan(plan_spec(&ca)), quiet()).await?;
    let Outcome::Stopped { why } = &report.outcome else {
        return Err(format!("not stopped: {:?}", report.outcome).into());
    };
    assert!(why.contains("the Lease was lost"), "{why}");
    for name in &names {
        let node = report.node(name).ok_or("not in the report")?;
        assert!(
            !matches!(
                node.result,
                Some(NodeResult::Disagrees { .. } | NodeResult::Failed(_))
            ),
            "{name} blamed: {:?}",
            node.result
        );
        assert_eq!(phase_runs(&fake, name)[2], 0, "{name} was finalized");
    }
    assert!(
        report.own.gates.iter().all(|g| g.passed()),
        "{:#?}",
        report.own.gates
    );
    assert!(
        matches!(
            report.lease.as_ref().map(|l| &l.ended),
            Some(certs_driver::LeaseEnd::Lost { .. })
        ),
        "{:?}",
        report.lease
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_verify_exit_other_than_0_or_3_is_a_disagreement_naming_the_node() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(24, 1, 2);
    issued_before(&fake, &names, &ca)?;
    let changed = std::sync::atomic::AtomicBool::new(false);
    let host = fake.clone();
    // Between its status and its verify, w-1's leaves come to chain to a CA it does not
    // trust: `verify` exits 1, an error.
    let api = acting_before(fake.clone(), move |w| {
        if creates_job(w, "ca-verify-") && !changed.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let mut h = host.host("w-1").expect("w-1");
            h.state.issuer = FOREIGN_CA.to_string();
            host.set_host("w-1", h).expect("w-1");
        }
    });
    let report = run(&api, &plan(plan_spec(&ca)), quiet()).await?;
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{:?}",
        report.outcome
    );
    let gate = report.own.gates.last().ok_or("no gate")?;
    assert_eq!(gate.gate, Gate::BeforeFinalize);
    let named: Vec<(&str, &str)> = gate
        .disagreements
        .iter()
        .map(|d| (d.node.as_str(), d.what.as_str()))
        .collect();
    assert_eq!(named, [("w-1", "`carotate verify` failed (exit 1)")]);
    let verified: Vec<Option<i32>> = gate.nodes.iter().map(|n| n.verify).collect();
    assert_eq!(verified, [Some(0), Some(0), Some(1)]);
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[2], 0, "{name} was finalized");
    }
    Ok(())
}
