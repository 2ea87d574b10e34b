//! [`Stop`]: a request to stop starting nodes, awaitable so that a sleep ends when asked.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A request to stop starting nodes: nodes in flight finish their current step. Cloned
/// handles share one flag (a signal handler holds one, the run another).
///
/// Awaitable: [`Stop::asked`] is a future that ends when a stop is requested, so a run's
/// sleeps (a window, a soak, a backoff) end early when asked to.
#[derive(Clone, Debug, Default)]
pub struct Stop(Arc<StopFlag>);

#[derive(Debug, Default)]
struct StopFlag {
    requested: AtomicBool,
    /// The tasks awaiting [`Stop::asked`], woken by [`Stop::request`].
    waiting: std::sync::Mutex<Vec<std::task::Waker>>,
}

impl Stop {
    /// A handle nobody has asked to stop yet.
    pub fn new() -> Self {
        Stop::default()
    }

    /// Asks the run to stop starting nodes; wakes every [`Stop::asked`].
    pub fn request(&self) {
        self.0.requested.store(true, Ordering::SeqCst);
        let waiting =
            std::mem::take(&mut *self.0.waiting.lock().unwrap_or_else(|e| e.into_inner()));
        for waker in waiting {
            waker.wake();
        }
    }

    /// Whether a stop was asked.
    pub fn requested(&self) -> bool {
        self.0.requested.load(Ordering::SeqCst)
    }

    /// Ends when a stop is requested (at once if it was).
    pub fn asked(&self) -> Asked<'_> {
        Asked(self)
    }
}

/// The future of [`Stop::asked`].
#[derive(Debug)]
#[must_use = "a future does nothing unless awaited"]
pub struct Asked<'a>(&'a Stop);

impl std::future::Future for Asked<'_> {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0.requested() {
            return std::task::Poll::Ready(());
        }
        let mut waiting = (self.0.0.waiting.lock()).unwrap_or_else(|e| e.into_inner());
        if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
            waiting.push(cx.waker().clone());
        }
        drop(waiting);
        // Requested between the first look and the registration: not missed.
        if self.0.requested() {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }
}
