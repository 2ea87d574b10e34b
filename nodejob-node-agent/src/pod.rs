//! The pod worker: one task per pod bound to an adopted node, playing the kubelet's part for
//! it as the fake kubelet does.
//!
//! ```text
//!  seen ──START_DELAY, node Ready──▶ Running ──its run──▶ exited ──▶ (deleted) ──▶ DELETE grace 0
//!   │                                  │       (host program only;
//!   │                                  │        a workload runs until deleted)
//!   │ deleted (node Ready): Failed,    │ deleted: SIGTERM, exit 143 after the kill delay; or,
//!   ▼ DELETE grace 0                   ▼ ignoring it, SIGKILL after the grace period, exit 137;
//!                                        then after CLEANUP: DELETE grace 0
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

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nodejob_host::termination::{self, KILL_DELAY, OnSigterm, POD_CLEANUP};
use nodejob_host::{Fallback, Plan, Program};
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

    /// What the container does, decided as it starts: a program that execs `stratum` is
    /// exec'd on the node's host model (and counted there).
    fn plan(&self) -> Plan {
        let pod = self.pod.borrow().clone().unwrap_or_default();
        let mut plan = Plan {
            program: Program::Workload,
            on_sigterm: None,
        };
        self.host.send_if_modified(|host| {
            let before = host.model.state.clone();
            plan = Plan::of(&pod, &self.container, &Fallback::default(), &mut host.model);
            host.model.state != before
        });
        plan
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
                let plan = self.plan();
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
                self.running(plan, started_at).await?;
            }
            Stage::Running { started_at } => {
                // The agent restarted: the program runs again from now.
                let plan = self.plan();
                self.logs.set(&self.key, Output::Running);
                self.running(plan, started_at).await?;
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

    /// The container runs as `plan` says until it exits (a host program, whose aftermath on
    /// the host then plays out) or, once the pod is deleted, is stopped; the end is reported
    /// (node Ready), and a deleted pod is then deleted for good.
    async fn running(&mut self, plan: Plan, started_at: Time) -> Result<(), Gone> {
        // As the fake: what the program does on SIGTERM is what its argv says, else its node's
        // script when it started.
        let on_sigterm = (plan.on_sigterm).unwrap_or(self.node_state.borrow().on_sigterm);
        // When it exits on its own, with what status and output, and what follows.
        let (exits, effects) = match plan.program {
            Program::Host(e) => (
                Some((Instant::now() + e.run, e.exit_code, e.log)),
                e.effects,
            ),
            Program::Workload => (None, Vec::new()),
        };
        let exits_at = exits.as_ref().map(|(at, _, _)| *at);
        // When the kubelet's signal ends it, and its exit status then.
        let mut stopped: Option<(Instant, i32)> = None;
        let (exit_code, log, signalled) = loop {
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
                break (exit_code, String::new(), true);
            }
            if let Some((at, exit_code, log)) = &exits
                && *at <= now
            {
                break (*exit_code, log.clone(), false);
            }
            let end = [exits_at, stopped.map(|(at, _)| at)]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                () = sleep_until_some(end) => {}
                changed = self.changed() => changed?,
            }
        };
        let finished_at = now();
        if let (false, Some(exited), false) = (signalled, exits_at, effects.is_empty()) {
            // The host goes on after its program, whatever becomes of the pod.
            tokio::spawn(play(self.host.clone(), self.node.clone(), exited, effects));
        }
        let exit = Exit {
            exit_code,
            message: termination::message(&self.container, exit_code, &log),
            started_at,
            finished_at,
        };
        self.until_ready().await?;
        let what = if signalled { "killed" } else { "exited" };
        say!("pod {}: container {what} with {exit_code}", self.name());
        self.write(what, self.facts.terminated(&exit, &now()))
            .await?;
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

    use k8s_openapi::api::core::v1::{Container, PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use nodejob_host::stratum::Operation;

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
}
