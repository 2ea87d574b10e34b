//! Workloads: a Deployment's ReplicaSet and its pods, the scheduler's placement, DaemonSets,
//! and the disruption controller's budget status.

mod common;

use std::time::Duration;

use common::{
    NS, TestResult, bare_pod, budget, budget_counts, daemon_set, deployment, node_of, pods_of,
    ready,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_core::{DryRun, Eviction, NodeChange, PodApi};
use nodejob_fake::{Clock, FakeCluster, labels};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn int(n: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(n))
}

fn percent(p: &str) -> Option<IntOrString> {
    Some(IntOrString::String(p.to_string()))
}

/// The nodes the pods are on, sorted.
fn placement(pods: &[Pod]) -> Vec<String> {
    let mut nodes: Vec<String> = pods.iter().map(node_of).collect();
    nodes.sort();
    nodes
}

fn condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

#[tokio::test(start_paused = true)]
async fn a_deployment_runs_its_replicas_through_a_replica_set() -> TestResult {
    let cluster = FakeCluster::new();
    for node in ["n1", "n2", "n3"] {
        cluster.add_node(node)?;
    }
    let created = cluster.create_deployment_now(&deployment("web", 3))?;
    cluster.sleep(secs(0.1)).await;
    let sets = cluster.replica_sets(NS);
    assert_eq!(sets.len(), 1);
    let rs = &sets[0];
    let rs_name = rs.metadata.name.clone().unwrap();
    let hash = rs.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(rs_name, format!("web-{hash}"));
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Deployment", created.metadata.uid.as_deref().unwrap())
    );
    assert!(
        pods_of(&cluster, "web").is_empty(),
        "the pods come 200ms after"
    );

    cluster.sleep(secs(0.15)).await; // 0.25s
    let pods = pods_of(&cluster, "web");
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        let name = pod.metadata.name.as_deref().unwrap();
        assert!(
            name.starts_with(&format!("{rs_name}-")) && name.len() == rs_name.len() + 6,
            "{name}"
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("ReplicaSet", Some(true))
        );
        assert_eq!(owner.name, rs_name);
        assert_eq!(condition(pod, "PodScheduled").unwrap().status, "True");
        assert!(!ready(pod));
    }
    assert_eq!(
        placement(&pods),
        ["n1", "n2", "n3"],
        "spread over the nodes"
    );

    cluster.sleep(secs(1.0)).await; // 1.25s
    assert!(pods_of(&cluster, "web").iter().all(ready));
    let deployment = cluster.deployment(NS, "web").unwrap().status.unwrap();
    assert_eq!(
        (deployment.replicas, deployment.ready_replicas),
        (Some(3), Some(3))
    );
    let rs = cluster.replica_sets(NS).remove(0).status.unwrap();
    assert_eq!(
        (rs.replicas, rs.ready_replicas, rs.available_replicas),
        (3, Some(3), Some(3))
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_scheduler_honours_cordons_and_node_selectors() -> TestResult {
    let cluster = FakeCluster::new();
    for node in ["n1", "n2", "n3"] {
        cluster.add_node(node)?;
    }
    cluster.label_node("n1", labels::ZONE, "a")?;
    cluster.label_node("n2", labels::ZONE, "a")?;
    cluster.patch_node_now("n1", &[NodeChange::Cordon])?;
    cluster.set_node_ready("n2", false)?;
    let mut pinned = bare_pod("pinned", "", 5);
    pinned.spec.as_mut().unwrap().node_selector =
        Some([(labels::ZONE.to_string(), "a".to_string())].into());
    cluster.create_pod_now(&pinned)?;
    cluster.sleep(secs(0.1)).await;
    let pod = cluster.pod(NS, "pinned").unwrap();
    assert_eq!(node_of(&pod), "");
    let scheduled = condition(&pod, "PodScheduled").unwrap();
    assert_eq!(
        (scheduled.status.as_str(), scheduled.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
    assert_eq!(
        scheduled.message.as_deref(),
        Some(
            "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        )
    );

    // Placed as soon as a node fits, and started 1s later.
    cluster.schedule(secs(10.0), |c| {
        c.patch_node_now("n1", &[NodeChange::Uncordon]).unwrap();
    });
    let since = pod.metadata.resource_version.clone();
    let bound = cluster
        .wait_pod(NS, "pinned", since.as_deref(), secs(60.0))
        .await?;
    let nodejob_core::Change::Applied(bound) = bound else {
        return Err("expected the binding".into());
    };
    assert_eq!(
        (cluster.now(), node_of(&bound).as_str()),
        (secs(10.0), "n1")
    );
    cluster.sleep(secs(1.1)).await;
    assert!(ready(&cluster.pod(NS, "pinned").unwrap()));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn in_a_large_cluster_each_search_stops_at_its_share_of_nodes_and_the_next_goes_on()
-> TestResult {
    // 200 nodes: a search stops at 100 feasible nodes (kube-scheduler's numFeasibleNodesToFind)
    // and the next starts after the last node looked at (nextStartNodeIndex). Three bare pods
    // land on the best of each half in turn: n000, then n100, then n001 (n000 already has a
    // pod). Scanning every node every time would give n000, n001, n002.
    let cluster = FakeCluster::new();
    for i in 0..200 {
        cluster.add_node(&format!("n{i:03}"))?;
    }
    let mut placed = Vec::new();
    for name in ["p1", "p2", "p3"] {
        cluster.create_pod_now(&bare_pod(name, "", 5))?;
        cluster.sleep(secs(0.1)).await;
        placed.push(node_of(&cluster.pod(NS, name).ok_or(name)?));
    }
    assert_eq!(placed, ["n000", "n100", "n001"]);

    // A pod that fits nowhere is tried again when a node changes, and placed then.
    let mut pinned = bare_pod("pinned", "", 5);
    pinned.spec.as_mut().unwrap().node_selector =
        Some([(labels::ZONE.to_string(), "z".to_string())].into());
    cluster.create_pod_now(&pinned)?;
    cluster.sleep(secs(1.0)).await;
    assert_eq!(node_of(&cluster.pod(NS, "pinned").ok_or("pinned")?), "");
    cluster.label_node("n150", labels::ZONE, "z")?;
    cluster.sleep(secs(0.1)).await;
    assert_eq!(node_of(&cluster.pod(NS, "pinned").ok_or("pinned")?), "n150");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_evicted_replica_is_replaced_on_another_node() -> TestResult {
    let cluster = FakeCluster::new();
    for node in ["n1", "n2"] {
        cluster.add_node(node)?;
    }
    cluster.create_deployment_now(&deployment("web", 2))?;
    cluster.sleep(secs(2.0)).await;
    let pods = pods_of(&cluster, "web");
    assert_eq!(placement(&pods), ["n1", "n2"]);
    cluster.patch_node_now("n1", &[NodeChange::Cordon])?;
    let on_n1 = pods.iter().find(|p| node_of(p) == "n1").unwrap();
    let name = on_n1.metadata.name.clone().unwrap();
    let uid = on_n1.metadata.uid.clone().unwrap();
    assert_eq!(
        cluster.evict_pod(NS, &name, &uid, None, DryRun::No).await?,
        Eviction::Evicted
    );

    cluster.sleep(secs(0.25)).await; // 2.25s: the replacement exists, bound to n2
    let now: Vec<Pod> = pods_of(&cluster, "web");
    assert_eq!(now.len(), 3, "the evicted pod still terminates");
    let fresh: Vec<&Pod> = now
        .iter()
        .filter(|p| !pods.iter().any(|o| o.metadata.uid == p.metadata.uid))
        .collect();
    assert_eq!(fresh.len(), 1);
    assert_eq!(node_of(fresh[0]), "n2", "n1 is cordoned");
    assert!(!ready(fresh[0]));
    cluster.sleep(secs(1.0)).await; // 3.25s
    let now = pods_of(&cluster, "web");
    assert_eq!(now.len(), 2, "the evicted pod ended on SIGTERM and is gone");
    assert!(now.iter().all(|p| ready(p) && node_of(p) == "n2"));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_daemon_set_runs_on_every_matching_node() -> TestResult {
    let cluster = FakeCluster::new();
    for node in ["n1", "n2", "n3"] {
        cluster.add_node(node)?;
    }
    for node in ["n1", "n2"] {
        cluster.label_node(node, "pool", "x")?;
    }
    cluster.patch_node_now("n2", &[NodeChange::Cordon])?;
    cluster.create_daemon_set_now(&daemon_set("agent", Some(("pool", "x"))))?;
    cluster.sleep(secs(1.5)).await;
    let pods = pods_of(&cluster, "agent");
    assert_eq!(placement(&pods), ["n1", "n2"], "cordoned nodes included");
    assert!(pods.iter().all(ready));
    let owner = &pods[0].metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("DaemonSet", Some(true))
    );
    let status = cluster.daemon_set(NS, "agent").unwrap().status.unwrap();
    assert_eq!(
        (status.desired_number_scheduled, status.number_ready),
        (2, 2)
    );

    // A new matching node gets one; a deleted pod is replaced on its node.
    cluster.add_node("n4")?;
    cluster.label_node("n4", "pool", "x")?;
    let n1 = pods.iter().find(|p| node_of(p) == "n1").unwrap();
    cluster.delete_pod_now(NS, n1.metadata.name.as_deref().unwrap())?;
    cluster.sleep(secs(2.0)).await;
    let pods = pods_of(&cluster, "agent");
    assert_eq!(placement(&pods), ["n1", "n2", "n4"]);
    assert!(pods.iter().all(ready));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn budget_status_as_the_disruption_controller_computes_it() -> TestResult {
    let cluster = FakeCluster::new();
    for node in ["n1", "n2"] {
        cluster.add_node(node)?;
    }
    cluster.create_deployment_now(&deployment("web", 4))?;
    cluster.create_daemon_set_now(&daemon_set("agent", None))?;
    cluster.create_pod_now(&bare_pod("solo", "n1", 5))?;
    // (name, app, minAvailable, maxUnavailable) -> (currentHealthy, desiredHealthy,
    // expectedPods, disruptionsAllowed)
    let table = [
        ("min-int", "web", int(3), None, (4, 3, 4, 1)),
        ("min-percent", "web", percent("50%"), None, (4, 2, 4, 2)),
        ("max-int", "web", None, int(1), (4, 3, 4, 1)),
        ("max-percent", "web", None, percent("30%"), (4, 2, 4, 2)),
        ("min-too-many", "web", int(5), None, (4, 5, 4, 0)),
        ("bare-min", "solo", int(0), None, (1, 0, 1, 1)),
        ("nothing", "none", int(1), None, (0, 1, 0, 0)),
    ];
    for (name, app, min, max, _) in &table {
        let mut b = budget(name, app, min.clone(), max.clone());
        b.metadata.name = Some(name.to_string());
        cluster.create_budget_now(&b)?;
    }
    cluster.sleep(secs(2.0)).await;
    for (name, _, _, _, want) in &table {
        assert_eq!(budget_counts(&cluster, name), *want, "{name}");
        let status = cluster.budget(NS, name).unwrap().status.unwrap();
        assert_eq!(status.observed_generation, Some(1));
        let allowed = &status.conditions.unwrap()[0];
        let (value, reason) = if want.3 > 0 {
            ("True", "SufficientPods")
        } else {
            ("False", "InsufficientPods")
        };
        assert_eq!(
            (
                allowed.type_.as_str(),
                allowed.status.as_str(),
                allowed.reason.as_str()
            ),
            ("DisruptionAllowed", value, reason),
            "{name}"
        );
    }

    // Pods a DaemonSet controls have no scale: a budget needing one fails to sync.
    cluster.create_budget_now(&budget("agents", "agent", None, int(1)))?;
    cluster.sleep(secs(0.1)).await;
    let status = cluster.budget(NS, "agents").unwrap().status.unwrap();
    assert_eq!(
        (status.disruptions_allowed, status.observed_generation),
        (0, None)
    );
    let failed = &status.conditions.unwrap()[0];
    assert_eq!(
        (
            failed.status.as_str(),
            failed.reason.as_str(),
            failed.message.as_str()
        ),
        (
            "False",
            "SyncFailed",
            "daemonsets.apps does not implement the scale subresource"
        )
    );
    let agent = pods_of(&cluster, "agent").remove(0);
    let answer = cluster
        .evict_pod(
            NS,
            agent.metadata.name.as_deref().unwrap(),
            agent.metadata.uid.as_deref().unwrap(),
            None,
            DryRun::All,
        )
        .await?;
    assert!(
        matches!(&answer, Eviction::Blocked { message } if message.contains("agents is still being processed")),
        "{answer:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_drain_waits_out_a_budget_that_releases() -> TestResult {
    use nodejob_core::drain::{DrainOptions, drain};
    let cluster = FakeCluster::new();
    for node in ["n1", "n2", "n3"] {
        cluster.add_node(node)?;
    }
    for node in ["n2", "n3"] {
        cluster.patch_node_now(node, &[NodeChange::Cordon])?;
    }
    cluster.create_deployment_now(&deployment("web", 3))?;
    cluster.create_budget_now(&budget("web", "web", int(2), None))?;
    cluster.sleep(secs(1.5)).await;
    for node in ["n2", "n3"] {
        cluster.patch_node_now(node, &[NodeChange::Uncordon])?;
    }
    cluster.patch_node_now("n1", &[NodeChange::Cordon])?;
    let options = DrainOptions {
        timeout: Duration::from_secs(120),
        ..DrainOptions::default()
    };
    let drained = drain(&cluster, "n1", &options, &|_: &nodejob_core::Note| {}).await?;
    assert_eq!(drained.evicted.len(), 3);
    let evictions = (cluster.calls().into_iter())
        .filter(|c| c.verb == nodejob_fake::Verb::EvictPod)
        .count();
    assert!(
        evictions > 3,
        "one disruption at a time: some evictions were blocked ({evictions})"
    );
    let pods = pods_of(&cluster, "web");
    assert!(pods.iter().all(|p| node_of(p) != "n1"), "{pods:?}");
    assert!(cluster.now() < secs(30.0), "done at {:?}", cluster.now());
    cluster.sleep(secs(1.5)).await;
    let pods = pods_of(&cluster, "web");
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(ready));
    assert_eq!(budget_counts(&cluster, "web"), (3, 2, 3, 1));
    Ok(())
}
