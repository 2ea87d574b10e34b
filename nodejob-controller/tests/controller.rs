//! The controller on the in-memory cluster, in virtual time: a `NodeUpgrade` written is rolled
//! and its status says so; a new target mid-roll takes every node to it with no host upgrade
//! run twice toward one version; a failed node stalls the resource until its spec changes; a
//! resource deleted mid-roll stays until its run stopped at a step boundary, and leaves no
//! node cordoned without the record saying why; a spec the command would refuse is Stalled.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_controller::metrics::{Counted, Metrics};
use nodejob_controller::{Controller, FINALIZER, Informer, Informers};
use nodejob_core::{Clock, NodeApi};
use nodejob_crd::{NodeUpgrade, NodeUpgradeSpec, RollApi};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::{Fault, Operation};
use upgrade_driver::{Plan, PlanSpec, Stop};

mod support;

use support::{NODES, TestPlanner, cluster, settings, start};

fn upgrade(name: &str, target: &str) -> NodeUpgrade {
    let spec: NodeUpgradeSpec =
        serde_json::from_value(serde_json::json!({ "target": target })).unwrap();
    let mut roll = NodeUpgrade::new(name, spec);
    roll.metadata = ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    };
    roll
}

/// Waits (virtual time) until `test` holds of the resource, at most `within`.
async fn until(
    fake: &FakeCluster,
    name: &str,
    within: Duration,
    test: impl Fn(Option<&NodeUpgrade>) -> bool,
) -> Option<NodeUpgrade> {
    let deadline = fake.now() + within;
    loop {
        let roll = fake.get_roll::<NodeUpgrade>(name).await.ok();
        if test(roll.as_ref()) {
            return roll;
        }
        assert!(fake.now() < deadline, "not within {within:?}: {roll:#?}");
        fake.sleep(Duration::from_secs(1)).await;
    }
}

fn condition(roll: &NodeUpgrade, type_: &str) -> Option<(String, String)> {
    let status = roll.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn ready(roll: Option<&NodeUpgrade>) -> bool {
    roll.and_then(|r| condition(r, "Ready")) == Some(("True".into(), "Completed".into()))
}

async fn version(fake: &FakeCluster, node: &str) -> String {
    let node = fake.get_node(node).await.unwrap();
    node.status.unwrap().node_info.unwrap().kubelet_version
}

fn upgrades(fake: &FakeCluster, node: &str) -> u32 {
    (fake.host_state(node)).map_or(0, |s| s.executions(Operation::Upgrade))
}

#[tokio::test(start_paused = true)]
async fn a_node_upgrade_written_is_rolled_and_its_status_says_so() {
    let fake = cluster(1);
    let (stop, task) = start(&fake);
    fake.create_roll(&upgrade("to-38", "v1.38.0"))
        .await
        .unwrap();
    let done = until(&fake, "to-38", Duration::from_secs(3600), ready)
        .await
        .unwrap();
    let status = done.status.clone().unwrap();
    assert_eq!(status.counts.nodes, 3, "{status:#?}");
    assert_eq!(status.counts.up_to_date, 3, "{status:#?}");
    assert_eq!(status.counts.failed, 0);
    assert_eq!(status.observed_generation, Some(1));
    assert!(status.completed_at.is_some());
    assert_eq!(condition(&done, "Stalled").unwrap().0, "False");
    assert_eq!(condition(&done, "Reconciling").unwrap().0, "False");
    assert!(
        done.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER),
        "{:?}",
        done.metadata.finalizers
    );
    for node in NODES {
        assert_eq!(version(&fake, node).await, "v1.38.0", "{node}");
        assert_eq!(upgrades(&fake, node), 1, "{node}");
    }
    stop.request();
    task.await.unwrap();
    // Nothing more ran after the resource was Ready.
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 1, "{node}");
    }
}

