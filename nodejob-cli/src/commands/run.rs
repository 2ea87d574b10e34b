//! `nodejob run`: one privileged Job on a node; prints its log, exits with its container's
//! exit code.

use nodejob_core::{run_exit_code, run_exit_code_logs};

use super::{Banner, say_simulated};
use crate::args::{Format, Global, JobArgs, Run};
use crate::backend::Backend;
use crate::exit::{Exit, code};
use crate::settings::JobSettings;

/// The settings the flags say (`run` and `render`).
pub(crate) fn settings(job: &JobArgs) -> JobSettings {
    JobSettings {
        node: job.node.clone(),
        critical: job.critical,
        deadline: job.deadline,
        name: job.name.clone(),
        image: job.image.clone(),
        argv: job.argv.clone(),
    }
}

/// Runs `nodejob run`.
pub(crate) fn run(global: &Global, args: Run) -> Result<Exit, Exit> {
    let output = global.output.text_or_json("run")?;
    let spec = settings(&args.job)
        .spec(&global.namespace)
        .map_err(Exit::usage)?;
    let backend =
        Backend::new(global, args.sim.simulate).clocked(args.sim.speed, args.sim.simulate_start);
    backend.has_node("--node", &spec.node)?;
    let outcome = backend.block_on(|t| async move {
        say_simulated(&t, Banner::Stderr);
        Ok(if args.exit_code_only {
            run_exit_code(&*t.api, &spec).await.map(|c| (c, None))
        } else {
            run_exit_code_logs(&*t.api, &spec)
                .await
                .map(|(c, l)| (c, Some(l)))
        })
    })?;
    match outcome {
        Ok((exit, log)) => {
            match (output, log) {
                // One object: the exit code and the log (null with --exit-code-only).
                (Format::Json, log) => {
                    outln!("{}", serde_json::json!({"exit_code": exit, "log": log}))
                }
                (_, Some(log)) => out!("{log}"),
                (_, None) => {}
            }
            Ok(Exit::with(u8::try_from(exit).unwrap_or(code::FAILED), ""))
        }
        Err(e) => Err(Exit::failed(e.to_string())),
    }
}
