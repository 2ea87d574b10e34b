//! The upgrade under hostile actors, one by one: a person or a machine changes the cluster
//! while a roll is in flight, through the fake's public actor API, and each documented promise
//! still holds. Each test is named after what the actor does and what the driver must do (the
//! numbered items of the hostile-actors issue); the seeded actor soak (`tests/actors.rs`) draws
//! them together.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_conformance::workloads::{budget, deployment};
use nodejob_core::{Answer, ApiResult, Clock, Layer, NodeChange, Request, Verb};
use nodejob_fake::FakeCluster;
use support::*;
use upgrade_driver::records::{self, IN_PROGRESS, InProgress};
use upgrade_driver::{NodeResult, Outcome, PlanSpec, Progress, Report, UpgradeStep, run};

/// What the cluster looked like right before the first host Job was created on `node`:
/// whether the node was cordoned, and the evictable Pods on it.
type AtHostJob = Arc<Mutex<Option<(bool, Vec<String>)>>>;

fn check_at_host_job(fake: &FakeCluster, node: &'static str) -> AtHostJob {
    let seen: AtHostJob = Arc::default();
    let out = seen.clone();
    fake.before(Verb::CreateJob, move |c| {
        let cordoned = c.node(node).is_some_and(|n| records::unschedulable(&n));
        *out.lock().unwrap() = Some((cordoned, evictable_on(c, node)));
    });
    seen
}

fn only(nodes: &[&str]) -> PlanSpec {
    let mut spec = plan_spec();
    spec.nodes = nodes.iter().map(|n| n.to_string()).collect();
    spec
}

fn node_result(report: &Report, node: &str) -> NodeResult {
    (report.node(node).and_then(|n| n.result.clone()))
        .unwrap_or_else(|| panic!("{node} has no result: {report:#?}"))
}

fn notes(events: &Events) -> Vec<String> {
    (events.all().into_iter())
        .filter_map(|e| match e {
            Progress::Note { message, .. } => Some(message),
            _ => None,
        })
        .collect()
}

/// Two workers `z-0` and `z-1` (no control plane), `z-1` cordoned by someone else, and one
/// `web` replica: on `z-0`, and with nowhere else to go, so a replacement lands on `z-0`
/// whenever it is schedulable.
async fn one_place(seed: u64) -> (Arc<FakeCluster>, Vec<String>) {
    let (fake, names) = cluster(seed, 0, &[("z", 2)], 0);
    fake.patch_node_now("z-1", &[NodeChange::Cordon]).unwrap();
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    fake.create_deployment_now(&deployment("default", "web", 1, &label))
        .unwrap();
    fake.sleep(Duration::from_secs(30)).await;
    assert_eq!(evictable_on(&fake, "z-0").len(), 1);
    (fake, names)
}

// --- 1. a person uncordons the node while it is drained -------------------------------------

/// Rolls `z-0`, whose uncordon by a person is armed, and checks what both uncordon tests ask:
/// done, the host Job created only on a cordoned node with no evictable Pod, the uncordon
/// said, one upgrade, no invariant broken.
async fn roll_uncordoned(fake: &Arc<FakeCluster>, names: Vec<String>) -> Report {
    let seen = check_at_host_job(fake, "z-0");
    let events = Arc::new(Events::default());
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(only(&["z-0"])), events.clone())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let (cordoned, evictable) = seen.lock().unwrap().clone().expect("a host job");
    assert!(cordoned, "the host job was created on a schedulable node");
    assert!(
        evictable.is_empty(),
        "evictable pods at the host job: {evictable:?}"
    );
    assert!(
        notes(&events).iter().any(|n| n.contains("uncordoned")),
        "{:?}",
        notes(&events)
    );
    assert_eq!(api.upgrades("z-0"), 1);
    assert!(api.violations().is_empty(), "{:?}", api.violations());
    report
}

