//! [`KubeApi`]: core's [`JobApi`] and [`Clock`] over a `kube::Client`.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::{
    Api, DeleteParams, GetParams, ListParams, LogParams, ObjectList, PostParams, PropagationPolicy,
};
use kube::client::Body;
use kube::core::Request;
use kube::{Client, Resource};
use nodejob_core::{ApiError, ApiResult, Change, Clock, ErrorKind, JobApi};
use tokio::time::Instant;

use crate::classify::{error_chain, from_kube, from_response};
use crate::config::{ConnectError, load_config};
use crate::watch::{Key, Tracker, Watched};

/// How long one request other than a watch may take before it counts as a (transient) timeout.
/// kube sets no read timeout of its own (`Config::read_timeout` is `None`), so a stalled
/// apiserver would otherwise hold a call, and the runner's bound with it, forever.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// [`JobApi`] and [`Clock`] over a `kube::Client`.
///
/// Every verb is one HTTP request, classified into core's [`ApiError`] by status code and
/// `Status` reason; nothing is retried here (the runner retries, inside its own bound). Waits are
/// watches kept open across calls: see [`JobApi::wait_job`] below.
///
/// Time is tokio's: [`Clock::now`] is the time since construction on `tokio::time::Instant`
/// (monotonic, `std::time::Instant` outside paused-time tests) and [`Clock::sleep`] is
/// `tokio::time::sleep`, so both run on the same clock, paused or not.
pub struct KubeApi {
    client: Client,
    origin: Instant,
    jobs: Tracker<Job>,
    nodes: Tracker<Node>,
}

impl fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeApi")
            .field("default_namespace", &self.client.default_namespace())
            .finish_non_exhaustive()
    }
}

impl KubeApi {
    /// Over `client`, as it is: a client built by [`kube::Client::try_default`] keeps kube's
    /// retry layer; use [`KubeApi::from_config`] or [`KubeApi::connect`] to have it off.
    pub fn new(client: Client) -> Self {
        KubeApi {
            client,
            origin: Instant::now(),
            jobs: Tracker::new(),
            nodes: Tracker::new(),
        }
    }

    /// Over a client built from `config`, with kube's retry layer off
    /// (`config.default_retry = false`, whatever it was).
    pub fn from_config(mut config: kube::Config) -> Result<Self, ConnectError> {
        config.default_retry = false;
        let cluster_url = config.cluster_url.to_string();
        let client = Client::try_from(config).map_err(|source| ConnectError::Client {
            cluster_url,
            source,
        })?;
        Ok(Self::new(client))
    }

    /// Loads the configuration as kubectl does, from `context` of the kubeconfig or its current
    /// context (see [`load_config`]), and connects with kube's retry off.
    pub async fn connect(context: Option<&str>) -> Result<Self, ConnectError> {
        Self::from_config(load_config(context).await?)
    }

    /// [`KubeApi::connect`] to the current context (or in-cluster).
    pub async fn try_default() -> Result<Self, ConnectError> {
        Self::connect(None).await
    }

    /// The client underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends `request` and returns the body of a 2xx answer; any other answer, or none within
    /// [`REQUEST_TIMEOUT`], is an [`ApiError`].
    pub(crate) async fn call(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> ApiResult<Vec<u8>> {
        let request =
            request.map_err(|e| ApiError::new(ErrorKind::BadRequest, 0, error_chain(&e)))?;
        let exchange = async {
            let response = self
                .client
                .send(request.map(Body::from))
                .await
                .map_err(from_kube)?;
            let code = response.status();
            let body = response
                .into_body()
                .collect_bytes()
                .await
                .map_err(from_kube)?;
            if code.is_success() {
                Ok(body.to_vec())
            } else {
                Err(from_response(code.as_u16(), &body))
            }
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_elapsed| {
                Err(ApiError::transient(
                    0,
                    format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()),
                ))
            })
    }

    /// [`KubeApi::call`], decoding the answer as JSON.
    pub(crate) async fn call_json<T: DeserializeOwned>(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> ApiResult<T> {
        let body = self.call(request).await?;
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::new(ErrorKind::Other, 0, format!("undecodable answer: {e}")))
    }

    fn jobs(ns: &str) -> Request {
        Request::new(Job::url_path(&(), Some(ns)))
    }

    fn pods(ns: &str) -> Request {
        Request::new(Pod::url_path(&(), Some(ns)))
    }

    fn nodes() -> Request {
        Request::new(Node::url_path(&(), None))
    }

    fn job_key(ns: &str, name: &str) -> Key {
        (ns.to_string(), name.to_string())
    }

    /// Records what a read of one object answered, for a later [`Change::Deleted`].
    fn track<K: Clone>(tracker: &Tracker<K>, key: &Key, answer: &ApiResult<K>) {
        match answer {
            Ok(obj) => tracker.saw(key, obj),
            Err(e) if e.is_not_found() => tracker.saw_gone(key),
            Err(_) => {}
        }
    }
}

