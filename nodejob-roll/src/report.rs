//! [`Report`]: what a run of either driver ends with, generic over the driver's line per node
//! (`N`), its totals (`T`, counted from the nodes) and what only it adds (`X`, inline: the
//! rotation's gates).

use serde::Serialize;

use crate::events::Outcome;
use crate::fence::LeaseHistory;

/// One node's line in a [`Report`]: the driver's own shape, found by its name.
pub trait NodeLine {
    /// The node.
    fn name(&self) -> &str;
}

/// The totals of a [`Report`], counted from its nodes as they stand.
pub trait Totals<N>: Default {
    /// The totals of `nodes`, in a run of `took_ms` milliseconds of the backend's clock.
    fn count(nodes: &[N], took_ms: u64) -> Self;
}

/// Nothing of a driver's own in its [`Report`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Nothing {}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report<N, T, X = Nothing> {
    /// What the run went to: a version, a CA's fingerprint.
    pub target: String,
    /// Every node of the plan, in the order of the run.
    pub nodes: Vec<N>,
    /// What only this driver reports, serialised inline (the rotation's `gates`).
    #[serde(flatten)]
    pub own: X,
    /// How it ended.
    pub outcome: Outcome,
    /// The totals.
    pub totals: T,
    /// The Lease in this run: acquired (how), renewals counted, released or lost; `None`
    /// before the run closed.
    pub lease: Option<LeaseHistory>,
}

impl<N: NodeLine, T: Totals<N>, X> Report<N, T, X> {
    /// A report of `nodes` not yet run: done so far, no Lease history.
    pub fn new(target: String, nodes: Vec<N>, own: X) -> Self {
        Report {
            target,
            nodes,
            own,
            outcome: Outcome::Done,
            totals: T::default(),
            lease: None,
        }
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&N> {
        self.nodes.iter().find(|n| n.name() == name)
    }

    /// Closes it: how it ended, the Lease's history, the totals counted over a run of
    /// `took_ms`.
    pub fn close(&mut self, outcome: Outcome, lease: LeaseHistory, took_ms: u64) {
        self.outcome = outcome;
        self.lease = Some(lease);
        self.totals = T::count(&self.nodes, took_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    struct Line {
        name: String,
        done: bool,
    }

    impl NodeLine for Line {
        fn name(&self) -> &str {
            &self.name
        }
    }

    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
    struct Count {
        done: usize,
        took_ms: u64,
    }

    impl Totals<Line> for Count {
        fn count(nodes: &[Line], took_ms: u64) -> Self {
            Count {
                done: nodes.iter().filter(|n| n.done).count(),
                took_ms,
            }
        }
    }

    #[derive(Clone, Debug, PartialEq, Eq, Serialize)]
    struct Gates {
        gates: Vec<u8>,
    }

    fn lines() -> Vec<Line> {
        ["a", "b"]
            .map(|name| Line {
                name: name.into(),
                done: name == "b",
            })
            .to_vec()
    }

    #[test]
    fn a_report_finds_its_nodes_and_counts_them_when_closed() {
        let mut report: Report<Line, Count> = Report::new("v2".into(), lines(), Nothing {});
        assert_eq!(report.node("b").map(|n| n.done), Some(true));
        assert!(report.node("c").is_none());
        assert_eq!(report.totals, Count::default());
        let lease = crate::LeaseHistory {
            name: "ns/l".into(),
            epoch: 2,
            acquired: "taken over from x".into(),
            renewals: 1,
            ended: crate::LeaseEnd::Lost {
                why: "held by y".into(),
            },
        };
        report.close(Outcome::Done, lease.clone(), 7);
        assert_eq!(
            report.totals,
            Count {
                done: 1,
                took_ms: 7
            }
        );
        assert_eq!(report.lease.as_ref(), Some(&lease));
        assert_eq!(
            serde_json::to_string(&lease).unwrap(),
            r#"{"name":"ns/l","epoch":2,"acquired":"taken over from x","renewals":1,"ended":{"how":"lost","why":"held by y"}}"#
        );
    }

    #[test]
    fn a_drivers_own_fields_serialise_inline_in_their_place_and_nothing_adds_none() {
        let plain: Report<Line, Count> = Report::new("v2".into(), Vec::new(), Nothing {});
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"target":"v2","nodes":[],"outcome":{"outcome":"done"},"totals":{"done":0,"took_ms":0},"lease":null}"#
        );
        let gated: Report<Line, Count, Gates> =
            Report::new("v2".into(), Vec::new(), Gates { gates: vec![1] });
        assert_eq!(
            serde_json::to_string(&gated).unwrap(),
            r#"{"target":"v2","nodes":[],"gates":[1],"outcome":{"outcome":"done"},"totals":{"done":0,"took_ms":0},"lease":null}"#
        );
    }
}
