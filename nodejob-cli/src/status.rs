//! `nodejob status`: who holds the Lease the drivers share (the operation, its target, the
//! epoch, the last renewal), and each node's state from the drivers' records on it: version,
//! cordoned, the upgrade's record, the CA phase the rotation last read.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use nodejob_core::lease::{OPERATION_ANNOTATION, TARGET_ANNOTATION, holder};
use nodejob_core::{LeaseApi, NodeApi};
use serde_json::json;
use upgrade_driver::records::{self, DONE, IN_PROGRESS};

use crate::args::{Global, Status};
use crate::commands::{connect, real_runtime, simulated_runtime};
use crate::output::{Format, table};
use crate::sim;
use crate::{Exit, code};

/// The Lease both drivers share (their plans' default `lease_name`).
const LEASE: &str = "nodejob";

/// Runs `nodejob status`.
pub(crate) fn status(global: &Global, args: Status) -> Result<Exit, Exit> {
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

/// The Lease as `status` tells it.
fn lease_json(lease: &Lease, now: k8s_openapi::jiff::Timestamp) -> serde_json::Value {
    let annotation = |k: &str| {
        (lease.metadata.annotations.as_ref())
            .and_then(|a| a.get(k))
            .cloned()
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let held = holder(lease);
    json!({
        "holder": held.as_ref().map(|h| h.identity.clone()),
        "expired": held.as_ref().and_then(|h| h.expires).map(|t| t < now),
        "operation": annotation(OPERATION_ANNOTATION),
        "target": annotation(TARGET_ANNOTATION),
        "epoch": spec.lease_transitions.unwrap_or(0),
        "renewed": spec.renew_time.map(|t| t.0.to_string()),
        "expires": held.and_then(|h| h.expires).map(|t| t.to_string()),
    })
}

/// One line: `held by X for rotate-ca sha256:…, epoch 2, renewed T, expires T`, or `free
/// (last: upgrade v1.38.0, epoch 1, released T)`.
fn lease_line(lease: Option<&Lease>, now: k8s_openapi::jiff::Timestamp) -> String {
    let Some(lease) = lease else {
        return "free (never taken)".into();
    };
    let v = lease_json(lease, now);
    let text = |k: &str| v[k].as_str().unwrap_or("").to_string();
    let what = match (text("operation"), text("target")) {
        (op, _) if op.is_empty() => "an unnamed operation".to_string(),
        (op, target) => format!("{op} {target}").trim_end().to_string(),
    };
    let epoch = v["epoch"].as_i64().unwrap_or(0);
    match v["holder"].as_str() {
        Some(identity) => format!(
            "held by {identity} for {what}, epoch {epoch}, renewed {}, {} {}",
            text("renewed"),
            if v["expired"] == json!(true) {
                "expired at"
            } else {
                "expires"
            },
            text("expires")
        ),
        None => format!(
            "free (last: {what}, epoch {epoch}, released {})",
            text("renewed")
        ),
    }
}

/// The node's CA phase as the rotation last read it: `(phase, json)`.
fn ca_of(node: &Node) -> (String, serde_json::Value) {
    let name = records::name(node);
    match certs_driver::last_reported(node, name) {
        Ok(Some((status, at))) => (
            status.phase.to_string(),
            json!({
                "phase": status.phase,
                "trusted": status.trusted,
                "issuer": status.issuer,
                "at": at,
            }),
        ),
        Ok(None) => ("-".into(), serde_json::Value::Null),
        Err(why) => ("unreadable".into(), json!({ "unreadable": why })),
    }
}

fn upgrade_of(node: &Node) -> String {
    match (
        records::read::<records::InProgress>(node, IN_PROGRESS)
            .ok()
            .flatten(),
        records::read::<records::Done>(node, DONE).ok().flatten(),
    ) {
        (Some(p), _) => format!(
            "upgrading to {} (epoch {}{})",
            p.target,
            p.epoch,
            if p.cordoned { ", cordoned by us" } else { "" }
        ),
        (None, Some(d)) => format!("upgraded to {} at {}", d.version, d.at),
        (None, None) => "-".into(),
    }
}

async fn show<A: NodeApi + LeaseApi + ?Sized>(api: &A, global: &Global) -> Result<Exit, Exit> {
    let ns = &global.namespace;
    let lease = match api.get_lease(ns, LEASE).await {
        Ok(lease) => Some(lease),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            return Err(Exit::failed(format!("reading lease {ns}/{LEASE}: {e}")));
        }
    };
    let now = api.wall_time();
    let nodes = api
        .list_nodes("")
        .await
        .map_err(|e| Exit::failed(format!("listing nodes: {e}")))?;
    if global.output == Format::Json {
        let rows: Vec<serde_json::Value> = nodes
            .iter()
            .map(|n| {
                let annotation = |k: &str| {
                    (n.metadata.annotations.as_ref())
                        .and_then(|a| a.get(k))
                        .cloned()
                };
                json!({
                    "node": records::name(n),
                    "version": records::version(n, &upgrade_driver::VersionSource::KubeletVersion),
                    "ready": nodejob_core::ready(n),
                    "cordoned": records::unschedulable(n),
                    "in_progress": annotation(IN_PROGRESS),
                    "done": annotation(DONE),
                    "ca": ca_of(n).1,
                })
            })
            .collect();
        let lease = lease.as_ref().map(|l| {
            let mut v = lease_json(l, now);
            v["name"] = json!(format!("{ns}/{LEASE}"));
            v
        });
        outln!("{}", json!({"lease": lease, "nodes": rows}));
        return Ok(Exit::with(code::OK, ""));
    }
    outln!("lease {ns}/{LEASE}: {}", lease_line(lease.as_ref(), now));
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
    for n in &nodes {
        rows.push([
            records::name(n).to_string(),
            records::version(n, &upgrade_driver::VersionSource::KubeletVersion)
                .unwrap_or("?")
                .to_string(),
            yes(nodejob_core::ready(n)),
            yes(records::unschedulable(n)),
            ca_of(n).0,
            upgrade_of(n),
        ]);
    }
    out!("{}", table(&rows));
    Ok(Exit::with(code::OK, ""))
}
