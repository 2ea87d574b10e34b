//! A whole rolling upgrade of a simulated cluster, in paused (virtual) time, measured in wall
//! time, API requests and peak memory.
//!
//! The cluster ([`FakeCluster`], seed 1, default timing), as [`Shape`] says: by default
//! ([`Shape::Bench`]) 3 control-plane nodes and the rest of the nodes as workers in 4 zones, a
//! Deployment `web` of one replica per 10 workers behind a budget allowing a tenth of them down;
//! or the cluster `nodejob upgrade --simulate N` rolls ([`Shape::Command`]), for the command
//! beside its engine on the same roll. The plan: every node to `v1.38.0`, at a
//! `max_unavailable` given (1, or 10%). The workload and the budget grow with the cluster, so a
//! node costs the same at every size: what a linear roll should show, in requests and in the
//! bytes answered ([`Weighed`]) alike.
//!
//! Peak memory is the process's (`VmHWM`), so each size runs in a process of its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodejob_conformance::workloads::{budget, deployment};
use nodejob_fake::{Clock, FakeCluster, labels};
use serde_json::json;
use upgrade_driver::{MaxUnavailable, Outcome, Plan, PlanSpec, Progress, VersionSource, run};

use crate::critical::{self, Span};
use crate::weigh::Weighed;

const TARGET: &str = "v1.38.0";
const ZONES: [&str; 4] = ["zone-a", "zone-b", "zone-c", "zone-d"];
/// The control-plane nodes of every simulated cluster of the bench.
pub(crate) const CONTROL_PLANE: usize = 3;
/// Workers per replica of the Deployment.
const WORKERS_PER_REPLICA: usize = 10;
const WORKER: (&str, &str) = ("role", "worker");

/// What one roll measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Roll {
    /// Nodes in the cluster, all in the plan.
    pub nodes: usize,
    /// The plan's `max_unavailable`: `1`, `10%`.
    pub max_unavailable: String,
    /// Virtual time of the roll.
    pub virtual_time: Duration,
    /// Wall time of the roll (the driver and the fake together).
    pub wall: Duration,
    /// Wall time to build the cluster, before the roll.
    pub setup: Duration,
    /// API calls of the roll, by verb (`get_job`, ...).
    pub calls: BTreeMap<String, usize>,
    /// Bytes answered to the roll's calls, by verb (see [`Weighed`]).
    pub bytes: BTreeMap<String, u64>,
    /// Pods evicted.
    pub evicted: usize,
    /// The process's peak resident memory, in KiB, when the roll ended.
    pub peak_rss_kib: u64,
    /// Batches of the roll.
    pub batches: usize,
    /// Virtual seconds along the critical path, by what ([`critical::path`]).
    pub critical_secs: BTreeMap<String, f64>,
}

impl Roll {
    /// All API calls of the roll.
    pub fn total_calls(&self) -> usize {
        self.calls.values().sum()
    }

    /// All bytes answered to the roll.
    pub fn total_bytes(&self) -> u64 {
        self.bytes.values().sum()
    }

    /// As one line of JSON, for the parent process.
    pub fn to_json(&self) -> String {
        json!({
            "nodes": self.nodes,
            "max_unavailable": self.max_unavailable,
            "virtual_ms": self.virtual_time.as_millis() as u64,
            "wall_us": self.wall.as_micros() as u64,
            "setup_us": self.setup.as_micros() as u64,
            "calls": self.calls,
            "bytes": self.bytes,
            "evicted": self.evicted,
            "peak_rss_kib": self.peak_rss_kib,
            "batches": self.batches,
            "critical_s": self.critical_secs,
        })
        .to_string()
    }

