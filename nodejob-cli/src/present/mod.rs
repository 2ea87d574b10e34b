//! What a person reads, as pure functions returning strings: each driver's progress lines,
//! previews, summaries and failure texts ([`upgrade`], [`rotation`]), and the tables of `jobs`
//! and `status` ([`jobs`], [`status`], a node's conditions as `kubectl describe` shows them:
//! [`describe`]), and how to retry a failed operation ([`retry`]). The terminal renderer
//! (`crate::render`), the commands and the MCP tools all print what these return, so a text
//! exists once.
//!
//! Every `match` on a driver's `Progress`, `Report` or error lives here: a change to those
//! types is adapted in this module alone.

pub(crate) mod board;
pub(crate) mod describe;
pub(crate) mod jobs;
pub(crate) mod retry;
pub(crate) mod rotation;
pub(crate) mod simulated;
pub(crate) mod status;
pub(crate) mod upgrade;

use nodejob_core::pause::Pause;
use nodejob_roll::NotNow;
use serde::Serialize;
use upgrade_driver::FenceEvent;

/// How much an event matters (MCP's logging levels, the subset used).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    /// Routine: a Lease renewal.
    Debug,
    /// Progress: a step, a node, a batch.
    Info,
    /// The end of a run, a stop requested.
    Notice,
    /// Something to look at: a run stopping, a gate failed.
    Warning,
    /// A node failed, the Lease was lost.
    Error,
}

/// Where a node's progress bar goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    /// Where it is.
    Keep,
    /// To this many steps done.
    At(u64),
    /// To its end.
    Full,
}

/// How a node's part of a run ended, as the terminal counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Done: upgraded, rotated, restored.
    Done,
    /// Skipped: nothing to do.
    Skipped,
    /// Failed, or disagreed at a gate.
    Failed,
    /// Stopped before its next step (a stop request, the Lease lost).
    Stopped,
}

/// What a node does after an event, as the terminal's board counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Now {
    /// A step is in flight (or the next follows at once): drawn as a bar.
    Working,
    /// Between two phases of a rotation, waiting for the others: counted, not drawn.
    Waiting,
    /// Its part of the run ended.
    Ended(End),
}

/// What a terminal that draws a bar per node shows of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum OnBars {
    /// A change to `node`'s bar.
    Bar {
        /// The node.
        node: String,
        /// Where its bar goes.
        position: Position,
        /// Its new message, if it changes.
        message: Option<String>,
        /// What the node does now.
        now: Now,
    },
    /// `node` waits on the pause switch (`Some`: who paused, when, why), or goes on (`None`);
    /// the event's line goes above the bars too.
    Pause {
        /// The node.
        node: String,
        /// The step it waits before.
        before: String,
        /// The pause it waits on, in words; `None` once it goes on.
        paused: Option<String>,
    },
    /// The run's nodes, in all: the board's counts say `N of TOTAL done`; the event's line
    /// goes above the bars too.
    Total(usize),
    /// The event's line ([`Event::line`]), stamped, above the bars.
    Line,
    /// Nothing.
    Nothing,
}

/// `paused by X at T: why`, as the pause switch says itself ([`Pause`]'s words).
fn pause_text(by: &str, at: Option<&str>, reason: &str) -> String {
    Pause::of(by, at, reason).to_string()
}

/// The line of an event both drivers tell alike: the run's size (`6 node(s) in this run`),
/// a node's wait on the pause switch (`NODE: paused by X at T: why; waiting before Drain`,
/// `NODE: resumed after 12.0s paused; Drain starts`). `None` for any other event.
fn shared_line<S: std::fmt::Display, R, X>(
    event: &nodejob_roll::Progress<S, R, X>,
) -> Option<String> {
    use nodejob_roll::Progress;
    match event {
        Progress::Planned { nodes } => Some(format!("{nodes} node(s) in this run")),
        Progress::Paused {
            node,
            before,
            by,
            at,
            reason,
        } => Some(format!(
            "{node}: {}; waiting before {before}",
            pause_text(by, at.as_deref(), reason)
        )),
        Progress::Resumed {
            node,
            before,
            waited_ms,
        } => Some(format!(
            "{node}: resumed after {} paused; {before} starts",
            seconds(*waited_ms)
        )),
        _ => None,
    }
}

