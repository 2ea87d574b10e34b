//! The rolling upgrade for people: its progress lines, preview, summary and failure texts.

use upgrade_driver::{
    FenceEvent, NodeResult, Outcome, PodPlan, Preview, Progress, Report, Undrainable, UpgradeEvent,
    UpgradeStep,
};

use super::retry::{self, Invocation};
use super::{
    DriverError, End, ErrorKind, Event, Now, OnBars, Position, Severity, failed_at, lease_line,
    lease_severity, log_tail, natural, preview_head, seconds, shared_line, shared_on_bars, table,
    with_exit_code,
};

/// The steps of an upgrade a node's bar counts.
pub(crate) const STEPS: u64 = 6;

fn step_index(step: UpgradeStep) -> u64 {
    match step {
        UpgradeStep::Cordon => 1,
        UpgradeStep::Drain => 2,
        UpgradeStep::Upgrade => 3,
        UpgradeStep::Reboot => 4,
        UpgradeStep::Health => 5,
        UpgradeStep::Uncordon => 6,
        // Past the bar's end (it stays full): a soak follows the uncordon, when there is one.
        UpgradeStep::Soak => 7,
        // After a failure, wherever the bar stood: the bar keeps its place (see `on_bars`).
        UpgradeStep::Rollback => 0,
    }
}

impl Event for Progress {
    fn line(&self) -> String {
        if let Some(line) = shared_line(self) {
            return line;
        }
        match self {
            Progress::Lease(lease) => lease_line(lease),
            Progress::BatchStarted {
                index,
                group,
                nodes,
            } => format!("batch {} ({group}): {}", index + 1, nodes.join(", ")),
            Progress::Driver(UpgradeEvent::NodeSkipped { node, why }) => {
                format!("{node}: skipped, {why}")
            }
            Progress::StepStarted { node, step } => format!("{node}: {step}..."),
            Progress::StepFinished {
                node,
                step,
                took_ms,
                message,
            } => format!("{node}: {step} done in {} ({message})", seconds(*took_ms)),
            Progress::Driver(UpgradeEvent::PodsEvicted { node, pods }) if pods.is_empty() => {
                format!("{node}: no pod to evict")
            }
            Progress::Driver(UpgradeEvent::PodsEvicted { node, pods }) => {
                format!("{node}: evicted {}", pods.join(", "))
            }
            Progress::Driver(UpgradeEvent::Soaking { node, left_ms }) => {
                format!("{node}: soaking, {} left", seconds(*left_ms))
            }
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
            _ => format!("{self:?}"),
        }
    }

