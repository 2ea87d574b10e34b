//! The apiserver's registries for the objects other than Jobs and Pods: creating workloads and
//! PodDisruptionBudgets (as an administrator's `kubectl apply` would), patching Nodes, the
//! Lease verbs, and creating Events. Each works on the store alone.

use std::time::Duration;

use k8s_openapi::Metadata;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::{ApiError, ApiResult, NodeChange};

use crate::store::{Key, Store, modified_conflict, node_not_found};
use crate::timing::stamp;
use crate::validation::{
    invalid_message, label_errors, name_errors, path_segment_errors, qualified_name_errors,
};

/// The resource of a kind, as the apiserver's messages name it.
pub(crate) struct Resource {
    /// `deployments.apps`, for `AlreadyExists` and `NotFound`.
    pub(crate) plural: &'static str,
    /// `Deployment.apps`, for `Invalid`.
    pub(crate) kind: &'static str,
}

pub(crate) const DEPLOYMENTS: Resource = Resource {
    plural: "deployments.apps",
    kind: "Deployment.apps",
};
pub(crate) const REPLICA_SETS: Resource = Resource {
    plural: "replicasets.apps",
    kind: "ReplicaSet.apps",
};
pub(crate) const DAEMON_SETS: Resource = Resource {
    plural: "daemonsets.apps",
    kind: "DaemonSet.apps",
};
pub(crate) const BUDGETS: Resource = Resource {
    plural: "poddisruptionbudgets.policy",
    kind: "PodDisruptionBudget.policy",
};
const LEASES: Resource = Resource {
    plural: "leases.coordination.k8s.io",
    kind: "Lease.coordination.k8s.io",
};

/// The namespace an object goes to (`default` when its metadata names none).
fn namespace_of(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_else(|| "default".into())
}

/// A create's checks and system fields: the namespace exists (404, namespace lifecycle
/// admission); then `rest.BeforeCreate`: `generateName`, name and labels valid, with
/// `more_errors` of the kind's own validation (422); then storage: no resourceVersion (500),
/// the name free (409, by `taken`). Sets UID, `creationTimestamp`, `generation: 1`. Not
/// stored.
pub(crate) fn prepare_create<T: Metadata<Ty = ObjectMeta> + Clone>(
    store: &mut Store,
    resource: &Resource,
    object: &T,
    more_errors: Vec<String>,
    taken: impl Fn(&Store, &Key) -> bool,
    now: Duration,
) -> ApiResult<T> {
    let mut object = object.clone();
    let namespace = namespace_of(object.metadata());
    store.require_namespace(&namespace)?;
    let meta = object.metadata_mut();
    let mut name = meta.name.clone().unwrap_or_default();
    let prefix = meta.generate_name.clone().filter(|p| !p.is_empty());
    if let Some(prefix) = prefix.filter(|_| name.is_empty()) {
        name = store.generate_name(&prefix);
    }
    let mut errs = name_errors("metadata.name", &name);
    errs.extend(label_errors("metadata.labels", meta.labels.as_ref()));
    errs.extend(more_errors);
    if !errs.is_empty() {
        return Err(ApiError::invalid(invalid_message(
            resource.kind,
            &name,
            &errs,
        )));
    }
    if meta
        .resource_version
        .as_deref()
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::transient(
            500,
            "resourceVersion should not be set on objects to be created",
        ));
    }
    if taken(store, &(namespace.clone(), name.clone())) {
        return Err(ApiError::already_exists(format!(
            "{} \"{name}\" already exists",
            resource.plural
        )));
    }
    meta.name = Some(name);
    meta.namespace = Some(namespace);
    meta.uid = Some(store.uid());
    meta.creation_timestamp = Some(stamp(now));
    meta.generation = Some(1);
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    Ok(object)
}

/// `PATCH /api/v1/nodes/{name}` (a JSON merge patch carrying `metadata.resourceVersion`):
/// 404 for a missing node; 409 when the node is at another resourceVersion (none given: no
/// precondition); `changes` applied in order; a patch that changes nothing writes nothing.
pub(crate) fn patch_node(
    store: &mut Store,
    name: &str,
    resource_version: &str,
    changes: &[NodeChange],
) -> ApiResult<Node> {
    let node = store
        .nodes
        .get(name)
        .cloned()
        .ok_or_else(|| node_not_found(name))?;
    let current = node
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or_default();
    if !resource_version.is_empty() && resource_version != current {
        return Err(modified_conflict("nodes", name));
    }
    let mut patched = node.clone();
    for change in changes {
        change.apply(&mut patched);
    }
    if patched == node {
        return Ok(node);
    }
    // The update's validation (`ValidateNodeUpdate` -> `ValidateObjectMetaUpdate`): the
    // labels as patched.
    let errs = label_errors("metadata.labels", patched.metadata.labels.as_ref());
    if !errs.is_empty() {
        return Err(ApiError::invalid(invalid_message("Node", name, &errs)));
    }
    Ok(store.write_node(patched))
}

