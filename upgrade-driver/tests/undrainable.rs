//! `on_undrainable` and `max_blocked` on the fake, in paused time: a node whose drain a budget
//! allowing no disruption holds past the timeout fails the roll (the default), or is skipped
//! (uncordoned, recorded, tried once more at the end), or quarantined (left cordoned,
//! labelled, never touched again while labelled); past `max_blocked` the roll stops as a
//! failure does; a rerun knows what an earlier one blocked; the preview names the nodes a
//! budget would block now. Every write is checked against the roll's invariants.

mod support;

use std::sync::Arc;
use std::time::Duration;

use nodejob_conformance::workloads::{budget, deployment};
use nodejob_core::{Clock, NodeChange, Verb};
use nodejob_fake::FakeCluster;
use support::*;
use upgrade_driver::records::{self, BLOCKED, Blocked, IN_PROGRESS, QUARANTINED};
use upgrade_driver::{
    NodeResult, Outcome, PlanSpec, Progress, Report, Stop, Undrainable, preview, run, run_until,
};

/// One control-plane node and workers `z-0`, `z-1`, `z-2`; on each of `stuck`, one Pod of a
/// Deployment pinned there behind a budget allowing no disruption (`stuck-<node>`), settled.
async fn with_stuck(seed: u64, stuck: &[&str]) -> (Arc<FakeCluster>, Vec<String>) {
    let (fake, names) = cluster(seed, 1, &[("z", 3)], 0);
    for node in stuck {
        let name = format!("stuck-{node}");
        let pinned = ("kubernetes.io/hostname".to_string(), node.to_string());
        fake.create_deployment_now(&deployment("default", &name, 1, &pinned))
            .unwrap();
        fake.create_budget_now(&budget("default", &name, &name, 1))
            .unwrap();
    }
    fake.sleep(Duration::from_secs(30)).await;
    (fake, names)
}

fn policy(on_undrainable: Undrainable, max_blocked: u32) -> PlanSpec {
    let mut spec = plan_spec();
    spec.on_undrainable = on_undrainable;
    spec.max_blocked = max_blocked;
    spec
}

fn result(report: &Report, node: &str) -> NodeResult {
    (report.node(node).and_then(|n| n.result.clone()))
        .unwrap_or_else(|| panic!("{node} has no result: {report:#?}"))
}

fn blocked_record(fake: &FakeCluster, node: &str) -> Blocked {
    let node = fake.node(node).unwrap();
    records::read::<Blocked>(&node, BLOCKED)
        .unwrap()
        .unwrap_or_else(|| panic!("no blocked record: {:?}", node.metadata.annotations))
}

