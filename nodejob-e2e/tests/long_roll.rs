//! Long rolls that run by themselves, on a real control plane: three agent nodes of the
//! scenario's own (one control-plane, two workers in two zones, quick `stratum` hosts) rolled
//! by [`upgrade_driver::run`] acting as the ServiceAccount of `deploy/rbac.yaml`, with the
//! options of the long-rolls issue: a budget that never releases under `on_undrainable: skip`
//! (the roll finishes the other nodes and reports the blocked one). Run by `e2e/run`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_conformance::{Backend, Failure, Object, Workloads, ensure};
use nodejob_e2e::{
    ProgressLog, SA_NAMESPACE, ThreeNodes, Workers, ZONE_LABEL, deployment_available, host_report,
    lease_released, unique,
};
use upgrade_driver::records::{self, BLOCKED, Blocked, IN_PROGRESS};
use upgrade_driver::{
    NodeResult, Outcome, Plan, PlanSpec, Progress, ProgressSink, Report, Undrainable, VersionSource,
};

/// The version the nodes are rolled to: not the agent's, nor another suite's.
const TARGET: &str = "v1.97.0";
/// How long the workloads may take to settle.
const SETTLE: Duration = Duration::from_secs(120);

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

async fn read_node(admin: &Client, name: &str) -> Result<Node, Failure> {
    Api::<Node>::all(admin.clone())
        .get(name)
        .await
        .map_err(fail(format!("reading node {name}")))
}

/// The plan over the scenario's nodes, with bounds that end a stuck step in a minute or two.
fn plan_over(trio: &ThreeNodes, tweak: impl FnOnce(&mut PlanSpec)) -> Result<Plan, Failure> {
    let (key, value) = &trio.label;
    let mut spec = PlanSpec::new(TARGET);
    spec.selector = Some(format!("{key}={value}"));
    spec.namespace = SA_NAMESPACE.into();
    spec.lease_name = unique("long-roll-e2e");
    spec.identity = unique("long-roll-e2e-driver");
    spec.drain.timeout = Duration::from_secs(60);
    spec.reboot_timeout = Duration::from_secs(60);
    spec.deadline = Duration::from_secs(120);
    spec.lease_duration = Duration::from_secs(15);
    // The agent's kubelets go to a release the apiserver is not at: past the version skew
    // policy, as asked (the gate's refusal has its own test, `tests/long_rolls.rs`).
    spec.skew = upgrade_driver::Skew::Allow;
    tweak(&mut spec);
    Plan::build(spec).map_err(|e| Failure(e.to_string()))
}

async fn roll(trio: &ThreeNodes, plan: &Plan, prefix: &'static str) -> Result<Report, Failure> {
    let log = ProgressLog::<Progress>::new(prefix);
    let progress: Arc<dyn ProgressSink> = Arc::new(log.sink());
    let report = upgrade_driver::run(&*trio.backend.api(), plan, progress)
        .await
        .map_err(|e| Failure(format!("the upgrade did not start: {e}")))?;
    for n in &report.nodes {
        eprintln!(
            "{prefix}: node {} {:?} -> {:?}: {:?}",
            n.name, n.from, n.to, n.result
        );
    }
    eprintln!(
        "{prefix}: outcome {:?}; totals {:?}",
        report.outcome, report.totals
    );
    lease_released(&trio.admin, &plan.spec().lease_name, &report.lease).await?;
    Ok(report)
}

/// A Deployment `pinned` of one replica that only the zone-a worker of the scenario runs,
/// behind a budget whose `minAvailable` is 1: it never allows a disruption, so that worker's
/// drain is blocked for as long as the budget stands.
async fn pinned_to_zone_a(trio: &ThreeNodes) -> Result<(), Failure> {
    let ns = trio.namespace.as_str();
    let mut pinned = deployment(ns, "pinned", 1, &(ZONE_LABEL.into(), "zone-a".into()));
    let selector = (pinned.spec.as_mut())
        .and_then(|s| s.template.spec.as_mut())
        .and_then(|p| p.node_selector.as_mut())
        .ok_or_else(|| Failure("the pinned deployment has no node selector".into()))?;
    // Only this scenario's node of zone a: other scenarios label theirs too.
    selector.insert(trio.label.0.clone(), trio.label.1.clone());
    trio.backend
        .create(Object::Deployment(Box::new(pinned)))
        .await?;
    let pdb = budget(ns, "pinned", "pinned", 1);
    trio.backend.create(Object::Budget(Box::new(pdb))).await?;
    deployment_available(&trio.admin, ns, "pinned", 1, SETTLE, "before the roll").await?;
    Ok(())
}

