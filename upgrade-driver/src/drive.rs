//! The thin async loop: executes each node's [`NodeMachine`] intents through the API traits,
//! fences every write with the Lease, renews the Lease while anything waits, and keeps the
//! report.

mod conditions;
pub(crate) mod gate;
mod hands;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::drain::left_to_evict;
use nodejob_core::lease::Claim;
use nodejob_core::watch::{From, watch_until};
use nodejob_core::{ApiError, JobApi, LeaseApi, NodeApi, PodApi, ready};
use nodejob_roll::Conditions;
use nodejob_roll::retry;
use nodejob_roll::{Cause, FailureKind};
use nodejob_roll::{Context, End, Fleet, Group, Ledger, MaxUnavailable, Nothing, Tally};
use nodejob_roll::{Cursor, NodeView, Selecting, Selection, select_from};
use nodejob_roll::{DriverEvent, OpError, Outcome, delete_job, millis};

use crate::held::HeldBack;
use crate::machine::{NodeMachine, NodeResult, Observation, UpgradeStep};
use crate::order::groups;
use crate::plan::Plan;
use crate::progress::{NodeReport, Progress, ProgressSink, Report, UpgradeEvent};
use crate::records::{self, IN_PROGRESS, InProgress, cordoned_by_us};
use crate::select::before_any_write;
use crate::version::version;
use crate::{Error, Stop};

