//! Errors: [`ApiError`] is what a backend verb answers, classified; [`Error`] is what a runner
//! function answers, naming the operation and the object.

use std::fmt;

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
            ErrorKind::Other => "Unknown",
        }
    }
}

/// One failed API call: its classification, HTTP status code and the apiserver's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code} {})", kind.reason())]
pub struct ApiError {
    /// The classification callers branch on.
    pub kind: ErrorKind,
    /// The HTTP status code (0 when no response was had at all).
    pub code: u16,
    /// The apiserver's message, verbatim.
    pub message: String,
}

impl ApiError {
    /// An error of `kind` with an HTTP `code` and the apiserver's `message`.
    pub fn new(kind: ErrorKind, code: u16, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            code,
            message: message.into(),
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
    #[error("{action}: {cause}")]
    Api {
        /// What was being done, naming the object: `deleting job ns/name`.
        action: String,
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
}

/// What a runner function returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;