    fn severity(&self) -> Severity {
        match self {
            Progress::Lease(lease) => lease_severity(lease),
            Progress::NodeFinished {
                result: NodeResult::Failed(_),
                ..
            } => Severity::Error,
            Progress::NodeFinished {
                result: NodeResult::Blocked { .. },
                ..
            } => Severity::Warning,
            Progress::NodeFinished {
                result: NodeResult::RolledBack { .. },
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
            Progress::StepStarted {
                node,
                step: UpgradeStep::Rollback,
            } => bar(
                node,
                Position::Keep,
                Some("Rollback...".into()),
                Now::Working,
            ),
            Progress::StepFinished {
                node,
                step: UpgradeStep::Rollback,
                ..
            } => bar(node, Position::Keep, None, Now::Working),
            Progress::StepStarted { node, step } => bar(
                node,
                Position::At(step_index(*step) - 1),
                Some(format!("{step}...")),
                Now::Working,
            ),
            Progress::StepFinished { node, step, .. } => {
                bar(node, Position::At(step_index(*step)), None, Now::Working)
            }
            Progress::NodeFinished { node, result, .. } => bar(
                node,
                if matches!(result, NodeResult::Upgraded) {
                    Position::Full
                } else {
                    Position::Keep
                },
                Some(result_text(result)),
                Now::Ended(match result {
                    NodeResult::Upgraded => End::Done,
                    NodeResult::Skipped { .. } => End::Skipped,
                    NodeResult::Failed(_) => End::Failed,
                    NodeResult::Interrupted { .. } => End::Stopped,
                    NodeResult::Blocked { .. } => End::Skipped,
                    NodeResult::RolledBack { .. } => End::Failed,
                }),
            ),
            Progress::Driver(UpgradeEvent::NodeSkipped { node, why }) => bar(
                node,
                Position::Full,
                Some(format!("skipped: {why}")),
                Now::Ended(End::Skipped),
            ),
            Progress::Driver(UpgradeEvent::Soaking { node, left_ms }) => bar(
                node,
                Position::Keep,
                Some(format!("Soak: {} left", seconds(*left_ms))),
                Now::Working,
            ),
            Progress::Lease(FenceEvent::Renewed { .. })
            | Progress::Driver(UpgradeEvent::PodsEvicted { .. }) => OnBars::Nothing,
            _ => OnBars::Line,
        }
    }
}

fn result_text(result: &NodeResult) -> String {
    match result {
        NodeResult::Upgraded => "upgraded".into(),
        NodeResult::Skipped { why } => format!("skipped ({why})"),
        NodeResult::Failed(f) => failed_at(f.step, f.exit_code, &f.message),
        NodeResult::Interrupted { step, why } => format!("stopped before {step}: {why}"),
        NodeResult::Blocked { why, .. } => format!("blocked: {why}"),
        NodeResult::RolledBack { failure, version } => format!(
            "{}; rolled back to {version}",
            failed_at(failure.step, failure.exit_code, &failure.message)
        ),
    }
}

/// An upgrade's preview, a line each: the Lease, the nodes skipped, the batches, then every
/// node and what the drain would do with its Pods. `upgrade --preview` prints it; the MCP tool
/// `upgrade_preview` answers it.
pub(crate) fn preview(preview: &Preview) -> String {
    let mut lines = preview_head(
        &format!("upgrade to {}", preview.target),
        preview.lease.as_deref(),
        &preview.not_now,
    );
    for (node, why) in &preview.skipped {
        lines.push(format!("skip {node}: {why}"));
    }
    for said in &preview.skew {
        lines.push(format!("skew: {said}"));
    }
    for (i, (group, nodes)) in preview.batches.iter().enumerate() {
        lines.push(format!("batch {} ({group}): {}", i + 1, nodes.join(", ")));
    }
    for node in &preview.nodes {
        lines.push(format!(
            "{} at {}{}{}",
            node.name,
            node.version.as_deref().unwrap_or("?"),
            if node.cordoned { ", cordoned" } else { "" },
            if node.in_progress {
                ", an earlier run of ours in flight"
            } else {
                ""
            }
        ));
        for pod in &node.pods {
            lines.push(match pod {
                PodPlan::Evict { pod } if node.stranded.contains(pod) => format!(
                    "  evict {pod}: no other node can run it now (the others are cordoned, \
                     not Ready, drained with it, or do not match it): its replacement stays \
                     Pending until {} is back (a budget that needs it Ready holds the drain to \
                     its timeout)",
                    node.name
                ),
                PodPlan::Evict { pod } => format!("  evict {pod}"),
                PodPlan::Leave { pod, why } => format!("  leave {pod}: {why}"),
                PodPlan::Refuse { pod, why } => format!("  REFUSE {pod}: {why}"),
                PodPlan::Blocked { pod, message } => format!("  blocked now {pod}: {message}"),
            });
        }
        if let Some(flags) = refused_flags(&node.pods) {
            lines.push(format!(
                "  {} would FAIL at its drain, left untouched (not cordoned): {flags} would \
                 take the refused Pods",
                node.name
            ));
        }
    }
    lines.extend(undrainable_preview(preview));
    lines.join("\n") + "\n"
}

/// kubectl drain's flags (`--delete-emptydir-data`, `--force`) that would take the Pods whose
/// refusals `text` names (a refusal's own words, or a failure that quotes them), added to
/// `flags` once each.
fn flags_named(text: &str, flags: &mut Vec<&str>) {
    use nodejob_core::drain::Refusal;
    for (refusal, flag) in [
        (Refusal::LocalStorage, "--delete-emptydir-data"),
        (Refusal::Unreplicated, "--force"),
    ] {
        if text.contains(&refusal.to_string()) && !flags.contains(&flag) {
            flags.push(flag);
        }
    }
}

/// The flags that would take the Pods of `pods` a drain refuses, joined with `and`; `None`
/// when none is refused.
fn refused_flags(pods: &[PodPlan]) -> Option<String> {
    let mut flags = Vec::new();
    for pod in pods {
        if let PodPlan::Refuse { why, .. } = pod {
            flags_named(why, &mut flags);
        }
    }
    (!flags.is_empty()).then(|| flags.join(" and "))
}

/// The flags that would take the Pods the failed nodes' drains refused, as their failures
/// name the refusals (empty when no drain was refused).
fn drain_refused_flags(report: &Report) -> Vec<&'static str> {
    let mut flags = Vec::new();
    for f in report.nodes.iter().filter_map(|n| n.failure()) {
        if f.step == UpgradeStep::Drain {
            flags_named(&f.message, &mut flags);
        }
    }
    flags
}

