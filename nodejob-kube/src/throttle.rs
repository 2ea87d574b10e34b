//! The client-side rate limit: a token bucket of `burst` tokens refilled at `qps` a second, as
//! client-go's `rest.Config` `QPS` and `Burst` (`flowcontrol.NewTokenBucketRateLimiter`, over
//! `golang.org/x/time/rate`), taken by every request of a [`crate::KubeApi`] before it is sent.
//!
//! What takes a token: every verb (one request each, see the crate docs), the re-list by name
//! after a watch expired, and `reach`'s `GET /version`. What does not: a watch. Opening one is
//! not throttled, as client-go does not throttle `Request.Watch` ("We specifically don't want to
//! rate limit watches", `k8s.io/client-go/rest/request.go`), and a watch that streams holds
//! nothing: a bucket is no semaphore, a token is spent when a request is sent and never given
//! back. A watch is told by the `"watch"` extension its request carries (`crate::watch` sets
//! it, as kube's `Api::watch` does).
//!
//! A request waits for its token inside the request's own timeout ([`crate::REQUEST_TIMEOUT`]),
//! as client-go's `Request.tryThrottle` waits inside the request's context: a client so far
//! behind its limit that a request waits a minute answers a transient timeout, which its
//! caller retries. A request given up while it waits (its caller's timeout) keeps its token
//! spent.
//!
//! ```text
//!   request ── watch? ──yes──────────────────────────────────────▶ sent
//!                 │ no
//!                 ▼
//!   take a token: one left ─▶ sent; none ─▶ wait until one refills (first come, first served)
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};

/// A rate limit: at most `burst` requests at once after an idle spell, `qps` a second on
/// average. Both positive: [`RateLimit::new`] refuses anything else.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    qps: f64,
    burst: u32,
}

impl RateLimit {
    /// The default: 100 requests a second, bursts of 200 (client-go's defaults are 5 and 10;
    /// kubectl's 50 and 300; the kube-scheduler's 50 and 100).
    ///
    /// Why: a roll costs about 40 requests per node (39.3 measured through a counting proxy on
    /// the end-to-end control plane), spread over the node's cycle (drain, host operation,
    /// reboot, Ready again: minutes). At `max_unavailable` 10%, N nodes ask about
    /// `N / 10 * 40` requests per cycle; with a 3-minute cycle 100 a second carries a roll of
    /// up to about 4,500 nodes without pacing it, and caps a runaway (a retry storm, a bug) at
    /// what one controller of a large cluster is granted. A burst of 200 lets a batch open
    /// (reading and cordoning its nodes, listing their pods: about 4 requests each) for 50
    /// nodes at once. Past that, the apiserver's own API Priority and Fairness answers 429 and
    /// its `Retry-After` is waited for.
    pub const DEFAULT: RateLimit = RateLimit {
        qps: 100.0,
        burst: 200,
    };

    /// `qps` requests a second, bursts of `burst`; refused unless both are positive (and `qps`
    /// finite).
    pub fn new(qps: f64, burst: u32) -> Result<Self, RateLimitError> {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(RateLimitError::Qps(qps));
        }
        if burst == 0 {
            return Err(RateLimitError::Burst);
        }
        Ok(RateLimit { qps, burst })
    }

    /// Requests a second, on average.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// Requests at once, after an idle spell.
    pub fn burst(&self) -> u32 {
        self.burst
    }
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit::DEFAULT
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests a second, bursts of {}",
            self.qps, self.burst
        )
    }
}

/// Why a [`RateLimit`] cannot be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitError {
    /// The rate is zero, negative or not a number.
    #[error("qps {0}: must be a number of requests a second above 0")]
    Qps(f64),
    /// The burst is zero.
    #[error("burst 0: must be at least 1 request")]
    Burst,
}

/// The bucket's state: the tokens left (negative when requests are waiting for ones not yet
/// refilled) as of `at`.
#[derive(Debug)]
pub(crate) struct Bucket {
    limit: RateLimit,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket at `now`.
    pub(crate) fn full(limit: RateLimit, now: Instant) -> Self {
        Bucket {
            limit,
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// Takes a token at `now` and returns how long its request must wait for it: zero while
    /// tokens are left, else until the token it took is refilled. Each call takes its own, so
    /// requests are sent in the order they asked, `1 / qps` apart once the burst is spent (the
    /// reservation of `golang.org/x/time/rate`'s `Limiter.Wait`).
    pub(crate) fn take(&mut self, now: Instant) -> Duration {
        let burst = f64::from(self.limit.burst);
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.limit.qps).min(burst);
        self.at = self.at.max(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.limit.qps)
        }
    }
}

