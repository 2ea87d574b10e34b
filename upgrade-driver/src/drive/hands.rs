//! The upgrade's hands on one node ([`nodejob_roll::Hands`]): how each [`Intent`] of its
//! [`NodeMachine`] is performed through the API traits, and what the engine's executor
//! cannot know of them (which step waits on the pause switch, which intent is a write,
//! which ending is a failure). The executor does the rest: the fence, the pause, the stop,
//! the read after a wait, the marks told, the Events.

use std::sync::Arc;

use async_trait::async_trait;
use futures::future::{Either, select};
use k8s_openapi::api::core::v1::Node;
use nodejob_core::drain::{Drained, drain_into};
use nodejob_core::pause::Pause;
use nodejob_core::runner::{Mode, Policy};
use nodejob_core::unready_taint;
use nodejob_core::watch::{From, Until, watch_until};
use nodejob_core::{ApiError, JobApi, LeaseApi, NodeApi, PodApi, Spec, ready, run_exit_code_logs};
use nodejob_roll::{Act, Fenced, Hands, NoteSink, OpError, ReadAgain, Warning};
use nodejob_roll::{Cause, FailureKind};
use nodejob_roll::{delete_job, patch_node};

use super::{Run, blocked, conditions, get_node, host_observation, retry, rollback_drain};
use crate::machine::{DrainFailed, Intent, NodeMachine, NodeResult, Observation, Own};
use crate::machine::{Step, UpgradeStep};
use crate::progress::{Progress, UpgradeEvent};
use crate::records::{self, boot_id};

/// What the run keeps of one node while its machine runs: the node as our last write (or
/// the wait for its new boot) left it, and its resourceVersions.
pub(super) struct OnNode<'r, 'a, A: ?Sized> {
    run: &'r Run<'a, A>,
    name: String,
    /// Its UID as the run first read it.
    uid: Option<String>,
    last: Option<Node>,
    versions: conditions::Versions,
    /// The UID and last resourceVersion of the host Job a run kept ([`Policy::keep`]): where
    /// the wait for its deletion starts, with no read first.
    kept: Option<(String, String)>,
}

impl<'r, 'a, A> OnNode<'r, 'a, A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    /// The hands on `name`, first read as `first`.
    pub(super) fn new(run: &'r Run<'a, A>, name: &str, first: &Node) -> Self {
        let mut versions = conditions::Versions::default();
        versions.saw(first);
        OnNode {
            run,
            name: name.to_string(),
            uid: first.metadata.uid.clone(),
            last: None,
            versions,
            kept: None,
        }
    }

    /// The node as our last write, or the wait for its new boot, left it.
    pub(super) fn last(&self) -> Option<&Node> {
        self.last.as_ref()
    }

    /// The node written (or rebooted), as the machine sees it.
    fn wrote(&mut self, node: Node) -> Observation {
        self.last = Some(node.clone());
        Observation::Node(Box::new(node))
    }

    /// Our Job `job` in the plan's namespace, if it is there; `what` names it in an error.
    async fn find(&self, job: &str, what: &str) -> Observation {
        let (api, ns) = (self.run.api, &self.run.plan.spec().namespace);
        match retry(api, || api.get_job(ns, job)).await {
            Ok(job) => Observation::Job(Some(Box::new(job))),
            Err(e) if e.is_not_found() => Observation::Job(None),
            Err(e) => Observation::Failed(Cause::api(format!("reading {what}: {e}"))),
        }
    }

    /// Runs the host Job of `spec` (adopting the Job of UID `adopt`), kept once it ended, its
    /// notes told as the node's.
    async fn host(&mut self, spec: Spec, adopt: Option<String>, known_free: bool) -> Observation {
        let policy = Policy {
            adopt,
            keep: true,
            known_free,
        };
        let (run, api) = (self.run, self.run.api);
        let ran = (run.ctx)
            .host_job(api, &self.name, spec, Mode::ExitCodeLogs, policy)
            .await;
        self.kept =
            (ran.as_ref().ok()).and_then(|r| Some((r.uid.clone(), r.resource_version.clone()?)));
        host_observation(ran)
    }

    /// The version the kept Job of `uid` was last seen at, if the run that kept it was ours.
    fn seen(&mut self, uid: &str) -> Option<String> {
        (self.kept.take())
            .filter(|(kept, _)| kept == uid)
            .map(|(_, rv)| rv)
    }

    /// A node of ours left the roll skipped: told, and the end.
    fn skipped(&self, why: String) -> NodeResult {
        let event = UpgradeEvent::NodeSkipped {
            node: self.name.clone(),
            why: why.clone(),
        };
        self.run.ctx.progress.event(&Progress::Driver(event));
        NodeResult::Skipped { why }
    }
}

