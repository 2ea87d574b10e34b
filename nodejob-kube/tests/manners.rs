//! Client manners on the wire: the client-side rate limit (a verb waits for a token, a watch
//! takes none), and a 429 of API Priority and Fairness sent again only after its
//! `Retry-After`, while an eviction's 429 stays a budget's "blocked". In paused time: every
//! instant below is virtual, exact, and no test sleeps.

mod support;

use std::time::Duration;

use nodejob_core::PodApi;
use nodejob_core::{CONTROLLER_UID_LABEL, DryRun, ErrorKind, Eviction, LOG_LIMIT_BYTES, NodeApi};
use nodejob_kube::RateLimit;
use serde_json::json;
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const NODES: &str = "/api/v1/nodes";
const NODE_A: &str = "/api/v1/nodes/node-a";

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// What API Priority and Fairness answers a request it rejects: a plain-text 429 with
/// `Retry-After` (`tooManyRequests`, `k8s.io/apiserver/pkg/server/filters`).
fn apf_429(exchange: Exchange, retry_after: &str) -> Exchange {
    exchange
        .reply(429, "Too many requests, please try again later.\n")
        .reply_header("Retry-After", retry_after)
}

#[tokio::test(start_paused = true)]
async fn verbs_beyond_the_burst_wait_for_a_token_and_a_watch_takes_none() -> TestResult {
    let node = node("5", true);
    let (api, server) = serve_limited(
        vec![
            get(NODE_A).reply_json(200, &node),
            get(NODE_A).reply_json(200, &node),
            // The burst of 2 is spent: one token a second.
            get(NODE_A).reply_json(200, &node),
            // No token for a watch: sent as soon as asked, although the bucket is empty.
            watch(NODES, "node-a", "5").reply(200, event("MODIFIED", &support::node("6", true))),
            get(NODE_A).reply_json(200, &node),
        ],
        RateLimit::new(1.0, 2)?,
    );
    for _ in 0..3 {
        api.get_node("node-a").await?;
    }
    api.wait_node("node-a", Some("5"), secs(60)).await?;
    api.get_node("node-a").await?;
    drop(api);
    let seen = server.finish_timed().await;
    let at: Vec<(&str, Duration)> = seen.iter().map(|(l, t)| (l.as_str(), *t)).collect();
    assert_eq!(
        at,
        [
            ("GET /api/v1/nodes/node-a", secs(0)),
            ("GET /api/v1/nodes/node-a", secs(0)),
            ("GET /api/v1/nodes/node-a", secs(1)),
            ("WATCH /api/v1/nodes", secs(1)),
            ("GET /api/v1/nodes/node-a", secs(2)),
        ]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_retry_after_of_a_429_or_a_503_is_kept_on_the_error() -> TestResult {
    let (api, server) = serve(vec![
        apf_429(get(NODE_A), "3"),
        get(NODE_A)
            .reply_json(
                503,
                &status(503, "ServiceUnavailable", "etcd leader changed"),
            )
            .reply_header("Retry-After", "2"),
        // Not a wait in whole seconds (an HTTP date): none, as client-go reads it.
        get(NODE_A)
            .reply(429, "slow down")
            .reply_header("Retry-After", "Fri, 31 Dec 1999 23:59:59 GMT"),
        // A Retry-After on an answer that is no 429 or 5xx means nothing (`checkWait`).
        get(NODE_A)
            .reply_json(404, &status(404, "NotFound", "nodes \"node-a\" not found"))
            .reply_header("Retry-After", "5"),
    ]);
    let apf = api.get_node("node-a").await.unwrap_err();
    assert_eq!(
        (apf.kind, apf.code, apf.retry_after()),
        (ErrorKind::Transient, 429, Some(secs(3)))
    );
    assert_eq!(apf.message, "Too many requests, please try again later.");
    let unavailable = api.get_node("node-a").await.unwrap_err();
    assert_eq!(unavailable.retry_after(), Some(secs(2)));
    let dated = api.get_node("node-a").await.unwrap_err();
    assert_eq!((dated.code, dated.retry_after()), (429, None));
    let missing = api.get_node("node-a").await.unwrap_err();
    assert_eq!(
        (missing.kind, missing.retry_after()),
        (ErrorKind::NotFound, None)
    );
    drop(api);
    assert_eq!(server.finish().await.len(), 4);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_read_refused_by_apf_is_sent_again_after_its_retry_after_and_not_before() -> TestResult {
    // `logs`: each read through core's `retrying`.
    let selector = format!("{CONTROLLER_UID_LABEL}={UID}");
    let (api, server) = serve(vec![
        apf_429(get(JOB_PATH), "3"),
        get(JOB_PATH).reply_json(200, &job_complete("1209")),
        get(PODS_PATH)
            .query(&[("labelSelector", &selector)])
            .reply_json(200, &list("Pod", "v1", "1210", vec![pod(0)])),
        // Without Retry-After: the backoff's 250 ms.
        get(&format!("{PODS_PATH}/{POD}/log"))
            .query(&[
                ("container", "upgrade"),
                ("limitBytes", &LOG_LIMIT_BYTES.to_string()),
            ])
            .reply(429, "Too many requests, please try again later.\n"),
        get(&format!("{PODS_PATH}/{POD}/log"))
            .query(&[
                ("container", "upgrade"),
                ("limitBytes", &LOG_LIMIT_BYTES.to_string()),
            ])
            .reply(200, "done\n"),
    ]);
    let log = nodejob_core::logs(&api, &spec()).await?;
    assert_eq!(log, "done\n");
    drop(api);
    let at: Vec<Duration> = server
        .finish_timed()
        .await
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(
        at,
        [
            secs(0),
            secs(3),
            secs(3),
            secs(3),
            secs(3) + Duration::from_millis(250)
        ]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_run_refused_by_apf_sends_its_first_read_again_after_the_retry_after() -> TestResult {
    // The run's machine retries through its own backoff: the wait is the server's 7 s.
    let (api, server) = serve(vec![
        apf_429(get(JOB_PATH), "7"),
        get(JOB_PATH).reply_json(404, &status(404, "NotFound", "not found")),
        post(
            JOBS_PATH,
            serde_json::to_value(nodejob_core::build(&spec()))?,
        )
        .reply_json(201, &job("1200", json!({}))),
        watch(JOBS_PATH, NAME, "1200").reply(200, event("MODIFIED", &job_complete("1209"))),
        // It succeeded: its exit code is 0 with no Pod read; deleted, exactly.
        delete(
            JOB_PATH,
            json!({
                "propagationPolicy": "Foreground",
                "preconditions": { "uid": UID, "resourceVersion": "1209" }
            }),
        )
        .reply_json(200, &job_complete("1210")),
    ]);
    let exit_code = nodejob_core::run_exit_code(&api, &spec()).await?;
    assert_eq!(exit_code, 0);
    drop(api);
    let at: Vec<Duration> = server
        .finish_timed()
        .await
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(at[..2], [secs(0), secs(7)]);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_callers_bound_ends_the_call_at_once() -> TestResult {
    // The bound is the caller's: `logs` retries within the spec's (`poll_attempts` x
    // POLL_INTERVAL, 5 s here). An hour's Retry-After is cut to the 60 s cap, still past the
    // bound: the 429 is the answer at once, not a retry the server said it would refuse.
    let mut spec = spec();
    spec.poll_attempts = 1;
    let (api, server) = serve(vec![apf_429(get(JOB_PATH), "3600")]);
    let started = tokio::time::Instant::now();
    let err = nodejob_core::logs(&api, &spec).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert!(err.to_string().contains("Too many requests"), "{err}");
    drop(api);
    assert_eq!(server.finish().await, [format!("GET {JOB_PATH}")]);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_eviction_429_stays_blocked_whatever_its_retry_after() -> TestResult {
    const EVICT: &str = "/api/v1/namespaces/web/pods/web-1/eviction";
    let (api, server) = serve(vec![
        // `createTooManyRequestsError` in `eviction.go`: a budget still being processed, with
        // `retryAfterSeconds: 10`, which the apiserver writes as the header too.
        post(
            EVICT,
            json!({
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": { "name": "web-1", "namespace": "web" },
                "deleteOptions": { "preconditions": { "uid": "uid-web-1" } }
            }),
        )
        .reply_json(
            429,
            &status_with_causes(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                &[(
                    "DisruptionBudget",
                    "The disruption budget web-pdb is still being processed by the server.",
                )],
            ),
        )
        .reply_header("Retry-After", "10"),
    ]);
    let answer = api
        .evict_pod("web", "web-1", "uid-web-1", None, DryRun::No)
        .await?;
    assert_eq!(
        answer,
        Eviction::Blocked {
            message: "Cannot evict pod as it would violate the pod's disruption budget. The \
                      disruption budget web-pdb is still being processed by the server."
                .into()
        }
    );
    drop(api);
    // One request: nothing below the drain retried it, and no time passed.
    assert_eq!(
        server.finish_timed().await,
        [(format!("POST {EVICT}"), Duration::ZERO)]
    );
    Ok(())
}
