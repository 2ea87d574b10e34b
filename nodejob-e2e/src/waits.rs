//! Waiting on the cluster, by watch and bounded: an object until a condition holds of it, a
//! Deployment until available, a node's host until it rebooted by itself, a Lease until
//! released.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use nodejob_conformance::Failure;
use nodejob_roll::{LeaseEnd, LeaseHistory};

use crate::admin::{annotate_node, unique};
use crate::conventions::{NOT_READY_TAINT, REBOOT_ANNOTATION, SA_NAMESPACE};
use crate::host::boot_id;

/// Watches object `name` of `api` until `want` holds of it, at most `limit`; `what` says what
/// is awaited, for the failure.
pub async fn wait_for<K>(
    api: Api<K>,
    name: &str,
    what: &str,
    limit: Duration,
    want: impl Fn(&K) -> bool + Send + 'static,
) -> Result<K, Failure>
where
    K: Clone + std::fmt::Debug + Send + serde::de::DeserializeOwned + kube::Resource + 'static,
{
    let waiting = await_condition(api, name, move |k: Option<&K>| k.is_some_and(&want));
    match tokio::time::timeout(limit, waiting).await {
        Ok(Ok(Some(k))) => Ok(k),
        Ok(Ok(None)) => Err(Failure(format!("{name}: gone while waiting for {what}"))),
        Ok(Err(e)) => Err(Failure(format!("watching {name} for {what}: {e}"))),
        Err(_) => Err(Failure(format!("{name}: {what} not seen after {limit:?}"))),
    }
}

/// Waits (at most `limit`) until Deployment `namespace/name` has all its `replicas` updated,
/// Ready and available; `when` says at which point of the scenario, for the failure.
pub async fn deployment_available(
    admin: &Client,
    namespace: &str,
    name: &str,
    replicas: i32,
    limit: Duration,
    when: &str,
) -> Result<Deployment, Failure> {
    let api = Api::<Deployment>::namespaced(admin.clone(), namespace);
    let what = format!("{replicas} replicas available {when}");
    wait_for(api, name, &what, limit, move |d: &Deployment| {
        let Some(s) = &d.status else { return false };
        s.observed_generation >= d.metadata.generation
            && s.updated_replicas == Some(replicas)
            && s.ready_replicas == Some(replicas)
            && s.available_replicas == Some(replicas)
            && s.unavailable_replicas.unwrap_or(0) == 0
    })
    .await
}

/// Node `node`'s host reboots by itself ([`REBOOT_ANNOTATION`], a fresh value); returns once the
/// node reports a new `bootID`, Ready and without the not-ready taint (at most `limit`, the
/// reboot's time included), with the Node as then read.
pub async fn reboot_by_itself(
    admin: &Client,
    node: &str,
    limit: Duration,
) -> Result<Node, Failure> {
    let nodes = Api::<Node>::all(admin.clone());
    let before = nodes
        .get(node)
        .await
        .map_err(|e| Failure(format!("reading node {node}: {e}")))?;
    let old = boot_id(&before).to_string();
    annotate_node(admin, node, REBOOT_ANNOTATION, Some(&unique("reboot"))).await?;
    wait_for(nodes, node, "a new boot, Ready", limit, move |n: &Node| {
        let tainted = (n.spec.as_ref().and_then(|s| s.taints.as_ref()))
            .is_some_and(|t| t.iter().any(|t| t.key == NOT_READY_TAINT));
        boot_id(n) != old && nodejob_core::ready(n) && !tainted
    })
    .await
}

/// Checks a driver's account of its Lease, `history` (its report's: released at the end), and
/// that Lease `name` in [`SA_NAMESPACE`] is held by no one now; returns the Lease.
pub async fn lease_released(
    admin: &Client,
    name: &str,
    history: &Option<LeaseHistory>,
) -> Result<Lease, Failure> {
    nodejob_conformance::ensure!(
        history
            .as_ref()
            .is_some_and(|h| h.ended == LeaseEnd::Released),
        "the Lease must be acquired and released: {history:?}"
    );
    let lease = Api::<Lease>::namespaced(admin.clone(), SA_NAMESPACE)
        .get(name)
        .await
        .map_err(|e| Failure(format!("reading lease {name}: {e}")))?;
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
    nodejob_conformance::ensure!(holder.is_none(), "lease {name} still held by {holder:?}");
    Ok(lease)
}
