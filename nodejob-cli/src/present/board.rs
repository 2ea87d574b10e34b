//! What a terminal shows of a run while it goes, as pure strings: a bar for each node with a
//! step in flight, and one line of counts for the rest, as `kubectl rollout status` and cargo
//! show theirs. A finished node leaves the board for a line above it (the scrollback keeps
//! it), so the nodes in flight stay on the screen however many nodes finished. The terminal
//! renderer (`crate::render`) draws [`Board::live`] below what scrolls.

use super::{End, Now, OnBars, Position, natural};

/// The most nodes in flight drawn as bars; the others are counted on one line.
pub(crate) const MAX_BARS: usize = 12;

/// The width of a bar, in characters.
const BAR_WIDTH: usize = 24;

/// The state of the board: nodes in flight and counts.
#[derive(Debug)]
pub(crate) struct Board {
    steps: u64,
    /// The nodes seen and not ended, in the order they were first seen.
    nodes: Vec<Row>,
    done: usize,
    skipped: usize,
    failed: usize,
    stopped: usize,
    /// The acknowledgement of a stop request, once asked.
    stopping: Option<String>,
    /// The pause the nodes wait on (who, when, why), while any waits.
    paused: Option<String>,
    /// The run's nodes in all, once told.
    total: Option<usize>,
}

#[derive(Debug)]
struct Row {
    node: String,
    position: u64,
    message: String,
    /// Whether a step of it is in flight (not between two phases of a rotation).
    busy: bool,
    /// Whether it waits on the pause switch before its next step.
    paused: bool,
}

/// What changes on the screen after an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The board only.
    Board,
    /// The event's line goes above the board (it scrolls), then the board.
    Line,
}

impl Board {
    /// An empty board for nodes of `steps` steps.
    pub(crate) fn new(steps: u64) -> Self {
        Board {
            steps,
            nodes: Vec::new(),
            done: 0,
            skipped: 0,
            failed: 0,
            stopped: 0,
            stopping: None,
            paused: None,
            total: None,
        }
    }

    /// Takes an event as the terminal shows it; says whether its line goes above.
    pub(crate) fn apply(&mut self, on: &OnBars) -> Option<Change> {
        match on {
            OnBars::Nothing => None,
            OnBars::Line => Some(Change::Line),
            OnBars::Total(total) => {
                self.total = Some(*total);
                Some(Change::Line)
            }
            OnBars::Pause {
                node,
                before,
                paused,
            } => {
                let index = self.row(node);
                let row = &mut self.nodes[index];
                row.paused = paused.is_some();
                if paused.is_some() {
                    row.message = format!("PAUSED before {before}");
                }
                match paused {
                    Some(pause) => self.paused = Some(pause.clone()),
                    None if !self.nodes.iter().any(|r| r.paused) => self.paused = None,
                    None => {}
                }
                Some(Change::Line)
            }
            OnBars::Bar {
                node,
                position,
                message,
                now,
            } => {
                let index = self.row(node);
                let steps = self.steps;
                let row = &mut self.nodes[index];
                match position {
                    Position::Keep => {}
                    Position::At(p) => row.position = (*p).min(steps),
                    Position::Full => row.position = steps,
                }
                if let Some(message) = message {
                    row.message = message.clone();
                }
                let end = match now {
                    Now::Working | Now::Waiting => {
                        row.busy = *now == Now::Working;
                        return Some(Change::Board);
                    }
                    Now::Ended(end) => end,
                };
                self.nodes.remove(index);
                if !self.nodes.iter().any(|r| r.paused) {
                    self.paused = None;
                }
                match end {
                    End::Done => self.done += 1,
                    End::Skipped => self.skipped += 1,
                    End::Failed => self.failed += 1,
                    End::Stopped => self.stopped += 1,
                }
                Some(Change::Line)
            }
        }
    }

