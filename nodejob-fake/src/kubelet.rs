//! The kubelet of each node, scriptable per node with a [`NodeScript`], and the Node objects.
//!
//! The kubelets are one component: they work on the store and the timer queue lent to them
//! ([`Ctx`]), reacting to timer entries and, level-triggered, to the deletions the apiserver
//! wrote. A kubelet starts the container of a pod bound to its node. A host program runs for
//! its run time and the kubelet reports its exit (with the log's tail as the termination
//! message of a failed `FallbackToLogsOnError` container); a workload runs until its pod is
//! deleted (see [`crate::host`]). On the pod's deletion the kubelet sends a running container
//! SIGTERM, which ends it (exit 143) unless it ignores SIGTERM, and then SIGKILL after the
//! grace period (exit 137). It does all that only while its node is Ready: on a NotReady node
//! its steps wait (the container keeps running, its status is not reported) until the node is
//! Ready again, as a kubelet cut off from the apiserver would.
//!
//! What a container does comes from its argv (see [`crate::host`]): its directives, else the
//! node's host model ([`StratumHost`]) for an argv that execs `stratum`, else the node's script
//! ([`nodejob_host::Plan::of`]). A process prints its log when it exits on its own: a running
//! container's log is empty, and a killed one printed nothing. What the host model says
//! happens to the node after a program's exit (NotReady, a new boot, Ready) is applied by the
//! timers ([`Action::HostStep`]).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateWaiting, ContainerStatus, DaemonEndpoint, HostIP, Node,
    NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus, NodeSystemInfo, Pod,
    PodCondition, PodIP,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::{ApiError, ApiResult};
use nodejob_host::status::{self as kubelet_status, Ended};
use nodejob_host::stratum::StratumHost;
use nodejob_host::termination::{self, OnSigterm};
use nodejob_host::{DEFAULT_RUN_TIME, Effect, Fallback, NodeStep, Plan, Program};

use crate::ctx::Ctx;
use crate::store::{Key, Store, node_is_ready, node_not_found, pod_is_terminal as is_terminal};
use crate::timers::{Action, ObjRef};
use crate::timing::stamp;

/// Whether a node's containers start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ContainerStart {
    /// They start [`Timing::container_start`](crate::Timing::container_start) after their pod
    /// is bound.
    #[default]
    Starts,
    /// They never start: the pod stays Pending, its container waiting in `ContainerCreating`
    /// (an image that never pulls, a volume that never mounts).
    Never,
}

/// Whether the apiserver reaches a node's kubelet for logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LogEndpoint {
    /// `pod_log` reads the log.
    #[default]
    Reachable,
    /// `pod_log` answers 500 with the dial error (the status is still known).
    Unreachable,
}

/// What the kubelet of one node does with the pods bound to it, where neither the argv nor the
/// node's host model says.
///
/// ```
/// use std::time::Duration;
/// use nodejob_fake::{ContainerStart, NodeScript, OnSigterm};
///
/// let flaky = NodeScript { exit_code: 1, log: "boom\n".into(), ..NodeScript::default() };
/// let stuck = NodeScript { start: ContainerStart::Never, ..NodeScript::default() };
/// let stubborn = NodeScript { on_sigterm: OnSigterm::Ignore, ..NodeScript::default() };
/// # let _ = (flaky, stuck, stubborn);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeScript {
    /// A host program's exit status (taken modulo 256). Default 0.
    pub exit_code: i32,
    /// What a host program prints. Default empty.
    pub log: String,
    /// How long a host program runs. Default 2s
    /// ([`DEFAULT_RUN_TIME`](nodejob_host::DEFAULT_RUN_TIME)).
    pub run_time: Duration,
    /// Whether containers start at all. Default [`ContainerStart::Starts`].
    pub start: ContainerStart,
    /// Admission refuses every pod bound to this node with this message: the Job controller
    /// records `FailedCreate` events and retries. Prefer namespace-level PodSecurity
    /// ([`FakeCluster::label_namespace`](crate::FakeCluster::label_namespace)), which is where a
    /// real cluster refuses privileged pods; this per-node refusal stands for any other
    /// admission plugin.
    pub refuse_pods: Option<String>,
    /// Whether the apiserver reaches this node's kubelet for logs. Default reachable.
    pub log_endpoint: LogEndpoint,
    /// What the containers that start on this node from now on do on SIGTERM (a container's
    /// `nodejob-test:sigterm=ignore` directive wins). Default [`OnSigterm::Exit`]: like the
    /// host programs the runner execs, they do not trap SIGTERM and end
    /// [`Timing::kill_delay`](crate::Timing::kill_delay) after their pod's deletion with exit
    /// 143. [`OnSigterm::Ignore`]: they run until the kubelet's SIGKILL at the end of the grace
    /// period (the pod's `terminationGracePeriodSeconds`, else 30s), exit 137.
    pub on_sigterm: OnSigterm,
}

