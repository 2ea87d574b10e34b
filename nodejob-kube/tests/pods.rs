//! `PodApi` on the wire: the Pods of a node, reads and waits, and every answer an eviction can
//! get (`pkg/registry/core/pod/storage/eviction.go`).

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use nodejob_core::{Change, DryRun, ErrorKind, Eviction, PodApi};
use serde_json::{Value, json};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const WAIT: Duration = Duration::from_secs(60);
const ALL_PODS: &str = "/api/v1/pods";
const WEB_PODS: &str = "/api/v1/namespaces/web/pods";
const WEB_1: &str = "/api/v1/namespaces/web/pods/web-1";
const EVICT_WEB_1: &str = "/api/v1/namespaces/web/pods/web-1/eviction";
const WEB_1_UID: &str = "7b2e4c1a-0d3f-4e5a-8b6c-9d0e1f2a3b4c";

fn web_1(rv: &str) -> Value {
    running_pod("web", "web-1", "node-a", WEB_1_UID, rv)
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .map(|p| {
            format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

fn rv(change: &Change<Pod>) -> Option<&str> {
    match change {
        Change::Applied(p) | Change::Deleted(p) => p.metadata.resource_version.as_deref(),
        Change::TimedOut => None,
    }
}

/// The `Success` Status the eviction subresource answers (201, set by the create handler).
fn evicted() -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201 })
}

#[tokio::test]
async fn node_pods_are_listed_in_every_namespace_by_node_name_in_namespace_name_order() -> TestResult
{
    let (api, server) = serve(vec![
        get(ALL_PODS)
            .query(&[("fieldSelector", "spec.nodeName=node-a")])
            // The `=` inside the selector is encoded. (kube's query serializer starts every
            // query with `&`: an empty pair, which the apiserver's `url.ParseQuery` skips.)
            .raw_query("&fieldSelector=spec.nodeName%3Dnode-a")
            .reply_json(
                200,
                &list(
                    "Pod",
                    "v1",
                    "2000",
                    vec![
                        running_pod("web", "web-1", "node-a", "u1", "10"),
                        running_pod("kube-system", "proxy-x", "node-a", "u2", "11"),
                        running_pod("db", "pg-0", "node-a", "u3", "12"),
                        running_pod("web", "api-0", "node-a", "u4", "13"),
                    ],
                ),
            ),
    ]);
    let pods = api.list_node_pods("node-a").await?;
    assert_eq!(
        names(&pods),
        ["db/pg-0", "kube-system/proxy-x", "web/api-0", "web/web-1"]
    );
    drop(api);
    assert_eq!(server.finish().await, [format!("GET {ALL_PODS}")]);
    Ok(())
}

#[tokio::test]
async fn a_pod_is_read_by_namespace_and_name() -> TestResult {
    let (api, server) = serve(vec![
        get(WEB_1).reply_json(200, &web_1("100")),
        get(WEB_1).reply_json(404, &status(404, "NotFound", "pods \"web-1\" not found")),
    ]);
    let pod = api.get_pod("web", "web-1").await?;
    assert_eq!(pod.metadata.uid.as_deref(), Some(WEB_1_UID));
    let err = api.get_pod("web", "web-1").await.expect_err("gone");
    assert!(err.is_not_found(), "{err}");
    drop(api);
    assert_eq!(
        server.finish().await,
        [format!("GET {WEB_1}"), format!("GET {WEB_1}")]
    );
    Ok(())
}

#[tokio::test]
async fn an_eviction_carries_the_uid_precondition_and_only_the_options_asked_for() -> TestResult {
    let (api, server) = serve(vec![
        // Dry run: in the body (the handler's) and the query (admission's); a grace period.
        post(
            EVICT_WEB_1,
            json!({
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": { "name": "web-1", "namespace": "web" },
                "deleteOptions": {
                    "preconditions": { "uid": WEB_1_UID },
                    "gracePeriodSeconds": 30,
                    "dryRun": ["All"]
                }
            }),
        )
        .query(&[("dryRun", "All")])
        .reply_json(201, &evicted()),
        // For real, with the pod's own grace period: the precondition only.
        post(
            EVICT_WEB_1,
            json!({
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": { "name": "web-1", "namespace": "web" },
                "deleteOptions": { "preconditions": { "uid": WEB_1_UID } }
            }),
        )
        .raw_query("")
        .reply_json(201, &evicted()),
        // 200 is as good as 201.
        post(
            EVICT_WEB_1,
            json!({
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": { "name": "web-1", "namespace": "web" },
                "deleteOptions": { "preconditions": { "uid": WEB_1_UID }, "gracePeriodSeconds": 0 }
            }),
        )
        .reply_json(200, &evicted()),
    ]);
    let dry = api
        .evict_pod(
            "web",
            "web-1",
            WEB_1_UID,
            Some(Duration::from_secs(30)),
            DryRun::All,
        )
        .await?;
    assert_eq!(dry, Eviction::Evicted);
    let real = api
        .evict_pod("web", "web-1", WEB_1_UID, None, DryRun::No)
        .await?;
    assert_eq!(real, Eviction::Evicted);
    let now = api
        .evict_pod("web", "web-1", WEB_1_UID, Some(Duration::ZERO), DryRun::No)
        .await?;
    assert_eq!(now, Eviction::Evicted);
    drop(api);
    assert_eq!(
        server.finish().await,
        vec![format!("POST {EVICT_WEB_1}"); 3]
    );
    Ok(())
}

