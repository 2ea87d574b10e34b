//! What the apiserver's audit log says (`e2e/cluster` writes `$NODEJOB_E2E_RUN/logs/audit.log`
//! under its policy: every `create pods/eviction` at Metadata, every `create jobs` at
//! Request): which requests reached the eviction subresource, for which Pod, from whom, with
//! which answer, and when each Job was created and for which node, all on the apiserver's one
//! clock. What no watch can tell: a Pod deleted by an eviction and one deleted otherwise look
//! alike in a watch of Pods, and an eviction the budget refused leaves no trace in any object.

use std::path::PathBuf;

use k8s_openapi::jiff::Timestamp;
use nodejob_conformance::Failure;
use serde_json::Value;

/// One request the audit log recorded (stage `ResponseComplete`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audited {
    /// The API verb (`create`).
    pub verb: String,
    /// The resource (`pods`, `jobs`).
    pub resource: String,
    /// The subresource (`eviction`), empty for none.
    pub subresource: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name (for a create, the name in its body).
    pub name: String,
    /// Who asked (`system:serviceaccount:kube-system:nodejob`): the user a request
    /// impersonated, when it did (a driver run in a test acts as the ServiceAccount through
    /// an administrator's impersonation), else the one it authenticated as.
    pub user: String,
    /// The answer's HTTP code.
    pub code: u16,
    /// When the apiserver received the request.
    pub received: Timestamp,
    /// When it had answered.
    pub answered: Timestamp,
    /// For a Job's creation (logged with its body): the node its Pod is bound to
    /// (`spec.template.spec.nodeName`).
    pub node: Option<String>,
}

impl Audited {
    /// Whether the request succeeded (a 2xx answer).
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// Whether it was a request to the eviction subresource of a Pod.
    pub fn is_eviction(&self) -> bool {
        self.verb == "create" && self.resource == "pods" && self.subresource == "eviction"
    }

    /// Whether it was a Job's creation.
    pub fn is_job_creation(&self) -> bool {
        self.verb == "create" && self.resource == "jobs" && self.subresource.is_empty()
    }
}

fn audit_log() -> PathBuf {
    std::env::var_os("NODEJOB_E2E_RUN")
        .map(PathBuf::from)
        .expect("NODEJOB_E2E_RUN is not set: run the suite with e2e/run (e2e/cluster run)")
        .join("logs/audit.log")
}

/// Every request the audit log has recorded so far, in the order it wrote them.
pub fn audited() -> Result<Vec<Audited>, Failure> {
    let path = audit_log();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Failure(format!("reading the audit log {}: {e}", path.display())))?;
    (text.lines())
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let event: Value = serde_json::from_str(line)
                .map_err(|e| Failure(format!("{}: {e}: {line}", path.display())))?;
            parse(&event).ok_or_else(|| {
                Failure(format!(
                    "{}: not an audit event as expected: {line}",
                    path.display()
                ))
            })
        })
        .collect()
}

fn parse(event: &Value) -> Option<Audited> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let at = |v: &Value| v.as_str()?.parse::<Timestamp>().ok();
    let object = &event["objectRef"];
    Some(Audited {
        verb: text(&event["verb"]),
        resource: text(&object["resource"]),
        subresource: text(&object["subresource"]),
        namespace: text(&object["namespace"]),
        name: text(&object["name"]),
        user: (event["impersonatedUser"]["username"].as_str())
            .map_or_else(|| text(&event["user"]["username"]), String::from),
        code: u16::try_from(event["responseStatus"]["code"].as_u64()?).ok()?,
        received: at(&event["requestReceivedTimestamp"])?,
        answered: at(&event["stageTimestamp"])?,
        node: event["requestObject"]["spec"]["template"]["spec"]["nodeName"]
            .as_str()
            .map(String::from),
    })
}
