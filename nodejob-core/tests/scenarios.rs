//! The runner against the in-memory cluster: every scenario of the stale-Job guard, the races and
//! the faults, end to end through `JobApi`, in virtual time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_core::{
    ApiError, Clock, Error, ErrorKind, Level, Note, POLL_INTERVAL, Spec, build, delete_and_wait,
    delete_exact_and_wait, logs, run, run_exit_code, run_exit_code_logs, wait_ready,
};
use nodejob_fake::{FakeCluster, NodeScript, Times, Verb, Verbs, host};

type Notes = Arc<Mutex<Vec<Note>>>;

const NS: &str = "kube-system";
const NAME: &str = "upgrade-node-a";

fn cluster() -> FakeCluster {
    let c = FakeCluster::with_seed(7);
    c.add_node("node-a").expect("add node");
    c
}

/// A spec whose host operation is scripted by `host` directives; notes are captured.
fn spec(host: &[String]) -> (Spec, Notes) {
    let notes: Notes = Arc::default();
    let sink = notes.clone();
    let mut argv: Vec<String> = [
        "nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "stratum", "upgrade",
    ]
    .map(String::from)
    .into();
    argv.extend(host.iter().cloned());
    let spec = Spec {
        namespace: NS.into(),
        name: NAME.into(),
        node: "node-a".into(),
        label_key: "stratum.ciq.com/upgrade".into(),
        container: "upgrade".into(),
        argv,
        active_deadline: Duration::from_secs(600),
        poll_attempts: 12,
        kind: "per-node upgrade".into(),
        output: Some(Arc::new(move |n: &Note| {
            sink.lock().unwrap().push(n.clone())
        })),
        ..Spec::default()
    };
    (spec, notes)
}

fn said(notes: &Notes, level: Level, part: &str) -> bool {
    notes
        .lock()
        .unwrap()
        .iter()
        .any(|n| n.level == level && n.message.contains(part))
}

/// Lets the cluster's controllers run for `d` of virtual time.
async fn settle(d: Duration) {
    tokio::time::sleep(d).await;
}

/// Creates an earlier run's Job of the same name directly (another process's run) and lets it
/// run for `d`.
async fn earlier_job(
    c: &FakeCluster,
    host: &[String],
    d: Duration,
) -> k8s_openapi::api::batch::v1::Job {
    let (spec, _) = spec(host);
    let job = c.create_job_now(&build(&spec)).expect("create earlier job");
    settle(d).await;
    c.job(NS, NAME).unwrap_or(job)
}

fn uid(job: &k8s_openapi::api::batch::v1::Job) -> String {
    job.metadata.uid.clone().unwrap()
}

fn deletes_are_exact(c: &FakeCluster) -> bool {
    c.calls()
        .iter()
        .filter(|call| call.verb == Verb::DeleteJob)
        .all(|call| {
            call.preconditions
                .as_ref()
                .is_some_and(|p| p.uid.is_some() && p.resource_version.is_some())
        })
}

