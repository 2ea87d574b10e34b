//! [`Index`]: what the controllers look up on every settle pass, kept by the store as it writes,
//! so that a pass costs what changed rather than what exists.
//!
//! A settle pass runs after every locked section that wrote. Scanning every pod and Job on each
//! pass made a roll of thousands of nodes quadratic: the writes grow with the nodes, and so do
//! the pods and Jobs in flight each scan walked. These sets and marks let each loop look only
//! at the objects it acts on (pods to place, pods and Jobs being deleted, Jobs whose inputs
//! changed) and skip a pass in which nothing it reads was written.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use crate::object::{Key, controller_of, pod_is_live, pod_is_ready};

/// The resourceVersion of the last write of each kind of object a gated loop reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    pub(crate) namespaces: u64,
    pub(crate) nodes: u64,
    pub(crate) budgets: u64,
    /// Deployments, ReplicaSets, DaemonSets.
    pub(crate) workloads: u64,
    /// Pods, by namespace.
    pub(crate) pods: BTreeMap<String, u64>,
}

impl Marks {
    /// The last write of a pod in `namespace`.
    pub(crate) fn pods_in(&self, namespace: &str) -> u64 {
        self.pods.get(namespace).copied().unwrap_or(0)
    }
}

/// The store's index: sets of keys by what a loop looks for, and [`Marks`].
#[derive(Debug, Default)]
pub(crate) struct Index {
    /// Pods the scheduler places: no `nodeName`, not ended, not being deleted.
    pub(crate) unbound: BTreeSet<Key>,
    /// Pods with a `deletionTimestamp`: what the kubelets and the apiserver finish.
    pub(crate) deleting_pods: BTreeSet<Key>,
    /// Pods with a `deletionTimestamp` written since the kubelets last took them: new to
    /// deletion, or deleted again with a shorter grace. What a kubelet's pod worker is told of,
    /// without a walk over every pod being deleted on each pass.
    pub(crate) deleting_written: BTreeSet<Key>,
    /// Jobs with a `deletionTimestamp`: what the garbage collector finishes.
    pub(crate) deleting_jobs: BTreeSet<Key>,
    /// The Jobs, by key and UID, written since the Job controller last took them, or
    /// whose pods (by their controller ownerReference of kind Job) were: what its informers
    /// would queue. A UID whose Job is gone names an owner whose pods may be orphans.
    pub(crate) touched_jobs: BTreeSet<(Key, String)>,
    /// The owners (by UID) whose pods may have become orphans since the garbage collector
    /// last took them: an owner removed, the owner of a pod stored with a new owner.
    pub(crate) orphan_suspects: BTreeSet<String>,
    /// The UIDs of the pods removed since the kubelets last took them: what they forget.
    pub(crate) removed_pods: Vec<String>,
    /// By the UID of their controller, how many pods are live (not ended, not being deleted)
    /// and how many of those Ready: what a ReplicaSet counts, without a walk over its pods.
    live_owned: BTreeMap<String, (usize, usize)>,
    /// By node, its live pods, and by (controller UID, node) those the controller controls:
    /// what the scheduler ranks a node by, without a walk over every pod per placement.
    live_on: BTreeMap<String, usize>,
    live_owned_on: BTreeMap<String, BTreeMap<String, usize>>,
    /// By node, the pods bound to it (any phase): `LIST pods` with `spec.nodeName=NODE`, which
    /// the apiserver's watch cache answers from an index of its own.
    on_node: BTreeMap<String, BTreeSet<Key>>,
    /// The nodes labelled control-plane: whose kubelets `/version` answers from.
    pub(crate) control_plane: BTreeSet<String>,
    /// The pods written or removed since the disruption controller last took them: what its
    /// informer would queue.
    touched_pods: BTreeSet<Key>,
    pub(crate) marks: Marks,
}

/// The node `pod` is bound to and its controller's UID, when it is live and bound.
fn bound(pod: &Pod) -> Option<(&str, Option<&str>)> {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref())?;
    let owner = controller_of(&pod.metadata).map(|o| o.uid.as_str());
    pod_is_live(pod).then_some((node, owner))
}

/// Whether the scheduler places `pod`: it is not bound, not ended, not being deleted.
pub(crate) fn unbound(pod: &Pod) -> bool {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    node.is_none_or(str::is_empty) && pod_is_live(pod)
}

