//! The version-skew gate (issue 22, item 5) on the fake, in paused virtual time: a kubelet
//! upgrade that breaks the Kubernetes version skew policy is refused before any write (each
//! rule, naming the nodes and the versions), a plan that takes the control plane first keeps a
//! valid order valid (its workers wait for the apiserver, judged again before each batch), a
//! control plane that does not carry the apiserver stops the roll before the workers, and
//! `Skew::Allow` goes past it, saying so in the progress, the report and the preview.

mod support;

use std::sync::{Arc, Mutex};

use nodejob_fake::{FakeCluster, ServerVersion};
use support::*;
use upgrade_driver::skew::POLICY;
use upgrade_driver::{Error, EventSink, Outcome, PlanSpec, Progress, Skew, preview, records, run};

fn fixed(fake: &FakeCluster, version: &str) {
    fake.set_server_version(ServerVersion::Fixed(version.into()));
}

fn workers_only(target: &str) -> PlanSpec {
    let mut spec = plan_spec();
    spec.target = target.into();
    spec.selector = Some(format!("{}={}", WORKER.0, WORKER.1));
    spec
}

/// The writes the fake served, by verb and name.
fn writes(fake: &FakeCluster) -> Vec<String> {
    (fake.calls().into_iter())
        .filter(|c| c.verb.writes())
        .map(|c| format!("{} {}", c.verb, c.name))
        .collect()
}

