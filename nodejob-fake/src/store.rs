//! The object store and the apiserver semantics of the verbs the fake serves: one global
//! resourceVersion counter, deterministic UIDs, create / get / delete-with-preconditions of
//! Jobs, and the Pods, Nodes, Events, Namespaces, Leases, PodDisruptionBudgets and workloads
//! the verbs, actors and controllers write.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::Metadata;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, EventSource, Namespace, Node, ObjectReference, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Preconditions};
use nodejob_core::{ApiError, ApiResult, Change};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::SignedDuration;

use crate::index::Index;
pub(crate) use crate::object::{
    Key, controller_of, key_of, node_is_ready, pod_is_live, pod_is_ready, pod_is_terminal,
};
use crate::rng::Rng;
use crate::selector::Selector;
use crate::termination::DEFAULT_GRACE_PERIOD;
use crate::timing::{EPOCH_SECONDS, stamp};
use crate::validation::{invalid_message, label_errors, name_errors};
use crate::watch::History;

/// The label the apiserver puts on a Job's pod template (and selector) with the Job's UID.
pub(crate) const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
/// The label the apiserver puts on a Job's pod template with the Job's name.
pub(crate) const JOB_NAME: &str = "batch.kubernetes.io/job-name";
/// The legacy forms of those two labels, still added by the apiserver.
pub(crate) const LEGACY_CONTROLLER_UID: &str = "controller-uid";
pub(crate) const LEGACY_JOB_NAME: &str = "job-name";
/// The finalizer a foreground deletion adds.
pub(crate) const FOREGROUND_DELETION: &str = "foregroundDeletion";

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_string(), name.to_string())
}

/// The label the apiserver puts on every Namespace with its name.
pub(crate) const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Every stored object, the resourceVersion counter and the watch histories.
#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    pub(crate) namespaces: BTreeMap<String, Namespace>,
    pub(crate) jobs: BTreeMap<Key, Job>,
    pub(crate) pods: BTreeMap<Key, Pod>,
    /// The keys of `pods` by the UID of their controller ownerReference, kept with `pods` (in
    /// `write_pod` and `remove_pod`) so that a controller's pods are found without a scan.
    owned: BTreeMap<String, BTreeSet<Key>>,
    pub(crate) nodes: BTreeMap<String, Node>,
    pub(crate) events: BTreeMap<Key, Event>,
    pub(crate) leases: BTreeMap<Key, Lease>,
    pub(crate) budgets: BTreeMap<Key, PodDisruptionBudget>,
    pub(crate) deployments: BTreeMap<Key, Deployment>,
    pub(crate) replica_sets: BTreeMap<Key, ReplicaSet>,
    pub(crate) daemon_sets: BTreeMap<Key, DaemonSet>,
    pub(crate) job_history: History<Job>,
    pub(crate) node_history: History<Node>,
    pub(crate) pod_history: History<Pod>,
    /// The custom resources of the kinds installed, with their histories.
    pub(crate) customs: crate::custom::Customs,
    /// What the controllers look up on every pass, kept with each write.
    pub(crate) index: Index,
    /// The keys of `events` by what the event recorder correlates them on (the involved
    /// object's UID, the type, the reason and the message), kept with `events`: a correlation
    /// looks only at the events that may be its own, not at every event about the object (a
    /// ReplicaSet of thousands of replicas has an event per pod it created).
    events_about: BTreeMap<Correlation, BTreeSet<Key>>,
    /// The last name suffix (`<object>.<hex nanos>`) the recorder gave an event about each
    /// object, by namespace and object name: a controller that records a thousand events about
    /// one object in one instant (a ReplicaSet creating its pods) looks for a free name from
    /// there, not from the instant again, every name before it taken.
    event_nanos: BTreeMap<(String, String), u128>,
    ids: Rng,
    /// UIDs of namespaces and node identities (boot IDs), a stream of their own so that they
    /// do not shift the UIDs and names `ids` draws for the objects a run creates.
    infra: Rng,
}

/// What the event recorder correlates an event on: its involved object's UID, its type, its
/// reason and its message.
type Correlation = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// The [`Correlation`] of `event`.
fn correlation(event: &Event) -> Correlation {
    (
        event.involved_object.uid.clone(),
        event.type_.clone(),
        event.reason.clone(),
        event.message.clone(),
    )
}

