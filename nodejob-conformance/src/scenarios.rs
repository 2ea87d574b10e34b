//! The scenario bodies. Each takes a fresh backend and returns what it found wrong.
//!
//! Durations are kept to seconds so the same bodies run in real time on a real control plane.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::watch::{From, Until, watch_until};
use nodejob_core::{
    ApiError, CONTROLLER_UID_LABEL, Clock, Error, ErrorKind, JobApi, Verb, build, delete_and_wait,
    delete_exact_and_wait, delete_seen_and_wait, job_node, logs, node_label_value, run,
    run_exit_code, run_exit_code_logs, wait_ready,
};
use nodejob_core::{NodeApi, ready};
use nodejob_fake::host;

use crate::{Backend, Ctx, Failure, ensure};

type Outcome = Result<(), Failure>;

/// The name of every scenario of this module, in the order [`conformance!`](crate::conformance) expands
/// them: what a backend that cannot run them all accounts for, each it leaves out with a reason
/// (`nodejob-e2e/tests/real_node.rs`). `tests/lists.rs` keeps it equal to the macro's list.
pub const ALL: &[&str] = &[
    "exit_code_and_log_of_a_succeeded_job",
    "dollars_in_the_argv_reach_the_host_as_written",
    "non_zero_exit_leaves_the_job_for_inspection",
    "stale_succeeded_job_is_replaced_exactly",
    "stale_failed_job_is_replaced_and_never_reported",
    "stale_running_job_is_waited_for_not_killed",
    "stale_job_being_deleted_is_waited_out",
    "stale_job_replaced_between_inspect_and_delete_is_left_alone",
    "already_exists_on_create_is_left_alone",
    "job_deleted_while_waiting_ends_the_run",
    "job_replaced_while_waiting_is_never_read",
    "unreadable_log_keeps_the_exit_code",
    "deadline_kill_is_no_exit_status",
    "timeout_leaves_the_host_operation_running",
    "pod_security_refusal_fails_fast",
    "transient_errors_are_retried",
    "create_whose_answer_was_lost_is_adopted",
    "forbidden_fails_at_once",
    "logs_are_read_by_uid",
    "delete_exact_refuses_a_changed_job",
    "delete_seen_takes_a_changed_job_by_its_uid",
    "delete_of_a_missing_job_is_no_error",
    "wait_ready_sees_the_node_turn_ready",
    "wait_ready_times_out_on_a_not_ready_node",
    "wait_ready_reports_a_missing_node",
    "long_node_name_makes_valid_objects",
    "pod_deleted_by_another_actor_is_no_exit_code",
    "node_deleted_while_the_job_runs_is_named",
    "a_reboot_under_the_job_is_no_exit_code",
    "finished_job_deleted_by_another_runner_says_so",
    "stratum_upgrade_reboots_the_node_into_the_new_version",
    "stratum_carotate_phases_are_reported",
    "jobs_are_listed_by_label_selector",
    "jobs_of_a_missing_namespace_are_an_empty_list",
];

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Every delete the runner made carried UID and resourceVersion preconditions.
fn deletes_are_exact<B: Backend>(cx: &Ctx<B>) -> Outcome {
    for call in cx.api.calls().iter().filter(|c| c.verb == Verb::DeleteJob) {
        let exact = call
            .preconditions
            .as_ref()
            .is_some_and(|p| p.uid.is_some() && p.resource_version.is_some());
        ensure!(exact, "an inexact delete: {call:?}");
    }
    Ok(())
}

/// A succeeded Job answers 0 and its log, read before it is deleted.
pub async fn exit_code_and_log_of_a_succeeded_job<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let spec = cx.spec(
        "succeeds",
        &[
            host::log("upgraded to 9.6"),
            host::log("reboot pending"),
            host::exit(0),
        ],
    );
    let (code, log) = run_exit_code_logs(&*cx.api, &spec).await?;
    ensure!(
        code == 0 && log == "upgraded to 9.6\nreboot pending\n",
        "got ({code}, {log:?})"
    );
    let left = cx.job("succeeds").await?;
    ensure!(
        left.is_none_or(|j| j.metadata.deletion_timestamp.is_some()),
        "the succeeded job was not deleted"
    );
    for verb in [
        Verb::GetJob,
        Verb::CreateJob,
        Verb::ListPods,
        Verb::PodLog,
        Verb::DeleteJob,
    ] {
        ensure!(
            cx.api.count(verb) == 1,
            "{verb} called {} times: {:?}",
            cx.api.count(verb),
            cx.api.calls()
        );
    }
    deletes_are_exact(&cx)
}

/// Dollar signs in the argv reach the host program as written: the kubelet expands `$(NAME)`
/// and turns `$$` into `$` in a container's command, so the Job carries them doubled and the
/// program gets them back (a real node showed `$$` arriving as `$`).
pub async fn dollars_in_the_argv_reach_the_host_as_written<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let lines = ["$$", "$(PATH)", "$HOME", "cost: $5", "$"];
    let mut argv: Vec<String> = lines.iter().map(host::log).collect();
    argv.push(host::exit(0));
    let (code, log) = run_exit_code_logs(&*cx.api, &cx.spec("dollars", &argv)).await?;
    let want: String = lines.iter().map(|l| format!("{l}\n")).collect();
    ensure!(code == 0 && log == want, "got ({code}, {log:?})");
    Ok(())
}

