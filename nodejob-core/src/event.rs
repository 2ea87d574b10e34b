//! Events about a Node, written so that `kubectl describe node` lists them: the rolling upgrade
//! records each of its steps on the Node this way.
//!
//! kubectl's node describer (`NodeDescriber.Describe`, `k8s.io/kubectl/pkg/describe`) searches
//! the Events of **every** namespace with the field selector `involvedObject.kind=Node`,
//! `involvedObject.name=<node>`, `involvedObject.namespace=` (empty: a Node has none) and
//! `involvedObject.uid`, once with the Node's UID and once with its **name** (the kubelet's
//! convention, `ref.UID = types.UID(ref.Name)`). [`node_event`] uses the name, which the caller
//! knows without a read and which stays valid across a Node deleted and registered again.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// The most bytes of `message` the apiserver takes in an Event that has an `eventTime`:
/// `NoteLengthLimit` (1024) in `legacyValidateEvent`, `pkg/apis/core/validation/events.go`
/// (Kubernetes v1.37), checked with Go's `len`, which counts bytes. A longer message is
/// refused (422 `message: Invalid value: "": can have at most 1024 characters`), so
/// [`node_event`] cuts it.
pub const MESSAGE_LIMIT: usize = 1024;

/// An Event's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventType {
    /// `Normal`: a step as planned.
    Normal,
    /// `Warning`: something a reader of `kubectl describe node` should look at.
    Warning,
}

impl EventType {
    /// The value of the Event's `type` field.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A core/v1 Event about Node `node`, to create in `namespace` with
/// [`JobApi::create_event`](crate::JobApi::create_event), that `kubectl describe node <node>`
/// lists.
///
/// - `metadata.generateName` is `<node>.` and no name is set: the apiserver draws a unique
///   one (5 characters after the prefix, the prefix cut to 58), so two steps never collide.
/// - `involvedObject` is `{apiVersion: v1, kind: Node, name: node, uid: node}`, without a
///   namespace (see the module docs for why the UID is the name).
/// - `reason`, `message` (cut to [`MESSAGE_LIMIT`] bytes on a character boundary), `type`.
/// - `count: 1`, `firstTimestamp` = `lastTimestamp` = `at` in whole seconds (all that
///   `Time` carries on the wire), and `eventTime` = `at` to the microsecond.
/// - `source.component`, `reportingComponent` and `reportingInstance` are `component`;
///   `action` is `reason`.
///
/// # Why `eventTime` is set
/// The apiserver (`legacyValidateEvent`) places an Event about an object without a namespace
/// (a Node) by whether it has an `eventTime`: without one, only in `default`; with one, in
/// `default` or `kube-system`, and then `reportingComponent` (a qualified name),
/// `reportingInstance`, `action` and `reason` are required (each at most 128 characters) and
/// `message` is limited. The drivers write their Events in their own namespace, `kube-system`
/// (`deploy/rbac.yaml`), hence the `eventTime` and the fields it requires.
///
/// # Assumptions
/// `namespace` is `kube-system` or `default` (any other answers 422 Invalid,
/// `involvedObject.namespace: Invalid value: "": does not match event.namespace`);
/// `component` is a qualified name (`nodejob-upgrade`) and `reason` a short CamelCase word
/// (`NodejobUpgradeCordon`), neither longer than 128 characters.
pub fn node_event(
    namespace: &str,
    node: &str,
    kind: EventType,
    reason: &str,
    message: &str,
    component: &str,
    at: Timestamp,
) -> Event {
    let seconds = Timestamp::from_second(at.as_second()).unwrap_or(at);
    let micros = Timestamp::from_microsecond(at.as_microsecond()).unwrap_or(at);
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{node}.")),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Node".to_string()),
            name: Some(node.to_string()),
            uid: Some(node.to_string()),
            ..ObjectReference::default()
        },
        reason: Some(reason.to_string()),
        message: Some(cut(message, MESSAGE_LIMIT).to_string()),
        type_: Some(kind.as_str().to_string()),
        count: Some(1),
        first_timestamp: Some(Time(seconds)),
        last_timestamp: Some(Time(seconds)),
        event_time: Some(MicroTime(micros)),
        source: Some(EventSource {
            component: Some(component.to_string()),
            host: None,
        }),
        action: Some(reason.to_string()),
        reporting_component: Some(component.to_string()),
        reporting_instance: Some(component.to_string()),
        ..Event::default()
    }
}

/// The longest prefix of `text` of at most `limit` bytes that ends on a character boundary.
fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
