//! `nodejob run`: one privileged Job on a node; prints its log, exits with its container's
//! exit code.

use nodejob_core::{NodeApi, run_exit_code, run_exit_code_logs};

use super::render::{print, settings};
use super::{Banner, say_simulated};
use crate::args::{DryRun, Format, Global, Run};
use crate::backend::Backend;
use crate::exit::{Exit, code};

/// Runs `nodejob run`.
pub(crate) fn run(global: &Global, args: Run) -> Result<Exit, Exit> {
    let spec = settings(&args.job)
        .spec(&global.namespace)
        .map_err(Exit::usage)?;
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(args.sim.speed, args.sim.start.simulate_start);
    backend.has_node("--node", &spec.node)?;
    // kubectl's `--dry-run`: the object printed, nothing created. `client` (and the bare
    // flag) touches no cluster, as `render`; `server` first reads the node, as the run would.
    if let Some(dry_run) = args.dry_run {
        let json = global.output == Format::Json;
        if dry_run == DryRun::Server {
            let node = spec.node.clone();
            backend.block_on(|t| async move { node_exists(&*t.api, &node).await })?;
        }
        print(&spec, json)?;
        return Ok(Exit::ok());
    }
    let output = global.output.text_or_json("run")?;
    let outcome = backend.block_on(|t| async move {
        say_simulated(&t, Banner::Stderr);
        node_exists(&*t.api, &spec.node).await?;
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

/// Refuses (exit 2) a `--node` the cluster has no node of, before any Job is created: a Job
/// pinned to a node that does not exist would stay Pending until its deadline, then be left
/// Failed.
async fn node_exists<A: NodeApi + ?Sized>(api: &A, node: &str) -> Result<(), Exit> {
    match api.get_node(node).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Err(Exit::usage(format!(
            "--node {node}: no such node in the cluster (`kubectl get nodes` lists them); no \
             Job was created"
        ))),
        Err(e) => Err(Exit::failed(format!("reading node {node}: {e}"))),
    }
}
