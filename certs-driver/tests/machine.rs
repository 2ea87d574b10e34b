//! Table tests of the per-node machine: `(task, observations) -> intents`, no I/O at all.

mod support;

use certs_driver::{
    Answer, CaPhase, CaStatus, CaStep, Cause, Failure, FailureKind, Fingerprint, Gone, Intent,
    Leftover, Mark, NodeMachine, NodeResult, Observation as Obs, Own, Plan, Step, Stepped, Task,
    Verified, Watched,
};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use nodejob_core::runner::Report;
use support::{new_ca, plan, plan_spec};

const NODE: &str = "w-1";
const OLD: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn rotation() -> Plan {
    plan(plan_spec(&new_ca()))
}

fn fp(s: &str) -> Fingerprint {
    Fingerprint::parse(s).unwrap()
}

/// A node trusting `trusted`, its leaves issued by `issuer`.
fn status(phase: CaPhase, trusted: &[&Fingerprint], issuer: &Fingerprint) -> CaStatus {
    CaStatus {
        phase,
        trusted: trusted.iter().map(|&f| f.clone()).collect(),
        issuer: issuer.clone(),
    }
}

/// Our Job of uid `uid`: running (`None`), or with this terminal condition; being deleted or
/// not.
fn job(uid: &str, condition: Option<&str>, deleting: bool) -> Option<Box<Job>> {
    Some(Box::new(Job {
        metadata: ObjectMeta {
            uid: Some(uid.into()),
            deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(JobStatus {
            conditions: condition.map(|c| {
                vec![JobCondition {
                    type_: c.into(),
                    status: "True".into(),
                    ..JobCondition::default()
                }]
            }),
            ..JobStatus::default()
        }),
    }))
}

fn exited(uid: &str, exit_code: i32, log: Option<&str>) -> Obs {
    Obs::Host(Ok(Report {
        uid: uid.into(),
        exit_code,
        log: log.map(str::to_string),
        resource_version: None,
    }))
}

fn failed(step: Step) -> Failure {
    match step.intent {
        Intent::Fail(f) => f,
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn interrupted(step: Step) -> (CaStep, String) {
    match step.intent {
        Intent::Done(Err(NodeResult::Interrupted { step, why })) => (step, why),
        other => panic!("expected an interruption, got {other:?}"),
    }
}

/// A phase's machine for `step` on a node that reported `reported`, started: reading our Job.
fn phase(plan: &Plan, step: CaStep, reported: Option<CaStatus>) -> NodeMachine<'_> {
    let task = Task::Phase {
        step,
        status: reported,
        took: false,
        also: vec![],
        absent: false,
        ahead: false,
    };
    let mut m = NodeMachine::new(plan, NODE, task);
    assert_eq!(m.start().intent, Intent::FindJob { step });
    assert_eq!(
        m.in_flight(),
        None,
        "reading our Job is not a step under way"
    );
    m
}

/// `m`, told no Job of ours is there: its host Job is created at once (the Lease is read
/// right before the create by the hands performing it, not by a turn of the machine's).
fn hosting(m: &mut NodeMachine<'_>, step: CaStep) {
    let next = m.step(Obs::Job(None));
    assert_eq!(m.in_flight(), Some(step));
    let (also, keep) = (vec![], step == CaStep::Issue);
    let host = Intent::Host {
        step,
        adopt: None,
        also,
        keep,
        known_free: true,
    };
    assert_eq!(next.intent, host);
    assert_eq!(next.marks, vec![Mark::Started(step)]);
}

/// The stage Job created (not adopted), its name known free to the runner or not.
fn creates(known_free: bool) -> Intent {
    Intent::Host {
        step: CaStep::Stage,
        adopt: None,
        also: vec![],
        keep: false,
        known_free,
    }
}

/// A node still on the old CA alone.
fn idle() -> CaStatus {
    status(CaPhase::Idle, &[&fp(OLD)], &fp(OLD))
}

// --- a phase's step -----------------------------------------------------------------------------

#[test]
fn a_step_not_passed_creates_its_host_job_with_no_lease_turn_before_it() {
    let plan = rotation();
    let mut m = phase(&plan, CaStep::Stage, Some(idle()));
    hosting(&mut m, CaStep::Stage);
}

#[test]
fn a_step_passed_with_no_job_of_ours_writes_nothing_and_is_skipped_once() -> Result<(), String> {
    let plan = rotation();
    let new = plan.fingerprint().clone();
    let staged = status(CaPhase::Staged, &[&fp(OLD), &new], &fp(OLD));
    // (took the step already in this run, marks expected)
    let why = format!("passed already: it reports {}", staged.describe());
    for (took, marks) in [
        (false, vec![Mark::Own(Own::Skipped(CaStep::Stage, why))]),
        (true, vec![]),
    ] {
        let task = Task::Phase {
            step: CaStep::Stage,
            status: Some(staged.clone()),
            took,
            also: vec![],
            absent: false,
            ahead: false,
        };
        let mut m = NodeMachine::new(&plan, NODE, task);
        m.start();
        let step = m.step(Obs::Job(None));
        assert_eq!(step.intent, Intent::Done(Ok(Answer::Acted(false))));
        if step.marks != marks {
            return Err(format!("took {took}: {:?}", step.marks));
        }
    }
    Ok(())
}

#[test]
fn a_step_whose_job_the_run_listed_absent_is_not_read_again() {
    let plan = rotation();
    let new = plan.fingerprint().clone();
    let staged = status(CaPhase::Staged, &[&fp(OLD), &new], &fp(OLD));
    // (what the node reported) -> the first intent: the Job created, its name known free to
    // the runner too (the Job created at once), or nothing at all (passed).
    let table = [
        (idle(), creates(true)),
        (staged, Intent::Done(Ok(Answer::Acted(false)))),
    ];
    for (i, (reported, want)) in table.into_iter().enumerate() {
        let task = Task::Phase {
            step: CaStep::Stage,
            status: Some(reported),
            took: false,
            also: vec![],
            absent: true,
            ahead: false,
        };
        let mut m = NodeMachine::new(&plan, NODE, task);
        assert_eq!(m.start().intent, want, "row {i}");
    }
}

/// The status after a step recorded for a preview to show: not the mark of issue, not with
/// the condition that says the node rotated.
fn recorded(status: CaStatus) -> Intent {
    Intent::Record {
        status,
        mark: false,
        rotated: false,
    }
}

/// The end of a step that answered where the node stood (if it said) and stands, with no
/// verify.
fn answered(before: Option<CaStatus>, status: CaStatus) -> Intent {
    let stepped = Stepped {
        before,
        status,
        verified: None,
    };
    Intent::Done(Ok(Answer::Stepped(stepped)))
}

/// A stage on a node the run did not read (no run of the rotation has begun anywhere).
fn unread_stage(plan: &Plan) -> NodeMachine<'_> {
    let task = Task::Phase {
        step: CaStep::Stage,
        status: None,
        took: false,
        also: vec![],
        absent: true,
        ahead: true,
    };
    NodeMachine::new(plan, NODE, task)
}

#[test]
fn a_stage_on_a_node_not_read_writes_its_mark_before_its_job_and_reads_where_it_stood() {
    let plan = rotation();
    let after = staged(&plan);
    let mut m = unread_stage(&plan);
    // The mark first, no Lease turn before it, nothing under way yet.
    let mark = m.start();
    assert_eq!(
        mark.intent,
        Intent::MarkAhead {
            step: CaStep::Stage
        }
    );
    assert_eq!(mark.marks, vec![]);
    assert_eq!(m.in_flight(), None, "the mark is not a step under way");
    // Written: the Job, created at once.
    let host = m.step(Obs::Written);
    assert_eq!(host.intent, creates(true));
    assert_eq!(host.marks, vec![Mark::Started(CaStep::Stage)]);
    // Its output begins with where the node stood and ends with where it stands.
    let log = format!(
        "{}stratum: staged it\n{}",
        status_line(&idle()),
        status_line(&after)
    );
    let record = m.step(exited("j", 0, Some(&log)));
    let intent = recorded(after.clone());
    assert_eq!(record.intent, intent);
    let done = m.step(Obs::Written);
    assert_eq!(done.intent, answered(Some(idle()), after));
}

#[test]
fn a_stage_whose_mark_could_not_be_written_fails_the_node_with_no_job() {
    let plan = rotation();
    let mut m = unread_stage(&plan);
    m.start();
    let why = Cause::api("patching node w-0: the server is currently unable to handle the request");
    let f = failed(m.step(Obs::Failed(why)));
    assert_eq!(f.step, CaStep::Stage);
    assert_eq!(f.kind, FailureKind::Api);
    assert!(
        f.message.contains("unable to handle")
            && f.message.contains("no `carotate stage` job was created"),
        "{}",
        f.message
    );
}

#[test]
fn a_stage_on_a_node_not_read_that_finds_a_failed_job_of_ours_marks_then_replaces_it() {
    let plan = rotation();
    let task = Task::Phase {
        step: CaStep::Stage,
        status: None,
        took: false,
        also: vec![],
        absent: false,
        ahead: true,
    };
    let mut m = NodeMachine::new(&plan, NODE, task);
    assert_eq!(
        m.start().intent,
        Intent::FindJob {
            step: CaStep::Stage
        }
    );
    let mark = m.step(Obs::Job(job("j", Some("Failed"), false)));
    assert_eq!(
        mark.intent,
        Intent::MarkAhead {
            step: CaStep::Stage
        }
    );
    assert_eq!(m.step(Obs::Written).intent, creates(false));
}

#[test]
fn a_job_of_ours_is_adopted_without_a_lease_check_and_a_failed_one_is_run_again_or_kept() {
    let plan = rotation();
    let new = plan.fingerprint().clone();
    let staged = status(CaPhase::Staged, &[&fp(OLD), &new], &fp(OLD));
    let adopt = Intent::Host {
        step: CaStep::Stage,
        adopt: Some("j".into()),
        also: vec![],
        keep: false,
        known_free: false,
    };
    let kept = Intent::Done(Ok(Answer::Acted(false)));
    // (our Job, what the node reports) -> intent
    let table = [
        (job("j", None, false), idle(), adopt.clone()),
        (job("j", Some("Complete"), false), idle(), adopt.clone()),
        // Running though the node reports the step passed: still adopted, never replaced.
        (job("j", None, false), staged.clone(), adopt),
        // Run again: the runner reads the failed Job first, to replace it exactly.
        (job("j", Some("Failed"), false), idle(), creates(false)),
        (job("j", None, true), idle(), creates(false)),
        (
            job("j", Some("Failed"), false),
            staged.clone(),
            kept.clone(),
        ),
    ];
    for (i, (ours, reported, want)) in table.into_iter().enumerate() {
        let mut m = phase(&plan, CaStep::Stage, Some(reported));
        let step = m.step(Obs::Job(ours));
        assert_eq!(step.intent, want, "row {i}");
        if want == kept {
            assert!(
                matches!(&step.marks[0], Mark::Note(n) if n.contains("left for inspection")),
                "row {i}: {:?}",
                step.marks
            );
        }
    }
}

#[test]
fn an_unreadable_job_fails_the_node_with_no_event() {
    let plan = rotation();
    let mut m = phase(&plan, CaStep::Stage, Some(idle()));
    let step = m.step(Obs::Failed(Cause::api("reading job kube-system/x: 500")));
    match step.intent {
        Intent::Done(Err(NodeResult::Failed(f))) => {
            assert_eq!(f.step, CaStep::Stage);
            assert_eq!(f.message, "reading job kube-system/x: 500");
        }
        other => panic!("expected a failure without an Event, got {other:?}"),
    }
}

#[test]
fn a_new_host_job_is_the_step_in_flight_so_a_lease_lost_before_it_interrupts_the_node_there() {
    let plan = rotation();
    let mut m = phase(&plan, CaStep::Finalize, Some(idle()));
    // The hands read the Lease right before the create: lost then, the node is interrupted at
    // the step the machine is at, which is the finalize it was about to start.
    let host = m.step(Obs::Job(None));
    assert!(
        matches!(
            host.intent,
            Intent::Host {
                step: CaStep::Finalize,
                adopt: None,
                ..
            }
        ),
        "{:?}",
        host.intent
    );
    assert_eq!(host.marks, vec![Mark::Started(CaStep::Finalize)]);
    assert_eq!(m.in_flight(), Some(CaStep::Finalize));
    assert_eq!(m.current_step(), CaStep::Finalize);
}

#[test]
fn a_host_job_that_exited_non_zero_fails_the_node_and_keeps_its_job() {
    let plan = rotation();
    let mut m = phase(&plan, CaStep::Stage, Some(idle()));
    hosting(&mut m, CaStep::Stage);
    let log: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    let f = failed(m.step(exited("j", 4, Some(&log))));
    assert_eq!(f.step, CaStep::Stage);
    assert_eq!((f.kind, f.exit_code), (FailureKind::Host, Some(4)));
    let job = plan.job_name(CaStep::Stage, NODE);
    assert_eq!(
        f.message,
        format!("`carotate stage` exited 4 on node {NODE}; job {job} is left for inspection")
    );
    let tail = f.log_tail.unwrap_or_default();
    assert!(
        tail.contains("line 30") && !tail.contains("line 2\n"),
        "{tail}"
    );
    assert_eq!(
        m.in_flight(),
        Some(CaStep::Stage),
        "its Warning is written in flight"
    );
}

/// The line `carotate status` prints for `status`, as a phase's output ends with it.
fn status_line(status: &CaStatus) -> String {
    let trusted: Vec<String> = status.trusted.iter().map(|f| format!("\"{f}\"")).collect();
    format!(
        "{{\"phase\": \"{}\", \"trusted\": [{}], \"issuer\": \"{}\"}}\n",
        status.phase,
        trusted.join(", "),
        status.issuer
    )
}

/// A node that trusts the new CA beside the old one, still issued by the old one.
fn staged(plan: &Plan) -> CaStatus {
    let new = plan.fingerprint().clone();
    status(CaPhase::Staged, &[&fp(OLD), &new], &fp(OLD))
}

#[test]
fn a_step_that_exited_0_records_the_status_it_printed_then_is_finished() {
    let plan = rotation();
    let after = staged(&plan);
    let mut m = phase(&plan, CaStep::Stage, Some(idle()));
    // Its Job is not kept: the runner deletes it once it read its result.
    hosting(&mut m, CaStep::Stage);
    let log = format!("stratum: staged it\n{}", status_line(&after));
    let record = m.step(exited("j", 0, Some(&log)));
    let intent = recorded(after.clone());
    assert_eq!(record.intent, intent);
    assert_eq!(record.marks, vec![Mark::Own(Own::Reported(after.clone()))]);
    assert_eq!(m.in_flight(), Some(CaStep::Stage));
    let done = m.step(Obs::Written);
    assert_eq!(
        done.marks,
        vec![Mark::Finished(
            CaStep::Stage,
            "`carotate stage` exited 0".into()
        )]
    );
    assert_eq!(done.intent, answered(None, after));
}

#[test]
fn a_step_whose_output_has_no_status_line_reads_carotate_status_under_the_lease() {
    let plan = rotation();
    let after = staged(&plan);
    // (its log: none read, nothing, garbage last, the status line not last)
    let logs = [
        None,
        Some(String::new()),
        Some(format!("{}{{\"phase\": \"iss", status_line(&after))),
        Some(format!("{}stratum: staged it\n", status_line(&after))),
    ];
    for (i, log) in logs.into_iter().enumerate() {
        let mut m = phase(&plan, CaStep::Stage, Some(idle()));
        hosting(&mut m, CaStep::Stage);
        let fence = m.step(exited("j", 0, log.as_deref()));
        assert_eq!(fence.intent, Intent::CheckLease, "row {i}");
        assert!(
            matches!(&fence.marks[..], [Mark::Note(n)] if n.contains("no status line")),
            "row {i}: {:?}",
            fence.marks
        );
        assert_eq!(m.in_flight(), Some(CaStep::Status), "row {i}");
        assert_eq!(m.step(Obs::LeaseHeld).intent, Intent::ReadStatus, "row {i}");
        let read = m.step(Obs::Status(Ok((0, status_line(&after)))));
        assert_eq!(read.intent, recorded(after.clone()), "row {i}");
        assert_eq!(m.in_flight(), Some(CaStep::Stage), "row {i}");
    }
    // What the read says is read strictly: garbage fails the node at the read.
    let mut m = phase(&plan, CaStep::Stage, Some(idle()));
    hosting(&mut m, CaStep::Stage);
    m.step(exited("j", 0, None));
    m.step(Obs::LeaseHeld);
    let f = failed(m.step(Obs::Status(Ok((0, "garbage".into())))));
    assert_eq!((f.step, f.exit_code), (CaStep::Status, Some(0)));
}

#[test]
fn a_status_that_could_not_be_recorded_after_a_step_other_than_issue_is_a_note() {
    let plan = rotation();
    let after = staged(&plan);
    let mut m = phase(&plan, CaStep::Stage, Some(idle()));
    hosting(&mut m, CaStep::Stage);
    m.step(exited("j", 0, Some(&status_line(&after))));
    let done = m.step(Obs::Failed(Cause::api("could not record the status: 500")));
    assert_eq!(
        done.marks,
        vec![
            Mark::Note("could not record the status: 500".into()),
            Mark::Finished(CaStep::Stage, "`carotate stage` exited 0".into())
        ]
    );
    assert!(
        matches!(done.intent, Intent::Done(Ok(Answer::Stepped(_)))),
        "{:?}",
        done.intent
    );
}

#[test]
fn a_job_that_could_not_be_deleted_fails_the_node() {
    let plan = rotation();
    let new = plan.fingerprint().clone();
    let issued = status(CaPhase::Issued, &[&fp(OLD), &new], &new);
    let mut m = phase(&plan, CaStep::Issue, Some(staged(&plan)));
    hosting(&mut m, CaStep::Issue);
    m.step(exited("j", 0, Some(&status_line(&issued))));
    m.step(Obs::Watched(Watched::Met));
    m.step(Obs::Watched(Watched::Met));
    m.step(Obs::Written);
    let f = failed(m.step(Obs::Failed(Cause::api("deleting job x: 500"))));
    assert_eq!(
        (f.step, f.message.as_str()),
        (CaStep::Issue, "deleting job x: 500")
    );
}

#[test]
fn exit_0_with_its_log_unread_is_taken_from_the_succeeded_job_never_a_new_one() {
    let plan = rotation();
    let unread = Obs::Unread("the log of job x could not be read".into());
    // (our Job as read then) -> intent
    let table = [
        (
            job("j", Some("Complete"), false),
            Intent::WaitJob {
                step: CaStep::Stage,
                uid: "j".into(),
            },
        ),
        (
            job("j", None, false),
            Intent::Fail(Failure {
                step: CaStep::Stage,
                kind: FailureKind::Job,
                message: "the log of job x could not be read".into(),
                exit_code: None,
                log_tail: None,
            }),
        ),
        (
            None,
            Intent::Fail(Failure {
                step: CaStep::Stage,
                kind: FailureKind::Job,
                message: "the log of job x could not be read".into(),
                exit_code: None,
                log_tail: None,
            }),
        ),
    ];
    for (i, (ours, want)) in table.into_iter().enumerate() {
        let mut m = phase(&plan, CaStep::Stage, Some(idle()));
        hosting(&mut m, CaStep::Stage);
        let find = m.step(unread.clone());
        assert_eq!(
            find.intent,
            Intent::FindJob {
                step: CaStep::Stage
            },
            "row {i}"
        );
        assert_eq!(m.in_flight(), Some(CaStep::Stage), "row {i}");
        assert_eq!(m.step(Obs::Job(ours)).intent, want, "row {i}");
    }
    // Its exit code alone then answers: 0 goes on to read the status it did not print.
    let mut m = phase(&plan, CaStep::Stage, Some(idle()));
    hosting(&mut m, CaStep::Stage);
    m.step(unread);
    m.step(Obs::Job(job("j", Some("Complete"), false)));
    assert_eq!(m.step(exited("j", 0, None)).intent, Intent::CheckLease);
    assert_eq!(m.step(Obs::LeaseHeld).intent, Intent::ReadStatus);
}

// --- issue --------------------------------------------------------------------------------------

/// An issue machine whose host Job exited 0: waiting for the node to go NotReady.
fn issued(plan: &Plan) -> NodeMachine<'_> {
    let new = plan.fingerprint().clone();
    let staged = status(CaPhase::Staged, &[&fp(OLD), &new], &fp(OLD));
    let mut m = phase(plan, CaStep::Issue, Some(staged));
    hosting(&mut m, CaStep::Issue);
    assert_eq!(
        m.step(exited("j", 0, Some(""))).intent,
        Intent::WaitNotReady
    );
    m
}

