//! [`Call`]: one API call served through the API traits' impls, as the fake's call record
//! keeps it.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::ErrorKind;

use crate::Verb;

/// One call served through the API traits' impls (actor methods such as
/// [`FakeCluster::delete_job_now`](crate::FakeCluster::delete_job_now) are not recorded).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Call {
    /// The verb.
    pub verb: Verb,
    /// The namespace (empty for Nodes and for [`Verb::ListNodePods`]).
    pub namespace: String,
    /// What the call names: the Job or Event (or its `generateName`), Pod, Node or Lease
    /// name; for [`Verb::ListJobs`], [`Verb::ListPods`] and [`Verb::ListNodes`] the label
    /// selector, for
    /// [`Verb::ListEvents`] the involved UID, for [`Verb::ListNodePods`] the node.
    pub name: String,
    /// The preconditions the call carries: those of a [`Verb::DeleteJob`], if any; the UID of
    /// a [`Verb::EvictPod`]; the resourceVersion of a [`Verb::PatchNode`] or
    /// [`Verb::ReplaceLease`].
    pub preconditions: Option<Preconditions>,
    /// Virtual time when the call began (see [`FakeCluster`](crate::FakeCluster)'s clock).
    pub at: Duration,
    /// How the call failed, if it did; `None` while a wait is still pending.
    pub error: Option<ErrorKind>,
}
