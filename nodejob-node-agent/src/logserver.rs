//! The kubelet's log endpoint of one node: HTTPS on `<node address>:<port>`, serving
//! `GET /containerLogs/{namespace}/{pod}/{container}` out of the [`LogBook`], and (no
//! kubelet's, for the tests) `GET /stratum`: the node's host as [`NodeHost::report`] tells it.
//!
//! The apiserver's `pods/log` dials `https://<address>:<port>/containerLogs/…` (pod strategy
//! `LogLocation`), presents its kubelet client certificate (ignored here: no client
//! authentication is asked for) and checks the kubelet's certificate only when it runs with
//! `--kubelet-certificate-authority`; so each node gets a self-signed certificate for its
//! address. Closing a server drops the listener and every open connection, so the next dial is
//! refused and `pods/log` answers 500, as for a kubelet that is down.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::Context as _;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use crate::host::NodeHost;
use crate::logbook::{Answer, LogBook, LogOptions};

/// A node's serving certificate and key.
#[derive(Debug)]
pub(crate) struct Identity {
    /// The self-signed certificate (DER).
    pub(crate) cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Identity {
    /// A self-signed ECDSA P-256 certificate for `ip` (the address of `node`).
    pub(crate) fn self_signed(node: &str, ip: IpAddr) -> anyhow::Result<Identity> {
        let key = rcgen::KeyPair::generate().context("generating a key pair")?;
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = vec![rcgen::SanType::IpAddress(ip)];
        // Not the node's name: a CommonName holds at most 64 characters, a node name 253.
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "nodejob-node-agent");
        let cert = params
            .self_signed(&key)
            .with_context(|| format!("self-signing a certificate for {node} ({ip})"))?;
        Ok(Identity {
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        })
    }

    fn acceptor(&self) -> anyhow::Result<TlsAcceptor> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("choosing TLS versions")?
            .with_no_client_auth()
            .with_single_cert(
                vec![self.cert.clone()],
                PrivateKeyDer::Pkcs8(self.key.clone_key()),
            )
            .context("loading the serving certificate")?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// A running log server; dropping or [closing](LogServer::close) it stops it.
#[derive(Debug)]
pub(crate) struct LogServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl LogServer {
    /// Listens on `addr` for the kubelet of `node`, whose host is `host`.
    pub(crate) async fn bind(
        addr: SocketAddr,
        node: &str,
        book: LogBook,
        host: watch::Receiver<NodeHost>,
        identity: &Identity,
    ) -> anyhow::Result<LogServer> {
        let acceptor = identity.acceptor()?;
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr} for node {node}"))?;
        let addr = listener
            .local_addr()
            .context("reading the listening address")?;
        let task = tokio::spawn(serve(listener, acceptor, Arc::from(node), book, host));
        Ok(LogServer { addr, task })
    }

    /// Where it listens.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening and drops every connection; returns once the listener is closed.
    pub(crate) async fn close(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for LogServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    node: Arc<str>,
    book: LogBook,
    host: watch::Receiver<NodeHost>,
) {
    // Owned here: aborting the server drops the set, which aborts every connection.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    let (node, book, host) = (node.clone(), book.clone(), host.clone());
                    connections.spawn(connection(tcp, acceptor.clone(), node, book, host));
                }
                Err(e) => say!("node {node}: log server: accepting a connection: {e}"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn connection(
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    node: Arc<str>,
    book: LogBook,
    host: watch::Receiver<NodeHost>,
) {
    let tls = match acceptor.accept(tcp).await {
        Ok(tls) => tls,
        Err(e) => {
            say!("node {node}: log server: TLS handshake: {e}");
            return;
        }
    };
    let service = service_fn(move |request: Request<Incoming>| {
        let (status, body) = handle(&request, &node, &book, &host.borrow());
        say!(
            "node {node}: {} {} -> {} ({} bytes)",
            request.method(),
            request.uri(),
            status.as_u16(),
            body.len()
        );
        let response = Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())));
        async move { Ok::<_, Infallible>(response) }
    });
    // A connection dropped halfway is the client's business.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

