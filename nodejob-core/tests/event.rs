//! `node_event`: the exact Event a driver records on a Node, pinned field by field, and the
//! cut of a long message.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use nodejob_core::event::MESSAGE_LIMIT;
use nodejob_core::{EventType, node_event};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A timestamp from RFC 3339 text.
fn at(text: &str) -> Result<Timestamp, String> {
    text.parse().map_err(|e| format!("{text}: {e}"))
}

#[test]
fn a_node_event_is_pinned_field_by_field() -> TestResult {
    let when = at("2026-03-04T05:06:07.123456789Z")?;
    let event = node_event(
        "kube-system",
        "node-a",
        EventType::Normal,
        "NodejobUpgradeCordon",
        "cordoned for the upgrade to v1.38.0",
        "nodejob-upgrade",
        when,
    );
    let want = Event {
        metadata: ObjectMeta {
            generate_name: Some("node-a.".into()),
            namespace: Some("kube-system".into()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some("node-a".into()),
            uid: Some("node-a".into()),
            namespace: None,
            field_path: None,
            resource_version: None,
        },
        reason: Some("NodejobUpgradeCordon".into()),
        message: Some("cordoned for the upgrade to v1.38.0".into()),
        type_: Some("Normal".into()),
        count: Some(1),
        first_timestamp: Some(Time(at("2026-03-04T05:06:07Z")?)),
        last_timestamp: Some(Time(at("2026-03-04T05:06:07Z")?)),
        event_time: Some(MicroTime(at("2026-03-04T05:06:07.123456Z")?)),
        source: Some(EventSource {
            component: Some("nodejob-upgrade".into()),
            host: None,
        }),
        action: Some("NodejobUpgradeCordon".into()),
        reporting_component: Some("nodejob-upgrade".into()),
        reporting_instance: Some("nodejob-upgrade".into()),
        related: None,
        series: None,
    };
    assert_eq!(event, want);
    Ok(())
}

#[test]
fn a_warning_says_so() {
    let event = node_event(
        "default",
        "node-b",
        EventType::Warning,
        "NodejobUpgradeFailed",
        "exit 3",
        "nodejob-upgrade",
        Timestamp::UNIX_EPOCH,
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(EventType::Warning.to_string(), "Warning");
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(event.metadata.name, None, "the apiserver names it");
}

#[test]
fn a_long_message_is_cut_to_the_limit_on_a_character_boundary() {
    let event = |message: &str| {
        node_event(
            "kube-system",
            "node-a",
            EventType::Warning,
            "NodejobUpgradeFailed",
            message,
            "nodejob-upgrade",
            Timestamp::UNIX_EPOCH,
        )
        .message
        .unwrap_or_default()
    };
    assert_eq!(MESSAGE_LIMIT, 1024);
    let exact = "a".repeat(MESSAGE_LIMIT);
    assert_eq!(event(&exact), exact, "a message at the limit is kept whole");
    let long = "b".repeat(MESSAGE_LIMIT + 1);
    assert_eq!(event(&long), "b".repeat(MESSAGE_LIMIT));
    // "é" is 2 bytes: one starts at byte 1023 and would end past the limit, so it goes whole.
    let straddling = format!("{}{}", "c".repeat(MESSAGE_LIMIT - 1), "é".repeat(3));
    let cut = event(&straddling);
    assert_eq!(cut.len(), MESSAGE_LIMIT - 1);
    assert_eq!(cut, "c".repeat(MESSAGE_LIMIT - 1));
    // A 4-byte character that ends exactly at the limit is kept.
    let fits = format!("{}{}x", "d".repeat(MESSAGE_LIMIT - 4), "🦀");
    assert_eq!(
        event(&fits),
        format!("{}{}", "d".repeat(MESSAGE_LIMIT - 4), "🦀")
    );
}

#[test]
fn a_long_node_name_keeps_its_generate_name_whole() {
    // The apiserver cuts the prefix to 58 characters when it draws the name; the builder
    // sends the prefix as it is.
    let node = format!("{}.example.com", "n".repeat(200));
    let event = node_event(
        "kube-system",
        &node,
        EventType::Normal,
        "NodejobUpgradeUncordon",
        "",
        "nodejob-upgrade",
        Timestamp::UNIX_EPOCH,
    );
    assert_eq!(event.metadata.generate_name, Some(format!("{node}.")));
    assert_eq!(event.involved_object.uid.as_deref(), Some(node.as_str()));
}
