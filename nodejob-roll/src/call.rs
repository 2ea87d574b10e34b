//! One API call as a run makes it: [`retry`] on transient errors within [`CALL_BOUND`], and
//! durations in whole milliseconds ([`millis`]). A leaf.

use std::future::Future;
use std::time::Duration;

use nodejob_core::{ApiError, Clock};

/// How long [`retry`] retries a single call on transient errors.
pub const CALL_BOUND: Duration = Duration::from_secs(60);

/// Calls `op` until it answers something other than a transient error, backing off from
/// 250ms, doubling, at most 5s apart, for at most [`CALL_BOUND`] of the backend's time.
///
/// A failure whose server said `Retry-After` (API Priority and Fairness' 429) is sent again
/// only once that has passed, at most [`nodejob_core::RETRY_AFTER_CAP`]
/// ([`ApiError::retry_pause`]; client-go's `checkWait`, `k8s.io/client-go/rest/request.go`);
/// when that would end past the bound, the failure is the answer at once.
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
            Err(e) if e.is_retryable() => {
                let wait = e.retry_pause(pause);
                if api.now().saturating_add(wait) >= deadline {
                    return Err(e);
                }
                api.sleep(wait).await;
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use k8s_openapi::jiff::Timestamp;
    use nodejob_core::ErrorKind;

    use super::*;

    /// A clock whose sleeps advance it at once, and which notes each.
    #[derive(Default)]
    struct Steps {
        now: Mutex<Duration>,
        slept: Mutex<Vec<Duration>>,
    }

    #[async_trait]
    impl Clock for Steps {
        fn now(&self) -> Duration {
            *self
                .now
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        async fn sleep(&self, duration: Duration) {
            *self
                .now
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) += duration;
            self.slept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(duration);
        }
        fn wall_time(&self) -> Timestamp {
            Timestamp::UNIX_EPOCH
        }
    }

    fn apf(after: Option<u64>) -> ApiError {
        let e = ApiError::transient(429, "Too many requests, please try again later.");
        match after {
            Some(s) => e.with_retry_after(Duration::from_secs(s)),
            None => e,
        }
    }

    #[tokio::test]
    async fn a_retry_after_is_waited_for_instead_of_a_shorter_backoff() {
        let clock = Steps::default();
        let mut answers =
            vec![Err(apf(Some(3))), Err(apf(None)), Err(apf(Some(0))), Ok(())].into_iter();
        let answer = retry(&clock, || {
            std::future::ready(answers.next().unwrap_or(Ok(())))
        })
        .await;
        assert_eq!(answer, Ok(()));
        // 3 s asked, over the 250 ms backoff; none asked: the backoff, 500 ms; 0 s asked: the
        // backoff, 1 s.
        let slept = clock.slept.into_inner().unwrap_or_default();
        assert_eq!(
            slept,
            [
                Duration::from_secs(3),
                Duration::from_millis(500),
                Duration::from_secs(1)
            ]
        );
    }

    #[tokio::test]
    async fn a_retry_after_past_the_bound_is_the_answer_at_once() {
        let clock = Steps::default();
        // Ten minutes asked: cut to RETRY_AFTER_CAP (60 s), which still ends at the bound.
        let answer = retry(&clock, || std::future::ready(Err::<(), _>(apf(Some(600))))).await;
        let err = answer.unwrap_err();
        assert_eq!(
            (err.kind, err.retry_after()),
            (ErrorKind::Transient, Some(Duration::from_secs(600)))
        );
        assert_eq!(clock.slept.into_inner().unwrap_or_default(), []);
    }
}
