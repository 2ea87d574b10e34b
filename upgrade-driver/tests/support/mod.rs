//! What the driver's tests share: a fake cluster of control-plane and zoned worker nodes with a
//! Deployment behind a budget, and [`Harness`], the fake behind every API trait, which checks
//! the roll's invariants after every API write and can crash the driver at its Nth write.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use k8s_openapi::jiff::Timestamp;
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_core::{
    ApiResult, Change, Clock, DryRun, Eviction, JobApi, LeaseApi, NodeApi, NodeChange, PodApi,
    ready,
};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::Operation;
use upgrade_driver::records::{self, IN_PROGRESS, InProgress};
use upgrade_driver::{Plan, PlanSpec, Progress, ProgressSink};

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

impl ProgressSink for Events {
    fn event(&self, event: &Progress) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl Events {
    pub fn all(&self) -> Vec<Progress> {
        self.0.lock().unwrap().clone()
    }
}

/// The fake behind every trait: invariants checked after every write, and a crash point.
pub struct Harness {
    pub fake: Arc<FakeCluster>,
    /// The plan's nodes, for the invariants.
    pub plan_nodes: Vec<String>,
    pub max_unavailable: usize,
    /// Hang forever at this write (0-based), as a crashed driver would stop: before it is sent,
    /// or (`crash_after`) after it was served and before its answer is seen.
    pub crash_at: Option<usize>,
    pub crash_after: bool,
    /// Notified when the crash point is reached.
    pub crashed: tokio::sync::Notify,
    writes: AtomicUsize,
    violations: Mutex<Vec<String>>,
}

impl Harness {
    pub fn new(fake: Arc<FakeCluster>, plan_nodes: Vec<String>, max_unavailable: usize) -> Self {
        Harness {
            fake,
            plan_nodes,
            max_unavailable,
            crash_at: None,
            crash_after: false,
            crashed: tokio::sync::Notify::new(),
            writes: AtomicUsize::new(0),
            violations: Mutex::new(Vec::new()),
        }
    }

    pub fn crashing_at(mut self, write: usize, after: bool) -> Self {
        self.crash_at = Some(write);
        self.crash_after = after;
        self
    }

    /// Writes made so far.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    /// Before a write: hang at the crash point.
    async fn before_write(&self) -> usize {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.crash_at == Some(n) && !self.crash_after {
            self.crashed.notify_one();
            futures::future::pending::<()>().await;
        }
        n
    }

    /// After a write: the invariants, then hang at the crash point.
    async fn after_write(&self, what: &str, n: usize) {
        self.check(what);
        if self.crash_at == Some(n) && self.crash_after {
            self.crashed.notify_one();
            futures::future::pending::<()>().await;
        }
    }

    /// The invariants.
    fn check(&self, what: &str) {
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

    /// Upgrade executions per plan node, by the host models.
    pub fn upgrades(&self, node: &str) -> u32 {
        self.fake
            .host_state(node)
            .map(|s| s.executions(Operation::Upgrade))
            .unwrap_or(0)
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

#[async_trait]
impl Clock for Harness {
    fn now(&self) -> Duration {
        self.fake.now()
    }
    async fn sleep(&self, duration: Duration) {
        self.fake.sleep(duration).await
    }
    fn wall_time(&self) -> Timestamp {
        self.fake.wall_time()
    }
}

#[async_trait]
impl JobApi for Harness {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let n = self.before_write().await;
        let r = self.fake.create_job(job).await;
        self.after_write("create_job", n).await;
        r
    }
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.fake.get_job(namespace, name).await
    }
    async fn list_jobs(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Job>> {
        self.fake.list_jobs(namespace, label_selector).await
    }
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<()> {
        let n = self.before_write().await;
        let r = self.fake.delete_job(namespace, name, preconditions).await;
        self.after_write("delete_job", n).await;
        r
    }
    async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>> {
        self.fake.list_pods(namespace, label_selector).await
    }
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        self.fake
            .pod_log(namespace, pod, container, limit_bytes)
            .await
    }
    async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>> {
        self.fake.list_events(namespace, involved_uid).await
    }
    async fn create_event(&self, event: &Event) -> ApiResult<Event> {
        let n = self.before_write().await;
        let r = self.fake.create_event(event).await;
        self.after_write("create_event", n).await;
        r
    }
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        self.fake.wait_job(namespace, name, since, timeout).await
    }
}

#[async_trait]
impl NodeApi for Harness {
    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        self.fake.get_node(name).await
    }
    async fn list_nodes(&self, label_selector: &str) -> ApiResult<Vec<Node>> {
        self.fake.list_nodes(label_selector).await
    }
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>> {
        self.fake.wait_node(name, since, timeout).await
    }
    async fn patch_node(
        &self,
        name: &str,
        resource_version: &str,
        changes: &[NodeChange],
    ) -> ApiResult<Node> {
        let n = self.before_write().await;
        let r = self.fake.patch_node(name, resource_version, changes).await;
        self.after_write("patch_node", n).await;
        r
    }
}

#[async_trait]
impl PodApi for Harness {
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        self.fake.list_node_pods(node).await
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        self.fake.get_pod(namespace, name).await
    }
    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        self.fake.wait_pod(namespace, name, since, timeout).await
    }
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        let n = self.before_write().await;
        let r = self
            .fake
            .evict_pod(namespace, name, uid, grace_period, dry_run)
            .await;
        self.after_write("evict_pod", n).await;
        r
    }
}

#[async_trait]
impl LeaseApi for Harness {
    async fn get_lease(&self, namespace: &str, name: &str) -> ApiResult<Lease> {
        self.fake.get_lease(namespace, name).await
    }
    async fn create_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let n = self.before_write().await;
        let r = self.fake.create_lease(lease).await;
        self.after_write("create_lease", n).await;
        r
    }
    async fn replace_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let n = self.before_write().await;
        let r = self.fake.replace_lease(lease).await;
        self.after_write("replace_lease", n).await;
        r
    }
}
