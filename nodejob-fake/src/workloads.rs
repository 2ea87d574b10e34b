//! The workload controllers: Deployment (as far as creating its ReplicaSet), ReplicaSet and
//! DaemonSet, level-triggered over the store.
//!
//! - A Deployment gets one ReplicaSet, `<deployment>-<pod-template-hash>`, controlled by it,
//!   with its `replicas`, selector and template (plus the `pod-template-hash` label).
//! - A ReplicaSet keeps `replicas` live pods (`<replicaset>-xxxxx`, controlled by it, not ended
//!   and not being deleted): when it has fewer, it creates the missing ones
//!   [`Timing::replica_create`](crate::Timing::replica_create) later, unbound, for the
//!   scheduler to place. So a pod being evicted is replaced at once, while it still
//!   terminates.
//! - A DaemonSet keeps one live pod on each node whose labels match its template's
//!   `nodeSelector` (cordoned and NotReady nodes included: its pods tolerate that), created
//!   bound to the node (`nodeName`) after the same delay; none new on a node whose own
//!   `NoSchedule` or `NoExecute` taint its pods do not tolerate.
//!
//! A pod creation goes through PodSecurity admission; a refused one is a `FailedCreate`
//! Warning Event on the workload and is tried again after
//! [`Timing::create_retry`](crate::Timing::create_retry). Each creation is a `SuccessfulCreate`
//! Event. Each workload's status (`replicas`, `readyReplicas`, `availableReplicas`, ...) is
//! written when it changes.
//!
//! Not modelled: scaling down, rollouts (a changed template), `minReadySeconds`, orphaning and
//! adoption, StatefulSets, the DaemonSet controller's node affinity (its pods are bound
//! directly).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetStatus, Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
    ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::admission::pod_security;
use crate::ctx::Ctx;
use crate::store::{Key, Store, controller_of, pod_is_live};
use crate::timers::{Action, ObjRef, Timers};
use crate::timing::{Timing, stamp};

/// The label a Deployment's ReplicaSet and pods carry with the hash of its pod template.
pub(crate) const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// What the workload controllers remember outside the objects (their workqueues).
#[derive(Debug, Default)]
pub(crate) struct Workloads {
    /// When each workload (by UID) next creates the pods it lacks.
    due: BTreeMap<String, Duration>,
    /// Refused creations in a row, by workload UID.
    refusals: BTreeMap<String, u32>,
    /// The store's resourceVersion when [`Workloads::sync`] last ran.
    seen: u64,
}

