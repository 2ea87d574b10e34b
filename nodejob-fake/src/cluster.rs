//! [`FakeCluster`]: the handle tests and the CLI hold; its driver task; the actor methods,
//! readers and scripting a test uses besides the API verbs (more actors in `actors.rs`).

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use nodejob_core::{ApiError, ApiResult, ErrorKind};
use tokio::sync::{Notify, watch};

use crate::watch::{WaitKey, Waiters, Watched, every_node};
use tokio::time::Instant;

use crate::faults::Times;
use crate::hooks::Hooks;
use crate::record::Call;
use crate::state::State;
use crate::store::{
    CONTROLLER_UID, FOREGROUND_DELETION, JOB_NAME, LEGACY_CONTROLLER_UID, LEGACY_JOB_NAME,
    job_not_found,
};
use crate::timers::Task;
use crate::{NodeScript, Timing, Verb, Verbs};

/// How a [`FakeCluster`] is made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Seeds UIDs, generated names and fault draws: the same seed and the same calls replay
    /// the same run.
    pub seed: u64,
    /// The delays of the modelled cluster.
    pub timing: Timing,
}

/// A closure a test runs with the cluster: a hook, or a scheduled step. It runs with no lock
/// held, so it may call any [`FakeCluster`] method.
type Hook = Box<dyn FnOnce(&FakeCluster) + Send>;

/// What the handles share.
struct Shared {
    state: Mutex<State>,
    /// The closures a test armed (a lock of their own: they are never run under it).
    hooks: Mutex<Hooks<Hook>>,
    /// Virtual time zero.
    start: Instant,
    seed: u64,
    /// The waits in progress, woken by the writes of the objects they watch (a lock of its
    /// own, taken after the state's is released).
    waiters: Mutex<Waiters>,
    /// Wakes the driver when the timer queue changed or the cluster is dropped.
    wake: Arc<Notify>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

/// An in-memory Kubernetes cluster: apiserver store, Job controller, garbage collector and a
/// kubelet per node, all in tokio's (paused) virtual time. Cheap to clone: clones share one
/// cluster.
///
/// See [`model`](crate::model) for what is modelled and how.
#[derive(Clone)]
pub struct FakeCluster {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FakeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCluster")
            .field("seed", &self.shared.seed)
            .finish_non_exhaustive()
    }
}

impl Default for FakeCluster {
    fn default() -> Self {
        FakeCluster::new()
    }
}

impl FakeCluster {
    /// A cluster with seed 0 and the default [`Timing`]: namespaces `default` and
    /// `kube-system`, no node.
    ///
    /// # Panics
    /// Outside a tokio runtime (it spawns its driver task).
    pub fn new() -> Self {
        FakeCluster::with_config(Config::default())
    }

    /// A cluster with `seed` and the default [`Timing`].
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn with_seed(seed: u64) -> Self {
        FakeCluster::with_config(Config {
            seed,
            ..Config::default()
        })
    }

