//! `nodejob rotate-ca`: the cluster CA rotation of `certs-driver`, shown as the upgrade is
//! (bars, timestamped lines or JSON events, then a summary table), with the same exit codes.

use std::io::IsTerminal;
use std::sync::Arc;

use certs_driver::{
    CaStep, EventSink, Fingerprint, GateReport, Next, NodeResult, Outcome, Plan, PlanError,
    PlanSpec, Preview, Progress, Report, Stop,
};
use nodejob_core::drive::FenceEvent;
use nodejob_core::{JobApi, LeaseApi, NodeApi};
use nodejob_fake::stratum::Fault;

use crate::args::{Global, RotateCa};
use crate::commands::{
    connect, fake_clock, identity, on_interrupt, real_runtime, simulated_runtime,
};
use crate::output::{Format, Renderer, WallClock, describe_lease, seconds, table};
use crate::sim::{self, Pacer};
use crate::{Exit, code};

/// Runs `nodejob rotate-ca`.
pub(crate) fn rotate_ca(global: &Global, args: RotateCa) -> Result<Exit, Exit> {
    let plan = plan_of(global, &args)?;
    let stop = Stop::new();
    on_interrupt((!args.abort).then(|| stop.clone()));
    match args.sim.simulate {
        Some(n) => {
            let n = usize::from(n);
            let names = sim::node_names(n);
            let faults: Vec<(&str, Fault)> = match args.simulate_fail.as_deref() {
                Some(node) if !names.iter().any(|x| x == node) => {
                    return Err(Exit::usage(format!(
                        "--simulate-fail {node}: no such node in the simulated cluster ({})",
                        names.join(", ")
                    )));
                }
                Some(node) => vec![(node, Fault::IssueFails)],
                None => Vec::new(),
            };
            simulated_runtime()?.block_on(async {
                let fake = sim::cluster(n, &faults)?;
                sim::settle(&fake).await;
                if args.abort {
                    sim::stage(&fake, &plan).await?;
                }
                let clock = fake_clock(&fake);
                let shown = global.output == Format::Text && !args.preview;
                let pacer = shown.then(|| Pacer::new(fake.clone()));
                let since = fake.calls().len();
                let exit = drive(&*fake, &plan, global, &args, clock, pacer, &stop).await;
                if args.preview {
                    let writes = sim::writes_since(&fake, since);
                    if !writes.is_empty() {
                        return Err(Exit::failed(format!(
                            "the preview wrote to the simulated cluster: {}",
                            writes.join(", ")
                        )));
                    }
                    eprintln!(
                        "simulated cluster: the preview made {} API calls, none of them a write",
                        fake.calls().len() - since
                    );
                }
                exit
            })
        }
        None => real_runtime()?.block_on(async {
            let api = connect(global).await?;
            let clock: WallClock = Arc::new(jiff::Timestamp::now);
            drive(&api, &plan, global, &args, clock, None, &stop).await
        }),
    }
}

/// The plan, from the flags and the certificate file: every refusal names the flag.
fn plan_of(global: &Global, args: &RotateCa) -> Result<Plan, Exit> {
    let (pem, source) = match &args.new_ca {
        Some(path) => {
            let pem = std::fs::read_to_string(path).map_err(|e| {
                Exit::usage(format!("--new-ca {}: reading it: {e}", path.display()))
            })?;
            (pem, path.display().to_string())
        }
        // clap requires --new-ca without --simulate.
        None => (
            sim::SIMULATED_CA.to_string(),
            "(the simulation's built-in CA)".to_string(),
        ),
    };
    let refused = |e: PlanError| {
        let flag = match e.field {
            "ca_certificate" | "fingerprint" => format!("--new-ca {source}"),
            "nodes" => "--nodes".into(),
            "selector" => "--selector".into(),
            "concurrency" => "--concurrency".into(),
            "deadline" => "--deadline".into(),
            "ready_timeout" => "--ready-timeout".into(),
            "binary" => "--binary".into(),
            "namespace" => "--namespace".into(),
            other => other.to_string(),
        };
        Exit::usage(format!("{flag}: {e}"))
    };
    let fingerprint = Fingerprint::of_pem(&pem).map_err(refused)?;
    let mut spec = PlanSpec::new(pem, fingerprint.as_str());
    spec.selector = args.selector.clone();
    spec.nodes = args.nodes.clone();
    spec.concurrency = args.concurrency;
    spec.deadline = args.deadline;
    spec.ready_timeout = args.ready_timeout;
    spec.binary = args.binary.clone();
    spec.namespace = global.namespace.clone();
    spec.identity = identity();
    Plan::build(spec).map_err(refused)
}

