//! The verbs nodejob needs from a cluster: one small trait per resource, one method per API
//! verb, each extending [`Clock`]. A function names only the traits it uses, so its bounds read
//! like the RBAC rules it needs:
//!
//! | trait | resource | RBAC verbs |
//! |---|---|---|
//! | [`JobApi`] | `batch/v1` Jobs, their Pods' logs, Events | jobs create/get/list/watch/delete; pods list; pods/log get; events list/create |
//! | [`NodeApi`] | `v1` Nodes, the apiserver's `/version` | nodes get/list/watch/patch; nodes/status patch (the drivers' own conditions); `/version` needs no grant |
//! | [`PodApi`] | `v1` Pods on a node, `policy/v1` Eviction | pods get/list/watch; pods/eviction create |
//! | [`LeaseApi`] | `coordination.k8s.io/v1` Leases | leases get/create/update |
//! | [`CustomApi`] | cluster-scoped custom resources with `/status` (the declarative rolls) | get/list/watch/create/update/delete; their `/status` patch |
//!
//! Composite behaviour ("replace the stale Job, then wait", "drain a node", "hold the Lease")
//! is never a trait method: it is a function over these traits, so every backend gets it the
//! same way.

mod custom;
mod job;
mod lease;
mod node;
mod pod;

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::jiff::Timestamp;

pub use custom::{CustomApi, CustomAt, CustomChanges, CustomKind};
pub use job::JobApi;
pub use lease::LeaseApi;
pub use node::{NO_SCHEDULE, NodeApi, NodeChange, NodeChanges, NodesAt, tainted_no_schedule};
pub use pod::{DryRun, Eviction, PodApi};

use crate::error::ApiError;

/// What a backend verb returns.
pub type ApiResult<T> = std::result::Result<T, ApiError>;

/// The backend's clock. Core never reads a clock of its own, so the fake cluster can run a whole
/// rolling upgrade in virtual time.
#[async_trait]
pub trait Clock: Send + Sync {
    /// Monotonic time since an origin fixed for the backend's life.
    fn now(&self) -> Duration;
    /// Sleeps for `duration` on this clock.
    async fn sleep(&self, duration: Duration);
    /// The wall-clock time as the cluster stamps objects (a Lease's `renewTime`, a
    /// `creationTimestamp`): what a time read from an object is compared with.
    fn wall_time(&self) -> Timestamp;
}

/// The next change of one named object, as a watch reports it.
#[derive(Clone, Debug, PartialEq)]
pub enum Change<K> {
    /// The object was created or modified; this is its new state.
    Applied(K),
    /// The object was deleted; this is its last state.
    Deleted(K),
    /// Nothing changed before the timeout.
    TimedOut,
}
