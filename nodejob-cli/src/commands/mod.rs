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

use crate::exit::{Exit, code};
use crate::present::{DriverError, ErrorKind};
use crate::settings::{Field, Refused, rule_said};

/// Settings refused, as the command line says it: naming the flag.
fn refused(refusal: Refused) -> Exit {
    Exit::usage(match refusal {
        Refused::Value { field, why } => format!("{}: {why}", field.flag()),
        Refused::Unreadable { path, why } => {
            format!("--new-ca {}: reading it: {why}", path.display())
        }
        Refused::NoCa => "--new-ca: required (the new CA's PEM file)".into(),
        Refused::Plan { field, rule, .. } => {
            format!("{}: {}", field.flag(), rule_said(&rule, Field::flag))
        }
    })
}

/// How a driver's error ends the command: bad input exits 2, a held Lease 3, the rest 1.
fn driver_exit(e: DriverError) -> Exit {
    driver_exit_naming(e, "")
}

/// [`driver_exit`], a refused new CA named as `new_ca` (its file).
fn driver_exit_naming(e: DriverError, new_ca: &str) -> Exit {
    match e.kind {
        ErrorKind::Plan { field, rule } => Exit::usage(format!(
            "{}: {}",
            Field::of_plan(field, new_ca).flag(),
            rule_said(&rule, Field::flag)
        )),
        ErrorKind::NoSuchNode => Exit::usage(rule_said(&e.text, Field::flag)),
        ErrorKind::LeaseHeld => {
            Exit::with(code::LEASE_HELD, format!("{}; try again later", e.text))
        }
        ErrorKind::Failed => Exit::failed(rule_said(&e.text, Field::flag)),
    }
}
