//! Waits on the wire: one watch kept open across waits, resumed after it ends, and 410 Gone
//! recovered by a re-list, never reported.

mod support;

use std::time::Duration;

use nodejob_core::{Change, JobApi, NodeApi};
use serde_json::json;
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const WAIT: Duration = Duration::from_secs(60);

fn rv<K: kube::Resource>(change: &Change<K>) -> Option<String> {
    match change {
        Change::Applied(o) | Change::Deleted(o) => o.meta().resource_version.clone(),
        Change::TimedOut => None,
    }
}

fn applied<K: kube::Resource>(change: &Change<K>) -> Option<String> {
    matches!(change, Change::Applied(_))
        .then(|| rv(change))
        .flatten()
}

#[tokio::test(start_paused = true)]
async fn consecutive_waits_read_on_from_one_open_watch() -> TestResult {
    let (api, server) = serve(vec![
        watch(JOBS_PATH, NAME, "100").reply(
            200,
            event("MODIFIED", &job_running("101")) + &event("MODIFIED", &job_complete("102")),
        ),
        // A wait from a resourceVersion the watch does not stand at opens a new one from there.
        watch(JOBS_PATH, NAME, "101").reply(200, event("MODIFIED", &job_complete("102"))),
    ]);
    let first = api.wait_job(NS, NAME, Some("100"), WAIT).await?;
    assert_eq!(applied(&first).as_deref(), Some("101"));
    let second = api.wait_job(NS, NAME, Some("101"), WAIT).await?;
    assert_eq!(applied(&second).as_deref(), Some("102"));
    let Change::Applied(job) = &second else {
        unreachable!()
    };
    assert!(nodejob_core::succeeded(job));
    // Back to 101: not where the open watch stands.
    let again = api.wait_job(NS, NAME, Some("101"), WAIT).await?;
    assert_eq!(applied(&again).as_deref(), Some("102"));
    drop(api);
    assert_eq!(
        server.finish().await,
        [format!("WATCH {JOBS_PATH}"), format!("WATCH {JOBS_PATH}")]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_ends_is_reopened_from_the_last_resource_version_bookmarks_included()
-> TestResult {
    let (api, server) = serve(vec![
        // The apiserver ends the watch (timeoutSeconds) after one change ...
        watch(JOBS_PATH, NAME, "100").reply(200, event("MODIFIED", &job_running("101"))),
        // ... it is reopened from that change, and ends again after a bookmark ...
        watch(JOBS_PATH, NAME, "101").reply(200, bookmark("Job", "batch/v1", "150")),
        // ... and is reopened from the bookmark.
        watch(JOBS_PATH, NAME, "150").reply(200, event("MODIFIED", &job_complete("151"))),
    ]);
    let first = api.wait_job(NS, NAME, Some("100"), WAIT).await?;
    assert_eq!(applied(&first).as_deref(), Some("101"));
    let second = api.wait_job(NS, NAME, Some("101"), WAIT).await?;
    assert_eq!(applied(&second).as_deref(), Some("151"));
    drop(api);
    assert_eq!(server.finish().await.len(), 3);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_410_error_event_re_lists_and_answers_the_missed_change() -> TestResult {
    let (api, server) = serve(vec![
        watch(JOBS_PATH, NAME, "100").reply(200, expired("100", "4000")),
        list_by_name(JOBS_PATH, NAME).reply_json(
            200,
            &list("Job", "batch/v1", "5000", vec![job_complete("4800")]),
        ),
        // The next wait resumes from the list's resourceVersion, not the object's.
        watch(JOBS_PATH, NAME, "5000").reply(200, event("MODIFIED", &job_complete("5001"))),
    ]);
    let missed = api.wait_job(NS, NAME, Some("100"), WAIT).await?;
    assert_eq!(applied(&missed).as_deref(), Some("4800"));
    let next = api.wait_job(NS, NAME, Some("4800"), WAIT).await?;
    assert_eq!(applied(&next).as_deref(), Some("5001"));
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("WATCH {JOBS_PATH}"),
            format!("GET {JOBS_PATH}"),
            format!("WATCH {JOBS_PATH}"),
        ]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_410_answer_to_the_watch_request_re_lists_and_resumes() -> TestResult {
    let (api, server) = serve(vec![
        watch(JOBS_PATH, NAME, "100").reply_json(
            410,
            &status(410, "Expired", "too old resource version: 100 (4000)"),
        ),
        // Unchanged since 100: nothing to answer yet, resume from the list.
        list_by_name(JOBS_PATH, NAME).reply_json(
            200,
            &list("Job", "batch/v1", "5000", vec![job_running("100")]),
        ),
        watch(JOBS_PATH, NAME, "5000").reply(200, event("MODIFIED", &job_complete("5001"))),
    ]);
    let change = api.wait_job(NS, NAME, Some("100"), WAIT).await?;
    assert_eq!(applied(&change).as_deref(), Some("5001"));
    drop(api);
    assert_eq!(server.finish().await.len(), 3);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_410_when_the_object_is_gone_answers_its_last_known_state_deleted() -> TestResult {
    let (api, server) = serve(vec![
        get(JOB_PATH).reply_json(200, &job_running("100")),
        watch(JOBS_PATH, NAME, "100").reply(200, expired("100", "4000")),
        list_by_name(JOBS_PATH, NAME).reply_json(200, &list("Job", "batch/v1", "5000", vec![])),
    ]);
    api.get_job(NS, NAME).await?;
    let change = api.wait_job(NS, NAME, Some("100"), WAIT).await?;
    let Change::Deleted(last) = &change else {
        panic!("expected Deleted, got {change:?}");
    };
    assert_eq!(last.metadata.uid.as_deref(), Some(UID));
    assert_eq!(last.metadata.resource_version.as_deref(), Some("100"));
    drop(api);
    assert_eq!(server.finish().await.len(), 3);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_deleted_event_answers_deleted() -> TestResult {
    let mut gone = job_complete("103");
    gone["metadata"]["deletionTimestamp"] = json!("2025-06-01T10:01:00Z");
    let (api, server) = serve(vec![
        watch(JOBS_PATH, NAME, "102").reply(200, event("DELETED", &gone)),
    ]);
    let change = api.wait_job(NS, NAME, Some("102"), WAIT).await?;
    assert!(matches!(change, Change::Deleted(_)), "{change:?}");
    assert_eq!(rv(&change).as_deref(), Some("103"));
    drop(api);
    assert_eq!(server.finish().await.len(), 1);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_wait_is_bounded_by_its_timeout() -> TestResult {
    let (api, server) = serve(vec![watch(JOBS_PATH, NAME, "100").hang()]);
    let started = tokio::time::Instant::now();
    let change = api
        .wait_job(NS, NAME, Some("100"), Duration::from_secs(5))
        .await?;
    assert_eq!(change, Change::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    drop(api);
    assert_eq!(server.finish().await.len(), 1);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_refused_watch_is_reported_for_the_runner_to_retry() -> TestResult {
    let (api, server) = serve(vec![
        watch(JOBS_PATH, NAME, "100").reply_json(
            503,
            &status(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
        ),
        // The retry, from the same resourceVersion.
        watch(JOBS_PATH, NAME, "100").reply(200, event("MODIFIED", &job_running("101"))),
    ]);
    let err = api
        .wait_job(NS, NAME, Some("100"), WAIT)
        .await
        .expect_err("503");
    assert!(err.is_retryable(), "{err}");
    let change = api.wait_job(NS, NAME, Some("100"), WAIT).await?;
    assert_eq!(applied(&change).as_deref(), Some("101"));
    drop(api);
    assert_eq!(server.finish().await.len(), 2);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_wait_without_since_starts_from_a_list_by_name() -> TestResult {
    let (api, server) = serve(vec![
        // The node does not exist (yet): the list's resourceVersion is "now".
        list_by_name("/api/v1/nodes", "node-a").reply_json(200, &list("Node", "v1", "300", vec![])),
        watch("/api/v1/nodes", "node-a", "300").reply(
            200,
            event("ADDED", &node("301", false)) + &event("MODIFIED", &node("302", true)),
        ),
    ]);
    let added = api.wait_node("node-a", None, WAIT).await?;
    assert_eq!(applied(&added).as_deref(), Some("301"));
    let ready = api.wait_node("node-a", Some("301"), WAIT).await?;
    let Change::Applied(node) = &ready else {
        panic!("expected Applied, got {ready:?}");
    };
    assert!(nodejob_core::ready(node));
    drop(api);
    assert_eq!(
        server.finish().await,
        ["GET /api/v1/nodes", "WATCH /api/v1/nodes"]
    );
    Ok(())
}