/// The apiserver's `generateName` alphabet, as `rand.SafeEncodeString` uses it.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `pod-template-hash` of a template: FNV-1a (32 bits) over the template as printed, its
/// decimal form safe-encoded (`controller.ComputeHash` hashes a deep print of the template the
/// same way; the printed form differs, so the values do too).
fn template_hash(template: &PodTemplateSpec) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in format!("{template:?}").bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash.to_string().bytes())
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// A controller ownerReference to `meta` of `kind`.
fn owner(meta: &ObjectMeta, kind: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".to_string(),
        kind: kind.to_string(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn involved(meta: &ObjectMeta, kind: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".to_string()),
        kind: Some(kind.to_string()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// The pods `uid` controls that are live: not ended, not being deleted
/// (`controller.FilterActivePods`).
fn live_pods<'a>(store: &'a Store, uid: &str) -> Vec<&'a Pod> {
    store.owned_by(uid).filter(|p| pod_is_live(p)).collect()
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The tolerations the DaemonSet controller adds to its pods (`AddOrUpdateDaemonPodTolerations`).
fn daemon_tolerations() -> Vec<Toleration> {
    let toleration = |key: &str, effect: &str| Toleration {
        key: Some(key.to_string()),
        operator: Some("Exists".to_string()),
        effect: Some(effect.to_string()),
        ..Toleration::default()
    };
    vec![
        toleration("node.kubernetes.io/not-ready", "NoExecute"),
        toleration("node.kubernetes.io/unreachable", "NoExecute"),
        toleration("node.kubernetes.io/disk-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/memory-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/pid-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
}

/// One pod a workload asks for.
struct Wanted {
    /// The workload.
    meta: ObjectMeta,
    kind: &'static str,
    component: &'static str,
    template: PodTemplateSpec,
    /// The node to bind it to (DaemonSet), else none (the scheduler places it).
    node: Option<String>,
}

/// The pods one workload asks for.
enum Wants {
    /// How many replicas the ReplicaSet stored under the key misses.
    Replicas(Key, usize),
    /// A DaemonSet's, one per node it misses.
    Pods(Vec<Wanted>),
}

impl Wants {
    fn is_empty(&self) -> bool {
        match self {
            Wants::Replicas(_, n) => *n == 0,
            Wants::Pods(pods) => pods.is_empty(),
        }
    }

    /// The pods, one after another: a ReplicaSet's made from it as each is asked for.
    fn pods(self, store: &Store) -> Box<dyn Iterator<Item = Wanted>> {
        match self {
            Wants::Pods(pods) => Box::new(pods.into_iter()),
            Wants::Replicas(key, n) => {
                let Some(rs) = store.replica_sets.get(&key) else {
                    return Box::new(std::iter::empty());
                };
                let meta = rs.metadata.clone();
                let template = (rs.spec.as_ref())
                    .and_then(|s| s.template.clone())
                    .unwrap_or_default();
                Box::new((0..n).map(move |_| Wanted {
                    meta: meta.clone(),
                    kind: "ReplicaSet",
                    component: "replicaset-controller",
                    template: template.clone(),
                    node: None,
                }))
            }
        }
    }
}

impl Workloads {
    /// Whether anything [`Workloads::sync`] reads was written since it last ran.
    fn stale(&self, store: &Store) -> bool {
        let marks = &store.index.marks;
        let seen = self.seen;
        let keys = (store.deployments.keys())
            .chain(store.replica_sets.keys())
            .chain(store.daemon_sets.keys());
        marks.workloads > seen
            || marks.namespaces > seen
            || (!store.daemon_sets.is_empty() && marks.nodes > seen)
            || keys
                .into_iter()
                .any(|(namespace, _)| marks.pods_in(namespace) > seen)
    }

    /// Runs the three controllers once.
    ///
    /// Unless `forced` (at a time a controller asked to look again), a pass in which nothing
    /// they read was written (the workloads, the pods and namespaces of their namespaces, the
    /// nodes when a DaemonSet places pods on them) is skipped: their informers would have
    /// queued nothing.
    pub(crate) fn sync(&mut self, cx: &mut Ctx<'_>, forced: bool) {
        if !forced && !self.stale(cx.store) {
            return;
        }
        self.seen = cx.store.rv();
        let (store, timers, now, timing) = (&mut *cx.store, &mut *cx.timers, cx.now, cx.timing);
        self.sync_deployments(store, now);
        // A ReplicaSet's missing replicas are counted here and made when they are due: a
        // batch of a roll leaves a thousand missing through every pass until then.
        let mut missing: BTreeMap<String, (Key, usize)> = BTreeMap::new();
        for (key, rs) in &store.replica_sets {
            let uid = rs.metadata.uid.clone().unwrap_or_default();
            let replicas = (rs.spec.as_ref()).and_then(|s| s.replicas).unwrap_or(1);
            let replicas = usize::try_from(replicas).unwrap_or(0);
            let (live, _) = store.index.live_owned(&uid);
            missing.insert(uid, (key.clone(), replicas.saturating_sub(live)));
        }
        let mut wanted: BTreeMap<String, Vec<Wanted>> = BTreeMap::new();
        for ds in store.daemon_sets.values() {
            let uid = ds.metadata.uid.clone().unwrap_or_default();
            let template = ds.spec.clone().unwrap_or_default().template;
            let selector = template.spec.as_ref().and_then(|s| s.node_selector.clone());
            let live = live_pods(store, &uid);
            for (name, node) in &store.nodes {
                let labels = node.metadata.labels.as_ref();
                let selected = (selector.iter().flatten())
                    .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
                let has = live.iter().any(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str())
                });
                // No new daemon pod where a taint it does not tolerate says no
                // (`nodeShouldRunDaemonPod`); one already there stays (NoSchedule evicts none).
                let mut spec = template.spec.clone().unwrap_or_default();
                spec.tolerations
                    .get_or_insert_default()
                    .extend(daemon_tolerations());
                let refused = crate::scheduler::untolerated(node, &spec).is_some();
                if selected && !has && !refused {
                    wanted.entry(uid.clone()).or_default().push(Wanted {
                        meta: ds.metadata.clone(),
                        kind: "DaemonSet",
                        component: "daemonset-controller",
                        template: template.clone(),
                        node: Some(name.clone()),
                    });
                }
            }
        }
        // Each workload's wants, in UID order: a ReplicaSet's replicas, or a DaemonSet's pods.
        let mut wants: BTreeMap<String, Wants> = (missing.into_iter())
            .map(|(uid, (key, n))| (uid, Wants::Replicas(key, n)))
            .collect();
        wants.extend(wanted.into_iter().map(|(uid, w)| (uid, Wants::Pods(w))));
        self.due
            .retain(|uid, _| wants.get(uid).is_some_and(|w| !w.is_empty()));
        for (uid, wants) in wants.into_iter().filter(|(_, w)| !w.is_empty()) {
            let due = *self.due.entry(uid.clone()).or_insert_with(|| {
                let at = now + timing.replica_create;
                timers.at(at, Action::Resync);
                at
            });
            if due > now {
                continue;
            }
            self.due.remove(&uid);
            for pod in wants.pods(store) {
                if !create(store, timers, now, timing, pod) {
                    let refusals = self.refusals.entry(uid.clone()).or_default();
                    let at = now + timing.create_retry(*refusals);
                    *refusals += 1;
                    self.due.insert(uid.clone(), at);
                    timers.at(at, Action::Resync);
                    break;
                }
                self.refusals.remove(&uid);
            }
        }
        write_statuses(store);
    }

    /// The Deployment controller, as far as giving each Deployment its ReplicaSet.
    fn sync_deployments(&mut self, store: &mut Store, now: Duration) {
        let deployments: Vec<Deployment> = store.deployments.values().cloned().collect();
        for deployment in deployments {
            let uid = deployment.metadata.uid.clone().unwrap_or_default();
            let owned = (store.replica_sets.values())
                .any(|rs| controller_of(&rs.metadata).is_some_and(|o| o.uid == uid));
            if owned {
                continue;
            }
            let spec = deployment.spec.clone().unwrap_or_default();
            let hash = template_hash(&spec.template);
            let with_hash = |labels: Option<std::collections::BTreeMap<String, String>>| {
                let mut labels = labels.unwrap_or_default();
                labels.insert(POD_TEMPLATE_HASH.to_string(), hash.clone());
                Some(labels)
            };
            let mut template = spec.template.clone();
            let template_meta = template.metadata.get_or_insert_default();
            template_meta.labels = with_hash(template_meta.labels.take());
            let mut selector = spec.selector.clone();
            selector.match_labels = with_hash(selector.match_labels.take());
            let name = format!(
                "{}-{hash}",
                deployment.metadata.name.as_deref().unwrap_or_default()
            );
            let replicas = spec.replicas.unwrap_or(1);
            let rs = ReplicaSet {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: deployment.metadata.namespace.clone(),
                    uid: Some(store.uid()),
                    creation_timestamp: Some(stamp(now)),
                    generation: Some(1),
                    labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                    annotations: Some(
                        [(
                            "deployment.kubernetes.io/revision".to_string(),
                            "1".to_string(),
                        )]
                        .into(),
                    ),
                    owner_references: Some(vec![owner(&deployment.metadata, "Deployment")]),
                    ..ObjectMeta::default()
                },
                spec: Some(ReplicaSetSpec {
                    replicas: Some(replicas),
                    min_ready_seconds: spec.min_ready_seconds,
                    selector,
                    template: Some(template),
                }),
                status: Some(ReplicaSetStatus::default()),
            };
            store.write_replica_set(rs);
            let message = format!("Scaled up replica set {name} from 0 to {replicas}");
            store.record_event(
                "deployment-controller",
                &involved(&deployment.metadata, "Deployment"),
                "Normal",
                "ScalingReplicaSet",
                &message,
                now,
            );
        }
    }
}

/// Creates one pod a workload wants; answers whether admission let it through.
fn create(
    store: &mut Store,
    timers: &mut Timers,
    now: Duration,
    timing: &Timing,
    w: Wanted,
) -> bool {
    let meta = w.template.metadata.clone().unwrap_or_default();
    let mut spec = w.template.spec.clone().unwrap_or_default();
    let workload = w.meta.name.clone().unwrap_or_default();
    if w.kind == "DaemonSet" {
        spec.node_name = w.node.clone();
        spec.tolerations
            .get_or_insert_default()
            .extend(daemon_tolerations());
    }
    let pod = Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{workload}-")),
            namespace: w.meta.namespace.clone(),
            labels: meta.labels,
            annotations: meta.annotations,
            owner_references: Some(vec![owner(&w.meta, w.kind)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    };
    let involved = involved(&w.meta, w.kind);
    let pod = match store.prepare_pod(&pod, now) {
        Ok(pod) => pod,
        Err(e) => {
            let message = format!("Error creating: {}", e.message);
            store.record_event(
                w.component,
                &involved,
                "Warning",
                "FailedCreate",
                &message,
                now,
            );
            return false;
        }
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let labels = store.namespace_labels(&namespace);
    if let Some(refusal) = pod.spec.as_ref().and_then(|s| pod_security(&labels, s)) {
        let message = format!("Error creating: pods \"{name}\" is forbidden: {refusal}");
        store.record_event(
            w.component,
            &involved,
            "Warning",
            "FailedCreate",
            &message,
            now,
        );
        return false;
    }
    let Ok(pod) = store.insert_pod(pod) else {
        return false;
    };
    let message = format!("Created pod: {name}");
    store.record_event(
        w.component,
        &involved,
        "Normal",
        "SuccessfulCreate",
        &message,
        now,
    );
    if w.node.is_some() {
        let at = now + timing.container_start;
        timers.at(at, Action::StartContainer(ObjRef::of(&pod.metadata)));
    }
    true
}

/// `(live, ready)` pods `uid` controls.
fn counts(store: &Store, uid: &str) -> (i32, i32) {
    let (live, ready) = store.index.live_owned(uid);
    (count(live), count(ready))
}

/// The workloads' status, as their controllers write it (a write only when it changes).
fn write_statuses(store: &mut Store) {
    let replica_sets: Vec<ReplicaSet> = store.replica_sets.values().cloned().collect();
    for rs in replica_sets {
        let (live, ready) = counts(store, rs.metadata.uid.as_deref().unwrap_or_default());
        let status = ReplicaSetStatus {
            replicas: live,
            fully_labeled_replicas: Some(live),
            ready_replicas: Some(ready),
            available_replicas: Some(ready),
            observed_generation: rs.metadata.generation,
            ..ReplicaSetStatus::default()
        };
        if rs.status.as_ref() != Some(&status) {
            let mut rs = rs;
            rs.status = Some(status);
            store.write_replica_set(rs);
        }
    }
    let deployments: Vec<Deployment> = store.deployments.values().cloned().collect();
    for deployment in deployments {
        let uid = deployment.metadata.uid.clone().unwrap_or_default();
        let owned: Vec<String> = (store.replica_sets.values())
            .filter(|rs| controller_of(&rs.metadata).is_some_and(|o| o.uid == uid))
            .filter_map(|rs| rs.metadata.uid.clone())
            .collect();
        let (live, ready) = owned.iter().fold((0, 0), |(l, r), rs| {
            let (a, b) = counts(store, rs);
            (l + a, r + b)
        });
        let replicas = deployment
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1);
        let status = DeploymentStatus {
            replicas: Some(live),
            updated_replicas: Some(live),
            ready_replicas: Some(ready),
            available_replicas: Some(ready),
            unavailable_replicas: Some((replicas - ready).max(0)).filter(|n| *n > 0),
            observed_generation: deployment.metadata.generation,
            ..DeploymentStatus::default()
        };
        if deployment.status.as_ref() != Some(&status) {
            let mut deployment = deployment;
            deployment.status = Some(status);
            store.write_deployment(deployment);
        }
    }
    let daemon_sets: Vec<DaemonSet> = store.daemon_sets.values().cloned().collect();
    for ds in daemon_sets {
        let uid = ds.metadata.uid.clone().unwrap_or_default();
        let selector = (ds.spec.as_ref())
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.node_selector.clone());
        let desired = (store.nodes.values())
            .filter(|n| {
                let labels = n.metadata.labels.as_ref();
                (selector.iter().flatten()).all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
            })
            .count();
        let (live, ready) = counts(store, &uid);
        let status = DaemonSetStatus {
            desired_number_scheduled: count(desired),
            current_number_scheduled: live,
            updated_number_scheduled: Some(live),
            number_ready: ready,
            number_available: Some(ready),
            number_unavailable: Some(count(desired) - ready).filter(|n| *n > 0),
            number_misscheduled: 0,
            observed_generation: ds.metadata.generation,
            ..DaemonSetStatus::default()
        };
        if ds.status.as_ref() != Some(&status) {
            let mut ds = ds;
            ds.status = Some(status);
            store.write_daemon_set(ds);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hash_is_stable_and_safe() {
        let template = PodTemplateSpec::default();
        let hash = template_hash(&template);
        assert_eq!(hash, template_hash(&template));
        assert!(!hash.is_empty() && hash.len() <= 10, "{hash}");
        assert!(hash.bytes().all(|b| SAFE_ALPHABET.contains(&b)), "{hash}");
    }
}