/// The nodes of `preview` whose drain kubectl's rules would refuse, with the flags that would
/// take their Pods: what a run now would fail on (`None`: none).
pub(crate) fn would_fail(preview: &Preview) -> Option<String> {
    let refused: Vec<String> = (preview.nodes.iter())
        .filter_map(|n| refused_flags(&n.pods).map(|flags| format!("{} ({flags})", n.name)))
        .collect();
    (!refused.is_empty()).then(|| {
        format!(
            "a run now would fail: the drain of {} would be refused (the flags said would take \
             the refused Pods); nothing was changed",
            refused.join(", ")
        )
    })
}

/// The preview's lines on blocked nodes: each node quarantined by an earlier run (left as it
/// is), and each node a budget allowing no disruption now would block, with what the plan
/// would then do.
fn undrainable_preview(preview: &Preview) -> Vec<String> {
    let mut lines = Vec::new();
    if preview.on_failure == upgrade_driver::OnFailure::Rollback {
        lines.push(
            "on failure: a node whose host upgrade fails, or that comes back at another version \
             or fails its health check or soak, is rolled back (stratum rollback) to the version \
             it reports now, once"
                .into(),
        );
    }
    if let Some(ms) = preview.soak_ms {
        lines.push(format!(
            "soak: each node, back in service, stays Ready on the same boot for {} (the health \
             check, if any, passing again at its end) before the next batch starts",
            seconds(ms)
        ));
    }
    if let Some(max) = preview.max_blocked {
        let then = match preview.on_undrainable {
            upgrade_driver::Undrainable::Quarantine => "left cordoned and labelled",
            _ => "skipped and tried once more at the end",
        };
        lines.push(format!(
            "on undrainable: {}: a node whose budgets hold past the drain timeout is {then}; \
             at most {max} blocked node(s), past that the roll stops as a failure does",
            preview.on_undrainable
        ));
    }
    for (node, why) in &preview.quarantined {
        lines.push(format!("leave {node}: {why}"));
    }
    for block in &preview.would_block {
        lines.push(format!(
            "would be blocked (on undrainable: {}): {} by budget(s) {} (pods {}): {}",
            preview.on_undrainable,
            block.node,
            block.budgets.join(", "),
            block.pods.join(", "),
            block.then
        ));
    }
    lines
}

/// A line per blocked node: what was done with it, the budgets and the Pods left, and where
/// to look.
fn blocked(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for n in &report.nodes {
        if let Some(NodeResult::Blocked {
            budgets, pods, why, ..
        }) = &n.result
        {
            lines.push(format!("node {} blocked: {why}", n.name));
            lines.push(format!(
                "  budgets: {}; pods left: {}",
                or_none(budgets),
                or_none(pods)
            ));
            lines.push(format!(
                "  look at: kubectl get pdb -A; kubectl get pods -A --field-selector \
                 spec.nodeName={}",
                n.name
            ));
        }
    }
    lines
}