/// A budget that never releases, under `on_undrainable: skip`: the zone-a worker's drain is
/// blocked, so it is uncordoned with why recorded on it (the budget, the Pod left); the roll
/// finishes the control-plane node and the zone-b worker, comes back to the blocked node once
/// at the end (blocked again), and reports it, naming the budget and the Pod; no host
/// upgrade ever ran on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_that_never_releases_with_skip_finishes_the_other_nodes_and_reports_the_blocked_one()
-> Result<(), Failure> {
    let trio = ThreeNodes::new(Workers::InTwoZones).await?;
    pinned_to_zone_a(&trio).await?;
    let [control, zone_a, zone_b] = [&trio.names[0], &trio.names[1], &trio.names[2]];
    let plan = plan_over(&trio, |spec| {
        spec.on_undrainable = Undrainable::Skip;
        spec.drain.timeout = Duration::from_secs(20);
    })?;
    let report = roll(&trio, &plan, "skip").await?;

    for name in [control, zone_b] {
        let node = report.node(name).and_then(|n| n.result.clone());
        ensure!(node == Some(NodeResult::Upgraded), "node {name}: {node:?}");
        let read = read_node(&trio.admin, name).await?;
        let version = records::version(&read, &VersionSource::KubeletVersion);
        ensure!(version == Some(TARGET), "node {name} reports {version:?}");
    }
    let blocked = report.node(zone_a).and_then(|n| n.result.clone());
    let Some(NodeResult::Blocked {
        policy,
        budgets,
        pods,
        why,
    }) = blocked
    else {
        return Err(Failure(format!(
            "node {zone_a} is not blocked: {blocked:?}"
        )));
    };
    let pinned = format!("{}/pinned", trio.namespace);
    ensure!(
        policy == Undrainable::Skip && budgets == [pinned.clone()],
        "node {zone_a}: {policy} by {budgets:?}"
    );
    ensure!(
        pods.len() == 1 && pods[0].starts_with(&format!("{pinned}-")),
        "node {zone_a}: pods left {pods:?}"
    );
    ensure!(why.contains("uncordoned"), "{why}");
    let Outcome::Stopped { why } = &report.outcome else {
        return Err(Failure(format!(
            "the roll must stop naming {zone_a}: {report:#?}"
        )));
    };
    ensure!(why.contains(zone_a.as_str()), "{why}");
    ensure!(report.totals.blocked == 1, "{:?}", report.totals);

    // On the node: schedulable again, not ours, why recorded; never upgraded.
    let node = read_node(&trio.admin, zone_a).await?;
    ensure!(
        !records::unschedulable(&node) && !records::in_flight(&node),
        "node {zone_a} left cordoned or ours: {:?}",
        node.metadata.annotations
    );
    let record = records::read::<Blocked>(&node, BLOCKED).map_err(Failure)?;
    ensure!(
        record
            .as_ref()
            .is_some_and(|r| r.budgets == [pinned.clone()]
                && r.policy == Undrainable::Skip
                && r.target == TARGET),
        "node {zone_a}: blocked record {record:?}"
    );
    let annotations: BTreeMap<String, String> = node.metadata.annotations.unwrap_or_default();
    ensure!(!annotations.contains_key(IN_PROGRESS), "{annotations:?}");
    let host = host_report(&trio.admin, zone_a).await?;
    ensure!(
        host.executions("upgrade") == 0,
        "node {zone_a}'s host ran {} upgrade(s)",
        host.executions("upgrade")
    );
    Ok(())
}
