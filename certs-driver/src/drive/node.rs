//! One node through one [`Task`]: [`Rotation::node`] hands its machine to the engine's
//! executor ([`nodejob_roll::Context::drive`]), with the rotation's hands on the node
//! ([`OnNode`]), which do each [`Intent`] through the API traits (every write through the
//! fenced writer). They decide nothing: the machine does. What the phases and the gates do
//! with its answers is the parent module's.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::runner::{Mode, Policy, Report, run_with};
use nodejob_core::watch::{From, Until, watch_until};
use nodejob_core::{ApiError, JobApi, LeaseApi, NodeApi, ready, run_exit_code, run_exit_code_logs};
use nodejob_roll::{Act, Hands, NoteSink, OpError, ReadAgain, delete_job, patch_node, retry};
use nodejob_roll::{Cause, FailureKind};

use super::{COMPONENT, Rotation};
use crate::cluster::{delete_exactly, job_of};
use crate::error::{Undeleted, Unrecorded};
use crate::fingerprint::Fingerprint;
use crate::machine::{Answer, Gone, Intent, NodeMachine, Observation, Own, Step, Task, Watched};
use crate::phase::CaStep;
use crate::progress::{CaEvent, Failure, NodeResult, Progress};
use crate::records;
use crate::status::CaStatus;

impl<A> Rotation<'_, A>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    /// Runs `task` on `name` to its end, through the engine's executor
    /// ([`nodejob_roll::Context::drive`]) and this node's [`OnNode`]: the answer, or how the
    /// node ended (a failure already named in a Warning Event). While a step is under way the
    /// node is in flight at it: a run cut short there reports it interrupted
    /// ([`Rotation::lost`]).
    pub(super) async fn node(&self, name: &str, task: Task) -> Result<Answer, NodeResult> {
        let mut machine = NodeMachine::new(self.plan, name, task);
        let turn = machine.start();
        let mut hands = OnNode {
            rotation: self,
            name: name.to_string(),
            watched: None,
            kept: None,
        };
        let uid = self.uids.get(name).cloned().flatten();
        let source = nodejob_roll::Source {
            namespace: &self.plan.spec().namespace,
            component: COMPONENT,
        };
        (self.ctx)
            .drive(source, &mut hands, &mut machine, turn, uid.as_deref())
            .await
    }

    /// The host Job of `step` on `name`, its output notes of the node.
    fn host_spec(&self, name: &str, step: CaStep, also: &[Fingerprint]) -> nodejob_core::Spec {
        let mut spec = self.plan.host_spec(step, name, also);
        spec.output = Some(Arc::new(NoteSink::to(name, &self.ctx.progress)));
        spec
    }

    /// Watches node `name` for at most `within`, from `from`, until it is `until` (a deleted
    /// node ends the wait as the Node watch reports it, not at the bound); with the node as the
    /// wait ended on it, kept as the run last saw it.
    async fn watch(
        &self,
        name: &str,
        within: Duration,
        from: From<Node>,
        until: fn(&Node) -> bool,
    ) -> (Watched, Option<Node>) {
        let api = self.api;
        let get = || api.get_node(name);
        let wait = |since: Option<String>, t| async move {
            api.wait_node(name, since.as_deref(), t).await
        };
        let ended = watch_until(api, within, from, get, wait, |n| n.is_none_or(until)).await;
        let (watched, last) = match ended {
            Ok(Until::Met(Some(n))) => (Watched::Met, Some(n)),
            Ok(Until::Met(None)) => (Watched::Deleted, None),
            Ok(Until::TimedOut(n)) => (Watched::TimedOut, n),
            Err((_, cause)) => (
                Watched::Failed(format!("watching node {name}: {cause}")),
                None,
            ),
        };
        self.saw(last.clone());
        (watched, last)
    }

    /// Records `status` on the node ([`records::LAST_STATUS`]): what a preview shows, and where an
    /// abort of any plan finds that `issue` began there. Refused once the Lease is known lost,
    /// as every write through the fenced writer; the mark of issue is written right after a
    /// read of it (the executor's: [`Hands::fenced`]). The error says why it could not.
    pub(super) async fn record(&self, name: &str, status: &CaStatus) -> Result<(), Unrecorded> {
        if let Some(lost) = self.ctx.fence.lost() {
            let node = name.into();
            return Err(Unrecorded::LeaseLost { node, lost });
        }
        let changes = [records::last_status(
            status,
            self.api.wall_time().to_string(),
        )];
        let unwritten = |cause| Unrecorded::Writing {
            node: name.into(),
            cause,
        };
        // Under the resourceVersion the run last saw (a conflict reads it again), else read.
        let seen =
            (self.seen.lock().unwrap().get(name)).and_then(|n| n.metadata.resource_version.clone());
        let rv = match seen {
            Some(rv) => rv,
            None => retry(self.api, || self.api.get_node(name))
                .await
                .map(|node| node.metadata.resource_version.unwrap_or_default())
                .map_err(|cause| {
                    let node = name.into();
                    unwritten(OpError::ReadingNode { node, cause })
                })?,
        };
        let node = (patch_node(&self.writer(), name, &rv, &changes).await).map_err(unwritten)?;
        self.saw([node]);
        Ok(())
    }

    /// Deletes our Job of `step` on `name` of `uid`, waiting until it is gone when `gone` says
    /// so, from `seen` (its resourceVersion as its run last saw it) when known; gone already
    /// (or replaced) is done.
    async fn delete_job(
        &self,
        name: &str,
        step: CaStep,
        uid: &str,
        gone: Gone,
        seen: Option<&str>,
    ) -> Result<(), Undeleted> {
        let ns = &self.plan.spec().namespace;
        let job = self.plan.job_name(step, name);
        match gone {
            Gone::Awaited => Ok(delete_job(&self.writer(), ns, &job, uid, seen).await?),
            Gone::Later => Ok(delete_exactly(&self.writer(), ns, &job, uid).await?),
        }
    }
}

