//! The kubelet's heartbeats as schedules: the node's Lease renewed every 10 s (the lease keeper,
//! `lease.rs`), its status computed every 10 s and patched only when it changed or, unchanged,
//! every 5 minutes (the node worker). Pure: every instant comes in as an argument and every
//! random draw from the [`Jitter`] it is handed, so the tests run the schedules in virtual time.
//!
//! What the kubelet does (Kubernetes v1.37.2, the version `e2e/build` pins; the sources are in
//! the Go module cache once it has built):
//!
//! - `nodeLeaseDurationSeconds` defaults to 40 (`pkg/kubelet/apis/config/v1beta1/defaults.go`)
//!   and the Lease is renewed every `nodeLeaseRenewIntervalFraction` (0.25) of it
//!   (`pkg/kubelet/kubelet.go`): every 10 s, by `wait.JitterUntilWithContext(ctx, c.sync,
//!   c.renewInterval, 0.04, true)` (`k8s.io/component-helpers/apimachinery/lease/controller.go`):
//!   the first renewal at once, each next 10 s to 10.4 s after the last one ended.
//! - `nodeStatusUpdateFrequency` defaults to 10 s and `nodeStatusReportFrequency` to 5 min
//!   (the same `defaults.go`). `Kubelet.Run` calls `syncNodeStatus` by `wait.JitterUntil(…,
//!   kl.nodeStatusUpdateFrequency, 0.04, true, …)`; `tryUpdateNodeStatus`
//!   (`pkg/kubelet/kubelet_node_status.go`) reads the node from its informer, computes the
//!   status and patches it only if it changed (`nodeStatusHasChanged`, heartbeat times
//!   ignored) or if `isUpdateStatusPeriodExpired`: `nodeStatusReportFrequency +
//!   delayAfterNodeStatusChange` since the last patch. That delay is drawn in [-2.5 min,
//!   2.5 min) (`calculateDelay`) after a patch for a change or the first one, and is zero after
//!   a patch made only because the period expired, so that nodes started together spread their
//!   reports.

use std::hash::{BuildHasher as _, Hasher as _};
use std::time::Duration;

use tokio::time::Instant;

/// `nodeLeaseDurationSeconds`: how long a renewal holds the node's Lease.
pub(crate) const LEASE_DURATION_SECONDS: i32 = 40;
/// How often the Lease is renewed: a quarter of its duration.
pub(crate) const LEASE_RENEW: Duration = Duration::from_secs(LEASE_DURATION_SECONDS as u64 / 4);
/// `nodeStatusUpdateFrequency`: how often the status is computed (and patched if it changed).
pub(crate) const STATUS_UPDATE: Duration = Duration::from_secs(10);
/// `nodeStatusReportFrequency`: how often an unchanged status is patched all the same.
pub(crate) const STATUS_REPORT: Duration = Duration::from_secs(5 * 60);
/// `wait.JitterUntil`'s factor in both loops: a period is stretched by up to 4%.
const JITTER_FACTOR: f64 = 0.04;

/// Where a schedule's random draws come from.
#[derive(Clone, Debug)]
pub(crate) enum Jitter {
    /// Every draw is 0: the periods exactly, for tests.
    #[cfg(test)]
    None,
    /// SplitMix64 from a seed.
    Random(u64),
}

impl Jitter {
    /// Draws seeded afresh for `node` (the process's random hasher state, the node's name).
    pub(crate) fn random(node: &str) -> Jitter {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(node.as_bytes());
        Jitter::Random(h.finish())
    }

    /// A draw in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        match self {
            #[cfg(test)]
            Jitter::None => 0.0,
            Jitter::Random(state) => {
                *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = *state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                // The top 53 bits, as a double in [0, 1).
                (z >> 11) as f64 / (1u64 << 53) as f64
            }
        }
    }

    /// `period` as `wait.Jitter(period, 0.04)` stretches it: `period * (1 + 0.04 * u)`.
    pub(crate) fn period(&mut self, period: Duration) -> Duration {
        period.mul_f64(1.0 + JITTER_FACTOR * self.unit())
    }
}

/// When the node worker computes the node's status, and when it patches an unchanged one
/// again.
#[derive(Clone, Debug)]
pub(crate) struct StatusSchedule {
    /// The next computation.
    next_sync: Instant,
    /// The last patch; `None` before the first.
    last_report: Option<Instant>,
    /// How long after the last patch an unchanged status is patched again.
    report_after: Duration,
}

impl StatusSchedule {
    /// A kubelet started at `now`: its first sync is at once.
    pub(crate) fn new(now: Instant) -> Self {
        StatusSchedule {
            next_sync: now,
            last_report: None,
            report_after: STATUS_REPORT,
        }
    }

    /// When the next sync is due.
    pub(crate) fn next_sync(&self) -> Instant {
        self.next_sync
    }

    /// Whether a sync is due at `now`.
    pub(crate) fn sync_due(&self, now: Instant) -> bool {
        now >= self.next_sync
    }

