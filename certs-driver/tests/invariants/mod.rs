//! What the CA rotation's actor soaks share (`actors.rs`, seeded schedules; `every_write.rs`,
//! one act right after each write of the driver): the cluster and the plan they rotate, the
//! invariants checked at every write of the driver ([`Watch`]), the steps started while the
//! rolls were paused ([`Starts`]), and the checks of a run's report against the cluster.
//!
//! # Invariants, checked at every write of the driver ([`Watch`])
//! 1. No phase twice on a host: a phase's Job (`stage`, `issue`, `finalize`, `abort`) is
//!    created only on a node whose host never ran that phase; a `stage` Job on a node no
//!    status Job of ours read only once the node carries the mark that the rotation may change
//!    it ([`certs_driver::ROTATING`], naming the new CA), so that a rerun reads it first.
//! 2. `issue` starts on a node only when every node it must cover trusts the new CA: every
//!    node of the cluster (a cluster-wide plan; a node that joined after the driver last
//!    listed the cluster aside) or of the run's selection.
//! 3. `finalize` starts only when every such node is issued by the new CA, done with its
//!    issue (no issue Job of ours left, failed ones aside: the driver deletes it once the node
//!    is Ready again), and Ready (unless an actor's flap has it down right now).
//! 4. `abort` never starts once a node of the cluster has begun `issue` (by its host model).
//! 5. At most `concurrency` host Pods of ours live at once (phases, status reads, verifies),
//!    and phase Pods on at most one control-plane node.
//! 6. No write of any kind once the driver has read the Lease as another holder's (a Lease
//!    call after the theft), until it holds the Lease again.
//!
//! # At the end of each run and of the whole
//! 7. The run ends within its bound ([`RUN_BOUND`]).
//! 8. The report agrees with the cluster ([`check_report`]): a node reported rotated is on
//!    the new CA alone, one reported restored does not trust it; a step the report says ended
//!    well left its host past that step (it ran there); a `Done` rotation's last statuses are
//!    the hosts'.
//! 9. A `Done` rotation leaves every node of the selection (as listed at its end: joined
//!    nodes included, one that entered after the run last listed the selection aside) on
//!    the new CA alone; a `Done` abort leaves no node of its plan trusting the new CA
//!    ([`check_done`]).
//! 10. An abort refused names only nodes where `issue` began (by the host or our issue Job)
//!     ([`check_refusal`]).
//! 11. Per node, deleted ones included, each phase ran at most once for the CA
//!     ([`check_once`]).
//!
//! And 12: no node starts a step (a phase: its `StepStarted` event, sent with no await after
//! the pause gate read the switch) while the rolls are paused ([`Starts::while_paused`]). A
//! step in flight finishes: a Job an earlier run started and this one adopts is no start.
//!
//! # What the soaks accept instead of the end ([`impossible`])
//! A plan selecting by label that must cover the cluster cannot issue once an actor took the
//! label off a node: the last run must fail naming exactly the nodes of the cluster without
//! the label. A label plan whose label an actor took off every node: the run is refused as
//! selecting no node, and none carries it.

// Each soak uses its part of what is here.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use certs_driver::{CaStep, Error, NodeResult, Outcome, Plan, Progress, Report, Selecting};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use nodejob_conformance::soak::{PauseWindow, lease_known_lost};
use nodejob_conformance::workloads::{budget, deployment};
use nodejob_conformance::{Observe, Write};
use nodejob_core::{ApiError, Clock, Verb, ready};
use nodejob_fake::FakeCluster;
use nodejob_fake::schedule::{Act, ActorSchedule, WORKER};
use nodejob_fake::stratum::{CaPhase, Operation, StratumState};

use crate::support::{CONTROL_PLANE, NS, NewCa, plan, plan_spec};

/// A run that has not ended after this much virtual time hangs.
pub(crate) const RUN_BOUND: Duration = Duration::from_secs(4 * 3600);
/// The label that puts a node into the plan's selection, when the plan selects by one.
pub(crate) const SELECTED: (&str, &str) = ("ca", "yes");

