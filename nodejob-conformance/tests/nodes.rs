//! The node, pod, eviction and Lease scenarios on the in-memory cluster, in virtual time.

nodejob_conformance::conformance_nodes!(
    #[tokio::test(start_paused = true)]
    nodejob_conformance::FakeBackend::for_workloads(11)
);
