//! `LeaseApi`: create, get, replace under the resourceVersion precondition, as the apiserver
//! serves `coordination.k8s.io/v1` Leases; recorded and faulted like every verb.

mod common;

use common::{NS, TestResult, rv};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::{ApiError, ErrorKind, LeaseApi};
use nodejob_fake::{FakeCluster, Times, Verb};

fn lease(namespace: &str, name: &str, holder: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: Some(30),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref()?.holder_identity.as_deref()
}

#[tokio::test(start_paused = true)]
async fn create_get_and_their_refusals() -> TestResult {
    let cluster = FakeCluster::new();
    let created = cluster.create_lease(&lease(NS, "nodejob", "a")).await?;
    assert_eq!(created.metadata.uid.as_ref().map(String::len), Some(36));
    assert_eq!(
        created
            .metadata
            .creation_timestamp
            .as_ref()
            .unwrap()
            .0
            .to_string(),
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(cluster.get_lease(NS, "nodejob").await?, created);

    let table: [(Lease, (ErrorKind, u16, &str)); 4] = [
        (
            lease(NS, "nodejob", "b"),
            (
                ErrorKind::AlreadyExists,
                409,
                r#"leases.coordination.k8s.io "nodejob" already exists"#,
            ),
        ),
        (
            lease("upgrade", "nodejob", "b"),
            (
                ErrorKind::NotFound,
                404,
                r#"namespaces "upgrade" not found"#,
            ),
        ),
        (
            Lease {
                spec: Some(LeaseSpec {
                    lease_duration_seconds: Some(0),
                    ..LeaseSpec::default()
                }),
                ..lease(NS, "Bad_Name", "b")
            },
            (
                ErrorKind::Invalid,
                422,
                r#"Lease.coordination.k8s.io "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#,
            ),
        ),
        (
            Lease {
                metadata: ObjectMeta {
                    resource_version: Some("5".into()),
                    ..lease(NS, "other", "b").metadata
                },
                ..lease(NS, "other", "b")
            },
            (
                ErrorKind::Transient,
                500,
                "resourceVersion should not be set on objects to be created",
            ),
        ),
    ];
    for (lease, (kind, code, message)) in table {
        let err = cluster.create_lease(&lease).await.unwrap_err();
        assert_eq!((err.kind, err.code), (kind, code), "{err}");
        assert!(err.message.starts_with(message), "{err}");
    }
    let err = cluster.get_lease(NS, "missing").await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (
            ErrorKind::NotFound,
            r#"leases.coordination.k8s.io "missing" not found"#
        )
    );
    assert!(cluster.lease(NS, "other").is_none());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn replace_checks_the_resource_version() -> TestResult {
    let cluster = FakeCluster::new();
    let created = cluster.create_lease(&lease(NS, "nodejob", "a")).await?;

    // Another contender wins the race with the same read.
    let mut theirs = created.clone();
    theirs.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let replaced = cluster.replace_lease(&theirs).await?;
    assert_eq!(rv(&replaced.metadata), rv(&created.metadata) + 1);
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    assert_eq!(
        replaced.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );

    let mut ours = created.clone();
    ours.spec.as_mut().unwrap().holder_identity = Some("c".into());
    let before = cluster.resource_version();
    let err = cluster.replace_lease(&ours).await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::Conflict, 409));
    assert_eq!(
        err.message,
        r#"Operation cannot be fulfilled on leases.coordination.k8s.io "nodejob": the object has been modified; please apply your changes to the latest version and try again"#
    );
    assert_eq!(cluster.resource_version(), before);
    assert_eq!(holder(&cluster.get_lease(NS, "nodejob").await?), Some("b"));

    // Leases allow no unconditional update.
    ours.metadata.resource_version = None;
    let err = cluster.replace_lease(&ours).await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::Invalid, 422));
    assert_eq!(
        err.message,
        r#"leases.coordination.k8s.io "nodejob" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#
    );

    // Unchanged: no write.
    let same = cluster.replace_lease(&replaced).await?;
    assert_eq!(same, replaced);
    assert_eq!(cluster.resource_version(), before);

    // A UID of another object is refused.
    let mut other = replaced.clone();
    other.metadata.uid = Some("someone-else".into());
    let err = cluster.replace_lease(&other).await.unwrap_err();
    assert!(
        err.message
            .contains(r#"metadata.uid: Invalid value: "someone-else": field is immutable"#),
        "{err}"
    );

    // A Lease that is gone is created by the PUT (the Lease strategy allows create on update).
    let fresh = cluster.replace_lease(&lease(NS, "another", "d")).await?;
    assert_eq!(holder(&fresh), Some("d"));
    assert_eq!(fresh.metadata.generation, Some(1));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn lease_verbs_are_recorded_and_faulted() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.fail(
        Verb::CreateLease,
        ApiError::transient(503, "unavailable"),
        Times::Once,
    );
    assert!(
        cluster
            .create_lease(&lease(NS, "l", "a"))
            .await
            .unwrap_err()
            .is_retryable()
    );
    let created = cluster.create_lease(&lease(NS, "l", "a")).await?;
    cluster.fail(Verb::GetLease, ApiError::gone("expired"), Times::Once);
    assert!(cluster.get_lease(NS, "l").await.unwrap_err().is_gone());
    cluster.replace_lease(&created).await?;
    let calls = cluster.calls();
    let verbs: Vec<Verb> = calls.iter().map(|c| c.verb).collect();
    let want = [
        Verb::CreateLease,
        Verb::CreateLease,
        Verb::GetLease,
        Verb::ReplaceLease,
    ];
    assert_eq!(verbs, want);
    assert_eq!(calls[0].error, Some(ErrorKind::Transient));
    assert_eq!(calls[2].error, Some(ErrorKind::Gone));
    assert_eq!(
        (calls[3].namespace.as_str(), calls[3].name.as_str()),
        (NS, "l")
    );
    assert_eq!(
        calls[3].preconditions.as_ref().unwrap().resource_version,
        created.metadata.resource_version
    );
    Ok(())
}
