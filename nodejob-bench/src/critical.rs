//! Where a roll's time went along its critical path: the batches run one after the other, so
//! a roll lasts as long as each batch's last node to finish, plus what passes between
//! batches. For each batch, that node's steps (as the driver's report times them), the wait
//! from the batch's start to its first step, and the gaps between its steps (the driver's own
//! reads and records between two steps); and the time outside every batch (the start, each
//! batch's admission, the end). Shared by the fake's roll ([`crate::roll`], virtual time) and
//! the real one ([`crate::hollow`], wall time), so the two split alike.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

/// One batch, its times from the roll's start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// Its nodes.
    pub nodes: Vec<String>,
    /// When it started.
    pub started: Duration,
    /// When each of its nodes started its first step.
    pub first_step: BTreeMap<String, Duration>,
    /// When each of its nodes finished.
    pub finished: BTreeMap<String, Duration>,
}

impl Span {
    /// A batch of `nodes` started at `at`.
    pub fn new(nodes: Vec<String>, at: Duration) -> Span {
        Span {
            nodes,
            started: at,
            ..Span::default()
        }
    }

    /// Notes, in the last batch of `spans` holding `node`, that it started a step at `at`.
    pub fn step_started(spans: &mut [Span], node: &str, at: Duration) {
        if let Some(s) = spans
            .iter_mut()
            .rev()
            .find(|s| s.nodes.iter().any(|n| n == node))
        {
            s.first_step.entry(node.to_string()).or_insert(at);
        }
    }

    /// Notes, in the last batch of `spans` holding `node`, that it finished at `at`.
    pub fn node_finished(spans: &mut [Span], node: &str, at: Duration) {
        if let Some(s) = spans
            .iter_mut()
            .rev()
            .find(|s| s.nodes.iter().any(|n| n == node))
        {
            s.finished.insert(node.to_string(), at);
        }
    }
}

/// A node's steps as the report tells them: each step's name and milliseconds, in order.
pub type Steps = Vec<(String, u64)>;

/// The label of the wait from a batch's start to its last node's first step.
pub const BEFORE: &str = "batch start -> its first step";
/// The label of the gaps between that node's steps.
pub const BETWEEN: &str = "between its steps";
/// The label of the time outside every batch.
pub const OUTSIDE: &str = "outside batches";

/// Seconds along the critical path, by step name, [`BEFORE`], [`BETWEEN`] and [`OUTSIDE`];
/// they add up to `wall`.
pub fn path(
    batches: &[Span],
    steps: &BTreeMap<String, Steps>,
    wall: Duration,
) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    let mut add = |what: &str, secs: f64| *out.entry(what.to_string()).or_default() += secs;
    let mut in_batches = Duration::ZERO;
    for batch in batches {
        // The node that finished last ends the batch.
        let Some((last, ended)) = batch.finished.iter().max_by_key(|(_, at)| **at) else {
            continue;
        };
        in_batches += ended.saturating_sub(batch.started);
        let first = batch.first_step.get(last).copied().unwrap_or(batch.started);
        add(BEFORE, first.saturating_sub(batch.started).as_secs_f64());
        let mut steps_ms = 0;
        for (name, ms) in steps.get(last).into_iter().flatten() {
            add(name, *ms as f64 / 1e3);
            steps_ms += ms;
        }
        let gaps = ended.saturating_sub(first).as_secs_f64() - steps_ms as f64 / 1e3;
        add(BETWEEN, gaps);
    }
    add(OUTSIDE, wall.saturating_sub(in_batches).as_secs_f64());
    out
}

/// Each node's steps in a report's JSON (`nodes[].steps`, pairs of name and milliseconds).
pub fn report_steps(report: &Value) -> BTreeMap<String, Steps> {
    (report["nodes"].as_array().into_iter().flatten())
        .filter_map(|n| {
            let steps = (n["steps"].as_array().into_iter().flatten())
                .filter_map(|s| Some((s[0].as_str()?.to_string(), s[1].as_u64()?)))
                .collect();
            Some((n["name"].as_str()?.to_string(), steps))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_nodes_steps_per_batch_and_the_rest_add_up_to_the_wall_time() {
        let s = |ms: u64| Duration::from_millis(ms);
        let steps: BTreeMap<String, Steps> = [
            (
                "a",
                vec![
                    ("Drain".to_string(), 4_000),
                    ("Upgrade".to_string(), 20_000),
                ],
            ),
            (
                "b",
                vec![
                    ("Drain".to_string(), 1_000),
                    ("Upgrade".to_string(), 21_000),
                ],
            ),
            (
                "c",
                vec![("Drain".to_string(), 0), ("Upgrade".to_string(), 22_000)],
            ),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
        let mut spans = vec![Span::new(vec!["a".into(), "b".into()], s(2_000))];
        Span::step_started(&mut spans, "a", s(2_500));
        Span::step_started(&mut spans, "b", s(3_000));
        Span::step_started(&mut spans, "b", s(4_000));
        Span::node_finished(&mut spans, "a", s(27_000));
        // b took fewer steps' time but finished last: its start and its gaps count.
        Span::node_finished(&mut spans, "b", s(28_000));
        spans.push(Span::new(vec!["c".into()], s(30_000)));
        Span::step_started(&mut spans, "c", s(30_000));
        Span::node_finished(&mut spans, "c", s(53_000));
        let got = path(&spans, &steps, s(55_000));
        assert_eq!(got["Drain"], 1.0);
        assert_eq!(got["Upgrade"], 43.0);
        assert_eq!(got[BEFORE], 1.0);
        // b: 25 s from its first step to its end, 22 s of steps; c: 23 s, 22 s.
        assert_eq!(got[BETWEEN], 4.0);
        assert_eq!(got[OUTSIDE], 6.0);
        assert_eq!(got.values().sum::<f64>(), 55.0);
    }
}