/// A non-zero exit is an answer for `run_exit_code`, an error for `run`; the Job stays.
pub async fn non_zero_exit_leaves_the_job_for_inspection<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let spec = cx.spec("exits-3", &[host::exit(3)]);
    let code = run_exit_code(&*cx.api, &spec).await?;
    ensure!(code == 3, "exit code {code}");
    let job = cx.job("exits-3").await?;
    ensure!(
        job.is_some_and(|j| j.metadata.deletion_timestamp.is_none()),
        "the failed job was not left in place"
    );
    ensure!(
        cx.api.count(Verb::DeleteJob) == 0,
        "a failed job was deleted"
    );
    // The next run replaces it, and `run` reports the failure with its code.
    match run(&*cx.api, &spec).await {
        Err(Error::Failed { exit_code: 3, .. }) => {}
        other => ensure!(false, "run gave {other:?}"),
    }
    ensure!(
        cx.said("replacing an earlier job"),
        "the stale failed job was not reported replaced"
    );
    deletes_are_exact(&cx)
}

/// A finished Job of the same name is deleted exactly (its UID) and replaced.
pub async fn stale_succeeded_job_is_replaced_exactly<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let stale = cx
        .api
        .inner()
        .create_job(&build(
            &cx.spec("stale", &[host::log("stale"), host::exit(0)]),
        ))
        .await?;
    cx.wait_finished("stale").await?;
    let spec = cx.spec("stale", &[host::log("fresh"), host::exit(0)]);
    let (code, log) = run_exit_code_logs(&*cx.api, &spec).await?;
    ensure!(
        (code, log.as_str()) == (0, "fresh\n"),
        "got ({code}, {log:?}): the stale job answered"
    );
    let first = cx
        .api
        .calls()
        .into_iter()
        .find(|c| c.verb == Verb::DeleteJob);
    let uid = first.and_then(|c| c.preconditions).and_then(|p| p.uid);
    ensure!(
        uid == stale.metadata.uid,
        "first delete aimed at {uid:?}, the stale job is {:?}",
        stale.metadata.uid
    );
    ensure!(
        cx.said("replacing an earlier job"),
        "no warning about the replaced job"
    );
    deletes_are_exact(&cx)
}

/// A failed Job of the same name is replaced; its exit code is never reported as ours.
pub async fn stale_failed_job_is_replaced_and_never_reported<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    cx.api
        .inner()
        .create_job(&build(
            &cx.spec("stale-failed", &[host::log("old"), host::exit(9)]),
        ))
        .await?;
    cx.wait_finished("stale-failed").await?;
    let spec = cx.spec("stale-failed", &[host::log("new"), host::exit(4)]);
    let (code, log) = run_exit_code_logs(&*cx.api, &spec).await?;
    ensure!(
        (code, log.as_str()) == (4, "new\n"),
        "got ({code}, {log:?})"
    );
    deletes_are_exact(&cx)
}

/// A Job of the same name still running is waited for, never killed, then replaced.
pub async fn stale_running_job_is_waited_for_not_killed<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let stale = cx.spec("busy", &[host::run(secs(8)), host::log("old done")]);
    let created = cx.api.inner().create_job(&build(&stale)).await?;
    cx.wait_running("busy").await?;
    let running_since = cx.api.now();
    let spec = cx.spec("busy", &[host::log("new done")]);
    let (code, log) = run_exit_code_logs(&*cx.api, &spec).await?;
    ensure!(
        (code, log.as_str()) == (0, "new done\n"),
        "got ({code}, {log:?})"
    );
    ensure!(cx.said("still running"), "no warning about the running job");
    let delete = cx
        .api
        .calls()
        .into_iter()
        .find(|c| c.verb == Verb::DeleteJob);
    let delete = delete.ok_or_else(|| Failure("the stale job was never deleted".into()))?;
    ensure!(
        delete.preconditions.and_then(|p| p.uid) == created.metadata.uid,
        "first delete not aimed at the stale job"
    );
    // It ran 8s from (at the latest) when we saw it running: not deleted before it could end.
    ensure!(
        delete.at + Duration::from_millis(100) >= running_since,
        "deleted at {:?}, running since {running_since:?}",
        delete.at
    );
    let waited = delete.at.saturating_sub(cx.api.calls()[0].at);
    ensure!(
        waited >= secs(5),
        "the running job was deleted after only {waited:?}"
    );
    deletes_are_exact(&cx)
}

/// A Job of the same name being deleted is waited out, not deleted again.
pub async fn stale_job_being_deleted_is_waited_out<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    cx.api
        .inner()
        .create_job(&build(&cx.spec("going", &[host::run(secs(120))])))
        .await?;
    cx.wait_running("going").await?;
    cx.api
        .inner()
        .delete_job(&cx.namespace, "going", None)
        .await?;
    let spec = cx.spec("going", &[host::exit(0)]);
    run(&*cx.api, &spec).await?;
    ensure!(
        cx.said("is being deleted"),
        "no note about the job being deleted"
    );
    ensure!(
        cx.api.count(Verb::DeleteJob) == 1,
        "the runner deleted {} times",
        cx.api.count(Verb::DeleteJob)
    );
    deletes_are_exact(&cx)
}

/// A stale Job replaced by another actor between our read and our delete is left alone.
pub async fn stale_job_replaced_between_inspect_and_delete_is_left_alone<B: Backend>(
    b: Arc<B>,
) -> Outcome {
    let cx = Ctx::new(b);
    let theirs = build(&cx.spec("contested", &[host::run(secs(60))]));
    cx.api
        .inner()
        .create_job(&build(&cx.spec("contested", &[host::exit(0)])))
        .await?;
    cx.wait_finished("contested").await?;
    let ns = cx.namespace.clone();
    cx.api.before(Verb::DeleteJob, 0, move |api| {
        async move {
            delete_and_wait(&*api, &ns, "contested")
                .await
                .expect("their delete completes");
            api.create_job(&theirs).await.expect("their create");
        }
        .boxed()
    });
    let spec = cx.spec("contested", &[]);
    match run(&*cx.api, &spec).await {
        Err(e @ Error::Contended { .. }) => ensure!(e.to_string().contains("contested"), "{e}"),
        other => ensure!(false, "expected contention, got {other:?}"),
    }
    let now = cx.job("contested").await?;
    ensure!(
        now.is_some_and(|j| j.metadata.deletion_timestamp.is_none()),
        "another actor's job was deleted"
    );
    ensure!(
        cx.api.count(Verb::CreateJob) == 0,
        "created over another actor's job"
    );
    deletes_are_exact(&cx)
}

