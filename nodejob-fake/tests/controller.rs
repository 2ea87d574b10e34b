//! The Job controller's timeline in virtual time: pod creation, running, the interim then
//! terminal conditions, the deadline, FailedCreate retries, and foreground deletion.

mod common;

use std::time::Duration;

use common::{JobWatch, NS, TestResult, conditions, exit_code, job, job_with_deadline, phase, uid};
use nodejob_core::{Change, JobApi};
use nodejob_fake::{Clock, ContainerStart, FakeCluster, NodeScript, OnSigterm, host};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[tokio::test(start_paused = true)]
async fn success_shows_success_criteria_met_before_complete() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let argv = [
        host::log("upgraded"),
        host::run(Duration::from_secs(5)),
        host::exit(0),
    ];
    let created = cluster.create_job(&job("a", "n1", &argv)).await?;
    let mut watch = JobWatch::after(&created);

    // t+200ms: first sync, startTime and the pod.
    let synced = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(0.2));
    let status = synced.status.clone().unwrap();
    assert_eq!(
        status.start_time.unwrap().0.to_string(),
        "2026-01-01T00:00:00Z",
        "whole seconds"
    );
    assert_eq!(
        (status.active, status.ready, status.terminating),
        (Some(1), Some(0), Some(0))
    );
    let pods = cluster.pods(NS);
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    assert_eq!(phase(pod), "Pending");
    assert_eq!(
        pod.metadata.finalizers,
        Some(vec!["batch.kubernetes.io/job-tracking".to_string()])
    );
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.clone()),
        ("Job", uid(&created))
    );
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));

    // +1s: the kubelet started the container.
    let running = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(1.2));
    assert_eq!(running.status.as_ref().unwrap().ready, Some(1));
    assert_eq!(phase(&cluster.pods(NS)[0]), "Running");

    // +5s: counted, interim condition only.
    let interim = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(6.2));
    let status = interim.status.clone().unwrap();
    assert_eq!(
        (status.active, status.ready, status.succeeded),
        (None, Some(0), Some(1))
    );
    assert_eq!(conditions(&interim), ["SuccessCriteriaMet"]);
    let met = &status.conditions.unwrap()[0];
    assert_eq!(met.reason.as_deref(), Some("CompletionsReached"));
    assert!(status.completion_time.is_none());

    // +100ms: the terminal condition, after the pod's finalizer went.
    let pod = &cluster.pods(NS)[0];
    assert_eq!(
        (phase(pod).as_str(), exit_code(pod)),
        ("Succeeded", Some(0))
    );
    assert_eq!(pod.metadata.finalizers, None);
    let complete = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(6.3));
    assert_eq!(conditions(&complete), ["SuccessCriteriaMet", "Complete"]);
    let status = complete.status.unwrap();
    assert_eq!(
        status.completion_time.unwrap().0.to_string(),
        "2026-01-01T00:00:06Z"
    );
    let last = status.conditions.unwrap().pop().unwrap();
    assert_eq!(last.reason.as_deref(), Some("CompletionsReached"));
    assert_eq!(
        last.message.as_deref(),
        Some("Reached expected number of succeeded pods")
    );

    let pod_name = pod.metadata.name.clone().unwrap();
    assert_eq!(
        cluster.pod_log(NS, &pod_name, "run", 1 << 20).await?,
        "upgraded\n"
    );
    let events = cluster.list_events(NS, &uid(&created)).await?;
    let reasons: Vec<_> = events.iter().map(|e| e.reason.clone().unwrap()).collect();
    assert_eq!(reasons, ["SuccessfulCreate", "Completed"]);
    assert_eq!(
        events[0].message.as_deref(),
        Some(format!("Created pod: {pod_name}").as_str())
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn failure_shows_failure_target_before_failed() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let created = cluster
        .create_job(&job("a", "n1", &[host::exit(3)]))
        .await?;
    let mut watch = JobWatch::after(&created);
    watch.applied(&cluster).await?; // startTime, active
    watch.applied(&cluster).await?; // ready

    let target = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(3.2), "default run time is 2s");
    assert_eq!(conditions(&target), ["FailureTarget"]);
    let status = target.status.clone().unwrap();
    assert_eq!(
        (status.failed, status.succeeded, status.active),
        (Some(1), None, None)
    );
    let cond = &status.conditions.unwrap()[0];
    assert_eq!(cond.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(
        cond.message.as_deref(),
        Some("Job has reached the specified backoff limit")
    );

    let failed = watch.applied(&cluster).await?;
    assert_eq!(conditions(&failed), ["FailureTarget", "Failed"]);
    let status = failed.status.unwrap();
    assert!(status.completion_time.is_none());
    let cond = &status.conditions.unwrap()[1];
    assert_eq!(cond.reason.as_deref(), Some("BackoffLimitExceeded"));

    let pod = &cluster.pods(NS)[0];
    assert_eq!((phase(pod).as_str(), exit_code(pod)), ("Failed", Some(3)));
    let terminated = pod
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(terminated.reason.as_deref(), Some("Error"));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn deadline_counts_a_pod_that_never_started_failed_at_once() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.set_script(
        "n1",
        NodeScript {
            start: ContainerStart::Never,
            ..NodeScript::default()
        },
    );
    let created = cluster
        .create_job(&job_with_deadline("a", "n1", &[], 10))
        .await?;
    let mut watch = JobWatch::after(&created);
    watch.applied(&cluster).await?; // t=200ms: startTime, active 1

    cluster.sleep(secs(4.0)).await;
    let pod = cluster.pods(NS).remove(0);
    let pod_name = pod.metadata.name.clone().unwrap();
    let err = cluster
        .pod_log(NS, &pod_name, "run", 100)
        .await
        .unwrap_err();
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        format!("container \"run\" in pod \"{pod_name}\" is waiting to start: ContainerCreating")
    );

    // The controller deletes the pod and, the Job having met its FailureTarget, releases and
    // counts it in the same sync, while it still terminates.
    let target = watch.applied(&cluster).await?;
    assert_eq!(
        cluster.now(),
        secs(10.2),
        "startTime + activeDeadlineSeconds"
    );
    assert_eq!(conditions(&target), ["FailureTarget"]);
    let status = target.status.clone().unwrap();
    assert_eq!(
        (status.active, status.terminating, status.failed),
        (None, Some(1), Some(1))
    );
    let cond = &status.conditions.unwrap()[0];
    assert_eq!(cond.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        cond.message.as_deref(),
        Some("Job was active longer than specified deadline")
    );
    let pod = &cluster.pods(NS)[0];
    assert!(pod.metadata.deletion_timestamp.is_some());
    assert_eq!(pod.metadata.finalizers, None, "released at once");

    let gone = watch.applied(&cluster).await?;
    let status = gone.status.clone().unwrap();
    assert_eq!((status.terminating, status.failed), (Some(0), Some(1)));
    assert_eq!(conditions(&gone), ["FailureTarget"]);
    assert!(cluster.pods(NS).is_empty(), "the deleted pod is gone");
    let failed = watch.applied(&cluster).await?;
    assert_eq!(conditions(&failed), ["FailureTarget", "Failed"]);
    let status = failed.status.unwrap();
    assert_eq!((status.terminating, status.failed), (Some(0), Some(1)));
    let cond = status.conditions.unwrap().pop().unwrap();
    assert_eq!(cond.reason.as_deref(), Some("DeadlineExceeded"));
    Ok(())
}

