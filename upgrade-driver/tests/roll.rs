//! Whole rolls on the fake cluster, in paused virtual time, with the invariants checked after
//! every API write.

mod support;

use std::sync::Arc;

use nodejob_fake::stratum::Fault;
use support::*;
use upgrade_driver::{MaxUnavailable, NodeResult, Outcome, Progress, UpgradeStep, run};

#[tokio::test(start_paused = true)]
async fn three_control_plane_and_six_workers_in_two_zones_roll_in_order_within_the_invariants() {
    let (fake, names) = cluster(1, 3, &[("zone-a", 3), ("zone-b", 3)], 4);
    let mut spec = plan_spec();
    spec.max_unavailable = MaxUnavailable::Count(2);
    let plan = plan(spec);
    let api = harness(fake.clone(), names.clone(), 2);
    let events = Arc::new(Events::default());
    let report = run(&api, &plan, events.clone()).await.unwrap();

    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(api.violations(), Vec::<String>::new());
    assert_eq!(report.totals.upgraded, 9);
    for name in &names {
        let node = fake.node(name).unwrap();
        assert_eq!(kubelet_version(&node), TARGET, "{name}");
        assert!(
            !upgrade_driver::records::unschedulable(&node),
            "{name} left cordoned"
        );
        assert_eq!(api.upgrades(name), 1, "{name} upgraded once");
        let annotations = node.metadata.annotations.unwrap_or_default();
        assert!(
            annotations.contains_key(upgrade_driver::records::DONE),
            "{name}"
        );
        assert!(
            !annotations.contains_key(upgrade_driver::records::IN_PROGRESS),
            "{name}"
        );
    }
    // The order: control plane one at a time, then zone a, then zone b, two at a time.
    let batches: Vec<(String, Vec<String>)> = events
        .all()
        .into_iter()
        .filter_map(|e| match e {
            Progress::BatchStarted { group, nodes, .. } => Some((group, nodes)),
            _ => None,
        })
        .collect();
    let expect = |g: &str, ns: &[&str]| (g.to_string(), ns.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        batches,
        vec![
            expect("control-plane", &["cp-0"]),
            expect("control-plane", &["cp-1"]),
            expect("control-plane", &["cp-2"]),
            expect("zone zone-a", &["zone-a-0", "zone-a-1"]),
            expect("zone zone-a", &["zone-a-2"]),
            expect("zone zone-b", &["zone-b-0", "zone-b-1"]),
            expect("zone zone-b", &["zone-b-2"]),
        ]
    );
    // The workers' pods were evicted, and the Deployment is whole again.
    assert!(report.totals.pods_evicted >= 4, "{:?}", report.totals);
    // Every step is said in an Event on its node: the cordon with the drain, the new boot
    // with the uncordon, three Events in all.
    let said: Vec<(String, String)> = fake
        .events(NS)
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("zone-a-0"))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect();
    let mut reasons: Vec<String> = said.iter().map(|(r, _)| r.clone()).collect();
    reasons.sort();
    let mut expected: Vec<String> = [
        UpgradeStep::Drain,
        UpgradeStep::Upgrade,
        UpgradeStep::Uncordon,
    ]
    .iter()
    .map(|s| s.reason())
    .collect();
    expected.sort();
    assert_eq!(reasons, expected, "{said:?}");
    let message = |step: UpgradeStep| {
        (said.iter())
            .find(|(r, _)| *r == step.reason())
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    };
    assert!(
        message(UpgradeStep::Drain).starts_with("cordoned; evicted "),
        "{said:?}"
    );
    assert!(
        message(UpgradeStep::Uncordon).starts_with("rebooted, Ready at "),
        "{said:?}"
    );
    // The Lease was acquired and released.
    assert_eq!(
        report.lease.as_ref().map(|l| l.acquired.as_str()),
        Some("free")
    );
    assert_eq!(
        report.lease.as_ref().map(|l| &l.ended),
        Some(&upgrade_driver::LeaseEnd::Released)
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_host_upgrade_stops_the_roll_and_a_rerun_after_the_fix_finishes_it() {
    let (fake, names) = cluster(2, 1, &[("zone-a", 3)], 0);
    let host = fake
        .host("zone-a-1")
        .unwrap()
        .with_fault(Fault::UpgradeFails);
    fake.set_host("zone-a-1", host).unwrap();
    let plan = plan(plan_spec());
    let api = harness(fake.clone(), names.clone(), 1);
    let report = run(&api, &plan, upgrade_driver::quiet()).await.unwrap();

    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{report:#?}"
    );
    let failed = report.node("zone-a-1").unwrap();
    let failure = failed.failure().expect("zone-a-1 failed");
    assert_eq!(failure.step, UpgradeStep::Upgrade);
    assert_eq!(failure.exit_code, Some(1));
    assert!(failure.log_tail.is_some());
    // Later nodes untouched; the failed one cordoned, with its Job left.
    assert_eq!(report.node("zone-a-2").unwrap().result, None);
    assert_eq!(api.upgrades("zone-a-2"), 0);
    assert!(cordoned_by_us(&fake.node("zone-a-1").unwrap()));
    assert!(fake.job(NS, &plan.job_name("zone-a-1")).is_some());
    assert_eq!(api.violations(), Vec::<String>::new());

    // The fix, then the rerun: finished nodes skipped, the failed one retried, the rest done.
    let host = fake.host("zone-a-1").unwrap();
    let fixed = nodejob_fake::stratum::StratumHost {
        faults: Default::default(),
        ..host
    };
    fake.set_host("zone-a-1", fixed).unwrap();
    let report = run(&api, &plan, upgrade_driver::quiet()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert!(matches!(
        report.node("cp-0").unwrap().result,
        Some(NodeResult::Skipped { .. })
    ));
    assert_eq!(
        report.node("zone-a-1").unwrap().result,
        Some(NodeResult::Upgraded)
    );
    assert_eq!(api.upgrades("zone-a-0"), 1);
    assert_eq!(api.upgrades("zone-a-1"), 2, "one failed, one retried");
    assert_eq!(api.upgrades("zone-a-2"), 1);
    assert!(fake.job(NS, &plan.job_name("zone-a-1")).is_none());
    assert_eq!(api.violations(), Vec::<String>::new());
}
