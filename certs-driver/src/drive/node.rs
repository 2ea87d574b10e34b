//! The executor of the per-node machine: [`Rotation::node`] runs one node through one
//! [`Task`], doing each [`Intent`] through the API traits (every write through the fenced
//! writer) and turning each [`Mark`] into progress, the report and the node's Events. It
//! decides nothing: the machine does. What the phases and the gates do with its answers is
//! the parent module's.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nodejob_core::runner::{Mode, Policy, run_with};
use nodejob_core::watch::{From, Until, watch_until};
use nodejob_core::{
    EventType, JobApi, LeaseApi, NodeApi, ready, run_exit_code, run_exit_code_logs,
};
use nodejob_roll::{NoteSink, Passed, ReadAgain, delete_job, millis, patch_node, retry};

use super::Rotation;
use crate::cluster::{delete_exactly, job_of};
use crate::fingerprint::Fingerprint;
use crate::machine::{Answer, Gone, Intent, Mark, NodeMachine, Observation, Task, Watched};
use crate::phase::CaStep;
use crate::progress::{CaEvent, Failure, NodeResult, Progress};
use crate::records;
use crate::status::CaStatus;

/// How a record on a node is fenced by the Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fencing {
    /// Read right before the write (renewed when due): the write of a mark.
    Checked,
    /// As every write through the fenced writer: refused once the Lease is known lost (a
    /// check or the renewer saw it), without a read of its own.
    Known,
}