/// What the board shows of an event both drivers tell alike ([`shared_line`]): the run's
/// size, as its total; a node's wait on the pause switch. `None` for any other event.
fn shared_on_bars<S: std::fmt::Display, R, X>(
    event: &nodejob_roll::Progress<S, R, X>,
) -> Option<OnBars> {
    use nodejob_roll::Progress;
    match event {
        Progress::Planned { nodes } => Some(OnBars::Total(*nodes)),
        Progress::Paused {
            node,
            before,
            by,
            at,
            reason,
        } => Some(OnBars::Pause {
            node: node.clone(),
            before: before.to_string(),
            paused: Some(pause_text(by, at.as_deref(), reason)),
        }),
        Progress::Resumed { node, before, .. } => Some(OnBars::Pause {
            node: node.clone(),
            before: before.to_string(),
            paused: None,
        }),
        _ => None,
    }
}

/// A driver's progress event, as people and programs are shown it.
pub(crate) trait Event: Serialize {
    /// The event as a line of text.
    fn line(&self) -> String;
    /// How much it matters.
    fn severity(&self) -> Severity;
    /// What a terminal with bars shows of it.
    fn on_bars(&self) -> OnBars;
}

/// How a driver's error ends an operation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// The plan was refused: its field, and the rule it breaks.
    Plan {
        /// The field, as the driver's plan names it.
        field: &'static str,
        /// The rule.
        rule: String,
    },
    /// The plan selects no node, or a node it names does not exist: bad input.
    NoSuchNode,
    /// Another holder has the Lease.
    LeaseHeld,
    /// Anything else: the operation failed.
    Failed,
}

/// A driver's error: what kind, and its text.
#[derive(Debug)]
pub(crate) struct DriverError {
    /// How it ends the operation.
    pub(crate) kind: ErrorKind,
    /// The error's text.
    pub(crate) text: String,
}

/// A Lease event, of either driver, as a line of text.
pub(crate) fn lease_line(event: &FenceEvent) -> String {
    match event {
        FenceEvent::Acquired { lease, epoch, how } => {
            format!("lease {lease} acquired at epoch {epoch} ({how})")
        }
        FenceEvent::Renewed { epoch } => format!("lease renewed (epoch {epoch})"),
        FenceEvent::Lost { message } => format!("LEASE LOST: {message}"),
        other => format!("{other:?}"),
    }
}

/// How much a Lease event, of either driver, matters: a renewal is routine, a loss an error.
fn lease_severity(event: &FenceEvent) -> Severity {
    match event {
        FenceEvent::Renewed { .. } => Severity::Debug,
        FenceEvent::Lost { .. } => Severity::Error,
        _ => Severity::Info,
    }
}

/// `FAILED at STEP (exit 3): MESSAGE`: a node's failure in a progress line.
fn failed_at(step: impl std::fmt::Display, exit_code: Option<i32>, message: &str) -> String {
    format!(
        "FAILED at {step}{}: {message}",
        exit_in_parentheses(exit_code)
    )
}

/// The first lines of a preview: `OPERATION: preview (nothing changed)` (e.g. `upgrade to
/// v1.38.0`), who holds the Lease, and what keeps a run from starting any node now.
fn preview_head(operation: &str, lease: Option<&str>, not_now: &[NotNow]) -> Vec<String> {
    let mut lines = vec![
        format!("{operation}: preview (nothing changed)"),
        match lease {
            Some(holder) => format!("lease: held by {holder}"),
            None => "lease: free".into(),
        },
    ];
    for said in not_now {
        let then = match said {
            NotNow::WindowClosed { .. } => "a run now stops before its first node (exit 4)",
            NotNow::Paused { .. } => {
                "a run now starts no step until `nodejob resume`, and ends paused (exit 4) if \
                 still paused 12 hours on"
            }
        };
        lines.push(format!("not now: {said}: {then}"));
    }
    lines
}

