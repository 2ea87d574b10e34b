//! The thin async loop: reads every node's status once (a rotation no run has begun: through
//! its stage, whose output begins with it), checks the gates, runs each phase on
//! the nodes that have not passed it (control-plane nodes one at a time, then workers
//! `concurrency` at a time) and takes what each phase's Job says the node reports after it as
//! the next gate's input, fences every write with the Lease (renewed while anything waits),
//! and keeps the report.
//!
//! What a node does in a phase is decided by its [`NodeMachine`](crate::NodeMachine); the
//! executor of its intents is one function, `Rotation::node`, in the child module `node.rs`,
//! apart from the sequencing of phases and gates here, so that the batch loop can move onto
//! the shared roll engine without it.

mod conditions;
mod node;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::DELETE_TIMEOUT;
use nodejob_core::lease::Claim;
use nodejob_core::watch::{From, Until, watch_until};
use nodejob_core::{EventType, JobApi, LeaseApi, NodeApi};
use nodejob_roll::Fenced;
use nodejob_roll::{Context, DriverEvent, EventFence, Outcome, Selecting, Source, Stop, retry};
use nodejob_roll::{End, FixedWidth, LeaseLost, NodeEnd, Tally};

use crate::cluster::{
    STEPS, Shown, covers_cluster, every_node, issue_begun, our_jobs, outside, select,
};
use crate::error::{Error, NotGone, Stuck};
use crate::fingerprint::Fingerprint;
use crate::gate::{Gate, Verified, check, expected, old_trust};
use crate::machine::{Answer, Leftover, Stepped, Task};
use crate::order::Order;
use crate::phase::CaStep;
use crate::plan::{LABEL_KEY, Plan};
use crate::progress::{
    CaEvent, Failure, Gates, NodeReport, NodeResult, Progress, ProgressSink, Report,
};
use crate::records;
use crate::status::CaStatus;
use nodejob_roll::FailureKind;

/// What `carotate verify` answered on a node after its `issue` (in the issue Job's own
/// output), with the CAs it expected besides the new one.
type Verifies = BTreeMap<String, (Vec<Fingerprint>, Verified)>;

/// Each node's status, in the order's order: as its first step began, and after it.
type StatusPair = (Vec<(String, CaStatus)>, Vec<(String, CaStatus)>);

/// Takes what each node that stepped in a phase reports after it as its status, and what its
/// verify answered, if it did.
fn apply(
    statuses: &mut [(String, CaStatus)],
    verified: &mut Verifies,
    stepped: Vec<(String, Stepped)>,
) {
    for (name, after) in stepped {
        if let Some((_, status)) = statuses.iter_mut().find(|(n, _)| *n == name) {
            *status = after.status;
        }
        if let Some(answer) = after.verified {
            verified.insert(name, answer);
        }
    }
}

/// How one node of a batch ended, as the engine counts it: whether it failed.
struct Settled(bool);

impl NodeEnd for Settled {
    fn failed(&self) -> bool {
        self.0
    }
}

/// The component named in the Events the driver writes.
pub const COMPONENT: &str = "nodejob-carotate";

/// The operation the Lease names while a rotation (or its abort) holds it.
pub const OPERATION: &str = "rotate-ca";

/// The whole of one run: what every node future shares.
struct Rotation<'a, A: ?Sized> {
    /// The API, the Lease (every write is fenced by it; once lost, nothing more is written),
    /// what keeps the next batch from starting (a stop, the failure budget, the window), the
    /// progress, and each node with a host Job (or a read) under way, with its step: what the
    /// report says of it when the Lease is lost and the run is cut short there.
    ctx: Context<'a, A, Progress, CaStep>,
    api: &'a A,
    plan: &'a Plan,
    /// The failures so far, counted toward the budget across the phases.
    tally: Mutex<Tally>,
    report: Mutex<Report>,
    /// The names of our host Jobs as listed when the run settled them (`None`: not listed):
    /// a Job of a step not among them is not read before the step.
    ours: Mutex<Option<BTreeSet<String>>>,
    /// Each node as the run last saw it (listed, watched, patched): the resourceVersion a
    /// record is patched under, with no read of its own (a conflict reads it again).
    seen: Mutex<BTreeMap<String, Node>>,
    /// Each node's UID as the run first read it (selected): a node read after a wait with
    /// another UID is not the node the run decided for.
    uids: BTreeMap<String, Option<String>>,
    /// The run's writer of each node's `NodejobCARotation` condition.
    conditions: nodejob_roll::Conditions,
}

