//! One verb, one request: the exact request each `JobApi` verb sends, and how every answer is
//! classified.

mod support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::{
    ApiError, CONTROLLER_UID_LABEL, ErrorKind, JobApi, LOG_LIMIT_BYTES, NodeApi, build,
};
use serde_json::json;
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[tokio::test]
async fn an_exact_delete_sends_foreground_and_the_inspected_uid_and_resource_version() -> TestResult
{
    let mut deleting = job_complete("1234");
    deleting["metadata"]["deletionTimestamp"] = json!("2025-06-01T10:01:00Z");
    deleting["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
    let (api, server) = serve(vec![
        delete(
            JOB_PATH,
            json!({
                "propagationPolicy": "Foreground",
                "preconditions": { "uid": UID, "resourceVersion": "1234" }
            }),
        )
        .reply_json(200, &deleting),
        // Without preconditions (delete whatever holds the name): foreground only.
        delete(JOB_PATH, json!({ "propagationPolicy": "Foreground" })).reply_json(200, &deleting),
    ]);
    let inspected = Preconditions {
        uid: Some(UID.into()),
        resource_version: Some("1234".into()),
    };
    api.delete_job(NS, NAME, Some(&inspected)).await?;
    api.delete_job(NS, NAME, None).await?;
    drop(api);
    assert_eq!(
        server.finish().await,
        [format!("DELETE {JOB_PATH}"), format!("DELETE {JOB_PATH}")]
    );
    Ok(())
}

#[tokio::test]
async fn pods_are_listed_by_the_controller_uid_label() -> TestResult {
    let selector = format!("{CONTROLLER_UID_LABEL}={UID}");
    assert_eq!(
        selector,
        format!("batch.kubernetes.io/controller-uid={UID}")
    );
    let (api, server) = serve(vec![
        get(PODS_PATH)
            .query(&[("labelSelector", &selector)])
            .reply_json(200, &list("Pod", "v1", "1300", vec![pod(0)])),
    ]);
    let pods = api.list_pods(NS, &selector).await?;
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].metadata.name.as_deref(), Some(POD));
    drop(api);
    assert_eq!(server.finish().await, [format!("GET {PODS_PATH}")]);
    Ok(())
}

#[tokio::test]
async fn jobs_are_listed_by_label_selector_and_a_missing_namespace_is_an_empty_list() -> TestResult
{
    let selector = "stratum.ciq.com/upgrade";
    let missing = "/apis/batch/v1/namespaces/no-such-namespace/jobs";
    let (api, server) = serve(vec![
        get(JOBS_PATH)
            .query(&[("labelSelector", selector)])
            .reply_json(
                200,
                &list("Job", "batch/v1", "1400", vec![job_complete("1300")]),
            ),
        // The apiserver lists a namespace that does not exist as an empty one.
        get(missing)
            .query(&[("labelSelector", "")])
            .reply_json(200, &list("Job", "batch/v1", "1400", vec![])),
        get(JOBS_PATH)
            .query(&[("labelSelector", "a in (")])
            .reply_json(
                400,
                &status(
                    400,
                    "BadRequest",
                    "unable to parse requirement: found '(', expected: identifier",
                ),
            ),
        // An empty namespace: every namespace's, on the cluster-wide path (`kubectl get -A`).
        get("/apis/batch/v1/jobs")
            .query(&[("labelSelector", selector)])
            .reply_json(
                200,
                &list("Job", "batch/v1", "1400", vec![job_complete("1300")]),
            ),
    ]);
    let jobs = api.list_jobs(NS, selector).await?;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].metadata.name.as_deref(), Some(NAME));
    assert_eq!(jobs[0].metadata.uid.as_deref(), Some(UID));
    assert!(nodejob_core::succeeded(&jobs[0]));
    assert!(api.list_jobs("no-such-namespace", "").await?.is_empty());
    let err = api.list_jobs(NS, "a in (").await.unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::BadRequest, 400));
    assert_eq!(api.list_jobs("", selector).await?.len(), 1);
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("GET {JOBS_PATH}"),
            format!("GET {missing}"),
            format!("GET {JOBS_PATH}"),
            "GET /apis/batch/v1/jobs".to_string(),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn create_get_log_events_and_node_send_what_the_apiserver_expects() -> TestResult {
    let log_path = format!("{PODS_PATH}/{POD}/log");
    let limit = LOG_LIMIT_BYTES.to_string();
    let failed_create = json!({
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": { "name": "upgrade-node-a.18f2", "namespace": NS, "resourceVersion": "1290" },
        "involvedObject": { "kind": "Job", "namespace": NS, "name": NAME, "uid": UID, "apiVersion": "batch/v1", "resourceVersion": "1200" },
        "reason": "FailedCreate",
        "message": "Error creating: pods \"upgrade-node-a-x7k2p\" is forbidden: violates PodSecurity \"baseline:latest\": privileged",
        "source": { "component": "job-controller" },
        "type": "Warning",
        "count": 1
    });
    let (api, server) = serve(vec![
        post(JOBS_PATH, serde_json::to_value(build(&spec()))?)
            .reply_json(201, &job("1200", json!({}))),
        get(JOB_PATH).reply_json(200, &job_running("1201")),
        get(&log_path)
            .query(&[("container", "upgrade"), ("limitBytes", &limit)])
            .reply(200, "step 1\nstep 2\n"),
        get("/api/v1/namespaces/kube-system/events")
            .query(&[("fieldSelector", &format!("involvedObject.uid={UID}"))])
            .reply_json(200, &list("Event", "v1", "1300", vec![failed_create])),
        get("/api/v1/nodes/node-a").reply_json(200, &node("77", true)),
    ]);
    let created = api.create_job(&build(&spec())).await?;
    assert_eq!(created.metadata.uid.as_deref(), Some(UID));
    let read = api.get_job(NS, NAME).await?;
    assert_eq!(read.metadata.resource_version.as_deref(), Some("1201"));
    assert_eq!(
        api.pod_log(NS, POD, "upgrade", LOG_LIMIT_BYTES).await?,
        "step 1\nstep 2\n"
    );
    let events = api.list_events(NS, UID).await?;
    assert_eq!(events[0].reason.as_deref(), Some("FailedCreate"));
    let node = api.get_node("node-a").await?;
    assert!(nodejob_core::ready(&node));
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("POST {JOBS_PATH}"),
            format!("GET {JOB_PATH}"),
            format!("GET {log_path}"),
            "GET /api/v1/namespaces/kube-system/events".to_string(),
            "GET /api/v1/nodes/node-a".to_string(),
        ]
    );
    Ok(())
}

