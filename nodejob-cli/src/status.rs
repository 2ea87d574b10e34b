//! `nodejob status`: who holds the Lease the drivers share (the operation, its target, the
//! epoch, the last renewal), and each node's state from the drivers' records on it: version,
//! cordoned, the upgrade's record, the CA phase the rotation last read.
//!
//! [`gather`] reads it into a [`Status`]; [`text`] shows it to people, and `-o json` is the
//! [`Status`] itself. The MCP tool `status` answers with the same two.

use std::collections::BTreeSet;

use certs_driver::{CaPhase, Fingerprint};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::lease::{OPERATION_ANNOTATION, TARGET_ANNOTATION, holder};
use nodejob_core::{LeaseApi, NodeApi};
use nodejob_fake::FakeCluster;
use serde::Serialize;
use upgrade_driver::records::{self, DONE, IN_PROGRESS};

use crate::args::{Global, Status as StatusArgs};
use crate::commands::{connect, real_runtime, simulated_runtime};
use crate::output::{Format, table};
use crate::sim;
use crate::{Exit, code};

/// The Lease both drivers share: their plans' default `lease_name`.
pub(crate) fn lease_name() -> String {
    upgrade_driver::PlanSpec::new(String::new()).lease_name
}

/// What `status` shows.
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    /// `namespace/name` of the Lease, also when it was never taken.
    #[serde(skip)]
    lease_name: String,
    /// The Lease; `None` when it was never taken.
    lease: Option<LeaseState>,
    /// Every node, in the API's order.
    nodes: Vec<NodeState>,
    /// The simulated cluster's counters, when the caller adds them (the MCP tool does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) simulated: Option<Simulated>,
}

/// The Lease as `status` tells it.
#[derive(Debug, Serialize)]
struct LeaseState {
    /// `namespace/name`.
    name: String,
    /// Its holder's identity, while held.
    holder: Option<String>,
    /// Whether the holder's term ran out (it has not released it, nor renewed it in time).
    expired: Option<bool>,
    /// The operation it was last taken for (`upgrade`, `rotate-ca`).
    operation: Option<String>,
    /// That operation's target (a version, a CA fingerprint).
    target: Option<String>,
    /// Its `leaseTransitions`.
    epoch: i32,
    /// Its last `renewTime` (on release: when it was released).
    renewed: Option<String>,
    /// When the holder's term ends.
    expires: Option<String>,
}

/// One node as `status` tells it.
#[derive(Debug, Serialize)]
struct NodeState {
    node: String,
    /// The kubelet's version.
    version: Option<String>,
    ready: bool,
    cordoned: bool,
    /// The upgrade's in-progress record, as the annotation holds it.
    in_progress: Option<String>,
    /// The upgrade's done record, as the annotation holds it.
    done: Option<String>,
    /// The CA phase the rotation last read; `None` when it never reported.
    ca: Option<Ca>,
    /// The upgrade's records, read (an unreadable one as absent).
    #[serde(skip)]
    upgrade: Option<UpgradeRecord>,
}

