//! The forwarding layer ([`Layer`]): a verb reaches the layer's hook as the request it is (its
//! verb, namespace, subject, and whether it writes), a hook that refuses sends nothing below,
//! and a hook's answer of the wrong type is an error naming the verb.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Preconditions};
use nodejob_core::{
    Answer, ApiError, ApiResult, DryRun, ErrorKind, JobApi, Layer, LeaseApi, NodeApi, NodeChange,
    PodApi, Request, Verb,
};
use nodejob_fake::FakeCluster;

/// What a hook saw of one request: verb, namespace, subject, whether it writes.
type Seen = (Verb, Option<String>, String, bool);

/// A layer over the fake that notes each request, then passes it on.
struct Noting {
    below: FakeCluster,
    seen: Mutex<Vec<Seen>>,
}

impl Layer for Noting {
    type Below = FakeCluster;

    fn below(&self) -> &FakeCluster {
        &self.below
    }

    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        self.seen.lock().unwrap().push((
            request.verb(),
            request.namespace().map(String::from),
            request.subject().to_string(),
            request.writes(),
        ));
        serve.await
    }
}

fn meta(namespace: &str, name: Option<&str>, generate_name: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(namespace.into()),
        name: name.map(String::from),
        generate_name: generate_name.map(String::from),
        ..ObjectMeta::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_verb_reaches_the_hook_as_the_request_it_is() -> anyhow::Result<()> {
    let api = Noting {
        below: FakeCluster::new(),
        seen: Mutex::default(),
    };
    // What the fake answers does not matter here: the hook sees the request before it.
    let job = Job {
        metadata: meta("ns", Some("job"), None),
        ..Job::default()
    };
    let _ = api.create_job(&job).await;
    let _ = api.get_job("ns", "job").await;
    let _ = api.list_jobs("ns", "app=x").await;
    let _ = api
        .delete_job("ns", "job", Some(&Preconditions::default()))
        .await;
    let _ = api.pod_log("ns", "pod", "c", 1).await;
    let _ = api.list_events("ns", "uid-1").await;
    let event = Event {
        metadata: meta("ns", None, Some("job.")),
        ..Event::default()
    };
    let _ = api.create_event(&event).await;
    let _ = api.wait_job("ns", "job", None, Duration::ZERO).await;
    let _ = api.patch_node("n1", "7", &[NodeChange::Cordon]).await;
    let _ = api.version().await;
    let _ = api.patch_node_conditions("n1", None, &[], &[]).await;
    let _ = api.list_node_pods("n1").await;
    let _ = api.evict_pod("ns", "p", "u", None, DryRun::All).await;
    let _ = api.evict_pod("ns", "p", "u", None, DryRun::No).await;
    let lease = Lease {
        metadata: meta("kube-system", Some("lock"), None),
        ..Lease::default()
    };
    let _ = api.replace_lease(&lease).await;

    let some = |ns: &str| Some(ns.to_string());
    let expected: Vec<Seen> = vec![
        (Verb::CreateJob, some("ns"), "job".into(), true),
        (Verb::GetJob, some("ns"), "job".into(), false),
        (Verb::ListJobs, some("ns"), "app=x".into(), false),
        (Verb::DeleteJob, some("ns"), "job".into(), true),
        (Verb::PodLog, some("ns"), "pod".into(), false),
        (Verb::ListEvents, some("ns"), "uid-1".into(), false),
        (Verb::CreateEvent, some("ns"), "job.".into(), true),
        (Verb::WaitJob, some("ns"), "job".into(), false),
        (Verb::PatchNode, None, "n1".into(), true),
        (Verb::Version, None, String::new(), false),
        (Verb::PatchNodeConditions, None, "n1".into(), true),
        (Verb::ListNodePods, None, "n1".into(), false),
        (Verb::EvictPod, some("ns"), "p".into(), false),
        (Verb::EvictPod, some("ns"), "p".into(), true),
        (Verb::ReplaceLease, some("kube-system"), "lock".into(), true),
    ];
    assert_eq!(*api.seen.lock().unwrap(), expected);
    Ok(())
}

/// A layer over the fake that answers every call itself with `answer`.
struct Answering {
    below: FakeCluster,
    answer: fn() -> ApiResult<Answer>,
}

impl Layer for Answering {
    type Below = FakeCluster;

    fn below(&self) -> &FakeCluster {
        &self.below
    }

    async fn around<'a>(
        &'a self,
        _request: Request<'a>,
        _serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        (self.answer)()
    }
}

#[tokio::test(start_paused = true)]
async fn a_hook_that_answers_itself_sends_nothing_below() -> anyhow::Result<()> {
    let refusing = Answering {
        below: FakeCluster::new(),
        answer: || Err(ApiError::forbidden("not today")),
    };
    let err = refusing.create_job(&Job::default()).await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::Forbidden, "not today")
    );
    let answering = Answering {
        below: refusing.below.clone(),
        answer: || Ok(Answer::Nodes(Vec::new())),
    };
    assert_eq!(answering.list_nodes("").await?, Vec::new());
    assert_eq!(
        refusing.below.calls(),
        Vec::new(),
        "nothing reached the fake"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_answer_of_the_wrong_type_is_an_error_naming_the_verb() -> anyhow::Result<()> {
    let api = Answering {
        below: FakeCluster::new(),
        answer: || Ok(Answer::Nodes(Vec::new())),
    };
    let err = api.get_lease("ns", "lock").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Other);
    assert_eq!(err.message, "a layer answered get_lease with Nodes");
    Ok(())
}