#[tokio::test(start_paused = true)]
async fn an_uncordon_during_the_drain_is_cordoned_and_drained_again_before_the_host_job() {
    let (fake, names) = one_place(101).await;
    // The person uncordons z-0 right before the drain's first eviction: the evicted Pod's
    // replacement lands on it again.
    fake.before(Verb::EvictPod, |c| {
        c.patch_node_now("z-0", &[NodeChange::Uncordon]).unwrap();
    });
    let report = roll_uncordoned(&fake, names).await;
    // The replacement did not land on it: our NoSchedule taint, put on with the cordon, keeps
    // it off whoever uncordons the node (before the taint, it landed and a second drain
    // evicted it). It waits, Pending, for a node to fit.
    let evicted = &report.node("z-0").unwrap().pods_evicted;
    assert_eq!(evicted.len(), 1, "{evicted:?}");
}

#[tokio::test(start_paused = true)]
async fn an_uncordon_after_the_drain_is_cordoned_and_drained_again_before_the_host_job() {
    let (fake, names) = one_place(102).await;
    // The first patch of the node's status is the drain's condition; the second, right after
    // the drain, is the write before the host Job (our record, with the Upgrade's condition).
    // The person uncordons z-0 just before it: the Pending replacement lands on z-0.
    fake.before(Verb::PatchNodeConditions, |_| {});
    fake.before(Verb::PatchNodeConditions, |c| {
        c.patch_node_now("z-0", &[NodeChange::Uncordon]).unwrap();
    });
    roll_uncordoned(&fake, names).await;
    // We cordoned it again, so we uncordon it at the end.
    assert!(!records::unschedulable(&fake.node("z-0").unwrap()));
}

#[tokio::test(start_paused = true)]
async fn a_node_uncordoned_after_every_drain_fails_at_drain_without_a_host_job() {
    let (fake, names) = one_place(103).await;
    // Uncordoned right before every write that would precede the host Job (our record, with
    // the Upgrade's condition, through the node's status; the first such patch is the drain's
    // condition, said once: its re-cordons go through the node itself).
    fake.before(Verb::PatchNodeConditions, |_| {});
    for _ in 0..=upgrade_driver::DRAIN_ROUNDS {
        fake.before(Verb::PatchNodeConditions, |c| {
            c.patch_node_now("z-0", &[NodeChange::Uncordon]).unwrap();
        });
    }
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    let NodeResult::Failed(failure) = node_result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(failure.step, UpgradeStep::Drain);
    assert!(
        failure.message.contains("uncordoned"),
        "{}",
        failure.message
    );
    assert_eq!(api.upgrades("z-0"), 0, "no host upgrade started");
    assert!(
        fake.job(NS, &plan(only(&["z-0"])).job_name("z-0"))
            .is_none()
    );
}

/// The fake, with a person who uncordons `z-0` the moment the driver's launch write (the last
/// write before the host Job: our record with the boot the host Job starts on, sent with the
/// Upgrade's condition through the node's status) has landed, or,
/// `after_create`, the moment its host Job was created. Once uncordoned, every answer after
/// notes the evictable Pods on `z-0` while it carries our in-progress record.
struct UncordonAfterLaunch {
    fake: Arc<FakeCluster>,
    done: std::sync::atomic::AtomicBool,
    after_create: bool,
    landed: Mutex<std::collections::BTreeSet<String>>,
}

impl UncordonAfterLaunch {
    fn new(fake: &Arc<FakeCluster>, after_create: bool) -> Self {
        UncordonAfterLaunch {
            fake: fake.clone(),
            done: Default::default(),
            after_create,
            landed: Mutex::default(),
        }
    }

    fn launched(&self, request: &Request<'_>, answer: &ApiResult<Answer>) -> bool {
        if self.after_create {
            return request.verb() == Verb::CreateJob && answer.is_ok();
        }
        request.verb() == Verb::PatchNodeConditions
            && request.subject() == "z-0"
            && matches!(answer, Ok(Answer::Node(node)) if records::read::<InProgress>(node, IN_PROGRESS)
                .ok()
                .flatten()
                .is_some_and(|r| r.host_boot_id.is_some()))
    }
}

