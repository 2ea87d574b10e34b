//! The upgrade's `NodejobUpgrade` condition on each node (issue 22, item 6) on the fake, in
//! paused virtual time: `True` with each step as its reason as the step starts (the cordon
//! said with the drain, the uncordon with the end: issue 34), `False`, `Upgraded` at the end, the transition time moving only with the status; `True`, `Failed`
//! on a node that failed; never a Conflict of our own making on the guarded writes it sits
//! between; the kubelet's conditions kept; a node an earlier run left held is let go once a
//! later run finds it at the target.

mod support;

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodejob_core::{Answer, ApiResult, Clock, ErrorKind, Layer, NodeApi, Request, Verb};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Fault;
use nodejob_roll::condition::{UPGRADE, condition};
use support::*;
use upgrade_driver::{NodeResult, Outcome, PlanSpec, UpgradeStep, run};

/// One condition written: node, status, reason, transition time.
type Written = (String, String, String, Option<Time>);

/// The fake, each condition written noted.
struct Noting {
    fake: Arc<FakeCluster>,
    written: Mutex<Vec<Written>>,
}

impl Layer for Noting {
    type Below = FakeCluster;

    fn below(&self) -> &FakeCluster {
        &self.fake
    }

    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        if let Request::PatchNodeConditions {
            name, conditions, ..
        } = request
        {
            let mut written = self.written.lock().unwrap();
            for c in conditions {
                written.push((
                    name.to_string(),
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                    c.last_transition_time.clone(),
                ));
            }
        }
        serve.await
    }
}

fn noting(fake: &Arc<FakeCluster>) -> Noting {
    Noting {
        fake: fake.clone(),
        written: Mutex::new(Vec::new()),
    }
}

fn ours(node: &Node) -> NodeCondition {
    condition(node, UPGRADE)
        .cloned()
        .unwrap_or_else(|| panic!("no {UPGRADE} condition on {node:?}"))
}

