//! What the controller's tests share: a three-node fake cluster with both kinds installed,
//! a planner of test plans for both kinds, the controller's test pace, and a controller
//! started on the fake.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use certs_driver::Fingerprint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_controller::{Controller, Planner, Settings};
use nodejob_core::Clock;
use nodejob_crd::{CARotation, CARotationSpec, NodeUpgrade, NodeUpgradeSpec, Roll, RollApi};
use nodejob_fake::FakeCluster;
use upgrade_driver::{Plan, PlanSpec, Stop};

pub const NODES: [&str; 3] = ["cp-0", "w-0", "w-1"];

/// The specs as test plans (the command's own reading is `nodejob-cli`'s, tested there).
pub struct TestPlanner;

impl Planner for TestPlanner {
    fn upgrade(&self, spec: &NodeUpgradeSpec) -> Result<Plan, String> {
        if !spec.target.starts_with('v') {
            return Err(format!(
                "target {:?}: not a version vMAJOR.MINOR.PATCH",
                spec.target
            ));
        }
        let mut plan = PlanSpec::new(&spec.target);
        plan.namespace = "kube-system".into();
        plan.identity = "nodejob-controller-test".into();
        plan.nodes = spec.nodes.clone();
        plan.deadline = Duration::from_secs(600);
        plan.reboot_timeout = Duration::from_secs(300);
        plan.drain.timeout = Duration::from_secs(120);
        if spec.allow_skew {
            plan.skew = upgrade_driver::Skew::Allow;
        }
        plan.on_undrainable = match spec.on_undrainable {
            nodejob_crd::OnUndrainable::Fail => upgrade_driver::Undrainable::Fail,
            nodejob_crd::OnUndrainable::Skip => upgrade_driver::Undrainable::Skip,
            nodejob_crd::OnUndrainable::Quarantine => upgrade_driver::Undrainable::Quarantine,
        };
        if let Some(max) = spec.max_blocked {
            plan.max_blocked = max.try_into().map_err(|_| "spec.maxBlocked: negative")?;
        }
        // Any window a test gives is Fridays 02:00-06:00 UTC (the fake's clock starts on a
        // Thursday, 2026-01-01T00:00:00Z).
        if spec.window.is_some() {
            use k8s_openapi::jiff::civil::{Weekday, time};
            plan.window = Some(upgrade_driver::Window {
                days: vec![Weekday::Friday],
                start: time(2, 0, 0, 0),
                end: time(6, 0, 0, 0),
                time_zone: "UTC".into(),
            });
        }
        Plan::build(plan).map_err(|e| e.to_string())
    }

    fn rotate(&self, spec: &CARotationSpec) -> Result<certs_driver::Plan, String> {
        let pem = (spec.ca.pem.clone()).ok_or("spec.ca.pem: required by the test planner")?;
        let fingerprint = Fingerprint::of_pem(&pem).map_err(|e| e.to_string())?;
        let mut plan = certs_driver::PlanSpec::new(pem, fingerprint.as_str());
        plan.namespace = "kube-system".into();
        plan.identity = "nodejob-controller-test".into();
        plan.nodes = spec.nodes.clone();
        certs_driver::Plan::build(plan).map_err(|e| e.to_string())
    }
}

/// A fake cluster of cp-0 (control plane), w-0 and w-1, both kinds installed.
pub fn cluster(seed: u64) -> Arc<FakeCluster> {
    let fake = FakeCluster::with_seed(seed);
    for name in NODES {
        fake.add_node(name).unwrap();
    }
    fake.label_node("cp-0", "node-role.kubernetes.io/control-plane", "")
        .unwrap();
    fake.install_custom_kind(NodeUpgrade::KIND);
    fake.install_custom_kind(CARotation::KIND);
    Arc::new(fake)
}

/// The controller's pace in these tests.
pub fn settings() -> Settings {
    Settings {
        status_every: Duration::from_secs(2),
        retry_after: Duration::from_secs(30),
        watch_timeout: Duration::from_secs(60),
    }
}

/// Starts the controller on `fake`; its stop, and its task.
pub fn start(fake: &Arc<FakeCluster>) -> (Stop, tokio::task::JoinHandle<()>) {
    let stop = Stop::new();
    let controller = Controller::new(fake.clone(), Arc::new(TestPlanner), settings());
    let task = {
        let stop = stop.clone();
        tokio::spawn(async move { controller.run(&stop).await.unwrap() })
    };
    (stop, task)
}

