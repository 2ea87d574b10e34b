//! What `status` reads: who holds the Lease the drivers share (the operation, its target, the
//! epoch, the last renewal), and each node's state from the drivers' records on it: version,
//! cordoned, the upgrade's record, the CA phase the rotation last read.
//!
//! [`gather`] reads it into a [`Status`]; `crate::present::status` shows it to people, and `-o
//! json` is the [`Status`] itself. The command `status` and the MCP tool `status` use both.

use std::collections::BTreeSet;

use certs_driver::{CaPhase, Fingerprint};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::jiff::Timestamp;
use nodejob_core::lease::{OPERATION_ANNOTATION, TARGET_ANNOTATION, holder};
use nodejob_core::{LeaseApi, NodeApi};
use nodejob_fake::FakeCluster;
use nodejob_roll::condition;
use serde::Serialize;
use upgrade_driver::records::{self, DONE, HOST_JOB, IN_PROGRESS};

use super::ReadError;
use crate::exit::Exit;
use crate::sim;

/// The Lease both drivers share: their plans' default `lease_name`.
pub(crate) fn lease_name() -> String {
    upgrade_driver::PlanSpec::new(String::new()).lease_name
}

/// What `status` shows.
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    /// `namespace/name` of the Lease, also when it was never taken.
    #[serde(skip)]
    pub(crate) lease_name: String,
    /// The Lease; `None` when it was never taken.
    pub(crate) lease: Option<LeaseState>,
    /// Every node, in the API's order.
    pub(crate) nodes: Vec<NodeState>,
    /// The declarative rolls (`NodeUpgrade`s), when their CRD is installed and readable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) node_upgrades: Vec<RollState>,
    /// The declared CA rotations (`CARotation`s), when their CRD is installed and readable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) ca_rotations: Vec<RotationState>,
    /// The simulated cluster's counters, when the caller adds them (the MCP tool does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) simulated: Option<Simulated>,
}

/// A `NodeUpgrade` as `status` tells it: what `kubectl get nu` shows.
#[derive(Debug, Serialize)]
pub(crate) struct RollState {
    /// Its name.
    pub(crate) name: String,
    /// Its target.
    pub(crate) target: String,
    /// Its `Ready` condition's status and reason (`<none>` before the controller wrote one).
    pub(crate) ready: String,
    /// The reason.
    pub(crate) reason: String,
    /// The condition's message.
    pub(crate) message: String,
    /// The counts.
    pub(crate) nodes: i32,
    /// Nodes up to date.
    pub(crate) up_to_date: i32,
    /// Nodes failed.
    pub(crate) failed: i32,
}

impl RollState {
    fn of(roll: &nodejob_crd::NodeUpgrade) -> Self {
        let status = roll.status.clone().unwrap_or_default();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        RollState {
            name: roll.metadata.name.clone().unwrap_or_default(),
            target: roll.spec.target.clone(),
            ready: ready.map_or("<none>".into(), |c| c.status.clone()),
            reason: ready.map_or("<none>".into(), |c| c.reason.clone()),
            message: ready.map_or(String::new(), |c| c.message.clone()),
            nodes: status.counts.nodes,
            up_to_date: status.counts.up_to_date,
            failed: status.counts.failed,
        }
    }
}

/// A `CARotation` as `status` tells it: what `kubectl get car` shows.
#[derive(Debug, Serialize)]
pub(crate) struct RotationState {
    /// Its name.
    pub(crate) name: String,
    /// The new CA's fingerprint, short (`<none>` before the controller wrote one).
    pub(crate) fingerprint: String,
    /// Its phase.
    pub(crate) phase: String,
    /// Its `Ready` condition's status.
    pub(crate) ready: String,
    /// The reason.
    pub(crate) reason: String,
    /// The condition's message.
    pub(crate) message: String,
    /// Nodes trusting the new CA.
    pub(crate) staged: i32,
    /// Nodes with leaves the new CA signed.
    pub(crate) issued: i32,
    /// Nodes trusting the new CA alone.
    pub(crate) finalized: i32,
    /// Nodes failed.
    pub(crate) failed: i32,
}

