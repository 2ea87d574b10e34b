//! Long rolls that run by themselves, on a real control plane: three nodes of the scenario's
//! own (one control-plane, two workers in two zones, quick `stratum` hosts; the node agent's
//! or real ones, [`Kubelets`]) rolled by [`upgrade_driver::run`] acting as the ServiceAccount
//! of `deploy/rbac.yaml`, with the options of the long-rolls issue: a budget that never
//! releases under `on_undrainable: skip` (the roll finishes the other nodes and reports the
//! blocked one), and a rollback after an injected failure (`on_failure: rollback`, the host's
//! `stratum` model playing the rollback, on the agent's host or the real node's), its drain
//! asserted ([`Drains`]). Run by `e2e/run`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_conformance::{Backend, Failure, Object, Workloads, ensure};
use nodejob_e2e::{
    Drains, Kubelets, ProgressLog, SA_NAME, SA_NAMESPACE, ThreeNodes, Workers, ZONE_LABEL,
    deployment_available, lease_released, unique,
};

nodejob_e2e::on_kubelets! {
    source: include_str!("long_roll.rs");
    both:
        a_budget_that_never_releases_with_skip_finishes_the_other_nodes_and_reports_the_blocked_one,
        a_failed_host_upgrade_is_rolled_back_to_the_recorded_version_on_a_new_boot;
    agent_only: ;
    no_nodes: ;
}
use upgrade_driver::records::{self, BLOCKED, Blocked, IN_PROGRESS};
use upgrade_driver::{
    NodeResult, Outcome, Plan, PlanSpec, Progress, ProgressSink, Report, Undrainable, VersionSource,
};

/// The version the nodes are rolled to: not the agent's, nor another suite's.
const TARGET: &str = "v1.97.0";
/// How long the workloads may take to settle.
const SETTLE: Duration = Duration::from_secs(120);
/// The Deployment behind a budget that the rollback's drain evicts, and its replicas.
const APP: &str = "web";
const REPLICAS: i32 = 3;

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

async fn read_node(admin: &Client, name: &str) -> Result<Node, Failure> {
    Api::<Node>::all(admin.clone())
        .get(name)
        .await
        .map_err(fail(format!("reading node {name}")))
}

/// Where a roll on `trio` reads the version: the agent's kubelet moves, a real node's
/// `osImage` does.
fn source(trio: &ThreeNodes) -> VersionSource {
    match trio.kubelets() {
        Kubelets::Agent => VersionSource::KubeletVersion,
        Kubelets::Real => VersionSource::OsImage,
    }
}

