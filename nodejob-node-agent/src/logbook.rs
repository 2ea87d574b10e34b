//! Container logs kept in memory, and the kubelet's answer to
//! `GET /containerLogs/{namespace}/{pod}/{container}?…` over them.
//!
//! As in the fake, a program prints its log when it exits on its own: a running container's
//! log is empty, and a killed one printed nothing. A pod's logs stay until the pod is gone
//! from the apiserver.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use http::StatusCode;

use nodejob_host::termination::tail_lines;

/// What the first container of a pod has printed so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// Not started: the kubelet answers "waiting to start".
    NotStarted,
    /// Running: nothing printed yet.
    Running,
    /// Exited (or killed) with this output.
    Exited(String),
}

#[derive(Clone, Debug)]
struct PodLogs {
    uid: String,
    node: String,
    /// Every container of the spec; only the first one runs.
    containers: Vec<String>,
    first: Output,
}

/// The logs of every pod the agent runs, shared by the pod workers and the log servers.
#[derive(Clone, Debug, Default)]
pub(crate) struct LogBook {
    pods: Arc<Mutex<BTreeMap<(String, String), PodLogs>>>,
}

/// `namespace/pod` and the pod's uid: which pod a log belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PodKey {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// The options of a `containerLogs` request the agent honours.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LogOptions {
    /// `tailLines`: only the last lines.
    pub(crate) tail_lines: Option<u64>,
    /// `limitBytes`: at most that many bytes, from the start of what is left.
    pub(crate) limit_bytes: Option<u64>,
    /// `previous=true`: there is never a previous container.
    pub(crate) previous: bool,
    /// `stream=Stderr`: the programs print to stdout only.
    pub(crate) stderr_only: bool,
}

/// An HTTP answer: status and body (plain text; a log's bytes as they are).
pub(crate) type Answer = (StatusCode, Vec<u8>);

impl LogOptions {
    /// Parses the query string as the kubelet does (`getContainerLogs`): unknown parameters are
    /// ignored (`follow`, `timestamps`, `sinceSeconds`, `sinceTime` are accepted and have no
    /// effect: a log has no timestamps and is complete once there is one); a value that does
    /// not parse is a 400, a negative count or a zero `limitBytes` a 422, with the kubelet's
    /// bodies.
    pub(crate) fn parse(query: Option<&str>) -> Result<LogOptions, Answer> {
        let decode = || {
            (
                StatusCode::BAD_REQUEST,
                br#"{"message": "Unable to decode query."}"#.to_vec(),
            )
        };
        let invalid = || {
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                br#"{"message": "Invalid request."}"#.to_vec(),
            )
        };
        let mut options = LogOptions::default();
        let pairs = query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty());
        for pair in pairs {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "tailLines" | "tail" => {
                    if key == "tail" && value == "all" {
                        options.tail_lines = None;
                        continue;
                    }
                    let n: i64 = value.parse().map_err(|_| decode())?;
                    options.tail_lines = Some(u64::try_from(n).map_err(|_| invalid())?);
                }
                "limitBytes" => {
                    let n: i64 = value.parse().map_err(|_| decode())?;
                    if n < 1 {
                        return Err(invalid());
                    }
                    options.limit_bytes = Some(n.unsigned_abs());
                }
                "previous" => options.previous = value.parse().map_err(|_| decode())?,
                "stream" => match value {
                    "All" | "Stdout" => options.stderr_only = false,
                    "Stderr" => options.stderr_only = true,
                    other => {
                        return Err((
                            StatusCode::BAD_REQUEST,
                            format!("invalid stream type \"{other}\"").into_bytes(),
                        ));
                    }
                },
                _ => {}
            }
        }
        Ok(options)
    }

    /// Cuts `log` as the kubelet's `ReadLogs` does: `tailLines` first, then `limitBytes` from
    /// the start of what is left.
    pub(crate) fn apply<'a>(&self, log: &'a str) -> &'a [u8] {
        let log = match self.tail_lines {
            Some(n) => tail_lines(log, usize::try_from(n).unwrap_or(usize::MAX)),
            None => log,
        };
        let bytes = log.as_bytes();
        let limit = self
            .limit_bytes
            .map_or(bytes.len(), |l| usize::try_from(l).unwrap_or(usize::MAX));
        &bytes[..limit.min(bytes.len())]
    }
}

impl LogBook {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<(String, String), PodLogs>> {
        self.pods.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts keeping the logs of a pod on `node` (its first container not started yet),
    /// replacing those of an earlier pod of the same name.
    pub(crate) fn open(&self, pod: &PodKey, node: &str, containers: Vec<String>) {
        self.lock().insert(
            (pod.namespace.clone(), pod.name.clone()),
            PodLogs {
                uid: pod.uid.clone(),
                node: node.to_string(),
                containers,
                first: Output::NotStarted,
            },
        );
    }

    /// Records what the pod's first container has printed.
    pub(crate) fn set(&self, pod: &PodKey, output: Output) {
        if let Some(logs) = self
            .lock()
            .get_mut(&(pod.namespace.clone(), pod.name.clone()))
            && logs.uid == pod.uid
        {
            logs.first = output;
        }
    }

    /// Forgets the pod (once it is gone), unless a newer pod of the same name took its place.
    pub(crate) fn close(&self, pod: &PodKey) {
        let mut pods = self.lock();
        let key = (pod.namespace.clone(), pod.name.clone());
        if pods.get(&key).is_some_and(|l| l.uid == pod.uid) {
            pods.remove(&key);
        }
    }

