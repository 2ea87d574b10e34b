//! `nodejob render`: the Job `run` would create, touching no cluster; `nodejob render-crds`:
//! the controller's CRDs.

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
        .map_err(|e| Exit::usage(e.to_string()))?;
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

/// Runs `nodejob render-crds`: both CRDs, YAML documents one after the other (`-o json`: a
/// `List` of them, as `kubectl get -o json` prints several objects).
pub(crate) fn crds(global: &Global) -> Result<Exit, Exit> {
    out!("{}", crds_text(global.output == Format::Json)?);
    Ok(Exit::ok())
}

/// The CRDs as `render-crds` prints them.
pub(crate) fn crds_text(json: bool) -> Result<String, Exit> {
    let crds = nodejob_crd::crds();
    let failed = |e: &dyn std::fmt::Display| Exit::failed(e.to_string());
    if json {
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": crds});
        return Ok(serde_json::to_string_pretty(&list).map_err(|e| failed(&e))? + "\n");
    }
    let mut text = String::from(CRDS_HEADER);
    for crd in &crds {
        text.push_str("---\n");
        text.push_str(&serde_saphyr::to_string(crd).map_err(|e| failed(&e))?);
    }
    Ok(text)
}

/// What the YAML says of itself.
const CRDS_HEADER: &str = "\
# The CustomResourceDefinitions of `nodejob controller`, generated from the Rust types of
# nodejob-crd by `nodejob render-crds`; a test keeps this file equal to its output.
";
