//! The disruption controller (`pkg/controller/disruption/disruption.go`): keeps each
//! PodDisruptionBudget's status in step with the pods its selector matches.
//!
//! Per budget (`trySync`): the pods of its namespace its selector matches (all of them, those
//! being deleted or ended included); the expected count and the desired healthy count
//! (`getExpectedPodCount`):
//!
//! | spec | `expectedPods` | `desiredHealthy` |
//! |---|---|---|
//! | `minAvailable: N` | the pods matched | `N` |
//! | `minAvailable: P%` | the controllers' scale | `ceil(P% x expected)` |
//! | `maxUnavailable: N` or `P%` | the controllers' scale | `expected - N` (or `ceil(P% x expected)`), at least 0 |
//!
//! where the controllers' scale is the sum of `replicas` of the distinct controllers of the
//! matched pods (a ReplicaSet's, or its Deployment's when one controls it; pods without a
//! controller are skipped; any other controller is an error, as a Job or DaemonSet implements
//! no scale subresource). `currentHealthy` counts the matched pods that are Ready, not being
//! deleted and not in `disruptedPods`; `disruptionsAllowed` is `currentHealthy -
//! desiredHealthy`, 0 when negative or when nothing is expected. `disruptedPods` keeps the
//! evictions the apiserver admitted whose pod is not yet being deleted, for 2 minutes
//! (`DeletionTimeout`), after which the controller gives up on them; a resync is armed for the
//! moment each expires. A sync that fails writes `disruptionsAllowed: 0` with the condition
//! `DisruptionAllowed` `False` `SyncFailed` (`failSafe`), leaving `observedGeneration`, so the
//! eviction subresource answers 429 until a sync succeeds.
//!
//! Not modelled: its Events (`NoPods`, `UnmanagedPods`, `NotDeleted`, ...), StatefulSets and
//! ReplicationControllers as controllers, the stale `DisruptionTarget` condition cleanup.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::budget::{
    DISRUPTION_ALLOWED, SYNC_FAILED, conditions_up_to_date, set_allowed_condition, set_condition,
};
use crate::ctx::Ctx;
use crate::selector::LabelSelectorExt;
use crate::store::{Key, Store, controller_of, key_of, pod_is_ready};
use crate::timers::Action;
use crate::timing::{EPOCH_SECONDS, stamp};

/// `DeletionTimeout`: how long an admitted eviction's pod may take to be marked for deletion
/// before the controller counts it healthy again.
pub(crate) const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// What the disruption controller remembers outside the objects: the resyncs it armed, and
/// each budget's pods as its informer's cache would hold them.
#[derive(Debug, Default)]
pub(crate) struct Disruption {
    rechecks: BTreeSet<Duration>,
    /// The store's resourceVersion when [`Disruption::sync`] last ran.
    seen: u64,
    /// By budget: the pods its selector matches, kept from the pods written since the last
    /// pass, so that a pass costs the pods that changed rather than every pod of the budget.
    matched: BTreeMap<Key, Matched>,
}

/// The pods a budget's selector matches, and how many of them count as healthy before its
/// `disruptedPods` are taken away: not being deleted, and Ready.
#[derive(Debug, Default, PartialEq)]
struct Matched {
    /// What the set was built for: the budget's UID and selector.
    uid: Option<String>,
    selector: Option<LabelSelector>,
    /// The matched pods, in key order, each with whether it is healthy.
    pods: BTreeMap<Key, bool>,
    /// How many of `pods` are healthy.
    healthy: usize,
}

impl Matched {
    /// The pods of `budget`'s namespace its selector matches, by a walk over them.
    fn scan(store: &Store, budget: &PodDisruptionBudget) -> Matched {
        let namespace = budget.metadata.namespace.as_deref().unwrap_or_default();
        let mut matched = Matched {
            uid: budget.metadata.uid.clone(),
            selector: selector_of(budget).cloned(),
            ..Matched::default()
        };
        for pod in store.pods_in(namespace) {
            matched.take(budget, pod);
        }
        matched
    }

    /// Whether the set was built for `budget` as it is.
    fn is_for(&self, budget: &PodDisruptionBudget) -> bool {
        self.uid == budget.metadata.uid && self.selector.as_ref() == selector_of(budget)
    }

    /// Adds `pod` when `budget`'s selector matches it.
    fn take(&mut self, budget: &PodDisruptionBudget, pod: &Pod) {
        // A budget without a selector selects nothing; an empty one, every pod.
        if !selector_of(budget).is_some_and(|s| s.matches(pod.metadata.labels.as_ref())) {
            return;
        }
        let healthy = pod.metadata.deletion_timestamp.is_none() && pod_is_ready(pod);
        self.healthy += usize::from(healthy);
        self.pods.insert(key_of(&pod.metadata), healthy);
    }

    /// Takes in the pod stored under `key` as it is now in `store` (gone, or written).
    fn update(&mut self, store: &Store, budget: &PodDisruptionBudget, key: &Key) {
        if let Some(healthy) = self.pods.remove(key) {
            self.healthy -= usize::from(healthy);
        }
        if let Some(pod) = store.pods.get(key) {
            self.take(budget, pod);
        }
    }

