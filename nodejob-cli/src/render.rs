//! How a run shows on the terminal: a bar per node on a terminal, timestamped lines otherwise,
//! one JSON event per line with `--output json`. One [`Renderer`] serves both drivers; what it
//! shows of an event is `crate::present`'s ([`Event`]).

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use upgrade_driver::EventSink;

use crate::args::Format;
use crate::backend::{Target, WallClock};
use crate::interrupt::Notice;
use crate::present::board::{Board, Change, TermSize};
use crate::present::{Event, Severity, simulated, stamp};
use crate::sim::Pacer;

/// Receives a driver's events and shows them.
pub(crate) struct Renderer {
    format: Format,
    clock: WallClock,
    pacer: Option<Pacer>,
    live: Option<Arc<Live>>,
    /// Whether routine events (a Lease renewed) are shown: `-v`.
    verbose: bool,
    /// The day of the first stamped line: a line of a later day is stamped with its date.
    first_day: Mutex<Option<jiff::civil::Date>>,
}

/// An event of `-o json` as written: its time, then its own fields.
#[derive(serde::Serialize)]
struct Stamped<'a, T> {
    /// When it was shown, by the cluster's clock.
    time: String,
    #[serde(flatten)]
    event: &'a T,
}

/// The board of a terminal and what draws it: one bar whose message is the board's lines.
struct Live {
    bar: ProgressBar,
    board: Mutex<Board>,
}

impl Live {
    /// Draws `board` fitted to the terminal's size as it is now (it may have been resized).
    fn draw(&self, board: &Board) {
        let size = console::Term::stdout()
            .size_checked()
            .map(|(rows, columns)| TermSize {
                width: usize::from(columns),
                height: usize::from(rows),
            });
        self.bar.set_message(board.live(size).join("\n"));
    }
}

impl Renderer {
    /// A renderer in `format`; a board of nodes of `steps` steps when `terminal` (stdout is
    /// one) and the format is text; paced by `pacer` when simulated.
    fn new(
        format: Format,
        terminal: bool,
        clock: WallClock,
        pacer: Option<Pacer>,
        steps: u64,
        verbose: bool,
    ) -> Self {
        let live = (format == Format::Text && terminal).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
            bar.set_style(
                ProgressStyle::with_template("{msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            Arc::new(Live {
                bar,
                board: Mutex::new(Board::new(steps)),
            })
        });
        Renderer {
            format,
            clock,
            pacer,
            live,
            verbose,
            first_day: Mutex::new(None),
        }
    }

    /// The renderer of a run on `target` in `format`: a board when stdout is a terminal. When
    /// the cluster is simulated, it says so first (the banner, or a `simulated` JSON event)
    /// and paces the run at `--speed`, by default only when a person watches (text on a
    /// terminal). Ctrl-C's acknowledgement (`notice`) goes on the board while there is one.
    /// Routine events (a Lease renewed) are shown as text only when `verbose` (`-v`).
    pub(crate) fn of(
        format: Format,
        target: &Target,
        steps: u64,
        notice: &Notice,
        verbose: bool,
    ) -> Self {
        let terminal = std::io::stdout().is_terminal();
        let speed = target.speed(format == Format::Text && terminal);
        let renderer = Renderer::new(
            format,
            terminal,
            target.clock(),
            target.pacer(speed),
            steps,
            verbose,
        );
        if let Some(live) = &renderer.live {
            let live = live.clone();
            notice.route(Arc::new(move |text: &str| {
                let mut board = live.board.lock().unwrap_or_else(|e| e.into_inner());
                board.stopping(text);
                live.draw(&board);
            }));
        }
        if let (Some(setup), Some(speed)) = (&target.simulated, speed) {
            match format {
                Format::Json => renderer.json(&simulated::event(setup, speed)),
                Format::Text | Format::Yaml | Format::Wide => {
                    for line in simulated::banner(setup, Some(speed)) {
                        renderer.line(&line);
                    }
                }
            }
        }
        renderer
    }

    /// Writes one JSON line: `event`, stamped first with its `time` by the cluster's clock
    /// (RFC 3339; virtual under `--simulate`), so that a long run's stream can be placed in
    /// time.
    pub(crate) fn json<T: serde::Serialize>(&self, event: &T) {
        let stamped = Stamped {
            time: (self.clock)().to_string(),
            event,
        };
        outln!("{}", serde_json::to_string(&stamped).unwrap_or_default());
    }

    /// A line for people (above the board when there is one).
    fn line(&self, text: &str) {
        match &self.live {
            Some(live) => live.bar.println(text),
            None => {
                outln!("{text}");
            }
        }
    }

    /// A line for people, stamped with the cluster's time: `HH:MM:SS`, with the date once the
    /// run is past the day it began in.
    fn stamped(&self, text: &str) {
        let now = (self.clock)();
        let day = now.to_zoned(jiff::tz::TimeZone::UTC).date();
        let first = *self
            .first_day
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(day);
        self.line(&format!("{}  {text}", stamp(now, first)));
    }

    /// Clears the board before the summary: nothing is drawn after it, and a Ctrl-C from now
    /// on is acknowledged on stderr.
    pub(crate) fn finish(&self, notice: &Notice) {
        notice.unroute();
        if let Some(live) = &self.live {
            live.bar.finish_and_clear();
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
        if event.severity() == Severity::Debug && !self.verbose {
            return;
        }
        let Some(live) = &self.live else {
            self.stamped(&event.line());
            return;
        };
        let mut board = live.board.lock().unwrap_or_else(|e| e.into_inner());
        match board.apply(&event.on_bars()) {
            None => return,
            Some(Change::Line) => self.stamped(&event.line()),
            Some(Change::Board) => {}
        }
        live.draw(&board);
    }
}