/// Stores `object` in `map` under its key with the next resourceVersion `rv`.
fn put<T: Metadata<Ty = ObjectMeta> + Clone>(
    map: &mut BTreeMap<Key, T>,
    rv: u64,
    mut object: T,
) -> T {
    object.metadata_mut().resource_version = Some(rv.to_string());
    map.insert(key_of(object.metadata()), object.clone());
    object
}

impl Store {
    /// A store with the namespaces every cluster has, drawing UIDs and names from `ids` (and
    /// those of namespaces and node identities from `infra`).
    pub(crate) fn new(ids: Rng, infra: Rng) -> Self {
        let mut store = Store {
            rv: 0,
            namespaces: BTreeMap::new(),
            jobs: BTreeMap::new(),
            pods: BTreeMap::new(),
            owned: BTreeMap::new(),
            nodes: BTreeMap::new(),
            events: BTreeMap::new(),
            leases: BTreeMap::new(),
            budgets: BTreeMap::new(),
            deployments: BTreeMap::new(),
            replica_sets: BTreeMap::new(),
            daemon_sets: BTreeMap::new(),
            job_history: History::default(),
            node_history: History::default(),
            pod_history: History::default(),
            customs: crate::custom::Customs::default(),
            index: Index::default(),
            events_about: BTreeMap::new(),
            event_nanos: BTreeMap::new(),
            ids,
            infra,
        };
        for name in ["default", "kube-system"] {
            let namespace = store.new_namespace(name, Duration::ZERO);
            store.namespaces.insert(name.to_string(), namespace);
        }
        store
    }

