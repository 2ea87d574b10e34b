//! Errors: [`ApiError`] is what a backend verb answers, classified; [`Error`] is what a runner
//! function answers; its [`Error::Api`] names the failed call as a typed [`Operation`].

use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

/// The longest wait a server's `Retry-After` is taken for: a longer one is cut to this, so one
/// answer cannot hold a call beyond what a person would wait for a retry.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// How the apiserver (or the path to it) answered, whatever backend reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// 404: the object does not exist.
    NotFound,
    /// 409 `Conflict`: a resourceVersion or UID precondition did not hold.
    Conflict,
    /// 409 `AlreadyExists`: a create found the name taken.
    AlreadyExists,
    /// 410: the resourceVersion asked for is too old (watch expired).
    Gone,
    /// 403: authorization or admission (PodSecurity) refused.
    Forbidden,
    /// 422: the object failed validation.
    Invalid,
    /// 400: the request cannot be served as asked (e.g. the log of a container not started).
    BadRequest,
    /// 429, 500, 503, 504, timeouts and broken connections: worth retrying.
    Transient,
    /// No answer to trust: the TLS handshake refused the apiserver's certificate (signed by
    /// an authority the client does not trust, for another name, expired), as kubectl's
    /// `x509: certificate signed by unknown authority`. Not worth retrying: the client's
    /// certificate authority (or the server's certificate) must change first.
    Untrusted,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// The reason string the apiserver's `Status` carries for this kind.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "NotFound",
            ErrorKind::Conflict => "Conflict",
            ErrorKind::AlreadyExists => "AlreadyExists",
            ErrorKind::Gone => "Expired",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::Invalid => "Invalid",
            ErrorKind::BadRequest => "BadRequest",
            ErrorKind::Transient => "ServiceUnavailable",
            ErrorKind::Untrusted => "CertificateUntrusted",
            ErrorKind::Other => "Unknown",
        }
    }
}

/// One failed API call: its classification, HTTP status code and the apiserver's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code} {})", self.reason())]
pub struct ApiError {
    /// The classification callers branch on.
    pub kind: ErrorKind,
    /// The HTTP status code (0 when no response was had at all).
    pub code: u16,
    /// The apiserver's message, verbatim.
    pub message: String,
    /// The server's `Retry-After`, in whole seconds as the header says it: see
    /// [`ApiError::retry_after`]. Four bytes, so that it fits in the padding of the fields
    /// above and every `Result` carrying an `ApiError` stays as small as it was.
    retry_after_secs: Option<NonZeroU32>,
}

impl ApiError {
    /// An error of `kind` with an HTTP `code` and the apiserver's `message`.
    pub fn new(kind: ErrorKind, code: u16, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            code,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    /// This error, with the server's `Retry-After` (whole seconds; under a second is none).
    #[must_use]
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after_secs = NonZeroU32::new(u32::try_from(after.as_secs()).unwrap_or(u32::MAX));
        self
    }

