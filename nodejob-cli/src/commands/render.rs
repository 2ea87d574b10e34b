//! `nodejob render`: the Job `run` would create, touching no cluster.

use nodejob_core::build;

use super::run::settings;
use crate::args::{Format, Global, Render};
use crate::exit::Exit;

/// Runs `nodejob render`.
pub(crate) fn render(global: &Global, args: Render) -> Result<Exit, Exit> {
    let spec = settings(&args.job)
        .spec(&global.namespace)
        .map_err(Exit::usage)?;
    let job = build(&spec);
    // `-o json|yaml` (text is YAML, as the Job's manifest); the hidden `--format` of old wins.
    let json = match args.format.as_deref() {
        Some(format) => format == "json",
        None => global.output == Format::Json,
    };
    let text = if json {
        serde_json::to_string_pretty(&job).map_err(|e| Exit::failed(e.to_string()))? + "\n"
    } else {
        serde_saphyr::to_string(&job).map_err(|e| Exit::failed(e.to_string()))?
    };
    out!("{text}");
    Ok(Exit::ok())
}