/// A Job another actor creates between our read and our create is left alone.
pub async fn already_exists_on_create_is_left_alone<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let theirs = build(&cx.spec("raced", &[host::run(secs(60))]));
    cx.api.before(Verb::CreateJob, 0, move |api| {
        async move {
            api.create_job(&theirs).await.expect("their create");
        }
        .boxed()
    });
    match run(&*cx.api, &cx.spec("raced", &[])).await {
        Err(e @ Error::Contended { .. }) => {
            ensure!(e.to_string().contains("already exists"), "{e}")
        }
        other => ensure!(false, "expected contention, got {other:?}"),
    }
    ensure!(
        cx.api.count(Verb::DeleteJob) == 0,
        "deleted another actor's job"
    );
    let now = cx.job("raced").await?;
    ensure!(
        now.is_some_and(|j| j.metadata.deletion_timestamp.is_none()),
        "their job was touched"
    );
    Ok(())
}

/// Our Job deleted by another actor while we wait ends the run at once.
pub async fn job_deleted_while_waiting_ends_the_run<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let (ns, watcher) = (cx.namespace.clone(), Ctx::new(cx.backend.clone()));
    cx.api.before(Verb::WaitJob, 0, move |api| {
        async move {
            watcher.wait_running("deleted").await.expect("our job runs");
            api.delete_job(&ns, "deleted", None)
                .await
                .expect("their delete");
        }
        .boxed()
    });
    let start = cx.api.now();
    let mut spec = cx.spec("deleted", &[host::run(secs(600))]);
    // A bound far beyond "at once", so waiting it out would show.
    spec.poll_attempts = 120;
    spec.active_deadline = secs(900);
    match run_exit_code(&*cx.api, &spec).await {
        Err(Error::Vanished { .. }) => {}
        other => ensure!(false, "expected the job to vanish, got {other:?}"),
    }
    let took = cx.api.now() - start;
    ensure!(took < secs(60), "noticed after {took:?}, not at once");
    Ok(())
}

/// Our Job replaced under the same name while we wait: nothing of the other is read.
pub async fn job_replaced_while_waiting_is_never_read<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let theirs = build(&cx.spec("replaced", &[host::log("theirs"), host::exit(0)]));
    let (ns, watcher) = (cx.namespace.clone(), Ctx::new(cx.backend.clone()));
    let their_uid = Arc::new(std::sync::Mutex::new(None::<String>));
    let theirs_created = their_uid.clone();
    cx.api.before(Verb::WaitJob, 0, move |api| {
        async move {
            watcher
                .wait_running("replaced")
                .await
                .expect("our job runs");
            delete_and_wait(&*api, &ns, "replaced")
                .await
                .expect("their delete completes");
            let job = api.create_job(&theirs).await.expect("their create");
            *theirs_created.lock().unwrap() = job.metadata.uid;
        }
        .boxed()
    });
    let start = cx.api.now();
    let mut spec = cx.spec("replaced", &[host::run(secs(600))]);
    spec.poll_attempts = 120;
    spec.active_deadline = secs(900);
    match run_exit_code_logs(&*cx.api, &spec).await {
        Err(Error::Vanished { .. }) => {}
        other => ensure!(false, "expected the job to vanish, got {other:?}"),
    }
    let took = cx.api.now() - start;
    ensure!(took < secs(120), "noticed after {took:?}, not at once");
    // Ours' Pods may be listed while it ran (its log's Pod named early); theirs never, and no
    // log at all.
    let theirs = their_uid.lock().unwrap().clone().unwrap_or_default();
    let calls = cx.api.calls();
    ensure!(
        !theirs.is_empty()
            && cx.api.count(Verb::PodLog) == 0
            && !calls
                .iter()
                .any(|c| c.verb == Verb::ListPods && c.name.contains(&theirs)),
        "another job was read: {calls:?}"
    );
    Ok(())
}

/// The exit status is known but the kubelet cannot serve the log: LogUnread with the code.
pub async fn unreadable_log_keeps_the_exit_code<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    cx.backend.set_kubelet_reachable(&cx.node, false).await?;
    let outcome =
        run_exit_code_logs(&*cx.api, &cx.spec("mute", &[host::log("x"), host::exit(3)])).await;
    cx.backend.set_kubelet_reachable(&cx.node, true).await?;
    match outcome {
        Err(e @ Error::LogUnread { exit_code: 3, .. }) => ensure!(e.exit_code() == Some(3), "{e}"),
        other => ensure!(false, "expected LogUnread with exit 3, got {other:?}"),
    }
    let job = cx.job("mute").await?;
    ensure!(
        job.is_some_and(|j| j.metadata.deletion_timestamp.is_none()),
        "the job was not left in place"
    );
    // A succeeded Job whose log cannot be read is left too: deleting it would lose the log.
    cx.backend.set_kubelet_reachable(&cx.node, false).await?;
    let outcome = run_exit_code_logs(&*cx.api, &cx.spec("mute-ok", &[host::exit(0)])).await;
    cx.backend.set_kubelet_reachable(&cx.node, true).await?;
    ensure!(
        matches!(outcome, Err(Error::LogUnread { exit_code: 0, .. })),
        "got {outcome:?}"
    );
    ensure!(
        cx.api.count(Verb::DeleteJob) == 0,
        "a job with an unread log was deleted"
    );
    Ok(())
}

