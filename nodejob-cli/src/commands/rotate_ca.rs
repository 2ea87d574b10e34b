//! `nodejob rotate-ca`: the cluster CA rotation of `certs-driver`, shown as the upgrade is
//! (bars, timestamped lines or JSON events, then a summary table), with the same exit codes.

use std::sync::Arc;

use certs_driver::Stop;
use nodejob_core::Clock;
use nodejob_fake::stratum::Fault;

use super::{
    declared, driver_exit_naming, ended, preview_banner, preview_ended, refused, say_simulated,
};
use crate::args::{Format, Global, RotateCa, TrustDomain};
use crate::backend::{Backend, Prepare};
use crate::exit::Exit;
use crate::interrupt::on_interrupt;
use crate::present::retry::Invocation;
use crate::present::rotation as present;
use crate::render::Renderer;
use crate::settings::{NewCa, RotationSettings};

/// The settings the flags say.
pub(crate) fn settings(args: &RotateCa) -> RotationSettings {
    RotationSettings {
        new_ca: match &args.new_ca {
            Some(path) => NewCa::File(path.clone()),
            // clap requires --new-ca without --simulate.
            None => NewCa::Unset {
                simulated: args.sim.simulate.is_some(),
            },
        },
        selector: args.selector.clone(),
        nodes: args.nodes.clone(),
        concurrency: Some(args.concurrency),
        deadline: Some(args.deadline),
        ready_timeout: Some(args.ready_timeout),
        restart_grace: Some(args.restart_grace),
        cluster_wide: Some(args.trust_domain == TrustDomain::Cluster),
        binary: Some(args.binary.clone()),
        window: args.window.clone(),
        failure_budget: Some(args.failure_budget),
    }
}

/// The `CARotation` the flags describe (`plan`: what they make), named by `--name` or after
/// the new CA's fingerprint.
fn resource(args: &RotateCa, plan: &certs_driver::Plan) -> Result<nodejob_crd::CARotation, Exit> {
    let spec = crate::commands::controller::rotation_spec(
        &settings(args),
        &plan.spec().ca_certificate,
        args.abort,
    )?;
    let name = declared::name(args.name.as_ref(), || {
        format!("ca-{}", plan.fingerprint().short())
    })?;
    Ok(declared::named(
        nodejob_crd::CARotation::new(&name, spec),
        name,
    ))
}

/// Runs `nodejob rotate-ca`.
pub(crate) fn rotate_ca(global: &Global, args: RotateCa) -> Result<Exit, Exit> {
    let settings = settings(&args);
    let plan = settings.plan(&global.namespace).map_err(refused)?;
    if global.output == Format::Yaml {
        out!("{}", declared::yaml(&resource(&args, &plan)?)?);
        return Ok(Exit::ok());
    }
    let output = global.output.text_or_json("rotate-ca")?;
    let preview = args.preview || args.dry_run.given() || args.apply;
    let source = settings.new_ca.source();
    let driver_exit = |e| driver_exit_naming(e, &source);
    let stop = Stop::new();
    let notice = on_interrupt(
        (!args.abort).then(|| stop.clone()),
        plan.spec().lease_duration,
    );
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(args.sim.speed, args.sim.start.simulate_start)
        .failing(args.simulate_fail.as_deref(), Fault::IssueFails)?
        .prepared(if args.abort {
            // Something to undo: the CA staged on every node.
            Prepare::Stage(Box::new(plan.clone()))
        } else {
            Prepare::Settle
        });
    let pause_at = args.simulate_pause.clone();
    if let Some(node) = &pause_at {
        backend.has_node("--simulate-pause", node)?;
    }
    backend.block_on(|t| async move {
        if let Some(setup) = &t.simulated {
            valid_in_simulation(&plan, t.api.wall_time(), setup.start).map_err(driver_exit)?;
        }
        if preview {
            let since = t.calls();
            let preview = certs_driver::preview(&*t.api, &plan)
                .await
                .map_err(|e| driver_exit(present::error(&e)));
            if let Ok(preview) = &preview {
                say_simulated(&t, preview_banner(output));
                match output {
                    Format::Json => {
                        outln!("{}", serde_json::to_string(preview).unwrap_or_default())
                    }
                    Format::Text | Format::Yaml | Format::Wide => {
                        out!("{}", present::preview(preview, args.abort))
                    }
                }
            }
            if let (Some(since), Some(now)) = (since, t.calls()) {
                let writes = t.writes_since(since);
                if !writes.is_empty() {
                    return Err(Exit::failed(format!(
                        "the preview wrote to the simulated cluster: {}",
                        writes.join(", ")
                    )));
                }
                eprintln!(
                    "simulated cluster: the preview made {} API calls, none of them a write",
                    now - since
                );
            }
            // The preview ends as the run would: a plan the run refuses exits as its
            // refusal does (2; an abort refused, 1), as `upgrade --preview` does.
            let preview = preview?;
            if let Some(refused) = preview.refusal(&plan, args.abort) {
                return Err(driver_exit(present::error(&refused)));
            }
            if args.apply {
                // The controller waits out a closed window or the pause switch by itself.
                let said = declared::apply(&*t.api, &resource(&args, &plan)?).await?;
                outln!("{said}");
                return Ok(Exit::ok());
            }
            return Ok(preview_ended(&preview.not_now));
        }
        if !args.abort
            && let Some(warning) = present::expiry_warning(&plan.ca_summary(t.api.wall_time()))
        {
            eprintln!("{warning}");
        }
        let renderer = Arc::new(Renderer::of(
            output,
            &t,
            present::steps(args.abort),
            &notice,
            global.verbose > 0,
        ));
        let sink: Arc<dyn certs_driver::ProgressSink> = match (&t.fake, &pause_at) {
            (Some(fake), Some(node)) => Arc::new(crate::sim::PauseAtStep::new(
                fake.clone(),
                (&global.namespace, &crate::inspect::status::lease_name()),
                (node, certs_driver::CaStep::Issue),
                renderer.clone(),
            )),
            _ => renderer.clone(),
        };
        let report = if args.abort {
            certs_driver::abort(&*t.api, &plan, sink).await
        } else {
            certs_driver::run_until(&*t.api, &plan, sink, &stop).await
        };
        renderer.finish(&notice);
        let report = report.map_err(|e| driver_exit(present::error(&e)))?;
        match output {
            Format::Json => {
                renderer.json(&serde_json::json!({"event": "report", "report": report}))
            }
            Format::Text | Format::Yaml | Format::Wide => {
                out!("{}", present::summary(&report, args.abort))
            }
        }
        Ok(ended(
            &report.outcome,
            stop.requested(),
            present::ended(&report, &plan, &Invocation::current()),
        ))
    })
}

