//! Table tests of the runner's [`Policy`]: adopting an earlier Job by UID instead of replacing
//! it, and keeping a succeeded Job for the caller. No I/O.

mod support;

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::runner::{Intent, Machine, Mode, Observation as Obs, Policy, Report};
use nodejob_core::{ApiError, Change, Error};
use support::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn machine(mode: Mode, policy: Policy) -> Machine {
    let mut m = Machine::with_policy(&spec(), mode, secs(0), policy);
    assert_eq!(m.start().intent, Intent::GetJob);
    m
}

fn adopting(uid: &str) -> Policy {
    Policy {
        adopt: Some(uid.into()),
        keep: true,
        known_free: false,
    }
}

fn pods_of(uid: &str) -> Intent {
    Intent::ListPods {
        selector: format!("batch.kubernetes.io/controller-uid={uid}"),
    }
}

fn vanished(intent: Intent) -> String {
    match intent {
        Intent::Finish(Err(e @ Error::Vanished { .. })) => e.to_string(),
        other => panic!("expected Vanished, got {other:?}"),
    }
}

#[test]
fn a_running_job_adopted_is_waited_for_never_deleted_nor_replaced() {
    let mut m = machine(Mode::ExitCodeLogs, adopting("old"));
    let s = m.step(secs(1), Obs::Job(running("old", 4)));
    assert_eq!(
        s.intent,
        Intent::WaitJob {
            since: Some("4".into()),
            timeout: spec().wait_bound(),
        }
    );
    assert!(s.notes.iter().any(|n| n.message.contains("adopted")));
    let s = m.step(secs(30), Obs::Changed(Change::Applied(complete("old", 6))));
    assert_eq!(s.intent, pods_of("old"));
    let s = m.step(
        secs(30),
        Obs::Pods(vec![pod("p", "old", "upgrade", Some(0))]),
    );
    assert_eq!(s.intent, Intent::ReadLog { pod: "p".into() });
    // Kept: the result is the answer and no delete is issued.
    let s = m.step(secs(30), Obs::Log("upgraded\n".into()));
    assert_eq!(
        s.intent,
        Intent::Finish(Ok(Report {
            uid: "old".into(),
            exit_code: 0,
            log: Some("upgraded\n".into()),
            resource_version: Some("6".into()),
        }))
    );
}

#[test]
fn a_finished_job_adopted_is_read_at_once() {
    // A succeeded one answers 0 with no read (its one Pod succeeded); a failed one's Pods say
    // with what it ended.
    let mut m = machine(Mode::ExitCode, adopting("old"));
    let s = m.step(secs(1), Obs::Job(complete("old", 7)));
    assert_eq!(
        s.intent,
        Intent::Finish(Ok(Report {
            uid: "old".into(),
            exit_code: 0,
            log: None,
            resource_version: Some("7".into()),
        }))
    );
    let mut m = machine(Mode::ExitCode, adopting("old"));
    let s = m.step(secs(1), Obs::Job(failed("old", 7)));
    assert_eq!(s.intent, pods_of("old"));
    let s = m.step(
        secs(1),
        Obs::Pods(vec![pod("p", "old", "upgrade", Some(5))]),
    );
    assert_eq!(
        s.intent,
        Intent::Finish(Ok(Report {
            uid: "old".into(),
            exit_code: 5,
            log: None,
            resource_version: None,
        }))
    );
}

#[test]
fn an_adopted_job_gone_replaced_or_being_deleted_ends_the_run_and_nothing_is_created() {
    let mut m = machine(Mode::ExitCode, adopting("old"));
    let msg = vanished(
        m.step(secs(1), Obs::Failed(ApiError::not_found("gone")))
            .intent,
    );
    assert!(msg.contains("old") && msg.contains("deleted"), "{msg}");

    let mut m = machine(Mode::ExitCode, adopting("old"));
    let msg = vanished(m.step(secs(1), Obs::Job(running("new", 9))).intent);
    assert!(msg.contains("replaced by uid new"), "{msg}");

    let mut m = machine(Mode::ExitCode, adopting("old"));
    let msg = vanished(
        m.step(secs(1), Obs::Job(deleting(running("old", 9))))
            .intent,
    );
    assert!(msg.contains("being deleted"), "{msg}");
}

#[test]
fn keep_leaves_a_succeeded_job_in_place_and_reports_its_uid_and_version() {
    let keep = Policy {
        adopt: None,
        keep: true,
        known_free: false,
    };
    let mut m = machine(Mode::Run, keep);
    let s = m.step(secs(0), Obs::Failed(ApiError::not_found("none")));
    assert!(matches!(s.intent, Intent::CreateJob(_)));
    m.step(secs(0), Obs::Job(job("ours", 1)));
    let s = m.step(secs(5), Obs::Changed(Change::Applied(complete("ours", 3))));
    assert_eq!(
        s.intent,
        Intent::Finish(Ok(Report {
            uid: "ours".into(),
            exit_code: 0,
            log: None,
            resource_version: Some("3".into()),
        }))
    );
}