/// A container killed by the Job's deadline has no exit status worth reporting.
pub async fn deadline_kill_is_no_exit_status<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let mut spec = cx.spec("late", &[host::run(secs(120))]);
    spec.active_deadline = secs(3);
    match run_exit_code(&*cx.api, &spec).await {
        Err(e @ Error::FailedWithoutExit { .. }) => {
            ensure!(e.to_string().contains("DeadlineExceeded"), "{e}")
        }
        other => ensure!(
            false,
            "expected a failure without exit status, got {other:?}"
        ),
    }
    Ok(())
}

/// The wait bound runs out: an error naming the Job, and the host operation is left running.
pub async fn timeout_leaves_the_host_operation_running<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let mut spec = cx.spec("slow", &[host::run(secs(120))]);
    spec.poll_attempts = 2;
    match run(&*cx.api, &spec).await {
        Err(e @ Error::Timeout { .. }) => {
            let text = e.to_string();
            for part in ["conformance job", &cx.namespace, "slow", &cx.node] {
                ensure!(text.contains(part), "{part:?} missing from {text}");
            }
        }
        other => ensure!(false, "expected a timeout, got {other:?}"),
    }
    ensure!(
        cx.api.count(Verb::DeleteJob) == 0,
        "a running host operation was deleted"
    );
    let job = cx.job("slow").await?;
    ensure!(
        job.is_some_and(|j| j.metadata.deletion_timestamp.is_none()),
        "the running job is gone"
    );
    Ok(())
}

/// PodSecurity refusing the privileged pod fails within a few intervals, quoting it.
pub async fn pod_security_refusal_fails_fast<B: Backend>(b: Arc<B>) -> Outcome {
    let mut cx = Ctx::new(b);
    cx.namespace = cx.backend.forbid_privileged_pods().await?;
    let start = cx.api.now();
    match run(&*cx.api, &cx.spec("refused", &[])).await {
        Err(e @ Error::PodCreateRefused { .. }) => {
            let text = e.to_string();
            ensure!(text.contains("PodSecurity"), "{text}");
            ensure!(
                text.contains("pod-security.kubernetes.io/enforce=privileged"),
                "no fix named: {text}"
            );
        }
        other => ensure!(false, "expected a pod creation refusal, got {other:?}"),
    }
    let took = cx.api.now() - start;
    ensure!(took <= nodejob_core::POLL_INTERVAL * 3, "took {took:?}");
    Ok(())
}

/// Transient errors on every verb are retried; the run still answers.
pub async fn transient_errors_are_retried<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    for verb in [
        Verb::GetJob,
        Verb::CreateJob,
        Verb::WaitJob,
        Verb::ListPods,
        Verb::PodLog,
        Verb::DeleteJob,
    ] {
        cx.api.fail(
            verb,
            ApiError::transient(503, "the server is currently unable to handle the request"),
            2,
        );
    }
    let (code, log) = run_exit_code_logs(&*cx.api, &cx.spec("flaky", &[host::log("ok")])).await?;
    ensure!((code, log.as_str()) == (0, "ok\n"), "got ({code}, {log:?})");
    let failed = cx
        .api
        .calls()
        .iter()
        .filter(|c| c.error == Some(ErrorKind::Transient))
        .count();
    ensure!(failed >= 12, "only {failed} transient failures injected");
    Ok(())
}

/// A create that was served but whose answer was lost (a timeout) is adopted on the retry, not
/// refused as another actor's Job and not run twice.
pub async fn create_whose_answer_was_lost_is_adopted<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let spec = cx.spec("lost", &[host::log("once"), host::exit(0)]);
    let ours = build(&spec);
    cx.api.before(Verb::CreateJob, 0, move |api| {
        async move {
            api.create_job(&ours).await.expect("served create");
        }
        .boxed()
    });
    cx.api.fail(
        Verb::CreateJob,
        ApiError::transient(504, "context deadline exceeded"),
        1,
    );
    let (code, log) = run_exit_code_logs(&*cx.api, &spec).await?;
    ensure!(
        (code, log.as_str()) == (0, "once\n"),
        "got ({code}, {log:?})"
    );
    ensure!(
        cx.api.count(Verb::CreateJob) == 2,
        "creates: {:?}",
        cx.api.calls()
    );
    Ok(())
}

/// Forbidden fails at once with the apiserver's message.
pub async fn forbidden_fails_at_once<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let msg = "jobs.batch is forbidden: User \"system:serviceaccount:ops:nodejob\" cannot create resource \"jobs\"";
    cx.api.fail(Verb::CreateJob, ApiError::forbidden(msg), 1);
    match run(&*cx.api, &cx.spec("denied", &[])).await {
        Err(e) => ensure!(e.to_string().contains(msg), "{e}"),
        Ok(()) => ensure!(false, "a forbidden create succeeded"),
    }
    ensure!(cx.api.count(Verb::CreateJob) == 1, "retried a Forbidden");
    Ok(())
}

/// `logs` reads the pod of the Job of that name, by its UID, across replacements.
pub async fn logs_are_read_by_uid<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let first = cx.spec("twice", &[host::log("first"), host::exit(5)]);
    ensure!(run_exit_code(&*cx.api, &first).await? == 5, "first run");
    let log = logs(&*cx.api, &first).await?;
    ensure!(log == "first\n", "{log:?}");
    let second = cx.spec("twice", &[host::log("second"), host::exit(6)]);
    let (code, log) = run_exit_code_logs(&*cx.api, &second).await?;
    ensure!(
        (code, log.as_str()) == (6, "second\n"),
        "got ({code}, {log:?})"
    );
    let log = logs(&*cx.api, &second).await?;
    ensure!(log == "second\n", "an earlier job's pod answered: {log:?}");
    Ok(())
}

