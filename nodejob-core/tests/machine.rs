//! Table tests of the run state machine: `(state, observation) -> intent`, no I/O at all.

mod support;

use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobStatus, UncountedTerminatedPods};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::runner::{Intent, Machine, Mode, Observation as Obs, Report};
use nodejob_core::{ApiError, Change, Error, Level, POLL_INTERVAL, build};
use support::*;

const T0: Duration = Duration::ZERO;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn exact(uid: &str, rv: u32) -> Intent {
    Intent::DeleteJob(Preconditions {
        uid: Some(uid.into()),
        resource_version: Some(rv.to_string()),
    })
}

fn wait(rv: u32, timeout: Duration) -> Intent {
    Intent::WaitJob {
        since: Some(rv.to_string()),
        timeout,
    }
}

fn finish_ok(exit_code: i32, log: Option<&str>) -> Intent {
    Intent::Finish(Ok(Report {
        uid: "ours".into(),
        exit_code,
        log: log.map(String::from),
        resource_version: None,
    }))
}

fn bound() -> Duration {
    spec().wait_bound()
}

fn machine(mode: Mode) -> Machine {
    let mut m = Machine::new(&spec(), mode, T0);
    assert_eq!(m.start().intent, Intent::GetJob);
    m
}

fn pods_of_ours() -> Intent {
    Intent::ListPods {
        selector: "batch.kubernetes.io/controller-uid=ours".into(),
    }
}

/// A machine that created job `ours` (rv 1) at T0 and saw it run (rv 3); when the log is
/// wanted, it listed its Pod `p` then.
fn machine_waiting(mode: Mode) -> Machine {
    let mut m = machine(mode.clone());
    m.step(
        T0,
        Obs::Failed(ApiError::not_found(
            "jobs.batch \"upgrade-node-a\" not found",
        )),
    );
    m.step(T0, Obs::Job(job("ours", 1)));
    let s = m.step(secs(2), Obs::Changed(Change::Applied(running("ours", 3))));
    if mode == Mode::ExitCodeLogs {
        assert_eq!(s.intent, pods_of_ours());
        let s = m.step(secs(2), Obs::Pods(vec![pod("p", "ours", "upgrade", None)]));
        assert_eq!(s.intent, wait(3, bound() - secs(2)));
    } else {
        assert_eq!(s.intent, wait(3, bound() - secs(2)));
    }
    m
}

fn err(intent: Intent) -> Error {
    match intent {
        Intent::Finish(Err(e)) => e,
        other => panic!("expected a failed finish, got {other:?}"),
    }
}

#[test]
fn no_job_creates_exactly_what_build_renders() {
    let mut m = machine(Mode::Run);
    let s = m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    assert_eq!(s.intent, Intent::CreateJob(Box::new(build(&spec()))));
}

#[test]
fn created_job_is_waited_for_by_its_resource_version_one_interval_while_podless() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    let s = m.step(T0, Obs::Job(job("ours", 1)));
    assert_eq!(s.intent, wait(1, POLL_INTERVAL));
    assert!(
        s.notes.iter().any(|n| n.message.contains("uid ours")),
        "{:?}",
        s.notes
    );
}

#[test]
fn stale_finished_job_is_deleted_exactly_then_waited_gone_then_replaced() {
    for stale in [complete("old", 7), failed("old", 7)] {
        let mut m = machine(Mode::Run);
        let s = m.step(T0, Obs::Job(stale));
        assert_eq!(s.intent, exact("old", 7));
        assert_eq!(s.notes[0].level, Level::Warn);
        assert_eq!(m.step(T0, Obs::Deleted).intent, wait(7, bound()));
        let s = m.step(
            secs(1),
            Obs::Changed(Change::Applied(deleting(complete("old", 8)))),
        );
        assert_eq!(s.intent, wait(8, bound() - secs(1)));
        let s = m.step(
            secs(2),
            Obs::Changed(Change::Deleted(deleting(complete("old", 9)))),
        );
        assert_eq!(s.intent, Intent::CreateJob(Box::new(build(&spec()))));
    }
}

#[test]
fn stale_job_being_deleted_is_waited_gone_not_deleted_again() {
    let mut m = machine(Mode::Run);
    let s = m.step(T0, Obs::Job(deleting(running("old", 4))));
    assert_eq!(s.intent, wait(4, bound()));
    let s = m.step(
        secs(3),
        Obs::Changed(Change::Deleted(deleting(running("old", 5)))),
    );
    assert!(matches!(s.intent, Intent::CreateJob(_)));
}

#[test]
fn stale_running_job_is_never_killed_but_waited_for_then_replaced() {
    let mut m = machine(Mode::Run);
    let s = m.step(T0, Obs::Job(running("old", 4)));
    assert_eq!(s.intent, wait(4, bound()));
    assert_eq!(s.notes[0].level, Level::Warn);
    assert!(
        s.notes[0].message.contains("still running"),
        "{}",
        s.notes[0].message
    );
    // Progress of the stale Job is not a reason to delete it.
    let s = m.step(secs(5), Obs::Changed(Change::Applied(running("old", 5))));
    assert_eq!(s.intent, wait(5, bound() - secs(5)));
    let s = m.step(secs(6), Obs::Changed(Change::TimedOut));
    assert_eq!(s.intent, wait(5, bound() - secs(6)));
    let s = m.step(secs(9), Obs::Changed(Change::Applied(complete("old", 6))));
    assert_eq!(s.intent, exact("old", 6));
}

#[test]
fn stale_running_job_that_outlasts_the_bound_is_left_running() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Job(running("old", 4)));
    let e = err(m.step(bound(), Obs::Changed(Change::TimedOut)).intent);
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("left in place"), "{e}");
}

