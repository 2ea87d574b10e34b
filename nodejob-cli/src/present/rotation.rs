//! The CA rotation (and its abort) for people: its progress lines, preview, summary and
//! failure texts.

use certs_driver::{
    CaEvent, CaStep, CaSummary, FenceEvent, GateReport, Next, NodeResult, Outcome, Preview,
    Progress, Report,
};

use super::retry::Invocation;
use super::{
    DriverError, End, ErrorKind, Event, Now, OnBars, Position, Severity, failed_at, lease_line,
    lease_severity, log_tail, natural, preview_head, seconds, shared_line, shared_on_bars, table,
    with_exit_code,
};

/// The steps a node's bar counts: stage, issue, finalize; an abort's one.
pub(crate) fn steps(abort: bool) -> u64 {
    if abort { 1 } else { 3 }
}

fn step_index(step: CaStep) -> u64 {
    match step {
        CaStep::Stage | CaStep::Abort => 1,
        CaStep::Issue => 2,
        _ => 3,
    }
}

/// `sha256:d4501ab39bde…`: enough of a fingerprint to tell CAs apart in a table.
fn short(fingerprint: &str) -> String {
    match fingerprint.get(..19) {
        Some(head) if fingerprint.len() > 19 => format!("{head}…"),
        _ => fingerprint.to_string(),
    }
}

impl Event for Progress {
    fn line(&self) -> String {
        if let Some(line) = shared_line(self) {
            return line;
        }
        match self {
            Progress::Lease(lease) => lease_line(lease),
            Progress::Driver(CaEvent::PhaseStarted { phase, nodes }) if nodes.is_empty() => {
                format!("phase {phase}: every node passed it already")
            }
            Progress::Driver(CaEvent::PhaseStarted { phase, nodes }) => {
                format!("phase {phase}: {}", nodes.join(", "))
            }
            Progress::Driver(CaEvent::NodeSkipped { node, step, why }) => {
                format!("{node}: {step} skipped, {why}")
            }
            Progress::StepStarted { node, step } => format!("{node}: {step}..."),
            Progress::StepFinished {
                node,
                step,
                took_ms,
                message,
            } => format!("{node}: {step} done in {} ({message})", seconds(*took_ms)),
            Progress::Driver(CaEvent::Gate(gate)) => gate_line(gate),
            Progress::Note {
                node: Some(node),
                message,
            } => format!("{node}: {message}"),
            Progress::Note {
                node: None,
                message,
            } => message.clone(),
            Progress::NodeFinished { node, result, .. } => {
                format!("{node}: {}", result_text(result))
            }
            Progress::Stopping { why } => format!("no further node starts: {why}"),
            other => format!("{other:?}"),
        }
    }

    fn severity(&self) -> Severity {
        match self {
            Progress::Lease(lease) => lease_severity(lease),
            Progress::Driver(CaEvent::Gate(gate)) if !gate.passed() => Severity::Warning,
            Progress::NodeFinished {
                result: NodeResult::Failed(_) | NodeResult::Disagrees { .. },
                ..
            } => Severity::Error,
            Progress::Stopping { .. } => Severity::Warning,
            _ => Severity::Info,
        }
    }

    fn on_bars(&self) -> OnBars {
        let bar = |node: &String, position, message, now| OnBars::Bar {
            node: node.clone(),
            position,
            message,
            now,
        };
        if let Some(on_bars) = shared_on_bars(self) {
            return on_bars;
        }
        match self {
            Progress::StepStarted { node, step } => bar(
                node,
                Position::At(step_index(*step) - 1),
                Some(format!("{step}...")),
                Now::Working,
            ),
            Progress::StepFinished { node, step, .. } => bar(
                node,
                Position::At(step_index(*step)),
                Some(format!("{step} done")),
                Now::Waiting,
            ),
            Progress::Driver(CaEvent::NodeSkipped { node, step, .. }) => {
                bar(node, Position::At(step_index(*step)), None, Now::Waiting)
            }
            Progress::NodeFinished { node, result, .. } => bar(
                node,
                if matches!(result, NodeResult::Rotated | NodeResult::Restored) {
                    Position::Full
                } else {
                    Position::Keep
                },
                Some(match result {
                    NodeResult::Rotated => "rotated".to_string(),
                    NodeResult::Restored => "restored".into(),
                    NodeResult::Failed(f) => format!("FAILED at {}", f.step),
                    NodeResult::Disagrees { gate, .. } => format!("DISAGREES at {gate}"),
                    NodeResult::Interrupted { step, .. } => format!("stopped before {step}"),
                }),
                Now::Ended(match result {
                    NodeResult::Rotated | NodeResult::Restored => End::Done,
                    NodeResult::Failed(_) | NodeResult::Disagrees { .. } => End::Failed,
                    NodeResult::Interrupted { .. } => End::Stopped,
                }),
            ),
            Progress::Lease(FenceEvent::Renewed { .. }) => OnBars::Nothing,
            _ => OnBars::Line,
        }
    }
}

