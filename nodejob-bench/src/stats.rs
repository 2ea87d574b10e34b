//! Order statistics of a sample of durations.

use std::time::Duration;

/// p50, p99 and the maximum of a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// How many values.
    pub count: usize,
    /// The median (nearest rank).
    pub p50: Duration,
    /// The 99th percentile (nearest rank).
    pub p99: Duration,
    /// The largest value.
    pub max: Duration,
}

impl Summary {
    /// The summary of `values`; all zero for an empty sample.
    pub fn of(values: &[Duration]) -> Summary {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        Summary {
            count: sorted.len(),
            p50: percentile(&sorted, 50),
            p99: percentile(&sorted, 99),
            max: sorted.last().copied().unwrap_or_default(),
        }
    }
}

/// The `p`th percentile of `sorted` by nearest rank: the smallest value with at least `p`% of
/// the sample at or below it.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let ms: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = Summary::of(&ms);
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        assert_eq!(Summary::of(&[]).max, Duration::ZERO);
        let one = Summary::of(&[Duration::from_millis(7)]);
        assert_eq!(
            (one.p50, one.p99),
            (Duration::from_millis(7), Duration::from_millis(7))
        );
    }
}