#[test]
fn stale_job_replaced_between_inspect_and_delete_is_left_alone() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Job(complete("old", 7)));
    let s = m.step(
        T0,
        Obs::Failed(ApiError::conflict(
            "Precondition failed: UID in precondition: old, UID in object meta: new",
        )),
    );
    assert_eq!(s.intent, Intent::GetJob);
    let e = err(m.step(T0, Obs::Job(running("new", 9))).intent);
    assert!(matches!(e, Error::Contended { .. }), "{e}");
    assert!(e.to_string().contains("upgrade-node-a"), "{e}");
}

#[test]
fn stale_job_whose_status_moved_is_inspected_again_and_deleted_at_its_new_version() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Job(complete("old", 7)));
    m.step(T0, Obs::Failed(ApiError::conflict("Precondition failed: ResourceVersion in precondition: 7, ResourceVersion in object meta: 8")));
    assert_eq!(
        m.step(T0, Obs::Job(complete("old", 8))).intent,
        exact("old", 8)
    );
}

#[test]
fn stale_job_deleted_by_someone_else_before_our_delete_is_replaced() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Job(complete("old", 7)));
    let s = m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    assert!(matches!(s.intent, Intent::CreateJob(_)));
}

#[test]
fn new_job_appearing_while_the_stale_one_goes_is_another_actors() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Job(deleting(complete("old", 4))));
    let e = err(m
        .step(T0, Obs::Changed(Change::Applied(running("other", 6))))
        .intent);
    assert!(matches!(e, Error::Contended { .. }), "{e}");
}

#[test]
fn already_exists_on_create_is_another_actors_job() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    let e = err(m
        .step(
            T0,
            Obs::Failed(ApiError::already_exists(
                "jobs.batch \"upgrade-node-a\" already exists",
            )),
        )
        .intent);
    assert!(matches!(e, Error::Contended { .. }), "{e}");
}

#[test]
fn create_whose_answer_was_lost_adopts_only_the_identical_job() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    let s = m.step(T0, Obs::Failed(ApiError::transient(504, "timeout")));
    assert_eq!(s.intent, Intent::Sleep(Duration::from_millis(250)));
    assert!(matches!(
        m.step(T0, Obs::Slept).intent,
        Intent::CreateJob(_)
    ));
    let s = m.step(T0, Obs::Failed(ApiError::already_exists("exists")));
    assert_eq!(s.intent, Intent::GetJob);
    assert_eq!(
        m.step(T0, Obs::Job(running("ours", 2))).intent,
        wait(2, bound())
    );

    // Same again, but the Job there runs something else.
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    m.step(T0, Obs::Failed(ApiError::transient(504, "timeout")));
    m.step(T0, Obs::Slept);
    m.step(T0, Obs::Failed(ApiError::already_exists("exists")));
    let mut theirs = running("theirs", 2);
    theirs
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .command = Some(vec!["rm".into(), "-rf".into(), "/".into()]);
    let e = err(m.step(T0, Obs::Job(theirs)).intent);
    assert!(matches!(e, Error::Contended { .. }), "{e}");
}

#[test]
fn forbidden_and_invalid_fail_at_once_with_the_apiserver_message() {
    for cause in [
        ApiError::forbidden("jobs.batch is forbidden: User \"x\" cannot create"),
        ApiError::invalid("spec.template: Invalid value"),
    ] {
        let mut m = machine(Mode::Run);
        m.step(T0, Obs::Failed(ApiError::not_found("not found")));
        let e = err(m.step(T0, Obs::Failed(cause.clone())).intent);
        assert_eq!(e.api_error(), Some(&cause));
        assert!(
            e.to_string().starts_with(
                "creating per-node upgrade job kube-system/upgrade-node-a on node node-a: "
            ),
            "{e}"
        );
    }
}

