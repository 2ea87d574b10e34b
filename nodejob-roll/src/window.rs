//! [`Window`]: when nodes may start. A node in flight finishes whatever the clock says; the
//! window only decides whether the next batch starts.

use crate::PlanError;
use jiff::civil::{Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// A maintenance window: no node starts outside it; a node in flight finishes.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Window {
    /// The days it opens on (the day of its start).
    #[serde(serialize_with = "weekdays")]
    pub days: Vec<Weekday>,
    /// When it opens, local time.
    pub start: Time,
    /// When it closes, local time; before `start` means the next day.
    pub end: Time,
    /// The time zone of `start` and `end` (an IANA name, `UTC`, or a fixed offset `+02:00`).
    pub time_zone: String,
}

/// The days by name (`Monday`): jiff's `Weekday` does not serialise.
fn weekdays<S: serde::Serializer>(days: &[Weekday], to: S) -> Result<S::Ok, S::Error> {
    to.collect_seq(days.iter().map(|d| format!("{d:?}")))
}

impl Window {
    /// Checks the window (a plan's field `window`), naming the field and the rule; answers its
    /// time zone.
    ///
    /// # Errors
    /// No day, a start equal to its end, or a time zone that is not one.
    pub fn validate(&self) -> Result<TimeZone, PlanError> {
        if self.days.is_empty() {
            return Err(PlanError::new("window.days", "must name at least one day"));
        }
        if self.start == self.end {
            return Err(PlanError::new(
                "window.end",
                "must differ from window.start",
            ));
        }
        time_zone(&self.time_zone).ok_or_else(|| {
            PlanError::new(
                "window.time_zone",
                format!(
                    "{:?} is neither an IANA time zone, UTC, nor an offset such as +02:00",
                    self.time_zone
                ),
            )
        })
    }

    /// Whether the window is open at `now`.
    pub fn is_open(&self, tz: &TimeZone, now: Timestamp) -> bool {
        let local = now.to_zoned(tz.clone());
        let time = local.time();
        let today = local.date().weekday();
        let yesterday = local
            .date()
            .yesterday()
            .map(|d| d.weekday())
            .unwrap_or(today);
        if self.start <= self.end {
            self.days.contains(&today) && time >= self.start && time < self.end
        } else {
            // Past midnight: open from start today, or until end on the day after a start day.
            (self.days.contains(&today) && time >= self.start)
                || (self.days.contains(&yesterday) && time < self.end)
        }
    }

    /// The next time it opens at or after `now` (within a week).
    pub fn next_open(&self, tz: &TimeZone, now: Timestamp) -> Option<Timestamp> {
        let local = now.to_zoned(tz.clone());
        (0..8).find_map(|days| {
            let date = local.date().checked_add(days.days()).ok()?;
            let at = date.to_datetime(self.start).to_zoned(tz.clone()).ok()?;
            (self.days.contains(&date.weekday()) && at.timestamp() >= now).then(|| at.timestamp())
        })
    }
}

/// `UTC`, a fixed offset (`+02:00`, `-0530`) or an IANA name from the system's database.
pub fn time_zone(name: &str) -> Option<TimeZone> {
    if name.eq_ignore_ascii_case("utc") {
        return Some(TimeZone::UTC);
    }
    if name.starts_with(['+', '-']) {
        let (sign, rest) = name.split_at(1);
        let digits: String = rest.chars().filter(|c| c.is_ascii_digit()).collect();
        if digits.len() != 4 {
            return None;
        }
        let hours: i8 = digits[..2].parse().ok()?;
        let minutes: i32 = digits[2..].parse().ok()?;
        if hours > 14 || minutes > 59 {
            return None;
        }
        let seconds = (hours as i32 * 3600 + minutes * 60) * if sign == "-" { -1 } else { 1 };
        return jiff::tz::Offset::from_seconds(seconds)
            .ok()
            .map(TimeZone::fixed);
    }
    TimeZone::get(name).ok()
}
