//! The grammar of the values a person types, shared by the flags (clap's value parsers) and the
//! MCP tools' arguments: durations, `max_unavailable`, maintenance windows.

use std::time::Duration;

use jiff::civil::{Time, Weekday};
use upgrade_driver::{MaxUnavailable, Window};

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
