//! `wait_job` / `wait_node`: a watch on one name, replayed from a per-object history.

mod common;

use std::time::Duration;

use common::{JobWatch, NS, TestResult, job, rv, uid};
use nodejob_core::{Change, ErrorKind, JobApi, NodeApi};
use nodejob_fake::{Clock, FakeCluster};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[tokio::test(start_paused = true)]
async fn times_out_when_nothing_changes() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.create_job(&job("a", "missing-node", &[])).await?;
    cluster.sleep(secs(2.0)).await; // the pod exists; nothing more happens without the node
    let change = cluster.wait_job(NS, "a", None, secs(30.0)).await?;
    assert_eq!(change, Change::TimedOut);
    assert_eq!(cluster.now(), secs(32.0));
    let change = cluster.wait_job(NS, "nobody", None, secs(1.0)).await?;
    assert_eq!(change, Change::TimedOut);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn since_none_waits_for_the_next_change() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let created = cluster.create_job(&job("a", "n1", &[])).await?;
    let Change::Applied(next) = cluster.wait_job(NS, "a", None, secs(60.0)).await? else {
        return Err("expected an update".into());
    };
    assert!(rv(&next.metadata) > rv(&created.metadata));
    assert_eq!(cluster.now(), secs(0.2), "the controller's first sync");
    assert!(next.status.unwrap().start_time.is_some());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn since_zero_starts_with_the_current_object() -> TestResult {
    let cluster = FakeCluster::new();
    let created = cluster.create_job(&job("a", "n1", &[])).await?;
    let touched = cluster.touch_job_now(NS, "a")?;
    assert_eq!(
        cluster.wait_job(NS, "a", Some("0"), secs(1.0)).await?,
        Change::Applied(touched)
    );
    // From the creation's resourceVersion the touch comes next.
    let since = created.metadata.resource_version.clone().unwrap();
    let Change::Applied(next) = cluster.wait_job(NS, "a", Some(&since), secs(1.0)).await? else {
        return Err("expected an update".into());
    };
    assert!(
        next.metadata
            .annotations
            .unwrap()
            .contains_key("nodejob-fake/touched")
    );

    let err = cluster
        .wait_job(NS, "a", Some("abc"), secs(1.0))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadRequest);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_deletion_is_reported_with_the_last_state() -> TestResult {
    let cluster = FakeCluster::new();
    let created = cluster.create_job(&job("a", "n1", &[])).await?;
    let mut watch = JobWatch::after(&created);
    cluster.delete_job_now(NS, "a")?; // no pod yet: the garbage collector removes it at once
    let Change::Applied(deleting) = watch.next(&cluster).await? else {
        return Err("expected the deletionTimestamp update".into());
    };
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let Change::Deleted(last) = watch.next(&cluster).await? else {
        return Err("expected the deletion".into());
    };
    assert_eq!(uid(&last), uid(&created));
    assert!(rv(&last.metadata) > rv(&deleting.metadata));
    // The update that empties the finalizers is not stored: the last state still has it.
    assert_eq!(
        last.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    assert_eq!(watch.next(&cluster).await?, Change::TimedOut);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_replaced_job_is_reported_deleted_before_its_successor() -> TestResult {
    let cluster = FakeCluster::new();
    let created = cluster.create_job(&job("a", "n1", &[])).await?;
    let replacement = cluster.replace_job_now(NS, "a")?;
    assert_ne!(uid(&replacement), uid(&created));
    let selector = replacement.spec.as_ref().unwrap().selector.clone().unwrap();
    let expected = uid(&replacement);
    assert_eq!(
        selector.match_labels.unwrap()["batch.kubernetes.io/controller-uid"],
        expected
    );

    let mut watch = JobWatch::after(&created);
    let Change::Deleted(old) = watch.next(&cluster).await? else {
        return Err("expected the deletion first".into());
    };
    assert_eq!(uid(&old), uid(&created));
    let Change::Applied(new) = watch.next(&cluster).await? else {
        return Err("expected the successor".into());
    };
    assert_eq!(new, replacement);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn wait_node_sees_readiness_flap() -> TestResult {
    let cluster = FakeCluster::new();
    let node = cluster.add_node("n1")?;
    cluster.schedule(secs(5.0), |c| c.set_node_ready("n1", false).unwrap());
    cluster.schedule(secs(9.0), |c| c.set_node_ready("n1", true).unwrap());
    let ready = |n: &k8s_openapi::api::core::v1::Node| {
        let conditions = n.status.as_ref().unwrap().conditions.as_ref().unwrap();
        conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .status
            .clone()
    };

    let Change::Applied(down) = cluster.wait_node("n1", None, secs(60.0)).await? else {
        return Err("expected NotReady".into());
    };
    assert_eq!(
        (ready(&down), cluster.now()),
        ("False".to_string(), secs(5.0))
    );
    let since = down.metadata.resource_version.clone();
    let Change::Applied(up) = cluster
        .wait_node("n1", since.as_deref(), secs(60.0))
        .await?
    else {
        return Err("expected Ready".into());
    };
    assert_eq!((ready(&up), cluster.now()), ("True".to_string(), secs(9.0)));

    cluster.remove_node("n1")?;
    let since = node.metadata.resource_version.clone();
    let mut changes = Vec::new();
    let mut since = since.unwrap();
    loop {
        match cluster.wait_node("n1", Some(&since), secs(1.0)).await? {
            Change::Applied(n) => since = n.metadata.resource_version.unwrap(),
            Change::Deleted(n) => {
                changes.push("deleted");
                assert_eq!(ready(&n), "True");
                break;
            }
            Change::TimedOut => return Err("timed out".into()),
        }
        changes.push("applied");
    }
    assert_eq!(changes, ["applied", "applied", "deleted"]);
    Ok(())
}