#[test]
fn issue_waits_for_the_restart_reads_and_records_the_status_then_deletes_its_job() {
    let plan = rotation();
    let new = plan.fingerprint().clone();
    let mut m = issued(&plan);
    // Staying Ready through the grace is taken as restarted.
    assert_eq!(
        m.step(Obs::Watched(Watched::TimedOut)).intent,
        Intent::WaitReady
    );
    assert_eq!(
        m.step(Obs::Watched(Watched::Met)).intent,
        Intent::CheckLease
    );
    assert_eq!(m.in_flight(), Some(CaStep::Status));
    assert_eq!(m.step(Obs::LeaseHeld).intent, Intent::ReadStatus);
    let line = format!(r#"{{"phase":"issued","trusted":["{OLD}","{new}"],"issuer":"{new}"}}"#);
    let reported = status(CaPhase::Issued, &[&fp(OLD), &new], &new);
    let record = m.step(Obs::Status(Ok((0, format!("{line}\n")))));
    assert_eq!(
        record.intent,
        Intent::Record {
            status: reported.clone(),
            mark: true,
            rotated: false,
        }
    );
    assert_eq!(record.marks, vec![Mark::Own(Own::Reported(reported))]);
    assert_eq!(
        m.in_flight(),
        Some(CaStep::Issue),
        "the read is done: issue again"
    );
    // The record checked the Lease right before it: the delete follows at once.
    let delete = Intent::DeleteJob {
        step: CaStep::Issue,
        uid: "j".into(),
        gone: Gone::Later,
    };
    assert_eq!(m.step(Obs::Written).intent, delete);
    let done = m.step(Obs::Written);
    let message = "`carotate issue` exited 0; its components restarted and it is Ready";
    assert_eq!(
        done.marks,
        vec![Mark::Finished(CaStep::Issue, message.into())]
    );
    let stepped = Stepped {
        before: None,
        status: status(CaPhase::Issued, &[&fp(OLD), &new], &new),
        verified: None,
    };
    assert_eq!(done.intent, Intent::Done(Ok(Answer::Stepped(stepped))));
}

#[test]
fn issue_verifies_in_its_own_job_and_records_the_status_it_printed_once_ready() {
    let plan = rotation();
    let new = plan.fingerprint().clone();
    let task = Task::Phase {
        step: CaStep::Issue,
        status: Some(staged(&plan)),
        took: false,
        also: vec![fp(OLD)],
        absent: false,
        ahead: false,
    };
    let after = status(CaPhase::Issued, &[&fp(OLD), &new], &new);
    // (the verdict line it printed) -> what the answer says verify said
    let verdict = |code: i32, expect: &[&str]| {
        let expect: Vec<String> = expect.iter().map(|e| format!("\"{e}\"")).collect();
        format!(
            "{{\"verify\": {code}, \"expect\": [{}]}}\n",
            expect.join(", ")
        )
    };
    let table = [
        (
            verdict(0, &[new.as_str(), OLD]),
            Some((vec![fp(OLD)], Verified::Exit(0))),
        ),
        (
            verdict(3, &[new.as_str()]),
            Some((vec![], Verified::Exit(3))),
        ),
        // Not a verify of the new CA, or not a verdict at all: not an answer.
        (verdict(0, &[OLD, new.as_str()]), None),
        (verdict(0, &["sha256:ab"]), None),
        ("stratum: ok\n".to_string(), None),
    ];
    for (i, (line, verified)) in table.into_iter().enumerate() {
        let mut m = NodeMachine::new(&plan, NODE, task.clone());
        m.start();
        let host = m.step(Obs::Job(None)).intent;
        let also = vec![fp(OLD)];
        assert_eq!(
            host,
            Intent::Host {
                step: CaStep::Issue,
                adopt: None,
                also,
                keep: true,
                known_free: true,
            },
            "row {i}"
        );
        let log = format!("stratum: leaves now issued\n{line}{}", status_line(&after));
        assert_eq!(
            m.step(exited("j", 0, Some(&log))).intent,
            Intent::WaitNotReady
        );
        m.step(Obs::Watched(Watched::Met));
        // Ready again: the status it printed is recorded, with no `carotate status` Job.
        let record = m.step(Obs::Watched(Watched::Met));
        assert_eq!(
            record.intent,
            Intent::Record {
                status: after.clone(),
                mark: true,
                rotated: false,
            },
            "row {i}"
        );
        assert_eq!(m.in_flight(), Some(CaStep::Issue), "row {i}");
        let delete = Intent::DeleteJob {
            step: CaStep::Issue,
            uid: "j".into(),
            gone: Gone::Later,
        };
        assert_eq!(m.step(Obs::Written).intent, delete, "row {i}");
        let done = m.step(Obs::Written);
        let stepped = Stepped {
            before: None,
            status: after.clone(),
            verified,
        };
        assert_eq!(
            done.intent,
            Intent::Done(Ok(Answer::Stepped(stepped))),
            "row {i}"
        );
    }
}

#[test]
fn issue_on_a_node_deleted_or_never_ready_again_fails_it_at_issue() {
    let plan = rotation();
    // (answer to the restart wait, answer to the ready wait) -> what the failure says, and
    // its kind
    let table = [
        (
            Watched::Deleted,
            None,
            "was deleted from the cluster",
            FailureKind::Node,
        ),
        (
            Watched::Met,
            Some(Watched::Deleted),
            "was deleted from the cluster",
            FailureKind::Node,
        ),
        (
            Watched::TimedOut,
            Some(Watched::TimedOut),
            "did not come back Ready within 10m",
            FailureKind::TimedOut,
        ),
        (
            Watched::Failed("watching node w-1: 500".into()),
            Some(Watched::Failed("watching node w-1: 503".into())),
            "watching node w-1: 503",
            FailureKind::Api,
        ),
    ];
    for (i, (restart, ready, says, kind)) in table.into_iter().enumerate() {
        let mut m = issued(&plan);
        let mut step = m.step(Obs::Watched(restart));
        if let Some(ready) = ready {
            assert_eq!(step.intent, Intent::WaitReady, "row {i}");
            step = m.step(Obs::Watched(ready));
        }
        let f = failed(step);
        assert_eq!((f.step, f.kind), (CaStep::Issue, kind), "row {i}");
        assert!(f.message.contains(says), "row {i}: {}", f.message);
    }
}

#[test]
fn issue_whose_status_cannot_be_recorded_fails_keeping_its_job_unless_the_lease_is_lost() {
    let plan = rotation();
    let new = plan.fingerprint().clone();
    let line = format!(r#"{{"phase":"issued","trusted":["{new}"],"issuer":"{new}"}}"#);
    let recording = |m: &mut NodeMachine<'_>| {
        m.step(Obs::Watched(Watched::TimedOut));
        m.step(Obs::Watched(Watched::Met));
        m.step(Obs::LeaseHeld);
        m.step(Obs::Status(Ok((0, line.clone()))));
        let step = m.step(Obs::Failed(Cause::api("could not record the status: 404")));
        assert_eq!(step.intent, Intent::CheckLease);
    };
    let mut m = issued(&plan);
    recording(&mut m);
    let f = failed(m.step(Obs::LeaseHeld));
    let job = plan.job_name(CaStep::Issue, NODE);
    assert_eq!(f.step, CaStep::Issue);
    assert_eq!(
        f.message,
        format!(
            "could not record the status: 404; the issue job {job} is kept as the mark that \
             issue began on node {NODE}"
        )
    );
    let mut m = issued(&plan);
    recording(&mut m);
    let (step, _) = interrupted(m.step(Obs::LeaseLost(nodejob_roll::LeaseLost {
        why: "taken".into(),
    })));
    assert_eq!(step, CaStep::Issue);
}

// --- reading a status, verify -------------------------------------------------------------------

#[test]
fn a_status_read_is_fenced_and_anything_but_one_line_fails_the_node_at_status() {
    let plan = rotation();
    let new = plan.fingerprint().clone();
    let good = format!(r#"{{"phase":"staged","trusted":["{OLD}","{new}"],"issuer":"{OLD}"}}"#);
    // (what the read answered) -> the failure's exit code, or the status
    type Row = (Result<(i32, String), String>, Result<CaStatus, Option<i32>>);
    let table: Vec<Row> = vec![
        (
            Ok((0, good)),
            Ok(status(CaPhase::Staged, &[&fp(OLD), &new], &fp(OLD))),
        ),
        (Ok((0, "garbage".into())), Err(Some(0))),
        (Ok((2, "no such subcommand".into())), Err(Some(2))),
        (Err("pod deleted".into()), Err(None)),
    ];
    for (i, (read, want)) in table.into_iter().enumerate() {
        let mut m = NodeMachine::new(&plan, NODE, Task::Read);
        assert_eq!(m.start().intent, Intent::CheckLease, "row {i}");
        assert_eq!(m.in_flight(), Some(CaStep::Status), "row {i}");
        assert_eq!(m.step(Obs::LeaseHeld).intent, Intent::ReadStatus, "row {i}");
        let step = m.step(Obs::Status(read));
        match (step.intent, want) {
            (Intent::Done(Ok(Answer::Status(got))), Ok(want)) => assert_eq!(got, want, "row {i}"),
            (Intent::Fail(f), Err(code)) => {
                assert_eq!((f.step, f.exit_code), (CaStep::Status, code), "row {i}");
                assert!(f.message.contains(NODE), "row {i}: {}", f.message);
            }
            (got, want) => panic!("row {i}: {got:?}, expected {want:?}"),
        }
    }
    let mut m = NodeMachine::new(&plan, NODE, Task::Read);
    m.start();
    let (step, _) = interrupted(m.step(Obs::LeaseLost(nodejob_roll::LeaseLost {
        why: "taken".into(),
    })));
    assert_eq!(step, CaStep::Status);
}

#[test]
fn verify_answers_its_exit_code_and_a_lost_lease_blames_no_node() {
    let plan = rotation();
    let also = vec![fp(OLD)];
    let table = [
        (Obs::LeaseHeld, Some(Obs::Exit(Ok(3))), Verified::Exit(3)),
        (
            Obs::LeaseHeld,
            Some(Obs::Exit(Err("pod deleted".into()))),
            Verified::Error("pod deleted".into()),
        ),
        (
            Obs::LeaseLost(nodejob_roll::LeaseLost {
                why: "taken".into(),
            }),
            None,
            Verified::Error("the Lease was lost: taken".into()),
        ),
    ];
    for (i, (lease, exit, want)) in table.into_iter().enumerate() {
        let task = Task::Verify { also: also.clone() };
        let mut m = NodeMachine::new(&plan, NODE, task);
        assert_eq!(m.start().intent, Intent::CheckLease, "row {i}");
        assert_eq!(m.in_flight(), Some(CaStep::Verify), "row {i}");
        let mut step = m.step(lease);
        if let Some(exit) = exit {
            let verify = Intent::Verify { also: also.clone() };
            assert_eq!(step.intent, verify, "row {i}");
            step = m.step(exit);
        }
        assert_eq!(
            step.intent,
            Intent::Done(Ok(Answer::Verified(want))),
            "row {i}"
        );
    }
}

// --- settling leftovers -------------------------------------------------------------------------

const LEFTOVERS: [(CaStep, Leftover); 4] = [
    (CaStep::Stage, Leftover::Adopt),
    (CaStep::Issue, Leftover::Adopt),
    (CaStep::Finalize, Leftover::Adopt),
    (CaStep::Abort, Leftover::WaitOut),
];

#[test]
fn settling_reads_each_step_s_job_and_with_none_left_does_nothing() {
    let plan = rotation();
    let mut m = NodeMachine::new(&plan, NODE, Task::Settle(LEFTOVERS.to_vec()));
    let mut step = m.start();
    for (want, _) in LEFTOVERS {
        assert_eq!(step.intent, Intent::FindJob { step: want });
        assert_eq!(m.in_flight(), None);
        step = m.step(Obs::Job(None));
    }
    assert_eq!(step.intent, Intent::Done(Ok(Answer::Acted(false))));
}

#[test]
fn a_leftover_of_the_run_s_direction_is_adopted_and_then_the_next_step_is_read() {
    let plan = rotation();
    let mut m = NodeMachine::new(&plan, NODE, Task::Settle(LEFTOVERS.to_vec()));
    m.start();
    let adopt = m.step(Obs::Job(job("s", None, false)));
    assert_eq!(
        adopt.intent,
        Intent::Host {
            step: CaStep::Stage,
            adopt: Some("s".into()),
            also: vec![],
            keep: false,
            known_free: false,
        }
    );
    // Deleted by the runner once read: settled, with no status read (the run reads every node
    // next).
    let next = m.step(exited("s", 0, Some("")));
    assert_eq!(
        next.marks[0],
        Mark::Finished(CaStep::Stage, "`carotate stage` exited 0".into())
    );
    assert_eq!(
        next.intent,
        Intent::FindJob {
            step: CaStep::Issue
        }
    );
    m.step(Obs::Job(None));
    m.step(Obs::Job(None));
    assert_eq!(
        m.step(Obs::Job(None)).intent,
        Intent::Done(Ok(Answer::Acted(true)))
    );
}

#[test]
fn a_leftover_of_the_other_direction_is_waited_out_then_deleted_unless_it_failed() {
    let plan = rotation();
    let settle = Task::Settle(vec![(CaStep::Abort, Leftover::WaitOut)]);
    let wait = Intent::WaitJob {
        step: CaStep::Abort,
        uid: "a".into(),
    };
    // (our Job read after the wait) -> intent
    let table = [
        (job("a", Some("Complete"), false), Intent::CheckLease),
        // Replaced meanwhile, or gone: ours is done with; deleting it exactly is a no-op.
        (job("other", None, false), Intent::CheckLease),
        (None, Intent::CheckLease),
        (
            job("a", Some("Failed"), false),
            Intent::Done(Ok(Answer::Acted(true))),
        ),
    ];
    for (i, (after, want)) in table.into_iter().enumerate() {
        let mut m = NodeMachine::new(&plan, NODE, settle.clone());
        m.start();
        let step = m.step(Obs::Job(job("a", None, false)));
        assert_eq!(step.intent, wait, "row {i}");
        assert!(matches!(&step.marks[..], [Mark::Note(n)] if n.starts_with("waiting for")));
        assert_eq!(m.in_flight(), Some(CaStep::Abort), "row {i}");
        assert_eq!(
            m.step(exited("a", 0, None)).intent,
            Intent::FindJob {
                step: CaStep::Abort
            },
            "row {i}"
        );
        let step = m.step(Obs::Job(after));
        assert_eq!(step.intent, want, "row {i}");
        assert!(
            matches!(&step.marks[..], [Mark::Note(n)] if n.contains("ended: exited 0")),
            "row {i}: {:?}",
            step.marks
        );
        if want == Intent::CheckLease {
            let delete = Intent::DeleteJob {
                step: CaStep::Abort,
                uid: "a".into(),
                gone: Gone::Awaited,
            };
            assert_eq!(m.step(Obs::LeaseHeld).intent, delete, "row {i}");
            let done = m.step(Obs::Written);
            assert_eq!(
                done.intent,
                Intent::Done(Ok(Answer::Acted(true))),
                "row {i}"
            );
            assert_eq!(
                done.marks,
                vec![],
                "row {i}: a note, not a step of this run"
            );
        }
    }
    // Still running after the wait: nothing is done there.
    let mut m = NodeMachine::new(&plan, NODE, settle);
    m.start();
    m.step(Obs::Job(job("a", None, false)));
    m.step(Obs::Host(Err("timed out".into())));
    let f = failed(m.step(Obs::Job(job("a", None, false))));
    assert_eq!(f.step, CaStep::Abort);
    assert!(
        f.message.contains("has not ended (timed out)"),
        "{}",
        f.message
    );
}

#[test]
fn a_leftover_being_deleted_is_cleared_under_the_lease_and_is_not_a_step_in_flight() {
    let plan = rotation();
    let settle = Task::Settle(vec![(CaStep::Abort, Leftover::WaitOut)]);
    let mut m = NodeMachine::new(&plan, NODE, settle.clone());
    m.start();
    assert_eq!(
        m.step(Obs::Job(job("a", Some("Failed"), true))).intent,
        Intent::CheckLease
    );
    assert_eq!(m.in_flight(), None);
    let delete = Intent::DeleteJob {
        step: CaStep::Abort,
        uid: "a".into(),
        gone: Gone::Awaited,
    };
    assert_eq!(m.step(Obs::LeaseHeld).intent, delete);
    assert_eq!(m.in_flight(), None);
    assert_eq!(
        m.step(Obs::Written).intent,
        Intent::Done(Ok(Answer::Acted(true)))
    );
    let mut m = NodeMachine::new(&plan, NODE, settle);
    m.start();
    m.step(Obs::Job(job("a", Some("Failed"), true)));
    let (step, _) = interrupted(m.step(Obs::LeaseLost(nodejob_roll::LeaseLost {
        why: "taken".into(),
    })));
    assert_eq!(step, CaStep::Abort);
    // A failed leftover of the run's own direction is left for inspection.
    let settle = Task::Settle(vec![(CaStep::Stage, Leftover::Adopt)]);
    let mut m = NodeMachine::new(&plan, NODE, settle);
    m.start();
    assert_eq!(
        m.step(Obs::Job(job("s", Some("Failed"), false))).intent,
        Intent::Done(Ok(Answer::Acted(false)))
    );
}

#[test]
fn an_answer_the_machine_did_not_ask_for_fails_the_node_naming_it() {
    let plan = rotation();
    let mut m = phase(&plan, CaStep::Stage, Some(idle()));
    let f = failed(m.step(Obs::Written));
    assert_eq!(f.step, CaStep::Stage);
    assert!(
        f.message.starts_with("internal: unexpected answer"),
        "{}",
        f.message
    );
}