/// An exact delete refuses a Job changed since it was read, and removes it once re-read.
pub async fn delete_exact_refuses_a_changed_job<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    cx.api
        .inner()
        .create_job(&build(&cx.spec("exact", &[host::run(secs(3))])))
        .await?;
    let inspected = cx.wait_running("exact").await?;
    // The Job's status moves on (its pod ends): the object we read is no longer current.
    cx.wait_finished("exact").await?;
    match delete_exact_and_wait(&*cx.api, &inspected).await {
        Err(e) => ensure!(
            e.api_error().map(|a| a.kind) == Some(ErrorKind::Conflict),
            "{e}"
        ),
        Ok(()) => ensure!(false, "deleted a job changed since it was read"),
    }
    let current = cx
        .job("exact")
        .await?
        .ok_or_else(|| Failure("the job is gone".into()))?;
    ensure!(
        current.metadata.deletion_timestamp.is_none(),
        "deleted despite the conflict"
    );
    delete_exact_and_wait(&*cx.api, &current).await?;
    ensure!(
        cx.job("exact").await?.is_none(),
        "still there after delete_exact_and_wait"
    );
    Ok(())
}

/// A delete by the UID alone takes a Job changed since it was seen (the Job controller's own
/// writes as it finished), and waits it out from the version seen, with no read first; a Job
/// of another UID under the name refuses it with a Conflict and stays.
pub async fn delete_seen_takes_a_changed_job_by_its_uid<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    cx.api
        .inner()
        .create_job(&build(&cx.spec("seen", &[host::run(secs(3))])))
        .await?;
    let inspected = cx.wait_running("seen").await?;
    cx.wait_finished("seen").await?;
    let mut other = inspected.clone();
    other.metadata.uid = Some("0b7e4ad2-8c4e-4c1b-9d55-6f0a3c7b1e21".into());
    match delete_seen_and_wait(&*cx.api, &other).await {
        Err(e) => ensure!(
            e.api_error().map(|a| a.kind) == Some(ErrorKind::Conflict),
            "{e}"
        ),
        Ok(()) => ensure!(false, "deleted a job of another uid"),
    }
    let current = cx
        .job("seen")
        .await?
        .ok_or_else(|| Failure("the job is gone".into()))?;
    ensure!(
        current.metadata.deletion_timestamp.is_none(),
        "deleted despite another uid"
    );
    ensure!(
        current.metadata.resource_version != inspected.metadata.resource_version,
        "the job did not change since it was seen running: nothing is shown"
    );
    delete_seen_and_wait(&*cx.api, &inspected).await?;
    ensure!(
        cx.job("seen").await?.is_none(),
        "still there after delete_seen_and_wait"
    );
    Ok(())
}

/// Deleting a Job that does not exist is not an error.
pub async fn delete_of_a_missing_job_is_no_error<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    delete_and_wait(&*cx.api, &cx.namespace, "never-was").await?;
    let mut ghost = build(&cx.spec("never-was", &[]));
    ghost.metadata.uid = Some("0b7e4ad2-8c4e-4c1b-9d55-6f0a3c7b1e21".into());
    ghost.metadata.resource_version = Some("1".into());
    delete_exact_and_wait(&*cx.api, &ghost).await?;
    Ok(())
}

/// `wait_ready` returns when the node's Ready condition turns True.
pub async fn wait_ready_sees_the_node_turn_ready<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    cx.backend.set_node_ready(&cx.node, false).await?;
    let (backend, node) = (cx.backend.clone(), cx.node.clone());
    cx.api.before(Verb::WaitNode, 0, move |_| {
        async move {
            backend
                .set_node_ready(&node, true)
                .await
                .expect("node ready")
        }
        .boxed()
    });
    wait_ready(&*cx.api, &cx.node, 6).await?;
    ensure!(
        cx.api.count(Verb::WaitNode) >= 1,
        "did not wait: {:?}",
        cx.api.calls()
    );
    Ok(())
}

/// `wait_ready` on a node that stays NotReady times out saying so.
pub async fn wait_ready_times_out_on_a_not_ready_node<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    cx.backend.set_node_ready(&cx.node, false).await?;
    let outcome = wait_ready(&*cx.api, &cx.node, 1).await;
    cx.backend.set_node_ready(&cx.node, true).await?;
    match outcome {
        Err(Error::NodeNotReady { state, .. }) => ensure!(state == "is NotReady", "{state}"),
        other => ensure!(false, "expected NodeNotReady, got {other:?}"),
    }
    Ok(())
}

/// `wait_ready` on a node that does not exist times out saying so.
pub async fn wait_ready_reports_a_missing_node<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    match wait_ready(&*cx.api, "no-such-node.conformance.invalid", 1).await {
        Err(Error::NodeNotReady { state, .. }) => ensure!(state == "does not exist", "{state}"),
        other => ensure!(false, "expected NodeNotReady, got {other:?}"),
    }
    Ok(())
}

/// The Job `build` makes for a 253-character node name passes the apiserver's validation: the
/// node goes verbatim into `nodeName` and the annotation, hashed into the label.
pub async fn long_node_name_makes_valid_objects<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let node = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61)
    );
    ensure!(node.len() == 253, "{}", node.len());
    let mut spec = cx.spec("long-node", &[]);
    spec.node = node.clone();
    spec.validate()?;
    let created = cx.api.inner().create_job(&build(&spec)).await?;
    let label = created
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("stratum.ciq.com/conformance"))
        .cloned();
    ensure!(label == Some(node_label_value(&node)), "label {label:?}");
    ensure!(
        nodejob_core::job_node(&created, "stratum.ciq.com/conformance") == Some(node.as_str()),
        "annotation lost"
    );
    delete_and_wait(&*cx.api, &cx.namespace, "long-node").await?;
    Ok(())
}

