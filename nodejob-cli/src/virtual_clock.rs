//! The simulation's virtual clock as a person sets it: where it starts ([`epoch`], or a later
//! `--simulate-start`) and how fast a run is shown ([`Speed`], `--speed`).

use std::num::NonZeroU32;

/// Virtual seconds shown per real second when a person watches and `--speed` is not given.
pub(crate) const WATCHED_SPEED: u32 = 100;

/// When the simulated cluster's virtual clock starts, unless `--simulate-start` says later:
/// Thu 2026-01-01 00:00:00 UTC, fixed so that every simulated run prints the same lines.
pub(crate) fn epoch() -> jiff::Timestamp {
    jiff::Timestamp::from_second(nodejob_fake::EPOCH_SECONDS).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// The latest `--simulate-start`: a year after [`epoch`] (the virtual clock gets there by
/// running the idle cluster forward, which takes longer the further it goes).
pub(crate) const LATEST_START_DAYS: i64 = 366;

/// How fast a simulated run is shown (`--speed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Speed {
    /// This many virtual seconds per real second.
    Times(NonZeroU32),
    /// As fast as it runs: no pacing.
    Max,
}

impl Speed {
    /// The speed of a run: the one asked for, else [`WATCHED_SPEED`] when a person watches
    /// (text on a terminal), else [`Speed::Max`] (a file, a pipe, a program reading JSON).
    pub(crate) fn resolve(asked: Option<Speed>, watched: bool) -> Speed {
        match (asked, watched) {
            (Some(speed), _) => speed,
            (None, true) => Speed::Times(NonZeroU32::new(WATCHED_SPEED).unwrap_or(NonZeroU32::MIN)),
            (None, false) => Speed::Max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_paced_only_when_a_person_watches_or_speed_asks() {
        let times = |t| Speed::Times(NonZeroU32::new(t).unwrap());
        // (asked, watched) -> speed
        let rows = [
            (None, true, times(WATCHED_SPEED)),
            (None, false, Speed::Max),
            (Some(Speed::Max), true, Speed::Max),
            (Some(times(7)), false, times(7)),
            (Some(times(7)), true, times(7)),
        ];
        for (asked, watched, speed) in rows {
            assert_eq!(Speed::resolve(asked, watched), speed, "{asked:?} {watched}");
        }
    }

    #[test]
    fn the_clock_starts_on_thursday_2026_01_01_utc() {
        assert_eq!(epoch().to_string(), "2026-01-01T00:00:00Z");
        assert_eq!(epoch().strftime("%a").to_string(), "Thu");
    }
}