fn gate_line(gate: &GateReport) -> String {
    if gate.passed() {
        let issuers: std::collections::BTreeSet<&str> =
            gate.nodes.iter().map(|n| n.issuer.as_str()).collect();
        let issuers: Vec<String> = issuers.into_iter().map(short).collect();
        format!(
            "gate {}: passed, {} node(s) agree (issued by {})",
            gate.gate,
            gate.nodes.len(),
            issuers.join(", ")
        )
    } else {
        let who: Vec<String> = (gate.disagreements.iter())
            .map(|d| format!("{} ({})", d.node, d.what))
            .collect();
        format!("gate {}: FAILED: {}", gate.gate, who.join("; "))
    }
}

fn result_text(result: &NodeResult) -> String {
    match result {
        NodeResult::Rotated => "rotated: trusts the new CA alone, which issues its leaves".into(),
        NodeResult::Restored => "restored: the new CA is not trusted".into(),
        NodeResult::Failed(f) => failed_at(f.step, f.exit_code, &f.message),
        NodeResult::Disagrees { gate, what } => format!("DISAGREES at the gate {gate}: {what}"),
        NodeResult::Interrupted { step, why } => format!("stopped before {step}: {why}"),
    }
}

/// A rotation's preview, a line each: the Lease, what each node last reported, the next phase
/// and where, who disagrees. `rotate-ca --preview` prints it; the MCP tool `rotate_ca_preview`
/// answers it.
/// The new CA's certificate as a person checks it: subject, issuer, validity, fingerprint;
/// then a warning when it expires soon.
pub(crate) fn new_ca(ca: &CaSummary) -> Vec<String> {
    let issuer = if ca.issuer == ca.subject {
        "self-signed".to_string()
    } else {
        format!("issued by {}", ca.issuer)
    };
    let mut lines = vec![
        format!("new CA: {} ({issuer})", ca.subject),
        format!(
            "  valid from {} to {} ({} days left by the cluster's clock)",
            ca.not_before, ca.not_after, ca.days_left
        ),
        format!("  fingerprint {}", ca.fingerprint),
    ];
    if let Some(warning) = expiry_warning(ca) {
        lines.push(warning);
    }
    lines
}

/// `warning: ...` when the new CA expires within [`certs_driver::CA_EXPIRY_WARNING`].
pub(crate) fn expiry_warning(ca: &CaSummary) -> Option<String> {
    ca.expires_soon.then(|| {
        format!(
            "warning: the new CA expires in {} days ({}): the leaves issued from it expire with \
             it, so the cluster will need another rotation by then; prefer a CA valid for longer",
            ca.days_left, ca.not_after
        )
    })
}

///
/// With `abort`, the preview of `rotate-ca --abort`: the same nodes, then instead of the next
/// phase what an abort would do: refused while `issue` has begun anywhere in the cluster (each
/// node with what shows it), else the staged CA removed from the plan's nodes.
/// When the "new" CA is the one the nodes are on now (each that reported is idle, issued by
/// it): a warning, as a rotation to it only re-issues every node's certificates from the same
/// CA and restarts their components; `None` otherwise.
fn current_ca(preview: &Preview) -> Option<String> {
    let reported: Vec<_> = (preview.nodes.iter())
        .filter_map(|n| n.reported.as_ref())
        .collect();
    let current = !reported.is_empty()
        && reported.iter().all(|s| {
            s.phase == certs_driver::CaPhase::Idle && s.issuer.to_string() == preview.target
        });
    current.then(|| {
        format!(
            "WARNING: {} is the CA the nodes are on now (each that reported is idle and issued \
             by it): a rotation to it re-issues every node's certificates from the same CA and \
             restarts their components, for nothing; is --new-ca the new CA's file?",
            preview.target
        )
    })
}