    /// A cluster made as `config` says.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn with_config(config: Config) -> Self {
        let wake = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(config.seed, config.timing)),
            hooks: Mutex::new(Hooks::default()),
            start: Instant::now(),
            seed: config.seed,
            waiters: Mutex::new(Waiters::default()),
            wake: Arc::clone(&wake),
        });
        tokio::spawn(drive(Arc::downgrade(&shared), wake));
        FakeCluster { shared }
    }

    /// The seed this cluster was made with (print it when a simulation fails).
    pub fn seed(&self) -> u64 {
        self.shared.seed
    }

    /// Virtual time since the cluster was made.
    pub(crate) fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.shared.start)
    }

    /// The armed closures (never held while one runs).
    fn hooks(&self) -> MutexGuard<'_, Hooks<Hook>> {
        self.shared
            .hooks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside a locked section (a bug) must not hide the state from the test.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` with the lock held at the current virtual time; afterwards lets the
    /// controllers react to any write, wakes waiters and the driver.
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let now = self.elapsed();
        let (result, touched, wake) = {
            let mut st = self.lock();
            st.now = now;
            let before = st.store.rv();
            let result = f(&mut st);
            let mut touched = Vec::new();
            if st.store.rv() != before {
                st.timers.settle(now);
                let store = &mut st.store;
                let tag = |kind: Watched| move |key| (kind, key);
                touched.extend(
                    store
                        .job_history
                        .take_touched()
                        .into_iter()
                        .map(tag(Watched::Job)),
                );
                let nodes = store.node_history.take_touched();
                if !nodes.is_empty() {
                    // The watches of every node wait on the collection's key.
                    touched.push((Watched::Node, every_node()));
                }
                touched.extend(nodes.into_iter().map(tag(Watched::Node)));
                touched.extend(
                    store
                        .pod_history
                        .take_touched()
                        .into_iter()
                        .map(tag(Watched::Pod)),
                );
                touched.extend(
                    (store.customs.take_touched().into_iter())
                        .map(|plural| (Watched::Custom(plural), every_node())),
                );
            }
            (result, touched, st.timers.take_changed())
        };
        if !touched.is_empty() {
            self.waiters().wake(touched);
        }
        if wake {
            self.shared.wake.notify_one();
        }
        result
    }

    /// The waits in progress (never held with the state's lock).
    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        self.shared
            .waiters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A receiver that changes on the next write of `key` after this call.
    pub(crate) fn subscribe(&self, key: WaitKey) -> watch::Receiver<()> {
        self.waiters().subscribe(key)
    }

    // ---- the apiserver ----

    /// What `GET /version` answers from now on: `version` (`Fixed`), or the control plane's
    /// (`ControlPlane`, the default): see [`ServerVersion`](crate::ServerVersion).
    pub fn set_server_version(&self, version: crate::ServerVersion) {
        self.with_state(|st| st.server = version);
    }

    /// The `gitVersion` `GET /version` answers now (read without a call).
    pub fn server_version(&self) -> String {
        self.with_state(|st| st.server.git_version(st.store.control_plane_nodes()))
    }

    // ---- namespaces and nodes ----

    /// Installs a custom resource kind, as applying its CRD does (a no-op if it is): until
    /// then its verbs answer NotFound, as for a resource the apiserver does not serve.
    pub fn install_custom_kind(&self, kind: nodejob_core::CustomKind) {
        self.with_state(|st| st.store.customs.install(kind));
    }

    /// Adds a namespace (a no-op if it exists).
    pub fn add_namespace(&self, name: &str) {
        self.with_state(|st| st.store.add_namespace(name, st.now));
    }

    /// Registers a Ready node whose kubelet follows its [`NodeScript`] (the default one unless
    /// set). Its `InternalIP` is the next of `10.0.0.1`, `10.0.0.2`, ... AlreadyExists if the
    /// name is taken. Pods already bound to that name start now.
    pub fn add_node(&self, name: &str) -> ApiResult<Node> {
        self.with_state(|st| st.add_node(name))
    }

    /// The node's kubelet posts `Ready` `"True"` or `"False"` (a Node write when it changes).
    /// While NotReady its kubelet neither starts, reports nor kills containers; it catches up
    /// when Ready again. NotFound if there is no such node.
    pub fn set_node_ready(&self, name: &str, ready: bool) -> ApiResult<()> {
        self.with_state(|st| st.set_node_ready(name, ready))
    }

    /// Deletes the Node object. Pods bound to it stay as they are (the pod garbage collector
    /// of orphaned pods is not modelled). NotFound if there is no such node.
    pub fn remove_node(&self, name: &str) -> ApiResult<()> {
        self.with_state(|st| st.remove_node(name))
    }

    /// Sets the script of `node`'s kubelet (the node need not exist yet). It applies to what
    /// the kubelet does from now on: pod creation, container start, log reads.
    pub fn set_script(&self, node: &str, script: NodeScript) {
        self.with_state(|st| st.kubelets.set_script(node, script));
    }

    /// The script of `node`'s kubelet.
    pub fn script(&self, node: &str) -> NodeScript {
        self.with_state(|st| st.kubelets.script(node))
    }

    /// Runs `f` on the driver task at virtual time `at_or_after` (since the cluster was made),
    /// or at once if that has passed, e.g. to flap a node:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// let cluster = nodejob_fake::FakeCluster::new();
    /// cluster.add_node("n1").unwrap();
    /// cluster.schedule(Duration::from_secs(5), |c| c.set_node_ready("n1", false).unwrap());
    /// cluster.schedule(Duration::from_secs(9), |c| c.set_node_ready("n1", true).unwrap());
    /// # }
    /// ```
    pub fn schedule(&self, at_or_after: Duration, f: impl FnOnce(&FakeCluster) + Send + 'static) {
        // The closure is kept before its entry is queued, so the driver always finds it.
        let ticket = self.hooks().schedule(Box::new(f));
        self.with_state(|st| st.timers.push(at_or_after, Task::User(ticket)));
    }

    // ---- actors: write through the store, never recorded nor faulted ----

    /// Creates a Job as another actor would (same apiserver semantics as
    /// [`JobApi::create_job`](nodejob_core::JobApi::create_job)).
    pub fn create_job_now(&self, job: &Job) -> ApiResult<Job> {
        self.with_state(|st| st.create_job(job))
    }

    /// Deletes a Job as another actor would: foreground, no preconditions.
    pub fn delete_job_now(&self, namespace: &str, name: &str) -> ApiResult<()> {
        self.with_state(|st| st.store.delete_job(namespace, name, None, st.now).map(drop))
    }

    /// Replaces a Job as `kubectl replace --force` does: the Job is removed at once (its pods
    /// are then garbage-collected in the background) and a copy of it, as first submitted, is
    /// created under the same name with a new UID. Answers the new Job.
    pub fn replace_job_now(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.with_state(|st| {
            let key = (namespace.to_string(), name.to_string());
            let old = st
                .store
                .remove_job(&key)
                .ok_or_else(|| job_not_found(name))?;
            st.create_job(&as_submitted(old))
        })
    }

    /// Another actor updates the Job without changing what it does (an annotation
    /// `nodejob-fake/touched`): only its resourceVersion changes. Answers the Job.
    pub fn touch_job_now(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.with_state(|st| {
            let mut job = st.store.get_job(namespace, name)?;
            let n = st.store.rv() + 1;
            job.metadata
                .annotations
                .get_or_insert_default()
                .insert("nodejob-fake/touched".into(), n.to_string());
            Ok(st.store.write_job(job))
        })
    }

    // ---- readers ----

    /// The Job `namespace/name`, if it exists.
    pub fn job(&self, namespace: &str, name: &str) -> Option<Job> {
        self.with_state(|st| st.store.get_job(namespace, name).ok())
    }

    /// Every Pod in `namespace`, in name order.
    pub fn pods(&self, namespace: &str) -> Vec<Pod> {
        self.with_state(|st| {
            st.store
                .pods
                .values()
                .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
                .cloned()
                .collect()
        })
    }

    /// Every Event in `namespace`, in name order.
    pub fn events(&self, namespace: &str) -> Vec<Event> {
        self.with_state(|st| {
            st.store
                .events
                .values()
                .filter(|e| e.metadata.namespace.as_deref() == Some(namespace))
                .cloned()
                .collect()
        })
    }

    /// The Node `name`, if it exists.
    pub fn node(&self, name: &str) -> Option<Node> {
        self.with_state(|st| st.store.get_node(name).ok())
    }

    /// The names of the Nodes that exist, in name order.
    pub fn node_names(&self) -> Vec<String> {
        self.with_state(|st| st.store.nodes.keys().cloned().collect())
    }

    /// The latest resourceVersion of the cluster (decimal).
    pub fn resource_version(&self) -> String {
        self.with_state(|st| st.store.rv().to_string())
    }

    // ---- faults, hooks, record ----

    /// Arms a fault: the next matching calls (`times`) answer `error` before touching the
    /// store. Faults are consulted in the order armed; the first that fires answers.
    pub fn fail(&self, verbs: impl Into<Verbs>, error: ApiError, times: Times) {
        self.with_state(|st| st.faults.arm(verbs.into(), error, times));
    }

    /// Arms a fault that fires on each matching call with `probability` (0..=1), drawn from
    /// the seed's fault stream: the same seed and calls fail the same calls.
    pub fn fail_randomly(&self, verbs: impl Into<Verbs>, error: ApiError, probability: f64) {
        self.with_state(|st| st.faults.arm_randomly(verbs.into(), error, probability));
    }

    /// Disarms every fault.
    pub fn clear_faults(&self) {
        self.with_state(|st| st.faults.clear());
    }

    /// Runs `hook` once, synchronously, just before the next call of `verb` is served (before
    /// faults are consulted), so "another actor" can write between two calls. Hooks of one
    /// verb run in the order armed, one per call.
    pub fn before(&self, verb: Verb, hook: impl FnOnce(&FakeCluster) + Send + 'static) {
        self.hooks().push(verb, Box::new(hook));
    }

    /// Every call served through the API traits' impls, in the order
    /// they began.
    pub fn calls(&self) -> Vec<Call> {
        self.with_state(|st| st.calls.clone())
    }

    /// How many calls of `verb` were served.
    pub fn count(&self, verb: Verb) -> usize {
        self.with_state(|st| st.calls.iter().filter(|c| c.verb == verb).count())
    }

    /// Starts serving a call: records it, runs the verb's hook, consults the faults. Answers
    /// the record index, or the injected error.
    pub(crate) fn begin(&self, call: Call) -> Result<usize, ApiError> {
        let verb = call.verb;
        let index = self.with_state(|st| {
            st.calls.push(call);
            st.calls.len() - 1
        });
        let hook = self.hooks().pop(verb);
        if let Some(hook) = hook {
            hook(self);
        }
        match self.with_state(|st| st.faults.check(verb)) {
            Some(error) => {
                self.end(index, Some(error.kind));
                Err(error)
            }
            None => Ok(index),
        }
    }

    /// Records how the call at `index` ended.
    pub(crate) fn end(&self, index: usize, error: Option<ErrorKind>) {
        self.with_state(|st| st.calls[index].error = error);
    }
}

