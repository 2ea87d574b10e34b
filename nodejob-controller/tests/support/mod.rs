//! What the controller's tests share: a three-node fake cluster with both kinds installed,
//! a planner of test plans for both kinds, the controller's test pace, and a controller
//! started on the fake.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use certs_driver::Fingerprint;
use nodejob_controller::{Controller, Planner, Settings};
use nodejob_crd::{CARotation, CARotationSpec, NodeUpgrade, NodeUpgradeSpec, Roll};
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