    /// How long the server asked the client to wait before sending the request again: the
    /// `Retry-After` header (whole seconds) of a 429 or a 5xx, as client-go reads it
    /// (`checkWait` in `k8s.io/client-go/rest/request.go`). API Priority and Fairness sends
    /// one with every request it rejects. `None` when the server said nothing (or `0`).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after_secs
            .map(|s| Duration::from_secs(u64::from(s.get())))
    }

    /// The reason the apiserver's `Status` gives for this answer: its kind's
    /// ([`ErrorKind::reason`]), and for a transient one its code's, as the apiserver words it
    /// (`k8s.io/apimachinery/pkg/api/errors`: 429 `TooManyRequests`, 500 `InternalError`, 504
    /// `Timeout`; a 503, or no answer at all, `ServiceUnavailable`).
    pub fn reason(&self) -> &'static str {
        match (self.kind, self.code) {
            (ErrorKind::Transient, 429) => "TooManyRequests",
            (ErrorKind::Transient, 500) => "InternalError",
            (ErrorKind::Transient, 504) => "Timeout",
            (kind, _) => kind.reason(),
        }
    }

    /// The pause before this failed call is sent again, where the caller's own backoff is
    /// `backoff`: the server's [`ApiError::retry_after`] (at most [`RETRY_AFTER_CAP`]) when it
    /// asks for longer, else `backoff`. client-go waits the longer of its backoff and the
    /// `Retry-After` too (`withRetry.Before`, `k8s.io/client-go/rest/with_retry.go`).
    pub fn retry_pause(&self, backoff: Duration) -> Duration {
        match self.retry_after() {
            Some(after) => backoff.max(after.min(RETRY_AFTER_CAP)),
            None => backoff,
        }
    }
    /// 404 NotFound.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, 404, message)
    }
    /// 409 Conflict.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, 409, message)
    }
    /// 409 AlreadyExists.
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::AlreadyExists, 409, message)
    }
    /// 410 Gone (Expired).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Gone, 410, message)
    }
    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, 403, message)
    }
    /// 422 Invalid.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, 422, message)
    }
    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, 400, message)
    }
    /// A transient failure with HTTP `code` (429, 500, 503, 504; 0 for no response).
    pub fn transient(code: u16, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transient, code, message)
    }

    /// 404.
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }
    /// 409 Conflict (a failed precondition), not AlreadyExists.
    pub fn is_conflict(&self) -> bool {
        self.kind == ErrorKind::Conflict
    }
    /// 409 AlreadyExists.
    pub fn is_already_exists(&self) -> bool {
        self.kind == ErrorKind::AlreadyExists
    }
    /// 410.
    pub fn is_gone(&self) -> bool {
        self.kind == ErrorKind::Gone
    }
    /// 403: authorization or admission refused.
    pub fn is_forbidden(&self) -> bool {
        self.kind == ErrorKind::Forbidden
    }
    /// 429 Too Many Requests: the apiserver's rate limit (a transient error), or, on an
    /// eviction, a PodDisruptionBudget that would be violated.
    pub fn is_too_many_requests(&self) -> bool {
        self.code == 429
    }
    /// The apiserver's certificate was not trusted ([`ErrorKind::Untrusted`]).
    pub fn is_untrusted(&self) -> bool {
        self.kind == ErrorKind::Untrusted
    }
    /// Worth retrying after a backoff: 429, 5xx, timeouts, broken connections.
    pub fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Transient
    }
}

/// The object a runner error is about: `{kind} job {namespace}/{name} on node {node}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRef {
    /// The caller's noun, e.g. `per-node upgrade`.
    pub kind: String,
    /// The Job's namespace.
    pub namespace: String,
    /// The Job's name.
    pub name: String,
    /// The node the Job targets.
    pub node: String,
}

impl fmt::Display for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.kind.is_empty() {
            "node"
        } else {
            &self.kind
        };
        write!(
            f,
            "{kind} job {}/{} on node {}",
            self.namespace, self.name, self.node
        )
    }
}

/// What an [`Operation`] was doing, as the error message's verb.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// A GET (or, after a watch expired, the LIST it resumes from).
    Reading,
    /// A LIST.
    Listing,
    /// A POST.
    Creating,
    /// A DELETE.
    Deleting,
    /// A watch (a LIST by name when it starts from now).
    Watching,
    /// A PATCH (cordoning, uncordoning, tainting).
    Patching,
    /// A POST of an Eviction.
    Evicting,
    /// Writing a Lease over another holder's (or our own earlier) one.
    Acquiring,
    /// Writing a Lease we hold with a new renew time.
    Renewing,
    /// Writing a Lease we hold with no holder.
    Releasing,
    /// Setting or lifting the pause switch on the Lease (`nodejob pause`, `nodejob resume`).
    Pausing,
    /// A whole runner function, when it fails for a reason of its own (a bug, not a call).
    Running,
}

