//! [`KubeApi`]: core's API traits and [`Clock`] over a `kube::Client`, one file per trait.

mod custom;
mod job;
mod lease;
mod node;
mod pod;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::version::Info;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::core::Request;
use kube::{Client, Resource};
use nodejob_core::{ApiResult, Change, Clock};
use tokio::time::Instant;

use crate::config::{ConnectError, load_config};
use crate::every_node::EveryNode;
use crate::throttle::RateLimit;
use crate::transport::{Built, call_json, exchange};
use crate::watch::{Key, Settled, Tracker, Watched};

/// What answered [`KubeApi::reach`]'s `GET /version`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reached {
    /// A Kubernetes apiserver.
    Apiserver,
    /// A server that answers HTTP, but not as an apiserver: a kubeconfig's `server` naming
    /// some other HTTPS endpoint.
    NotApiserver {
        /// Its answer's status, as HTTP says it (`404 Not Found`).
        status: String,
    },
}

impl Reached {
    /// What an answer of `code` with `body` to `GET /version` says of the server.
    fn of(code: u16, body: &[u8]) -> Self {
        let versioned = || {
            serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| {
                v.get("gitVersion")
                    .is_some_and(serde_json::Value::is_string)
            })
        };
        match code {
            200 if versioned() => Reached::Apiserver,
            401 | 403 | 429 | 500..=599 => Reached::Apiserver,
            _ => {
                let reason = http::StatusCode::from_u16(code)
                    .ok()
                    .and_then(|s| s.canonical_reason());
                Reached::NotApiserver {
                    status: match reason {
                        Some(reason) => format!("{code} {reason}"),
                        None => code.to_string(),
                    },
                }
            }
        }
    }
}

/// Core's [`JobApi`](nodejob_core::JobApi), [`NodeApi`](nodejob_core::NodeApi),
/// [`PodApi`](nodejob_core::PodApi), [`LeaseApi`](nodejob_core::LeaseApi) and [`Clock`] over a
/// `kube::Client`.
///
/// Every verb is one HTTP request, classified into core's
/// [`ApiError`](nodejob_core::ApiError) by status code and `Status` reason; nothing is retried
/// here (the caller retries, inside its own bound). Waits (`wait_job`, `wait_node`, `wait_pod`)
/// are watches kept open across calls, one per object.
///
/// Time is tokio's: [`Clock::now`] is the time since construction on `tokio::time::Instant`
/// (monotonic, `std::time::Instant` outside paused-time tests) and [`Clock::sleep`] is
/// `tokio::time::sleep`, so both run on the same clock, paused or not.
pub struct KubeApi {
    client: Client,
    origin: Instant,
    jobs: Tracker<Job>,
    nodes: Tracker<Node>,
    /// The watch of every node ([`NodeApi::wait_nodes`](nodejob_core::NodeApi::wait_nodes)).
    every_node: EveryNode,
    pods: Tracker<Pod>,
    /// The apiserver's version as [`KubeApi::reach`] read it, and when: the answer of the
    /// next [`NodeApi::version`](nodejob_core::NodeApi::version) within [`REACHED_STANDS`]
    /// (taken by it, so answered once).
    reached: std::sync::Mutex<Option<(Instant, Info)>>,
}

/// How long the version [`KubeApi::reach`] read stands for the next
/// [`NodeApi::version`](nodejob_core::NodeApi::version): a command reaches the apiserver
/// right before its work, whose version-skew gate asks the version before its first write
/// (a read of the nodes between); a controller that reached it long ago reads it again.
pub const REACHED_STANDS: Duration = Duration::from_secs(10);

impl fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeApi")
            .field("default_namespace", &self.client.default_namespace())
            .finish_non_exhaustive()
    }
}

