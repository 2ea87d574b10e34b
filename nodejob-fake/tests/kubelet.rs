//! The kubelet: the argv vocabulary and node scripts, logs, unreachable kubelets, NotReady
//! nodes in virtual time.

mod common;

use std::time::Duration;

use common::{JobWatch, NS, TestResult, conditions, exit_code, job, phase};
use nodejob_core::{ErrorKind, JobApi, NodeApi};
use nodejob_fake::{Clock, FakeCluster, LogEndpoint, NodeScript, host};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Runs Job `name` on `node` with `argv` until it finishes; answers its pod's exit code and
/// log, and when it finished.
async fn run(
    cluster: &FakeCluster,
    name: &str,
    node: &str,
    argv: &[String],
) -> Result<(Option<i32>, String, Duration), Box<dyn std::error::Error>> {
    let created = cluster.create_job(&job(name, node, argv)).await?;
    let mut watch = JobWatch::after(&created);
    loop {
        let job = watch.applied(cluster).await?;
        let c = conditions(&job);
        if c.iter().any(|c| c == "Complete" || c == "Failed") {
            break;
        }
    }
    let selector = format!("job-name={name}");
    let pod = cluster.list_pods(NS, &selector).await?.remove(0);
    let pod_name = pod.metadata.name.clone().unwrap();
    let log = cluster.pod_log(NS, &pod_name, "run", 1 << 20).await?;
    Ok((exit_code(&pod), log, cluster.now()))
}