/// Each node a stop (or a pause) left between two steps: where it stands, and the way out
/// (the rerun; `kubectl uncordon` where its host is untouched or done, so giving it back
/// cannot meet a host operation).
fn left(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for n in natural(&report.nodes, |n| n.name.as_str()) {
        let Some(NodeResult::Interrupted { step, .. }) = &n.result else {
            continue;
        };
        let node = &n.name;
        let uncordon =
            format!("`kubectl uncordon {node}` puts it back in service now if you will not rerun");
        let (stands, way_out) = match step {
            UpgradeStep::Cordon => ("not touched".to_string(), "nothing to do".to_string()),
            UpgradeStep::Drain => (
                "cordoned, its drain not finished; its host untouched".into(),
                format!("a rerun drains and upgrades it; {uncordon}"),
            ),
            UpgradeStep::Upgrade => (
                "cordoned and drained; its host untouched".into(),
                format!("a rerun upgrades it; {uncordon}"),
            ),
            UpgradeStep::Reboot => (
                "cordoned; its host upgrade ran and awaits its reboot".into(),
                "a rerun waits for the reboot and checks it; keep it cordoned until then \
                 (its reboot would take down what runs on it)"
                    .into(),
            ),
            UpgradeStep::Health => (
                "cordoned; rebooted at the target, its health not yet checked".into(),
                "a rerun checks its health and uncordons it; keep it cordoned until then".into(),
            ),
            UpgradeStep::Uncordon => (
                "cordoned; upgraded and healthy".into(),
                format!("a rerun uncordons it and records it done; {uncordon}"),
            ),
            UpgradeStep::Soak => (
                "upgraded and back in service, its soak not finished".into(),
                "a rerun resumes its soak from its recorded start".into(),
            ),
            UpgradeStep::Rollback => (
                "cordoned; its rollback not finished".into(),
                "a rerun finishes the rollback; keep it cordoned until then".into(),
            ),
        };
        lines.push(format!(
            "node {node} stopped before {step}: {stands}\n  way out: {way_out}"
        ));
    }
    lines
}

fn or_none(items: &[String]) -> String {
    match items {
        [] => "-".into(),
        items => items.join(", "),
    }
}

/// The TO of `n` in the summary: the version it reports at its end when it is upgraded or
/// skipped, or when it moved at all (a node that reached the target and then failed at Health
/// or Soak, one that came back at another version); `None` (`-`) where it stayed at FROM or
/// was not started.
fn at_end(n: &upgrade_driver::NodeReport) -> Option<String> {
    match &n.result {
        Some(NodeResult::Upgraded | NodeResult::Skipped { .. }) => n.to.clone(),
        Some(_) if n.to != n.from => n.to.clone(),
        _ => None,
    }
}

