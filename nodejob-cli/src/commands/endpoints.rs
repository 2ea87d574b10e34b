//! The controller's HTTP endpoints, as a Deployment's probes and a Prometheus scrape read
//! them: `/metrics` (Prometheus text 0.0.4, or OpenMetrics 1.0 when the scraper's `Accept`
//! asks for it, as Prometheus does), `/healthz` (the process answers) and `/readyz` (the
//! apiserver answered this replica: a standby replica is ready too, as it must be to take
//! over). HTTP/1.1 by hyper; plain text, no TLS (a NetworkPolicy or a sidecar guards it, as
//! controller-runtime's insecure metrics endpoint is guarded).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use nodejob_controller::metrics::Metrics;
use tokio::net::TcpListener;

use crate::exit::Exit;

/// What an address flag names: `HOST:PORT`, `:PORT` (every interface, as Go's flags say it),
/// or `0`: nothing served.
pub(crate) fn address(flag: &str, value: &str) -> Result<Option<SocketAddr>, Exit> {
    if value == "0" {
        return Ok(None);
    }
    let full = match value.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => value.to_string(),
    };
    (full.parse().map(Some)).map_err(|e| {
        Exit::usage(format!(
            "--{flag} {value:?}: {e} (give HOST:PORT, :PORT, or 0 to serve none)"
        ))
    })
}

/// Which endpoints a listener serves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Serves {
    pub(crate) metrics: bool,
    pub(crate) probes: bool,
}

/// Binds `addr` now (so a port taken is said before any work), or says why not.
pub(crate) fn bind(flag: &str, addr: SocketAddr) -> Result<std::net::TcpListener, Exit> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| Exit::failed(format!("--{flag} {addr}: cannot listen: {e}")))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Exit::failed(format!("--{flag} {addr}: {e}")))?;
    Ok(listener)
}

/// Serves each listener's endpoints on a thread of its own, for the life of the process: its
/// own runtime, so the probes answer whatever the controller's runtime is doing (a simulated
/// cluster's runs in virtual time, with no I/O driver).
pub(crate) fn spawn(
    listeners: Vec<(std::net::TcpListener, Serves)>,
    metrics: Arc<Metrics>,
) -> Result<(), Exit> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| Exit::failed(format!("starting the endpoints' runtime: {e}")))?;
    std::thread::Builder::new()
        .name("endpoints".into())
        .spawn(move || {
            runtime.block_on(async move {
                let mut serving = tokio::task::JoinSet::new();
                for (listener, serves) in listeners {
                    if let Ok(listener) = TcpListener::from_std(listener) {
                        serving.spawn(serve(listener, metrics.clone(), serves));
                    }
                }
                serving.join_all().await;
            });
        })
        .map_err(|e| Exit::failed(format!("starting the endpoints' thread: {e}")))?;
    Ok(())
}

/// Serves `serves` on `listener`.
async fn serve(listener: TcpListener, metrics: Arc<Metrics>, serves: Serves) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(answer(&request, &metrics, serves)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            // A scraper that hangs up mid-answer is its own affair.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

/// The answer to one request.
fn answer(request: &Request<Incoming>, metrics: &Metrics, serves: Serves) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
    }
    match request.uri().path() {
        "/metrics" if serves.metrics => {
            let accept = (request.headers().get(ACCEPT))
                .and_then(|a| a.to_str().ok())
                .unwrap_or_default();
            let (body, kind) = if accept.contains("application/openmetrics-text") {
                (
                    metrics.openmetrics_text(),
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                )
            } else {
                (
                    metrics.prometheus_text(),
                    "text/plain; version=0.0.4; charset=utf-8",
                )
            };
            let mut response = Response::new(Full::new(Bytes::from(body)));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
            response
        }
        "/healthz" | "/livez" if serves.probes => text(StatusCode::OK, "ok\n"),
        "/readyz" if serves.probes => {
            if metrics.answered() {
                text(StatusCode::OK, "ok\n")
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the apiserver has not answered this replica yet\n",
                )
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_host_and_port_a_port_alone_or_zero() {
        assert_eq!(
            address("a", ":8080").unwrap(),
            Some("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(
            address("a", "127.0.0.1:9").unwrap(),
            Some("127.0.0.1:9".parse().unwrap())
        );
        assert_eq!(address("a", "0").unwrap(), None);
        let refused = address("metrics-bind-address", "localhost").unwrap_err();
        assert!(
            refused
                .message
                .contains("--metrics-bind-address \"localhost\""),
            "{}",
            refused.message
        );
    }
}