/// `PATCH nodes/{name}/status` with a strategic-merge patch of `status.conditions`: each
/// condition merged into the one of its `type` (the list's `patchMergeKey`; the fields the
/// patch sets replace, the others stay, as a strategic merge of a list item does) or added,
/// every other condition kept, in the order [`merge_by_type`] says. With `resource_version`, Conflict
/// unless it is the node's (a patch's `metadata.resourceVersion` is a precondition, as for
/// [`patch_node`]). A patch that changes nothing writes nothing (no new resourceVersion), as
/// the apiserver skips a no-op update. `changes` to the metadata (annotations, labels) are
/// applied in the same write, as the status subresource keeps the metadata a patch sends; a
/// change to the spec is refused (Invalid), as the trait says.
pub(crate) fn patch_node_conditions(
    store: &mut Store,
    name: &str,
    resource_version: Option<&str>,
    changes: &[NodeChange],
    conditions: &[NodeCondition],
) -> ApiResult<Node> {
    if let Some(change) = changes.iter().find(|c| !c.to_metadata()) {
        return Err(ApiError::invalid(format!(
            "a patch of node {name}'s status cannot carry {change:?}: the status subresource \
             resets the spec"
        )));
    }
    let node = store
        .nodes
        .get(name)
        .cloned()
        .ok_or_else(|| node_not_found(name))?;
    let current = node
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or_default();
    if resource_version.is_some_and(|rv| !rv.is_empty() && rv != current) {
        return Err(modified_conflict("nodes", name));
    }
    let mut patched = node.clone();
    for change in changes {
        change.apply(&mut patched);
    }
    let errs = label_errors("metadata.labels", patched.metadata.labels.as_ref());
    if !errs.is_empty() {
        return Err(ApiError::invalid(invalid_message("Node", name, &errs)));
    }
    let status = patched.status.get_or_insert_default();
    let live = status.conditions.take().unwrap_or_default();
    status.conditions = Some(merge_by_type(&live, conditions));
    if patched == node {
        return Ok(node);
    }
    Ok(store.write_node(patched))
}

/// A strategic merge of `patch` into the `live` conditions, as the apiserver makes it for a list
/// whose `patchMergeKey` is `type` and whose patch carries no `$setElementOrder`
/// (`mergeSlice`, then `normalizeElementOrder` and `mergeSortedSlice`, in
/// `k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`): each patch item merged into the
/// live one of its type; then the live items the patch does not name are merged, in their live
/// order, with the patch's items, in the patch's order, an item going first while it stands
/// before the other in the live list. A patch item of a type the list did not have is in no
/// live order, so it goes before every live item still to place: a new condition leads the
/// list, an updated one keeps its place.
fn merge_by_type(live: &[NodeCondition], patch: &[NodeCondition]) -> Vec<NodeCondition> {
    let at = |type_: &str| live.iter().position(|c| c.type_ == type_);
    let patched: Vec<NodeCondition> = (patch.iter())
        .map(|p| match live.iter().find(|c| c.type_ == p.type_) {
            Some(c) => {
                let mut merged = c.clone();
                merge_condition(&mut merged, p);
                merged
            }
            None => p.clone(),
        })
        .collect();
    let server_only: Vec<&NodeCondition> = (live.iter())
        .filter(|c| !patch.iter().any(|p| p.type_ == c.type_))
        .collect();
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        patched.into_iter().peekable(),
    );
    let mut out = Vec::with_capacity(live.len() + patch.len());
    loop {
        match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => {
                let first = matches!((at(&l.type_), at(&r.type_)), (Some(a), Some(b)) if a < b);
                if first {
                    out.extend(left.next().cloned());
                } else {
                    out.extend(right.next());
                }
            }
            (Some(_), None) => out.extend(left.next().cloned()),
            (None, Some(_)) => out.extend(right.next()),
            (None, None) => return out,
        }
    }
}

/// `patch` merged into `condition`: its status, and each other field it sets.
fn merge_condition(condition: &mut NodeCondition, patch: &NodeCondition) {
    condition.status.clone_from(&patch.status);
    if patch.reason.is_some() {
        condition.reason.clone_from(&patch.reason);
    }
    if patch.message.is_some() {
        condition.message.clone_from(&patch.message);
    }
    if patch.last_heartbeat_time.is_some() {
        condition
            .last_heartbeat_time
            .clone_from(&patch.last_heartbeat_time);
    }
    if patch.last_transition_time.is_some() {
        condition
            .last_transition_time
            .clone_from(&patch.last_transition_time);
    }
}