/// The [`tower::Layer`] that puts a [`RateLimit`] in front of a client's HTTP stack: every
/// request sent through the stack, except watches, waits for a token of one bucket shared by
/// all clones of the client.
///
/// [`crate::KubeApi::from_config`] builds its client with one; a client built elsewhere
/// (`kube::Client::new` over a stack of one's own) has a limit only when its stack has this
/// layer.
#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<Bucket>>,
}

impl fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer").finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// A layer with a full bucket of `limit`.
    pub fn new(limit: RateLimit) -> Self {
        RateLimitLayer {
            bucket: Arc::new(Mutex::new(Bucket::full(limit, Instant::now()))),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: Arc::clone(&self.bucket),
        }
    }
}

/// A service whose requests (watches apart) wait for a token first: see [`RateLimitLayer`].
#[derive(Clone)]
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
}

impl<S> fmt::Debug for RateLimited<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimited").finish_non_exhaustive()
    }
}

/// Whether `request` is a watch: `crate::watch` marks its requests with the `"watch"`
/// extension, as kube's `Api::watch` does.
fn is_watch<B>(request: &http::Request<B>) -> bool {
    request.extensions().get::<&'static str>() == Some(&"watch")
}

impl<S, B> Service<http::Request<B>> for RateLimited<S>
where
    S: Service<http::Request<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if is_watch(&request) {
            return Box::pin(self.inner.call(request));
        }
        let wait = self
            .bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(Instant::now());
        // The service made ready by `poll_ready` goes with the request; a clone stays for the
        // next `poll_ready` (tower's documented pattern for a call that awaits first).
        let clone = self.inner.clone();
        let mut ready = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            ready.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_full_bucket_lets_a_burst_through_then_paces_at_the_rate() -> Result<(), RateLimitError> {
        let t0 = Instant::now();
        let mut bucket = Bucket::full(RateLimit::new(10.0, 3)?, t0);
        let waits: Vec<Duration> = (0..6).map(|_| bucket.take(t0)).collect();
        // Three at once, then one every 100 ms, each reserved in the order asked.
        assert_eq!(
            waits,
            [ms(0), ms(0), ms(0), ms(100), ms(200), ms(300)],
            "{waits:?}"
        );
        Ok(())
    }

    #[test]
    fn an_idle_bucket_refills_up_to_its_burst_and_no_more() -> Result<(), RateLimitError> {
        let t0 = Instant::now();
        let mut bucket = Bucket::full(RateLimit::new(2.0, 2)?, t0);
        assert_eq!(bucket.take(t0), ms(0));
        assert_eq!(bucket.take(t0), ms(0));
        // Half a second refills one token.
        assert_eq!(bucket.take(t0 + ms(500)), ms(0));
        assert_eq!(bucket.take(t0 + ms(500)), ms(500));
        // An hour idle refills the burst, not 7,200 tokens.
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(bucket.take(later), ms(0));
        assert_eq!(bucket.take(later), ms(0));
        assert_eq!(bucket.take(later), ms(500));
        Ok(())
    }

    #[test]
    fn a_fractional_rate_spaces_requests_seconds_apart() -> Result<(), RateLimitError> {
        let t0 = Instant::now();
        let mut bucket = Bucket::full(RateLimit::new(0.5, 1)?, t0);
        assert_eq!(bucket.take(t0), ms(0));
        assert_eq!(bucket.take(t0), ms(2000));
        assert_eq!(bucket.take(t0 + ms(2000)), ms(2000));
        Ok(())
    }

    #[test]
    fn zero_negative_and_nan_are_refused() {
        assert_eq!(RateLimit::new(0.0, 1), Err(RateLimitError::Qps(0.0)));
        assert_eq!(RateLimit::new(-5.0, 1), Err(RateLimitError::Qps(-5.0)));
        assert!(RateLimit::new(f64::NAN, 1).is_err());
        assert!(RateLimit::new(f64::INFINITY, 1).is_err());
        assert_eq!(RateLimit::new(5.0, 0), Err(RateLimitError::Burst));
        assert_eq!(
            RateLimit::new(5.0, 10).map(|l| (l.qps(), l.burst())),
            Ok((5.0, 10))
        );
    }
}
