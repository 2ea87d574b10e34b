//! The driver's scenarios on the fake cluster, in paused virtual time: nodes that do not come
//! back right, budgets, the Lease, skips, the window, the failure budget, the health check and
//! the preview. Each checks the invariants after every API write.

mod support;

use std::sync::Arc;
use std::time::Duration;

use jiff::civil::{Time, Weekday};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use nodejob_conformance::workloads::{bare_pod, budget, deployment};
use nodejob_core::{Clock, ErrorKind, LeaseApi, NodeChange, Verb};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::{Fault, Operation};
use support::*;
use upgrade_driver::EventSink as _;
use upgrade_driver::{
    Error, MaxUnavailable, NodeResult, Outcome, PlanSpec, PodPlan, UpgradeStep, Window, preview,
    run,
};

/// A cluster of one control-plane node and `workers` workers in zone `z`, no workload.
fn small(seed: u64, workers: usize) -> (Arc<FakeCluster>, Vec<String>) {
    cluster(seed, 1, &[("z", workers)], 0)
}

fn with_fault(fake: &FakeCluster, node: &str, fault: Fault) {
    let host = fake.host(node).unwrap().with_fault(fault);
    fake.set_host(node, host).unwrap();
}

fn failure_of(report: &upgrade_driver::Report, node: &str) -> upgrade_driver::Failure {
    report
        .node(node)
        .and_then(|n| n.failure().cloned())
        .unwrap_or_else(|| panic!("{node} did not fail: {report:#?}"))
}

async fn roll(api: &Harness, spec: PlanSpec) -> upgrade_driver::Report {
    run(api, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap()
}

// --- nodes that do not come back right ----------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_node_that_never_comes_back_ready_fails_at_reboot_and_stays_cordoned() {
    let (fake, names) = small(3, 2);
    with_fault(&fake, "z-0", Fault::StaysDown);
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, plan_spec()).await;
    let failure = failure_of(&report, "z-0");
    assert_eq!(failure.step, UpgradeStep::Reboot);
    assert!(failure.message.contains("NotReady"), "{}", failure.message);
    assert!(cordoned_by_us(&fake.node("z-0").unwrap()));
    assert_eq!(
        report.node("z-1").unwrap().result,
        None,
        "no node after a failure"
    );
    // The reboot wait is bounded by the plan's reboot timeout, not forever.
    assert!(
        report.totals.took_ms < 20 * 60 * 1000,
        "{:?}",
        report.totals
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_that_comes_back_at_the_old_version_is_a_failure_not_a_success() {
    let (fake, names) = small(4, 1);
    with_fault(&fake, "z-0", Fault::BootsOldVersion);
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, plan_spec()).await;
    let failure = failure_of(&report, "z-0");
    assert_eq!(failure.step, UpgradeStep::Reboot);
    assert!(
        failure.message.contains("came back at v1.37.2"),
        "{}",
        failure.message
    );
    assert!(matches!(report.outcome, Outcome::Failed { .. }));
    assert!(cordoned_by_us(&fake.node("z-0").unwrap()));
}

#[tokio::test(start_paused = true)]
async fn a_node_whose_boot_id_never_changes_fails_at_reboot() {
    let (fake, names) = small(5, 1);
    let mut spec = plan_spec();
    // A host step that exits 0 without rebooting anything.
    spec.command = Some(vec![
        "/usr/local/bin/not-stratum".into(),
        nodejob_fake::host::exit(0),
    ]);
    spec.reboot_timeout = Duration::from_secs(120);
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, spec).await;
    let failure = failure_of(&report, "cp-0");
    assert_eq!(failure.step, UpgradeStep::Reboot);
    assert!(
        failure.message.contains("did not reboot"),
        "{}",
        failure.message
    );
}

// --- budgets ------------------------------------------------------------------------------------