/// Which verb answers with the error.
#[derive(Clone, Copy, Debug)]
enum Verb {
    Create,
    Get,
    Delete,
}

#[tokio::test]
async fn every_status_code_maps_to_its_kind_with_the_message_verbatim() -> TestResult {
    let pod_security = "pods \"upgrade-node-a-x7k2p\" is forbidden: violates PodSecurity \
        \"baseline:latest\": host namespaces (hostNetwork=true, hostPID=true), privileged \
        (container \"upgrade\" must not set securityContext.privileged=true)";
    // (verb, HTTP status, reason, message, kind)
    let rows: Vec<(Verb, u16, &str, &str, ErrorKind)> = vec![
        (
            Verb::Get,
            404,
            "NotFound",
            "jobs.batch \"upgrade-node-a\" not found",
            ErrorKind::NotFound,
        ),
        // No reason: kube's `Status::is_not_found()` would say false; the code decides.
        (
            Verb::Get,
            404,
            "",
            "the server could not find the requested resource",
            ErrorKind::NotFound,
        ),
        (
            Verb::Create,
            409,
            "AlreadyExists",
            "jobs.batch \"upgrade-node-a\" already exists",
            ErrorKind::AlreadyExists,
        ),
        (
            Verb::Delete,
            409,
            "Conflict",
            "Operation cannot be fulfilled on jobs.batch \"upgrade-node-a\": Precondition failed: \
             UID in precondition: 5c3b0c1e-8f0a-4a53-9d1e-2f6f1a0b7c11, UID in object meta: \
             0b7e2d55-1111-4c4c-8d8d-3e3e3e3e3e3e",
            ErrorKind::Conflict,
        ),
        (
            Verb::Delete,
            409,
            "",
            "conflict without a reason",
            ErrorKind::Conflict,
        ),
        (
            Verb::Get,
            410,
            "Expired",
            "too old resource version: 100 (5000)",
            ErrorKind::Gone,
        ),
        (
            Verb::Create,
            403,
            "Forbidden",
            pod_security,
            ErrorKind::Forbidden,
        ),
        (
            Verb::Get,
            403,
            "Forbidden",
            "jobs.batch \"upgrade-node-a\" is forbidden: User \"system:serviceaccount:ops:upgrader\" \
             cannot get resource \"jobs\" in API group \"batch\" in the namespace \"kube-system\"",
            ErrorKind::Forbidden,
        ),
        (
            Verb::Create,
            422,
            "Invalid",
            "Job.batch \"upgrade-node-a\" is invalid: spec.template.spec.containers[0].image: \
             Required value",
            ErrorKind::Invalid,
        ),
        (
            Verb::Get,
            400,
            "BadRequest",
            "resourceVersion: Invalid value",
            ErrorKind::BadRequest,
        ),
        (
            Verb::Get,
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
            ErrorKind::Transient,
        ),
        (
            Verb::Get,
            500,
            "InternalError",
            "Internal error occurred: etcdserver: leader changed",
            ErrorKind::Transient,
        ),
        (
            Verb::Get,
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
            ErrorKind::Transient,
        ),
        (
            Verb::Get,
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout",
            ErrorKind::Transient,
        ),
        (
            Verb::Get,
            401,
            "Unauthorized",
            "Unauthorized",
            ErrorKind::Other,
        ),
    ];
    let mut script = Vec::new();
    for (verb, code, reason, message, _) in &rows {
        let exchange = match verb {
            Verb::Create => post(JOBS_PATH, serde_json::to_value(build(&spec()))?),
            Verb::Get => get(JOB_PATH),
            Verb::Delete => delete(JOB_PATH, json!({ "propagationPolicy": "Foreground" })),
        };
        script.push(exchange.reply_json(*code, &status(*code, reason, message)));
    }
    // Not a Status at all (a proxy's answer): the code decides, the text is the message.
    script.push(get(JOB_PATH).reply(
        503,
        "upstream connect error or disconnect/reset before headers",
    ));
    script.push(get(JOB_PATH).reply(502, "<html><body>Bad Gateway</body></html>"));
    // No answer: the connection broke.
    script.push(get(JOB_PATH).fail("connection refused"));
    let (api, server) = serve(script);

    for (i, (verb, code, _, message, kind)) in rows.iter().enumerate() {
        let err = call(&api, *verb).await;
        assert_eq!(
            (err.kind, err.code, err.message.as_str()),
            (*kind, *code, *message),
            "row {i}: {verb:?} answered {code}"
        );
    }
    let err = call(&api, Verb::Get).await;
    assert_eq!(
        (err.kind, err.code, err.message.as_str()),
        (
            ErrorKind::Transient,
            503,
            "upstream connect error or disconnect/reset before headers"
        )
    );
    let err = call(&api, Verb::Get).await;
    assert_eq!((err.kind, err.code), (ErrorKind::Other, 502));
    let err = call(&api, Verb::Get).await;
    assert_eq!((err.kind, err.code), (ErrorKind::Transient, 0));
    assert!(err.message.contains("connection refused"), "{err}");
    drop(api);
    assert_eq!(server.finish().await.len(), rows.len() + 3);
    Ok(())
}

