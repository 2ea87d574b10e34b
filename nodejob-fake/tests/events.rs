//! `JobApi::create_event`: created as the apiserver creates core/v1 Events (its namespace, its
//! rules for an Event's placement and fields, `generateName`, the name taken), found again by
//! `list_events`; recorded, hooked and faulted like every verb.

mod common;

use std::sync::{Arc, Mutex};

use common::{TestResult, rv};
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use nodejob_core::{ApiError, ErrorKind, EventType, JobApi, node_event};
use nodejob_fake::{Clock, FakeCluster, Times, Verb};

const SYSTEM: &str = "kube-system";

/// A step Event on `node` as a driver records it, in `namespace`.
fn step(cluster: &FakeCluster, namespace: &str, node: &str) -> Event {
    node_event(
        namespace,
        node,
        EventType::Normal,
        "NodejobUpgradeCordon",
        "cordoned for the upgrade to v1.38.0",
        "nodejob-upgrade",
        cluster.wall_time(),
    )
}

/// `event` with the name `name` instead of its `generateName`.
fn named(mut event: Event, name: &str) -> Event {
    event.metadata.name = Some(name.into());
    event.metadata.generate_name = None;
    event
}

/// An Event without `eventTime` (client-go's recorder's kind) about `involved` in `namespace`.
fn legacy(namespace: &str, name: &str, involved: ObjectReference) -> Event {
    Event {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        involved_object: involved,
        reason: Some("Started".into()),
        message: Some("started".into()),
        type_: Some("Normal".into()),
        ..Event::default()
    }
}