mod blocked;
mod rollback_drain;
mod soak;

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
    /// Every node, kept by a watch: what each batch's admission reads.
    view: NodeView,
    /// Whether the plan selects a node, asked of the nodes that change.
    selection: Selection,
    /// The report's node entries.
    ledger: Ledger<NodeReport>,
    /// The run's writer of each node's `NodejobUpgrade` condition.
    conditions: Conditions,
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
    crate::select::refuse_versions(plan, &nodes)?;
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
    let skew = before_any_write(api, plan, &nodes).await?;
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
    let held = HeldBack::of(plan, &nodes);
    let refs: Vec<&Node> = (nodes.iter())
        .filter(|n| !held.holds(records::name(n)))
        .collect();
    let order = groups(&refs, width, spec.last.as_deref());
    let by_name: BTreeMap<&str, &Node> = nodes.iter().map(|n| (records::name(n), n)).collect();
    let entries: Vec<(String, NodeReport)> = (order.iter().flat_map(|g| &g.nodes))
        .chain(held.names())
        .map(|name| {
            let node = by_name.get(name.as_str());
            // A node an earlier run left in flight: where that run started it.
            let earlier = node.and_then(|n| records::earlier_start(n, plan.target()));
            let from = (earlier.as_ref().and_then(|e| e.from.clone())).or_else(|| {
                node.and_then(|n| version(n, &spec.version_source))
                    .map(str::to_string)
            });
            let entry = NodeReport {
                pods_evicted_earlier: earlier.map_or(0, |e| e.evicted),
                ..NodeReport::not_started(name.clone(), from)
            };
            (name.clone(), entry)
        })
        .collect();
    ctx.progress.event(&Progress::Planned {
        nodes: entries.len(),
    });
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
        view,
        selection: Selection::new(spec.selector.as_deref(), &spec.nodes),
        ledger: Ledger::new(entries),
        conditions: Conditions::new(nodejob_roll::condition::UPGRADE),
    };
    run.held_back(&held);
    run.skew_allowed(&skew.allowed);
    run.skew_waiting(skew.waiting.as_ref());
    // Renewed while anything waits (a host Job included): the renewer runs beside the roll.
    let read = (skew.server).map(|server| gate::Read::of(&run.view, Some(server)));
    let rolled = run.roll(&order, width, &held, read);
    let outcome = match run.ctx.renewing(rolled).await {
        Ok(outcome) => outcome,
        Err(lost) => {
            // The roll was cut short where it stood: each node in flight is interrupted at its
            // step (a host Job goes on on the cluster; a rerun adopts it).
            let why = lost.to_string();
            for (name, step) in run.ctx.cut_short() {
                let why = why.clone();
                run.finish_node(&name, NodeResult::Interrupted { step, why }, None);
            }
            Outcome::Stopped { why }
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
    /// Rolls the groups in order: one pass of the engine, `max_unavailable` read again before
    /// each batch; returns how it ended.
    async fn roll(
        &self,
        order: &[Group],
        width: usize,
        held: &HeldBack,
        read: Option<gate::Read>,
    ) -> Outcome {
        let engine = self.ctx.engine();
        let admitted = held.admitted(order, width);
        let mut admission = gate::Gated {
            run: self,
            inner: MaxUnavailable::new(self, width, &admitted, self.ctx.progress.clone()),
            read,
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
            End::LeaseLost(lost) => Outcome::Stopped {
                why: lost.to_string(),
            },
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
                "more nodes were blocked than the plan allows: once their budgets allow a \
                 disruption, a rerun skips finished nodes and retries the failed and skipped \
                 ones; a quarantined one is rolled once its label {} is removed (`kubectl \
                 label node NODE {}-`)",
                records::QUARANTINED,
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

    /// One node, start to end: its machine driven by the engine's executor
    /// ([`Context::drive`]), its intents performed by its [`hands::OnNode`].
    async fn node(&self, name: &str) -> NodeResult {
        let api = self.api;
        let started = api.now();
        let first = match self.first_read(name).await {
            Ok(node) => node,
            Err(e) => {
                let result = NodeResult::Failed(crate::machine::Failure {
                    step: UpgradeStep::Cordon,
                    kind: FailureKind::Api,
                    message: format!("reading node {name}: {e}"),
                    exit_code: None,
                    log_tail: None,
                });
                return self.end_node(name, result, None, started);
            }
        };
        let mut machine = NodeMachine::new(self.plan, self.ctx.fence.epoch());
        let mut hands = hands::OnNode::new(self, name, &first);
        let uid = first.metadata.uid.clone();
        machine.set_now(api.wall_time().to_string());
        let turn = machine.start(Box::new(first));
        let source = nodejob_roll::Source {
            namespace: &self.plan.spec().namespace,
            component: COMPONENT,
        };
        let result = (self.ctx)
            .drive(source, &mut hands, &mut machine, turn, uid.as_deref())
            .await;
        self.end_node(name, result, hands.last(), started)
    }

    /// The node as the run's watch has it now ([`NodeView::refresh`]: the changes it
    /// delivered, taken in; on a cluster, no request), the read its batch's admission just
    /// made, in place of a GET of its own: its first write carries the resourceVersion read,
    /// so a node that changed since meets a Conflict and is read again. Read with a GET when
    /// the view cannot say (refreshing failed, or it has no such node: the GET says why).
    async fn first_read(&self, name: &str) -> Result<Node, ApiError> {
        if self.view.refresh(self.api).await.is_ok()
            && let Some(node) = self.view.node(name)
        {
            return Ok(node);
        }
        get_node(self.api, name).await
    }

    fn end_node(
        &self,
        name: &str,
        result: NodeResult,
        node: Option<&Node>,
        started: Duration,
    ) -> NodeResult {
        let mut took_ms = millis(self.api.now().saturating_sub(started));
        self.ctx.landed(name);
        self.finish_node(name, result.clone(), node);
        // Its own time: its waits on the pause switch are not its steps'.
        self.node_report(name, |n| {
            took_ms = took_ms.saturating_sub(n.paused_ms);
            n.took_ms = took_ms;
        });
        self.ctx.progress.event(&Progress::NodeFinished {
            node: name.to_string(),
            result: result.clone(),
            took_ms,
        });
        result
    }

    /// What a drain of `name` would refuse now ([`Intent::Vet`](crate::machine::Intent::Vet)).
    async fn vet(&self, name: &str) -> Observation {
        let api = self.api;
        match retry(api, || api.list_node_pods(name)).await {
            Ok(pods) => Observation::Refusals(nodejob_core::drain::refusals(
                &pods,
                &self.plan.spec().drain,
                api.wall_time(),
            )),
            Err(e) => {
                Observation::Failed(Cause::api(format!("listing the pods on node {name}: {e}")))
            }
        }
    }

    /// The node and the Pods on it that a drain would evict, read now, right before its host
    /// Job: a Pod that ended (Succeeded, Failed) is no workload a reboot could hurt.
    async fn preflight(&self, name: &str) -> Observation {
        let api = self.api;
        let node = match get_node(api, name).await {
            Ok(node) => Some(Box::new(node)),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Observation::Failed(Cause::api(format!("reading node {name}: {e}"))),
        };
        if node.is_none() {
            return Observation::Preflight {
                node,
                pods: Vec::new(),
            };
        }
        let pods = match retry(api, || api.list_node_pods(name)).await {
            Ok(pods) => pods,
            Err(e) => {
                return Observation::Failed(Cause::api(format!(
                    "listing the pods on node {name}: {e}"
                )));
            }
        };
        let pods = left_to_evict(&pods, &self.plan.spec().drain, api.wall_time());
        Observation::Preflight { node, pods }
    }

    /// Deletes the host Job of `uid` and waits until it is gone, from `seen` (its
    /// resourceVersion as its run last saw it) when known; gone already is done.
    async fn delete_job(&self, name: &str, uid: &str, seen: Option<String>) -> Result<(), OpError> {
        let ns = &self.plan.spec().namespace;
        delete_job(
            self.api,
            ns,
            &self.plan.job_name(name),
            uid,
            seen.as_deref(),
        )
        .await
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