impl RotationState {
    fn of(roll: &nodejob_crd::CARotation) -> Self {
        let status = roll.status.clone().unwrap_or_default();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        RotationState {
            name: roll.metadata.name.clone().unwrap_or_default(),
            fingerprint: (status.short_fingerprint.clone()).unwrap_or_else(|| "<none>".into()),
            phase: format!("{:?}", status.phase),
            ready: ready.map_or("<none>".into(), |c| c.status.clone()),
            reason: ready.map_or("<none>".into(), |c| c.reason.clone()),
            message: ready.map_or(String::new(), |c| c.message.clone()),
            staged: status.counts.staged,
            issued: status.counts.issued,
            finalized: status.counts.finalized,
            failed: status.counts.failed,
        }
    }
}

impl NodeState {
    /// Whether the node is in a clean final state: every driver condition on it `False`
    /// (the driver let it go: upgraded, rotated, restored), none under way, failed or
    /// stopped.
    pub(crate) fn clean(&self) -> bool {
        self.conditions.iter().all(|c| c.status == "False")
    }
}

impl Status {
    /// Only the nodes `names` (in the order named); refused naming the nodes the cluster
    /// does not have.
    pub(crate) fn only(mut self, names: &[String]) -> Result<Status, NoSuchNodes> {
        let missing: Vec<String> = (names.iter())
            .filter(|name| !self.nodes.iter().any(|n| &n.node == *name))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(NoSuchNodes { nodes: missing });
        }
        let mut nodes = std::mem::take(&mut self.nodes);
        self.nodes = (names.iter())
            .filter_map(|name| {
                let at = nodes.iter().position(|n| &n.node == name)?;
                Some(nodes.remove(at))
            })
            .collect();
        Ok(self)
    }
}

/// Nodes named to [`Status::only`] that the cluster does not have: bad input (exit 2).
#[derive(Debug, thiserror::Error)]
#[error(
    "no such node in the cluster: {} (`kubectl get nodes` lists them)",
    nodes.join(", ")
)]
pub(crate) struct NoSuchNodes {
    /// The nodes missing, in the order named.
    pub(crate) nodes: Vec<String>,
}

/// Nodes named that the cluster does not have: bad usage (exit 2), as a typo in any flag.
impl From<NoSuchNodes> for Exit {
    fn from(e: NoSuchNodes) -> Self {
        Exit::usage(e.to_string())
    }
}

/// The Lease as `status` tells it.
#[derive(Debug, Serialize)]
pub(crate) struct LeaseState {
    /// `namespace/name`.
    pub(crate) name: String,
    /// Its holder's identity, while held.
    pub(crate) holder: Option<String>,
    /// Whether the holder's term ran out (it has not released it, nor renewed it in time).
    pub(crate) expired: Option<bool>,
    /// The operation it was last taken for (`upgrade`, `rotate-ca`).
    pub(crate) operation: Option<String>,
    /// That operation's target (a version, a CA fingerprint).
    pub(crate) target: Option<String>,
    /// Its `leaseTransitions`.
    pub(crate) epoch: i32,
    /// Its last `renewTime` (on release: when it was released).
    pub(crate) renewed: Option<String>,
    /// When the holder's term ends.
    pub(crate) expires: Option<String>,
    /// The pause switch (`nodejob pause`), when it is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) paused: Option<PauseState>,
}

/// The pause switch as `status` tells it.
#[derive(Debug, Serialize)]
pub(crate) struct PauseState {
    /// Who paused.
    pub(crate) by: String,
    /// When.
    pub(crate) at: Option<String>,
    /// Why, when said.
    pub(crate) reason: Option<String>,
    /// All of it in words: `paused by X at T: reason`.
    pub(crate) said: String,
}