fn evict_web_1() -> Exchange {
    post(
        EVICT_WEB_1,
        json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": { "name": "web-1", "namespace": "web" },
            "deleteOptions": { "preconditions": { "uid": WEB_1_UID } }
        }),
    )
}

async fn evict(api: &nodejob_kube::KubeApi) -> nodejob_core::ApiResult<Eviction> {
    api.evict_pod("web", "web-1", WEB_1_UID, None, DryRun::No)
        .await
}

#[tokio::test]
async fn a_429_is_blocked_and_its_message_names_the_budget() -> TestResult {
    let (api, server) = serve(vec![
        // `checkAndDecrement` when the budget allows no disruption.
        evict_web_1().reply_json(
            429,
            &status_with_causes(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                &[(
                    "DisruptionBudget",
                    "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
                )],
            ),
        ),
        // A budget the disruption controller has not observed yet.
        evict_web_1().reply_json(
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
        ),
    ]);
    assert_eq!(
        evict(&api).await?,
        Eviction::Blocked {
            message: "Cannot evict pod as it would violate the pod's disruption budget. The \
                      disruption budget web-pdb needs 2 healthy pods and has 2 currently"
                .into()
        }
    );
    let Eviction::Blocked { message } = evict(&api).await? else {
        panic!("a 429 is Blocked");
    };
    assert!(
        message.ends_with("The disruption budget web-pdb is still being processed by the server."),
        "{message}"
    );
    drop(api);
    assert_eq!(server.finish().await.len(), 2);
    Ok(())
}

