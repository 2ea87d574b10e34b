//! The rolling upgrade of `upgrade-driver` on a real control plane: three nodes of the
//! scenario's own (the first labelled control-plane, the others in two zones), played by
//! `nodejob-node-agent` or real ([`Kubelets`]), whose hosts run the `stratum` host model, run a
//! Deployment behind a budget allowing one disruption, and are rolled to a new version (the
//! agent's kubelets', a real node's `osImage`) by [`upgrade_driver::run`] acting as the
//! ServiceAccount of `deploy/rbac.yaml`, its drains asserted ([`Drains`]). Run by `e2e/run`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use nodejob_conformance::workloads::APP_LABEL;
use nodejob_conformance::{Backend, Failure, ensure};
use nodejob_e2e::{
    Drains, Kubelets, ProgressLog, SA_NAME, SA_NAMESPACE, ThreeNodes, Workers,
    deployment_available, lease_released, one_driver, record, unique,
};

nodejob_e2e::on_kubelets! {
    source: include_str!("upgrade.rs");
    both: three_nodes_roll_to_a_new_version_control_plane_first_under_a_budget;
    agent_only: ;
    no_nodes: ;
}
use upgrade_driver::records::{self, DONE, Done, HOST_JOB, IN_PROGRESS};
use upgrade_driver::{
    NodeResult, Outcome, Plan, PlanSpec, Progress, ProgressSink, UpgradeStep, VersionSource,
};

/// The version the nodes are rolled to: not the agent's (the apiserver's, e.g. `v1.34.1`).
const TARGET: &str = "v1.99.0";
/// The Deployment behind the budget.
const APP: &str = "web";
const REPLICAS: i32 = 3;
/// How long the workloads may take to settle, before and after the roll.
const SETTLE: Duration = Duration::from_secs(120);

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

/// Waits until Deployment [`APP`] has every replica updated, Ready and available.
async fn available(admin: &Client, namespace: &str, when: &str) -> Result<Deployment, Failure> {
    deployment_available(admin, namespace, APP, REPLICAS, SETTLE, when).await
}

/// How many Pods of [`APP`] each node runs (live ones: not being deleted).
async fn pods_per_node(
    admin: &Client,
    namespace: &str,
) -> Result<BTreeMap<String, usize>, Failure> {
    let pods = Api::<Pod>::namespaced(admin.clone(), namespace)
        .list(&ListParams::default().labels(&format!("{APP_LABEL}={APP}")))
        .await
        .map_err(fail("listing the pods of the deployment"))?;
    let mut out = BTreeMap::new();
    for pod in pods.items {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
        *out.entry(node).or_insert(0) += 1;
    }
    Ok(out)
}

/// The Nodes `names`, read as an administrator.
async fn read_nodes(admin: &Client, names: &[String]) -> Result<Vec<Node>, Failure> {
    let api = Api::<Node>::all(admin.clone());
    let mut out = Vec::new();
    for name in names {
        out.push(
            api.get(name)
                .await
                .map_err(fail(format!("reading node {name}")))?,
        );
    }
    Ok(out)
}

fn has_annotation(node: &Node, key: &str) -> bool {
    node.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// The Events about `node` in the drivers' namespace, as `(type, reason)`, read as an
/// administrator with a field selector on the involved object's name.
async fn node_events(admin: &Client, node: &str) -> Result<Vec<(String, String)>, Failure> {
    let events = Api::<Event>::namespaced(admin.clone(), SA_NAMESPACE)
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .map_err(fail(format!("listing the events of node {node}")))?;
    Ok(events
        .items
        .into_iter()
        .filter(|e| {
            e.source.as_ref().and_then(|s| s.component.as_deref())
                == Some(upgrade_driver::COMPONENT)
        })
        .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default()))
        .collect())
}

fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// Three nodes (one control-plane, two workers in two zones) running a Deployment behind a
/// budget allowing one disruption are rolled to [`TARGET`]: each is cordoned, drained (each
/// Pod evicted once before its node's host Job, the budget never broken), upgraded by its host
/// Job, rebooted at the target (by the agent's host model, or for real), and uncordoned, the
/// control-plane node first and one node at a time, as the ServiceAccount of
/// `deploy/rbac.yaml`.
async fn three_nodes_roll_to_a_new_version_control_plane_first_under_a_budget(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    // The other backend's roll would see this one's nodes in flight.
    let _one = one_driver().await;
    let trio = ThreeNodes::of(kubelets, Workers::InTwoZones).await?;
    // The Deployment on the scenario's nodes, behind a budget allowing one disruption.
    trio.deployment_behind_budget(APP, REPLICAS, SETTLE).await?;
    let (backend, admin) = (&trio.backend, trio.admin.clone());
    let (names, namespace) = (trio.names.clone(), trio.namespace.clone());
    let (key, value) = trio.label.clone();
    let source = match kubelets {
        Kubelets::Agent => VersionSource::KubeletVersion,
        Kubelets::Real => VersionSource::OsImage,
    };
    let [control, zone_a, zone_b] = [&names[0], &names[1], &names[2]];
    eprintln!(
        "upgrade: pods of {APP} per node before the roll: {:?}",
        pods_per_node(&admin, &namespace).await?
    );

    // What the nodes report before.
    let before = read_nodes(&admin, &names).await?;
    for node in &before {
        let name = records::name(node);
        let version = upgrade_driver::version::version(node, &source).unwrap_or_default();
        ensure!(
            !version.is_empty() && !upgrade_driver::version::same_version(version, TARGET),
            "node {name} must report a version other than the target {TARGET}: {version:?}"
        );
        ensure!(
            !records::boot_id(node).is_empty(),
            "node {name} reports no bootID"
        );
        eprintln!(
            "upgrade: node {name} before: {version}, boot {}",
            records::boot_id(node)
        );
    }

    let mut spec = PlanSpec::new(TARGET);
    spec.version_source = source.clone();
    spec.selector = Some(format!("{key}={value}"));
    spec.namespace = SA_NAMESPACE.into();
    spec.lease_name = unique("upgrade-e2e");
    spec.identity = unique("upgrade-e2e-driver");
    // Bounds well above what the quick hosts take, so a stuck step fails in minutes.
    spec.drain.timeout = Duration::from_secs(60);
    spec.reboot_timeout = Duration::from_secs(60);
    spec.deadline = Duration::from_secs(120);
    spec.lease_duration = Duration::from_secs(15);
    // The agent's kubelets go to a release the apiserver is not at: past the version skew
    // policy, as asked (the gate's refusal has its own test, `tests/long_rolls.rs`).
    spec.skew = upgrade_driver::Skew::Allow;
    let plan = Plan::build(spec).map_err(|e| Failure(e.to_string()))?;

    // How many replicas stay available through the roll, as the Deployment reports it.
    let deployments = Api::<Deployment>::namespaced(admin.clone(), &namespace);
    let this = watcher::Config::default().fields(&format!("metadata.name={APP}"));
    let web = record(deployments, this).await?;
    let drains = Drains::watch(&admin, &namespace, APP).await?;

    let log = ProgressLog::<Progress>::new("upgrade");
    let progress: Arc<dyn ProgressSink> = Arc::new(log.sink());
    let report = upgrade_driver::run(&*backend.api(), &plan, progress)
        .await
        .map_err(|e| Failure(format!("the upgrade did not start: {e}")));
    let web = web.stop();
    let report = report?;
    let drained = drains.check(
        &names,
        REPLICAS - 1,
        &format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"),
    );
    let events = log.events();

    // The report, for the record: each node's steps and how long they took.
    for n in &report.nodes {
        let steps: Vec<String> = n
            .steps
            .iter()
            .map(|(step, ms)| format!("{step} {}", seconds(*ms)))
            .collect();
        eprintln!(
            "upgrade: node {} {:?} -> {:?}: {:?}; {}; total {}; evicted {:?}",
            n.name,
            n.from,
            n.to,
            n.result,
            steps.join(", "),
            seconds(n.took_ms),
            n.pods_evicted,
        );
    }
    eprintln!(
        "upgrade: totals {:?}; lease {:?}",
        report.totals, report.lease
    );

    ensure!(report.outcome == Outcome::Done, "{report:#?}");
    eprintln!("upgrade ({kubelets:?}): drained {:?}", drained?);
    ensure!(
        report.totals.upgraded == names.len() && report.totals.failed == 0,
        "{:?}",
        report.totals
    );
    for n in &report.nodes {
        ensure!(
            n.result == Some(NodeResult::Upgraded),
            "node {}: {:?}",
            n.name,
            n.result
        );
    }
    lease_released(&admin, &plan.spec().lease_name, &report.lease).await?;

    // The order: the control-plane node first, then zone a, then zone b, one node at a time.
    let batches: Vec<(String, Vec<String>)> = events
        .iter()
        .filter_map(|e| match e {
            Progress::BatchStarted { group, nodes, .. } => Some((group.clone(), nodes.clone())),
            _ => None,
        })
        .collect();
    let expected = vec![
        ("control-plane".to_string(), vec![control.clone()]),
        ("zone zone-a".to_string(), vec![zone_a.clone()]),
        ("zone zone-b".to_string(), vec![zone_b.clone()]),
    ];
    ensure!(batches == expected, "batches {batches:?}");
    let position = |want: &dyn Fn(&Progress) -> bool| events.iter().position(want);
    for pair in names.windows(2) {
        let finished =
            position(&|e| matches!(e, Progress::NodeFinished { node, .. } if node == &pair[0]));
        let next = position(&|e| {
            matches!(e, Progress::StepStarted { node, step: UpgradeStep::Cordon }
                if node == &pair[1])
        });
        ensure!(
            finished.is_some() && next.is_some() && finished < next,
            "node {} must finish before node {} is cordoned: {finished:?}, {next:?}",
            pair[0],
            pair[1]
        );
    }
    let unrecorded: Vec<&Progress> = events
        .iter()
        .filter(|e| {
            matches!(e, Progress::Note { message, .. } if message.contains("could not record event"))
        })
        .collect();
    ensure!(
        unrecorded.is_empty(),
        "step Events not recorded: {unrecorded:?}"
    );

    // Every node rebooted at the target, is schedulable again, and carries the done record only.
    let after = read_nodes(&admin, &names).await?;
    for (old, node) in before.iter().zip(&after) {
        let name = records::name(node);
        let version = upgrade_driver::version::version(node, &source);
        ensure!(
            version == Some(TARGET),
            "node {name} reports {version:?}, not {TARGET}"
        );
        ensure!(
            records::boot_id(node) != records::boot_id(old) && !records::boot_id(node).is_empty(),
            "node {name} did not reboot: boot {} before and after",
            records::boot_id(old)
        );
        ensure!(nodejob_core::ready(node), "node {name} is not Ready");
        ensure!(
            !records::unschedulable(node),
            "node {name} is left cordoned"
        );
        let done = records::read::<Done>(node, DONE).map_err(Failure)?;
        ensure!(
            done.as_ref().is_some_and(|d| d.version == TARGET),
            "node {name}: done record {done:?}"
        );
        ensure!(
            !has_annotation(node, IN_PROGRESS) && !has_annotation(node, HOST_JOB),
            "node {name} keeps the driver's in-flight records: {:?}",
            node.metadata.annotations
        );
    }

    // The budget's pods were evicted (every replica sat on some node, and every node was
    // drained), and the Deployment is whole again.
    ensure!(
        report.totals.pods_evicted >= REPLICAS as usize,
        "every replica must have been evicted once at least: {:?}",
        report.totals
    );
    let prefix = format!("{namespace}/{APP}-");
    for n in &report.nodes {
        ensure!(
            n.pods_evicted.iter().all(|p| p.starts_with(&prefix)),
            "node {}: evicted pods other than the deployment's: {:?}",
            n.name,
            n.pods_evicted
        );
    }
    // The budget held: never fewer than its minAvailable replicas available during the roll,
    // as the Deployment counts them (a count the apiserver omits is 0).
    let available_seen: Vec<i32> = (web.iter())
        .filter_map(|d| d.status.as_ref())
        .map(|s| s.available_replicas.unwrap_or(0))
        .collect();
    ensure!(
        !available_seen.is_empty() && available_seen.iter().all(|a| *a >= REPLICAS - 1),
        "the deployment's available replicas through the roll: {available_seen:?}"
    );
    eprintln!("upgrade: available replicas of {APP} through the roll: {available_seen:?}");
    available(&admin, &namespace, "after the roll").await?;
    eprintln!(
        "upgrade: pods of {APP} per node after the roll: {:?}",
        pods_per_node(&admin, &namespace).await?
    );

    // The host Jobs are gone.
    let jobs = Api::<Job>::namespaced(admin.clone(), SA_NAMESPACE);
    for name in &names {
        let job = plan.job_name(name);
        let left = jobs
            .get_opt(&job)
            .await
            .map_err(fail(format!("reading job {job}")))?;
        ensure!(left.is_none(), "host job {SA_NAMESPACE}/{job} is left");
    }

    // Each step is said in an Event on its Node, in the drivers' namespace: the cordon with
    // the drain, the new boot with the uncordon.
    for name in &names {
        let events = node_events(&admin, name).await?;
        for step in [
            UpgradeStep::Drain,
            UpgradeStep::Upgrade,
            UpgradeStep::Uncordon,
        ] {
            ensure!(
                events
                    .iter()
                    .any(|(t, r)| t == "Normal" && *r == step.reason()),
                "node {name}: no Normal event {}: {events:?}",
                step.reason()
            );
        }
        ensure!(
            events.iter().all(|(t, _)| t == "Normal"),
            "node {name}: warnings {events:?}"
        );
    }
    Ok(())
}
