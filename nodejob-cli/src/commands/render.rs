//! `nodejob render`: the Job `run` would create, touching no cluster.

use nodejob_core::build;

use super::run::settings;
use crate::args::{Global, Render};
use crate::exit::Exit;

/// Runs `nodejob render`.
pub(crate) fn render(global: &Global, args: Render) -> Result<Exit, Exit> {
    let spec = settings(&args.job)
        .spec(&global.namespace)
        .map_err(Exit::usage)?;
    let job = build(&spec);
    let text = if args.format == "json" {
        serde_json::to_string_pretty(&job).map_err(|e| Exit::failed(e.to_string()))? + "\n"
    } else {
        serde_saphyr::to_string(&job).map_err(|e| Exit::failed(e.to_string()))?
    };
    out!("{text}");
    Ok(Exit::ok())
}
