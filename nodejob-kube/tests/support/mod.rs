//! A scripted apiserver for wire tests: `tower_test::mock::pair` under a real `kube::Client`.
//!
//! Each [`Exchange`] is one expected request (method, path, the exact set of query parameters,
//! the JSON body, and any header asked for) and the answer to it (status and body, a broken connection, or no answer at
//! all). The server checks requests in order; [`Server::finish`] (after the `KubeApi` is
//! dropped) fails the test on the first mismatch or on any request beyond the script, and returns
//! the requests seen, one line each: `GET /api/v1/...`, `WATCH /apis/...` for `?watch=true`.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use nodejob_core::{Note, Spec, build};
use nodejob_kube::{KubeApi, RateLimit, RateLimitLayer};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

pub const NS: &str = "kube-system";
pub const NAME: &str = "upgrade-node-a";
pub const UID: &str = "5c3b0c1e-8f0a-4a53-9d1e-2f6f1a0b7c11";
pub const JOB_PATH: &str = "/apis/batch/v1/namespaces/kube-system/jobs/upgrade-node-a";
pub const JOBS_PATH: &str = "/apis/batch/v1/namespaces/kube-system/jobs";
pub const PODS_PATH: &str = "/api/v1/namespaces/kube-system/pods";
pub const POD: &str = "upgrade-node-a-x7k2p";

/// What the server answers.
#[derive(Debug)]
enum Reply {
    Respond {
        status: u16,
        body: String,
        /// Response headers beyond `content-type`.
        headers: Vec<(String, String)>,
    },
    /// The connection breaks: no HTTP answer.
    Fail(String),
    /// No answer, ever (until the client goes away).
    Hang,
}

/// One expected request and its answer.
#[derive(Debug)]
pub struct Exchange {
    method: http::Method,
    path: String,
    query: Vec<(String, String)>,
    raw_query: Option<String>,
    headers: Vec<(String, String)>,
    body: Option<Value>,
    reply: Reply,
}

pub fn get(path: &str) -> Exchange {
    Exchange::new(http::Method::GET, path, None)
}

pub fn post(path: &str, body: Value) -> Exchange {
    Exchange::new(http::Method::POST, path, Some(body))
}

pub fn delete(path: &str, body: Value) -> Exchange {
    Exchange::new(http::Method::DELETE, path, Some(body))
}

pub fn put(path: &str, body: Value) -> Exchange {
    Exchange::new(http::Method::PUT, path, Some(body))
}

/// A `PATCH` whose `Content-Type` is a JSON merge patch.
pub fn merge_patch(path: &str, body: Value) -> Exchange {
    Exchange::new(http::Method::PATCH, path, Some(body))
        .header("content-type", "application/merge-patch+json")
}

/// `GET path?watch=true&fieldSelector=metadata.name=<name>&resourceVersion=<rv>` as `KubeApi`
/// opens its watches.
pub fn watch(collection: &str, name: &str, rv: &str) -> Exchange {
    get(collection).query(&[
        ("watch", "true"),
        ("timeoutSeconds", "290"),
        ("allowWatchBookmarks", "true"),
        ("fieldSelector", &format!("metadata.name={name}")),
        ("resourceVersion", rv),
    ])
}

/// `GET collection?fieldSelector=metadata.name=<name>`: the re-list after a 410.
pub fn list_by_name(collection: &str, name: &str) -> Exchange {
    get(collection).query(&[("fieldSelector", &format!("metadata.name={name}"))])
}

impl Exchange {
    fn new(method: http::Method, path: &str, body: Option<Value>) -> Self {
        Exchange {
            method,
            path: path.to_string(),
            query: Vec::new(),
            raw_query: None,
            headers: Vec::new(),
            body,
            reply: Reply::Respond {
                status: 200,
                body: String::new(),
                headers: Vec::new(),
            },
        }
    }

    /// The query parameters the request must carry: exactly these, in any order.
    pub fn query(mut self, pairs: &[(&str, &str)]) -> Self {
        self.query = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.query.sort();
        self
    }

    /// The query string exactly as sent, encoding included (on top of [`Exchange::query`]).
    pub fn raw_query(mut self, raw: &str) -> Self {
        self.raw_query = Some(raw.to_string());
        self
    }