/// The executor of the per-node machine: one node through one [`Task`], each [`Intent`]
/// done through the API traits, each [`Mark`] into progress, the report and the node's Events.
impl<A> Rotation<'_, A>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    /// Runs `task` on `name` to its end: the answer, or how the node ended (a failure already
    /// named in a Warning Event). While a step is under way the node is in flight at it: a run
    /// cut short there reports it interrupted ([`Rotation::lost`]).
    pub(super) async fn node(&self, name: &str, task: Task) -> Result<Answer, NodeResult> {
        let mut machine = NodeMachine::new(self.plan, name, task);
        let mut step = machine.start();
        let mut started = self.api.now();
        // The node as the last wait on it ended: where a wait that follows at once resumes.
        let mut watched: Option<Node> = None;
        loop {
            // The pause switch where a host step would begin (its Lease check just read it; an
            // adopted Job is a step already in flight, and finishes): paused, the node waits.
            // The step was decided on what was read before the wait: after it, the node is
            // read again, and one deleted or replaced meanwhile does not start it.
            if let Intent::Host {
                step: s,
                adopt: None,
                ..
            } = &step.intent
            {
                let passed = match self.paused_before(name, *s).await {
                    Ok(Passed::Unpaused) => Ok(()),
                    Ok(Passed::Resumed) => self.still_there(name, *s).await,
                    Err(why) => Err(NodeResult::Interrupted { step: *s, why }),
                };
                if let Err(result) = passed {
                    self.fly(name, None);
                    return Err(result);
                }
            }
            // Marks belong to where the node was: a step's end is reported while it is
            // still in flight.
            for mark in std::mem::take(&mut step.marks) {
                self.mark(name, mark, &mut started).await;
            }
            self.fly(name, machine.in_flight());
            let obs = match step.intent {
                Intent::Done(end) => {
                    self.fly(name, None);
                    return end;
                }
                Intent::Fail(f) => {
                    let result = self.fail(name, f).await;
                    self.fly(name, None);
                    return Err(result);
                }
                Intent::FindJob { step } => match job_of(self.api, self.plan, step, name).await {
                    Ok(job) => Observation::Job(job.map(Box::new)),
                    Err(e) => Observation::Failed(e.to_string()),
                },
                Intent::CheckLease => match self.fence.check(self.api).await {
                    Ok(()) => Observation::LeaseHeld,
                    Err(why) => Observation::LeaseLost(why),
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
                    let spec = self.host_spec(name, step, &also);
                    // A new phase Job is a host-mutating write: the Lease is read right before
                    // it, after the step's Started condition (a write of its own) and any wait,
                    // so a Lease taken meanwhile is seen before the Job, which the fenced
                    // writer then refuses. An adopted Job is already there.
                    if policy.adopt.is_none() {
                        let _ = self.fence.check(self.api).await;
                    }
                    match run_with(&self.writer(), &spec, Mode::ExitCodeLogs, policy).await {
                        Ok(report) => Observation::Host(Ok(report)),
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
                    let spec = self.host_spec(name, step, &[]);
                    let ran = run_with(&self.writer(), &spec, Mode::ExitCode, policy).await;
                    Observation::Host(ran.map_err(|e| e.to_string()))
                }
                Intent::DeleteJob { step, uid, gone } => {
                    match self.delete_job(name, step, &uid, gone).await {
                        Ok(()) => Observation::Written,
                        Err(why) => Observation::Failed(why),
                    }
                }
                Intent::WaitNotReady => {
                    let grace = self.plan.spec().restart_grace;
                    let (end, last) = self.watch(name, grace, From::Read, |n| !ready(n)).await;
                    watched = last;
                    Observation::Watched(end)
                }
                Intent::WaitReady => {
                    // Right after the wait for NotReady: on from the state it ended on.
                    let from = watched.take().map_or(From::Read, |n| From::Seen(Some(n)));
                    let timeout = self.plan.spec().ready_timeout;
                    let (end, _) = self.watch(name, timeout, from, ready).await;
                    Observation::Watched(end)
                }
                Intent::ReadStatus => {
                    let spec = self.host_spec(name, CaStep::Status, &[]);
                    let mut read = run_exit_code_logs(&self.writer(), &spec).await;
                    if let Err(lost @ nodejob_core::Error::LostInReboot { .. }) = &read {
                        // A read changes nothing on the host: lost to a reboot of the node, it
                        // is read once more when the node is back Ready (its Job replaced).
                        self.note(
                            name,
                            format!("{lost}; reading it again once the node is Ready"),
                        );
                        let timeout = self.plan.spec().ready_timeout;
                        self.watch(name, timeout, From::Read, ready).await;
                        read = run_exit_code_logs(&self.writer(), &spec).await;
                    }
                    Observation::Status(read.map_err(|e| e.to_string()))
                }
                Intent::Record { status, mark } => {
                    let fence = if mark {
                        Fencing::Checked
                    } else {
                        Fencing::Known
                    };
                    match self.record(name, &status, fence).await {
                        Ok(()) => Observation::Written,
                        Err(why) => Observation::Failed(why),
                    }
                }
                Intent::Verify { also } => {
                    let spec = self.host_spec(name, CaStep::Verify, &also);
                    let exit = run_exit_code(&self.writer(), &spec).await;
                    Observation::Exit(exit.map_err(|e| e.to_string()))
                }
            };
            step = machine.step(obs);
        }
    }

    /// Waits while the rolls are paused, before `step` starts on `name`, saying so in the
    /// progress ([`nodejob_roll::pause_before`]): how the node went past the switch, or why it
    /// goes no further.
    async fn paused_before(&self, name: &str, step: CaStep) -> Result<Passed, String> {
        let note = |message| self.note(name, message);
        nodejob_roll::pause_before(self.api, &self.fence, &self.limits, step, note).await
    }

    /// After the node waited on the pause switch, before `step` starts on `name`: the node
    /// read again is still the one the run first read (same UID). Deleted or replaced while
    /// the rolls were paused, it is interrupted before the step, which is not started there
    /// (the run then stops, and a rerun selects its nodes again); unreadable, it fails.
    async fn still_there(&self, name: &str, step: CaStep) -> Result<(), NodeResult> {
        let first = self.uids.get(name).cloned().flatten();
        let sub = step.subcommand();
        let why = match nodejob_roll::read_again(self.api, name, first.as_deref()).await {
            Ok(ReadAgain::Same(node)) => {
                self.saw([*node]);
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
                    message: format!(
                        "reading node {name} after the pause, before {step}: {e}; `carotate \
                         {sub}` was not started on it"
                    ),
                    exit_code: None,
                    log_tail: None,
                };
                return Err(self.fail(name, failure).await);
            }
        };
        Err(NodeResult::Interrupted { step, why })
    }

    /// One mark of `name`'s machine; `started`: when its step at hand started.
    async fn mark(&self, name: &str, mark: Mark, started: &mut Duration) {
        match mark {
            Mark::Note(message) => self.note(name, message),
            Mark::Started(step) => {
                *started = self.api.now();
                self.progress.event(&Progress::StepStarted {
                    node: name.to_string(),
                    step,
                });
                self.condition_step(name, step).await;
            }
            Mark::Finished(step, message) => {
                let took = millis(self.api.now().saturating_sub(*started));
                if let Some(n) =
                    (self.report.lock().unwrap().nodes.iter_mut()).find(|n| n.name == name)
                {
                    n.steps.push((step, took));
                }
                self.progress.event(&Progress::StepFinished {
                    node: name.to_string(),
                    step,
                    took_ms: took,
                    message: message.clone(),
                });
                self.event(name, EventType::Normal, step, &message).await;
            }
            Mark::Skipped(step, why) => {
                self.progress.event(&Progress::Driver(CaEvent::NodeSkipped {
                    node: name.to_string(),
                    step,
                    why,
                }))
            }
            Mark::Reported(status) => self.reported(name, &status, false),
        }
    }

    /// Keeps `name` in flight at `step` (`None`: no longer).
    fn fly(&self, name: &str, step: Option<CaStep>) {
        let mut in_flight = self.in_flight.lock().unwrap();
        match step {
            Some(step) => in_flight.insert(name.to_string(), step),
            None => in_flight.remove(name),
        };
    }

    /// The host Job of `step` on `name`, its output notes of the node.
    fn host_spec(&self, name: &str, step: CaStep, also: &[Fingerprint]) -> nodejob_core::Spec {
        let mut spec = self.plan.host_spec(step, name, also);
        spec.output = Some(Arc::new(NoteSink::to(name, &self.progress)));
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
    /// abort of any plan finds that `issue` began there (then `fence` is
    /// [`Fencing::Checked`]). The error says why it could not.
    pub(super) async fn record(
        &self,
        name: &str,
        status: &CaStatus,
        fence: Fencing,
    ) -> Result<(), String> {
        let lost = match fence {
            Fencing::Checked => self.fence.check(self.api).await.err(),
            Fencing::Known => self.fence.lost(),
        };
        if let Some(why) = lost {
            return Err(format!(
                "could not record the status on node {name}: the Lease was lost: {why}"
            ));
        }
        let changes = [records::last_status(
            status,
            self.api.wall_time().to_string(),
        )];
        // Under the resourceVersion the run last saw (a conflict reads it again), else read.
        let seen =
            (self.seen.lock().unwrap().get(name)).and_then(|n| n.metadata.resource_version.clone());
        let rv = match seen {
            Some(rv) => Ok(rv),
            None => retry(self.api, || self.api.get_node(name))
                .await
                .map(|node| node.metadata.resource_version.unwrap_or_default())
                .map_err(|e| format!("reading node {name}: {e}")),
        };
        let written = match rv {
            Ok(rv) => match patch_node(&self.writer(), name, &rv, &changes).await {
                Ok(node) => {
                    self.saw([node]);
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            },
            Err(why) => Err(why),
        };
        written.map_err(|e| format!("could not record the status on node {name}: {e}"))
    }

    /// Deletes our Job of `step` on `name` of `uid` exactly, waiting until it is gone when
    /// `gone` says so; gone already (or replaced) is done.
    async fn delete_job(
        &self,
        name: &str,
        step: CaStep,
        uid: &str,
        gone: Gone,
    ) -> Result<(), String> {
        let ns = &self.plan.spec().namespace;
        let job = self.plan.job_name(step, name);
        match gone {
            Gone::Awaited => delete_job(&self.writer(), ns, &job, uid)
                .await
                .map_err(|e| e.to_string()),
            Gone::Later => delete_exactly(&self.writer(), ns, &job, uid).await,
        }
    }
}