/// The controller of `pod` and whether it is Ready, when `pod` is live.
fn live(pod: &Pod) -> Option<(&str, bool)> {
    let owner = controller_of(&pod.metadata)?;
    pod_is_live(pod).then(|| (owner.uid.as_str(), pod_is_ready(pod)))
}

/// `set` holds `key` exactly when `member`.
fn keep(set: &mut BTreeSet<Key>, key: &Key, member: bool) {
    if member {
        if !set.contains(key) {
            set.insert(key.clone());
        }
    } else {
        set.remove(key);
    }
}

impl Index {
    /// `pod` was stored under `key` at `rv`, replacing `old` (`None` when it is new).
    pub(crate) fn pod_written(&mut self, key: &Key, pod: &Pod, old: Option<&Pod>, rv: u64) {
        if let Some(old) = old {
            self.count(old, false);
            self.file_on_node(key, old, false);
        }
        self.count(pod, true);
        self.file_on_node(key, pod, true);
        keep(&mut self.unbound, key, unbound(pod));
        let deleting = pod.metadata.deletion_timestamp.is_some();
        keep(&mut self.deleting_pods, key, deleting);
        keep(&mut self.deleting_written, key, deleting);
        self.pod_touched(key, pod, rv);
        let owner = |p: &Pod| controller_of(&p.metadata).map(|o| o.uid.clone());
        if let Some(uid) = owner(pod).filter(|uid| old.and_then(owner).as_ref() != Some(uid)) {
            self.orphan_suspects.insert(uid);
        }
    }

    /// `pod`, stored under `key`, was removed at `rv`.
    pub(crate) fn pod_removed(&mut self, key: &Key, pod: &Pod, rv: u64) {
        self.count(pod, false);
        self.file_on_node(key, pod, false);
        self.unbound.remove(key);
        self.deleting_pods.remove(key);
        self.deleting_written.remove(key);
        self.pod_touched(key, pod, rv);
        self.removed_pods.extend(pod.metadata.uid.clone());
    }

    /// Adds `pod` to the live counts of its controller and of its node (`add`), or takes it
    /// away.
    fn count(&mut self, pod: &Pod, add: bool) {
        let step = |n: &mut usize, by: usize| *n = if add { *n + by } else { *n - by };
        if let Some((node, owner)) = bound(pod) {
            let on = self.live_on.entry(node.to_string()).or_default();
            step(on, 1);
            if *on == 0 {
                self.live_on.remove(node);
            }
            if let Some(owner) = owner {
                let nodes = self.live_owned_on.entry(owner.to_string()).or_default();
                let on = nodes.entry(node.to_string()).or_default();
                step(on, 1);
                if *on == 0 {
                    nodes.remove(node);
                    if nodes.is_empty() {
                        self.live_owned_on.remove(owner);
                    }
                }
            }
        }
        let Some((owner, ready)) = live(pod) else {
            return;
        };
        let counts = self.live_owned.entry(owner.to_string()).or_default();
        step(&mut counts.0, 1);
        step(&mut counts.1, usize::from(ready));
        if *counts == (0, 0) {
            self.live_owned.remove(owner);
        }
    }

    /// How many pods `owner` (a UID) controls that are live, and how many of those are Ready.
    pub(crate) fn live_owned(&self, owner: &str) -> (usize, usize) {
        self.live_owned.get(owner).copied().unwrap_or_default()
    }

    /// By node, the live pods `controller` (a UID) controls; nodes without any not listed.
    pub(crate) fn live_owned_on(&self, controller: &str) -> Option<&BTreeMap<String, usize>> {
        self.live_owned_on.get(controller)
    }

    /// By node, its live pods; nodes without any not listed.
    pub(crate) fn live_on_by_node(&self) -> &BTreeMap<String, usize> {
        &self.live_on
    }

    /// The keys of the pods bound to `node`, in key order.
    pub(crate) fn on_node(&self, node: &str) -> impl Iterator<Item = &Key> {
        self.on_node.get(node).into_iter().flatten()
    }