    /// A header the request must carry, with exactly this value.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn reply(mut self, status: u16, body: impl Into<String>) -> Self {
        self.reply = Reply::Respond {
            status,
            body: body.into(),
            headers: Vec::new(),
        };
        self
    }

    /// A header of the answer (after `reply` or `reply_json`), e.g. `Retry-After`.
    pub fn reply_header(mut self, name: &str, value: &str) -> Self {
        if let Reply::Respond { headers, .. } = &mut self.reply {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    pub fn reply_json(self, status: u16, body: &Value) -> Self {
        self.reply(status, body.to_string())
    }

    pub fn fail(mut self, message: &str) -> Self {
        self.reply = Reply::Fail(message.to_string());
        self
    }

    pub fn hang(mut self) -> Self {
        self.reply = Reply::Hang;
        self
    }

    fn check(&self, parts: &http::request::Parts, body: &[u8]) -> Result<(), String> {
        if parts.method != self.method || parts.uri.path() != self.path {
            return Err(format!(
                "expected {} {}, got {} {}",
                self.method,
                self.path,
                parts.method,
                parts.uri.path()
            ));
        }
        let query = query_pairs(parts.uri.query().unwrap_or(""));
        if query != self.query {
            return Err(format!(
                "query of {} {}: expected {:?}, got {:?}",
                self.method, self.path, self.query, query
            ));
        }
        if let Some(raw) = &self.raw_query {
            let got = parts.uri.query().unwrap_or("");
            if got != raw {
                return Err(format!(
                    "raw query of {} {}: expected {raw:?}, got {got:?}",
                    self.method, self.path
                ));
            }
        }
        for (name, value) in &self.headers {
            let got = parts
                .headers
                .get(name.as_str())
                .and_then(|v| v.to_str().ok());
            if got != Some(value.as_str()) {
                return Err(format!(
                    "header {name} of {} {}: expected {value:?}, got {got:?}",
                    self.method, self.path
                ));
            }
        }
        match &self.body {
            None if body.is_empty() => Ok(()),
            None => Err(format!(
                "expected no body, got {}",
                String::from_utf8_lossy(body)
            )),
            Some(expected) => {
                let got: Value = serde_json::from_slice(body)
                    .map_err(|e| format!("body is not JSON ({e}): {body:?}"))?;
                if &got == expected {
                    Ok(())
                } else {
                    Err(format!("body: expected {expected}, got {got}"))
                }
            }
        }
    }
}

impl std::fmt::Display for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {:?}", self.method, self.path, self.query)
    }
}

