//! [`CustomApi`]: cluster-scoped custom resources with a status subresource (the declarative
//! rolls, `NodeUpgrade` and `CARotation`), read, watched, written and finalized as the
//! apiserver serves any custom resource: as unstructured JSON, which the typed layer of
//! `nodejob-crd` reads as its Rust types.
//!
//! What the apiserver does with a custom resource whose CRD enables `/status`
//! (`apiextensions-apiserver/pkg/registry/customresource/strategy.go`):
//! - create drops the `status` stanza and sets `metadata.generation` to 1;
//! - an update of the main resource keeps the stored status, and bumps the generation when
//!   anything but `metadata` and `status` changed; it needs `metadata.resourceVersion` (no
//!   unconditional update: 422 Invalid without it, 409 Conflict when it is not the stored
//!   one);
//! - a write to `/status` changes the status alone;
//! - a delete of an object with finalizers sets `deletionTimestamp` (and bumps the
//!   generation: `BeforeDelete`, `apiserver/pkg/registry/rest/delete.go`) and keeps it until an
//!   update leaves no finalizer; no finalizer may be added once it is being deleted.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use k8s_openapi::serde_json::Value;

use super::{ApiResult, Change, Clock};

/// A custom resource kind: what its CRD names. Cluster-scoped, with `/status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CustomKind {
    /// The API group, e.g. `nodejob.stratum.ciq.com`.
    pub group: &'static str,
    /// The version served, e.g. `v1alpha1`.
    pub version: &'static str,
    /// The kind, e.g. `NodeUpgrade`.
    pub kind: &'static str,
    /// The plural, the path's resource, e.g. `nodeupgrades`.
    pub plural: &'static str,
}

impl CustomKind {
    /// `group/version`, an object's `apiVersion`.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The collection's path, `/apis/{group}/{version}/{plural}`.
    pub fn path(&self) -> String {
        format!("/apis/{}/{}/{}", self.group, self.version, self.plural)
    }
}

/// Every object of a kind, and the resourceVersion of the list: [`CustomApi::list_custom_at`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CustomAt {
    /// The objects, in name order.
    pub objects: Vec<Value>,
    /// The list's resourceVersion: a watch from it misses no change after the list.
    pub resource_version: String,
}

/// Changes of a kind's objects after a resourceVersion: [`CustomApi::wait_custom`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CustomChanges {
    /// Each change, oldest first ([`Change::Applied`] or [`Change::Deleted`]).
    pub changes: Vec<Change<Value>>,
    /// Where the next wait resumes (`since` when nothing changed).
    pub resource_version: String,
}

/// The Kubernetes API verbs on cluster-scoped custom resources with `/status`. Errors are
/// core's [`ApiError`](crate::ApiError); NotFound for an object that is not there, and for a
/// kind whose CRD is not installed.
#[async_trait]
pub trait CustomApi: Clock {
    /// `GET {path}/{name}`.
    async fn get_custom(&self, kind: CustomKind, name: &str) -> ApiResult<Value>;

    /// `LIST {path}`: every object in name order, with the list's resourceVersion.
    async fn list_custom_at(&self, kind: CustomKind) -> ApiResult<CustomAt>;

    /// The changes of any object of `kind` after resourceVersion `since`, as a watch of the
    /// collection delivers them: waits at most `timeout` for the first, then answers it with
    /// every change already there behind it; none when the timeout ran out. Gone (410) when
    /// `since` is older than the apiserver keeps: list again.
    async fn wait_custom(
        &self,
        kind: CustomKind,
        since: &str,
        timeout: Duration,
    ) -> ApiResult<CustomChanges>;

    /// `POST {path}`: the object as stored (its status dropped, generation 1). AlreadyExists
    /// when the name is taken.
    async fn create_custom(&self, kind: CustomKind, object: &Value) -> ApiResult<Value>;

    /// `PUT {path}/{name}` of the main resource, under its `metadata.resourceVersion` (Conflict
    /// when the stored one differs, Invalid when it is missing): spec, labels, annotations and
    /// finalizers as sent, the stored status kept. An object being deleted that is left with
    /// no finalizer is gone after it (the answer is its last state).
    async fn replace_custom(&self, kind: CustomKind, object: &Value) -> ApiResult<Value>;

    /// `PATCH {path}/{name}/status` as a server-side apply (`application/apply-patch+yaml`)
    /// by field manager `manager`, forced: the status fields `status` sets are owned by
    /// `manager` from then on, those it set before and leaves out now are removed (the
    /// conditions merge by `type`), every other manager's kept.
    async fn apply_custom_status(
        &self,
        kind: CustomKind,
        name: &str,
        manager: &str,
        status: &Value,
    ) -> ApiResult<Value>;

    /// `DELETE {path}/{name}` with `preconditions`: `Some` with the object as it stays, being
    /// deleted until its finalizers are removed; `None` when it is gone.
    async fn delete_custom(
        &self,
        kind: CustomKind,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<Option<Value>>;
}
