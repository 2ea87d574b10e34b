//! `nodejob upgrade`: the rolling node upgrade of `upgrade-driver`.

use std::sync::Arc;

use nodejob_fake::stratum::Fault;
use upgrade_driver::Stop;

use super::{driver_exit, ended, no_argv, preview_banner, preview_ended, refused, say_simulated};
use crate::args::{Format, Global, Upgrade};
use crate::backend::Backend;
use crate::exit::Exit;
use crate::interrupt::on_interrupt;
use crate::present::retry::Invocation;
use crate::present::upgrade as present;
use crate::render::Renderer;
use crate::settings::UpgradeSettings;

/// The settings the flags say.
pub(crate) fn settings(args: &Upgrade) -> UpgradeSettings {
    UpgradeSettings {
        to: args.to.clone(),
        selector: args.selector.clone(),
        nodes: args.nodes.clone(),
        max_unavailable: Some(args.max_unavailable),
        drain_timeout: Some(args.drain_timeout),
        delete_emptydir_data: args.delete_emptydir_data,
        force: args.force,
        deadline: Some(args.deadline),
        reboot_timeout: Some(args.reboot_timeout),
        binary: Some(args.binary.clone()),
        version_from: Some(args.version_from.clone()),
        window: args.window.clone(),
        failure_budget: Some(args.failure_budget),
        health_check: args.health_check.then(|| args.health_argv.clone()),
        allow_downgrade: args.allow_downgrade,
        on_undrainable: Some(args.long_roll.on_undrainable.policy()),
        max_blocked: args.long_roll.max_blocked,
        soak: args.long_roll.soak,
        allow_skew: args.allow_skew,
        on_failure: Some(args.long_roll.on_failure.policy()),
    }
}

/// Runs `nodejob upgrade`.
pub(crate) fn upgrade(global: &Global, args: Upgrade) -> Result<Exit, Exit> {
    if !args.health_check {
        no_argv(
            "upgrade",
            &args.health_argv,
            "only --health-check does (`--health-check -- CMD ARGS...`, run on each upgraded \
             node); for a preview, --dry-run or --preview",
        )?;
    }
    let preview = args.preview || args.dry_run.given();
    let output = global.output.text_or_json("upgrade")?;
    let plan = settings(&args).plan(&global.namespace).map_err(refused)?;
    let stop = Stop::new();
    let notice = on_interrupt(Some(stop.clone()), plan.spec().lease_duration);
    let soak_reboot = args.long_roll.simulate_soak_reboot.clone();
    let pause_at = args.long_roll.simulate_pause.clone();
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(args.sim.speed, args.sim.start.simulate_start)
        .failing(args.simulate_fail.as_deref(), Fault::UpgradeFails)?
        .settled(&args.long_roll.simulate_undrainable)?;
    if let Some(node) = &soak_reboot {
        backend.has_node("--simulate-soak-reboot", node)?;
    }
    if let Some(node) = &pause_at {
        backend.has_node("--simulate-pause", node)?;
    }
    backend.block_on(|t| async move {
        if preview {
            let preview = upgrade_driver::preview(&*t.api, &plan)
                .await
                .map_err(|e| driver_exit(present::error(&e)))?;
            say_simulated(&t, preview_banner(output));
            match output {
                Format::Json => outln!("{}", serde_json::to_string(&preview).unwrap_or_default()),
                Format::Text | Format::Yaml | Format::Wide => {
                    out!("{}", present::preview(&preview))
                }
            }
            // As the run would end: not now (4) before anything; then a node whose drain
            // would be refused fails (1).
            if preview.not_now.is_empty()
                && let Some(why) = present::would_fail(&preview)
            {
                return Ok(Exit::failed(why));
            }
            return Ok(preview_ended(&preview.not_now));
        }
        let renderer = Arc::new(Renderer::of(
            output,
            &t,
            present::STEPS,
            &notice,
            global.verbose > 0,
        ));
        let sink: Arc<dyn upgrade_driver::ProgressSink> = match (&t.fake, &soak_reboot) {
            (Some(fake), Some(node)) => Arc::new(crate::sim::RebootInSoak::new(
                fake.clone(),
                node,
                renderer.clone(),
            )),
            _ => renderer.clone(),
        };
        let sink: Arc<dyn upgrade_driver::ProgressSink> = match (&t.fake, &pause_at) {
            (Some(fake), Some(node)) => Arc::new(crate::sim::PauseAtStep::new(
                fake.clone(),
                (&global.namespace, &crate::inspect::status::lease_name()),
                (node, upgrade_driver::UpgradeStep::Drain),
                sink,
            )),
            _ => sink,
        };
        let clock = t.clock();
        let began = clock();
        let report = upgrade_driver::run_until(&*t.api, &plan, sink, &stop).await;
        let took = began.duration_until(clock()).unsigned_abs();
        renderer.finish(&notice);
        let report = report.map_err(|e| driver_exit(present::error(&e)))?;
        match output {
            Format::Json => {
                renderer.json(&serde_json::json!({"event": "report", "report": report}))
            }
            Format::Text | Format::Yaml | Format::Wide => out!(
                "{}",
                present::summary(&report, u64::try_from(took.as_millis()).ok())
            ),
        }
        Ok(ended(
            &report.outcome,
            stop.requested(),
            present::ended(&report, &plan, &Invocation::current()),
        ))
    })
}
