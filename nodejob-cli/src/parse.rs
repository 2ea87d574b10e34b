//! The grammar of the values a person types, shared by the flags (clap's value parsers) and the
//! MCP tools' arguments: durations, `max_unavailable`, maintenance windows, where a node's
//! version is read.

use std::time::Duration;

use std::num::NonZeroU32;

use jiff::Timestamp;
use jiff::civil::{Time, Weekday};
use upgrade_driver::{MaxUnavailable, VersionSource, Window};

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
/// epoch (Thu 2026-01-01 00:00 UTC) on: its clock cannot start before it.
pub(crate) fn simulate_start(s: &str) -> Result<Timestamp, String> {
    let t: Timestamp = s
        .trim()
        .parse()
        .map_err(|e| format!("{s:?} is not an instant such as 2026-01-02T00:00:00Z: {e}"))?;
    if t < sim::epoch() {
        return Err(format!(
            "{s:?}: the simulated clock starts from {} on",
            sim::epoch()
        ));
    }
    Ok(t)
}

/// `--qps`: requests a second, a number above 0 (`100`, `0.5`).
pub(crate) fn qps(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(q) if q.is_finite() && q > 0.0 => Ok(q),
        _ => Err(format!(
            "{s:?} is not a rate: requests a second, a number above 0 (100, 0.5)"
        )),
    }
}

/// `--burst`: requests at once, a whole number of at least 1.
pub(crate) fn burst(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(b) if b >= 1 => Ok(b),
        _ => Err(format!(
            "{s:?} is not a burst: requests at once, a whole number of at least 1"
        )),
    }
}

/// Where a node reports its version: `kubelet` (`status.nodeInfo.kubeletVersion`),
/// `os-image` (`status.nodeInfo.osImage`) or `label=KEY` (the node's label KEY).
pub(crate) fn version_source(s: &str) -> Result<VersionSource, String> {
    match s.trim() {
        "kubelet" => Ok(VersionSource::KubeletVersion),
        "os-image" => Ok(VersionSource::OsImage),
        other => match other.strip_prefix("label=") {
            Some(key) if !key.is_empty() => Ok(VersionSource::Label(key.to_string())),
            _ => Err(format!(
                "{s:?} is none of kubelet, os-image, label=KEY (where each node reports its \
                 version)"
            )),
        },
    }
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

/// A duration as Go's `time.ParseDuration` (and so kubectl) reads it: numbers, each with an
/// optional decimal fraction and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), summed:
/// `90s`, `1.5h`, `500ms`, `1h30m`, `2h45m30s`. A number without a unit (`90`: seconds or
/// minutes?, `1h30`: 30 what?) is refused, as Go's "missing unit" refuses it, and so is zero.
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    let bad =
        |why: &str| format!("{s:?} is not a duration such as 90s, 500ms, 1.5h or 1h30m: {why}");
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(&format!(
            "missing unit ({text}s for seconds, {text}m for minutes)"
        )));
    }
    let mut nanos: u128 = 0;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad("empty"));
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() {
            return Err(bad("a unit without a number"));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let per: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3600 * 1_000_000_000,
            "" => return Err(bad(&format!("{number} has no unit (h, m, s, ms)"))),
            other => {
                return Err(bad(&format!(
                    "{other:?} is not a unit (h, m, s, ms, us, ns)"
                )));
            }
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(bad(&format!("{number:?} is not a number")));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad("too large"))?
        };
        let mut part = whole.checked_mul(per).ok_or_else(|| bad("too large"))?;
        let mut scale = per;
        for digit in fraction.bytes() {
            scale /= 10;
            part += u128::from(digit - b'0') * scale;
        }
        nanos = nanos.checked_add(part).ok_or_else(|| bad("too large"))?;
        rest = next;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad("too large"))?;
    let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    positive(s, Duration::new(secs, sub))
}

/// `d`, refused when zero.
fn positive(s: &str, d: Duration) -> Result<Duration, String> {
    if d.is_zero() {
        return Err(format!("{s:?}: must be more than zero"));
    }
    Ok(d)
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
    fn durations_read_as_go_reads_them_and_the_ambiguous_is_refused() {
        let ms = Duration::from_millis;
        let table = [
            ("90s", ms(90_000)),
            ("10m", ms(600_000)),
            ("1h30m", ms(5_400_000)),
            ("2h45m30s", ms(9_930_000)),
            ("1.5h", ms(5_400_000)),
            ("500ms", ms(500)),
            (".5s", ms(500)),
            ("1m0.25s", ms(60_250)),
            ("1500us", Duration::from_micros(1500)),
            ("7ns", Duration::from_nanos(7)),
        ];
        for (text, want) in table {
            assert_eq!(duration(text), Ok(want), "{text}");
        }
        for bad in [
            "1h30", "", "h", "1x", "1.2.3s", "0", "90", "0s", "0h0m", "-1s", "1 h", "1d", "s5",
        ] {
            assert!(
                duration(bad).is_err(),
                "{bad:?} accepted as {:?}",
                duration(bad)
            );
        }
        let why = duration("1h30").unwrap_err();
        assert!(why.contains("30 has no unit"), "{why}");
        let why = duration("90").unwrap_err();
        assert!(
            why.contains("missing unit (90s for seconds, 90m for minutes)"),
            "{why}"
        );
    }

    #[test]
    fn a_version_is_read_from_the_kubelet_the_os_image_or_a_label() {
        assert_eq!(version_source("kubelet"), Ok(VersionSource::KubeletVersion));
        assert_eq!(version_source("os-image"), Ok(VersionSource::OsImage));
        assert_eq!(
            version_source("label=example.com/version"),
            Ok(VersionSource::Label("example.com/version".into()))
        );
        for bad in ["", "label=", "osImage", "label", "kubeletVersion"] {
            assert!(version_source(bad).is_err(), "{bad:?}");
        }
    }

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
    fn a_rate_limit_is_positive() {
        assert_eq!(qps("100"), Ok(100.0));
        assert_eq!(qps("0.5"), Ok(0.5));
        assert_eq!(burst("200"), Ok(200));
        assert_eq!(burst("1"), Ok(1));
        for bad in ["0", "-1", "-0.5", "0.0", "NaN", "inf", "fast", ""] {
            assert!(qps(bad).is_err(), "{bad:?}");
        }
        for bad in ["0", "-1", "1.5", "many", ""] {
            assert!(burst(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_simulated_clock_starts_from_its_epoch_on_with_no_upper_bound() {
        assert_eq!(
            simulate_start("2026-01-02T00:00:00Z").map(|t| t.to_string()),
            Ok("2026-01-02T00:00:00Z".into())
        );
        assert!(simulate_start("2026-01-01T00:00:00Z").is_ok());
        // No cap: a CA made in any later year can be simulated.
        assert!(simulate_start("2027-01-03T00:00:00Z").is_ok());
        assert!(simulate_start("2040-06-01T00:00:00Z").is_ok());
        for bad in ["2025-12-31T23:59:59Z", "tomorrow", "2026-01-02"] {
            assert!(simulate_start(bad).is_err(), "{bad:?}");
        }
    }
}
