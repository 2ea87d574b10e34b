//! What the driver's tests share: a fake cluster of control-plane and zoned worker nodes with a
//! Deployment behind a budget, and [`Harness`], the fake behind every API trait, which checks
//! the roll's invariants after every API write and can crash the driver at its Nth write.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_conformance::{Crashing, Observe, Write};
use nodejob_core::ready;
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Operation;
use upgrade_driver::records::{self, IN_PROGRESS, InProgress};
use upgrade_driver::{EventSink, Plan, PlanSpec, Progress};

pub const NS: &str = "kube-system";
pub const TARGET: &str = "v1.38.0";
pub const FROM: &str = "v1.37.2";
pub const WORKER: (&str, &str) = ("role", "worker");
pub const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
pub const ZONE: &str = "topology.kubernetes.io/zone";

/// A cluster of `control` control-plane nodes (`cp-0`, ...) and, per zone, workers
/// (`<zone>-0`, ...), with a Deployment `web` of `replicas` on the workers behind a budget
/// allowing one disruption.
pub fn cluster(
    seed: u64,
    control: usize,
    zones: &[(&str, usize)],
    replicas: i32,
) -> (Arc<FakeCluster>, Vec<String>) {
    let fake = FakeCluster::with_seed(seed);
    let mut names = Vec::new();
    for i in 0..control {
        let name = format!("cp-{i}");
        names.push(name.clone());
        fake.add_node(&name).unwrap();
        fake.label_node(&name, CONTROL_PLANE, "").unwrap();
    }
    for (zone, count) in zones {
        for i in 0..*count {
            let name = format!("{zone}-{i}");
            names.push(name.clone());
            fake.add_node(&name).unwrap();
            fake.label_node(&name, ZONE, zone).unwrap();
            fake.label_node(&name, WORKER.0, WORKER.1).unwrap();
        }
    }
    if replicas > 0 {
        let label = (WORKER.0.to_string(), WORKER.1.to_string());
        fake.create_deployment_now(&deployment("default", "web", replicas, &label))
            .unwrap();
        fake.create_budget_now(&budget("default", "web", "web", replicas - 1))
            .unwrap();
    }
    (Arc::new(fake), names)
}

/// The default test plan: every node to [`TARGET`], short timeouts.
pub fn plan_spec() -> PlanSpec {
    let mut spec = PlanSpec::new(TARGET);
    spec.namespace = NS.into();
    spec.identity = "test-driver".into();
    spec.deadline = Duration::from_secs(600);
    spec.reboot_timeout = Duration::from_secs(300);
    spec.drain.timeout = Duration::from_secs(120);
    spec
}

pub fn plan(spec: PlanSpec) -> Plan {
    Plan::build(spec).expect("the test plan is valid")
}

/// Collects progress events.
#[derive(Default)]
pub struct Events(pub Mutex<Vec<Progress>>);

impl EventSink<Progress> for Events {
    fn event(&self, event: &Progress) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl Events {
    pub fn all(&self) -> Vec<Progress> {
        self.0.lock().unwrap().clone()
    }
}

/// The fake behind every API trait ([`Crashing`]): the roll's invariants checked after every
/// write, and a crash point.
pub type Harness = Crashing<FakeCluster, Invariants>;

/// A [`Harness`] over `fake` whose invariants watch `plan_nodes` with `max_unavailable`.
pub fn harness(fake: Arc<FakeCluster>, plan_nodes: Vec<String>, max_unavailable: usize) -> Harness {
    Crashing::new(
        fake.clone(),
        Invariants {
            fake,
            plan_nodes,
            max_unavailable,
            violations: Mutex::new(Vec::new()),
        },
    )
}

/// What a test asks of a [`Harness`].
pub trait Checks {
    /// The invariants broken so far, each with the write after which it was seen.
    fn violations(&self) -> Vec<String>;
    /// Upgrade executions on `node`, by its host model.
    fn upgrades(&self, node: &str) -> u32;
}

impl Checks for Harness {
    fn violations(&self) -> Vec<String> {
        self.observer().violations.lock().unwrap().clone()
    }
    fn upgrades(&self, node: &str) -> u32 {
        self.inner()
            .host_state(node)
            .map(|s| s.executions(Operation::Upgrade))
            .unwrap_or(0)
    }
}

/// The roll's invariants, checked after every write: never more than `max_unavailable` plan
/// nodes cordoned by us or not Ready, control-plane nodes one at a time, our taint exactly
/// where our record is, never two host upgrade pods on one node.
pub struct Invariants {
    fake: Arc<FakeCluster>,
    plan_nodes: Vec<String>,
    max_unavailable: usize,
    violations: Mutex<Vec<String>>,
}

impl Observe for Invariants {
    fn after(&self, write: &Write) {
        self.check(write);
    }
}

impl Invariants {
    /// The invariants.
    fn check(&self, what: &Write) {
        let nodes: Vec<Node> = self
            .plan_nodes
            .iter()
            .filter_map(|n| self.fake.node(n))
            .collect();
        let ours: Vec<&Node> = nodes.iter().collect();
        let unavailable: Vec<&str> = ours
            .iter()
            .filter(|n| cordoned_by_us(n) || !ready(n))
            .map(|n| records::name(n))
            .collect();
        let mut v = Vec::new();
        if unavailable.len() > self.max_unavailable {
            v.push(format!(
                "after {what}: unavailable {unavailable:?} > {}",
                self.max_unavailable
            ));
        }
        let control: Vec<&&str> = unavailable
            .iter()
            .filter(|n| n.starts_with("cp-"))
            .collect();
        if control.len() > 1 {
            v.push(format!(
                "after {what}: control-plane nodes unavailable together: {control:?}"
            ));
        }
        // Our taint goes with our record, both ways, written in one write: a node fenced by
        // us is one we hold, and one we hold is fenced.
        for node in &nodes {
            let tainted = nodejob_core::tainted_no_schedule(node, records::FENCE_TAINT);
            let held = (records::read::<InProgress>(node, IN_PROGRESS)
                .ok()
                .flatten())
            .is_some();
            if tainted != held {
                v.push(format!(
                    "after {what}: node {} tainted {tainted} but our record there {held}",
                    records::name(node)
                ));
            }
        }
        let mut hosts: std::collections::BTreeMap<String, usize> = Default::default();
        for pod in self.fake.pods(NS) {
            let running = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|p| p == "Pending" || p == "Running");
            let is_host = pod
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("upgrade-"));
            if running && is_host {
                let node = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default();
                *hosts.entry(node).or_default() += 1;
            }
        }
        for (node, count) in hosts {
            if count > 1 {
                v.push(format!(
                    "after {what}: {count} host upgrade pods on node {node}"
                ));
            }
        }
        self.violations.lock().unwrap().extend(v);
    }
}

