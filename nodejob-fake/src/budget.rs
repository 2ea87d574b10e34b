//! What the eviction subresource and the disruption controller share about a
//! PodDisruptionBudget's status (`k8s.io/component-helpers/apps/poddisruptionbudget`): its
//! `DisruptionAllowed` condition.

use std::time::Duration;

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::timing::stamp;

/// The condition type.
pub(crate) const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// Its reasons.
pub(crate) const SUFFICIENT_PODS: &str = "SufficientPods";
pub(crate) const INSUFFICIENT_PODS: &str = "InsufficientPods";
pub(crate) const SYNC_FAILED: &str = "SyncFailed";

/// `meta.SetStatusCondition`: replaces the condition of the same type, keeping its
/// `lastTransitionTime` unless its status changes; adds it (stamped `now`) if absent.
pub(crate) fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: Duration) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status != new.status {
                old.status = new.status;
                old.last_transition_time = stamp(now);
            }
            old.reason = new.reason;
            old.message = new.message;
            old.observed_generation = new.observed_generation;
        }
        None => {
            new.last_transition_time = stamp(now);
            conditions.push(new);
        }
    }
}

/// `UpdateDisruptionAllowedCondition`: `DisruptionAllowed` `True` (`SufficientPods`) when
/// `disruptionsAllowed` > 0, else `False` (`InsufficientPods`).
pub(crate) fn set_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: Duration) {
    let (value, reason) = if status.disruptions_allowed > 0 {
        ("True", SUFFICIENT_PODS)
    } else {
        ("False", INSUFFICIENT_PODS)
    };
    let condition = Condition {
        type_: DISRUPTION_ALLOWED.to_string(),
        status: value.to_string(),
        reason: reason.to_string(),
        message: String::new(),
        observed_generation: status.observed_generation,
        last_transition_time: stamp(now),
    };
    set_condition(status.conditions.get_or_insert_default(), condition, now);
}

/// `ConditionsAreUpToDate`: the condition says what `disruptionsAllowed` says, and the status
/// is of the current generation.
pub(crate) fn conditions_up_to_date(budget: &PodDisruptionBudget) -> bool {
    let Some(status) = budget.status.as_ref() else {
        return false;
    };
    let condition = (status.conditions.iter().flatten()).find(|c| c.type_ == DISRUPTION_ALLOWED);
    let Some(condition) = condition else {
        return false;
    };
    if status.observed_generation != budget.metadata.generation {
        return false;
    }
    if status.disruptions_allowed > 0 {
        condition.status == "True" && condition.reason == SUFFICIENT_PODS
    } else {
        condition.status == "False" && condition.reason == INSUFFICIENT_PODS
    }
}