/// A node's trust as the rotation last read it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Ca {
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
enum UpgradeRecord {
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
    nodes: usize,
    api_calls: usize,
    writes: usize,
    resource_version: String,
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

/// Runs `nodejob status`.
pub(crate) fn status(global: &Global, args: StatusArgs) -> Result<Exit, Exit> {
    match args.sim.simulate {
        Some(n) => simulated_runtime()?.block_on(async {
            let n = usize::from(n);
            let fake = sim::cluster(n, &sim::history_faults(&sim::node_names(n)))?;
            sim::history(&fake, n, &global.namespace).await?;
            show(&*fake, global).await
        }),
        None => real_runtime()?.block_on(async {
            let api = connect(global).await?;
            show(&api, global).await
        }),
    }
}

async fn show<A: NodeApi + LeaseApi + ?Sized>(api: &A, global: &Global) -> Result<Exit, Exit> {
    let status = gather(api, &global.namespace).await.map_err(Exit::failed)?;
    match global.output {
        // Through a `Value`: its keys sorted, as `status -o json` has always printed them.
        Format::Json => outln!("{}", serde_json::to_value(&status).unwrap_or_default()),
        Format::Text => out!("{}", text(&status)),
    }
    Ok(Exit::with(code::OK, ""))
}

/// Reads the Lease of `namespace` and every node.
pub(crate) async fn gather<A>(api: &A, namespace: &str) -> Result<Status, String>
where
    A: NodeApi + LeaseApi + ?Sized,
{
    let name = lease_name();
    let lease = match api.get_lease(namespace, &name).await {
        Ok(lease) => Some(lease),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(format!("reading lease {namespace}/{name}: {e}")),
    };
    let now = api.wall_time();
    let nodes = api
        .list_nodes("")
        .await
        .map_err(|e| format!("listing nodes: {e}"))?;
    let lease_name = format!("{namespace}/{name}");
    Ok(Status {
        lease: lease.map(|l| LeaseState::of(&l, lease_name.clone(), now)),
        lease_name,
        nodes: nodes.iter().map(NodeState::of).collect(),
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
        }
    }
}

impl NodeState {
    fn of(node: &Node) -> Self {
        let annotation = |k: &str| {
            (node.metadata.annotations.as_ref())
                .and_then(|a| a.get(k))
                .cloned()
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
        NodeState {
            node: name.to_string(),
            version: records::version(node, &upgrade_driver::VersionSource::KubeletVersion)
                .map(str::to_string),
            ready: nodejob_core::ready(node),
            cordoned: records::unschedulable(node),
            in_progress: annotation(IN_PROGRESS),
            done: annotation(DONE),
            ca,
            upgrade,
        }
    }
}

/// `status` for people: the Lease's line, a table of the nodes, then the simulated cluster's
/// counters when there are some.
pub(crate) fn text(status: &Status) -> String {
    let mut out = format!(
        "lease {}: {}\n",
        status.lease_name,
        lease_line(status.lease.as_ref())
    );
    let mut rows = vec![
        [
            "NODE",
            "VERSION",
            "READY",
            "CORDONED",
            "CA (LAST READ)",
            "UPGRADE",
        ]
        .map(String::from),
    ];
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    for n in &status.nodes {
        rows.push([
            n.node.clone(),
            n.version.clone().unwrap_or_else(|| "?".into()),
            yes(n.ready),
            yes(n.cordoned),
            match &n.ca {
                Some(Ca::Reported { phase, .. }) => phase.to_string(),
                Some(Ca::Unreadable { .. }) => "unreadable".into(),
                None => "-".into(),
            },
            match &n.upgrade {
                Some(UpgradeRecord::InProgress(p)) => format!(
                    "upgrading to {} (epoch {}{})",
                    p.target,
                    p.epoch,
                    if p.cordoned { ", cordoned by us" } else { "" }
                ),
                Some(UpgradeRecord::Done(d)) => format!("upgraded to {} at {}", d.version, d.at),
                None => "-".into(),
            },
        ]);
    }
    out.push_str(&table(&rows));
    if let Some(sim) = &status.simulated {
        out.push_str(&format!(
            "simulated cluster: {} API calls so far, {} of them writes; resourceVersion {:?}\n",
            sim.api_calls, sim.writes, sim.resource_version
        ));
    }
    out
}

/// One line: `held by X for rotate-ca sha256:…, epoch 2, renewed T, expires T`, or `free
/// (last: upgrade v1.38.0, epoch 1, released T)`.
fn lease_line(lease: Option<&LeaseState>) -> String {
    let Some(lease) = lease else {
        return "free (never taken)".into();
    };
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let what = match (text(&lease.operation), text(&lease.target)) {
        (op, _) if op.is_empty() => "an unnamed operation".to_string(),
        (op, target) => format!("{op} {target}").trim_end().to_string(),
    };
    let epoch = lease.epoch;
    match &lease.holder {
        Some(identity) => format!(
            "held by {identity} for {what}, epoch {epoch}, renewed {}, {} {}",
            text(&lease.renewed),
            if lease.expired == Some(true) {
                "expired at"
            } else {
                "expires"
            },
            text(&lease.expires)
        ),
        None => format!(
            "free (last: {what}, epoch {epoch}, released {})",
            text(&lease.renewed)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, expired: Option<bool>, operation: Option<&str>) -> LeaseState {
        LeaseState {
            name: "kube-system/nodejob".into(),
            holder: holder.map(str::to_string),
            expired,
            operation: operation.map(str::to_string),
            target: operation.map(|_| "v1.38.0".to_string()),
            epoch: 2,
            renewed: Some("T1".into()),
            expires: expired.map(|_| "T2".to_string()),
        }
    }

    #[test]
    fn the_lease_line_says_who_holds_it_for_what_or_what_it_was_last_taken_for() {
        let table = [
            (None, "free (never taken)"),
            (
                Some(lease(Some("me"), Some(false), Some("upgrade"))),
                "held by me for upgrade v1.38.0, epoch 2, renewed T1, expires T2",
            ),
            (
                Some(lease(Some("me"), Some(true), None)),
                "held by me for an unnamed operation, epoch 2, renewed T1, expired at T2",
            ),
            (
                Some(lease(None, None, Some("upgrade"))),
                "free (last: upgrade v1.38.0, epoch 2, released T1)",
            ),
        ];
        for (lease, want) in table {
            assert_eq!(lease_line(lease.as_ref()), want);
        }
    }

    #[test]
    fn an_unreadable_ca_record_shows_as_such_in_json_and_text() -> serde_json::Result<()> {
        let status = Status {
            lease_name: "kube-system/nodejob".into(),
            lease: None,
            nodes: vec![NodeState {
                node: "cp-0".into(),
                version: None,
                ready: true,
                cordoned: false,
                in_progress: None,
                done: None,
                ca: Some(Ca::Unreadable {
                    unreadable: "not the driver's record".into(),
                }),
                upgrade: None,
            }],
            simulated: None,
        };
        assert_eq!(
            serde_json::to_value(&status)?,
            serde_json::json!({
                "lease": null,
                "nodes": [{
                    "node": "cp-0",
                    "version": null,
                    "ready": true,
                    "cordoned": false,
                    "in_progress": null,
                    "done": null,
                    "ca": {"unreadable": "not the driver's record"},
                }],
            })
        );
        assert_eq!(
            text(&status),
            "lease kube-system/nodejob: free (never taken)\n\
             NODE  VERSION  READY  CORDONED  CA (LAST READ)  UPGRADE\n\
             cp-0  ?        yes    no        unreadable      -\n"
        );
        Ok(())
    }
}