#[test]
fn transient_errors_back_off_capped_and_give_up_at_the_bound() {
    let mut m = machine(Mode::Run);
    let mut backoffs = Vec::new();
    let mut now = T0;
    loop {
        let s = m.step(now, Obs::Failed(ApiError::transient(503, "unavailable")));
        match s.intent {
            Intent::Sleep(d) => {
                backoffs.push(d);
                now += d;
                assert_eq!(m.step(now, Obs::Slept).intent, Intent::GetJob);
            }
            Intent::Finish(Err(e)) => {
                assert_eq!(e.api_error().map(|a| a.code), Some(503));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        &backoffs[..4],
        &[250, 500, 1000, 2000].map(Duration::from_millis)
    );
    assert!(backoffs.iter().all(|d| *d <= secs(5)));
    assert!(now < bound(), "gave up at {now:?}, bound {:?}", bound());
    assert!(now + secs(5) >= bound(), "gave up early at {now:?}");
}

#[test]
fn a_succeeded_job_answers_0_with_no_pod_read_and_is_deleted_exactly() {
    // The Job controller counts it succeeded once its one Pod did (backoffLimit 0): no log
    // wanted, nothing of the Pod is read, before or after the finish.
    for mode in [Mode::Run, Mode::ExitCode] {
        let mut m = machine_waiting(mode);
        let s = m.step(secs(9), Obs::Changed(Change::Applied(complete("ours", 6))));
        assert_eq!(s.intent, exact("ours", 6));
        assert_eq!(m.step(secs(9), Obs::Deleted).intent, finish_ok(0, None));
    }
}

#[test]
fn a_failed_job_is_read_through_the_uid_of_its_pods_after_the_finish() {
    // Even with its Pod named while it ran: what ended it is read from the Pod as it is now.
    for mode in [Mode::ExitCode, Mode::ExitCodeLogs] {
        let mut m = machine_waiting(mode.clone());
        let s = m.step(secs(9), Obs::Changed(Change::Applied(failed("ours", 6))));
        assert_eq!(s.intent, pods_of_ours(), "{mode:?}");
        let s = m.step(
            secs(9),
            Obs::Pods(vec![pod("p", "ours", "upgrade", Some(2))]),
        );
        let expected = match mode {
            Mode::ExitCodeLogs => Intent::ReadLog { pod: "p".into() },
            _ => Intent::Finish(Ok(Report {
                uid: "ours".into(),
                exit_code: 2,
                log: None,
                resource_version: None,
            })),
        };
        assert_eq!(s.intent, expected, "{mode:?}");
    }
}

#[test]
fn interim_conditions_alone_are_not_the_end() {
    let mut m = machine_waiting(Mode::Run);
    let interim = with_status(
        job("ours", 5),
        JobStatus {
            succeeded: Some(1),
            terminating: Some(1),
            conditions: Some(vec![cond("SuccessCriteriaMet", "CompletionsReached", "")]),
            ..Default::default()
        },
    );
    assert_eq!(
        m.step(secs(8), Obs::Changed(Change::Applied(interim)))
            .intent,
        wait(5, bound() - secs(8))
    );
}

#[test]
fn non_zero_exit_is_returned_and_the_failed_job_left_in_place() {
    let mut m = machine_waiting(Mode::ExitCode);
    m.step(secs(9), Obs::Changed(Change::Applied(failed("ours", 6))));
    let s = m.step(
        secs(9),
        Obs::Pods(vec![pod("p", "ours", "upgrade", Some(3))]),
    );
    assert_eq!(s.intent, finish_ok(3, None));
    assert!(s.notes.iter().any(|n| n.message.contains("left in place")));

    let mut m = machine_waiting(Mode::Run);
    m.step(secs(9), Obs::Changed(Change::Applied(failed("ours", 6))));
    let e = err(m
        .step(
            secs(9),
            Obs::Pods(vec![pod("p", "ours", "upgrade", Some(3))]),
        )
        .intent);
    assert_eq!(e.exit_code(), Some(3));
    assert!(matches!(e, Error::Failed { .. }), "{e}");
}

#[test]
fn another_jobs_pod_never_answers_for_ours() {
    let mut m = machine_waiting(Mode::ExitCode);
    m.step(secs(9), Obs::Changed(Change::Applied(failed("ours", 6))));
    // A pod carrying our label but owned by another Job, exit 0, and ours, exit 4.
    let mut impostor = pod("old", "ours", "upgrade", Some(0));
    impostor.metadata.owner_references.as_mut().unwrap()[0].uid = "old".into();
    let s = m.step(
        secs(9),
        Obs::Pods(vec![impostor.clone(), pod("p", "ours", "upgrade", Some(4))]),
    );
    assert_eq!(s.intent, finish_ok(4, None));
    // Only the impostor: no pod of ours remains (the Job controller deletes none of a failed
    // Job), so none answers; ours still standing, its pod was deleted by another actor.
    let mut m = machine_waiting(Mode::ExitCode);
    m.step(secs(9), Obs::Changed(Change::Applied(failed("ours", 6))));
    let s = m.step(secs(9), Obs::Pods(vec![impostor]));
    assert_eq!(s.intent, Intent::GetJob);
    let s = m.step(secs(9), Obs::Job(failed("ours", 6)));
    assert_eq!(s.intent, Intent::GetNode, "is its node still there?");
    let e = err(m.step(secs(9), Obs::Node(Box::default())).intent);
    assert!(matches!(e, Error::PodDeleted { .. }), "{e}");
}

#[test]
fn a_failed_job_whose_pod_went_with_its_deleted_node_names_the_node() {
    // The pod garbage collector deletes the Pods of a deleted node (`gcOrphaned`): no Pod of
    // ours remains, ours stands, its node is gone.
    let mut m = machine_failed(Mode::ExitCode);
    assert_eq!(m.step(secs(9), Obs::Pods(vec![])).intent, Intent::GetJob);
    let s = m.step(secs(9), Obs::Job(failed("ours", 6)));
    assert_eq!(s.intent, Intent::GetNode);
    let e = err(m
        .step(
            secs(9),
            Obs::Failed(ApiError::not_found("nodes \"node-a\" not found")),
        )
        .intent);
    assert!(
        matches!(&e, Error::NodeDeleted { node, .. } if node == "node-a"),
        "{e}"
    );
}

#[test]
fn failure_without_container_exit_quotes_the_condition() {
    let mut m = machine_waiting(Mode::ExitCode);
    m.step(
        secs(600),
        Obs::Changed(Change::Applied(deadline_exceeded("ours", 6))),
    );
    let e = err(m
        .step(
            secs(600),
            Obs::Pods(vec![pod("p", "ours", "upgrade", None)]),
        )
        .intent);
    assert!(matches!(e, Error::FailedWithoutExit { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("DeadlineExceeded: Job was active longer than specified deadline"),
        "{e}"
    );
    // A container the deadline killed has an exit code that is not the host operation's answer.
    let mut m = machine_waiting(Mode::ExitCode);
    m.step(
        secs(600),
        Obs::Changed(Change::Applied(deadline_exceeded("ours", 6))),
    );
    let e = err(m
        .step(
            secs(600),
            Obs::Pods(vec![pod("p", "ours", "upgrade", Some(137))]),
        )
        .intent);
    assert!(matches!(e, Error::FailedWithoutExit { .. }), "{e}");
}

#[test]
fn log_is_read_before_the_succeeded_job_is_deleted() {
    // Its Pod was named while it ran: the finish reads the log at once.
    let mut m = machine_waiting(Mode::ExitCodeLogs);
    let s = m.step(secs(9), Obs::Changed(Change::Applied(complete("ours", 6))));
    assert_eq!(s.intent, Intent::ReadLog { pod: "p".into() });
    assert_eq!(
        m.step(secs(9), Obs::Log("done\n".into())).intent,
        exact("ours", 6)
    );
    assert_eq!(
        m.step(secs(9), Obs::Deleted).intent,
        finish_ok(0, Some("done\n"))
    );
}

/// What the Job controller writes in the sync that sees its one Pod succeeded, before it
/// removes the Pod's tracking finalizer and writes `Complete`: the interim condition, the Pod
/// uncounted, no Pod active, ready or terminating.
fn succeeding(rv: u32) -> Box<Job> {
    with_status(
        job("ours", rv),
        JobStatus {
            active: Some(0),
            ready: Some(0),
            terminating: Some(0),
            uncounted_terminated_pods: Some(UncountedTerminatedPods {
                succeeded: Some(vec!["pod-uid".into()]),
                failed: None,
            }),
            conditions: Some(vec![cond("SuccessCriteriaMet", "CompletionsReached", "")]),
            ..Default::default()
        },
    )
}

#[test]
fn the_log_is_read_as_the_job_reports_its_pod_succeeded_and_the_finish_only_deletes() {
    let mut m = machine_waiting(Mode::ExitCodeLogs);
    let s = m.step(secs(8), Obs::Changed(Change::Applied(succeeding(5))));
    assert_eq!(s.intent, Intent::ReadLog { pod: "p".into() });
    // Not the end: the wait goes on, from the interim state.
    let s = m.step(secs(8), Obs::Log("done\n".into()));
    assert_eq!(s.intent, wait(5, bound() - secs(8)));
    // Complete: the delete, with no read of the log again.
    let s = m.step(secs(9), Obs::Changed(Change::Applied(complete("ours", 6))));
    assert_eq!(s.intent, exact("ours", 6));
    assert_eq!(
        m.step(secs(9), Obs::Deleted).intent,
        finish_ok(0, Some("done\n"))
    );
}

#[test]
fn an_early_log_read_that_fails_is_read_again_at_the_finish_and_never_retried_before() {
    for answer in [
        Obs::Failed(ApiError::transient(500, "dial tcp: connection refused")),
        Obs::Failed(ApiError::not_found("pods \"p\" not found")),
    ] {
        let mut m = machine_waiting(Mode::ExitCodeLogs);
        let s = m.step(secs(8), Obs::Changed(Change::Applied(succeeding(5))));
        assert_eq!(s.intent, Intent::ReadLog { pod: "p".into() });
        let s = m.step(secs(8), answer);
        assert_eq!(s.intent, wait(5, bound() - secs(8)));
        // Tried once a run: another interim change does not read it again.
        let s = m.step(secs(8), Obs::Changed(Change::Applied(succeeding(6))));
        assert_eq!(s.intent, wait(6, bound() - secs(8)));
        let s = m.step(secs(9), Obs::Changed(Change::Applied(complete("ours", 7))));
        assert_eq!(s.intent, Intent::ReadLog { pod: "p".into() });
    }
}

#[test]
fn no_early_log_read_while_a_pod_still_runs_or_terminates_or_when_it_is_not_wanted() {
    // A Pod still terminating (another, replaced): the host may still run there.
    let mut m = machine_waiting(Mode::ExitCodeLogs);
    let mut terminating = succeeding(5);
    terminating.status.as_mut().unwrap().terminating = Some(1);
    let s = m.step(secs(8), Obs::Changed(Change::Applied(terminating)));
    assert_eq!(s.intent, wait(5, bound() - secs(8)));
    // The exit code alone is wanted: nothing to read.
    let mut m = machine_waiting(Mode::ExitCode);
    let s = m.step(secs(8), Obs::Changed(Change::Applied(succeeding(5))));
    assert_eq!(s.intent, wait(5, bound() - secs(8)));
}

#[test]
fn a_job_seen_first_finished_has_its_pod_listed_for_the_log_after_the_finish() {
    // No change showed it active: its Pod was never named, so the finish lists it.
    let mut m = machine(Mode::ExitCodeLogs);
    m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    m.step(T0, Obs::Job(job("ours", 1)));
    let s = m.step(secs(2), Obs::Changed(Change::Applied(complete("ours", 6))));
    assert_eq!(s.intent, pods_of_ours());
    let s = m.step(
        secs(2),
        Obs::Pods(vec![pod("p", "ours", "upgrade", Some(0))]),
    );
    assert_eq!(s.intent, Intent::ReadLog { pod: "p".into() });
}

#[test]
fn a_list_of_pods_while_it_runs_that_fails_or_finds_none_goes_on_waiting() {
    for answer in [
        Obs::Failed(ApiError::forbidden("pods is forbidden")),
        Obs::Failed(ApiError::transient(503, "unavailable")),
        Obs::Pods(vec![pod("not-ours", "theirs", "upgrade", None)]),
    ] {
        let mut m = machine(Mode::ExitCodeLogs);
        m.step(T0, Obs::Failed(ApiError::not_found("not found")));
        m.step(T0, Obs::Job(job("ours", 1)));
        let s = m.step(secs(2), Obs::Changed(Change::Applied(running("ours", 3))));
        assert_eq!(s.intent, pods_of_ours());
        // Never retried, never the end of the wait.
        let s = m.step(secs(2), answer);
        assert_eq!(s.intent, wait(3, bound() - secs(2)));
        // Listed once a run: the next change does not list again; the finish does.
        let s = m.step(secs(4), Obs::Changed(Change::Applied(running("ours", 4))));
        assert_eq!(s.intent, wait(4, bound() - secs(4)));
        let s = m.step(secs(5), Obs::Changed(Change::Applied(complete("ours", 6))));
        assert_eq!(s.intent, pods_of_ours());
    }
}

#[test]
fn unreadable_log_keeps_the_exit_code_and_the_job() {
    let mut m = machine_waiting(Mode::ExitCodeLogs);
    m.step(secs(9), Obs::Changed(Change::Applied(failed("ours", 6))));
    m.step(
        secs(9),
        Obs::Pods(vec![pod("p", "ours", "upgrade", Some(2))]),
    );
    let kubelet = ApiError::transient(
        500,
        "Get \"https://10.0.0.1:10250/containerLogs/kube-system/p/upgrade\": dial tcp 10.0.0.1:10250: connect: connection refused",
    );
    let mut now = secs(9);
    let e = loop {
        match m.step(now, Obs::Failed(kubelet.clone())).intent {
            Intent::Sleep(d) => {
                now += d;
                assert_eq!(
                    m.step(now, Obs::Slept).intent,
                    Intent::ReadLog { pod: "p".into() }
                );
            }
            other => break err(other),
        }
    };
    assert!(matches!(e, Error::LogUnread { exit_code: 2, .. }), "{e}");
    assert!(e.to_string().contains("connection refused"), "{e}");
}

#[test]
fn our_job_deleted_or_replaced_while_waiting_ends_the_run_at_once() {
    let mut m = machine_waiting(Mode::Run);
    let e = err(m
        .step(
            secs(3),
            Obs::Changed(Change::Deleted(deleting(running("ours", 4)))),
        )
        .intent);
    assert!(
        matches!(&e, Error::Vanished { detail, .. } if detail == "was deleted"),
        "{e}"
    );
    let mut m = machine_waiting(Mode::Run);
    let e = err(m
        .step(
            secs(3),
            Obs::Changed(Change::Applied(complete("theirs", 9))),
        )
        .intent);
    assert!(
        matches!(&e, Error::Vanished { detail, .. } if detail.contains("theirs")),
        "{e}"
    );
}

#[test]
fn our_job_deleted_by_another_actor_is_no_answer_even_once_its_pod_was_killed() {
    let mut m = machine_waiting(Mode::ExitCode);
    let killed = deleting(failed("ours", 8));
    let e = err(m
        .step(secs(3), Obs::Changed(Change::Applied(killed)))
        .intent);
    assert!(
        matches!(&e, Error::Vanished { detail, .. } if detail.contains("being deleted")),
        "{e}"
    );
}

#[test]
fn expired_watch_rereads_the_job_instead_of_failing() {
    let mut m = machine_waiting(Mode::Run);
    assert_eq!(
        m.step(
            secs(3),
            Obs::Failed(ApiError::gone("too old resource version"))
        )
        .intent,
        Intent::GetJob
    );
    assert_eq!(
        m.step(secs(3), Obs::Job(running("ours", 20))).intent,
        wait(20, bound() - secs(3))
    );
}

#[test]
fn failed_create_event_fails_fast_and_names_the_fix() {
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    m.step(T0, Obs::Job(job("ours", 1)));
    let s = m.step(POLL_INTERVAL, Obs::Changed(Change::TimedOut));
    assert_eq!(s.intent, Intent::ListEvents { uid: "ours".into() });
    // Nothing yet: wait one more interval.
    assert_eq!(
        m.step(POLL_INTERVAL, Obs::Events(vec![])).intent,
        wait(1, POLL_INTERVAL)
    );
    m.step(POLL_INTERVAL * 2, Obs::Changed(Change::TimedOut));
    let msg = "Error creating: pods \"upgrade-node-a-x7k2p\" is forbidden: violates PodSecurity \"baseline:latest\": privileged";
    let e = err(m
        .step(
            POLL_INTERVAL * 2,
            Obs::Events(vec![
                event("other", "FailedCreate", "x"),
                event("ours", "FailedCreate", msg),
            ]),
        )
        .intent);
    assert!(matches!(e, Error::PodCreateRefused { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains(msg), "{text}");
    assert!(
        text.contains("pod-security.kubernetes.io/enforce=privileged"),
        "{text}"
    );
}

#[test]
fn once_a_pod_exists_the_wait_spans_the_whole_bound_and_times_out_there() {
    let mut m = machine_waiting(Mode::Run);
    let s = m.step(bound() - secs(1), Obs::Changed(Change::TimedOut));
    assert_eq!(s.intent, wait(3, secs(1)));
    let e = err(m.step(bound(), Obs::Changed(Change::TimedOut)).intent);
    let text = e.to_string();
    assert!(matches!(e, Error::Timeout { .. }), "{text}");
    for part in ["per-node upgrade", "kube-system/upgrade-node-a", "node-a"] {
        assert!(text.contains(part), "{text}");
    }
}

#[test]
fn delete_of_our_job_retries_a_status_conflict_at_the_new_version() {
    let mut m = machine_waiting(Mode::Run);
    m.step(secs(9), Obs::Changed(Change::Applied(complete("ours", 6))));
    assert_eq!(
        m.step(secs(9), Obs::Failed(ApiError::conflict("rv")))
            .intent,
        Intent::GetJob
    );
    assert_eq!(
        m.step(secs(9), Obs::Job(complete("ours", 7))).intent,
        exact("ours", 7)
    );
    assert_eq!(
        m.step(secs(9), Obs::Failed(ApiError::not_found("gone")))
            .intent,
        finish_ok(0, None)
    );
}

// --- a Pod deleted by another actor: its exit is no answer ------------------------------------

/// A machine that saw ours fail (BackoffLimitExceeded) and listed its Pods.
fn machine_failed(mode: Mode) -> Machine {
    let mut m = machine_waiting(mode);
    let s = m.step(secs(9), Obs::Changed(Change::Applied(failed("ours", 6))));
    assert!(matches!(s.intent, Intent::ListPods { .. }), "{s:?}");
    m
}

#[test]
fn a_pod_deleted_or_disrupted_while_the_host_operation_ran_gives_no_exit_code() {
    let killed = pod("upgrade-node-a-x7k2p", "ours", "upgrade", Some(143));
    let evicted = pod("upgrade-node-a-x7k2p", "ours", "upgrade", Some(137));
    let rows = [
        (deleted(killed), "deletionTimestamp"),
        (
            disrupted(evicted, "EvictionByEvictionAPI", "Eviction API: evicting"),
            "DisruptionTarget: EvictionByEvictionAPI: Eviction API: evicting",
        ),
    ];
    for mode in [Mode::Run, Mode::ExitCode, Mode::ExitCodeLogs] {
        for (pod, cause) in rows.clone() {
            let mut m = machine_failed(mode.clone());
            // The deletion may be our Job's own (another actor deleting it): ours is re-read.
            assert_eq!(m.step(secs(9), Obs::Pods(vec![pod])).intent, Intent::GetJob);
            let e = err(m.step(secs(9), Obs::Job(failed("ours", 6))).intent);
            assert!(
                matches!(&e, Error::PodDeleted { pod, .. } if pod == "upgrade-node-a-x7k2p"),
                "{e}"
            );
            assert_eq!(e.exit_code(), None, "{e}");
            let text = e.to_string();
            for part in [
                "pod upgrade-node-a-x7k2p of",
                "kube-system/upgrade-node-a",
                "on node node-a",
                "deleted before the host operation ended",
                cause,
            ] {
                assert!(text.contains(part), "{part:?} not in {text}");
            }
        }
    }
}

/// `pod`'s container terminated as `exit` with `reason`.
fn with_reason(
    mut pod: k8s_openapi::api::core::v1::Pod,
    reason: &str,
) -> k8s_openapi::api::core::v1::Pod {
    let status = pod.status.as_mut().unwrap();
    let state = status.container_statuses.as_mut().unwrap()[0]
        .state
        .as_mut();
    state.unwrap().terminated.as_mut().unwrap().reason = Some(reason.into());
    pod
}

/// A node that reboots while our Job's program runs: the kubelet ends the Pod with
/// containerd's unknown exit (255, reason `Unknown`). That 255 is the runtime's, never the
/// program's answer, in every mode; a program that exits 255 by itself (reason `Error`) is
/// answered as any exit code.
#[test]
fn a_container_lost_in_a_reboot_of_its_node_gives_no_exit_code() {
    for mode in [Mode::Run, Mode::ExitCode, Mode::ExitCodeLogs] {
        let lost = with_reason(
            pod("upgrade-node-a-x7k2p", "ours", "upgrade", Some(255)),
            "Unknown",
        );
        let mut m = machine_failed(mode.clone());
        let e = err(m.step(secs(9), Obs::Pods(vec![lost])).intent);
        assert!(
            matches!(&e, Error::LostInReboot { pod, .. } if pod == "upgrade-node-a-x7k2p"),
            "{e}"
        );
        assert_eq!(e.exit_code(), None, "{e}");
        let text = e.to_string();
        for part in [
            "pod upgrade-node-a-x7k2p of",
            "kube-system/upgrade-node-a",
            "on node node-a",
            "running when its node rebooted",
            "exit 255, reason Unknown",
            "may have done all, some or none of its work",
        ] {
            assert!(text.contains(part), "{part:?} not in {text}");
        }
    }
    let own = with_reason(pod("p", "ours", "upgrade", Some(255)), "Error");
    let mut m = machine_failed(Mode::ExitCode);
    assert_eq!(
        m.step(secs(9), Obs::Pods(vec![own])).intent,
        finish_ok(255, None)
    );
}

// --- the node: NotReady at the bound, deleted while we wait ------------------------------------

#[test]
fn the_timeout_at_the_bound_says_when_the_node_is_not_ready() {
    let mut m = machine_waiting(Mode::Run);
    let e = err(m
        .step(bound(), Obs::TimedOut(Ok(Box::new(node(false)))))
        .intent);
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    let text = e.to_string();
    for part in [
        "to finish",
        "node node-a is NotReady",
        "NodeStatusUnknown: Kubelet stopped posting node status.",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    // A Ready node, or one that could not be read, adds nothing.
    for node in [
        Ok(Box::new(node(true))),
        Err(ApiError::forbidden("nodes \"node-a\" is forbidden")),
    ] {
        let mut m = machine_waiting(Mode::Run);
        let e = err(m.step(bound(), Obs::TimedOut(node)).intent);
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        assert!(!e.to_string().contains("NotReady"), "{e}");
    }
    // Before the bound, a NotReady node is waited on.
    let mut m = machine_waiting(Mode::Run);
    let s = m.step(secs(30), Obs::TimedOut(Ok(Box::new(node(false)))));
    assert_eq!(s.intent, wait(3, bound() - secs(30)));
    // The guard, waiting for an earlier Job still running, says it too.
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Job(running("old", 4)));
    let e = err(m
        .step(bound(), Obs::TimedOut(Ok(Box::new(node(false)))))
        .intent);
    let text = e.to_string();
    assert!(
        text.contains("left in place); node node-a is NotReady"),
        "{text}"
    );
}

#[test]
fn the_node_deleted_while_our_job_waits_ends_the_run_at_once() {
    let gone = || ApiError::not_found("nodes \"node-a\" not found");
    // Seen when a wait times out: the loop read the node then.
    let mut m = machine_waiting(Mode::ExitCode);
    let e = err(m.step(secs(30), Obs::TimedOut(Err(gone()))).intent);
    assert!(
        matches!(&e, Error::NodeDeleted { node, what, .. } if node == "node-a" && what == "to finish"),
        "{e}"
    );
    assert!(e.to_string().starts_with("node node-a was deleted"), "{e}");

    // Seen when the Job reports its Pod no longer ready: the node is read at once.
    let mut m = machine_waiting(Mode::ExitCode);
    let s = m.step(secs(50), Obs::Changed(Change::Applied(unready("ours", 4))));
    assert_eq!(s.intent, Intent::GetNode);
    let e = err(m.step(secs(50), Obs::Failed(gone())).intent);
    assert!(matches!(&e, Error::NodeDeleted { .. }), "{e}");

    // A NotReady node is said once and waited on; a failed read is no reason to stop.
    let mut m = machine_waiting(Mode::ExitCode);
    m.step(secs(50), Obs::Changed(Change::Applied(unready("ours", 4))));
    let s = m.step(secs(50), Obs::Node(Box::new(node(false))));
    assert_eq!(s.intent, wait(4, bound() - secs(50)));
    assert_eq!(s.notes.len(), 1);
    assert_eq!(s.notes[0].level, Level::Warn);
    assert!(
        s.notes[0].message.contains("node node-a is NotReady"),
        "{:?}",
        s.notes
    );
    let mut m = machine_waiting(Mode::ExitCode);
    m.step(secs(50), Obs::Changed(Change::Applied(unready("ours", 4))));
    let s = m.step(
        secs(50),
        Obs::Failed(ApiError::transient(503, "unavailable")),
    );
    assert_eq!(s.intent, wait(4, bound() - secs(50)));

    // Before any Pod: the same, at the first podless timeout.
    let mut m = machine(Mode::Run);
    m.step(T0, Obs::Failed(ApiError::not_found("not found")));
    m.step(T0, Obs::Job(job("ours", 1)));
    let e = err(m.step(POLL_INTERVAL, Obs::TimedOut(Err(gone()))).intent);
    assert!(
        matches!(&e, Error::NodeDeleted { what, .. } if what == "to start a pod"),
        "{e}"
    );
}

// --- our finished Job deleted by another actor before its Pod was read -------------------------

#[test]
fn our_finished_job_deleted_by_another_actor_before_its_pod_was_read_says_so() {
    let deleted_ours = |e: &Error| {
        matches!(e, Error::Vanished { uid, detail, .. }
            if uid == "ours" && detail.contains("deleted by another actor"))
    };
    // The Job and its Pod are gone (another runner's guard deleted it in the foreground).
    for reread in [
        Obs::Failed(ApiError::not_found(
            "jobs.batch \"upgrade-node-a\" not found",
        )),
        Obs::Job(deleting(failed("ours", 7))),
        Obs::Job(running("theirs", 9)),
    ] {
        let mut m = machine_failed(Mode::ExitCode);
        assert_eq!(m.step(secs(9), Obs::Pods(vec![])).intent, Intent::GetJob);
        let e = err(m.step(secs(9), reread).intent);
        assert!(deleted_ours(&e), "{e}");
        assert!(!e.to_string().contains("BackoffLimitExceeded"), "{e}");
    }
    // Its Pod still listed, being deleted with it.
    let mut m = machine_failed(Mode::ExitCode);
    let going = deleted(pod("p", "ours", "upgrade", Some(3)));
    assert_eq!(
        m.step(secs(9), Obs::Pods(vec![going])).intent,
        Intent::GetJob
    );
    let e = err(m
        .step(secs(9), Obs::Job(deleting(failed("ours", 7))))
        .intent);
    assert!(deleted_ours(&e), "{e}");
    // Ours still stands with no Pod: another actor deleted the Pod alone (and the kubelet
    // removed it once its container ended), taking its exit status; the Job's condition is
    // quoted.
    let mut m = machine_failed(Mode::ExitCode);
    m.step(secs(9), Obs::Pods(vec![]));
    let s = m.step(secs(9), Obs::Job(failed("ours", 6)));
    assert_eq!(s.intent, Intent::GetNode);
    let e = err(m.step(secs(9), Obs::Node(Box::default())).intent);
    assert!(matches!(e, Error::PodDeleted { .. }), "{e}");
    assert!(e.to_string().contains("BackoffLimitExceeded"), "{e}");
    assert!(e.to_string().contains("another actor deleted it"), "{e}");
}

// --- a container exiting on its own at the deadline --------------------------------------------

#[test]
fn at_the_deadline_the_error_says_how_the_container_ended_and_nothing_else() {
    let run_to_deadline = |pod| {
        let mut m = machine_waiting(Mode::ExitCode);
        m.step(
            secs(600),
            Obs::Changed(Change::Applied(deadline_exceeded("ours", 6))),
        );
        err(m.step(secs(600), Obs::Pods(vec![pod])).intent)
    };
    // It exited by itself exactly as the deadline passed: nothing killed it.
    let e = run_to_deadline(pod("p", "ours", "upgrade", Some(0)));
    assert!(matches!(e, Error::FailedWithoutExit { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("DeadlineExceeded"), "{text}");
    assert!(text.contains("exited on its own with code 0"), "{text}");
    assert!(!text.contains("killed"), "{text}");
    // The Job controller deleted its Pod at the deadline: said so, the code not taken.
    let e = run_to_deadline(deleted(pod("p", "ours", "upgrade", Some(143))));
    assert!(matches!(e, Error::FailedWithoutExit { .. }), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("its pod was deleted at the deadline"),
        "{text}"
    );
    assert!(text.contains("exit code 143"), "{text}");
    assert!(!text.contains("on its own"), "{text}");
}

// --- the log never exceeds LOG_LIMIT_BYTES -----------------------------------------------------

#[test]
fn the_log_is_cut_on_a_char_boundary_at_or_below_the_limit() {
    let limit = usize::try_from(nodejob_core::LOG_LIMIT_BYTES).unwrap();
    let head = "a".repeat(limit - 1);
    // As a backend answers it: a two-byte character across the limit, kept whole; or cut and
    // decoded lossily into a replacement character (three bytes) past the limit.
    for answer in [
        format!("{head}é"),
        format!("{head}\u{FFFD}"),
        format!("{head}ab"),
    ] {
        let mut m = machine_waiting(Mode::ExitCodeLogs);
        let s = m.step(secs(9), Obs::Changed(Change::Applied(complete("ours", 6))));
        assert_eq!(s.intent, Intent::ReadLog { pod: "p".into() });
        assert_eq!(m.step(secs(9), Obs::Log(answer)).intent, exact("ours", 6));
        let Intent::Finish(Ok(Report { log: Some(log), .. })) =
            m.step(secs(9), Obs::Deleted).intent
        else {
            panic!("no log reported");
        };
        assert!(log.len() <= limit, "{} bytes", log.len());
        assert!(log.starts_with(&head));
    }
}

#[test]
fn log_text_never_exceeds_the_limit_nor_invents_a_character() {
    // (bytes, limit) -> text
    let rows: &[(&[u8], u64, &str)] = &[
        (b"done\n", 16, "done\n"),
        (b"abcdef", 4, "abcd"),
        // The cut falls inside a character: it is dropped, not replaced.
        ("abcé".as_bytes(), 4, "abc"),
        ("ab😀".as_bytes(), 5, "ab"),
        ("ab😀".as_bytes(), 6, "ab😀"),
        // The backend sent more than asked, the limit inside a character.
        ("a€b".as_bytes(), 3, "a"),
        // An invalid byte inside is replaced, and the text still fits.
        (&[b'a', 0xFF, b'b'], 3, "a"),
        (&[b'a', 0xFF, b'b', b'c', b'd'], 8, "a\u{FFFD}bcd"),
    ];
    for (bytes, limit, want) in rows {
        let text = nodejob_core::log_text(bytes, *limit);
        assert_eq!(&text, want, "{bytes:?} cut to {limit}");
        assert!(text.len() as u64 <= *limit);
    }
}

#[test]
fn stale_job_whose_delete_keeps_conflicting_is_left_alone_after_three_retries() {
    let mut m = machine(Mode::Run);
    assert_eq!(
        m.step(T0, Obs::Job(complete("old", 7))).intent,
        exact("old", 7)
    );
    for rv in 8..11 {
        let s = m.step(T0, Obs::Failed(ApiError::conflict("rv")));
        assert_eq!(s.intent, Intent::GetJob);
        assert_eq!(
            m.step(T0, Obs::Job(complete("old", rv))).intent,
            exact("old", rv)
        );
    }
    let e = err(m.step(T0, Obs::Failed(ApiError::conflict("rv"))).intent);
    assert!(matches!(e, Error::Contended { .. }), "{e}");
    assert!(e.to_string().contains("kept conflicting"), "{e}");
}

#[test]
fn a_pod_the_job_reported_terminating_while_it_ran_gives_no_exit_code() {
    // `kubectl delete pod`: the Job reports the Pod terminating (no deadline), then failed;
    // the Pod, read afterwards, shows the 143 of the SIGTERM and no longer a deletion mark
    // (or is gone altogether): neither is the host's answer.
    let mut terminating = running("ours", 7);
    let status = terminating.status.as_mut().unwrap();
    status.terminating = Some(1);
    status.active = Some(0);
    status.ready = Some(0);
    for pods in [vec![pod("p", "ours", "upgrade", Some(143))], vec![]] {
        let mut m = machine_waiting(Mode::ExitCode);
        m.step(secs(9), Obs::Changed(Change::Applied(terminating.clone())));
        m.step(secs(10), Obs::Changed(Change::Applied(failed("ours", 8))));
        assert_eq!(m.step(secs(10), Obs::Pods(pods)).intent, Intent::GetJob);
        let s = m.step(secs(10), Obs::Job(failed("ours", 8)));
        let e = match s.intent {
            Intent::GetNode => err(m.step(secs(10), Obs::Node(Box::default())).intent),
            other => err(other),
        };
        assert!(matches!(e, Error::PodDeleted { .. }), "{e}");
        assert!(!e.to_string().contains("code 143"), "{e}");
    }
    // Terminating at the deadline is the Job controller's own doing, not another actor's.
    let mut m = machine_waiting(Mode::ExitCode);
    let mut at_deadline = running("ours", 7);
    let status = at_deadline.status.as_mut().unwrap();
    status.terminating = Some(1);
    status.active = None;
    status.ready = None;
    status.failed = Some(1);
    status.conditions = Some(vec![cond(
        "FailureTarget",
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )]);
    m.step(secs(9), Obs::Changed(Change::Applied(at_deadline)));
    m.step(
        secs(10),
        Obs::Changed(Change::Applied(deadline_exceeded("ours", 8))),
    );
    let e = err(m
        .step(secs(10), Obs::Pods(vec![pod("p", "ours", "upgrade", None)]))
        .intent);
    assert!(matches!(e, Error::FailedWithoutExit { .. }), "{e}");
}
