//! The eviction subresource: UID precondition, dry runs, PodDisruptionBudgets, pods the
//! registry deletes without a budget, grace periods.

mod common;

use std::time::Duration;

use common::{
    NS, TestResult, app, bare_pod, budget, budget_counts, deployment, exit_code, job, phase,
    pods_of, ready,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_core::{DryRun, ErrorKind, Eviction, JobApi, NodeChange, PodApi};
use nodejob_fake::{Clock, ContainerStart, FakeCluster, NodeScript, OnSigterm, Verb, host};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap()
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap()
}

fn min(n: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(n))
}

/// Three nodes; Deployment `web` with `replicas` pods, all Ready on n1 (n2 and n3 cordoned
/// while it starts, then uncordoned); a budget `web` with `minAvailable` when given. Answers the
/// pods, in name order.
async fn web_on_n1(
    cluster: &FakeCluster,
    replicas: i32,
    min_available: Option<i32>,
) -> Result<Vec<Pod>, Box<dyn std::error::Error>> {
    for node in ["n1", "n2", "n3"] {
        cluster.add_node(node)?;
    }
    for node in ["n2", "n3"] {
        cluster.patch_node_now(node, &[NodeChange::Cordon])?;
    }
    cluster.create_deployment_now(&deployment("web", replicas))?;
    if let Some(n) = min_available {
        cluster.create_budget_now(&budget("web", "web", min(n), None))?;
    }
    // The ReplicaSet creates its pods 200ms later; they are Ready 1s after.
    cluster.sleep(secs(1.5)).await;
    for node in ["n2", "n3"] {
        cluster.patch_node_now(node, &[NodeChange::Uncordon])?;
    }
    let pods = pods_of(cluster, "web");
    assert_eq!(pods.len(), usize::try_from(replicas)?);
    assert!(
        pods.iter().all(|p| ready(p) && common::node_of(p) == "n1"),
        "{pods:?}"
    );
    Ok(pods)
}

