//! The conformance suite on a real control plane, acting as the ServiceAccount of
//! `deploy/rbac.yaml`. Run by `e2e/run`.

nodejob_conformance::conformance!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    nodejob_e2e::KubeBackend::new()
        .await
        .expect("end-to-end backend")
);
