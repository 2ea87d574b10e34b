//! What both resources' statuses share: the condition types and reasons, and the entries of
//! their capped lists.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The types of the conditions a status carries. `Ready`, `Reconciling` and `Stalled` have
/// kstatus's meanings, so `kubectl wait --for=condition=Ready`, Flux and Argo CD read them; the
/// others say why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionType {
    /// The resource's operation completed: every node at the target (or the CA rotated).
    Ready,
    /// The controller is working toward the spec (the operation under way, or waiting).
    Reconciling,
    /// The operation stopped and will not go on without a change to the spec (a node failed,
    /// the failure budget spent, a plan refused).
    Stalled,
    /// The spec was read as a plan; `False` names the field and the rule.
    Validated,
    /// The controller holds the Lease for this resource's operation; `False` names the holder.
    LeaseHeld,
    /// `spec.paused`, or the cluster's pause switch (`nodejob pause`), holds it.
    Paused,
    /// No node starts until the window opens (`status.nextWindow`).
    WaitingForWindow,
    /// A node failed, was blocked or rolled back, or a gate disagreed.
    Degraded,
}

impl ConditionType {
    /// Every type, in the order a status lists them.
    pub const ALL: [ConditionType; 8] = [
        ConditionType::Ready,
        ConditionType::Reconciling,
        ConditionType::Stalled,
        ConditionType::Validated,
        ConditionType::LeaseHeld,
        ConditionType::Paused,
        ConditionType::WaitingForWindow,
        ConditionType::Degraded,
    ];

    /// The condition's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Reconciling => "Reconciling",
            ConditionType::Stalled => "Stalled",
            ConditionType::Validated => "Validated",
            ConditionType::LeaseHeld => "LeaseHeld",
            ConditionType::Paused => "Paused",
            ConditionType::WaitingForWindow => "WaitingForWindow",
            ConditionType::Degraded => "Degraded",
        }
    }
}

/// The reasons the conditions give (UpperCamelCase, as the API conventions ask).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Every node at the target / the rotation finalized.
    Completed,
    /// Nodes are being taken through their steps.
    Progressing,
    /// The spec is not a plan the command would run.
    InvalidSpec,
    /// A node failed its step.
    NodeFailed,
    /// As many nodes failed as the failure budget allows.
    FailureBudgetExhausted,
    /// More nodes blocked by their drains than `maxBlocked`.
    TooManyBlocked,
    /// The Kubernetes version skew policy refuses the next batch.
    SkewRefused,
    /// A gate between the rotation's phases found nodes that disagree.
    GateDisagrees,
    /// An abort asked after `issue` began, refused (the nodes named).
    AbortRefused,
    /// Another operation (a person's `nodejob`, another resource) holds the Lease.
    LeaseHeldByOther,
    /// `spec.paused` is true.
    PausedBySpec,
    /// The cluster's pause switch is on (`nodejob pause`).
    PausedBySwitch,
    /// The window is closed.
    WindowClosed,
}

impl Reason {
    /// The condition's `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Completed => "Completed",
            Reason::Progressing => "Progressing",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::NodeFailed => "NodeFailed",
            Reason::FailureBudgetExhausted => "FailureBudgetExhausted",
            Reason::TooManyBlocked => "TooManyBlocked",
            Reason::SkewRefused => "SkewRefused",
            Reason::GateDisagrees => "GateDisagrees",
            Reason::AbortRefused => "AbortRefused",
            Reason::LeaseHeldByOther => "LeaseHeldByOther",
            Reason::PausedBySpec => "PausedBySpec",
            Reason::PausedBySwitch => "PausedBySwitch",
            Reason::WindowClosed => "WindowClosed",
        }
    }
}

/// A node with a step under way.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InFlight {
    /// The node.
    pub node: String,
    /// Its step, as the progress says it (`Drain`, `Upgrade`, `Reboot`, `Soak`, `Stage`…).
    pub step: String,
}

/// A node that failed, and where.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedNode {
    /// The node.
    pub node: String,
    /// The step it failed at.
    pub step: String,
    /// Why, in one word (`HostStepFailed`, `DrainTimedOut`, …).
    pub reason: String,
    /// What happened, as the progress said it.
    pub message: String,
    /// The host Job left for inspection, if one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The host step's exit code, if it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// A node whose drain PodDisruptionBudgets blocked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    /// The node.
    pub node: String,
    /// What it came to: `skipped` or `quarantined`.
    pub outcome: String,
    /// The budgets that refused its Pods, `namespace/name`.
    pub budgets: Vec<String>,
}

/// Who paused the operation, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Paused {
    /// `spec` (the resource's `paused`) or who turned the cluster's switch on.
    pub by: String,
    /// Why, as they said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Since when (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}