/// ` with exit code 3`, or nothing.
fn with_exit_code(exit_code: Option<i32>) -> String {
    exit_code
        .map(|c| format!(" with exit code {c}"))
        .unwrap_or_default()
}

/// ` (exit 3)`, or nothing.
fn exit_in_parentheses(exit_code: Option<i32>) -> String {
    exit_code
        .map(|c| format!(" (exit {c})"))
        .unwrap_or_default()
}

/// `  log tail:` and the tail, indented.
fn log_tail(tail: &str) -> String {
    format!("  log tail:\n    {}", tail.replace('\n', "\n    "))
}

/// A duration in milliseconds as every message says one: `4.2s`, `3m7s`, `3h10m50s`, `5m`.
pub(crate) fn seconds(ms: u64) -> String {
    nodejob_core::duration::said(std::time::Duration::from_millis(ms))
}

/// Rows as a table: each column as wide as its widest cell, two spaces between columns, no
/// trailing blanks.
pub(crate) fn table<R: AsRef<[String]>>(rows: &[R]) -> String {
    let columns = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            (rows.iter())
                .filter_map(|r| r.as_ref().get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = (row.as_ref().iter())
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Which columns a table has: kubectl's default, or its `-o wide` with more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Columns {
    /// The default columns.
    Narrow,
    /// More columns (`-o wide`).
    Wide,
}

/// `items` in natural order of their names (`worker-a-2` before `worker-a-19`): digits compare
/// as numbers, the rest as text.
pub(crate) fn natural<T>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<&T> {
    let mut sorted: Vec<&T> = items.iter().collect();
    sorted.sort_by_cached_key(|item| natural_key(name(item)));
    sorted
}

/// A name cut into runs of text and numbers, for [`natural`].
fn natural_key(name: &str) -> Vec<(String, u128)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                key.push((
                    std::mem::take(&mut text),
                    digits.parse().unwrap_or(u128::MAX),
                ));
                digits.clear();
            }
            text.push(c);
        }
    }
    key.push((text, digits.parse().unwrap_or(0)));
    key
}

/// A line's time stamp: `HH:MM:SS` on the day a run began (`first`), with the date after it.
pub(crate) fn stamp(now: jiff::Timestamp, first: jiff::civil::Date) -> String {
    if now.to_zoned(jiff::tz::TimeZone::UTC).date() == first {
        now.strftime("%H:%M:%S").to_string()
    } else {
        now.strftime("%Y-%m-%d %H:%M:%S").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_as_people_count() {
        let names = [
            "worker-a-19",
            "cp-1",
            "worker-a-2",
            "worker-b-0",
            "worker-a-10",
            "cp-0",
        ];
        let sorted: Vec<&str> = natural(&names, |n| n).into_iter().copied().collect();
        assert_eq!(
            sorted,
            [
                "cp-0",
                "cp-1",
                "worker-a-2",
                "worker-a-10",
                "worker-a-19",
                "worker-b-0"
            ]
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(seconds(4_200), "4.2s");
        assert_eq!(seconds(187_000), "3m7s");
        assert_eq!(seconds(300_000), "5m");
        assert_eq!(seconds(11_450_000), "3h10m50s");
    }

    #[test]
    fn a_stamp_past_the_first_day_says_its_date() {
        let first: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let day = first.to_zoned(jiff::tz::TimeZone::UTC).date();
        assert_eq!(stamp(first, day), "00:00:00");
        let later: jiff::Timestamp = "2026-01-02T01:03:10Z".parse().unwrap();
        assert_eq!(stamp(later, day), "2026-01-02 01:03:10");
    }
}