/// A Job whose pod runs `argv` with `terminationGracePeriodSeconds: 5` and a 10s deadline.
fn deadline_job(argv: &[String]) -> k8s_openapi::api::batch::v1::Job {
    let mut spec = job_with_deadline("a", "n1", argv, 10);
    let pod_spec = spec.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    pod_spec.termination_grace_period_seconds = Some(5);
    spec
}

#[tokio::test(start_paused = true)]
async fn deadline_counts_a_running_pod_failed_at_once_and_sigterm_ends_it() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let argv = [
        host::log("never printed"),
        host::run(Duration::from_secs(600)),
    ];
    let created = cluster.create_job(&deadline_job(&argv)).await?;
    let mut watch = JobWatch::after(&created);
    watch.applied(&cluster).await?; // startTime
    watch.applied(&cluster).await?; // ready

    // FailureTarget, the pod deleted, its finalizer removed and the pod counted, all while it
    // still runs.
    let target = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(10.2));
    assert_eq!(conditions(&target), ["FailureTarget"]);
    let status = target.status.unwrap();
    assert_eq!(
        (
            status.active,
            status.ready,
            status.terminating,
            status.failed
        ),
        (None, Some(0), Some(1), Some(1))
    );
    let pod = &cluster.pods(NS)[0];
    assert_eq!(phase(pod), "Running");
    assert!(pod.metadata.deletion_timestamp.is_some());
    assert_eq!(pod.metadata.finalizers, None);

    // SIGTERM ends the program (it does not trap it) after the kill delay: exit 143.
    let terminated = watch.applied(&cluster).await?;
    assert_eq!(
        cluster.now(),
        secs(10.7),
        "Timing::kill_delay after the deletion"
    );
    let status = terminated.status.clone().unwrap();
    assert_eq!((status.terminating, status.failed), (Some(0), Some(1)));
    assert_eq!(conditions(&terminated), ["FailureTarget"]);
    let pod = &cluster.pods(NS)[0];
    assert_eq!((phase(pod).as_str(), exit_code(pod)), ("Failed", Some(143)));
    let reason = pod
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap()
        .reason
        .clone();
    assert_eq!(reason.as_deref(), Some("Error"));
    let pod_name = pod.metadata.name.clone().unwrap();
    assert_eq!(
        cluster.pod_log(NS, &pod_name, "run", 100).await?,
        "",
        "a killed program printed nothing"
    );

    // The terminal condition once the pod is gone.
    let failed = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(10.8));
    assert_eq!(conditions(&failed), ["FailureTarget", "Failed"]);
    assert!(cluster.pods(NS).is_empty());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_container_that_ignores_sigterm_is_sigkilled_after_the_grace_period() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let script = NodeScript {
        on_sigterm: OnSigterm::Ignore,
        ..NodeScript::default()
    };
    cluster.set_script("n1", script);
    let argv = [host::run(Duration::from_secs(600))];
    let created = cluster.create_job(&deadline_job(&argv)).await?;
    let mut watch = JobWatch::after(&created);
    watch.applied(&cluster).await?; // startTime
    watch.applied(&cluster).await?; // ready
    let target = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(10.2));
    assert_eq!(target.status.unwrap().terminating, Some(1));

    let killed = watch.applied(&cluster).await?;
    assert_eq!(
        cluster.now(),
        secs(15.2),
        "SIGKILL after terminationGracePeriodSeconds"
    );
    assert_eq!(killed.status.unwrap().terminating, Some(0));
    let pod = &cluster.pods(NS)[0];
    assert_eq!((phase(pod).as_str(), exit_code(pod)), ("Failed", Some(137)));
    let failed = watch.applied(&cluster).await?;
    assert_eq!(conditions(&failed), ["FailureTarget", "Failed"]);
    assert!(cluster.pods(NS).is_empty());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn refused_pod_creation_records_failed_create_and_retries_with_backoff() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let refusal = r#"violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)"#;
    let script = NodeScript {
        refuse_pods: Some(refusal.into()),
        ..NodeScript::default()
    };
    cluster.set_script("n1", script);
    let created = cluster.create_job(&job("a", "n1", &[])).await?;

    cluster.sleep(secs(1.5)).await;
    let events = cluster.list_events(NS, &uid(&created)).await?;
    assert_eq!(events.len(), 1);
    let event = &events[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("FailedCreate"));
    let message = event.message.clone().unwrap();
    let pod_name = message
        .strip_prefix("Error creating: pods \"")
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    assert_eq!(
        message,
        format!("Error creating: pods \"{pod_name}\" is forbidden: {refusal}")
    );
    assert!(pod_name.starts_with("a-") && pod_name.len() == 7);
    let involved = &event.involved_object;
    assert_eq!(involved.kind.as_deref(), Some("Job"));
    assert_eq!(
        (involved.name.as_deref(), involved.namespace.as_deref()),
        (Some("a"), Some(NS))
    );
    assert_eq!(event.count, Some(1));
    assert!(cluster.pods(NS).is_empty());
    let job = cluster.get_job(NS, "a").await?;
    assert!(job.status.as_ref().unwrap().start_time.is_some());
    assert_eq!(job.status.unwrap().active, None);

    // First try at 0.2s; retries at 0.2+10, 10.2+20, 30.2+40 seconds.
    for (at, count) in [(10.0, 1), (10.5, 2), (30.0, 2), (30.5, 3), (70.5, 4)] {
        cluster.sleep(secs(at) - cluster.now()).await;
        let events = cluster.list_events(NS, &uid(&created)).await?;
        assert_eq!(events.len(), count, "at {at}s");
    }

    // Once admission lets it through, the next retry (70.2 + 80s) creates the pod.
    cluster.set_script("n1", NodeScript::default());
    cluster.sleep(secs(150.0) - cluster.now()).await;
    assert!(cluster.pods(NS).is_empty());
    cluster.sleep(secs(150.5) - cluster.now()).await;
    assert_eq!(cluster.pods(NS).len(), 1);
    let mut watch = JobWatch::after(&cluster.get_job(NS, "a").await?);
    loop {
        let job = watch.applied(&cluster).await?;
        if conditions(&job).contains(&"Complete".to_string()) {
            break;
        }
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn foreground_delete_releases_the_running_pod_at_once_and_keeps_the_status() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let argv = [host::run(Duration::from_secs(600))];
    let created = cluster.create_job(&job("a", "n1", &argv)).await?;
    cluster.sleep(secs(3.0)).await;
    assert_eq!(phase(&cluster.pods(NS)[0]), "Running");

    let before = cluster.get_job(NS, "a").await?;
    let mut watch = JobWatch::after(&before);
    cluster.delete_job(NS, "a", None).await?;

    // The delete itself: deletionTimestamp and the foregroundDeletion finalizer.
    let deleting = watch.applied(&cluster).await?;
    assert!(deleting.metadata.deletion_timestamp.is_some());
    // The controller removed the tracking finalizer from the running pod at once (the whole
    // Job is terminating), then the garbage collector deleted the pod: the controller goes on
    // writing the status.
    let terminating = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(3.0));
    let status = terminating.status.unwrap();
    assert_eq!(
        (status.active, status.ready, status.terminating),
        (None, Some(0), Some(1))
    );
    assert_eq!(
        status.failed, None,
        "released before it was deleted: not counted"
    );
    let pod = cluster.pods(NS).remove(0);
    assert_eq!(phase(&pod), "Running");
    assert!(pod.metadata.deletion_timestamp.is_some());
    assert_eq!(pod.metadata.finalizers, None);

    // SIGTERM ends the container (exit 143) after the kill delay; the pod goes shortly after,
    // then the Job.
    let terminated = watch.applied(&cluster).await?;
    assert_eq!(cluster.now(), secs(3.5));
    assert_eq!(terminated.status.unwrap().terminating, Some(0));
    let pod = &cluster.pods(NS)[0];
    assert_eq!((phase(pod).as_str(), exit_code(pod)), ("Failed", Some(143)));
    let next = watch.next(&cluster).await?;
    let Change::Deleted(deleted) = next else {
        return Err(format!("expected the Job's deletion, got {next:?}").into());
    };
    assert_eq!(cluster.now(), secs(3.6));
    assert_eq!(uid(&deleted), uid(&created));
    assert!(
        cluster.pods(NS).is_empty(),
        "the pod is gone before the Job"
    );
    assert!(cluster.get_job(NS, "a").await.unwrap_err().is_not_found());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn foreground_delete_waits_for_a_container_that_ignores_sigterm() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let script = NodeScript {
        on_sigterm: OnSigterm::Ignore,
        ..NodeScript::default()
    };
    cluster.set_script("n1", script);
    let argv = [host::run(Duration::from_secs(600))];
    let created = cluster.create_job(&job("a", "n1", &argv)).await?;
    cluster.sleep(secs(3.0)).await;
    let before = cluster.get_job(NS, "a").await?;
    let mut watch = JobWatch::after(&before);
    cluster.delete_job(NS, "a", None).await?;

    // The Job stays, being deleted, while its pod terminates (grace period 30s by default).
    cluster.sleep(secs(20.0)).await;
    let deleting = cluster.get_job(NS, "a").await?;
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(deleting.status.unwrap().terminating, Some(1));
    let pod = cluster.pods(NS).remove(0);
    assert_eq!(phase(&pod), "Running");

    let deleted = loop {
        match watch.next(&cluster).await? {
            Change::Applied(job) => assert_eq!(uid(&job), uid(&created)),
            Change::Deleted(job) => break job,
            Change::TimedOut => return Err("timed out".into()),
        }
    };
    assert_eq!(uid(&deleted), uid(&created));
    assert_eq!(
        cluster.now(),
        secs(33.1),
        "SIGKILL 30s after the deletion, the pod removed 100ms later"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn deleting_a_finished_job_removes_it_promptly() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.create_job(&job("a", "n1", &[])).await?;
    cluster.sleep(secs(10.0)).await;
    let done = cluster.get_job(NS, "a").await?;
    assert_eq!(conditions(&done), ["SuccessCriteriaMet", "Complete"]);

    let mut watch = JobWatch::after(&done);
    cluster.delete_job(NS, "a", None).await?;
    assert!(matches!(watch.next(&cluster).await?, Change::Applied(_)));
    assert!(matches!(watch.next(&cluster).await?, Change::Deleted(_)));
    assert_eq!(
        cluster.now(),
        secs(10.0),
        "a terminated pod goes with grace period 0"
    );
    assert!(cluster.pods(NS).is_empty());
    Ok(())
}