fn node_ref(node: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.into()),
        uid: Some(node.into()),
        ..ObjectReference::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_node_event_is_named_from_its_prefix_stored_and_found_by_the_node_name() -> TestResult {
    let cluster = FakeCluster::with_seed(3);
    let sent = step(&cluster, SYSTEM, "node-a");
    let before: u64 = cluster.resource_version().parse()?;
    let created = cluster.create_event(&sent).await?;

    let name = created.metadata.name.clone().unwrap_or_default();
    let suffix = name.strip_prefix("node-a.").unwrap_or_default();
    assert_eq!(suffix.len(), 5, "{name}: the prefix and 5 drawn characters");
    assert!(
        suffix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
        "{name}"
    );
    assert_eq!(created.metadata.uid.as_ref().map(String::len), Some(36));
    assert_eq!(rv(&created.metadata), before + 1, "one write");
    assert_eq!(
        created
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        Some("2026-01-01T00:00:00Z".to_string())
    );
    assert_eq!(
        created.metadata.generation, None,
        "Events have no generation"
    );
    assert_eq!(created.metadata.namespace.as_deref(), Some(SYSTEM));
    // Everything but the server's metadata is kept as sent.
    let mut as_sent = created.clone();
    as_sent.metadata = sent.metadata.clone();
    assert_eq!(as_sent, sent);

    assert_eq!(
        cluster.list_events(SYSTEM, "node-a").await?,
        std::slice::from_ref(&created)
    );
    assert!(cluster.list_events("default", "node-a").await?.is_empty());
    assert!(cluster.list_events(SYSTEM, "node-b").await?.is_empty());
    assert_eq!(cluster.events(SYSTEM), std::slice::from_ref(&created));

    // A second step gets a name of its own; both are listed.
    let second = cluster
        .create_event(&step(&cluster, SYSTEM, "node-a"))
        .await?;
    assert_ne!(second.metadata.name, created.metadata.name);
    assert_eq!(cluster.list_events(SYSTEM, "node-a").await?.len(), 2);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_drawn_name_is_a_function_of_the_seed() -> TestResult {
    let name = |seed| async move {
        let cluster = FakeCluster::with_seed(seed);
        let event = step(&cluster, SYSTEM, "node-a");
        cluster.create_event(&event).await.map(|e| e.metadata.name)
    };
    assert_eq!(name(5).await?, name(5).await?);
    assert_ne!(name(5).await?, name(6).await?);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn refusals_as_the_apiserver_answers_them() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_namespace("upgrade");
    let event = |namespace: &str| named(step(&cluster, namespace, "node-a"), "node-a.step");
    let with = |f: &dyn Fn(&mut Event)| {
        let mut e = event(SYSTEM);
        f(&mut e);
        e
    };
    let invalid = |detail: &str| {
        (
            ErrorKind::Invalid,
            422,
            format!(r#"Event "node-a.step" is invalid: {detail}"#),
        )
    };
    let mismatch = r#"involvedObject.namespace: Invalid value: "": does not match event.namespace"#;
    let table: Vec<(Event, (ErrorKind, u16, String))> = vec![
        (
            event("missing"),
            (
                ErrorKind::NotFound,
                404,
                r#"namespaces "missing" not found"#.into(),
            ),
        ),
        // An Event with eventTime about a Node: only in default or kube-system.
        (event("upgrade"), invalid(mismatch)),
        // Without eventTime: only in default.
        (
            with(&|e| e.event_time = None),
            invalid(mismatch),
        ),
        (
            legacy(
                "default",
                "node-a.step",
                ObjectReference {
                    namespace: Some(SYSTEM.into()),
                    ..node_ref("node-a")
                },
            ),
            invalid(&format!(
                r#"involvedObject.namespace: Invalid value: "{SYSTEM}": does not match event.namespace"#
            )),
        ),
        (
            with(&|e| {
                e.reporting_instance = None;
                e.action = Some(String::new());
            }),
            invalid("[reportingInstance: Required value, action: Required value]"),
        ),
        (
            with(&|e| e.reporting_component = Some("Nodejob Upgrade".into())),
            invalid(
                r#"reportingComponent: Invalid value: "Nodejob Upgrade": name part must consist of alphanumeric characters"#,
            ),
        ),
        (
            with(&|e| e.reason = Some("R".repeat(129))),
            invalid(r#"reason: Invalid value: "": can have at most 128 characters"#),
        ),
        (
            with(&|e| e.message = Some("m".repeat(1025))),
            invalid(r#"message: Invalid value: "": can have at most 1024 characters"#),
        ),
        (
            with(&|e| e.metadata.name = None),
            (
                ErrorKind::Invalid,
                422,
                r#"Event "" is invalid: metadata.name: Required value: name or generateName is required"#
                    .into(),
            ),
        ),
        (
            with(&|e| e.metadata.name = Some("node-a/step".into())),
            (
                ErrorKind::Invalid,
                422,
                r#"Event "node-a/step" is invalid: metadata.name: Invalid value: "node-a/step": may not contain '/'"#
                    .into(),
            ),
        ),
        (
            with(&|e| e.metadata.resource_version = Some("7".into())),
            (
                ErrorKind::Transient,
                500,
                "resourceVersion should not be set on objects to be created".into(),
            ),
        ),
    ];
    for (event, (kind, code, message)) in table {
        let before = cluster.resource_version();
        let err = cluster.create_event(&event).await.unwrap_err();
        assert_eq!((err.kind, err.code), (kind, code), "{err}");
        assert!(err.message.starts_with(&message), "{err}\nwant {message}");
        assert_eq!(
            cluster.resource_version(),
            before,
            "a refusal writes nothing"
        );
    }

    // What the apiserver does not check: an Event without eventTime about a Node in default,
    // and one whose involvedObject names no kind or name.
    cluster
        .create_event(&legacy("default", "node-a.legacy", node_ref("node-a")))
        .await?;
    cluster
        .create_event(&legacy("default", "nobody", ObjectReference::default()))
        .await?;
    // A message at the limit, in default as in kube-system.
    let mut full = named(step(&cluster, "default", "node-a"), "node-a.full");
    full.message = Some("m".repeat(1024));
    cluster.create_event(&full).await?;

    let taken = cluster.create_event(&event(SYSTEM)).await;
    assert!(taken.is_ok(), "{taken:?}");
    let err = cluster.create_event(&event(SYSTEM)).await.unwrap_err();
    assert_eq!(
        (err.kind, err.code, err.message.as_str()),
        (
            ErrorKind::AlreadyExists,
            409,
            r#"events "node-a.step" already exists"#
        )
    );
    assert_eq!(cluster.list_events("default", "node-a").await?.len(), 2);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn create_event_is_recorded_hooked_and_faulted() -> TestResult {
    let cluster = FakeCluster::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = seen.clone();
    cluster.before(Verb::CreateEvent, move |c| {
        hook_seen.lock().unwrap().push(c.events(SYSTEM).len());
    });
    cluster.fail(
        Verb::CreateEvent,
        ApiError::transient(503, "unavailable"),
        Times::Once,
    );
    let event = step(&cluster, SYSTEM, "node-a");
    let err = cluster.create_event(&event).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(
        cluster.events(SYSTEM).is_empty(),
        "the fault answered before the store"
    );
    cluster.create_event(&event).await?;
    assert_eq!(
        *seen.lock().unwrap(),
        [0],
        "the hook ran once, before the first call"
    );
    assert_eq!(cluster.count(Verb::CreateEvent), 2);
    let calls = cluster.calls();
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.verb, c.namespace.as_str(), c.name.as_str(), c.error))
            .collect::<Vec<_>>(),
        [
            (
                Verb::CreateEvent,
                SYSTEM,
                "node-a.",
                Some(ErrorKind::Transient)
            ),
            (Verb::CreateEvent, SYSTEM, "node-a.", None),
        ]
    );
    assert_eq!(Verb::CreateEvent.method(), "create_event");
    assert_eq!(Verb::CreateEvent.api(), "JobApi");
    Ok(())
}

/// The drivers' clock: an Event's times are the cluster's wall clock.
#[tokio::test(start_paused = true)]
async fn event_times_come_from_the_wall_clock_given() -> TestResult {
    let cluster = FakeCluster::new();
    cluster
        .sleep(std::time::Duration::from_millis(61_500))
        .await;
    let created = cluster
        .create_event(&step(&cluster, SYSTEM, "node-a"))
        .await?;
    let first = created.first_timestamp.map(|t| t.0);
    assert_eq!(
        first,
        Some(
            "2026-01-01T00:01:01Z"
                .parse::<Timestamp>()
                .map_err(|e| e.to_string())?
        )
    );
    assert_eq!(
        created.event_time.map(|t| t.0.to_string()),
        Some("2026-01-01T00:01:01.5Z".to_string())
    );
    Ok(())
}