#[tokio::test]
async fn a_404_eviction_is_gone() -> TestResult {
    let (api, server) =
        serve(vec![evict_web_1().reply_json(
            404,
            &status(404, "NotFound", "pods \"web-1\" not found"),
        )]);
    assert_eq!(evict(&api).await?, Eviction::Gone);
    drop(api);
    assert_eq!(server.finish().await.len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_pod_under_two_budgets_is_a_transient_error_with_the_apiserver_message() -> TestResult {
    // The handler returns this Status as its result; `finishRequest` turns a non-Success Status
    // into an error with its code (500) and no reason.
    let message = "This pod has more than one PodDisruptionBudget, which the eviction \
                   subresource does not support.";
    let (api, server) = serve(vec![
        evict_web_1().reply_json(500, &status(500, "", message)),
    ]);
    let err = evict(&api).await.expect_err("two budgets");
    assert_eq!(
        (err.kind, err.code, err.message.as_str()),
        (ErrorKind::Transient, 500, message)
    );
    drop(api);
    assert_eq!(server.finish().await.len(), 1);
    Ok(())
}

#[tokio::test]
async fn an_eviction_of_another_pod_under_the_name_is_a_conflict() -> TestResult {
    let message = format!(
        "Operation cannot be fulfilled on pods \"web-1\": Precondition failed: UID in \
         precondition: {WEB_1_UID}, UID in object meta: 0b7e2d55-1111-4c4c-8d8d-3e3e3e3e3e3e"
    );
    let (api, server) = serve(vec![
        evict_web_1().reply_json(409, &status(409, "Conflict", &message)),
        // Forbidden (RBAC, or a negative `disruptionsAllowed`) is an error too, not Blocked.
        evict_web_1().reply_json(
            403,
            &status(
                403,
                "Forbidden",
                "poddisruptionbudget.policy \"web-pdb\" is forbidden: pdb disruptions allowed is \
                 negative",
            ),
        ),
    ]);
    let err = evict(&api).await.expect_err("replaced");
    assert_eq!((err.kind, err.code), (ErrorKind::Conflict, 409));
    assert_eq!(err.message, message);
    let err = evict(&api).await.expect_err("forbidden");
    assert!(err.is_forbidden(), "{err}");
    drop(api);
    assert_eq!(server.finish().await.len(), 2);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn pod_waits_read_on_one_watch_to_the_deletion() -> TestResult {
    let mut terminating = web_1("101");
    terminating["metadata"]["deletionTimestamp"] = json!("2025-06-01T10:05:30Z");
    terminating["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    let mut deleted = terminating.clone();
    deleted["metadata"]["resourceVersion"] = json!("102");
    let (api, server) = serve(vec![watch(WEB_PODS, "web-1", "100").reply(
        200,
        event("MODIFIED", &terminating) + &event("DELETED", &deleted),
    )]);
    let first = api.wait_pod("web", "web-1", Some("100"), WAIT).await?;
    assert!(matches!(first, Change::Applied(_)), "{first:?}");
    assert_eq!(rv(&first), Some("101"));
    let second = api.wait_pod("web", "web-1", Some("101"), WAIT).await?;
    assert!(matches!(second, Change::Deleted(_)), "{second:?}");
    assert_eq!(rv(&second), Some("102"));
    drop(api);
    assert_eq!(server.finish().await, [format!("WATCH {WEB_PODS}")]);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_410_on_a_pod_wait_re_lists_by_name_and_answers_the_missed_change() -> TestResult {
    let (api, server) = serve(vec![
        watch(WEB_PODS, "web-1", "100").reply(200, expired("100", "4000")),
        list_by_name(WEB_PODS, "web-1")
            .reply_json(200, &list("Pod", "v1", "5000", vec![web_1("4800")])),
        watch(WEB_PODS, "web-1", "5000").reply(200, event("MODIFIED", &web_1("5001"))),
    ]);
    let missed = api.wait_pod("web", "web-1", Some("100"), WAIT).await?;
    assert!(matches!(missed, Change::Applied(_)), "{missed:?}");
    assert_eq!(rv(&missed), Some("4800"));
    let next = api.wait_pod("web", "web-1", Some("4800"), WAIT).await?;
    assert_eq!(rv(&next), Some("5001"));
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("WATCH {WEB_PODS}"),
            format!("GET {WEB_PODS}"),
            format!("WATCH {WEB_PODS}")
        ]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_pod_read_here_and_deleted_while_its_watch_expired_is_answered_deleted() -> TestResult {
    let (api, server) = serve(vec![
        get(WEB_1).reply_json(200, &web_1("100")),
        watch(WEB_PODS, "web-1", "100").reply(200, expired("100", "4000")),
        list_by_name(WEB_PODS, "web-1").reply_json(200, &list("Pod", "v1", "5000", vec![])),
    ]);
    api.get_pod("web", "web-1").await?;
    let change = api.wait_pod("web", "web-1", Some("100"), WAIT).await?;
    let Change::Deleted(last) = &change else {
        panic!("expected Deleted, got {change:?}");
    };
    assert_eq!(last.metadata.uid.as_deref(), Some(WEB_1_UID));
    drop(api);
    assert_eq!(server.finish().await.len(), 3);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_listed_pod_deleted_while_its_watch_expired_is_a_410_and_core_reads_it_again()
-> TestResult {
    let (api, server) = serve(vec![
        get(ALL_PODS)
            .query(&[("fieldSelector", "spec.nodeName=node-a")])
            .reply_json(200, &list("Pod", "v1", "99", vec![web_1("100")])),
        watch(WEB_PODS, "web-1", "100").reply(200, expired("100", "4000")),
        // Gone, and never read here: no last state to answer Deleted with.
        list_by_name(WEB_PODS, "web-1").reply_json(200, &list("Pod", "v1", "5000", vec![])),
        // Core's `watch_until` reads it again on the 410: absent, so gone.
        get(WEB_1).reply_json(404, &status(404, "NotFound", "pods \"web-1\" not found")),
    ]);
    let pods = api.list_node_pods("node-a").await?;
    assert!(nodejob_core::wait_pod_gone(&api, &pods[0], WAIT).await?);
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("GET {ALL_PODS}"),
            format!("WATCH {WEB_PODS}"),
            format!("GET {WEB_PODS}"),
            format!("GET {WEB_1}"),
        ]
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn that_410_is_the_callers_and_a_wait_from_now_follows_it() -> TestResult {
    let (api, server) = serve(vec![
        watch(WEB_PODS, "web-1", "100").reply(200, expired("100", "4000")),
        list_by_name(WEB_PODS, "web-1").reply_json(200, &list("Pod", "v1", "5000", vec![])),
        // The caller, having read it absent, waits from now: the list's resourceVersion.
        list_by_name(WEB_PODS, "web-1").reply_json(200, &list("Pod", "v1", "5001", vec![])),
        watch(WEB_PODS, "web-1", "5001").reply(200, event("ADDED", &web_1("5002"))),
    ]);
    let err = api
        .wait_pod("web", "web-1", Some("100"), WAIT)
        .await
        .expect_err("gone, last state unknown");
    assert!(err.is_gone(), "{err}");
    assert!(err.message.contains("pod web/web-1"), "{err}");
    let again = api.wait_pod("web", "web-1", None, WAIT).await?;
    assert_eq!(rv(&again), Some("5002"));
    drop(api);
    assert_eq!(server.finish().await.len(), 4);
    Ok(())
}
