//! One request, one answer: sending a request built by `kube::core::Request` over a
//! `kube::Client`, bounded by [`REQUEST_TIMEOUT`], its failure classified into core's
//! [`ApiError`].
//!
//! Both the verbs ([`crate::KubeApi`]) and the watches (`crate::watch`) send through here, and
//! neither knows the other.

use std::time::Duration;

use k8s_openapi::serde::de::DeserializeOwned;
use kube::Client;
use kube::client::Body;
use nodejob_core::{ApiError, ApiResult, ErrorKind};

use crate::classify::{error_chain, from_kube, from_response};

/// How long one request other than a watch may take before it counts as a (transient) timeout.
/// kube sets no read timeout of its own (`Config::read_timeout` is `None`), so a stalled
/// apiserver would otherwise hold a call, and the runner's bound with it, forever.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A request as `kube::core::Request` builds it: refused before sending when it cannot be made
/// (an empty name).
pub(crate) type Built = Result<http::Request<Vec<u8>>, kube::core::request::Error>;

/// An HTTP answer: its status code and body, whatever the code.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The HTTP status code.
    pub(crate) code: u16,
    /// The body, read whole.
    pub(crate) body: Vec<u8>,
    /// The wait the server asked for before the request is sent again, on a 429 or a 5xx
    /// ([`retry_after`]).
    pub(crate) retry_after: Option<Duration>,
}

impl Answer {
    /// A non-2xx answer as an [`ApiError`], classified, with the server's `Retry-After`.
    pub(crate) fn error(&self) -> ApiError {
        let error = from_response(self.code, &self.body);
        match self.retry_after {
            Some(after) => error.with_retry_after(after),
            None => error,
        }
    }
}

/// The `Retry-After` of an answer with HTTP status `code`, as client-go's `checkWait` and
/// `retryAfterSeconds` read it (`k8s.io/client-go/rest/request.go`): only on a 429 or a 5xx,
/// and only as whole seconds (an HTTP date, or anything else, is no wait). The apiserver sends
/// it on every 429 of API Priority and Fairness (`tooManyRequests`,
/// `k8s.io/apiserver/pkg/server/filters`) and wherever a `Status` carries
/// `details.retryAfterSeconds` (`responsewriters.ErrorNegotiated`).
pub(crate) fn retry_after(code: u16, headers: &http::HeaderMap) -> Option<Duration> {
    if code != 429 && code < 500 {
        return None;
    }
    let seconds: u64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

/// Sends `request` and reads the whole answer, whatever its status code. Only no answer (a
/// broken connection, nothing within [`REQUEST_TIMEOUT`]) or a request that cannot be made is
/// an [`ApiError`].
pub(crate) async fn exchange(client: &Client, request: Built) -> ApiResult<Answer> {
    let request = request.map_err(|e| ApiError::new(ErrorKind::BadRequest, 0, error_chain(&e)))?;
    let exchange = async {
        let response = client
            .send(request.map(Body::from))
            .await
            .map_err(from_kube)?;
        let code = response.status().as_u16();
        let retry_after = retry_after(code, response.headers());
        let body = response
            .into_body()
            .collect_bytes()
            .await
            .map_err(from_kube)?;
        Ok(Answer {
            code,
            body: body.to_vec(),
            retry_after,
        })
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_elapsed| {
            Err(ApiError::transient(
                0,
                format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()),
            ))
        })
}

/// Sends `request` and returns the body of a 2xx answer; any other answer, or none within
/// [`REQUEST_TIMEOUT`], is an [`ApiError`].
pub(crate) async fn call(client: &Client, request: Built) -> ApiResult<Vec<u8>> {
    let answer = exchange(client, request).await?;
    if (200..300).contains(&answer.code) {
        Ok(answer.body)
    } else {
        Err(answer.error())
    }
}

/// [`call`], decoding the answer as JSON.
pub(crate) async fn call_json<T: DeserializeOwned>(
    client: &Client,
    request: Built,
) -> ApiResult<T> {
    let body = call(client, request).await?;
    decode(&body)
}

/// A JSON answer decoded, or an error naming why it is not one.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::new(ErrorKind::Other, 0, format!("undecodable answer: {e}")))
}
