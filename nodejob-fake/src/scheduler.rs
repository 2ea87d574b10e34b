//! kube-scheduler, as far as placing a workload's pod needs it: binds each pod that has no
//! `nodeName` to a feasible node, or marks it unschedulable.
//!
//! A node is feasible (the default profile's filters, in order, the first that fails naming
//! the node's reason) when it is schedulable (`NodeUnschedulable`: not cordoned, unless the pod
//! tolerates `node.kubernetes.io/unschedulable`), Ready (`TaintToleration`: a NotReady node
//! carries the `node.kubernetes.io/not-ready:NoSchedule` taint the node lifecycle controller
//! puts on it), and has every label of the pod's `nodeSelector` (`NodeAffinity`). Among the
//! feasible nodes it picks the one with the fewest live pods of the pod's controller, then the
//! fewest live pods, then the first by name: the spreading the default scoring does, made
//! deterministic. A bound pod gets `PodScheduled` `True` and its kubelet starts it
//! [`Timing::container_start`](crate::Timing::container_start) later. A pod that fits nowhere
//! stays Pending with `PodScheduled` `False` `Unschedulable` and the scheduler's message
//! (`FitError.Error` in `pkg/scheduler/framework/types.go`), e.g.
//! `0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node
//! affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for
//! scheduling.`; it is placed as soon as a node fits.
//!
//! As kube-scheduler does in a large cluster (`numFeasibleNodesToFind` and
//! `nextStartNodeIndex` in `pkg/scheduler/schedule_one.go`), a search stops once it has found
//! enough feasible nodes: all of them below 100 nodes, else `50 - nodes/125` percent of the
//! nodes (at least 5%, at least 100); the next search starts (in name order, wrapping) at the
//! node after the last one this one looked at. A pod that fits nowhere waits, as in the
//! scheduler's unschedulable queue, until a node or the pod itself is written.
//!
//! A node's own `NoSchedule` and `NoExecute` taints (`spec.taints`) keep off every pod that
//! does not tolerate them (`TaintToleration`; the message counts them as `node(s) had
//! untolerated taint(s)`).
//!
//! Not modelled: resources, affinity other than `nodeSelector`, topology spread constraints,
//! preemption, scheduler names, the `FailedScheduling` Events.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, PodSpec, Taint, Toleration};

use crate::ctx::Ctx;
use crate::store::{Key, Store, controller_of, node_is_ready};
use crate::timers::{Action, ObjRef, Timers};
use crate::timing::stamp;

/// The taint key a cordoned node carries.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Whether `toleration` tolerates `taint` (`ToleratesTaint`, `k8s.io/api/core/v1/toleration.go`):
/// the effect empty (all effects) or the same; the key empty with `Exists` (every key) or the
/// same; `Exists`, or `Equal` (the default) with the same value.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let exists = toleration.operator.as_deref() == Some("Exists");
    if key.is_empty() {
        return exists;
    }
    key == taint.key
        && (exists
            || toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default())
}

/// The first of `node`'s own `NoSchedule` or `NoExecute` taints (`spec.taints`) that `spec`
/// does not tolerate: kube-scheduler's `TaintToleration` filter keeps the pod off the node;
/// the DaemonSet controller creates no new daemon pod there (`nodeShouldRunDaemonPod`).
pub(crate) fn untolerated<'n>(node: &'n Node, spec: &PodSpec) -> Option<&'n Taint> {
    (node.spec.as_ref().and_then(|s| s.taints.as_ref()))
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !(spec.tolerations.iter().flatten()).any(|tol| tolerates(tol, t)))
}

/// Why a node does not fit a pod.
fn misfit(node: &Node, spec: &PodSpec) -> Option<&'static str> {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    // The taints a cordon and NotReady stand for, judged by the one toleration rule.
    let tolerates_taint = |key: &str| {
        let taint = Taint {
            key: key.to_string(),
            effect: "NoSchedule".to_string(),
            ..Taint::default()
        };
        (spec.tolerations.iter().flatten()).any(|t| tolerates(t, &taint))
    };
    if cordoned && !tolerates_taint(UNSCHEDULABLE_TAINT) {
        return Some("node(s) were unschedulable");
    }
    if !node_is_ready(node) && !tolerates_taint("node.kubernetes.io/not-ready") {
        return Some("node(s) had untolerated taint {node.kubernetes.io/not-ready: }");
    }
    if untolerated(node, spec).is_some() {
        return Some("node(s) had untolerated taint(s)");
    }
    let labels = node.metadata.labels.as_ref();
    let selected = (spec.node_selector.iter().flatten())
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    if !selected {
        return Some("node(s) didn't match Pod's node affinity/selector");
    }
    None
}

