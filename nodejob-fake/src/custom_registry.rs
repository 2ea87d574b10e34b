//! The verbs on custom resources over the [`Store`]: the apiserver's rules for a custom
//! resource with `/status` (see [`CustomApi`](nodejob_core::CustomApi)), on the objects
//! `custom.rs` keeps.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use k8s_openapi::serde_json::Value;
use nodejob_core::{ApiError, ApiResult, Change, CustomKind};

use crate::custom::{
    Path, finalizers, merge, name_of, not_found, paths, remove, resource, spec_of,
};
use crate::store::{Store, modified_conflict};
use crate::timing::stamp;

impl Store {
    /// Stores `object` of `kind` at the next resourceVersion, recording the change.
    fn put_custom(&mut self, kind: CustomKind, mut object: Value) -> ApiResult<Value> {
        let rv = self.bump();
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let stored = self.customs.kind_mut(kind)?;
        let name = name_of(&object).to_string();
        (stored.history).record((String::new(), name.clone()), rv, Change::Applied(&object));
        stored.objects.insert(name, object.clone());
        Ok(object)
    }

    /// Removes `name` of `kind` at the next resourceVersion, recording its deletion.
    fn remove_custom(&mut self, kind: CustomKind, name: &str) -> ApiResult<Value> {
        let rv = self.bump();
        let stored = self.customs.kind_mut(kind)?;
        let mut object = (stored.objects.remove(name)).ok_or_else(|| not_found(kind, name))?;
        stored.owned.remove(name);
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        (stored.history).record(
            (String::new(), name.to_string()),
            rv,
            Change::Deleted(&object),
        );
        Ok(object)
    }