/// A Job as its author submitted it: without what the apiserver and controllers added.
fn as_submitted(mut job: Job) -> Job {
    let meta = &mut job.metadata;
    meta.uid = None;
    meta.resource_version = None;
    meta.creation_timestamp = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.generation = None;
    meta.managed_fields = None;
    if let Some(f) = meta.finalizers.as_mut() {
        f.retain(|f| f != FOREGROUND_DELETION);
    }
    let generated = [
        CONTROLLER_UID,
        JOB_NAME,
        LEGACY_CONTROLLER_UID,
        LEGACY_JOB_NAME,
    ];
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|k, _| !generated.contains(&k.as_str()));
    }
    if let Some(spec) = job
        .spec
        .as_mut()
        .filter(|s| s.manual_selector != Some(true))
    {
        spec.selector = None;
        let labels = spec
            .template
            .metadata
            .as_mut()
            .and_then(|m| m.labels.as_mut());
        if let Some(labels) = labels {
            labels.retain(|k, _| !generated.contains(&k.as_str()));
        }
    }
    job.status = None;
    job
}

/// The driver: applies due timer entries in order, then sleeps until the next one or until
/// woken. Holds only a weak handle while it sleeps, so dropping the last [`FakeCluster`] ends
/// it.
async fn drive(shared: Weak<Shared>, wake: Arc<Notify>) {
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let cluster = FakeCluster { shared };
        loop {
            let due = cluster.with_state(|st| {
                let now = st.now;
                st.timers.pop_due(now)
            });
            match due {
                None => break,
                Some(Task::Action(action)) => cluster.with_state(|st| st.apply(action)),
                Some(Task::User(ticket)) => {
                    let f = cluster.hooks().take_scheduled(ticket);
                    if let Some(f) = f {
                        f(&cluster);
                    }
                }
            }
        }
        let next = cluster.with_state(|st| st.timers.next_due());
        let start = cluster.shared.start;
        drop(cluster);
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(start + at) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}
