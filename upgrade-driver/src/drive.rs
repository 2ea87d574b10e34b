//! The thin async loop: executes each node's [`NodeMachine`] intents through the API traits,
//! fences every write with the Lease, renews the Lease while anything waits, and keeps the
//! report.

mod conditions;
pub(crate) mod gate;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::drain::{Drained, drain_into, left_to_evict};
use nodejob_core::lease::Claim;
use nodejob_core::runner::{Mode, Policy};
use nodejob_core::watch::{From, Until, watch_until};
use nodejob_core::{ApiError, EventType, JobApi, LeaseApi, NodeApi, PodApi, ready, run_exit_code};
use nodejob_roll::Conditions;
pub(crate) use nodejob_roll::retry;
use nodejob_roll::{
    Context, End, Fleet, Group, Ledger, MaxUnavailable, Nothing, Passed, ReadAgain, Tally,
};
use nodejob_roll::{Cursor, NodeView, Selecting, Selection, select_from};
use nodejob_roll::{DriverEvent, NoteSink, OpError, Outcome, delete_job, millis, patch_node};

use crate::machine::{
    DrainFailed, Intent, Mark, NodeMachine, NodeResult, Observation, UpgradeStep,
};
use crate::order::groups;
use crate::plan::{Downgrade, Plan, version_numbers};
use crate::progress::{NodeReport, Progress, ProgressSink, Report, UpgradeEvent};
use crate::records::{self, IN_PROGRESS, InProgress, boot_id, version};
use crate::records::{embedded_version, order_versions};
use crate::{Error, PlanError, Stop};
use nodejob_roll::Fenced;

mod blocked;
mod rollback_drain;
mod soak;

pub(crate) use blocked::HeldBack;

/// The component named in the Events the driver writes.
pub const COMPONENT: &str = "nodejob-upgrade";

/// The whole of one run: what every node future shares.
struct Run<'a, A: ?Sized> {
    /// The API, the Lease (every write fenced by it), the limits, the progress, and the nodes
    /// in flight with the step each is at (what the report says of them when the roll is cut
    /// short by the Lease lost while a host Job runs).
    ctx: Context<'a, A, Progress, UpgradeStep>,
    api: &'a A,
    plan: &'a Plan,
    stop: &'a Stop,
    /// Every node, kept by a watch: what each batch's admission reads.
    view: NodeView,
    /// Whether the plan selects a node, asked of the nodes that change.
    selection: Selection,
    /// The report's node entries.
    ledger: Ledger<NodeReport>,
    /// The run's writer of each node's `NodejobUpgrade` condition.
    conditions: Conditions,
}

/// Selects the plan's nodes: the selector's, narrowed to `nodes` when named. A named node that
/// does not exist is an error.
pub(crate) async fn select_nodes<A: NodeApi + ?Sized>(
    api: &A,
    plan: &Plan,
) -> Result<Vec<Node>, Error> {
    let spec = plan.spec();
    Ok(nodejob_roll::select_nodes(api, spec.selector.as_deref(), &spec.nodes).await?)
}

/// Refuses, before any write, a plan that cannot judge its nodes by version: a selected node
/// that reports no version where the plan reads it, or one that cannot be ordered against the
/// target ([`order_versions`]), and one whose version is newer than the target, unless the
/// plan allows a downgrade. Names each such node
/// and what it reports: an upgrade that cannot tell where a node stands would drain, upgrade
/// and reboot it, then blame the upgrade.
pub(crate) fn refuse_versions(plan: &Plan, nodes: &[Node]) -> Result<(), Error> {
    let spec = plan.spec();
    let target = &spec.target;
    let (mut silent, mut unordered) = (Vec::new(), Vec::new());
    for node in nodes {
        match version(node, &spec.version_source) {
            None => silent.push(records::name(node).to_string()),
            Some(v) if order_versions(v, target).is_none() => {
                unordered.push(format!("{} at {v:?}", records::name(node)));
            }
            Some(_) => {}
        }
    }
    let source = source_words(&spec.version_source);
    if !silent.is_empty() {
        return Err(Error::Plan(PlanError::new(
            "version_source",
            format!(
                "{} node(s) report no version in {source} ({}): the roll could not tell whether \
                 a node reached {target}; choose a version source every selected node reports, \
                 or leave those nodes out of the selection",
                silent.len(),
                silent.join(", ")
            ),
        )));
    }
    if !unordered.is_empty() {
        // The target reads as a version: the nodes' values are what cannot be ordered.
        let field = if version_numbers(target).is_some() || embedded_version(target).is_some() {
            "version_source"
        } else {
            "target"
        };
        return Err(Error::Plan(PlanError::new(
            field,
            format!(
                "{target:?} cannot be compared with what {} node(s) report in {source} ({}): \
                 both must read as vMAJOR.MINOR.PATCH, or as the same words around a version \
                 (Ubuntu 24.04.4 LTS), for the roll to tell an upgrade from a downgrade and \
                 whether a node reached the target",
                unordered.len(),
                unordered.join(", ")
            ),
        )));
    }
    match nodes
        .iter()
        .filter_map(|n| newer_than_target(plan, n))
        .collect::<Vec<_>>()
    {
        newer if newer.is_empty() => Ok(()),
        newer => Err(Error::Plan(PlanError::new(
            "downgrade",
            format!(
                "{target} is older than what {} node(s) run ({}): a downgrade, refused unless \
                 the plan allows it",
                newer.len(),
                newer.join(", ")
            ),
        ))),
    }
}