#[tokio::test(start_paused = true)]
async fn argv_directives_win_over_the_node_script() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let script = NodeScript {
        exit_code: 1,
        log: "from the script\n".into(),
        run_time: Duration::from_secs(10),
        ..NodeScript::default()
    };
    cluster.set_script("n1", script);

    // The script speaks where the argv is silent and no host model plays it.
    let (code, log, _) = run(
        &cluster,
        "silent",
        "n1",
        &["/usr/bin/upgrade-tool".into(), "upgrade".into()],
    )
    .await?;
    assert_eq!((code, log.as_str()), (Some(1), "from the script\n"));
    // An argv that execs stratum is the host model's: a usage error here.
    let (code, log, _) = run(
        &cluster,
        "modelled",
        "n1",
        &["stratum".into(), "upgrade".into()],
    )
    .await?;
    assert_eq!(code, Some(2));
    assert!(
        log.starts_with("stratum: --to is required\nusage: "),
        "{log}"
    );
    // A directive scripts it by hand again: the directives, then the script.
    let (code, log, _) = run(
        &cluster,
        "scripted",
        "n1",
        &["stratum".into(), "upgrade".into(), host::exit(4)],
    )
    .await?;
    assert_eq!((code, log.as_str()), (Some(4), "from the script\n"));

    // The argv wins where it speaks; unknown or malformed directives are ignored.
    let start = cluster.now();
    let argv = [
        "nsenter".to_string(),
        host::log("line one"),
        "nodejob-test:bogus=1".into(),
        "nodejob-test:exit=x".into(),
        host::exit(0),
        host::log("line two"),
        host::run(Duration::from_secs(3)),
    ];
    let (code, log, done) = run(&cluster, "spoken", "n1", &argv).await?;
    assert_eq!((code, log.as_str()), (Some(0), "line one\nline two\n"));
    // 200ms to the pod, 1s to start, 3s run, 100ms to the terminal condition.
    assert_eq!(done - start, secs(4.3));

    // Exit statuses are taken modulo 256, as a process exit status is.
    let (code, _, _) = run(&cluster, "wrapped", "n1", &[host::exit(-1)]).await?;
    assert_eq!(code, Some(255));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn pod_log_answers() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let argv = [host::log("abcdef"), host::run(Duration::from_secs(5))];
    cluster.create_job(&job("a", "n1", &argv)).await?;

    cluster.sleep(secs(1.0)).await; // the pod exists (200ms), its container starts at 1.2s
    let pod = cluster.pods(NS).remove(0).metadata.name.unwrap();
    let err = cluster.pod_log(NS, &pod, "run", 10).await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::BadRequest, 400));
    assert_eq!(
        err.message,
        format!("container \"run\" in pod \"{pod}\" is waiting to start: ContainerCreating")
    );

    cluster.sleep(secs(1.0)).await; // running: prints at exit
    assert_eq!(cluster.pod_log(NS, &pod, "run", 10).await?, "");
    cluster.sleep(secs(5.0)).await;
    assert_eq!(cluster.pod_log(NS, &pod, "run", 1 << 20).await?, "abcdef\n");
    assert_eq!(cluster.pod_log(NS, &pod, "run", 3).await?, "abc");
    assert_eq!(
        cluster.pod_log(NS, &pod, "", 3).await?,
        "abc",
        "the only container by default"
    );

    let err = cluster.pod_log(NS, &pod, "other", 3).await.unwrap_err();
    assert_eq!(
        (err.code, err.message),
        (400, format!("container other is not valid for pod {pod}"))
    );
    let err = cluster.pod_log(NS, "a-zzzzz", "run", 3).await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::NotFound, r#"pods "a-zzzzz" not found"#)
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn unreachable_kubelet_answers_500_for_logs_only() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n0")?;
    cluster.add_node("n1")?;
    cluster.set_script(
        "n1",
        NodeScript {
            log_endpoint: LogEndpoint::Unreachable,
            ..NodeScript::default()
        },
    );
    let created = cluster
        .create_job(&job("a", "n1", &[host::log("x"), host::exit(2)]))
        .await?;
    let mut watch = JobWatch::after(&created);
    while !conditions(&watch.applied(&cluster).await?).contains(&"Failed".to_string()) {}

    let pod = cluster.list_pods(NS, "job-name=a").await?.remove(0);
    assert_eq!(exit_code(&pod), Some(2), "the status is known");
    let name = pod.metadata.name.unwrap();
    let err = cluster.pod_log(NS, &name, "run", 100).await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::Transient, 500));
    assert!(err.is_retryable());
    assert_eq!(
        err.message,
        format!(
            "Get \"https://10.0.0.2:10250/containerLogs/default/{name}/run?limitBytes=100\": dial tcp 10.0.0.2:10250: connect: connection refused"
        ),
        "the URL LogLocation builds: the kubelet port of the node, limitBytes as the query"
    );

    cluster.set_script("n1", NodeScript::default());
    assert_eq!(cluster.pod_log(NS, &name, "run", 100).await?, "x\n");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_not_ready_node_holds_its_pods_until_ready() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.set_node_ready("n1", false)?;
    cluster.schedule(secs(20.0), |c| c.set_node_ready("n1", true).unwrap());
    let (code, _, done) = run(&cluster, "a", "n1", &[host::run(Duration::from_secs(5))]).await?;
    assert_eq!(code, Some(0));
    // Created at 200ms, started when Ready at 20s, exited at 25s.
    assert_eq!(done, secs(25.1));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_exit_while_not_ready_is_reported_when_ready_again() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.schedule(secs(4.0), |c| c.set_node_ready("n1", false).unwrap());
    cluster.schedule(secs(30.0), |c| c.set_node_ready("n1", true).unwrap());
    let (code, _, done) = run(&cluster, "a", "n1", &[host::run(Duration::from_secs(5))]).await?;
    assert_eq!(code, Some(0));
    assert_eq!(done, secs(30.1), "reported once the node is Ready");
    let pod = cluster.pods(NS).remove(0);
    let state = pod
        .status
        .unwrap()
        .container_statuses
        .unwrap()
        .remove(0)
        .state
        .unwrap();
    let finished = state.terminated.unwrap().finished_at.unwrap();
    assert_eq!(
        finished.0.to_string(),
        "2026-01-01T00:00:06Z",
        "it exited at 1.2s + 5s"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn nodes_are_ready_with_an_internal_ip() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let node = cluster.get_node("n1").await?;
    let status = node.status.unwrap();
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True");
    let address = &status.addresses.unwrap()[0];
    assert_eq!(
        (address.type_.as_str(), address.address.as_str()),
        ("InternalIP", "10.0.0.1")
    );

    cluster.set_node_ready("n1", false)?;
    let node = cluster.node("n1").unwrap();
    let ready = node
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready");
    assert_eq!(ready.unwrap().status, "False");

    assert!(cluster.add_node("n1").unwrap_err().is_already_exists());
    cluster.remove_node("n1")?;
    assert!(cluster.get_node("n1").await.unwrap_err().is_not_found());
    assert!(
        cluster
            .set_node_ready("n1", true)
            .unwrap_err()
            .is_not_found()
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_pod_on_a_missing_node_waits_for_it() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.create_job(&job("a", "later", &[])).await?;
    cluster.sleep(secs(10.0)).await;
    let pod = cluster.pods(NS).remove(0);
    assert_eq!(phase(&pod), "Pending");
    let name = pod.metadata.name.unwrap();
    // The apiserver reads the Node under the request's resource, `pods`: the real message
    // names the node as a pod.
    let err = cluster.pod_log(NS, &name, "run", 10).await.unwrap_err();
    assert_eq!(
        (err.kind, err.code, err.message.as_str()),
        (ErrorKind::NotFound, 404, r#"pods "later" not found"#)
    );

    cluster.add_node("later")?;
    cluster.sleep(secs(0.5)).await;
    assert_eq!(phase(&cluster.pods(NS)[0]), "Running");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn pod_log_of_a_pod_without_a_node_is_empty() -> TestResult {
    let cluster = FakeCluster::new();
    let mut unbound = job("a", "n1", &[host::log("x")]);
    let template = unbound
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap();
    template.node_name = None;
    cluster.create_job(&unbound).await?;
    cluster.sleep(secs(1.0)).await;
    let pod = cluster.pods(NS).remove(0);
    assert_eq!(phase(&pod), "Pending", "no scheduler");
    let name = pod.metadata.name.unwrap();

    // LogLocation returns no location: 204 No Content, an empty log (not a 400).
    assert_eq!(cluster.pod_log(NS, &name, "run", 10).await?, "");
    assert_eq!(cluster.pod_log(NS, &name, "", 10).await?, "");
    // The container is checked first.
    let err = cluster.pod_log(NS, &name, "other", 10).await.unwrap_err();
    assert_eq!(
        (err.kind, err.message),
        (
            ErrorKind::BadRequest,
            format!("container other is not valid for pod {name}")
        )
    );
    Ok(())
}

/// The `state.terminated` of the pod's first container.
fn terminated(
    pod: &k8s_openapi::api::core::v1::Pod,
) -> k8s_openapi::api::core::v1::ContainerStateTerminated {
    let status = pod.status.as_ref().unwrap();
    let state = status.container_statuses.as_ref().unwrap()[0]
        .state
        .as_ref();
    state.unwrap().terminated.clone().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_failed_fallback_to_logs_container_gets_its_log_tail_as_message() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    // 100 lines of 40 bytes: the kubelet keeps the last 80 lines, then their last 2048 bytes.
    let lines: Vec<String> = (0..100)
        .map(|i| format!("line {i:03} {}", "x".repeat(30)))
        .collect();
    let with_policy = |name: &str, exit: i32, policy: &str| {
        let mut argv: Vec<String> = lines.iter().map(host::log).collect();
        argv.push(host::exit(exit));
        let mut j = job(name, "n1", &argv);
        let pod = j.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
        pod.containers[0].termination_message_policy = Some(policy.to_string());
        j
    };
    cluster
        .create_job(&with_policy("failed", 3, "FallbackToLogsOnError"))
        .await?;
    cluster
        .create_job(&with_policy("succeeded", 0, "FallbackToLogsOnError"))
        .await?;
    cluster.create_job(&with_policy("file", 3, "File")).await?;
    cluster.sleep(secs(10.0)).await;

    let pod = |job: &str| {
        let pods = cluster.pods(NS).into_iter();
        let mut of_job = pods.filter(|p| {
            let labels = p.metadata.labels.as_ref();
            labels.and_then(|l| l.get("job-name")).map(String::as_str) == Some(job)
        });
        of_job.next().ok_or(format!("no pod of Job {job}"))
    };
    let failed = terminated(&pod("failed")?);
    assert_eq!(failed.exit_code, 3);
    let tail: String = lines[20..].iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(tail.len(), 80 * 40);
    let want = &tail[tail.len() - 2048..];
    assert_eq!(failed.message.as_deref(), Some(want));

    let succeeded = terminated(&pod("succeeded")?);
    assert_eq!((succeeded.exit_code, succeeded.message), (0, None));
    let file = terminated(&pod("file")?);
    assert_eq!((file.exit_code, file.message), (3, None));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_container_ended_by_sigterm_has_no_fallback_message() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let argv = [
        host::log("never printed"),
        host::run(Duration::from_secs(600)),
    ];
    let mut j = job("a", "n1", &argv);
    let pod = j.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    pod.containers[0].termination_message_policy = Some("FallbackToLogsOnError".into());
    cluster.create_job(&j).await?;
    cluster.sleep(secs(3.0)).await;
    cluster.delete_job(NS, "a", None).await?;
    cluster.sleep(secs(0.55)).await;
    let pod = cluster.pods(NS).remove(0);
    let t = terminated(&pod);
    assert_eq!(
        (t.exit_code, t.reason.as_deref(), t.message),
        (143, Some("Error"), None),
        "a program ended by SIGTERM printed nothing"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_pods_of_a_deleted_node_are_failed_and_deleted_by_the_pod_gc_40s_later() -> TestResult {
    // `gcOrphaned` (pkg/controller/podgc): quarantined 40 s, then marked Failed with a
    // DisruptionTarget condition and deleted with a grace period of 0; the Job fails.
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let created = cluster
        .create_job(&job("a", "n1", &[host::run(secs(3600.0))]))
        .await?;
    cluster.sleep(secs(5.0)).await;
    assert_eq!(phase(&cluster.pods(NS)[0]), "Running");
    let removed_at = cluster.now();
    cluster.remove_node("n1")?;

    cluster.sleep(secs(39.0)).await;
    let pod = cluster.pods(NS).remove(0);
    assert_eq!(phase(&pod), "Running", "quarantined until 40 s");

    let mut watch = JobWatch::after(&created);
    let failed = loop {
        let job = watch.applied(&cluster).await?;
        if conditions(&job).iter().any(|c| c == "Failed") {
            break job;
        }
    };
    assert!(
        cluster.now() - removed_at < secs(45.0),
        "{:?}",
        cluster.now()
    );
    assert!(cluster.pods(NS).is_empty(), "force-deleted");
    assert_eq!(failed.status.and_then(|s| s.failed), Some(1));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_added_again_before_the_quarantine_keeps_its_pods() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster
        .create_job(&job("a", "n1", &[host::run(secs(3600.0))]))
        .await?;
    cluster.sleep(secs(5.0)).await;
    cluster.remove_node("n1")?;
    cluster.sleep(secs(10.0)).await;
    cluster.add_node("n1")?;
    cluster.sleep(secs(60.0)).await;
    assert_eq!(phase(&cluster.pods(NS)[0]), "Running");
    Ok(())
}
