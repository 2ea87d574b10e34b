//! `LeaseApi` on the wire: create, replace under the resourceVersion precondition, get.

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use nodejob_core::{ErrorKind, LeaseApi};
use serde_json::{Value, json};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodejob";

/// The Lease as the caller writes it: with `rv` as its precondition when it has one.
fn lease_json(rv: Option<&str>, holder: &str, transitions: i32) -> Value {
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": { "name": "nodejob", "namespace": NS },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 60,
            "leaseTransitions": transitions
        }
    });
    if let Some(rv) = rv {
        lease["metadata"]["resourceVersion"] = json!(rv);
    }
    lease
}

/// The Lease as the apiserver stores it.
fn stored(rv: &str, holder: &str, transitions: i32) -> Value {
    let mut lease = lease_json(Some(rv), holder, transitions);
    lease["metadata"]["uid"] = json!("3f1c9a70-7d0e-4c2b-9a51-1f0e6b2c4d88");
    lease["metadata"]["creationTimestamp"] = json!("2025-06-01T10:00:00Z");
    lease
}

fn lease(value: Value) -> Result<Lease, serde_json::Error> {
    serde_json::from_value(value)
}

#[tokio::test]
async fn a_lease_is_created_once_then_the_name_is_taken() -> TestResult {
    let (api, server) = serve(vec![
        post(LEASES, lease_json(None, "upgrade-driver/host-1", 0))
            .reply_json(201, &stored("500", "upgrade-driver/host-1", 0)),
        post(LEASES, lease_json(None, "certs-driver/host-2", 0)).reply_json(
            409,
            &status(
                409,
                "AlreadyExists",
                "leases.coordination.k8s.io \"nodejob\" already exists",
            ),
        ),
    ]);
    let created = api
        .create_lease(&lease(lease_json(None, "upgrade-driver/host-1", 0))?)
        .await?;
    assert_eq!(created.metadata.resource_version.as_deref(), Some("500"));
    let err = api
        .create_lease(&lease(lease_json(None, "certs-driver/host-2", 0))?)
        .await
        .expect_err("taken");
    assert!(err.is_already_exists(), "{err}");
    assert!(
        !err.is_conflict(),
        "AlreadyExists is not a failed precondition"
    );
    drop(api);
    assert_eq!(
        server.finish().await,
        [format!("POST {LEASES}"), format!("POST {LEASES}")]
    );
    Ok(())
}

#[tokio::test]
async fn a_replace_puts_the_whole_lease_with_its_resource_version_and_a_stale_one_conflicts()
-> TestResult {
    let stale = "Operation cannot be fulfilled on leases.coordination.k8s.io \"nodejob\": the \
                 object has been modified; please apply your changes to the latest version and \
                 try again";
    let (api, server) = serve(vec![
        put(LEASE, lease_json(Some("500"), "upgrade-driver/host-1", 0))
            .reply_json(200, &stored("501", "upgrade-driver/host-1", 0)),
        // The Lease as answered, sent back; another holder renewed it at 502 meanwhile: our 501
        // is stale.
        put(LEASE, stored("501", "upgrade-driver/host-1", 0))
            .reply_json(409, &status(409, "Conflict", stale)),
    ]);
    let renewed = api
        .replace_lease(&lease(lease_json(Some("500"), "upgrade-driver/host-1", 0))?)
        .await?;
    assert_eq!(renewed.metadata.resource_version.as_deref(), Some("501"));
    let err = api
        .replace_lease(&renewed)
        .await
        .expect_err("stale resourceVersion");
    assert_eq!(
        (err.kind, err.code, err.message.as_str()),
        (ErrorKind::Conflict, 409, stale)
    );
    drop(api);
    assert_eq!(
        server.finish().await,
        [format!("PUT {LEASE}"), format!("PUT {LEASE}")]
    );
    Ok(())
}

#[tokio::test]
async fn a_lease_is_read_by_name_and_an_absent_one_is_not_found() -> TestResult {
    let (api, server) = serve(vec![
        get(LEASE).reply_json(
            404,
            &status(
                404,
                "NotFound",
                "leases.coordination.k8s.io \"nodejob\" not found",
            ),
        ),
        get(LEASE).reply_json(200, &stored("501", "upgrade-driver/host-1", 3)),
    ]);
    let err = api.get_lease(NS, "nodejob").await.expect_err("none yet");
    assert!(err.is_not_found(), "{err}");
    let held = api.get_lease(NS, "nodejob").await?;
    let spec = held.spec.unwrap_or_default();
    assert_eq!(
        (spec.holder_identity.as_deref(), spec.lease_transitions),
        (Some("upgrade-driver/host-1"), Some(3))
    );
    drop(api);
    assert_eq!(
        server.finish().await,
        [format!("GET {LEASE}"), format!("GET {LEASE}")]
    );
    Ok(())
}