/// `node at VERSION` when `node` runs a version newer than the plan's target and the plan does
/// not allow a downgrade.
pub(crate) fn newer_than_target(plan: &Plan, node: &Node) -> Option<String> {
    let spec = plan.spec();
    if spec.downgrade == Downgrade::Allow {
        return None;
    }
    let v = version(node, &spec.version_source)?;
    (order_versions(v, &spec.target)? == std::cmp::Ordering::Greater)
        .then(|| format!("{} at {v}", records::name(node)))
}

/// Where the plan reads a node's version, in words.
fn source_words(source: &crate::plan::VersionSource) -> String {
    match source {
        crate::plan::VersionSource::KubeletVersion => "status.nodeInfo.kubeletVersion".into(),
        crate::plan::VersionSource::OsImage => "status.nodeInfo.osImage".into(),
        crate::plan::VersionSource::Label(key) => format!("the label {key}"),
    }
}

pub(crate) async fn run<A>(
    api: &A,
    plan: &Plan,
    progress: Arc<dyn ProgressSink>,
    stop: &Stop,
) -> Result<Report, Error>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    let started = api.now();
    let spec = plan.spec();
    // One list of every node, kept up to date by a watch for the whole run (the admission of
    // each batch reads it): see `nodejob_roll::view`.
    let view = NodeView::list(api)
        .await
        .map_err(|cause| Selecting::Listing {
            selector: spec.selector.clone().unwrap_or_default(),
            cause,
        })?;
    let mut nodes = view.read(|all| select_from(all, spec.selector.as_deref(), &spec.nodes))?;
    refuse_versions(plan, &nodes)?;
    // Nodes an earlier run started and left in flight (cordoned, drained, maybe mid-upgrade)
    // are carried on whatever the selection says now: a node relabelled out of it, or a plan
    // that names other nodes, must not leave one cordoned by us and unnamed.
    let selected: BTreeSet<String> = nodes.iter().map(|n| records::name(n).to_string()).collect();
    let carried: Vec<Node> = view.read(|all| {
        all.filter(|n| !selected.contains(records::name(n)) && records::in_flight(n))
            .cloned()
            .collect()
    });
    let carried_names: Vec<String> = carried
        .iter()
        .map(|n| records::name(n).to_string())
        .collect();
    nodes.extend(carried);
    // The version skew policy, before any write (the Lease is the first).
    let skew = gate::before_any_write(api, plan, &nodes).await?;
    let claim = Claim {
        operation: "upgrade".into(),
        target: plan.target().to_string(),
    };
    // Before the Lease (the first write): a percentage that caps the failure budget.
    let width = plan.width(nodes.len())?;
    let limits = plan.limits(stop);
    let ctx = Context::begin(api, &spec.placement(), &claim, limits, progress, started).await?;
    // Nodes an earlier run blocked: quarantined ones are left as they are, skipped ones come
    // at the end (none for a cluster no run blocked).
    let held = blocked::HeldBack::of(plan, &nodes);
    let refs: Vec<&Node> = (nodes.iter())
        .filter(|n| !held.holds(records::name(n)))
        .collect();
    let order = groups(&refs, width);
    let by_name: BTreeMap<&str, &Node> = nodes.iter().map(|n| (records::name(n), n)).collect();
    let entries = (order.iter().flat_map(|g| &g.nodes))
        .chain(held.names())
        .map(|name| {
            let entry = NodeReport {
                name: name.clone(),
                from: (by_name.get(name.as_str()))
                    .and_then(|n| version(n, &spec.version_source))
                    .map(str::to_string),
                to: None,
                result: None,
                steps: Vec::new(),
                pods_evicted: Vec::new(),
                took_ms: 0,
                skew: Vec::new(),
            };
            (name.clone(), entry)
        })
        .collect();
    for name in &carried_names {
        ctx.progress.event(&Progress::note(
            name,
            "carried on: an earlier run left it in flight, though the plan does not select it \
             now"
            .to_string(),
        ));
    }
    let run = Run {
        ctx,
        api,
        plan,
        stop,
        view,
        selection: Selection::new(spec.selector.as_deref(), &spec.nodes),
        ledger: Ledger::new(entries),
        conditions: Conditions::new(nodejob_roll::condition::UPGRADE),
    };
    run.held_back(&held);
    run.skew_allowed(&skew.allowed);
    run.skew_waiting(skew.waiting.as_ref());
    // Renewed while anything waits (a host Job included): the renewer runs beside the roll.
    let outcome = match run.ctx.renewing(run.roll(&order, width, &held)).await {
        Ok(outcome) => outcome,
        Err(why) => {
            // The roll was cut short where it stood: each node in flight is interrupted at its
            // step (a host Job goes on on the cluster; a rerun adopts it).
            for (name, step) in run.ctx.cut_short() {
                let why = format!("the Lease was lost: {why}");
                run.finish_node(&name, NodeResult::Interrupted { step, why }, None);
            }
            Outcome::Stopped {
                why: format!("the Lease was lost: {why}"),
            }
        }
    };
    let closed = run.ctx.end().await;
    let mut report = Report::new(
        plan.target().to_string(),
        run.ledger.into_inner(),
        Nothing {},
    );
    report.close(outcome, closed.lease, closed.took_ms);
    Ok(report)
}