/// The new CA of every seed: one fixed certificate (valid 2025 to 2125, its key discarded; the
/// command's simulated CA), so that a seed replays with the same fingerprint, and with it the
/// same Job names, in every process: the outcomes digest is the same from run to run (a CA
/// made afresh, as `new_ca` does, signs with a new key each time).
pub(crate) fn ca() -> &'static NewCa {
    static CA: OnceLock<NewCa> = OnceLock::new();
    CA.get_or_init(|| {
        let pem = include_str!("../support/soak-ca.pem").to_string();
        let fingerprint = certs_driver::Fingerprint::of_pem(&pem)
            .expect("the soak's CA reads")
            .to_string();
        NewCa {
            pem,
            fingerprint,
            key_pem: String::new(),
        }
    })
}

/// What the plan selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// No selector: every node of the cluster.
    Cluster,
    /// The nodes labelled [`SELECTED`] (all of them at first), which must be every node of the
    /// cluster (`cluster_wide`).
    LabelCoveringCluster,
    /// The nodes labelled [`SELECTED`], a trust domain of their own (not `cluster_wide`).
    LabelDomain,
}

impl Scope {
    pub(crate) fn cluster_wide(self) -> bool {
        self != Scope::LabelDomain
    }
}

/// The cluster and the plan a soak rotates.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    pub(crate) control: usize,
    pub(crate) workers: usize,
    /// The replicas of the workers' Deployment `web`, under a budget of one fewer.
    pub(crate) replicas: i32,
    pub(crate) concurrency: u32,
    pub(crate) scope: Scope,
    /// The nodes labelled [`SELECTED`] at first.
    pub(crate) labelled: Vec<String>,
}

/// `cp-0`, … then `w-0`, …
pub(crate) fn node_names(control: usize, workers: usize) -> Vec<String> {
    let control = (0..control).map(|i| format!("cp-{i}"));
    control
        .chain((0..workers).map(|i| format!("w-{i}")))
        .collect()
}

/// The cluster of `shape`: its nodes labelled, the workers' Deployment under its budget.
pub(crate) fn build(seed: u64, shape: &Shape) -> Result<(Arc<FakeCluster>, Vec<String>), String> {
    let fake = FakeCluster::with_seed(seed);
    let names = node_names(shape.control, shape.workers);
    let err = |e: ApiError| e.to_string();
    for name in &names {
        fake.add_node(name).map_err(err)?;
        if name.starts_with("cp-") {
            fake.label_node(name, CONTROL_PLANE, "").map_err(err)?;
        } else {
            fake.label_node(name, WORKER.0, WORKER.1).map_err(err)?;
        }
        if shape.labelled.contains(name) {
            fake.label_node(name, SELECTED.0, SELECTED.1).map_err(err)?;
        }
    }
    let label = (WORKER.0.to_string(), WORKER.1.to_string());
    fake.create_deployment_now(&deployment("default", "web", shape.replicas, &label))
        .map_err(err)?;
    fake.create_budget_now(&budget("default", "web", "web", shape.replicas - 1))
        .map_err(err)?;
    Ok((Arc::new(fake), names))
}

/// The plan of `shape`, run as `identity`.
pub(crate) fn plan_for(shape: &Shape, identity: &str) -> Plan {
    let mut spec = plan_spec(ca());
    spec.identity = identity.into();
    spec.concurrency = shape.concurrency;
    if shape.scope != Scope::Cluster {
        spec.selector = Some(format!("{}={}", SELECTED.0, SELECTED.1));
    }
    spec.cluster_wide = shape.scope.cluster_wide();
    plan(spec)
}

// ---- what the hosts say ----

/// Whether `host` trusts `new` alone, which issues its leaves.
pub(crate) fn on_new_alone(host: &StratumState, new: &str) -> bool {
    host.trusted.len() == 1 && host.trusted.contains(new) && host.issuer == new
}

/// Whether `issue` toward `new` has begun on `host`, by its model.
pub(crate) fn issue_begun(host: &StratumState, new: &str) -> bool {
    host.issuer == new
        || (matches!(host.phase, CaPhase::Issued | CaPhase::Finalized)
            && host.trusted.contains(new))
}

/// The host operation of a phase.
pub(crate) fn operation(step: CaStep) -> Option<Operation> {
    match step {
        CaStep::Stage => Some(Operation::CaStage),
        CaStep::Issue => Some(Operation::CaIssue),
        CaStep::Finalize => Some(Operation::CaFinalize),
        CaStep::Abort => Some(Operation::CaAbort),
        _ => None,
    }
}

