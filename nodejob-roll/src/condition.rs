//! [`Conditions`]: a driver's own condition on each node it works on, so that `kubectl
//! describe node` (its `Conditions:` table) shows where every node of a roll stands, as
//! OpenShift's MachineConfigNode conditions and node-problem-detector's do.
//!
//! One condition type per driver ([`UPGRADE`], [`CA_ROTATION`]), written by that driver alone
//! through `nodes/status` ([`NodeApi::patch_node_conditions`]: a strategic-merge patch that
//! merges the list by type, so the kubelet's conditions are never touched):
//!
//! | field | what it says |
//! |---|---|
//! | `status` | `True` while the driver holds the node (a step under way, or a failure or a stop a rerun carries on); `False` once it let it go (upgraded, rotated, restored) |
//! | `reason` | the step under way (`Drain`, `Issue`, ...) or how the node ended (`Upgraded`, `Failed`, ...), one CamelCase word as the API conventions ask |
//! | `message` | what it means, for a person, bounded |
//! | `lastTransitionTime` | when `status` last changed: kept from the condition as it stands (written earlier in the run, or by an earlier run) unless `status` changes |
//! | `lastHeartbeatTime` | when the driver last wrote it |
//!
//! A condition is the driver's report, never its state: nothing is decided from it (the
//! records in annotations are the state), and failing to write it is a note, never a node's
//! failure.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::{ApiError, NodeApi, NodeChange, quote};

use crate::call::retry;

/// The condition type of the rolling upgrade.
pub const UPGRADE: &str = "NodejobUpgrade";
/// The condition type of the CA rotation.
pub const CA_ROTATION: &str = "NodejobCARotation";

/// Whether the driver holds the node: the condition's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// `True`: a step is under way, or the node failed or was stopped and a rerun carries it
    /// on.
    Yes,
    /// `False`: the driver let it go (done).
    No,
}

impl Held {
    /// `True` or `False`.
    pub fn as_str(self) -> &'static str {
        match self {
            Held::Yes => "True",
            Held::No => "False",
        }
    }
}

/// What one write of a condition says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Standing {
    /// Its `status`.
    pub held: Held,
    /// Its `reason`: one CamelCase word.
    pub reason: String,
    /// Its `message`.
    pub message: String,
}

impl Standing {
    /// `held`, `reason`, `message`.
    pub fn new(held: Held, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Standing {
            held,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The condition of `type_` on `node`, if it has one.
pub fn condition<'n>(node: &'n Node, type_: &str) -> Option<&'n NodeCondition> {
    (node.status.as_ref()?.conditions.as_ref()?)
        .iter()
        .find(|c| c.type_ == type_)
}

/// The condition of `type_` saying `standing` at `now`, after `prior` (the condition as it
/// stands): its `lastTransitionTime` is `prior`'s unless the status changes (or there is none),
/// its `lastHeartbeatTime` is `now`; the message bounded as a quotation.
pub fn next(
    prior: Option<&NodeCondition>,
    type_: &str,
    standing: &Standing,
    now: Timestamp,
) -> NodeCondition {
    let status = standing.held.as_str();
    let since = prior
        .filter(|p| p.status == status)
        .and_then(|p| p.last_transition_time.clone())
        .unwrap_or(Time(now));
    NodeCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(standing.reason.clone()),
        message: Some(quote(&standing.message)),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(since),
    }
}

/// One run's writer of its driver's condition: what it wrote, by node, so that a node's
/// `lastTransitionTime` holds across the run's writes whatever copy of the node it has.
#[derive(Debug)]
pub struct Conditions {
    type_: &'static str,
    written: Mutex<BTreeMap<String, NodeCondition>>,
}

impl Conditions {
    /// The writer of conditions of `type_`.
    pub fn new(type_: &'static str) -> Self {
        Conditions {
            type_,
            written: Mutex::new(BTreeMap::new()),
        }
    }

