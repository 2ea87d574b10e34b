//! `JobApi::create_event` on the wire: one `POST` of the Event to its namespace's collection,
//! the body exactly what `node_event` built, and the apiserver's refusals classified.

mod support;

use k8s_openapi::jiff::Timestamp;
use nodejob_core::{ErrorKind, EventType, JobApi, node_event};
use serde_json::{Value, json};
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const EVENTS: &str = "/api/v1/namespaces/kube-system/events";

fn cordon(namespace: Option<&str>) -> Result<k8s_openapi::api::core::v1::Event, String> {
    let at: Timestamp = "2026-03-04T05:06:07.123456789Z"
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut event = node_event(
        namespace.unwrap_or(NS),
        "node-a",
        EventType::Normal,
        "NodejobUpgradeCordon",
        "cordoned for the upgrade to v1.38.0",
        "nodejob-upgrade",
        at,
    );
    event.metadata.namespace = namespace.map(String::from);
    Ok(event)
}

/// The body `node_event` sends, field by field, with `namespace` in its metadata if any.
fn sent(namespace: Option<&str>) -> Value {
    let mut body = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": { "generateName": "node-a." },
        "involvedObject": { "apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "node-a" },
        "reason": "NodejobUpgradeCordon",
        "message": "cordoned for the upgrade to v1.38.0",
        "type": "Normal",
        "count": 1,
        "firstTimestamp": "2026-03-04T05:06:07Z",
        "lastTimestamp": "2026-03-04T05:06:07Z",
        "eventTime": "2026-03-04T05:06:07.123456Z",
        "source": { "component": "nodejob-upgrade" },
        "action": "NodejobUpgradeCordon",
        "reportingComponent": "nodejob-upgrade",
        "reportingInstance": "nodejob-upgrade"
    });
    if let Some(namespace) = namespace {
        body["metadata"]["namespace"] = json!(namespace);
    }
    body
}

/// What the apiserver answers: the Event as stored, named and with its server metadata.
fn stored() -> Value {
    let mut event = sent(Some(NS));
    event["metadata"]["name"] = json!("node-a.x7k2p");
    event["metadata"]["uid"] = json!("2f1d6c3a-9b8e-4d7c-a6f5-0e1d2c3b4a59");
    event["metadata"]["resourceVersion"] = json!("1400");
    event["metadata"]["creationTimestamp"] = json!("2026-03-04T05:06:07Z");
    event
}

#[tokio::test]
async fn a_node_event_is_posted_to_its_namespace_as_built() -> TestResult {
    let (api, server) = serve(vec![
        post(EVENTS, sent(Some(NS))).reply_json(201, &stored()),
        // An Event that names no namespace goes to the client's default one.
        post("/api/v1/namespaces/default/events", sent(None)).reply_json(201, &stored()),
    ]);
    let created = api.create_event(&cordon(Some(NS))?).await?;
    assert_eq!(created.metadata.name.as_deref(), Some("node-a.x7k2p"));
    assert_eq!(
        created.metadata.uid.as_deref(),
        Some("2f1d6c3a-9b8e-4d7c-a6f5-0e1d2c3b4a59")
    );
    assert_eq!(created.involved_object, cordon(Some(NS))?.involved_object);
    api.create_event(&cordon(None)?).await?;
    drop(api);
    assert_eq!(
        server.finish().await,
        [
            format!("POST {EVENTS}"),
            "POST /api/v1/namespaces/default/events".to_string()
        ]
    );
    Ok(())
}

#[tokio::test]
async fn refusals_keep_their_kind_and_message() -> TestResult {
    let invalid = "Event \"node-a.x7k2p\" is invalid: involvedObject.namespace: Invalid value: \
                   \"\": does not match event.namespace";
    let forbidden = "events is forbidden: User \"system:serviceaccount:kube-system:nodejob\" \
                     cannot create resource \"events\" in API group \"\" in the namespace \
                     \"kube-system\"";
    let missing = "namespaces \"kube-system\" not found";
    let taken = "events \"node-a.x7k2p\" already exists";
    let rows = [
        (422, "Invalid", invalid, ErrorKind::Invalid),
        (403, "Forbidden", forbidden, ErrorKind::Forbidden),
        (404, "NotFound", missing, ErrorKind::NotFound),
        (409, "AlreadyExists", taken, ErrorKind::AlreadyExists),
    ];
    let script = rows
        .iter()
        .map(|(code, reason, message, _)| {
            post(EVENTS, sent(Some(NS))).reply_json(*code, &status(*code, reason, message))
        })
        .collect();
    let (api, server) = serve(script);
    for (code, _, message, kind) in rows {
        let err = api
            .create_event(&cordon(Some(NS))?)
            .await
            .expect_err("refused");
        assert_eq!(
            (err.kind, err.code, err.message.as_str()),
            (kind, code, message)
        );
    }
    drop(api);
    assert_eq!(server.finish().await.len(), 4);
    Ok(())
}
