//! [`Task`]: a spawned task that ends with its owner. A leaf, so the agent and the node worker
//! share it without importing each other.

use tokio::task::JoinHandle;

/// A task that is aborted when its handle is dropped.
pub(crate) struct Task(pub(crate) JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}