impl PauseState {
    pub(crate) fn of(p: &nodejob_core::pause::Pause) -> Self {
        PauseState {
            by: p.by.clone(),
            at: p.at.map(|t| t.to_string()),
            reason: (!p.reason.is_empty()).then(|| p.reason.clone()),
            said: p.to_string(),
        }
    }
}

/// One node as `status` tells it.
#[derive(Debug, Serialize)]
pub(crate) struct NodeState {
    pub(crate) node: String,
    /// The kubelet's version.
    pub(crate) version: Option<String>,
    pub(crate) ready: bool,
    pub(crate) cordoned: bool,
    /// Where the upgrade stands on it, from its records and the Lease.
    pub(crate) upgrade_state: Option<UpgradeState>,
    /// The upgrade's in-progress record, as an object (`{"unreadable": ...}` when it does not
    /// parse).
    pub(crate) in_progress: Option<serde_json::Value>,
    /// The upgrade's host Job record (its UID and exit code), as an object.
    pub(crate) host_job: Option<serde_json::Value>,
    /// The upgrade's done record, as an object.
    pub(crate) done: Option<serde_json::Value>,
    /// The CA phase the rotation last read; `None` when it never reported.
    pub(crate) ca: Option<Ca>,
    /// The drivers' own conditions on it (`NodejobUpgrade`, `NodejobCARotation`), as the
    /// Node's status carries them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) conditions: Vec<NodeCondition>,
    /// The upgrade's records, read (an unreadable one as absent).
    #[serde(skip)]
    pub(crate) upgrade: Option<UpgradeRecord>,
    /// The upgrade's blocked record (its drain held by budgets: skipped or quarantined), as
    /// an object; left out when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blocked: Option<serde_json::Value>,
    /// Whether it carries the upgrade's quarantine label; left out when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) quarantined: bool,
    /// The blocked record, read (an unreadable one as absent).
    #[serde(skip)]
    pub(crate) blocked_record: Option<records::Blocked>,
    /// The upgrade's rollback record (what a rollback goes back to, where it stands), as an
    /// object; left out when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rollback: Option<serde_json::Value>,
    /// The rollback record, read (an unreadable one as absent).
    #[serde(skip)]
    pub(crate) rollback_record: Option<records::Rollback>,
    /// Its roles, from its `node-role.kubernetes.io/ROLE` labels and its `kubernetes.io/role`
    /// label, as kubectl finds them (`status -o wide`; the labels are in `kubectl get node`).
    #[serde(skip)]
    pub(crate) role_labels: BTreeSet<String>,
    /// Its `topology.kubernetes.io/zone` label (`status -o wide`).
    #[serde(skip)]
    pub(crate) zone: Option<String>,
}

/// Where the upgrade stands on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum UpgradeState {
    /// An upgrade holds the Lease and this node is in flight.
    Upgrading,
    /// Its host upgrade Job failed (the host Job record says so); a rerun retries it.
    Failed,
    /// Started, and no upgrade holds the Lease now: stopped or failed at a step other than
    /// the host Job's; a rerun resumes it.
    Interrupted,
    /// Its last upgrade finished.
    Upgraded,
}

/// A node's trust as the rotation last read it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Ca {
    /// What `carotate status` reported, and when.
    Reported {
        phase: CaPhase,
        trusted: BTreeSet<Fingerprint>,
        issuer: Fingerprint,
        at: String,
    },
    /// The record is not the driver's.
    Unreadable { unreadable: String },
}

/// A node's upgrade record.
#[derive(Debug)]
pub(crate) enum UpgradeRecord {
    /// An upgrade of ours is under way on it.
    InProgress(records::InProgress),
    /// The last upgrade of ours finished.
    Done(records::Done),
}

/// The simulated cluster's counters: its API calls so far (every tool call's), how many were
/// writes (creates, deletes, patches, evictions (a preview's dry-run ones included), Events,
/// the Lease), and the store's resourceVersion, which any write moves.
#[derive(Debug, Serialize)]
pub(crate) struct Simulated {
    pub(crate) nodes: usize,
    pub(crate) api_calls: usize,
    pub(crate) writes: usize,
    pub(crate) resource_version: String,
}

