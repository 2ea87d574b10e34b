//! [`State`]: everything behind the cluster's one lock, and how a due [`Action`] is applied.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use nodejob_core::{ApiError, ApiResult, DryRun, Eviction};
use nodejob_host::stratum::StratumHost;

use crate::admission;
use crate::controller::Controller;
use crate::ctx::Ctx;
use crate::disruption::Disruption;
use crate::eviction::{self, Verdict};
use crate::faults::Faults;
use crate::kubelet::{self, Kubelets};
use crate::record::Call;
use crate::rng::Rng;
use crate::scheduler::Scheduler;
use crate::server::ServerVersion;
use crate::store::{Store, pod_not_found};
use crate::timers::ObjRef;
use crate::timers::{Action, Timers};
use crate::timing::{Timing, stamp};
use crate::workloads::Workloads;

/// Random streams of one seed: adding a fault does not change the names a run draws.
const IDS_STREAM: u64 = 1;
const FAULTS_STREAM: u64 = 2;
const INFRA_STREAM: u64 = 3;

/// The whole modelled cluster. Every transition happens with the lock held, so each is atomic
/// with respect to API calls; waiters are woken after each locked section that wrote.
#[derive(Debug)]
pub(crate) struct State {
    /// Virtual time of the locked section (set when the lock is taken).
    pub(crate) now: Duration,
    pub(crate) timing: Timing,
    pub(crate) store: Store,
    pub(crate) timers: Timers,
    pub(crate) controller: Controller,
    pub(crate) workloads: Workloads,
    pub(crate) disruption: Disruption,
    pub(crate) scheduler: Scheduler,
    pub(crate) kubelets: Kubelets,
    pub(crate) faults: Faults,
    pub(crate) calls: Vec<Call>,
    /// What `GET /version` answers.
    pub(crate) server: ServerVersion,
}

impl State {
    pub(crate) fn new(seed: u64, timing: Timing) -> Self {
        State {
            now: Duration::ZERO,
            timing,
            store: Store::new(Rng::new(seed, IDS_STREAM), Rng::new(seed, INFRA_STREAM)),
            timers: Timers::default(),
            controller: Controller::default(),
            workloads: Workloads::default(),
            disruption: Disruption::default(),
            scheduler: Scheduler::default(),
            kubelets: Kubelets::default(),
            faults: Faults::new(Rng::new(seed, FAULTS_STREAM)),
            calls: Vec::new(),
            server: ServerVersion::default(),
        }
    }

    /// The parts a component works on, lent for one step, and the components.
    fn parts(
        &mut self,
    ) -> (
        Ctx<'_>,
        &mut Controller,
        &mut Kubelets,
        &mut Workloads,
        &mut Disruption,
        &mut Scheduler,
    ) {
        let State {
            now,
            timing,
            store,
            timers,
            controller,
            workloads,
            disruption,
            scheduler,
            kubelets,
            ..
        } = self;
        let cx = Ctx {
            store,
            timers,
            now: *now,
            timing,
        };
        (cx, controller, kubelets, workloads, disruption, scheduler)
    }

    /// Applies one due step.
    pub(crate) fn apply(&mut self, action: Action) {
        if matches!(action, Action::Settle | Action::Resync) {
            self.settle(action == Action::Resync);
            return;
        }
        let (mut cx, controller, kubelets, ..) = self.parts();
        let cx = &mut cx;
        match action {
            Action::Settle | Action::Resync => {}
            Action::CreatePod(job) => {
                let refusal = |node: &str| kubelets.script(node).refuse_pods;
                controller.sync_new_job(cx, &refusal, &job);
            }
            Action::Deadline(job) => controller.deadline(cx, &job),
            Action::Finish(job) => controller.finish(cx, &job),
            Action::StartContainer(pod) => kubelets.start_container(cx, pod),
            Action::ContainerExit { pod, exit_code, at } => {
                kubelets.container_exit(cx, pod, exit_code, at);
            }
            Action::Stop { pod, exit_code } => kubelets.stop(cx, pod, exit_code),
            Action::Kill(pod) => kubelets.kill(cx, pod),
            Action::HostStep { node, step } => kubelets.host_step(cx, &node, step),
            Action::OrphanedPods { node } => crate::podgc::collect_orphans(cx, &node),
        }
    }