pub(crate) fn preview(preview: &Preview, abort: bool) -> String {
    let operation = match abort {
        true => format!("rotate-ca --abort of {}", preview.target),
        false => format!("rotate-ca to {}", preview.target),
    };
    let mut lines = preview_head(&operation, preview.lease.as_deref(), &preview.not_now);
    lines.extend(new_ca(&preview.ca));
    for node in &preview.nodes {
        let role = if node.control_plane {
            " (control plane)"
        } else {
            ""
        };
        lines.push(match (&node.reported, &node.unreadable) {
            (Some(status), _) => format!(
                "{}{role}: {} (reported at {})",
                node.name,
                status.describe(),
                node.at.as_deref().unwrap_or("?")
            ),
            (None, Some(why)) => format!("{}{role}: record unreadable: {why}", node.name),
            (None, None) => format!("{}{role}: never reported to a rotation", node.name),
        });
    }
    if abort {
        lines.push(abort_line(preview));
        return lines.join("\n") + "\n";
    }
    if let Some(line) = current_ca(preview) {
        lines.push(line);
    }
    lines.push(match &preview.next {
        Next::Unknown { unreported } => format!(
            "next: a run of this rotation began, so the next first reads every node's \
             `carotate status`, then decides (never reported: {})",
            unreported.join(", ")
        ),
        Next::Phase {
            phase: CaStep::Stage,
            nodes,
        } if preview.nodes.iter().any(|n| n.reported.is_none()) => format!(
            "next: Stage on {} (no run of this rotation has begun: each node is read by its \
             stage)",
            nodes.join(", ")
        ),
        Next::Phase { phase, nodes } => format!("next: {phase} on {}", nodes.join(", ")),
        Next::Nothing => {
            "next: nothing; every node reports the new CA alone (a run checks the last gate)".into()
        }
    });
    for d in &preview.disagreements {
        lines.push(format!("DISAGREES {}: {}", d.node, d.what));
    }
    if !preview.outside_plan.is_empty() {
        lines.push(format!(
            "outside the plan: {}: a rotation is refused (a CA is cluster-wide: it must cover \
             every node of the cluster); an abort is not",
            preview.outside_plan.join(", ")
        ));
    }
    lines.join("\n") + "\n"
}