/// The kubelet's answer to one request; anything but `GET /containerLogs/{ns}/{pod}/{c}` and
/// `GET /stratum` (`host`'s [report](NodeHost::report)) is Go's `404 page not found` (or 405).
fn handle<B>(request: &Request<B>, node: &str, book: &LogBook, host: &NodeHost) -> Answer {
    let not_found = || (StatusCode::NOT_FOUND, b"404 page not found\n".to_vec());
    let not_allowed = || {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            b"405: Method Not Allowed".to_vec(),
        )
    };
    if request.uri().path() == "/stratum" {
        if request.method() != Method::GET {
            return not_allowed();
        }
        return (StatusCode::OK, host.report().into_bytes());
    }
    let Some(rest) = request.uri().path().strip_prefix("/containerLogs/") else {
        return not_found();
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let [namespace, pod, container] = segments.as_slice() else {
        return not_found();
    };
    if request.method() != Method::GET {
        return not_allowed();
    }
    if [namespace, pod, container].iter().any(|s| s.is_empty()) {
        return not_found();
    }
    match LogOptions::parse(request.uri().query()) {
        Ok(options) => book.answer(node, namespace, pod, container, &options),
        Err(answer) => answer,
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_rustls::TlsConnector;

    use super::*;
    use crate::logbook::{Output, PodKey};

    /// `GET path` over TLS, trusting only `identity`'s certificate; the raw response.
    async fn get(addr: SocketAddr, identity: &Identity, path: &str) -> anyhow::Result<String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(identity.cert.clone())?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::IpAddress(addr.ip().into());
        let mut tls = TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        tls.write_all(request.as_bytes()).await?;
        let mut response = String::new();
        tls.read_to_string(&mut response).await?;
        Ok(response)
    }

    fn status_and_body(response: &str) -> (&str, &str) {
        let status = response.split("\r\n").next().unwrap_or_default();
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or_default();
        (status, body)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_logs_over_tls_then_refuses() -> anyhow::Result<()> {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let identity = Identity::self_signed("n1", ip)?;
        let book = LogBook::default();
        let pod = PodKey {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
        };
        book.open(&pod, "n1", vec!["host".into()]);
        book.set(&pod, Output::Exited("one\ntwo\nthree\n".into()));
        let (_host, rx) = watch::channel(NodeHost::new("n1", "v1.37.2"));
        let server = LogServer::bind(SocketAddr::new(ip, 0), "n1", book, rx, &identity).await?;
        let addr = server.local_addr();

        let response = get(addr, &identity, "/containerLogs/ns/p/host").await?;
        assert_eq!(
            status_and_body(&response),
            ("HTTP/1.1 200 OK", "one\ntwo\nthree\n")
        );
        let path = "/containerLogs/ns/p/host?tailLines=2&limitBytes=5&stream=All";
        let response = get(addr, &identity, path).await?;
        assert_eq!(status_and_body(&response), ("HTTP/1.1 200 OK", "two\nt"));
        let response = get(addr, &identity, "/containerLogs/ns/q/host").await?;
        assert_eq!(
            status_and_body(&response),
            ("HTTP/1.1 404 Not Found", "pod \"q\" does not exist")
        );
        let response = get(addr, &identity, "/containerLogs/ns/p/other").await?;
        assert_eq!(
            status_and_body(&response),
            (
                "HTTP/1.1 404 Not Found",
                "container \"other\" not found in pod \"p\""
            )
        );
        let response = get(addr, &identity, "/stratum").await?;
        let (status, body) = status_and_body(&response);
        assert_eq!(status, "HTTP/1.1 200 OK");
        let report: serde_json::Value = serde_json::from_str(body)?;
        assert_eq!(
            (&report["version"], &report["up"]),
            (&"v1.37.2".into(), &true.into())
        );
        let response = get(addr, &identity, "/healthz").await?;
        assert_eq!(status_and_body(&response).0, "HTTP/1.1 404 Not Found");

        server.close().await;
        let refused = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        Ok(())
    }

    #[test]
    fn routes() {
        let book = LogBook::default();
        let host = NodeHost::new("n1", "v1.37.2");
        let request = |method: Method, uri: &str| {
            let r = Request::builder().method(method).uri(uri).body(()).unwrap();
            handle(&r, "n1", &book, &host).0
        };
        assert_eq!(request(Method::GET, "/stratum"), StatusCode::OK);
        assert_eq!(
            request(Method::POST, "/stratum"),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(request(Method::GET, "/stratum/x"), StatusCode::NOT_FOUND);
        assert_eq!(
            request(Method::GET, "/containerLogs/ns/p/c"),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            request(Method::POST, "/containerLogs/ns/p/c"),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            request(Method::GET, "/containerLogs/ns/p"),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            request(Method::GET, "/containerLogs/ns/p/c/x"),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            request(Method::GET, "/containerLogs/ns/p/c?limitBytes=no"),
            StatusCode::BAD_REQUEST
        );
    }
}
