//! The agent's event loop: two watches (the labelled Nodes, every Pod), routed to one
//! [`NodeWorker`] per adopted node and one [`PodWorker`] per pod bound to one.
//!
//! ```text
//!  watch nodes (nodejob.test/agent=true) ──▶ adopt: address, NodeWorker ──ready──┐
//!  watch pods (all namespaces) ── spec.nodeName adopted? ──▶ PodWorker ◀─────────┘
//!                                 └─ not yet: kept until its node is adopted
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::watch;

use crate::addresses::Addresses;
use crate::apiserver::Apiserver;
use crate::host::{NodeHost, REBOOT_ANNOTATION, TIMING_ANNOTATION, play, timing};
use crate::logbook::LogBook;
use crate::node::NodeWorker;
use crate::node_state::NodeState;
use crate::pod::PodWorker;
use crate::status::internal_ip;
use crate::task::Task;

/// The label that hands a Node to the agent.
pub(crate) const AGENT_LABEL: &str = "nodejob.test/agent=true";

struct AdoptedNode {
    uid: String,
    ip: Ipv4Addr,
    /// The node's [`TIMING_ANNOTATION`] as last applied to its host.
    timing: Option<String>,
    /// The node's [`REBOOT_ANNOTATION`] as last seen: a new value reboots the host.
    reboot: Option<String>,
    tx: watch::Sender<Node>,
    _task: Task,
}

/// A pod worker, by the sender of its pod: dropping it tells the worker the pod is gone, and
/// the worker forgets the pod's logs and ends by itself.
struct RunningPod {
    tx: watch::Sender<Option<Pod>>,
}

/// Everything the agent knows.
struct Agent {
    api: Apiserver,
    port: u16,
    kubelet_version: String,
    logs: LogBook,
    addresses: Addresses,
    /// Adopted nodes, by name.
    nodes: BTreeMap<String, AdoptedNode>,
    /// Each node's state for its pods, by name; kept after a node goes (not Ready then).
    states: BTreeMap<String, watch::Sender<NodeState>>,
    /// Each node's host (its `stratum` model and whether it is up), by name; kept after a
    /// node goes, for as long as the agent runs.
    hosts: BTreeMap<String, watch::Sender<NodeHost>>,
    /// Pods on adopted nodes, by uid.
    pods: BTreeMap<String, RunningPod>,
    /// Pods bound to a node not adopted (yet), by uid.
    waiting: BTreeMap<String, Pod>,
    /// Names of the nodes and uids of the pods listed since the last watch restart.
    relisted_nodes: Option<BTreeSet<String>>,
    relisted_pods: Option<BTreeSet<String>>,
}