/// The rule a plan was refused with on `skew`.
fn refused(result: Result<upgrade_driver::Report, Error>) -> String {
    match result {
        Err(Error::Plan(p)) if p.field == "skew" => p.rule,
        other => panic!("not refused on skew: {other:#?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_worker_roll_past_the_apiserver_is_refused_before_any_write() {
    // The control plane (and so the apiserver, which follows it on the fake) runs v1.37.2.
    let (fake, names) = cluster(1, 1, &[("z", 2)], 0);
    assert_eq!(fake.server_version(), FROM);
    let api = harness(fake.clone(), names, 1);
    let rule = refused(run(&api, &plan(workers_only(TARGET)), upgrade_driver::quiet()).await);
    for part in [
        POLICY,
        "z-0, z-1: v1.38.0 would be newer than the apiserver (v1.37.2)",
        "refused without `skew`",
    ] {
        assert!(rule.contains(part), "{part:?} not in {rule}");
    }
    assert_eq!(writes(&fake), Vec::<String>::new());
    // The preview refuses it the same way.
    let previewed = preview(&*fake, &plan(workers_only(TARGET))).await;
    assert!(
        matches!(&previewed, Err(Error::Plan(p)) if p.field == "skew" && p.rule == rule),
        "{previewed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_skipped_minor_is_refused_naming_each_node_and_its_version() {
    let (fake, names) = cluster(2, 0, &[("z", 2)], 0);
    fake.set_kubelet_version("z-1", "v1.38.4").unwrap();
    fixed(&fake, "v1.39.1");
    let api = harness(fake.clone(), names, 1);
    let rule = refused(
        run(
            &api,
            &plan(workers_only("v1.39.0")),
            upgrade_driver::quiet(),
        )
        .await,
    );
    assert!(
        rule.contains("z-0: v1.39.0 would skip a minor version from v1.37.2"),
        "{rule}"
    );
    // One minor up from where it is: z-1 is not named.
    assert!(!rule.contains("z-1"), "{rule}");
    assert_eq!(writes(&fake), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_target_more_than_three_minors_older_than_the_apiserver_is_refused() {
    let (fake, names) = cluster(3, 0, &[("z", 1)], 0);
    fixed(&fake, "v1.42.0");
    let api = harness(fake.clone(), names, 1);
    let rule = refused(run(&api, &plan(workers_only(TARGET)), upgrade_driver::quiet()).await);
    assert!(
        rule.contains(
            "z-0: v1.38.0 would be more than 3 minor versions older than the apiserver (v1.42.0)"
        ),
        "{rule}"
    );
    assert_eq!(writes(&fake), Vec::<String>::new());
    // Three older is within the policy.
    fixed(&fake, "v1.41.0");
    let report = run(&api, &plan(workers_only(TARGET)), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
}

/// Records, at each batch's start, the apiserver's version then.
struct AtBatch {
    fake: Arc<FakeCluster>,
    seen: Mutex<Vec<(Vec<String>, String)>>,
    notes: Mutex<Vec<String>>,
}

impl EventSink<Progress> for AtBatch {
    fn event(&self, event: &Progress) {
        match event {
            Progress::BatchStarted { nodes, .. } => {
                let server = self.fake.server_version();
                self.seen.lock().unwrap().push((nodes.clone(), server));
            }
            Progress::Note { message, .. } => self.notes.lock().unwrap().push(message.clone()),
            _ => {}
        }
    }
}

fn at_batch(fake: &Arc<FakeCluster>) -> Arc<AtBatch> {
    Arc::new(AtBatch {
        fake: fake.clone(),
        seen: Mutex::new(Vec::new()),
        notes: Mutex::new(Vec::new()),
    })
}

#[tokio::test(start_paused = true)]
async fn control_plane_nodes_first_keep_a_valid_order_valid() {
    // Every node at v1.37.2, the apiserver on the control plane: the workers' target is newer
    // than the apiserver now, but the control-plane nodes go first and carry it.
    let (fake, names) = cluster(4, 2, &[("z", 2)], 0);
    let api = harness(fake.clone(), names, 1);
    let spec = plan_spec();
    let previewed = preview(&*fake, &plan(spec.clone())).await.unwrap();
    assert!(
        previewed.skew.iter().any(|s| s.contains(
            "the apiserver is at v1.37.2: no worker moves to v1.38.0 before it is at that minor"
        )),
        "{:#?}",
        previewed.skew
    );
    let events = at_batch(&fake);
    let report = run(&api, &plan(spec), events.clone()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let seen = events.seen.lock().unwrap().clone();
    let workers: Vec<&(Vec<String>, String)> = seen
        .iter()
        .filter(|(b, _)| b[0].starts_with("z-"))
        .collect();
    assert!(!workers.is_empty(), "{seen:?}");
    for (batch, server) in &workers {
        assert_eq!(
            server, TARGET,
            "worker batch {batch:?} began with the apiserver at {server}"
        );
    }
    assert!(
        (events.notes.lock().unwrap().iter()).any(|n| n.contains("no worker moves to v1.38.0")),
        "the wait is said"
    );
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn a_control_plane_that_does_not_carry_the_apiserver_stops_the_roll_before_the_workers() {
    // The control-plane nodes' host upgrade moves their kubelets, not the apiserver.
    let (fake, names) = cluster(5, 1, &[("z", 2)], 0);
    fixed(&fake, FROM);
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap();
    let Outcome::Stopped { why } = &report.outcome else {
        panic!("not stopped: {report:#?}");
    };
    assert!(
        why.contains(POLICY)
            && why.contains("z-0: v1.38.0 would be newer than the apiserver (v1.37.2)"),
        "{why}"
    );
    assert_eq!(kubelet_version(&fake.node("cp-0").unwrap()), TARGET);
    for worker in ["z-0", "z-1"] {
        let node = fake.node(worker).unwrap();
        assert!(
            !records::in_flight(&node) && !records::unschedulable(&node),
            "{worker} was started"
        );
        assert_eq!(report.node(worker).unwrap().result, None);
    }
}

#[tokio::test(start_paused = true)]
async fn allowing_skew_goes_past_the_policy_and_says_so_in_the_preview_progress_and_report() {
    let (fake, names) = cluster(6, 1, &[("z", 2)], 0);
    let api = harness(fake.clone(), names, 1);
    let mut spec = workers_only(TARGET);
    spec.skew = Skew::Allow;
    let previewed = preview(&*fake, &plan(spec.clone())).await.unwrap();
    assert_eq!(
        previewed.skew,
        [
            "allowed past the version skew policy: z-0: v1.38.0 would be newer than the \
             apiserver (v1.37.2): a kubelet must not be newer than kube-apiserver",
            "allowed past the version skew policy: z-1: v1.38.0 would be newer than the \
             apiserver (v1.37.2): a kubelet must not be newer than kube-apiserver",
        ]
    );
    let events = at_batch(&fake);
    let report = run(&api, &plan(spec), events.clone()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for worker in ["z-0", "z-1"] {
        let line = report.node(worker).unwrap();
        assert_eq!(
            line.skew,
            [
                "v1.38.0 would be newer than the apiserver (v1.37.2): a kubelet must not be newer \
              than kube-apiserver"
            ],
            "said once, though judged before any write and before its batch"
        );
    }
    let notes = events.notes.lock().unwrap().clone();
    let said = notes
        .iter()
        .filter(|n| n.starts_with("past the version skew policy, as the plan allows"))
        .count();
    assert_eq!(said, 2, "{notes:#?}");
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["nodes"][0].get("skew").is_some(), "{json}");
}

#[tokio::test(start_paused = true)]
async fn an_os_image_upgrade_is_not_judged_by_the_kubelet_policy() {
    let (fake, names) = cluster(7, 1, &[("z", 1)], 0);
    fixed(&fake, "v1.30.0");
    let api = harness(fake.clone(), names, 1);
    let mut spec = workers_only("24.04.4");
    spec.version_source = upgrade_driver::VersionSource::OsImage;
    // Judged or not, it gets past the gate: any refusal is not the policy's.
    let result = run(&api, &plan(spec), upgrade_driver::quiet()).await;
    assert!(
        !matches!(&result, Err(Error::Plan(p)) if p.field == "skew"),
        "{result:?}"
    );
    assert_eq!(fake.count(nodejob_core::Verb::Version), 0);
}

/// Issue 34: the apiserver's version is read once for the run, and again before a batch only
/// when the control-plane nodes' versions moved since (on the fake, as on a kubeadm cluster,
/// the apiserver follows its control plane) and the plan enforces the policy, not before every
/// batch.
#[tokio::test(start_paused = true)]
async fn the_apiservers_version_is_read_again_only_once_the_control_plane_moved() {
    let versions = |fake: &FakeCluster| {
        (fake.calls().into_iter())
            .filter(|c| c.verb == nodejob_fake::Verb::Version)
            .count()
    };
    // Two control-plane nodes, then two workers, one node a batch.
    let (fake, names) = cluster(4, 2, &[("z", 2)], 0);
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    // Before any write; before cp-1 (cp-0 moved); before z-0 (cp-1 moved). Not before cp-0
    // (as read) nor z-1 (nothing moved since z-0's).
    assert_eq!(versions(&fake), 3);

    // Workers alone, the apiserver at the target all along: one read for four batches.
    let (fake, names) = cluster(4, 0, &[("z", 4)], 0);
    fixed(&fake, TARGET);
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(workers_only(TARGET)), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(report.totals.upgraded, 4);
    assert_eq!(versions(&fake), 1);

    // The first cluster again, under a plan that allows skew: every batch goes whatever the
    // answer, so the version read before any write is the run's only one (its breaches are
    // said against it).
    let (fake, names) = cluster(4, 2, &[("z", 2)], 0);
    let api = harness(fake.clone(), names, 1);
    let mut spec = plan_spec();
    spec.skew = upgrade_driver::Skew::Allow;
    let report = run(&api, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(versions(&fake), 1);
}