    /// Reads [`Roll::to_json`]'s line.
    ///
    /// # Errors
    /// When it is not such a line.
    pub fn from_json(line: &str) -> anyhow::Result<Roll> {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let num = |k: &str| {
            v[k].as_u64()
                .ok_or_else(|| anyhow::anyhow!("no {k} in {line}"))
        };
        let calls = v["calls"]
            .as_object()
            .ok_or_else(|| anyhow::anyhow!("no calls in {line}"))?
            .iter()
            .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or_default() as usize))
            .collect();
        let bytes = v["bytes"]
            .as_object()
            .ok_or_else(|| anyhow::anyhow!("no bytes in {line}"))?
            .iter()
            .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or_default()))
            .collect();
        Ok(Roll {
            nodes: num("nodes")? as usize,
            max_unavailable: v["max_unavailable"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            virtual_time: Duration::from_millis(num("virtual_ms")?),
            wall: Duration::from_micros(num("wall_us")?),
            setup: Duration::from_micros(num("setup_us")?),
            calls,
            bytes,
            evicted: num("evicted")? as usize,
            peak_rss_kib: num("peak_rss_kib")?,
            batches: v["batches"].as_u64().unwrap_or_default() as usize,
            critical_secs: (v["critical_s"].as_object().into_iter().flatten())
                .map(|(k, s)| (k.clone(), s.as_f64().unwrap_or_default()))
                .collect(),
        })
    }
}

/// The cluster a roll runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// 3 control-plane nodes, the workers in 4 zones, a replica of `web` per 10 workers behind
    /// a budget allowing a tenth of them down; 10 s for its pods to start.
    Bench,
    /// The cluster `nodejob upgrade --simulate N` rolls (`nodejob-cli/src/sim.rs`): 3
    /// control-plane nodes, the workers `worker-a-I` and `worker-b-I` in 2 zones, a replica of
    /// `web` per worker behind a budget allowing a tenth of them (at least one) down; 30 s for
    /// its pods to start.
    Command,
}

impl Shape {
    /// `bench`, `command`.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Bench => "bench",
            Shape::Command => "command",
        }
    }

    /// Reads [`Shape::as_str`]'s word.
    ///
    /// # Errors
    /// When it is another.
    pub fn parse(word: &str) -> anyhow::Result<Shape> {
        match word {
            "bench" => Ok(Shape::Bench),
            "command" => Ok(Shape::Command),
            other => anyhow::bail!("SHAPE {other:?}: `bench` or `command`"),
        }
    }
}

