//! [`not_now`]: what keeps a run from starting any node now, as a preview says it before the
//! run meets it: the maintenance window closed (and when it next opens), the pause switch on
//! the Lease (who, when, why). The same words the run ends with ([`crate::Limits::why_not`]).

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::coordination::v1::Lease;
use nodejob_core::pause::{Pause, paused};
use serde::Serialize;

use nodejob_core::lease::holder;
use nodejob_core::{ApiError, LeaseApi};

use crate::fence::read_lease;
use crate::placement::Placement;
use crate::window::Window;

/// One thing that keeps a run from starting any node now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum NotNow {
    /// Outside the maintenance window: a run stops before its first batch.
    WindowClosed {
        /// When it next opens, in the window's time zone (`None`: not within a week).
        next_open: Option<String>,
    },
    /// The pause switch is on: a run starts no step until it is lifted (`nodejob resume`).
    Paused {
        /// Who paused.
        by: String,
        /// When, on the cluster's clock, if the switch says.
        at: Option<String>,
        /// Why, as given (may be empty).
        reason: String,
    },
}

impl std::fmt::Display for NotNow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotNow::WindowClosed { next_open } => {
                write!(f, "outside the maintenance window")?;
                match next_open {
                    Some(at) => write!(f, "; it next opens at {at}"),
                    None => Ok(()),
                }
            }
            NotNow::Paused { by, at, reason } => {
                write!(f, "{}", Pause::of(by, at.as_deref(), reason))
            }
        }
    }
}

/// The window closed at `now`, with when it next opens; `None` while it is open.
pub fn window_closed(window: &Window, tz: &TimeZone, now: Timestamp) -> Option<NotNow> {
    if window.is_open(tz, now) {
        return None;
    }
    let next_open = (window.next_open(tz, now)).map(|t| zoned(t, tz));
    Some(NotNow::WindowClosed { next_open })
}

/// `t` in `tz` as a person reads it: `2026-01-05 22:00 UTC`, `2026-01-05 22:00 CET`, or the
/// offset where the zone has no abbreviation.
pub fn zoned(t: Timestamp, tz: &TimeZone) -> String {
    let local = t.to_zoned(tz.clone());
    let name = local.time_zone().iana_name().unwrap_or_default();
    match name {
        "UTC" | "Etc/UTC" => local.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        "" => local.strftime("%Y-%m-%d %H:%M %:z").to_string(),
        _ => local.strftime("%Y-%m-%d %H:%M %Z (%Q)").to_string(),
    }
}

/// What keeps a run of a plan with `window` from starting any node at `now`, given its
/// `lease` as just read: the window closed, the pause switch on. Empty: a run would start.
pub fn not_now(
    window: Option<&(Window, TimeZone)>,
    lease: Option<&Lease>,
    now: Timestamp,
) -> Vec<NotNow> {
    let closed = window.and_then(|(w, tz)| window_closed(w, tz, now));
    let pause = lease.and_then(paused).map(|p| NotNow::Paused {
        by: p.by,
        at: p.at.map(|t| t.to_string()),
        reason: p.reason,
    });
    closed.into_iter().chain(pause).collect()
}

/// What a preview says first, from one read of the Lease of `placement`: who holds it now
/// (`None`: free, or none yet) and what keeps a run under `window` from starting any node at
/// `now` ([`not_now`]).
///
/// # Errors
/// The Lease could not be read (transient errors are retried first).
pub async fn lease_now<A: LeaseApi + ?Sized>(
    api: &A,
    placement: &Placement,
    window: Option<&(Window, TimeZone)>,
    now: Timestamp,
) -> Result<(Option<String>, Vec<NotNow>), ApiError> {
    let lease = read_lease(api, placement).await?;
    let held = lease.as_ref().and_then(holder).map(|h| h.to_string());
    Ok((held, not_now(window, lease.as_ref(), now)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weekdays 22:00 to 04:00 the next morning, UTC.
    fn weeknights() -> (Window, TimeZone) {
        use jiff::civil::{Weekday, time};
        let w = Window {
            days: vec![
                Weekday::Monday,
                Weekday::Tuesday,
                Weekday::Wednesday,
                Weekday::Thursday,
                Weekday::Friday,
            ],
            start: time(22, 0, 0, 0),
            end: time(4, 0, 0, 0),
            time_zone: "UTC".into(),
        };
        let tz = w.validate().unwrap();
        (w, tz)
    }

    #[test]
    fn a_closed_window_says_when_it_next_opens_and_an_open_one_nothing() {
        let w = weeknights();
        let sunday_noon: Timestamp = "2026-01-04T12:00:00Z".parse().unwrap();
        let said = not_now(Some(&w), None, sunday_noon);
        assert_eq!(
            said,
            vec![NotNow::WindowClosed {
                next_open: Some("2026-01-05 22:00 UTC".into())
            }]
        );
        assert_eq!(
            said[0].to_string(),
            "outside the maintenance window; it next opens at 2026-01-05 22:00 UTC"
        );
        let monday_night: Timestamp = "2026-01-05T23:00:00Z".parse().unwrap();
        assert_eq!(not_now(Some(&w), None, monday_night), vec![]);
        assert_eq!(not_now(None, None, sunday_noon), vec![]);
    }

    #[test]
    fn a_pause_on_the_lease_says_who_when_and_why() {
        let mut lease = Lease::default();
        let pause = Pause {
            by: "alice".into(),
            at: Some("2026-01-04T11:00:00Z".parse().unwrap()),
            reason: "incident 42".into(),
        };
        lease.metadata.annotations = Some(
            [(
                nodejob_core::pause::PAUSE_ANNOTATION.to_string(),
                pause.to_annotation(),
            )]
            .into(),
        );
        let now: Timestamp = "2026-01-04T12:00:00Z".parse().unwrap();
        let said = not_now(None, Some(&lease), now);
        assert_eq!(said.len(), 1, "{said:?}");
        assert_eq!(said[0].to_string(), pause.to_string());
        assert_eq!(not_now(None, Some(&Lease::default()), now), vec![]);
    }
}