impl KubeApi {
    /// Over `client`, as it is: a client built by [`kube::Client::try_default`] keeps kube's
    /// retry layer and has no client-side rate limit; use [`KubeApi::from_config`] or
    /// [`KubeApi::connect`] to have the one off and the other on (or put a
    /// [`crate::RateLimitLayer`] in the client's stack).
    pub fn new(client: Client) -> Self {
        KubeApi {
            client,
            origin: Instant::now(),
            jobs: Tracker::new(),
            nodes: Tracker::new(),
            every_node: EveryNode::default(),
            pods: Tracker::new(),
            reached: std::sync::Mutex::new(None),
        }
    }

    /// Over a client built from `config`: kube's stack with `TCP_NODELAY` on its connections,
    /// kube's retry layer off (`config.default_retry = false`, whatever it was), and the
    /// default client-side rate limit ([`RateLimit::DEFAULT`]).
    pub fn from_config(config: kube::Config) -> Result<Self, ConnectError> {
        Self::from_config_limited(config, RateLimit::DEFAULT)
    }

    /// [`KubeApi::from_config`], its requests held to `limit` (see [`crate::RateLimitLayer`]:
    /// every verb takes a token, a watch none).
    pub fn from_config_limited(
        mut config: kube::Config,
        limit: RateLimit,
    ) -> Result<Self, ConnectError> {
        config.default_retry = false;
        let cluster_url = config.cluster_url.to_string();
        let client =
            crate::client::client(config, limit).map_err(|source| ConnectError::Client {
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

    /// Whether the apiserver answers, and as an apiserver: one `GET /version` (readable
    /// without credentials in a default cluster), bounded by `within` whatever the connect
    /// timeout. A 200 whose JSON has `gitVersion` is an apiserver, and so is a 401 or 403 (it
    /// authenticates; the verbs then fail at once, saying why), a 429 or a 5xx (busy or
    /// starting; the verbs retry those); any other answer (a 404, a page that is no version)
    /// is [`Reached::NotApiserver`]. Only no answer is an error: a refused or reset
    /// connection, a TLS failure, nothing within `within`. Made once before any work, so that
    /// an unreachable cluster is said in seconds rather than after the callers' retries of
    /// transient errors, bounded in minutes. The version a 200 answers is the next
    /// [`NodeApi::version`](nodejob_core::NodeApi::version)'s answer within
    /// [`REACHED_STANDS`]: the run's first read of it, not a second.
    ///
    /// # Errors
    /// [`ErrorKind::Transient`](nodejob_core::ErrorKind::Transient) naming the innermost cause
    /// (`tcp connect error: Connection refused (os error 111)`), or `no answer within ...`.
    pub async fn reach(&self, within: Duration) -> ApiResult<Reached> {
        let request = http::Request::get("/version")
            .body(Vec::new())
            .map_err(kube::core::request::Error::BuildRequest);
        match tokio::time::timeout(within, exchange(&self.client, request)).await {
            Ok(answer) => answer.map(|a| {
                if a.code == 200
                    && let Ok(info) = serde_json::from_slice::<Info>(&a.body)
                {
                    *self.reached.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((Instant::now(), info));
                }
                Reached::of(a.code, &a.body)
            }),
            Err(_elapsed) => Err(nodejob_core::ApiError::transient(
                0,
                format!("no answer within {}s", within.as_secs_f64()),
            )),
        }
    }

    /// The version [`KubeApi::reach`] read, taken, if it read one within [`REACHED_STANDS`].
    pub(crate) fn reached(&self) -> Option<Info> {
        let reached = self
            .reached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        reached
            .filter(|(at, _)| at.elapsed() <= REACHED_STANDS)
            .map(|(_, info)| info)
    }

    /// Who the apiserver takes this client for, as `kubectl auth whoami` asks it: a
    /// `SelfSubjectReview` (authentication.k8s.io/v1, GA since 1.28; every authenticated user
    /// may create one, by the `system:basic-user` ClusterRole), its `status.userInfo.username`.
    /// What `nodejob pause` records as who paused, when `--by` does not say.
    ///
    /// # Errors
    /// The API's refusal (an apiserver without the API: NotFound), or an answer with no
    /// username.
    pub async fn whoami(&self) -> ApiResult<String> {
        use k8s_openapi::api::authentication::v1::SelfSubjectReview;
        let review = SelfSubjectReview::default();
        let body = serde_json::to_vec(&review)
            .map_err(|e| nodejob_core::ApiError::invalid(e.to_string()))?;
        let request = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(kube::core::request::Error::BuildRequest);
        let answer: SelfSubjectReview = call_json(&self.client, request).await?;
        (answer.status.and_then(|s| s.user_info))
            .and_then(|u| u.username)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                nodejob_core::ApiError::new(
                    nodejob_core::ErrorKind::Other,
                    0,
                    "the SelfSubjectReview named no user",
                )
            })
    }

    /// The client underneath.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The namespace of an object to create: its own, else the client's default.
    fn namespace_of<'a>(&'a self, namespace: Option<&'a str>) -> &'a str {
        namespace.unwrap_or(self.client.default_namespace())
    }

    /// Reads one object, recording what the read answered in `tracker` for a later
    /// [`Change::Deleted`].
    async fn get_tracked<K: Clone + DeserializeOwned>(
        &self,
        tracker: &Tracker<K>,
        key: Key,
        request: Built,
    ) -> ApiResult<K> {
        let answer = call_json(&self.client, request).await;
        match &answer {
            Ok(obj) => tracker.saw(&key, obj),
            Err(e) if e.is_not_found() => tracker.saw_gone(&key),
            Err(_) => {}
        }
        answer
    }

    /// The next change of the object `key` of `collection` after `since`, on its open watch:
    /// see [`crate::watch`].
    async fn wait_on<K>(
        &self,
        tracker: &Tracker<K>,
        collection: Request,
        key: Key,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<K>>
    where
        K: Resource<DynamicType = ()>
            + Settled
            + Clone
            + DeserializeOwned
            + fmt::Debug
            + Send
            + 'static,
    {
        Watched {
            client: &self.client,
            tracker,
            collection,
            key,
        }
        .wait(since, timeout)
        .await
    }
}

/// `(namespace, name)` of a namespaced object.
fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_string(), name.to_string())
}