/// Rolls a cluster of `nodes` nodes (more than 3) of `shape` at `max_unavailable`. Must run on
/// a runtime whose time is paused.
///
/// # Errors
/// When the roll does not end `Done` with every node at the target.
pub async fn roll(
    nodes: usize,
    max_unavailable: MaxUnavailable,
    shape: Shape,
) -> anyhow::Result<Roll> {
    anyhow::ensure!(
        nodes > CONTROL_PLANE,
        "a roll needs more than {CONTROL_PLANE} nodes"
    );
    let setup = Instant::now();
    let fake = FakeCluster::with_seed(1);
    let names = cluster(&fake, nodes, shape)?;
    let start = match shape {
        Shape::Bench => Duration::from_secs(10),
        Shape::Command => Duration::from_secs(30),
    };
    // Let the Deployment's pods start before the roll.
    fake.sleep(start).await;
    let setup = setup.elapsed();

    let mut spec = PlanSpec::new(TARGET);
    spec.identity = "nodejob-bench".into();
    spec.max_unavailable = max_unavailable;
    let plan = Plan::build(spec)?;

    let calls_before = fake.calls().len();
    let started_virtual = fake.now();
    let started = Instant::now();
    let weighed = Weighed::new(&fake);
    // The batches, timed on the fake's clock as the events come.
    let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
    let (clock, told) = (fake.clone(), Arc::clone(&spans));
    let progress = Arc::new(move |p: &Progress| {
        let at = clock.now() - started_virtual;
        let mut spans = told.lock().unwrap_or_else(|e| e.into_inner());
        match p {
            Progress::BatchStarted { nodes, .. } => spans.push(Span::new(nodes.clone(), at)),
            Progress::StepStarted { node, .. } => Span::step_started(&mut spans, node, at),
            Progress::NodeFinished { node, .. } => Span::node_finished(&mut spans, node, at),
            _ => {}
        }
    });
    let report = run(&weighed, &plan, progress).await?;
    let wall = started.elapsed();
    let virtual_time = fake.now() - started_virtual;
    let spans = spans.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let critical_secs = critical::path(
        &spans,
        &critical::report_steps(&serde_json::to_value(&report)?),
        virtual_time,
    );

    anyhow::ensure!(
        report.outcome == Outcome::Done,
        "the roll ended {:?}",
        report.outcome
    );
    let behind = names
        .iter()
        .filter(|n| {
            fake.node(n).as_ref().and_then(|node| {
                upgrade_driver::version::version(node, &VersionSource::KubeletVersion)
                    .map(str::to_string)
            }) != Some(TARGET.to_string())
        })
        .count();
    anyhow::ensure!(behind == 0, "{behind} node(s) not at {TARGET}");

    let mut calls = BTreeMap::new();
    for call in &fake.calls()[calls_before..] {
        *calls.entry(call.verb.method().to_string()).or_default() += 1;
    }
    let bytes = (weighed.bytes().into_iter())
        .map(|(verb, n)| (verb.method().to_string(), n))
        .collect();
    Ok(Roll {
        nodes: names.len(),
        max_unavailable: match max_unavailable {
            MaxUnavailable::Count(n) => n.to_string(),
            MaxUnavailable::Percent(p) => format!("{p}%"),
        },
        virtual_time,
        wall,
        setup,
        calls,
        bytes,
        evicted: report.totals.pods_evicted,
        peak_rss_kib: peak_rss_kib().unwrap_or_default(),
        batches: spans.len(),
        critical_secs,
    })
}

/// The 3 control-plane nodes every simulated cluster of the bench begins with, `cp-0` to
/// `cp-2`, labelled so. Answers their names.
pub(crate) fn control_plane(fake: &FakeCluster) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for i in 0..CONTROL_PLANE {
        let name = format!("cp-{i}");
        fake.add_node(&name)?;
        fake.label_node(&name, labels::CONTROL_PLANE, "")?;
        names.push(name);
    }
    Ok(names)
}

/// Adds `nodes` nodes of `shape` (3 control-plane, the rest workers spread over the zones) and
/// the Deployment `web` behind its budget, which allows a tenth of the replicas down (at least
/// one). Answers the node names.
fn cluster(fake: &FakeCluster, nodes: usize, shape: Shape) -> anyhow::Result<Vec<String>> {
    let mut names = control_plane(fake)?;
    let workers = nodes - CONTROL_PLANE;
    for i in 0..workers {
        // The bench's four zones; the two `nodejob --simulate` names its workers by.
        let (zone, name) = match shape {
            Shape::Bench => {
                let zone = ZONES[i % ZONES.len()];
                (zone.to_string(), format!("{zone}-{:04}", i / ZONES.len()))
            }
            Shape::Command => {
                let zone = if i % 2 == 0 { 'a' } else { 'b' };
                (format!("zone-{zone}"), format!("worker-{zone}-{}", i / 2))
            }
        };
        fake.add_node(&name)?;
        fake.label_node(&name, labels::ZONE, &zone)?;
        fake.label_node(&name, WORKER.0, WORKER.1)?;
        names.push(name);
    }
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    let replicas = match shape {
        Shape::Bench => (workers / WORKERS_PER_REPLICA).max(1),
        Shape::Command => workers,
    };
    let disruptions = (replicas / 10).max(1);
    let (replicas, min_available) = (
        i32::try_from(replicas)?,
        i32::try_from(replicas - disruptions)?,
    );
    fake.create_deployment_now(&deployment("default", "web", replicas, &label))?;
    fake.create_budget_now(&budget("default", "web", "web", min_available))?;
    Ok(names)
}

/// `VmHWM` of `/proc/self/status`: the peak resident set size, in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
