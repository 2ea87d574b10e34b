//! Whether a real node still serves, as a CA rotation must leave it: [`talker`], a Pod on the
//! node whose log is read, and [`serves`]: the node Ready, its kubelet's Lease renewed since a
//! time (the kubelet verified the apiserver, which took its client certificate), and the Pod's
//! log read through the apiserver, as `kubectl logs` reads it (apiserver to kubelet, which
//! takes the apiserver's client certificate against its own trust).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, LogParams, PostParams};
use nodejob_conformance::{Failure, ensure};

use crate::admin::fail;
use crate::real_node::job_image;
use crate::waits::wait_for;

/// A kubelet renews its Lease every 10 s (its default `nodeLeaseDurationSeconds` 40, renewed
/// at a quarter of it): a renewal is due within this, with room for a slow machine.
pub const RENEW_LIMIT: Duration = Duration::from_secs(30);
/// How long a log read may keep failing after a kubelet restart before it is a failure. A
/// kubelet the apiserver refused for a while (a CA rotation out of order, until the control
/// plane trusts its new CA) serves a Pod's log only once its Pod source lists again, and a
/// reflector refused backs off up to 30 s, jittered up to twice that (client-go's
/// `tools/cache/reflector.go`: `defaultBackoffInit` 800 ms, `defaultBackoffMax` 30 s,
/// `defaultBackoffJitter` 1.0):
/// until then the kubelet knows no Pod and the apiserver relays its 404 ("the server could not
/// find the requested resource"). Seen in CI: its Node informer still unsynced 30 s after the
/// last refusal, with the 20 s this was.
pub const LOG_LIMIT: Duration = Duration::from_secs(75);
/// The line a [`talker`] prints.
pub const LINE: &str = "nodejob-e2e: still talking";

/// A Pod on `node` that prints [`LINE`] and stays: what a log read reads.
pub async fn talker(admin: &Client, namespace: &str, node: &str) -> Result<String, Failure> {
    let name = format!("talker-{node}");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "talker",
                "image": job_image(),
                "command": ["sh", "-c", format!("echo '{LINE}'; while :; do sleep 1; done")],
            }],
        },
    }))
    .map_err(|e| Failure(e.to_string()))?;
    let pods = Api::<Pod>::namespaced(admin.clone(), namespace);
    pods.create(&PostParams::default(), &pod)
        .await
        .map_err(fail("creating a talker pod"))?;
    wait_for(
        pods,
        &name,
        "running",
        Duration::from_secs(90),
        |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"),
    )
    .await?;
    Ok(name)
}

/// Whether `node` still serves after `since`: its Node `Ready`; its kubelet's Lease renewed
/// after `since` (within [`RENEW_LIMIT`]): the kubelet verified the apiserver and the
/// apiserver took its client certificate since; and `pod`'s log, read through the apiserver,
/// says [`LINE`] (within [`LOG_LIMIT`]): the apiserver reached the kubelet, which took the
/// apiserver's client certificate.
pub async fn serves(
    admin: &Client,
    namespace: &str,
    node: &str,
    pod: &str,
    since: Timestamp,
) -> Result<(), Failure> {
    let leases = Api::<Lease>::namespaced(admin.clone(), "kube-node-lease");
    let what = format!("node {node}'s Lease renewed after {since}");
    wait_for(leases, node, &what, RENEW_LIMIT, move |l: &Lease| {
        (l.spec.as_ref().and_then(|s| s.renew_time.as_ref())).is_some_and(|t| t.0 > since)
    })
    .await?;
    let read = Api::<Node>::all(admin.clone())
        .get(node)
        .await
        .map_err(fail("reading a node"))?;
    ensure!(nodejob_core::ready(&read), "node {node} is not Ready");
    let pods = Api::<Pod>::namespaced(admin.clone(), namespace);
    let deadline = tokio::time::Instant::now() + LOG_LIMIT;
    let mut every = tokio::time::interval(Duration::from_millis(500));
    loop {
        every.tick().await;
        let log = pods.logs(pod, &LogParams::default()).await;
        match log {
            Ok(text) if text.contains(LINE) => return Ok(()),
            other if tokio::time::Instant::now() > deadline => {
                return Err(Failure(format!(
                    "node {node}: the log of pod {pod} through the apiserver: {other:?}"
                )));
            }
            _ => {}
        }
    }
}