impl Simulated {
    /// The counters of `fake`, a cluster of `nodes` nodes.
    pub(crate) fn of(fake: &FakeCluster, nodes: usize) -> Self {
        Simulated {
            nodes,
            api_calls: fake.calls().len(),
            writes: sim::writes_since(fake, 0).len(),
            resource_version: fake.resource_version(),
        }
    }
}

/// The declared rolls of kind `K` (`kinds`, plural, names it in a failure): none when the
/// kind is not installed (404) or not this user's to read (403), a cluster without declarative
/// rolls as far as `status` can say.
async fn rolls<K, A>(api: &A, kinds: &'static str) -> Result<Vec<K>, ReadError>
where
    K: nodejob_crd::Roll,
    A: nodejob_core::CustomApi + ?Sized,
{
    use nodejob_crd::RollApi;
    match super::read(api, || api.list_rolls_at::<K>()).await {
        Ok(at) => Ok(at.rolls),
        Err(e) if e.is_not_found() || e.is_forbidden() => Ok(Vec::new()),
        Err(cause) => Err(ReadError::ListingRolls { kinds, cause }),
    }
}

/// Reads the Lease of `namespace` and every node.
pub(crate) async fn gather<A>(api: &A, namespace: &str) -> Result<Status, ReadError>
where
    A: NodeApi + LeaseApi + nodejob_core::CustomApi + ?Sized,
{
    let node_upgrades = (rolls::<nodejob_crd::NodeUpgrade, _>(api, "NodeUpgrades")
        .await?
        .iter())
    .map(RollState::of)
    .collect();
    let ca_rotations = (rolls::<nodejob_crd::CARotation, _>(api, "CARotations")
        .await?
        .iter())
    .map(RotationState::of)
    .collect();
    let name = lease_name();
    let lease = match super::read(api, || api.get_lease(namespace, &name)).await {
        Ok(lease) => Some(lease),
        Err(e) if e.is_not_found() => None,
        Err(cause) => {
            return Err(ReadError::ReadingLease {
                namespace: namespace.into(),
                name,
                cause,
            });
        }
    };
    let now = api.wall_time();
    let nodes = (super::read(api, || api.list_nodes("")).await)
        .map_err(|cause| ReadError::ListingNodes { cause })?;
    let lease_name = format!("{namespace}/{name}");
    let running = upgrade_running(lease.as_ref(), now);
    Ok(Status {
        lease: lease.map(|l| LeaseState::of(&l, lease_name.clone(), now)),
        lease_name,
        nodes: nodes.iter().map(|n| NodeState::of(n, running)).collect(),
        node_upgrades,
        ca_rotations,
        simulated: None,
    })
}

impl LeaseState {
    fn of(lease: &Lease, name: String, now: Timestamp) -> Self {
        let annotation = |k: &str| {
            (lease.metadata.annotations.as_ref())
                .and_then(|a| a.get(k))
                .cloned()
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let held = holder(lease);
        let expires = held.as_ref().and_then(|h| h.expires);
        LeaseState {
            name,
            holder: held.map(|h| h.identity),
            expired: expires.map(|t| t < now),
            operation: annotation(OPERATION_ANNOTATION),
            target: annotation(TARGET_ANNOTATION),
            epoch: spec.lease_transitions.unwrap_or(0),
            renewed: spec.renew_time.map(|t| t.0.to_string()),
            expires: expires.map(|t| t.to_string()),
            paused: nodejob_core::pause::paused(lease)
                .as_ref()
                .map(PauseState::of),
        }
    }
}

/// Whether an upgrade holds the Lease now (held, not expired, for the operation `upgrade`).
fn upgrade_running(lease: Option<&Lease>, now: Timestamp) -> bool {
    let Some(lease) = lease else {
        return false;
    };
    let operation = (lease.metadata.annotations.as_ref())
        .and_then(|a| a.get(OPERATION_ANNOTATION))
        .map(String::as_str);
    let held = holder(lease).is_some_and(|h| h.expires.is_none_or(|t| t >= now));
    held && operation == Some("upgrade")
}

/// `value` with each object's keys in snake_case, as nodejob prints its own (`bootID` as
/// `boot_id`, `hostBootID` as `host_boot_id`, `exitCode` as `exit_code`).
fn snake_keys(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (snake_case(&k), snake_keys(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(snake_keys).collect()),
        other => other,
    }
}

/// `camelCase` (`hostBootID`) as `snake_case` (`host_boot_id`): a word starts at a capital
/// after a small letter or a digit; a run of capitals is one word.
fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    let mut previous: Option<char> = None;
    for c in key.chars() {
        if c.is_ascii_uppercase()
            && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit())
        {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
        previous = Some(c);
    }
    out
}

impl NodeState {
    /// Its roles as `kubectl get nodes` shows them: comma-separated in order, `<none>` when
    /// it has none.
    pub(crate) fn roles(&self) -> String {
        match self.role_labels.is_empty() {
            true => "<none>".into(),
            false => (self.role_labels.iter().cloned())
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    fn of(node: &Node, upgrade_running: bool) -> Self {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        // kubectl's `findNodeRoles`: a `node-role.kubernetes.io/ROLE` label's ROLE, and a
        // `kubernetes.io/role` label's value.
        let role_labels: BTreeSet<String> = (labels.iter())
            .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
                Some(role) if !role.is_empty() => Some(role.to_string()),
                _ if k == "kubernetes.io/role" && !v.is_empty() => Some(v.clone()),
                _ => None,
            })
            .collect();
        let zone = labels.get("topology.kubernetes.io/zone").cloned();
        // A record as an object, its keys in nodejob's style (`bootID` as `boot_id`), as
        // every key `status` prints but the Node's own conditions, quoted as the API has them.
        let annotation = |k: &str| {
            (node.metadata.annotations.as_ref())
                .and_then(|a| a.get(k))
                .map(|v| {
                    serde_json::from_str::<serde_json::Value>(v)
                        .map(snake_keys)
                        .unwrap_or_else(|_| serde_json::json!({"unreadable": v}))
                })
        };
        let name = records::name(node);
        let ca = match certs_driver::last_reported(node, name) {
            Ok(Some((status, at))) => Some(Ca::Reported {
                phase: status.phase,
                trusted: status.trusted,
                issuer: status.issuer,
                at,
            }),
            Ok(None) => None,
            Err(unreadable) => Some(Ca::Unreadable { unreadable }),
        };
        let upgrade = match (
            records::read(node, IN_PROGRESS).ok().flatten(),
            records::read(node, DONE).ok().flatten(),
        ) {
            (Some(p), _) => Some(UpgradeRecord::InProgress(p)),
            (None, Some(d)) => Some(UpgradeRecord::Done(d)),
            (None, None) => None,
        };
        let host_job = records::read::<records::HostJob>(node, HOST_JOB)
            .ok()
            .flatten();
        let upgrade_state = upgrade.as_ref().map(|u| match u {
            UpgradeRecord::Done(_) => UpgradeState::Upgraded,
            UpgradeRecord::InProgress(_) if upgrade_running => UpgradeState::Upgrading,
            UpgradeRecord::InProgress(p) => match &host_job {
                Some(h) if h.target == p.target && h.exit_code != Some(0) => UpgradeState::Failed,
                _ => UpgradeState::Interrupted,
            },
        });
        NodeState {
            node: name.to_string(),
            version: upgrade_driver::version::version(
                node,
                &upgrade_driver::VersionSource::KubeletVersion,
            )
            .map(str::to_string),
            ready: nodejob_core::ready(node),
            cordoned: records::unschedulable(node),
            upgrade_state,
            in_progress: annotation(IN_PROGRESS),
            host_job: annotation(HOST_JOB),
            done: annotation(DONE),
            ca,
            conditions: [condition::UPGRADE, condition::CA_ROTATION]
                .into_iter()
                .filter_map(|t| condition::condition(node, t).cloned())
                .collect(),
            upgrade,
            blocked: annotation(records::BLOCKED),
            quarantined: records::quarantined(node),
            blocked_record: records::read(node, records::BLOCKED).ok().flatten(),
            rollback: annotation(records::ROLLBACK),
            rollback_record: records::read(node, records::ROLLBACK).ok().flatten(),
            role_labels,
            zone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_keys_are_said_in_snake_case() {
        for (camel, snake) in [
            ("bootID", "boot_id"),
            ("hostBootID", "host_boot_id"),
            ("rollbackBootID", "rollback_boot_id"),
            ("exitCode", "exit_code"),
            ("target", "target"),
            ("k8s1Thing", "k8s1_thing"),
        ] {
            assert_eq!(snake_case(camel), snake);
        }
        let value = serde_json::json!({"bootID": "b", "inner": [{"exitCode": 1}]});
        assert_eq!(
            snake_keys(value),
            serde_json::json!({"boot_id": "b", "inner": [{"exit_code": 1}]})
        );
    }

    /// A read answered "come back in a second" (a CRD's storage initializing right after the
    /// CRD is created answers 429 with `Retry-After: 1`) is sent again once that has passed,
    /// as kubectl's would be, up to ten times; then the answer is the failure.
    #[tokio::test(start_paused = true)]
    async fn a_read_told_to_come_back_is_sent_again_after_the_retry_after() -> anyhow::Result<()> {
        use std::time::Duration;

        use nodejob_core::{ApiError, Clock};
        use nodejob_fake::{Times, Verb};
        let fake = crate::sim::cluster(1, &[])?;
        let initializing = || {
            ApiError::transient(429, "storage is (re)initializing")
                .with_retry_after(Duration::from_secs(1))
        };
        fake.fail(Verb::ListCustomAt, initializing(), Times::N(3));
        let t0 = fake.now();
        let status = gather(&*fake, "kube-system").await?;
        assert_eq!(status.nodes.len(), 1);
        assert_eq!(fake.now() - t0, Duration::from_secs(3));

        fake.fail(Verb::ListNodes, initializing(), Times::N(11));
        let t0 = fake.now();
        let got = gather(&*fake, "kube-system").await.err();
        assert_eq!(
            got.map(|e| e.to_string()).as_deref(),
            Some("listing nodes: storage is (re)initializing (429 TooManyRequests)")
        );
        assert_eq!(fake.now() - t0, Duration::from_secs(10));
        Ok(())
    }

    /// A read that fails names what it read; the API's answer follows.
    #[tokio::test(start_paused = true)]
    async fn a_read_that_fails_names_what_it_read() -> anyhow::Result<()> {
        use nodejob_core::ApiError;
        use nodejob_fake::{Times, Verb};
        let fake = crate::sim::cluster(1, &[])?;
        let cases = [
            (
                Verb::ListCustomAt,
                "listing NodeUpgrades: down (500 InternalError)",
            ),
            (
                Verb::GetLease,
                "reading lease kube-system/nodejob: down (500 InternalError)",
            ),
            (Verb::ListNodes, "listing nodes: down (500 InternalError)"),
        ];
        for (verb, want) in cases {
            fake.fail(verb, ApiError::transient(500, "down"), Times::Once);
            let got = gather(&*fake, "kube-system").await.err();
            assert_eq!(
                got.map(|e| e.to_string()).as_deref(),
                Some(want),
                "{verb:?}"
            );
        }
        let status = gather(&*fake, "kube-system").await?;
        let missing = status.only(&["nope".into(), "worker-a-0".into(), "gone".into()]);
        assert_eq!(
            missing.err().map(|e| e.to_string()).as_deref(),
            Some("no such node in the cluster: nope, gone (`kubectl get nodes` lists them)")
        );
        Ok(())
    }
}