impl Action {
    /// The lowercase verb, e.g. `deleting`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Reading => "reading",
            Action::Listing => "listing",
            Action::Creating => "creating",
            Action::Deleting => "deleting",
            Action::Watching => "watching",
            Action::Patching => "patching",
            Action::Evicting => "evicting",
            Action::Acquiring => "acquiring",
            Action::Renewing => "renewing",
            Action::Releasing => "releasing",
            Action::Pausing => "setting the pause switch on",
            Action::Running => "running",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of object an [`Operation`] was done to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectKind {
    /// A `batch/v1` Job.
    Job,
    /// A Pod.
    Pod,
    /// A Node.
    Node,
    /// A `coordination.k8s.io/v1` Lease.
    Lease,
    /// Events (listed, and created on Nodes).
    Event,
    /// A Pod's log (the `pods/log` subresource).
    Log,
}

impl ObjectKind {
    /// The lowercase noun, e.g. `job`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Job => "job",
            ObjectKind::Pod => "pod",
            ObjectKind::Node => "node",
            ObjectKind::Lease => "lease",
            ObjectKind::Event => "event",
            ObjectKind::Log => "log",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            ObjectKind::Job => "jobs",
            ObjectKind::Pod => "pods",
            ObjectKind::Node => "nodes",
            ObjectKind::Lease => "leases",
            ObjectKind::Event => "events",
            ObjectKind::Log => "logs",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which object (or objects) an [`Operation`] was done to.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// The object named `namespace/name`; `name` alone when `namespace` is empty (a Node).
    Named {
        /// Its namespace; empty for a cluster-scoped kind.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The objects of the kind on a node: `the pods on node n1`.
    OnNode(String),
    /// A runner's Job when the kind is [`ObjectKind::Job`]; else the object of the kind that
    /// belongs to it: `pods of`, `the node of`, `the log of` that Job.
    Job(Box<JobRef>),
}

/// One operation that failed, as [`Error::Api`] names it: what was being done ([`Action`]), to
/// what kind of object ([`ObjectKind`]), which ([`Target`]), and an optional detail. Its
/// `Display` is the message's lowercase head, e.g.
/// `deleting job kube-system/upgrade-a (uid 1, resourceVersion 2)`.
///
/// Branch on [`verb`](Self::verb) and [`kind`](Self::kind), never on the text:
///
/// ```
/// use nodejob_core::{Action, Error, ObjectKind};
///
/// fn lost_a_delete(e: &Error) -> bool {
///     e.operation()
///         .is_some_and(|op| op.verb == Action::Deleting && op.kind == ObjectKind::Job)
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Operation {
    /// What was being done.
    pub verb: Action,
    /// The kind of object it was done to.
    pub kind: ObjectKind,
    /// Which.
    pub target: Target,
    /// More about the call (its preconditions, the Pod of a log), shown in parentheses:
    /// `uid 1, resourceVersion 2`.
    pub detail: Option<String>,
}

impl Operation {
    /// `verb` the `kind` named `namespace/name` (an empty `namespace` for a cluster-scoped
    /// kind).
    pub fn named(
        verb: Action,
        kind: ObjectKind,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self::new(
            verb,
            kind,
            Target::Named {
                namespace: namespace.into(),
                name: name.into(),
            },
        )
    }

    /// `verb` the objects of `kind` on `node`.
    pub fn on_node(verb: Action, kind: ObjectKind, node: impl Into<String>) -> Self {
        Self::new(verb, kind, Target::OnNode(node.into()))
    }

    /// `verb` a runner's Job (`kind` [`ObjectKind::Job`]) or the object of `kind` that belongs
    /// to it.
    pub fn of_job(verb: Action, kind: ObjectKind, job: impl Into<Box<JobRef>>) -> Self {
        Self::new(verb, kind, Target::Job(job.into()))
    }

    /// The same operation with `detail`, shown in parentheses after the object.
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    fn new(verb: Action, kind: ObjectKind, target: Target) -> Self {
        Operation {
            verb,
            kind,
            target,
            detail: None,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Operation { verb, kind, .. } = self;
        match &self.target {
            Target::Named { namespace, name } if namespace.is_empty() => {
                write!(f, "{verb} {kind} {name}")?;
            }
            Target::Named { namespace, name } => write!(f, "{verb} {kind} {namespace}/{name}")?,
            Target::OnNode(node) => write!(f, "{verb} the {} on node {node}", kind.plural())?,
            Target::Job(job) if *kind == ObjectKind::Job => write!(f, "{verb} {job}")?,
            Target::Job(job) if *verb == Action::Listing => {
                write!(f, "{verb} {} of {job}", kind.plural())?;
            }
            Target::Job(job) => write!(f, "{verb} the {kind} of {job}")?,
        }
        match &self.detail {
            Some(detail) => write!(f, " ({detail})"),
            None => Ok(()),
        }
    }
}

/// What a runner function answers when it cannot report a result.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec was refused before any API call.
    #[error("invalid spec: {field}: {rule}")]
    InvalidSpec {
        /// The offending field, as named in [`crate::Spec`].
        field: &'static str,
        /// The rule it breaks, with the value.
        rule: String,
    },

    /// An API call failed in a way that is not worth retrying, or kept failing past the bound.
    #[error("{op}: {cause}")]
    Api {
        /// What was being done, to which object: `deleting job ns/name`.
        op: Operation,
        /// The classified apiserver answer.
        cause: ApiError,
    },

