//! The HTTP client: the client-side rate limit ([`crate::RateLimitLayer`]) over kube's default
//! stack (TLS, the base URI, authentication, extra headers) over a TCP connector with
//! `TCP_NODELAY` on.
//!
//! kube's own connector leaves Nagle's algorithm on. A runner's requests are small and each
//! waits for its answer, and the apiserver delays its ACK: the first request on a new connection
//! (a pooled connection is busy while a watch streams on it) then stalls about 40 ms, measured
//! on the end-to-end control plane (48 ms median for that request, 6 ms with `TCP_NODELAY`).
//! Every Kubernetes client built on Go's `net/http` has it on, as Go sets it on every TCP
//! connection.
//!
//! What kube's default stack has and this one has not: an HTTP or SOCKS proxy (a configuration
//! with one is built by kube, as before: this workspace enables no proxy feature of kube, so kube
//! refuses it), kube's `tracing` spans, and the read and write timeouts of `kube::Config`
//! (unset by default; every request here is bounded by [`crate::REQUEST_TIMEOUT`]). Its connect
//! timeout is kept.

use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::Client;
use kube::client::{Body, ConfigExt};
use tower::{BoxError, ServiceBuilder};

use crate::throttle::{RateLimit, RateLimitLayer};

/// A client for `config` whose requests (watches apart) are held to `limit` and whose
/// connections have `TCP_NODELAY` set; a configuration with a proxy is built by kube as it is
/// (and refused by it: this workspace enables no proxy feature of kube).
pub(crate) fn client(config: kube::Config, limit: RateLimit) -> kube::Result<Client> {
    if config.proxy_url.is_some() {
        return Client::try_from(config);
    }
    let mut tcp = HttpConnector::new();
    // `https://` URLs go to the TLS layer above: the connector must not refuse them.
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(config.connect_timeout);
    let https = config.rustls_https_connector_with_connector(tcp)?;
    let http: HttpClient<_, Body> = HttpClient::builder(TokioExecutor::new()).build(https);
    let service = ServiceBuilder::new()
        .layer(RateLimitLayer::new(limit))
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http);
    Ok(Client::new(service, config.default_namespace))
}
