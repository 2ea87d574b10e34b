//! `NodeUpgrade`: a rolling node upgrade, declared. Its spec is the plan `nodejob upgrade`
//! takes as flags, field for flag.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::status::{Blocked, FailedNode, InFlight, Paused};

/// The nodes a rolling upgrade takes to `target`, and how.
// Clippy takes the columns' repeated `type_ = ...` for one attribute given twice.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nodejob.stratum.ciq.com",
    version = "v1alpha1",
    kind = "NodeUpgrade",
    shortname = "nu",
    category = "nodejob",
    status = "NodeUpgradeStatus",
    doc = "A rolling node upgrade: every selected node taken to spec.target, a few at a time, each drained, upgraded on its host, rebooted and checked before the next",
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    ),
    printcolumn(name = "Target", type_ = "string", json_path = ".spec.target"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Nodes", type_ = "integer", json_path = ".status.counts.nodes"),
    printcolumn(
        name = "Up-To-Date",
        type_ = "integer",
        json_path = ".status.counts.upToDate"
    ),
    printcolumn(
        name = "Failed",
        type_ = "integer",
        json_path = ".status.counts.failed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Blocked",
        type_ = "integer",
        json_path = ".status.counts.blocked",
        priority = 1
    ),
    printcolumn(
        name = "In-Flight",
        type_ = "integer",
        json_path = ".status.counts.inProgress",
        priority = 1
    ),
    printcolumn(
        name = "Paused",
        type_ = "boolean",
        json_path = ".spec.paused",
        priority = 1
    ),
    printcolumn(
        name = "Lease-Holder",
        type_ = "string",
        json_path = ".status.leaseHolder",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NodeUpgradeSpec {
    /// The version every node is taken to (`nodejob upgrade --to`): by default a Kubernetes
    /// version vMAJOR.MINOR.PATCH[-pre], read from each node's kubelet.
    #[schemars(length(min = 1))]
    pub target: String,
    /// Where a node reports its version (`--version-from`): `kubelet` (its kubeletVersion),
    /// `os-image` (its osImage), or `label=KEY` (its label KEY, set by the host after a boot).
    #[serde(default = "kubelet", skip_serializing_if = "is_kubelet")]
    pub version_from: String,
    /// Only nodes this selector matches; with `nodes` too, a node must match both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Only these nodes; empty: every node the selector matches (every node when both are
    /// unset).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// How many of the nodes may be unavailable at once: a count, or a percentage (`25%`) of
    /// the selected nodes, rounded down but at least 1. 0 is refused: set `paused` to stop.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub max_unavailable: IntOrString,
    /// The drain's bound per node, a duration as `kubectl` takes one (`90s`, `10m`, `1h30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout: Option<String>,
    /// Evict Pods with emptyDir volumes (their data is lost).
    #[serde(default, skip_serializing_if = "is_false")]
    pub delete_empty_dir_data: bool,
    /// Evict Pods no controller manages (they are not recreated).
    #[serde(default, skip_serializing_if = "is_false")]
    pub force: bool,
    /// What a node comes to whose drain budgets allowing no disruption hold past
    /// `drainTimeout`.
    #[serde(default, skip_serializing_if = "OnUndrainable::is_default")]
    pub on_undrainable: OnUndrainable,
    /// How many blocked nodes (skipped or quarantined) the roll goes on past (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_blocked: Option<i32>,
    /// The host upgrade Job's deadline (default `30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// How long a node has to reboot and come back Ready at the target (default `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot_timeout: Option<String>,
    /// When nodes may start: `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 Europe/Berlin`.
    /// A node in flight finishes; the controller waits for the next opening without holding
    /// the Lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Stop starting nodes after this many failed (default 1; at most `maxUnavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failure_budget: Option<i32>,
    /// What a node that fails after its host upgrade was launched comes to.
    #[serde(default, skip_serializing_if = "OnFailure::is_default")]
    pub on_failure: OnFailure,
    /// How long each upgraded node must stay Ready on the same boot before the roll goes on,
    /// a duration; unset: no soak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<String>,
    /// The health check's argv (exit 0 passes), run on each upgraded node before it is
    /// uncordoned; every `{version}` becomes the target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_check: Vec<String>,
    /// Move nodes to a version older than the one they run.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_downgrade: bool,
    /// Go past the Kubernetes version skew policy.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_skew: bool,
    /// No node starts while true; a node in flight finishes its step.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
}

/// What a node comes to whose drain is blocked past its timeout (`--on-undrainable`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnUndrainable {
    /// The node fails (it stays cordoned): the default.
    #[default]
    Fail,
    /// The node is uncordoned, why recorded on it, and tried once more at the end.
    Skip,
    /// The node stays cordoned, labelled quarantined, until a person removes the label.
    Quarantine,
}

impl OnUndrainable {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// What a node that fails after its host upgrade was launched comes to (`--on-failure`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// It stays as it is, cordoned, its Job left for inspection: the default.
    #[default]
    Stop,
    /// The host's rollback runs on it, once, to the version it ran before.
    Rollback,
}

impl OnFailure {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Where a `NodeUpgrade` stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeUpgradeStatus {
    /// The `metadata.generation` this status was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled` (kstatus), `Validated`, `LeaseHeld`, `Paused`,
    /// `WaitingForWindow`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The nodes by where they stand.
    #[serde(default)]
    pub counts: UpgradeCounts,
    /// Nodes with a step under way (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<InFlight>,
    /// Nodes that failed, with their step, reason and Job (at most 20; `counts.failed` says
    /// how many).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedNode>,
    /// Nodes whose drains were blocked, with the budgets (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<Blocked>,
    /// Who holds the Lease of the cluster's rolls, when another does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_holder: Option<String>,
    /// Who paused it, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Paused>,
    /// When the window next opens, while it is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<Time>,
    /// When the roll started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When it completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
}

/// A `NodeUpgrade`'s nodes by where they stand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeCounts {
    /// The nodes the spec selects.
    pub nodes: i32,
    /// At the target and back in service.
    pub up_to_date: i32,
    /// With a step under way.
    pub in_progress: i32,
    /// Upgraded, soaking.
    pub soaking: i32,
    /// Failed.
    pub failed: i32,
    /// Blocked by their drains (skipped or quarantined).
    pub blocked: i32,
    /// Rolled back after a failure.
    pub rolled_back: i32,
}

fn kubelet() -> String {
    "kubelet".into()
}

fn is_kubelet(s: &str) -> bool {
    s == "kubelet"
}

fn one() -> IntOrString {
    IntOrString::Int(1)
}

fn is_one(v: &IntOrString) -> bool {
    *v == IntOrString::Int(1)
}

fn is_false(b: &bool) -> bool {
    !*b
}
