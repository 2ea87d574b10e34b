//! A whole CA rotation of a simulated cluster, in paused (virtual) time: what it costs the
//! cluster per node, in host Jobs (each a Pod start on a real node) and API calls.
//!
//! The cluster ([`FakeCluster`], seed 1, default timing): 3 control-plane nodes and the rest
//! workers, every host trusting and issuing from the initial CA. The plan: every node to a
//! new CA made here (its key thrown away), `concurrency` 10. Every call the driver makes goes
//! through [`Counting`], a [`Layer`] over the fake that counts it by [`Verb`]: a host Job is a
//! [`Verb::CreateJob`] (the driver creates no other Job), and the hosts' own execution counts
//! say which `stratum carotate` commands those Jobs ran.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use certs_driver::{Fingerprint, Outcome, Plan, PlanSpec, quiet, run};
use nodejob_core::{Answer, ApiResult, Layer, Request, Verb};
use nodejob_fake::stratum::Operation;
use nodejob_fake::{Clock, FakeCluster};

use crate::roll::{CONTROL_PLANE, control_plane};

/// The rotation's width: workers at once.
pub const CONCURRENCY: u32 = 10;
const NAMESPACE: &str = "kube-system";

/// The `stratum carotate` commands, as the hosts count them.
const COMMANDS: [Operation; 6] = [
    Operation::CaStatus,
    Operation::CaStage,
    Operation::CaIssue,
    Operation::CaVerify,
    Operation::CaFinalize,
    Operation::CaAbort,
];

/// What one rotation cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Rotation {
    /// Nodes in the cluster, all in the plan.
    pub nodes: usize,
    /// Virtual time of the rotation.
    pub virtual_time: Duration,
    /// Wall time of the rotation (the driver and the fake together).
    pub wall: Duration,
    /// The driver's API calls, by verb.
    pub calls: BTreeMap<Verb, usize>,
    /// The `stratum carotate` commands the hosts ran, by command (`carotate status`, ...),
    /// summed over the nodes.
    pub commands: BTreeMap<String, u32>,
}

impl Rotation {
    /// All the driver's API calls.
    pub fn total_calls(&self) -> usize {
        self.calls.values().sum()
    }

    /// The host Jobs the driver created.
    pub fn host_jobs(&self) -> usize {
        self.calls
            .get(&Verb::CreateJob)
            .copied()
            .unwrap_or_default()
    }

    /// Host Jobs per node.
    pub fn host_jobs_per_node(&self) -> f64 {
        self.host_jobs() as f64 / self.nodes as f64
    }

    /// API calls per node.
    pub fn calls_per_node(&self) -> f64 {
        self.total_calls() as f64 / self.nodes as f64
    }

    /// `host jobs per node: X, api calls per node: Y`.
    pub fn per_node_line(&self) -> String {
        format!(
            "host jobs per node: {}, api calls per node: {}",
            figure(self.host_jobs_per_node()),
            figure(self.calls_per_node())
        )
    }

    /// `create_job 4.0, get_job 8.0, ...` per node, in [`Verb`] order.
    pub fn calls_by_verb(&self) -> String {
        (self.calls.iter())
            .map(|(verb, n)| format!("{} {:.1}", verb.method(), *n as f64 / self.nodes as f64))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `carotate status 1.0, carotate stage 1.0, ...` per node.
    pub fn commands_by_kind(&self) -> String {
        (self.commands.iter())
            .map(|(c, n)| format!("{c} {:.1}", f64::from(*n) / self.nodes as f64))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A whole number as one (`4`), else to a tenth (`48.3`).
fn figure(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// A backend whose every call is counted by verb on its way down.
pub struct Counting<'a, A: ?Sized> {
    inner: &'a A,
    calls: Mutex<BTreeMap<Verb, usize>>,
}

impl<'a, A: ?Sized> Counting<'a, A> {
    /// Calls go to `inner`.
    pub fn new(inner: &'a A) -> Self {
        Counting {
            inner,
            calls: Mutex::new(BTreeMap::new()),
        }
    }

    /// The calls so far, by verb.
    pub fn calls(&self) -> BTreeMap<Verb, usize> {
        self.calls.lock().unwrap().clone()
    }
}

impl<A: ?Sized + Sync> Layer for Counting<'_, A> {
    type Below = A;

    fn below(&self) -> &A {
        self.inner
    }

    fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> impl Future<Output = ApiResult<Answer>> + Send + 'a {
        *self
            .calls
            .lock()
            .unwrap()
            .entry(request.verb())
            .or_default() += 1;
        serve
    }
}

/// Rotates a cluster of `nodes` nodes (more than 3) to a new CA. Must run on a runtime whose
/// time is paused.
///
/// # Errors
/// When the rotation does not end `Done`.
pub async fn rotate(nodes: usize) -> anyhow::Result<Rotation> {
    anyhow::ensure!(
        nodes > CONTROL_PLANE,
        "a rotation here needs more than {CONTROL_PLANE} nodes"
    );
    let fake = FakeCluster::with_seed(1);
    let names = cluster(&fake, nodes)?;
    let pem = new_ca()?;
    let fingerprint = Fingerprint::of_pem(&pem)?;
    let mut spec = PlanSpec::new(pem, fingerprint.as_str());
    spec.namespace = NAMESPACE.into();
    spec.identity = "nodejob-bench".into();
    spec.concurrency = CONCURRENCY;
    let plan = Plan::build(spec)?;

    let api = Counting::new(&fake);
    let started_virtual = fake.now();
    let started = Instant::now();
    let report = run(&api, &plan, quiet()).await?;
    let wall = started.elapsed();
    let virtual_time = fake.now() - started_virtual;
    anyhow::ensure!(
        report.outcome == Outcome::Done,
        "the rotation ended {:?}",
        report.outcome
    );

    let mut commands = BTreeMap::new();
    for name in &names {
        let host = fake
            .host_state(name)
            .ok_or_else(|| anyhow::anyhow!("{name} has no host"))?;
        anyhow::ensure!(
            host.trusted.len() == 1 && host.trusted.contains(fingerprint.as_str()),
            "{name} does not trust the new CA alone: {host:?}"
        );
        for op in COMMANDS {
            let n = host.executions(op);
            if n > 0 {
                *commands.entry(op.as_str().to_string()).or_default() += n;
            }
        }
    }
    Ok(Rotation {
        nodes: names.len(),
        virtual_time,
        wall,
        calls: api.calls(),
        commands,
    })
}

/// Adds `nodes` nodes: 3 control-plane, the rest workers. Answers their names.
fn cluster(fake: &FakeCluster, nodes: usize) -> anyhow::Result<Vec<String>> {
    let mut names = control_plane(fake)?;
    for i in 0..nodes - CONTROL_PLANE {
        let name = format!("worker-{i:04}");
        fake.add_node(&name)?;
        names.push(name);
    }
    Ok(names)
}

/// A new CA's certificate, as PEM (its key dropped: the driver never has one).
fn new_ca() -> anyhow::Result<String> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "nodejob-bench cluster CA");
    let key = rcgen::KeyPair::generate()?;
    Ok(pem(params.self_signed(&key)?.der()))
}

/// `der` as a `CERTIFICATE` PEM block, 64 base64 characters a line.
fn pem(der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in der.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                text.push('=');
            }
        }
    }
    let lines: Vec<&str> = (text.as_bytes().chunks(64))
        .map(|l| std::str::from_utf8(l).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}