    /// A sync ended at `now`: the next is a jittered [`STATUS_UPDATE`] later (`sliding`).
    pub(crate) fn synced(&mut self, now: Instant, jitter: &mut Jitter) {
        self.next_sync = now + jitter.period(STATUS_UPDATE);
    }

    /// Whether a sync at `now` patches the status: it `changed` since the node as last read,
    /// or none was patched yet, or the report period since the last patch has passed.
    pub(crate) fn should_report(&self, now: Instant, changed: bool) -> bool {
        changed
            || self
                .last_report
                .is_none_or(|last| now.saturating_duration_since(last) >= self.report_after)
    }

    /// The status was patched at `now`, for a change (`changed`) or not.
    pub(crate) fn reported(&mut self, now: Instant, changed: bool, jitter: &mut Jitter) {
        self.report_after = if changed || self.last_report.is_none() {
            // calculateDelay: nodeStatusReportFrequency * (-0.5 + rand), added to it.
            STATUS_REPORT.mul_f64(0.5 + jitter.unit())
        } else {
            STATUS_REPORT
        };
        self.last_report = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_kubelets_intervals() {
        assert_eq!(LEASE_RENEW, secs(10));
        assert_eq!(STATUS_UPDATE, secs(10));
        assert_eq!(STATUS_REPORT, secs(300));
    }

    #[test]
    fn jitter_stretches_by_at_most_four_percent_and_differs_by_node() {
        let mut a = Jitter::random("n1");
        let periods: Vec<Duration> = (0..1000).map(|_| a.period(secs(10))).collect();
        assert!(
            periods
                .iter()
                .all(|p| *p >= secs(10) && *p < secs(10) + Duration::from_millis(400))
        );
        // Spread over the whole range, not stuck at one end.
        assert!(
            periods
                .iter()
                .any(|p| *p < secs(10) + Duration::from_millis(100))
        );
        assert!(
            periods
                .iter()
                .any(|p| *p > secs(10) + Duration::from_millis(300))
        );
        let mut b = Jitter::random("n2");
        let other: Vec<Duration> = (0..1000).map(|_| b.period(secs(10))).collect();
        assert_ne!(periods, other);
        assert_eq!(Jitter::None.period(secs(10)), secs(10));
    }

    /// What a schedule does over `until` of virtual time: `(second, patched)` at each sync,
    /// the status changing (as the node worker sees it against the node it read) at the
    /// seconds in `changes`.
    fn run(mut jitter: Jitter, changes: &[u64], until: u64) -> Vec<(u64, bool)> {
        let start = Instant::now();
        let mut s = StatusSchedule::new(start);
        let mut out = Vec::new();
        let mut now = start;
        while now <= start + secs(until) {
            assert!(s.sync_due(now));
            let t = now.duration_since(start).as_secs();
            let changed = changes.contains(&t);
            let patch = s.should_report(now, changed);
            if patch {
                s.reported(now, changed, &mut jitter);
            }
            out.push((t, patch));
            s.synced(now, &mut jitter);
            assert!(!s.sync_due(now));
            now = s.next_sync();
        }
        out
    }

    fn patched_at(syncs: &[(u64, bool)]) -> Vec<u64> {
        syncs.iter().filter(|(_, p)| *p).map(|(t, _)| *t).collect()
    }

    #[test]
    fn an_unchanged_status_is_patched_every_report_period_after_the_first() {
        let syncs = run(Jitter::None, &[], 1000);
        // A sync every 10 s.
        assert_eq!(syncs.len(), 101);
        assert!(
            syncs
                .iter()
                .enumerate()
                .all(|(i, (t, _))| *t == 10 * i as u64)
        );
        // The first sync patches (none yet). With no jitter the delay after it is -2.5 min:
        // the next patch 150 s later; then, the period having expired, every 300 s.
        assert_eq!(patched_at(&syncs), [0, 150, 450, 750]);
    }

    #[test]
    fn a_change_is_patched_at_the_next_sync_and_delays_the_next_report() {
        // Changes seen at the syncs of 40 s and 500 s.
        let syncs = run(Jitter::None, &[40, 500], 1200);
        assert_eq!(patched_at(&syncs), [0, 40, 190, 490, 500, 650, 950]);
    }

    #[test]
    fn the_delay_after_a_change_is_drawn_between_half_and_one_and_a_half_periods() {
        for seed in 0..200 {
            let mut jitter = Jitter::Random(seed);
            let start = Instant::now();
            let mut s = StatusSchedule::new(start);
            s.reported(start, true, &mut jitter);
            let first = (0..=450)
                .map(|t| start + secs(t))
                .find(|at| s.should_report(*at, false))
                .expect("reported again within 7.5 min");
            let after = first.duration_since(start);
            assert!(after >= secs(150) && after <= secs(450), "{after:?}");
            // Then, reported because the period expired: exactly every 5 minutes.
            s.reported(first, false, &mut jitter);
            assert!(!s.should_report(first + secs(299), false));
            assert!(s.should_report(first + secs(300), false));
        }
    }
}