/// Rotates the plan's nodes to the new CA.
pub(crate) async fn run<A>(
    api: &A,
    plan: &Plan,
    progress: Arc<dyn ProgressSink>,
    stop: &Stop,
) -> Result<Report, Error>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    // The new CA valid by the cluster's clock, before the Lease (an abort, which removes it,
    // does not ask).
    plan.check_ca_valid_at(api.wall_time())?;
    // A plan that leaves out nodes of the cluster, before the Lease: `stage` would write to
    // its nodes before `issue` refused it.
    covers_cluster(api, plan, &select(api, plan).await?).await?;
    let started = api.now();
    let (order, rotation) = Rotation::start(api, plan, progress, stop, started).await?;
    let outcome = match rotation.ctx.renewing(rotation.forward(&order)).await {
        Ok(outcome) => outcome,
        Err(lost) => rotation.lost(&lost),
    };
    Ok(rotation.finish(outcome).await)
}

/// Removes the staged new CA from every node, unless `issue` has begun anywhere.
pub(crate) async fn abort<A>(
    api: &A,
    plan: &Plan,
    progress: Arc<dyn ProgressSink>,
) -> Result<Report, Error>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    let started = api.now();
    let stop = Stop::new();
    let (order, rotation) = Rotation::start(api, plan, progress, &stop, started).await?;
    match rotation.ctx.renewing(rotation.backward(&order)).await {
        Ok(Ok(outcome)) => Ok(rotation.finish(outcome).await),
        Ok(Err(refused)) => {
            rotation.ctx.tell(&Progress::Stopping {
                why: refused.to_string(),
            });
            rotation.ctx.end().await;
            Err(refused)
        }
        Err(lost) => {
            let outcome = rotation.lost(&lost);
            Ok(rotation.finish(outcome).await)
        }
    }
}

