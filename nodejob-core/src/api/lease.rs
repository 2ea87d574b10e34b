//! [`LeaseApi`]: `coordination.k8s.io/v1` Leases, the cluster-wide lock of the drivers.

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;

use super::{ApiResult, Clock};

/// The Kubernetes API verbs on Leases. Errors are core's [`ApiError`](crate::ApiError).
#[async_trait]
pub trait LeaseApi: Clock {
    /// `GET /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}`. NotFound when there is
    /// none.
    async fn get_lease(&self, namespace: &str, name: &str) -> ApiResult<Lease>;

    /// `POST` a Lease (namespace and name from its metadata). AlreadyExists when the name is
    /// taken.
    async fn create_lease(&self, lease: &Lease) -> ApiResult<Lease>;

    /// `PUT` a Lease (namespace and name from its metadata). Its `metadata.resourceVersion` is
    /// the precondition: Conflict when the stored Lease changed since it was read. A Lease that
    /// was deleted meanwhile is created again (Leases allow create-on-update:
    /// `pkg/registry/coordination/lease/strategy.go`), so [`crate::lease`] reads before it
    /// writes.
    async fn replace_lease(&self, lease: &Lease) -> ApiResult<Lease>;
}
