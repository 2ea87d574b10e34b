//! `--simulate N`: an in-memory cluster of N nodes (`nodejob-fake`), shaped like a small
//! production one: three control-plane nodes when N >= 3, the workers in two zones, and a
//! Deployment `web` behind a PodDisruptionBudget so the drain has something to do.
//!
//! The fake runs in tokio's paused virtual time; [`Pacer`] slows it to a watchable pace by
//! holding the (single) runtime thread for real time in proportion to the virtual time that
//! passed between two progress events.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_core::Clock;
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Fault;

/// The label of the simulated workers (the Deployment's node selector).
const WORKER: (&str, &str) = ("node-role.kubernetes.io/worker", "");
const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
const ZONE: &str = "topology.kubernetes.io/zone";

/// Virtual seconds shown per real second.
pub(crate) const SPEED: u32 = 100;

/// The names of a simulated cluster of `n` nodes.
pub(crate) fn node_names(n: usize) -> Vec<String> {
    let control = if n >= 3 { 3 } else { 0 };
    let mut names: Vec<String> = (0..control).map(|i| format!("cp-{i}")).collect();
    names.extend((0..n - control).map(|i| {
        let zone = if i % 2 == 0 { 'a' } else { 'b' };
        format!("worker-{zone}-{}", i / 2)
    }));
    names
}

/// A cluster of `n` nodes; the host step of `fail` fails (exit 1).
pub(crate) fn cluster(n: usize, fail: Option<&str>) -> anyhow::Result<Arc<FakeCluster>> {
    let fake = FakeCluster::with_seed(1);
    let names = node_names(n);
    for name in &names {
        fake.add_node(name)?;
        if name.starts_with("cp-") {
            fake.label_node(name, CONTROL_PLANE, "")?;
        } else {
            let zone = if name.starts_with("worker-a") {
                "zone-a"
            } else {
                "zone-b"
            };
            fake.label_node(name, ZONE, zone)?;
            fake.label_node(name, WORKER.0, WORKER.1)?;
        }
    }
    if let Some(node) = fail {
        let host = fake
            .host(node)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--simulate-fail {node}: no such simulated node; the nodes are {}",
                    names.join(", ")
                )
            })?
            .with_fault(Fault::UpgradeFails);
        fake.set_host(node, host)?;
    }
    let workers = names.iter().filter(|n| n.starts_with("worker")).count();
    if workers > 0 {
        let replicas = i32::try_from(workers.max(2)).unwrap_or(2);
        fake.create_deployment_now(&web(replicas))?;
        fake.create_budget_now(&budget(replicas - 1))?;
    }
    Ok(Arc::new(fake))
}

/// Lets the simulated workloads start (their pods scheduled and Ready) before a run.
pub(crate) async fn settle(fake: &FakeCluster) {
    fake.sleep(Duration::from_secs(30)).await;
}

fn app() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), "web".to_string())])
}

fn web(replicas: i32) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(app()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some("registry.k8s.io/pause:3.10".into()),
                        ..Container::default()
                    }],
                    node_selector: Some(BTreeMap::from([(
                        WORKER.0.to_string(),
                        WORKER.1.to_string(),
                    )])),
                    termination_grace_period_seconds: Some(5),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

fn budget(min_available: i32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(min_available)),
            selector: Some(LabelSelector {
                match_labels: Some(app()),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

/// Holds real time in proportion to the virtual time since its last call: [`SPEED`] virtual
/// seconds per real second, at most half a second at once.
pub(crate) struct Pacer {
    fake: Arc<FakeCluster>,
    last: Mutex<(Duration, Instant)>,
}

impl Pacer {
    /// A pacer for `fake`'s clock.
    pub(crate) fn new(fake: Arc<FakeCluster>) -> Self {
        let now = fake.now();
        Pacer {
            fake,
            last: Mutex::new((now, Instant::now())),
        }
    }

    /// Called before showing an event: waits until the real time has caught up.
    pub(crate) fn pace(&self) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let virtual_now = self.fake.now();
        let due = virtual_now.saturating_sub(last.0) / SPEED;
        let spent = last.1.elapsed();
        if due > spent {
            std::thread::sleep((due - spent).min(Duration::from_millis(500)));
        }
        *last = (virtual_now, Instant::now());
    }
}
