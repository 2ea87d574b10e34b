//! The apiserver semantics: resourceVersions, UIDs, generated labels, validation, the
//! AlreadyExists / NotFound / Conflict answers and foreground deletion with preconditions.

mod common;

use std::time::Duration;

use common::{NS, TestResult, job, rv, uid};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::{ErrorKind, JobApi, NodeApi};
use nodejob_fake::{Clock, FakeCluster, host};

#[tokio::test(start_paused = true)]
async fn create_assigns_identity_selector_and_pod_labels() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let before: u64 = cluster.resource_version().parse()?;

    let created = cluster.create_job(&job("up-n1", "n1", &[])).await?;

    assert_eq!(rv(&created.metadata), before + 1);
    let id = uid(&created);
    assert_eq!(id.len(), 36);
    assert_eq!(created.metadata.generation, Some(1));
    let created_at = created.metadata.creation_timestamp.as_ref().unwrap();
    assert_eq!(created_at.0.to_string(), "2026-01-01T00:00:00Z");
    let spec = created.spec.as_ref().unwrap();
    let selector = spec
        .selector
        .as_ref()
        .unwrap()
        .match_labels
        .as_ref()
        .unwrap();
    assert_eq!(
        selector.get("batch.kubernetes.io/controller-uid"),
        Some(&id)
    );
    let labels = spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .as_ref()
        .unwrap();
    assert_eq!(labels.get("batch.kubernetes.io/controller-uid"), Some(&id));
    assert_eq!(labels.get("controller-uid"), Some(&id));
    assert_eq!(
        labels
            .get("batch.kubernetes.io/job-name")
            .map(String::as_str),
        Some("up-n1")
    );
    assert_eq!(labels.get("job-name").map(String::as_str), Some("up-n1"));
    assert_eq!(labels.get("app").map(String::as_str), Some("nodejob-test"));

    assert_eq!(cluster.get_job(NS, "up-n1").await?, created);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn every_write_bumps_the_one_counter() -> TestResult {
    let cluster = FakeCluster::new();
    let node = cluster.add_node("n1")?;
    let a = cluster.create_job(&job("a", "n1", &[])).await?;
    let b = cluster.create_job(&job("b", "n1", &[])).await?;
    assert_eq!(rv(&a.metadata), rv(&node.metadata) + 1);
    assert_eq!(rv(&b.metadata), rv(&a.metadata) + 1);

    // A refused write does not bump it; reads do not either.
    let latest = cluster.resource_version();
    assert!(cluster.create_job(&job("a", "n1", &[])).await.is_err());
    cluster.get_job(NS, "a").await?;
    assert_eq!(cluster.resource_version(), latest);

    // An update bumps resourceVersion but not generation.
    let touched = cluster.touch_job_now(NS, "a")?;
    assert_eq!(rv(&touched.metadata), rv(&b.metadata) + 1);
    assert_eq!(touched.metadata.generation, Some(1));
    assert_eq!(touched.metadata.uid, a.metadata.uid);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn uids_and_names_follow_the_seed() -> TestResult {
    async fn run(seed: u64) -> Result<(String, String), Box<dyn std::error::Error>> {
        let cluster = FakeCluster::with_seed(seed);
        cluster.add_node("n1")?;
        let created = cluster.create_job(&job("a", "n1", &[])).await?;
        cluster.sleep(Duration::from_millis(1500)).await;
        let pod = cluster.pods(NS).remove(0).metadata.name.unwrap();
        Ok((uid(&created), pod))
    }
    let (first, again, other) = (run(7).await?, run(7).await?, run(8).await?);
    assert_eq!(first, again);
    assert_ne!(first, other);
    let suffix = first.1.strip_prefix("a-").unwrap();
    assert_eq!(suffix.len(), 5);
    assert!(
        suffix
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn already_exists_and_not_found_messages() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.create_job(&job("a", "n1", &[])).await?;

    let err = cluster.create_job(&job("a", "n1", &[])).await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::AlreadyExists, 409));
    assert_eq!(err.message, r#"jobs.batch "a" already exists"#);

    let err = cluster.get_job(NS, "nope").await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::NotFound, 404));
    assert_eq!(err.message, r#"jobs.batch "nope" not found"#);

    let err = cluster.delete_job(NS, "nope", None).await.unwrap_err();
    assert_eq!(err.message, r#"jobs.batch "nope" not found"#);

    let err = cluster.get_node("n9").await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::NotFound, r#"nodes "n9" not found"#)
    );

    let mut elsewhere = job("a", "n1", &[]);
    elsewhere.metadata.namespace = Some("upgrade".into());
    let err = cluster.create_job(&elsewhere).await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::NotFound, r#"namespaces "upgrade" not found"#)
    );
    cluster.add_namespace("upgrade");
    cluster.create_job(&elsewhere).await?;
    assert!(cluster.job("kube-system", "a").is_none());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn invalid_jobs_are_refused_with_the_field() -> TestResult {
    let cluster = FakeCluster::new();
    let long = "a".repeat(64);
    let err = cluster
        .create_job(&job(&long, "n1", &[]))
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::Invalid, 422));
    assert!(
        err.message
            .starts_with(&format!("Job.batch \"{long}\" is invalid: ")),
        "{err}"
    );
    assert!(
        err.message.contains(&format!(
            "spec.template.labels: Invalid value: \"{long}\": must be no more than 63 characters"
        )),
        "{err}"
    );

    let err = cluster
        .create_job(&job("Up_N1", "n1", &[]))
        .await
        .unwrap_err();
    assert!(
        err.message
            .contains(r#"metadata.name: Invalid value: "Up_N1": a lowercase RFC 1123 subdomain"#),
        "{err}"
    );

    let mut bad_label = job("a", "n1", &[]);
    bad_label
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("stratum.ciq.com/node".into(), "x".repeat(70));
    let err = cluster.create_job(&bad_label).await.unwrap_err();
    assert!(
        err.message.contains("metadata.labels: Invalid value"),
        "{err}"
    );

    let mut always = job("a", "n1", &[]);
    always
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .restart_policy = None;
    let err = cluster.create_job(&always).await.unwrap_err();
    assert!(err.message.ends_with(r#"spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never""#), "{err}");

    assert!(cluster.job(NS, "a").is_none());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn delete_checks_uid_then_resource_version() -> TestResult {
    let cluster = FakeCluster::new();
    let created = cluster.create_job(&job("a", "n1", &[])).await?;
    let (id, version) = (
        uid(&created),
        created.metadata.resource_version.clone().unwrap(),
    );

    let stale_uid = Preconditions {
        uid: Some("other-uid".into()),
        resource_version: Some("999".into()),
    };
    let err = cluster
        .delete_job(NS, "a", Some(&stale_uid))
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::Conflict, 409));
    assert_eq!(
        err.message,
        format!(
            "Operation cannot be fulfilled on jobs.batch \"a\": Precondition failed: UID in precondition: other-uid, UID in object meta: {id}"
        )
    );

    let stale_rv = Preconditions {
        uid: Some(id.clone()),
        resource_version: Some("999".into()),
    };
    let err = cluster
        .delete_job(NS, "a", Some(&stale_rv))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "Operation cannot be fulfilled on jobs.batch \"a\": Precondition failed: ResourceVersion in precondition: 999, ResourceVersion in object meta: {version}"
        )
    );
    assert_eq!(
        cluster.resource_version(),
        version,
        "a refused delete writes nothing"
    );

    let exact = Preconditions {
        uid: Some(id.clone()),
        resource_version: Some(version.clone()),
    };
    cluster.delete_job(NS, "a", Some(&exact)).await?;
    let deleting = cluster.get_job(NS, "a").await?;
    assert!(rv(&deleting.metadata) > version.parse()?);
    assert_eq!(
        deleting.metadata.deletion_timestamp,
        created.metadata.creation_timestamp
    );
    assert_eq!(
        deleting.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    assert_eq!(deleting.metadata.generation, Some(2));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_job_being_deleted_keeps_its_name() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let argv = [host::run(Duration::from_secs(60))];
    let created = cluster.create_job(&job("a", "n1", &argv)).await?;
    cluster.sleep(Duration::from_secs(3)).await; // pod running: the foreground delete waits
    cluster.delete_job(NS, "a", None).await?;
    let deleting = cluster.get_job(NS, "a").await?;

    // Deleting again succeeds without a write; preconditions are still checked.
    cluster.delete_job(NS, "a", None).await?;
    assert_eq!(cluster.get_job(NS, "a").await?, deleting);
    let stale = Preconditions {
        uid: Some("x".into()),
        resource_version: None,
    };
    assert!(
        cluster
            .delete_job(NS, "a", Some(&stale))
            .await
            .unwrap_err()
            .is_conflict()
    );
    let exact = Preconditions {
        uid: Some(uid(&created)),
        resource_version: None,
    };
    cluster.delete_job(NS, "a", Some(&exact)).await?;

    let err = cluster.create_job(&job("a", "n1", &[])).await.unwrap_err();
    assert!(err.is_already_exists(), "{err}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn list_pods_by_equality_selector() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let created = cluster.create_job(&job("a", "n1", &[])).await?;
    cluster.create_job(&job("b", "n1", &[])).await?;
    assert!(
        cluster.list_pods(NS, "job-name=a").await?.is_empty(),
        "no pod before the first sync"
    );
    cluster.sleep(Duration::from_millis(1500)).await;

    let by_uid = format!("batch.kubernetes.io/controller-uid={}", uid(&created));
    let pods = cluster.list_pods(NS, &by_uid).await?;
    assert_eq!(pods.len(), 1);
    assert!(pods[0].metadata.name.as_deref().unwrap().starts_with("a-"));
    assert_eq!(
        cluster
            .list_pods(NS, "app=nodejob-test,job-name==a")
            .await?,
        pods
    );
    assert_eq!(cluster.list_pods(NS, "app=nodejob-test").await?.len(), 2);
    assert_eq!(cluster.list_pods(NS, "job-name!=a").await?.len(), 1);
    assert!(cluster.list_pods(NS, "app=other").await?.is_empty());
    assert!(cluster.list_pods("kube-system", "").await?.is_empty());

    // Set-based requirements, as a real apiserver serves them; what it cannot parse is a 400.
    assert_eq!(cluster.list_pods(NS, "job-name in (a,c)").await?, pods);
    assert_eq!(cluster.list_pods(NS, "job-name in (a,b)").await?.len(), 2);
    let err = cluster.list_pods(NS, "job-name in (a,b").await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::BadRequest, 400));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn list_jobs_by_selector_in_name_order_recorded_and_empty_for_a_missing_namespace()
-> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.add_namespace("other");
    let mut tagged = job("b", "n1", &[host::run(Duration::from_secs(60))]);
    (tagged.metadata.labels.as_mut().unwrap()).insert("tier".into(), "host".into());
    cluster.create_job(&tagged).await?;
    cluster.create_job(&job("a", "n1", &[])).await?;
    let mut elsewhere = job("c", "n1", &[]);
    elsewhere.metadata.namespace = Some("other".into());
    cluster.create_job(&elsewhere).await?;

    let names = |jobs: Vec<k8s_openapi::api::batch::v1::Job>| -> Vec<String> {
        jobs.into_iter()
            .map(|j| j.metadata.name.unwrap_or_default())
            .collect()
    };
    assert_eq!(names(cluster.list_jobs(NS, "").await?), ["a", "b"]);
    assert_eq!(names(cluster.list_jobs(NS, "tier=host").await?), ["b"]);
    assert_eq!(names(cluster.list_jobs(NS, "tier!=host").await?), ["a"]);
    assert_eq!(names(cluster.list_jobs(NS, "!tier").await?), ["a"]);
    assert_eq!(
        names(cluster.list_jobs(NS, "app=nodejob-test,tier").await?),
        ["b"]
    );
    assert_eq!(names(cluster.list_jobs("other", "").await?), ["c"]);
    // A namespace that does not exist lists empty, as on a real apiserver.
    assert!(cluster.list_jobs("absent", "").await?.is_empty());
    // The Job as stored: what get_job answers.
    let listed = cluster.list_jobs(NS, "tier=host").await?.remove(0);
    assert_eq!(listed, cluster.get_job(NS, "b").await?);

    // A Job being deleted is listed until the garbage collector removes it.
    cluster.sleep(Duration::from_secs(3)).await;
    cluster.delete_job(NS, "b", None).await?;
    let deleting = cluster.list_jobs(NS, "tier=host").await?;
    assert!(deleting[0].metadata.deletion_timestamp.is_some());

    let err = cluster.list_jobs(NS, "a=b=c").await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::BadRequest, 400));
    let err = cluster.list_jobs(NS, "tier in host").await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::BadRequest, 400));

    let listed: Vec<(String, String, Option<ErrorKind>)> = (cluster.calls().into_iter())
        .filter(|c| c.verb == nodejob_fake::Verb::ListJobs)
        .map(|c| (c.namespace, c.name, c.error))
        .collect();
    assert_eq!(listed.len(), 11);
    assert_eq!(
        listed[9],
        (
            NS.to_string(),
            "a=b=c".to_string(),
            Some(ErrorKind::BadRequest)
        )
    );
    assert_eq!(listed[6], ("absent".to_string(), String::new(), None));
    Ok(())
}
