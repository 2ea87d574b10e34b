//! The grammar of the values a person types, shared by the flags (clap's value parsers) and the
//! MCP tools' arguments: durations, `max_unavailable`, maintenance windows, where a node's
//! version is read. A value refused is a [`ParseError`], which quotes it and says its grammar;
//! clap prints it after `invalid value '…' for '--flag'`, the tools after the argument's name.

use std::time::Duration;

use std::num::NonZeroU32;

use jiff::Timestamp;
use jiff::civil::{Time, Weekday};
use upgrade_driver::{MaxUnavailable, VersionSource, Window};

use crate::virtual_clock::{self as sim, Speed};

/// Why a typed value does not read. Each message quotes the value and says what would read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParseError {
    /// `--speed`: neither `max` nor a multiple of real time in range.
    #[error(
        "{text:?} is not a speed: `max` (no pacing) or how many times real time, 1 to 1000000 \
         (`100` or `100x`)"
    )]
    Speed {
        /// The value, trimmed.
        text: String,
    },
    /// `--simulate-start`: not an RFC 3339 instant.
    #[error("{text:?} is not an instant such as 2026-01-02T00:00:00Z: {cause}")]
    Instant {
        /// The value.
        text: String,
        /// jiff's reason.
        cause: jiff::Error,
    },
    /// `--simulate-start`: before the simulated clock's epoch.
    #[error("{text:?}: the simulated clock starts from {epoch} on")]
    BeforeEpoch {
        /// The value.
        text: String,
        /// The simulation's epoch.
        epoch: Timestamp,
    },
    /// `--qps`: not a number above 0.
    #[error("{text:?} is not a rate: requests a second, a number above 0 (100, 0.5)")]
    Rate {
        /// The value.
        text: String,
    },
    /// `--burst`: not a whole number of at least 1.
    #[error("{text:?} is not a burst: requests at once, a whole number of at least 1")]
    Burst {
        /// The value.
        text: String,
    },
    /// Where a node reports its version: none of the three forms.
    #[error(
        "{text:?} is none of kubelet, os-image, label=KEY (where each node reports its version)"
    )]
    VersionSource {
        /// The value.
        text: String,
    },
    /// `max_unavailable`: neither a count nor a percentage.
    #[error(transparent)]
    NotCountOrPercent(#[from] upgrade_driver::NotCountOrPercent),
    /// `max_unavailable`: a count of 0, which starts no node.
    #[error("must be at least 1")]
    NoNode,
    /// `max_unavailable`: a percentage outside 1% to 100%.
    #[error("{percent}% must be between 1% and 100%")]
    Percent {
        /// The percentage given.
        percent: u32,
    },
    /// A duration that does not read as Go reads one.
    #[error("{text:?} is not a duration such as 90s, 500ms, 1.5h or 1h30m: {why}")]
    Duration {
        /// The value.
        text: String,
        /// What is wrong with it.
        why: Malformed,
    },
    /// A duration of zero, where it bounds a wait.
    #[error("{text:?}: must be more than zero")]
    Zero {
        /// The value.
        text: String,
    },
    /// A window that is not `DAYS START-END [TZ]`.
    #[error("{text:?} is not `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 UTC`")]
    Window {
        /// The value.
        text: String,
    },
    /// A window's day that is no weekday.
    #[error("{day:?} is not a day (mon..sun)")]
    Day {
        /// The day as typed.
        day: String,
    },
    /// A window's span that is not `START-END`.
    #[error("{span:?} is not START-END, e.g. 01:00-05:00")]
    Span {
        /// The span as typed.
        span: String,
    },
    /// A window's start or end that is no time of day.
    #[error("{text:?}: {cause}")]
    Time {
        /// The time as typed.
        text: String,
        /// jiff's reason.
        cause: jiff::Error,
    },
}