async fn call(api: &nodejob_kube::KubeApi, verb: Verb) -> ApiError {
    let answer = match verb {
        Verb::Create => api.create_job(&build(&spec())).await.map(drop),
        Verb::Get => api.get_job(NS, NAME).await.map(drop),
        Verb::Delete => api.delete_job(NS, NAME, None).await,
    };
    answer.expect_err("the script answers an error")
}

#[tokio::test]
async fn a_log_the_apiserver_cannot_fetch_from_the_kubelet_is_transient_with_its_message()
-> TestResult {
    let log_path = format!("{PODS_PATH}/{POD}/log");
    let limit = LOG_LIMIT_BYTES.to_string();
    // What the apiserver answers when it cannot dial the kubelet: an error it did not classify,
    // so code 500 and no reason, the dial error as the message.
    let message = "Get \"https://10.0.3.17:10250/containerLogs/kube-system/upgrade-node-a-x7k2p/\
                   upgrade?limitBytes=4194304\": dial tcp 10.0.3.17:10250: connect: connection \
                   refused";
    let (api, server) = serve(vec![
        get(&log_path)
            .query(&[("container", "upgrade"), ("limitBytes", &limit)])
            .reply_json(500, &status(500, "", message)),
    ]);
    let err = api
        .pod_log(NS, POD, "upgrade", LOG_LIMIT_BYTES)
        .await
        .expect_err("the kubelet is unreachable");
    assert_eq!(err, ApiError::transient(500, message));
    assert!(err.is_retryable());
    drop(api);
    assert_eq!(server.finish().await, [format!("GET {log_path}")]);
    Ok(())
}

#[tokio::test]
async fn a_log_longer_than_the_limit_is_cut_on_a_character_boundary_below_it() -> TestResult {
    let log_path = format!("{PODS_PATH}/{POD}/log");
    // The kubelet's cut may overshoot the limit and fall inside a character: "hé" is 3 bytes,
    // and with a limit of 2 the "é" (2 bytes) cannot be kept whole.
    let (api, server) = serve(vec![
        get(&log_path)
            .query(&[("container", "upgrade"), ("limitBytes", "2")])
            .reply(200, "hé"),
    ]);
    assert_eq!(api.pod_log(NS, POD, "upgrade", 2).await?, "h");
    drop(api);
    assert_eq!(server.finish().await, [format!("GET {log_path}")]);
    Ok(())
}