/// Decodes `a=b&c=d` (percent-encoding and `+`), sorted.
fn query_pairs(query: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect();
    pairs.sort();
    pairs
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line per request: `WATCH <path>` for a watch, `<METHOD> <path>` otherwise.
fn describe(parts: &http::request::Parts) -> String {
    let watch = query_pairs(parts.uri.query().unwrap_or(""))
        .iter()
        .any(|(k, v)| k == "watch" && v == "true");
    let method = if watch {
        "WATCH".to_string()
    } else {
        parts.method.to_string()
    };
    format!("{method} {}", parts.uri.path())
}

/// The scripted apiserver's task.
pub struct Server {
    task: JoinHandle<Result<Vec<(String, Duration)>, String>>,
}

impl Server {
    /// Waits for the client to go away (drop the `KubeApi` first), fails on any mismatch or extra
    /// request, and returns the requests seen.
    pub async fn finish(self) -> Vec<String> {
        self.finish_timed()
            .await
            .into_iter()
            .map(|(line, _)| line)
            .collect()
    }

    /// [`Server::finish`], each request with when it reached the server, on tokio's clock
    /// (paused in these tests) from when the server was made.
    pub async fn finish_timed(self) -> Vec<(String, Duration)> {
        match self.task.await {
            Ok(Ok(seen)) => seen,
            Ok(Err(why)) => panic!("scripted apiserver: {why}"),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

/// A `KubeApi` whose client talks to a server that follows `script`.
pub fn serve(script: Vec<Exchange>) -> (KubeApi, Server) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    (KubeApi::new(client), script_server(script, handle))
}

/// [`serve`], the client's requests held to `limit` by the rate limit `KubeApi::from_config`
/// puts in every client it builds.
pub fn serve_limited(script: Vec<Exchange>, limit: RateLimit) -> (KubeApi, Server) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let service = tower::Layer::layer(&RateLimitLayer::new(limit), service);
    let client = kube::Client::new(service, "default");
    (KubeApi::new(client), script_server(script, handle))
}

/// The server's side of the mock: follows `script`, then expects no more.
fn script_server(
    script: Vec<Exchange>,
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
) -> Server {
    let started = tokio::time::Instant::now();
    let task = tokio::spawn(async move {
        let mut seen: Vec<(String, Duration)> = Vec::new();
        let mut hung = Vec::new();
        let total = script.len();
        for (i, expected) in script.into_iter().enumerate() {
            let Some((request, send)) = handle.next_request().await else {
                return Err(format!(
                    "the client stopped after {i} of {total} requests; next expected: \
                     {expected}; seen: {seen:#?}"
                ));
            };
            let (parts, body) = request.into_parts();
            let body = body
                .collect_bytes()
                .await
                .map_err(|e| format!("reading a request body: {e}"))?;
            seen.push((describe(&parts), started.elapsed()));
            if let Err(why) = expected.check(&parts, &body) {
                let answer = Response::builder()
                    .status(418)
                    .body(Body::from(format!("script mismatch: {why}").into_bytes()))
                    .expect("a response");
                send.send_response(answer);
                return Err(format!(
                    "request {} of {total}: {why}; seen: {seen:#?}",
                    i + 1
                ));
            }
            match expected.reply {
                Reply::Respond {
                    status,
                    body,
                    headers,
                } => {
                    let mut answer = Response::builder()
                        .status(status)
                        .header("content-type", "application/json");
                    for (name, value) in headers {
                        answer = answer.header(name, value);
                    }
                    let answer = answer
                        .body(Body::from(body.into_bytes()))
                        .expect("a response");
                    send.send_response(answer);
                }
                Reply::Fail(message) => send.send_error(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    message,
                )),
                Reply::Hang => hung.push(send),
            }
        }
        if let Some((request, _)) = handle.next_request().await {
            let (parts, _) = request.into_parts();
            return Err(format!(
                "request beyond the script: {} ?{}; seen: {seen:#?}",
                describe(&parts),
                parts.uri.query().unwrap_or("")
            ));
        }
        drop(hung);
        Ok(seen)
    });
    Server { task }
}

// --- Kubernetes JSON -------------------------------------------------------------------------

/// A `Status` as the apiserver writes it (empty fields omitted, as Go's `omitempty` does).
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    let mut s = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": code,
    });
    if !reason.is_empty() {
        s["reason"] = json!(reason);
    }
    s
}

/// A failure `Status` with `details.causes`, each `(reason, message)` (a cause's type is its JSON
/// `reason`).
pub fn status_with_causes(
    code: u16,
    reason: &str,
    message: &str,
    causes: &[(&str, &str)],
) -> Value {
    let mut s = status(code, reason, message);
    s["details"] = json!({
        "causes": causes
            .iter()
            .map(|(reason, message)| json!({ "reason": reason, "message": message }))
            .collect::<Vec<_>>()
    });
    s
}

/// A running Pod `namespace/name` bound to `node`.
pub fn running_pod(namespace: &str, name: &str, node: &str, uid: &str, rv: &str) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": rv,
            "creationTimestamp": "2025-05-20T08:00:00Z",
            "labels": { "app": "web" }
        },
        "spec": {
            "nodeName": node,
            "containers": [{ "name": "web", "image": "registry.example/web:1.4" }]
        },
        "status": { "phase": "Running" }
    })
}

pub fn spec() -> Spec {
    Spec {
        namespace: NS.into(),
        name: NAME.into(),
        node: "node-a".into(),
        label_key: "stratum.ciq.com/upgrade".into(),
        container: "upgrade".into(),
        argv: [
            "nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "stratum", "upgrade",
        ]
        .map(String::from)
        .to_vec(),
        active_deadline: Duration::from_secs(600),
        poll_attempts: 12,
        kind: "per-node upgrade".into(),
        critical: false,
        image: None,
        output: Some(std::sync::Arc::new(|_: &Note| {})),
    }
}

/// The Job `build(spec())` as the apiserver stores it: with server-set metadata and `status`.
pub fn job(rv: &str, status: Value) -> Value {
    let mut job = serde_json::to_value(build(&spec())).expect("a job");
    let meta = &mut job["metadata"];
    meta["uid"] = json!(UID);
    meta["resourceVersion"] = json!(rv);
    meta["generation"] = json!(1);
    meta["creationTimestamp"] = json!("2025-06-01T10:00:00Z");
    job["status"] = status;
    job
}

