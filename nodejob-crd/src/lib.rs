//! The two custom resources of `nodejob controller`, as Rust types their
//! CustomResourceDefinitions are generated from: [`NodeUpgrade`] (a rolling node upgrade, the
//! plan `nodejob upgrade` takes as flags) and [`CARotation`] (a cluster CA rotation, the plan of
//! `nodejob rotate-ca`). Both are cluster-scoped, in the group [`GROUP`], version [`VERSION`].
//!
//! This crate is pure: types, their schemas and the CRDs, with kube-core and kube-derive (no
//! client, no runtime, no clock), so a tool that only reads or writes the resources need not
//! pull in the controller. What a field means, and how it is validated, is what the command's
//! flag of the same name means: the spec's strings (durations, the window, the version) are
//! read by the same functions as the flags, where the controller turns a spec into a plan.
//!
//! [`RollApi`] reads and writes them, typed, over core's
//! [`CustomApi`](nodejob_core::CustomApi), which both backends implement.
//!
//! The status is small at any size: counts, short capped lists ([`LIST_CAP`] entries) and the
//! conditions; each node's own detail stays on the Node (the driver's annotations and its
//! `NodejobUpgrade` / `NodejobCARotation` condition), where `kubectl describe node` shows it.

mod api;
mod rotation;
mod status;
mod upgrade;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_core::CustomResourceExt;

pub use api::{Roll, RollApi, RollChanges, RollsAt};
pub use rotation::{
    CARotation, CARotationSpec, CARotationStatus, CaSource, Disagreeing, GateVerdict, KeyRef,
    PhaseCounts, RotationPhase, TrustDomain,
};
pub use status::{Blocked, ConditionType, FailedNode, InFlight, Paused, Reason};
pub use upgrade::{
    NodeUpgrade, NodeUpgradeSpec, NodeUpgradeStatus, OnFailure, OnUndrainable, UpgradeCounts,
};

/// The API group of both resources.
pub const GROUP: &str = "nodejob.stratum.ciq.com";
/// Their version.
pub const VERSION: &str = "v1alpha1";
/// How many entries a status list holds at most (nodes in flight, failed, blocked, a gate's
/// disagreeing nodes); the counts beside it say how many there are.
pub const LIST_CAP: usize = 20;

/// Both CRDs, `NodeUpgrade` first, as `nodejob render-crds` prints them and
/// `deploy/controller/` holds them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![NodeUpgrade::crd(), CARotation::crd()]
}