pub fn cordoned_by_us(node: &Node) -> bool {
    records::unschedulable(node)
        && records::read::<InProgress>(node, IN_PROGRESS)
            .ok()
            .flatten()
            .is_some_and(|p| p.cordoned)
}

pub fn kubelet_version(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default()
}

// ---- the invariant at the start of every batch ----

/// Checks each batch as it starts, over every node of the plan.
pub struct BatchCheck {
    pub fake: Arc<FakeCluster>,
    pub nodes: Vec<String>,
    pub width: usize,
    pub violations: Mutex<Vec<String>>,
}

impl EventSink<Progress> for BatchCheck {
    fn event(&self, event: &Progress) {
        let Progress::BatchStarted { nodes: batch, .. } = event else {
            return;
        };
        let unavailable: BTreeSet<String> = self
            .nodes
            .iter()
            .filter_map(|n| self.fake.node(n))
            .filter(|n| !ready(n) || cordoned_by_us(n))
            .map(|n| records::name(&n).to_string())
            .collect();
        let mut v = Vec::new();
        let mut would = unavailable.clone();
        would.extend(batch.iter().cloned());
        if would.len() > self.width {
            v.push(format!(
                "batch {batch:?} started while {unavailable:?} were unavailable: more than {}",
                self.width
            ));
        }
        // A node of the batch unavailable already (ours from an earlier run, carried on) takes
        // nothing more down; a control-plane node that is not may start only alone.
        let control = |n: &&String| n.starts_with("cp-");
        let starting: Vec<&String> = batch
            .iter()
            .filter(control)
            .filter(|n| !unavailable.contains(*n))
            .collect();
        let down: Vec<&String> = would
            .iter()
            .filter(control)
            .filter(|n| !starting.contains(n))
            .collect();
        if !starting.is_empty() && (starting.len() > 1 || !down.is_empty()) {
            v.push(format!(
                "control-plane batch {batch:?} started while {unavailable:?} were unavailable: \
                 control-plane nodes {starting:?} and {down:?} down together"
            ));
        }
        self.violations.lock().unwrap().extend(v);
    }
}

/// The first word of a run's outcome, and for a failure its step: a soak's tally.
pub fn kind(run: &str) -> String {
    let mut words = run.split_whitespace();
    match words.next() {
        Some("failed:") => {
            let step = words.nth(1).unwrap_or_default().trim_end_matches(':');
            format!("failed at {step}")
        }
        Some(w) => w.trim_end_matches(':').to_string(),
        None => String::new(),
    }
}

/// The Pods on `node` a drain would evict: not ended, not being deleted, not a DaemonSet's,
/// not a Job's (the host Job itself).
pub fn evictable_on(fake: &FakeCluster, node: &str) -> Vec<String> {
    fake.pods_on(node)
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter(|p| {
            !p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "DaemonSet" || o.kind == "Job")
        })
        .map(|p| {
            let ns = p.metadata.namespace.unwrap_or_default();
            format!("{ns}/{}", p.metadata.name.unwrap_or_default())
        })
        .collect()
}

/// A host's timing quicker than the model's defaults (20 s to upgrade, 30 s to reboot), to keep
/// the soaks' runs cheap; what a fault does is the same.
pub fn quick_host_timing() -> nodejob_fake::stratum::StratumTiming {
    nodejob_fake::stratum::StratumTiming {
        upgrade_time: Duration::from_secs(10),
        reboot_delay: Duration::from_secs(2),
        reboot_time: Duration::from_secs(15),
        ..Default::default()
    }
}