/// The plan over the scenario's nodes, with bounds that end a stuck step in a minute or two.
fn plan_over(trio: &ThreeNodes, tweak: impl FnOnce(&mut PlanSpec)) -> Result<Plan, Failure> {
    let (key, value) = &trio.label;
    let mut spec = PlanSpec::new(TARGET);
    spec.version_source = source(trio);
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

/// Runs `scenario` on three nodes of its own while no other scenario of this binary runs a
/// driver, then removes the nodes and their namespace, whatever the scenario left on them
/// (a later driver here or in another suite would carry on a node left in flight).
async fn alone<F, Fut>(kubelets: Kubelets, scenario: F) -> Result<(), Failure>
where
    F: FnOnce(ThreeNodes) -> Fut,
    Fut: Future<Output = (ThreeNodes, Result<(), Failure>)>,
{
    let one = nodejob_e2e::one_driver().await;
    let trio = ThreeNodes::of(kubelets, Workers::InTwoZones).await?;
    let (trio, result) = scenario(trio).await;
    let removed = trio.remove().await;
    drop(one);
    result.and(removed)
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
async fn a_budget_that_never_releases_with_skip_finishes_the_other_nodes_and_reports_the_blocked_one(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    alone(kubelets, |trio| async {
        let result = skip(&trio).await;
        (trio, result)
    })
    .await
}

async fn skip(trio: &ThreeNodes) -> Result<(), Failure> {
    pinned_to_zone_a(trio).await?;
    let [control, zone_a, zone_b] = [&trio.names[0], &trio.names[1], &trio.names[2]];
    let plan = plan_over(trio, |spec| {
        spec.on_undrainable = Undrainable::Skip;
        spec.drain.timeout = Duration::from_secs(20);
    })?;
    let report = roll(trio, &plan, "skip").await?;

    for name in [control, zone_b] {
        let node = report.node(name).and_then(|n| n.result.clone());
        ensure!(node == Some(NodeResult::Upgraded), "node {name}: {node:?}");
        let read = read_node(&trio.admin, name).await?;
        let version = upgrade_driver::version::version(&read, &source(trio));
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
    let host = trio.host(zone_a).await?;
    ensure!(
        host.executions("upgrade") == 0,
        "node {zone_a}'s host ran {} upgrade(s)",
        host.executions("upgrade")
    );
    Ok(())
}

/// A rollback after an injected failure: the host upgrade of the first node (the control-plane
/// one), drained first, exits 1 (a `nodejob-test:exit=1` directive in its argv, which the node
/// agent, or a real node's `stratum`, plays instead of the `stratum` model); under
/// `on_failure: rollback` the driver runs the host's rollback (`stratum rollback --to V`,
/// played by the model) once, the node comes back at V, the version recorded before the
/// upgrade, on a new boot, and is uncordoned and reported rolled back; the failure budget then
/// stops the roll.
async fn a_failed_host_upgrade_is_rolled_back_to_the_recorded_version_on_a_new_boot(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    alone(kubelets, |trio| async {
        let result = rollback(&trio).await;
        (trio, result)
    })
    .await
}

async fn rollback(trio: &ThreeNodes) -> Result<(), Failure> {
    trio.deployment_behind_budget(APP, REPLICAS, SETTLE).await?;
    let drains = Drains::watch(&trio.admin, &trio.namespace, APP).await?;
    let first = trio.names[0].clone();
    let before = read_node(&trio.admin, &first).await?;
    let version = upgrade_driver::version::version(&before, &source(trio))
        .unwrap_or_default()
        .to_string();
    let plan = plan_over(trio, |spec| {
        spec.on_failure = upgrade_driver::OnFailure::Rollback;
        let mut argv: Vec<String> = upgrade_driver::NSENTER
            .iter()
            .map(|s| s.to_string())
            .collect();
        argv.extend([
            spec.binary.clone(),
            "upgrade".into(),
            "--to".into(),
            "{version}".into(),
            "nodejob-test:log=stratum: error: injected by the end-to-end test".into(),
            "nodejob-test:exit=1".into(),
        ]);
        spec.command = Some(argv);
    })?;
    let report = roll(trio, &plan, "rollback").await?;
    let sa = format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}");
    let drained = drains.check(std::slice::from_ref(&first), REPLICAS - 1, &sa)?;
    eprintln!("rollback ({:?}): drained {drained:?}", trio.kubelets());

    let result = report.node(&first).and_then(|n| n.result.clone());
    let Some(NodeResult::RolledBack {
        failure,
        version: back,
    }) = result
    else {
        return Err(Failure(format!(
            "node {first} was not rolled back: {result:?}"
        )));
    };
    ensure!(
        failure.step == upgrade_driver::UpgradeStep::Upgrade && failure.exit_code == Some(1),
        "{failure:?}"
    );
    ensure!(back == version, "rolled back to {back}, not {version}");
    ensure!(
        matches!(report.outcome, Outcome::Failed { .. }) && report.totals.rolled_back == 1,
        "{:?}; {:?}",
        report.outcome,
        report.totals
    );
    // The node: at the recorded version, on a new boot, Ready, uncordoned, not ours.
    let node = read_node(&trio.admin, &first).await?;
    let now = upgrade_driver::version::version(&node, &source(trio));
    ensure!(
        now == Some(version.as_str()),
        "node {first} reports {now:?}"
    );
    ensure!(
        records::boot_id(&node) != records::boot_id(&before),
        "node {first} did not reboot for its rollback"
    );
    ensure!(
        nodejob_core::ready(&node) && !records::unschedulable(&node) && !records::in_flight(&node),
        "node {first}: ready {}, cordoned {}, ours {}",
        nodejob_core::ready(&node),
        records::unschedulable(&node),
        records::in_flight(&node)
    );
    let record = records::read::<records::Rollback>(&node, records::ROLLBACK).map_err(Failure)?;
    ensure!(
        record
            .as_ref()
            .is_some_and(|r| r.done.is_some() && r.to == version && r.from == TARGET),
        "node {first}: rollback record {record:?}"
    );
    // The host ran the rollback once, and no upgrade (the injected failure exits before it).
    let host = trio.host(&first).await?;
    ensure!(
        host.executions("rollback") == 1 && host.executions("upgrade") == 0,
        "node {first}'s host ran: {:?}",
        host.executions
    );
    ensure!(host.version == version, "its host runs {}", host.version);
    // The rollback Job is gone; the failed upgrade's is kept for inspection.
    let jobs =
        Api::<k8s_openapi::api::batch::v1::Job>::namespaced(trio.admin.clone(), SA_NAMESPACE);
    let rollback = plan.rollback_job_name(&first);
    ensure!(
        jobs.get_opt(&rollback)
            .await
            .map_err(fail("reading the rollback job"))?
            .is_none(),
        "rollback job {rollback} is left"
    );
    let upgrade = plan.job_name(&first);
    ensure!(
        jobs.get_opt(&upgrade)
            .await
            .map_err(fail("reading the upgrade job"))?
            .is_some(),
        "the failed upgrade job {upgrade} was not kept"
    );
    // The other nodes never started: the failure budget.
    for name in &trio.names[1..] {
        let n = report.node(name).and_then(|n| n.result.clone());
        ensure!(n.is_none(), "node {name}: {n:?}");
    }
    Ok(())
}
