//! The node, pod, eviction and Lease scenarios (drain against real budgets, the fenced Lease) on
//! a real control plane with its scheduler and its ReplicaSet, DaemonSet and disruption
//! controllers, acting as the ServiceAccount of `deploy/rbac.yaml`. Run by `e2e/run`.

nodejob_conformance::conformance_nodes!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    nodejob_e2e::KubeBackend::for_workloads()
        .await
        .expect("end-to-end backend")
);