/// What is wrong with a duration's text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Malformed {
    /// Digits alone: seconds or minutes?
    #[error("missing unit ({number}s for seconds, {number}m for minutes)")]
    MissingUnit {
        /// The digits.
        number: String,
    },
    /// Nothing at all.
    #[error("empty")]
    Empty,
    /// A unit first (`h`, `s5`).
    #[error("a unit without a number")]
    UnitWithoutNumber,
    /// A number with no unit after it (`1h30`: 30 what?).
    #[error("{number} has no unit (h, m, s, ms)")]
    NoUnit {
        /// The number.
        number: String,
    },
    /// A unit Go does not know (`d`).
    #[error("{unit:?} is not a unit (h, m, s, ms, us, ns)")]
    NotAUnit {
        /// The unit as typed.
        unit: String,
    },
    /// Dots in the wrong places (`1.2.3s`, `.s`).
    #[error("{number:?} is not a number")]
    NotANumber {
        /// The number as typed.
        number: String,
    },
    /// More than a `Duration` holds.
    #[error("too large")]
    TooLarge,
}

/// `--speed`: `max` (no pacing), or how many times real time, `100` or `100x` (1 to 1000000).
pub(crate) fn speed(s: &str) -> Result<Speed, ParseError> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    let times = s.strip_suffix(['x', 'X']).unwrap_or(s);
    match times.parse::<u32>().ok().and_then(NonZeroU32::new) {
        Some(t) if t.get() <= 1_000_000 => Ok(Speed::Times(t)),
        _ => Err(ParseError::Speed { text: s.into() }),
    }
}

/// `--simulate-start`: an RFC 3339 instant (`2026-01-02T00:00:00Z`) from the simulation's
/// epoch (Thu 2026-01-01 00:00 UTC) on: its clock cannot start before it.
pub(crate) fn simulate_start(s: &str) -> Result<Timestamp, ParseError> {
    let t: Timestamp = s.trim().parse().map_err(|cause| ParseError::Instant {
        text: s.into(),
        cause,
    })?;
    if t < sim::epoch() {
        return Err(ParseError::BeforeEpoch {
            text: s.into(),
            epoch: sim::epoch(),
        });
    }
    Ok(t)
}

/// `--qps`: requests a second, a number above 0 (`100`, `0.5`).
pub(crate) fn qps(s: &str) -> Result<f64, ParseError> {
    match s.trim().parse::<f64>() {
        Ok(q) if q.is_finite() && q > 0.0 => Ok(q),
        _ => Err(ParseError::Rate { text: s.into() }),
    }
}

/// `--burst`: requests at once, a whole number of at least 1.
pub(crate) fn burst(s: &str) -> Result<u32, ParseError> {
    match s.trim().parse::<u32>() {
        Ok(b) if b >= 1 => Ok(b),
        _ => Err(ParseError::Burst { text: s.into() }),
    }
}

/// Where a node reports its version: `kubelet` (`status.nodeInfo.kubeletVersion`),
/// `os-image` (`status.nodeInfo.osImage`) or `label=KEY` (the node's label KEY).
pub(crate) fn version_source(s: &str) -> Result<VersionSource, ParseError> {
    match s.trim() {
        "kubelet" => Ok(VersionSource::KubeletVersion),
        "os-image" => Ok(VersionSource::OsImage),
        other => match other.strip_prefix("label=") {
            Some(key) if !key.is_empty() => Ok(VersionSource::Label(key.to_string())),
            _ => Err(ParseError::VersionSource { text: s.into() }),
        },
    }
}

/// A count of nodes (at least 1) or a percentage of them (1% to 100%).
pub(crate) fn max_unavailable(s: &str) -> Result<MaxUnavailable, ParseError> {
    let m: MaxUnavailable = s.parse().map_err(ParseError::NotCountOrPercent)?;
    match m {
        MaxUnavailable::Count(0) => Err(ParseError::NoNode),
        MaxUnavailable::Percent(p) if p == 0 || p > 100 => Err(ParseError::Percent { percent: p }),
        m => Ok(m),
    }
}