impl<A> Run<'_, A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    /// Fences a write: the Lease still ours (renewed when due). Once lost, always lost.
    async fn check(&self) -> Result<(), String> {
        self.ctx.fence.check(self.api).await
    }

    /// Rolls the groups in order: one pass of the engine, `max_unavailable` read again before
    /// each batch; returns how it ended.
    async fn roll(&self, order: &[Group], width: usize, held: &blocked::HeldBack) -> Outcome {
        let engine = self.ctx.engine();
        let admitted = held.admitted(order, width);
        let mut admission = gate::Gated {
            run: self,
            inner: MaxUnavailable::new(self, width, &admitted, self.ctx.progress.clone()),
        };
        let mut tally = Tally {
            blocked: held.count(),
            ..Tally::default()
        };
        let step = |name: String| async move {
            let result = self.node(&name).await;
            self.condition_end(&name, &result).await;
            result
        };
        let mut end = engine.pass(&mut tally, order, &mut admission, step).await;
        if end == End::Done
            && let Some(again) = self.skipped_once_more(&mut tally, width, held)
        {
            end = engine
                .pass(&mut tally, &[again], &mut admission, step)
                .await;
        }
        self.settle_conditions().await;
        if let End::Stopping(why) = &end {
            self.ctx.tell(&Progress::Stopping { why: why.clone() });
        }
        let past_blocked = tally.blocked > self.plan.spec().max_blocked;
        let paused = self.ctx.limits.paused.ended();
        match end {
            End::LeaseLost(why) => Outcome::Stopped { why },
            _ if tally.failed > 0 || past_blocked => self.failed_outcome(past_blocked),
            _ if let Some(p) = paused => Outcome::Paused {
                why: nodejob_roll::paused_out(&p, self.ctx.limits.pause_deadline),
            },
            End::Stopping(why) => Outcome::Stopped { why },
            End::Done => self.blocked_outcome().unwrap_or(Outcome::Done),
        }
    }

    /// The failed nodes (and, `past_blocked`, the blocked ones), to retry.
    fn failed_outcome(&self, past_blocked: bool) -> Outcome {
        let nodes: Vec<String> = self.ledger.read(|nodes| {
            (nodes.iter())
                .filter(|n| {
                    n.failure().is_some()
                        || (past_blocked && matches!(n.result, Some(NodeResult::Blocked { .. })))
                })
                .map(|n| n.name.clone())
                .collect()
        });
        let retry = if past_blocked {
            format!(
                "more nodes were blocked than max_blocked allows: once their budgets allow a \
                 disruption, a rerun skips finished nodes and retries the failed and skipped \
                 ones; a quarantined one is rolled once its label {} is removed",
                records::QUARANTINED
            )
        } else {
            "a rerun skips finished nodes and retries the failed one".into()
        };
        Outcome::Failed { nodes, retry }
    }

    fn finish_node(&self, name: &str, result: NodeResult, node: Option<&Node>) {
        self.node_report(name, |n| {
            if let Some(node) = node {
                n.to = version(node, &self.plan.spec().version_source).map(str::to_string);
            }
            n.result = Some(result);
        });
    }

    /// Updates the report of node `name` (a node of the plan).
    fn node_report(&self, name: &str, update: impl FnOnce(&mut NodeReport)) {
        self.ledger.update(name, update);
    }

    fn note(&self, node: &str, message: String) {
        self.ctx.progress.event(&Progress::note(node, message));
    }

    /// Waits while the rolls are paused, before `step` starts on `name`, saying so in the
    /// progress ([`nodejob_roll::pause_before`]): how the node went past the switch, or why it
    /// goes no further.
    async fn paused_before(&self, name: &str, step: UpgradeStep) -> Result<Passed, String> {
        let (fence, limits) = (&self.ctx.fence, &self.ctx.limits);
        let note = |message| self.note(name, message);
        nodejob_roll::pause_before(self.api, fence, limits, step, note).await
    }

    /// After `name` waited on the pause switch, before `step` starts on it: the node read
    /// again is still the one the run began with (UID `uid`), and still selected unless ours.
    /// One deleted or replaced while the rolls were paused, or relabelled out of the
    /// selection before anything of ours was on it, leaves the roll skipped, `step` not
    /// started; one that cannot be read fails at `step`.
    async fn still_there(
        &self,
        name: &str,
        step: UpgradeStep,
        uid: Option<&str>,
    ) -> Result<(), NodeResult> {
        let why = match nodejob_roll::read_again(self.api, name, uid).await {
            // Relabelled out of the selection before anything of ours was on it: not ours to
            // start (one we hold is carried on whatever its labels, as at admission).
            Ok(ReadAgain::Same(node))
                if !self.selection.selects(&node) && !records::in_flight(&node) =>
            {
                format!(
                    "no longer selected (relabelled while the rolls were paused): {step} was not \
                     started on it"
                )
            }
            Ok(ReadAgain::Same(_)) => return Ok(()),
            Ok(ReadAgain::Replaced { now }) => format!(
                "replaced by another node of the same name while the rolls were paused (uid {}, \
                 now {}): {step} was not started on it; a rerun rolls the new node",
                uid.unwrap_or("none"),
                now.as_deref().unwrap_or("none")
            ),
            Ok(ReadAgain::Deleted) => format!(
                "deleted from the cluster while the rolls were paused: {step} was not started \
                 on it"
            ),
            Err(e) => {
                return Err(NodeResult::Failed(crate::machine::Failure {
                    step,
                    message: format!("reading node {name} after the pause, before {step}: {e}"),
                    exit_code: None,
                    log_tail: None,
                }));
            }
        };
        self.ctx
            .progress
            .event(&Progress::Driver(UpgradeEvent::NodeSkipped {
                node: name.to_string(),
                why: why.clone(),
            }));
        Err(NodeResult::Skipped { why })
    }

    /// One node, start to end.
    async fn node(&self, name: &str) -> NodeResult {
        let api = self.api;
        let started = api.now();
        let first = match get_node(api, name).await {
            Ok(node) => node,
            Err(e) => {
                let result = NodeResult::Failed(crate::machine::Failure {
                    step: UpgradeStep::Cordon,
                    message: format!("reading node {name}: {e}"),
                    exit_code: None,
                    log_tail: None,
                });
                return self.end_node(name, result, None, started);
            }
        };
        let epoch = self.ctx.fence.epoch();
        let mut machine = NodeMachine::new(self.plan, epoch);
        let first_seen = first.clone();
        let uid = first.metadata.uid.clone();
        machine.set_now(api.wall_time().to_string());
        let mut step = machine.start(Box::new(first));
        let mut last: Option<Node> = None;
        let mut versions = conditions::Versions::default();
        versions.saw(&first_seen);
        let mut step_started = api.now();
        loop {
            self.ctx.flying(name, machine.current_step());
            // The fence first: once the Lease is lost, not even an Event is written.
            let fenced = matches!(
                step.intent,
                Intent::Patch { .. }
                    | Intent::Guarded { .. }
                    | Intent::Drain
                    | Intent::Host { adopt: None, .. }
                    | Intent::DeleteJob { .. }
                    | Intent::Health
                    | Intent::RollbackJob { adopt: None, .. }
                    | Intent::DeleteRollbackJob { .. }
            );
            if fenced && let Err(e) = self.check().await {
                let result = NodeResult::Interrupted {
                    step: machine.current_step(),
                    why: format!("the Lease was lost: {e}"),
                };
                return self.end_node(name, result, last.as_ref(), started);
            }
            // A stop request ends a node in flight only where a step would begin: the step in
            // flight finishes (its result recorded, its Job deleted, its end reported). The
            // last step, uncordoning, always runs.
            // A rollback, decided on a failure, always runs too: a stop (or a pause) does not
            // leave a failed node half-way.
            let starting = step.marks.iter().find_map(|m| match m {
                Mark::Started(s) if *s != UpgradeStep::Uncordon && *s != UpgradeStep::Rollback => {
                    Some(*s)
                }
                _ => None,
            });
            // What already happened (the step before finished, its pods evicted, a note) is
            // told now, when it happened, not after a pause: only the marks from the start of
            // the next step on wait for the pause switch.
            let mut marks = std::mem::take(&mut step.marks);
            let next = (marks.iter())
                .position(|m| matches!(m, Mark::Started(s) if Some(*s) == starting))
                .unwrap_or(marks.len());
            let next = marks.split_off(next);
            for mark in marks {
                self.tell(name, mark, &mut step_started, &mut versions)
                    .await;
            }
            // The pause switch, likewise, where a step would begin (the step before it
            // finished): the Lease as the fence just read it; paused, the node waits there.
            if let Some(s) = starting
                && !self.stop.requested()
            {
                let passed = match self.paused_before(name, s).await {
                    Ok(Passed::Unpaused) => Ok(()),
                    // The step was decided on what was read before the wait.
                    Ok(Passed::Resumed) => self.still_there(name, s, uid.as_deref()).await,
                    Err(why) => Err(NodeResult::Interrupted { step: s, why }),
                };
                if let Err(result) = passed {
                    return self.end_node(name, result, last.as_ref(), started);
                }
            }
            let stop_here = self.stop.requested() && starting.is_some();
            for mark in next {
                if !(stop_here && matches!(mark, Mark::Started(_))) {
                    self.tell(name, mark, &mut step_started, &mut versions)
                        .await;
                }
            }
            if stop_here {
                let result = NodeResult::Interrupted {
                    step: machine.current_step(),
                    why: "stopped on request".into(),
                };
                return self.end_node(name, result, last.as_ref(), started);
            }
            let obs = match step.intent {
                // A step that failed once the Lease was lost may have failed of the loss (a
                // drain refused its next eviction): the node is interrupted, not failed.
                Intent::Done(NodeResult::Failed(f)) if self.ctx.fence.lost().is_some() => {
                    let why = format!(
                        "the Lease was lost: {}; the step then: {}",
                        self.ctx.fence.lost().unwrap_or_default(),
                        f.message
                    );
                    let result = NodeResult::Interrupted { step: f.step, why };
                    return self.end_node(name, result, last.as_ref(), started);
                }
                Intent::Done(result) => {
                    if let NodeResult::Failed(f) = &result {
                        let message = match f.exit_code {
                            Some(code) => format!("{} (exit code {code})", f.message),
                            None => f.message.clone(),
                        };
                        self.event(name, EventType::Warning, &f.step.reason(), &message)
                            .await;
                    }
                    if let NodeResult::RolledBack { failure, version } = &result {
                        let message = format!(
                            "failed at {}: {}; rolled back to {version}",
                            failure.step, failure.message
                        );
                        let reason = UpgradeStep::Rollback.reason();
                        self.event(name, EventType::Warning, &reason, &message)
                            .await;
                    }
                    if let NodeResult::Blocked { why, .. } = &result
                        && last.is_some()
                    {
                        self.event(name, EventType::Warning, blocked::REASON, why)
                            .await;
                    }
                    return self.end_node(name, result, last.as_ref(), started);
                }
                Intent::Patch { rv, changes } => {
                    let rv = versions.under(&rv);
                    match patch_node(api, name, &rv, &changes).await {
                        Ok(node) => {
                            last = Some(node.clone());
                            machine.set_now(api.wall_time().to_string());
                            Observation::Node(Box::new(node))
                        }
                        // Deleted before our first write to it (while the rolls were paused,
                        // say): nothing of ours was on it, so it leaves the roll as a node
                        // deleted before its turn does, skipped, not failed.
                        Err(
                            OpError::PatchingNode { cause, .. }
                            | OpError::ReadingNode { cause, .. },
                        ) if cause.is_not_found() && machine.untouched() => {
                            let why = "deleted from the cluster before its upgrade started";
                            self.ctx
                                .progress
                                .event(&Progress::Driver(UpgradeEvent::NodeSkipped {
                                    node: name.to_string(),
                                    why: why.to_string(),
                                }));
                            let result = NodeResult::Skipped { why: why.into() };
                            return self.end_node(name, result, None, started);
                        }
                        Err(e) => Observation::Failed(e.to_string()),
                    }
                }
                Intent::Drain => {
                    let notes = NoteSink::to(name, &self.ctx.progress);
                    let mut drained = Drained::default();
                    let options = &self.plan.spec().drain;
                    let pods = Fenced::new(api, &self.ctx.fence);
                    let result = if machine.current_step() == UpgradeStep::Rollback {
                        // Our failed host Job's Pod stays, for inspection.
                        let label_key = self.plan.host_spec(name).label_key;
                        let pods = rollback_drain::KeepingHostPods::new(pods, label_key);
                        drain_into(&pods, name, options, &notes, &mut drained).await
                    } else {
                        drain_into(&pods, name, options, &notes, &mut drained).await
                    };
                    machine.set_now(api.wall_time().to_string());
                    match result {
                        Ok(()) => Observation::Drained(Ok(drained)),
                        Err(e) => Observation::Drained(Err(DrainFailed {
                            evicted: drained.evicted,
                            message: e.to_string(),
                            held: blocked::held_by(&e),
                        })),
                    }
                }
                Intent::Guarded { rv, changes } => {
                    let rv = versions.under(&rv);
                    match retry(api, || api.patch_node(name, &rv, &changes)).await {
                        Ok(node) => {
                            last = Some(node.clone());
                            machine.set_now(api.wall_time().to_string());
                            Observation::Node(Box::new(node))
                        }
                        Err(e) if e.is_conflict() => match get_node(api, name).await {
                            Ok(node) => Observation::Changed(Box::new(node)),
                            Err(e) => Observation::Failed(format!("reading node {name}: {e}")),
                        },
                        Err(e) => Observation::Failed(format!("patching node {name}: {e}")),
                    }
                }
                Intent::Preflight => self.preflight(name).await,
                Intent::FindJob | Intent::FindPrevious { .. } => {
                    let ns = &self.plan.spec().namespace;
                    let job_name = match &step.intent {
                        Intent::FindPrevious { target } => self.plan.job_name_toward(name, target),
                        _ => self.plan.job_name(name),
                    };
                    match retry(api, || api.get_job(ns, &job_name)).await {
                        Ok(job) => Observation::Job(Some(Box::new(job))),
                        Err(e) if e.is_not_found() => Observation::Job(None),
                        Err(e) => Observation::Failed(format!("reading the host job: {e}")),
                    }
                }
                Intent::Host { adopt, known_free } => {
                    let spec = self.plan.host_spec(name);
                    let policy = Policy {
                        adopt,
                        keep: true,
                        known_free,
                    };
                    // Renewed while the host Job runs: the renewer runs beside the roll.
                    let ran = (self.ctx)
                        .host_job(api, name, spec, Mode::ExitCodeLogs, policy)
                        .await;
                    host_observation(ran)
                }
                Intent::DeleteJob { uid } => match self.delete_job(name, &uid).await {
                    Ok(()) => Observation::Deleted,
                    Err(e) => Observation::Failed(e.to_string()),
                },
                Intent::WaitReboot { boot_id: before } => {
                    let timeout = self.plan.spec().reboot_timeout;
                    let until = watch_until(
                        api,
                        timeout,
                        From::Read,
                        || api.get_node(name),
                        |since, t| async move { api.wait_node(name, since.as_deref(), t).await },
                        // Deleted ends the wait at once: the watch says so when it happens.
                        |seen| seen.is_none_or(|n| boot_id(n) != before && ready(n)),
                    )
                    .await;
                    match until {
                        Ok(Until::Met(None)) => Observation::Rebooted {
                            node: None,
                            met: false,
                        },
                        Ok(Until::Met(node)) => {
                            last = node.clone();
                            Observation::Rebooted {
                                node: node.map(Box::new),
                                met: true,
                            }
                        }
                        Ok(Until::TimedOut(node)) => Observation::Rebooted {
                            node: node.map(Box::new),
                            met: false,
                        },
                        Err((_, cause)) => {
                            Observation::Failed(format!("watching node {name}: {cause}"))
                        }
                    }
                }
                Intent::Health => {
                    let Some(mut spec) = self.plan.health_spec(name) else {
                        return self.end_node(name, NodeResult::Upgraded, last.as_ref(), started);
                    };
                    spec.output = Some(Arc::new(NoteSink::to(name, &self.ctx.progress)));
                    Observation::Health(run_exit_code(api, &spec).await.map_err(|e| e.to_string()))
                }
                Intent::FindRollbackJob => {
                    let ns = &self.plan.spec().namespace;
                    let job_name = self.plan.rollback_job_name(name);
                    match retry(api, || api.get_job(ns, &job_name)).await {
                        Ok(job) => Observation::Job(Some(Box::new(job))),
                        Err(e) if e.is_not_found() => Observation::Job(None),
                        Err(e) => Observation::Failed(format!("reading the rollback job: {e}")),
                    }
                }
                Intent::RollbackJob {
                    adopt,
                    to,
                    known_free,
                } => {
                    let spec = self.plan.rollback_spec(name, &to);
                    let policy = Policy {
                        adopt,
                        keep: true,
                        known_free,
                    };
                    let ran = (self.ctx)
                        .host_job(api, name, spec, Mode::ExitCodeLogs, policy)
                        .await;
                    host_observation(ran)
                }
                Intent::DeleteRollbackJob { uid } => {
                    let ns = &self.plan.spec().namespace;
                    let job = self.plan.rollback_job_name(name);
                    match delete_job(self.api, ns, &job, &uid).await {
                        Ok(()) => Observation::Deleted,
                        Err(e) => Observation::Failed(e.to_string()),
                    }
                }
                Intent::Soak { since, boot_id } => match self.soak(name, &since, &boot_id).await {
                    Some(obs) => obs,
                    None => {
                        let result = NodeResult::Interrupted {
                            step: UpgradeStep::Soak,
                            why: "stopped on request during its soak; a rerun resumes it \
                                      from its recorded start"
                                .into(),
                        };
                        return self.end_node(name, result, last.as_ref(), started);
                    }
                },
            };
            match &obs {
                Observation::Node(n) | Observation::Changed(n) => versions.saw(n),
                Observation::Rebooted { node: Some(n), .. } => versions.saw(n),
                _ => {}
            }
            // What the machine writes next (a record's time) is of now.
            machine.set_now(api.wall_time().to_string());
            step = machine.step(obs);
        }
    }

    /// Tells one mark of `name`'s machine: progress, the report, an Event, the condition.
    /// `step_started` is when the step in flight started (set by a start, read by a finish).
    async fn tell(
        &self,
        name: &str,
        mark: Mark,
        step_started: &mut Duration,
        versions: &mut conditions::Versions,
    ) {
        let api = self.api;
        match mark {
            Mark::Started(s) => {
                *step_started = api.now();
                self.ctx.progress.event(&Progress::StepStarted {
                    node: name.to_string(),
                    step: s,
                });
                self.condition_step(name, s, versions).await;
            }
            Mark::Finished(s, message) => {
                let took = api.now().saturating_sub(*step_started);
                self.node_report(name, |n| n.steps.push((s, millis(took))));
                self.ctx.progress.event(&Progress::StepFinished {
                    node: name.to_string(),
                    step: s,
                    took_ms: millis(took),
                    message: message.clone(),
                });
                self.event(name, EventType::Normal, &s.reason(), &message)
                    .await;
            }
            Mark::Evicted(pods) => {
                self.node_report(name, |n| n.pods_evicted.extend(pods.iter().cloned()));
                self.ctx
                    .progress
                    .event(&Progress::Driver(UpgradeEvent::PodsEvicted {
                        node: name.to_string(),
                        pods,
                    }));
            }
            Mark::Note(message) => self.note(name, message),
        }
    }

    fn end_node(
        &self,
        name: &str,
        result: NodeResult,
        node: Option<&Node>,
        started: Duration,
    ) -> NodeResult {
        let took = self.api.now().saturating_sub(started);
        self.ctx.landed(name);
        self.finish_node(name, result.clone(), node);
        self.node_report(name, |n| n.took_ms = millis(took));
        self.ctx.progress.event(&Progress::NodeFinished {
            node: name.to_string(),
            result: result.clone(),
            took_ms: millis(took),
        });
        result
    }

    /// The node and the Pods on it that a drain would evict, read now, right before its host
    /// Job: a Pod that ended (Succeeded, Failed) is no workload a reboot could hurt.
    async fn preflight(&self, name: &str) -> Observation {
        let api = self.api;
        let node = match get_node(api, name).await {
            Ok(node) => Some(Box::new(node)),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Observation::Failed(format!("reading node {name}: {e}")),
        };
        if node.is_none() {
            return Observation::Preflight {
                node,
                pods: Vec::new(),
            };
        }
        let pods = match retry(api, || api.list_node_pods(name)).await {
            Ok(pods) => pods,
            Err(e) => return Observation::Failed(format!("listing the pods on node {name}: {e}")),
        };
        let pods = left_to_evict(&pods, &self.plan.spec().drain, api.wall_time());
        Observation::Preflight { node, pods }
    }

    /// Deletes the host Job of `uid` exactly and waits until it is gone; gone already is done.
    async fn delete_job(&self, name: &str, uid: &str) -> Result<(), OpError> {
        let ns = &self.plan.spec().namespace;
        delete_job(self.api, ns, &self.plan.job_name(name), uid).await
    }

    /// Records an Event on the node (none once the Lease is lost; a failure is a note).
    async fn event(&self, node: &str, kind: EventType, reason: &str, message: &str) {
        let ns = &self.plan.spec().namespace;
        (self.ctx)
            .event(ns, COMPONENT, node, kind, reason, message)
            .await;
    }
}

