//! What the driver writes on a Node, and reads back after a crash: its whole state lives in
//! these annotations and in what the node itself reports (`bootID`, version, Ready).
//!
//! | annotation | written | says |
//! |---|---|---|
//! | [`IN_PROGRESS`] | with the cordon, in one write; again right before the host Job is created, under the node's resourceVersion, with the `bootID` read then | we started this node: toward which target, from which version, at which `bootID`, under which Lease epoch, whether *we* cordoned it, and the boot the host Job starts on with the Pods its drains evicted |
//! | [`HOST_JOB`] | once the host Job's result is read, before the Job is deleted | the host Job's UID and exit code: a succeeded host step is never run again; a failed one is retried by replacing exactly that Job |
//! | [`DONE`] | with the uncordon, in one write that also removes the two above | the node is at the target, since when |
//! | [`BLOCKED`] | when budgets allowing no disruption held its drain past the timeout and the plan skips or quarantines such a node, in one write that removes [`IN_PROGRESS`] (and uncordons it, if we cordoned it and skip it) | toward which target, skipped or quarantined, the budgets that blocked and the Pods left, when, and whether we had cordoned it |
//! | [`ROLLBACK`] | when the plan rolls back on failure: with our record right before the host Job (the version and boot to go back to); with why once a rollback is decided (and the node cordoned again, ours in flight again); with the boot read right before the rollback Job, then its result; with when, once the node came back at that version | what a rollback goes back to, and where it stands |
//! | [`SOAK`] | with the uncordon when the plan soaks, in the write that removes [`IN_PROGRESS`] and [`HOST_JOB`]; removed with the done record once the soak passed | the node soaks toward which target, since when, on which boot; a failed soak's why |
//!
//! and one label: [`QUARANTINED`], set with the [`BLOCKED`] record of a quarantined node; while
//! it is there, no run touches the node.
//!
//! Values are one-line JSON objects, so `kubectl get node -o yaml` reads them and a reader
//! refuses a value it does not understand instead of guessing.

use crate::version::{same_version, version};
use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};

use crate::plan::{Plan, Undrainable};

/// We started this node (see the module docs).
pub const IN_PROGRESS: &str = "stratum.ciq.com/upgrade-in-progress";
/// Taint, `NoSchedule`, no value: the fence that goes with [`IN_PROGRESS`]. Added in the write
/// that marks the node ours (with the cordon), removed in the write that removes the record
/// (with the uncordon, if ours), so that between the drain and the node's return no workload
/// Pod is scheduled there, whoever uncordons it. The host Jobs tolerate every taint.
pub const FENCE_TAINT: &str = "stratum.ciq.com/upgrade";
/// The host Job's result.
pub const HOST_JOB: &str = "stratum.ciq.com/upgrade-host-job";
/// The node is at a target.
pub const DONE: &str = "stratum.ciq.com/upgrade-done";

/// A drain held past its timeout by budgets allowing no disruption ([`Blocked`]).
pub const BLOCKED: &str = "stratum.ciq.com/upgrade-blocked";
/// Label: the node is quarantined: an upgrade whose drain budgets blocked left it cordoned.
/// No run touches it while the label is there; remove it (and uncordon the node, or let the
/// next run do it) to have it rolled.
pub const QUARANTINED: &str = "stratum.ciq.com/upgrade-quarantined";
/// The value of [`QUARANTINED`]: why.
pub const QUARANTINED_VALUE: &str = "drain-blocked";

/// [`BLOCKED`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Blocked {
    /// The target the roll was going to.
    pub target: String,
    /// What the roll did with the node: `skip` (uncordoned if we cordoned it; tried again
    /// once at the end, and by a rerun) or `quarantine` (left cordoned, labelled).
    pub policy: Undrainable,
    /// The PodDisruptionBudgets that refused the evictions, `namespace/name`.
    pub budgets: Vec<String>,
    /// The Pods left on the node, `namespace/name`.
    pub pods: Vec<String>,
    /// When (RFC 3339).
    pub at: String,
    /// Whether we had cordoned it: a quarantined node we cordoned is uncordoned by the run
    /// that rolls it once the label is gone.
    pub cordoned: bool,
}

/// Whether `node` carries the [`QUARANTINED`] label.
pub fn quarantined(node: &Node) -> bool {
    label(node, QUARANTINED).is_some()
}

/// What a rollback goes back to, and where it stands ([`Rollback`]).
pub const ROLLBACK: &str = "stratum.ciq.com/upgrade-rollback";

/// [`ROLLBACK`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// The target the upgrade went to (what is rolled back from).
    pub from: String,
    /// The version the node reported right before its host upgrade: what it goes back to.
    pub to: String,
    /// Its boot then.
    #[serde(rename = "bootID")]
    pub boot_id: String,
    /// Why it is rolled back, once decided; `None`: recorded in case, not decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The step that failed (`Upgrade`, `Reboot`, `Health`, `Soak`), once decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The boot read right before the rollback Job was created (written before it is): the
    /// boot the rollback's reboot ends.
    #[serde(
        rename = "rollbackBootID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub rollback_boot_id: Option<String>,
    /// The rollback Job's UID, once its result is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Its exit code (`None` with a `uid`: it failed without one).
    #[serde(rename = "exitCode", default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// When it came back at [`Rollback::to`] (RFC 3339): rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<String>,
}

/// A node upgraded and back in service, soaking ([`Soak`]).
pub const SOAK: &str = "stratum.ciq.com/upgrade-soak";