    /// Another actor owns the Job of that name now; it was left alone.
    #[error("{job}: another actor owns it now ({detail}); left it alone")]
    Contended {
        /// The Job.
        job: Box<JobRef>,
        /// What was seen.
        detail: String,
    },

    /// Our Job vanished, or was replaced by another UID, while we waited on it.
    #[error("{job} (uid {uid}) {detail} while waiting for it; nothing of another job was read")]
    Vanished {
        /// The Job.
        job: Box<JobRef>,
        /// The UID we created.
        uid: String,
        /// `was deleted` or `was replaced by uid X`.
        detail: String,
    },

    /// The wait bound ran out.
    #[error("timed out after {waited:?} waiting for {job} {what}")]
    Timeout {
        /// The Job.
        job: Box<JobRef>,
        /// What was awaited: `to finish`, `to be deleted`.
        what: String,
        /// How long was waited.
        waited: std::time::Duration,
    },

    /// The Job controller cannot create the Pod (a `FailedCreate` event on the Job).
    #[error("{job}: the job controller cannot create its pod: {reason}: {message}{hint}")]
    PodCreateRefused {
        /// The Job.
        job: Box<JobRef>,
        /// The event's reason (`FailedCreate`).
        reason: String,
        /// The event's message, verbatim.
        message: String,
        /// The fix, when one is known (empty otherwise).
        hint: String,
    },

    /// The Job failed and its container exited with a status (returned by [`crate::run`] only:
    /// the exit-code functions return the code instead).
    #[error("{job} failed: container exited with code {exit_code}; the job is left for inspection")]
    Failed {
        /// The Job.
        job: Box<JobRef>,
        /// The container's exit code.
        exit_code: i32,
    },

    /// The Job failed without its container terminating (deadline before start, image never
    /// pulled, pod deleted): no exit status exists.
    #[error("{job} failed without an exit status: {reason}: {message}")]
    FailedWithoutExit {
        /// The Job.
        job: Box<JobRef>,
        /// The `Failed` (or `FailureTarget`) condition's reason.
        reason: String,
        /// Its message.
        message: String,
    },

    /// The Job ended with an exit status, `exit_code`, but its Pod's log could not be read (the
    /// apiserver reads it from the kubelet, which may be unreachable). The Job is left in place.
    #[error("{job} exited with code {exit_code} but its log could not be read: {detail}")]
    LogUnread {
        /// The exit status the Job did end with.
        exit_code: i32,
        /// The Job.
        job: Box<JobRef>,
        /// Why the log could not be read.
        detail: String,
    },

    /// A node never became Ready within the bound.
    #[error("node {node} {state} after waiting {waited:?} for it to become Ready")]
    NodeNotReady {
        /// The node.
        node: String,
        /// What was last seen: `is NotReady`, `does not exist`.
        state: String,
        /// How long was waited.
        waited: std::time::Duration,
    },

    /// Another holder's Lease is live: one host-mutating operation at a time per cluster.
    #[error(
        "lease {lease} is held by {holder}; it expires in {}s unless renewed: wait for that operation to end, or for the lease to expire",
        expires_in.as_secs_f64().ceil()
    )]
    LeaseHeld {
        /// The Lease, `namespace/name`.
        lease: String,
        /// Who holds it and what for.
        holder: String,
        /// How long until it expires unless renewed.
        expires_in: std::time::Duration,
    },

