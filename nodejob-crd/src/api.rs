//! The two kinds through core's [`CustomApi`], typed: [`Roll`] says what a kind is to the
//! apiserver, [`RollApi`] reads and writes it as its Rust type over any backend.

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use kube_core::Resource;
use nodejob_core::{ApiError, ApiResult, Change, CustomApi, CustomKind, ErrorKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{CARotation, CARotationStatus, GROUP, NodeUpgrade, NodeUpgradeStatus, VERSION};

/// A kind of the declarative rolls.
pub trait Roll:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// What the apiserver serves it as.
    const KIND: CustomKind;
    /// Its status.
    type Status: Clone + Serialize + DeserializeOwned + Send + Sync + 'static;
}

impl Roll for NodeUpgrade {
    const KIND: CustomKind = CustomKind {
        group: GROUP,
        version: VERSION,
        kind: "NodeUpgrade",
        plural: "nodeupgrades",
    };
    type Status = NodeUpgradeStatus;
}

impl Roll for CARotation {
    const KIND: CustomKind = CustomKind {
        group: GROUP,
        version: VERSION,
        kind: "CARotation",
        plural: "carotations",
    };
    type Status = CARotationStatus;
}

/// Every object of a kind, and where a watch of them starts: [`RollApi::list_rolls_at`].
#[derive(Clone, Debug)]
pub struct RollsAt<K> {
    /// The objects, in name order.
    pub rolls: Vec<K>,
    /// The list's resourceVersion.
    pub resource_version: String,
}

/// The changes of a kind's objects: [`RollApi::wait_rolls`].
#[derive(Clone, Debug)]
pub struct RollChanges<K> {
    /// Each change, oldest first.
    pub changes: Vec<Change<K>>,
    /// Where the next wait resumes.
    pub resource_version: String,
}

fn decode<K: Roll>(value: Value) -> ApiResult<K> {
    let name = (value.pointer("/metadata/name").and_then(Value::as_str))
        .unwrap_or_default()
        .to_string();
    serde_json::from_value(value).map_err(|e| {
        ApiError::new(
            ErrorKind::Other,
            0,
            format!("{} {name} does not read as its type: {e}", K::KIND.kind),
        )
    })
}

fn encode<T: Serialize>(what: &str, value: &T) -> ApiResult<Value> {
    serde_json::to_value(value)
        .map_err(|e| ApiError::new(ErrorKind::Invalid, 0, format!("encoding {what}: {e}")))
}

/// The verbs of [`CustomApi`] on a kind of [`Roll`], as its type: one call each.
#[async_trait]
pub trait RollApi: CustomApi {
    /// [`CustomApi::get_custom`].
    async fn get_roll<K: Roll>(&self, name: &str) -> ApiResult<K> {
        decode(self.get_custom(K::KIND, name).await?)
    }

    /// [`CustomApi::list_custom_at`].
    async fn list_rolls_at<K: Roll>(&self) -> ApiResult<RollsAt<K>> {
        let at = self.list_custom_at(K::KIND).await?;
        Ok(RollsAt {
            rolls: at
                .objects
                .into_iter()
                .map(decode)
                .collect::<ApiResult<_>>()?,
            resource_version: at.resource_version,
        })
    }

    /// [`CustomApi::wait_custom`].
    async fn wait_rolls<K: Roll>(
        &self,
        since: &str,
        timeout: std::time::Duration,
    ) -> ApiResult<RollChanges<K>> {
        let got = self.wait_custom(K::KIND, since, timeout).await?;
        let changes = (got.changes.into_iter())
            .map(|c| match c {
                Change::Applied(v) => decode(v).map(Change::Applied),
                Change::Deleted(v) => decode(v).map(Change::Deleted),
                Change::TimedOut => Ok(Change::TimedOut),
            })
            .collect::<ApiResult<_>>()?;
        Ok(RollChanges {
            changes,
            resource_version: got.resource_version,
        })
    }

    /// [`CustomApi::create_custom`].
    async fn create_roll<K: Roll>(&self, roll: &K) -> ApiResult<K> {
        let object = encode(K::KIND.kind, roll)?;
        decode(self.create_custom(K::KIND, &object).await?)
    }

    /// [`CustomApi::replace_custom`].
    async fn replace_roll<K: Roll>(&self, roll: &K) -> ApiResult<K> {
        let object = encode(K::KIND.kind, roll)?;
        decode(self.replace_custom(K::KIND, &object).await?)
    }

    /// [`CustomApi::apply_custom_status`].
    async fn apply_roll_status<K: Roll>(
        &self,
        name: &str,
        manager: &str,
        status: &K::Status,
    ) -> ApiResult<K> {
        let status = encode("a status", status)?;
        decode(
            self.apply_custom_status(K::KIND, name, manager, &status)
                .await?,
        )
    }

    /// [`CustomApi::delete_custom`].
    async fn delete_roll<K: Roll>(
        &self,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<Option<K>> {
        match self.delete_custom(K::KIND, name, preconditions).await? {
            Some(v) => decode(v).map(Some),
            None => Ok(None),
        }
    }
}

impl<T: CustomApi + ?Sized> RollApi for T {}