/// Under `--simulate`, a new CA whose `notBefore` is after the virtual clock (`now`; it
/// started at `start`): refused as the run refuses it, the error naming `--simulate-start`
/// and the instant from which the CA is valid. Any other refusal is the run's own.
fn valid_in_simulation(
    plan: &certs_driver::Plan,
    now: jiff::Timestamp,
    start: jiff::Timestamp,
) -> Result<(), crate::present::DriverError> {
    let not_before = plan.ca_summary(now).not_before;
    if !not_before.parse::<jiff::Timestamp>().is_ok_and(|t| now < t) {
        return Ok(());
    }
    let Err(refused) = plan.check_ca_valid_at(now) else {
        return Ok(());
    };
    let mut error = present::error(&certs_driver::Error::Plan(refused));
    if let crate::present::ErrorKind::Plan { rule, .. } = &mut error.kind {
        rule.push_str(&format!(
            "; the simulated cluster's clock started at {start}: `--simulate-start \
             {not_before}` (or later) starts it where the CA is valid"
        ));
    }
    Err(error)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use nodejob_controller::Planner;
    use nodejob_crd::CARotationSpec;

    use super::*;
    use crate::args::{Cli, Command};
    use crate::commands::controller::SpecPlanner;

    /// The plan a command line makes, and the plan its `CARotation` makes once read back.
    fn plans(line: &[&str]) -> (serde_json::Value, serde_json::Value) {
        let cli = Cli::try_parse_from(line).unwrap();
        let Command::RotateCa(args) = cli.command else {
            panic!("not a rotation: {line:?}")
        };
        let direct = settings(&args).plan("kube-system").unwrap();
        let roll = resource(&args, &direct).unwrap();
        // Through the apiserver: the resource as JSON and back.
        let spec: CARotationSpec =
            serde_json::from_value(serde_json::to_value(&roll.spec).unwrap()).unwrap();
        let read = SpecPlanner {
            namespace: "kube-system".into(),
        }
        .rotate(&spec)
        .unwrap();
        (
            serde_json::to_value(direct.spec()).unwrap(),
            serde_json::to_value(read.spec()).unwrap(),
        )
    }

    #[test]
    fn a_resource_written_from_flags_makes_the_plan_the_flags_make() {
        let lines: [&[&str]; 3] = [
            &["nodejob", "rotate-ca", "--simulate", "3"],
            &[
                "nodejob",
                "rotate-ca",
                "--simulate",
                "3",
                "-l",
                "role=worker,!gpu",
                "--nodes",
                "a,b",
                "--trust-domain",
                "selected",
                "--concurrency",
                "4",
                "--deadline",
                "15m",
                "--ready-timeout",
                "5m",
                "--restart-grace",
                "1m",
                "--failure-budget",
                "2",
            ],
            &[
                "nodejob",
                "rotate-ca",
                "--simulate",
                "3",
                "--window",
                "sat,sun 01:00-05:00 Europe/Berlin",
            ],
        ];
        for line in lines {
            let (direct, read) = plans(line);
            assert_eq!(direct, read, "{line:?}");
        }
    }
}
