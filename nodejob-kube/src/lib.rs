//! nodejob over kube-rs: [`KubeApi`] implements `nodejob_core`'s [`JobApi`], [`NodeApi`],
//! [`PodApi`], [`LeaseApi`] and [`Clock`] against a real apiserver. It is the only crate of the
//! workspace that depends on `kube`.
//!
//! Its connections have `TCP_NODELAY` on (kube's own connector leaves Nagle's algorithm on,
//! which stalls the first request on a new connection by about 40 ms).
//!
//! It holds no policy: what to create, evict or patch, when to delete and how long to wait are
//! the callers' (`nodejob-core`'s runner, drain and Lease). It does not retry either (kube's
//! retry layer is turned off by [`KubeApi::connect`] and [`KubeApi::from_config`]): every verb
//! is one request, bounded by [`REQUEST_TIMEOUT`], and failures are classified into core's
//! [`ApiError`] by HTTP status code and `Status` reason, so the callers' bounds hold. A 429 or
//! 5xx answer's `Retry-After` header is kept in [`ApiError::retry_after`], so that the callers
//! send the request again only once it has passed, as client-go does.
//!
//! Its requests are held to a client-side rate limit ([`RateLimit`], by default
//! [`RateLimit::DEFAULT`]: 100 a second, bursts of 200), as client-go's `QPS` and `Burst`:
//! every verb takes a token; a watch takes none (see [`RateLimitLayer`]).
//!
//! ```text
//!   runner, drain, lease ──traits──▶ KubeApi ──one request per verb──────▶ apiserver
//!                                       │  wait_job / wait_node / wait_pod: one open
//!                                       └─ watch per object, read on across waits,
//!                                          resumed after close / 410 ─────────────▶
//! ```
//!
//! # What each verb costs
//!
//! | verb | request |
//! |---|---|
//! | `reach` | `GET /version`, bounded by the caller's `within`: any HTTP answer is reached |
//! | `create_job` | `POST /apis/batch/v1/namespaces/{ns}/jobs` |
//! | `get_job` | `GET .../jobs/{name}` |
//! | `delete_job` | `DELETE .../jobs/{name}`, body `{propagationPolicy: Foreground, preconditions}` |
//! | `list_pods` | `GET /api/v1/namespaces/{ns}/pods?labelSelector=...` |
//! | `pod_log` | `GET .../pods/{pod}/log?container=...&limitBytes=...` |
//! | `list_events` | `GET /api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.uid=...` |
//! | `get_node` | `GET /api/v1/nodes/{name}` |
//! | `list_nodes` | `GET /api/v1/nodes[?labelSelector=...]`, sorted by name |
//! | `patch_node` | `PATCH /api/v1/nodes/{name}`, `application/merge-patch+json` carrying `metadata.resourceVersion` (409 when the node changed) |
//! | `list_node_pods` | `GET /api/v1/pods?fieldSelector=spec.nodeName=...`, sorted by (namespace, name) |
//! | `get_pod` | `GET /api/v1/namespaces/{ns}/pods/{name}` |
//! | `evict_pod` | `POST .../pods/{name}/eviction[?dryRun=All]`, a `policy/v1` Eviction with the UID precondition: 2xx `Evicted`, 429 `Blocked` (naming the budget), 404 `Gone` |
//! | `get_lease` | `GET /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}` |
//! | `create_lease` | `POST .../leases` |
//! | `replace_lease` | `PUT .../leases/{name}`, its `metadata.resourceVersion` the precondition (409 when stale) |
//! | `wait_job`, `wait_node`, `wait_pod` | none while the object's watch is open and positioned at `since`; else one `GET ...?watch=true&fieldSelector=metadata.name=...&resourceVersion=since` (a `LIST` by name first when `since` is `None`), then one more per stream the apiserver ends (every 290 s at most) and a `LIST` by name plus a watch per 410. The watch is closed once it answers a Job finished or an object deleted: nothing is held open per finished run |
//!
//! ```no_run
//! # async fn example(spec: nodejob_core::Spec) -> Result<(), Box<dyn std::error::Error>> {
//! let api = nodejob_kube::KubeApi::try_default().await?;
//! let (exit_code, log) = nodejob_core::run_exit_code_logs(&api, &spec).await?;
//! # let _ = (exit_code, log);
//! # Ok(())
//! # }
//! ```
//!
//! [`JobApi`]: nodejob_core::JobApi
//! [`NodeApi`]: nodejob_core::NodeApi
//! [`PodApi`]: nodejob_core::PodApi
//! [`LeaseApi`]: nodejob_core::LeaseApi
//! [`Clock`]: nodejob_core::Clock
//! [`ApiError`]: nodejob_core::ApiError
//! [`ApiError::retry_after`]: nodejob_core::ApiError::retry_after

mod api;
mod classify;
mod client;
mod config;
mod every_node;
mod throttle;
mod transport;
mod watch;

pub use api::{KubeApi, REACHED_STANDS, Reached};
pub use config::{ConnectError, load_config};
pub use throttle::{RateLimit, RateLimitError, RateLimitLayer, RateLimited};
pub use transport::REQUEST_TIMEOUT;