impl Layer for UncordonAfterLaunch {
    type Below = FakeCluster;

    fn below(&self) -> &FakeCluster {
        &self.fake
    }

    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let launched = matches!(request.verb(), Verb::PatchNodeConditions | Verb::CreateJob);
        let answer = serve.await;
        if launched
            && self.launched(&request, &answer)
            && !self.done.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            self.fake
                .patch_node_now("z-0", &[NodeChange::Uncordon])
                .unwrap();
        }
        let ours = (self.fake.node("z-0")).is_some_and(|n| {
            records::read::<InProgress>(&n, IN_PROGRESS)
                .ok()
                .flatten()
                .is_some()
        });
        if self.done.load(std::sync::atomic::Ordering::SeqCst) && ours {
            self.landed
                .lock()
                .unwrap()
                .extend(evictable_on(&self.fake, "z-0"));
        }
        answer
    }
}

/// Issue 30, item 1: a person uncordons the node right after the driver's last write before
/// the host Job, and the Pending replacement lands on it; the host Job is created only once
/// the node is read again, cordoned again and drained again.
#[tokio::test(start_paused = true)]
async fn an_uncordon_right_after_the_launch_write_is_seen_before_the_host_job() {
    let (fake, _) = one_place(104).await;
    let seen = check_at_host_job(&fake, "z-0");
    let events = Arc::new(Events::default());
    let api = UncordonAfterLaunch::new(&fake, false);
    let report = run(&api, &plan(only(&["z-0"])), events.clone())
        .await
        .unwrap();
    assert!(
        api.done.load(std::sync::atomic::Ordering::SeqCst),
        "never uncordoned"
    );
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let (cordoned, evictable) = seen.lock().unwrap().clone().expect("a host job");
    assert!(cordoned, "the host job was created on a schedulable node");
    assert!(
        evictable.is_empty(),
        "evictable pods at the host job: {evictable:?}"
    );
    assert!(
        (notes(&events).iter())
            .any(|n| n.contains("uncordoned") && n.contains("cordoning it again")),
        "{:?}",
        notes(&events)
    );
    assert_eq!(fake.count(Verb::CreateJob), 1, "one host job");
}

/// Issue 30, item 1, the fence: a person uncordons the node the moment its host Job is
/// created, too late for any read to see: our `NoSchedule` taint, put on with the cordon,
/// keeps the Pending replacement off it until the node is back and the taint removed, so no
/// workload Pod is on it while the host upgrade runs and reboots it.
#[tokio::test(start_paused = true)]
async fn an_uncordon_as_the_host_job_starts_lands_no_pod_before_the_node_is_back() {
    let (fake, _) = one_place(105).await;
    let api = UncordonAfterLaunch::new(&fake, true);
    let report = run(&api, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(
        api.done.load(std::sync::atomic::Ordering::SeqCst),
        "never uncordoned"
    );
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let landed = api.landed.lock().unwrap().clone();
    assert!(landed.is_empty(), "pods on the node while ours: {landed:?}");
    // Back, untainted: the replacement lands on it then.
    let node = fake.node("z-0").unwrap();
    assert!(!nodejob_core::tainted_no_schedule(
        &node,
        records::FENCE_TAINT
    ));
    fake.sleep(Duration::from_secs(30)).await;
    assert_eq!(
        evictable_on(&fake, "z-0").len(),
        1,
        "the replacement never landed"
    );
}

// --- 2. a node reboots by itself during the drain ----------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_node_rebooting_by_itself_during_the_drain_is_upgraded_without_a_false_failure() {
    let (fake, names) = one_place(104).await;
    fake.before(Verb::EvictPod, |c| {
        c.reboot_node("z-0").unwrap();
    });
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(node_result(&report, "z-0"), NodeResult::Upgraded);
    assert_eq!(api.upgrades("z-0"), 1);
    assert_eq!(kubelet_version(&fake.node("z-0").unwrap()), TARGET);
}

