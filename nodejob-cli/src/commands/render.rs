//! `nodejob render`: the Job `run` would create, touching no cluster.

use nodejob_core::{Spec, build};

use crate::args::{Format, Global, JobArgs, Render};
use crate::exit::Exit;
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

/// Runs `nodejob render`.
pub(crate) fn render(global: &Global, args: Render) -> Result<Exit, Exit> {
    let spec = settings(&args.job)
        .spec(&global.namespace)
        .map_err(Exit::usage)?;
    // `-o json|yaml` (text is YAML, as the Job's manifest); the hidden `--format` of old wins.
    let json = match args.format.as_deref() {
        Some(format) => format == "json",
        None => global.output == Format::Json,
    };
    print(&spec, json)?;
    Ok(Exit::ok())
}

/// Prints the Job of `spec` on stdout: JSON when `json`, else YAML, its manifest (`render`,
/// and `run --dry-run`).
pub(crate) fn print(spec: &Spec, json: bool) -> Result<(), Exit> {
    let job = build(spec);
    let text = if json {
        serde_json::to_string_pretty(&job).map_err(|e| Exit::failed(e.to_string()))? + "\n"
    } else {
        serde_saphyr::to_string(&job).map_err(|e| Exit::failed(e.to_string()))?
    };
    out!("{text}");
    Ok(())
}
