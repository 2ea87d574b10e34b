//! One API call as a run makes it: [`retry`] on transient errors within [`CALL_BOUND`], and
//! durations in whole milliseconds ([`millis`]). A leaf.

use std::future::Future;
use std::time::Duration;

use nodejob_core::{ApiError, Clock};

/// How long [`retry`] retries a single call on transient errors.
pub const CALL_BOUND: Duration = Duration::from_secs(60);

/// Calls `op` until it answers something other than a transient error, backing off from
/// 250ms, doubling, at most 5s apart, for at most [`CALL_BOUND`] of the backend's time.
pub async fn retry<A, T, F, Fut>(api: &A, mut op: F) -> std::result::Result<T, ApiError>
where
    A: Clock + ?Sized,
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, ApiError>>,
{
    let deadline = api.now().saturating_add(CALL_BOUND);
    let mut pause = Duration::from_millis(250);
    loop {
        match op().await {
            Err(e) if e.is_retryable() && api.now().saturating_add(pause) < deadline => {
                api.sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

/// `d` in whole milliseconds, as reports count durations.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