/// What the engine's `max_unavailable` admission asks of this driver's nodes.
#[async_trait]
impl<A> Fleet for Run<'_, A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    /// The run's view of every node, read again: the names changed since `since`.
    async fn changed(&self, since: &mut Cursor) -> Result<Vec<String>, String> {
        (self.view.refresh(self.api).await).map_err(|e| format!("reading the nodes: {e}"))?;
        Ok(self.view.changed_since(since))
    }

    fn node(&self, name: &str) -> Option<Node> {
        self.view.node(name)
    }

    fn selects(&self, node: &Node) -> bool {
        self.selection.selects(node)
    }

    /// Waits until `name` is Ready (or gone), at most the reboot timeout; whatever the answer,
    /// the engine reads the nodes again.
    async fn wait_ready(&self, name: &str) {
        let api = self.api;
        let _ = watch_until(
            api,
            self.plan.spec().reboot_timeout,
            From::Read,
            || api.get_node(name),
            |since, t| async move { api.wait_node(name, since.as_deref(), t).await },
            |seen| seen.is_none_or(ready),
        )
        .await;
    }

    /// A node gone, no longer selected (and not ours in flight) or at the target leaves the
    /// queue, reported skipped.
    fn keep(&self, name: &str, node: Option<&Node>, selected: bool) -> bool {
        let why = match node {
            None => Some("deleted from the cluster".to_string()),
            Some(node) if !selected && !records::in_flight(node) => {
                Some("no longer selected (relabelled)".to_string())
            }
            Some(node) => records::at_target(self.plan, node),
        };
        let Some(why) = why else {
            return true;
        };
        self.ctx
            .progress
            .event(&Progress::Driver(UpgradeEvent::NodeSkipped {
                node: name.to_string(),
                why: why.clone(),
            }));
        self.finish_node(name, NodeResult::Skipped { why }, node);
        false
    }

    fn held(&self, node: &Node) -> bool {
        cordoned_by_us(node)
    }

    /// Ours in flight (an in-progress record, or soaking): it may be down because of us.
    fn resumable(&self, node: &Node) -> bool {
        records::read::<InProgress>(node, IN_PROGRESS)
            .ok()
            .flatten()
            .is_some()
            || (records::read::<records::Soak>(node, records::SOAK)
                .ok()
                .flatten())
            .is_some()
    }
}

/// Whether we cordoned `node` (our in-progress record says so and it is cordoned).
pub(crate) fn cordoned_by_us(node: &Node) -> bool {
    records::unschedulable(node)
        && records::read::<InProgress>(node, IN_PROGRESS)
            .ok()
            .flatten()
            .is_some_and(|p| p.cordoned)
}

async fn get_node<A: NodeApi + ?Sized>(api: &A, name: &str) -> Result<Node, ApiError> {
    retry(api, || api.get_node(name)).await
}

/// What a host Job's run answers the machine: its report; lost to a reboot of its node (no
/// answer, the node to be asked); or why it gave none.
fn host_observation(ran: Result<nodejob_core::runner::Report, nodejob_core::Error>) -> Observation {
    match ran {
        Err(e @ nodejob_core::Error::LostInReboot { .. }) => Observation::Lost(e.to_string()),
        ran => Observation::Host(ran.map_err(|e| e.to_string())),
    }
}
