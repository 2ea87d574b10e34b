//! A duration as every message of nodejob says it: [`said`].

use std::time::Duration;

/// The longest a plan's durations may be (a Job's deadline, a drain's timeout, a reboot's, a
/// soak): a day. Longer is a typo (`2562047h`), not a plan.
pub const A_DAY: Duration = Duration::from_secs(24 * 3600);

/// `d` as a plan takes a timeout: more than zero, at most [`A_DAY`]; else why not, with `d`
/// [`said`].
pub fn within_a_day(d: Duration) -> Result<(), String> {
    if d.is_zero() || d > A_DAY {
        return Err(format!(
            "{} must be more than zero and at most 24h",
            said(d)
        ));
    }
    Ok(())
}

/// `d` as people read it and as the flags take it (Go's `time.Duration` style, no zero
/// units): `0s`, `0.5s`, `21.2s`, `35s`, `1m17s`, `5m`, `1h30m`, `12h`, `25h`; one style for
/// every message, the limits a plan refuses, a step's time and a wait alike.
pub fn said(d: Duration) -> String {
    // To the tenth of a second under a minute, to the second above.
    let tenths = (d.as_millis() + 50) / 100;
    if tenths < 600 {
        return match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        };
    }
    let secs = u64::try_from((d.as_millis() + 500) / 1000).unwrap_or(u64::MAX);
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_said_as_the_flags_take_them() {
        let ms = Duration::from_millis;
        for (d, want) in [
            (ms(0), "0s"),
            (ms(500), "0.5s"),
            (ms(21_200), "21.2s"),
            (ms(35_000), "35s"),
            (ms(59_950), "1m"),
            (ms(21_249), "21.2s"),
            (ms(77_000), "1m17s"),
            (ms(300_000), "5m"),
            (ms(3_661_000), "1h1m1s"),
            (ms(5_400_000), "1h30m"),
            (ms(43_200_000), "12h"),
            (ms(90_000_000), "25h"),
        ] {
            assert_eq!(said(d), want, "{d:?}");
        }
    }
}
