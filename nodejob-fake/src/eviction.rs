//! The eviction subresource's admission (`pkg/registry/core/pod/storage/eviction.go`,
//! `EvictionREST.Create`), up to the pod's deletion, which the caller carries out: it works on
//! the store alone (the Pod, the PodDisruptionBudgets of its namespace) and decides.
//!
//! ```text
//!   pod missing ─────────────────────────────────────────────────────▶ 404
//!   terminal, Pending or being deleted (canIgnorePDB) ─────────────────▶ delete
//!   budgets whose selector matches its labels: 2+ ─────────────────────▶ 500
//!                                              0 ──────────────────────▶ delete
//!                                              1, pod not Ready and (AlwaysAllow, or
//!                                                 currentHealthy >= desiredHealthy > 0) ──▶ delete
//!                                              1, status older than the spec ──────▶ 429
//!                                              1, disruptionsAllowed 0 ────────────▶ 429
//!                                              1, else: disruptionsAllowed - 1, the pod
//!                                                 in disruptedPods (not on a dry run) ──▶ delete
//! ```
//!
//! The delete carries the caller's UID precondition, checked last, as the registry checks it in
//! the delete itself: a budget already decremented stays decremented (its `disruptedPods`
//! entry expires in the disruption controller).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use nodejob_core::{ApiError, ApiResult, DryRun};

use crate::budget::set_allowed_condition;
use crate::selector::LabelSelectorExt;
use crate::store::{Key, Store, pod_is_ready, pod_is_terminal, pod_not_found};
use crate::timing::stamp;

/// `MaxDisruptedPodSize`: how many unconfirmed evictions a budget holds before the registry
/// refuses more.
const MAX_DISRUPTED_PODS: usize = 2000;

/// The first sentence of every 429 an eviction answers.
const VIOLATES: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// What the eviction comes to, short of an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Delete the pod (the caller adds its `DisruptionTarget` condition first, unless on a dry
    /// run).
    Delete,
    /// 429: the message, with the cause that names the budget appended.
    Blocked(String),
}

/// Whether the registry deletes `pod` without looking at budgets (`canIgnorePDB`): it is
/// terminal, Pending, or already being deleted.
fn can_ignore_budgets(pod: &Pod) -> bool {
    let pending = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
        || pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_none();
    pod_is_terminal(pod) || pending || pod.metadata.deletion_timestamp.is_some()
}

/// The budgets in the pod's namespace whose selector matches its labels; a budget with a
/// missing, empty or invalid selector matches nothing (`getPodDisruptionBudgets`).
pub(crate) fn budgets_of<'a>(store: &'a Store, pod: &Pod) -> Vec<&'a PodDisruptionBudget> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let labels = pod.metadata.labels.as_ref();
    (store.budgets.iter())
        .filter(|((ns, _), _)| ns == namespace)
        .map(|(_, b)| b)
        .filter(|b| {
            let selector = b.spec.as_ref().and_then(|s| s.selector.as_ref());
            selector.is_some_and(|s| s.matches_non_empty(labels))
        })
        .collect()
}

/// The UID precondition of the delete: Conflict when the pod now has another UID. On a real
/// run the registry's first write (the `DisruptionTarget` condition) checks it, naming the
/// resource `Pod`; on a dry run only the delete's storage precondition does.
fn check_uid(pod: &Pod, uid: &str, dry_run: DryRun) -> ApiResult<()> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let actual = pod.metadata.uid.as_deref().unwrap_or_default();
    if uid.is_empty() || uid == actual {
        return Ok(());
    }
    Err(ApiError::conflict(match dry_run {
        DryRun::No => format!(
            "Operation cannot be fulfilled on Pod \"{name}\": the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
        ),
        DryRun::All => format!(
            "Operation cannot be fulfilled on pods \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
        ),
    }))
}

/// Admits the eviction of pod `namespace/name` with the UID precondition `uid` (none when
/// empty), writing the budget's status when it uses a disruption (not on a dry run). Answers
/// what to do with the pod, or the apiserver's error (404 for a missing pod).
pub(crate) fn admit(
    store: &mut Store,
    namespace: &str,
    name: &str,
    uid: &str,
    dry_run: DryRun,
    now: Duration,
) -> ApiResult<Verdict> {
    let key: Key = (namespace.to_string(), name.to_string());
    let pod = store
        .pods
        .get(&key)
        .cloned()
        .ok_or_else(|| pod_not_found(name))?;
    if can_ignore_budgets(&pod) {
        check_uid(&pod, uid, dry_run)?;
        return Ok(Verdict::Delete);
    }
    let budgets = budgets_of(store, &pod);
    let budget = match budgets.as_slice() {
        [] => {
            check_uid(&pod, uid, dry_run)?;
            return Ok(Verdict::Delete);
        }
        [one] => (*one).clone(),
        _ => {
            // Answered as a Status object with code 500, which clients read as an error.
            return Err(ApiError::transient(
                500,
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let status = budget.status.clone().unwrap_or_default();
    if !pod_is_ready(&pod) {
        let policy = budget
            .spec
            .as_ref()
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
        let healthy_enough =
            status.current_healthy >= status.desired_healthy && status.desired_healthy > 0;
        if policy == Some("AlwaysAllow") || healthy_enough {
            // An unready pod does not count towards the budget: deleted without using it.
            check_uid(&pod, uid, dry_run)?;
            return Ok(Verdict::Delete);
        }
    }
    let budget_name = budget.metadata.name.clone().unwrap_or_default();
    // checkAndDecrement.
    if status.observed_generation.unwrap_or(0) < budget.metadata.generation.unwrap_or(0) {
        return Ok(Verdict::Blocked(format!(
            "{VIOLATES} The disruption budget {budget_name} is still being processed by the server."
        )));
    }
    let forbidden = |why: &str| {
        ApiError::forbidden(format!(
            "poddisruptionbudget.policy \"{budget_name}\" is forbidden: {why}"
        ))
    };
    if status.disruptions_allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    if status.disrupted_pods.as_ref().map_or(0, |d| d.len()) > MAX_DISRUPTED_PODS {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if status.disruptions_allowed == 0 {
        return Ok(Verdict::Blocked(format!(
            "{VIOLATES} The disruption budget {budget_name} needs {} healthy pods and has {} currently",
            status.desired_healthy, status.current_healthy
        )));
    }
    if dry_run == DryRun::No {
        let mut budget = budget;
        let status = budget.status.get_or_insert_default();
        status.disruptions_allowed -= 1;
        if status.disruptions_allowed == 0 {
            set_allowed_condition(status, now);
        }
        (status.disrupted_pods.get_or_insert_default()).insert(name.to_string(), stamp(now));
        store.write_budget(budget);
    }
    check_uid(&pod, uid, dry_run)?;
    Ok(Verdict::Delete)
}