impl<'a, A> Rotation<'a, A>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    /// Selects and orders the nodes, acquires the Lease.
    async fn start(
        api: &'a A,
        plan: &'a Plan,
        progress: Arc<dyn ProgressSink>,
        stop: &'a Stop,
        started: Duration,
    ) -> Result<(Order, Rotation<'a, A>), Error> {
        let nodes = select(api, plan).await?;
        let order = Order::of(&nodes, plan.spec().concurrency as usize);
        let spec = plan.spec();
        let claim = Claim {
            operation: OPERATION.into(),
            target: plan.fingerprint().to_string(),
        };
        let limits = plan.limits(stop);
        let ctx = Context::begin(api, &spec.placement(), &claim, limits, progress, started).await?;
        ctx.progress.event(&Progress::Planned {
            nodes: order.all().len(),
        });
        let report = Report::new(
            plan.fingerprint().to_string(),
            order
                .all()
                .into_iter()
                .map(|name| NodeReport {
                    name,
                    before: None,
                    after: None,
                    result: None,
                    steps: Vec::new(),
                })
                .collect(),
            Gates::default(),
        );
        let uids = (nodes.iter())
            .filter_map(|n| Some((n.metadata.name.clone()?, n.metadata.uid.clone())))
            .collect();
        let rotation = Rotation {
            ctx,
            api,
            plan,
            tally: Mutex::new(Tally::default()),
            report: Mutex::new(report),
            ours: Mutex::new(None),
            seen: Mutex::new(BTreeMap::new()),
            uids,
            conditions: nodejob_roll::Conditions::new(nodejob_roll::condition::CA_ROTATION),
        };
        rotation.saw(nodes);
        Ok((order, rotation))
    }

    /// Releases the Lease and closes the report.
    async fn finish(self, outcome: Outcome) -> Report {
        self.condition_ends(&outcome).await;
        let mut report = self.report.into_inner().unwrap();
        let closed = self.ctx.end().await;
        report.close(outcome, closed.lease, closed.took_ms);
        report
    }

    /// Our leftover Jobs settled; then stage, issue, finalize, each on every node that has not
    /// passed it, each behind its gate (issue and finalize only on a plan that covers the
    /// cluster); returns how it ended.
    async fn forward(&self, order: &Order) -> Outcome {
        // Nothing is read or decided while a host Job of ours can still change its host: a
        // step of the rotation is taken as its phase would take it; an abort's is waited out.
        let leftovers = [
            (CaStep::Stage, Leftover::Adopt),
            (CaStep::Issue, Leftover::Adopt),
            (CaStep::Finalize, Leftover::Adopt),
            (CaStep::Abort, Leftover::WaitOut),
        ];
        let settled = match self.settle(order, &leftovers).await {
            Ok(acted) => acted,
            Err(outcome) => return outcome,
        };
        // A rotation no run has begun anywhere is read by its `stage`, whose output begins
        // with where each node stood: the start gate is checked on that, before issue. Any
        // trace of a run (a Job of ours, a node's mark or record) and every node is read
        // first, and the start gate checked before any step.
        let unread = !settled && self.untouched(order).await;
        let mut statuses = Vec::new();
        if !unread {
            statuses = match self.read_all(order).await {
                Ok(s) => s,
                Err(outcome) => return outcome,
            };
        }
        // What `verify` answered on each node in its issue Job, and what it expected.
        let mut verified = Verifies::new();
        if !unread && let Err(outcome) = self.gate(Gate::Start, &statuses, &verified).await {
            return outcome;
        }
        let mut finalizing = false;
        for phase in CaStep::PHASES {
            let gate = match phase {
                CaStep::Issue => Some(Gate::BeforeIssue),
                CaStep::Finalize => Some(Gate::BeforeFinalize),
                _ => None,
            };
            let pending = !self.pending(phase, order, &statuses).is_empty();
            finalizing |= phase == CaStep::Finalize && pending;
            if gate.is_some()
                && self.plan.spec().cluster_wide
                && pending
                && let Err(outcome) = self.covers_cluster(order, phase).await
            {
                return outcome;
            }
            if let Some(gate) = gate
                && let Err(outcome) = self.gate(gate, &statuses, &verified).await
            {
                return outcome;
            }
            // No finalize while a Job of ours is still going: issue Jobs are deleted without
            // waiting, and waited for here, all at once.
            if phase == CaStep::Finalize
                && let Err(why) = self.gone(order).await
            {
                return self.cannot_go_on(
                    format!("finalize did not begin: {why}"),
                    "run the same rotation again: it resumes from what the nodes report",
                );
            }
            // The next gate reads what each node that stepped printed in its phase Job.
            let ahead = unread && phase == CaStep::Stage;
            let stepped = match self.phase(phase, order, &statuses, ahead).await {
                Ok(stepped) => stepped,
                Err(outcome) => return outcome,
            };
            if !ahead {
                apply(&mut statuses, &mut verified, stepped);
                continue;
            }
            let before = match self.first_reads(order, stepped) {
                Ok((before, after)) => {
                    statuses = after;
                    before
                }
                Err(outcome) => return outcome,
            };
            if let Err(outcome) = self.gate(Gate::Start, &before, &verified).await {
                return outcome;
            }
        }
        if let Err(outcome) = self.gate(Gate::AfterFinalize, &statuses, &verified).await {
            return outcome;
        }
        // Nodes join a shared cluster at any time: one that joined while finalize ran has
        // been through none of it, and the run is not done while it is there.
        if finalizing && let Err(outcome) = self.none_joined(order).await {
            return outcome;
        }
        if let Err(why) = self.gone(order).await {
            return self.cannot_go_on(
                format!("every node is on the new CA, but {why}"),
                "run the same rotation again: it finds every phase passed and waits for them",
            );
        }
        self.finish_all(NodeResult::Rotated);
        Outcome::Done
    }

    /// The abort: our stage Jobs settled, refused once `issue` has begun anywhere in the
    /// cluster, else the new CA removed from every node of the plan that trusts it, and
    /// checked.
    async fn backward(&self, order: &Order) -> Result<Outcome, Error> {
        // A stage Job of ours still running is waited for (never killed), then deleted: no
        // stage lands after the abort.
        if let Err(outcome) = self
            .settle(order, &[(CaStep::Stage, Leftover::WaitOut)])
            .await
        {
            return Ok(outcome);
        }
        // A CA is cluster-wide: wherever `issue` has begun, even outside the plan, some node
        // presents (or is about to present) leaves of the new CA, which every node must keep
        // trusting. What the cluster holds is enough to refuse before a host is read: an issue
        // Job, or the record of a node outside the plan (the plan's own nodes are read next,
        // their status is the word). Refused so, the refusal names every node the cluster
        // shows, the plan's recorded ones too.
        let cluster = every_node(self.api).await?;
        let begun = issue_begun(self.api, self.plan, &cluster).await?;
        let planned = order.all();
        if (begun.iter()).any(|b| b.shown == Shown::Job || !planned.contains(&b.node)) {
            return Err(Error::abort_refused(
                begun.into_iter().map(|b| (b.node, b.why)),
            ));
        }
        let statuses = match self.read_all(order).await {
            Ok(s) => s,
            Err(outcome) => return Ok(outcome),
        };
        let new = self.plan.fingerprint();
        let begun: Vec<(String, String)> = statuses
            .iter()
            .filter(|(_, status)| status.issue_begun(new))
            .map(|(name, status)| (name.clone(), format!("it reports {}", status.describe())))
            .collect();
        if !begun.is_empty() {
            return Err(Error::abort_refused(begun));
        }
        let mut statuses = statuses;
        let mut verified = Verifies::new();
        match self.phase(CaStep::Abort, order, &statuses, false).await {
            Ok(stepped) => apply(&mut statuses, &mut verified, stepped),
            Err(outcome) => return Ok(outcome),
        }
        if let Err(outcome) = self.gate(Gate::AfterAbort, &statuses, &verified).await {
            return Ok(outcome);
        }
        if let Err(why) = self.gone(order).await {
            return Ok(self.cannot_go_on(
                format!("the new CA is removed from every node, but {why}"),
                "run the same abort again: it waits for them",
            ));
        }
        self.finish_all(NodeResult::Restored);
        Ok(Outcome::Done)
    }

    /// Before `phase` (issue or finalize) runs on any node: the plan covers every node of the
    /// cluster. A CA is cluster-wide: a node left out would not trust the leaves the others
    /// present (issue), or would present leaves they no longer trust (finalize).
    async fn covers_cluster(&self, order: &Order, phase: CaStep) -> Result<(), Outcome> {
        let cluster = match every_node(self.api).await {
            Ok(nodes) => {
                self.saw(nodes.clone());
                nodes
            }
            Err(e) => {
                return Err(self.cannot_go_on(
                    format!("{phase} did not begin: {e}"),
                    "run the same rotation again: it resumes from what the nodes report",
                ));
            }
        };
        let outside = outside(&cluster, &order.all());
        if outside.is_empty() {
            return Ok(());
        }
        Err(self.cannot_go_on(
            format!(
                "{phase} did not begin: a CA is cluster-wide, so a rotation's issue and finalize \
                 must cover every node of the cluster, and these nodes are outside the plan: {}",
                outside.join(", ")
            ),
            "run the rotation with every node of the cluster in its plan (no selector and no \
             nodes): it resumes from what the nodes report",
        ))
    }

    /// After finalize, the last read of the run: the nodes it selected are still all the
    /// selection has. The selection is listed again as the gates before issue and finalize
    /// list it (every node of the cluster for a cluster-wide plan; else the plan's selector;
    /// a plan that names its nodes and is not cluster-wide selects no other): a node in it that
    /// the run did not select joined while the run went on, did not go through the rotation
    /// (it may trust the old CA alone, which no node trusts any more), and is named, with a
    /// Warning Event on it. A rerun takes it through every phase from what it reports.
    async fn none_joined(&self, order: &Order) -> Result<(), Outcome> {
        let spec = self.plan.spec();
        let (listed, within) = match (spec.cluster_wide, &spec.selector) {
            (true, _) => (every_node(self.api).await, "the cluster".to_string()),
            (false, _) if !spec.nodes.is_empty() => return Ok(()),
            (false, selector) => {
                let selector = selector.as_deref().unwrap_or_default();
                let listed = retry(self.api, || self.api.list_nodes(selector))
                    .await
                    .map_err(|cause| {
                        Error::Selecting(Selecting::Listing {
                            selector: selector.to_string(),
                            cause,
                        })
                    });
                (listed, format!("the plan's selection ({selector:?})"))
            }
        };
        let listed = match listed {
            Ok(nodes) => nodes,
            Err(e) => {
                return Err(self.cannot_go_on(
                    format!("the nodes could not be listed after finalize: {e}"),
                    "run the same rotation again: it resumes from what the nodes report",
                ));
            }
        };
        let joined = outside(&listed, &order.all());
        if joined.is_empty() {
            return Ok(());
        }
        let why = format!(
            "{} joined {within} while the rotation ran and did not go through it (it may trust \
             the old CA alone): the rotation is not done until every node trusts the new CA \
             alone",
            joined.join(", ")
        );
        for node in &joined {
            self.event(node, EventType::Warning, CaStep::Finalize, &why)
                .await;
        }
        Err(self.cannot_go_on(
            why,
            "run the same rotation again: it takes the nodes that joined through every phase \
             from what they report, and runs no phase again on a node that passed it",
        ))
    }

    /// Settles the host Jobs of ours an earlier run or abort left on the nodes, for each of
    /// `steps` (control-plane nodes one at a time, then workers): one running or succeeded is
    /// waited for, never killed, and then deleted, before anything is read or decided there.
    /// A failed one is left for inspection: it changes nothing more.
    async fn settle(&self, order: &Order, steps: &[(CaStep, Leftover)]) -> Result<bool, Outcome> {
        // Our Jobs listed once: a node with none of them has nothing to settle. (Unlisted, each
        // node's are read one by one.)
        *self.ours.lock().unwrap() = our_jobs(self.api, self.plan).await.ok();
        self.batches(order, |name| async move {
            if steps.iter().all(|(step, _)| self.absent(*step, &name)) {
                return Ok(false);
            }
            let task = Task::Settle(steps.to_vec());
            self.node(&name, task)
                .await
                .map(|a| a == Answer::Acted(true))
        })
        .await
    }

    /// Runs `each` on the nodes of `order`, one pass of the engine in batches of a fixed
    /// width (control-plane nodes alone, then workers `concurrency` at a time): no batch
    /// starts once the failure budget is spent, a stop is requested, or the window is closed
    /// (the batch in flight finishes); the failures count toward the budget across the
    /// passes of the run. `Ok(true)` when any node did something.
    async fn batches<F, Fut>(&self, order: &Order, each: F) -> Result<bool, Outcome>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<bool, NodeResult>>,
    {
        let groups = order.groups();
        let acted = AtomicBool::new(false);
        let interrupted: Mutex<Option<String>> = Mutex::new(None);
        let mut tally = *self.tally.lock().unwrap();
        let failed_before = tally.failed;
        let engine = self.ctx.engine();
        let end = engine
            .pass(&mut tally, groups, &mut FixedWidth, |name| {
                let (acted, interrupted, each) = (&acted, &interrupted, &each);
                async move {
                    match each(name.clone()).await {
                        Ok(did) => {
                            acted.fetch_or(did, Ordering::Relaxed);
                            Settled(false)
                        }
                        Err(result) => {
                            let failed = !matches!(result, NodeResult::Interrupted { .. });
                            if let NodeResult::Interrupted { why, .. } = &result {
                                *interrupted.lock().unwrap() = Some(why.clone());
                            }
                            self.finish_node(&name, result);
                            Settled(failed)
                        }
                    }
                }
            })
            .await;
        *self.tally.lock().unwrap() = tally;
        if tally.failed > failed_before {
            return Err(self.failed_outcome());
        }
        if let Some(why) = interrupted.into_inner().unwrap() {
            return Err(self.stopping(why));
        }
        match end {
            End::Done => Ok(acted.into_inner()),
            End::Stopping(why) => Err(self.stopping(why)),
            End::LeaseLost(lost) => Err(self.stopping(lost.to_string())),
        }
    }

    /// Waits until the host Jobs of ours on the run's nodes that are being deleted are gone: the
    /// runner deletes a step's Job once it read its result, the issue Job is deleted once its
    /// status is recorded, neither waited for, and a Job deleted in the foreground stays until
    /// its Pod is gone. No finalize begins, and no run is done, while one is still there. One
    /// list, then a watch on each Job still there (those of the last batch, at most), each
    /// within [`DELETE_TIMEOUT`]; the error names those that did not go.
    async fn gone(&self, order: &Order) -> Result<(), NotGone> {
        let api = self.api;
        let ns = self.plan.spec().namespace.as_str();
        let ours = self.job_names(order);
        let listed = retry(api, || api.list_jobs(ns, LABEL_KEY))
            .await
            .map_err(NotGone::Unlisted)?;
        let going = (listed.into_iter()).filter(|j| {
            j.metadata.deletion_timestamp.is_some()
                && (j.metadata.name.as_ref()).is_some_and(|n| ours.contains(n))
        });
        let waits = going.map(|job| async move {
            let name = job.metadata.name.clone().unwrap_or_default();
            let uid = job.metadata.uid.clone();
            let get = || api.get_job(ns, &name);
            let wait = |since: Option<String>, t| {
                let name = &name;
                async move { api.wait_job(ns, name, since.as_deref(), t).await }
            };
            let gone = |j: Option<&Job>| j.is_none_or(|j| j.metadata.uid != uid);
            let seen = From::Seen(Some(job.clone()));
            match watch_until(api, DELETE_TIMEOUT, seen, get, wait, gone).await {
                Ok(Until::Met(_)) => None,
                Ok(Until::TimedOut(_)) => Some(Stuck::StillDeleting {
                    namespace: ns.into(),
                    name,
                    after: nodejob_core::duration::said(DELETE_TIMEOUT),
                }),
                Err((_, cause)) => Some(Stuck::Unwatched {
                    namespace: ns.into(),
                    name,
                    cause,
                }),
            }
        });
        let stuck: Vec<Stuck> = join_all(waits).await.into_iter().flatten().collect();
        if stuck.is_empty() {
            Ok(())
        } else {
            Err(NotGone::Stuck(stuck))
        }
    }

    /// Keeps `nodes` as the run last saw them.
    fn saw(&self, nodes: impl IntoIterator<Item = Node>) {
        let mut seen = self.seen.lock().unwrap();
        for node in nodes {
            if let Some(name) = node.metadata.name.clone() {
                seen.insert(name, node);
            }
        }
    }

    /// Whether no Job of ours of `step` was on `name` when the run listed them (so none is,
    /// until the step creates it).
    fn absent(&self, step: CaStep, name: &str) -> bool {
        let job = self.plan.job_name(step, name);
        (self.ours.lock().unwrap().as_ref()).is_some_and(|ours| !ours.contains(&job))
    }

    /// The nodes of `order` that have not passed `phase`, as `statuses` say.
    fn pending(
        &self,
        phase: CaStep,
        order: &Order,
        statuses: &[(String, CaStatus)],
    ) -> Vec<String> {
        let new = self.plan.fingerprint();
        order
            .all()
            .into_iter()
            .filter(|name| {
                !statuses
                    .iter()
                    .any(|(n, s)| n == name && phase.passed(s, new))
            })
            .collect()
    }

    /// The names of every host Job of ours the rotation could have on the nodes of `order`:
    /// each step's, the reads' too.
    fn job_names(&self, order: &Order) -> BTreeSet<String> {
        let steps: Vec<CaStep> = (STEPS.into_iter())
            .chain([CaStep::Status, CaStep::Verify])
            .collect();
        (order.all().iter())
            .flat_map(|node| steps.iter().map(|step| self.plan.job_name(*step, node)))
            .collect()
    }

    /// Whether no run of the rotation has begun on the nodes of `order`: our Jobs listed (none
    /// of the rotation's on them) and no node carrying a trace of it ([`records::traced`]), the
    /// nodes read again here, after the Lease and our Jobs: a run that held the Lease before
    /// this one took it (another process of the same identity, say) marked every node it went
    /// on to stage before its last read of the Lease, so before this run's. Unread, touched.
    async fn untouched(&self, order: &Order) -> bool {
        match select(self.api, self.plan).await {
            Ok(nodes) => self.saw(nodes),
            Err(_) => return false,
        }
        let names = self.job_names(order);
        let jobs_free =
            (self.ours.lock().unwrap().as_ref()).is_some_and(|ours| ours.is_disjoint(&names));
        let all = order.all();
        let seen = self.seen.lock().unwrap();
        let new = self.plan.fingerprint();
        jobs_free
            && all
                .iter()
                .all(|n| seen.get(n).is_some_and(|node| !records::traced(node, new)))
    }

    /// After `stage` on nodes the run did not read: what each node reported as its stage
    /// began (its output's first line; else what it reports after, less the new CA's trust),
    /// and after, in the order's order, each kept in the report. Every node stepped (a node
    /// that did not ended the run already).
    fn first_reads(
        &self,
        order: &Order,
        stepped: Vec<(String, Stepped)>,
    ) -> Result<StatusPair, Outcome> {
        let mut stepped: BTreeMap<String, Stepped> = stepped.into_iter().collect();
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for name in order.all() {
            let Some(s) = stepped.remove(&name) else {
                return Err(self.cannot_go_on(
                    format!("node {name} reported nothing after stage"),
                    "run the same rotation again: it reads every node first",
                ));
            };
            // A host that does not print where it stood: what it reports after, less the new
            // CA's trust, all a stage adds.
            let first = s.before.unwrap_or_else(|| {
                let mut before = s.status.clone();
                before.trusted.remove(self.plan.fingerprint());
                before
            });
            self.reported_before(&name, &first);
            before.push((name.clone(), first));
            after.push((name, s.status));
        }
        Ok((before, after))
    }

    /// One phase on every node that has not passed it (and on every node, to settle a Job of
    /// ours left there): each node whose host step ran, with what it reports after it.
    /// `ahead`: on nodes the run did not read, the mark written before each Job.
    async fn phase(
        &self,
        phase: CaStep,
        order: &Order,
        statuses: &[(String, CaStatus)],
        ahead: bool,
    ) -> Result<Vec<(String, Stepped)>, Outcome> {
        self.ctx
            .progress
            .event(&Progress::Driver(CaEvent::PhaseStarted {
                phase,
                nodes: self.pending(phase, order, statuses),
            }));
        let new = self.plan.fingerprint();
        let old = old_trust(new, statuses);
        let stepped = Mutex::new(Vec::new());
        self.batches(order, |name| {
            let (old, stepped) = (&old, &stepped);
            async move {
                let status = statuses.iter().find(|(n, _)| *n == name).map(|(_, s)| s);
                // `issue` verifies after it what the gate before finalize asks of the node.
                let also = match (phase, status) {
                    (CaStep::Issue, Some(status)) => expected(new, status, old.as_ref()),
                    _ => Vec::new(),
                };
                let task = Task::Phase {
                    step: phase,
                    status: status.cloned(),
                    took: self.took(&name, phase),
                    also,
                    absent: self.absent(phase, &name),
                    ahead,
                };
                match self.node(&name, task).await? {
                    Answer::Stepped(after) => {
                        stepped.lock().unwrap().push((name, after));
                        Ok(true)
                    }
                    answer => Ok(answer == Answer::Acted(true)),
                }
            }
        })
        .await?;
        Ok(stepped.into_inner().unwrap())
    }
}

