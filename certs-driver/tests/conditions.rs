//! The rotation's `NodejobCARotation` condition on each node (issue 22, item 6) on the fake, in
//! paused time: `True` with each phase as its reason as it starts on the node (`Stage`,
//! `Issue`, `Finalize`; the reads say nothing), `False`, `Rotated` at the end; `True`,
//! `Failed` on the node that failed and `Stopped` on those the run left between two phases;
//! the kubelet's conditions kept.

mod support;

use certs_driver::{NodeResult, Outcome, quiet, run};
use nodejob_fake::stratum::Fault;
use nodejob_roll::condition::{CA_ROTATION, condition};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// `(status, reason)` of the rotation's condition on `node`.
fn said(fake: &nodejob_fake::FakeCluster, node: &str) -> Option<(String, String)> {
    let node = fake.node(node)?;
    let c = condition(&node, CA_ROTATION)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

#[tokio::test(start_paused = true)]
async fn each_phase_is_said_as_it_starts_and_the_end_lets_the_node_go() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(1, 1, 2);
    let api = harness(fake.clone());
    let report = run(&api, &plan(plan_spec(&ca)), quiet()).await?;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    for name in &names {
        assert_eq!(
            said(&fake, name),
            Some(("False".into(), "Rotated".into())),
            "{name}"
        );
        let node = fake.node(name).ok_or("node gone")?;
        let types: Vec<String> = (node.status.and_then(|s| s.conditions))
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.type_)
            .collect();
        assert_eq!(types, [CA_ROTATION, "Ready"], "{name}");
    }
    // Three phases started and the end, a write each, on each node.
    assert_eq!(
        fake.count(nodejob_fake::Verb::PatchNodeConditions),
        names.len() * 4
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_failed_node_says_so_and_the_others_that_the_rotation_stopped() -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(2, 1, 2);
    fault(&fake, "w-1", Fault::IssueFails);
    let api = harness(fake.clone());
    let report = run(&api, &plan(plan_spec(&ca)), quiet()).await?;
    assert!(
        matches!(report.outcome, Outcome::Failed { .. }),
        "{report:#?}"
    );
    assert!(matches!(
        report.node("w-1").and_then(|n| n.result.clone()),
        Some(NodeResult::Failed(_))
    ));
    assert_eq!(said(&fake, "w-1"), Some(("True".into(), "Failed".into())));
    for name in ["cp-0", "w-0"] {
        let node = fake.node(name).ok_or("node gone")?;
        let c = condition(&node, CA_ROTATION).ok_or("no condition")?;
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("True", Some("Stopped"))
        );
        let message = c.message.clone().unwrap_or_default();
        assert!(
            message.contains("w-1") && message.contains("after Issue on this node"),
            "{name}: {message}"
        );
    }
    Ok(())
}
