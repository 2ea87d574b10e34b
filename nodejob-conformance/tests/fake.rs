//! The conformance suite on the in-memory cluster, in virtual time.

nodejob_conformance::conformance!(
    #[tokio::test(start_paused = true)]
    nodejob_conformance::FakeBackend::new(11)
);
