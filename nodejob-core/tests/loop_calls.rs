//! The async loop turns each of the machine's intents into exactly one `JobApi` call with exactly
//! the right arguments. Here the exact call is the point, so the API is a mockall mock with every
//! expectation in sequence; the machine's decisions are tested in `machine.rs`.

mod support;

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use mockall::Sequence;
use mockall::predicate::{always, eq};

use nodejob_core::{
    ApiError, ApiResult, Change, Clock, JobApi, LOG_LIMIT_BYTES, NodeApi, NodeChange, NodeChanges,
    NodesAt, build, run_exit_code_logs,
};
use support::{complete, job, pod, spec};

mockall::mock! {
    /// The calls, with owned arguments (mockall cannot match `Option<&T>` through async_trait).
    Calls {
        fn create_job(&self, job: Job) -> ApiResult<Job>;
        fn get_job(&self, namespace: String, name: String) -> ApiResult<Job>;
        fn list_jobs(&self, namespace: String, label_selector: String) -> ApiResult<Vec<Job>>;
        fn delete_job(&self, namespace: String, name: String, preconditions: Option<Preconditions>) -> ApiResult<()>;
        fn list_pods(&self, namespace: String, label_selector: String) -> ApiResult<Vec<Pod>>;
        fn pod_log(&self, namespace: String, pod: String, container: String, limit_bytes: u64) -> ApiResult<String>;
        fn list_events(&self, namespace: String, involved_uid: String) -> ApiResult<Vec<Event>>;
        fn create_event(&self, event: Event) -> ApiResult<Event>;
        fn wait_job(&self, namespace: String, name: String, since: Option<String>, timeout: Duration) -> ApiResult<Change<Job>>;
        fn get_node(&self, name: String) -> ApiResult<Node>;
        fn sleep(&self, duration: Duration);
    }
}

/// `JobApi` forwarding every call to the mock.
struct Api(MockCalls);

#[async_trait]
impl Clock for Api {
    fn now(&self) -> Duration {
        Duration::ZERO
    }
    async fn sleep(&self, duration: Duration) {
        self.0.sleep(duration)
    }
    fn wall_time(&self) -> k8s_openapi::jiff::Timestamp {
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH
    }
}

#[async_trait]
impl JobApi for Api {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        self.0.create_job(job.clone())
    }
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.0.get_job(namespace.into(), name.into())
    }
    async fn list_jobs(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Job>> {
        self.0.list_jobs(namespace.into(), selector.into())
    }
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        pre: Option<&Preconditions>,
    ) -> ApiResult<()> {
        self.0
            .delete_job(namespace.into(), name.into(), pre.cloned())
    }
    async fn list_pods(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Pod>> {
        self.0.list_pods(namespace.into(), selector.into())
    }
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit: u64,
    ) -> ApiResult<String> {
        self.0
            .pod_log(namespace.into(), pod.into(), container.into(), limit)
    }
    async fn list_events(&self, namespace: &str, uid: &str) -> ApiResult<Vec<Event>> {
        self.0.list_events(namespace.into(), uid.into())
    }
    async fn create_event(&self, event: &Event) -> ApiResult<Event> {
        self.0.create_event(event.clone())
    }
    async fn wait_job(
        &self,
        ns: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        self.0
            .wait_job(ns.into(), name.into(), since.map(String::from), timeout)
    }
}

#[async_trait]
impl NodeApi for Api {
    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        self.0.get_node(name.into())
    }
    async fn list_nodes(&self, selector: &str) -> ApiResult<Vec<Node>> {
        unreachable!("a run lists no nodes: {selector}")
    }
    async fn list_nodes_at(&self) -> ApiResult<NodesAt> {
        unreachable!("a run lists no nodes")
    }
    async fn wait_nodes(&self, since: &str, _: Duration) -> ApiResult<NodeChanges> {
        unreachable!("a run watches no nodes: {since}")
    }
    async fn wait_node(&self, name: &str, _: Option<&str>, _: Duration) -> ApiResult<Change<Node>> {
        unreachable!("a run waits on no node: {name}")
    }
    async fn patch_node(&self, name: &str, _: &str, _: &[NodeChange]) -> ApiResult<Node> {
        unreachable!("a run patches no node: {name}")
    }
    async fn version(&self) -> ApiResult<k8s_openapi::apimachinery::pkg::version::Info> {
        unreachable!("a run reads no version")
    }
    async fn patch_node_conditions(
        &self,
        name: &str,
        _: Option<&str>,
        _: &[NodeChange],
        _: &[k8s_openapi::api::core::v1::NodeCondition],
    ) -> ApiResult<Node> {
        unreachable!("a run sets no condition on node {name}")
    }
}

#[tokio::test]
async fn each_intent_is_one_call_with_the_exact_arguments() {
    let spec = spec();
    let mut api = MockCalls::new();
    let mut seq = Sequence::new();
    api.expect_get_job()
        .with(
            eq("kube-system".to_string()),
            eq("upgrade-node-a".to_string()),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| {
            Err(ApiError::not_found(
                "jobs.batch \"upgrade-node-a\" not found",
            ))
        });
    let desired = build(&spec);
    api.expect_create_job()
        .with(eq(desired))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(*job("u1", 1)));
    api.expect_wait_job()
        .with(
            eq("kube-system".to_string()),
            eq("upgrade-node-a".to_string()),
            eq(Some("1".to_string())),
            eq(nodejob_core::POLL_INTERVAL),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _, _| Ok(Change::Applied(*complete("u1", 4))));
    api.expect_list_pods()
        .with(
            eq("kube-system".to_string()),
            eq("batch.kubernetes.io/controller-uid=u1".to_string()),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(vec![pod("upgrade-node-a-x7k2p", "u1", "upgrade", Some(0))]));
    api.expect_pod_log()
        .with(
            eq("kube-system".to_string()),
            eq("upgrade-node-a-x7k2p".to_string()),
            eq("upgrade".to_string()),
            eq(LOG_LIMIT_BYTES),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _, _| Ok("done\n".into()));
    api.expect_delete_job()
        .with(
            eq("kube-system".to_string()),
            eq("upgrade-node-a".to_string()),
            eq(Some(Preconditions {
                uid: Some("u1".into()),
                resource_version: Some("4".into()),
            })),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _| Ok(()));
    api.expect_sleep().with(always()).never();
    api.expect_list_events().never();
    api.expect_create_event().never();
    // A run reads its Job by name, never by listing.
    api.expect_list_jobs().never();

    let (code, log) = run_exit_code_logs(&Api(api), &spec).await.expect("run");
    assert_eq!((code, log.as_str()), (0, "done\n"));
}

#[tokio::test]
async fn a_wait_that_times_out_is_followed_by_one_read_of_the_spec_node() {
    let spec = spec();
    let mut api = MockCalls::new();
    let mut seq = Sequence::new();
    api.expect_get_job()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Err(ApiError::not_found("not found")));
    api.expect_create_job()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(*job("u1", 1)));
    api.expect_wait_job()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _, _| Ok(Change::TimedOut));
    api.expect_get_node()
        .with(eq("node-a".to_string()))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Err(ApiError::not_found("nodes \"node-a\" not found")));
    api.expect_list_events().never();
    api.expect_sleep().with(always()).never();

    let e = run_exit_code_logs(&Api(api), &spec).await.unwrap_err();
    assert!(
        matches!(&e, nodejob_core::Error::NodeDeleted { node, .. } if node == "node-a"),
        "{e}"
    );
}
