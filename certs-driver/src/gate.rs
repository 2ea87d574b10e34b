//! The gates between phases: what every node reports, side by side, and who disagrees with
//! what. Pure: [`check`] takes the statuses (and the `verify` answers) and names each node
//! that disagrees.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

use crate::fingerprint::Fingerprint;
use crate::phase::CaStep;
use crate::status::{CaPhase, CaStatus};

/// A gate of the rotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// Before anything: every node's leaves chain to a CA it trusts, and the nodes agree on
    /// the old trust.
    Start,
    /// Before `issue`: every node trusts the new CA too.
    BeforeIssue,
    /// Before `finalize`: every node's leaves chain to the new CA and `carotate verify` says
    /// so, with the trusted set expected.
    BeforeFinalize,
    /// After `finalize`: every node trusts exactly one CA, the new one, which issues its
    /// leaves.
    AfterFinalize,
    /// After an abort: no node trusts the new CA; the old one issues every node's leaves.
    AfterAbort,
}

impl Gate {
    /// `start`, `before issue`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Gate::Start => "start",
            Gate::BeforeIssue => "before issue",
            Gate::BeforeFinalize => "before finalize",
            Gate::AfterFinalize => "after finalize",
            Gate::AfterAbort => "after abort",
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One node at a gate: what it reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reported {
    /// The node.
    pub node: String,
    /// Its phase.
    pub phase: CaPhase,
    /// The CAs it trusts.
    pub trusted: Vec<Fingerprint>,
    /// The CA its leaves chain to.
    pub issuer: Fingerprint,
    /// `carotate verify`'s exit code, at [`Gate::BeforeFinalize`].
    pub verify: Option<i32>,
}

/// A node that disagrees, and with what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    /// The node.
    pub node: String,
    /// What it reports that it should not.
    pub what: String,
}

/// A gate as it was passed (or not): every node side by side, and the disagreements.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GateReport {
    /// Which gate.
    pub gate: Gate,
    /// Every node, in the rotation's order.
    pub nodes: Vec<Reported>,
    /// Each node that disagrees; empty: passed.
    pub disagreements: Vec<Disagreement>,
}

impl GateReport {
    /// Whether every node agrees.
    pub fn passed(&self) -> bool {
        self.disagreements.is_empty()
    }
}

/// The old trust the nodes agree on: the CAs other than `new` that most nodes still trusting
/// something other than `new` trust (ties: the first node's, in order). `None` when every node
/// trusts `new` alone.
pub fn old_trust(
    new: &Fingerprint,
    statuses: &[(String, CaStatus)],
) -> Option<BTreeSet<Fingerprint>> {
    let sets: Vec<BTreeSet<Fingerprint>> = statuses
        .iter()
        .map(|(_, s)| s.others(new))
        .filter(|o| !o.is_empty())
        .collect();
    let mut best: Option<(&BTreeSet<Fingerprint>, usize)> = None;
    for set in &sets {
        let count = sets.iter().filter(|s| *s == set).count();
        if best.is_none_or(|(_, c)| count > c) {
            best = Some((set, count));
        }
    }
    best.map(|(s, _)| s.clone())
}

/// The trusted set `carotate verify` is to expect on a node reporting `status` before
/// finalize: the new CA and the old trust, or the new CA alone on a node finalized already.
pub fn expected(
    new: &Fingerprint,
    status: &CaStatus,
    old: Option<&BTreeSet<Fingerprint>>,
) -> Vec<Fingerprint> {
    match old {
        Some(old) if !status.others(new).is_empty() => old.iter().cloned().collect(),
        _ => Vec::new(),
    }
}

/// The answer of `carotate verify` on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verified {
    /// Its exit code.
    Exit(i32),
    /// It gave none: why.
    Error(String),
}

/// Checks `gate` on every node's `statuses` (in order) with the `verify` answers (by index,
/// for [`Gate::BeforeFinalize`]): the report, nodes side by side and each disagreement.
pub fn check(
    gate: Gate,
    new: &Fingerprint,
    statuses: &[(String, CaStatus)],
    verify: &[Option<Verified>],
) -> GateReport {
    let old = old_trust(new, statuses);
    let list = |set: &BTreeSet<Fingerprint>| {
        set.iter()
            .map(Fingerprint::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut disagreements = Vec::new();
    let mut nodes = Vec::new();
    for (i, (node, status)) in statuses.iter().enumerate() {
        let answer = verify.get(i).cloned().flatten();
        nodes.push(Reported {
            node: node.clone(),
            phase: status.phase,
            trusted: status.trusted.iter().cloned().collect(),
            issuer: status.issuer.clone(),
            verify: match &answer {
                Some(Verified::Exit(code)) => Some(*code),
                _ => None,
            },
        });
        let mut what: Vec<String> = Vec::new();
        if !status.chain_trusted() {
            what.push(format!(
                "its leaves chain to {}, which it does not trust (it trusts [{}])",
                status.issuer,
                list(&status.trusted)
            ));
        }
        let others = status.others(new);
        let old_agrees = match (&old, gate) {
            (_, Gate::AfterFinalize | Gate::AfterAbort) => true,
            (Some(old), _) => others.is_empty() || &others == old,
            (None, _) => true,
        };
        if !old_agrees && let Some(old) = &old {
            what.push(format!(
                "it trusts [{}] besides the new CA where the other nodes trust [{}]",
                list(&others),
                list(old)
            ));
        }
        match gate {
            Gate::Start => {}
            Gate::BeforeIssue if !status.trusts(new) => {
                what.push(format!(
                    "it does not trust the new CA {new} (it trusts [{}])",
                    list(&status.trusted)
                ));
            }
            Gate::BeforeIssue => {}
            Gate::BeforeFinalize => {
                if &status.issuer != new {
                    what.push(format!(
                        "its leaves chain to {}, not to the new CA {new}",
                        status.issuer
                    ));
                }
                match answer {
                    Some(Verified::Exit(0)) => {}
                    Some(Verified::Exit(3)) => {
                        what.push("`carotate verify` says not yet (exit 3)".into())
                    }
                    Some(Verified::Exit(code)) => {
                        what.push(format!("`carotate verify` failed (exit {code})"))
                    }
                    Some(Verified::Error(why)) => {
                        what.push(format!("`carotate verify` gave no answer: {why}"))
                    }
                    // Not asked (a preview; a node whose report disagrees already).
                    None => {}
                }
            }
            Gate::AfterFinalize => {
                if !(&status.issuer == new && CaStep::Finalize.passed(status, new)) {
                    what.push(format!(
                        "it trusts [{}], issued by {}: not the new CA {new} alone",
                        list(&status.trusted),
                        status.issuer
                    ));
                }
            }
            Gate::AfterAbort => {
                if status.trusts(new) || &status.issuer == new {
                    what.push(format!(
                        "it still trusts or issues from the new CA {new} (trusting [{}], issued by {})",
                        list(&status.trusted),
                        status.issuer
                    ));
                }
            }
        }
        if !what.is_empty() {
            disagreements.push(Disagreement {
                node: node.clone(),
                what: what.join("; "),
            });
        }
    }
    GateReport {
        gate,
        nodes,
        disagreements,
    }
}