    /// The index of `node`'s row, added (in flight) when first seen.
    fn row(&mut self, node: &str) -> usize {
        match self.nodes.iter().position(|r| r.node == node) {
            Some(i) => i,
            None => {
                self.nodes.push(Row {
                    node: node.to_string(),
                    position: 0,
                    message: String::new(),
                    busy: true,
                    paused: false,
                });
                self.nodes.len() - 1
            }
        }
    }

    /// A stop was asked for: `text` says what happens now, on the board until the end.
    pub(crate) fn stopping(&mut self, text: &str) {
        self.stopping = Some(text.to_string());
    }

    /// The board's lines: a bar per node in flight or paused, then the counts, then the pause
    /// the nodes wait on while any waits, then the stop's acknowledgement if one was asked for.
    ///
    /// Fitted to `size` when the terminal's is known: no line is wider than it (a long node
    /// name or message is cut with an ellipsis, the bar shrinks, the counts and the pause are
    /// wrapped at spaces) and the board takes half its height (fewer bars, the rest counted
    /// as not drawn; one bar at least while the height allows), so that the lines scrolling
    /// above stay in view. When the size is
    /// unknown, names are padded to 16 columns, bars are 24 wide and at most [`MAX_BARS`] are
    /// drawn.
    pub(crate) fn live(&self, size: Option<TermSize>) -> Vec<String> {
        // In natural order (`worker-a-2` before `worker-a-10`), as the summary lists them.
        let drawn: Vec<&Row> = (natural(&self.nodes, |r| r.node.as_str()).into_iter())
            .filter(|r| r.busy || r.paused)
            .collect();
        let mut bars = drawn.len().min(MAX_BARS);
        let footer = match size {
            None => self.footer(&drawn, bars),
            Some(size) => {
                loop {
                    let footer = wrap(&self.footer(&drawn, bars), size.width);
                    // Half the height, or what one bar and the footer need, below a line.
                    let room = (size.height / 2)
                        .max(footer.len() + 1)
                        .min(size.height.saturating_sub(1));
                    let fits = room.saturating_sub(footer.len());
                    if bars <= fits {
                        break footer;
                    }
                    bars = fits;
                }
            }
        };
        let layout = Layout::of(size, &drawn[..bars], self.steps);
        let mut lines: Vec<String> = (drawn.iter().take(bars))
            .map(|r| layout.bar(r, self.steps))
            .collect();
        lines.extend(footer);
        lines
    }

    /// The lines below the bars when `bars` of the `drawn` rows are drawn: the counts, the
    /// pause, the stop.
    fn footer(&self, drawn: &[&Row], bars: usize) -> Vec<String> {
        let busy = drawn.iter().filter(|r| !r.paused).count();
        let paused = drawn.len() - busy;
        let mut counts = vec![match self.total {
            Some(total) => format!("{} of {total} done", self.done),
            None => format!("{} done", self.done),
        }];
        for (n, what) in [
            (self.skipped, "skipped"),
            (self.failed, "failed"),
            (self.stopped, "stopped"),
        ] {
            if n > 0 {
                counts.push(format!("{n} {what}"));
            }
        }
        counts.push(format!("{busy} in flight"));
        if paused > 0 {
            counts.push(format!("{paused} paused"));
        }
        if drawn.len() > bars {
            let last = counts.len() - 1;
            counts[last].push_str(&format!(" ({} not drawn)", drawn.len() - bars));
        }
        let waiting = self.nodes.len() - drawn.len();
        if waiting > 0 {
            counts.push(format!("{waiting} between steps"));
        }
        let mut lines = vec![counts.join(", ")];
        if let Some(pause) = &self.paused {
            lines.push(format!(
                "PAUSED: {pause}; no step starts until `nodejob resume`"
            ));
        }
        if let Some(stopping) = &self.stopping {
            lines.push(stopping.clone());
        }
        lines
    }
}

/// A terminal's size, in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TermSize {
    /// Columns.
    pub(crate) width: usize,
    /// Rows.
    pub(crate) height: usize,
}