    /// Runs the level-triggered loops until nothing more changes: the Job controller's sync of
    /// every Job, the workload controllers, the scheduler, the disruption controller, the
    /// kubelets' reaction to deletions, the apiserver's removal of pods the kubelet is done
    /// with, and the garbage collector. Each loop looks at what changed (the store's
    /// [`Index`](crate::index::Index)); those that would look at everything skip a pass in
    /// which nothing they read was written, unless `forced`: a [`Action::Resync`], at a time a
    /// controller asked to look again.
    pub(crate) fn settle(&mut self, forced: bool) {
        for _ in 0..64 {
            let before = self.store.rv();
            let (mut cx, controller, kubelets, workloads, disruption, scheduler) = self.parts();
            let cx = &mut cx;
            controller.sync_jobs(cx);
            workloads.sync(cx, forced);
            scheduler.bind(cx);
            disruption.sync(cx, forced);
            kubelets.sync(cx);
            kubelets.remove_finished_pods(cx);
            controller.collect_garbage(cx);
            if self.store.rv() == before {
                break;
            }
        }
        if cfg!(debug_assertions) {
            (self.store.index).check(&self.store.pods, &self.store.jobs);
            let control_plane: std::collections::BTreeSet<String> = (self.store.nodes.iter())
                .filter(|(_, n)| {
                    (n.metadata.labels.as_ref())
                        .is_some_and(|l| l.contains_key(crate::labels::CONTROL_PLANE))
                })
                .map(|(name, _)| name.clone())
                .collect();
            assert_eq!(
                self.store.index.control_plane, control_plane,
                "the index of control-plane nodes"
            );
        }
    }

    // ---- what the root asks of the components ----

    /// `POST .../jobs` and the Job controller's first sync after its batch period.
    pub(crate) fn create_job(&mut self, job: &Job) -> ApiResult<Job> {
        let (mut cx, controller, ..) = self.parts();
        controller.create_job(&mut cx, job)
    }

    /// Registers a Ready node.
    pub(crate) fn add_node(&mut self, name: &str) -> ApiResult<Node> {
        let (mut cx, _, kubelets, ..) = self.parts();
        kubelets.add_node(&mut cx, name)
    }

    /// The node's kubelet posts its Ready condition.
    pub(crate) fn set_node_ready(&mut self, name: &str, ready: bool) -> ApiResult<()> {
        let (mut cx, _, kubelets, ..) = self.parts();
        kubelets.set_node_ready(&mut cx, name, ready)
    }

    /// Deletes the Node object (and retires its host); the pod garbage collector looks at the
    /// pods bound to it a quarantine later.
    pub(crate) fn remove_node(&mut self, name: &str) -> ApiResult<()> {
        kubelet::remove_node(&mut self.store, name)?;
        self.kubelets.forget_host(name);
        let node = name.to_string();
        let at = self.now + crate::podgc::QUARANTINE;
        self.timers.at(at, Action::OrphanedPods { node });
        Ok(())
    }

    /// Changes Node `name` with `change`, writing it if that changed anything.
    pub(crate) fn update_node(
        &mut self,
        name: &str,
        change: impl FnOnce(&mut Node),
    ) -> ApiResult<Node> {
        kubelet::update_node(&mut self.store, name, change)
    }

    /// The node's kubelet reports `version`, which its host runs.
    pub(crate) fn set_kubelet_version(&mut self, name: &str, version: &str) -> ApiResult<Node> {
        (self.kubelets).set_kubelet_version(&mut self.store, name, version)
    }

    /// The node restarts: its kubelet posts a new `bootID`.
    pub(crate) fn reboot_node(&mut self, name: &str) -> ApiResult<Node> {
        let now = self.now;
        self.kubelets.reboot(&mut self.store, name, now)
    }

    /// Gives the node the host model `host`.
    pub(crate) fn set_host(&mut self, name: &str, host: StratumHost) -> ApiResult<Node> {
        self.kubelets.set_host(&mut self.store, name, host)
    }

