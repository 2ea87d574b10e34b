//! Custom resources, as the apiserver serves those of a CRD with `/status`: unstructured JSON
//! objects of the kinds installed ([`FakeCluster::install_custom_kind`]), with
//! resourceVersion, generation, the status subresource, server-side apply of the status by
//! field manager, finalizers and a watch of each kind. The rules are listed on
//! [`CustomApi`](nodejob_core::CustomApi). This module holds them and the rules of a status's
//! fields; `custom_registry.rs` the verbs over the store.
//!
//! Not modelled: the CRD's schema (no validation, no pruning, no defaulting: the typed layer
//! writes only what its schema takes, and `nodejob-e2e/tests/crds.rs` has a real apiserver
//! check the schema itself); `metadata.managedFields` is kept here, not shown on the objects.
//!
//! [`FakeCluster::install_custom_kind`]: crate::FakeCluster::install_custom_kind

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::serde_json::{Map, Value};
use nodejob_core::{ApiError, ApiResult, CustomAt, CustomKind};

use crate::watch::History;

/// The custom resources of every installed kind.
#[derive(Debug, Default)]
pub(crate) struct Customs {
    kinds: BTreeMap<&'static str, Stored>,
}

/// One kind's objects, their watch history and who owns which status fields.
#[derive(Debug)]
pub(crate) struct Stored {
    pub(crate) kind: CustomKind,
    pub(crate) objects: BTreeMap<String, Value>,
    pub(crate) history: History<Value>,
    /// By object name, by field manager: the status fields it applied last.
    pub(crate) owned: BTreeMap<String, BTreeMap<String, BTreeSet<Path>>>,
}

/// A field of a status: the keys down to it; an element of a list merged by key is
/// `[..., "conditions", "=Ready"]`, owned whole.
pub(crate) type Path = Vec<String>;

/// The lists of a status merged by a key (`x-kubernetes-list-type: map`), and that key.
const LIST_MAPS: [(&str, &str); 1] = [("conditions", "type")];

impl Customs {
    /// Installs `kind` (a no-op when it is).
    pub(crate) fn install(&mut self, kind: CustomKind) {
        self.kinds.entry(kind.plural).or_insert_with(|| Stored {
            kind,
            objects: BTreeMap::new(),
            history: History::default(),
            owned: BTreeMap::new(),
        });
    }

    /// The plurals of the kinds whose objects changed since the last call.
    pub(crate) fn take_touched(&mut self) -> Vec<&'static str> {
        (self.kinds.iter_mut())
            .filter_map(|(plural, k)| (!k.history.take_touched().is_empty()).then_some(*plural))
            .collect()
    }

    /// The kind's store: NotFound, as the apiserver answers a resource it does not serve,
    /// when its CRD is not installed.
    pub(crate) fn kind(&self, kind: CustomKind) -> ApiResult<&Stored> {
        self.kinds.get(kind.plural).ok_or_else(|| not_served(kind))
    }

    pub(crate) fn kind_mut(&mut self, kind: CustomKind) -> ApiResult<&mut Stored> {
        self.kinds
            .get_mut(kind.plural)
            .ok_or_else(|| not_served(kind))
    }
}

fn not_served(kind: CustomKind) -> ApiError {
    ApiError::not_found(format!(
        "the server could not find the requested resource ({})",
        kind.path()
    ))
}

pub(crate) fn not_found(kind: CustomKind, name: &str) -> ApiError {
    ApiError::not_found(format!(
        "{}.{} \"{name}\" not found",
        kind.plural, kind.group
    ))
}

pub(crate) fn resource(kind: CustomKind) -> String {
    format!("{}.{}", kind.plural, kind.group)
}

pub(crate) fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    (object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array))
    .into_iter()
    .flatten()
    .filter_map(|f| f.as_str().map(str::to_string))
    .collect()
}

/// Everything of `object` but `metadata` and `status`: what the generation follows.
pub(crate) fn spec_of(object: &Value) -> Map<String, Value> {
    let mut rest = object.as_object().cloned().unwrap_or_default();
    for key in ["metadata", "status", "apiVersion", "kind"] {
        rest.remove(key);
    }
    rest
}

impl Stored {
    /// `GET`.
    pub(crate) fn get(&self, name: &str) -> ApiResult<Value> {
        (self.objects.get(name).cloned()).ok_or_else(|| not_found(self.kind, name))
    }

    /// `LIST` at `rv`.
    pub(crate) fn list_at(&self, rv: u64) -> CustomAt {
        CustomAt {
            objects: self.objects.values().cloned().collect(),
            resource_version: rv.to_string(),
        }
    }
}

/// The fields `status` sets, as server-side apply owns them.
pub(crate) fn paths(status: &Value) -> BTreeSet<Path> {
    fn walk(value: &Value, at: &mut Path, out: &mut BTreeSet<Path>) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (key, v) in map {
                    at.push(key.clone());
                    let keyed = LIST_MAPS.iter().find(|(list, _)| list == key);
                    match (keyed, v) {
                        (Some((_, by)), Value::Array(items)) => {
                            for item in items {
                                let id = item.get(*by).and_then(Value::as_str).unwrap_or_default();
                                at.push(format!("={id}"));
                                out.insert(at.clone());
                                at.pop();
                            }
                        }
                        _ => walk(v, at, out),
                    }
                    at.pop();
                }
            }
            _ => {
                out.insert(at.clone());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(status, &mut Vec::new(), &mut out);
    out
}

/// Removes the field at `path` from `value`, and the objects it leaves empty.
pub(crate) fn remove(value: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(map) = value.as_object_mut() else {
        return;
    };
    let keyed = LIST_MAPS.iter().find(|(list, _)| list == first);
    match (rest, keyed) {
        ([id], Some((_, by))) if id.starts_with('=') => {
            if let Some(Value::Array(items)) = map.get_mut(first.as_str()) {
                items.retain(|i| i.get(*by).and_then(Value::as_str) != Some(&id[1..]));
                if items.is_empty() {
                    map.remove(first.as_str());
                }
            }
        }
        ([], _) => {
            map.remove(first.as_str());
        }
        _ => {
            if let Some(inner) = map.get_mut(first.as_str()) {
                remove(inner, rest);
                if inner.as_object().is_some_and(Map::is_empty) {
                    map.remove(first.as_str());
                }
            }
        }
    }
}

/// Sets what `applied` sets in `value`: objects field by field, the keyed lists element by
/// element (an element replaced whole), anything else replaced.
pub(crate) fn merge(value: &mut Value, applied: &Value) {
    match (value.as_object_mut(), applied) {
        (Some(map), Value::Object(given)) => {
            for (key, v) in given {
                let keyed = LIST_MAPS.iter().find(|(list, _)| list == key);
                match (keyed, v, map.get_mut(key)) {
                    (Some((_, by)), Value::Array(items), Some(Value::Array(have))) => {
                        for item in items {
                            let id = item.get(*by);
                            match have.iter_mut().find(|h| h.get(*by) == id) {
                                Some(h) => *h = item.clone(),
                                None => have.push(item.clone()),
                            }
                        }
                    }
                    (_, Value::Object(_), Some(inner)) if inner.is_object() => merge(inner, v),
                    _ => {
                        map.insert(key.clone(), v.clone());
                    }
                }
            }
        }
        _ => *value = applied.clone(),
    }
}
