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

    /// The board's lines: a bar per node in flight or paused (at most [`MAX_BARS`]), then the
    /// counts, then the pause the nodes wait on while any waits, then the stop's
    /// acknowledgement if one was asked for.
    pub(crate) fn live(&self) -> Vec<String> {
        // In natural order (`worker-a-2` before `worker-a-10`), as the summary lists them.
        let drawn: Vec<&Row> = (natural(&self.nodes, |r| r.node.as_str()).into_iter())
            .filter(|r| r.busy || r.paused)
            .collect();
        let mut lines: Vec<String> = (drawn.iter().take(MAX_BARS))
            .map(|r| {
                let filled = usize::try_from(r.position * BAR_WIDTH as u64 / self.steps.max(1))
                    .unwrap_or(BAR_WIDTH)
                    .min(BAR_WIDTH);
                let head = if filled < BAR_WIDTH { ">" } else { "" };
                let bar = format!("{}{head}", "=".repeat(filled));
                format!(
                    "{:>16} [{bar:<BAR_WIDTH$}] {}/{} {}",
                    r.node, r.position, self.steps, r.message
                )
            })
            .collect();
        let busy: Vec<&Row> = drawn.iter().copied().filter(|r| !r.paused).collect();
        let paused = drawn.len() - busy.len();
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
        counts.push(format!("{} in flight", busy.len()));
        if paused > 0 {
            counts.push(format!("{paused} paused"));
        }
        if drawn.len() > MAX_BARS {
            let last = counts.len() - 1;
            counts[last].push_str(&format!(" ({} not drawn)", drawn.len() - MAX_BARS));
        }
        let waiting = self.nodes.len() - drawn.len();
        if waiting > 0 {
            counts.push(format!("{waiting} between steps"));
        }
        lines.push(counts.join(", "));
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
                for line in board.live() {
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
            board.live(),
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

    /// The bars in natural order, whatever order the nodes started in.
    #[test]
    fn the_bars_are_in_natural_order() {
        let mut board = Board::new(STEPS);
        for node in ["worker-a-18", "worker-a-2", "worker-a-10"] {
            board.apply(&started(node, UpgradeStep::Cordon).unwrap().on_bars());
        }
        let names: Vec<String> = (board.live().iter())
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
        assert_eq!(board.live(), ["0 done, 0 in flight, 1 between steps"]);
        board.apply(&bar("Issue...", 1, Now::Working));
        assert_eq!(board.live().len(), 2);
    }
}