// --- the happy path ----------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn run_exit_code_logs_reads_the_log_before_deleting_the_job() -> anyhow::Result<()> {
    let c = cluster();
    let (spec, notes) = spec(&[
        host::log("upgraded to 9.6"),
        host::log("rebooting"),
        host::exit(0),
    ]);
    let (code, log) = run_exit_code_logs(&c, &spec).await?;
    assert_eq!((code, log.as_str()), (0, "upgraded to 9.6\nrebooting\n"));
    let job = c
        .job(NS, NAME)
        .expect("job is deleted in the foreground, still present");
    assert!(
        job.metadata.deletion_timestamp.is_some(),
        "succeeded job not deleted"
    );
    assert!(said(&notes, Level::Info, "succeeded; deleted"));
    // Exactly these requests: no polling loop.
    let verbs: Vec<Verb> = c.calls().iter().map(|call| call.verb).collect();
    assert_eq!(
        verbs.iter().filter(|v| **v == Verb::GetJob).count(),
        1,
        "{verbs:?}"
    );
    assert_eq!(c.count(Verb::CreateJob), 1);
    assert_eq!(c.count(Verb::ListPods), 1);
    assert_eq!(c.count(Verb::PodLog), 1);
    assert_eq!(c.count(Verb::DeleteJob), 1);
    assert_eq!(
        c.count(Verb::ListEvents),
        0,
        "the pod appeared within one interval"
    );
    assert!(deletes_are_exact(&c));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn completion_is_seen_when_it_happens_not_on_a_poll_tick() -> anyhow::Result<()> {
    let c = cluster();
    let (spec, _) = spec(&[host::run(Duration::from_secs(7)), host::exit(0)]);
    run(&c, &spec).await?;
    let timing = nodejob_fake::Timing::default();
    let exited = timing.pod_create + timing.container_start + Duration::from_secs(7);
    let read_at = c
        .calls()
        .iter()
        .find(|call| call.verb == Verb::ListPods)
        .unwrap()
        .at;
    // The Job's status says finished at the container's exit (counters) or within `finish` of
    // it (the terminal condition); the runner reads the pods right then.
    assert!(
        read_at >= exited && read_at <= exited + timing.finish,
        "read at {read_at:?}, exited {exited:?}"
    );
    // However long the Job runs, the wait costs the same few requests.
    assert!(
        c.count(Verb::WaitJob) <= 6,
        "{} waits",
        c.count(Verb::WaitJob)
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_long_job_costs_no_more_requests_than_a_short_one() -> anyhow::Result<()> {
    let mut counts = Vec::new();
    for secs in [3, 3000] {
        let c = cluster();
        let (mut spec, _) = spec(&[host::run(Duration::from_secs(secs))]);
        spec.active_deadline = Duration::from_secs(7200);
        spec.poll_attempts = 1000;
        run(&c, &spec).await?;
        counts.push(c.calls().len());
    }
    assert_eq!(counts[0], counts[1], "requests for a 3s and a 3000s job");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn invalid_spec_is_refused_before_any_api_call() {
    let c = cluster();
    let (mut spec, _) = spec(&[]);
    spec.name = "Upgrade_Node_A".into();
    let e = run(&c, &spec).await.unwrap_err();
    assert!(matches!(e, Error::InvalidSpec { field: "name", .. }), "{e}");
    spec.name = NAME.into();
    spec.argv.clear();
    assert!(matches!(
        run_exit_code(&c, &spec).await,
        Err(Error::InvalidSpec { field: "argv", .. })
    ));
    assert!(c.calls().is_empty(), "{:?}", c.calls());
}

// --- the stale-Job guard -------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn stale_succeeded_job_is_deleted_exactly_and_replaced() -> anyhow::Result<()> {
    let c = cluster();
    let stale = earlier_job(
        &c,
        &[host::log("stale"), host::exit(0)],
        Duration::from_secs(30),
    )
    .await;
    let (spec, notes) = spec(&[host::log("fresh"), host::exit(0)]);
    let (code, log) = run_exit_code_logs(&c, &spec).await?;
    assert_eq!(
        (code, log.as_str()),
        (0, "fresh\n"),
        "the stale job's result was reported"
    );
    assert!(said(&notes, Level::Warn, "replacing an earlier job"));
    let first_delete = c
        .calls()
        .into_iter()
        .find(|call| call.verb == Verb::DeleteJob)
        .unwrap();
    let pre = first_delete.preconditions.unwrap();
    assert_eq!(pre.uid.as_deref(), stale.metadata.uid.as_deref());
    assert_eq!(pre.resource_version, stale.metadata.resource_version);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn stale_failed_job_is_replaced_and_its_exit_code_never_reported() -> anyhow::Result<()> {
    let c = cluster();
    earlier_job(
        &c,
        &[host::log("old failure"), host::exit(9)],
        Duration::from_secs(30),
    )
    .await;
    let (spec, _) = spec(&[host::log("new"), host::exit(4)]);
    assert_eq!(
        run_exit_code_logs(&c, &spec).await?,
        (4, "new\n".to_string())
    );
    assert!(deletes_are_exact(&c));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn stale_job_being_deleted_is_waited_out_not_deleted_again() -> anyhow::Result<()> {
    let c = cluster();
    earlier_job(
        &c,
        &[host::run(Duration::from_secs(300))],
        Duration::from_secs(10),
    )
    .await;
    c.delete_job_now(NS, NAME)?;
    let (spec, notes) = spec(&[host::exit(0)]);
    run(&c, &spec).await?;
    assert!(said(&notes, Level::Info, "is being deleted"));
    // Only our own succeeded Job was deleted by the runner.
    assert_eq!(c.count(Verb::DeleteJob), 1);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn stale_running_job_finishes_its_host_operation_before_it_is_replaced() -> anyhow::Result<()>
{
    let c = cluster();
    let stale = earlier_job(
        &c,
        &[host::run(Duration::from_secs(40)), host::log("old done")],
        Duration::from_secs(5),
    )
    .await;
    let (spec, notes) = spec(&[host::log("new done")]);
    let stale_uid = uid(&stale);
    // Record how the stale pod ended: it must have exited on its own (0), never been killed.
    let (code, log) = run_exit_code_logs(&c, &spec).await?;
    assert_eq!((code, log.as_str()), (0, "new done\n"));
    assert!(said(&notes, Level::Warn, "still running"));
    let delete = c
        .calls()
        .into_iter()
        .find(|call| call.verb == Verb::DeleteJob)
        .unwrap();
    assert_eq!(
        delete.preconditions.unwrap().uid.as_deref(),
        Some(stale_uid.as_str())
    );
    assert!(
        delete.at >= Duration::from_secs(40),
        "stale job deleted at {:?}, before its host operation ended",
        delete.at
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn stale_job_replaced_between_inspect_and_delete_is_left_alone() -> anyhow::Result<()> {
    let c = cluster();
    earlier_job(&c, &[host::exit(0)], Duration::from_secs(30)).await;
    c.before(Verb::DeleteJob, |c: &FakeCluster| {
        c.replace_job_now(NS, NAME).expect("replace");
    });
    let (spec, _) = spec(&[]);
    let e = run(&c, &spec).await.unwrap_err();
    assert!(matches!(e, Error::Contended { .. }), "{e}");
    assert!(e.to_string().contains("kube-system/upgrade-node-a"), "{e}");
    let theirs = c
        .job(NS, NAME)
        .expect("the other actor's job is still there");
    assert!(
        theirs.metadata.deletion_timestamp.is_none(),
        "another actor's job was deleted"
    );
    assert!(deletes_are_exact(&c));
    assert_eq!(c.count(Verb::CreateJob), 0);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn already_exists_on_create_means_another_actor_owns_the_name() -> anyhow::Result<()> {
    let c = cluster();
    let (theirs_spec, _) = spec(&[host::run(Duration::from_secs(60))]);
    c.before(Verb::CreateJob, move |c: &FakeCluster| {
        c.create_job_now(&build(&theirs_spec))
            .expect("their create");
    });
    let (spec, _) = spec(&[]);
    let e = run(&c, &spec).await.unwrap_err();
    assert!(matches!(e, Error::Contended { .. }), "{e}");
    assert!(e.to_string().contains("already exists"), "{e}");
    assert!(
        c.job(NS, NAME)
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    assert_eq!(c.count(Verb::DeleteJob), 0);
    Ok(())
}

// --- our Job, while we wait ----------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn job_deleted_while_waiting_ends_the_run_at_once() {
    let c = cluster();
    c.schedule(Duration::from_secs(10), |c: &FakeCluster| {
        c.delete_job_now(NS, NAME).expect("delete")
    });
    let (spec, _) = spec(&[host::run(Duration::from_secs(500))]);
    let e = run_exit_code(&c, &spec).await.unwrap_err();
    assert!(matches!(&e, Error::Vanished { .. }), "{e}");
    assert!(
        c.now() < Duration::from_secs(11),
        "noticed at {:?}, not at once",
        c.now()
    );
}

#[tokio::test(start_paused = true)]
async fn job_replaced_while_waiting_is_never_read() {
    let c = cluster();
    c.schedule(Duration::from_secs(10), |c: &FakeCluster| {
        c.replace_job_now(NS, NAME).expect("replace");
    });
    let (spec, _) = spec(&[host::run(Duration::from_secs(500))]);
    let e = run_exit_code_logs(&c, &spec).await.unwrap_err();
    assert!(
        matches!(&e, Error::Vanished { detail, .. } if detail.contains("replaced") || detail.contains("deleted")),
        "{e}"
    );
    assert!(
        c.now() < Duration::from_secs(11),
        "noticed at {:?}",
        c.now()
    );
    assert_eq!(c.count(Verb::ListPods), 0, "another job's pods were read");
    assert_eq!(c.count(Verb::PodLog), 0);
}

#[tokio::test(start_paused = true)]
async fn logs_of_an_earlier_jobs_pod_never_answer() -> anyhow::Result<()> {
    let c = cluster();
    // A failed run leaves its Job and pod; the next run replaces them.
    let (first, _) = spec(&[host::log("first"), host::exit(5)]);
    assert_eq!(run_exit_code(&c, &first).await?, 5);
    assert_eq!(logs(&c, &first).await?, "first\n");
    let (second, _) = spec(&[host::log("second"), host::exit(6)]);
    assert_eq!(
        run_exit_code_logs(&c, &second).await?,
        (6, "second\n".to_string())
    );
    assert_eq!(logs(&c, &second).await?, "second\n");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn unreadable_log_returns_the_exit_code_and_leaves_the_job() {
    let c = cluster();
    c.set_script(
        "node-a",
        NodeScript {
            log_unreachable: true,
            ..NodeScript::default()
        },
    );
    let (failing, _) = spec(&[host::log("x"), host::exit(3)]);
    let e = run_exit_code_logs(&c, &failing).await.unwrap_err();
    assert!(matches!(e, Error::LogUnread { exit_code: 3, .. }), "{e}");
    assert_eq!(e.exit_code(), Some(3));
    assert!(e.to_string().contains("10250"), "{e}");
    assert!(
        c.job(NS, NAME)
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none(),
        "job not left in place"
    );

    // A succeeded job whose log cannot be read is left in place too: the log is not lost.
    let c = cluster();
    c.set_script(
        "node-a",
        NodeScript {
            log_unreachable: true,
            ..NodeScript::default()
        },
    );
    let (succeeding, _) = spec(&[host::exit(0)]);
    let e = run_exit_code_logs(&c, &succeeding).await.unwrap_err();
    assert!(matches!(e, Error::LogUnread { exit_code: 0, .. }), "{e}");
    assert_eq!(c.count(Verb::DeleteJob), 0);
}

#[tokio::test(start_paused = true)]
async fn non_zero_exit_is_an_answer_for_exit_code_and_an_error_for_run() -> anyhow::Result<()> {
    let c = cluster();
    let (spec, notes) = spec(&[host::exit(3)]);
    assert_eq!(run_exit_code(&c, &spec).await?, 3);
    assert!(said(&notes, Level::Info, "left in place"));
    assert!(
        c.job(NS, NAME)
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    let c = cluster();
    let e = run(&c, &spec).await.unwrap_err();
    assert!(matches!(e, Error::Failed { exit_code: 3, .. }), "{e}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn failure_without_a_container_exit_quotes_the_jobs_condition() {
    let c = cluster();
    c.set_script(
        "node-a",
        NodeScript {
            never_start: true,
            ..NodeScript::default()
        },
    );
    let (mut spec, _) = spec(&[]);
    spec.active_deadline = Duration::from_secs(20);
    let e = run_exit_code(&c, &spec).await.unwrap_err();
    assert!(matches!(e, Error::FailedWithoutExit { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("DeadlineExceeded: Job was active longer than specified deadline"),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn timeout_names_the_job_and_leaves_the_host_operation_running() {
    let c = cluster();
    let (mut spec, _) = spec(&[host::run(Duration::from_secs(3600))]);
    spec.active_deadline = Duration::from_secs(7200);
    let e = run(&c, &spec).await.unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    let text = e.to_string();
    for part in [
        "per-node upgrade",
        "kube-system/upgrade-node-a",
        "node node-a",
        "60s",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    assert_eq!(c.now(), spec.wait_bound(), "timed out at {:?}", c.now());
    assert_eq!(
        c.count(Verb::DeleteJob),
        0,
        "a running host operation was killed"
    );
}

#[tokio::test(start_paused = true)]
async fn failed_create_fails_fast_and_names_the_fix() {
    let c = cluster();
    let refusal = "violates PodSecurity \"baseline:latest\": privileged (container \"upgrade\" must not set securityContext.privileged=true)";
    c.set_script(
        "node-a",
        NodeScript {
            refuse_pods: Some(refusal.into()),
            ..NodeScript::default()
        },
    );
    let (spec, _) = spec(&[]);
    let e = run(&c, &spec).await.unwrap_err();
    assert!(matches!(e, Error::PodCreateRefused { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains(refusal), "{text}");
    assert!(
        text.contains(
            "kubectl label namespace kube-system pod-security.kubernetes.io/enforce=privileged"
        ),
        "{text}"
    );
    assert!(
        c.now() <= POLL_INTERVAL * 2,
        "noticed at {:?}, bound {:?}",
        c.now(),
        spec.wait_bound()
    );
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_within_the_bound() -> anyhow::Result<()> {
    let c = cluster();
    c.fail(
        Verbs::All,
        ApiError::transient(503, "the server is currently unable to handle the request"),
        Times::N(4),
    );
    c.fail(
        Verb::PodLog,
        ApiError::transient(429, "too many requests"),
        Times::Once,
    );
    let (ok, _) = spec(&[host::log("ok")]);
    assert_eq!(run_exit_code_logs(&c, &ok).await?, (0, "ok\n".to_string()));
    assert!(
        c.calls()
            .iter()
            .filter(|call| call.error == Some(ErrorKind::Transient))
            .count()
            >= 5
    );

    // An apiserver that never recovers: an error with its message, at the bound, not before.
    let c = cluster();
    c.fail(
        Verb::GetJob,
        ApiError::transient(503, "etcdserver: leader changed"),
        Times::Always,
    );
    let e = run(&c, &ok).await.unwrap_err();
    assert!(e.to_string().contains("etcdserver: leader changed"), "{e}");
    assert!(
        c.now() < ok.wait_bound() && c.now() + Duration::from_secs(5) >= ok.wait_bound(),
        "{:?}",
        c.now()
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn forbidden_fails_at_once_with_the_apiserver_message() {
    let c = cluster();
    let msg = "jobs.batch is forbidden: User \"system:serviceaccount:ops:nodejob\" cannot create resource \"jobs\"";
    c.fail(Verb::CreateJob, ApiError::forbidden(msg), Times::Always);
    let (spec, _) = spec(&[]);
    let e = run(&c, &spec).await.unwrap_err();
    assert!(e.to_string().contains(msg), "{e}");
    assert_eq!(c.count(Verb::CreateJob), 1);
    assert_eq!(c.now(), Duration::ZERO);
}

// --- delete_and_wait, delete_exact_and_wait ------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn delete_of_a_missing_job_is_not_an_error() -> anyhow::Result<()> {
    let c = cluster();
    delete_and_wait(&c, NS, "nothing-here").await?;
    let (spec, _) = spec(&[]);
    let mut ghost = build(&spec);
    ghost.metadata.uid = Some("0b7e4ad2-8c4e-4c1b-9d55-6f0a3c7b1e21".into());
    ghost.metadata.resource_version = Some("1".into());
    delete_exact_and_wait(&c, &ghost).await?;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn delete_and_wait_returns_once_the_job_and_its_pod_are_gone() -> anyhow::Result<()> {
    let c = cluster();
    earlier_job(
        &c,
        &[host::run(Duration::from_secs(300))],
        Duration::from_secs(5),
    )
    .await;
    delete_and_wait(&c, NS, NAME).await?;
    assert!(c.job(NS, NAME).is_none());
    assert!(
        c.pods(NS).is_empty(),
        "the pod outlived its job: {:?}",
        c.pods(NS).len()
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn delete_exact_refuses_a_job_changed_since_it_was_inspected() -> anyhow::Result<()> {
    let c = cluster();
    let inspected = earlier_job(&c, &[host::exit(0)], Duration::from_secs(30)).await;
    c.touch_job_now(NS, NAME)?;
    let e = delete_exact_and_wait(&c, &inspected).await.unwrap_err();
    assert_eq!(
        e.api_error().map(|a| a.kind),
        Some(ErrorKind::Conflict),
        "{e}"
    );
    assert!(
        c.job(NS, NAME)
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    let current = c.job(NS, NAME).unwrap();
    delete_exact_and_wait(&c, &current).await?;
    assert!(c.job(NS, NAME).is_none());
    Ok(())
}

// --- wait_ready ----------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn wait_ready_returns_when_a_flapping_node_turns_ready() -> anyhow::Result<()> {
    let c = cluster();
    c.set_node_ready("node-a", false)?;
    c.schedule(Duration::from_secs(12), |c: &FakeCluster| {
        c.set_node_ready("node-a", true).unwrap()
    });
    c.schedule(Duration::from_secs(13), |c: &FakeCluster| {
        c.set_node_ready("node-a", false).unwrap()
    });
    wait_ready(&c, "node-a", 10).await?;
    assert_eq!(
        c.now(),
        Duration::from_secs(12),
        "event-driven: seen when it happened"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn wait_ready_times_out_on_a_node_never_ready() {
    let c = cluster();
    c.set_node_ready("node-a", false).unwrap();
    let e = wait_ready(&c, "node-a", 4).await.unwrap_err();
    assert!(
        matches!(&e, Error::NodeNotReady { state, .. } if state == "is NotReady"),
        "{e}"
    );
    assert_eq!(c.now(), POLL_INTERVAL * 4);
}

#[tokio::test(start_paused = true)]
async fn wait_ready_waits_for_a_missing_node_to_register() -> anyhow::Result<()> {
    let c = FakeCluster::with_seed(1);
    let e = wait_ready(&c, "node-b", 2).await.unwrap_err();
    assert!(
        matches!(&e, Error::NodeNotReady { state, .. } if state == "does not exist"),
        "{e}"
    );
    c.schedule(Duration::from_secs(20), |c: &FakeCluster| {
        c.add_node("node-b").unwrap();
    });
    wait_ready(&c, "node-b", 10).await?;
    assert_eq!(c.now(), Duration::from_secs(20));
    Ok(())
}
