//! The pod worker: one task per pod bound to an adopted node, playing the kubelet's part for
//! it as the fake kubelet does.
//!
//! ```text
//!  seen ──START_DELAY, node Ready──▶ Running ──its run──▶ exited ──▶ (deleted) ──▶ DELETE grace 0
//!   │                                  │       (host program only;
//!   │                                  │        a workload runs until deleted)
//!   │ deleted (node Ready): Failed,    │ deleted: SIGTERM, exit 143 after the kill delay; or,
//!   ▼ DELETE grace 0                   ▼ ignoring it, SIGKILL after the grace period, exit 137;
//!                                      │ then after CLEANUP: DELETE grace 0
//!                                      │ its node boots again (restartPolicy: Never): lost,
//!                                      ▼ Failed, exit 255, reason Unknown ──▶ (deleted) ──▶ …
//! ```
//!
//! A running pod is `Running` with its container ready and its `Ready` condition `True`, which
//! is what a ReplicaSet's availability and a PodDisruptionBudget's `currentHealthy` count.
//!
//! What the container does is decided as it starts, by the fake kubelet's rules
//! ([`nodejob_host::Plan::of`]): its argv's `nodejob-test:` directives, else the node's host
//! model for an argv that execs `stratum` (the exec is counted on the node's host, and what
//! follows the program's exit, a reboot or a restart, is played on it: [`crate::host::play`]),
//! else the defaults (2s, exit 0, no output).
//!
//! While the node is NotReady (annotation `nodejob.test/ready: "false"`), the worker does
//! nothing the apiserver would see: no container starts, an exit or a kill is reported only
//! once the node is Ready again (with the time it happened), and no deletion is confirmed;
//! the fake parks its kubelet's steps the same way. Only a pod already terminated is deleted
//! at once, as the apiserver itself does (grace 0 for a terminal pod).
//!
//! When the node boots again (a new `bootID` on its host: a reboot after `stratum upgrade` or
//! `rollback`, a reboot by itself, the node adopted again, the agent restarted) while a
//! container of a pod that is not restarted after a reboot runs there
//! ([`ends_in_reboot`]: `restartPolicy: Never`, a Job's pod), the container is lost, as a real
//! kubelet finds it gone on the new boot and as the fake's kubelet plays it: its pod is
//! written `Failed` once, its container terminated as
//! [`lost_in_reboot`](nodejob_host::status::lost_in_reboot) (exit 255, reason `Unknown`, no
//! message), and what its program would have printed or done after (its exit, its log, its
//! host's aftermath) never happens. That holds too for an exit not yet reported when the node
//! booted (it happened while the node was NotReady): a program's aftermath is played from its
//! exit once the exit is reported, as the fake plays a parked exit. A pod restarted after a
//! reboot (`Always`, `OnFailure`) runs on: its restart is not modelled, as in the fake.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nodejob_host::status::{REBOOT_EXIT, ends_in_reboot};
use nodejob_host::termination::{self, KILL_DELAY, OnSigterm, POD_CLEANUP};
use nodejob_host::{Effect, Fallback, Plan, Program};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};

use crate::host::{NodeHost, play};
use crate::logbook::{LogBook, Output, PodKey};
use crate::node_state::NodeState;
use crate::status::{Exit, PodFacts, failed_unstarted, keep_conditions};
use crate::writer::{PodWriter, WriteError};

/// From a pod's arrival to its container's start (node Ready).
pub(crate) const START_DELAY: Duration = Duration::from_millis(500);

/// When, after its pod's deletion with grace period `grace`, a running container ends, and its
/// exit status: the fake kubelet's rule with its default timing (SIGTERM ends a program that
/// does not trap it after [`KILL_DELAY`], exit 143; SIGKILL at the end of the grace period, at
/// least 1s, exit 137).
fn stop(grace: Duration, on_sigterm: OnSigterm) -> (Duration, i32) {
    termination::stop(grace, KILL_DELAY, on_sigterm)
}
/// The first pause between two tries of a failed write; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// How a running container ended.
#[derive(Debug)]
enum End {
    /// Its program exited on its own at `at`, with `exit_code` and `log`; `effects` are what
    /// then happens to its node's host.
    Exited {
        exit_code: i32,
        log: String,
        at: Instant,
        effects: Vec<Effect>,
    },
    /// The kubelet's signal ended it (its pod deleted), with this exit status.
    Killed(i32),
    /// Its node booted again under it: the runtime finds it gone
    /// ([`lost_in_reboot`](nodejob_host::status::lost_in_reboot)).
    Lost,
}

/// The pod is gone from the apiserver (or the agent stops): the worker ends.
#[derive(Debug)]
struct Gone;

/// One pod's kubelet.
pub(crate) struct PodWorker<W> {
    writer: W,
    logs: LogBook,
    key: PodKey,
    node: String,
    facts: PodFacts,
    /// The pod's first container, as first seen.
    container: Container,
    /// The pod as last seen; `None` once it is gone.
    pod: watch::Receiver<Option<Pod>>,
    /// Whether the node is Ready, and what its containers do on SIGTERM.
    node_state: watch::Receiver<NodeState>,
    /// The node's host: what a program that execs `stratum` does on it.
    host: watch::Sender<NodeHost>,
}

