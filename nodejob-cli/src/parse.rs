//! The grammar of the values a person types, shared by the flags (clap's value parsers) and the
//! MCP tools' arguments: durations, `max_unavailable`, maintenance windows.

use std::time::Duration;

use std::num::NonZeroU32;

use jiff::Timestamp;
use jiff::civil::{Time, Weekday};
use upgrade_driver::{MaxUnavailable, Window};

use crate::virtual_clock::{self as sim, Speed};

/// `--speed`: `max` (no pacing), or how many times real time, `100` or `100x` (1 to 1000000).
pub(crate) fn speed(s: &str) -> Result<Speed, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    let times = s.strip_suffix(['x', 'X']).unwrap_or(s);
    match times.parse::<u32>().ok().and_then(NonZeroU32::new) {
        Some(t) if t.get() <= 1_000_000 => Ok(Speed::Times(t)),
        _ => Err(format!(
            "{s:?} is not a speed: `max` (no pacing) or how many times real time, 1 to 1000000 \
             (`100` or `100x`)"
        )),
    }
}

/// `--simulate-start`: an RFC 3339 instant (`2026-01-02T00:00:00Z`) from the simulation's
/// epoch (Thu 2026-01-01 00:00 UTC) to a year after it.
pub(crate) fn simulate_start(s: &str) -> Result<Timestamp, String> {
    let t: Timestamp = s
        .trim()
        .parse()
        .map_err(|e| format!("{s:?} is not an instant such as 2026-01-02T00:00:00Z: {e}"))?;
    let latest = sim::epoch()
        .checked_add(jiff::SignedDuration::from_hours(
            24 * sim::LATEST_START_DAYS,
        ))
        .unwrap_or(sim::epoch());
    if t < sim::epoch() || t > latest {
        return Err(format!(
            "{s:?}: the simulated clock starts from {} to {latest}",
            sim::epoch()
        ));
    }
    Ok(t)
}

/// A count of nodes (at least 1) or a percentage of them (1% to 100%).
pub(crate) fn max_unavailable(s: &str) -> Result<MaxUnavailable, String> {
    let m: MaxUnavailable = s.parse()?;
    match m {
        MaxUnavailable::Count(0) => Err("must be at least 1".into()),
        MaxUnavailable::Percent(p) if p == 0 || p > 100 => {
            Err(format!("{p}% must be between 1% and 100%"))
        }
        m => Ok(m),
    }
}

/// `90s`, `10m`, `1h30m`, `2h`; a bare number is seconds. Zero is refused.
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration such as 90s, 10m or 1h30m");
    let mut total = 0u64;
    let mut number = String::new();
    for c in s.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().map_err(|_| bad())?;
        number.clear();
        total += n * match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
    }
    if !number.is_empty() {
        total += number.parse::<u64>().map_err(|_| bad())?;
    }
    if total == 0 {
        return Err(format!("{s:?}: must be more than zero"));
    }
    Ok(Duration::from_secs(total))
}

/// `DAYS START-END [TZ]`: `sat,sun 01:00-05:00 Europe/Berlin`.
pub(crate) fn window(s: &str) -> Result<Window, String> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let (days, span, tz) = match parts.as_slice() {
        [days, span] => (*days, *span, "UTC"),
        [days, span, tz] => (*days, *span, *tz),
        _ => {
            return Err(format!(
                "{s:?} is not `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 UTC`"
            ));
        }
    };
    let days = days
        .split(',')
        .map(|d| match d.to_ascii_lowercase().get(..3) {
            Some("mon") => Ok(Weekday::Monday),
            Some("tue") => Ok(Weekday::Tuesday),
            Some("wed") => Ok(Weekday::Wednesday),
            Some("thu") => Ok(Weekday::Thursday),
            Some("fri") => Ok(Weekday::Friday),
            Some("sat") => Ok(Weekday::Saturday),
            Some("sun") => Ok(Weekday::Sunday),
            _ => Err(format!("{d:?} is not a day (mon..sun)")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (start, end) = span
        .split_once('-')
        .ok_or_else(|| format!("{span:?} is not START-END, e.g. 01:00-05:00"))?;
    let time = |t: &str| t.parse::<Time>().map_err(|e| format!("{t:?}: {e}"));
    Ok(Window {
        days,
        start: time(start)?,
        end: time(end)?,
        time_zone: tz.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_is_max_or_a_positive_multiple_of_real_time() {
        let times = |t| Ok(Speed::Times(NonZeroU32::new(t).unwrap()));
        assert_eq!(speed("max"), Ok(Speed::Max));
        assert_eq!(speed("MAX"), Ok(Speed::Max));
        assert_eq!(speed("100"), times(100));
        assert_eq!(speed("100x"), times(100));
        assert_eq!(speed("1000000"), times(1_000_000));
        for bad in ["0", "-1", "1.5", "fast", "", "1000001"] {
            assert!(speed(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_simulated_clock_starts_from_its_epoch_to_a_year_after() {
        assert_eq!(
            simulate_start("2026-01-02T00:00:00Z").map(|t| t.to_string()),
            Ok("2026-01-02T00:00:00Z".into())
        );
        assert!(simulate_start("2026-01-01T00:00:00Z").is_ok());
        for bad in [
            "2025-12-31T23:59:59Z",
            "2027-01-03T00:00:00Z",
            "tomorrow",
            "2026-01-02",
        ] {
            assert!(simulate_start(bad).is_err(), "{bad:?}");
        }
    }
}