#[tokio::test(start_paused = true)]
async fn a_budget_allows_one_disruption_at_a_time() -> TestResult {
    let cluster = FakeCluster::new();
    let pods = web_on_n1(&cluster, 3, Some(2)).await?;
    assert_eq!(budget_counts(&cluster, "web"), (3, 2, 3, 1));

    let evicted = cluster
        .evict_pod(NS, &name(&pods[0]), &uid(&pods[0]), None, DryRun::No)
        .await?;
    assert_eq!(evicted, Eviction::Evicted);
    let pod = cluster.pod(NS, &name(&pods[0])).unwrap();
    assert!(pod.metadata.deletion_timestamp.is_some());
    let target = (pod.status.unwrap().conditions.unwrap().into_iter())
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(
        (
            target.status.as_str(),
            target.reason.as_deref(),
            target.message.as_deref()
        ),
        (
            "True",
            Some("EvictionByEvictionAPI"),
            Some("Eviction API: evicting")
        )
    );
    // The eviction itself wrote only `disruptionsAllowed`; the disruption controller then
    // counts the pod being deleted out.
    assert_eq!(budget_counts(&cluster, "web"), (3, 2, 3, 0));
    cluster.sleep(secs(0.001)).await;
    assert_eq!(budget_counts(&cluster, "web"), (2, 2, 3, 0));

    let second = cluster
        .evict_pod(NS, &name(&pods[1]), &uid(&pods[1]), None, DryRun::No)
        .await?;
    assert_eq!(
        second,
        Eviction::Blocked {
            message: "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has 2 currently".into()
        }
    );
    assert!(
        cluster
            .pod(NS, &name(&pods[1]))
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );

    // The replacement is created 200ms after the eviction on a schedulable node and is Ready
    // 1s later: the budget allows a disruption again.
    cluster.sleep(secs(1.1)).await;
    assert_eq!(budget_counts(&cluster, "web"), (2, 2, 3, 0));
    cluster.sleep(secs(0.15)).await;
    assert_eq!(budget_counts(&cluster, "web"), (3, 2, 3, 1));
    let replacement = (pods_of(&cluster, "web").into_iter())
        .find(|p| !pods.iter().any(|old| uid(old) == uid(p)))
        .unwrap();
    assert_ne!(
        common::node_of(&replacement),
        "n1",
        "n1 holds the most replicas"
    );
    let third = cluster
        .evict_pod(NS, &name(&pods[1]), &uid(&pods[1]), None, DryRun::No)
        .await?;
    assert_eq!(third, Eviction::Evicted);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn answers_without_a_budget() -> TestResult {
    let cluster = FakeCluster::new();
    let pods = web_on_n1(&cluster, 2, None).await?;
    let (a, b) = (&pods[0], &pods[1]);
    let table = [
        // (pod, uid, dry run) -> answer
        (
            "missing".to_string(),
            "x".to_string(),
            DryRun::No,
            Ok(Eviction::Gone),
        ),
        (
            "missing".to_string(),
            "x".to_string(),
            DryRun::All,
            Ok(Eviction::Gone),
        ),
        (
            name(a),
            "not-its-uid".to_string(),
            DryRun::No,
            Err((
                ErrorKind::Conflict,
                format!(
                    "Operation cannot be fulfilled on Pod \"{}\": the UID in the precondition (not-its-uid) does not match the UID in record ({}). The object might have been deleted and then recreated",
                    name(a),
                    uid(a)
                ),
            )),
        ),
        (
            name(a),
            "not-its-uid".to_string(),
            DryRun::All,
            Err((
                ErrorKind::Conflict,
                format!(
                    "Operation cannot be fulfilled on pods \"{}\": Precondition failed: UID in precondition: not-its-uid, UID in object meta: {}",
                    name(a),
                    uid(a)
                ),
            )),
        ),
        (name(a), uid(a), DryRun::All, Ok(Eviction::Evicted)),
        (name(b), String::new(), DryRun::All, Ok(Eviction::Evicted)),
    ];
    let before = cluster.resource_version();
    for (pod, uid, dry_run, want) in table {
        let got = cluster.evict_pod(NS, &pod, &uid, None, dry_run).await;
        let got = got.map_err(|e| (e.kind, e.message));
        assert_eq!(got, want, "{pod} {uid:?} {dry_run:?}");
    }
    assert_eq!(
        cluster.resource_version(),
        before,
        "refusals and dry runs write nothing"
    );
    let calls = cluster.calls();
    assert_eq!(calls.len(), 6);
    assert!(calls.iter().all(|c| c.verb == Verb::EvictPod));
    assert_eq!(
        calls[2].preconditions.as_ref().unwrap().uid.as_deref(),
        Some("not-its-uid")
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn budgets_that_refuse() -> TestResult {
    let cluster = FakeCluster::new();
    let pods = web_on_n1(&cluster, 2, Some(1)).await?;
    let (a, b) = (&pods[0], &pods[1]);

    // A budget the disruption controller has not synced yet: 429.
    cluster.before(Verb::EvictPod, |c| {
        c.create_budget_now(&budget("fresh", "other", min(1), None))
            .unwrap();
    });
    let mut other = bare_pod("other", "n2", 5);
    other.metadata.labels = Some(app("other"));
    cluster.create_pod_now(&other)?;
    cluster.sleep(secs(1.5)).await;
    let other = cluster.pod(NS, "other").unwrap();
    let fresh = cluster
        .evict_pod(NS, "other", &uid(&other), None, DryRun::No)
        .await?;
    assert_eq!(
        fresh,
        Eviction::Blocked {
            message: "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget fresh is still being processed by the server.".into()
        }
    );

    // Two budgets over one pod: a 500.
    cluster.create_budget_now(&budget("twice", "web", None, Some(IntOrString::Int(1))))?;
    let err = cluster
        .evict_pod(NS, &name(a), &uid(a), None, DryRun::All)
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::Transient, 500));
    assert_eq!(
        err.message,
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    assert_eq!(budget_counts(&cluster, "web"), (2, 1, 2, 1), "nothing used");
    assert!(
        cluster
            .pod(NS, &name(b))
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_failed_precondition_after_the_budget_leaves_it_used_for_two_minutes() -> TestResult {
    let cluster = FakeCluster::new();
    let pods = web_on_n1(&cluster, 3, Some(2)).await?;
    let a = &pods[0];
    let start = cluster.now();
    // The registry checks the UID in the delete, after it used the budget.
    let err = cluster
        .evict_pod(NS, &name(a), "stale", None, DryRun::No)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let status = cluster.budget(NS, "web").unwrap().status.unwrap();
    let disrupted: Vec<&String> = status.disrupted_pods.as_ref().unwrap().keys().collect();
    assert_eq!(disrupted, [&name(a)]);
    cluster.sleep(secs(0.001)).await;
    assert_eq!(
        budget_counts(&cluster, "web"),
        (2, 2, 3, 0),
        "counted as about to go"
    );
    assert!(
        cluster
            .pod(NS, &name(a))
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );

    // DeletionTimeout: after 2 minutes the controller gives up on it.
    cluster.sleep(start + secs(119.0) - cluster.now()).await;
    assert_eq!(budget_counts(&cluster, "web"), (2, 2, 3, 0));
    cluster.sleep(secs(1.5)).await;
    assert_eq!(budget_counts(&cluster, "web"), (3, 2, 3, 1));
    let status = cluster.budget(NS, "web").unwrap().status.unwrap();
    assert_eq!(status.disrupted_pods, None);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn pods_the_registry_deletes_without_a_budget() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.add_node("stuck")?;
    cluster.set_script(
        "stuck",
        NodeScript {
            start: ContainerStart::Never,
            ..NodeScript::default()
        },
    );
    // A budget that allows nothing over every pod labelled app=nodejob-test.
    cluster.create_budget_now(&budget("all", "nodejob-test", min(5), None))?;
    cluster.create_job(&job("done", "n1", &[])).await?;
    cluster.create_job(&job("pending", "stuck", &[])).await?;
    cluster.sleep(secs(10.0)).await;
    assert_eq!(budget_counts(&cluster, "all").3, 0);
    let pods = cluster.pods(NS);
    let phases: Vec<String> = pods.iter().map(phase).collect();
    assert_eq!(phases, ["Succeeded", "Pending"]);
    for pod in &pods {
        let answer = cluster
            .evict_pod(NS, &name(pod), &uid(pod), None, DryRun::No)
            .await?;
        assert_eq!(
            answer,
            Eviction::Evicted,
            "{}: ended or Pending, no budget applies",
            name(pod)
        );
    }
    // The ended pod goes at once (grace 0, no finalizer left); the Pending one shortly.
    assert!(cluster.pod(NS, &name(&pods[0])).is_none());
    let pending = cluster.pod(NS, &name(&pods[1])).unwrap();
    assert!(pending.metadata.deletion_timestamp.is_some());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_evictions_grace_period_wins_and_only_shortens() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.set_script(
        "n1",
        NodeScript {
            on_sigterm: OnSigterm::Ignore,
            ..NodeScript::default()
        },
    );
    cluster.create_pod_now(&bare_pod("slow", "n1", 600))?;
    cluster.create_pod_now(&bare_pod("quick", "n1", 600))?;
    cluster.sleep(secs(2.0)).await;
    let slow = cluster.pod(NS, "slow").unwrap();
    let quick = cluster.pod(NS, "quick").unwrap();
    assert_eq!(
        cluster
            .evict_pod(NS, "slow", &uid(&slow), None, DryRun::No)
            .await?,
        Eviction::Evicted
    );
    let grace = Some(Duration::from_secs(3));
    assert_eq!(
        cluster
            .evict_pod(NS, "quick", &uid(&quick), grace, DryRun::No)
            .await?,
        Eviction::Evicted
    );
    let deleting = cluster.pod(NS, "quick").unwrap();
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(3));

    // Evicting again with a longer grace period changes nothing; a shorter one moves the
    // deletionTimestamp to the first deletion plus it, and the kubelet kills it that long
    // after it sees it.
    cluster.sleep(secs(1.0)).await;
    let before = cluster.resource_version();
    let longer = Some(Duration::from_secs(900));
    assert_eq!(
        cluster
            .evict_pod(NS, "slow", &uid(&slow), longer, DryRun::No)
            .await?,
        Eviction::Evicted
    );
    assert_eq!(cluster.resource_version(), before);
    let shorter = Some(Duration::from_secs(10));
    cluster
        .evict_pod(NS, "slow", &uid(&slow), shorter, DryRun::No)
        .await?;
    let slow_now = cluster.pod(NS, "slow").unwrap();
    assert_eq!(slow_now.metadata.deletion_grace_period_seconds, Some(10));
    assert_eq!(
        slow_now.metadata.deletion_timestamp.unwrap().0.to_string(),
        "2026-01-01T00:00:12Z"
    );

    cluster.sleep(secs(2.05)).await; // 5.05s: quick was SIGKILLed at 5s
    let quick = cluster.pod(NS, "quick").unwrap();
    assert_eq!(
        (phase(&quick).as_str(), exit_code(&quick)),
        ("Failed", Some(137))
    );
    cluster.sleep(secs(7.0)).await; // 12.05s
    assert_eq!(phase(&cluster.pod(NS, "slow").unwrap()), "Running");
    cluster.sleep(secs(1.0)).await; // 13.05s: SIGKILL 10s after the second eviction
    let slow = cluster.pod(NS, "slow").unwrap();
    assert_eq!(
        (phase(&slow).as_str(), exit_code(&slow)),
        ("Failed", Some(137))
    );
    cluster.sleep(secs(0.1)).await;
    assert!(cluster.pods(NS).is_empty());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn eviction_of_a_pod_that_ignores_sigterm_is_waited_for() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let mut pod = bare_pod("slow", "n1", 20);
    pod.spec.as_mut().unwrap().containers[0].command =
        Some(vec!["sleep".into(), host::ignore_sigterm()]);
    cluster.create_pod_now(&pod)?;
    cluster.sleep(secs(2.0)).await;
    let pod = cluster.get_pod(NS, "slow").await?;
    cluster
        .evict_pod(NS, "slow", &uid(&pod), None, DryRun::No)
        .await?;
    let gone = nodejob_core::wait_pod_gone(&cluster, &pod, Duration::from_secs(60)).await?;
    assert!(gone);
    assert_eq!(
        cluster.now(),
        secs(22.1),
        "SIGKILL at the end of the 20s grace period, gone 0.1s later"
    );
    Ok(())
}
