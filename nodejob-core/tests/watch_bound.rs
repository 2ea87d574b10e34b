//! [`watch_until`](nodejob_core::watch::watch_until) keeps its bound when the watch fails
//! transiently: each retry waits only what is left, never the timeout worked out before the
//! backoff.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::{ApiError, Clock, Verb, wait_pod_gone};
use nodejob_fake::{FakeCluster, Times, host};

#[tokio::test(start_paused = true)]
async fn a_wait_whose_watch_fails_transiently_still_ends_at_its_bound() -> anyhow::Result<()> {
    let cluster = FakeCluster::with_seed(3);
    cluster.add_node("node-a")?;
    let pod = cluster.create_pod_now(&Pod {
        metadata: ObjectMeta {
            name: Some("stays".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-a".into()),
            containers: vec![Container {
                name: "app".into(),
                command: Some(vec!["sleep".into(), host::ignore_sigterm()]),
                ..Container::default()
            }],
            termination_grace_period_seconds: Some(600),
            ..PodSpec::default()
        }),
        status: None,
    })?;
    let bound = Duration::from_secs(10);
    // At 8 s another actor deletes the pod (it ignores SIGTERM: it stays for its 600 s grace
    // period), which ends the first watch; the next two watches fail. A retry that kept
    // the timeout worked out before its backoff would wait on past the bound.
    cluster.schedule(Duration::from_secs(8), |c| {
        c.delete_pod_now("default", "stays")
            .expect("the pod exists");
        c.fail(
            Verb::WaitPod,
            ApiError::transient(503, "the server is currently unable to handle the request"),
            Times::N(2),
        );
    });
    let start = cluster.now();
    let outcome = wait_pod_gone(&cluster, &pod, bound).await;
    let took = cluster.now() - start;
    // Either the bound ran out with the pod still there, or the 503s ran into the bound and are
    // reported: both at the bound, not past it.
    match &outcome {
        Ok(gone) => assert!(!gone, "the pod stays"),
        Err(e) => assert!(
            e.api_error().is_some_and(|a| a.is_retryable()),
            "only the transient failure may surface: {e}"
        ),
    }
    assert!(
        took <= bound,
        "waited {took:?}, past the bound of {bound:?}"
    );
    assert!(cluster.count(Verb::WaitPod) >= 2, "the watch was retried");
    Ok(())
}