    /// `POST`: a name (or `generateName`), no status, generation 1, a UID and a creation time.
    pub(crate) fn create_custom(
        &mut self,
        kind: CustomKind,
        object: &Value,
        now: Duration,
    ) -> ApiResult<Value> {
        self.customs.kind(kind)?;
        let mut object = object.clone();
        let Some(map) = object.as_object_mut() else {
            return Err(ApiError::bad_request("the object is not a JSON object"));
        };
        map.remove("status");
        map.insert("apiVersion".into(), Value::String(kind.api_version()));
        map.insert("kind".into(), Value::String(kind.kind.into()));
        let mut name = name_of(&object).to_string();
        if name.is_empty() {
            let prefix = (object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str))
            .unwrap_or_default()
            .to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(format!(
                    "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                    kind.kind
                )));
            }
            name = self.generate_name(&prefix);
        }
        if self.customs.kind(kind)?.objects.contains_key(&name) {
            return Err(ApiError::already_exists(format!(
                "{} \"{name}\" already exists",
                resource(kind)
            )));
        }
        let uid = self.uid();
        let meta = &mut object["metadata"];
        meta["name"] = Value::String(name);
        meta["uid"] = Value::String(uid);
        meta["generation"] = Value::from(1);
        meta["creationTimestamp"] = serde_json::to_value(stamp(now)).unwrap_or_default();
        if let Some(meta) = meta.as_object_mut() {
            meta.remove("deletionTimestamp");
            meta.remove("resourceVersion");
        }
        self.put_custom(kind, object)
    }

    /// `PUT` of the main resource: see the module docs.
    pub(crate) fn replace_custom(&mut self, kind: CustomKind, object: &Value) -> ApiResult<Value> {
        let name = name_of(object).to_string();
        let old = self.customs.kind(kind)?.get(&name)?;
        let given = (object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str))
        .unwrap_or_default();
        if given.is_empty() || given == "0" {
            return Err(ApiError::invalid(format!(
                "{} \"{name}\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                kind.kind
            )));
        }
        if Some(given)
            != old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
        {
            return Err(modified_conflict(&resource(kind), &name));
        }
        let deleting = old.pointer("/metadata/deletionTimestamp").is_some();
        let (before, after) = (finalizers(&old), finalizers(object));
        if deleting && after.iter().any(|f| !before.contains(f)) {
            return Err(ApiError::invalid(format!(
                "{} \"{name}\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {:?}",
                kind.kind,
                after
                    .iter()
                    .filter(|f| !before.contains(f))
                    .collect::<Vec<_>>()
            )));
        }
        let mut new = object.clone();
        let Some(map) = new.as_object_mut() else {
            return Err(ApiError::bad_request("the object is not a JSON object"));
        };
        // The stored status stays; what the apiserver sets in metadata stays.
        match old.get("status") {
            Some(status) => map.insert("status".into(), status.clone()),
            None => map.remove("status"),
        };
        map.insert("apiVersion".into(), Value::String(kind.api_version()));
        map.insert("kind".into(), Value::String(kind.kind.into()));
        let generation = old.pointer("/metadata/generation").and_then(Value::as_i64);
        let moved = spec_of(&old) != spec_of(&new);
        for key in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "generation",
        ] {
            match old["metadata"].get(key) {
                Some(v) => new["metadata"][key] = v.clone(),
                None => {
                    if let Some(meta) = new["metadata"].as_object_mut() {
                        meta.remove(key);
                    }
                }
            }
        }
        if moved {
            new["metadata"]["generation"] = Value::from(generation.unwrap_or(0) + 1);
        }
        if deleting && after.is_empty() {
            self.put_custom(kind, new)?;
            return self.remove_custom(kind, &name);
        }
        self.put_custom(kind, new)
    }

    /// The status applied by `manager`: see [`CustomApi::apply_custom_status`].
    ///
    /// [`CustomApi::apply_custom_status`]: nodejob_core::CustomApi::apply_custom_status
    pub(crate) fn apply_custom_status(
        &mut self,
        kind: CustomKind,
        name: &str,
        manager: &str,
        status: &Value,
    ) -> ApiResult<Value> {
        if manager.is_empty() {
            return Err(ApiError::bad_request(
                "PATCH requests of type apply require a fieldManager",
            ));
        }
        let stored = self.customs.kind(kind)?;
        let mut object = stored.get(name)?;
        let applied = paths(status);
        let owners = stored.owned.get(name).cloned().unwrap_or_default();
        let mine = owners.get(manager).cloned().unwrap_or_default();
        let others: BTreeSet<&Path> = (owners.iter())
            .filter(|(m, _)| m.as_str() != manager)
            .flat_map(|(_, p)| p)
            .collect();
        let mut current = object.get("status").cloned().unwrap_or(Value::Null);
        for gone in mine.difference(&applied) {
            if !others.contains(gone) {
                remove(&mut current, gone);
            }
        }
        merge(&mut current, status);
        match current {
            Value::Object(ref m) if m.is_empty() => {
                if let Some(o) = object.as_object_mut() {
                    o.remove("status");
                }
            }
            Value::Null => {}
            other => object["status"] = other,
        }
        let stored = self.customs.kind_mut(kind)?;
        let owned = stored.owned.entry(name.to_string()).or_default();
        for (m, paths) in owned.iter_mut() {
            if m != manager {
                paths.retain(|p| !applied.contains(p));
            }
        }
        owned.insert(manager.to_string(), applied);
        self.put_custom(kind, object)
    }

    /// `DELETE`: see the module docs.
    pub(crate) fn delete_custom(
        &mut self,
        kind: CustomKind,
        name: &str,
        preconditions: Option<&Preconditions>,
        now: Duration,
    ) -> ApiResult<Option<Value>> {
        let mut object = self.customs.kind(kind)?.get(name)?;
        if let Some(pre) = preconditions {
            let uid = object.pointer("/metadata/uid").and_then(Value::as_str);
            let rv = object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            if pre.uid.as_deref().is_some_and(|u| Some(u) != uid) {
                return Err(ApiError::conflict(format!(
                    "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                    pre.uid.as_deref().unwrap_or_default(),
                    uid.unwrap_or_default()
                )));
            }
            if pre
                .resource_version
                .as_deref()
                .is_some_and(|r| Some(r) != rv)
            {
                return Err(ApiError::conflict(format!(
                    "Precondition failed: ResourceVersion in precondition: {}, ResourceVersion in object meta: {}",
                    pre.resource_version.as_deref().unwrap_or_default(),
                    rv.unwrap_or_default()
                )));
            }
        }
        if finalizers(&object).is_empty() {
            self.remove_custom(kind, name)?;
            return Ok(None);
        }
        if object.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(Some(object));
        }
        object["metadata"]["deletionTimestamp"] =
            serde_json::to_value(stamp(now)).unwrap_or_default();
        object["metadata"]["deletionGracePeriodSeconds"] = Value::from(0);
        let generation = object
            .pointer("/metadata/generation")
            .and_then(Value::as_i64);
        object["metadata"]["generation"] = Value::from(generation.unwrap_or(0) + 1);
        self.put_custom(kind, object).map(Some)
    }
}
