//! The subcommands, one file each. Each reads its flags into `crate::settings` (a refusal
//! exits 2 before any API call), runs on the `crate::backend` the flags chose, and prints what
//! `crate::present` makes of the result.

pub(crate) mod completions;
pub(crate) mod jobs;
pub(crate) mod render;
pub(crate) mod rotate_ca;
pub(crate) mod run;
pub(crate) mod status;
pub(crate) mod upgrade;

use crate::backend::Target;
use crate::exit::{Exit, code};
use crate::present::{DriverError, ErrorKind, simulated};
use crate::settings::Refused;

/// Settings refused, as the command line says it: naming the flag.
fn refused(refusal: Refused) -> Exit {
    Exit::usage(match refusal {
        Refused::Value { field, why } => format!("{}: {why}", field.flag()),
        Refused::Unreadable { path, why } => {
            format!("--new-ca {}: reading it: {why}", path.display())
        }
        Refused::NoCa => "--new-ca: required (the new CA's PEM file)".into(),
        Refused::Plan { field, error, .. } => format!("{}: {error}", field.flag()),
    })
}

/// How a driver's error ends the command: bad input exits 2, a held Lease 3, the rest 1.
fn driver_exit(e: DriverError) -> Exit {
    match e.kind {
        ErrorKind::Plan { .. } | ErrorKind::NoSuchNode => Exit::usage(e.text),
        ErrorKind::LeaseHeld => {
            Exit::with(code::LEASE_HELD, format!("{}; try again later", e.text))
        }
        ErrorKind::Failed => Exit::failed(e.text),
    }
}

/// Where a command that shows no run says that the cluster is simulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Banner {
    /// On stdout, first: the command's text for people (a preview).
    Stdout,
    /// On stderr: stdout is data (a container's log, one JSON object).
    Stderr,
}

/// Under `--simulate`, the banner of a command that shows no run (a preview, `run`): the
/// cluster and its clock, unpaced.
fn say_simulated(target: &Target, banner: Banner) {
    let Some(setup) = &target.simulated else {
        return;
    };
    for line in simulated::banner(setup, None) {
        match banner {
            Banner::Stdout => outln!("{line}"),
            Banner::Stderr => eprintln!("{line}"),
        }
    }
}

/// Where a preview in `format` says that the cluster is simulated: first on stdout for text,
/// on stderr beside one JSON object.
fn preview_banner(format: crate::args::Format) -> Banner {
    match format {
        crate::args::Format::Text => Banner::Stdout,
        crate::args::Format::Json => Banner::Stderr,
    }
}
