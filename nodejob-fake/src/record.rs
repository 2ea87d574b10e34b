//! [`Call`]: one API call served through the [`JobApi`](nodejob_core::JobApi) impl, as the
//! fake's call record keeps it.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::ErrorKind;

use crate::Verb;

/// One call served through the [`JobApi`](nodejob_core::JobApi) impl (actor methods such as
/// [`FakeCluster::delete_job_now`](crate::FakeCluster::delete_job_now) are not recorded).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Call {
    /// The verb.
    pub verb: Verb,
    /// The namespace (empty for Nodes).
    pub namespace: String,
    /// What the call names: the Job (or its `generateName`), Pod or Node name; for
    /// [`Verb::ListPods`] the label selector, for [`Verb::ListEvents`] the involved UID.
    pub name: String,
    /// The preconditions of a [`Verb::DeleteJob`], if any.
    pub preconditions: Option<Preconditions>,
    /// Virtual time when the call began (see [`FakeCluster`](crate::FakeCluster)'s clock).
    pub at: Duration,
    /// How the call failed, if it did; `None` while a wait is still pending.
    pub error: Option<ErrorKind>,
}