/// The name of the running pod of our Job `name` (read below the interposer).
async fn pod_of<B: Backend>(cx: &Ctx<B>, name: &str) -> Result<String, Failure> {
    let job = cx.wait_running(name).await?;
    let uid = job.metadata.uid.unwrap_or_default();
    let pods = cx
        .api
        .inner()
        .list_pods(&cx.namespace, &format!("{CONTROLLER_UID_LABEL}={uid}"))
        .await?;
    pods.into_iter()
        .find_map(|p| p.metadata.name)
        .ok_or_else(|| Failure(format!("job {name} runs, yet has no pod")))
}

/// Another actor deletes our Job's Pod alone (`kubectl delete pod`) while the host operation
/// runs: the container's 143 is the kill's, never the host's answer; the run says the Pod was
/// deleted before the host operation ended.
pub async fn pod_deleted_by_another_actor_is_no_exit_code<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let deleter = Ctx::new(cx.backend.clone());
    cx.api.before(Verb::WaitJob, 0, move |_| {
        async move {
            let pod = pod_of(&deleter, "podkill").await.expect("our job runs");
            deleter
                .backend
                .delete_pod(&deleter.namespace, &pod)
                .await
                .expect("their delete");
        }
        .boxed()
    });
    let mut spec = cx.spec("podkill", &[host::run(secs(600)), host::exit(0)]);
    spec.active_deadline = secs(900);
    match run_exit_code(&*cx.api, &spec).await {
        Err(e @ Error::PodDeleted { .. }) => {
            let text = e.to_string();
            ensure!(text.contains("podkill"), "the error names the job: {text}");
        }
        other => ensure!(false, "expected the pod's deletion, got {other:?}"),
    }
    Ok(())
}

/// Our node is deleted while our Job runs: the run ends naming the node, at the latest when
/// the bound runs out (then the node is read), not as a bare timeout.
pub async fn node_deleted_while_the_job_runs_is_named<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let remover = Ctx::new(cx.backend.clone());
    cx.api.before(Verb::WaitJob, 0, move |_| {
        async move {
            remover
                .wait_running("nodegone")
                .await
                .expect("our job runs");
            remover
                .backend
                .remove_node(&remover.node)
                .await
                .expect("their delete");
        }
        .boxed()
    });
    let mut spec = cx.spec("nodegone", &[host::run(secs(600))]);
    spec.poll_attempts = 2;
    spec.active_deadline = secs(900);
    match run_exit_code(&*cx.api, &spec).await {
        Err(Error::NodeDeleted { node, .. }) => {
            ensure!(node == cx.node, "names node {node}, not ours ({})", cx.node)
        }
        other => ensure!(false, "expected the node's deletion, got {other:?}"),
    }
    Ok(())
}

/// Our node reboots while our Job's program runs: the kubelet ends the Pod as it finds a
/// container gone on a new boot (exit 255, reason `Unknown`), and the run answers that the
/// program was lost to the reboot, naming the Pod, never an exit code 255 of the program's.
pub async fn a_reboot_under_the_job_is_no_exit_code<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let rebooter = Ctx::new(cx.backend.clone());
    cx.api.before(Verb::WaitJob, 0, move |_| {
        async move {
            rebooter
                .wait_running("rebooted")
                .await
                .expect("our job runs");
            rebooter
                .backend
                .reboot_node(&rebooter.node)
                .await
                .expect("the reboot");
        }
        .boxed()
    });
    let mut spec = cx.spec("rebooted", &[host::run(secs(600)), host::exit(0)]);
    spec.active_deadline = secs(900);
    match run_exit_code(&*cx.api, &spec).await {
        Err(e @ Error::LostInReboot { .. }) => {
            let text = e.to_string();
            for part in ["rebooted", "job", "exit 255, reason Unknown"] {
                ensure!(text.contains(part), "the error says {part:?}: {text}");
            }
            ensure!(e.exit_code().is_none(), "no exit code: {e:?}");
        }
        other => ensure!(
            false,
            "expected the program lost to the reboot, got {other:?}"
        ),
    }
    Ok(())
}

/// Two runners race on one name: another deletes our just-finished Job before we read its Pod.
/// The error says our Job was deleted by another actor, not that it failed without an exit
/// status.
pub async fn finished_job_deleted_by_another_runner_says_so<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let ns = cx.namespace.clone();
    cx.api.before(Verb::ListPods, 0, move |api| {
        async move {
            delete_and_wait(&*api, &ns, "raced")
                .await
                .expect("their delete completes");
        }
        .boxed()
    });
    let spec = cx.spec("raced", &[host::exit(3)]);
    match run_exit_code(&*cx.api, &spec).await {
        Err(e @ Error::Vanished { .. }) => {
            let text = e.to_string();
            ensure!(
                text.contains("deleted by another actor"),
                "the error says who deleted it: {text}"
            );
        }
        other => ensure!(false, "expected our job to have vanished, got {other:?}"),
    }
    Ok(())
}

/// The argv a driver sends to run `stratum` on the host.
fn stratum(args: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = [
        "nsenter",
        "--target",
        "1",
        "--mount",
        "--uts",
        "--ipc",
        "--net",
        "--pid",
        "--",
        "/usr/local/bin/stratum",
    ]
    .map(String::from)
    .into();
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}