impl Default for NodeScript {
    fn default() -> Self {
        NodeScript {
            exit_code: 0,
            log: String::new(),
            run_time: DEFAULT_RUN_TIME,
            start: ContainerStart::Starts,
            refuse_pods: None,
            log_endpoint: LogEndpoint::Reachable,
            on_sigterm: OnSigterm::Exit,
        }
    }
}

impl NodeScript {
    /// What a host program does where its argv's directives and the host model say nothing.
    fn fallback(&self) -> Fallback {
        Fallback {
            exit_code: self.exit_code,
            log: self.log.clone(),
            run: self.run_time,
        }
    }
}

/// A started container, as its kubelet knows it.
#[derive(Debug)]
struct Container {
    /// What it prints when it exits on its own.
    log: String,
    /// What happens to its node once it exits on its own (its host model's answer).
    effects: Vec<Effect>,
    /// Whether it exited (its log is readable then).
    exited: bool,
    /// What it does on SIGTERM (its argv's directive, else its node's script when it started).
    on_sigterm: OnSigterm,
}

/// Every node's kubelet.
#[derive(Debug, Default)]
pub(crate) struct Kubelets {
    scripts: BTreeMap<String, NodeScript>,
    /// Each node's host model, by node.
    hosts: BTreeMap<String, StratumHost>,
    /// The host model of each node deleted since, by name (the last one of that name): its
    /// execution counts outlive the Node object, as a machine outlives its registration.
    retired: BTreeMap<String, StratumHost>,
    /// Steps waiting for their node to be Ready, by node.
    parked: BTreeMap<String, Vec<Action>>,
    containers: BTreeMap<String, Container>,
    /// Pods whose removal the kubelet confirmed (its final delete with grace 0), by UID, with
    /// the key each is stored under.
    confirmed: BTreeMap<String, Key>,
    /// The grace period (seconds) each pod being deleted had when the kubelet last acted on
    /// its deletion, by UID.
    terminating: BTreeMap<String, i64>,
    nodes_added: u32,
}

impl Kubelets {
    /// The script of `node` (the default one if none was set).
    pub(crate) fn script(&self, node: &str) -> NodeScript {
        self.scripts.get(node).cloned().unwrap_or_default()
    }

    pub(crate) fn set_script(&mut self, node: &str, script: NodeScript) {
        self.scripts.insert(node.to_string(), script);
    }

    /// The host model of `node`, if it is known.
    pub(crate) fn host(&self, node: &str) -> Option<&StratumHost> {
        self.hosts.get(node)
    }

    /// The host model of `node`, or of the last node of that name deleted.
    pub(crate) fn host_or_retired(&self, node: &str) -> Option<&StratumHost> {
        self.hosts.get(node).or_else(|| self.retired.get(node))
    }

    /// The host model of `node`, made from the Node's `nodeInfo` if it has none yet.
    fn host_mut(&mut self, store: &Store, node: &str) -> &mut StratumHost {
        self.hosts.entry(node.to_string()).or_insert_with(|| {
            let info = (store.nodes.get(node))
                .and_then(|n| n.status.as_ref())
                .and_then(|s| s.node_info.clone())
                .unwrap_or_default();
            StratumHost::new(info.kubelet_version, info.boot_id)
        })
    }
}

fn first_container_status(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status.as_ref()?.container_statuses.as_ref()?.first()
}

fn container_running(pod: &Pod) -> bool {
    first_container_status(pod)
        .and_then(|s| s.state.as_ref())
        .is_some_and(|s| s.running.is_some())
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// The condition types the kubelet (and, for `PodScheduled`, the scheduler) writes; others
/// (`DisruptionTarget`) are kept when it rewrites the list.
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// Replaces the kubelet's conditions of `status` with `conditions`, keeping the others after
/// them (the kubelet's status manager merges what other writers set).
fn set_kubelet_conditions(
    status: &mut k8s_openapi::api::core::v1::PodStatus,
    conditions: Vec<PodCondition>,
) {
    let others = (status.conditions.take().into_iter().flatten())
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()));
    status.conditions = Some(conditions.into_iter().chain(others).collect());
}

/// The default `status.nodeInfo.kubeletVersion` of a node.
pub const DEFAULT_KUBELET_VERSION: &str = "v1.37.2";

fn pod_condition(type_: &str, status: bool, reason: Option<&str>, now: Duration) -> PodCondition {
    kubelet_status::pod_condition(type_, status, reason, &stamp(now))
}