    /// The latest resourceVersion.
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// A Namespace as the apiserver creates it: UID, `creationTimestamp`, the
    /// `kubernetes.io/metadata.name` label, the `kubernetes` finalizer, phase `Active`.
    fn new_namespace(&mut self, name: &str, now: Duration) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                uid: Some(self.infra.uuid()),
                creation_timestamp: Some(stamp(now)),
                labels: Some([(NAMESPACE_NAME_LABEL.to_string(), name.to_string())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::core::v1::NamespaceSpec {
                finalizers: Some(vec!["kubernetes".to_string()]),
            }),
            status: Some(k8s_openapi::api::core::v1::NamespaceStatus {
                phase: Some("Active".to_string()),
                ..Default::default()
            }),
        }
    }

    /// Creates a namespace (a write) unless it exists.
    pub(crate) fn add_namespace(&mut self, name: &str, now: Duration) {
        if !self.namespaces.contains_key(name) {
            let mut namespace = self.new_namespace(name, now);
            let rv = self.bump();
            namespace.metadata.resource_version = Some(rv.to_string());
            self.namespaces.insert(name.to_string(), namespace);
            self.index.marks.namespaces = rv;
        }
    }

    /// Sets (`Some`) or removes (`None`) a label of namespace `name` (a write when it changes).
    pub(crate) fn label_namespace(
        &mut self,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> ApiResult<()> {
        let rv = self.rv + 1;
        let namespace = self
            .namespaces
            .get_mut(name)
            .ok_or_else(|| namespace_not_found(name))?;
        let labels = namespace.metadata.labels.get_or_insert_default();
        let before = labels.clone();
        match value {
            Some(value) => labels.insert(key.to_string(), value.to_string()),
            None => labels.remove(key),
        };
        if *labels != before {
            namespace.metadata.resource_version = Some(rv.to_string());
            self.rv = rv;
            self.index.marks.namespaces = rv;
        }
        Ok(())
    }

    /// The labels of namespace `name` (empty if it does not exist).
    pub(crate) fn namespace_labels(&self, name: &str) -> BTreeMap<String, String> {
        (self.namespaces.get(name))
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default()
    }

    /// 404 unless namespace `name` exists.
    pub(crate) fn require_namespace(&self, name: &str) -> ApiResult<()> {
        if self.namespaces.contains_key(name) {
            Ok(())
        } else {
            Err(namespace_not_found(name))
        }
    }

    pub(crate) fn uid(&mut self) -> String {
        self.ids.uuid()
    }

    /// A UUID from the infrastructure stream (node boot IDs).
    pub(crate) fn infra_uuid(&mut self) -> String {
        self.infra.uuid()
    }

    /// `prefix` plus 5 generated characters, as `metadata.generateName` makes a name; the
    /// prefix is cut to 58 characters so the name fits 63 (`names.SimpleNameGenerator`).
    pub(crate) fn generate_name(&mut self, prefix: &str) -> String {
        let cut = prefix
            .char_indices()
            .nth(58)
            .map_or(prefix, |(i, _)| &prefix[..i]);
        format!("{cut}{}", self.ids.name_suffix(5))
    }

    pub(crate) fn hex(&mut self, bytes: usize) -> String {
        self.ids.hex(bytes)
    }

    /// Stores `job` (ADDED or MODIFIED) with the next resourceVersion.
    pub(crate) fn write_job(&mut self, mut job: Job) -> Job {
        let rv = self.bump();
        job.metadata.resource_version = Some(rv.to_string());
        let key = key_of(&job.metadata);
        self.job_history
            .record(key.clone(), rv, Change::Applied(&job));
        self.index.job_written(&key, &job, false);
        self.jobs.insert(key, job.clone());
        job
    }

    /// Removes a Job (DELETED, with its last state at a new resourceVersion).
    pub(crate) fn remove_job(&mut self, key: &Key) -> Option<Job> {
        let mut job = self.jobs.remove(key)?;
        let rv = self.bump();
        job.metadata.resource_version = Some(rv.to_string());
        self.job_history
            .record(key.clone(), rv, Change::Deleted(&job));
        self.index.job_written(key, &job, true);
        Some(job)
    }

    /// Stores `pod` (ADDED or MODIFIED) with the next resourceVersion.
    pub(crate) fn write_pod(&mut self, mut pod: Pod) -> Pod {
        let rv = self.bump();
        pod.metadata.resource_version = Some(rv.to_string());
        let key = key_of(&pod.metadata);
        self.pod_history
            .record(key.clone(), rv, Change::Applied(&pod));
        if let Some(owner) = owner_uid_of(&pod) {
            self.owned
                .entry(owner.to_string())
                .or_default()
                .insert(key.clone());
        }
        let old = self.pods.insert(key.clone(), pod.clone());
        self.index.pod_written(&key, &pod, old.as_ref(), rv);
        if let Some(old) = old {
            self.unindex(&key, &old, owner_uid_of(&pod));
        }
        pod
    }

    /// Forgets `old`, the pod stored under `key` until now, in the owner index, unless its
    /// owner is `kept` (that of the pod now stored under `key`).
    fn unindex(&mut self, key: &Key, old: &Pod, kept: Option<&str>) {
        let Some(owner) = owner_uid_of(old).filter(|o| Some(*o) != kept) else {
            return;
        };
        if let Some(keys) = self.owned.get_mut(owner) {
            keys.remove(key);
            if keys.is_empty() {
                self.owned.remove(owner);
            }
        }
    }

    /// Removes a Pod (DELETED, with its last state at a new resourceVersion).
    pub(crate) fn remove_pod(&mut self, key: &Key) -> Option<Pod> {
        let mut pod = self.pods.remove(key)?;
        self.unindex(key, &pod, None);
        let rv = self.bump();
        pod.metadata.resource_version = Some(rv.to_string());
        self.pod_history
            .record(key.clone(), rv, Change::Deleted(&pod));
        self.index.pod_removed(key, &pod, rv);
        Some(pod)
    }

    /// Stores `event` with the next resourceVersion.
    pub(crate) fn write_event(&mut self, event: Event) -> Event {
        let rv = self.bump();
        let event = put(&mut self.events, rv, event);
        self.index_event(&event);
        event
    }

    /// Files `event`, just stored, under its [`Correlation`]. An event stored again with other
    /// fields stays filed under its old one too: a correlation checks each event it finds.
    fn index_event(&mut self, event: &Event) {
        (self.events_about.entry(correlation(event)))
            .or_default()
            .insert(key_of(&event.metadata));
    }

    pub(crate) fn write_lease(&mut self, lease: Lease) -> Lease {
        let rv = self.bump();
        put(&mut self.leases, rv, lease)
    }

    pub(crate) fn write_budget(&mut self, budget: PodDisruptionBudget) -> PodDisruptionBudget {
        let rv = self.bump();
        self.index.marks.budgets = rv;
        put(&mut self.budgets, rv, budget)
    }

    /// Removes a PodDisruptionBudget.
    pub(crate) fn remove_budget(&mut self, key: &Key) -> Option<PodDisruptionBudget> {
        let budget = self.budgets.remove(key)?;
        let rv = self.bump();
        self.index.marks.budgets = rv;
        Some(budget)
    }

    pub(crate) fn write_deployment(&mut self, deployment: Deployment) -> Deployment {
        let rv = self.bump();
        self.index.marks.workloads = rv;
        put(&mut self.deployments, rv, deployment)
    }

    pub(crate) fn write_replica_set(&mut self, replica_set: ReplicaSet) -> ReplicaSet {
        let rv = self.bump();
        self.index.marks.workloads = rv;
        put(&mut self.replica_sets, rv, replica_set)
    }

    pub(crate) fn write_daemon_set(&mut self, daemon_set: DaemonSet) -> DaemonSet {
        let rv = self.bump();
        self.index.marks.workloads = rv;
        put(&mut self.daemon_sets, rv, daemon_set)
    }

    /// The Pods bound to `node`, in `(namespace, name)` order.
    pub(crate) fn pods_on(&self, node: &str) -> Vec<Pod> {
        (self.index.on_node(node))
            .filter_map(|key| self.pods.get(key))
            .cloned()
            .collect()
    }

    /// The nodes labelled control-plane, by name.
    pub(crate) fn control_plane_nodes(&self) -> impl Iterator<Item = &Node> {
        (self.index.control_plane.iter()).filter_map(|name| self.nodes.get(name))
    }

    /// The apiserver's preparation of a `POST .../pods` (`BeforeCreate`): `generateName`,
    /// validation of the name, labels and containers (422), the namespace (404); then UID,
    /// `creationTimestamp` and `status.phase: Pending` (pod strategy `PrepareForCreate`). Not
    /// stored: admission runs next, then [`Store::insert_pod`].
    pub(crate) fn prepare_pod(&mut self, pod: &Pod, now: Duration) -> ApiResult<Pod> {
        let mut pod = pod.clone();
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let mut name = pod.metadata.name.clone().unwrap_or_default();
        let prefix = pod.metadata.generate_name.clone().filter(|p| !p.is_empty());
        if let Some(prefix) = prefix.filter(|_| name.is_empty()) {
            name = self.generate_name(&prefix);
        }
        let mut errs = name_errors("metadata.name", &name);
        errs.extend(label_errors(
            "metadata.labels",
            pod.metadata.labels.as_ref(),
        ));
        if pod.spec.as_ref().is_none_or(|s| s.containers.is_empty()) {
            errs.push("spec.containers: Required value".into());
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(invalid_message("Pod", &name, &errs)));
        }
        self.require_namespace(&namespace)?;
        let meta = &mut pod.metadata;
        meta.name = Some(name);
        meta.namespace = Some(namespace);
        meta.uid = Some(self.uid());
        meta.creation_timestamp = Some(stamp(now));
        meta.resource_version = None;
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Pending".to_string()),
            ..Default::default()
        });
        Ok(pod)
    }

    /// The apiserver's graceful deletion of a pod (`DELETE` with `gracePeriodSeconds`
    /// `requested`, else the pod's own); the kubelet reacts to it.
    ///
    /// The grace period (pod strategy `CheckGracefulDelete` in
    /// `pkg/registry/core/pod/strategy.go`) is `requested`, else the pod's
    /// `terminationGracePeriodSeconds` (30s by default); 0 for a pod that is terminal or never
    /// bound to a node. `deletionTimestamp` is now + the grace period (`rest.BeforeDelete`).
    /// With grace 0 and no finalizer the pod is removed at once (after that update); otherwise
    /// it goes once the kubelet confirmed and its finalizers are gone. A pod already being
    /// deleted is left as it is, unless `requested` is shorter than its grace period (only a
    /// shorter one is honoured): then its `deletionTimestamp` moves to its deletion +
    /// `requested`.
    pub(crate) fn delete_pod(&mut self, key: &Key, requested: Option<Duration>, now: Duration) {
        let Some(mut pod) = self.pods.get(key).cloned() else {
            return;
        };
        let unscheduled = (pod.spec.as_ref())
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty);
        let grace = if pod_is_terminal(&pod) || unscheduled {
            Duration::ZERO
        } else {
            requested.unwrap_or_else(|| {
                let secs = (pod.spec.as_ref()).and_then(|s| s.termination_grace_period_seconds);
                secs.map_or(DEFAULT_GRACE_PERIOD, |s| {
                    Duration::from_secs(u64::try_from(s).unwrap_or(0))
                })
            })
        };
        let seconds = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        let finalized = pod.metadata.finalizers.as_ref().is_none_or(Vec::is_empty);
        if let Some(deadline) = pod.metadata.deletion_timestamp.clone() {
            let old = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
            if old == 0 {
                // An earlier deletion left a grace period of 0: delete now if nothing holds it.
                if finalized {
                    self.remove_pod(key);
                }
                return;
            }
            let Some(shorter) = requested.filter(|r| seconds(*r) < old) else {
                return;
            };
            let moved = (deadline.0)
                .checked_sub(SignedDuration::from_secs(old))
                .and_then(|t| t.checked_add(SignedDuration::from_secs(seconds(shorter))))
                .unwrap_or(deadline.0);
            pod.metadata.deletion_timestamp = Some(Time(moved));
            pod.metadata.deletion_grace_period_seconds = Some(seconds(shorter));
            self.write_pod(pod);
            return;
        }
        pod.metadata.deletion_timestamp = Some(stamp(now + grace));
        pod.metadata.deletion_grace_period_seconds = Some(seconds(grace));
        self.write_pod(pod);
        if grace.is_zero() && finalized {
            // Nothing holds it: the apiserver deletes it after that update; the kubelet kills
            // whatever still runs, unseen.
            self.remove_pod(key);
        }
    }

    /// Stores a prepared pod (ADDED): 409 AlreadyExists when the name is taken.
    pub(crate) fn insert_pod(&mut self, pod: Pod) -> ApiResult<Pod> {
        let key = key_of(&pod.metadata);
        if self.pods.contains_key(&key) {
            return Err(ApiError::already_exists(format!(
                "pods \"{}\" already exists",
                key.1
            )));
        }
        Ok(self.write_pod(pod))
    }

    /// `GET` one Pod.
    pub(crate) fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        self.pods
            .get(&key(namespace, name))
            .cloned()
            .ok_or_else(|| pod_not_found(name))
    }

    pub(crate) fn write_node(&mut self, mut node: Node) -> Node {
        let rv = self.bump();
        node.metadata.resource_version = Some(rv.to_string());
        let name = node.metadata.name.clone().unwrap_or_default();
        self.node_history
            .record(key("", &name), rv, Change::Applied(&node));
        self.index.marks.nodes = rv;
        self.index.node_written(&node, false);
        self.nodes.insert(name, node.clone());
        node
    }

    pub(crate) fn remove_node(&mut self, name: &str) -> Option<Node> {
        let mut node = self.nodes.remove(name)?;
        let rv = self.bump();
        node.metadata.resource_version = Some(rv.to_string());
        self.node_history
            .record(key("", name), rv, Change::Deleted(&node));
        self.index.marks.nodes = rv;
        self.index.node_written(&node, true);
        Some(node)
    }

    /// The Job `namespace/name` if it still has `uid`.
    pub(crate) fn job_with_uid(&self, namespace: &str, name: &str, uid: &str) -> Option<&Job> {
        let job = self.jobs.get(&key(namespace, name))?;
        (job.metadata.uid.as_deref() == Some(uid)).then_some(job)
    }

    /// The Pod with `uid`, by its key.
    pub(crate) fn pod_with_uid(&self, key: &Key, uid: &str) -> Option<&Pod> {
        self.pods
            .get(key)
            .filter(|p| p.metadata.uid.as_deref() == Some(uid))
    }

    /// The UIDs of every object that may own a pod: Jobs, ReplicaSets, DaemonSets.
    pub(crate) fn owner_uids(&self) -> std::collections::BTreeSet<&str> {
        let jobs = self.jobs.values().map(|j| &j.metadata);
        let replica_sets = self.replica_sets.values().map(|r| &r.metadata);
        let daemon_sets = self.daemon_sets.values().map(|d| &d.metadata);
        (jobs.chain(replica_sets).chain(daemon_sets))
            .filter_map(|m| m.uid.as_deref())
            .collect()
    }

    /// The pods whose controller ownerReference is `owner_uid`, in name order.
    pub(crate) fn pods_owned_by(&self, owner_uid: &str) -> Vec<Pod> {
        self.owned_by(owner_uid).cloned().collect()
    }

    /// [`Store::pods_owned_by`], borrowed.
    pub(crate) fn owned_by<'a>(&'a self, owner_uid: &str) -> impl Iterator<Item = &'a Pod> {
        let keys = self.owned.get(owner_uid).into_iter().flatten();
        keys.filter_map(|key| self.pods.get(key))
    }

    /// Records a core/v1 Event about `involved` the way client-go's event recorder does: an
    /// identical event (same object, type, reason, message) bumps `count` and
    /// `lastTimestamp` of the one stored (`EventCorrelator`); otherwise a new Event named
    /// `<object>.<hex unix nanos>`.
    pub(crate) fn record_event(
        &mut self,
        component: &str,
        involved: &ObjectReference,
        type_: &str,
        reason: &str,
        message: &str,
        now: Duration,
    ) {
        let namespace = involved.namespace.clone().unwrap_or_default();
        let filed: Correlation = (
            involved.uid.clone(),
            Some(type_.to_string()),
            Some(reason.to_string()),
            Some(message.to_string()),
        );
        let about = self.events_about.get(&filed).into_iter().flatten();
        let same = about.filter_map(|key| self.events.get(key)).find(|e| {
            e.involved_object.uid == involved.uid
                && e.type_.as_deref() == Some(type_)
                && e.reason.as_deref() == Some(reason)
                && e.message.as_deref() == Some(message)
        });
        if let Some(same) = same {
            let mut event = same.clone();
            event.count = Some(event.count.unwrap_or(1) + 1);
            event.last_timestamp = Some(stamp(now));
            event.metadata.resource_version = Some(self.bump().to_string());
            self.events.insert(key_of(&event.metadata), event);
            return;
        }
        let object = involved.name.clone().unwrap_or_default();
        let mut nanos = (EPOCH_SECONDS as u128) * 1_000_000_000 + now.as_nanos();
        // Events are never removed and the clock never goes back, so every name from this
        // instant up to the last one given about the object is taken.
        let last = (self.event_nanos)
            .entry((namespace.clone(), object.clone()))
            .or_default();
        nanos = nanos.max(*last + 1);
        while self
            .events
            .contains_key(&key(&namespace, &format!("{object}.{nanos:x}")))
        {
            nanos += 1;
        }
        *last = nanos;
        let uid = self.uid();
        let rv = self.bump();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{nanos:x}")),
                namespace: Some(namespace),
                uid: Some(uid),
                resource_version: Some(rv.to_string()),
                creation_timestamp: Some(stamp(now)),
                ..ObjectMeta::default()
            },
            involved_object: involved.clone(),
            type_: Some(type_.to_string()),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            count: Some(1),
            first_timestamp: Some(stamp(now)),
            last_timestamp: Some(stamp(now)),
            source: Some(EventSource {
                component: Some(component.to_string()),
                host: None,
            }),
            reporting_component: Some(component.to_string()),
            reporting_instance: Some(String::new()),
            ..Event::default()
        };
        self.index_event(&event);
        self.events.insert(key_of(&event.metadata), event);
    }

    // ---- the apiserver verbs ----

    /// `POST .../jobs`: validation, `generateName`, the generated selector and pod labels
    /// (apiserver `jobStrategy.PrepareForCreate` with `manualSelector` unset), UID,
    /// resourceVersion, creationTimestamp, `generation: 1`, an empty status.
    pub(crate) fn create_job(&mut self, job: &Job, now: Duration) -> ApiResult<Job> {
        let mut job = job.clone();
        // The trait's create carries no namespace of its own: an object without one goes to
        // `default`, as kubectl would send it.
        let namespace = job
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        self.require_namespace(&namespace)?;
        if job
            .metadata
            .resource_version
            .as_deref()
            .is_some_and(|rv| !rv.is_empty())
        {
            // apiserver (etcd3 store Create): refused as an internal error, which a client
            // classifies with the other 500s.
            return Err(ApiError::transient(
                500,
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let mut name = job.metadata.name.clone().unwrap_or_default();
        let prefix = job.metadata.generate_name.clone().filter(|p| !p.is_empty());
        if let Some(prefix) = prefix.filter(|_| name.is_empty()) {
            name = self.generate_name(&prefix);
        }
        let mut errs = name_errors("metadata.name", &name);
        errs.extend(label_errors(
            "metadata.labels",
            job.metadata.labels.as_ref(),
        ));
        let uid = self.uid();
        match job.spec.as_mut() {
            None => errs.push("spec.template.spec.containers: Required value".into()),
            Some(spec) => {
                // batch/v1 SetDefaults_Job runs first: a Job without labels shares its
                // template's label map (when there is one), so it also shows the labels
                // generated below.
                let share_labels = job.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty)
                    && spec
                        .template
                        .metadata
                        .as_ref()
                        .is_some_and(|m| m.labels.is_some());
                let manual = spec.manual_selector == Some(true);
                if !manual {
                    if spec.selector.is_some() {
                        errs.push(
                            "spec.selector: Invalid value: \"set\": `selector` not auto-generated"
                                .into(),
                        );
                    }
                    spec.selector = Some(LabelSelector {
                        match_labels: Some([(CONTROLLER_UID.to_string(), uid.clone())].into()),
                        match_expressions: None,
                    });
                    let labels = spec.template.metadata.get_or_insert_default();
                    let labels = labels.labels.get_or_insert_default();
                    labels.insert(CONTROLLER_UID.into(), uid.clone());
                    labels.insert(JOB_NAME.into(), name.clone());
                    labels.insert(LEGACY_CONTROLLER_UID.into(), uid.clone());
                    labels.insert(LEGACY_JOB_NAME.into(), name.clone());
                }
                let template_labels = spec
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.as_ref());
                errs.extend(label_errors("spec.template.labels", template_labels));
                if share_labels {
                    job.metadata.labels = template_labels.cloned();
                }
                match spec.template.spec.as_ref() {
                    Some(pod) if !pod.containers.is_empty() => {
                        // The pod defaulting turns an empty restartPolicy into `Always`, which
                        // ValidateJobSpec refuses.
                        let policy = pod.restart_policy.as_deref().unwrap_or("Always");
                        if policy != "Never" && policy != "OnFailure" {
                            errs.push(format!(
                                "spec.template.spec.restartPolicy: Unsupported value: \"{policy}\": supported values: \"OnFailure\", \"Never\""
                            ));
                        }
                    }
                    _ => errs.push("spec.template.spec.containers: Required value".into()),
                }
            }
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid(invalid_message(
                "Job.batch",
                &name,
                &errs,
            )));
        }
        if self.jobs.contains_key(&key(&namespace, &name)) {
            return Err(ApiError::already_exists(format!(
                "jobs.batch \"{name}\" already exists"
            )));
        }
        let meta = &mut job.metadata;
        meta.name = Some(name);
        meta.namespace = Some(namespace);
        meta.uid = Some(uid);
        meta.creation_timestamp = Some(stamp(now));
        meta.generation = Some(1);
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        meta.managed_fields = None;
        job.status = Some(JobStatus::default());
        Ok(self.write_job(job))
    }

    /// `GET` one Job.
    pub(crate) fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.jobs
            .get(&key(namespace, name))
            .cloned()
            .ok_or_else(|| job_not_found(name))
    }

    /// `DELETE` one Job with `propagationPolicy: Foreground`: checks `preconditions` (UID, then
    /// resourceVersion, apiserver `storage.Preconditions.Check`), then sets
    /// `deletionTimestamp`, `deletionGracePeriodSeconds: 0`, the `foregroundDeletion` finalizer
    /// and bumps `generation` (`rest.BeforeDelete`). A Job already being deleted is answered as
    /// is, without a write. The garbage collector does the rest.
    pub(crate) fn delete_job(
        &mut self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
        now: Duration,
    ) -> ApiResult<Job> {
        let job = self
            .jobs
            .get(&key(namespace, name))
            .ok_or_else(|| job_not_found(name))?;
        if let Some(pre) = preconditions {
            let meta = &job.metadata;
            let conflict = |detail: String| {
                ApiError::conflict(format!(
                    "Operation cannot be fulfilled on jobs.batch \"{name}\": {detail}"
                ))
            };
            let uid = meta.uid.as_deref().unwrap_or_default();
            if let Some(want) = pre.uid.as_deref().filter(|want| *want != uid) {
                return Err(conflict(format!(
                    "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                )));
            }
            let rv = meta.resource_version.as_deref().unwrap_or_default();
            if let Some(want) = pre.resource_version.as_deref().filter(|want| *want != rv) {
                return Err(conflict(format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                )));
            }
        }
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(job.clone());
        }
        let mut job = job.clone();
        let meta = &mut job.metadata;
        meta.deletion_timestamp = Some(stamp(now));
        meta.deletion_grace_period_seconds = Some(0);
        meta.generation = Some(meta.generation.unwrap_or(0) + 1);
        let finalizers = meta.finalizers.get_or_insert_default();
        if !finalizers.iter().any(|f| f == FOREGROUND_DELETION) {
            finalizers.push(FOREGROUND_DELETION.into());
        }
        Ok(self.write_job(job))
    }

    /// `LIST` Jobs in `namespace` matching `selector`, in name order, those being deleted
    /// included (a list in a namespace that does not exist is empty, as in Kubernetes).
    pub(crate) fn list_jobs(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Job>> {
        let selector = Selector::parse(selector)?;
        Ok(self
            .jobs
            .iter()
            .filter(|((ns, _), job)| {
                // An empty namespace is every namespace, as the cluster-wide path lists.
                (namespace.is_empty() || ns == namespace)
                    && selector.matches(job.metadata.labels.as_ref())
            })
            .map(|(_, job)| job.clone())
            .collect())
    }

    /// `LIST` Pods in `namespace` matching `selector`, in name order (a list in a namespace
    /// that does not exist is empty, as in Kubernetes).
    pub(crate) fn list_pods(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Pod>> {
        let selector = Selector::parse(selector)?;
        let matching = |pod: &&Pod| selector.matches(pod.metadata.labels.as_ref());
        // An empty namespace is every namespace, as the cluster-wide path lists.
        Ok(match namespace {
            "" => self.pods.values().filter(matching).cloned().collect(),
            ns => self.pods_in(ns).filter(matching).cloned().collect(),
        })
    }

    /// The pods of `namespace`, in name order: its range of `pods`, not a walk over all.
    pub(crate) fn pods_in<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = &'a Pod> {
        let first = (namespace.to_string(), String::new());
        (self.pods.range(first..))
            .take_while(move |((ns, _), _)| ns == namespace)
            .map(|(_, pod)| pod)
    }

    /// `LIST` Events in `namespace` with `fieldSelector=involvedObject.uid=<uid>`.
    pub(crate) fn list_events(&self, namespace: &str, involved_uid: &str) -> Vec<Event> {
        self.events
            .iter()
            .filter(|((ns, _), e)| {
                ns == namespace && e.involved_object.uid.as_deref() == Some(involved_uid)
            })
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// `GET` one Node.
    pub(crate) fn get_node(&self, name: &str) -> ApiResult<Node> {
        self.nodes
            .get(name)
            .cloned()
            .ok_or_else(|| node_not_found(name))
    }
}

/// The UID of a pod's controller ownerReference.
fn owner_uid_of(pod: &Pod) -> Option<&str> {
    controller_of(&pod.metadata).map(|o| o.uid.as_str())
}

pub(crate) fn job_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("jobs.batch \"{name}\" not found"))
}

pub(crate) fn node_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("nodes \"{name}\" not found"))
}

pub(crate) fn pod_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("pods \"{name}\" not found"))
}

pub(crate) fn namespace_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("namespaces \"{name}\" not found"))
}

/// The apiserver's optimistic-lock Conflict for `{resource} "{name}"` (`OptimisticLockErrorMsg`
/// in `k8s.io/apiserver/pkg/registry/generic/registry/store.go`).
pub(crate) fn modified_conflict(resource: &str, name: &str) -> ApiError {
    ApiError::conflict(format!(
        "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
    ))
}
