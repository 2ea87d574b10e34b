//! What a person reads, as pure functions returning strings: each driver's progress lines,
//! previews, summaries and failure texts ([`upgrade`], [`rotation`]), and the tables of `jobs`
//! and `status` ([`jobs`], [`status`]), and how to retry a failed operation ([`retry`]). The terminal renderer (`crate::render`), the commands
//! and the MCP tools all print what these return, so a text exists once.
//!
//! Every `match` on a driver's `Progress`, `Report` or error lives here: a change to those
//! types is adapted in this module alone.

pub(crate) mod jobs;
pub(crate) mod retry;
pub(crate) mod rotation;
pub(crate) mod status;
pub(crate) mod upgrade;

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
        /// Whether the bar ends (with `message`).
        finish: bool,
    },
    /// The event's line ([`Event::line`]), stamped, above the bars.
    Line,
    /// Nothing.
    Nothing,
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
    /// A node the plan names does not exist.
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

/// The first lines of a preview: `OPERATION to TARGET: preview (nothing changed)`, and who
/// holds the Lease.
fn preview_head(operation: &str, target: &str, lease: Option<&str>) -> Vec<String> {
    vec![
        format!("{operation} to {target}: preview (nothing changed)"),
        match lease {
            Some(holder) => format!("lease: held by {holder}"),
            None => "lease: free".into(),
        },
    ]
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

/// A duration in milliseconds for people: `4.2s`, `3m07s`.
pub(crate) fn seconds(ms: u64) -> String {
    if ms >= 60_000 {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
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
