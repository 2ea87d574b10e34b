//! `CARotation`: a cluster CA rotation, declared. Its spec is the plan `nodejob rotate-ca`
//! takes as flags.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::status::{FailedNode, InFlight, Paused};

/// The nodes a CA rotation takes to a new CA: every node trusts it (stage), gets leaves it
/// signed (issue), then trusts it alone (finalize), with a gate between phases.
// Clippy takes the columns' repeated `type_ = ...` for one attribute given twice.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nodejob.stratum.ciq.com",
    version = "v1alpha1",
    kind = "CARotation",
    plural = "carotations",
    shortname = "car",
    category = "nodejob",
    status = "CARotationStatus",
    doc = "A cluster CA rotation: every selected node staged to trust the new CA, issued leaves it signed, then finalized to trust it alone, a gate between phases",
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    ),
    printcolumn(
        name = "Fingerprint",
        type_ = "string",
        json_path = ".status.shortFingerprint"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Staged",
        type_ = "integer",
        json_path = ".status.counts.staged"
    ),
    printcolumn(
        name = "Issued",
        type_ = "integer",
        json_path = ".status.counts.issued"
    ),
    printcolumn(
        name = "Finalized",
        type_ = "integer",
        json_path = ".status.counts.finalized"
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
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CARotationSpec {
    /// The new CA's certificate, and nothing secret: a private key anywhere in it is refused.
    pub ca: CaSource,
    /// Only nodes this selector matches; with `nodes` too, a node must match both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Only these nodes; empty: every node the selector matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Whether `issue` and `finalize` need every node of the cluster in the plan.
    #[serde(default, skip_serializing_if = "TrustDomain::is_default")]
    pub trust_domain: TrustDomain,
    /// How many workers run a phase at once (control-plane nodes: always one at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub concurrency: Option<i32>,
    /// Each host Job's deadline, a duration (`90s`, `10m`, `1h30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// After `issue`, how long the node may take to begin restarting its components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_grace: Option<String>,
    /// After `issue`, how long the node has to be Ready again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_timeout: Option<String>,
    /// When a batch may start: `DAYS START-END [TZ]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// How many failed nodes stop a phase (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub failure_budget: Option<i32>,
    /// No step starts while true; a node in flight finishes its step.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Take the nodes back to the old CA alone; refused once `issue` began on any node (the
    /// status's `Stalled` condition names them).
    #[serde(default, skip_serializing_if = "is_false")]
    pub abort: bool,
}

/// Where the new CA's certificate is: exactly one of the three.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.pem), has(self.configMapRef), has(self.secretRef)].filter(x, x).size() == 1",
    "message": "exactly one of pem, configMapRef and secretRef"
}]))]
pub struct CaSource {
    /// The certificate, PEM: one CERTIFICATE block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pem: Option<String>,
    /// A key of a ConfigMap holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<KeyRef>,
    /// A key of a Secret holding it (the certificate only: a key there is refused too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<KeyRef>,
}

/// A key of a namespaced object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRef {
    /// The object's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The key (default `ca.crt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Which nodes a rotation's `issue` and `finalize` need in the plan (`--cluster-wide`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TrustDomain {
    /// Every node of the cluster: a CA is cluster-wide, and a node left out would stop
    /// trusting leaves the others present. The default.
    #[default]
    Cluster,
    /// The selected nodes alone, for clusters whose other nodes do not use this CA.
    Selected,
}

impl TrustDomain {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Where a rotation stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RotationPhase {
    /// Not started.
    #[default]
    Pending,
    /// Nodes being taught to trust the new CA.
    Staging,
    /// Nodes being given leaves the new CA signed.
    Issuing,
    /// Nodes being left trusting the new CA alone.
    Finalizing,
    /// Every node trusts the new CA alone.
    Completed,
    /// Nodes being taken back to the old CA.
    Aborting,
    /// Every node back on the old CA alone.
    Aborted,
    /// Stopped on a failure or a gate; a change to the spec goes on.
    Failed,
}

/// Where a `CARotation` stands.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CARotationStatus {
    /// The `metadata.generation` this status was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The phase.
    #[serde(default)]
    pub phase: RotationPhase,
    /// The conditions, as a `NodeUpgrade`'s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The new CA's fingerprint, `sha256:` and 64 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Its first 12 hex digits, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_fingerprint: Option<String>,
    /// The new CA's notAfter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Time>,
    /// The nodes by phase passed.
    #[serde(default)]
    pub counts: PhaseCounts,
    /// Each gate passed or not, with the nodes that disagree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateVerdict>,
    /// Nodes with a step under way (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_flight: Vec<InFlight>,
    /// Nodes that failed (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedNode>,
    /// Who holds the Lease of the cluster's rolls, when another does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_holder: Option<String>,
    /// Who paused it, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Paused>,
    /// When the window next opens, while it is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<Time>,
    /// When the rotation started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When it completed (or was aborted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
}

/// A rotation's nodes by the phases they passed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhaseCounts {
    /// The nodes the spec selects.
    pub nodes: i32,
    /// Trusting the new CA.
    pub staged: i32,
    /// With leaves the new CA signed.
    pub issued: i32,
    /// Trusting the new CA alone.
    pub finalized: i32,
    /// Failed.
    pub failed: i32,
}

/// One gate, as it was checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateVerdict {
    /// `start`, `before issue`, `before finalize`, `after finalize`, `after abort`.
    pub gate: String,
    /// Whether every node agreed.
    pub passed: bool,
    /// The nodes that disagree, with what (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disagreeing: Vec<Disagreeing>,
}

/// A node that disagrees at a gate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disagreeing {
    /// The node.
    pub node: String,
    /// What it reports that it should not.
    pub what: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}