/// The rotation's hands on one node ([`nodejob_roll::Hands`]): how each [`Intent`] of its
/// machine is performed through the API traits (every write through the fenced writer), and
/// its own marks told. The executor does the rest: the pause, the stop, the read after a
/// wait, the marks told, the Events.
struct OnNode<'r, 'a, A: ?Sized> {
    rotation: &'r Rotation<'a, A>,
    name: String,
    /// The node as the last wait on it ended: where a wait that follows at once resumes.
    watched: Option<Node>,
    /// The UID and last resourceVersion of the Job a run kept ([`Policy::keep`]): where the
    /// wait for its deletion starts, with no read first.
    kept: Option<(String, String)>,
}

impl<A: ?Sized> OnNode<'_, '_, A> {
    /// A run's report: the Job it kept, if it kept one.
    fn keep(&mut self, report: &Report) {
        self.kept = (report.resource_version.clone()).map(|rv| (report.uid.clone(), rv));
    }
}

#[async_trait]
impl<'a, A> Hands for OnNode<'_, 'a, A>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    type Machine = NodeMachine<'a>;
    type End = Result<Answer, NodeResult>;

    fn node(&self) -> &str {
        &self.name
    }

    /// A new host Job's step waits on the pause switch (an adopted Job is a step already in
    /// flight, and finishes).
    fn gate(&self, turn: &Step) -> Option<CaStep> {
        match &turn.intent {
            Intent::Host {
                step, adopt: None, ..
            } => Some(*step),
            _ => None,
        }
    }

    /// The record that is the mark of issue: the Lease is read right before it (and that read
    /// fences the issue Job's delete and the step's Finished Event that follow it with nothing
    /// waited on between).
    fn fenced(&self, intent: &Intent) -> bool {
        matches!(intent, Intent::Record { mark: true, .. })
    }

    /// A record or a mark, our Job read or deleted without waiting for it to go: requests, no
    /// wait. A read of the Lease before them still fences what follows them.
    fn waits(&self, intent: &Intent) -> bool {
        !matches!(
            intent,
            Intent::Record { .. }
                | Intent::MarkAhead { .. }
                | Intent::FindJob { .. }
                | Intent::DeleteJob {
                    gone: Gone::Later,
                    ..
                }
        )
    }

    fn act(
        &mut self,
        _machine: &NodeMachine<'a>,
        intent: Intent,
    ) -> Act<Intent, CaStep, Self::End> {
        match intent {
            Intent::Fail(failure) => Act::Failed {
                end: Err(NodeResult::Failed(failure.clone())),
                failure,
            },
            Intent::Done(end) => Act::End { end, warning: None },
            intent => Act::Do(intent),
        }
    }

    async fn perform(
        &mut self,
        _machine: &mut NodeMachine<'a>,
        intent: Intent,
    ) -> Result<Observation, Self::End> {
        let (rot, name) = (self.rotation, self.name.as_str());
        let obs = match intent {
            Intent::Fail(_) | Intent::Done(_) => {
                unreachable!("an end is acted on, never performed")
            }
            Intent::FindJob { step } => match job_of(rot.api, rot.plan, step, name).await {
                Ok(job) => Observation::Job(job.map(Box::new)),
                Err(e) => Observation::Failed(Cause::api(e.to_string())),
            },
            Intent::CheckLease => match rot.ctx.fence.check(rot.api).await {
                Ok(()) => Observation::LeaseHeld,
                Err(lost) => Observation::LeaseLost(lost),
            },
            Intent::MarkAhead { step } => match rot.mark_ahead(name, step).await {
                Ok(()) => Observation::Written,
                Err(why) => Observation::Failed(Cause::api(why.to_string())),
            },
            Intent::Host {
                step,
                adopt,
                also,
                keep,
                known_free,
            } => {
                let policy = Policy {
                    adopt,
                    keep,
                    known_free,
                };
                let spec = rot.host_spec(name, step, &also);
                // A new phase Job is a host-mutating write: the Lease is read right before it,
                // after the step's Started condition (a write of its own) and any wait, so a
                // Lease taken meanwhile is seen before the Job, which is then not created: the
                // node is interrupted at its step. It is the step's only read of the Lease
                // (the machine reads none before it). An adopted Job is already there.
                if policy.adopt.is_none()
                    && let Err(lost) = rot.ctx.fence.check(rot.api).await
                {
                    let why = lost.to_string();
                    return Err(Err(NodeResult::Interrupted { step, why }));
                }
                match run_with(&rot.writer(), &spec, Mode::ExitCodeLogs, policy).await {
                    Ok(report) => {
                        self.keep(&report);
                        Observation::Host(Ok(report))
                    }
                    Err(e @ nodejob_core::Error::LogUnread { exit_code: 0, .. }) => {
                        Observation::Unread(e.to_string())
                    }
                    Err(e) => Observation::Host(Err(e.to_string())),
                }
            }
            Intent::WaitJob { step, uid } => {
                let policy = Policy {
                    adopt: Some(uid),
                    keep: true,
                    known_free: false,
                };
                let spec = rot.host_spec(name, step, &[]);
                let ran = run_with(&rot.writer(), &spec, Mode::ExitCode, policy).await;
                if let Ok(report) = &ran {
                    self.keep(report);
                }
                Observation::Host(ran.map_err(|e| e.to_string()))
            }
            Intent::DeleteJob { step, uid, gone } => {
                let seen = (self.kept.take())
                    .filter(|(kept, _)| *kept == uid)
                    .map(|(_, rv)| rv);
                match rot
                    .delete_job(name, step, &uid, gone, seen.as_deref())
                    .await
                {
                    Ok(()) => Observation::Written,
                    Err(why) => Observation::Failed(Cause::api(why.to_string())),
                }
            }
            Intent::WaitNotReady => {
                let grace = rot.plan.spec().restart_grace;
                let (end, last) = rot.watch(name, grace, From::Read, |n| !ready(n)).await;
                self.watched = last;
                Observation::Watched(end)
            }
            Intent::WaitReady => {
                // Right after the wait for NotReady: on from the state it ended on.
                let from = (self.watched.take()).map_or(From::Read, |n| From::Seen(Some(n)));
                let timeout = rot.plan.spec().ready_timeout;
                let (end, _) = rot.watch(name, timeout, from, ready).await;
                Observation::Watched(end)
            }
            Intent::ReadStatus => {
                let spec = rot.host_spec(name, CaStep::Status, &[]);
                // The node's first read of the run, whose Job the run's list of our Jobs did
                // not hold: created without reading its name again (a Job met there all the
                // same is inspected by the runner's guard). Any later read follows one of ours
                // that may still be going.
                let policy = Policy {
                    adopt: None,
                    keep: false,
                    known_free: rot.absent(CaStep::Status, name) && !rot.read_before(name),
                };
                let mut read = run_with(&rot.writer(), &spec, Mode::ExitCodeLogs, policy)
                    .await
                    .map(|r| (r.exit_code, r.log.unwrap_or_default()));
                if let Err(lost @ nodejob_core::Error::LostInReboot { .. }) = &read {
                    // A read changes nothing on the host: lost to a reboot of the node, it is
                    // read once more when the node is back Ready (its Job replaced).
                    rot.note(
                        name,
                        format!("{lost}; reading it again once the node is Ready"),
                    );
                    let timeout = rot.plan.spec().ready_timeout;
                    rot.watch(name, timeout, From::Read, ready).await;
                    read = run_exit_code_logs(&rot.writer(), &spec).await;
                }
                Observation::Status(read.map_err(|e| e.to_string()))
            }
            // The mark of issue: the executor read the Lease right before this turn.
            Intent::Record {
                status, rotated, ..
            } => {
                let recorded = match rotated {
                    true => rot.record_rotated(name, &status).await,
                    false => rot.record(name, &status).await,
                };
                match recorded {
                    Ok(()) => Observation::Written,
                    Err(why) => Observation::Failed(Cause::api(why.to_string())),
                }
            }
            Intent::Verify { also } => {
                let spec = rot.host_spec(name, CaStep::Verify, &also);
                let exit = run_exit_code(&rot.writer(), &spec).await;
                Observation::Exit(exit.map_err(|e| e.to_string()))
            }
        };
        Ok(obs)
    }

    /// After the node waited on the pause switch, before `step` starts on it: still the node
    /// the run first read (same UID). Deleted or replaced while the rolls were paused, it is
    /// interrupted before the step, which is not started there (the run then stops, and a
    /// rerun selects its nodes again); unreadable, it fails.
    async fn resumed(
        &mut self,
        step: CaStep,
        read: Result<ReadAgain, ApiError>,
    ) -> Result<(), Self::End> {
        let (rot, name) = (self.rotation, self.name.as_str());
        let first = rot.uids.get(name).cloned().flatten();
        let sub = step.subcommand();
        let why = match read {
            Ok(ReadAgain::Same(node)) => {
                rot.saw([*node]);
                return Ok(());
            }
            Ok(ReadAgain::Replaced { now }) => format!(
                "node {name} was replaced while the rolls were paused, before {step} (uid {} \
                 now, {} when the run read it): `carotate {sub}` was not started on it (no job \
                 was created for it); a rerun takes the new node through the rotation from \
                 what it reports",
                now.as_deref().unwrap_or("none"),
                first.as_deref().unwrap_or("none"),
            ),
            Ok(ReadAgain::Deleted) => format!(
                "node {name} was deleted from the cluster while the rolls were paused, before \
                 {step}: `carotate {sub}` was not started on it (no job was created for it); a \
                 rerun selects the plan's nodes again"
            ),
            Err(e) => {
                let failure = Failure {
                    step,
                    kind: FailureKind::Api,
                    message: format!(
                        "reading node {name} after the pause, before {step}: {e}; `carotate \
                         {sub}` was not started on it"
                    ),
                    exit_code: None,
                    log_tail: None,
                };
                return Err(Err(rot.fail(name, failure).await));
            }
        };
        Err(Err(NodeResult::Interrupted { step, why }))
    }

    fn interrupted(&self, step: CaStep, why: String) -> Self::End {
        Err(NodeResult::Interrupted { step, why })
    }

    async fn started(&mut self, step: CaStep) {
        self.rotation.condition_step(&self.name, step).await;
    }

    fn finished(&mut self, step: CaStep, took_ms: u64) {
        let mut report = self.rotation.report.lock().unwrap();
        if let Some(n) = report.nodes.iter_mut().find(|n| n.name == self.name) {
            n.steps.push((step, took_ms));
        }
    }

    async fn own(&mut self, own: Own) {
        match own {
            Own::Skipped(step, why) => {
                let event = CaEvent::NodeSkipped {
                    node: self.name.clone(),
                    step,
                    why,
                };
                self.rotation.ctx.progress.event(&Progress::Driver(event));
            }
            Own::Reported(status) => self.rotation.reported(&self.name, &status, false),
        }
    }
}