fn finished(events: &Events, node: &str) -> Vec<NodeResult> {
    (events.all().into_iter())
        .filter_map(|e| match e {
            Progress::NodeFinished {
                node: n, result, ..
            } if n == node => Some(result),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn by_default_a_node_a_budget_never_releases_fails_the_roll_at_its_drain_timeout() {
    let (fake, names) = with_stuck(31, &["z-1"]).await;
    let api = harness(fake.clone(), names, 1);
    let report = run(&api, &plan(plan_spec()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{report:#?}"
    );
    assert!(matches!(result(&report, "z-1"), NodeResult::Failed(_)));
    assert_eq!(report.node("z-2").unwrap().result, None, "nothing after it");
    assert!(cordoned_by_us(&fake.node("z-1").unwrap()));
    assert!(!records::quarantined(&fake.node("z-1").unwrap()));
}

#[tokio::test(start_paused = true)]
async fn skip_uncordons_the_blocked_node_records_why_finishes_the_others_and_tries_it_once_more() {
    let (fake, names) = with_stuck(32, &["z-1"]).await;
    let api = harness(fake.clone(), names, 1);
    let events = Arc::new(Events::default());
    let spec = policy(Undrainable::Skip, 1);
    let report = run(&api, &plan(spec), events.clone()).await.unwrap();
    for node in ["cp-0", "z-0", "z-2"] {
        assert_eq!(result(&report, node), NodeResult::Upgraded, "{node}");
    }
    let NodeResult::Blocked {
        policy,
        budgets,
        pods,
        why,
    } = result(&report, "z-1")
    else {
        panic!("{report:#?}")
    };
    assert_eq!(policy, Undrainable::Skip);
    assert_eq!(budgets, ["default/stuck-z-1"]);
    assert!(
        pods.len() == 1 && pods[0].starts_with("default/stuck-z-1-"),
        "{pods:?}"
    );
    assert!(why.contains("uncordoned"), "{why}");
    // Tried twice: in its turn, and once more after the others.
    assert_eq!(finished(&events, "z-1").len(), 2, "{:#?}", events.all());
    let Outcome::Stopped { why } = &report.outcome else {
        panic!("{report:#?}")
    };
    assert!(why.contains("z-1 (skipped)"), "{why}");
    assert_eq!(report.totals.blocked, 1);
    // On the node: uncordoned, not ours, the record naming the budget and the Pod.
    let node = fake.node("z-1").unwrap();
    assert!(!records::unschedulable(&node));
    assert!(!records::in_flight(&node));
    let record = blocked_record(&fake, "z-1");
    assert_eq!(
        (record.policy, record.target.as_str(), record.cordoned),
        (Undrainable::Skip, TARGET, true)
    );
    assert_eq!(record.budgets, ["default/stuck-z-1"]);
    assert_eq!(api.upgrades("z-1"), 0, "no host step on a blocked node");
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn quarantine_leaves_the_node_cordoned_and_labelled_and_no_rerun_touches_it_until_the_label_goes()
 {
    let (fake, names) = with_stuck(33, &["z-1"]).await;
    let api = harness(fake.clone(), names.clone(), 1);
    let spec = policy(Undrainable::Quarantine, 1);
    let report = run(&api, &plan(spec.clone()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(
        matches!(
            result(&report, "z-1"),
            NodeResult::Blocked {
                policy: Undrainable::Quarantine,
                ..
            }
        ),
        "{report:#?}"
    );
    for node in ["cp-0", "z-0", "z-2"] {
        assert_eq!(result(&report, node), NodeResult::Upgraded, "{node}");
    }
    let node = fake.node("z-1").unwrap();
    assert!(records::unschedulable(&node) && records::quarantined(&node));
    assert!(!records::in_flight(&node));
    assert!(blocked_record(&fake, "z-1").cordoned);

    // A rerun (the budget still there) leaves it as it is: not one write to it.
    let patches_before = patches_of(&fake, "z-1");
    let again = harness(fake.clone(), names.clone(), 1);
    let report = run(&again, &plan(spec.clone()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(
        matches!(
            result(&report, "z-1"),
            NodeResult::Blocked {
                policy: Undrainable::Quarantine,
                ..
            }
        ),
        "{report:#?}"
    );
    assert_eq!(patches_of(&fake, "z-1"), patches_before);
    assert!(records::unschedulable(&fake.node("z-1").unwrap()));

    // The operator removes the label and the budget: the next run rolls it and uncordons it
    // (we had cordoned it).
    fake.delete_budget_now("default", "stuck-z-1").unwrap();
    fake.patch_node_now("z-1", &[NodeChange::remove_label(QUARANTINED)])
        .unwrap();
    let last = harness(fake.clone(), names, 1);
    let report = run(&last, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let node = fake.node("z-1").unwrap();
    assert_eq!(kubelet_version(&node), TARGET);
    assert!(!records::unschedulable(&node), "uncordoned once rolled");
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key(BLOCKED) && !annotations.contains_key(IN_PROGRESS),
        "{annotations:?}"
    );
    for h in [&api, &again, &last] {
        assert_eq!(h.violations(), Vec::<String>::new());
    }
}

fn patches_of(fake: &FakeCluster, node: &str) -> usize {
    (fake.calls().into_iter())
        .filter(|c| c.verb == Verb::PatchNode && c.name == node)
        .count()
}

#[tokio::test(start_paused = true)]
async fn past_max_blocked_the_roll_stops_as_a_failure_does_naming_the_blocked_nodes() {
    let (fake, names) = with_stuck(34, &["z-0", "z-1"]).await;
    let api = harness(fake.clone(), names, 1);
    let report = run(
        &api,
        &plan(policy(Undrainable::Skip, 1)),
        upgrade_driver::quiet(),
    )
    .await
    .unwrap();
    let Outcome::Failed { nodes, .. } = &report.outcome else {
        panic!("{report:#?}")
    };
    assert_eq!(nodes, &["z-0", "z-1"]);
    assert_eq!(report.node("z-2").unwrap().result, None, "no node after it");
    for node in ["z-0", "z-1"] {
        assert!(matches!(result(&report, node), NodeResult::Blocked { .. }));
        assert!(!records::unschedulable(&fake.node(node).unwrap()));
    }
    // max_blocked 0: the first blocked node stops it.
    let (fake, names) = with_stuck(35, &["z-0"]).await;
    let api = harness(fake.clone(), names, 1);
    let report = run(
        &api,
        &plan(policy(Undrainable::Quarantine, 0)),
        upgrade_driver::quiet(),
    )
    .await
    .unwrap();
    let Outcome::Failed { nodes, .. } = &report.outcome else {
        panic!("{report:#?}")
    };
    assert_eq!(nodes, &["z-0"]);
    assert_eq!(report.node("z-1").unwrap().result, None);
}

#[tokio::test(start_paused = true)]
async fn a_rerun_after_a_roll_stopped_past_max_blocked_goes_on_once_the_budgets_allow_it() {
    let (fake, names) = with_stuck(38, &["z-0", "z-1"]).await;
    let spec = policy(Undrainable::Skip, 1);
    let first = harness(fake.clone(), names.clone(), 1);
    let report = run(&first, &plan(spec.clone()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{report:#?}"
    );
    // The budgets still there: the rerun tries the skipped nodes again (they do not count
    // until blocked again), rolls z-2, and stops past max_blocked again at the end.
    let second = harness(fake.clone(), names.clone(), 1);
    let report = run(&second, &plan(spec.clone()), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(result(&report, "z-2"), NodeResult::Upgraded, "{report:#?}");
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{report:#?}"
    );
    // Once they allow it, the next rerun finishes.
    for node in ["z-0", "z-1"] {
        fake.delete_budget_now("default", &format!("stuck-{node}"))
            .unwrap();
    }
    let third = harness(fake.clone(), names, 1);
    let report = run(&third, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for h in [&first, &second, &third] {
        assert_eq!(h.violations(), Vec::<String>::new());
    }
}

#[tokio::test(start_paused = true)]
async fn a_rerun_knows_the_nodes_an_earlier_run_skipped_and_comes_back_to_them_last() {
    let (fake, names) = with_stuck(36, &["z-0"]).await;
    let spec = policy(Undrainable::Skip, 1);
    // The first run is stopped right after z-0 was skipped (as by a crash then).
    let stop = Stop::new();
    let at_skip = stop.clone();
    let sink = Arc::new(move |e: &Progress| {
        if let Progress::NodeFinished {
            result: NodeResult::Blocked { .. },
            ..
        } = e
        {
            at_skip.request();
        }
    });
    let first = harness(fake.clone(), names.clone(), 1);
    let report = run_until(&first, &plan(spec.clone()), sink, &stop)
        .await
        .unwrap();
    assert!(
        matches!(report.outcome, Outcome::Stopped { .. }),
        "{report:#?}"
    );
    assert_eq!(blocked_record(&fake, "z-0").policy, Undrainable::Skip);
    // The budget is gone now: the rerun rolls z-1 and z-2 first, then z-0, last.
    fake.delete_budget_now("default", "stuck-z-0").unwrap();
    let events = Arc::new(Events::default());
    let second = harness(fake.clone(), names, 1);
    let report = run(&second, &plan(spec), events.clone()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let batches: Vec<(String, Vec<String>)> = (events.all().into_iter())
        .filter_map(|e| match e {
            Progress::BatchStarted { group, nodes, .. } => Some((group, nodes)),
            _ => None,
        })
        .collect();
    assert_eq!(
        batches.last(),
        Some(&("skipped, once more".to_string(), vec!["z-0".to_string()])),
        "{batches:?}"
    );
    let node = fake.node("z-0").unwrap();
    assert_eq!(kubelet_version(&node), TARGET);
    assert!(!records::unschedulable(&node));
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key(BLOCKED), "{annotations:?}");
    assert_eq!(first.violations(), Vec::<String>::new());
    assert_eq!(second.violations(), Vec::<String>::new());
}

#[tokio::test(start_paused = true)]
async fn the_preview_names_the_nodes_a_budget_would_block_and_what_the_plan_would_do() {
    let (fake, _) = with_stuck(37, &["z-1"]).await;
    let shown = preview(&*fake, &plan(policy(Undrainable::Skip, 1)))
        .await
        .unwrap();
    assert_eq!(shown.on_undrainable, Undrainable::Skip);
    assert_eq!(shown.would_block.len(), 1, "{shown:#?}");
    let block = &shown.would_block[0];
    assert_eq!(block.node, "z-1");
    assert_eq!(block.budgets, ["default/stuck-z-1"]);
    assert!(block.then.contains("skipped"), "{}", block.then);
    let fail = preview(&*fake, &plan(plan_spec())).await.unwrap();
    assert!(fail.would_block[0].then.contains("fails"), "{fail:#?}");
    assert_eq!(fake.count(Verb::PatchNode), 0, "a preview writes nothing");
}

/// One stop asked while a budget allowing no disruption holds a node's drain ends the drain at
/// its next retry, not at its timeout (a drain protects no host operation); the node, cordoned
/// and ours, is left to a rerun, which drains it again and rolls it once the budget allows.
#[tokio::test(start_paused = true)]
async fn a_stop_asked_while_a_budget_holds_the_drain_ends_it_at_once_for_a_rerun() {
    let (fake, names) = with_stuck(37, &["z-0"]).await;
    let mut spec = plan_spec();
    spec.drain.timeout = Duration::from_secs(3600);
    let stop = Stop::new();
    let asker = stop.clone();
    let sink = Arc::new(move |e: &Progress| {
        if let Progress::StepStarted { node, step } = e
            && node == "z-0"
            && *step == upgrade_driver::UpgradeStep::Drain
        {
            asker.request();
        }
    });
    let first = harness(fake.clone(), names.clone(), 1);
    let began = fake.now();
    let report = run_until(&first, &plan(spec.clone()), sink, &stop)
        .await
        .unwrap();
    let took = fake.now().saturating_sub(began);
    assert!(
        matches!(report.outcome, Outcome::Stopped { .. }),
        "{report:#?}"
    );
    let z0 = report.nodes.iter().find(|n| n.name == "z-0").unwrap();
    assert!(
        matches!(&z0.result, Some(NodeResult::Interrupted { step, why })
            if *step == upgrade_driver::UpgradeStep::Drain && why.contains("during its drain")),
        "{z0:#?}"
    );
    assert!(
        took < Duration::from_secs(600),
        "the stop waited {took:?}, the drain's timeout is an hour"
    );
    let node = fake.node("z-0").unwrap();
    assert!(
        records::unschedulable(&node)
            && records::read::<records::InProgress>(&node, IN_PROGRESS)
                .unwrap()
                .is_some(),
        "left cordoned and ours for a rerun: {:?}",
        node.metadata.annotations
    );
    // The budget gone, a rerun drains it again and rolls it.
    fake.delete_budget_now("default", "stuck-z-0").unwrap();
    let second = harness(fake.clone(), names, 1);
    let report = run(&second, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for h in [&first, &second] {
        assert_eq!(h.violations(), Vec::<String>::new());
    }
}