/// Whether `host` is past `step` toward (or, an abort, away from) `new`.
pub(crate) fn host_passed(step: CaStep, host: &StratumState, new: &str) -> bool {
    match step {
        CaStep::Stage => host.trusted.contains(new),
        CaStep::Issue => host.issuer == new,
        CaStep::Finalize => host.trusted.len() == 1 && host.trusted.contains(new),
        CaStep::Abort => !host.trusted.contains(new) && host.issuer != new,
        _ => true,
    }
}

/// The phase of one of our Job names (`ca-<phase>-<node>-<hex>`).
pub(crate) fn phase_of(job: &str) -> Option<CaStep> {
    CaStep::PHASES
        .into_iter()
        .chain([CaStep::Abort])
        .find(|s| job.starts_with(&format!("ca-{}-", s.subcommand())))
}

/// The node a Pod runs on, and the Job that owns it (if one does).
pub(crate) fn pod_job(pod: &Pod) -> Option<(String, String)> {
    let node = pod.spec.as_ref()?.node_name.clone()?;
    let job = (pod.metadata.owner_references.iter().flatten()).find(|o| o.kind == "Job")?;
    Some((node, job.name.clone()))
}

pub(crate) fn live(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Pending" | "Running") | None)
}

/// The nodes any act ever adds.
pub(crate) fn added_by(schedule: &ActorSchedule) -> BTreeSet<String> {
    (schedule.acts.iter())
        .filter_map(|(_, act)| match act {
            Act::AddNode { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// Whether an act added `node` (or, `label`, labelled it into the selection) within
/// `from..=to`.
pub(crate) fn entered(
    schedule: &ActorSchedule,
    node: &str,
    from: Duration,
    to: Duration,
    label: bool,
) -> bool {
    (schedule.acts.iter()).any(|(at, act)| {
        let which = match act {
            Act::AddNode { name, .. } => name == node,
            Act::Label { node: n, key, .. } => label && n == node && key == SELECTED.0,
            _ => false,
        };
        which && *at >= from && *at <= to
    })
}

/// Whether an actor's flap has `node` down at `now`.
pub(crate) fn flapped(schedule: &ActorSchedule, node: &str, now: Duration) -> bool {
    (schedule.acts.iter()).any(|(at, act)| {
        matches!(act, Act::Flap { node: n, down_for } if n == node && *at <= now && now <= *at + *down_for)
    })
}

// ---- the invariants at every write ----

/// Checks every write of the driver against the invariants of the module docs.
pub(crate) struct Watch {
    pub(crate) fake: Arc<FakeCluster>,
    pub(crate) plan: Plan,
    pub(crate) new: String,
    pub(crate) cluster_wide: bool,
    pub(crate) width: usize,
    /// The identities the driver runs under.
    pub(crate) ours: BTreeSet<String>,
    /// The actors' schedule, at the cluster's times: what they did so far, at least (an act
    /// done at a write is added as it is done).
    pub(crate) schedule: Arc<Mutex<ActorSchedule>>,
    /// The run's nodes, as its start gate read them.
    pub(crate) run_nodes: Arc<Mutex<Option<Vec<String>>>>,
    pub(crate) violations: Mutex<Vec<String>>,
}

impl Watch {
    pub(crate) fn node_of_job(write: &Write) -> Option<String> {
        let job: Job = serde_json::from_str(&write.body).ok()?;
        job.spec?.template.spec?.node_name
    }

    /// The nodes a phase about to start must find ready for it: every node of the cluster
    /// but those that joined after the driver last listed it (a cluster-wide plan), or the
    /// run's nodes still there.
    fn covered(&self, write: &Write, v: &mut Vec<String>) -> Vec<String> {
        let now = self.fake.node_names();
        if self.cluster_wide {
            let listed = (self.fake.calls().into_iter())
                .rev()
                .find(|c| c.verb == Verb::ListNodes && c.name.is_empty() && c.error.is_none())
                .map(|c| c.at)
                .unwrap_or_default();
            let upto = self.fake.now();
            return (now.into_iter())
                .filter(|n| !entered(&self.schedule.lock().unwrap(), n, listed, upto, false))
                .collect();
        }
        match self.run_nodes.lock().unwrap().clone() {
            Some(nodes) => nodes.into_iter().filter(|n| now.contains(n)).collect(),
            None => {
                v.push(format!("{write}: a phase job before the run's start gate"));
                Vec::new()
            }
        }
    }

    fn lease(&self, write: &Write, v: &mut Vec<String>) {
        if let Err(why) = lease_known_lost(&self.fake, &self.schedule.lock().unwrap(), &self.ours) {
            v.push(format!("{write}: {why}"));
        }
    }

    fn before_write(&self, write: &Write) -> Vec<String> {
        let mut v = Vec::new();
        // 6. Nothing written once the driver knows the Lease is another's.
        self.lease(write, &mut v);
        let job_name = write.target.split_once('/').map(|(_, n)| n).unwrap_or("");
        let step = match (write.verb, phase_of(job_name)) {
            (Verb::CreateJob, Some(step)) => step,
            _ => return v,
        };
        let Some(node) = Self::node_of_job(write) else {
            v.push(format!("{write}: a phase job pinned to no node"));
            return v;
        };
        // 1. Never a phase twice on a host.
        let host = self.fake.host_state(&node);
        let ran = (host.as_ref().zip(operation(step)))
            .map(|(h, op)| h.executions(op))
            .unwrap_or(0);
        if ran > 0 {
            v.push(format!(
                "{write}: {step} on {node}, whose host ran it {ran} time(s) already"
            ));
        }
        // 1b. A stage Job on a node no status read of ours saw follows the mark that the
        // rotation may change it (written ahead, so a rerun reads the node first).
        let read = host
            .as_ref()
            .map_or(0, |h| h.executions(Operation::CaStatus));
        // (A node deleted meanwhile has no annotations left to tell.)
        let marked = (self.fake.node(&node)).is_none_or(|n| {
            (n.metadata.annotations.as_ref())
                .and_then(|a| a.get(certs_driver::ROTATING))
                .is_some_and(|mark| mark.contains(self.new.as_str()))
        });
        if step == CaStep::Stage && read == 0 && !marked {
            v.push(format!(
                "{write}: stage on {node}, read by no status job and not marked ahead"
            ));
        }
        let new = self.new.as_str();
        match step {
            // 2. Issue only once every node trusts the new CA.
            CaStep::Issue => {
                for n in self.covered(write, &mut v) {
                    let trusts = self
                        .fake
                        .host_state(&n)
                        .is_some_and(|h| h.trusted.contains(new));
                    if !trusts {
                        v.push(format!(
                            "{write}: issue on {node} while {n} does not trust the new CA"
                        ));
                    }
                }
            }
            // 3. Finalize only once every node is issued, done with it, and Ready.
            CaStep::Finalize => {
                let now = self.fake.now();
                for n in self.covered(write, &mut v) {
                    let issued = self.fake.host_state(&n).is_some_and(|h| h.issuer == new);
                    if !issued {
                        v.push(format!(
                            "{write}: finalize on {node} while {n} is not issued by the new CA"
                        ));
                    }
                    let issue_job = self.fake.job(NS, &self.plan.job_name(CaStep::Issue, &n));
                    if issue_job.is_some_and(|j| !nodejob_core::failed(&j)) {
                        v.push(format!(
                            "{write}: finalize on {node} while the issue job of {n} is not done \
                             with"
                        ));
                    }
                    let up = self.fake.node(&n).is_some_and(|n| ready(&n));
                    if !up && !flapped(&self.schedule.lock().unwrap(), &n, now) {
                        v.push(format!(
                            "{write}: finalize on {node} while {n} is not Ready"
                        ));
                    }
                }
            }
            // 4. Abort never once issue began anywhere.
            CaStep::Abort => {
                for n in self.fake.node_names() {
                    if self
                        .fake
                        .host_state(&n)
                        .is_some_and(|h| issue_begun(&h, new))
                    {
                        v.push(format!(
                            "{write}: abort on {node} while issue has begun on {n}"
                        ));
                    }
                }
            }
            _ => {}
        }
        v
    }

    fn after_write(&self, write: &Write) -> Vec<String> {
        // 5. At most `width` host pods live, phases on one control-plane node at a time.
        let mut v = Vec::new();
        let nodes: BTreeSet<String> = self.fake.node_names().into_iter().collect();
        let mut hosts = Vec::new();
        let mut control = BTreeSet::new();
        for pod in self.fake.pods(NS).iter().filter(|p| live(p)) {
            let Some((node, job)) = pod_job(pod) else {
                continue;
            };
            if !job.starts_with("ca-") || !nodes.contains(&node) {
                continue;
            }
            if phase_of(&job).is_some() && node.starts_with("cp-") {
                control.insert(node.clone());
            }
            hosts.push(format!("{job} on {node}"));
        }
        if hosts.len() > self.width {
            v.push(format!(
                "after {write}: {} host pods live > {}: {hosts:?}",
                hosts.len(),
                self.width
            ));
        }
        if control.len() > 1 {
            v.push(format!(
                "after {write}: phases on control-plane nodes together: {control:?}"
            ));
        }
        v
    }
}

impl Observe for Watch {
    fn before(&self, write: &Write) {
        let v = self.before_write(write);
        self.violations.lock().unwrap().extend(v);
    }
    fn after(&self, write: &Write) {
        let v = self.after_write(write);
        self.violations.lock().unwrap().extend(v);
    }
}

// ---- the steps started, for 12 ----

/// A step a node started, as the driver's progress told it.
#[derive(Clone, Debug)]
pub(crate) struct Start {
    /// When, on the fake's clock.
    pub(crate) at: Duration,
    pub(crate) node: String,
    pub(crate) step: CaStep,
    /// The step is a Job an earlier run started, adopted: in flight, not started now.
    pub(crate) adopted: bool,
}

/// Every step the runs of a seed started ([`Progress::StepStarted`]), each a fresh start or an
/// adoption: the driver notes `adopting the … job` right before the adoption's event.
#[derive(Default)]
pub(crate) struct Starts {
    /// Nodes whose last note was of an adoption: their next start is that Job's.
    pub(crate) adopting: BTreeSet<String>,
    pub(crate) started: Vec<Start>,
}

impl Starts {
    pub(crate) fn event(&mut self, at: Duration, e: &Progress) {
        match e {
            Progress::Note {
                node: Some(node),
                message,
            } => {
                if message.starts_with("adopting the ") {
                    self.adopting.insert(node.clone());
                } else {
                    self.adopting.remove(node);
                }
            }
            Progress::StepStarted { node, step } => {
                let adopted = self.adopting.remove(node);
                self.started.push(Start {
                    at,
                    node: node.clone(),
                    step: *step,
                    adopted,
                });
            }
            _ => {}
        }
    }

    /// 12. The steps started afresh while `window` had the rolls paused.
    pub(crate) fn while_paused(&self, window: &PauseWindow) -> Vec<String> {
        (self.started.iter())
            .filter(|s| !s.adopted && window.paused_at(s.at))
            .map(|s| {
                format!(
                    "12: {} started {} at {:?}, while paused from {:?} (lifted from {:?})",
                    s.node, s.step, s.at, window.set, window.lifting
                )
            })
            .collect()
    }
}

// ---- one seed ----

/// What a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Rotate,
    Abort,
}

/// The outcome of a run in a few words, for the tally: the kind, then `: ` and the detail.
pub(crate) fn short(mode: Mode, result: &Result<Report, Error>) -> String {
    let prefix = if mode == Mode::Abort { "abort " } else { "" };
    let what = match result {
        Err(Error::AbortRefused { nodes }) => {
            let named: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
            format!("refused: issue begun on {named:?}")
        }
        Err(Error::Selecting(Selecting::NoneSelected { .. })) => "none selected:".into(),
        Err(Error::Core(nodejob_core::Error::LeaseHeld { .. })) => "lease held:".into(),
        Err(e) => format!("error: {e}"),
        Ok(r) => match &r.outcome {
            Outcome::Done => "done:".into(),
            Outcome::Stopped { why } => format!("stopped: {why}"),
            Outcome::Paused { why } => format!("paused: {why}"),
            Outcome::Failed { retry, .. } => {
                let named: Vec<String> = (r.nodes.iter())
                    .filter_map(|n| match &n.result {
                        Some(NodeResult::Failed(f)) => {
                            Some(format!("{} at {}: {}", n.name, f.step, f.message))
                        }
                        Some(NodeResult::Disagrees { gate, what }) => {
                            Some(format!("{} at the gate {gate}: {what}", n.name))
                        }
                        _ => None,
                    })
                    .collect();
                if named.is_empty() {
                    let why = if retry.contains("outside the plan") {
                        "nodes outside the plan"
                    } else if retry.contains("joined") {
                        "a node joined"
                    } else {
                        "cannot go on"
                    };
                    format!("failed, {why}: {retry}")
                } else {
                    format!("failed: {}", named.join("; "))
                }
            }
        },
    };
    format!("{prefix}{what}")
}

/// The kind of a run's outcome: `failed: n at Issue: …` is `failed at Issue`.
pub(crate) fn kind(run: &str) -> String {
    let (head, rest) = run.split_once(':').unwrap_or((run, ""));
    if head.ends_with("failed") {
        let step = rest.split(" at ").nth(1).unwrap_or_default();
        let step = step.split(':').next().unwrap_or_default();
        return format!("{head} at {step}");
    }
    head.to_string()
}

/// 8. The report agrees with the cluster.
pub(crate) fn check_report(
    fake: &FakeCluster,
    mode: Mode,
    report: &Report,
    new: &str,
) -> Result<(), String> {
    for n in &report.nodes {
        if fake.node(&n.name).is_none() {
            continue;
        }
        let Some(host) = fake.host_state(&n.name) else {
            continue;
        };
        match &n.result {
            Some(NodeResult::Rotated) if !on_new_alone(&host, new) => {
                return Err(format!(
                    "{} reported rotated, but its host is {host:?}",
                    n.name
                ));
            }
            Some(NodeResult::Restored) if !host_passed(CaStep::Abort, &host, new) => {
                return Err(format!(
                    "{} reported restored, but its host is {host:?}",
                    n.name
                ));
            }
            _ => {}
        }
        for (step, _) in &n.steps {
            let ran = operation(*step).map_or(1, |op| host.executions(op));
            if !host_passed(*step, &host, new) || ran == 0 {
                return Err(format!(
                    "{} reported {step} done, but its host ran it {ran} time(s) and is {host:?}",
                    n.name
                ));
            }
        }
        if mode == Mode::Rotate && report.outcome == Outcome::Done {
            let read = n.after.as_ref().map(|s| {
                (
                    s.phase.as_str().to_string(),
                    (s.trusted.iter())
                        .map(|f| f.as_str().to_string())
                        .collect::<BTreeSet<_>>(),
                    s.issuer.as_str().to_string(),
                )
            });
            let is = (
                host.phase.as_str().to_string(),
                host.trusted.clone(),
                host.issuer.clone(),
            );
            if read.as_ref() != Some(&is) {
                return Err(format!(
                    "{} last reported {read:?}, but its host is {is:?}",
                    n.name
                ));
            }
        }
    }
    Ok(())
}

/// The nodes the plan selects now: every node, or those labelled.
pub(crate) fn selection(fake: &FakeCluster, scope: Scope) -> Vec<String> {
    (fake.node_names().into_iter())
        .filter(|n| {
            scope == Scope::Cluster
                || fake.node(n).is_some_and(|node| {
                    (node.metadata.labels.as_ref())
                        .and_then(|l| l.get(SELECTED.0))
                        .is_some_and(|v| v == SELECTED.1)
                })
        })
        .collect()
}

/// What a `Done` run leaves (9): a rotation, every node of its selection on the new CA
/// alone (one that entered after the run last listed the selection aside); an abort, none of
/// its plan's nodes trusting it.
pub(crate) fn check_done(
    fake: &FakeCluster,
    scope: Scope,
    mode: Mode,
    report: &Report,
    schedule: &ActorSchedule,
    started: Duration,
) -> Result<(), String> {
    let new = ca().fingerprint.as_str();
    let ended = fake.now();
    let seen = |n: &String| report.node(n).is_some();
    // The driver's last listing of the selection in this run: a node that entered after it
    // is one the run could not see.
    let selector = format!("{}={}", SELECTED.0, SELECTED.1);
    let last_listed = (fake.calls().into_iter().rev())
        .find(|c| {
            c.verb == Verb::ListNodes
                && c.error.is_none()
                && c.at >= started
                && (c.name.is_empty() || c.name == selector)
        })
        .map_or(started, |c| c.at);
    // A rotation's selection is the cluster when it must cover it; an abort's is its plan's
    // nodes (it removes the staged CA from those only).
    let listed = if scope.cluster_wide() && mode == Mode::Rotate {
        fake.node_names()
    } else {
        selection(fake, scope)
    };
    for name in listed {
        let host = fake.host_state(&name).ok_or(format!("{name}: no host"))?;
        let fine = match mode {
            Mode::Rotate => on_new_alone(&host, new),
            Mode::Abort => host_passed(CaStep::Abort, &host, new),
        };
        let unseen = !seen(&name) && entered(schedule, &name, last_listed, ended, true);
        if !fine && !unseen {
            return Err(format!(
                "{mode:?} done, but {name} (in the report: {}) is {host:?}",
                seen(&name)
            ));
        }
    }
    Ok(())
}

/// 10. Each node an abort was refused for had begun issue: by its host, or our issue Job.
pub(crate) fn check_refusal(
    fake: &FakeCluster,
    plan: &Plan,
    nodes: &[(String, String)],
) -> Result<(), String> {
    let new = ca().fingerprint.as_str();
    if nodes.is_empty() {
        return Err("abort refused naming no node".into());
    }
    for (name, why) in nodes {
        let host = fake.host_state(name).is_some_and(|h| issue_begun(&h, new));
        let job = fake
            .job(NS, &plan.job_name(CaStep::Issue, name))
            .is_some_and(|j| !nodejob_core::failed(&j));
        if !host && !job {
            return Err(format!(
                "abort refused for {name} ({why}), where issue has not begun"
            ));
        }
    }
    Ok(())
}

/// What the soak accepts of a seed that could not end: see the module docs.
pub(crate) fn impossible(
    fake: &FakeCluster,
    scope: Scope,
    last: &Result<Report, Error>,
) -> Option<String> {
    if scope == Scope::Cluster {
        return None;
    }
    let unlabelled: Vec<String> = {
        let selected = selection(fake, scope);
        (fake.node_names().into_iter())
            .filter(|n| !selected.contains(n))
            .collect()
    };
    match last {
        Err(Error::Selecting(Selecting::NoneSelected { .. }))
            if selection(fake, scope).is_empty() =>
        {
            Some("no node carries the label".into())
        }
        Ok(Report {
            outcome: Outcome::Failed { retry, .. },
            ..
        }) if scope == Scope::LabelCoveringCluster && !unlabelled.is_empty() => {
            let named = retry
                .split("outside the plan: ")
                .nth(1)
                .and_then(|r| r.split(". Then").next())?;
            let named: Vec<String> = named.split(", ").map(str::to_string).collect();
            let mut expected = unlabelled.clone();
            expected.sort();
            let mut got = named.clone();
            got.sort();
            (got == expected).then(|| format!("nodes outside the plan: {named:?}"))
        }
        // Refused before the Lease, as the run starts, for the same reason.
        Err(Error::Plan(refusal))
            if scope == Scope::LabelCoveringCluster && !unlabelled.is_empty() =>
        {
            let named = refusal
                .rule
                .split("outside the plan: ")
                .nth(1)
                .and_then(|r| r.split("; give").next())?;
            let mut got: Vec<String> = named.split(", ").map(str::to_string).collect();
            got.sort();
            let mut expected = unlabelled.clone();
            expected.sort();
            (got == expected).then(|| format!("nodes outside the plan, refused: {got:?}"))
        }
        _ => None,
    }
}

/// Invariant 11: each phase ran at most once on each of `nodes` (deleted ones included:
/// their hosts stay).
pub(crate) fn check_once(fake: &FakeCluster, nodes: &BTreeSet<String>) -> Result<(), String> {
    for name in nodes {
        let Some(host) = fake.host_state(name) else {
            continue;
        };
        for op in [
            Operation::CaStage,
            Operation::CaIssue,
            Operation::CaFinalize,
            Operation::CaAbort,
        ] {
            let ran = host.executions(op);
            if ran > 1 {
                return Err(format!("{name}: {op} ran {ran} times"));
            }
        }
    }
    Ok(())
}