#[tokio::test(start_paused = true)]
async fn a_node_rebooting_during_the_drain_then_a_crash_before_the_host_job_is_upgraded_by_the_rerun()
 {
    let (fake, names) = one_place(105).await;
    fake.before(Verb::EvictPod, |c| {
        c.reboot_node("z-0").unwrap();
    });
    let plan = plan(only(&["z-0"]));
    let first = harness(fake.clone(), names.clone(), 1).crashing_at_verb(Verb::CreateJob, 0, false);
    tokio::select! {
        report = run(&first, &plan, upgrade_driver::quiet()) => {
            panic!("the run ended before it created its host job: {report:#?}")
        }
        _ = first.crashed() => {}
    }
    // The Lease the crashed driver held expires; a rerun takes it over.
    let second = harness(fake.clone(), names, 1);
    for rerun in 0..2 {
        let report = run(&second, &plan, upgrade_driver::quiet()).await.unwrap();
        assert_eq!(report.outcome, Outcome::Done, "rerun {rerun}: {report:#?}");
        assert_eq!(second.upgrades("z-0"), 1, "rerun {rerun}");
    }
    assert_eq!(kubelet_version(&fake.node("z-0").unwrap()), TARGET);
    let node = fake.node("z-0").unwrap();
    assert!(
        records::read::<InProgress>(&node, IN_PROGRESS)
            .unwrap()
            .is_none()
    );
}

// --- a node rebooting by itself while its host upgrade runs ------------------------------------

/// The kubelet ends the host Job's pod as lost (255, `Unknown`): no answer. The node comes back
/// at the old version, so the upgrade did not take: it fails at Upgrade, recorded as a Job
/// failed without an exit code, and the rerun runs it once more, to the target.
#[tokio::test(start_paused = true)]
async fn a_node_rebooting_by_itself_while_its_host_upgrade_runs_fails_it_and_a_rerun_upgrades_it() {
    let (fake, names) = cluster(108, 0, &[("z", 1)], 0);
    // 10 s after the host Job is created: its pod runs `stratum upgrade` (20 s).
    fake.before(Verb::CreateJob, |c| {
        c.schedule(c.now() + Duration::from_secs(10), |c| {
            c.reboot_node("z-0").unwrap();
        });
    });
    let api = harness(fake.clone(), names, 1);
    let plan = plan(only(&["z-0"]));
    let report = run(&api, &plan, upgrade_driver::quiet()).await.unwrap();
    let NodeResult::Failed(failure) = node_result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(
        (failure.step, failure.exit_code),
        (UpgradeStep::Upgrade, None)
    );
    for part in [
        "was running when its node rebooted",
        "came back at v1.37.2, not v1.38.0: the upgrade did not take",
        "a rerun retries it",
    ] {
        assert!(
            failure.message.contains(part),
            "{part:?} not in {}",
            failure.message
        );
    }
    assert_eq!(api.upgrades("z-0"), 1);
    assert_ne!(kubelet_version(&fake.node("z-0").unwrap()), TARGET);

    let report = run(&api, &plan, upgrade_driver::quiet()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(node_result(&report, "z-0"), NodeResult::Upgraded);
    assert_eq!(api.upgrades("z-0"), 2, "run once more, as a killed one is");
    assert_eq!(kubelet_version(&fake.node("z-0").unwrap()), TARGET);
    assert_eq!(api.violations(), Vec::<String>::new());
}

// --- 3. the Lease lost while a host Job runs ---------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_lease_lost_while_the_host_job_runs_reports_the_node_interrupted_at_its_step() {
    let (fake, names) = cluster(106, 0, &[("z", 3)], 0);
    // Taken by another holder right as the first host Job is created.
    fake.before(Verb::CreateJob, |c| {
        c.steal_lease(NS, "nodejob", "another-driver").unwrap();
    });
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap();
    let Outcome::Stopped { why } = &report.outcome else {
        panic!("{report:#?}")
    };
    assert!(why.contains("another-driver"), "{why}");
    let NodeResult::Interrupted { step, why } = node_result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(step, UpgradeStep::Upgrade);
    assert!(why.contains("Lease"), "{why}");
    assert_eq!(
        (report.totals.interrupted, report.totals.not_started),
        (1, 2),
        "{:?}",
        report.totals
    );
}

