//! What the rotation's tests share: a fake cluster of control-plane nodes and workers, a new
//! CA made with rcgen (its key kept by the test alone), and [`Harness`], the fake behind every
//! API trait, which keeps every object the driver wrote and can crash the driver at its Nth
//! write.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use certs_driver::{Fingerprint, Plan, PlanSpec, Progress, ProgressSink};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::{ApiResult, Change, Clock, JobApi, LeaseApi, NodeApi, NodeChange};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::{CaPhase, Fault, Operation, StratumState};

pub const NS: &str = "kube-system";
pub const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";

/// A new CA: its public certificate and fingerprint (for the plan), and its private key (for
/// the test to look for, never given to the driver).
pub struct NewCa {
    pub pem: String,
    pub fingerprint: String,
    pub key_pem: String,
}

pub fn new_ca() -> NewCa {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "nodejob test cluster CA 2");
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    NewCa {
        pem: pem("CERTIFICATE", cert.der()),
        fingerprint: Fingerprint::of_der(cert.der()).to_string(),
        key_pem: pem("PRIVATE KEY", &key.serialize_der()),
    }
}

/// `der` as a PEM block of `label`, 64 base64 characters a line.
pub fn pem(label: &str, der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in der.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                text.push('=');
            }
        }
    }
    let lines: Vec<&str> = text
        .as_bytes()
        .chunks(64)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// A cluster of `control` control-plane nodes (`cp-0`, …) and `workers` workers (`w-0`, …).
pub fn cluster(seed: u64, control: usize, workers: usize) -> (Arc<FakeCluster>, Vec<String>) {
    let fake = FakeCluster::with_seed(seed);
    let mut names = Vec::new();
    for i in 0..control {
        let name = format!("cp-{i}");
        fake.add_node(&name).unwrap();
        fake.label_node(&name, CONTROL_PLANE, "").unwrap();
        names.push(name);
    }
    for i in 0..workers {
        let name = format!("w-{i}");
        fake.add_node(&name).unwrap();
        names.push(name);
    }
    (Arc::new(fake), names)
}

/// Arms `fault` on `node`'s host.
pub fn fault(fake: &FakeCluster, node: &str, fault: Fault) {
    let host = fake.host(node).unwrap().with_fault(fault);
    fake.set_host(node, host).unwrap();
}

/// The default test plan: the new CA, two workers at once, the test's identity.
pub fn plan_spec(ca: &NewCa) -> PlanSpec {
    let mut spec = PlanSpec::new(ca.pem.clone(), ca.fingerprint.clone());
    spec.namespace = NS.into();
    spec.identity = "test-certs-driver".into();
    spec.concurrency = 2;
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

/// Whether `state` is on `new` alone: trusted, issuing, finalized.
pub fn on_new_ca(state: &StratumState, new: &str) -> bool {
    state.trusted.len() == 1
        && state.trusted.contains(new)
        && state.issuer == new
        && state.phase == CaPhase::Finalized
}

/// The phase executions of a node's host: stage, issue, finalize, abort.
pub fn phase_runs(fake: &FakeCluster, node: &str) -> [u32; 4] {
    let s = fake.host_state(node).unwrap();
    [
        s.executions(Operation::CaStage),
        s.executions(Operation::CaIssue),
        s.executions(Operation::CaFinalize),
        s.executions(Operation::CaAbort),
    ]
}

/// The fake behind every trait: every object written kept (as JSON), and a crash point.
pub struct Harness {
    pub fake: Arc<FakeCluster>,
    /// Hang forever at this write (0-based), as a crashed driver would stop: before it is sent,
    /// or (`crash_after`) after it was served and before its answer is seen.
    pub crash_at: Option<usize>,
    pub crash_after: bool,
    /// Notified when the crash point is reached.
    pub crashed: tokio::sync::Notify,
    writes: AtomicUsize,
    written: Mutex<Vec<String>>,
}

impl Harness {
    pub fn new(fake: Arc<FakeCluster>) -> Self {
        Harness {
            fake,
            crash_at: None,
            crash_after: false,
            crashed: tokio::sync::Notify::new(),
            writes: AtomicUsize::new(0),
            written: Mutex::new(Vec::new()),
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

    /// Every object written so far, as JSON (a node patch: its changes).
    pub fn written(&self) -> Vec<String> {
        self.written.lock().unwrap().clone()
    }

    async fn before_write(&self, what: String) -> usize {
        self.written.lock().unwrap().push(what);
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.crash_at == Some(n) && !self.crash_after {
            self.crashed.notify_one();
            futures::future::pending::<()>().await;
        }
        n
    }

    async fn after_write(&self, n: usize) {
        if self.crash_at == Some(n) && self.crash_after {
            self.crashed.notify_one();
            futures::future::pending::<()>().await;
        }
    }
}

fn json<T: serde::Serialize>(object: &T) -> String {
    serde_json::to_string(object).unwrap()
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
        let n = self.before_write(json(job)).await;
        let r = self.fake.create_job(job).await;
        self.after_write(n).await;
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
        let n = self
            .before_write(format!("delete job {namespace}/{name}"))
            .await;
        let r = self.fake.delete_job(namespace, name, preconditions).await;
        self.after_write(n).await;
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
        let n = self.before_write(json(event)).await;
        let r = self.fake.create_event(event).await;
        self.after_write(n).await;
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
        let n = self
            .before_write(format!("patch node {name}: {changes:?}"))
            .await;
        let r = self.fake.patch_node(name, resource_version, changes).await;
        self.after_write(n).await;
        r
    }
}

#[async_trait]
impl LeaseApi for Harness {
    async fn get_lease(&self, namespace: &str, name: &str) -> ApiResult<Lease> {
        self.fake.get_lease(namespace, name).await
    }
    async fn create_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let n = self.before_write(json(lease)).await;
        let r = self.fake.create_lease(lease).await;
        self.after_write(n).await;
        r
    }
    async fn replace_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let n = self.before_write(json(lease)).await;
        let r = self.fake.replace_lease(lease).await;
        self.after_write(n).await;
        r
    }
}
