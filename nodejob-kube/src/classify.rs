//! The apiserver's answers, classified into core's [`ApiError`].
//!
//! By HTTP status code first, and by the `Status` reason where the code alone does not decide
//! (409) or is missing (a watch `ERROR` event whose `Status` carries no code). kube's own
//! classifiers are not used: in kube-core 5, `Status::is_not_found()` (and `is_conflict()`,
//! `is_forbidden()`, `is_invalid()`) fall back to the code only when the *expected* reason is
//! unknown, which it never is, so they are reason-only in effect and a 404 whose `Status` has an
//! empty reason slips past them; `is_already_exists()` is reason-only by design.
//!
//! The message is the apiserver's `Status.message`, verbatim: a PodSecurity refusal (403) or an
//! unreachable kubelet (500 on `pods/log`) is explained there and nowhere else.

use kube::core::Status;
use nodejob_core::{ApiError, ErrorKind};

/// The kind of an answer with HTTP status `code` (0 when unknown) and `Status.reason`.
///
/// Reasons and codes are the apiserver's (`k8s.io/apimachinery/pkg/apis/meta/v1` `StatusReason*`,
/// `k8s.io/apimachinery/pkg/api/errors`): AlreadyExists and Conflict share 409 and only the
/// reason tells them apart; 410 is `Expired` (or `Gone`) for a resourceVersion too old to watch
/// from; 429 `TooManyRequests` (API Priority and Fairness), 500 `InternalError` or an empty
/// reason (any error the apiserver did not classify, e.g. a failed dial to the kubelet for
/// `pods/log`), 503 `ServiceUnavailable` and 504 `Timeout` are worth retrying.
pub(crate) fn kind_of(code: u16, reason: &str) -> ErrorKind {
    match code {
        404 => ErrorKind::NotFound,
        409 if reason == "AlreadyExists" => ErrorKind::AlreadyExists,
        409 => ErrorKind::Conflict,
        410 => ErrorKind::Gone,
        403 => ErrorKind::Forbidden,
        422 => ErrorKind::Invalid,
        400 => ErrorKind::BadRequest,
        429 | 500 | 503 | 504 => ErrorKind::Transient,
        0 => kind_of_reason(reason),
        _ => ErrorKind::Other,
    }
}

/// The kind of a `Status` that carries no code: by its reason alone.
fn kind_of_reason(reason: &str) -> ErrorKind {
    match reason {
        "NotFound" => ErrorKind::NotFound,
        "AlreadyExists" => ErrorKind::AlreadyExists,
        "Conflict" => ErrorKind::Conflict,
        "Expired" | "Gone" => ErrorKind::Gone,
        "Forbidden" => ErrorKind::Forbidden,
        "Invalid" => ErrorKind::Invalid,
        "BadRequest" => ErrorKind::BadRequest,
        "TooManyRequests" | "InternalError" | "ServiceUnavailable" | "Timeout"
        | "ServerTimeout" => ErrorKind::Transient,
        _ => ErrorKind::Other,
    }
}

/// A `Status` as the apiserver sent it, e.g. in a watch `ERROR` event, or as kube read it from
/// a refused watch request. Its `details.retryAfterSeconds`, when set, is the wait asked for:
/// the apiserver writes the `Retry-After` header from it (`responsewriters.ErrorNegotiated`),
/// and client-go copies the header into it (`newUnstructuredResponseError`,
/// `k8s.io/client-go/rest/request.go`), so the two say the same.
pub(crate) fn from_status(status: &Status) -> ApiError {
    let error = ApiError::new(
        kind_of(status.code, &status.reason),
        status.code,
        status.message.clone(),
    );
    match status.details.as_ref().map(|d| d.retry_after_seconds) {
        Some(seconds) if seconds > 0 && (status.code == 429 || status.code >= 500) => {
            error.with_retry_after(std::time::Duration::from_secs(u64::from(seconds)))
        }
        _ => error,
    }
}

