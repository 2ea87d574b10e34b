//! Faults, hooks and the call record.

mod common;

use std::time::Duration;

use common::{NS, TestResult, job, uid};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::{ApiError, ErrorKind, JobApi, NodeApi};
use nodejob_fake::{Clock, FakeCluster, Times, Verb, Verbs};

fn unavailable() -> ApiError {
    ApiError::transient(503, "the server is currently unable to handle the request")
}

#[tokio::test(start_paused = true)]
async fn a_fault_fires_once_or_n_times_or_always() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;

    cluster.fail(Verb::GetNode, unavailable(), Times::Once);
    assert_eq!(cluster.get_node("n1").await.unwrap_err(), unavailable());
    cluster.get_node("n1").await?;

    cluster.fail(Verb::GetNode, ApiError::gone("too old"), Times::N(2));
    assert!(cluster.get_node("n1").await.unwrap_err().is_gone());
    assert!(cluster.get_node("n1").await.unwrap_err().is_gone());
    cluster.get_node("n1").await?;

    cluster.fail(Verbs::All, unavailable(), Times::Always);
    for _ in 0..3 {
        assert!(cluster.get_node("n1").await.is_err());
        assert!(cluster.list_pods(NS, "").await.is_err());
    }
    cluster.clear_faults();
    cluster.get_node("n1").await?;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_faulted_call_does_not_touch_the_store() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.fail(Verb::CreateJob, unavailable(), Times::Once);
    let before = cluster.resource_version();
    assert!(cluster.create_job(&job("a", "n1", &[])).await.is_err());
    assert_eq!(cluster.resource_version(), before);
    assert!(cluster.job(NS, "a").is_none());

    cluster.create_job(&job("a", "n1", &[])).await?;
    cluster.fail(Verb::DeleteJob, unavailable(), Times::Once);
    assert!(cluster.delete_job(NS, "a", None).await.is_err());
    assert!(
        cluster
            .job(NS, "a")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn random_faults_replay_for_a_seed() -> TestResult {
    async fn pattern(seed: u64) -> Result<Vec<bool>, Box<dyn std::error::Error>> {
        let cluster = FakeCluster::with_seed(seed);
        cluster.add_node("n1")?;
        cluster.fail_randomly(Verbs::All, unavailable(), 0.5);
        let mut failed = Vec::new();
        for _ in 0..64 {
            failed.push(cluster.get_node("n1").await.is_err());
        }
        Ok(failed)
    }
    let first = pattern(42).await?;
    assert_eq!(first, pattern(42).await?);
    assert_ne!(first, pattern(43).await?);
    let failures = first.iter().filter(|f| **f).count();
    assert!((16..=48).contains(&failures), "{failures} of 64 failed");

    let cluster = FakeCluster::with_seed(42);
    cluster.add_node("n1")?;
    cluster.fail_randomly(Verb::ListPods, unavailable(), 1.0);
    cluster.get_node("n1").await?;
    assert!(cluster.list_pods(NS, "").await.is_err());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_hook_lets_another_actor_write_between_two_calls() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.create_job(&job("a", "n1", &[])).await?;
    let read = cluster.get_job(NS, "a").await?;

    // Someone updates the Job between our read and our exact delete.
    cluster.before(Verb::DeleteJob, |c| {
        c.touch_job_now(NS, "a").unwrap();
    });
    let exact = Preconditions {
        uid: read.metadata.uid.clone(),
        resource_version: read.metadata.resource_version.clone(),
    };
    let err = cluster.delete_job(NS, "a", Some(&exact)).await.unwrap_err();
    assert!(err.is_conflict());
    assert!(
        err.message.contains("ResourceVersion in precondition"),
        "{err}"
    );

    // The hook ran once: a fresh read deletes.
    let read = cluster.get_job(NS, "a").await?;
    let exact = Preconditions {
        uid: read.metadata.uid.clone(),
        resource_version: read.metadata.resource_version.clone(),
    };
    cluster.delete_job(NS, "a", Some(&exact)).await?;

    // Someone replaces the Job just before we read it: we read the successor.
    cluster.create_job(&job("b", "n1", &[])).await?;
    let original = cluster.job(NS, "b").unwrap();
    cluster.before(Verb::GetJob, |c| {
        c.replace_job_now(NS, "b").unwrap();
    });
    let seen = cluster.get_job(NS, "b").await?;
    assert_ne!(uid(&seen), uid(&original));
    assert_eq!(uid(&cluster.get_job(NS, "b").await?), uid(&seen));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_record_holds_every_call_served() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let created = cluster.create_job(&job("a", "n1", &[])).await?;
    cluster.create_job_now(&job("other", "n1", &[]))?; // an actor: not recorded
    cluster.sleep(Duration::from_secs(2)).await;
    cluster.fail(Verb::GetJob, unavailable(), Times::Once);
    assert!(cluster.get_job(NS, "a").await.is_err());
    assert!(cluster.get_job(NS, "gone").await.is_err());
    let exact = Preconditions {
        uid: created.metadata.uid.clone(),
        resource_version: None,
    };
    cluster.delete_job(NS, "a", Some(&exact)).await?;
    cluster
        .wait_job(NS, "a", None, Duration::from_secs(1))
        .await?;
    cluster.list_events(NS, &uid(&created)).await?;

    let calls = cluster.calls();
    let summary: Vec<_> = calls
        .iter()
        .map(|c| {
            (
                c.verb,
                c.namespace.as_str(),
                c.name.as_str(),
                c.at.as_secs(),
                c.error,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (Verb::CreateJob, NS, "a", 0, None),
            (Verb::GetJob, NS, "a", 2, Some(ErrorKind::Transient)),
            (Verb::GetJob, NS, "gone", 2, Some(ErrorKind::NotFound)),
            (Verb::DeleteJob, NS, "a", 2, None),
            (Verb::WaitJob, NS, "a", 2, None),
            (
                Verb::ListEvents,
                NS,
                created.metadata.uid.as_deref().unwrap(),
                2,
                None
            ),
        ]
    );
    assert_eq!(calls[3].preconditions, Some(exact));
    assert_eq!(calls[0].preconditions, None);
    assert_eq!(cluster.count(Verb::GetJob), 2);
    assert_eq!(cluster.count(Verb::GetNode), 0);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_fake_is_a_shareable_backend() -> TestResult {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<FakeCluster>();

    let cluster = FakeCluster::new();
    let api: std::sync::Arc<dyn JobApi> = std::sync::Arc::new(cluster.clone());
    api.create_job(&job("a", "n1", &[])).await?;
    // Clones share one cluster, and one record.
    assert!(cluster.job(NS, "a").is_some());
    assert_eq!(cluster.count(Verb::CreateJob), 1);
    api.sleep(Duration::from_secs(90)).await;
    assert_eq!(cluster.now(), Duration::from_secs(90));
    Ok(())
}