// --- 4. a drain that times out after evictions ---------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_drain_timing_out_after_evictions_reports_what_it_evicted_and_only_what_is_left() {
    let (fake, names) = cluster(107, 0, &[("z", 2)], 0);
    fake.patch_node_now("z-1", &[NodeChange::Cordon]).unwrap();
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    // Two `web` Pods free to go, one `db` Pod its budget never lets go.
    fake.create_deployment_now(&deployment("default", "web", 2, &label))
        .unwrap();
    fake.create_deployment_now(&deployment("default", "db", 1, &label))
        .unwrap();
    fake.create_budget_now(&budget("default", "db", "db", 1))
        .unwrap();
    fake.sleep(Duration::from_secs(30)).await;
    fake.patch_node_now("z-1", &[NodeChange::Uncordon]).unwrap();
    let on_node = evictable_on(&fake, "z-0");
    assert_eq!(on_node.len(), 3, "{on_node:?}");

    let api = harness(fake.clone(), names, 2);
    let report = run(&api, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    let NodeResult::Failed(failure) = node_result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(failure.step, UpgradeStep::Drain);
    let evicted = &report.node("z-0").unwrap().pods_evicted;
    assert_eq!(evicted.len(), 2, "{evicted:?}");
    assert!(
        evicted.iter().all(|p| p.starts_with("default/web-")),
        "{evicted:?}"
    );
    let (_, left) = failure
        .message
        .split_once("pods left: ")
        .unwrap_or_else(|| panic!("{}", failure.message));
    assert!(
        left.starts_with("default/db-") && !left.contains(','),
        "{left}"
    );
    assert_eq!(report.totals.pods_evicted, 2);
}

// --- 5. a node deleted from the cluster ------------------------------------------------------------

/// Arms the removal of `node` `after` the next call of `verb`, and answers when it happened.
fn remove_after(
    fake: &FakeCluster,
    verb: Verb,
    node: &'static str,
    after: Duration,
) -> Arc<Mutex<Option<Duration>>> {
    let at: Arc<Mutex<Option<Duration>>> = Arc::default();
    let out = at.clone();
    fake.before(verb, move |c| {
        let when = c.now() + after;
        c.schedule(when, move |c| {
            c.remove_node(node).unwrap();
            *out.lock().unwrap() = Some(c.now());
        });
    });
    at
}