// ---- the soaks through the controller (`actors.rs`, `every_write.rs`) ----

/// The resource's name in the soaks.
pub const NAME: &str = "roll";

/// A run that has not ended after this much virtual time hangs.
const RUN_BOUND: Duration = Duration::from_secs(4 * 3600);

/// The resource the soaks write: `NAME`, toward `target`.
pub fn resource(target: &str) -> NodeUpgrade {
    let spec: NodeUpgradeSpec =
        serde_json::from_value(serde_json::json!({ "target": target })).unwrap();
    let mut roll = NodeUpgrade::new(NAME, spec);
    roll.metadata = ObjectMeta {
        name: Some(NAME.into()),
        ..ObjectMeta::default()
    };
    roll
}

/// The resource's `type` condition, when `True`: its reason.
pub fn holds(roll: &NodeUpgrade, type_: &str) -> Option<String> {
    let status = roll.status.as_ref()?;
    let generation = roll.metadata.generation?;
    if status.observed_generation != Some(generation) {
        return None;
    }
    let c = status.conditions.iter().find(|c| c.type_ == type_)?;
    (c.status == "True").then(|| c.reason.clone())
}

/// How a generation's run ended, as the resource says it.
#[derive(Debug)]
pub enum End {
    /// `Ready`: every node at the target.
    Ready,
    /// `Stalled`: its reason and message, and the nodes the status names failed.
    Stalled {
        reason: String,
        message: String,
        failed: Vec<String>,
    },
    /// Nothing in progress, and nodes the status names blocked (`Degraded`,
    /// `TooManyBlocked`): the controller tries them again by itself, but a quarantined node
    /// waits for a person to remove its label, and a budget the actors left for a person to
    /// remove it, as the status says.
    Blocked(Vec<String>),
}

/// Waits (virtual time) until the resource says its generation's run ended.
pub async fn ended(fake: &FakeCluster) -> Result<End, String> {
    let deadline = fake.now() + RUN_BOUND;
    loop {
        // The actors' API faults answer the operator's reads too: read again.
        let Ok(roll) = fake.get_roll::<NodeUpgrade>(NAME).await else {
            fake.sleep(Duration::from_secs(5)).await;
            continue;
        };
        if holds(&roll, "Ready").is_some() {
            return Ok(End::Ready);
        }
        if let Some(reason) = holds(&roll, "Stalled") {
            let status = roll.status.unwrap_or_default();
            let message = (status.conditions.iter())
                .find(|c| c.type_ == "Stalled")
                .map(|c| c.message.clone())
                .unwrap_or_default();
            let failed = status.failed.iter().map(|f| f.node.clone()).collect();
            return Ok(End::Stalled {
                reason,
                message,
                failed,
            });
        }
        if let Some(status) = &roll.status
            && holds(&roll, "Degraded").as_deref() == Some("TooManyBlocked")
            && status.counts.in_progress == 0
            && !status.blocked.is_empty()
        {
            let blocked = status.blocked.iter().map(|b| b.node.clone()).collect();
            return Ok(End::Blocked(blocked));
        }
        if fake.now() > deadline {
            return Err(format!(
                "the resource did not end within {RUN_BOUND:?}: {:#?}",
                roll.status
            ));
        }
        fake.sleep(Duration::from_secs(5)).await;
    }
}

/// The operator's edit of the resource: `edit` applied to its spec, read and written again
/// until the apiserver takes it (the actors' API faults, a conflict with the controller's
/// status write), as `kubectl edit` is tried again.
pub async fn edit(fake: &FakeCluster, edit: impl Fn(&mut NodeUpgradeSpec)) -> Result<(), String> {
    let mut refusals = Vec::new();
    while refusals.len() < 20 {
        let written = async {
            let mut roll = fake.get_roll::<NodeUpgrade>(NAME).await?;
            edit(&mut roll.spec);
            fake.replace_roll(&roll).await
        };
        match written.await {
            Ok(_) => return Ok(()),
            Err(e) => refusals.push(e.to_string()),
        }
        fake.sleep(Duration::from_secs(5)).await;
    }
    Err(format!(
        "the operator's edit was refused 20 times: {refusals:?}"
    ))
}