/// Where a pod first seen by this agent stands, from its status.
#[derive(Debug, PartialEq, Eq)]
enum Stage {
    /// Its container has not started: the normal case.
    New,
    /// Its container runs (the agent restarted): it runs its plan again from now.
    Running { started_at: Time },
    /// It has ended.
    Terminal,
}

fn stage_of(pod: &Pod) -> Stage {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Stage::Terminal;
    }
    let state = (status.and_then(|s| s.container_statuses.as_ref()))
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref());
    match state {
        Some(s) if s.terminated.is_some() => Stage::Terminal,
        Some(s) => match s.running.as_ref() {
            Some(running) => Stage::Running {
                started_at: running.started_at.clone().unwrap_or_else(now),
            },
            None => Stage::New,
        },
        None => Stage::New,
    }
}

/// The next change of the pod; `Gone` once it is (its sender dropped, or `None` sent).
async fn pod_changed(pod: &mut watch::Receiver<Option<Pod>>) -> Result<(), Gone> {
    pod.changed().await.map_err(|_| Gone)?;
    if pod.borrow().is_none() {
        return Err(Gone);
    }
    Ok(())
}

fn now() -> Time {
    Time(Timestamp::now())
}

/// Sleeps until `at`; for ever when there is no `at`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl<W: PodWriter> PodWorker<W> {
    /// A worker for `pod`, on node `node` whose address is `facts.host_ip` and whose host is
    /// `host`. `None` for a pod without a container or a name.
    pub(crate) fn new(
        writer: W,
        logs: LogBook,
        node: &str,
        host_ip: std::net::Ipv4Addr,
        pod: watch::Receiver<Option<Pod>>,
        node_state: watch::Receiver<NodeState>,
        host: watch::Sender<NodeHost>,
    ) -> Option<Self> {
        let (key, facts, container) = {
            let current = pod.borrow();
            let p = current.as_ref()?;
            let spec = p.spec.as_ref()?;
            let container = spec.containers.first()?;
            let key = PodKey {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone()?,
                uid: p.metadata.uid.clone()?,
            };
            let facts = PodFacts {
                uid: key.uid.clone(),
                container: container.name.clone(),
                image: container.image.clone().unwrap_or_default(),
                host_ip,
                host_network: spec.host_network == Some(true),
            };
            let names = spec.containers.iter().map(|c| c.name.clone()).collect();
            logs.open(&key, node, names);
            (key, facts, container.clone())
        };
        Some(PodWorker {
            writer,
            logs,
            key,
            node: node.to_string(),
            facts,
            container,
            pod,
            node_state,
            host,
        })
    }

    /// What the container does, decided as it starts, and the boot of its node it starts in
    /// (its `bootID`): a program that execs `stratum` is exec'd on the node's host model (and
    /// counted there).
    fn plan(&self) -> (Plan, String) {
        let pod = self.pod.borrow().clone().unwrap_or_default();
        let mut plan = Plan {
            program: Program::Workload,
            on_sigterm: None,
        };
        let mut boot = String::new();
        self.host.send_if_modified(|host| {
            let before = host.model.state.clone();
            plan = Plan::of(&pod, &self.container, &Fallback::default(), &mut host.model);
            boot.clone_from(&host.model.state.boot_id);
            host.model.state != before
        });
        (plan, boot)
    }

    /// Whether the container, started in boot `boot` of its node, is lost: the node booted
    /// again since, and the pod is one the kubelet does not restart after a reboot
    /// ([`ends_in_reboot`]).
    fn lost_since(&self, boot: &str) -> bool {
        let ends = self.pod.borrow().as_ref().is_some_and(ends_in_reboot);
        ends && self.host.borrow().model.state.boot_id != boot
    }

    /// Plays the pod until it is gone, then forgets its logs.
    pub(crate) async fn run(mut self) {
        let _ = self.lifecycle().await;
        self.logs.close(&self.key);
        say!("pod {}: gone", self.name());
    }

    fn name(&self) -> String {
        format!("{}/{} on {}", self.key.namespace, self.key.name, self.node)
    }

    async fn lifecycle(&mut self) -> Result<(), Gone> {
        let stage = self.pod.borrow().as_ref().map(stage_of).ok_or(Gone)?;
        match stage {
            Stage::New => {
                if !self.pending().await? {
                    return self.until_gone().await;
                }
                let started_at = now();
                let (plan, boot) = self.plan();
                let what = match plan.program {
                    Program::Host(_) => "host program",
                    Program::Workload => "workload",
                };
                say!(
                    "pod {}: starting container {} ({what})",
                    self.name(),
                    self.facts.container
                );
                self.write("running", self.facts.running(&started_at))
                    .await?;
                self.logs.set(&self.key, Output::Running);
                let end = self.running(plan, &boot).await?;
                self.ended(end, started_at, &boot).await?;
            }
            Stage::Running { started_at } => {
                // The agent restarted, and booted every host afresh (a new `bootID`): a
                // container of a pod that is not restarted after a reboot is lost with the boot
                // it started in; any other runs its program again from now.
                self.logs.set(&self.key, Output::Running);
                if self.pod.borrow().as_ref().is_some_and(ends_in_reboot) {
                    self.ended(End::Lost, started_at, "").await?;
                } else {
                    let (plan, boot) = self.plan();
                    let end = self.running(plan, &boot).await?;
                    self.ended(end, started_at, &boot).await?;
                }
            }
            Stage::Terminal => self.logs.set(&self.key, Output::Exited(String::new())),
        }
        if !self.deleting() {
            self.until(|w| w.deleting()).await?;
            say!("pod {}: deleted after it ended", self.name());
        }
        self.delete_now().await?;
        self.until_gone().await
    }

    /// Waits for the start: answers `true` to start the container, `false` when the pod was
    /// deleted before (then it has been marked Failed and deleted).
    async fn pending(&mut self) -> Result<bool, Gone> {
        let start_at = Instant::now() + START_DELAY;
        loop {
            self.until_ready().await?;
            if self.deleting() {
                say!("pod {}: deleted before it started", self.name());
                self.write("failed", failed_unstarted(&now())).await?;
                self.delete_now().await?;
                return Ok(false);
            }
            if Instant::now() >= start_at {
                return Ok(true);
            }
            tokio::select! {
                () = sleep_until(start_at) => {}
                changed = self.changed() => changed?,
            }
        }
    }

    /// The container, started in boot `boot` of its node, runs as `plan` says until it exits
    /// (a host program), is stopped once the pod is deleted, or is lost when its node boots
    /// again ([`lost_since`](Self::lost_since)): how it ended.
    async fn running(&mut self, plan: Plan, boot: &str) -> Result<End, Gone> {
        // As the fake: what the program does on SIGTERM is what its argv says, else its node's
        // script when it started.
        let on_sigterm = (plan.on_sigterm).unwrap_or(self.node_state.borrow().on_sigterm);
        // When it exits on its own, with what status and output, and what follows.
        let exits = match plan.program {
            Program::Host(e) => Some((Instant::now() + e.run, e.exit_code, e.log, e.effects)),
            Program::Workload => None,
        };
        let exits_at = exits.as_ref().map(|(at, ..)| *at);
        // When the kubelet's signal ends it, and its exit status then.
        let mut stopped: Option<(Instant, i32)> = None;
        let mut host = self.host.subscribe();
        loop {
            host.mark_unchanged();
            if self.lost_since(boot) {
                return Ok(End::Lost);
            }
            if let Some(grace) = self.grace() {
                // A second deletion may shorten the grace period: the earlier end wins.
                let (after, exit_code) = stop(grace, on_sigterm);
                let at = Instant::now() + after;
                if stopped.is_none_or(|(then, _)| at < then) {
                    stopped = Some((at, exit_code));
                }
            }
            let now = Instant::now();
            // The signal wins only if it comes before the exit.
            if let Some((at, exit_code)) = stopped
                && at <= now
                && exits_at.is_none_or(|exits_at| at < exits_at)
            {
                return Ok(End::Killed(exit_code));
            }
            if let Some((at, exit_code, log, effects)) = &exits
                && *at <= now
            {
                return Ok(End::Exited {
                    exit_code: *exit_code,
                    log: log.clone(),
                    at: *at,
                    effects: effects.clone(),
                });
            }
            let end = [exits_at, stopped.map(|(at, _)| at)]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                () = sleep_until_some(end) => {}
                changed = self.changed() => changed?,
                // The sender is the worker's own: this never fails.
                _ = host.changed() => {}
            }
        }
    }

    /// Reports `end`, the end of the container started at `started_at` in boot `boot` of its
    /// node, once the node is Ready; an end not reported when the node booted again is lost
    /// with that boot, as the kubelet finds its container gone after a reboot (its output and
    /// its host's aftermath never happen). A host program that exited on its own has its
    /// aftermath played from its exit once reported, as the fake's parked exit; a deleted pod
    /// is then deleted for good.
    async fn ended(&mut self, end: End, started_at: Time, boot: &str) -> Result<(), Gone> {
        let mut finished_at = now();
        self.until_ready().await?;
        let end = match end {
            End::Lost => End::Lost,
            _ if self.lost_since(boot) => {
                // Found gone on the new boot.
                finished_at = now();
                End::Lost
            }
            end => end,
        };
        let (what, patch, log) = match end {
            End::Exited {
                exit_code,
                log,
                at,
                effects,
            } => {
                if !effects.is_empty() {
                    // The host goes on after its program, whatever becomes of the pod.
                    tokio::spawn(play(self.host.clone(), self.node.clone(), at, effects));
                }
                let exit = Exit {
                    exit_code,
                    message: termination::message(&self.container, exit_code, &log),
                    started_at,
                    finished_at,
                };
                say!("pod {}: container exited with {exit_code}", self.name());
                ("exited", self.facts.terminated(&exit, &now()), log)
            }
            End::Killed(exit_code) => {
                let exit = Exit {
                    exit_code,
                    message: termination::message(&self.container, exit_code, ""),
                    started_at,
                    finished_at,
                };
                say!("pod {}: container killed with {exit_code}", self.name());
                (
                    "killed",
                    self.facts.terminated(&exit, &now()),
                    String::new(),
                )
            }
            End::Lost => {
                say!(
                    "pod {}: container lost in its node's reboot (exit {REBOOT_EXIT})",
                    self.name()
                );
                let lost = self.facts.lost(&started_at, &finished_at, &now());
                ("lost", lost, String::new())
            }
        };
        self.write(what, patch).await?;
        self.logs.set(&self.key, Output::Exited(log));
        if self.deleting() {
            // Nothing runs any more: the kubelet finishes the deletion shortly.
            sleep(POD_CLEANUP).await;
        }
        Ok(())
    }

    fn deleting(&self) -> bool {
        self.grace().is_some()
    }

    /// The pod's deletion grace period, once it has a `deletionTimestamp`.
    fn grace(&self) -> Option<Duration> {
        let pod = self.pod.borrow();
        let meta = &pod.as_ref()?.metadata;
        meta.deletion_timestamp.as_ref()?;
        let secs = meta.deletion_grace_period_seconds.unwrap_or(0);
        Some(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
    }

    /// The next change of the pod; `Gone` once it is.
    async fn changed(&mut self) -> Result<(), Gone> {
        pod_changed(&mut self.pod).await
    }

    async fn until(&mut self, done: impl Fn(&Self) -> bool) -> Result<(), Gone> {
        while !done(self) {
            self.changed().await?;
        }
        Ok(())
    }

    async fn until_gone(&mut self) -> Result<(), Gone> {
        loop {
            self.changed().await?;
        }
    }

    /// Returns once the node is Ready; `Gone` if the pod goes first.
    async fn until_ready(&mut self) -> Result<(), Gone> {
        loop {
            if self.node_state.borrow_and_update().ready {
                return Ok(());
            }
            let node_gone = tokio::select! {
                changed = self.node_state.changed() => changed.is_err(),
                changed = pod_changed(&mut self.pod) => { changed?; false }
            };
            if node_gone {
                // The agent stops: the node is never Ready again.
                return self.until_gone().await;
            }
        }
    }

    /// Writes the pod's status (keeping the conditions of others), retrying what may pass
    /// later.
    async fn write(&mut self, what: &str, patch: Value) -> Result<(), Gone> {
        let mut pause = RETRY_FIRST;
        loop {
            let patch = {
                let pod = self.pod.borrow();
                keep_conditions(patch.clone(), pod.as_ref().and_then(|p| p.status.as_ref()))
            };
            match self.writer.patch_status(&self.key, &patch).await {
                Ok(()) => return Ok(()),
                Err(WriteError::Gone) => return Err(Gone),
                Err(WriteError::Refused(e)) => {
                    say!(
                        "pod {}: status {what} refused, not retried: {e}",
                        self.name()
                    );
                    return Ok(());
                }
                Err(WriteError::Failed(e)) => {
                    say!(
                        "pod {}: status {what} failed, retrying in {pause:?}: {e}",
                        self.name()
                    );
                }
            }
            self.pause(&mut pause).await?;
        }
    }

    /// Deletes the pod with grace 0, as the kubelet does once nothing runs in it.
    async fn delete_now(&mut self) -> Result<(), Gone> {
        let mut pause = RETRY_FIRST;
        loop {
            say!("pod {}: deleting (grace 0)", self.name());
            match self.writer.delete_now(&self.key).await {
                Ok(()) => return Ok(()),
                Err(WriteError::Gone) => return Err(Gone),
                Err(WriteError::Refused(e)) => {
                    say!("pod {}: delete refused, not retried: {e}", self.name());
                    return Ok(());
                }
                Err(WriteError::Failed(e)) => {
                    say!(
                        "pod {}: delete failed, retrying in {pause:?}: {e}",
                        self.name()
                    );
                }
            }
            self.pause(&mut pause).await?;
        }
    }

    /// Waits `pause` (doubling it for next time), or until the pod is gone.
    async fn pause(&mut self, pause: &mut Duration) -> Result<(), Gone> {
        let until = Instant::now() + *pause;
        *pause = (*pause * 2).min(RETRY_MAX);
        loop {
            tokio::select! {
                () = sleep_until(until) => return Ok(()),
                changed = self.changed() => changed?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::sync::{Arc, Mutex};

    use k8s_openapi::api::core::v1::{
        Container, ContainerStatus, PodCondition, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use nodejob_host::stratum::Operation;
    use serde_json::json;

    /// What the worker did, and when (milliseconds of paused time from the start).
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Did {
        /// A status write: phase, and the container's exit code once it has one.
        Status(u64, String, Option<i32>),
        Delete(u64),
    }

    #[derive(Clone)]
    struct Recorder {
        start: Instant,
        did: Arc<Mutex<Vec<Did>>>,
        /// Every status patch written.
        patches: Arc<Mutex<Vec<Value>>>,
        /// The first `fail` writes fail (transiently).
        fail: Arc<Mutex<usize>>,
    }

    impl Recorder {
        fn new(fail: usize) -> Self {
            Recorder {
                start: Instant::now(),
                did: Arc::default(),
                patches: Arc::default(),
                fail: Arc::new(Mutex::new(fail)),
            }
        }

        fn ms(&self) -> u64 {
            u64::try_from(self.start.elapsed().as_millis()).unwrap()
        }

        fn did(&self) -> Vec<Did> {
            self.did.lock().unwrap().clone()
        }

        fn failing(&self) -> bool {
            let mut fail = self.fail.lock().unwrap();
            let failing = *fail > 0;
            *fail = fail.saturating_sub(1);
            failing
        }
    }

    impl PodWriter for Recorder {
        async fn patch_status(&self, _: &PodKey, patch: &Value) -> Result<(), WriteError> {
            if self.failing() {
                return Err(WriteError::Failed("connection refused".into()));
            }
            self.patches.lock().unwrap().push(patch.clone());
            let status = &patch["status"];
            let phase = status["phase"].as_str().unwrap().to_string();
            let code = status["containerStatuses"][0]["state"]["terminated"]["exitCode"].as_i64();
            let code = code.map(|c| i32::try_from(c).unwrap());
            self.did
                .lock()
                .unwrap()
                .push(Did::Status(self.ms(), phase, code));
            Ok(())
        }

        async fn delete_now(&self, _: &PodKey) -> Result<(), WriteError> {
            self.did.lock().unwrap().push(Did::Delete(self.ms()));
            Ok(())
        }
    }

    fn pod(argv: &[&str]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("p".into()),
                uid: Some("u".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                host_network: Some(true),
                containers: vec![Container {
                    name: "host".into(),
                    command: Some(argv.iter().map(|s| s.to_string()).collect()),
                    termination_message_policy: Some("FallbackToLogsOnError".into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    fn deleted(mut pod: Pod, grace: i64) -> Pod {
        pod.metadata.deletion_timestamp = Some(now());
        pod.metadata.deletion_grace_period_seconds = Some(grace);
        pod
    }

    struct Harness {
        rec: Recorder,
        logs: LogBook,
        pod: watch::Sender<Option<Pod>>,
        ready: watch::Sender<NodeState>,
        host: watch::Sender<NodeHost>,
        task: tokio::task::JoinHandle<()>,
    }

    fn start(p: Pod, ready: bool, fail: usize) -> Harness {
        start_on(p, node_state(ready, OnSigterm::Exit), fail)
    }

    fn node_state(ready: bool, on_sigterm: OnSigterm) -> NodeState {
        NodeState { ready, on_sigterm }
    }

    fn start_on(p: Pod, state: NodeState, fail: usize) -> Harness {
        let rec = Recorder::new(fail);
        let logs = LogBook::default();
        let (pod_tx, pod_rx) = watch::channel(Some(p));
        let (ready_tx, ready_rx) = watch::channel(state);
        let (host, _) = watch::channel(NodeHost::new("n1", "v1.37.2"));
        let ip = Ipv4Addr::new(127, 0, 0, 2);
        let worker = PodWorker::new(
            rec.clone(),
            logs.clone(),
            "n1",
            ip,
            pod_rx,
            ready_rx,
            host.clone(),
        )
        .unwrap();
        Harness {
            rec,
            logs,
            pod: pod_tx,
            ready: ready_tx,
            host,
            task: tokio::spawn(worker.run()),
        }
    }

    fn log_of(logs: &LogBook) -> (u16, String) {
        let (code, body) = logs.answer("n1", "ns", "p", "host", &Default::default());
        (code.as_u16(), String::from_utf8(body).unwrap())
    }

    fn status(ms: u64, phase: &str, code: Option<i32>) -> Did {
        Did::Status(ms, phase.into(), code)
    }

    #[tokio::test(start_paused = true)]
    async fn runs_exits_and_goes_when_deleted() {
        let p = pod(&["x", "nodejob-test:exit=3", "nodejob-test:log=boom"]);
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(log_of(&h.logs).0, 400, "waiting to start");
        sleep(Duration::from_millis(500)).await;
        assert_eq!(h.rec.did(), [status(500, "Running", None)]);
        assert_eq!(log_of(&h.logs), (200, String::new()));
        sleep(Duration::from_secs(2)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(2500, "Failed", Some(3))
            ]
        );
        assert_eq!(log_of(&h.logs), (200, "boom\n".into()));
        // Terminated: deleted with grace 0 once the deletion shows, whatever the node says.
        h.ready.send_modify(|s| s.ready = false);
        h.pod.send_replace(Some(deleted(p, 0)));
        sleep(Duration::from_millis(10)).await;
        assert_eq!(h.rec.did().last(), Some(&Did::Delete(2600)));
        assert_eq!(log_of(&h.logs).0, 200, "logs kept until the pod is gone");
        h.pod.send_replace(None);
        h.task.await.unwrap();
        assert_eq!(log_of(&h.logs).0, 404);
    }

    #[tokio::test(start_paused = true)]
    async fn deletion_kills_then_deletes() {
        let p = pod(&["x", "nodejob-test:run=60", "nodejob-test:log=never"]);
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_secs(1)).await;
        h.pod.send_replace(Some(deleted(p, 30)));
        sleep(Duration::from_secs(1)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(1500, "Failed", Some(143)),
                Did::Delete(1600),
            ]
        );
        assert_eq!(
            log_of(&h.logs),
            (200, String::new()),
            "a killed program printed nothing"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_grace_still_ends_by_sigterm() {
        // The kubelet leaves at least 1s before SIGKILL; SIGTERM ends the program first.
        let p = pod(&["nodejob-test:run=60"]);
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_secs(1)).await;
        h.pod.send_replace(Some(deleted(p, 0)));
        sleep(Duration::from_secs(1)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(1500, "Failed", Some(143)),
                Did::Delete(1600)
            ]
        );
    }

    fn workload() -> Pod {
        let mut p = pod(&["nginx", "-g", "daemon off;"]);
        p.spec.as_mut().unwrap().host_network = None;
        p
    }

    #[tokio::test(start_paused = true)]
    async fn a_workload_runs_ready_until_deleted() {
        let p = workload();
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_secs(3600)).await;
        assert_eq!(h.rec.did(), [status(500, "Running", None)]);
        let running = h.rec.patches.lock().unwrap()[0].clone();
        let ready: Vec<_> = (running["status"]["conditions"].as_array().unwrap().iter())
            .filter(|c| c["type"] == "Ready")
            .map(|c| c["status"].clone())
            .collect();
        assert_eq!(ready, ["True"]);
        assert_eq!(running["status"]["containerStatuses"][0]["ready"], true);
        h.pod.send_replace(Some(deleted(p, 30)));
        sleep(Duration::from_secs(1)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(3_600_500, "Failed", Some(143)),
                Did::Delete(3_600_600),
            ]
        );
        assert_eq!(log_of(&h.logs), (200, String::new()));
    }

    #[tokio::test(start_paused = true)]
    async fn ignoring_sigterm_runs_out_the_grace_period() {
        let p = workload();
        let h = start_on(p.clone(), node_state(true, OnSigterm::Ignore), 0);
        sleep(Duration::from_secs(1)).await;
        // The node's script changes later: the running container keeps what it started with.
        h.ready.send_modify(|s| s.on_sigterm = OnSigterm::Exit);
        h.pod.send_replace(Some(deleted(p.clone(), 5)));
        sleep(Duration::from_secs(4)).await;
        assert_eq!(h.rec.did(), [status(500, "Running", None)]);
        sleep(Duration::from_secs(2)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(6000, "Failed", Some(137)),
                Did::Delete(6100),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_argv_says_what_sigterm_does_before_the_node() {
        let p = pod(&["sleep", "infinity", "nodejob-test:sigterm=ignore"]);
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_secs(1)).await;
        h.pod.send_replace(Some(deleted(p.clone(), 3)));
        sleep(Duration::from_secs(4)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(4000, "Failed", Some(137)),
                Did::Delete(4100),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_shorter_second_grace_period_kills_sooner() {
        let p = pod(&["nodejob-test:run=600"]);
        let h = start_on(p.clone(), node_state(true, OnSigterm::Ignore), 0);
        sleep(Duration::from_secs(1)).await;
        h.pod.send_replace(Some(deleted(p.clone(), 30)));
        sleep(Duration::from_secs(1)).await;
        h.pod.send_replace(Some(deleted(p.clone(), 2)));
        sleep(Duration::from_secs(3)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(4000, "Failed", Some(137)),
                Did::Delete(4100),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_conditions_of_others_are_kept() {
        let mut p = workload();
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_secs(1)).await;
        // The eviction subresource marks the pod before it deletes it.
        p.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("EvictionByEvictionAPI".into()),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        });
        h.pod.send_replace(Some(p.clone()));
        h.pod.send_replace(Some(deleted(p, 30)));
        sleep(Duration::from_secs(1)).await;
        let patches = h.rec.patches.lock().unwrap().clone();
        let types: Vec<_> = (patches[1]["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter())
        .map(|c| c["type"].as_str().unwrap().to_string())
        .collect();
        assert!(types.contains(&"DisruptionTarget".to_string()), "{types:?}");
        assert!(types.contains(&"Ready".to_string()), "{types:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn exit_during_the_kill_delay_wins() {
        let p = pod(&["nodejob-test:run=1"]);
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_millis(1200)).await;
        h.pod.send_replace(Some(deleted(p, 30)));
        sleep(Duration::from_secs(1)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(1500, "Succeeded", Some(0)),
                Did::Delete(1600)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn not_ready_parks_start_exit_and_deletion() {
        let p = pod(&["nodejob-test:run=1"]);
        let h = start(p.clone(), false, 0);
        sleep(Duration::from_secs(5)).await;
        assert_eq!(h.rec.did(), []);
        h.ready.send_modify(|s| s.ready = true);
        sleep(Duration::from_millis(10)).await;
        assert_eq!(h.rec.did(), [status(5000, "Running", None)]);
        h.ready.send_modify(|s| s.ready = false);
        sleep(Duration::from_secs(3)).await;
        assert_eq!(h.rec.did().len(), 1, "the exit is reported once Ready");
        h.ready.send_modify(|s| s.ready = true);
        sleep(Duration::from_millis(10)).await;
        assert_eq!(
            h.rec.did().last(),
            Some(&status(8010, "Succeeded", Some(0)))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn deleted_before_start() {
        let p = pod(&[]);
        let h = start(p.clone(), false, 0);
        sleep(Duration::from_millis(100)).await;
        h.pod.send_replace(Some(deleted(p, 30)));
        sleep(Duration::from_secs(2)).await;
        assert_eq!(h.rec.did(), [], "NotReady: nothing");
        h.ready.send_modify(|s| s.ready = true);
        sleep(Duration::from_millis(10)).await;
        assert_eq!(
            h.rec.did(),
            [status(2100, "Failed", None), Did::Delete(2100)]
        );
        h.pod.send_replace(None);
        h.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn failed_writes_are_retried() {
        let h = start(pod(&["nodejob-test:run=1"]), true, 2);
        sleep(Duration::from_secs(3)).await;
        // 500ms, then +200ms, then +400ms.
        assert_eq!(
            h.rec.did(),
            [
                status(1100, "Running", None),
                status(2100, "Succeeded", Some(0))
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_terminal_pod_is_only_deleted() {
        let mut p = pod(&[]);
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_secs(5)).await;
        assert_eq!(h.rec.did(), []);
        h.pod.send_replace(Some(deleted(p, 0)));
        sleep(Duration::from_millis(10)).await;
        assert_eq!(h.rec.did(), [Did::Delete(5000)]);
    }

    /// A node Job's pod whose container execs `stratum` with `args`.
    fn stratum_job_pod(args: &[&str]) -> Pod {
        let mut argv = vec!["nsenter", "--target", "1", "--", "/usr/local/bin/stratum"];
        argv.extend(args);
        let mut p = pod(&argv);
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            name: "up".into(),
            uid: "j".into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
        p
    }

    #[tokio::test(start_paused = true)]
    async fn a_stratum_upgrade_runs_on_the_host_model_then_the_host_reboots() {
        let p = stratum_job_pod(&["upgrade", "--to", "v1.38.0"]);
        let h = start(p, true, 0);
        let mut host = h.host.subscribe();
        let boot = host.borrow().model.state.boot_id.clone();
        sleep(Duration::from_secs(21)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(20_500, "Succeeded", Some(0))
            ]
        );
        assert_eq!(
            log_of(&h.logs).1,
            "stratum: upgrading v1.37.2 -> v1.38.0\nstratum: v1.38.0 installed; rebooting in 5s\n"
        );
        let state = host.borrow_and_update().model.state.clone();
        assert_eq!(state.executions(Operation::Upgrade), 1);
        assert!(host.borrow().up);
        // Down 5s after the exit, back 30s later at the new version with a new boot.
        sleep(Duration::from_millis(4600)).await;
        assert!(!host.borrow_and_update().up);
        sleep(Duration::from_secs(30)).await;
        let after = host.borrow_and_update().clone();
        assert!(after.up);
        assert_eq!(after.model.state.version, "v1.38.0");
        assert_ne!(after.model.state.boot_id, boot);
        // Its pod ended before the reboot it asked for: its end stands.
        assert_eq!(h.rec.did().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_killed_stratum_program_has_no_aftermath() {
        let p = stratum_job_pod(&["upgrade", "--to", "v1.38.0"]);
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_secs(2)).await;
        h.pod.send_replace(Some(deleted(p, 30)));
        sleep(Duration::from_secs(600)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(2500, "Failed", Some(143)),
                Did::Delete(2600),
            ]
        );
        let host = h.host.borrow().clone();
        assert!(host.up);
        assert_eq!(host.model.state.version, "v1.37.2");
        assert_eq!(host.model.state.executions(Operation::Upgrade), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn directives_and_other_programs_leave_the_host_alone() {
        for argv in [
            &[
                "/usr/local/bin/stratum",
                "upgrade",
                "--to",
                "v2",
                "nodejob-test:exit=0",
            ][..],
            &["/usr/bin/true"],
        ] {
            let mut p = stratum_job_pod(&[]);
            p.spec.as_mut().unwrap().containers[0].command =
                Some(argv.iter().map(|s| s.to_string()).collect());
            let h = start(p, true, 0);
            sleep(Duration::from_secs(60)).await;
            let did = h.rec.did();
            assert_eq!(
                did.last(),
                Some(&status(2500, "Succeeded", Some(0))),
                "{argv:?}"
            );
            let host = h.host.borrow().clone();
            assert!(host.model.state.executions.is_empty(), "{argv:?}");
            assert!(host.up);
        }
    }

    impl Harness {
        /// The node's host reboots by itself now, down for `down` ([`NodeHost::reboot`],
        /// played as the agent plays it); the node worker's part too: the node is Ready
        /// while its host is up.
        fn reboot(&self, down: Duration) {
            self.host.send_modify(|h| h.model.timing.reboot_time = down);
            let effects = self.host.borrow().reboot();
            let (host, ready) = (self.host.clone(), self.ready.clone());
            let mut seen = host.subscribe();
            tokio::spawn(play(host, "n1".into(), Instant::now(), effects));
            tokio::spawn(async move {
                while seen.changed().await.is_ok() {
                    let up = seen.borrow_and_update().up;
                    ready.send_modify(|s| s.ready = up);
                }
            });
        }

        /// The `state.terminated` of the last status written.
        fn terminated(&self) -> Value {
            let patches = self.rec.patches.lock().unwrap();
            let last = patches.last().unwrap();
            last["status"]["containerStatuses"][0]["state"]["terminated"].clone()
        }
    }

    /// `p` as a restarted agent finds it: reported running since 2026-01-01T00:00:00Z.
    fn found_running(mut p: Pod) -> Pod {
        let started = Time(Timestamp::from_second(1_767_225_600).unwrap());
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "host".into(),
                state: Some(nodejob_host::status::running_state(&started)),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        });
        p
    }

    fn with_restart_policy(mut p: Pod, policy: &str) -> Pod {
        p.spec.as_mut().unwrap().restart_policy = Some(policy.into());
        p
    }

    /// What the kubelet reports of a container found gone after a reboot.
    fn assert_lost(h: &Harness) {
        let terminated = h.terminated();
        assert_eq!(
            (
                &terminated["exitCode"],
                &terminated["reason"],
                terminated.get("message")
            ),
            (&json!(REBOOT_EXIT), &json!("Unknown"), None),
            "{terminated}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_pod_running_across_a_reboot_is_lost_and_its_program_never_ends() {
        let p = with_restart_policy(
            pod(&[
                "nodejob-test:run=60",
                "nodejob-test:exit=0",
                "nodejob-test:log=done",
            ]),
            "Never",
        );
        let h = start(p.clone(), true, 0);
        let boot = h.host.borrow().model.state.boot_id.clone();
        sleep(Duration::from_secs(10)).await;
        h.reboot(Duration::from_secs(30));
        sleep(Duration::from_secs(29)).await;
        assert_eq!(h.rec.did(), [status(500, "Running", None)], "host down");
        sleep(Duration::from_secs(2)).await;
        assert_ne!(h.host.borrow().model.state.boot_id, boot);
        let lost = [
            status(500, "Running", None),
            status(40_000, "Failed", Some(REBOOT_EXIT)),
        ];
        assert_eq!(h.rec.did(), lost);
        assert_lost(&h);
        assert_eq!(
            h.terminated()["finishedAt"].as_str().map(str::len),
            Some(20)
        );
        // Its run would have ended at 60.5s, exit 0, printing "done": never.
        sleep(Duration::from_secs(600)).await;
        assert_eq!(h.rec.did(), lost);
        assert_eq!(log_of(&h.logs), (200, String::new()));
        // Ended: its deletion is only confirmed.
        h.pod.send_replace(Some(deleted(p, 30)));
        sleep(Duration::from_millis(10)).await;
        assert_eq!(h.rec.did()[2..], [Did::Delete(641_000)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stratum_upgrade_due_to_exit_while_its_host_reboots_is_lost_with_its_aftermath() {
        let p = stratum_job_pod(&["upgrade", "--to", "v1.38.0"]);
        let h = start(p, true, 0);
        sleep(Duration::from_secs(10)).await;
        // Down from 10s to 40s: the upgrade's exit at 20.5s would fall in it, unreported.
        h.reboot(Duration::from_secs(30));
        sleep(Duration::from_secs(600)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(40_000, "Failed", Some(REBOOT_EXIT)),
            ]
        );
        assert_lost(&h);
        assert_eq!(log_of(&h.logs), (200, String::new()), "its lines are gone");
        // Its reboot into v1.38.0 never came: the host runs what it ran, up.
        let host = h.host.borrow().clone();
        assert!(host.up);
        assert_eq!(host.model.state.version, "v1.37.2");
        assert_eq!(host.model.state.executions(Operation::Upgrade), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pod_restarted_after_a_reboot_is_not_ended_by_it() {
        for policy in ["Always", "OnFailure"] {
            let p = with_restart_policy(workload(), policy);
            let h = start(p.clone(), true, 0);
            sleep(Duration::from_secs(10)).await;
            h.reboot(Duration::from_secs(30));
            sleep(Duration::from_secs(600)).await;
            assert_eq!(h.rec.did(), [status(500, "Running", None)], "{policy}");
            h.pod.send_replace(Some(deleted(p, 30)));
            sleep(Duration::from_secs(1)).await;
            assert_eq!(
                h.rec.did(),
                [
                    status(500, "Running", None),
                    status(610_500, "Failed", Some(143)),
                    Did::Delete(610_600),
                ],
                "{policy}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_pod_on_a_node_adopted_again_is_lost_with_the_boot_before() {
        let p = with_restart_policy(pod(&["nodejob-test:run=60"]), "Never");
        let h = start(p, true, 0);
        sleep(Duration::from_secs(10)).await;
        // The node is deleted (its pods wait, NotReady), then registered and adopted again:
        // a new boot.
        h.ready.send_modify(|s| s.ready = false);
        sleep(Duration::from_secs(5)).await;
        h.host.send_modify(|host| host.rebooted("n1"));
        h.ready.send_modify(|s| s.ready = true);
        sleep(Duration::from_secs(600)).await;
        assert_eq!(
            h.rec.did(),
            [
                status(500, "Running", None),
                status(15_000, "Failed", Some(REBOOT_EXIT)),
            ]
        );
        assert_lost(&h);
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_pod_found_running_by_a_restarted_agent_is_lost_and_not_run_again() {
        // A restarted agent boots every host afresh: the container ran in the boot before.
        let p = found_running(stratum_job_pod(&["upgrade", "--to", "v1.38.0"]));
        let h = start(p, false, 0);
        sleep(Duration::from_secs(5)).await;
        assert_eq!(h.rec.did(), [], "reported once the node is Ready");
        h.ready.send_modify(|s| s.ready = true);
        sleep(Duration::from_secs(600)).await;
        assert_eq!(h.rec.did(), [status(5000, "Failed", Some(REBOOT_EXIT))]);
        assert_lost(&h);
        assert_eq!(h.terminated()["startedAt"], "2026-01-01T00:00:00Z");
        let host = h.host.borrow().clone();
        assert!(host.model.state.executions.is_empty(), "not exec'd again");
        assert_eq!(host.model.state.version, "v1.37.2");
    }

    #[tokio::test(start_paused = true)]
    async fn a_workload_found_running_by_a_restarted_agent_runs_on() {
        let p = found_running(with_restart_policy(workload(), "Always"));
        let h = start(p.clone(), true, 0);
        sleep(Duration::from_secs(600)).await;
        assert_eq!(h.rec.did(), []);
        h.pod.send_replace(Some(deleted(p, 30)));
        sleep(Duration::from_secs(1)).await;
        assert_eq!(
            h.rec.did(),
            [status(600_500, "Failed", Some(143)), Did::Delete(600_600)]
        );
    }
}