#[test]
fn the_default_policy_still_replaces_an_earlier_job_and_deletes_ours() {
    let mut m = machine(Mode::Run, Policy::default());
    let s = m.step(secs(0), Obs::Job(complete("old", 7)));
    assert_eq!(
        s.intent,
        Intent::DeleteJob(Preconditions {
            uid: Some("old".into()),
            resource_version: Some("7".into()),
        })
    );
}

fn known_free() -> Policy {
    Policy {
        known_free: true,
        ..Policy::default()
    }
}

fn wait(rv: u32) -> Intent {
    Intent::WaitJob {
        since: Some(rv.to_string()),
        timeout: spec().wait_bound(),
    }
}

#[test]
fn a_name_the_caller_read_free_is_created_at_once_without_a_read_of_its_own() {
    let mut m = Machine::with_policy(&spec(), Mode::Run, secs(0), known_free());
    assert!(matches!(m.start().intent, Intent::CreateJob(_)));
    assert_eq!(
        m.step(secs(0), Obs::Job(running("ours", 1))).intent,
        wait(1)
    );
    let s = m.step(secs(5), Obs::Changed(Change::Applied(complete("ours", 3))));
    assert_eq!(
        s.intent,
        Intent::DeleteJob(Preconditions {
            uid: Some("ours".into()),
            resource_version: Some("3".into()),
        })
    );
}

#[test]
fn a_job_met_where_the_caller_read_the_name_free_is_judged_as_the_guard_judges_it() {
    let exists = || Obs::Failed(ApiError::already_exists("jobs.batch \"x\" already exists"));
    // A finished one is deleted exactly, waited out, and ours created after it.
    let mut m = Machine::with_policy(&spec(), Mode::Run, secs(0), known_free());
    m.start();
    assert_eq!(m.step(secs(0), exists()).intent, Intent::GetJob);
    let s = m.step(secs(1), Obs::Job(complete("old", 7)));
    assert_eq!(
        s.intent,
        Intent::DeleteJob(Preconditions {
            uid: Some("old".into()),
            resource_version: Some("7".into()),
        })
    );
    assert!(matches!(
        m.step(secs(1), Obs::Deleted).intent,
        Intent::WaitJob { .. }
    ));
    let gone = Obs::Changed(Change::Deleted(complete("old", 8)));
    assert!(matches!(m.step(secs(2), gone).intent, Intent::CreateJob(_)));
    // The guard has read it now: a second AlreadyExists is another actor's Job.
    let e = m.step(secs(2), exists()).intent;
    assert!(
        matches!(e, Intent::Finish(Err(Error::Contended { .. }))),
        "{e:?}"
    );

    // A running one is waited for, never killed; the guard's bound counts from the start.
    let mut m = Machine::with_policy(&spec(), Mode::Run, secs(0), known_free());
    m.start();
    m.step(secs(3), exists());
    let s = m.step(secs(3), Obs::Job(running("old", 4)));
    assert_eq!(
        s.intent,
        Intent::WaitJob {
            since: Some("4".into()),
            timeout: spec().wait_bound() - secs(3),
        }
    );
    assert!(s.notes.iter().any(|n| n.message.contains("still running")));
}

#[test]
fn a_lost_create_answer_where_the_caller_read_the_name_free_adopts_only_our_work() {
    let mut m = Machine::with_policy(&spec(), Mode::Run, secs(0), known_free());
    m.start();
    let s = m.step(secs(0), Obs::Failed(ApiError::transient(504, "timeout")));
    assert_eq!(s.intent, Intent::Sleep(Duration::from_millis(250)));
    assert!(matches!(
        m.step(secs(0), Obs::Slept).intent,
        Intent::CreateJob(_)
    ));
    let s = m.step(secs(0), Obs::Failed(ApiError::already_exists("exists")));
    assert_eq!(s.intent, Intent::GetJob);
    assert_eq!(
        m.step(secs(0), Obs::Job(running("ours", 2))).intent,
        wait(2)
    );
}

#[test]
fn known_free_is_ignored_when_adopting() {
    let policy = Policy {
        known_free: true,
        ..adopting("old")
    };
    let mut m = Machine::with_policy(&spec(), Mode::Run, secs(0), policy);
    assert_eq!(m.start().intent, Intent::GetJob);
}