async fn drive<A>(
    api: &A,
    plan: &Plan,
    global: &Global,
    args: &RotateCa,
    clock: WallClock,
    pacer: Option<Pacer>,
    stop: &Stop,
) -> Result<Exit, Exit>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    if args.preview {
        let preview = certs_driver::preview(api, plan)
            .await
            .map_err(driver_error)?;
        print_preview(&preview, global.output);
        return Ok(Exit::with(code::OK, ""));
    }
    let terminal = std::io::stdout().is_terminal();
    let steps = if args.abort { 1 } else { 3 };
    let renderer = Arc::new(Renderer::new(global.output, terminal, clock, pacer, steps));
    let report = if args.abort {
        certs_driver::abort(api, plan, renderer.clone()).await
    } else {
        certs_driver::run_until(api, plan, renderer.clone(), stop).await
    };
    renderer.finish();
    let report = report.map_err(driver_error)?;
    if global.output == Format::Json {
        renderer.json(&serde_json::json!({"event": "report", "report": report}));
    } else {
        out!("{}", summary(&report, args.abort));
    }
    Ok(match &report.outcome {
        Outcome::Done => Exit::with(code::OK, ""),
        Outcome::Failed { retry } => {
            let ns = &plan.spec().namespace;
            let mut lines = Vec::new();
            for n in &report.nodes {
                match &n.result {
                    Some(NodeResult::Failed(f)) => {
                        lines.push(format!(
                            "node {} failed at {}{}: {}",
                            n.name,
                            f.step,
                            f.exit_code
                                .map(|c| format!(" with exit code {c}"))
                                .unwrap_or_default(),
                            f.message
                        ));
                        if let Some(tail) = f.log_tail.as_deref().filter(|t| !t.is_empty()) {
                            lines
                                .push(format!("  log tail:\n    {}", tail.replace('\n', "\n    ")));
                        }
                        lines.push(format!(
                            "  look at: kubectl -n {ns} logs job/{}; kubectl describe node {}",
                            plan.job_name(f.step, &n.name),
                            n.name
                        ));
                    }
                    Some(NodeResult::Disagrees { gate, what }) => {
                        lines.push(format!(
                            "node {} disagrees at the gate {gate}: {what}",
                            n.name
                        ));
                        lines.push(format!(
                            "  look at: kubectl describe node {} (its {} annotation and its \
                             NodejobCa Events)",
                            n.name,
                            certs_driver::LAST_STATUS
                        ));
                    }
                    _ => {}
                }
            }
            lines.push(format!("retry: {retry}"));
            Exit::failed(lines.join("\n"))
        }
        Outcome::Stopped { why } => Exit::failed(format!(
            "stopped: {why}\nthe nodes keep the rotation's state: run the same command again to \
             resume"
        )),
    })
}

fn driver_error(e: certs_driver::Error) -> Exit {
    match &e {
        certs_driver::Error::Plan(_)
        | certs_driver::Error::Selecting(certs_driver::Selecting::NotFound { .. }) => {
            Exit::usage(e.to_string())
        }
        certs_driver::Error::Core(nodejob_core::Error::LeaseHeld { .. }) => {
            Exit::with(code::LEASE_HELD, format!("{e}; try again later"))
        }
        _ => Exit::failed(e.to_string()),
    }
}

/// `sha256:d4501ab39bde…`: enough of a fingerprint to tell CAs apart in a table.
fn short(fingerprint: &str) -> String {
    match fingerprint.get(..19) {
        Some(head) if fingerprint.len() > 19 => format!("{head}…"),
        _ => fingerprint.to_string(),
    }
}

fn print_preview(preview: &Preview, format: Format) {
    if format == Format::Json {
        outln!("{}", serde_json::to_string(preview).unwrap_or_default());
        return;
    }
    outln!("rotate-ca to {}: preview (nothing changed)", preview.target);
    match &preview.lease {
        Some(holder) => outln!("lease: held by {holder}"),
        None => outln!("lease: free"),
    }
    for node in &preview.nodes {
        let role = if node.control_plane {
            " (control plane)"
        } else {
            ""
        };
        match (&node.reported, &node.unreadable) {
            (Some(status), _) => outln!(
                "{}{role}: {} (reported at {})",
                node.name,
                status.describe(),
                node.at.as_deref().unwrap_or("?")
            ),
            (None, Some(why)) => outln!("{}{role}: record unreadable: {why}", node.name),
            (None, None) => outln!("{}{role}: never reported to a rotation", node.name),
        }
    }
    match &preview.next {
        Next::Unknown { unreported } => outln!(
            "next: a run first reads every node's `carotate status`, then decides (never \
             reported: {})",
            unreported.join(", ")
        ),
        Next::Phase { phase, nodes } => outln!("next: {phase} on {}", nodes.join(", ")),
        Next::Nothing => {
            outln!(
                "next: nothing; every node reports the new CA alone (a run checks the last gate)"
            )
        }
    }
    for d in &preview.disagreements {
        outln!("DISAGREES {}: {}", d.node, d.what);
    }
}