pub fn job_running(rv: &str) -> Value {
    job(
        rv,
        json!({
            "startTime": "2025-06-01T10:00:01Z",
            "active": 1,
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {}
        }),
    )
}

pub fn job_complete(rv: &str) -> Value {
    job(
        rv,
        json!({
            "conditions": [
                {
                    "type": "SuccessCriteriaMet",
                    "status": "True",
                    "lastProbeTime": "2025-06-01T10:00:09Z",
                    "lastTransitionTime": "2025-06-01T10:00:09Z",
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods"
                },
                {
                    "type": "Complete",
                    "status": "True",
                    "lastProbeTime": "2025-06-01T10:00:09Z",
                    "lastTransitionTime": "2025-06-01T10:00:09Z",
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods"
                }
            ],
            "startTime": "2025-06-01T10:00:01Z",
            "completionTime": "2025-06-01T10:00:09Z",
            "succeeded": 1,
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {}
        }),
    )
}

/// The Job's Pod, its container terminated with `exit_code`.
pub fn pod(exit_code: i32) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": POD,
            "generateName": "upgrade-node-a-",
            "namespace": NS,
            "uid": "0d4b7f3a-2c1e-4b8e-a0f5-6b1c9e2d3f47",
            "resourceVersion": "1207",
            "creationTimestamp": "2025-06-01T10:00:01Z",
            "labels": {
                "batch.kubernetes.io/controller-uid": UID,
                "batch.kubernetes.io/job-name": NAME,
                "controller-uid": UID,
                "job-name": NAME
            },
            "ownerReferences": [{
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": NAME,
                "uid": UID,
                "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "nodeName": "node-a",
            "restartPolicy": "Never",
            "containers": [{ "name": "upgrade", "image": nodejob_core::IMAGE }]
        },
        "status": {
            "phase": if exit_code == 0 { "Succeeded" } else { "Failed" },
            "containerStatuses": [{
                "name": "upgrade",
                "image": nodejob_core::IMAGE,
                "imageID": "",
                "ready": false,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": if exit_code == 0 { "Completed" } else { "Error" },
                        "startedAt": "2025-06-01T10:00:02Z",
                        "finishedAt": "2025-06-01T10:00:08Z"
                    }
                }
            }]
        }
    })
}

/// A `<Kind>List` with `items`, at collection resourceVersion `rv`.
pub fn list(kind: &str, api_version: &str, rv: &str, items: Vec<Value>) -> Value {
    json!({
        "kind": format!("{kind}List"),
        "apiVersion": api_version,
        "metadata": { "resourceVersion": rv },
        "items": items
    })
}

pub fn node(rv: &str, ready: bool) -> Value {
    json!({
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": "node-a",
            "uid": "9a1f4c2e-7b3d-4e6f-8a9b-0c1d2e3f4a5b",
            "resourceVersion": rv,
            "creationTimestamp": "2025-05-01T00:00:00Z",
            "labels": { "kubernetes.io/hostname": "node-a" }
        },
        "status": {
            "conditions": [{
                "type": "Ready",
                "status": if ready { "True" } else { "False" },
                "lastHeartbeatTime": "2025-06-01T10:00:00Z",
                "lastTransitionTime": "2025-06-01T09:00:00Z",
                "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
                "message": if ready { "kubelet is posting ready status" } else { "container runtime is down" }
            }]
        }
    })
}

/// One line of a watch response.
pub fn event(type_: &str, object: &Value) -> String {
    format!("{}\n", json!({ "type": type_, "object": object }))
}

/// A BOOKMARK line: only the resourceVersion is meaningful.
pub fn bookmark(kind: &str, api_version: &str, rv: &str) -> String {
    event(
        "BOOKMARK",
        &json!({ "kind": kind, "apiVersion": api_version, "metadata": { "resourceVersion": rv } }),
    )
}

/// The ERROR line an apiserver sends for an expired resourceVersion.
pub fn expired(rv: &str, oldest: &str) -> String {
    let message = format!("too old resource version: {rv} ({oldest})");
    event("ERROR", &status(410, "Expired", &message))
}