fn boot_id(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

/// Waits (below the interposer) until the scenario's node satisfies `done`.
async fn node_until<B: Backend>(
    cx: &Ctx<B>,
    what: &str,
    done: impl Fn(&Node) -> bool,
) -> Result<Node, Failure> {
    let api = cx.api.inner();
    let node = cx.node.as_str();
    let until = watch_until(
        api.as_ref(),
        secs(300),
        From::Read,
        || api.get_node(node),
        |since, timeout| async move { api.wait_node(node, since.as_deref(), timeout).await },
        |seen| seen.is_some_and(&done),
    )
    .await
    .map_err(|(_, e)| Failure::from(e))?;
    match until {
        Until::Met(Some(n)) => Ok(n),
        other => Err(Failure(format!("node {node}: {what} not seen: {other:?}"))),
    }
}

/// The host model both backends play: `stratum upgrade --to V` exits 0, then the node reboots
/// (a new bootID) and comes back Ready reporting V; run again, it is already there.
pub async fn stratum_upgrade_reboots_the_node_into_the_new_version<B: Backend>(
    b: Arc<B>,
) -> Outcome {
    let cx = Ctx::new(b);
    let before = cx.api.inner().get_node(&cx.node).await?;
    let old_boot = boot_id(&before);
    ensure!(!old_boot.is_empty(), "the node reports no bootID");
    let mut spec = cx.spec("upgrade", &[]);
    spec.argv = stratum(&["upgrade", "--to", "v1.99.0"]);
    let (code, log) = run_exit_code_logs(&*cx.api, &spec).await?;
    ensure!(code == 0, "the upgrade exits 0, got {code}: {log}");
    let after = node_until(&cx, "a reboot into v1.99.0", |n| {
        boot_id(n) != old_boot && ready(n)
    })
    .await?;
    let version = cx.backend.host_version(&after);
    ensure!(version == "v1.99.0", "back at {version}, not the target");
    let (code, log) = run_exit_code_logs(&*cx.api, &spec).await?;
    ensure!(
        code == 0 && log.contains("already at"),
        "run again, the upgrade finds the node there: {code}: {log}"
    );
    Ok(())
}

/// `stratum carotate`: a per-node trust set and issuer changed by the phases, read back with
/// `status` (one JSON line) and `verify` (its exit status), and from each phase's own output:
/// its last line is the status line `status` prints right after it, and an `issue` given
/// `--expect` prints verify's verdict line (`{"verify": N, "expect": [...]}`) just before it.
pub async fn stratum_carotate_phases_are_reported<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let new = cx.backend.rotation_ca(&cx.node).await?;
    let step = |name: &str, args: &[&str]| {
        let mut spec = cx.spec(name, &[]);
        spec.argv = stratum(args);
        spec
    };
    let status = |cx: &Ctx<B>| {
        let spec = step("ca-status", &["carotate", "status"]);
        let api = cx.api.clone();
        async move { run_exit_code_logs(&*api, &spec).await }
    };
    let (code, line) = status(&cx).await?;
    ensure!(
        code == 0 && line.contains("\"phase\": \"idle\"") && !line.contains(&new),
        "before: {code}: {line}"
    );
    // A phase's output ends with the status line, as `status` prints it right after.
    let phase = |name: &'static str, args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let spec = step(name, &args);
        let api = cx.api.clone();
        async move {
            let (code, log) = run_exit_code_logs(&*api, &spec).await?;
            ensure!(code == 0, "{name} exits 0, got {code}: {log}");
            Ok::<_, Failure>(log)
        }
    };
    let ends_with_status = |name: &str, log: &str, line: &str| {
        ensure!(
            log.lines().last() == line.lines().last() && log.lines().count() > 1,
            "{name}'s output does not end with the status line {line:?}: {log:?}"
        );
        Ok::<_, Failure>(())
    };
    let words = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
    let staged = phase("ca-stage", words(&format!("carotate stage --add {new}"))).await?;
    let (_, line) = status(&cx).await?;
    ensure!(
        line.contains("\"phase\": \"staged\"") && line.contains(&new),
        "staged: {line}"
    );
    ends_with_status("stage", &staged, &line)?;
    let verify = step("ca-verify", &["carotate", "verify", "--expect", &new]);
    let code = run_exit_code(&*cx.api, &verify).await?;
    ensure!(
        code == 3,
        "verify before issue is 'not yet' (3), got {code}"
    );
    let issue = format!("carotate issue --ca {new} --expect {new}");
    let issued = phase("ca-issue", words(&issue)).await?;
    let (_, line) = status(&cx).await?;
    ensure!(line.contains("\"phase\": \"issued\""), "issued: {line}");
    ends_with_status("issue", &issued, &line)?;
    // Issued, it trusts the old CA too: verify expecting the new one alone says not yet.
    let verdict = format!("{{\"verify\": 3, \"expect\": [\"{new}\"]}}");
    ensure!(
        issued.lines().rev().nth(1) == Some(verdict.as_str()),
        "issue's verdict line is not {verdict:?}: {issued:?}"
    );
    let finalize = format!("carotate finalize --keep {new}");
    let finalized = phase("ca-finalize", words(&finalize)).await?;
    let code = run_exit_code(&*cx.api, &verify).await?;
    ensure!(code == 0, "verify after finalize passes, got {code}");
    let (_, line) = status(&cx).await?;
    ensure!(
        line.contains("\"phase\": \"finalized\"")
            && line.contains(&format!("\"trusted\": [\"{new}\"]"))
            && line.contains(&format!("\"issuer\": \"{new}\"")),
        "finalized: {line}"
    );
    ends_with_status("finalize", &finalized, &line)?;
    Ok(())
}