/// The message of a NotReady node's `Ready` condition.
const NOT_READY_MESSAGE: &str = "container runtime status check may not have completed yet";

fn ready_condition(ready: bool, now: Duration) -> NodeCondition {
    kubelet_status::node_ready_condition(ready, NOT_READY_MESSAGE, &stamp(now))
}

/// The port the apiserver dials for the node's kubelet: `daemonEndpoints.kubeletEndpoint.port`,
/// else the default 10250 (`NodeConnectionInfoGetter.GetConnectionInfo` in
/// `pkg/kubelet/client/kubelet_client.go`).
fn kubelet_port(node: &Node) -> i32 {
    let endpoints = node
        .status
        .as_ref()
        .and_then(|s| s.daemon_endpoints.as_ref());
    let port = endpoints
        .and_then(|e| e.kubelet_endpoint.as_ref())
        .map(|k| k.port);
    port.filter(|p| *p > 0).unwrap_or(10250)
}

/// The node's `InternalIP`.
fn internal_ip(node: &Node) -> Option<&str> {
    let addresses = node.status.as_ref()?.addresses.as_ref()?;
    addresses
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.as_str())
}

impl Kubelets {
    /// Registers a Ready node with the next `InternalIP` of `10.0.0.0/16` (10.0.0.1 first).
    pub(crate) fn add_node(&mut self, cx: &mut Ctx<'_>, name: &str) -> ApiResult<Node> {
        if cx.store.nodes.contains_key(name) {
            return Err(ApiError::already_exists(format!(
                "nodes \"{name}\" already exists"
            )));
        }
        let n = self.nodes_added;
        self.nodes_added += 1;
        let ip = format!("10.0.{}.{}", n / 254, n % 254 + 1);
        let boot_id = cx.store.infra_uuid();
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                uid: Some(cx.store.uid()),
                creation_timestamp: Some(stamp(cx.now)),
                labels: Some(
                    [
                        ("kubernetes.io/hostname", name),
                        ("kubernetes.io/os", "linux"),
                    ]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                conditions: Some(vec![ready_condition(true, cx.now)]),
                addresses: Some(vec![
                    NodeAddress {
                        type_: "InternalIP".to_string(),
                        address: ip,
                    },
                    NodeAddress {
                        type_: "Hostname".to_string(),
                        address: name.to_string(),
                    },
                ]),
                daemon_endpoints: Some(NodeDaemonEndpoints {
                    kubelet_endpoint: Some(DaemonEndpoint { port: 10250 }),
                }),
                node_info: Some(NodeSystemInfo {
                    architecture: "amd64".to_string(),
                    boot_id: boot_id.clone(),
                    container_runtime_version: "containerd://2.1.4".to_string(),
                    kernel_version: "6.8.0-79-generic".to_string(),
                    kube_proxy_version: String::new(),
                    kubelet_version: DEFAULT_KUBELET_VERSION.to_string(),
                    machine_id: cx.store.infra_uuid().replace('-', ""),
                    operating_system: "linux".to_string(),
                    os_image: "Ubuntu 24.04.3 LTS".to_string(),
                    system_uuid: cx.store.infra_uuid(),
                    ..NodeSystemInfo::default()
                }),
                ..NodeStatus::default()
            }),
        };
        let node = cx.store.write_node(node);
        let host = StratumHost::new(DEFAULT_KUBELET_VERSION, boot_id);
        self.hosts.insert(name.to_string(), host);
        self.unpark(cx, name);
        Ok(node)
    }

    /// Gives `node` the host model `host`; the Node reports its version and boot ID (a write
    /// when they change). NotFound if there is no such node.
    pub(crate) fn set_host(
        &mut self,
        store: &mut Store,
        node: &str,
        host: StratumHost,
    ) -> ApiResult<Node> {
        let (version, boot_id) = (host.state.version.clone(), host.state.boot_id.clone());
        let written = update_node_info(store, node, |info| {
            info.kubelet_version = version;
            info.boot_id = boot_id;
        })?;
        self.hosts.insert(node.to_string(), host);
        Ok(written)
    }

    /// The node's kubelet reports `version` (an upgraded kubelet), and its host runs it.
    pub(crate) fn set_kubelet_version(
        &mut self,
        store: &mut Store,
        node: &str,
        version: &str,
    ) -> ApiResult<Node> {
        let written = update_node_info(store, node, |i| i.kubelet_version = version.into())?;
        self.host_mut(store, node).state.version = version.to_string();
        Ok(written)
    }

    /// The node restarts: its kubelet posts a new `bootID`, its host knows it, and what ran
    /// there under `restartPolicy: Never` is lost ([`lose_running`](Self::lose_running)).
    pub(crate) fn reboot(
        &mut self,
        store: &mut Store,
        node: &str,
        now: Duration,
    ) -> ApiResult<Node> {
        store.get_node(node)?;
        let boot_id = store.infra_uuid();
        let written = update_node_info(store, node, |info| info.boot_id.clone_from(&boot_id))?;
        self.host_mut(store, node).state.boot_id = boot_id;
        self.lose_running(store, node, now);
        Ok(written)
    }

    /// A new boot of `node`: every container still running there in a pod that is not
    /// restarted (`restartPolicy: Never`, [`kubelet_status::ends_in_reboot`]) is reported lost,
    /// exit 255, reason `Unknown`, its pod `Failed`, as a real kubelet reports it after a
    /// reboot; what its program would have printed or done after is gone. A pod restarted in
    /// place (a Deployment's) keeps running here: its restart is not modelled.
    fn lose_running(&mut self, store: &mut Store, node: &str, now: Duration) {
        // The pods bound there, from the store's index: not every pod of the cluster per boot.
        let lost: Vec<Pod> = (store.index.on_node(node))
            .filter_map(|key| store.pods.get(key))
            .filter(|p| container_running(p) && kubelet_status::ends_in_reboot(p))
            .cloned()
            .collect();
        for mut pod in lost {
            if let Some(c) = (pod.metadata.uid.as_ref()).and_then(|u| self.containers.get_mut(u)) {
                c.exited = true;
                c.log.clear();
                c.effects.clear();
            }
            let status = pod.status.get_or_insert_default();
            status.phase = Some("Failed".to_string());
            set_kubelet_conditions(status, kubelet_status::terminated_conditions(&stamp(now)));
            if let Some(cs) = (status.container_statuses.as_mut()).and_then(|c| c.first_mut()) {
                let started_at = (cs.state.as_ref())
                    .and_then(|s| s.running.as_ref())
                    .and_then(|r| r.started_at.clone());
                cs.ready = false;
                cs.started = Some(false);
                cs.state = Some(kubelet_status::lost_in_reboot(
                    started_at,
                    stamp(now),
                    cs.container_id.clone(),
                ));
            }
            store.write_pod(pod);
        }
    }

    /// Forgets the host model of a deleted node.
    pub(crate) fn forget_host(&mut self, node: &str) {
        if let Some(host) = self.hosts.remove(node) {
            self.retired.insert(node.to_string(), host);
        }
    }

    /// A step of a host model's aftermath on Node `node` (if it is still that node): `Ready`
    /// goes `False` or `True` ([`set_node_ready`](Self::set_node_ready)), or the node booted
    /// again: a new `bootID` drawn from the seed, `kubeletVersion` as the step says, both told
    /// to the host model.
    pub(crate) fn host_step(&mut self, cx: &mut Ctx<'_>, node: &ObjRef, step: NodeStep) {
        let name = node.key.1.as_str();
        let same = (cx.store.nodes.get(name))
            .is_some_and(|n| n.metadata.uid.as_deref() == Some(node.uid.as_str()));
        if !same {
            return;
        }
        // The node was just read: these writes cannot fail.
        let _ = match step {
            NodeStep::NotReady => self.set_node_ready(cx, name, false),
            NodeStep::Ready => self.set_node_ready(cx, name, true),
            NodeStep::Boot { kubelet_version } => {
                let boot_id = cx.store.infra_uuid();
                self.host_mut(cx.store, name)
                    .booted(&kubelet_version, &boot_id);
                let written = update_node_info(cx.store, name, |info| {
                    info.kubelet_version = kubelet_version;
                    info.boot_id = boot_id;
                })
                .map(drop);
                self.lose_running(cx.store, name, cx.now);
                written
            }
        };
    }

    /// The kubelet posts its Ready condition (a Node write, only when it changes).
    pub(crate) fn set_node_ready(
        &mut self,
        cx: &mut Ctx<'_>,
        name: &str,
        ready: bool,
    ) -> ApiResult<()> {
        let mut node = cx.store.get_node(name)?;
        if Self::node_ready(cx.store, name) == ready {
            return Ok(());
        }
        let conditions = node
            .status
            .get_or_insert_default()
            .conditions
            .get_or_insert_default();
        // As the kubelet's `ReadyCondition` setter (`pkg/kubelet/nodestatus/setters.go`): its
        // own condition updated in place, or appended; every other condition (a driver's, a
        // node-problem-detector's) kept where it is. Its status then goes out as a
        // strategic-merge patch, which merges the list by type (`PatchNodeStatus`,
        // `k8s.io/component-helpers/node/util`).
        let ready_now = ready_condition(ready, cx.now);
        match conditions.iter_mut().find(|c| c.type_ == "Ready") {
            Some(c) => *c = ready_now,
            None => conditions.push(ready_now),
        }
        cx.store.write_node(node);
        if ready {
            self.unpark(cx, name);
        }
        Ok(())
    }

    /// Whether `node` exists and its Ready condition is `"True"`.
    fn node_ready(store: &Store, node: &str) -> bool {
        store.nodes.get(node).is_some_and(node_is_ready)
    }

    /// Parks `action` until `node` is Ready; answers whether it did.
    fn park_unless_ready(&mut self, cx: &mut Ctx<'_>, node: &str, action: Action) -> bool {
        if node.is_empty() || Self::node_ready(cx.store, node) {
            return false;
        }
        self.parked
            .entry(node.to_string())
            .or_default()
            .push(action);
        true
    }

    fn unpark(&mut self, cx: &mut Ctx<'_>, node: &str) {
        for action in self.parked.remove(node).unwrap_or_default() {
            cx.timers.at(cx.now, action);
        }
    }

    /// The kubelet starts the pod's container (first container only), or reports it stuck in
    /// `ContainerCreating` when its node's script says it never starts.
    pub(crate) fn start_container(&mut self, cx: &mut Ctx<'_>, r: ObjRef) {
        let Some(mut pod) = cx.store.pod_with_uid(&r.key, &r.uid).cloned() else {
            return;
        };
        if pod.metadata.deletion_timestamp.is_some()
            || is_terminal(&pod)
            || first_container_status(&pod).is_some_and(|s| s.started == Some(true))
        {
            return;
        }
        let node = node_of(&pod).to_string();
        if node.is_empty() {
            // Not bound yet: the scheduler starts it once it binds it.
            return;
        }
        if self.park_unless_ready(cx, &node, Action::StartContainer(r.clone())) {
            return;
        }
        let now = cx.now;
        let script = self.script(&node);
        let Some(container) = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .cloned()
        else {
            return;
        };
        let host_ip = cx
            .store
            .nodes
            .get(&node)
            .and_then(internal_ip)
            .unwrap_or_default()
            .to_string();
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
        let image = container.image.clone().unwrap_or_default();
        let status = pod.status.get_or_insert_default();
        status.host_ip = Some(host_ip.clone());
        status.host_ips = Some(vec![HostIP {
            ip: host_ip.clone(),
        }]);
        if host_network {
            status.pod_ip = Some(host_ip.clone());
            status.pod_ips = Some(vec![PodIP { ip: host_ip }]);
        }
        status.start_time.get_or_insert(stamp(now));
        let mut container_status = ContainerStatus {
            name: container.name.clone(),
            image: image.clone(),
            image_id: image,
            ..ContainerStatus::default()
        };
        if script.start == ContainerStart::Never {
            container_status.state = Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("ContainerCreating".to_string()),
                    message: None,
                }),
                ..ContainerState::default()
            });
            set_kubelet_conditions(
                status,
                vec![
                    pod_condition("PodScheduled", true, None, now),
                    pod_condition("Initialized", true, None, now),
                    pod_condition("Ready", false, Some("ContainersNotReady"), now),
                    pod_condition("ContainersReady", false, Some("ContainersNotReady"), now),
                ],
            );
            status.container_statuses = Some(vec![container_status]);
            cx.store.write_pod(pod);
            return;
        }
        let host = self.host_mut(cx.store, &node);
        let plan = Plan::of(&pod, &container, &script.fallback(), host);
        let on_sigterm = plan.on_sigterm.unwrap_or(script.on_sigterm);
        container_status.container_id = Some(format!("containerd://{}", cx.store.hex(32)));
        container_status.ready = true;
        container_status.started = Some(true);
        container_status.state = Some(kubelet_status::running_state(&stamp(now)));
        let status = pod.status.get_or_insert_default();
        status.phase = Some("Running".to_string());
        set_kubelet_conditions(status, kubelet_status::running_conditions(&stamp(now)));
        status.container_statuses = Some(vec![container_status]);
        cx.store.write_pod(pod);
        let (log, effects, exit) = match plan.program {
            Program::Host(e) => (e.log, e.effects, Some((now + e.run, e.exit_code))),
            Program::Workload => (String::new(), Vec::new(), None),
        };
        let container = Container {
            log,
            effects,
            exited: false,
            on_sigterm,
        };
        self.containers.insert(r.uid.clone(), container);
        let Some((at, exit_code)) = exit else {
            // A workload runs until its pod is deleted.
            return;
        };
        cx.timers.at(
            at,
            Action::ContainerExit {
                pod: r,
                exit_code,
                at,
            },
        );
    }

    /// The container exits on its own; the kubelet reports it (once its node is Ready).
    pub(crate) fn container_exit(
        &mut self,
        cx: &mut Ctx<'_>,
        r: ObjRef,
        exit_code: i32,
        at: Duration,
    ) {
        let Some(pod) = cx.store.pod_with_uid(&r.key, &r.uid) else {
            return;
        };
        if !container_running(pod) {
            return;
        }
        let node = node_of(pod).to_string();
        let deleting = pod.metadata.deletion_timestamp.is_some();
        if self.park_unless_ready(
            cx,
            &node,
            Action::ContainerExit {
                pod: r.clone(),
                exit_code,
                at,
            },
        ) {
            return;
        }
        let (log, effects) = match self.containers.get_mut(&r.uid) {
            Some(c) => {
                c.exited = true;
                (c.log.clone(), std::mem::take(&mut c.effects))
            }
            None => (String::new(), Vec::new()),
        };
        self.terminate(cx, &r.key, exit_code, at, &log);
        // The host goes on after its program: the aftermath counts from the exit.
        if let Some(n) = cx.store.nodes.get(&node) {
            let n = ObjRef::of(&n.metadata);
            for Effect { after, step } in effects {
                let step = Action::HostStep {
                    node: n.clone(),
                    step,
                };
                cx.timers.at(at + after, step);
            }
        }
        if deleting {
            // Nothing runs any more: the kubelet finishes the deletion shortly.
            cx.timers
                .at(cx.now + cx.timing.pod_cleanup, Action::Kill(r));
        }
    }

    /// Writes the container's termination: `terminated { exitCode, reason, message }`, pod
    /// phase `Succeeded` (exit 0) or `Failed`. The message is the tail of `log` for a failed
    /// container whose `terminationMessagePolicy` is `FallbackToLogsOnError`.
    fn terminate(&mut self, cx: &mut Ctx<'_>, key: &Key, exit_code: i32, at: Duration, log: &str) {
        let Some(mut pod) = cx.store.pods.get(key).cloned() else {
            return;
        };
        let now = cx.now;
        let container = (pod.spec.as_ref()).and_then(|s| s.containers.first());
        let message = container.and_then(|c| termination::message(c, exit_code, log));
        let status = pod.status.get_or_insert_default();
        status.phase = Some(kubelet_status::terminated_phase(exit_code).to_string());
        set_kubelet_conditions(status, kubelet_status::terminated_conditions(&stamp(now)));
        if let Some(cs) = status
            .container_statuses
            .as_mut()
            .and_then(|c| c.first_mut())
        {
            let started_at = cs
                .state
                .as_ref()
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.clone());
            cs.ready = false;
            cs.started = Some(false);
            cs.state = Some(kubelet_status::terminated_state(Ended {
                exit_code,
                message,
                started_at,
                finished_at: stamp(at),
                container_id: cs.container_id.clone(),
            }));
        }
        cx.store.write_pod(pod);
    }

    /// The kubelet's reaction to deletions, level-triggered: for each pod newly being deleted
    /// it confirms a pod already ended, stops a running container ([`Action::Stop`]: SIGTERM,
    /// or SIGKILL at the end of the grace period for one that ignores SIGTERM), and finishes
    /// promptly a pod whose container never started ([`Action::Kill`]; for a pod never bound,
    /// the pod garbage collector plays that part). When a pod's grace period was shortened
    /// since, it starts the kill again with the shorter one, from now (`pod_workers.go`: a
    /// shortened grace period cancels the running sync). It forgets the pods that are gone.
    pub(crate) fn sync(&mut self, cx: &mut Ctx<'_>) {
        // What it kept of the pods removed since.
        for uid in std::mem::take(&mut cx.store.index.removed_pods) {
            self.containers.remove(&uid);
            self.confirmed.remove(&uid);
            self.terminating.remove(&uid);
        }
        // The pods being deleted that are new to it, or whose grace period was shortened: of
        // those written since it last looked (a batch of a roll has a thousand being deleted,
        // through every settle pass until they are gone), in key order; one it saw already
        // with this grace is passed over without a copy.
        let written = std::mem::take(&mut cx.store.index.deleting_written);
        let mut deleting = Vec::new();
        for pod in (written.iter()).filter_map(|key| cx.store.pods.get(key)) {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
            let secs = |g: i64| u64::try_from(g).unwrap_or(0);
            if let Some(before) = self.terminating.get_mut(uid)
                && secs(grace) >= secs(*before)
            {
                *before = grace;
                continue;
            }
            let seen = self.terminating.insert(uid.to_string(), grace);
            let pod = (
                uid.to_string(),
                grace,
                ObjRef::of(&pod.metadata),
                container_running(pod),
                is_terminal(pod),
            );
            deleting.push((pod, seen));
        }
        for ((uid, grace, r, running, terminal), seen) in deleting {
            let grace = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
            // Seen before here means its grace was shortened: the kill starts again.
            match seen {
                Some(_) if running => {
                    let on_sigterm = self.on_sigterm(&uid);
                    let (after, exit_code) =
                        termination::stop(grace, cx.timing.kill_delay, on_sigterm);
                    cx.timers
                        .at(cx.now + after, Action::Stop { pod: r, exit_code });
                }
                Some(_) => {}
                None if terminal => {
                    self.confirmed.insert(uid, r.key);
                }
                None if running => {
                    let on_sigterm = self.on_sigterm(&uid);
                    let (after, exit_code) =
                        termination::stop(grace, cx.timing.kill_delay, on_sigterm);
                    cx.timers
                        .at(cx.now + after, Action::Stop { pod: r, exit_code });
                }
                None => cx
                    .timers
                    .at(cx.now + cx.timing.pod_cleanup, Action::Kill(r)),
            }
        }
    }

    /// What the running container of pod `uid` does on SIGTERM.
    fn on_sigterm(&self, uid: &str) -> OnSigterm {
        (self.containers.get(uid)).map_or(OnSigterm::Exit, |c| c.on_sigterm)
    }

    /// The running container of a deleted pod ends by the kubelet's signal with `exit_code`
    /// (143 for SIGTERM, 137 for SIGKILL; reason `Error`; a killed process printed nothing),
    /// reported at once; the kubelet finishes the pod
    /// [`Timing::pod_cleanup`](crate::Timing::pod_cleanup) later ([`Action::Kill`]).
    pub(crate) fn stop(&mut self, cx: &mut Ctx<'_>, r: ObjRef, exit_code: i32) {
        let Some(pod) = cx.store.pod_with_uid(&r.key, &r.uid) else {
            return;
        };
        if !container_running(pod) {
            // It exited on its own first.
            return;
        }
        let node = node_of(pod).to_string();
        if self.park_unless_ready(
            cx,
            &node,
            Action::Stop {
                pod: r.clone(),
                exit_code,
            },
        ) {
            return;
        }
        if let Some(c) = self.containers.get_mut(&r.uid) {
            // Killed: it printed nothing, and its host's aftermath does not happen.
            c.exited = true;
            c.log.clear();
            c.effects.clear();
        }
        self.terminate(cx, &r.key, exit_code, cx.now, "");
        cx.timers
            .at(cx.now + cx.timing.pod_cleanup, Action::Kill(r));
    }

    /// The kubelet finishes a deleted pod in which nothing runs: phase `Failed` for a pod
    /// whose container never started; then it confirms the removal.
    pub(crate) fn kill(&mut self, cx: &mut Ctx<'_>, r: ObjRef) {
        let Some(pod) = cx.store.pod_with_uid(&r.key, &r.uid).cloned() else {
            return;
        };
        if self.park_unless_ready(cx, node_of(&pod), Action::Kill(r.clone())) {
            return;
        }
        if container_running(&pod) {
            // Its Action::Stop ends it first.
            return;
        } else if !is_terminal(&pod) {
            let mut pod = pod;
            pod.status.get_or_insert_default().phase = Some("Failed".to_string());
            cx.store.write_pod(pod);
        }
        self.confirmed.insert(r.uid, r.key);
        // The confirmation is the kubelet's final DELETE (grace 0): the apiserver removes the
        // pod now if no finalizer holds it, even when nothing else was written.
        self.remove_finished_pods(cx);
        cx.timers.settle(cx.now);
    }

    /// apiserver: a pod with a deletionTimestamp whose removal the kubelet confirmed is removed
    /// once it has no finalizer left.
    pub(crate) fn remove_finished_pods(&mut self, cx: &mut Ctx<'_>) {
        // The confirmed pods, not every pod being deleted: this runs on every settle pass and
        // at every kill, with a thousand being deleted in a batch of a large roll. In key order.
        let mut done: Vec<(Key, String)> = (self.confirmed.iter())
            .filter(|(uid, key)| {
                cx.store.index.deleting_pods.contains(*key)
                    && (cx.store.pods.get(*key)).is_some_and(|p| {
                        p.metadata.uid.as_ref() == Some(*uid)
                            && p.metadata.finalizers.as_ref().is_none_or(Vec::is_empty)
                    })
            })
            .map(|(uid, key)| (key.clone(), uid.clone()))
            .collect();
        done.sort();
        for (key, uid) in done {
            cx.store.remove_pod(&key);
            self.containers.remove(&uid);
            self.confirmed.remove(&uid);
            self.terminating.remove(&uid);
        }
    }

    /// `GET .../pods/{pod}/log`: the apiserver checks the pod and container, then
    /// (`LogLocation` in `pkg/registry/core/pod/strategy.go`) answers 204 with no body for a
    /// pod without `nodeName` (read as an empty log); finds the node (`GetConnectionInfo`) and
    /// dials its kubelet, which answers 400 for a container not started, else the log, cut to
    /// `limit_bytes`.
    pub(crate) fn pod_log(
        &self,
        store: &Store,
        namespace: &str,
        pod_name: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        let key = (namespace.to_string(), pod_name.to_string());
        let pod = (store.pods.get(&key))
            .ok_or_else(|| ApiError::not_found(format!("pods \"{pod_name}\" not found")))?;
        let names: Vec<&str> = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| c.name.as_str())
            .collect();
        let container = match (container, names.as_slice()) {
            ("", [one]) => *one,
            ("", []) => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {pod_name}"
                )));
            }
            ("", many) => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                    many.join(" ")
                )));
            }
            (c, _) if !names.contains(&c) => {
                return Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {pod_name}"
                )));
            }
            (c, _) => c,
        };
        let node_name = node_of(pod);
        if node_name.is_empty() {
            // "If pod has not been assigned a host, return an empty location": the log
            // handler then streams nothing, a 204 No Content (not the 400 "does not have a
            // host assigned" of exec, attach and port-forward).
            return Ok(String::new());
        }
        let node = store.nodes.get(node_name).ok_or_else(|| {
            // The Node is read through the node registry with the request's context, whose
            // RequestInfo names the resource `pods` (generic registry `Store.Get` with
            // `qualifiedResourceFromContext`): a missing node reads `pods "<node>" not found`.
            ApiError::not_found(format!("pods \"{node_name}\" not found"))
        })?;
        if self.script(node_name).log_endpoint == LogEndpoint::Unreachable {
            let ip = internal_ip(node).unwrap_or_default();
            let port = kubelet_port(node);
            // The URL `LogLocation` builds: the node's kubelet port, `limitBytes` as the query.
            return Err(ApiError::transient(
                500,
                format!(
                    "Get \"https://{ip}:{port}/containerLogs/{namespace}/{pod_name}/{container}?limitBytes={limit_bytes}\": dial tcp {ip}:{port}: connect: connection refused"
                ),
            ));
        }
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        let status = statuses.into_iter().flatten().find(|s| s.name == container);
        let state = status.and_then(|s| s.state.as_ref());
        let started = state.is_some_and(|s| s.running.is_some() || s.terminated.is_some());
        if !started {
            let reason = state
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref());
            let reason = reason.unwrap_or("ContainerCreating");
            return Err(ApiError::bad_request(format!(
                "container \"{container}\" in pod \"{pod_name}\" is waiting to start: {reason}"
            )));
        }
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let log = match self.containers.get(uid) {
            Some(c) if c.exited => c.log.as_str(),
            _ => "",
        };
        let limit = usize::try_from(limit_bytes)
            .unwrap_or(usize::MAX)
            .min(log.len());
        Ok(String::from_utf8_lossy(&log.as_bytes()[..limit]).into_owned())
    }
}

/// Deletes the Node object. NotFound if there is no such node.
pub(crate) fn remove_node(store: &mut Store, name: &str) -> ApiResult<()> {
    store
        .remove_node(name)
        .map(drop)
        .ok_or_else(|| node_not_found(name))
}

/// Changes Node `name` with `change` and writes it if that changed anything. Answers the Node
/// as stored.
pub(crate) fn update_node(
    store: &mut Store,
    name: &str,
    change: impl FnOnce(&mut Node),
) -> ApiResult<Node> {
    let node = store.get_node(name)?;
    let mut changed = node.clone();
    change(&mut changed);
    if changed == node {
        return Ok(node);
    }
    Ok(store.write_node(changed))
}

/// The kubelet's `status.nodeInfo`, changed by `change` (a Node write when it changes).
pub(crate) fn update_node_info(
    store: &mut Store,
    name: &str,
    change: impl FnOnce(&mut NodeSystemInfo),
) -> ApiResult<Node> {
    update_node(store, name, |node| {
        let status = node.status.get_or_insert_default();
        change(status.node_info.get_or_insert_default());
    })
}