    /// We no longer hold the Lease at the epoch we acquired: another actor took it over (it
    /// expired) or released it. The step that asked was not carried out.
    #[error(
        "lost lease {lease} (our epoch {epoch}): it is now held by {now}; stopped before the next write"
    )]
    LeaseLost {
        /// The Lease, `namespace/name`.
        lease: String,
        /// The epoch we held.
        epoch: i32,
        /// Who holds it now.
        now: String,
    },

    /// A drain refused to start: some pods on the node cannot be evicted under the drain's
    /// options. Nothing was evicted.
    #[error("drain of node {node} refused before any eviction: {}", list(pods))]
    DrainRefused {
        /// The node.
        node: String,
        /// Each refused pod, `namespace/name`, with why.
        pods: Vec<(String, String)>,
    },

    /// A drain ran out of time. Nothing was evicted after it gave up.
    #[error("drain of node {node} timed out after {waited:?}{}: pods left: {}", blocked.as_ref().map(|b| format!(" ({b})")).unwrap_or_default(), pods_left.join(", "))]
    DrainTimeout {
        /// The node.
        node: String,
        /// How long was waited.
        waited: std::time::Duration,
        /// The last refusal of a PodDisruptionBudget, naming it, if one blocked.
        blocked: Option<String>,
        /// The pods still on the node, `namespace/name`.
        pods_left: Vec<String>,
        /// The PodDisruptionBudgets whose refusal kept a Pod still left from being evicted,
        /// `namespace/name`, in order, each once (empty when none blocked: the Pods evicted
        /// did not go in time).
        budgets: Vec<String>,
    },

    /// The Job's Pod was deleted or disrupted (evicted, preempted, garbage-collected, stopped by
    /// the kubelet) before the host operation ended on its own: whatever its container exited
    /// with was the kill's, not the host's answer. The Job is left in place.
    #[error(
        "pod {pod} of {job} was deleted before the host operation ended ({cause}): its exit status is not the host's answer; the job is left for inspection"
    )]
    PodDeleted {
        /// The Job.
        job: Box<JobRef>,
        /// The Pod's name.
        pod: String,
        /// What stopped it: its `DisruptionTarget` condition, or its deletion.
        cause: String,
    },

    /// The Job's Pod was running when its node rebooted: the container runtime found its
    /// container gone on the new boot and the kubelet ended it with the unknown exit
    /// ([`crate::status::lost_in_reboot`]: 255, reason `Unknown`). The host operation's own end
    /// was never seen: it may have done all, some or none of its work, and whether it did is
    /// for the node to tell (what it reports now), not this exit code. The Job is left.
    #[error(
        "pod {pod} of {job} was running when its node rebooted: the runtime found its container gone on the new boot (exit 255, reason Unknown), so the host operation's own end was never seen and it may have done all, some or none of its work; the job is left for inspection"
    )]
    LostInReboot {
        /// The Job.
        job: Box<JobRef>,
        /// The Pod's name.
        pod: String,
    },

    /// The node of the Job was deleted while the runner waited for the Job. The Job is left in
    /// place.
    #[error("node {node} was deleted while waiting for {job} {what}; the job is left in place")]
    NodeDeleted {
        /// The Job.
        job: Box<JobRef>,
        /// The node.
        node: String,
        /// What was awaited: `to finish`, `to start a pod`.
        what: String,
    },
}

fn list(pods: &[(String, String)]) -> String {
    pods.iter()
        .map(|(pod, why)| format!("{pod} ({why})"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Error {
    /// The exit status inside a [`Error::LogUnread`] (or [`Error::Failed`]), if any.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            Error::LogUnread { exit_code, .. } | Error::Failed { exit_code, .. } => {
                Some(*exit_code)
            }
            _ => None,
        }
    }
    /// The classified API error under an [`Error::Api`].
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            Error::Api { cause, .. } => Some(cause),
            _ => None,
        }
    }
    /// The operation an [`Error::Api`] names.
    pub fn operation(&self) -> Option<&Operation> {
        match self {
            Error::Api { op, .. } => Some(op),
            _ => None,
        }
    }
}

/// What a runner function returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure names the reason the apiserver would give its code, a transient one too.
    #[test]
    fn a_failure_says_the_apiservers_reason_for_its_code() {
        let said = |e: ApiError| e.to_string();
        assert_eq!(
            said(ApiError::transient(429, "storage is (re)initializing")),
            "storage is (re)initializing (429 TooManyRequests)"
        );
        assert_eq!(
            said(ApiError::transient(500, "boom")),
            "boom (500 InternalError)"
        );
        assert_eq!(
            said(ApiError::transient(503, "down")),
            "down (503 ServiceUnavailable)"
        );
        assert_eq!(said(ApiError::transient(504, "slow")), "slow (504 Timeout)");
        assert_eq!(
            said(ApiError::transient(0, "no answer")),
            "no answer (0 ServiceUnavailable)"
        );
        assert_eq!(said(ApiError::not_found("gone")), "gone (404 NotFound)");
    }

    /// A held Lease's expiry in whole seconds, rounded up (`59s`, not `58.000942272s`).
    #[test]
    fn a_held_lease_says_its_expiry_in_whole_seconds() {
        let held = Error::LeaseHeld {
            lease: "kube-system/nodejob".into(),
            holder: "alice".into(),
            expires_in: std::time::Duration::from_nanos(58_000_942_272),
        };
        let said = held.to_string();
        assert!(said.contains("it expires in 59s unless renewed"), "{said}");
    }
}