/// The summary table: node (in natural order), from, to (the version it is at, `-` where it
/// did not move: [`at_end`]), result, duration (its waits on the pause switch apart), pods
/// evicted (with those an earlier run's drain evicted from a node this one carried on); then
/// the totals, and how long the run took when `took_ms` is known.
pub(crate) fn summary(report: &Report, took_ms: Option<u64>) -> String {
    let mut rows = vec![[
        "NODE".to_string(),
        "FROM".into(),
        "TO".into(),
        "RESULT".into(),
        "DURATION".into(),
        "PODS EVICTED".into(),
    ]];
    for n in natural(&report.nodes, |n| n.name.as_str()) {
        let result = match &n.result {
            None => "not started".to_string(),
            Some(NodeResult::Upgraded) => "upgraded".into(),
            Some(NodeResult::Skipped { .. }) => "skipped".into(),
            Some(NodeResult::Failed(f)) => format!("failed at {}", f.step),
            Some(NodeResult::Interrupted { step, .. }) => format!("stopped before {step}"),
            Some(NodeResult::RolledBack { failure, .. }) => {
                format!("rolled back ({})", failure.step)
            }
            Some(NodeResult::Blocked { policy, .. }) => match policy {
                Undrainable::Quarantine => "blocked, quarantined".into(),
                _ => "blocked, skipped".into(),
            },
        };
        rows.push([
            n.name.clone(),
            n.from.clone().unwrap_or_else(|| "-".into()),
            at_end(n).unwrap_or_else(|| "-".into()),
            result,
            match (n.took_ms, n.paused_ms) {
                (0, 0) => "-".into(),
                (took, 0) => seconds(took),
                (took, paused) => format!("{} (+{} paused)", seconds(took), seconds(paused)),
            },
            match (n.pods_evicted_earlier, n.pods_evicted.len()) {
                (0, now) => now.to_string(),
                (earlier, 0) => format!("{earlier} (an earlier run)"),
                (earlier, _) => format!("{} ({earlier} by an earlier run)", n.evicted_in_all()),
            },
        ]);
    }
    let mut out = table(&rows);
    for n in natural(&report.nodes, |n| n.name.as_str()) {
        for said in &n.skew {
            out.push_str(&format!(
                "{}: allowed past the version skew policy: {said}\n",
                n.name
            ));
        }
    }
    let t = &report.totals;
    out.push_str(&format!(
        "{} upgraded, {} skipped, {} failed, {} stopped, {} not started{}; {} pods evicted{}; \
         {}{}\n",
        t.upgraded,
        t.skipped,
        t.failed,
        t.interrupted,
        t.not_started,
        [(t.blocked, "blocked"), (t.rolled_back, "rolled back")]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!(", {n} {what}"))
            .collect::<String>(),
        t.pods_evicted + t.pods_evicted_earlier,
        match t.pods_evicted_earlier {
            0 => String::new(),
            earlier => format!(" ({earlier} by an earlier run)"),
        },
        took_ms
            .map(|ms| format!("took {}; ", seconds(ms)))
            .unwrap_or_default(),
        match &report.outcome {
            Outcome::Done => "done".to_string(),
            Outcome::Failed { .. } => "FAILED".into(),
            Outcome::Stopped { why } => format!("stopped: {why}"),
            Outcome::Paused { why } => format!("PAUSED: {why}"),
        }
    ));
    out
}

/// `node N failed at STEP with exit code C: MESSAGE`, for each node that failed; with the log's
/// tail and where to look when `plan` is given.
fn failures(report: &Report, plan: Option<&upgrade_driver::Plan>) -> Vec<String> {
    let mut lines = Vec::new();
    for n in &report.nodes {
        if let Some(f) = n.failure() {
            let rolled_back = match &n.result {
                Some(NodeResult::RolledBack { version, .. }) => {
                    format!("; rolled back to {version} (a new boot, uncordoned if we cordoned it)")
                }
                _ => String::new(),
            };
            lines.push(format!(
                "node {} failed at {}{}: {}{rolled_back}",
                n.name,
                f.step,
                with_exit_code(f.exit_code),
                f.message
            ));
            if let Some(plan) = plan {
                if let Some(tail) = &f.log_tail {
                    lines.push(log_tail(tail));
                }
                lines.push(look_at(plan, &n.name, f.step));
            }
        }
    }
    lines
}

/// Where to look after `node` failed at `step`: a Job's log only where the step ran one (the
/// host upgrade, the rollback, the health check, whose failed Jobs are kept); the node (and,
/// for a drain, its Pods) always.
fn look_at(plan: &upgrade_driver::Plan, node: &str, step: UpgradeStep) -> String {
    let ns = &plan.spec().namespace;
    match step {
        UpgradeStep::Upgrade => format!(
            "  look at: kubectl -n {ns} logs job/{}; kubectl describe node {node}",
            plan.job_name(node)
        ),
        UpgradeStep::Rollback => format!(
            "  look at: kubectl -n {ns} logs job/{}; kubectl describe node {node}",
            plan.rollback_job_name(node)
        ),
        UpgradeStep::Health if plan.spec().health_check.is_some() => format!(
            "  look at: kubectl -n {ns} logs job/{}; kubectl describe node {node}",
            plan.health_job_name(node)
        ),
        UpgradeStep::Drain => format!(
            "  look at: kubectl get pods -A --field-selector spec.nodeName={node}; \
             kubectl get pdb -A; kubectl describe node {node}"
        ),
        _ => format!("  look at: kubectl describe node {node}"),
    }
}

