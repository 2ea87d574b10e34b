//! How a run shows on the terminal: a bar per node on a terminal, timestamped lines otherwise,
//! one JSON event per line with `--output json`. One [`Renderer`] serves both drivers; what it
//! shows of an event is `crate::present`'s ([`Event`]).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use upgrade_driver::EventSink;

use crate::args::Format;
use crate::backend::{Target, WallClock};
use crate::present::{Event, OnBars, Position, simulated};
use crate::sim::Pacer;

/// Receives a driver's events and shows them.
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

impl Renderer {
    /// A renderer in `format`; bars of `steps` steps when `terminal` (stdout is one) and the
    /// format is text; paced by `pacer` when simulated.
    fn new(
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

    /// The renderer of a run on `target` in `format`: bars when stdout is a terminal. When the
    /// cluster is simulated, it says so first (the banner, or a `simulated` JSON event) and
    /// paces the run at `--speed`, by default only when a person watches (text on a terminal).
    pub(crate) fn of(format: Format, target: &Target, steps: u64) -> Self {
        let terminal = std::io::stdout().is_terminal();
        let speed = target.speed(format == Format::Text && terminal);
        let renderer = Renderer::new(format, terminal, target.clock(), target.pacer(speed), steps);
        if let (Some(setup), Some(speed)) = (&target.simulated, speed) {
            match format {
                Format::Json => renderer.json(&simulated::event(setup, speed)),
                Format::Text => {
                    for line in simulated::banner(setup, Some(speed)) {
                        renderer.line(&line);
                    }
                }
            }
        }
        renderer
    }

    /// Writes one JSON line.
    pub(crate) fn json<T: serde::Serialize>(&self, event: &T) {
        outln!("{}", serde_json::to_string(event).unwrap_or_default());
    }

    /// A line for people (above the bars when there are some).
    fn line(&self, text: &str) {
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
    fn stamped(&self, text: &str) {
        let at = (self.clock)().strftime("%H:%M:%S");
        self.line(&format!("{at}  {text}"));
    }

    /// The bar of `node` (drawn on first use), when bars are drawn.
    fn bar(&self, node: &str) -> Option<ProgressBar> {
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

impl<E: Event> EventSink<E> for Renderer {
    fn event(&self, event: &E) {
        if let Some(pacer) = &self.pacer {
            pacer.pace();
        }
        if self.format == Format::Json {
            self.json(event);
            return;
        }
        if self.bars.is_none() {
            self.stamped(&event.line());
            return;
        }
        match event.on_bars() {
            OnBars::Bar {
                node,
                position,
                message,
                finish,
            } => {
                let Some(bar) = self.bar(&node) else { return };
                match position {
                    Position::Keep => {}
                    Position::At(steps) => bar.set_position(steps),
                    Position::Full => bar.set_position(bar.length().unwrap_or(self.steps)),
                }
                match (message, finish) {
                    (Some(message), true) => bar.finish_with_message(message),
                    (None, true) => bar.finish(),
                    (Some(message), false) => bar.set_message(message),
                    (None, false) => {}
                }
            }
            OnBars::Line => self.stamped(&event.line()),
            OnBars::Nothing => {}
        }
    }
}
