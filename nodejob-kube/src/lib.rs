//! nodejob over kube-rs: `JobApi` for a real cluster (in progress).