fn types(node: &Node) -> Vec<String> {
    (node.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .into_iter()
        .flatten()
        .map(|c| c.type_.clone())
        .collect()
}

fn only(nodes: &[&str]) -> PlanSpec {
    let mut spec = plan_spec();
    spec.nodes = nodes.iter().map(|n| n.to_string()).collect();
    spec
}

#[tokio::test(start_paused = true)]
async fn each_step_is_said_as_it_starts_and_the_end_lets_the_node_go() {
    let (fake, _) = cluster(1, 0, &[("z", 2)], 2);
    fake.sleep(std::time::Duration::from_secs(30)).await;
    let mut spec = only(&["z-0"]);
    spec.health_check = Some(vec![spec.binary.clone(), "health".into()]);
    let api = noting(&fake);
    let report = run(&api, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let written = api.written.lock().unwrap().clone();
    let said: Vec<(&str, &str)> = (written.iter())
        .map(|(_, s, r, _)| (s.as_str(), r.as_str()))
        .collect();
    assert_eq!(
        said,
        [
            // Said as the cordon begins: `kubectl drain` cordons first.
            ("True", "Drain"),
            ("True", "Upgrade"),
            ("True", "Reboot"),
            ("True", "Health"),
            // The uncordon is one write: how the node ended is said right after it.
            ("False", "Upgraded"),
        ]
    );
    assert!(written.iter().all(|(n, ..)| n == "z-0"));
    // The transition time: the first write's while True, moved once, to the end.
    let since = &written[0].3;
    assert!(written[..4].iter().all(|w| &w.3 == since), "{written:?}");
    assert_ne!(&written[4].3, since);
    let node = fake.node("z-0").unwrap();
    let end = ours(&node);
    assert_eq!(
        (end.status.as_str(), end.reason.as_deref()),
        ("False", Some("Upgraded"))
    );
    assert_eq!(end.message.as_deref(), Some("upgraded to v1.38.0"));
    assert_eq!(end.last_transition_time, written[4].3);
    // The kubelet's condition kept; ours, new to the list, leads it (a strategic merge's
    // order).
    assert_eq!(types(&node), [UPGRADE, "Ready"]);
    // z-1, not in the plan, carries none.
    assert!(condition(&fake.node("z-1").unwrap(), UPGRADE).is_none());
}

#[tokio::test(start_paused = true)]
async fn the_condition_never_makes_a_guarded_write_meet_a_conflict() {
    // The Launch write and the done record are guarded by the resourceVersion of the node as
    // the machine last saw it; each condition write in between moves it, under that version.
    let (fake, names) = cluster(2, 1, &[("z", 2)], 2);
    fake.sleep(std::time::Duration::from_secs(30)).await;
    let mut spec = plan_spec();
    spec.health_check = Some(vec![spec.binary.clone(), "health".into()]);
    let events = Arc::new(Events::default());
    let api = harness(fake.clone(), names.clone(), 1);
    let report = run(&api, &plan(spec), events.clone()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let conflicts: Vec<String> = (fake.calls().into_iter())
        .filter(|c| c.error == Some(ErrorKind::Conflict))
        .map(|c| format!("{} {}", c.verb, c.name))
        .collect();
    assert_eq!(conflicts, Vec::<String>::new());
    let redrains = (events.all().into_iter())
        .filter(|e| matches!(e, upgrade_driver::Progress::Note { message, .. } if message.contains("draining it again")))
        .count();
    assert_eq!(redrains, 0);
    for name in &names {
        let end = ours(&fake.node(name).unwrap());
        assert_eq!(end.reason.as_deref(), Some("Upgraded"), "{name}");
    }
    assert_eq!(
        fake.count(Verb::PatchNodeConditions),
        names.len() * 5,
        "the drain (its cordon with it), the upgrade, the reboot, the health check and the \
         end (its uncordon with it), a write each, per node"
    );
    assert!(api.violations().is_empty(), "{:?}", api.violations());
}

#[tokio::test(start_paused = true)]
async fn a_failed_node_stays_held_its_failure_said() {
    let (fake, _) = cluster(3, 0, &[("z", 1)], 0);
    let host = fake.host("z-0").unwrap().with_fault(Fault::UpgradeFails);
    fake.set_host("z-0", host).unwrap();
    let api = noting(&fake);
    let report = run(&api, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(
        matches!(report.node("z-0").unwrap().result, Some(NodeResult::Failed(ref f)) if f.step == UpgradeStep::Upgrade),
        "{report:#?}"
    );
    let end = ours(&fake.node("z-0").unwrap());
    assert_eq!(
        (end.status.as_str(), end.reason.as_deref()),
        ("True", Some("Failed"))
    );
    let message = end.message.unwrap_or_default();
    assert!(
        message.starts_with("the upgrade to v1.38.0 failed at Upgrade (exit code 1)")
            && message.ends_with("a rerun retries it"),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_an_earlier_run_left_held_is_let_go_once_found_at_the_target() {
    let (fake, _) = cluster(4, 0, &[("z", 1)], 0);
    // An earlier run saw it through but ended (crashed) before saying so; it is at the target.
    fake.set_kubelet_version("z-0", TARGET).unwrap();
    let held = NodeCondition {
        type_: UPGRADE.into(),
        status: "True".into(),
        reason: Some("Uncordon".into()),
        message: Some("upgrading to v1.38.0: uncordoning".into()),
        last_heartbeat_time: None,
        last_transition_time: None,
    };
    NodeApi::patch_node_conditions(&*fake, "z-0", None, &[], &[held])
        .await
        .unwrap();
    let report = run(&*fake, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(matches!(
        report.node("z-0").unwrap().result,
        Some(NodeResult::Skipped { .. })
    ));
    let end = ours(&fake.node("z-0").unwrap());
    assert_eq!(
        (end.status.as_str(), end.reason.as_deref()),
        ("False", Some("Upgraded"))
    );
    // A node skipped that no run held is left without one.
    let (fresh, _) = cluster(5, 0, &[("z", 1)], 0);
    fresh.set_kubelet_version("z-0", TARGET).unwrap();
    run(&*fresh, &plan(only(&["z-0"])), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(condition(&fresh.node("z-0").unwrap(), UPGRADE).is_none());
}
