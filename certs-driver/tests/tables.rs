//! The pure pieces as tables: the plan's rules, reading `carotate status`, when a node passed
//! a step, what to do with a Job a step left, and the gates.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use certs_driver::{
    CaPhase, CaStatus, CaStep, Decision, Fingerprint, Gate, NSENTER, Plan, PlanSpec, Verified,
    check, decide, parse_status,
};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use nodejob_fake::stratum::{FOREIGN_CA, INITIAL_CA};
use support::*;

fn fp(s: &str) -> Fingerprint {
    Fingerprint::parse(s).unwrap()
}

const NEW: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn status(phase: CaPhase, trusted: &[&str], issuer: &str) -> CaStatus {
    CaStatus {
        phase,
        trusted: trusted.iter().map(|t| fp(t)).collect(),
        issuer: fp(issuer),
    }
}

#[test]
fn the_plan_refuses_each_bad_field_by_name_and_never_quotes_a_key() {
    let ca = new_ca();
    let other = new_ca();
    let with = |f: &dyn Fn(&mut PlanSpec)| {
        let mut spec = plan_spec(&ca);
        f(&mut spec);
        Plan::build(spec).err().map(|e| (e.field, e.to_string()))
    };
    assert_eq!(with(&|_| {}), None);
    type Edit<'a> = Box<dyn Fn(&mut PlanSpec) + 'a>;
    let table: Vec<(&str, Edit)> = vec![
        (
            "fingerprint",
            Box::new(|s| s.fingerprint = "sha1:abc".into()),
        ),
        (
            "fingerprint",
            Box::new(|s| s.fingerprint = s.fingerprint.to_uppercase().replace("SHA256", "sha256")),
        ),
        (
            "fingerprint",
            Box::new(|s| s.fingerprint = other.fingerprint.clone()),
        ),
        (
            "ca_certificate",
            Box::new(|s| s.ca_certificate = format!("{}{}", s.ca_certificate, ca.key_pem)),
        ),
        (
            "ca_certificate",
            Box::new(|s| s.ca_certificate = ca.key_pem.clone()),
        ),
        (
            "ca_certificate",
            Box::new(|s| s.ca_certificate = format!("{}{}", s.ca_certificate, other.pem)),
        ),
        (
            "ca_certificate",
            Box::new(|s| {
                s.ca_certificate =
                    "-----BEGIN CERTIFICATE-----\n@@@@\n-----END CERTIFICATE-----\n".into()
            }),
        ),
        (
            "ca_certificate",
            Box::new(|s| s.ca_certificate = String::new()),
        ),
        ("concurrency", Box::new(|s| s.concurrency = 0)),
        ("deadline", Box::new(|s| s.deadline = Duration::ZERO)),
        (
            "ready_timeout",
            Box::new(|s| s.ready_timeout = Duration::ZERO),
        ),
        ("binary", Box::new(|s| s.binary = "stratum".into())),
        ("prefix", Box::new(|s| s.prefix = vec![String::new()])),
        ("namespace", Box::new(|s| s.namespace = "nodejob".into())),
        ("nodes", Box::new(|s| s.nodes = vec!["Bad_Name".into()])),
        ("selector", Box::new(|s| s.selector = Some(" ".into()))),
        ("identity", Box::new(|s| s.identity = String::new())),
        (
            "lease_duration",
            Box::new(|s| s.lease_duration = Duration::from_secs(5)),
        ),
        (
            "image",
            Box::new(|s| s.image = Some("busybox:latest".into())),
        ),
    ];
    let key_line = ca.key_pem.lines().nth(1).unwrap();
    for (field, change) in &table {
        let refused = with(&**change);
        let Some((got, message)) = refused else {
            panic!("not refused: want {field}");
        };
        assert_eq!(got, *field, "{message}");
        assert!(
            !message.contains(key_line),
            "the error quotes the key: {message}"
        );
    }
    // A plan is printed without its certificate.
    let spec = plan_spec(&ca);
    let printed = format!("{spec:?}");
    assert!(!printed.contains("BEGIN"), "{printed}");
}

