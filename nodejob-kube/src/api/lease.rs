//! [`LeaseApi`] for [`KubeApi`]: `coordination.k8s.io/v1` Leases.

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{GetParams, PostParams};
use nodejob_core::{ApiError, ApiResult, ErrorKind, LeaseApi};

use super::{KubeApi, collection};
use crate::transport::call_json;

impl KubeApi {
    /// The Lease as JSON, for a create or a replace.
    fn lease_body(lease: &Lease) -> ApiResult<Vec<u8>> {
        serde_json::to_vec(lease)
            .map_err(|e| ApiError::new(ErrorKind::Invalid, 0, format!("encoding the lease: {e}")))
    }
}

#[async_trait]
impl LeaseApi for KubeApi {
    async fn get_lease(&self, namespace: &str, name: &str) -> ApiResult<Lease> {
        let request = collection::<Lease>(Some(namespace)).get(name, &GetParams::default());
        call_json(&self.client, request).await
    }

    /// One `POST /apis/coordination.k8s.io/v1/namespaces/{ns}/leases`, in the Lease's namespace
    /// (the client's default when it has none).
    async fn create_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let ns = self.namespace_of(lease.metadata.namespace.as_deref());
        let request =
            collection::<Lease>(Some(ns)).create(&PostParams::default(), Self::lease_body(lease)?);
        call_json(&self.client, request).await
    }

    /// One `PUT /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}` of the whole
    /// Lease. Leases allow no unconditional update (`leaseStrategy.AllowUnconditionalUpdate`
    /// is false), so the apiserver compares the body's `metadata.resourceVersion` with the
    /// stored one: 409 Conflict when they differ, 422 Invalid when it is missing.
    ///
    /// Leases do allow create-on-update (`AllowCreateOnUpdate` is true,
    /// `pkg/registry/coordination/lease/strategy.go`): a PUT of a Lease that was deleted
    /// meanwhile creates it again (201), whatever its resourceVersion, rather than answering
    /// NotFound.
    async fn replace_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let ns = self.namespace_of(lease.metadata.namespace.as_deref());
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        let request = collection::<Lease>(Some(ns)).replace(
            name,
            &PostParams::default(),
            Self::lease_body(lease)?,
        );
        call_json(&self.client, request).await
    }
}
