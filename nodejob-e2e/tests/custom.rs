//! The custom resource scenarios (the declarative rolls' kinds: generation, the status
//! subresource and its server-side apply, finalizers, the watch) on a real apiserver, the CRDs
//! of `deploy/controller/` installed. Run by `e2e/run`.

nodejob_conformance::conformance_custom!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    nodejob_e2e::CustomsBackend::new()
        .await
        .expect("end-to-end backend")
);