    /// The kubelet of `node` answers `GET /containerLogs/{namespace}/{pod}/{container}`
    /// (`Server.getContainerLogs`, then `validateContainerLogStatus`), with its messages.
    pub(crate) fn answer(
        &self,
        node: &str,
        namespace: &str,
        pod: &str,
        container: &str,
        options: &LogOptions,
    ) -> Answer {
        let pods = self.lock();
        let Some(logs) = pods
            .get(&(namespace.to_string(), pod.to_string()))
            .filter(|l| l.node == node)
        else {
            return (
                StatusCode::NOT_FOUND,
                format!("pod \"{pod}\" does not exist").into_bytes(),
            );
        };
        let Some(index) = logs.containers.iter().position(|c| c == container) else {
            return (
                StatusCode::NOT_FOUND,
                format!("container \"{container}\" not found in pod \"{pod}\"").into_bytes(),
            );
        };
        let output = if index == 0 {
            &logs.first
        } else {
            &Output::NotStarted
        };
        let log = match output {
            _ if options.previous => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!(
                        "previous terminated container \"{container}\" in pod \"{pod}\" not found"
                    )
                    .into_bytes(),
                );
            }
            Output::NotStarted => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!(
                        "container \"{container}\" in pod \"{pod}\" is waiting to start: ContainerCreating"
                    )
                    .into_bytes(),
                );
            }
            _ if options.stderr_only => "",
            Output::Running => "",
            Output::Exited(log) => log.as_str(),
        };
        (StatusCode::OK, options.apply(log).to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(uid: &str) -> PodKey {
        PodKey {
            namespace: "ns".into(),
            name: "p".into(),
            uid: uid.into(),
        }
    }

    #[test]
    fn parses_queries() {
        let ok = |q: &str| LogOptions::parse(Some(q)).unwrap();
        assert_eq!(ok(""), LogOptions::default());
        assert_eq!(
            ok("limitBytes=10&tailLines=0&follow=true&sinceTime=2026-01-01T00%3A00%3A00Z"),
            LogOptions {
                tail_lines: Some(0),
                limit_bytes: Some(10),
                ..LogOptions::default()
            }
        );
        assert_eq!(ok("tail=5").tail_lines, Some(5));
        assert_eq!(ok("tailLines=5&tail=all").tail_lines, None);
        assert!(ok("stream=Stderr").stderr_only);
        assert!(ok("previous=true").previous);
        let code = |q: &str| LogOptions::parse(Some(q)).unwrap_err().0;
        assert_eq!(code("limitBytes=x"), StatusCode::BAD_REQUEST);
        assert_eq!(code("limitBytes=0"), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(code("tailLines=-1"), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(code("stream=Both"), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn tail_then_limit() {
        let log = "one\ntwo\nthree\n";
        let cut = |tail_lines, limit_bytes| {
            let o = LogOptions {
                tail_lines,
                limit_bytes,
                ..LogOptions::default()
            };
            String::from_utf8(o.apply(log).to_vec()).unwrap()
        };
        assert_eq!(cut(None, None), log);
        assert_eq!(cut(None, Some(5)), "one\nt");
        assert_eq!(cut(Some(2), None), "two\nthree\n");
        assert_eq!(cut(Some(2), Some(5)), "two\nt");
        assert_eq!(cut(Some(0), None), "");
        assert_eq!(cut(None, Some(1000)), log);
    }

    #[test]
    fn answers_like_the_kubelet() {
        let book = LogBook::default();
        let none = LogOptions::default();
        let answer = |o: &LogOptions, node: &str, pod: &str, c: &str| {
            let (code, body) = book.answer(node, "ns", pod, c, o);
            (code, String::from_utf8(body).unwrap())
        };
        assert_eq!(
            answer(&none, "n1", "p", "host"),
            (StatusCode::NOT_FOUND, "pod \"p\" does not exist".into())
        );
        book.open(&key("u1"), "n1", vec!["host".into(), "side".into()]);
        // Another node's kubelet does not know the pod.
        assert_eq!(answer(&none, "n2", "p", "host").0, StatusCode::NOT_FOUND);
        assert_eq!(
            answer(&none, "n1", "p", "nope"),
            (
                StatusCode::NOT_FOUND,
                "container \"nope\" not found in pod \"p\"".into()
            )
        );
        assert_eq!(
            answer(&none, "n1", "p", "host"),
            (
                StatusCode::BAD_REQUEST,
                "container \"host\" in pod \"p\" is waiting to start: ContainerCreating".into()
            )
        );
        book.set(&key("u1"), Output::Running);
        assert_eq!(
            answer(&none, "n1", "p", "host"),
            (StatusCode::OK, String::new())
        );
        book.set(&key("u1"), Output::Exited("a\nb\n".into()));
        assert_eq!(
            answer(&none, "n1", "p", "host"),
            (StatusCode::OK, "a\nb\n".into())
        );
        assert_eq!(answer(&none, "n1", "p", "side").0, StatusCode::BAD_REQUEST);
        let limit = LogOptions {
            limit_bytes: Some(1),
            ..LogOptions::default()
        };
        assert_eq!(
            answer(&limit, "n1", "p", "host"),
            (StatusCode::OK, "a".into())
        );
        let previous = LogOptions {
            previous: true,
            ..LogOptions::default()
        };
        assert_eq!(
            answer(&previous, "n1", "p", "host").0,
            StatusCode::BAD_REQUEST
        );

        // A stale worker neither writes over nor forgets a newer pod of the same name.
        book.open(&key("u2"), "n1", vec!["host".into()]);
        book.set(&key("u1"), Output::Running);
        book.close(&key("u1"));
        assert_eq!(answer(&none, "n1", "p", "host").0, StatusCode::BAD_REQUEST);
        book.close(&key("u2"));
        assert_eq!(answer(&none, "n1", "p", "host").0, StatusCode::NOT_FOUND);
    }
}