/// The name column narrows to no less than this before the bar goes below [`MIN_BAR`].
const MIN_NAME: usize = 8;

/// The narrowest bar drawn while the line has room for the name column's [`MIN_NAME`].
const MIN_BAR: usize = 8;

/// Room kept for a bar's message ("Reboot...", "PAUSED before Drain") before the name and
/// the bar are narrowed.
const MESSAGE_ROOM: usize = 20;

/// How a bar is drawn: its name column, its width, and the line's when known.
struct Layout {
    /// The name column: names are right-aligned in it, a longer one cut with an ellipsis.
    name: usize,
    /// The bar's width.
    bar: usize,
    /// The widest a line may be, when the terminal's width is known.
    width: Option<usize>,
}

impl Layout {
    /// The layout of `rows`' bars of `steps` steps in a terminal of `size`: today's columns
    /// (16 for the name, 24 for the bar) when the size is unknown; else the name column as
    /// wide as the longest name (16 at least), and, where the line has not room for it,
    /// a bar and a name column narrowed in turn.
    fn of(size: Option<TermSize>, rows: &[&Row], steps: u64) -> Self {
        let Some(size) = size else {
            return Layout {
                name: 16,
                bar: BAR_WIDTH,
                width: None,
            };
        };
        let longest = (rows.iter().map(|r| r.node.chars().count()))
            .max()
            .unwrap_or(0)
            .max(16);
        let counter = 2 * steps.to_string().len() + 1;
        // " [" "] " counter " " then the message.
        let room = (size.width).saturating_sub(2 + 2 + counter + 1 + MESSAGE_ROOM);
        let name = longest.min(room.saturating_sub(MIN_BAR)).max(MIN_NAME);
        let bar = room.saturating_sub(name).clamp(MIN_BAR, BAR_WIDTH);
        Layout {
            name,
            bar,
            width: Some(size.width),
        }
    }

    /// `row`'s line.
    fn bar(&self, row: &Row, steps: u64) -> String {
        let width = self.bar;
        let filled = usize::try_from(row.position * width as u64 / steps.max(1))
            .unwrap_or(width)
            .min(width);
        let head = if filled < width { ">" } else { "" };
        let bar = format!("{}{head}", "=".repeat(filled));
        let name = match self.width {
            Some(_) => cut(&row.node, self.name),
            None => row.node.clone(),
        };
        let line = format!(
            "{name:>column$} [{bar:<width$}] {}/{steps} {}",
            row.position,
            row.message,
            column = self.name
        );
        match self.width {
            Some(max) => cut(&line, max),
            None => line,
        }
    }
}