#[test]
fn the_fingerprint_of_a_pem_is_the_plans_and_a_key_or_garbage_is_refused_on_the_certificate() {
    let ca = new_ca();
    let of_pem = Fingerprint::of_pem(&ca.pem).expect("a certificate");
    assert_eq!(of_pem.as_str(), ca.fingerprint);
    // What of_pem answers is what the plan accepts, CRLF line ends and all.
    let crlf = ca.pem.replace('\n', "\r\n");
    let fingerprint = Fingerprint::of_pem(&crlf).expect("CRLF");
    assert!(Plan::build(PlanSpec::new(crlf, fingerprint.to_string())).is_ok());
    let key_line = ca.key_pem.lines().nth(1).unwrap();
    for bad in [
        ca.key_pem.clone(),
        format!("{}{}", ca.pem, ca.key_pem),
        "not a certificate\n".to_string(),
        String::new(),
    ] {
        let e = Fingerprint::of_pem(&bad).expect_err("refused");
        assert_eq!(e.field, "ca_certificate", "{e}");
        assert!(!e.to_string().contains(key_line), "quotes the key: {e}");
    }
}

#[test]
fn the_host_argv_defaults_to_nsenter_and_stratum_carotate_with_fingerprints_only() {
    let ca = new_ca();
    let plan = plan(plan_spec(&ca));
    let mut want: Vec<String> = NSENTER.iter().map(|s| s.to_string()).collect();
    want.extend(["/usr/local/bin/stratum", "carotate", "stage", "--add"].map(String::from));
    want.push(ca.fingerprint.clone());
    assert_eq!(plan.command(CaStep::Stage, &[]), want);
    let verify = plan.command(CaStep::Verify, &[fp(INITIAL_CA)]);
    assert_eq!(
        verify[NSENTER.len()..],
        [
            "/usr/local/bin/stratum",
            "carotate",
            "verify",
            "--expect",
            &ca.fingerprint,
            "--expect",
            INITIAL_CA
        ]
    );
    assert_eq!(
        plan.command(CaStep::Status, &[])[NSENTER.len()..],
        ["/usr/local/bin/stratum", "carotate", "status"]
    );
    // Issue verifies in the same Job, as the gate before finalize asks.
    let issue = plan.command(CaStep::Issue, &[fp(INITIAL_CA)]);
    assert_eq!(
        issue[NSENTER.len()..],
        [
            "/usr/local/bin/stratum",
            "carotate",
            "issue",
            "--ca",
            &ca.fingerprint,
            "--expect",
            &ca.fingerprint,
            "--expect",
            INITIAL_CA
        ]
    );
    // Configurable: another binary, no nsenter.
    let mut spec = plan_spec(&ca);
    spec.binary = "/opt/bin/stratum".into();
    spec.prefix = Vec::new();
    let direct = Plan::build(spec).unwrap().command(CaStep::Finalize, &[]);
    assert_eq!(
        direct,
        [
            "/opt/bin/stratum",
            "carotate",
            "finalize",
            "--keep",
            &ca.fingerprint
        ]
    );
    // Job names: per node, step and CA, at most 63 characters.
    let names: BTreeSet<String> = CaStep::PHASES
        .iter()
        .flat_map(|s| ["n1", "n2"].map(|n| plan.job_name(*s, n)))
        .collect();
    assert_eq!(names.len(), 6);
    assert!(names.iter().all(|n| n.len() <= 63 && n.starts_with("ca-")));
}

#[test]
fn status_is_read_strictly_and_garbage_is_quoted_with_the_node() {
    let ok = format!(
        "{{\"phase\": \"staged\", \"trusted\": [\"{INITIAL_CA}\", \"{NEW}\"], \"issuer\": \"{INITIAL_CA}\"}}\n"
    );
    assert_eq!(
        parse_status("n1", &ok),
        Ok(status(CaPhase::Staged, &[INITIAL_CA, NEW], INITIAL_CA))
    );
    let garbage = [
        String::new(),
        "{\"phase\": \"iss\u{fffd}\u{fffd} <truncated\n".to_string(),
        format!("{ok}{ok}"),
        format!("{{\"phase\": \"rotating\", \"trusted\": [], \"issuer\": \"{NEW}\"}}"),
        format!(
            "{{\"phase\": \"idle\", \"trusted\": [\"{NEW}\"], \"issuer\": \"{NEW}\", \"extra\": 1}}"
        ),
        format!("{{\"phase\": \"idle\", \"trusted\": [\"{NEW}\"]}}"),
        format!(
            "{{\"phase\": \"idle\", \"trusted\": [\"{NEW}\", \"{NEW}\"], \"issuer\": \"{NEW}\"}}"
        ),
        "{\"phase\": \"idle\", \"trusted\": [\"sha256:abc\"], \"issuer\": \"sha256:abc\"}"
            .to_string(),
        format!("stratum: ok {NEW}"),
    ];
    for log in garbage {
        let Err(e) = parse_status("node-7", &log) else {
            panic!("accepted {log:?}");
        };
        let message = e.to_string();
        assert!(message.starts_with("node node-7: "), "{message}");
        // Quoted as all host output is: whole, up to 500 characters.
        let quoted = nodejob_core::quote(&log);
        assert!(
            message.contains(&format!("{quoted:?}")),
            "not quoted: {message}"
        );
    }
}

