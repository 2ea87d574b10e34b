//! What the pod workers of a node know of it, sent to them by its node worker. A leaf, so the
//! node worker and the pod workers do not import each other.

use nodejob_host::OnSigterm;

/// What the pod workers of a node need to know of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeState {
    /// Whether the node is Ready (as its annotations ask, and its host up): the kubelet acts
    /// (starts, reports, confirms deletions) only then. `false` too once the node is gone.
    pub(crate) ready: bool,
    /// What a container that starts now does on SIGTERM.
    pub(crate) on_sigterm: OnSigterm,
}