/// [`SOAK`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Soak {
    /// The target it was upgraded to.
    pub target: String,
    /// When its soak started (RFC 3339): a resumed run waits out the rest from there.
    pub since: String,
    /// Its boot when the soak started: another means it rebooted, and the soak failed.
    #[serde(rename = "bootID")]
    pub boot_id: String,
    /// Why its soak failed, once it did: a rerun then soaks it again from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// [`InProgress::from`], kept while it soaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// [`InProgress::evicted`], kept while it soaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evicted: Option<u32>,
}

/// [`IN_PROGRESS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InProgress {
    /// The target version.
    pub target: String,
    /// The node's `bootID` when we started.
    #[serde(rename = "bootID")]
    pub boot_id: String,
    /// The node's `bootID` read right before the host Job was created, written (under the
    /// node's resourceVersion) before it is: the boot the upgrade's reboot ends. A reboot
    /// before it (a node that rebooted by itself during the drain) says nothing about the
    /// upgrade. Absent until the host Job is about to be created.
    #[serde(
        rename = "hostBootID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub host_boot_id: Option<String>,
    /// The Lease epoch under which we started.
    pub epoch: i32,
    /// Whether we cordoned it (so only then do we uncordon it).
    pub cordoned: bool,
    /// The version it reported when we started: a resumed run's report says where it came
    /// from, though it reports the target by then. Absent in records written before it was
    /// kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The Pods its drains evicted toward this target, in every run (written with
    /// `hostBootID`): a resumed run's report counts them, though it drains no more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evicted: Option<u32>,
}

/// [`HOST_JOB`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostJob {
    /// The target the Job upgraded to.
    pub target: String,
    /// The Job's UID.
    pub uid: String,
    /// The container's exit code; `null` for a Job that failed without one (its Pod deleted
    /// or disrupted, its deadline passed): a rerun retries it as any failed one.
    #[serde(rename = "exitCode")]
    pub exit_code: Option<i32>,
}

/// [`DONE`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Done {
    /// The version reached.
    pub version: String,
    /// When (RFC 3339).
    pub at: String,
}

/// Reads the annotation `key` of `node` as `T`: `Ok(None)` when absent, `Err` (with the value)
/// when it does not parse.
pub fn read<T: for<'de> Deserialize<'de>>(node: &Node, key: &str) -> Result<Option<T>, String> {
    let Some(value) = node.metadata.annotations.as_ref().and_then(|a| a.get(key)) else {
        return Ok(None);
    };
    serde_json::from_str(value)
        .map(Some)
        .map_err(|e| format!("annotation {key}={value:?} does not parse: {e}"))
}

/// `T` as an annotation value.
pub fn value<T: Serialize>(record: &T) -> String {
    serde_json::to_string(record).unwrap_or_default()
}

/// The node's `bootID` (empty when it reports none).
pub fn boot_id(node: &Node) -> &str {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.as_str())
        .unwrap_or_default()
}

/// Whether the node is cordoned.
pub fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// The field manager that wrote `node` last, by its `managedFields` (the entry with the latest
/// time), if the apiserver recorded any: who most likely uncordoned it.
pub fn last_manager(node: &Node) -> Option<&str> {
    node.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| f.manager.is_some())
        .max_by_key(|f| f.time.as_ref().map(|t| t.0))
        .and_then(|f| f.manager.as_deref())
}

/// Whether an upgrade run started `node` and has not finished it (our [`IN_PROGRESS`] record
/// is on it, or it soaks: [`SOAK`]), whatever the selection says now.
pub fn in_flight(node: &Node) -> bool {
    (node.metadata.annotations.as_ref())
        .is_some_and(|a| a.contains_key(IN_PROGRESS) || a.contains_key(SOAK))
}

/// Where an earlier run that left a node in flight toward a target (or soaking) started it,
/// as it recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EarlierStart {
    /// The version the node reported then.
    pub from: Option<String>,
    /// The Pods its drains evicted.
    pub evicted: u32,
}

/// [`EarlierStart`] of `node` toward `target`: `None` when no run left it in flight toward it.
pub(crate) fn earlier_start(node: &Node, target: &str) -> Option<EarlierStart> {
    if let Ok(Some(p)) = read::<InProgress>(node, IN_PROGRESS) {
        return same_version(&p.target, target).then(|| EarlierStart {
            from: p.from,
            evicted: p.evicted.unwrap_or(0),
        });
    }
    let soak = read::<Soak>(node, SOAK).ok().flatten()?;
    same_version(&soak.target, target).then(|| EarlierStart {
        from: soak.from,
        evicted: soak.evicted.unwrap_or(0),
    })
}

/// The node's name.
pub fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// The node's resourceVersion.
pub fn rv(node: &Node) -> String {
    node.metadata.resource_version.clone().unwrap_or_default()
}

/// The label that marks a control-plane node.
pub const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
/// The label of a node's zone.
pub const ZONE: &str = "topology.kubernetes.io/zone";

/// The node's label `key`.
pub fn label<'n>(node: &'n Node, key: &str) -> Option<&'n str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Whether `node` needs nothing: at the target (or recorded done), and not ours in flight.
pub(crate) fn at_target(plan: &Plan, node: &Node) -> Option<String> {
    if in_flight(node) {
        return None;
    }
    let target = plan.target();
    if let Some(v) = version(node, &plan.spec().version_source)
        && same_version(v, target)
    {
        return Some(format!("reports {v} already"));
    }
    read::<Done>(node, DONE)
        .ok()
        .flatten()
        .filter(|d| same_version(&d.version, target))
        .map(|_| format!("recorded done at {target}"))
}

/// Whether we cordoned `node` (our in-progress record says so and it is cordoned).
pub(crate) fn cordoned_by_us(node: &Node) -> bool {
    unschedulable(node)
        && read::<InProgress>(node, IN_PROGRESS)
            .ok()
            .flatten()
            .is_some_and(|p| p.cordoned)
}