/// A non-2xx response: HTTP status `code` and its `body`, a JSON `Status` from the apiserver or
/// anything else from a proxy in front of it.
pub(crate) fn from_response(code: u16, body: &[u8]) -> ApiError {
    let status = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Status"))
        .and_then(|v| serde_json::from_value::<Status>(v).ok());
    match status {
        // The code is the response's: a Status body without one (or with another) does not
        // change what the HTTP layer said.
        Some(status) => ApiError::new(kind_of(code, &status.reason), code, status.message),
        None => {
            let text = String::from_utf8_lossy(body).trim().to_string();
            let message = if text.is_empty() {
                http::StatusCode::from_u16(code)
                    .ok()
                    .and_then(|c| c.canonical_reason())
                    .unwrap_or("no message")
                    .to_string()
            } else {
                text
            };
            ApiError::new(kind_of(code, ""), code, message)
        }
    }
}

/// A failure reported by kube: an apiserver `Status`, or no answer at all.
pub(crate) fn from_kube(err: kube::Error) -> ApiError {
    match err {
        // kube fills `code` from the body's Status, or from the HTTP status when the body is
        // not one.
        kube::Error::Api(status) => from_status(&status),
        // A certificate the TLS handshake refused: retrying cannot help.
        err @ (kube::Error::HyperError(_) | kube::Error::Service(_))
            if untrusted_certificate(&err) =>
        {
            ApiError::new(ErrorKind::Untrusted, 0, error_chain(&err))
        }
        // Refused or reset connections, other TLS failures, connect timeouts (hyper, the
        // tower stack) and broken response streams: no answer was had, worth retrying.
        err @ (kube::Error::HyperError(_)
        | kube::Error::Service(_)
        | kube::Error::ReadEvents(_)) => ApiError::transient(0, error_chain(&err)),
        // Refused before sending (an empty or malformed name): the request cannot be made.
        err @ kube::Error::BuildRequest(_) => {
            ApiError::new(ErrorKind::BadRequest, 0, error_chain(&err))
        }
        err => ApiError::new(ErrorKind::Other, 0, error_chain(&err)),
    }
}

/// Whether `err` or one of its causes is rustls refusing the peer's certificate (an unknown
/// issuer, another name, expired: [`rustls::Error::InvalidCertificate`]). The rustls error
/// sits inside `io::Error`s (hyper's connector wraps the TLS stream's), whose `source` skips
/// the error they wrap: their inner error is followed instead.
fn untrusted_certificate(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(rustls::Error::InvalidCertificate(_)) = e.downcast_ref::<rustls::Error>() {
            return true;
        }
        cause = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    false
}

/// `err` and its causes, `: `-separated, so a transport error names what actually failed.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_certificate_is_told_through_the_io_errors_that_wrap_it() {
        use std::io::{Error as Io, ErrorKind as IoKind};
        let refused = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        // As hyper's connector wraps the TLS stream's error.
        let wrapped = Io::other(Io::new(IoKind::InvalidData, refused));
        assert!(untrusted_certificate(&wrapped));
        let other_tls = Io::other(Io::new(
            IoKind::InvalidData,
            rustls::Error::HandshakeNotComplete,
        ));
        assert!(!untrusted_certificate(&other_tls));
        let refused_connection = Io::new(IoKind::ConnectionRefused, "Connection refused");
        assert!(!untrusted_certificate(&refused_connection));
    }

    #[test]
    fn code_decides_before_reason() {
        assert_eq!(kind_of(404, ""), ErrorKind::NotFound);
        assert_eq!(kind_of(409, "AlreadyExists"), ErrorKind::AlreadyExists);
        assert_eq!(kind_of(409, "Conflict"), ErrorKind::Conflict);
        assert_eq!(kind_of(409, ""), ErrorKind::Conflict);
        assert_eq!(kind_of(0, "Expired"), ErrorKind::Gone);
    }

    #[test]
    fn plain_text_bodies_keep_their_text() {
        let e = from_response(503, b"upstream connect error\n");
        assert_eq!(e.kind, ErrorKind::Transient);
        assert_eq!(e.message, "upstream connect error");
        let e = from_response(504, b"");
        assert_eq!(e.message, "Gateway Timeout");
    }
}