/// Runs the agent until its watches end (they do not: they retry with backoff).
pub(crate) async fn run(client: Client, port: u16, kubelet_version: String) {
    let nodes = watcher::watcher(
        Api::<Node>::all(client.clone()),
        watcher::Config::default().labels(AGENT_LABEL),
    )
    .default_backoff();
    let pods = watcher::watcher(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .default_backoff();
    let mut nodes = std::pin::pin!(nodes);
    let mut pods = std::pin::pin!(pods);
    let mut agent = Agent {
        api: Apiserver::new(client),
        port,
        kubelet_version,
        logs: LogBook::default(),
        addresses: Addresses::default(),
        nodes: BTreeMap::new(),
        states: BTreeMap::new(),
        hosts: BTreeMap::new(),
        pods: BTreeMap::new(),
        waiting: BTreeMap::new(),
        relisted_nodes: None,
        relisted_pods: None,
    };
    loop {
        tokio::select! {
            Some(event) = nodes.next() => match event {
                Ok(event) => agent.on_node_event(event),
                Err(e) => say!("watching nodes: {e}"),
            },
            Some(event) = pods.next() => match event {
                Ok(event) => agent.on_pod_event(event),
                Err(e) => say!("watching pods: {e}"),
            },
            else => return,
        }
    }
}

fn name_of(node: &Node) -> Option<String> {
    node.metadata.name.clone()
}

fn uid_of(pod: &Pod) -> Option<String> {
    pod.metadata.uid.clone()
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn annotation(node: &Node, key: &str) -> Option<String> {
    (node.metadata.annotations.as_ref())
        .and_then(|a| a.get(key))
        .cloned()
}

fn timing_annotation(node: &Node) -> Option<String> {
    annotation(node, TIMING_ANNOTATION)
}

/// Reboots node `name`'s host by itself ([`NodeHost::reboot`]), as its [`REBOOT_ANNOTATION`]
/// `value` (new) asks.
fn reboot(name: &str, host: &watch::Sender<NodeHost>, value: &str) {
    say!("node {name}: host: rebooting by itself ({REBOOT_ANNOTATION}={value:?})");
    let effects = host.borrow().reboot();
    let now = tokio::time::Instant::now();
    tokio::spawn(play(host.clone(), name.to_string(), now, effects));
}

/// Gives node `name`'s host the timing its [`TIMING_ANNOTATION`] `value` asks for, for the
/// programs that start from now on; a value that does not read is said and changes nothing.
fn set_timing(name: &str, host: &watch::Sender<NodeHost>, value: Option<&str>) {
    match timing(value) {
        Ok(t) => {
            host.send_if_modified(|h| {
                let changed = h.model.timing != t;
                if changed {
                    say!("node {name}: stratum timing {t:?}");
                    h.model.timing = t;
                }
                changed
            });
        }
        Err(e) => say!("node {name}: annotation {TIMING_ANNOTATION} {value:?} ignored: {e}"),
    }
}

impl Agent {
    fn on_node_event(&mut self, event: Event<Node>) {
        match event {
            Event::Init => self.relisted_nodes = Some(BTreeSet::new()),
            Event::InitApply(node) => {
                if let (Some(seen), Some(name)) = (self.relisted_nodes.as_mut(), name_of(&node)) {
                    seen.insert(name);
                }
                self.node_applied(node);
            }
            Event::InitDone => {
                let seen = self.relisted_nodes.take().unwrap_or_default();
                let gone: Vec<String> = (self.nodes.keys())
                    .filter(|n| !seen.contains(*n))
                    .cloned()
                    .collect();
                for name in gone {
                    self.node_gone(&name);
                }
            }
            Event::Apply(node) => self.node_applied(node),
            Event::Delete(node) => {
                if let Some(name) = name_of(&node) {
                    self.node_gone(&name);
                }
            }
        }
    }

    fn node_applied(&mut self, node: Node) {
        let Some(name) = name_of(&node) else { return };
        let uid = node.metadata.uid.clone().unwrap_or_default();
        if self.nodes.get(&name).is_some_and(|n| n.uid != uid) {
            // Deleted and created again between two events.
            self.node_gone(&name);
        }
        if let Some(adopted) = self.nodes.get_mut(&name) {
            let wanted = timing_annotation(&node);
            if adopted.timing != wanted {
                if let Some(host) = self.hosts.get(&name) {
                    set_timing(&name, host, wanted.as_deref());
                }
                adopted.timing = wanted;
            }
            let reboot_wanted = annotation(&node, REBOOT_ANNOTATION);
            if adopted.reboot != reboot_wanted {
                if let (Some(value), Some(host)) = (&reboot_wanted, self.hosts.get(&name)) {
                    reboot(&name, host, value);
                }
                adopted.reboot = reboot_wanted;
            }
            adopted.tx.send_replace(node);
            return;
        }
        let reported = internal_ip(node.status.as_ref());
        let Some(ip) = self.addresses.assign(&name, reported) else {
            say!("node {name}: no loopback address left, not adopted");
            return;
        };
        if let Some(other) = self.addresses.holder_other_than(&name, ip) {
            say!("node {name}: warning: its address {ip} is also node {other}'s");
        }
        say!("node {name}: adopted, address {ip}");
        let state = self
            .states
            .entry(name.clone())
            .or_insert_with(|| watch::channel(NodeState::default()).0)
            .clone();
        let host = match self.hosts.get(&name) {
            Some(host) => {
                // A node adopted again has booted again.
                host.send_modify(|h| h.rebooted(&name));
                host.subscribe()
            }
            None => {
                let (host, rx) = watch::channel(NodeHost::new(&name, &self.kubelet_version));
                self.hosts.insert(name.clone(), host);
                rx
            }
        };
        let wanted = timing_annotation(&node);
        if let Some(host) = self.hosts.get(&name) {
            set_timing(&name, host, wanted.as_deref());
        }
        // Adopted is booted: the value it has now asks for no reboot.
        let reboot = annotation(&node, REBOOT_ANNOTATION);
        let (tx, rx) = watch::channel(node);
        let worker = NodeWorker {
            api: self.api.clone(),
            logs: self.logs.clone(),
            name: name.clone(),
            ip,
            port: self.port,
            node: rx,
            host,
            state,
        };
        let task = Task(tokio::spawn(worker.run()));
        self.nodes.insert(
            name.clone(),
            AdoptedNode {
                uid,
                ip,
                timing: wanted,
                reboot,
                tx,
                _task: task,
            },
        );
        let waiting: Vec<String> = (self.waiting.iter())
            .filter(|(_, p)| node_of(p) == Some(name.as_str()))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in waiting {
            if let Some(pod) = self.waiting.remove(&uid) {
                self.pod_applied(pod);
            }
        }
    }

    fn node_gone(&mut self, name: &str) {
        if self.nodes.remove(name).is_some() {
            say!("node {name}: gone (deleted or unlabelled)");
            if let Some(state) = self.states.get(name) {
                state.send_modify(|s| s.ready = false);
            }
        }
    }

    fn on_pod_event(&mut self, event: Event<Pod>) {
        match event {
            Event::Init => self.relisted_pods = Some(BTreeSet::new()),
            Event::InitApply(pod) => {
                if let (Some(seen), Some(uid)) = (self.relisted_pods.as_mut(), uid_of(&pod)) {
                    seen.insert(uid);
                }
                self.pod_applied(pod);
            }
            Event::InitDone => {
                let seen = self.relisted_pods.take().unwrap_or_default();
                let gone: Vec<String> = (self.pods.keys().chain(self.waiting.keys()))
                    .filter(|uid| !seen.contains(*uid))
                    .cloned()
                    .collect();
                for uid in gone {
                    self.pod_gone(&uid);
                }
            }
            Event::Apply(pod) => self.pod_applied(pod),
            Event::Delete(pod) => {
                if let Some(uid) = uid_of(&pod) {
                    self.pod_gone(&uid);
                }
            }
        }
    }

    fn pod_applied(&mut self, pod: Pod) {
        let Some(uid) = uid_of(&pod) else { return };
        if let Some(running) = self.pods.get(&uid) {
            running.tx.send_replace(Some(pod));
            return;
        }
        let Some(node) = node_of(&pod).map(str::to_string) else {
            return;
        };
        let Some(adopted) = self.nodes.get(&node) else {
            self.waiting.insert(uid, pod);
            return;
        };
        let (Some(state), Some(host)) = (self.states.get(&node), self.hosts.get(&node)) else {
            return;
        };
        let (state, host) = (state.subscribe(), host.clone());
        let (tx, rx) = watch::channel(Some(pod));
        let worker = PodWorker::new(
            self.api.clone(),
            self.logs.clone(),
            &node,
            adopted.ip,
            rx,
            state,
            host,
        );
        let Some(worker) = worker else {
            say!("pod {uid} on {node}: no container, ignored");
            return;
        };
        tokio::spawn(worker.run());
        self.pods.insert(uid, RunningPod { tx });
    }

    fn pod_gone(&mut self, uid: &str) {
        self.waiting.remove(uid);
        self.pods.remove(uid);
    }
}