#[async_trait]
impl Clock for KubeApi {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

#[async_trait]
impl JobApi for KubeApi {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let ns = job
            .metadata
            .namespace
            .as_deref()
            .unwrap_or(self.client.default_namespace());
        let body = serde_json::to_vec(job)
            .map_err(|e| ApiError::new(ErrorKind::Invalid, 0, format!("encoding the job: {e}")))?;
        let answer = self
            .call_json::<Job>(Self::jobs(ns).create(&PostParams::default(), body))
            .await;
        if let Ok(created) = &answer {
            let name = created.metadata.name.as_deref().unwrap_or_default();
            Self::track(&self.jobs, &Self::job_key(ns, name), &answer);
        }
        answer
    }

    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        let answer = self
            .call_json(Self::jobs(namespace).get(name, &GetParams::default()))
            .await;
        Self::track(&self.jobs, &Self::job_key(namespace, name), &answer);
        answer
    }

    /// `DeleteOptions` in the body: `propagationPolicy: Foreground`, so the Job is kept (with a
    /// `deletionTimestamp` and the `foregroundDeletion` finalizer) until the garbage collector
    /// has deleted its Pods
    /// (<https://kubernetes.io/docs/concepts/architecture/garbage-collection/#foreground-deletion>);
    /// and `preconditions {uid, resourceVersion}`, which the apiserver checks against the stored
    /// object before deleting, answering 409 Conflict when either differs
    /// (<https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/>).
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<()> {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: preconditions.map(|p| kube::api::Preconditions {
                uid: p.uid.clone(),
                resource_version: p.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        // kube sends the options as a bare JSON object: the apiserver's delete handler decodes a
        // body without apiVersion/kind as meta.k8s.io/v1 DeleteOptions (its `defaultGVK`,
        // `apiserver/pkg/endpoints/handlers/delete.go`). It answers 200 with the Job (now carrying
        // a deletionTimestamp) or 200/202 with a Status: either way accepted.
        self.call(Self::jobs(namespace).delete(name, &dp))
            .await
            .map(drop)
    }

    async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>> {
        let lp = ListParams::default().labels(label_selector);
        let list: ObjectList<Pod> = self.call_json(Self::pods(namespace).list(&lp)).await?;
        Ok(list.items)
    }

    /// `limitBytes` bounds what the kubelet sends. The apiserver fetches the log from the
    /// node's kubelet; when it cannot reach it, it answers 500 with the dial error as the
    /// message and no reason (an error it did not classify), which stays
    /// [`ErrorKind::Transient`] with that message.
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        let lp = LogParams {
            container: Some(container.to_string()),
            limit_bytes: Some(i64::try_from(limit_bytes).unwrap_or(i64::MAX)),
            ..LogParams::default()
        };
        let body = self.call(Self::pods(namespace).logs(pod, &lp)).await?;
        // A log is the container's bytes: invalid UTF-8 (or a multi-byte character cut by
        // `limitBytes`) is replaced, not an error.
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// `involvedObject.uid` is one of the field selectors core/v1 Events support
    /// (`AddFieldLabelConversionsForEvent` in `pkg/apis/core/v1/conversion.go`).
    async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>> {
        let lp = ListParams::default().fields(&format!("involvedObject.uid={involved_uid}"));
        let events = Request::new(Event::url_path(&(), Some(namespace)));
        let list: ObjectList<Event> = self.call_json(events.list(&lp)).await?;
        Ok(list.items)
    }

    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        let answer = self
            .call_json(Self::nodes().get(name, &GetParams::default()))
            .await;
        Self::track(&self.nodes, &(String::new(), name.to_string()), &answer);
        answer
    }

    /// A watch with `fieldSelector=metadata.name=<name>`, from `since`, kept open across calls:
    /// a call whose `since` is the resourceVersion the previous call returned reads on from the
    /// same stream. A stream the apiserver ends is reopened from its last resourceVersion
    /// (bookmarks included); a 410 Gone re-lists the object by name and resumes from the list's
    /// resourceVersion, answering the change the watch missed (if any), never the error.
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        Watched {
            kube: self,
            tracker: &self.jobs,
            api: Api::<Job>::namespaced(self.client.clone(), namespace),
            collection: Self::jobs(namespace),
            key: Self::job_key(namespace, name),
        }
        .wait(since, timeout)
        .await
    }

    /// As [`JobApi::wait_job`], for a Node.
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>> {
        Watched {
            kube: self,
            tracker: &self.nodes,
            api: Api::<Node>::all(self.client.clone()),
            collection: Self::nodes(),
            key: (String::new(), name.to_string()),
        }
        .wait(since, timeout)
        .await
    }
}