/// `text` in at most `width` characters: cut with an ellipsis when longer.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// `lines` wrapped at spaces to `width` characters; a word longer than that is cut.
fn wrap(lines: &[String], width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in lines {
        let mut current = String::new();
        for word in line.split(' ') {
            let word = cut(word, width);
            let len = current.chars().count();
            if len > 0 && len + 1 + word.chars().count() > width {
                out.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(&word);
        }
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use upgrade_driver::{Failure, FailureKind, NodeResult, Progress, UpgradeStep};

    use super::*;
    use crate::present::Event;
    use crate::present::upgrade::STEPS;

    /// What a terminal shows of `events`: each line that scrolls, and the board at the marks.
    fn screen(events: &[Option<Progress>]) -> String {
        let mut board = Board::new(STEPS);
        let mut out = String::new();
        for event in events {
            let Some(event) = event else {
                out.push_str("---- board ----\n");
                for line in board.live(None) {
                    out.push_str(&format!("{line}\n"));
                }
                out.push_str("---------------\n");
                continue;
            };
            if board.apply(&event.on_bars()) == Some(Change::Line) {
                out.push_str(&format!("{}\n", event.line()));
            }
        }
        out
    }

    fn started(node: &str, step: UpgradeStep) -> Option<Progress> {
        Some(Progress::StepStarted {
            node: node.into(),
            step,
        })
    }

    fn finished(node: &str, result: NodeResult) -> Option<Progress> {
        Some(Progress::NodeFinished {
            node: node.into(),
            result,
            took_ms: 56_000,
        })
    }

    #[test]
    fn the_nodes_in_flight_stay_on_the_board_and_the_rest_are_counted() {
        let nodes: Vec<String> = (0..14).map(|i| format!("worker-a-{i}")).collect();
        // The counts say of how many (issue 33: "35 done, 7 in flight" of how many?).
        let mut events = vec![Some(Progress::Planned { nodes: 20 })];
        events.push(Some(Progress::BatchStarted {
            index: 0,
            group: "zone zone-a".into(),
            nodes: nodes.clone(),
        }));
        for node in &nodes {
            events.push(started(node, UpgradeStep::Cordon));
        }
        events.push(started(&nodes[0], UpgradeStep::Reboot));
        events.push(None);
        events.push(finished(&nodes[0], NodeResult::Upgraded));
        events.push(finished(
            &nodes[1],
            NodeResult::Failed(Failure {
                step: UpgradeStep::Upgrade,
                kind: FailureKind::Host,
                message: "the host upgrade exited 1".into(),
                exit_code: Some(1),
                log_tail: None,
            }),
        ));
        events.push(finished(
            &nodes[2],
            NodeResult::Skipped {
                why: "at v1.38.0 already".into(),
            },
        ));
        events.push(None);
        for node in &nodes[3..] {
            events.push(finished(node, NodeResult::Upgraded));
        }
        events.push(None);
        insta::with_settings!({
            snapshot_path => "../../tests/snapshots",
            prepend_module_to_snapshot => false,
        }, {
            insta::assert_snapshot!("board", screen(&events));
        });
    }

    #[test]
    fn a_stop_request_is_acknowledged_on_the_board() {
        let mut board = Board::new(STEPS);
        board.apply(&started("cp-0", UpgradeStep::Drain).unwrap().on_bars());
        board.stopping("stopping: no further node starts");
        assert_eq!(
            board.live(None),
            [
                "            cp-0 [====>                   ] 1/6 Drain...",
                "0 done, 1 in flight",
                "stopping: no further node starts",
            ]
        );
    }

    /// A node waiting on the pause switch is drawn PAUSED, counted as paused (not in flight),
    /// and the pause (who, when, why) stays on the board until no node waits on it.
    #[test]
    fn a_paused_node_looks_paused_until_the_switch_lifts() {
        let paused = |node: &str| {
            Some(Progress::Paused {
                node: node.into(),
                before: UpgradeStep::Drain,
                by: "alice".into(),
                at: Some("2026-01-01T00:03:00Z".into()),
                reason: "incident 42".into(),
            })
        };
        let resumed = |node: &str| {
            Some(Progress::Resumed {
                node: node.into(),
                before: UpgradeStep::Drain,
                waited_ms: 600_000,
            })
        };
        let events = [
            started("worker-a-0", UpgradeStep::Cordon),
            started("worker-a-1", UpgradeStep::Cordon),
            Some(Progress::StepFinished {
                node: "worker-a-0".into(),
                step: UpgradeStep::Cordon,
                took_ms: 100,
                message: "cordoned".into(),
            }),
            paused("worker-a-0"),
            None,
            resumed("worker-a-0"),
            started("worker-a-0", UpgradeStep::Drain),
            None,
        ];
        let screen = screen(&events);
        insta::with_settings!({
            snapshot_path => "../../tests/snapshots",
            prepend_module_to_snapshot => false,
        }, {
            insta::assert_snapshot!("board_paused", screen);
        });
        let (during, after) = screen.split_once("resumed after").unwrap();
        assert!(
            during.contains("worker-a-0 [====>") && during.contains("PAUSED before Drain\n"),
            "{during}"
        );
        assert!(during.contains("1 in flight, 1 paused"), "{during}");
        assert!(
            during.contains("PAUSED: paused by alice at 2026-01-01T00:03:00Z: incident 42"),
            "{during}"
        );
        assert!(!after.contains("PAUSED"), "{after}");
        assert!(after.contains("2 in flight"), "{after}");
    }

    /// A board of 14 nodes in flight, some of long names, one paused, a stop asked for, as
    /// a terminal of `width` x `height` shows it.
    fn fitted(width: usize, height: usize) -> Vec<String> {
        let mut board = Board::new(STEPS);
        board.apply(&Progress::Planned { nodes: 40 }.on_bars());
        let mut nodes: Vec<String> = (0..10).map(|i| format!("worker-a-{i}")).collect();
        nodes.extend((0..4).map(|i| format!("ip-10-0-12-{i}.eu-west-1.compute.internal")));
        for node in &nodes {
            board.apply(&started(node, UpgradeStep::Cordon).unwrap().on_bars());
        }
        board.apply(&started(&nodes[10], UpgradeStep::Reboot).unwrap().on_bars());
        board.apply(
            &Progress::Paused {
                node: nodes[1].clone(),
                before: UpgradeStep::Drain,
                by: "alice".into(),
                at: Some("2026-01-01T00:03:00Z".into()),
                reason: "incident 42".into(),
            }
            .on_bars(),
        );
        board.stopping("stopping: no further node starts");
        board.live(Some(TermSize { width, height }))
    }

    /// Fitted to a small terminal, no line wraps and the board leaves half the screen to the
    /// lines scrolling above it (issue 33: at 50x10 lines wrapped, long names were never
    /// cut); on a large one, long names are whole and aligned.
    #[test]
    fn the_board_fits_the_terminal() {
        for (width, height) in [(50, 10), (120, 40)] {
            let lines = fitted(width, height);
            let wide: Vec<&String> = (lines.iter())
                .filter(|l| l.chars().count() > width)
                .collect();
            assert!(wide.is_empty(), "{width}x{height}: {wide:#?}");
            assert!(lines.len() < height, "{width}x{height}: {lines:#?}");
            insta::with_settings!({
                snapshot_path => "../../tests/snapshots",
                prepend_module_to_snapshot => false,
            }, {
                insta::assert_snapshot!(format!("board_{width}x{height}"), lines.join("\n"));
            });
        }
        let small = fitted(50, 10);
        assert!(small[0].starts_with("ip-10-0-12-0.… [===="), "{small:#?}");
        assert!(small.join(" ").contains("(13 not drawn)"), "{small:#?}");
        let large = fitted(120, 40);
        assert!(
            large
                .iter()
                .any(|l| l.starts_with("ip-10-0-12-0.eu-west-1.compute.internal [")),
            "{large:#?}"
        );
    }

    /// The bars in natural order, whatever order the nodes started in.
    #[test]
    fn the_bars_are_in_natural_order() {
        let mut board = Board::new(STEPS);
        for node in ["worker-a-18", "worker-a-2", "worker-a-10"] {
            board.apply(&started(node, UpgradeStep::Cordon).unwrap().on_bars());
        }
        let names: Vec<String> = (board.live(None).iter())
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|w| w.starts_with("worker"))
            .collect();
        assert_eq!(names, ["worker-a-2", "worker-a-10", "worker-a-18"]);
    }

    #[test]
    fn a_rotation_node_between_phases_is_counted_not_drawn() {
        let mut board = Board::new(3);
        let bar = |message: &str, position, now| OnBars::Bar {
            node: "cp-0".into(),
            position: Position::At(position),
            message: Some(message.into()),
            now,
        };
        board.apply(&bar("Stage...", 0, Now::Working));
        board.apply(&bar("Stage done", 1, Now::Waiting));
        assert_eq!(board.live(None), ["0 done, 0 in flight, 1 between steps"]);
        board.apply(&bar("Issue...", 1, Now::Working));
        assert_eq!(board.live(None).len(), 2);
    }
}