    /// The matched pods themselves, in key order.
    fn pods<'s>(&self, store: &'s Store) -> Vec<&'s Pod> {
        (self.pods.keys())
            .filter_map(|k| store.pods.get(k))
            .collect()
    }
}

/// `budget`'s selector.
fn selector_of(budget: &PodDisruptionBudget) -> Option<&LabelSelector> {
    budget.spec.as_ref().and_then(|s| s.selector.as_ref())
}

/// Virtual time of a timestamp written by [`stamp`].
fn virtual_time(t: &Time) -> Duration {
    let secs = t.0.as_second().saturating_sub(EPOCH_SECONDS);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// `intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)`.
fn scaled(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .ok_or("invalid value for IntOrString: invalid type: string is not a percentage")?
                .parse()
                .map_err(|_| {
                    format!(
                        "invalid value \"{s}\": strconv.Atoi: parsing \"{}\": invalid syntax",
                        s.trim_end_matches('%')
                    )
                })?;
            let scaled = (percent * i64::from(total) + 99).div_euclid(100);
            Ok(i32::try_from(scaled).unwrap_or(i32::MAX))
        }
    }
}

/// The sum of the scales of the matched pods' controllers (`getExpectedScale`).
fn expected_scale(store: &Store, pods: &[&Pod]) -> Result<i32, String> {
    // The scale of each controller, by its UID (a Deployment's, for its ReplicaSet's pods).
    let mut scales: BTreeMap<String, i32> = BTreeMap::new();
    // The owners already resolved.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for pod in pods {
        let Some(owner) = controller_of(&pod.metadata) else {
            continue;
        };
        if !seen.insert(owner.uid.clone()) {
            continue;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let group = owner.api_version.split_once('/').map_or("", |(g, _)| g);
        let (uid, scale) = match (owner.kind.as_str(), group) {
            ("ReplicaSet", "apps" | "extensions") => {
                let key = (namespace.clone(), owner.name.clone());
                let rs = (store.replica_sets.get(&key))
                    .filter(|rs| rs.metadata.uid.as_deref() == Some(owner.uid.as_str()));
                let Some(rs) = rs else {
                    return Err(format!("found no controllers for pod \"{name}\""));
                };
                let deployment = controller_of(&rs.metadata)
                    .filter(|d| d.kind == "Deployment")
                    .and_then(|d| {
                        let key = (namespace.clone(), d.name.clone());
                        store
                            .deployments
                            .get(&key)
                            .filter(|dep| dep.metadata.uid.as_deref() == Some(d.uid.as_str()))
                    });
                match (deployment, controller_of(&rs.metadata)) {
                    (Some(d), _) => (
                        d.metadata.uid.clone().unwrap_or_default(),
                        d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                    ),
                    // A ReplicaSet whose Deployment is gone: no finder answers.
                    (None, Some(c)) if c.kind == "Deployment" => {
                        return Err(format!("found no controllers for pod \"{name}\""));
                    }
                    (None, _) => (
                        owner.uid.clone(),
                        rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                    ),
                }
            }
            ("Job", "batch") => {
                return Err("jobs.batch does not implement the scale subresource".into());
            }
            ("DaemonSet", "apps") => {
                return Err("daemonsets.apps does not implement the scale subresource".into());
            }
            _ => return Err(format!("found no controllers for pod \"{name}\"")),
        };
        scales.insert(uid, scale);
    }
    Ok(scales.values().sum())
}