/// A duration as Go's `time.ParseDuration` (and so kubectl) reads it: numbers, each with an
/// optional decimal fraction and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), summed:
/// `90s`, `1.5h`, `500ms`, `1h30m`, `2h45m30s`. A number without a unit (`90`: seconds or
/// minutes?, `1h30`: 30 what?) is refused, as Go's "missing unit" refuses it, and so is zero.
pub(crate) fn duration(s: &str) -> Result<Duration, ParseError> {
    let text = s.trim();
    let bad = |why: Malformed| ParseError::Duration {
        text: s.into(),
        why,
    };
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(Malformed::MissingUnit {
            number: text.into(),
        }));
    }
    let mut nanos: u128 = 0;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad(Malformed::Empty));
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() {
            return Err(bad(Malformed::UnitWithoutNumber));
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
            "" => {
                return Err(bad(Malformed::NoUnit {
                    number: number.into(),
                }));
            }
            other => {
                return Err(bad(Malformed::NotAUnit { unit: other.into() }));
            }
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(bad(Malformed::NotANumber {
                number: number.into(),
            }));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad(Malformed::TooLarge))?
        };
        let mut part = (whole.checked_mul(per)).ok_or_else(|| bad(Malformed::TooLarge))?;
        let mut scale = per;
        for digit in fraction.bytes() {
            scale /= 10;
            part += u128::from(digit - b'0') * scale;
        }
        nanos = (nanos.checked_add(part)).ok_or_else(|| bad(Malformed::TooLarge))?;
        rest = next;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad(Malformed::TooLarge))?;
    let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    positive(s, Duration::new(secs, sub))
}

/// `d`, refused when zero.
fn positive(s: &str, d: Duration) -> Result<Duration, ParseError> {
    if d.is_zero() {
        return Err(ParseError::Zero { text: s.into() });
    }
    Ok(d)
}

