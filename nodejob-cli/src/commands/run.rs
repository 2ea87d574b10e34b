//! `nodejob run`: one privileged Job on a node; prints its log, exits with its container's
//! exit code.

use nodejob_core::{run_exit_code, run_exit_code_logs};

use super::{Banner, say_simulated};
use crate::args::{Global, JobArgs, Run};
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
            if let Some(log) = log {
                out!("{log}");
            }
            Ok(Exit::with(u8::try_from(exit).unwrap_or(code::FAILED), ""))
        }
        Err(e) => Err(Exit::failed(e.to_string())),
    }
}