    /// The condition type.
    pub fn type_(&self) -> &'static str {
        self.type_
    }

    /// Writes `standing` on node `name` (through `api`: the run's fenced writer), after what
    /// this run wrote there, else the condition on `seen` (the node as last read); under
    /// `resource_version` when given (Conflict when the node changed since: nothing written).
    /// Transient errors are retried ([`retry`]). Answers the node as written.
    ///
    /// # Errors
    /// The apiserver's answer: the node is gone or changed, the write was refused (the Lease
    /// lost).
    pub async fn set<A: NodeApi + ?Sized>(
        &self,
        api: &A,
        name: &str,
        seen: Option<&Node>,
        standing: &Standing,
        resource_version: Option<&str>,
    ) -> Result<Node, ApiError> {
        self.set_with(api, name, seen, standing, resource_version, &[])
            .await
    }

    /// [`Conditions::set`], and in the same write `changes` to the node's metadata (a
    /// driver's records: [`NodeApi::patch_node_conditions`]), all or nothing.
    ///
    /// # Errors
    /// As [`Conditions::set`]; Invalid for a change to the node's spec.
    pub async fn set_with<A: NodeApi + ?Sized>(
        &self,
        api: &A,
        name: &str,
        seen: Option<&Node>,
        standing: &Standing,
        resource_version: Option<&str>,
        changes: &[NodeChange],
    ) -> Result<Node, ApiError> {
        let prior = self
            .written(name)
            .or_else(|| seen.and_then(|n| condition(n, self.type_)).cloned());
        let written = next(prior.as_ref(), self.type_, standing, api.wall_time());
        let sent = std::slice::from_ref(&written);
        let node = retry(api, || {
            api.patch_node_conditions(name, resource_version, changes, sent)
        })
        .await?;
        self.lock().insert(name.to_string(), written);
        Ok(node)
    }

    /// Whether what this run last wrote on `name` says `standing` already: its status, reason
    /// and message, all `kubectl describe node` shows but the heartbeat. Writing it again
    /// would change nothing a person reads.
    pub fn says(&self, name: &str, standing: &Standing) -> bool {
        self.written(name).is_some_and(|c| {
            c.status == standing.held.as_str()
                && c.reason.as_deref() == Some(standing.reason.as_str())
                && c.message == Some(quote(&standing.message))
        })
    }

    /// What this run last wrote on `name`.
    pub fn written(&self, name: &str) -> Option<NodeCondition> {
        self.lock().get(name).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, NodeCondition>> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status_and_the_heartbeat_always() {
        let working = Standing::new(Held::Yes, "Drain", "upgrading to v1.38.0: draining");
        let first = next(None, UPGRADE, &working, at("2026-01-01T00:00:30Z"));
        assert_eq!(first.type_, "NodejobUpgrade");
        assert_eq!(first.status, "True");
        assert_eq!(first.reason.as_deref(), Some("Drain"));
        assert_eq!(
            first.last_transition_time,
            Some(Time(at("2026-01-01T00:00:30Z")))
        );
        let later = Standing::new(
            Held::Yes,
            "Upgrade",
            "upgrading to v1.38.0: the host upgrade",
        );
        let second = next(Some(&first), UPGRADE, &later, at("2026-01-01T00:01:00Z"));
        assert_eq!(second.last_transition_time, first.last_transition_time);
        assert_eq!(
            second.last_heartbeat_time,
            Some(Time(at("2026-01-01T00:01:00Z")))
        );
        let done = Standing::new(Held::No, "Upgraded", "upgraded to v1.38.0");
        let third = next(Some(&second), UPGRADE, &done, at("2026-01-01T00:02:00Z"));
        assert_eq!(third.status, "False");
        assert_eq!(
            third.last_transition_time,
            Some(Time(at("2026-01-01T00:02:00Z")))
        );
    }

    #[test]
    fn a_long_message_is_bounded() {
        let long = "x".repeat(100_000);
        let written = next(
            None,
            CA_ROTATION,
            &Standing::new(Held::Yes, "Failed", long),
            at("2026-01-01T00:00:00Z"),
        );
        assert!(written.message.unwrap().len() < 10_000);
    }
}