/// `DAYS START-END [TZ]`: `sat,sun 01:00-05:00 Europe/Berlin`.
pub(crate) fn window(s: &str) -> Result<Window, ParseError> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let (days, span, tz) = match parts.as_slice() {
        [days, span] => (*days, *span, "UTC"),
        [days, span, tz] => (*days, *span, *tz),
        _ => {
            return Err(ParseError::Window { text: s.into() });
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
            _ => Err(ParseError::Day { day: d.into() }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (start, end) = span
        .split_once('-')
        .ok_or_else(|| ParseError::Span { span: span.into() })?;
    let time = |t: &str| {
        t.parse::<Time>().map_err(|cause| ParseError::Time {
            text: t.into(),
            cause,
        })
    };
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
            assert_eq!(duration(text).ok(), Some(want), "{text}");
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
        let why = |text| duration(text).err().map(|e| e.to_string());
        assert_eq!(
            why("1h30").as_deref(),
            Some(
                "\"1h30\" is not a duration such as 90s, 500ms, 1.5h or 1h30m: 30 has no unit (h, m, s, ms)"
            )
        );
        let said = [
            ("90", "missing unit (90s for seconds, 90m for minutes)"),
            ("", "empty"),
            ("s5", "a unit without a number"),
            ("1d", "\"d\" is not a unit (h, m, s, ms, us, ns)"),
            ("1.2.3s", "\"1.2.3\" is not a number"),
            ("99999999999999999999999h", "too large"),
        ];
        for (text, end) in said {
            let why = why(text).unwrap_or_default();
            assert!(
                why.starts_with(&format!("{text:?} is not a duration such as")),
                "{why}"
            );
            assert!(why.ends_with(&format!(": {end}")), "{text:?}: {why}");
        }
        assert_eq!(why("0s").as_deref(), Some("\"0s\": must be more than zero"));
    }

    #[test]
    fn a_version_is_read_from_the_kubelet_the_os_image_or_a_label() {
        assert_eq!(
            version_source("kubelet").ok(),
            Some(VersionSource::KubeletVersion)
        );
        assert_eq!(
            version_source("os-image").ok(),
            Some(VersionSource::OsImage)
        );
        assert_eq!(
            version_source("label=example.com/version").ok(),
            Some(VersionSource::Label("example.com/version".into()))
        );
        for bad in ["", "label=", "osImage", "label", "kubeletVersion"] {
            assert!(version_source(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            version_source("osImage")
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some(
                "\"osImage\" is none of kubelet, os-image, label=KEY (where each node reports \
                 its version)"
            )
        );
    }

    #[test]
    fn speed_is_max_or_a_positive_multiple_of_real_time() {
        let times = |t| NonZeroU32::new(t).map(Speed::Times);
        assert_eq!(speed("max").ok(), Some(Speed::Max));
        assert_eq!(speed("MAX").ok(), Some(Speed::Max));
        assert_eq!(speed("100").ok(), times(100));
        assert_eq!(speed("100x").ok(), times(100));
        assert_eq!(speed("1000000").ok(), times(1_000_000));
        for bad in ["0", "-1", "1.5", "fast", "", "1000001"] {
            assert!(speed(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            speed(" fast ").err().map(|e| e.to_string()).as_deref(),
            Some(
                "\"fast\" is not a speed: `max` (no pacing) or how many times real time, 1 to \
                 1000000 (`100` or `100x`)"
            )
        );
    }

    #[test]
    fn a_rate_limit_is_positive() {
        assert_eq!(qps("100").ok(), Some(100.0));
        assert_eq!(qps("0.5").ok(), Some(0.5));
        assert_eq!(burst("200").ok(), Some(200));
        assert_eq!(burst("1").ok(), Some(1));
        for bad in ["0", "-1", "-0.5", "0.0", "NaN", "inf", "fast", ""] {
            assert!(qps(bad).is_err(), "{bad:?}");
        }
        for bad in ["0", "-1", "1.5", "many", ""] {
            assert!(burst(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            qps("0").err().map(|e| e.to_string()).as_deref(),
            Some("\"0\" is not a rate: requests a second, a number above 0 (100, 0.5)")
        );
        assert_eq!(
            burst("0").err().map(|e| e.to_string()).as_deref(),
            Some("\"0\" is not a burst: requests at once, a whole number of at least 1")
        );
    }

    #[test]
    fn the_simulated_clock_starts_from_its_epoch_on_with_no_upper_bound() {
        assert_eq!(
            simulate_start("2026-01-02T00:00:00Z")
                .map(|t| t.to_string())
                .ok(),
            Some("2026-01-02T00:00:00Z".into())
        );
        assert!(simulate_start("2026-01-01T00:00:00Z").is_ok());
        // No cap: a CA made in any later year can be simulated.
        assert!(simulate_start("2027-01-03T00:00:00Z").is_ok());
        assert!(simulate_start("2040-06-01T00:00:00Z").is_ok());
        for bad in ["2025-12-31T23:59:59Z", "tomorrow", "2026-01-02"] {
            assert!(simulate_start(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            simulate_start("2025-12-31T23:59:59Z")
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some(
                "\"2025-12-31T23:59:59Z\": the simulated clock starts from 2026-01-01T00:00:00Z on"
            )
        );
        let why = simulate_start("tomorrow").err().map(|e| e.to_string());
        assert!(
            why.as_deref()
                .is_some_and(|w| w
                    .starts_with("\"tomorrow\" is not an instant such as 2026-01-02T00:00:00Z: ")),
            "{why:?}"
        );
    }

    #[test]
    fn max_unavailable_is_a_count_or_a_percentage_in_range() {
        assert_eq!(max_unavailable("2").ok(), Some(MaxUnavailable::Count(2)));
        assert_eq!(
            max_unavailable("25%").ok(),
            Some(MaxUnavailable::Percent(25))
        );
        let why = |text| max_unavailable(text).err().map(|e| e.to_string());
        assert_eq!(why("0").as_deref(), Some("must be at least 1"));
        assert_eq!(
            why("150%").as_deref(),
            Some("150% must be between 1% and 100%")
        );
        assert_eq!(why("0%").as_deref(), Some("0% must be between 1% and 100%"));
        assert_eq!(
            why("some").as_deref(),
            Some("\"some\" is neither a count (2) nor a percentage (25%)")
        );
    }

    #[test]
    fn a_window_refused_names_the_part_that_does_not_read() {
        assert!(window("sat,sun 01:00-05:00 Europe/Berlin").is_ok());
        let why = |text| {
            window(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            why("someday"),
            "\"someday\" is not `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 UTC`"
        );
        assert_eq!(
            why("sat,xyz 01:00-05:00"),
            "\"xyz\" is not a day (mon..sun)"
        );
        assert_eq!(
            why("sat 01:00"),
            "\"01:00\" is not START-END, e.g. 01:00-05:00"
        );
        assert!(
            why("sat 25:00-05:00").starts_with("\"25:00\": "),
            "{}",
            why("sat 25:00-05:00")
        );
    }
}