/// Two `web` replicas on the workers behind a budget that allows no disruption, running and
/// Ready (the cluster settled for 30s).
async fn guarded(seed: u64) -> (Arc<FakeCluster>, Vec<String>) {
    let (fake, names) = small(seed, 2);
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    fake.create_deployment_now(&deployment("default", "web", 2, &label))
        .unwrap();
    fake.create_budget_now(&budget("default", "web", "web", 2))
        .unwrap();
    fake.sleep(Duration::from_secs(30)).await;
    (fake, names)
}

/// The workers that have `web` pods now.
fn with_web_pods(fake: &FakeCluster) -> Vec<String> {
    let mut nodes: Vec<String> = fake
        .pods("default")
        .iter()
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// The control plane's apiserver is at the target already (its nodes' kubelets are not), as
/// a worker roll that keeps the version skew policy needs it.
fn control_plane_at_target(fake: &FakeCluster) {
    fake.set_server_version(nodejob_fake::ServerVersion::Fixed(TARGET.into()));
}

fn workers_only() -> PlanSpec {
    let mut spec = plan_spec();
    spec.selector = Some(format!("{}={}", WORKER.0, WORKER.1));
    spec
}

#[tokio::test(start_paused = true)]
async fn a_budget_that_blocks_then_releases_delays_the_drain_and_the_roll_finishes() {
    let (fake, _) = guarded(6).await;
    control_plane_at_target(&fake);
    // A third healthy `web` pod, on a node outside the plan, appears a minute later: the budget
    // then allows one disruption.
    fake.schedule(Duration::from_secs(90), |c| {
        c.create_pod_now(&bare_pod("default", "web", "cp-0", 5))
            .unwrap();
    });
    let workers = vec!["z-0".to_string(), "z-1".to_string()];
    let api = harness(fake.clone(), workers, 1);
    let report = roll(&api, workers_only()).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let drains: Vec<u64> = report
        .nodes
        .iter()
        .flat_map(|n| {
            n.steps
                .iter()
                .filter(|(s, _)| *s == UpgradeStep::Drain)
                .map(|(_, ms)| *ms)
        })
        .collect();
    assert!(drains.iter().any(|ms| *ms >= 55_000), "{drains:?}");
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_budget_that_never_releases_fails_the_drain_at_its_timeout_naming_it() {
    let (fake, _) = guarded(7).await;
    control_plane_at_target(&fake);
    let blocked = with_web_pods(&fake)[0].clone();
    let workers = vec!["z-0".to_string(), "z-1".to_string()];
    let api = harness(fake.clone(), workers, 1);
    let report = roll(&api, workers_only()).await;
    let failure = failure_of(&report, &blocked);
    assert_eq!(failure.step, UpgradeStep::Drain);
    assert!(
        failure.message.contains("disruption budget web") && failure.message.contains("120s"),
        "{}",
        failure.message
    );
    assert_eq!(
        api.upgrades(&blocked),
        0,
        "no host step after a failed drain"
    );
    assert!(cordoned_by_us(&fake.node(&blocked).unwrap()));
    assert!(matches!(report.outcome, Outcome::Failed { .. }));
    // Bounded by the drain's timeout (120s in the test plan), not forever.
    assert!(report.totals.took_ms < 200_000, "{:?}", report.totals);
}

// --- the Lease ----------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_competing_holder_of_the_lease_blocks_the_run_before_any_write() {
    let (fake, names) = small(8, 1);
    let api = harness(fake.clone(), names.clone(), 1);
    let mut other = plan_spec();
    other.identity = "someone-else".into();
    let config = nodejob_core::lease::LeaseConfig {
        namespace: NS.into(),
        name: "nodejob".into(),
        identity: "someone-else".into(),
        duration: Duration::from_secs(60),
    };
    let claim = nodejob_core::lease::Claim {
        operation: "rotate-ca".into(),
        target: "sha256:abc".into(),
    };
    nodejob_core::lease::acquire(&*fake, &config, &claim)
        .await
        .unwrap();
    let err = run(&api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Core(nodejob_core::Error::LeaseHeld { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("someone-else"), "{err}");
    assert_eq!(fake.count(Verb::PatchNode), 0);
    for name in &names {
        assert_eq!(api.upgrades(name), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_is_taken_over_and_the_report_says_from_whom() {
    let (fake, names) = small(9, 1);
    let config = nodejob_core::lease::LeaseConfig {
        namespace: NS.into(),
        name: "nodejob".into(),
        identity: "crashed-driver".into(),
        duration: Duration::from_secs(60),
    };
    let claim = nodejob_core::lease::Claim {
        operation: "upgrade".into(),
        target: TARGET.into(),
    };
    nodejob_core::lease::acquire(&*fake, &config, &claim)
        .await
        .unwrap();
    fake.sleep(Duration::from_secs(61)).await;
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, plan_spec()).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert!(
        (report.lease.as_ref())
            .is_some_and(|l| l.acquired.contains("taken over from crashed-driver")),
        "{:?}",
        report.lease
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_lost_mid_run_stops_the_run_before_its_next_write() {
    let (fake, names) = small(10, 3);
    let api = Arc::new(harness(fake.clone(), names.clone(), 1));
    // Another actor takes the Lease over 90s in (as after an expiry it saw).
    let thief = fake.clone();
    let writes_at_theft = Arc::new(std::sync::Mutex::new(None));
    let (seen, api2) = (writes_at_theft.clone(), api.clone());
    tokio::spawn(async move {
        thief.sleep(Duration::from_secs(90)).await;
        let mut lease = thief.lease(NS, "nodejob").unwrap();
        let spec = lease.spec.get_or_insert_default();
        spec.holder_identity = Some("thief".into());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        spec.renew_time = Some(MicroTime(thief.wall_time()));
        thief.replace_lease(&lease).await.unwrap();
        *seen.lock().unwrap() = Some((api2.writes(), thief.calls().len()));
    });
    let report = run(&*api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap();
    let Outcome::Stopped { why } = &report.outcome else {
        panic!("{report:#?}")
    };
    assert!(why.contains("thief"), "{why}");
    assert!(
        matches!(
            report.lease.as_ref().map(|l| &l.ended),
            Some(upgrade_driver::LeaseEnd::Lost { .. })
        ),
        "{:?}",
        report.lease
    );
    // Not one write lands after the theft. The one the driver may still try is the Lease's
    // renewal, which is its read of the Lease when due: a PUT under the resourceVersion it
    // last knew, refused with Conflict, after which it reads the thief's Lease and stops.
    let (writes, calls) = writes_at_theft.lock().unwrap().expect("the theft happened");
    let after = fake.calls().split_off(calls);
    let landed: Vec<_> = (after.iter())
        .filter(|c| c.verb.writes())
        .filter(|c| !(c.verb == Verb::ReplaceLease && c.error == Some(ErrorKind::Conflict)))
        .collect();
    assert!(
        landed.is_empty(),
        "the driver wrote after losing the Lease: {landed:#?}"
    );
    assert!(
        api.writes() - writes <= 1,
        "more than the renewal tried after the theft: {after:#?}"
    );
    // The run stopped: some node never started.
    assert!(
        report.totals.not_started + report.totals.interrupted > 0,
        "{:?}",
        report.totals
    );
}

// --- skips and someone else's cordon ---------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn nodes_at_the_target_are_skipped_and_a_node_cordoned_by_someone_else_stays_cordoned() {
    let (fake, names) = small(11, 2);
    fake.set_kubelet_version("z-0", TARGET).unwrap();
    fake.patch_node_now("z-1", &[NodeChange::Cordon]).unwrap();
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, plan_spec()).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert!(matches!(
        report.node("z-0").unwrap().result,
        Some(NodeResult::Skipped { .. })
    ));
    assert_eq!(api.upgrades("z-0"), 0);
    assert_eq!(api.upgrades("z-1"), 1);
    let z1 = fake.node("z-1").unwrap();
    assert_eq!(kubelet_version(&z1), TARGET);
    assert!(
        upgrade_driver::records::unschedulable(&z1),
        "someone else's cordon kept"
    );
}

// --- the window, the failure budget, the health check --------------------------------------------

#[tokio::test(start_paused = true)]
async fn outside_the_maintenance_window_no_node_starts() {
    let (fake, names) = small(12, 1);
    let mut spec = plan_spec();
    // The fake's clock starts on Thursday 2026-01-01 00:00 UTC.
    spec.window = Some(Window {
        days: vec![Weekday::Saturday],
        start: Time::constant(1, 0, 0, 0),
        end: Time::constant(5, 0, 0, 0),
        time_zone: "UTC".into(),
    });
    let api = harness(fake.clone(), names.clone(), 1);
    let report = roll(&api, spec).await;
    let Outcome::Stopped { why } = &report.outcome else {
        panic!("{report:#?}")
    };
    assert!(
        why == "outside the maintenance window; it next opens at 2026-01-03 01:00 UTC",
        "{why}"
    );
    for name in &names {
        assert_eq!(api.upgrades(name), 0);
    }
    assert_eq!(fake.count(Verb::PatchNode), 0);
}

#[tokio::test(start_paused = true)]
async fn a_window_that_closes_mid_roll_lets_the_node_in_flight_finish_and_starts_no_other() {
    let (fake, names) = small(13, 2);
    let mut spec = plan_spec();
    // Open for the first 30s of the run: enough to start one node (a node takes about a
    // minute: a 20s upgrade and a 35s reboot), not to finish it.
    spec.window = Some(Window {
        days: vec![Weekday::Thursday],
        start: Time::constant(0, 0, 0, 0),
        end: Time::constant(0, 0, 30, 0),
        time_zone: "UTC".into(),
    });
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, spec).await;
    assert_eq!(
        report.node("cp-0").unwrap().result,
        Some(NodeResult::Upgraded)
    );
    assert!(
        matches!(report.outcome, Outcome::Stopped { .. }),
        "{report:#?}"
    );
    assert_eq!(api.upgrades("z-0"), 0);
    assert_eq!(report.node("z-1").unwrap().result, None);
}

#[tokio::test(start_paused = true)]
async fn the_failure_budget_lets_the_roll_go_on_until_it_is_spent() {
    let (fake, names) = cluster(14, 0, &[("z", 4)], 0);
    with_fault(&fake, "z-0", Fault::UpgradeFails);
    with_fault(&fake, "z-2", Fault::UpgradeFails);
    let mut spec = plan_spec();
    spec.max_unavailable = MaxUnavailable::Count(2);
    spec.failure_budget = 2;
    let api = harness(fake.clone(), names, 2);
    let report = roll(&api, spec).await;
    assert_eq!(failure_of(&report, "z-0").step, UpgradeStep::Upgrade);
    assert_eq!(
        report.node("z-1").unwrap().result,
        Some(NodeResult::Upgraded)
    );
    assert_eq!(failure_of(&report, "z-2").step, UpgradeStep::Upgrade);
    assert_eq!(
        report.node("z-3").unwrap().result,
        None,
        "the budget is spent"
    );
    assert_eq!(api.upgrades("z-3"), 0);
    let Outcome::Failed { nodes, retry } = &report.outcome else {
        panic!("{report:#?}")
    };
    assert_eq!(nodes, &["z-0", "z-2"], "the retry names the failed nodes");
    assert!(
        !retry.contains("nodejob "),
        "no command line in a library: {retry}"
    );
    assert_eq!(api.violations(), Vec::<String>::new());
}

/// Issue 33, item 17: a node whose drain kubectl's rules refuse (a bare Pod: no controller)
/// fails at its drain untouched, never cordoned nor marked ours, naming the Pod; the preview
/// says the same refusal; with `force`, the same node is drained and upgraded.
#[tokio::test(start_paused = true)]
async fn a_node_whose_drain_would_be_refused_fails_untouched() {
    let (fake, names) = cluster(16, 0, &[("z", 2)], 0);
    fake.create_pod_now(&bare_pod("default", "scratch", "z-0", 1))
        .unwrap();
    fake.sleep(Duration::from_secs(30)).await;
    let mut spec = plan_spec();
    spec.nodes = vec!["z-0".into()];
    let said = preview(&*fake, &plan(spec.clone())).await.unwrap();
    let z0 = said.nodes.iter().find(|n| n.name == "z-0").unwrap();
    assert!(
        z0.pods
            .iter()
            .any(|p| matches!(p, PodPlan::Refuse { pod, .. } if pod == "default/scratch")),
        "{:#?}",
        z0.pods
    );
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, spec.clone()).await;
    let failure = failure_of(&report, "z-0");
    assert_eq!(
        (failure.step, failure.kind),
        (UpgradeStep::Drain, upgrade_driver::FailureKind::Drain)
    );
    assert!(
        failure.message.contains("left untouched (not cordoned)")
            && failure
                .message
                .contains("default/scratch: declares no controller"),
        "{}",
        failure.message
    );
    let node = fake.node("z-0").unwrap();
    assert!(
        !node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
    );
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key(upgrade_driver::records::IN_PROGRESS));
    assert_eq!(api.upgrades("z-0"), 0);

    spec.drain.unreplicated = nodejob_core::drain::Unreplicated::Force;
    let report = roll(&api, spec).await;
    assert_eq!(
        report.node("z-0").unwrap().result,
        Some(NodeResult::Upgraded),
        "{report:#?}"
    );
    assert_eq!(api.violations(), Vec::<String>::new());
}

/// Issue 33, item 14: the Pod of the host Job a failed run kept for inspection is left by the
/// rerun's drain (the preview says so): its exit code and log stay for `kubectl logs`, and it
/// is not counted as evicted.
#[tokio::test(start_paused = true)]
async fn the_host_job_a_failed_run_kept_is_left_by_the_reruns_drain() {
    let (fake, names) = cluster(15, 0, &[("z", 2)], 0);
    with_fault(&fake, "z-0", Fault::UpgradeFails);
    let mut spec = plan_spec();
    spec.nodes = vec!["z-0".into()];
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, spec.clone()).await;
    assert_eq!(failure_of(&report, "z-0").step, UpgradeStep::Upgrade);
    let kept: Vec<String> = (fake.pods_on("z-0").iter())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
        .map(|p| {
            let m = &p.metadata;
            format!(
                "{}/{}",
                m.namespace.clone().unwrap(),
                m.name.clone().unwrap()
            )
        })
        .collect();
    assert_eq!(kept.len(), 1, "the failed host Job's Pod is kept: {kept:?}");

    let said = preview(&*fake, &plan(spec.clone())).await.unwrap();
    let z0 = said.nodes.iter().find(|n| n.name == "z-0").unwrap();
    assert!(
        z0.pods.iter().any(|p| matches!(p,
            PodPlan::Leave { pod, why } if *pod == kept[0] && why.contains("kept for its exit code and log"))),
        "{:#?}",
        z0.pods
    );
    let mut host = fake.host("z-0").unwrap();
    host.faults.clear();
    fake.set_host("z-0", host).unwrap();
    let report = roll(&api, spec).await;
    let z0 = report.node("z-0").unwrap();
    assert_eq!(z0.result, Some(NodeResult::Upgraded), "{report:#?}");
    assert!(!z0.pods_evicted.contains(&kept[0]), "{:?}", z0.pods_evicted);
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_failing_health_check_gates_the_next_node() {
    let (fake, names) = small(15, 2);
    with_fault(&fake, "z-0", Fault::Unhealthy);
    let mut spec = plan_spec();
    spec.health_check = Some(
        [
            "nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--",
        ]
        .into_iter()
        .map(String::from)
        .chain(["/usr/local/bin/stratum".into(), "health".into()])
        .collect(),
    );
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, spec).await;
    assert_eq!(
        report.node("cp-0").unwrap().result,
        Some(NodeResult::Upgraded)
    );
    let failure = failure_of(&report, "z-0");
    assert_eq!(failure.step, UpgradeStep::Health);
    assert_eq!(failure.exit_code, Some(1));
    assert_eq!(kubelet_version(&fake.node("z-0").unwrap()), TARGET);
    assert!(cordoned_by_us(&fake.node("z-0").unwrap()));
    assert_eq!(report.node("z-1").unwrap().result, None);
    assert_eq!(
        fake.host_state("cp-0")
            .unwrap()
            .executions(Operation::Health),
        1
    );
}

// --- preview ------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn preview_writes_nothing_and_says_what_a_run_would_do() {
    let (fake, _) = guarded(16).await;
    fake.set_kubelet_version("cp-0", TARGET).unwrap();
    let loaded = with_web_pods(&fake);
    let before = fake.calls().len();
    let pods_before: Vec<_> = fake
        .pods("default")
        .into_iter()
        .map(|p| p.metadata.uid)
        .collect();
    let preview = preview(&*fake, &plan(plan_spec())).await.unwrap();
    let calls = fake.calls().split_off(before);
    let writes: Vec<_> = calls
        .iter()
        .filter(|c| {
            !matches!(
                c.verb,
                Verb::GetNode
                    | Verb::ListNodes
                    | Verb::Version
                    | Verb::ListNodePods
                    | Verb::GetLease
                    | Verb::EvictPod
            )
        })
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    let pods_after: Vec<_> = fake
        .pods("default")
        .into_iter()
        .map(|p| p.metadata.uid)
        .collect();
    assert_eq!(pods_before, pods_after, "a dry-run eviction evicts nothing");
    assert_eq!(preview.skipped.len(), 1, "{preview:#?}");
    assert_eq!(preview.skipped[0].0, "cp-0");
    assert_eq!(
        preview.batches,
        vec![
            ("zone z".to_string(), vec!["z-0".to_string()]),
            ("zone z".to_string(), vec!["z-1".to_string()])
        ]
    );
    let blocked = preview.blocked();
    assert_eq!(blocked.len(), 2, "{preview:#?}");
    assert!(
        blocked
            .iter()
            .all(|(_, _, message)| message.contains("web"))
    );
    assert!(
        blocked
            .iter()
            .all(|(node, _, _)| loaded.iter().any(|l| l == node))
    );
    assert!(
        preview
            .nodes
            .iter()
            .all(|n| n.pods.iter().all(|p| matches!(p, PodPlan::Blocked { .. })))
    );
    assert_eq!(preview.lease, None);
}

#[tokio::test(start_paused = true)]
async fn the_preview_names_the_pods_that_no_other_node_can_run() {
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    // One worker: while it is drained, its Pod's replacement has nowhere to run (the control
    // plane does not match its node selector).
    let (fake, _) = small(21, 1);
    control_plane_at_target(&fake);
    fake.create_deployment_now(&deployment("default", "web", 1, &label))
        .unwrap();
    fake.sleep(Duration::from_secs(30)).await;
    let alone = preview(&*fake, &plan(workers_only())).await.unwrap();
    assert_eq!(alone.nodes.len(), 1, "{alone:#?}");
    assert_eq!(alone.nodes[0].stranded.len(), 1, "{alone:#?}");
    assert!(
        matches!(&alone.nodes[0].pods[0], PodPlan::Evict { pod } if *pod == alone.nodes[0].stranded[0])
    );

    // Two workers drained one at a time: each can take the other's Pods.
    let (fake, _) = small(21, 2);
    control_plane_at_target(&fake);
    fake.create_deployment_now(&deployment("default", "web", 2, &label))
        .unwrap();
    fake.sleep(Duration::from_secs(30)).await;
    let two = preview(&*fake, &plan(workers_only())).await.unwrap();
    assert_eq!(two.nodes.len(), 2, "{two:#?}");
    assert!(two.nodes.iter().all(|n| n.stranded.is_empty()), "{two:#?}");

    // ... unless the other is not Ready.
    let other = two.nodes[1].name.clone();
    fake.set_node_ready(&other, false).unwrap();
    let down = preview(&*fake, &plan(workers_only())).await.unwrap();
    let first = down.nodes.iter().find(|n| n.name != other).unwrap();
    assert!(!first.stranded.is_empty(), "{down:#?}");
}

// --- nodes down that the driver did not take down ------------------------------------------------

#[tokio::test(start_paused = true)]
async fn no_control_plane_node_starts_while_another_is_down_and_a_flap_is_waited_out() {
    let (fake, names) = cluster(17, 3, &[], 0);
    fake.set_node_ready("cp-1", false).unwrap();
    fake.schedule(Duration::from_secs(200), |c| {
        c.set_node_ready("cp-1", true).unwrap()
    });
    let mut spec = plan_spec();
    spec.max_unavailable = MaxUnavailable::Count(3);
    let api = harness(fake.clone(), names.clone(), 3);
    let report = roll(&api, spec).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(api.violations(), Vec::<String>::new());
    for name in &names {
        assert_eq!(api.upgrades(name), 1, "{name}");
    }
    // cp-0 started only once cp-1 was back.
    let first_patch = fake
        .calls()
        .into_iter()
        .find(|c| c.verb == Verb::PatchNode)
        .unwrap();
    assert!(
        first_patch.at >= Duration::from_secs(200),
        "{first_patch:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_that_stays_down_stops_the_roll_naming_it() {
    let (fake, names) = cluster(18, 3, &[], 0);
    fake.set_node_ready("cp-2", false).unwrap();
    let api = harness(fake.clone(), names, 1);
    let report = roll(&api, plan_spec()).await;
    let Outcome::Stopped { why } = &report.outcome else {
        panic!("{report:#?}")
    };
    assert!(why.contains("cp-2") && why.contains("unavailable"), "{why}");
    assert_eq!(fake.count(Verb::PatchNode), 0);
}

// --- a stop request ------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_stop_request_lets_the_step_in_flight_finish_and_a_rerun_resumes() {
    let (fake, names) = small(31, 2);
    let api = harness(fake.clone(), names.clone(), 1);
    let stop = upgrade_driver::Stop::new();
    let events = Arc::new(Events::default());
    // Asked while the first node's host upgrade runs (as Ctrl-C once would be).
    let sink = {
        let (stop, events) = (stop.clone(), events.clone());
        Arc::new(move |e: &upgrade_driver::Progress| {
            if matches!(
                e,
                upgrade_driver::Progress::StepStarted {
                    step: UpgradeStep::Upgrade,
                    ..
                }
            ) {
                stop.request();
            }
            events.event(e);
        })
    };
    let report = upgrade_driver::run_until(&api, &plan(plan_spec()), sink, &stop)
        .await
        .unwrap();
    assert!(
        matches!(&report.outcome, Outcome::Stopped { why } if why.starts_with("as asked")),
        "{:?}",
        report.outcome
    );
    let first = &names[0];
    // The step in flight finished: reported, its result kept, its Job deleted; no other step
    // began on the node, and no other node started.
    let finished: Vec<UpgradeStep> = events
        .all()
        .iter()
        .filter_map(|e| match e {
            upgrade_driver::Progress::StepFinished { node, step, .. } if node == first => {
                Some(*step)
            }
            _ => None,
        })
        .collect();
    assert_eq!(finished.last(), Some(&UpgradeStep::Upgrade), "{finished:?}");
    assert!(matches!(
        report.node(first).unwrap().result,
        Some(NodeResult::Interrupted {
            step: UpgradeStep::Reboot,
            ..
        })
    ));
    assert!(
        fake.pods(NS).iter().all(|p| p
            .metadata
            .name
            .as_deref()
            .is_none_or(|n| !n.starts_with("upgrade-"))),
        "the host Job and its pod are gone"
    );
    assert_eq!(api.upgrades(first), 1);
    for name in &names[1..] {
        assert_eq!(api.upgrades(name), 0, "{name} never started");
    }
    assert_eq!(api.violations(), Vec::<String>::new());

    // A rerun carries on from the reboot, never upgrading a node twice.
    let rerun = roll(&api, plan_spec()).await;
    assert_eq!(rerun.outcome, Outcome::Done, "{rerun:#?}");
    for name in &names {
        assert_eq!(api.upgrades(name), 1, "{name}");
        assert!(!cordoned_by_us(&fake.node(name).unwrap()), "{name}");
    }
}

/// A rerun's report of a node the first run left past its host upgrade: FROM is where the
/// first run started it (it reports the target by then), and its Pods evicted are those the
/// first run's drain evicted, recorded on the node, though the rerun drains nothing.
#[tokio::test(start_paused = true)]
async fn a_rerun_reports_a_carried_node_from_where_it_started_with_its_earlier_evictions() {
    let (fake, names) = cluster(31, 1, &[("z", 2)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    let api = harness(fake.clone(), names.clone(), 1);
    let spec = plan_spec();
    let stop = upgrade_driver::Stop::new();
    // Asked once the worker's host upgrade runs (the control plane goes first).
    let sink = {
        let stop = stop.clone();
        Arc::new(move |e: &upgrade_driver::Progress| {
            if let upgrade_driver::Progress::StepStarted {
                node,
                step: UpgradeStep::Upgrade,
            } = e
                && node == "z-0"
            {
                stop.request();
            }
        })
    };
    let report = upgrade_driver::run_until(&api, &plan(spec.clone()), sink, &stop)
        .await
        .unwrap();
    let first = report.node("z-0").unwrap();
    assert!(
        matches!(first.result, Some(NodeResult::Interrupted { .. })),
        "{first:#?}"
    );
    let evicted = first.pods_evicted.len();
    assert!(evicted > 0, "{first:#?}");

    let rerun = roll(&api, spec).await;
    assert_eq!(rerun.outcome, Outcome::Done, "{rerun:#?}");
    let carried = rerun.node("z-0").unwrap();
    assert_eq!(carried.result, Some(NodeResult::Upgraded), "{carried:#?}");
    assert_eq!(carried.from.as_deref(), Some(FROM), "{carried:#?}");
    assert_eq!(carried.to.as_deref(), Some(TARGET), "{carried:#?}");
    assert!(carried.pods_evicted.is_empty(), "{carried:#?}");
    assert_eq!(
        carried.pods_evicted_earlier as usize, evicted,
        "{carried:#?}"
    );
    assert_eq!(rerun.totals.pods_evicted_earlier, evicted);
    assert_eq!(api.upgrades("z-0"), 1);
}

/// Issue 34: the Events a turn tells before its write are fenced by the read of the Lease
/// right before that write, not by one more read each: never two reads of the Lease in a row
/// with nothing between; and still one read before each Event or write group (issue 30).
#[tokio::test(start_paused = true)]
async fn an_event_told_before_a_write_shares_that_writes_read_of_the_lease() {
    // No control-plane node: the fake's apiserver is at the target.
    let (fake, names) = cluster(6, 0, &[("z", 2)], 0);
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let calls = fake.calls();
    let lease = |c: &nodejob_fake::Call| c.verb == nodejob_fake::Verb::GetLease;
    let twice: Vec<usize> = (calls.windows(2).enumerate())
        .filter(|(_, w)| lease(&w[0]) && lease(&w[1]))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(twice, Vec::<usize>::new(), "two Lease reads in a row");
    // Every Event of ours follows a read of the Lease, with nothing but other writes between.
    for (i, c) in calls.iter().enumerate() {
        if c.verb != nodejob_fake::Verb::CreateEvent {
            continue;
        }
        let before = calls[..i]
            .iter()
            .rev()
            .find(|c| !c.verb.writes() || lease(c))
            .map(|c| c.verb);
        assert_eq!(
            before,
            Some(nodejob_fake::Verb::GetLease),
            "event {} not fenced by a read right before it",
            c.name
        );
    }
}
