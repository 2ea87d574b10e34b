//! A running operation's events, streamed to the client while its tool call runs: each as a
//! progress notification (with the call's progress token: the count of events so far, and the
//! event as a line of text) and as a logging notification (the event as the driver serialises
//! it, with its line of text), at or above the level the client set.
//!
//! The drivers call their sink synchronously, on the runtime the operation runs on; the sink
//! only queues ([`Events`]). The tool's handler sends what is queued ([`Notifier`]), in order,
//! before it answers, so every notification of a call precedes its result.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use upgrade_driver::EventSink;

use crate::present::{Event, Severity};
use crate::sim::Pacer;

/// The least severity the client wants logged (`logging/setLevel`); `Info` until it says.
#[derive(Debug)]
pub(crate) struct LevelFilter(AtomicU8);

impl Default for LevelFilter {
    fn default() -> Self {
        LevelFilter(AtomicU8::new(Severity::Info as u8))
    }
}

impl LevelFilter {
    /// Sets the least severity logged.
    pub(crate) fn set(&self, least: Severity) {
        self.0.store(least as u8, Ordering::Relaxed);
    }

    /// Whether `severity` is logged.
    pub(crate) fn admits(&self, severity: Severity) -> bool {
        severity as u8 >= self.0.load(Ordering::Relaxed)
    }
}

/// One event, ready to send.
#[derive(Debug)]
pub(crate) struct Line {
    /// How much it matters.
    pub(crate) severity: Severity,
    /// For people.
    pub(crate) text: String,
    /// For programs: the event as its driver serialises it.
    pub(crate) event: Value,
}

impl Line {
    /// An event of a driver: its line and severity as `crate::present` says them.
    pub(crate) fn of<E: Event>(event: &E) -> Line {
        Line {
            severity: event.severity(),
            text: event.line(),
            event: serde_json::to_value(event).unwrap_or(Value::Null),
        }
    }
}

/// A driver's sink: queues each event's [`Line`], paced when simulated.
pub(crate) struct Sink {
    events: Events,
    pacer: Option<Pacer>,
}

impl Sink {
    /// Queues to `events`; `pacer`: the simulation's, if any.
    pub(crate) fn new(events: Events, pacer: Option<Pacer>) -> Self {
        Sink { events, pacer }
    }
}

impl<E: Event> EventSink<E> for Sink {
    fn event(&self, event: &E) {
        if let Some(pacer) = &self.pacer {
            pacer.pace();
        }
        let _ = self.events.send(Line::of(event));
    }
}

/// Where a run's sink queues its events.
pub(crate) type Events = mpsc::UnboundedSender<Line>;

/// A queue for a run's events, and its receiving end.
pub(crate) fn events() -> (Events, mpsc::UnboundedReceiver<Line>) {
    mpsc::unbounded_channel()
}

/// Sends one tool call's events to the client.
pub(crate) struct Notifier {
    peer: Peer<RoleServer>,
    progress: Option<ProgressToken>,
    tool: &'static str,
    /// Progress notifications sent.
    sent: u32,
    /// Logging notifications sent.
    logged: u32,
    /// Whether the client cancelled the call (its result is then not sent).
    cancelled: bool,
    level: Arc<LevelFilter>,
}

impl Notifier {
    /// For the call of `tool` whose progress token is `progress` (none: no progress
    /// notifications, as the client asked for none).
    pub(crate) fn new(
        peer: Peer<RoleServer>,
        progress: Option<ProgressToken>,
        tool: &'static str,
        level: Arc<LevelFilter>,
    ) -> Self {
        Notifier {
            peer,
            progress,
            tool,
            sent: 0,
            logged: 0,
            cancelled: false,
            level,
        }
    }

    /// The client cancelled the call.
    pub(crate) fn cancelled(&mut self) {
        self.cancelled = true;
    }

    /// Sends `line`: a progress notification and, at or above the client's level, a logging
    /// one. A client that went away is not an error of the operation: what it misses is lost.
    pub(crate) async fn send(&mut self, line: Line) {
        self.sent += 1;
        if let Some(token) = &self.progress {
            let _ = self
                .peer
                .notify_progress(
                    ProgressNotificationParam::new(token.clone(), f64::from(self.sent))
                        .with_message(line.text.clone()),
                )
                .await;
        }
        if self.level.admits(line.severity) {
            self.logged += 1;
            let data = json!({"tool": self.tool, "text": line.text, "event": line.event});
            log(&self.peer, line.severity, data).await;
        }
    }

    /// The last notification of an operation: its result (`text`, and `report`, as the call's
    /// result has them), which a cancelled call has no other way to deliver; with the counts
    /// of the notifications sent before it, so a client can tell it has them all.
    pub(crate) async fn finish(self, severity: Severity, text: &str, report: Value) {
        if self.level.admits(severity) {
            let data = json!({
                "tool": self.tool,
                "event": "report",
                "text": text,
                "report": report,
                "progress_notifications": self.progress.as_ref().map(|_| self.sent),
                "logging_notifications": self.logged,
            });
            log(&self.peer, severity, data).await;
        }
    }

    /// An operation that ended without a report: said as a logging notification when the
    /// call was cancelled (otherwise its result says it).
    pub(crate) async fn failed(self, why: &str) {
        if self.cancelled {
            let data = json!({"tool": self.tool, "event": "error", "text": why});
            log(&self.peer, Severity::Error, data).await;
        }
    }
}

/// A logging notification (`notifications/message`, logger `nodejob`).
#[allow(deprecated)] // MCP logging: deprecated in the SDK for a future protocol, current in ours
pub(crate) async fn log(peer: &Peer<RoleServer>, severity: Severity, data: Value) {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    let level = match severity {
        Severity::Debug => LoggingLevel::Debug,
        Severity::Info => LoggingLevel::Info,
        Severity::Notice => LoggingLevel::Notice,
        Severity::Warning => LoggingLevel::Warning,
        Severity::Error => LoggingLevel::Error,
    };
    let _ = peer
        .notify_logging_message(
            LoggingMessageNotificationParam::new(level, data).with_logger("nodejob"),
        )
        .await;
}

/// The least severity of a `logging/setLevel` request.
#[allow(deprecated)] // as [`log`]
pub(crate) fn severity_of(level: rmcp::model::LoggingLevel) -> Severity {
    use rmcp::model::LoggingLevel;
    match level {
        LoggingLevel::Debug => Severity::Debug,
        LoggingLevel::Info => Severity::Info,
        LoggingLevel::Notice => Severity::Notice,
        LoggingLevel::Warning => Severity::Warning,
        _ => Severity::Error,
    }
}

/// A runner's note (`run`) as a [`Line`].
pub(crate) fn note_line(note: &nodejob_core::Note) -> Line {
    let severity = match note.level {
        nodejob_core::Level::Warn => Severity::Warning,
        _ => Severity::Info,
    };
    Line {
        severity,
        text: note.message.clone(),
        event: json!({"event": "note", "message": note.message}),
    }
}

/// Sends a runner's notes to `events`.
pub(crate) struct NoteSink(pub(crate) Events);

impl nodejob_core::Sink for NoteSink {
    fn note(&self, note: &nodejob_core::Note) {
        let _ = self.0.send(note_line(note));
    }
}
