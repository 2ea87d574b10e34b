//! How a run shows: per-node progress bars on a terminal, timestamped lines otherwise, one JSON
//! event per line with `--output json`; and the summary table at the end. One [`Renderer`]
//! serves both drivers: the upgrade's events here, the CA rotation's in [`crate::rotate`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use jiff::Timestamp;
use nodejob_core::drive::FenceEvent;
use upgrade_driver::{EventSink, NodeResult, Outcome, Progress, Report, UpgradeStep};

use crate::sim::Pacer;

/// `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// For people: bars on a terminal, timestamped lines otherwise.
    Text,
    /// For automation: one JSON object per line.
    Json,
}

/// The clock the lines are stamped with: the cluster's (virtual when simulated).
pub(crate) type WallClock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Receives the driver's events and shows them.
pub(crate) struct Renderer {
    format: Format,
    clock: WallClock,
    pacer: Option<Pacer>,
    bars: Option<Bars>,
    /// The steps a node's bar counts.
    steps: u64,
}

struct Bars {
    multi: MultiProgress,
    nodes: Mutex<BTreeMap<String, ProgressBar>>,
}

/// The steps of an upgrade a node's bar counts.
pub(crate) const UPGRADE_STEPS: u64 = 6;

impl Renderer {
    /// A renderer in `format`; bars of `steps` steps when `terminal` (stdout is one) and the
    /// format is text.
    pub(crate) fn new(
        format: Format,
        terminal: bool,
        clock: WallClock,
        pacer: Option<Pacer>,
        steps: u64,
    ) -> Self {
        let bars = (format == Format::Text && terminal).then(|| Bars {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stdout()),
            nodes: Mutex::new(BTreeMap::new()),
        });
        Renderer {
            format,
            clock,
            pacer,
            bars,
            steps,
        }
    }

    /// Holds real time in pace with the simulation's, when simulated and shown to people.
    pub(crate) fn pace(&self) {
        if let Some(pacer) = &self.pacer {
            pacer.pace();
        }
    }

    /// The output format.
    pub(crate) fn format(&self) -> Format {
        self.format
    }

    /// Whether progress bars are drawn.
    pub(crate) fn has_bars(&self) -> bool {
        self.bars.is_some()
    }

    /// Writes one JSON line.
    pub(crate) fn json<T: serde::Serialize>(&self, event: &T) {
        outln!("{}", serde_json::to_string(event).unwrap_or_default());
    }

    /// A line for people (above the bars when there are some).
    pub(crate) fn line(&self, text: &str) {
        match &self.bars {
            Some(bars) => {
                let _ = bars.multi.println(text);
            }
            None => {
                outln!("{text}");
            }
        }
    }

    /// A line for people, stamped with the cluster's time.
    pub(crate) fn stamped(&self, text: &str) {
        let at = (self.clock)().strftime("%H:%M:%S");
        self.line(&format!("{at}  {text}"));
    }

    /// The bar of `node` (drawn on first use), when bars are drawn.
    pub(crate) fn bar(&self, node: &str) -> Option<ProgressBar> {
        let bars = self.bars.as_ref()?;
        let mut nodes = bars.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let bar = nodes.entry(node.to_string()).or_insert_with(|| {
            let bar = bars.multi.add(ProgressBar::new(self.steps));
            bar.set_style(
                ProgressStyle::with_template("{prefix:>16} [{bar:24}] {pos}/{len} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_prefix(node.to_string());
            bar
        });
        Some(bar.clone())
    }

    /// Clears the bars before the summary.
    pub(crate) fn finish(&self) {
        if let Some(bars) = &self.bars {
            let _ = bars.multi.clear();
        }
    }
}

fn step_index(step: UpgradeStep) -> u64 {
    match step {
        UpgradeStep::Cordon => 1,
        UpgradeStep::Drain => 2,
        UpgradeStep::Upgrade => 3,
        UpgradeStep::Reboot => 4,
        UpgradeStep::Health => 5,
        UpgradeStep::Uncordon => 6,
    }
}

/// A Lease event, of either driver, as a line of text.
pub(crate) fn describe_lease(event: &FenceEvent) -> String {
    match event {
        FenceEvent::Acquired { lease, epoch, how } => {
            format!("lease {lease} acquired at epoch {epoch} ({how})")
        }
        FenceEvent::Renewed { epoch } => format!("lease renewed (epoch {epoch})"),
        FenceEvent::Lost { message } => format!("LEASE LOST: {message}"),
        other => format!("{other:?}"),
    }
}

/// One event as a line of text.
pub(crate) fn describe(event: &Progress) -> String {
    match event {
        Progress::Lease(lease) => describe_lease(lease),
        Progress::BatchStarted {
            index,
            group,
            nodes,
        } => format!("batch {} ({group}): {}", index + 1, nodes.join(", ")),
        Progress::NodeSkipped { node, why } => format!("{node}: skipped, {why}"),
        Progress::StepStarted { node, step } => format!("{node}: {step}..."),
        Progress::StepFinished {
            node,
            step,
            took_ms,
            message,
        } => format!("{node}: {step} done in {} ({message})", seconds(*took_ms)),
        Progress::PodsEvicted { node, pods } if pods.is_empty() => {
            format!("{node}: no pod to evict")
        }
        Progress::PodsEvicted { node, pods } => format!("{node}: evicted {}", pods.join(", ")),
        Progress::Note {
            node: Some(node),
            message,
        } => format!("{node}: {message}"),
        Progress::Note {
            node: None,
            message,
        } => message.clone(),
        Progress::NodeFinished {
            node,
            result,
            took_ms,
        } => format!(
            "{node}: {} after {}",
            result_text(result),
            seconds(*took_ms)
        ),
        Progress::Stopping { why } => format!("no further node starts: {why}"),
        _ => format!("{event:?}"),
    }
}

impl EventSink<Progress> for Renderer {
    fn event(&self, event: &Progress) {
        self.pace();
        if self.format == Format::Json {
            self.json(event);
            return;
        }
        if self.bars.is_none() {
            self.stamped(&describe(event));
            return;
        }
        match event {
            Progress::StepStarted { node, step } => {
                if let Some(bar) = self.bar(node) {
                    bar.set_position(step_index(*step) - 1);
                    bar.set_message(format!("{step}..."));
                }
            }
            Progress::StepFinished { node, step, .. } => {
                if let Some(bar) = self.bar(node) {
                    bar.set_position(step_index(*step));
                }
            }
            Progress::NodeFinished { node, result, .. } => {
                if let Some(bar) = self.bar(node) {
                    if matches!(result, NodeResult::Upgraded) {
                        bar.set_position(UPGRADE_STEPS);
                    }
                    bar.finish_with_message(result_text(result));
                }
            }
            Progress::NodeSkipped { node, why } => {
                if let Some(bar) = self.bar(node) {
                    bar.set_position(UPGRADE_STEPS);
                    bar.finish_with_message(format!("skipped: {why}"));
                }
            }
            Progress::Lease(FenceEvent::Renewed { .. }) | Progress::PodsEvicted { .. } => {}
            other => self.stamped(&describe(other)),
        }
    }
}

fn result_text(result: &NodeResult) -> String {
    match result {
        NodeResult::Upgraded => "upgraded".into(),
        NodeResult::Skipped { why } => format!("skipped ({why})"),
        NodeResult::Failed(f) => format!(
            "FAILED at {}{}: {}",
            f.step,
            f.exit_code
                .map(|c| format!(" (exit {c})"))
                .unwrap_or_default(),
            f.message
        ),
        NodeResult::Interrupted { step, why } => format!("stopped before {step}: {why}"),
    }
}

/// A duration in milliseconds for people: `4.2s`, `3m07s`.
pub(crate) fn seconds(ms: u64) -> String {
    if ms >= 60_000 {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// The summary table: node, from, to, result, duration, pods evicted.
pub(crate) fn summary(report: &Report) -> String {
    let mut rows = vec![[
        "NODE".to_string(),
        "FROM".into(),
        "TO".into(),
        "RESULT".into(),
        "DURATION".into(),
        "PODS EVICTED".into(),
    ]];
    for n in &report.nodes {
        let result = match &n.result {
            None => "not started".to_string(),
            Some(NodeResult::Upgraded) => "upgraded".into(),
            Some(NodeResult::Skipped { .. }) => "skipped".into(),
            Some(NodeResult::Failed(f)) => format!("failed at {}", f.step),
            Some(NodeResult::Interrupted { step, .. }) => format!("stopped before {step}"),
        };
        rows.push([
            n.name.clone(),
            n.from.clone().unwrap_or_else(|| "-".into()),
            n.to.clone().unwrap_or_else(|| "-".into()),
            result,
            if n.took_ms == 0 {
                "-".into()
            } else {
                seconds(n.took_ms)
            },
            n.pods_evicted.len().to_string(),
        ]);
    }
    let mut out = table(&rows);
    let t = &report.totals;
    out.push_str(&format!(
        "{} upgraded, {} skipped, {} failed, {} stopped, {} not started; {} pods evicted; {}\n",
        t.upgraded,
        t.skipped,
        t.failed,
        t.interrupted,
        t.not_started,
        t.pods_evicted,
        match &report.outcome {
            Outcome::Done => "done".to_string(),
            Outcome::Failed { .. } => "FAILED".into(),
            Outcome::Stopped { why } => format!("stopped: {why}"),
        }
    ));
    out
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
