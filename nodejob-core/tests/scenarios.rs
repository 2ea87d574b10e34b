//! The runner against the in-memory cluster, for what only virtual time can pin: the exact moment
//! a change is seen, request counts, bounds to the second. The scenarios every backend must pass
//! (stale Jobs, races, faults) are in `nodejob-conformance`, written once for the fake and a real
//! control plane.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_core::{
    ApiError, Clock, Error, ErrorKind, Note, POLL_INTERVAL, Spec, build, delete_and_wait, run,
    run_exit_code, run_exit_code_logs, wait_ready,
};
use nodejob_fake::{ContainerStart, FakeCluster, NodeScript, Times, Verb, Verbs, host};

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
        .find(|call| call.verb == Verb::DeleteJob)
        .unwrap()
        .at;
    // The Job's status says finished at the container's exit (counters) or within `finish` of
    // it (the terminal condition); the runner, with no log to read, deletes it right then.
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

#[tokio::test(start_paused = true)]
async fn failure_without_a_container_exit_quotes_the_jobs_condition() {
    let c = cluster();
    c.set_script(
        "node-a",
        NodeScript {
            start: ContainerStart::Never,
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

#[tokio::test(start_paused = true)]
async fn a_run_that_times_out_says_its_node_is_not_ready_and_one_that_ends_reads_no_node() {
    let c = cluster();
    let (mut long, _) = spec(&[host::run(Duration::from_secs(3600))]);
    long.active_deadline = Duration::from_secs(7200);
    c.schedule(Duration::from_secs(10), |c: &FakeCluster| {
        c.set_node_ready("node-a", false).unwrap()
    });
    let e = run(&c, &long).await.unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("node node-a is NotReady"), "{e}");
    assert_eq!(c.now(), long.wait_bound(), "timed out at {:?}", c.now());
    assert_eq!(c.count(Verb::GetNode), 1, "{:?}", c.calls());

    // A run that ends within its wait costs no node read.
    let c = cluster();
    let (short, _) = spec(&[host::run(Duration::from_secs(30)), host::exit(0)]);
    run(&c, &short).await.expect("run");
    assert_eq!(c.count(Verb::GetNode), 0, "{:?}", c.calls());
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_node_was_deleted_names_it() {
    let c = cluster();
    let (mut spec, _) = spec(&[host::run(Duration::from_secs(3600))]);
    spec.active_deadline = Duration::from_secs(7200);
    c.schedule(Duration::from_secs(10), |c: &FakeCluster| {
        c.remove_node("node-a").unwrap()
    });
    let e = run_exit_code(&c, &spec).await.unwrap_err();
    assert!(
        matches!(&e, Error::NodeDeleted { node, .. } if node == "node-a"),
        "{e}"
    );
    // The pod garbage collector fails the Pod of the deleted node after its 40 s quarantine
    // (DisruptionTarget, DeletionByPodGC), as on a real cluster: the Job fails, and the runner
    // names the node's deletion then, not at the end of its wait.
    assert!(
        c.now() < Duration::from_secs(10 + 40 + 20),
        "ended at {:?}",
        c.now()
    );
    assert_eq!(c.count(Verb::DeleteJob), 0, "the job was deleted");
}