    /// Files `pod`, stored under `key`, under its node (`add`), or takes it away.
    fn file_on_node(&mut self, key: &Key, pod: &Pod, add: bool) {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            return;
        };
        if add {
            let keys = self.on_node.entry(node.to_string()).or_default();
            if !keys.contains(key) {
                keys.insert(key.clone());
            }
        } else if let Some(keys) = self.on_node.get_mut(node) {
            keys.remove(key);
            if keys.is_empty() {
                self.on_node.remove(node);
            }
        }
    }

    /// `node` was stored (`removed` false) or removed: filed among the control-plane nodes
    /// when it carries their label.
    pub(crate) fn node_written(&mut self, node: &k8s_openapi::api::core::v1::Node, removed: bool) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labelled = (node.metadata.labels.as_ref())
            .is_some_and(|l| l.contains_key(crate::labels::CONTROL_PLANE));
        if labelled && !removed {
            self.control_plane.insert(name);
        } else {
            self.control_plane.remove(&name);
        }
    }

    /// The pods written or removed since the last call (see [`Index::touched_pods`]).
    pub(crate) fn take_touched_pods(&mut self) -> BTreeSet<Key> {
        std::mem::take(&mut self.touched_pods)
    }

    fn pod_touched(&mut self, key: &Key, pod: &Pod, rv: u64) {
        *self.marks.pods.entry(key.0.clone()).or_default() = rv;
        if !self.touched_pods.contains(key) {
            self.touched_pods.insert(key.clone());
        }
        if let Some(owner) = controller_of(&pod.metadata).filter(|o| o.kind == "Job") {
            let job = (key.0.clone(), owner.name.clone());
            self.touched_jobs.insert((job, owner.uid.clone()));
        }
    }

    /// `job` was stored (`removed` false) or removed under `key`.
    pub(crate) fn job_written(&mut self, key: &Key, job: &Job, removed: bool) {
        keep(
            &mut self.deleting_jobs,
            key,
            !removed && job.metadata.deletion_timestamp.is_some(),
        );
        if let Some(uid) = job.metadata.uid.as_deref() {
            self.touched_jobs.insert((key.clone(), uid.to_string()));
        }
        if let Some(uid) = job.metadata.uid.clone().filter(|_| removed) {
            self.orphan_suspects.insert(uid);
        }
    }

    /// Panics unless the sets hold exactly what a scan of `pods` and `jobs` finds: checked
    /// after every settle in debug builds, so that every test of the workspace also tests
    /// the index.
    pub(crate) fn check(&self, pods: &BTreeMap<Key, Pod>, jobs: &BTreeMap<Key, Job>) {
        let scan = |keep: fn(&Pod) -> bool| -> BTreeSet<Key> {
            (pods.iter().filter(|(_, p)| keep(p)))
                .map(|(k, _)| k.clone())
                .collect()
        };
        assert_eq!(self.unbound, scan(unbound), "the index of unbound pods");
        assert_eq!(
            self.deleting_pods,
            scan(|p| p.metadata.deletion_timestamp.is_some()),
            "the index of pods being deleted"
        );
        let deleting_jobs: BTreeSet<Key> = (jobs.iter())
            .filter(|(_, j)| j.metadata.deletion_timestamp.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(
            self.deleting_jobs, deleting_jobs,
            "the index of Jobs being deleted"
        );
        let mut live_owned: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (owner, ready) in pods.values().filter_map(live) {
            let counts = live_owned.entry(owner.to_string()).or_default();
            counts.0 += 1;
            counts.1 += usize::from(ready);
        }
        assert_eq!(self.live_owned, live_owned, "the live pods by controller");
        let (mut live_on, mut live_owned_on) = (BTreeMap::new(), BTreeMap::new());
        for (node, owner) in pods.values().filter_map(bound) {
            *live_on.entry(node.to_string()).or_default() += 1;
            if let Some(owner) = owner {
                let nodes: &mut BTreeMap<String, usize> =
                    live_owned_on.entry(owner.to_string()).or_default();
                *nodes.entry(node.to_string()).or_default() += 1;
            }
        }
        let mut on_node: BTreeMap<String, BTreeSet<Key>> = BTreeMap::new();
        for (key, pod) in pods {
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                on_node
                    .entry(node.to_string())
                    .or_default()
                    .insert(key.clone());
            }
        }
        assert_eq!(self.on_node, on_node, "the pods by node");
        assert_eq!(self.live_on, live_on, "the live pods by node");
        assert_eq!(
            self.live_owned_on, live_owned_on,
            "the live pods by controller and node"
        );
    }

    /// The Jobs written since the last call (see [`Index::touched_jobs`]).
    pub(crate) fn take_touched_jobs(&mut self) -> BTreeSet<(Key, String)> {
        std::mem::take(&mut self.touched_jobs)
    }
}