/// The value of the sample `line` (`name{labels}`) in a Prometheus text exposition.
fn sample(text: &str, line: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(start_paused = true)]
async fn a_roll_is_told_in_the_metrics_with_no_node_name_as_a_label() {
    let fake = cluster(1);
    let metrics = Arc::new(Metrics::new());
    let api = Arc::new(Counted::new(fake.clone(), metrics.clone()));
    let controller =
        Controller::new(api, Arc::new(TestPlanner), settings()).with_metrics(metrics.clone());
    assert!(!metrics.answered(), "no request yet");
    let stop = Stop::new();
    let task = {
        let stop = stop.clone();
        tokio::spawn(async move { controller.run(&stop).await.unwrap() })
    };
    fake.create_roll(&upgrade("to-38", "v1.38.0"))
        .await
        .unwrap();
    until(&fake, "to-38", Duration::from_secs(3600), ready).await;
    stop.request();
    task.await.unwrap();
    let text = metrics.prometheus_text();
    let got = |line: &str| sample(&text, line).unwrap_or_else(|| panic!("no {line} in:\n{text}"));
    assert_eq!(
        got(r#"nodejob_operations_total{operation="upgrade",outcome="completed"}"#),
        1.0
    );
    assert_eq!(
        got(r#"nodejob_nodes{operation="upgrade",state="up_to_date"}"#),
        3.0
    );
    assert_eq!(
        got(r#"nodejob_nodes{operation="upgrade",state="in_progress"}"#),
        0.0
    );
    assert_eq!(got(r#"nodejob_node_versions{version="v1.38.0"}"#), 3.0);
    assert_eq!(
        got(r#"nodejob_node_cycle_duration_seconds_count{operation="upgrade",result="upgraded"}"#),
        3.0
    );
    assert_eq!(
        got(r#"nodejob_step_duration_seconds_count{operation="upgrade",step="upgrade"}"#),
        3.0,
    );
    // Every host Job created once, each counted by its verb and code.
    assert_eq!(
        got(r#"nodejob_api_requests_total{verb="create_job",code="2xx"}"#),
        3.0
    );
    assert!(got(r#"nodejob_reconciles_total{kind="NodeUpgrade"}"#) >= 1.0);
    assert_eq!(got("nodejob_leader"), 0.0, "run, not elected");
    assert_eq!(got("nodejob_paused"), 0.0);
    assert!(got("nodejob_last_progress_timestamp_seconds") > 1.7e9);
    assert!(metrics.answered());
    for node in NODES {
        assert!(!text.contains(node), "{node} is a label:\n{text}");
    }
    let open = metrics.openmetrics_text();
    assert!(open.ends_with("# EOF\n"), "{open}");
}

/// An informer whose list lags behind: the resources as they stood when the loop first waited
/// for a change (the finalizer added, the run started), for ever after; it tells no change.
/// An informer's cache that has not caught up with the controller's own writes, at its worst.
/// After [`LAGS`] lists it catches up (so a controller that runs again on each lagging list
/// ends, its runs counted, rather than runs for ever).
struct Lagging {
    fake: Arc<FakeCluster>,
    kept: Option<Vec<NodeUpgrade>>,
    lists: usize,
}

const LAGS: usize = 20;

#[async_trait::async_trait]
impl Informer<NodeUpgrade> for Lagging {
    async fn list(&mut self) -> nodejob_core::ApiResult<Vec<NodeUpgrade>> {
        self.lists += 1;
        match &self.kept {
            Some(kept) if self.lists <= LAGS => Ok(kept.clone()),
            _ => Ok(self.fake.list_rolls_at().await?.rolls),
        }
    }

    async fn changes(&mut self) -> nodejob_core::ApiResult<Vec<NodeUpgrade>> {
        if self.kept.is_none() {
            self.kept = Some(self.fake.list_rolls_at().await?.rolls);
        }
        std::future::pending().await
    }
}

struct Silent;

#[async_trait::async_trait]
impl Informer<nodejob_crd::CARotation> for Silent {
    async fn list(&mut self) -> nodejob_core::ApiResult<Vec<nodejob_crd::CARotation>> {
        Ok(Vec::new())
    }

    async fn changes(&mut self) -> nodejob_core::ApiResult<Vec<nodejob_crd::CARotation>> {
        std::future::pending().await
    }
}

struct LaggingInformers(Arc<FakeCluster>);

impl Informers for LaggingInformers {
    fn upgrades(&self) -> Box<dyn Informer<NodeUpgrade>> {
        Box::new(Lagging {
            fake: self.0.clone(),
            kept: None,
            lists: 0,
        })
    }

    fn rotations(&self) -> Box<dyn Informer<nodejob_crd::CARotation>> {
        Box::new(Silent)
    }
}

/// The loop lists again after each run; a list that predates the run's own status write (an
/// informer's cache that has not caught up) must not start the run again: the controller
/// decides on the resource as it reads it then.
#[tokio::test(start_paused = true)]
async fn a_resource_listed_as_it_stood_before_its_run_settled_it_is_not_run_again() {
    let fake = cluster(9);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    let metrics = Arc::new(Metrics::new());
    let controller = Controller::new(fake.clone(), Arc::new(TestPlanner), settings())
        .with_metrics(metrics.clone())
        .with_informers(Arc::new(LaggingInformers(fake.clone())));
    let stop = Stop::new();
    let task = {
        let stop = stop.clone();
        tokio::spawn(async move { controller.run(&stop).await.unwrap() })
    };
    until(&fake, "roll", Duration::from_secs(3600), ready).await;
    // Time for the lists after the run, and their retries.
    fake.sleep(Duration::from_secs(600)).await;
    stop.request();
    task.await.unwrap();
    let text = metrics.prometheus_text();
    assert_eq!(
        sample(
            &text,
            r#"nodejob_operations_total{operation="upgrade",outcome="completed"}"#
        ),
        Some(1.0),
        "{text}"
    );
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 1, "{node}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_new_target_mid_roll_takes_every_node_to_it_and_runs_nothing_twice() {
    let fake = cluster(2);
    let (stop, task) = start(&fake);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    // Once the first node is at v1.38.0, the target moves to v1.39.0.
    while version(&fake, "cp-0").await != "v1.38.0" {
        fake.sleep(Duration::from_secs(1)).await;
    }
    let mut roll = fake.get_roll::<NodeUpgrade>("roll").await.unwrap();
    roll.spec.target = "v1.39.0".into();
    // The workers still at v1.37.2 skip a minor version: asked for.
    roll.spec.allow_skew = true;
    let roll = fake.replace_roll(&roll).await.unwrap();
    assert_eq!(roll.metadata.generation, Some(2));
    let done = until(&fake, "roll", Duration::from_secs(7200), |r| {
        ready(r)
            && r.and_then(|r| r.status.as_ref())
                .and_then(|s| s.observed_generation)
                == Some(2)
    })
    .await
    .unwrap();
    assert_eq!(done.status.unwrap().counts.up_to_date, 3);
    for node in NODES {
        assert_eq!(version(&fake, node).await, "v1.39.0", "{node}");
    }
    // cp-0 went through both versions, each once; no node ran an upgrade twice toward one.
    assert_eq!(upgrades(&fake, "cp-0"), 2);
    for node in ["w-0", "w-1"] {
        assert!(
            upgrades(&fake, node) <= 2,
            "{node}: {}",
            upgrades(&fake, node)
        );
    }
    stop.request();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_failed_node_stalls_the_resource_until_its_spec_changes() {
    let fake = cluster(3);
    let host = fake.host("w-1").unwrap().with_fault(Fault::UpgradeFails);
    fake.set_host("w-1", host).unwrap();
    let (stop, task) = start(&fake);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    let stalled = until(&fake, "roll", Duration::from_secs(3600), |r| {
        r.and_then(|r| condition(r, "Stalled"))
            .is_some_and(|(s, _)| s == "True")
    })
    .await
    .unwrap();
    let status = stalled.status.clone().unwrap();
    assert_eq!(condition(&stalled, "Stalled").unwrap().1, "NodeFailed");
    assert_eq!(condition(&stalled, "Degraded").unwrap().0, "True");
    assert_eq!(status.counts.failed, 1, "{status:#?}");
    let failed = &status.failed[0];
    assert_eq!(failed.node, "w-1");
    assert_eq!(failed.exit_code, Some(1), "{failed:?}");
    let tried = upgrades(&fake, "w-1");
    // Time passes, the controller's retry interval several times over: nothing is retried.
    fake.sleep(Duration::from_secs(600)).await;
    assert_eq!(upgrades(&fake, "w-1"), tried);
    stop.request();
    task.await.unwrap();
}

/// The three-node cluster with a Pod on a worker that no budget lets go (one replica, at least
/// one available): that worker's drain is blocked.
fn pinned_workload(seed: u64) -> Arc<FakeCluster> {
    use nodejob_conformance::workloads::{budget, deployment};
    let fake = cluster(seed);
    for node in ["w-0", "w-1"] {
        fake.label_node(node, "role", "worker").unwrap();
    }
    let label = ("role".to_string(), "worker".to_string());
    fake.create_deployment_now(&deployment("default", "web", 1, &label))
        .unwrap();
    fake.create_budget_now(&budget("default", "web", "web", 1))
        .unwrap();
    fake
}

/// The controller started on [`pinned_workload`], and resource `roll` written: its undrainable
/// node goes by `policy`, at most `max_blocked` of them.
async fn blocking(
    seed: u64,
    policy: nodejob_crd::OnUndrainable,
    max_blocked: i32,
) -> (Arc<FakeCluster>, Stop, tokio::task::JoinHandle<()>) {
    let fake = pinned_workload(seed);
    let (stop, task) = start(&fake);
    let mut roll = upgrade("roll", "v1.38.0");
    roll.spec.on_undrainable = policy;
    roll.spec.max_blocked = Some(max_blocked);
    fake.create_roll(&roll).await.unwrap();
    (fake, stop, task)
}

/// A node an earlier run quarantined is reported by each later run as it stands, with no
/// progress event of its own: the status still counts it blocked and names it, while the
/// controller tries the resource again (a `Stopped` run, not a stalled one).
#[tokio::test(start_paused = true)]
async fn a_node_quarantined_by_an_earlier_run_stays_counted_blocked_in_the_status() {
    let (fake, stop, task) = blocking(6, nodejob_crd::OnUndrainable::Quarantine, 1).await;
    // The first run quarantines the node of the Pod; the retries after it (every 30 s) find
    // it quarantined and leave it as it stands.
    let blocked = until(&fake, "roll", Duration::from_secs(3600), |r| {
        r.and_then(|r| r.status.as_ref())
            .is_some_and(|s| s.counts.blocked == 1)
    })
    .await
    .unwrap();
    let quarantined = blocked.status.unwrap().blocked[0].node.clone();
    fake.sleep(Duration::from_secs(600)).await;
    let roll = fake.get_roll::<NodeUpgrade>("roll").await.unwrap();
    let status = roll.status.clone().unwrap();
    assert_eq!(
        (
            status.counts.blocked,
            status.counts.up_to_date,
            status.counts.nodes
        ),
        (1, 2, 3),
        "{status:#?}"
    );
    assert_eq!(status.blocked.len(), 1, "{status:#?}");
    assert_eq!(status.blocked[0].node, quarantined);
    assert_eq!(status.blocked[0].outcome, "quarantine");
    assert_eq!(
        condition(&roll, "Degraded"),
        Some(("True".into(), "TooManyBlocked".into()))
    );
    assert_eq!(condition(&roll, "Ready").unwrap().0, "False");
    stop.request();
    task.await.unwrap();
}

/// More nodes blocked than `maxBlocked` allows fail the run with no node failed: the resource
/// stalls as `TooManyBlocked`, naming the blocked node, not as a node failure.
#[tokio::test(start_paused = true)]
async fn more_nodes_blocked_than_allowed_stall_the_resource_as_too_many_blocked() {
    let (fake, stop, task) = blocking(8, nodejob_crd::OnUndrainable::Skip, 0).await;
    let stalled = until(&fake, "roll", Duration::from_secs(3600), |r| {
        r.and_then(|r| condition(r, "Stalled"))
            .is_some_and(|(s, _)| s == "True")
    })
    .await
    .unwrap();
    let status = stalled.status.clone().unwrap();
    assert_eq!(
        condition(&stalled, "Stalled"),
        Some(("True".into(), "TooManyBlocked".into())),
        "{status:#?}"
    );
    assert_eq!((status.counts.failed, status.counts.blocked), (0, 1));
    assert!(status.failed.is_empty(), "{status:#?}");
    assert_eq!(status.blocked.len(), 1, "{status:#?}");
    stop.request();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_resource_deleted_mid_roll_stays_until_its_run_stopped_at_a_step_boundary() {
    let fake = cluster(4);
    let (stop, task) = start(&fake);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    until(&fake, "roll", Duration::from_secs(600), |r| {
        r.and_then(|r| r.status.as_ref())
            .is_some_and(|s| s.counts.in_progress > 0)
    })
    .await;
    let held = fake.delete_roll::<NodeUpgrade>("roll", None).await.unwrap();
    assert!(held.is_some(), "the finalizer holds it while its run goes");
    until(&fake, "roll", Duration::from_secs(3600), |r| r.is_none()).await;
    // No node is cordoned without the record that says why (a rerun carries it on).
    for node in NODES {
        let node = fake.get_node(node).await.unwrap();
        let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        let recorded = (node.metadata.annotations.iter().flatten())
            .any(|(k, _)| k == upgrade_driver::records::IN_PROGRESS);
        assert!(!cordoned || recorded, "{:?}", node.metadata);
    }
    stop.request();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_spec_the_command_would_refuse_is_stalled_naming_why() {
    let fake = cluster(5);
    let (stop, task) = start(&fake);
    fake.create_roll(&upgrade("bad", "latest")).await.unwrap();
    let stalled = until(&fake, "bad", Duration::from_secs(60), |r| {
        r.and_then(|r| condition(r, "Validated"))
            .is_some_and(|(s, _)| s == "False")
    })
    .await
    .unwrap();
    assert_eq!(
        condition(&stalled, "Stalled").unwrap(),
        ("True".into(), "InvalidSpec".into())
    );
    let message = &stalled.status.as_ref().unwrap().conditions[3].message;
    assert!(message.contains("latest"), "{message}");
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 0, "{node}");
    }
    stop.request();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_closed_window_is_waited_out_holding_no_lease_and_the_roll_starts_as_it_opens() {
    use nodejob_core::LeaseApi;
    let fake = cluster(6);
    let (stop, task) = start(&fake);
    let mut roll = upgrade("in-window", "v1.38.0");
    roll.spec.window = Some("fri 02:00-06:00 UTC".into());
    fake.create_roll(&roll).await.unwrap();
    let waiting = until(&fake, "in-window", Duration::from_secs(60), |r| {
        r.and_then(|r| condition(r, "WaitingForWindow"))
            .is_some_and(|(s, _)| s == "True")
    })
    .await
    .unwrap();
    let status = waiting.status.clone().unwrap();
    assert_eq!(
        status.next_window.as_ref().map(|t| t.0.to_string()),
        Some("2026-01-02T02:00:00Z".to_string())
    );
    // An hour in, nothing has run and no Lease was taken.
    fake.sleep(Duration::from_secs(3600)).await;
    assert!(fake.get_lease("kube-system", "nodejob").await.is_err());
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 0, "{node}");
    }
    let done = until(&fake, "in-window", Duration::from_secs(36 * 3600), ready)
        .await
        .unwrap();
    let started = done.status.unwrap().completed_at.unwrap().0;
    assert!(
        started >= "2026-01-02T02:00:00Z".parse().unwrap(),
        "completed at {started}, before the window opened"
    );
    stop.request();
    task.await.unwrap();
}

/// Runs a controller over `api` until the resource `name` is Ready (a controller that does not
/// crash), then stops it.
async fn finish<A>(fake: &FakeCluster, api: Arc<A>, name: &str) -> Result<(), String>
where
    A: nodejob_core::JobApi
        + NodeApi
        + nodejob_core::PodApi
        + nodejob_core::LeaseApi
        + nodejob_core::CustomApi
        + 'static,
{
    let stop = Stop::new();
    let controller = Controller::new(api, Arc::new(TestPlanner), settings());
    let deadline = fake.now() + Duration::from_secs(3 * 3600);
    let waiting = async {
        loop {
            let roll = fake.get_roll::<NodeUpgrade>(name).await.ok();
            if ready(roll.as_ref()) {
                return Ok(());
            }
            if fake.now() > deadline {
                return Err(format!(
                    "not Ready within 3h: {:?}",
                    roll.and_then(|r| r.status)
                ));
            }
            fake.sleep(Duration::from_secs(5)).await;
        }
    };
    let (ran, waited) = tokio::join!(controller.run(&stop), async {
        let waited = waiting.await;
        stop.request();
        waited
    });
    ran.map_err(|e| e.to_string())?;
    waited
}

#[tokio::test(start_paused = true)]
async fn a_controller_crashed_at_every_write_and_restarted_upgrades_each_node_once() {
    use nodejob_conformance::Crashing;
    // How many writes a controller makes, reconciling one resource to Ready.
    let fake = cluster(7);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    let counted = Arc::new(Crashing::new(fake.clone(), ()));
    finish(&fake, counted.clone(), "roll").await.unwrap();
    let writes = counted.writes();
    assert!(writes > 20, "{writes} writes");

    let mut failures = Vec::new();
    for at in 0..writes {
        for after in [false, true] {
            let fake = cluster(7);
            fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
            let first = Arc::new(Crashing::new(fake.clone(), ()).crashing_at(at, after));
            let controller = Controller::new(first.clone(), Arc::new(TestPlanner), settings());
            let stop = Stop::new();
            tokio::select! {
                ran = controller.run(&stop) => {
                    failures.push(format!("write {at}: the controller ended first: {ran:?}"));
                    continue;
                }
                () = first.crashed() => {}
            }
            // The crashed controller is gone, its run with it; another takes over.
            drop(controller);
            if let Err(e) = finish(&fake, fake.clone(), "roll").await {
                failures.push(format!("crash at write {at} (after: {after}): {e}"));
                continue;
            }
            let roll = fake.get_roll::<NodeUpgrade>("roll").await.unwrap();
            let counts = roll.status.unwrap_or_default().counts;
            if (counts.nodes, counts.up_to_date, counts.in_progress) != (3, 3, 0) {
                failures.push(format!(
                    "crash at write {at} (after: {after}): the status counts {counts:?}"
                ));
            }
            for node in NODES {
                let n = upgrades(&fake, node);
                if n != 1 {
                    failures.push(format!(
                        "crash at write {at} (after: {after}): {node} upgraded {n} times"
                    ));
                }
                if version(&fake, node).await != "v1.38.0" {
                    failures.push(format!(
                        "crash at write {at} (after: {after}): {node} not at the target"
                    ));
                }
                let node = fake.get_node(node).await.unwrap();
                if node.spec.and_then(|s| s.unschedulable) == Some(true) {
                    failures.push(format!(
                        "crash at write {at} (after: {after}): a node left cordoned"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn election(identity: &str) -> nodejob_core::lease::LeaseConfig {
    nodejob_core::lease::LeaseConfig {
        namespace: "kube-system".into(),
        name: "nodejob-controller".into(),
        identity: identity.into(),
        duration: Duration::from_secs(15),
    }
}

#[tokio::test(start_paused = true)]
async fn two_replicas_one_leads_and_the_other_takes_over_when_it_dies_running_nothing_twice() {
    use nodejob_core::LeaseApi;
    let fake = cluster(8);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    let a = Controller::new(fake.clone(), Arc::new(TestPlanner), settings());
    let mut b = Some(Controller::new(
        fake.clone(),
        Arc::new(TestPlanner),
        settings(),
    ));
    let (stop_a, stop_b) = (Stop::new(), Stop::new());
    let a_election = election("replica-a");
    let a_run = a.run_elected(&a_election, &stop_a);
    // Replica a leads; b, started once a holds the Lease, waits. Once a node is up to date,
    // a dies.
    let mut b_task = None;
    let first_node = async {
        loop {
            let lease = fake
                .get_lease("kube-system", "nodejob-controller")
                .await
                .ok();
            let holder = lease.and_then(|l| l.spec).and_then(|s| s.holder_identity);
            if holder.as_deref() == Some("replica-a")
                && let Some(b) = b.take()
            {
                let stop = stop_b.clone();
                b_task = Some(tokio::spawn(async move {
                    b.run_elected(&election("replica-b"), &stop).await
                }));
            }
            let roll = fake.get_roll::<NodeUpgrade>("roll").await.ok();
            let done = (roll.and_then(|r| r.status)).is_some_and(|s| s.counts.up_to_date >= 1);
            if done && b_task.is_some() {
                break;
            }
            fake.sleep(Duration::from_secs(1)).await;
        }
    };
    tokio::select! {
        ran = a_run => panic!("replica a ended first: {ran:?}"),
        () = first_node => {}
    }
    let b_task = b_task.expect("b started");
    let leader = fake
        .get_lease("kube-system", "nodejob-controller")
        .await
        .unwrap();
    assert_eq!(
        leader.spec.unwrap().holder_identity.as_deref(),
        Some("replica-a"),
        "the first replica leads"
    );
    // a is gone (its future dropped, its run aborted); b takes over once a's Lease expired.
    let done = until(&fake, "roll", Duration::from_secs(3 * 3600), ready)
        .await
        .unwrap();
    assert_eq!(done.status.unwrap().counts.up_to_date, 3);
    let leader = fake
        .get_lease("kube-system", "nodejob-controller")
        .await
        .unwrap();
    assert_eq!(
        leader.spec.unwrap().holder_identity.as_deref(),
        Some("replica-b")
    );
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 1, "{node}");
    }
    stop_b.request();
    b_task.await.unwrap().unwrap();
    // Stopped, the leader let the Lease go.
    let released = fake
        .get_lease("kube-system", "nodejob-controller")
        .await
        .unwrap();
    assert!(
        (released.spec.and_then(|s| s.holder_identity)).is_none_or(|h| h.is_empty()),
        "the Lease is released on stop"
    );
}

/// Replica a runs on w-0 and leads: its roll holds w-0 to the end and, once w-0 starts, stops
/// there and hands the leadership over before w-0 is drained; replica b, on w-1 (rolled by
/// then), takes over, carries w-0 on and drains it. Every node once; w-0's host upgrade run
/// by b.
#[tokio::test(start_paused = true)]
async fn the_leaders_node_goes_last_and_the_leader_hands_over_before_it_is_drained() {
    use nodejob_core::LeaseApi;
    let fake = cluster(9);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    let replica = |node: &str, metrics: &Arc<Metrics>| {
        let api = Arc::new(Counted::new(fake.clone(), metrics.clone()));
        Controller::new(api, Arc::new(TestPlanner), settings())
            .with_metrics(metrics.clone())
            .on_node(node)
    };
    let (metrics_a, metrics_b) = (Arc::new(Metrics::new()), Arc::new(Metrics::new()));
    let a = replica("w-0", &metrics_a);
    let b = replica("w-1", &metrics_b);
    let (stop_a, stop_b) = (Stop::new(), Stop::new());
    let a_task = {
        let stop = stop_a.clone();
        tokio::spawn(async move { a.run_elected(&election("replica-a"), &stop).await })
    };
    let holder = || async {
        let lease = fake.get_lease("kube-system", "nodejob-controller").await;
        (lease.ok())
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
    };
    while holder().await.as_deref() != Some("replica-a") {
        fake.sleep(Duration::from_secs(1)).await;
    }
    let b_task = {
        let stop = stop_b.clone();
        tokio::spawn(async move { b.run_elected(&election("replica-b"), &stop).await })
    };
    until(&fake, "roll", Duration::from_secs(3 * 3600), ready).await;
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 1, "{node}");
        assert_eq!(version(&fake, node).await, "v1.38.0", "{node}");
    }
    assert_eq!(holder().await.as_deref(), Some("replica-b"), "b leads");
    let upgraded = |m: &Metrics| {
        let text = m.prometheus_text();
        let line =
            r#"nodejob_node_cycle_duration_seconds_count{operation="upgrade",result="upgraded"}"#;
        sample(&text, line).unwrap_or(0.0)
    };
    assert_eq!(
        upgraded(&metrics_a),
        2.0,
        "a: cp-0 and w-1, not its own w-0"
    );
    assert_eq!(upgraded(&metrics_b), 1.0, "b: w-0");
    let w0 = fake.get_node("w-0").await.unwrap();
    assert_ne!(
        w0.spec.and_then(|s| s.unschedulable),
        Some(true),
        "w-0 uncordoned"
    );
    stop_a.request();
    stop_b.request();
    a_task.await.unwrap().unwrap();
    b_task.await.unwrap().unwrap();
}

/// A leader alone hands over to nobody: it stands aside one Lease duration, leads again, and
/// drains its own node itself; every node once.
#[tokio::test(start_paused = true)]
async fn a_leader_with_no_other_replica_rolls_its_own_node_after_standing_aside() {
    let fake = cluster(10);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    let a = Controller::new(fake.clone(), Arc::new(TestPlanner), settings()).on_node("w-0");
    let stop = Stop::new();
    let task = {
        let stop = stop.clone();
        tokio::spawn(async move { a.run_elected(&election("replica-a"), &stop).await })
    };
    until(&fake, "roll", Duration::from_secs(3 * 3600), ready).await;
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 1, "{node}");
    }
    stop.request();
    task.await.unwrap().unwrap();
}

/// `spec.paused` set once a node is up to date: the run stops at a step boundary, the status
/// says Paused, and no host upgrade starts while it holds (a node stopped between two steps
/// is cordoned only with our record); lifted, the roll goes on; each host upgrade once.
#[tokio::test(start_paused = true)]
async fn paused_mid_roll_holds_at_a_step_boundary_and_goes_on_when_lifted() {
    let fake = cluster(11);
    let (stop, task) = start(&fake);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    while version(&fake, "cp-0").await != "v1.38.0" {
        fake.sleep(Duration::from_secs(1)).await;
    }
    let mut roll = fake.get_roll::<NodeUpgrade>("roll").await.unwrap();
    roll.spec.paused = true;
    fake.replace_roll(&roll).await.unwrap();
    until(&fake, "roll", Duration::from_secs(3600), |r| {
        r.and_then(|r| condition(r, "Paused"))
            .is_some_and(|(s, reason)| s == "True" && reason == "PausedBySpec")
    })
    .await
    .unwrap();
    // Held: an hour passes and no node moves.
    let held: Vec<u32> = NODES.iter().map(|n| upgrades(&fake, n)).collect();
    fake.sleep(Duration::from_secs(3600)).await;
    let still: Vec<u32> = NODES.iter().map(|n| upgrades(&fake, n)).collect();
    assert_eq!(held, still, "no host upgrade while paused");
    // A node stopped between two steps stays as that step left it, cordoned only with our
    // record saying why (the run that goes on carries it on first).
    for node in NODES {
        let n = fake.get_node(node).await.unwrap();
        let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        assert!(
            !cordoned || upgrade_driver::records::in_flight(&n),
            "{node}: cordoned with no record while paused"
        );
    }
    let mut roll = fake.get_roll::<NodeUpgrade>("roll").await.unwrap();
    roll.spec.paused = false;
    fake.replace_roll(&roll).await.unwrap();
    until(&fake, "roll", Duration::from_secs(3 * 3600), |r| {
        ready(r)
            && r.and_then(|r| r.status.as_ref())
                .and_then(|s| s.observed_generation)
                == Some(3)
    })
    .await
    .unwrap();
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 1, "{node}");
        assert_eq!(version(&fake, node).await, "v1.38.0", "{node}");
    }
    stop.request();
    task.await.unwrap();
}

/// A person runs `nodejob upgrade` to the same target while the controller rolls: the two
/// share the rolls' Lease, so one waits (the controller's status names the person's run, or
/// the person's is refused naming the controller's); every node ends at the target, each host
/// upgrade once.
#[tokio::test(start_paused = true)]
async fn a_persons_upgrade_racing_the_controller_runs_nothing_twice() {
    let fake = cluster(12);
    let (stop, task) = start(&fake);
    let mut person = PlanSpec::new("v1.38.0");
    person.namespace = "kube-system".into();
    person.identity = "a-person-at-a-terminal".into();
    person.deadline = Duration::from_secs(600);
    person.reboot_timeout = Duration::from_secs(300);
    let person = Plan::build(person).unwrap();
    // The person starts first; the controller's resource is written a moment later.
    let by_hand = {
        let fake = fake.clone();
        tokio::spawn(
            async move { upgrade_driver::run(&*fake, &person, upgrade_driver::quiet()).await },
        )
    };
    fake.sleep(Duration::from_secs(1)).await;
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    let mut waited = false;
    let deadline = fake.now() + Duration::from_secs(3 * 3600);
    loop {
        let roll = fake.get_roll::<NodeUpgrade>("roll").await.ok();
        let reason = roll.as_ref().and_then(|r| condition(r, "Ready"));
        waited |= reason
            .as_ref()
            .is_some_and(|(_, reason)| reason == "LeaseHeldByOther");
        if ready(roll.as_ref()) {
            break;
        }
        assert!(fake.now() < deadline, "not Ready: {reason:?}");
        fake.sleep(Duration::from_secs(1)).await;
    }
    let report = by_hand.await.unwrap().unwrap();
    assert!(
        matches!(report.outcome, upgrade_driver::Outcome::Done),
        "{:?}",
        report.outcome
    );
    assert!(
        waited,
        "the controller waited for the person's Lease, and said so"
    );
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 1, "{node}");
    }
    stop.request();
    task.await.unwrap();
}

/// The apiserver refuses the controller's lists and status writes for a while (a CRD's
/// storage still initializing answers 429, as one installed a moment ago does): the
/// controller backs off and lists again, it does not stop; the roll completes once the
/// apiserver answers.
#[tokio::test(start_paused = true)]
async fn an_apiserver_refusing_for_a_while_delays_the_controller_and_never_stops_it() {
    use nodejob_core::{ApiError, ErrorKind};
    use nodejob_fake::{Times, Verb};
    let fake = cluster(13);
    fake.create_roll(&upgrade("roll", "v1.38.0")).await.unwrap();
    let unavailable = ApiError::new(ErrorKind::Transient, 429, "storage is (re)initializing");
    fake.fail(Verb::ListCustomAt, unavailable.clone(), Times::N(6));
    fake.fail(Verb::ReplaceCustom, unavailable, Times::N(2));
    let (stop, task) = start(&fake);
    until(&fake, "roll", Duration::from_secs(3600), ready)
        .await
        .unwrap();
    for node in NODES {
        assert_eq!(upgrades(&fake, node), 1, "{node}");
    }
    assert!(!task.is_finished(), "the controller is still running");
    stop.request();
    task.await.unwrap();
}