/// What `rotate-ca --abort` would do, as its preview says it.
fn abort_line(preview: &Preview) -> String {
    if preview.issue_begun.is_empty() {
        let nodes: Vec<&str> = preview.nodes.iter().map(|n| n.name.as_str()).collect();
        return format!(
            "abort: would remove the staged CA from {}: `issue` has begun on no node, so they \
             are then as before the rotation",
            nodes.join(", ")
        );
    }
    format!(
        "abort: refused: `carotate issue` has begun on {}: leaves issued by the new CA cannot \
         be taken back, so only forward is safe; run the rotation to its end",
        preview
            .issue_begun
            .iter()
            .map(|(node, why)| format!("{node} ({why})"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The summary table: node, its phase when the run began and when the run last read it, how
/// it ended, the steps run on it, their duration; then the totals.
pub(crate) fn summary(report: &Report, abort: bool) -> String {
    let mut rows =
        vec![["NODE", "BEFORE", "LAST READ", "RESULT", "STEPS", "DURATION"].map(String::from)];
    for n in natural(&report.nodes, |n| n.name.as_str()) {
        let phase = |s: &Option<certs_driver::CaStatus>| {
            s.as_ref()
                .map_or_else(|| "-".to_string(), |s| s.phase.to_string())
        };
        let result = match &n.result {
            None => "not finished".to_string(),
            Some(NodeResult::Rotated) => "rotated".into(),
            Some(NodeResult::Restored) => "restored".into(),
            Some(NodeResult::Failed(f)) => format!("failed at {}", f.step),
            Some(NodeResult::Disagrees { gate, .. }) => format!("disagrees at {gate}"),
            Some(NodeResult::Interrupted { step, .. }) => format!("stopped before {step}"),
        };
        let steps: Vec<&str> = n.steps.iter().map(|(s, _)| s.as_str()).collect();
        rows.push([
            n.name.clone(),
            phase(&n.before),
            phase(&n.after),
            result,
            if steps.is_empty() {
                "-".into()
            } else {
                steps.join(", ")
            },
            match n.took_ms() {
                0 => "-".into(),
                ms => seconds(ms),
            },
        ]);
    }
    let mut out = table(&rows);
    let t = &report.totals;
    let done = if abort { "restored" } else { "rotated" };
    let done_count = if abort { t.restored } else { t.rotated };
    out.push_str(&format!(
        "{done_count} {done}, {} failed, {} disagreed, {} stopped, {} not finished; {} steps in {}; \
         {} {}; {}\n",
        t.failed,
        t.disagreed,
        t.interrupted,
        t.unfinished,
        t.steps,
        seconds(t.took_ms),
        if abort { "removed" } else { "to" },
        report.target,
        match &report.outcome {
            Outcome::Done => "done".to_string(),
            Outcome::Failed { .. } => "FAILED".into(),
            Outcome::Stopped { why } => format!("stopped: {why}"),
            Outcome::Paused { why } => format!("PAUSED: {why}"),
        }
    ));
    out
}

/// Each node that failed or disagreed, a line each; with where to look when `plan` is given.
fn failures(report: &Report, plan: Option<&certs_driver::Plan>) -> Vec<String> {
    let mut lines = Vec::new();
    for n in &report.nodes {
        match &n.result {
            Some(NodeResult::Failed(f)) => {
                lines.push(format!(
                    "node {} failed at {}{}: {}",
                    n.name,
                    f.step,
                    with_exit_code(f.exit_code),
                    f.message
                ));
                if let Some(plan) = plan {
                    if let Some(tail) = f.log_tail.as_deref().filter(|t| !t.is_empty()) {
                        lines.push(log_tail(tail));
                    }
                    lines.push(format!(
                        "  look at: kubectl -n {} logs job/{}; kubectl describe node {}",
                        plan.spec().namespace,
                        plan.job_name(f.step, &n.name),
                        n.name
                    ));
                }
            }
            Some(NodeResult::Disagrees { gate, what }) => {
                lines.push(format!(
                    "node {} disagrees at the gate {gate}: {what}",
                    n.name
                ));
                if plan.is_some() {
                    lines.push(format!(
                        "  look at: kubectl describe node {} (its {} annotation and its \
                         NodejobCa Events)",
                        n.name,
                        certs_driver::LAST_STATUS
                    ));
                }
            }
            _ => {}
        }
    }
    lines
}

/// Why the command failed, when the run did not end done: for a failure, each node that
/// failed or disagreed (and where to look) and how to retry; for a stop, why and how to
/// resume. `None` when done.
///
/// The retry is the command as it was run (`invocation`), whole: a rotation covers every node
/// of the cluster, so it is not narrowed to the failed ones.
pub(crate) fn ended(
    report: &Report,
    plan: &certs_driver::Plan,
    invocation: &Invocation,
) -> Option<String> {
    match &report.outcome {
        Outcome::Done => None,
        Outcome::Failed { retry, .. } => {
            let mut lines = failures(report, Some(plan));
            lines.push(format!("retry: {}", invocation.as_run()));
            lines.push(format!("  ({})", invocation.rerun_finds(retry)));
            Some(lines.join("\n"))
        }
        Outcome::Stopped { why } => Some(format!(
            "stopped: {why}\n{}",
            invocation.rerun_finds(
                "the nodes keep the rotation's state: run the same command again to resume"
            )
        )),
        Outcome::Paused { why } => Some(format!(
            "paused: {why}\n{}",
            invocation.rerun_finds(
                "the nodes keep the rotation's state: once resumed (`nodejob resume`), run the \
                 same command again to carry on"
            )
        )),
    }
}

/// The MCP tools `rotate_ca` and `rotate_ca_abort`'s answer: the summary, each node that
/// failed or disagreed, and how to retry or resume.
pub(crate) fn answer(report: &Report, abort: bool) -> String {
    let mut text = summary(report, abort);
    for line in failures(report, None) {
        text.push_str(&line);
        text.push('\n');
    }
    match &report.outcome {
        Outcome::Failed { retry, .. } => text.push_str(&format!(
            "retry: call {} with the same arguments, then {} with the preview_token it returns  \
             ({retry})\n",
            "rotate_ca_preview",
            if abort {
                "rotate_ca_abort"
            } else {
                "rotate_ca"
            },
        )),
        Outcome::Stopped { .. } => text
            .push_str("the nodes keep the rotation's state: preview and run it again to resume\n"),
        Outcome::Paused { .. } => text.push_str(
            "the nodes keep the rotation's state: once resumed (the tool resume), preview and \
             run it again to carry on\n",
        ),
        Outcome::Done => {}
    }
    text
}

/// Whether `event` is the start of the `issue` phase (where a simulated rotation stops to
/// leave a CA staged for `--abort`).
pub(crate) fn issue_begins(event: &Progress) -> bool {
    matches!(
        event,
        Progress::Driver(CaEvent::PhaseStarted {
            phase: CaStep::Issue,
            ..
        })
    )
}

/// Whether the run failed.
pub(crate) fn failed(report: &Report) -> bool {
    matches!(report.outcome, Outcome::Failed { .. })
}

/// How a driver error ends the operation.
pub(crate) fn error(e: &certs_driver::Error) -> DriverError {
    let kind = match e {
        certs_driver::Error::Plan(p) => ErrorKind::Plan {
            field: p.field,
            rule: p.rule.clone(),
        },
        certs_driver::Error::Core(nodejob_core::Error::LeaseHeld { .. }) => ErrorKind::LeaseHeld,
        certs_driver::Error::Selecting(
            certs_driver::Selecting::NotFound { .. } | certs_driver::Selecting::NoneSelected { .. },
        ) => ErrorKind::NoSuchNode,
        _ => ErrorKind::Failed,
    };
    DriverError {
        kind,
        text: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use certs_driver::{CaPhase, CaStatus, CaSummary, Fingerprint, Next, NodePreview, Preview};

    use super::*;

    /// Issue 33, low item: `rotate-ca --preview` given the CA the nodes are on now (the
    /// cluster's current CA, not a new one) says so, where it said nothing.
    #[test]
    fn a_preview_to_the_ca_the_nodes_are_on_warns() {
        let fp = |c: char| format!("sha256:{}", c.to_string().repeat(64));
        let node = |name: &str, phase, issuer: &str| NodePreview {
            name: name.into(),
            control_plane: false,
            reported: Some(CaStatus {
                phase,
                trusted: BTreeSet::from([Fingerprint::parse(issuer).unwrap()]),
                issuer: Fingerprint::parse(issuer).unwrap(),
            }),
            at: Some("2026-01-01T00:00:00Z".into()),
            unreadable: None,
            in_flight: Vec::new(),
        };
        let preview = |nodes| Preview {
            target: fp('a'),
            ca: CaSummary {
                subject: "CN=ca".into(),
                issuer: "CN=ca".into(),
                not_before: "2026-01-01".into(),
                not_after: "2036-01-01".into(),
                fingerprint: fp('a'),
                days_left: 3650,
                expires_soon: false,
            },
            nodes,
            next: Next::Nothing,
            disagreements: Vec::new(),
            lease: None,
            not_now: Vec::new(),
            issue_begun: Vec::new(),
            outside_plan: Vec::new(),
        };
        let on_it = preview(vec![
            node("a-0", CaPhase::Idle, &fp('a')),
            node("a-1", CaPhase::Idle, &fp('a')),
        ]);
        assert!(
            current_ca(&on_it).is_some_and(|w| w.contains("is the CA the nodes are on now")),
            "{on_it:?}"
        );
        let new = preview(vec![node("a-0", CaPhase::Idle, &fp('b'))]);
        assert_eq!(current_ca(&new), None);
        let half = preview(vec![
            node("a-0", CaPhase::Idle, &fp('a')),
            node("a-1", CaPhase::Idle, &fp('b')),
        ]);
        assert_eq!(current_ca(&half), None);
    }
}