    /// `GET .../pods/{pod}/log`.
    pub(crate) fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        (self.kubelets).pod_log(&self.store, namespace, pod, container, limit_bytes)
    }
}

/// The condition the eviction subresource puts on a pod it deletes
/// (`addConditionAndDeletePod`).
fn disruption_target(now: Duration) -> PodCondition {
    PodCondition {
        type_: "DisruptionTarget".to_string(),
        status: "True".to_string(),
        reason: Some("EvictionByEvictionAPI".to_string()),
        message: Some("Eviction API: evicting".to_string()),
        last_transition_time: Some(stamp(now)),
        ..PodCondition::default()
    }
}

impl State {
    /// `POST .../pods` as an administrator sends it: the apiserver's preparation, then
    /// admission (the namespace's PodSecurity, then the bound node's scripted refusal: 403),
    /// then storage (409). A pod bound to a node (`nodeName`) starts
    /// [`Timing::container_start`](crate::Timing::container_start) later; any other waits for
    /// the scheduler.
    pub(crate) fn create_pod(&mut self, pod: &Pod) -> ApiResult<Pod> {
        let pod = self.store.prepare_pod(pod, self.now)?;
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let node = spec.node_name.clone().filter(|n| !n.is_empty());
        let labels = self.store.namespace_labels(&namespace);
        let refusal = admission::pod_security(&labels, &spec).or_else(|| {
            node.as_ref()
                .and_then(|n| self.kubelets.script(n).refuse_pods)
        });
        if let Some(refusal) = refusal {
            return Err(ApiError::forbidden(format!(
                "pods \"{name}\" is forbidden: {refusal}"
            )));
        }
        let pod = self.store.insert_pod(pod)?;
        if node.is_some() {
            let at = self.now + self.timing.container_start;
            self.timers
                .at(at, Action::StartContainer(ObjRef::of(&pod.metadata)));
        }
        Ok(pod)
    }

    /// `POST .../pods/{name}/eviction`: the registry's admission ([`eviction::admit`]), then,
    /// unless on a dry run, the `DisruptionTarget` condition and the graceful deletion with
    /// `grace_period` (the pod's own when `None`).
    pub(crate) fn evict_pod(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        let verdict = eviction::admit(&mut self.store, namespace, name, uid, dry_run, self.now);
        match verdict {
            Err(e) if e.is_not_found() => Ok(Eviction::Gone),
            Err(e) => Err(e),
            Ok(Verdict::Blocked(message)) => Ok(Eviction::Blocked { message }),
            Ok(Verdict::Delete) if dry_run == DryRun::All => Ok(Eviction::Evicted),
            Ok(Verdict::Delete) => {
                let key = (namespace.to_string(), name.to_string());
                if let Some(mut pod) = self.store.pods.get(&key).cloned() {
                    let conditions = pod
                        .status
                        .get_or_insert_default()
                        .conditions
                        .get_or_insert_default();
                    let new = disruption_target(self.now);
                    let changed = match conditions.iter_mut().find(|c| c.type_ == new.type_) {
                        Some(old)
                            if old.status == new.status
                                && old.reason == new.reason
                                && old.message == new.message =>
                        {
                            false
                        }
                        Some(old) => {
                            if old.status != new.status {
                                old.last_transition_time = new.last_transition_time;
                            }
                            old.status = new.status;
                            old.reason = new.reason;
                            old.message = new.message;
                            true
                        }
                        None => {
                            conditions.push(new);
                            true
                        }
                    };
                    if changed {
                        self.store.write_pod(pod);
                    }
                }
                self.store.delete_pod(&key, grace_period, self.now);
                Ok(Eviction::Evicted)
            }
        }
    }

    /// `DELETE .../pods/{name}` with default options, as `kubectl delete pod` sends it: the
    /// pod's own grace period. 404 for a missing pod.
    pub(crate) fn delete_pod_by_name(&mut self, namespace: &str, name: &str) -> ApiResult<()> {
        let key = (namespace.to_string(), name.to_string());
        if !self.store.pods.contains_key(&key) {
            return Err(pod_not_found(name));
        }
        self.store.delete_pod(&key, None, self.now);
        Ok(())
    }
}