#[tokio::test(start_paused = true)]
async fn a_node_deleted_while_it_reboots_ends_its_step_within_seconds() {
    let (fake, names) = cluster(108, 0, &[("z", 2)], 0);
    let mut host = fake.host("z-0").unwrap();
    host.timing.reboot_time = Duration::from_secs(240);
    fake.set_host("z-0", host).unwrap();
    // The host Job is deleted once its result is recorded; the reboot wait follows.
    let removed = remove_after(&fake, Verb::DeleteJob, "z-0", Duration::from_secs(10));
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    let NodeResult::Failed(failure) = node_result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(failure.step, UpgradeStep::Reboot);
    assert!(failure.message.contains("deleted"), "{}", failure.message);
    let removed = removed.lock().unwrap().expect("removed");
    let ended = fake.now();
    assert!(
        ended < removed + Duration::from_secs(5),
        "ended at {ended:?}, the node removed at {removed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_deleted_while_its_host_job_runs_ends_its_step_when_the_pod_gc_fails_the_pod() {
    let (fake, names) = cluster(109, 0, &[("z", 2)], 0);
    let mut host = fake.host("z-0").unwrap();
    host.timing.upgrade_time = Duration::from_secs(600);
    fake.set_host("z-0", host).unwrap();
    let removed = remove_after(&fake, Verb::CreateJob, "z-0", Duration::from_secs(10));
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    let NodeResult::Failed(failure) = node_result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert_eq!(failure.step, UpgradeStep::Upgrade, "{failure:?}");
    let removed = removed.lock().unwrap().expect("removed");
    let ended = fake.now();
    // The pod garbage collector's quarantine (40 s), then the Job controller: not the Job's
    // deadline (600 s) nor the upgrade's time.
    assert!(
        ended < removed + Duration::from_secs(60),
        "ended at {ended:?}, the node removed at {removed:?}"
    );
}

/// A node the plan names, deleted before its turn, is skipped as a selected one is; the roll
/// goes on with the others (it was refused as a whole, "node z-1 does not exist").
#[tokio::test(start_paused = true)]
async fn a_named_node_deleted_before_its_turn_is_skipped_and_the_roll_goes_on() {
    let (fake, names) = cluster(111, 0, &[("z", 3)], 0);
    let _removed = remove_after(&fake, Verb::CreateJob, "z-1", Duration::from_secs(1));
    let api = harness(fake.clone(), names, 1);
    let report = run(
        &api,
        &plan(only(&["z-0", "z-1", "z-2"])),
        upgrade_driver::quiet(),
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(node_result(&report, "z-0"), NodeResult::Upgraded);
    let NodeResult::Skipped { why } = node_result(&report, "z-1") else {
        panic!("{report:#?}")
    };
    assert_eq!(why, "deleted from the cluster");
    assert_eq!(node_result(&report, "z-2"), NodeResult::Upgraded);
}

// --- the selection changes under a node in flight -------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_node_relabelled_out_of_the_selection_while_in_flight_is_carried_on_by_the_next_run() {
    let (fake, names) = cluster(110, 0, &[("z", 2)], 0);
    let mut spec = plan_spec();
    spec.selector = Some(format!("{}={}", WORKER.0, WORKER.1));
    let plan = plan(spec);
    // The driver crashes once its first host Job is created; then a person relabels that
    // node out of the plan's selection.
    let first = harness(fake.clone(), names.clone(), 1).crashing_at_verb(Verb::CreateJob, 0, true);
    tokio::select! {
        report = run(&first, &plan, upgrade_driver::quiet()) => panic!("no crash: {report:#?}"),
        _ = first.crashed() => {}
    }
    let started: Vec<String> = names
        .iter()
        .filter(|n| {
            fake.node(n).is_some_and(|n| {
                records::read::<InProgress>(&n, IN_PROGRESS)
                    .unwrap()
                    .is_some()
            })
        })
        .cloned()
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    let moved = started[0].clone();
    fake.unlabel_node(&moved, WORKER.0).unwrap();

    let events = Arc::new(Events::default());
    let second = harness(fake.clone(), names.clone(), 1);
    let report = run(&second, &plan, events.clone()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(node_result(&report, &moved), NodeResult::Upgraded);
    assert!(notes(&events).iter().any(|n| n.contains("carried on")));
    let node = fake.node(&moved).unwrap();
    assert!(!records::unschedulable(&node), "left cordoned");
    assert!(
        records::read::<InProgress>(&node, IN_PROGRESS)
            .unwrap()
            .is_none()
    );
    assert_eq!(second.upgrades(&moved), 1);
}

// --- resumed toward another target ----------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_run_toward_another_target_never_starts_a_host_job_beside_a_running_one() {
    let (fake, names) = cluster(111, 0, &[("z", 1)], 0);
    let mut host = fake.host("z-0").unwrap();
    host.timing.upgrade_time = Duration::from_secs(120);
    fake.set_host("z-0", host).unwrap();
    // The first driver crashes once its host Job toward v1.38.0 is created.
    let first = harness(fake.clone(), names.clone(), 1).crashing_at_verb(Verb::CreateJob, 0, true);
    let toward_first = plan(only(&["z-0"]));
    tokio::select! {
        report = run(&first, &toward_first, upgrade_driver::quiet()) => {
            panic!("no crash: {report:#?}")
        }
        _ = first.crashed() => {}
    }
    // Another run, toward v1.38.1, while that one runs: the node fails, naming it.
    let mut spec = only(&["z-0"]);
    spec.target = "v1.38.1".into();
    let other = plan(spec);
    let second = harness(fake.clone(), names.clone(), 1);
    let report = run(&second, &other, upgrade_driver::quiet()).await.unwrap();
    let NodeResult::Failed(failure) = node_result(&report, "z-0") else {
        panic!("{report:#?}")
    };
    assert!(
        failure.message.contains("still running"),
        "{}",
        failure.message
    );
    assert!(
        fake.job(NS, &other.job_name("z-0")).is_none(),
        "a second host job"
    );
    assert!(second.violations().is_empty(), "{:?}", second.violations());
    // Once it ended (upgraded to v1.38.0 and rebooted), the run toward v1.38.1 goes on.
    fake.sleep(Duration::from_secs(300)).await;
    let report = run(&second, &other, upgrade_driver::quiet()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(kubelet_version(&fake.node("z-0").unwrap()), "v1.38.1");
}

/// Issue 30, item 2: a roll stopped as its node's reboot is about to come (its host upgrade
/// exited 0, its Job deleted), and another started at once toward a newer target: the second
/// waits for that reboot before anything of its own starts, so its host Job is never killed
/// by the first one's reboot, and the node ends at the newer target, upgraded once by each.
#[tokio::test(start_paused = true)]
async fn a_run_toward_a_newer_target_waits_for_the_reboot_a_stopped_run_left_coming() {
    let (fake, names) = cluster(112, 0, &[("z", 1)], 0);
    let first = harness(fake.clone(), names.clone(), 1);
    let stop = upgrade_driver::Stop::new();
    // Asked as the host upgrade starts: it runs to its end, then the node stops where its
    // reboot wait would begin; the node goes down 5 s after the host exit.
    let sink = {
        let stop = stop.clone();
        Arc::new(move |e: &Progress| {
            if matches!(
                e,
                Progress::StepStarted {
                    step: UpgradeStep::Upgrade,
                    ..
                }
            ) {
                stop.request();
            }
        })
    };
    let toward_first = plan(only(&["z-0"]));
    let report = upgrade_driver::run_until(&first, &toward_first, sink, &stop)
        .await
        .unwrap();
    let before = records::boot_id(&fake.node("z-0").unwrap()).to_string();
    assert!(
        matches!(
            node_result(&report, "z-0"),
            NodeResult::Interrupted {
                step: UpgradeStep::Reboot,
                ..
            }
        ),
        "{report:#?}"
    );
    assert_eq!(
        kubelet_version(&fake.node("z-0").unwrap()),
        FROM,
        "rebooted already"
    );
    // The second run's host Job: on which boot it is created.
    let created_on: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let created_on = created_on.clone();
        fake.before(Verb::CreateJob, move |c| {
            let boot = records::boot_id(&c.node("z-0").unwrap()).to_string();
            created_on.lock().unwrap().push(boot);
        });
    }
    let mut spec = only(&["z-0"]);
    spec.target = "v1.38.1".into();
    let newer = plan(spec);
    let events = Arc::new(Events::default());
    let second = harness(fake.clone(), names, 1);
    let report = run(&second, &newer, events.clone()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(node_result(&report, "z-0"), NodeResult::Upgraded);
    let created_on = created_on.lock().unwrap().clone();
    assert_eq!(created_on.len(), 1, "{created_on:?}");
    assert_ne!(
        created_on[0], before,
        "the newer host job was created before the pending reboot"
    );
    assert!(
        (notes(&events).iter()).any(|n| n.contains("its reboot is still to come")),
        "{:?}",
        notes(&events)
    );
    assert_eq!(kubelet_version(&fake.node("z-0").unwrap()), "v1.38.1");
    assert!(!records::unschedulable(&fake.node("z-0").unwrap()));
    assert!(second.violations().is_empty(), "{:?}", second.violations());
}