impl<A> Rotation<'_, A>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    /// Checks `gate` on `statuses` (with `carotate verify`'s answer on every node first, before
    /// finalize: the one its issue Job gave, in `verified`, when it expected what the gate
    /// expects now; else a `verify` Job's), reports it, and on a disagreement names each node
    /// and stops.
    async fn gate(
        &self,
        gate: Gate,
        statuses: &[(String, CaStatus)],
        verified: &Verifies,
    ) -> Result<(), Outcome> {
        let new = self.plan.fingerprint();
        let mut answers: Vec<Option<Verified>> = vec![None; statuses.len()];
        if gate == Gate::BeforeFinalize {
            let old = old_trust(new, statuses);
            let mut ask = Vec::new();
            for (i, (name, status)) in statuses.iter().enumerate() {
                // A node whose report disagrees already is named for that.
                if &status.issuer != new || !status.chain_trusted() {
                    continue;
                }
                let also = expected(new, status, old.as_ref());
                match verified.get(name) {
                    Some((asked, answer)) if *asked == also => answers[i] = Some(answer.clone()),
                    _ => ask.push((i, also)),
                }
            }
            let width = self.plan.spec().concurrency.max(1) as usize;
            for chunk in ask.chunks(width) {
                let asked = join_all(chunk.iter().map(|(i, also)| {
                    let name = &statuses[*i].0;
                    self.verify(name, also.clone())
                }))
                .await;
                for ((i, _), answer) in chunk.iter().zip(asked) {
                    answers[*i] = Some(answer);
                }
            }
        }
        // A verify not asked because the Lease was lost says nothing about its node.
        if let Some(lost) = self.ctx.fence.lost() {
            return Err(self.stopping(lost.to_string()));
        }
        let checked = check(gate, new, statuses, &answers);
        self.ctx
            .progress
            .event(&Progress::Driver(CaEvent::Gate(checked.clone())));
        self.report.lock().unwrap().own.gates.push(checked.clone());
        if checked.passed() {
            return Ok(());
        }
        let step = match gate {
            Gate::Start => CaStep::Stage,
            Gate::BeforeIssue => CaStep::Issue,
            Gate::BeforeFinalize | Gate::AfterFinalize => CaStep::Finalize,
            Gate::AfterAbort => CaStep::Abort,
        };
        for d in &checked.disagreements {
            let message = format!("the rotation stops at the gate {gate}: {}", d.what);
            self.event(&d.node, EventType::Warning, step, &message)
                .await;
            self.finish_node(
                &d.node,
                NodeResult::Disagrees {
                    gate,
                    what: d.what.clone(),
                },
            );
        }
        Err(self.failed_outcome())
    }

    /// `carotate verify --expect <new> --expect <also>…` on `name`.
    async fn verify(&self, name: &str, also: Vec<Fingerprint>) -> Verified {
        match self.node(name, Task::Verify { also }).await {
            Ok(Answer::Verified(verified)) => verified,
            other => Verified::Error(format!("internal: verify answered {other:?}")),
        }
    }

    /// Every node's status as the run begins, read `concurrency` at a time (after it, each
    /// phase's Job says it). A node that cannot say fails the run, named.
    async fn read_all(&self, order: &Order) -> Result<Vec<(String, CaStatus)>, Outcome> {
        let all = order.all();
        let width = self.plan.spec().concurrency.max(1) as usize;
        let mut out = Vec::new();
        let mut failed = false;
        let mut interrupted = None;
        for chunk in all.chunks(width) {
            let read = join_all(chunk.iter().map(|n| self.read_status(n))).await;
            for (name, result) in chunk.iter().zip(read) {
                match result {
                    Ok(status) => {
                        self.reported(name, &status, true);
                        if let Err(e) = self.record(name, &status).await {
                            self.note(name, e.to_string());
                        }
                        out.push((name.clone(), status));
                    }
                    Err(NodeResult::Interrupted { why, .. }) => interrupted = Some(why),
                    Err(result) => {
                        failed = true;
                        self.finish_node(name, result);
                    }
                }
            }
        }
        if failed {
            return Err(self.failed_outcome());
        }
        if let Some(why) = interrupted {
            return Err(self.stopping(why));
        }
        Ok(out)
    }

    /// `carotate status` on `name`, read strictly.
    async fn read_status(&self, name: &str) -> Result<CaStatus, NodeResult> {
        match self.node(name, Task::Read).await? {
            Answer::Status(status) => Ok(status),
            other => Err(NodeResult::Failed(Failure {
                step: CaStep::Status,
                kind: FailureKind::Internal,
                message: format!("internal: a status read answered {other:?}"),
                exit_code: None,
                log_tail: None,
            })),
        }
    }

    /// Whether the run read `name`'s status already (its first read recorded as `before`).
    fn read_before(&self, name: &str) -> bool {
        let report = self.report.lock().unwrap();
        (report.nodes.iter()).any(|n| n.name == name && n.before.is_some())
    }

    /// Keeps `status` as what `name` reported when the run began, read from its first step.
    fn reported_before(&self, name: &str, status: &CaStatus) {
        let mut report = self.report.lock().unwrap();
        if let Some(n) = report.nodes.iter_mut().find(|n| n.name == name) {
            n.before = Some(status.clone());
        }
    }

    /// Keeps `status` as what `name` reports last (and, `first`, when the run began).
    fn reported(&self, name: &str, status: &CaStatus, first: bool) {
        let mut report = self.report.lock().unwrap();
        if let Some(n) = report.nodes.iter_mut().find(|n| n.name == name) {
            if first {
                n.before = Some(status.clone());
            }
            n.after = Some(status.clone());
        }
    }

    /// Whether this run took `step` on `name` (ran or adopted its Job).
    fn took(&self, name: &str, step: CaStep) -> bool {
        self.report
            .lock()
            .unwrap()
            .nodes
            .iter()
            .any(|n| n.name == name && n.steps.iter().any(|(s, _)| *s == step))
    }

    /// The API as the steps write through it: every write refused once the Lease is known
    /// lost, so a step in flight on another node writes nothing more ([`Fenced`]).
    fn writer(&self) -> Fenced<'_, A> {
        Fenced::new(self.api, &self.ctx.fence)
    }

    /// A failure of `name`: a Warning Event on it; the result to record.
    async fn fail(&self, name: &str, f: Failure) -> NodeResult {
        // A step cut short by the loss of the Lease (a write of it refused) blames no node.
        if let Some(lost) = self.ctx.fence.lost() {
            return NodeResult::Interrupted {
                step: f.step,
                why: lost.to_string(),
            };
        }
        let message = match f.exit_code {
            Some(code) => format!("{} (exit code {code})", f.message),
            None => f.message.clone(),
        };
        self.event(name, EventType::Warning, f.step, &message).await;
        NodeResult::Failed(f)
    }

    /// Records an Event on the node about `step` ([`Context::event`]: fenced by a read of
    /// the Lease right before it; failing to is a note, never the node's failure).
    async fn event(&self, node: &str, kind: EventType, step: CaStep, message: &str) {
        let ns = &self.plan.spec().namespace;
        let source = Source {
            namespace: ns,
            component: COMPONENT,
        };
        (self.ctx)
            .event(
                EventFence::Read,
                source,
                node,
                kind,
                &step.reason(),
                message,
            )
            .await;
    }

    fn note(&self, node: &str, message: String) {
        self.ctx.progress.event(&Progress::note(node, message));
    }

    fn finish_node(&self, name: &str, result: NodeResult) {
        let mut took_ms = 0;
        if let Some(n) = self
            .report
            .lock()
            .unwrap()
            .nodes
            .iter_mut()
            .find(|n| n.name == name)
        {
            n.result = Some(result.clone());
            took_ms = n.took_ms();
        }
        self.ctx.progress.event(&Progress::NodeFinished {
            node: name.to_string(),
            result,
            took_ms,
        });
    }

    fn finish_all(&self, result: NodeResult) {
        let names: Vec<String> = self
            .report
            .lock()
            .unwrap()
            .nodes
            .iter()
            .map(|n| n.name.clone())
            .collect();
        for name in names {
            self.finish_node(&name, result.clone());
        }
    }

    /// The Lease was lost and the run cut short where it stood: each node in flight is
    /// interrupted at its step (a host Job goes on in the cluster, never killed; a rerun adopts
    /// it), not left as if never started.
    fn lost(&self, lost: &LeaseLost) -> Outcome {
        let why = lost.to_string();
        for (name, step) in self.ctx.cut_short() {
            let why = why.clone();
            self.finish_node(&name, NodeResult::Interrupted { step, why });
        }
        self.stopping(why)
    }

    fn stopping(&self, why: String) -> Outcome {
        self.ctx
            .progress
            .event(&Progress::Stopping { why: why.clone() });
        match self.ctx.limits.paused.ended() {
            Some(p) => Outcome::Paused {
                why: nodejob_roll::paused_out(&p, self.ctx.limits.pause_deadline),
            },
            None => Outcome::Stopped { why },
        }
    }

    /// The run stops before the next phase with no node at fault: `why`, and `then` what to
    /// do.
    fn cannot_go_on(&self, why: String, then: &str) -> Outcome {
        self.ctx
            .progress
            .event(&Progress::Stopping { why: why.clone() });
        Outcome::Failed {
            nodes: Vec::new(),
            retry: format!("{why}. Then {then}"),
        }
    }

    /// The run stops: the nodes that failed or disagree, each named with where. What each
    /// says (which may quote its host) is in its result, not repeated here: the outcome stays
    /// the size of the list, whatever a host printed.
    fn failed_outcome(&self) -> Outcome {
        let report = self.report.lock().unwrap();
        let nodes: Vec<String> = (report.nodes.iter())
            .filter(|n| {
                matches!(
                    n.result,
                    Some(NodeResult::Failed(_) | NodeResult::Disagrees { .. })
                )
            })
            .map(|n| n.name.clone())
            .collect();
        let named: Vec<String> = report
            .nodes
            .iter()
            .filter_map(|n| match &n.result {
                Some(NodeResult::Failed(f)) => Some(format!("{} (failed at {})", n.name, f.step)),
                Some(NodeResult::Disagrees { gate, .. }) => {
                    Some(format!("{} (disagrees at the gate {gate})", n.name))
                }
                _ => None,
            })
            .collect();
        let why = format!(
            "stopped before the next phase: {}; each node's report says why",
            named.join(", ")
        );
        self.ctx
            .progress
            .event(&Progress::Stopping { why: why.clone() });
        Outcome::Failed {
            nodes,
            retry: format!(
                "{why}. Fix the node(s), then run the same rotation again (same certificate \
                 and fingerprint {}): it resumes from what the nodes report and never runs a \
                 phase again on a node that passed it",
                self.plan.fingerprint()
            ),
        }
    }
}