#[async_trait]
impl<A> Hands for OnNode<'_, '_, A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    type Machine = NodeMachine;
    type End = NodeResult;

    fn node(&self) -> &str {
        &self.name
    }

    /// Every step but the uncordon (which puts the node back) and a rollback decided on a
    /// failure (which does not leave a failed node half-way) waits on the pause switch.
    fn gate(&self, turn: &Step) -> Option<UpgradeStep> {
        turn.marks.iter().find_map(|m| match m {
            nodejob_roll::Mark::Started(s)
                if *s != UpgradeStep::Uncordon && *s != UpgradeStep::Rollback =>
            {
                Some(*s)
            }
            _ => None,
        })
    }

    fn fenced(&self, intent: &Intent) -> bool {
        matches!(
            intent,
            Intent::Patch { .. }
                | Intent::Guarded { .. }
                | Intent::Drain
                | Intent::Host { adopt: None, .. }
                | Intent::DeleteJob { .. }
                | Intent::Health
                | Intent::RollbackJob { adopt: None, .. }
                | Intent::DeleteRollbackJob { .. }
        )
    }

    /// The cordon is said with the drain it begins (`cordoned; evicted 2 pod(s), left 0`), as
    /// its condition is; the new boot with the step after it (the health check's, or the
    /// uncordon's: `rebooted, Ready at v1.38.0; uncordoned; at v1.38.0`). Three Events a node
    /// that upgrades (Drain, Upgrade, Uncordon), each saying what the ones it carries said.
    fn said_with_next(&self, step: UpgradeStep) -> bool {
        matches!(step, UpgradeStep::Cordon | UpgradeStep::Reboot)
    }

    /// A patch, a read, a find: requests, no wait. The Lease read before them still fences
    /// the writes that follow (the cordon's read fences the drain's evictions, the launch
    /// record's the host Job's create, the done record's the Event after it).
    fn waits(&self, intent: &Intent) -> bool {
        !matches!(
            intent,
            Intent::Patch { .. }
                | Intent::Guarded { .. }
                | Intent::Vet
                | Intent::Preflight
                | Intent::FindJob
                | Intent::FindPrevious { .. }
                | Intent::FindRollbackJob
        )
    }

    fn act(
        &mut self,
        _machine: &NodeMachine,
        intent: Intent,
    ) -> Act<Intent, UpgradeStep, NodeResult> {
        let result = match intent {
            Intent::Done(result) => result,
            intent => return Act::Do(intent),
        };
        let warning = match &result {
            NodeResult::Failed(f) => {
                return Act::Failed {
                    failure: f.clone(),
                    end: result,
                };
            }
            NodeResult::RolledBack { failure, version } => Some(Warning {
                reason: UpgradeStep::Rollback.reason(),
                message: format!(
                    "failed at {}: {}; rolled back to {version}",
                    failure.step, failure.message
                ),
            }),
            // Said on a node this run wrote to: one blocked before its first write has
            // nothing of ours on it.
            NodeResult::Blocked { why, .. } if self.last.is_some() => Some(Warning {
                reason: blocked::REASON.to_string(),
                message: why.clone(),
            }),
            _ => None,
        };
        Act::End {
            end: result,
            warning,
        }
    }

    async fn perform(
        &mut self,
        machine: &mut NodeMachine,
        intent: Intent,
    ) -> Result<Observation, NodeResult> {
        let (run, name) = (self.run, self.name.as_str());
        let api = run.api;
        let obs = match intent {
            Intent::Done(_) => unreachable!("an end is acted on, never performed"),
            Intent::Patch { rv, changes } => {
                let rv = self.versions.under(&rv);
                // The condition of the step it leads to, in the same write when it can go.
                let next = machine.starts_after_write();
                let written = match run.carried(name, next, &changes).await {
                    // Only metadata changes, idempotent (the patch's own rule, applied to
                    // whatever version a Conflict's read answers), and a condition merged by
                    // its type: written with no precondition, so a change by another writer
                    // since (the kubelet's status on its new boot, a label) meets no Conflict
                    // and costs no read of the node.
                    Some(standing) => {
                        let write = || run.write_carrying(name, None, &changes, &standing);
                        retry(api, write)
                            .await
                            .map_err(|cause| OpError::PatchingNode {
                                node: name.into(),
                                cause,
                            })
                    }
                    None => patch_node(api, name, &rv, &changes).await,
                };
                match written {
                    Ok(node) => self.wrote(node),
                    // Deleted before our first write to it (while the rolls were paused,
                    // say): nothing of ours was on it, so it leaves the roll as a node deleted
                    // before its turn does, skipped, not failed.
                    Err(
                        OpError::PatchingNode { cause, .. } | OpError::ReadingNode { cause, .. },
                    ) if cause.is_not_found() && machine.untouched() => {
                        let why = "deleted from the cluster before its upgrade started";
                        return Err(self.skipped(why.into()));
                    }
                    Err(e) => Observation::Failed(Cause::api(e.to_string())),
                }
            }
            Intent::Drain => {
                let notes = NoteSink::to(name, &run.ctx.progress);
                let mut drained = Drained::default();
                let options = &run.plan.spec().drain;
                let pods = Fenced::new(api, &run.ctx.fence);
                let result = if machine.current_step() == UpgradeStep::Rollback {
                    // Our failed host Job's Pod stays, for inspection. A rollback decided on
                    // a failure always runs: a stop does not cut its drain short.
                    let label_key = run.plan.host_spec(name).label_key;
                    let pods = rollback_drain::KeepingHostPods::new(pods, label_key);
                    drain_into(&pods, name, options, &notes, &mut drained).await
                } else {
                    // A drain protects no host operation: a stop asked while it waits (on a
                    // budget allowing no disruption, say) ends it at once, between two
                    // evictions, not at its timeout; the node, cordoned and ours, is left
                    // for a rerun, which drains it again.
                    let ended = {
                        let draining = drain_into(&pods, name, options, &notes, &mut drained);
                        let draining = std::pin::pin!(draining);
                        match select(draining, run.ctx.limits.stop.asked()).await {
                            Either::Left((result, _)) => Some(result),
                            Either::Right(_) => None,
                        }
                    };
                    let Some(result) = ended else {
                        if !drained.evicted.is_empty() {
                            evicted(run, name, std::mem::take(&mut drained.evicted));
                        }
                        return Err(NodeResult::Interrupted {
                            step: UpgradeStep::Drain,
                            why: "stopped on request during its drain; the node stays cordoned, \
                                  and a rerun drains it again"
                                .into(),
                        });
                    };
                    result
                };
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
                let rv = self.versions.under(&rv);
                // The condition of the step it leads to, in the same write when it can go: a
                // Conflict lands neither.
                let next = machine.starts_after_write();
                let written = match run.carried(name, next, &changes).await {
                    Some(standing) => {
                        run.write_carrying(name, Some(&rv), &changes, &standing)
                            .await
                    }
                    None => retry(api, || api.patch_node(name, &rv, &changes)).await,
                };
                match written {
                    Ok(node) => self.wrote(node),
                    Err(e) if e.is_conflict() => match get_node(api, name).await {
                        Ok(node) => Observation::Changed(Box::new(node)),
                        Err(e) => {
                            Observation::Failed(Cause::api(format!("reading node {name}: {e}")))
                        }
                    },
                    Err(e) => Observation::Failed(Cause::api(format!("patching node {name}: {e}"))),
                }
            }
            Intent::Vet => run.vet(name).await,
            Intent::Preflight => run.preflight(name).await,
            Intent::FindJob | Intent::FindPrevious { .. } => {
                let job = match &intent {
                    Intent::FindPrevious { target } => run.plan.job_name_toward(name, target),
                    _ => run.plan.job_name(name),
                };
                self.find(&job, "the host job").await
            }
            // Renewed while the host Job runs: the renewer runs beside the roll.
            Intent::Host { adopt, known_free } => {
                (self.host(run.plan.host_spec(name), adopt, known_free)).await
            }
            Intent::DeleteJob { uid } => {
                let seen = self.seen(&uid);
                match run.delete_job(&self.name, &uid, seen).await {
                    Ok(()) => Observation::Deleted,
                    Err(e) => Observation::Failed(Cause::api(e.to_string())),
                }
            }
            Intent::WaitReboot { boot_id: before } => {
                let timeout = run.plan.spec().reboot_timeout;
                // From the node as our last write answered it (the host Job's record): the
                // watch delivers every change after it, so a read first would tell nothing the
                // watch does not (and one too old for the watch is read again, a 410).
                let from = match &self.last {
                    Some(node) => From::Seen(Some(node.clone())),
                    None => From::Read,
                };
                let until = watch_until(
                    api,
                    timeout,
                    from,
                    || api.get_node(name),
                    |since, t| async move { api.wait_node(name, since.as_deref(), t).await },
                    // Deleted ends the wait at once: the watch says so when it happens. Ready
                    // on its new boot, and so by the control plane's taints too: the node
                    // lifecycle controller lifts `not-ready` (and `unreachable`, after a reboot
                    // longer than its grace period) a moment after the kubelet posts Ready, and
                    // the uncordon's write of the taints must follow that change, not meet it
                    // as a Conflict.
                    |seen| {
                        seen.is_none_or(|n| {
                            boot_id(n) != before && ready(n) && unready_taint(n).is_none()
                        })
                    },
                )
                .await;
                match until {
                    Ok(Until::Met(None)) => Observation::Rebooted {
                        node: None,
                        met: false,
                    },
                    Ok(Until::Met(node)) => {
                        self.last = node.clone();
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
                        Observation::Failed(Cause::api(format!("watching node {name}: {cause}")))
                    }
                }
            }
            Intent::Health => {
                let Some(mut spec) = run.plan.health_spec(name) else {
                    return Err(NodeResult::Upgraded);
                };
                spec.output = Some(Arc::new(NoteSink::to(name, &run.ctx.progress)));
                match run_exit_code_logs(api, &spec).await {
                    Ok((code, log)) => Observation::Health(Ok(code), Some(log)),
                    // The exit status stands without its log.
                    Err(nodejob_core::Error::LogUnread { exit_code, .. }) => {
                        Observation::Health(Ok(exit_code), None)
                    }
                    Err(e) => Observation::Health(Err(e.to_string()), None),
                }
            }
            Intent::FindRollbackJob => {
                let job = run.plan.rollback_job_name(name);
                self.find(&job, "the rollback job").await
            }
            Intent::RollbackJob {
                adopt,
                to,
                known_free,
            } => (self.host(run.plan.rollback_spec(name, &to), adopt, known_free)).await,
            Intent::DeleteRollbackJob { uid } => {
                let ns = &run.plan.spec().namespace;
                let job = run.plan.rollback_job_name(name);
                match delete_job(api, ns, &job, &uid, self.seen(&uid).as_deref()).await {
                    Ok(()) => Observation::Deleted,
                    Err(e) => Observation::Failed(Cause::api(e.to_string())),
                }
            }
            Intent::Soak { since, boot_id } => match run.soak(name, &since, &boot_id).await {
                Some(obs) => obs,
                None => {
                    return Err(NodeResult::Interrupted {
                        step: UpgradeStep::Soak,
                        why: "stopped on request during its soak; a rerun resumes it from its \
                              recorded start"
                            .into(),
                    });
                }
            },
        };
        match &obs {
            Observation::Node(n) | Observation::Changed(n) => self.versions.saw(n),
            Observation::Rebooted { node: Some(n), .. } => self.versions.saw(n),
            _ => {}
        }
        Ok(obs)
    }

    /// After the node waited on the pause switch, before `step` starts on it: still the one
    /// the run began with, and still selected unless ours. One deleted or replaced while the
    /// rolls were paused, or relabelled out of the selection before anything of ours was on
    /// it, leaves the roll skipped, `step` not started; one that cannot be read fails at
    /// `step`.
    async fn resumed(
        &mut self,
        step: UpgradeStep,
        read: Result<ReadAgain, ApiError>,
    ) -> Result<(), NodeResult> {
        let why = match read {
            // Relabelled out of the selection before anything of ours was on it: not ours to
            // start (one we hold is carried on whatever its labels, as at admission).
            Ok(ReadAgain::Same(node))
                if !self.run.selection.selects(&node) && !records::in_flight(&node) =>
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
                self.uid.as_deref().unwrap_or("none"),
                now.as_deref().unwrap_or("none")
            ),
            Ok(ReadAgain::Deleted) => format!(
                "deleted from the cluster while the rolls were paused: {step} was not started \
                 on it"
            ),
            Err(e) => {
                return Err(NodeResult::Failed(crate::machine::Failure {
                    step,
                    kind: FailureKind::Api,
                    message: format!(
                        "reading node {} after the pause, before {step}: {e}",
                        self.name
                    ),
                    exit_code: None,
                    log_tail: None,
                }));
            }
        };
        Err(self.skipped(why))
    }

    fn interrupted(&self, step: UpgradeStep, why: String) -> NodeResult {
        NodeResult::Interrupted { step, why }
    }

    async fn started(&mut self, step: UpgradeStep) {
        (self.run)
            .condition_step(&self.name, step, &mut self.versions)
            .await;
    }

    async fn paused(&mut self, step: UpgradeStep, pause: &Pause) {
        (self.run)
            .condition_paused(&self.name, step, pause, &mut self.versions)
            .await;
    }

    fn finished(&mut self, step: UpgradeStep, took_ms: u64) {
        (self.run).node_report(&self.name, |n| n.steps.push((step, took_ms)));
    }

    fn waited(&mut self, _before: UpgradeStep, waited_ms: u64) {
        (self.run).node_report(&self.name, |n| n.paused_ms += waited_ms);
    }

    async fn own(&mut self, own: Own) {
        match own {
            Own::Evicted(pods) => evicted(self.run, &self.name, pods),
        }
    }
}

/// Pods evicted from `name` by its drain: in the report and told.
fn evicted<A: ?Sized>(run: &Run<'_, A>, name: &str, pods: Vec<String>) {
    run.ledger
        .update(name, |n| n.pods_evicted.extend(pods.iter().cloned()));
    let event = UpgradeEvent::PodsEvicted {
        node: name.to_string(),
        pods,
    };
    run.ctx.progress.event(&Progress::Driver(event));
}