/// The names of `jobs`, sorted (the order of a list is the apiserver's, not a contract).
fn names(jobs: &[k8s_openapi::api::batch::v1::Job]) -> Vec<String> {
    let mut names: Vec<String> = jobs
        .iter()
        .map(|j| j.metadata.name.clone().unwrap_or_default())
        .collect();
    names.sort();
    names
}

/// `list_jobs` answers the namespace's Jobs that match a label selector as the apiserver
/// reads one (equality, inequality, existence, absence, every requirement at once), every Job
/// for the empty selector, a Job being deleted still listed (with its deletionTimestamp), and
/// each Job names its node as `build` wrote it.
pub async fn jobs_are_listed_by_label_selector<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    let ours = cx.spec("listed-ours", &[host::exit(0)]);
    let mut theirs = cx.spec("listed-theirs", &[host::run(secs(120))]);
    theirs.label_key = "stratum.ciq.com/conformance-other".into();
    for spec in [&ours, &theirs] {
        cx.api.inner().create_job(&build(spec)).await?;
    }
    let (key, other) = (ours.label_key.as_str(), theirs.label_key.as_str());
    let value = node_label_value(&cx.node);
    let table: [(String, &[&str]); 7] = [
        (String::new(), &["listed-ours", "listed-theirs"]),
        (format!("{key}={value}"), &["listed-ours"]),
        (format!("{key}=={value}"), &["listed-ours"]),
        (format!("{key}!={value}"), &["listed-theirs"]),
        (other.to_string(), &["listed-theirs"]),
        (format!("!{other}"), &["listed-ours"]),
        (format!("{key}={value},{other}"), &[]),
    ];
    for (selector, want) in &table {
        let jobs = cx.api.list_jobs(&cx.namespace, selector).await?;
        ensure!(
            names(&jobs) == *want,
            "selector {selector:?} listed {:?}",
            names(&jobs)
        );
        for job in &jobs {
            let key = if job.metadata.name.as_deref() == Some("listed-ours") {
                key
            } else {
                other
            };
            ensure!(
                job_node(job, key) == Some(cx.node.as_str()) && job.metadata.uid.is_some(),
                "a listed job does not name its node: {:?}",
                job.metadata
            );
        }
    }
    let recorded: Vec<String> = (cx.api.calls().into_iter())
        .filter(|c| c.verb == Verb::ListJobs)
        .map(|c| c.name)
        .collect();
    let sent: Vec<String> = table.iter().map(|(s, _)| s.clone()).collect();
    ensure!(recorded == sent, "calls named {recorded:?}");

    // An empty namespace is every namespace (`kubectl get jobs -A`): this namespace's Jobs
    // among them, each with its namespace; or 403 for a caller granted Jobs per namespace.
    match cx.api.list_jobs("", &format!("{key}={value}")).await {
        Ok(jobs) => {
            let here: Vec<&k8s_openapi::api::batch::v1::Job> = (jobs.iter())
                .filter(|j| j.metadata.namespace.as_deref() == Some(cx.namespace.as_str()))
                .collect();
            ensure!(
                here.len() == 1 && here[0].metadata.name.as_deref() == Some("listed-ours"),
                "every namespace's jobs listed {:?}",
                (jobs.iter())
                    .map(|j| (&j.metadata.namespace, &j.metadata.name))
                    .collect::<Vec<_>>()
            );
        }
        Err(e) => ensure!(e.is_forbidden(), "listing every namespace's jobs: {e}"),
    }

    // A Job being deleted (foreground: kept until its Pod is gone) is still listed.
    cx.wait_running("listed-theirs").await?;
    cx.api
        .inner()
        .delete_job(&cx.namespace, "listed-theirs", None)
        .await?;
    let jobs = cx.api.list_jobs(&cx.namespace, other).await?;
    ensure!(
        jobs.len() == 1 && jobs[0].metadata.deletion_timestamp.is_some(),
        "the job being deleted is listed with its deletionTimestamp: {:?}",
        jobs.iter().map(|j| &j.metadata).collect::<Vec<_>>()
    );
    Ok(())
}

/// A namespace that does not exist has no Jobs: an empty list, never NotFound, for a caller
/// that may list Jobs in every namespace (as on the in-memory cluster); 403 for one granted
/// Jobs per namespace, as `deploy/rbac.yaml`'s Role grants them, since authorization runs
/// before the list. A selector the apiserver cannot parse is a 400 BadRequest (in a namespace
/// the caller may not list in, the 403 comes first).
pub async fn jobs_of_a_missing_namespace_are_an_empty_list<B: Backend>(b: Arc<B>) -> Outcome {
    let cx = Ctx::new(b);
    cx.api
        .inner()
        .create_job(&build(&cx.spec("present", &[host::exit(0)])))
        .await?;
    let missing = format!("{}-missing", cx.namespace);
    let listed = cx.api.list_jobs(&missing, "").await;
    ensure!(
        listed.as_ref().is_ok_and(Vec::is_empty)
            || listed.as_ref().is_err_and(|e| e.is_forbidden()),
        "in namespace {missing}: {:?}",
        listed.map(|jobs| names(&jobs))
    );
    let forbidden_there = listed.is_err();
    for namespace in [cx.namespace.as_str(), missing.as_str()] {
        match cx.api.list_jobs(namespace, "a=b=c").await {
            Err(e) if forbidden_there && namespace == missing && e.is_forbidden() => {}
            Err(e) => ensure!(
                (e.kind, e.code) == (ErrorKind::BadRequest, 400),
                "a malformed selector in {namespace}: {e}"
            ),
            Ok(jobs) => ensure!(
                false,
                "a malformed selector in {namespace} listed {:?}",
                names(&jobs)
            ),
        }
    }
    Ok(())
}