/// Why the command failed, when the run did not end done: for a failure, each failed node
/// (the step, the exit code, the message, the log's tail, where to look) and how to retry;
/// for a stop, why and how to resume. `None` when done.
///
/// The retry is the command as it was run (`invocation`), narrowed to the failed nodes.
pub(crate) fn ended(
    report: &Report,
    plan: &upgrade_driver::Plan,
    invocation: &Invocation,
) -> Option<String> {
    match &report.outcome {
        Outcome::Done => None,
        Outcome::Failed { nodes, retry } => {
            let mut lines = failures(report, Some(plan));
            lines.extend(blocked(report));
            let before = format!("or the same command as before: {retry}");
            lines.push(format!(
                "retry: {}  ({})",
                invocation.narrowed_to(nodes),
                invocation.rerun_finds(&before)
            ));
            let taking = drain_refused_flags(report);
            if !taking.is_empty() {
                lines.push(format!(
                    "to take the Pods the drain refused (kubectl drain's flags: {}; a Pod with \
                     no controller is deleted for good, emptyDir data is lost): {} {}",
                    taking.join(", "),
                    invocation.narrowed_to(nodes),
                    taking.join(" ")
                ));
            }
            Some(lines.join("\n"))
        }
        Outcome::Paused { why } => {
            let mut lines = vec![format!("paused: {why}")];
            lines.extend(left(report));
            lines.push(invocation.rerun_finds(
                "the cluster keeps the run's state: once resumed (`nodejob resume`), run the \
                 same command again to carry on",
            ));
            Some(lines.join("\n"))
        }
        Outcome::Stopped { why } => {
            let mut lines = vec![format!("stopped: {why}")];
            lines.extend(left(report));
            lines.extend(blocked(report));
            lines.push(invocation.rerun_finds(
                "the cluster keeps the run's state: run the same command again to resume",
            ));
            Some(lines.join("\n"))
        }
    }
}

/// The MCP tool `upgrade`'s answer: the summary, each failed node, and how to retry or resume;
/// a retry as the tool's `arguments` (as the client sent them) narrowed to the failed nodes.
pub(crate) fn answer(
    report: &Report,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let mut text = summary(report, None);
    let lines = failures(report, None).into_iter().chain(blocked(report));
    for line in lines.chain(left(report)) {
        text.push_str(&line);
        text.push('\n');
    }
    match &report.outcome {
        Outcome::Failed { nodes, retry } => text.push_str(&format!(
            "retry: call upgrade_preview with {}, then upgrade with the same arguments and the \
             preview_token it returns  (or the same arguments as before: {retry})\n",
            retry::narrowed_arguments(arguments, nodes)
        )),
        Outcome::Stopped { .. } => text
            .push_str("the cluster keeps the run's state: preview and upgrade again to resume\n"),
        Outcome::Paused { .. } => text.push_str(
            "the cluster keeps the run's state: once resumed (the tool resume), preview and \
             upgrade again to carry on\n",
        ),
        Outcome::Done => {}
    }
    text
}

/// Whether the run failed.
pub(crate) fn failed(report: &Report) -> bool {
    matches!(report.outcome, Outcome::Failed { .. })
}