fn lease_not_found(name: &str) -> ApiError {
    ApiError::not_found(format!("{} \"{name}\" not found", LEASES.plural))
}

/// `ValidateLease`: the spec's numbers.
fn lease_errors(lease: &Lease) -> Vec<String> {
    let mut errs = Vec::new();
    let spec = lease.spec.clone().unwrap_or_default();
    if let Some(d) = spec.lease_duration_seconds.filter(|d| *d <= 0) {
        errs.push(format!(
            "spec.leaseDurationSeconds: Invalid value: {d}: must be greater than 0"
        ));
    }
    if let Some(t) = spec.lease_transitions.filter(|t| *t < 0) {
        errs.push(format!(
            "spec.leaseTransitions: Invalid value: {t}: must be greater than or equal to 0"
        ));
    }
    errs
}

/// `GET` one Lease.
pub(crate) fn get_lease(store: &Store, namespace: &str, name: &str) -> ApiResult<Lease> {
    let key = (namespace.to_string(), name.to_string());
    store
        .leases
        .get(&key)
        .cloned()
        .ok_or_else(|| lease_not_found(name))
}

/// `POST` a Lease: as [`prepare_create`], and the spec's validation.
pub(crate) fn create_lease(store: &mut Store, lease: &Lease, now: Duration) -> ApiResult<Lease> {
    let taken = |s: &Store, k: &Key| s.leases.contains_key(k);
    let lease = prepare_create(store, &LEASES, lease, lease_errors(lease), taken, now)?;
    Ok(store.write_lease(lease))
}

/// `PUT` a Lease (generic registry `Store.Update`): a Lease that does not exist is created
/// (the Lease strategy's `AllowCreateOnUpdate`); otherwise its `metadata.resourceVersion` must
/// be given (422: leases allow no unconditional update) and current (409); the UID may not
/// change (422); `creationTimestamp` and `generation` are kept, a missing UID filled in. An
/// update that changes nothing writes nothing.
pub(crate) fn replace_lease(store: &mut Store, lease: &Lease, now: Duration) -> ApiResult<Lease> {
    let namespace = namespace_of(&lease.metadata);
    let name = lease.metadata.name.clone().unwrap_or_default();
    let key = (namespace.clone(), name.clone());
    store.require_namespace(&namespace)?;
    let Some(old) = store.leases.get(&key).cloned() else {
        let mut fresh = lease.clone();
        fresh.metadata.resource_version = None;
        return create_lease(store, &fresh, now);
    };
    let given = lease.metadata.resource_version.clone().unwrap_or_default();
    let given: u64 = if given.is_empty() {
        0
    } else {
        given.parse().map_err(|_| {
            ApiError::transient(
                500,
                format!("strconv.ParseUint: parsing {given:?}: invalid syntax"),
            )
        })?
    };
    if given == 0 {
        return Err(ApiError::invalid(format!(
            "{} \"{name}\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            LEASES.plural
        )));
    }
    let current = old.metadata.resource_version.clone().unwrap_or_default();
    if given.to_string() != current {
        return Err(modified_conflict(LEASES.plural, &name));
    }
    let mut new = lease.clone();
    let meta = &mut new.metadata;
    meta.namespace = Some(namespace);
    if meta.uid.as_deref().is_none_or(str::is_empty) {
        meta.uid = old.metadata.uid.clone();
    }
    let mut errs = lease_errors(&new);
    if new.metadata.uid != old.metadata.uid {
        errs.insert(
            0,
            format!(
                "metadata.uid: Invalid value: {:?}: field is immutable",
                new.metadata.uid.clone().unwrap_or_default()
            ),
        );
    }
    errs.extend(label_errors(
        "metadata.labels",
        new.metadata.labels.as_ref(),
    ));
    if !errs.is_empty() {
        return Err(ApiError::invalid(invalid_message(
            LEASES.kind,
            &name,
            &errs,
        )));
    }
    let meta = &mut new.metadata;
    meta.creation_timestamp = old.metadata.creation_timestamp.clone();
    meta.generation = old.metadata.generation;
    meta.deletion_timestamp = None;
    meta.resource_version = old.metadata.resource_version.clone();
    if new == old {
        return Ok(old);
    }
    Ok(store.write_lease(new))
}

const EVENTS: Resource = Resource {
    plural: "events",
    kind: "Event",
};

