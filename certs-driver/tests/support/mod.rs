//! What the rotation's tests share: a fake cluster of control-plane nodes and workers, a new
//! CA made with rcgen (its key kept by the test alone), and [`Harness`], the fake behind every
//! API trait, which keeps every object the driver wrote and can crash the driver at its Nth
//! write.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};

use certs_driver::{
    Error, EventSink, Fingerprint, Outcome, Plan, PlanSpec, Progress, ProgressSink, Stop, run_until,
};
use futures::FutureExt;
use nodejob_conformance::{Crashing, Observe, Write};
use nodejob_core::lease::{Claim, LeaseConfig, acquire};
use nodejob_fake::FakeCluster;
use nodejob_fake::stratum::{CaPhase, Fault, Operation, StratumState};

pub const NS: &str = "kube-system";
pub const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
/// The identity of the test plans: a rerun with it resumes the Lease of a crashed run at once.
pub const IDENTITY: &str = "test-certs-driver";

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

/// Writes on `node` the mark a run of the rotation to `ca` writes before its first stage Job
/// there ([`certs_driver::ROTATING`]), as an earlier run that crashed right after it left it:
/// a run then reads every node before any step.
pub fn mark_begun(fake: &FakeCluster, node: &str, ca: &NewCa) -> Result<(), String> {
    let value = format!(
        "{{\"ca\":\"{}\",\"at\":\"2026-01-01T00:00:00Z\"}}",
        ca.fingerprint
    );
    let change = nodejob_core::NodeChange::set_annotation(certs_driver::ROTATING, value);
    fake.patch_node_now(node, &[change])
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The default test plan: the new CA, two workers at once, the test's identity.
pub fn plan_spec(ca: &NewCa) -> PlanSpec {
    let mut spec = PlanSpec::new(ca.pem.clone(), ca.fingerprint.clone());
    spec.namespace = NS.into();
    spec.identity = IDENTITY.into();
    spec.concurrency = 2;
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

/// The fake behind every API trait ([`Crashing`]): every write kept, and a crash point.
pub type Harness = Crashing<FakeCluster, Written>;

/// A [`Harness`] over `fake`.
pub fn harness(fake: Arc<FakeCluster>) -> Harness {
    Crashing::new(fake, Written::default())
}

/// Every write made, as `write N (Verb target): body` (the object as JSON, a patch's changes).
#[derive(Default)]
pub struct Written(Mutex<Vec<String>>);

impl Observe for Written {
    fn before(&self, write: &Write) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{write}: {}", write.body));
    }
}

/// What a test asks of a [`Harness`].
pub trait Writes {
    /// Every write made so far.
    fn written(&self) -> Vec<String>;
}

impl Writes for Harness {
    fn written(&self) -> Vec<String> {
        self.observer().0.lock().unwrap().clone()
    }
}

/// Runs `f` before each write is sent: another actor acting at that instant.
pub struct BeforeWrite<F>(pub F);

impl<F: Fn(&Write) + Send + Sync> Observe for BeforeWrite<F> {
    fn before(&self, write: &Write) {
        (self.0)(write)
    }
}

/// The fake behind every API trait, with `f` run before each write.
pub fn acting_before<F>(fake: Arc<FakeCluster>, f: F) -> Crashing<FakeCluster, BeforeWrite<F>>
where
    F: Fn(&Write) + Send + Sync,
{
    Crashing::new(fake, BeforeWrite(f))
}

/// Whether `write` creates a Job whose name begins with `prefix` (`ca-verify-`, …).
pub fn creates_job(write: &Write, prefix: &str) -> bool {
    write.verb == nodejob_fake::Verb::CreateJob
        && write
            .target
            .split_once('/')
            .is_some_and(|(_, name)| name.starts_with(prefix))
}

/// Takes the Lease from under a running driver, as a restarted one would (the same identity,
/// a new epoch): the running one's next check finds it lost.
pub fn take_the_lease(fake: &FakeCluster) {
    let config = LeaseConfig {
        namespace: NS.into(),
        name: "nodejob".into(),
        identity: IDENTITY.into(),
        duration: std::time::Duration::from_secs(60),
    };
    let claim = Claim {
        operation: "rotate-ca".into(),
        target: "elsewhere".into(),
    };
    // The fake answers at once: nothing to wait for.
    acquire(fake, &config, &claim)
        .now_or_never()
        .expect("the fake answers at once")
        .expect("taken");
}

/// Runs the rotation until `at` says to stop (the run stops before its next batch).
pub async fn run_stopping_at(
    fake: &Arc<FakeCluster>,
    ca: &NewCa,
    at: impl Fn(&Progress) -> bool + Send + Sync + 'static,
) -> Result<Outcome, Error> {
    let stop = Stop::new();
    let handle = stop.clone();
    let sink: Arc<dyn ProgressSink> = Arc::new(move |e: &Progress| {
        if at(e) {
            handle.request();
        }
    });
    let report = run_until(&harness(fake.clone()), &plan(plan_spec(ca)), sink, &stop).await?;
    Ok(report.outcome)
}