/// How a driver error ends the operation.
pub(crate) fn error(e: &upgrade_driver::Error) -> DriverError {
    let kind = match e {
        upgrade_driver::Error::Plan(p) => ErrorKind::Plan {
            field: p.field,
            rule: p.rule.clone(),
        },
        upgrade_driver::Error::Core(nodejob_core::Error::LeaseHeld { .. }) => ErrorKind::LeaseHeld,
        upgrade_driver::Error::Selecting(
            upgrade_driver::Selecting::NotFound { .. }
            | upgrade_driver::Selecting::NoneSelected { .. },
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
    use super::*;

    /// A Lease acquired free and released, as a run's report closes with.
    fn released() -> upgrade_driver::LeaseHistory {
        upgrade_driver::LeaseHistory {
            name: "kube-system/nodejob".into(),
            epoch: 1,
            acquired: "free".into(),
            renewals: 0,
            ended: upgrade_driver::LeaseEnd::Released,
        }
    }

    #[test]
    fn only_a_step_that_ran_a_job_points_at_its_log() {
        let plan = upgrade_driver::Plan::build(upgrade_driver::PlanSpec::new("v1.38.0")).unwrap();
        let upgrade = look_at(&plan, "n", UpgradeStep::Upgrade);
        assert!(upgrade.contains("logs job/upgrade-n-v1-38-0"), "{upgrade}");
        let mut checked = upgrade_driver::PlanSpec::new("v1.38.0");
        checked.health_check = Some(vec!["/usr/local/bin/stratum".into(), "health".into()]);
        let checked = upgrade_driver::Plan::build(checked).unwrap();
        let health = look_at(&checked, "n", UpgradeStep::Health);
        let job = format!("logs job/{};", checked.health_job_name("n"));
        assert!(health.contains(&job), "{health}");
        for step in [
            UpgradeStep::Cordon,
            UpgradeStep::Drain,
            UpgradeStep::Reboot,
            UpgradeStep::Health,
            UpgradeStep::Uncordon,
        ] {
            let text = look_at(&plan, "n", step);
            assert!(!text.contains("logs job/"), "{step}: {text}");
            assert!(text.contains("kubectl describe node n"), "{step}: {text}");
        }
        assert!(look_at(&plan, "n", UpgradeStep::Drain).contains("spec.nodeName=n"));
    }

    fn at_v1_37_2(name: &str) -> upgrade_driver::NodeReport {
        upgrade_driver::NodeReport::not_started(name.into(), Some("v1.37.2".into()))
    }

    /// Issue 33, item 20: a node carried on from an earlier run is reported from where that
    /// run started it, with the Pods its drain evicted; a node that waited on the pause
    /// switch has its own time apart from the wait.
    #[test]
    fn a_summary_counts_earlier_evictions_and_keeps_the_pause_apart() {
        let nodes = vec![
            upgrade_driver::NodeReport {
                to: Some("v1.38.0".into()),
                result: Some(NodeResult::Upgraded),
                pods_evicted_earlier: 3,
                took_ms: 41_000,
                ..at_v1_37_2("worker-0")
            },
            upgrade_driver::NodeReport {
                to: Some("v1.38.0".into()),
                result: Some(NodeResult::Upgraded),
                pods_evicted: vec!["default/web-1".into(), "default/web-2".into()],
                took_ms: 77_000,
                paused_ms: 300_000,
                ..at_v1_37_2("worker-1")
            },
        ];
        let mut report = Report::new("v1.38.0".into(), nodes, Default::default());
        report.close(Outcome::Done, released(), 420_000);
        insta::assert_snapshot!(summary(&report, Some(420_000)));
    }

    /// A stop names each node it left between two steps, where it stands, and the way out:
    /// the rerun always; `kubectl uncordon` only where its host is untouched or done.
    #[test]
    fn a_stop_names_each_node_left_between_steps_and_its_way_out() {
        let plan = upgrade_driver::Plan::build(upgrade_driver::PlanSpec::new("v1.38.0")).unwrap();
        let steps = [
            UpgradeStep::Drain,
            UpgradeStep::Upgrade,
            UpgradeStep::Reboot,
            UpgradeStep::Health,
            UpgradeStep::Uncordon,
            UpgradeStep::Soak,
            UpgradeStep::Rollback,
        ];
        let mut nodes: Vec<_> = steps
            .iter()
            .enumerate()
            .map(|(i, step)| upgrade_driver::NodeReport {
                result: Some(NodeResult::Interrupted {
                    step: *step,
                    why: "stopped on request".into(),
                }),
                took_ms: 1_000,
                ..at_v1_37_2(&format!("worker-{i}"))
            })
            .collect();
        nodes.push(upgrade_driver::NodeReport {
            to: Some("v1.38.0".into()),
            result: Some(NodeResult::Upgraded),
            took_ms: 1_000,
            ..at_v1_37_2("worker-10")
        });
        let mut report = Report::new("v1.38.0".into(), nodes, Default::default());
        let why = "as asked; the nodes in flight finished their step".to_string();
        report.close(Outcome::Stopped { why }, released(), 9_000);
        let invocation = Invocation::of(["nodejob", "upgrade", "--to", "v1.38.0"].map(Into::into));
        let text = ended(&report, &plan, &invocation).unwrap();
        insta::assert_snapshot!(text);
        // The uncordon is offered exactly where the host is untouched or done.
        for (i, step) in steps.iter().enumerate() {
            let offered = text.contains(&format!("`kubectl uncordon worker-{i}`"));
            let safe = matches!(
                step,
                UpgradeStep::Drain | UpgradeStep::Upgrade | UpgradeStep::Uncordon
            );
            assert_eq!(offered, safe, "{step}: {text}");
        }
        assert!(!text.contains("worker-10"), "{text}");
    }

    /// Issue 33, item 17: a drain kubectl's rules refuse is said by the preview as the node's
    /// failure (untouched, the flag that would take the Pod), the preview's exit follows it,
    /// and the run's retry names the flag.
    #[test]
    fn a_refused_drain_is_said_as_a_failure_with_the_flag_that_takes_the_pod() {
        use nodejob_core::drain::Refusal;
        let node = |name: &str, pods: Vec<PodPlan>| upgrade_driver::NodePreview {
            name: name.into(),
            version: Some("v1.37.2".into()),
            cordoned: false,
            in_progress: false,
            pods,
            stranded: Vec::new(),
        };
        let preview = Preview {
            target: "v1.38.0".into(),
            batches: vec![(
                "zone a".into(),
                vec!["worker-a-0".into(), "worker-a-1".into()],
            )],
            skipped: Vec::new(),
            nodes: vec![
                node(
                    "worker-a-0",
                    vec![
                        PodPlan::Refuse {
                            pod: "default/scratch".into(),
                            why: Refusal::Unreplicated.to_string(),
                        },
                        PodPlan::Refuse {
                            pod: "default/cache".into(),
                            why: Refusal::LocalStorage.to_string(),
                        },
                    ],
                ),
                node(
                    "worker-a-1",
                    vec![PodPlan::Evict {
                        pod: "default/web-1".into(),
                    }],
                ),
            ],
            lease: None,
            not_now: Vec::new(),
            skew: Vec::new(),
            on_undrainable: Undrainable::Fail,
            max_blocked: None,
            would_block: Vec::new(),
            quarantined: Vec::new(),
            soak_ms: None,
            on_failure: upgrade_driver::OnFailure::Stop,
        };
        let text = super::preview(&preview);
        assert!(
            text.contains(
                "  worker-a-0 would FAIL at its drain, left untouched (not cordoned): --force and \
                 --delete-emptydir-data would take the refused Pods"
            ),
            "{text}"
        );
        assert!(!text.contains("worker-a-1 would FAIL"), "{text}");
        let said = would_fail(&preview).expect("a run would fail");
        assert!(
            said.contains("the drain of worker-a-0 (--force and --delete-emptydir-data)"),
            "{said}"
        );
        let mut clean = preview.clone();
        clean.nodes.remove(0);
        assert_eq!(would_fail(&clean), None);

        let plan = upgrade_driver::Plan::build(upgrade_driver::PlanSpec::new("v1.38.0")).unwrap();
        let message = format!(
            "its drain would be refused, so it was left untouched (not cordoned): \
             default/scratch: {}",
            Refusal::Unreplicated
        );
        let failure = upgrade_driver::Failure::new(
            UpgradeStep::Drain,
            upgrade_driver::FailureKind::Drain,
            message,
        );
        let nodes = vec![upgrade_driver::NodeReport {
            result: Some(NodeResult::Failed(failure)),
            took_ms: 10,
            ..at_v1_37_2("worker-a-0")
        }];
        let mut report = Report::new("v1.38.0".into(), nodes, Default::default());
        let failed = Outcome::Failed {
            nodes: vec!["worker-a-0".into()],
            retry: "rerun".into(),
        };
        report.close(failed, released(), 10);
        let invocation = Invocation::of(["nodejob", "upgrade", "--to", "v1.38.0"].map(Into::into));
        let text = ended(&report, &plan, &invocation).unwrap();
        assert!(
            text.lines()
                .last()
                .is_some_and(|l| l.starts_with("to take the Pods the drain refused")
                    && l.ends_with("--nodes worker-a-0 --force")),
            "{text}"
        );
    }
}
