//! The custom resource scenarios (the declarative rolls' kinds) on the in-memory cluster.

nodejob_conformance::conformance_custom!(
    #[tokio::test(start_paused = true)]
    nodejob_conformance::FakeBackend::for_customs(13)
);