/// A walk over a map keyed by node name, in step with a walk over the nodes in name order over
/// the same range: the value at each node visited, 0 where the map has none.
struct Beside<'a> {
    entries: std::iter::Peekable<std::collections::btree_map::Range<'a, String, usize>>,
}

impl<'a> Beside<'a> {
    fn new(
        map: Option<&'a BTreeMap<String, usize>>,
        walk: (Bound<&String>, Bound<&String>),
    ) -> Self {
        static EMPTY: BTreeMap<String, usize> = BTreeMap::new();
        Beside {
            entries: map.unwrap_or(&EMPTY).range::<String, _>(walk).peekable(),
        }
    }

    /// The value at `name`; the names asked for ascend.
    fn at(&mut self, name: &str) -> usize {
        while self.entries.next_if(|(k, _)| k.as_str() < name).is_some() {}
        match self.entries.peek() {
            Some((k, v)) if k.as_str() == name => **v,
            _ => 0,
        }
    }
}

/// The `PodScheduled` condition, `True` or `False` with the reason and message.
fn scheduled(failure: Option<&str>, now: Duration) -> PodCondition {
    PodCondition {
        type_: "PodScheduled".to_string(),
        status: if failure.is_some() { "False" } else { "True" }.to_string(),
        reason: failure.map(|_| "Unschedulable".to_string()),
        message: failure.map(str::to_string),
        last_transition_time: Some(stamp(now)),
        ..PodCondition::default()
    }
}

/// The scheduler's message when no node fits: the reasons counted over the nodes.
fn fit_error(reasons: &[&str]) -> String {
    if reasons.is_empty() {
        return "no nodes available to schedule pods".to_string();
    }
    let n = reasons.len();
    let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in reasons {
        *histogram.entry(reason).or_default() += 1;
    }
    let mut counted: Vec<String> = histogram
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    counted.sort();
    format!(
        "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
        counted.join(", ")
    )
}

/// How many feasible nodes a search finds before it stops (`numFeasibleNodesToFind` with the
/// default `percentageOfNodesToScore`).
fn feasible_nodes_to_find(nodes: usize) -> usize {
    const MIN_NODES: usize = 100;
    const MIN_PERCENT: usize = 5;
    if nodes < MIN_NODES {
        return nodes;
    }
    let percent = 50_usize.saturating_sub(nodes / 125).max(MIN_PERCENT);
    (nodes * percent / 100).max(MIN_NODES)
}

/// What kube-scheduler remembers between its searches.
#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    /// Where the next search starts (`nextStartNodeIndex`, as the node's name).
    resume: Option<String>,
    /// The pods that fit nowhere, with their resourceVersion and the nodes' mark (the last
    /// Node write) when they were tried: tried again when either moved.
    unschedulable: BTreeMap<Key, (Option<String>, u64)>,
}

impl Scheduler {
    /// Places every unbound pod (a write per pod bound, or per change of an unschedulable
    /// pod's condition); the kubelet starts a bound pod
    /// [`Timing::container_start`](crate::Timing::container_start) later.
    pub(crate) fn bind(&mut self, cx: &mut Ctx<'_>) {
        let (store, timers, now) = (&mut *cx.store, &mut *cx.timers, cx.now);
        let start_after = cx.timing.container_start;
        // The pods to place ([`crate::index::unbound`]), from the store's index, in key order.
        let pending: Vec<Key> = store.index.unbound.iter().cloned().collect();
        self.unschedulable
            .retain(|key, _| store.index.unbound.contains(key));
        // What an unschedulable pod was tried with: its resourceVersion and the nodes' mark.
        let tried = |store: &Store, pod: &Pod| {
            (
                pod.metadata.resource_version.clone(),
                store.index.marks.nodes,
            )
        };
        for key in pending {
            let Some(pod) = store.pods.get(&key) else {
                continue;
            };
            if self.unschedulable.get(&key) == Some(&tried(store, pod)) {
                continue;
            }
            let pod = pod.clone();
            if self.place(store, timers, (now, now + start_after), pod) {
                self.unschedulable.remove(&key);
            } else if let Some(pod) = store.pods.get(&key) {
                self.unschedulable.insert(key, tried(store, pod));
            }
        }
    }

