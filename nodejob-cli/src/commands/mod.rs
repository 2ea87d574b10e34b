//! The subcommands, one file each. Each reads its flags into `crate::settings` (a refusal
//! exits 2 before any API call), runs on the `crate::backend` the flags chose, and prints what
//! `crate::present` makes of the result.

pub(crate) mod completions;
pub(crate) mod controller;
pub(crate) mod declared;
pub(crate) mod endpoints;
pub(crate) mod informers;
pub(crate) mod jobs;
pub(crate) mod pause;
pub(crate) mod render;
pub(crate) mod rotate_ca;
pub(crate) mod run;
pub(crate) mod status;
pub(crate) mod upgrade;

use upgrade_driver::Outcome;

use crate::backend::Target;
use crate::exit::{Exit, code};
use crate::present::{DriverError, ErrorKind, simulated};
use crate::settings::{Field, Refused, refusal_said, rule_said};

/// Refuses an argv after `--` that nothing in `command` takes (`takes`: what would, and how),
/// rather than ignoring it: `upgrade -- --dry-run` must not run the upgrade.
fn no_argv(command: &str, argv: &[String], takes: &str) -> Result<(), Exit> {
    if argv.is_empty() {
        return Ok(());
    }
    let given: Vec<String> = argv.iter().map(|a| shell_word(a)).collect();
    Err(Exit::usage(format!(
        "`-- {}`: nothing in `nodejob {command}` takes a command after `--` here, and it is \
         refused rather than ignored; {takes}",
        given.join(" ")
    )))
}

/// `word` as a shell would need it typed: as is when plain, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=./:,@%+".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Settings refused, as the command line says it: naming the flag.
fn refused(refusal: Refused) -> Exit {
    Exit::usage(match refusal {
        Refused::Value { field, why } => format!("{}: {why}", field.flag()),
        Refused::Unreadable { path, why } => {
            format!("--new-ca {}: reading it: {why}", path.display())
        }
        Refused::NoCa => "--new-ca: required (the new CA's PEM file)".into(),
        Refused::Plan { field, rule, .. } => refusal_said(&field, &rule, Field::flag),
    })
}

/// How a driver's error ends the command: bad input exits 2, a held Lease 3, the rest 1.
fn driver_exit(e: DriverError) -> Exit {
    driver_exit_naming(e, "")
}

/// [`driver_exit`], a refused new CA named as `new_ca` (its file).
fn driver_exit_naming(e: DriverError, new_ca: &str) -> Exit {
    match e.kind {
        ErrorKind::Plan { field, rule } => Exit::usage(refusal_said(
            &Field::of_plan(field, new_ca),
            &rule,
            Field::flag,
        )),
        ErrorKind::NoSuchNode => Exit::usage(rule_said(&e.text, Field::flag)),
        ErrorKind::LeaseHeld => {
            Exit::with(code::LEASE_HELD, format!("{}; try again later", e.text))
        }
        ErrorKind::Failed => Exit::failed(rule_said(&e.text, Field::flag)),
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
        crate::args::Format::Text | crate::args::Format::Yaml | crate::args::Format::Wide => {
            Banner::Stdout
        }
        crate::args::Format::Json => Banner::Stderr,
    }
}

/// How a preview ends when nothing refuses its plan: 0; 4 (not now) when a run now would start
/// no node (the window closed, the rolls paused), as the run would end.
fn preview_ended(not_now: &[nodejob_roll::NotNow]) -> Exit {
    if not_now.is_empty() {
        return Exit::ok();
    }
    let said: Vec<String> = not_now.iter().map(ToString::to_string).collect();
    Exit::with(
        code::NOT_NOW,
        format!(
            "not now: {}; a run now would start no node",
            said.join("; ")
        ),
    )
}

/// How a run that came to a report ends, `message` its words for stderr: done 0; a failure 1;
/// stopped with nothing failed, 130 when Ctrl-C asked for it (`interrupted`), else 4 (not now:
/// a closed window, the Lease lost, too many nodes unavailable); still paused at the pause
/// deadline, 4 (not now: resume, then run again).
fn ended(outcome: &Outcome, interrupted: bool, message: Option<String>) -> Exit {
    let message = message.unwrap_or_default();
    match outcome {
        Outcome::Done => Exit::with(code::OK, message),
        Outcome::Failed { .. } => Exit::failed(message),
        Outcome::Stopped { .. } if interrupted => Exit::with(code::INTERRUPTED, message),
        Outcome::Stopped { .. } | Outcome::Paused { .. } => Exit::with(code::NOT_NOW, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_without_failure_is_not_a_failure_and_an_interrupt_is_130() {
        let failed = Outcome::Failed {
            nodes: vec!["worker-a-0".into()],
            retry: "rerun".into(),
        };
        let stopped = Outcome::Stopped {
            why: "outside the maintenance window".into(),
        };
        let table = [
            (Outcome::Done, false, code::OK),
            (Outcome::Done, true, code::OK),
            (failed.clone(), false, code::FAILED),
            // Ctrl-C asked for a stop, and a node failed before it: the failure decides.
            (failed, true, code::FAILED),
            (stopped.clone(), false, code::NOT_NOW),
            (stopped, true, code::INTERRUPTED),
        ];
        for (outcome, interrupted, want) in table {
            let exit = ended(&outcome, interrupted, Some("why".into()));
            assert_eq!(exit.code, want, "{outcome:?} interrupted={interrupted}");
        }
        assert_eq!((code::NOT_NOW, code::INTERRUPTED), (4, 130));
    }
}