fn step_index(step: CaStep) -> u64 {
    match step {
        CaStep::Stage | CaStep::Abort => 1,
        CaStep::Issue => 2,
        _ => 3,
    }
}

/// One event as a line of text.
fn describe(event: &Progress) -> String {
    match event {
        Progress::Lease(lease) => describe_lease(lease),
        Progress::PhaseStarted { phase, nodes } if nodes.is_empty() => {
            format!("phase {phase}: every node passed it already")
        }
        Progress::PhaseStarted { phase, nodes } => {
            format!("phase {phase}: {}", nodes.join(", "))
        }
        Progress::NodeSkipped { node, step, why } => format!("{node}: {step} skipped, {why}"),
        Progress::StepStarted { node, step } => format!("{node}: {step}..."),
        Progress::StepFinished {
            node,
            step,
            took_ms,
            message,
        } => format!("{node}: {step} done in {} ({message})", seconds(*took_ms)),
        Progress::Gate(gate) => describe_gate(gate),
        Progress::Note {
            node: Some(node),
            message,
        } => format!("{node}: {message}"),
        Progress::Note {
            node: None,
            message,
        } => message.clone(),
        Progress::NodeFinished { node, result } => format!("{node}: {}", result_text(result)),
        Progress::Stopping { why } => format!("no further node starts: {why}"),
        other => format!("{other:?}"),
    }
}

fn describe_gate(gate: &GateReport) -> String {
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
        NodeResult::Failed(f) => format!(
            "FAILED at {}{}: {}",
            f.step,
            f.exit_code
                .map(|c| format!(" (exit {c})"))
                .unwrap_or_default(),
            f.message
        ),
        NodeResult::Disagrees { gate, what } => format!("DISAGREES at the gate {gate}: {what}"),
        NodeResult::Interrupted { step, why } => format!("stopped before {step}: {why}"),
    }
}

impl EventSink<Progress> for Renderer {
    fn event(&self, event: &Progress) {
        self.pace();
        if self.format() == Format::Json {
            self.json(event);
            return;
        }
        if !self.has_bars() {
            self.stamped(&describe(event));
            return;
        }
        match event {
            Progress::StepStarted { node, step } => {
                if let Some(bar) = self.bar(node) {
                    bar.set_position(step_index(*step) - 1);
                    bar.set_message(format!("{step}..."));
                }
            }
            Progress::StepFinished { node, step, .. } => {
                if let Some(bar) = self.bar(node) {
                    bar.set_position(step_index(*step));
                    bar.set_message(format!("{step} done"));
                }
            }
            Progress::NodeSkipped { node, step, .. } => {
                if let Some(bar) = self.bar(node) {
                    bar.set_position(step_index(*step));
                }
            }
            Progress::NodeFinished { node, result } => {
                if let Some(bar) = self.bar(node) {
                    if matches!(result, NodeResult::Rotated | NodeResult::Restored) {
                        bar.set_position(bar.length().unwrap_or(0));
                    }
                    bar.finish_with_message(match result {
                        NodeResult::Rotated => "rotated".to_string(),
                        NodeResult::Restored => "restored".into(),
                        NodeResult::Failed(f) => format!("FAILED at {}", f.step),
                        NodeResult::Disagrees { gate, .. } => format!("DISAGREES at {gate}"),
                        NodeResult::Interrupted { step, .. } => format!("stopped before {step}"),
                    });
                }
            }
            Progress::Lease(FenceEvent::Renewed { .. }) => {}
            other => self.stamped(&describe(other)),
        }
    }
}

/// The summary table: node, its phase when the run began and when the run last read it, how
/// it ended, the steps run on it, their duration.
fn summary(report: &Report, abort: bool) -> String {
    let mut rows =
        vec![["NODE", "BEFORE", "LAST READ", "RESULT", "STEPS", "DURATION"].map(String::from)];
    for n in &report.nodes {
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
        }
    ));
    out
}