/// The limits of `legacyValidateEvent` (`pkg/apis/core/validation/events.go`), in bytes.
const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// `legacyValidateEvent` (`pkg/apis/core/validation/events.go`, Kubernetes v1.37), the only
/// check of a core/v1 Event's own fields (`ValidateEventCreate` adds the strict ones for
/// `events.k8s.io/v1` only), for an Event in `namespace`.
///
/// An Event without `eventTime` (a "legacy" one, as client-go's recorder writes) must sit in
/// its involved object's namespace; about an object without one (a Node) only in `default`
/// (or none). An Event with `eventTime` about an object without a namespace may sit in
/// `default` or `kube-system`, and needs `reportingComponent` (a qualified name),
/// `reportingInstance`, `action` and `reason`, with length limits, `message` included.
/// Nothing else of `involvedObject` is checked: no kind or name is required.
fn event_errors(event: &Event, namespace: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let involved = event
        .involved_object
        .namespace
        .as_deref()
        .unwrap_or_default();
    let mismatch = || {
        format!(
            "involvedObject.namespace: Invalid value: \"{involved}\": does not match event.namespace"
        )
    };
    let len = |field: &Option<String>| field.as_deref().map_or(0, str::len);
    let too_long = |field: &str, limit: usize| {
        format!("{field}: Invalid value: \"\": can have at most {limit} characters")
    };
    if event.event_time.is_none() {
        let placed = if involved.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved
        };
        if !placed {
            errs.push(mismatch());
        }
        return errs;
    }
    if involved.is_empty() && namespace != "default" && namespace != "kube-system" {
        errs.push(mismatch());
    }
    // The request is core/v1: the field is named as there.
    let component = event.reporting_component.as_deref().unwrap_or_default();
    if component.is_empty() {
        errs.push("reportingComponent: Required value".into());
    }
    errs.extend(qualified_name_errors("reportingComponent", component));
    if len(&event.reporting_instance) == 0 {
        errs.push("reportingInstance: Required value".into());
    }
    if len(&event.reporting_instance) > REPORTING_INSTANCE_LIMIT {
        errs.push(too_long("reportingInstance", REPORTING_INSTANCE_LIMIT));
    }
    if len(&event.action) == 0 {
        errs.push("action: Required value".into());
    }
    if len(&event.action) > ACTION_LIMIT {
        errs.push(too_long("action", ACTION_LIMIT));
    }
    if len(&event.reason) == 0 {
        errs.push("reason: Required value".into());
    }
    if len(&event.reason) > REASON_LIMIT {
        errs.push(too_long("reason", REASON_LIMIT));
    }
    if len(&event.message) > NOTE_LIMIT {
        errs.push(too_long("message", NOTE_LIMIT));
    }
    errs
}

/// `POST /api/v1/namespaces/{ns}/events` (`ns` the Event's own, `default` when it names
/// none): the namespace exists (404); `generateName` draws the name; the Event's rules
/// ([`event_errors`]), then, only if those pass, the metadata's (`rest.ValidateCreate`: a
/// name or `generateName` is required, both only safe path segments, labels valid) (422); no
/// resourceVersion (500); the name free (409). Sets UID and `creationTimestamp` (the Event
/// strategy's `PrepareForCreate` sets nothing, so no `generation`). No aggregation: that is
/// the recorder's, client-side.
pub(crate) fn create_event(store: &mut Store, event: &Event, now: Duration) -> ApiResult<Event> {
    let mut event = event.clone();
    let namespace = namespace_of(&event.metadata);
    store.require_namespace(&namespace)?;
    let meta = &event.metadata;
    let mut name = meta.name.clone().unwrap_or_default();
    let prefix = meta.generate_name.clone().filter(|p| !p.is_empty());
    if let Some(prefix) = prefix.as_deref().filter(|_| name.is_empty()) {
        name = store.generate_name(prefix);
    }
    let mut errs = event_errors(&event, &namespace);
    if errs.is_empty() {
        if let Some(prefix) = &prefix {
            errs.extend(path_segment_errors("metadata.generateName", prefix, true));
        }
        if name.is_empty() {
            errs.push("metadata.name: Required value: name or generateName is required".into());
        } else {
            errs.extend(path_segment_errors("metadata.name", &name, false));
        }
        errs.extend(label_errors("metadata.labels", meta.labels.as_ref()));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(invalid_message(
            EVENTS.kind,
            &name,
            &errs,
        )));
    }
    if meta
        .resource_version
        .as_deref()
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::transient(
            500,
            "resourceVersion should not be set on objects to be created",
        ));
    }
    if store
        .events
        .contains_key(&(namespace.clone(), name.clone()))
    {
        return Err(ApiError::already_exists(format!(
            "{} \"{name}\" already exists",
            EVENTS.plural
        )));
    }
    let meta = &mut event.metadata;
    meta.name = Some(name);
    meta.namespace = Some(namespace);
    meta.uid = Some(store.uid());
    meta.creation_timestamp = Some(stamp(now));
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    Ok(store.write_event(event))
}