/// `(expectedPods, desiredHealthy)` of `budget` over its `matched` pods
/// (`getExpectedPodCount`).
fn expected_counts(
    store: &Store,
    budget: &PodDisruptionBudget,
    matched: &Matched,
) -> Result<(i32, i32), String> {
    let spec = budget.spec.clone().unwrap_or_default();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    if let Some(max_unavailable) = &spec.max_unavailable {
        let expected = expected_scale(store, &matched.pods(store))?;
        let max = scaled(max_unavailable, expected)?;
        return Ok((expected, (expected - max).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((count(matched.pods.len()), *n)),
        Some(percent @ IntOrString::String(_)) => {
            let expected = expected_scale(store, &matched.pods(store))?;
            Ok((expected, scaled(percent, expected)?))
        }
        None => Ok((0, 0)),
    }
}

impl Disruption {
    /// Syncs every budget's status (a write only when it changes); arms a resync for the
    /// earliest `disruptedPods` entry of each that will expire.
    ///
    /// Unless `forced` (at a recheck), a pass in which no budget, workload or pod of a
    /// budget's namespace was written is skipped.
    pub(crate) fn sync(&mut self, cx: &mut Ctx<'_>, forced: bool) {
        // Taken on every pass: a pass skipped below had no pod written in a budget's namespace.
        let touched = cx.store.index.take_touched_pods();
        let marks = &cx.store.index.marks;
        let seen = self.seen;
        let stale = marks.budgets > seen
            || marks.workloads > seen
            || (cx.store.budgets.keys()).any(|(namespace, _)| marks.pods_in(namespace) > seen);
        if !forced && !stale {
            return;
        }
        self.seen = cx.store.rv();
        let (store, timers, now) = (&mut *cx.store, &mut *cx.timers, cx.now);
        self.rechecks.retain(|at| *at > now);
        let budgets: Vec<PodDisruptionBudget> = store.budgets.values().cloned().collect();
        self.matched
            .retain(|key, _| store.budgets.contains_key(key));
        for budget in budgets {
            let key = key_of(&budget.metadata);
            let matched = self.matched.entry(key.clone()).or_default();
            if matched.is_for(&budget) {
                for pod in touched.iter().filter(|(namespace, _)| *namespace == key.0) {
                    matched.update(store, &budget, pod);
                }
            } else {
                *matched = Matched::scan(store, &budget);
            }
            if cfg!(debug_assertions) {
                assert_eq!(
                    *matched,
                    Matched::scan(store, &budget),
                    "the pods of budget {key:?}"
                );
            }
            let (status, recheck) = match status(store, &budget, matched, now) {
                Ok(computed) => computed,
                Err(why) => (fail_safe(&budget, &why, now), None),
            };
            if budget.status.as_ref() != Some(&status) {
                let mut budget = budget;
                budget.status = Some(status);
                store.write_budget(budget);
            }
            if let Some(at) = recheck.filter(|at| self.rechecks.insert(*at)) {
                timers.at(at, Action::Resync);
            }
        }
    }
}

/// The status `trySync` computes for `budget`, whose selector matches `matched`, and when to
/// look again.
fn status(
    store: &Store,
    budget: &PodDisruptionBudget,
    matched: &Matched,
    now: Duration,
) -> Result<(PodDisruptionBudgetStatus, Option<Duration>), String> {
    let namespace = budget.metadata.namespace.clone().unwrap_or_default();
    let (expected, desired) = expected_counts(store, budget, matched)?;
    let old = budget.status.clone().unwrap_or_default();
    // buildDisruptedPodMap: the entries whose pod is matched and not being deleted.
    let mut disrupted: BTreeMap<String, Time> = BTreeMap::new();
    let mut recheck: Option<Duration> = None;
    // Of the healthy pods, those disrupted.
    let mut healthy_disrupted = 0;
    for (name, at) in old.disrupted_pods.iter().flatten() {
        let key = (namespace.clone(), name.clone());
        let Some(healthy) = matched.pods.get(&key) else {
            continue;
        };
        let deleting =
            (store.pods.get(&key)).is_none_or(|p| p.metadata.deletion_timestamp.is_some());
        if deleting {
            continue;
        }
        let expires = virtual_time(at) + DELETION_TIMEOUT;
        if expires > now {
            recheck = Some(recheck.map_or(expires, |r: Duration| r.min(expires)));
            disrupted.insert(name.clone(), at.clone());
            healthy_disrupted += usize::from(*healthy);
        }
    }
    let healthy = matched.healthy - healthy_disrupted;
    let healthy = i32::try_from(healthy).unwrap_or(i32::MAX);
    let mut allowed = healthy - desired;
    if expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let disrupted = (!disrupted.is_empty()).then_some(disrupted);
    let same = old.current_healthy == healthy
        && old.desired_healthy == desired
        && old.expected_pods == expected
        && old.disruptions_allowed == allowed
        && old.disrupted_pods.as_ref().filter(|d| !d.is_empty()) == disrupted.as_ref()
        && old.observed_generation == budget.metadata.generation
        && conditions_up_to_date(budget);
    if same {
        return Ok((old, recheck));
    }
    let mut status = PodDisruptionBudgetStatus {
        current_healthy: healthy,
        desired_healthy: desired,
        expected_pods: expected,
        disruptions_allowed: allowed,
        disrupted_pods: disrupted,
        observed_generation: budget.metadata.generation,
        conditions: old.conditions,
    };
    set_allowed_condition(&mut status, now);
    Ok((status, recheck))
}

/// `failSafe`: the status as it was, with `disruptionsAllowed: 0` and `DisruptionAllowed`
/// `False` `SyncFailed` saying why.
fn fail_safe(budget: &PodDisruptionBudget, why: &str, now: Duration) -> PodDisruptionBudgetStatus {
    let mut status = budget.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let condition = Condition {
        type_: DISRUPTION_ALLOWED.to_string(),
        status: "False".to_string(),
        reason: SYNC_FAILED.to_string(),
        message: why.to_string(),
        observed_generation: status.observed_generation,
        last_transition_time: stamp(now),
    };
    set_condition(status.conditions.get_or_insert_default(), condition, now);
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up() {
        let table = [
            (IntOrString::Int(2), 10, Ok(2)),
            (IntOrString::String("50%".into()), 3, Ok(2)),
            (IntOrString::String("34%".into()), 3, Ok(2)),
            (IntOrString::String("33%".into()), 3, Ok(1)),
            (IntOrString::String("0%".into()), 3, Ok(0)),
            (IntOrString::String("100%".into()), 3, Ok(3)),
        ];
        for (value, total, want) in table {
            assert_eq!(scaled(&value, total), want, "{value:?} of {total}");
        }
        assert!(scaled(&IntOrString::String("5".into()), 3).is_err());
    }
}
