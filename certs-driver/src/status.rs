//! What a node reports: `stratum carotate status` prints one JSON line, `{"phase": "…",
//! "trusted": ["sha256:…", …], "issuer": "sha256:…"}`, read strictly by [`parse_status`]. The
//! state of a rotation is this, on every node: never a local file.

use std::collections::BTreeSet;

use nodejob_core::quote;
use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;

/// Where a node stands in a rotation, as it reports it: the host protocol's word.
pub use nodejob_host::stratum::CaPhase;

/// A node's trust, as `carotate status` reported it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CaStatus {
    /// Its phase.
    pub phase: CaPhase,
    /// The CAs it trusts.
    pub trusted: BTreeSet<Fingerprint>,
    /// The CA its leaf certificates chain to.
    pub issuer: Fingerprint,
}

impl CaStatus {
    /// Whether it trusts `fp`.
    pub fn trusts(&self, fp: &Fingerprint) -> bool {
        self.trusted.contains(fp)
    }

    /// Whether its leaves chain to a CA it trusts.
    pub fn chain_trusted(&self) -> bool {
        self.trusted.contains(&self.issuer)
    }

    /// The CAs it trusts besides `new`.
    pub fn others(&self, new: &Fingerprint) -> BTreeSet<Fingerprint> {
        self.trusted.iter().filter(|t| *t != new).cloned().collect()
    }

    /// Whether `carotate issue` has begun on it toward `new`: `new` issues its leaves, or it is
    /// `issued` or `finalized` while trusting `new` (an issue whose leaves chain elsewhere). A
    /// node `finalized` by an earlier rotation, not trusting `new`, has not.
    pub fn issue_begun(&self, new: &Fingerprint) -> bool {
        &self.issuer == new
            || (matches!(self.phase, CaPhase::Issued | CaPhase::Finalized) && self.trusts(new))
    }

    /// `phase, trusting [a, b], issued by c`.
    pub fn describe(&self) -> String {
        let trusted: Vec<&str> = self.trusted.iter().map(Fingerprint::as_str).collect();
        format!(
            "{}, trusting [{}], issued by {}",
            self.phase,
            trusted.join(", "),
            self.issuer
        )
    }
}

/// `carotate status` said something other than its one JSON line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "node {node}: `carotate status` printed {line:?}, not one JSON line {{\"phase\": \
     \"idle|staged|issued|finalized\", \"trusted\": [\"sha256:…\"], \"issuer\": \"sha256:…\"}}: {why}"
)]
pub struct StatusError {
    /// The node.
    pub node: String,
    /// What it printed: the whole log, as [`quote`] quotes host output (at most
    /// [`QUOTE_LIMIT`](nodejob_core::QUOTE_LIMIT) characters of it).
    pub line: String,
    /// What is wrong with it. It names a field rather than quoting it again (the line holds
    /// it); what the JSON reader says of it is quoted as host output too.
    pub why: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    phase: CaPhase,
    trusted: Vec<String>,
    issuer: String,
}

/// Reads what `carotate status` printed on `node`: exactly one line (a final newline aside)
/// holding exactly the three fields, each fingerprint `sha256:` and 64 lowercase hex digits,
/// no fingerprint trusted twice. Anything else is a [`StatusError`] quoting it, once: a host
/// that prints a megabyte makes a message of the quotation's size, not a megabyte.
pub fn parse_status(node: &str, log: &str) -> Result<CaStatus, StatusError> {
    let fail = |why: String| StatusError {
        node: node.to_string(),
        line: quote(log),
        why,
    };
    let line = log.strip_suffix('\n').unwrap_or(log);
    if line.contains('\n') {
        return Err(fail(format!("{} lines", line.lines().count())));
    }
    // serde_json's message may hold a value of the line (`unknown variant ...`): host output.
    let wire: Wire = serde_json::from_str(line).map_err(|e| fail(quote(&e.to_string())))?;
    // A field is named, not quoted again: the line quotes it (as much of it as is quoted).
    let fingerprint = |field: &str, s: &str| {
        Fingerprint::parse(s).ok_or_else(|| {
            fail(format!(
                "{field} is not a sha256: fingerprint ({} characters)",
                s.chars().count()
            ))
        })
    };
    let mut trusted = BTreeSet::new();
    for (i, t) in wire.trusted.iter().enumerate() {
        let fp = fingerprint(&format!("trusted[{i}]"), t)?;
        if !trusted.insert(fp) {
            return Err(fail(format!("{t} is trusted twice")));
        }
    }
    Ok(CaStatus {
        phase: wire.phase,
        trusted,
        issuer: fingerprint("issuer", &wire.issuer)?,
    })
}

/// What a phase's host Job (`carotate stage|issue|finalize|abort`, exit 0) printed about the
/// node: its first line is the status line before the phase and its last line the one after
/// it, as `carotate status` prints them; an `issue` given `--expect` prints its verdict line,
/// `{"verify": N, "expect": ["sha256:…", …]}`, just before the last. Each is `None` when the
/// output does not begin or end so (a host that predates the protocol, a log that could not be
/// read): the driver then asks `carotate status` (strictly), or `carotate verify`, as a Job of
/// its own, for what comes after; what came before it then takes from what the node reports
/// after.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhaseOutput {
    /// Where the node stood as the phase started.
    pub before: Option<CaStatus>,
    /// Where the node stands after the phase.
    pub status: Option<CaStatus>,
    /// What `carotate verify` said after `issue`.
    pub verdict: Option<Verdict>,
}

/// `carotate verify`'s answer as an `issue --expect` printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Its exit status: 0 verified, 1 an error, 3 not yet.
    pub exit_code: i32,
    /// What it expected: the CA the leaves chain to, then the rest of the trusted set.
    pub expect: Vec<Fingerprint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerdictWire {
    verify: i32,
    expect: Vec<String>,
}

/// Reads a phase's output on `node` (see [`PhaseOutput`]): its first line (of more than one)
/// and its last as [`parse_status`] reads a status, the one before the last as a verdict.
/// Nothing here fails: what is not there is asked for again.
pub fn parse_phase_output(node: &str, log: &str) -> PhaseOutput {
    let mut head = log.lines();
    let before = match (head.next(), head.next()) {
        (Some(first), Some(_)) => parse_status(node, first).ok(),
        _ => None,
    };
    let mut lines = log.lines().rev();
    let Some(status) = lines.next().and_then(|l| parse_status(node, l).ok()) else {
        return PhaseOutput {
            before,
            ..PhaseOutput::default()
        };
    };
    let verdict = lines.next().and_then(|line| {
        let wire: VerdictWire = serde_json::from_str(line).ok()?;
        let expect = (wire.expect.iter())
            .map(|e| Fingerprint::parse(e))
            .collect::<Option<Vec<_>>>()?;
        Some(Verdict {
            exit_code: wire.verify,
            expect,
        })
    });
    PhaseOutput {
        before,
        status: Some(status),
        verdict,
    }
}
