//! The simulation's virtual clock as a person sets it: where it starts (now, [`default_start`],
//! or `--simulate-start`) and how fast a run is shown ([`Speed`], `--speed`).

use std::num::NonZeroU32;

/// Virtual seconds shown per real second when a person watches and `--speed` is not given.
pub(crate) const WATCHED_SPEED: u32 = 100;

/// Where the simulated cluster's virtual clock begins: Thu 2026-01-01 00:00:00 UTC. It is
/// run forward from there, idle, to where a run starts ([`default_start`], or
/// `--simulate-start`); it cannot start before.
pub(crate) fn epoch() -> jiff::Timestamp {
    jiff::Timestamp::from_second(nodejob_fake::EPOCH_SECONDS).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

/// Where a simulated run's virtual clock starts unless `--simulate-start` says: `now` (the
/// machine's time, to the second), so that what is valid today (a CA made today) is valid
/// in the simulation; [`epoch`] for a machine whose clock is before it.
pub(crate) fn default_start(now: jiff::Timestamp) -> jiff::Timestamp {
    let second = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
    second.max(epoch())
}

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
    fn the_clock_begins_on_thursday_2026_01_01_utc() {
        assert_eq!(epoch().to_string(), "2026-01-01T00:00:00Z");
        assert_eq!(epoch().strftime("%a").to_string(), "Thu");
    }

    #[test]
    fn a_run_starts_at_the_machines_time_to_the_second_never_before_the_epoch() {
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let rows = [
            ("2026-12-06T04:05:46.123456Z", "2026-12-06T04:05:46Z"),
            ("2031-02-03T00:00:00Z", "2031-02-03T00:00:00Z"),
            ("2025-06-01T12:00:00Z", "2026-01-01T00:00:00Z"),
        ];
        for (now, start) in rows {
            assert_eq!(default_start(at(now)).to_string(), start, "{now}");
        }
    }
}