#[test]
fn a_node_passed_a_step_by_what_it_reports() {
    let new = fp(NEW);
    let idle = status(CaPhase::Idle, &[INITIAL_CA], INITIAL_CA);
    let staged = status(CaPhase::Staged, &[INITIAL_CA, NEW], INITIAL_CA);
    let issued = status(CaPhase::Issued, &[INITIAL_CA, NEW], NEW);
    let finalized = status(CaPhase::Finalized, &[NEW], NEW);
    // (status, stage, issue, finalize, abort)
    let table = [
        (&idle, false, false, false, true),
        (&staged, true, false, false, false),
        (&issued, true, true, false, false),
        (&finalized, true, true, true, false),
    ];
    for (s, stage, issue, finalize, abort) in table {
        let got = [
            CaStep::Stage,
            CaStep::Issue,
            CaStep::Finalize,
            CaStep::Abort,
        ]
        .map(|step| step.passed(s, &new));
        assert_eq!(got, [stage, issue, finalize, abort], "{s:?}");
    }
    assert!(!CaStep::Status.passed(&finalized, &new));
}

fn job(finished: Option<&str>, deleting: bool) -> Job {
    let at = Time(Timestamp::UNIX_EPOCH);
    Job {
        metadata: ObjectMeta {
            uid: Some("uid-1".into()),
            deletion_timestamp: deleting.then(|| at.clone()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(JobStatus {
            conditions: finished.map(|c| {
                vec![JobCondition {
                    type_: c.into(),
                    status: "True".into(),
                    ..JobCondition::default()
                }]
            }),
            ..JobStatus::default()
        }),
    }
}

#[test]
fn a_job_a_step_left_is_adopted_while_it_runs_or_succeeded_and_never_run_twice() {
    let adopt = Decision::Adopt("uid-1".into());
    // (job, passed) -> decision
    let table = [
        (None, false, Decision::Run),
        (None, true, Decision::Nothing),
        (Some(job(None, false)), false, adopt.clone()),
        (Some(job(None, false)), true, adopt.clone()),
        (Some(job(Some("Complete"), false)), true, adopt.clone()),
        (Some(job(Some("Complete"), false)), false, adopt.clone()),
        (Some(job(Some("Failed"), false)), false, Decision::Run),
        (Some(job(Some("Failed"), false)), true, Decision::Nothing),
        (Some(job(None, true)), false, Decision::Run),
        (Some(job(None, true)), true, Decision::Nothing),
    ];
    for (j, passed, want) in table {
        assert_eq!(decide(j.as_ref(), passed), want, "{j:?} passed {passed}");
    }
}

#[test]
fn the_gates_name_each_node_that_disagrees_and_with_what() {
    let new = fp(NEW);
    let staged = status(CaPhase::Staged, &[INITIAL_CA, NEW], INITIAL_CA);
    let idle = status(CaPhase::Idle, &[INITIAL_CA], INITIAL_CA);
    let issued = status(CaPhase::Issued, &[INITIAL_CA, NEW], NEW);
    let foreign = status(CaPhase::Issued, &[INITIAL_CA, NEW], FOREIGN_CA);
    let extra = status(CaPhase::Staged, &[INITIAL_CA, FOREIGN_CA, NEW], INITIAL_CA);
    let finalized = status(CaPhase::Finalized, &[NEW], NEW);
    let nodes = |list: &[&CaStatus]| -> Vec<(String, CaStatus)> {
        list.iter()
            .enumerate()
            .map(|(i, s)| (format!("n{i}"), (*s).clone()))
            .collect()
    };
    let named = |gate, list: &[&CaStatus], verify: &[Option<Verified>]| -> Vec<String> {
        check(gate, &new, &nodes(list), verify)
            .disagreements
            .into_iter()
            .map(|d| format!("{}: {}", d.node, d.what))
            .collect()
    };
    assert!(named(Gate::Start, &[&idle, &staged, &issued], &[]).is_empty());
    let before_issue = named(Gate::BeforeIssue, &[&staged, &idle, &staged], &[]);
    assert_eq!(before_issue.len(), 1);
    assert!(
        before_issue[0].starts_with("n1: it does not trust the new CA"),
        "{before_issue:?}"
    );
    let odd = named(Gate::Start, &[&staged, &extra, &staged], &[]);
    assert_eq!(odd.len(), 1);
    assert!(odd[0].starts_with("n1: it trusts ["), "{odd:?}");
    let ok = Some(Verified::Exit(0));
    let before_finalize = named(
        Gate::BeforeFinalize,
        &[&issued, &foreign, &issued, &issued],
        &[
            ok.clone(),
            None,
            Some(Verified::Exit(3)),
            Some(Verified::Error("timed out".into())),
        ],
    );
    assert_eq!(before_finalize.len(), 3, "{before_finalize:?}");
    assert!(before_finalize[0].starts_with("n1: its leaves chain to sha256:ffff"));
    assert!(before_finalize[1].starts_with("n2: `carotate verify` says not yet"));
    assert!(before_finalize[2].starts_with("n3: `carotate verify` gave no answer: timed out"));
    assert!(
        named(
            Gate::BeforeFinalize,
            &[&issued, &finalized],
            &[ok.clone(), ok]
        )
        .is_empty()
    );
    let after = named(Gate::AfterFinalize, &[&finalized, &issued], &[]);
    assert_eq!(after.len(), 1);
    assert!(after[0].starts_with("n1: it trusts ["), "{after:?}");
    let after_abort = named(Gate::AfterAbort, &[&idle, &staged], &[]);
    assert_eq!(after_abort.len(), 1);
    assert!(
        after_abort[0].starts_with("n1: it still trusts"),
        "{after_abort:?}"
    );
    // Side by side: every node, with what it reports.
    let report = check(
        Gate::AfterFinalize,
        &new,
        &nodes(&[&finalized, &issued]),
        &[],
    );
    assert_eq!(report.nodes.len(), 2);
    assert_eq!(report.nodes[1].issuer, new);
    assert_eq!(report.nodes[1].trusted, vec![fp(INITIAL_CA), new.clone()]);
}

#[test]
fn the_default_identity_is_unique_to_the_process() {
    let ca = new_ca();
    let identity = PlanSpec::new(ca.pem.clone(), ca.fingerprint.clone()).identity;
    let pid = std::process::id().to_string();
    assert!(
        identity.starts_with("certs-driver-")
            && identity.split('-').any(|part| part == pid.as_str()),
        "{identity}"
    );
    // The same for the life of the process: a plan built twice holds the Lease as one holder.
    let again = PlanSpec::new(ca.pem, ca.fingerprint).identity;
    assert_eq!(identity, again);
}

#[test]
fn issue_has_begun_where_the_new_ca_issues_or_a_node_is_issued_trusting_it() {
    let new = fp(NEW);
    let table = [
        (status(CaPhase::Idle, &[INITIAL_CA], INITIAL_CA), false),
        (
            status(CaPhase::Staged, &[INITIAL_CA, NEW], INITIAL_CA),
            false,
        ),
        (status(CaPhase::Issued, &[INITIAL_CA, NEW], NEW), true),
        // `issue` ran, its leaves chain elsewhere: it has begun all the same.
        (
            status(CaPhase::Issued, &[INITIAL_CA, NEW], FOREIGN_CA),
            true,
        ),
        (status(CaPhase::Finalized, &[NEW], NEW), true),
        // Finalized by an earlier rotation, to another CA: not this one's issue.
        (status(CaPhase::Finalized, &[INITIAL_CA], INITIAL_CA), false),
    ];
    for (s, begun) in table {
        assert_eq!(s.issue_begun(&new), begun, "{s:?}");
    }
}
