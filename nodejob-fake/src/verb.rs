//! [`Verb`]: the [`JobApi`](nodejob_core::JobApi) methods, as faults, hooks and the call record
//! name them.

use std::fmt;

/// One [`JobApi`](nodejob_core::JobApi) method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Verb {
    /// [`JobApi::create_job`](nodejob_core::JobApi::create_job).
    CreateJob,
    /// [`JobApi::get_job`](nodejob_core::JobApi::get_job).
    GetJob,
    /// [`JobApi::delete_job`](nodejob_core::JobApi::delete_job).
    DeleteJob,
    /// [`JobApi::list_pods`](nodejob_core::JobApi::list_pods).
    ListPods,
    /// [`JobApi::pod_log`](nodejob_core::JobApi::pod_log).
    PodLog,
    /// [`JobApi::list_events`](nodejob_core::JobApi::list_events).
    ListEvents,
    /// [`JobApi::get_node`](nodejob_core::JobApi::get_node).
    GetNode,
    /// [`JobApi::wait_job`](nodejob_core::JobApi::wait_job).
    WaitJob,
    /// [`JobApi::wait_node`](nodejob_core::JobApi::wait_node).
    WaitNode,
}

impl Verb {
    /// Every verb, in declaration order.
    pub const ALL: [Verb; 9] = [
        Verb::CreateJob,
        Verb::GetJob,
        Verb::DeleteJob,
        Verb::ListPods,
        Verb::PodLog,
        Verb::ListEvents,
        Verb::GetNode,
        Verb::WaitJob,
        Verb::WaitNode,
    ];
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Which verbs a fault applies to: one, or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verbs {
    /// Every verb.
    All,
    /// This verb only.
    Only(Verb),
}

impl Verbs {
    /// Whether `verb` is one of these.
    pub fn contains(self, verb: Verb) -> bool {
        match self {
            Verbs::All => true,
            Verbs::Only(v) => v == verb,
        }
    }
}

impl From<Verb> for Verbs {
    fn from(verb: Verb) -> Self {
        Verbs::Only(verb)
    }
}