/// `("", name)` of a cluster-scoped object.
fn cluster_key(name: &str) -> Key {
    (String::new(), name.to_string())
}

/// The collection of `K` in `namespace` (cluster-wide, or every namespace, when `None`).
fn collection<K: Resource<DynamicType = ()>>(namespace: Option<&str>) -> Request {
    Request::new(K::url_path(&(), namespace))
}

#[async_trait]
impl Clock for KubeApi {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }

    /// This machine's clock: Lease times are written and compared in it, as client-go's
    /// leader election does.
    fn wall_time(&self) -> Timestamp {
        Timestamp::now()
    }
}

#[cfg(test)]
mod tests {
    use super::Reached;

    /// An apiserver says its version, or that it wants credentials, or that it is busy; any
    /// other answer is another server (issue 33: a 404 read as "not paused").
    #[test]
    fn what_answered_get_version() {
        let version = br#"{"major":"1","minor":"33","gitVersion":"v1.33.1"}"#;
        let not = |status: &str| Reached::NotApiserver {
            status: status.into(),
        };
        for (code, body, reached) in [
            (200, &version[..], Reached::Apiserver),
            (401, b"{}", Reached::Apiserver),
            (403, b"", Reached::Apiserver),
            (503, b"", Reached::Apiserver),
            (404, b"404 page not found", not("404 Not Found")),
            (200, b"<html>hello</html>", not("200 OK")),
            (200, br#"{"version":"2"}"#, not("200 OK")),
            (302, b"", not("302 Found")),
        ] {
            assert_eq!(Reached::of(code, body), reached, "{code}");
        }
    }
}
