//! `nodejob upgrade`: the rolling node upgrade of `upgrade-driver`.

use std::sync::Arc;

use nodejob_fake::stratum::Fault;
use upgrade_driver::Stop;

use super::{
    declared, driver_exit, ended, no_argv, preview_banner, preview_ended, refused, say_simulated,
};
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
    let plan = settings(&args).plan(&global.namespace).map_err(refused)?;
    if global.output == Format::Yaml {
        out!("{}", declared::yaml(&resource(&args)?)?);
        return Ok(Exit::ok());
    }
    let preview = args.preview || args.dry_run.given() || args.apply;
    let output = global.output.text_or_json("upgrade")?;
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
            if args.apply {
                // The controller waits out a closed window or the pause switch by itself.
                let said = declared::apply(&*t.api, &resource(&args)?).await?;
                outln!("{said}");
                return Ok(Exit::ok());
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

/// The `NodeUpgrade` the flags describe, named by `--name` or after the target.
fn resource(args: &Upgrade) -> Result<nodejob_crd::NodeUpgrade, Exit> {
    let spec = crate::commands::controller::upgrade_spec(&settings(args))?;
    let name = declared::name(args.name.as_ref(), || default_name(&args.to))?;
    Ok(declared::named(
        nodejob_crd::NodeUpgrade::new(&name, spec),
        name,
    ))
}

/// `upgrade-to-v1-38-0` for `v1.38.0`: a DNS label of the target.
fn default_name(target: &str) -> String {
    let mut name: String = format!("upgrade-to-{}", target.to_ascii_lowercase())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    name.truncate(63);
    name.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};
    use crate::commands::controller::{SpecPlanner, upgrade_spec};
    use nodejob_controller::Planner;
    use nodejob_crd::NodeUpgradeSpec;

    /// The plan a command line makes, and the plan its `NodeUpgrade` makes once read back.
    fn plans(line: &[&str]) -> (serde_json::Value, serde_json::Value) {
        let cli = Cli::try_parse_from(line).unwrap();
        let Command::Upgrade(args) = cli.command else {
            panic!("not an upgrade: {line:?}")
        };
        let flags = settings(&args);
        let direct = flags.plan("kube-system").unwrap();
        let spec = upgrade_spec(&flags).unwrap();
        // Through the apiserver: the resource as JSON and back.
        let spec: NodeUpgradeSpec =
            serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
        let read = SpecPlanner {
            namespace: "kube-system".into(),
        }
        .upgrade(&spec)
        .unwrap();
        (
            serde_json::to_value(direct.spec()).unwrap(),
            serde_json::to_value(read.spec()).unwrap(),
        )
    }

    #[test]
    fn a_resource_written_from_flags_makes_the_plan_the_flags_make() {
        let lines: [&[&str]; 4] = [
            &["nodejob", "upgrade", "--to", "v1.38.0"],
            &[
                "nodejob",
                "upgrade",
                "--to",
                "v1.38.0",
                "-l",
                "role=worker,!gpu,zone in (a,b)",
                "--max-unavailable",
                "25%",
                "--drain-timeout",
                "1h30m",
                "--deadline",
                "45m",
                "--reboot-timeout",
                "90s",
                "--window",
                "sat,sun 01:00-05:00 Europe/Berlin",
                "--failure-budget",
                "2",
                "--allow-skew",
                "--soak",
                "10m",
                "--on-undrainable",
                "skip",
                "--max-blocked",
                "3",
                "--on-failure",
                "rollback",
            ],
            &[
                "nodejob",
                "upgrade",
                "--to",
                "v2",
                "--version-from",
                "label=example.com/os",
                "--nodes",
                "a,b",
                "--max-unavailable",
                "2",
                "--allow-downgrade",
                "--delete-emptydir-data",
                "--force",
                "--health-check",
                "--",
                "check",
                "{version}",
            ],
            &[
                "nodejob",
                "upgrade",
                "--to",
                "fedora-41",
                "--version-from",
                "os-image",
                "-l",
                "tier!=db",
            ],
        ];
        for line in lines {
            let (mut direct, mut read) = plans(line);
            // The selector may come back in another form (`tier!=db` as `tier notin (db)`, as
            // the apiserver's LabelSelectorAsSelector writes it): the same nodes match.
            let selectors = [&mut direct, &mut read].map(|p| p["selector"].take());
            let [a, b] = selectors.map(|s| {
                nodejob_core::selector::LabelSelector::parse(s.as_str().unwrap_or_default())
                    .unwrap()
            });
            for labels in [
                vec![],
                vec![("role", "worker"), ("zone", "a")],
                vec![("role", "worker"), ("zone", "c")],
                vec![("role", "worker"), ("zone", "b"), ("gpu", "")],
                vec![("tier", "db")],
                vec![("tier", "web")],
            ] {
                let labels: std::collections::BTreeMap<String, String> = (labels.iter())
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                assert_eq!(
                    a.matches(Some(&labels)),
                    b.matches(Some(&labels)),
                    "{line:?} {labels:?}"
                );
            }
            assert_eq!(direct, read, "{line:?}");
        }
    }

    #[test]
    fn a_selector_with_a_comparison_has_no_resource_form() {
        let mut flags = settings(&{
            let cli = Cli::try_parse_from(["nodejob", "upgrade", "--to", "v1.38.0"]).unwrap();
            let Command::Upgrade(args) = cli.command else {
                unreachable!()
            };
            args
        });
        flags.selector = Some("rack>3".into());
        let refused = upgrade_spec(&flags).err().map(|e| e.to_string());
        assert_eq!(
            refused.as_deref(),
            Some(
                "--selector \"rack>3\": a NodeUpgrade's selector is a LabelSelector, which has \
                 no comparison (>, <) of rack; name the nodes with --nodes"
            )
        );
        flags.selector = Some("rack in (".into());
        let refused = upgrade_spec(&flags).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|r| r.starts_with("--selector \"rack in (\": ")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_spec_refusal_names_the_specs_field() {
        let spec: NodeUpgradeSpec = serde_json::from_value(
            serde_json::json!({"target": "v1.38.0", "drainTimeout": "90", "maxUnavailable": 2}),
        )
        .unwrap();
        let planner = SpecPlanner {
            namespace: "kube-system".into(),
        };
        let refused = planner.upgrade(&spec).unwrap_err();
        assert!(refused.starts_with("spec.drainTimeout: "), "{refused}");
        let spec: NodeUpgradeSpec = serde_json::from_value(
            serde_json::json!({"target": "v1.38.0", "failureBudget": 3, "maxUnavailable": 2}),
        )
        .unwrap();
        let refused = planner.upgrade(&spec).unwrap_err();
        assert!(refused.contains("spec.maxUnavailable"), "{refused}");
        assert!(!refused.contains("--"), "{refused}");
    }
}
