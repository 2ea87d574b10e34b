//! `CARotation`s reconciled on the in-memory cluster, in virtual time: one written is rotated
//! (stage, issue, finalize, each gate passed) and its status says so; one with `abort: true`
//! is aborted; a `NodeUpgrade` and a `CARotation` written at once run one after the other
//! under the rolls' Lease (the second waits, naming the holder), each host step once.

use std::time::Duration;

use certs_driver::Fingerprint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::Clock;
use nodejob_crd::{
    CARotation, CARotationSpec, NodeUpgrade, NodeUpgradeSpec, Roll, RollApi, RotationPhase,
};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Operation;

mod support;

use support::{NODES, cluster, start};

/// A new CA's certificate, PEM (its key dropped: the driver never needs it).
fn new_ca() -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "nodejob controller test CA");
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

fn rotation(name: &str, pem: &str, abort: bool) -> CARotation {
    let spec: CARotationSpec = serde_json::from_value(serde_json::json!({
        "ca": { "pem": pem },
        "abort": abort,
    }))
    .unwrap();
    let mut roll = CARotation::new(name, spec);
    roll.metadata = ObjectMeta {
        name: Some(name.into()),
        ..ObjectMeta::default()
    };
    roll
}

fn condition(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> Option<(String, String)> {
    let c = conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

/// Waits (virtual time) until `test` holds of the resource `name` of kind `K`.
async fn until<K: Roll>(
    fake: &FakeCluster,
    name: &str,
    within: Duration,
    test: impl Fn(&K) -> bool,
) -> K {
    let deadline = fake.now() + within;
    loop {
        if let Ok(roll) = fake.get_roll::<K>(name).await
            && test(&roll)
        {
            return roll;
        }
        assert!(fake.now() < deadline, "{name}: not within {within:?}");
        fake.sleep(Duration::from_secs(1)).await;
    }
}

fn runs(fake: &FakeCluster, node: &str, op: Operation) -> u32 {
    (fake.host_state(node)).map_or(0, |s| s.executions(op))
}

fn rotated(r: &CARotation) -> bool {
    (r.status.as_ref()).is_some_and(|s| {
        condition(&s.conditions, "Ready").is_some_and(|(status, _)| status == "True")
    })
}

#[tokio::test(start_paused = true)]
async fn a_ca_rotation_written_is_rotated_gate_by_gate_and_its_status_says_so() {
    let fake = cluster(1);
    let (stop, task) = start(&fake);
    let pem = new_ca();
    let fingerprint = Fingerprint::of_pem(&pem).unwrap().as_str().to_string();
    fake.create_roll(&rotation("to-ca-2", &pem, false))
        .await
        .unwrap();
    let done = until::<CARotation>(&fake, "to-ca-2", Duration::from_secs(3600), rotated).await;
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, RotationPhase::Completed, "{status:#?}");
    assert_eq!(status.fingerprint.as_deref(), Some(fingerprint.as_str()));
    assert_eq!(
        status.short_fingerprint.as_deref(),
        Some(&fingerprint["sha256:".len().."sha256:".len() + 12])
    );
    assert!(status.not_after.is_some());
    assert_eq!(
        (
            status.counts.nodes,
            status.counts.staged,
            status.counts.issued,
            status.counts.finalized,
            status.counts.failed
        ),
        (3, 3, 3, 3, 0),
        "{status:#?}"
    );
    let gates: Vec<(&str, bool)> = (status.gates.iter())
        .map(|g| (g.gate.as_str(), g.passed))
        .collect();
    assert_eq!(
        gates,
        [
            ("start", true),
            ("before issue", true),
            ("before finalize", true),
            ("after finalize", true)
        ]
    );
    assert_eq!(status.observed_generation, Some(1));
    assert!(status.completed_at.is_some());
    assert_eq!(
        condition(&status.conditions, "Ready"),
        Some(("True".into(), "Completed".into()))
    );
    for node in NODES {
        for op in [
            Operation::CaStage,
            Operation::CaIssue,
            Operation::CaFinalize,
        ] {
            assert_eq!(runs(&fake, node, op), 1, "{node} {op:?}");
        }
    }
    stop.request();
    task.await.unwrap();
    for node in NODES {
        assert_eq!(
            runs(&fake, node, Operation::CaFinalize),
            1,
            "{node}: nothing after Ready"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_ca_rotation_with_abort_is_aborted_and_says_aborted() {
    let fake = cluster(2);
    let (stop, task) = start(&fake);
    let pem = new_ca();
    fake.create_roll(&rotation("undo", &pem, true))
        .await
        .unwrap();
    let done = until::<CARotation>(&fake, "undo", Duration::from_secs(3600), rotated).await;
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, RotationPhase::Aborted, "{status:#?}");
    for node in NODES {
        assert_eq!(
            runs(&fake, node, Operation::CaIssue),
            0,
            "{node}: nothing issued"
        );
        assert_eq!(
            runs(&fake, node, Operation::CaStage),
            0,
            "{node}: nothing staged"
        );
    }
    stop.request();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_upgrade_and_a_rotation_written_together_run_one_after_the_other_each_step_once() {
    let fake = cluster(3);
    let (stop, task) = start(&fake);
    let upgrade: NodeUpgradeSpec =
        serde_json::from_value(serde_json::json!({ "target": "v1.38.0" })).unwrap();
    let mut nu = NodeUpgrade::new("to-38", upgrade);
    nu.metadata = ObjectMeta {
        name: Some("to-38".into()),
        ..ObjectMeta::default()
    };
    fake.create_roll(&nu).await.unwrap();
    fake.create_roll(&rotation("to-ca-2", &new_ca(), false))
        .await
        .unwrap();
    // Whichever took the rolls' Lease first, the other said who holds it while it waited.
    let mut waited = false;
    let deadline = fake.now() + Duration::from_secs(4 * 3600);
    loop {
        let nu = fake.get_roll::<NodeUpgrade>("to-38").await.unwrap();
        let car = fake.get_roll::<CARotation>("to-ca-2").await.unwrap();
        let reasons = [
            nu.status
                .as_ref()
                .and_then(|s| condition(&s.conditions, "Ready")),
            car.status
                .as_ref()
                .and_then(|s| condition(&s.conditions, "Ready")),
        ];
        waited |= reasons
            .iter()
            .flatten()
            .any(|(_, reason)| reason == "LeaseHeldByOther");
        if reasons
            .iter()
            .all(|r| r.as_ref().is_some_and(|(s, _)| s == "True"))
        {
            break;
        }
        assert!(fake.now() < deadline, "not both Ready: {reasons:?}");
        fake.sleep(Duration::from_secs(1)).await;
    }
    assert!(waited, "one waited for the other's Lease, and said so");
    for node in NODES {
        assert_eq!(runs(&fake, node, Operation::Upgrade), 1, "{node}");
        assert_eq!(runs(&fake, node, Operation::CaIssue), 1, "{node}");
    }
    stop.request();
    task.await.unwrap();
}