    /// Searches the nodes for `pod` and binds it at `now` to the best it found, its container
    /// to start at `start` (`true`); or, when none fits, marks it unschedulable (`false`).
    fn place(
        &mut self,
        store: &mut Store,
        timers: &mut Timers,
        (now, start): (Duration, Duration),
        mut pod: Pod,
    ) -> bool {
        let controller = controller_of(&pod.metadata).map(|o| o.uid.clone());
        let siblings = (controller.as_deref()).and_then(|uid| store.index.live_owned_on(uid));
        let spec = pod.spec.clone().unwrap_or_default();
        let to_find = feasible_nodes_to_find(store.nodes.len());
        let from = self.resume.clone().unwrap_or_default();
        // In name order from `from`, then wrapping: two walks, every name of the second before
        // every name of the first.
        let walks = [
            (Bound::Included(&from), Bound::Unbounded),
            (Bound::Unbounded, Bound::Excluded(&from)),
        ];
        let mut reasons = Vec::new();
        // The best node so far: its rank, whether the second walk found it, its name.
        let mut best: Option<((usize, usize), bool, &String)> = None;
        let mut found = 0;
        let mut next = None;
        'search: for (second, walk) in walks.into_iter().enumerate() {
            let second = second == 1;
            let mut nodes = store.nodes.range::<String, _>(walk);
            // Its live pods of the same controller, then all its live pods, read in step with
            // the nodes (a lookup per node and map cost most of a large cluster's placement).
            let mut owned = Beside::new(siblings, walk);
            let mut live = Beside::new(Some(store.index.live_on_by_node()), walk);
            while let Some((name, node)) = nodes.next() {
                if let Some(reason) = misfit(node, &spec) {
                    reasons.push(reason);
                    continue;
                }
                found += 1;
                let rank = (owned.at(name), live.at(name));
                // The first by name among the lowest ranks: a later name of the same walk is
                // greater, a name of the second walk less than any of the first.
                let better = best.is_none_or(|(r, in_second, _)| {
                    rank < r || (rank == r && second && !in_second)
                });
                if better {
                    best = Some((rank, second, name));
                }
                if found == to_find {
                    next = nodes.next().map(|(n, _)| n);
                    if next.is_none() && !second {
                        next = store
                            .nodes
                            .range::<String, _>(walks[1])
                            .next()
                            .map(|(n, _)| n);
                    }
                    break 'search;
                }
            }
        }
        if let Some(next) = next {
            self.resume = Some(next.clone());
        }
        let best = best.map(|(_, _, name)| name.clone());
        let status = pod.status.get_or_insert_default();
        let conditions = status.conditions.get_or_insert_default();
        let previous = conditions.iter().position(|c| c.type_ == "PodScheduled");
        match best {
            Some(node) => {
                if let Some(i) = previous {
                    conditions.remove(i);
                }
                conditions.push(scheduled(None, now));
                pod.spec.get_or_insert_default().node_name = Some(node);
                let pod = store.write_pod(pod);
                timers.at(start, Action::StartContainer(ObjRef::of(&pod.metadata)));
                true
            }
            None => {
                let message = fit_error(&reasons);
                let same = previous.is_some_and(|i| {
                    conditions[i].status == "False"
                        && conditions[i].message.as_deref() == Some(message.as_str())
                });
                if !same {
                    if let Some(i) = previous {
                        conditions.remove(i);
                    }
                    conditions.push(scheduled(Some(&message), now));
                    store.write_pod(pod);
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_stops_after_the_share_of_nodes_kube_scheduler_scores() {
        // numFeasibleNodesToFind with percentageOfNodesToScore unset: every node below 100,
        // then 50 - n/125 percent, never under 5% nor under 100 nodes.
        let table = [
            (0, 0),
            (3, 3),
            (99, 99),
            (100, 100),
            (250, 120),
            (1000, 420),
            (3000, 780),
            (5000, 500),
            (6000, 300),
            (10000, 500),
        ];
        for (nodes, found) in table {
            assert_eq!(feasible_nodes_to_find(nodes), found, "{nodes} nodes");
        }
    }

    #[test]
    fn messages() {
        assert_eq!(fit_error(&[]), "no nodes available to schedule pods");
        assert_eq!(
            fit_error(&[
                "node(s) didn't match Pod's node affinity/selector",
                "node(s) were unschedulable",
                "node(s) didn't match Pod's node affinity/selector",
            ]),
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }
}
