//! [`CustomApi`] for [`KubeApi`]: cluster-scoped custom resources with `/status`, as
//! unstructured JSON under the kind's path.

use std::time::Duration;

use async_trait::async_trait;
use futures::{FutureExt, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use kube::api::{
    DeleteParams, GetParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Request;
use nodejob_core::{
    ApiError, ApiResult, Change, CustomApi, CustomAt, CustomChanges, CustomKind, ErrorKind,
};
use serde_json::Value;

use super::KubeApi;
use crate::classify::{from_kube, from_status};
use crate::transport::call_json;
use crate::watch::open_events;

fn body(object: &Value) -> ApiResult<Vec<u8>> {
    serde_json::to_vec(object)
        .map_err(|e| ApiError::new(ErrorKind::Invalid, 0, format!("encoding the object: {e}")))
}

fn name_of(object: &Value) -> &str {
    (object.pointer("/metadata/name").and_then(Value::as_str)).unwrap_or_default()
}

#[async_trait]
impl CustomApi for KubeApi {
    async fn get_custom(&self, kind: CustomKind, name: &str) -> ApiResult<Value> {
        let request = Request::new(kind.path()).get(name, &GetParams::default());
        call_json(&self.client, request).await
    }

    async fn list_custom_at(&self, kind: CustomKind) -> ApiResult<CustomAt> {
        let request = Request::new(kind.path()).list(&ListParams::default());
        let list: Value = call_json(&self.client, request).await?;
        let mut objects = list["items"].as_array().cloned().unwrap_or_default();
        objects.sort_by(|a, b| name_of(a).cmp(name_of(b)));
        Ok(CustomAt {
            objects,
            resource_version: (list
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str))
            .unwrap_or_default()
            .to_string(),
        })
    }

    /// One watch of the collection from `since`, open for this call: its first event (at most
    /// `timeout`), then every event already read behind it. A 410 Gone is answered as Gone.
    async fn wait_custom(
        &self,
        kind: CustomKind,
        since: &str,
        timeout: Duration,
    ) -> ApiResult<CustomChanges> {
        let seconds = u32::try_from(timeout.as_secs().clamp(1, 290)).unwrap_or(290);
        let wp = WatchParams::default().timeout(seconds);
        let collection = Request::new(kind.path());
        let mut events = open_events::<Value>(&self.client, &collection, &wp, since)
            .await
            .map_err(from_kube)?;
        let mut out = CustomChanges {
            changes: Vec::new(),
            resource_version: since.to_string(),
        };
        let read = |event: kube::Result<WatchEvent<Value>>, out: &mut CustomChanges| {
            let (change, rv) = match event.map_err(from_kube)? {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                    let rv = o.pointer("/metadata/resourceVersion").cloned();
                    (Some(Change::Applied(o)), rv)
                }
                WatchEvent::Deleted(o) => {
                    let rv = o.pointer("/metadata/resourceVersion").cloned();
                    (Some(Change::Deleted(o)), rv)
                }
                WatchEvent::Bookmark(b) => (None, Some(Value::String(b.metadata.resource_version))),
                WatchEvent::Error(status) => return Err(from_status(&status)),
            };
            if let Some(Value::String(rv)) = rv {
                out.resource_version = rv;
            }
            out.changes.extend(change);
            Ok::<_, ApiError>(())
        };
        match tokio::time::timeout(timeout, events.next()).await {
            Ok(Some(event)) => read(event, &mut out)?,
            Ok(None) | Err(_) => return Ok(out),
        }
        while let Some(Some(event)) = events.next().now_or_never() {
            read(event, &mut out)?;
        }
        Ok(out)
    }

    async fn create_custom(&self, kind: CustomKind, object: &Value) -> ApiResult<Value> {
        let request = Request::new(kind.path()).create(&PostParams::default(), body(object)?);
        call_json(&self.client, request).await
    }

    async fn replace_custom(&self, kind: CustomKind, object: &Value) -> ApiResult<Value> {
        let request = Request::new(kind.path()).replace(
            name_of(object),
            &PostParams::default(),
            body(object)?,
        );
        call_json(&self.client, request).await
    }

    /// `PATCH {path}/{name}/status?fieldManager=M&force=true` with
    /// `application/apply-patch+yaml`: the apply configuration names the kind and the object,
    /// and holds the status alone.
    async fn apply_custom_status(
        &self,
        kind: CustomKind,
        name: &str,
        manager: &str,
        status: &Value,
    ) -> ApiResult<Value> {
        let apply = serde_json::json!({
            "apiVersion": kind.api_version(),
            "kind": kind.kind,
            "metadata": {"name": name},
            "status": status,
        });
        let params = PatchParams::apply(manager).force();
        let request = Request::new(kind.path()).patch_subresource(
            "status",
            name,
            &params,
            &Patch::Apply(&apply),
        );
        call_json(&self.client, request).await
    }

    /// The apiserver answers the object while finalizers keep it, and a `Status` once it is
    /// gone (the generic registry's `ReturnDeletedObject` is false for custom resources).
    async fn delete_custom(
        &self,
        kind: CustomKind,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<Option<Value>> {
        let params = DeleteParams {
            preconditions: preconditions.map(|p| kube::api::Preconditions {
                uid: p.uid.clone(),
                resource_version: p.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        let request = Request::new(kind.path()).delete(name, &params);
        let answer: Value = call_json(&self.client, request).await?;
        Ok((answer["kind"] != "Status").then_some(answer))
    }
}
