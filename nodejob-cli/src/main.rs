//! `nodejob`: rolling node upgrades, cluster CA rotations and privileged node Jobs, against a
//! cluster (kubeconfig as kubectl loads it) or, with `--simulate N`, an in-memory cluster of N
//! nodes.
//!
//! The only crate where a backend (`nodejob-kube`, `nodejob-fake`) meets a driver. Laid out as
//! uv's: [`args`] holds clap's types, [`settings`] turns flags and MCP arguments into each
//! driver's plan, [`backend`] is the one place that tells a simulated cluster from a real one,
//! [`present`] makes every text a person reads, `commands/` holds one file per command and
//! `mcp/` the MCP server. This file is the only one that names every command.
//!
//! ```text
//!  main ─▶ commands::<cmd> ─┬▶ settings ─▶ parse        mcp ─▶ mcp::{ops, tools, params,
//!                           ├▶ backend ─▶ sim                  stream, token} ─▶ (the same)
//!                           ├▶ present ─▶ inspect
//!                           └▶ render ─▶ present
//! ```

#[macro_use]
mod stdout;

mod args;
mod backend;
mod commands;
mod exit;
mod inspect;
mod interrupt;
mod mcp;
mod parse;
mod present;
mod render;
mod settings;
mod sim;
mod virtual_clock;

use std::process::ExitCode;

use crate::args::{Cli, Command};
use crate::exit::Exit;

/// Runs the command line.
fn dispatch(cli: Cli) -> Result<Exit, Exit> {
    let global = cli.global;
    match cli.command {
        Command::Upgrade(args) => commands::upgrade::upgrade(&global, args),
        Command::RotateCa(args) => commands::rotate_ca::rotate_ca(&global, args),
        Command::Run(args) => commands::run::run(&global, args),
        Command::Render(args) => commands::render::render(&global, args),
        Command::Jobs(args) => commands::jobs::jobs(&global, args),
        Command::Status(args) => commands::status::status(&global, args),
        Command::Pause(args) => commands::pause::pause(&global, args),
        Command::Resume(args) => commands::pause::resume(&global, args),
        Command::Mcp(args) => mcp::serve(&global, args),
        Command::Controller(args) => commands::controller::controller(&global, args),
        Command::RenderCrds => commands::render::crds(&global),
        Command::Completions { shell } => commands::completions::completions(shell),
    }
}

/// The global flags of a cluster's connection, which mean nothing to a command that talks to
/// none.
const CONNECTION: [&str; 4] = ["kubeconfig", "context", "qps", "burst"];

/// The global flags that mean nothing to `command`, refused when given rather than ignored,
/// and why: `completions` prints a script and talks to no cluster; `render` prints the Job
/// (in `-n`'s namespace, as `-o` says) and talks to no cluster either.
fn meaningless(command: &str) -> Option<(Vec<&'static str>, &'static str)> {
    match command {
        "completions" => Some((
            [&CONNECTION[..], &["namespace", "output"]].concat(),
            "it prints a shell script and talks to no cluster",
        )),
        "render" => Some((
            CONNECTION.to_vec(),
            "it prints the Job and talks to no cluster (`run --dry-run=server` reads it)",
        )),
        _ => None,
    }
}

/// The command line, parsed; a global flag given to a command that has no use for it refused
/// as clap refuses a usage error (exit 2).
fn command_line() -> Cli {
    use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
    let mut command = Cli::command();
    let matches = command
        .try_get_matches_from_mut(std::env::args_os())
        .unwrap_or_else(|e| args::without_trailing_tip(e, &Cli::command()).exit());
    // `--simulate-start` on the command line needs `--simulate` (clap's `requires` would also
    // refuse NODEJOB_SIMULATE_START set in the environment of a run on a real cluster).
    if let Some((name, sub)) = matches.subcommand()
        && sub.try_get_raw("simulate_start").is_ok()
        && sub.value_source("simulate_start") == Some(ValueSource::CommandLine)
        && sub.value_source("simulate").is_none()
    {
        let mut sub_command = command
            .find_subcommand_mut(name)
            .cloned()
            .unwrap_or_default();
        sub_command
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "--simulate-start starts a simulated cluster's clock: it needs --simulate N",
            )
            .exit();
    }
    if let Some((name, sub)) = matches.subcommand()
        && let Some((ids, why)) = meaningless(name)
    {
        for id in ids {
            if sub.value_source(id) == Some(ValueSource::CommandLine) {
                command
                    .error(
                        clap::error::ErrorKind::ArgumentConflict,
                        format!("--{id} means nothing to `{name}`: {why}"),
                    )
                    .exit();
            }
        }
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if cli.global.output == args::Format::Wide
        && let Some((name, _)) = matches.subcommand()
        && !args::WIDE.contains(&name)
    {
        command
            .error(
                clap::error::ErrorKind::InvalidValue,
                format!(
                    "-o wide: `nodejob {name}` has no wide form; it is for the tables of `{}`",
                    args::WIDE.join("` and `")
                ),
            )
            .exit();
    }
    cli
}

/// Whether what goes to stderr may be coloured: only on a terminal, and not when `NO_COLOR`
/// is set (no-color.org), so a file or a pipe gets no escape codes.
fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn main() -> ExitCode {
    let cli = command_line();
    // kube's client warns "Server cert bypassed" at every TLS handshake to a cluster whose
    // kubeconfig sets insecure-skip-tls-verify; kubectl says nothing of it, and a warning on
    // every command buries what matters: shown from -v on.
    // The controller on a cluster tells what it decides (its runs, its leadership) at info: a
    // process nobody watches is read through its logs. Simulated, its board says it.
    let in_cluster = matches!(&cli.command, Command::Controller(a) if a.sim.simulate.is_none());
    let filter = match cli.global.verbose {
        0 if in_cluster => "warn,nodejob_controller=info,kube_client::client::tls=error",
        0 => "warn,kube_client::client::tls=error",
        1 => "info,nodejob=debug",
        _ => "debug",
    };
    let env_filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter))
    };
    let json =
        matches!(&cli.command, Command::Controller(a) if a.log_format == args::LogFormat::Json);
    let _ = if json {
        tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_writer(std::io::stderr)
            .with_env_filter(env_filter())
            .try_init()
    } else {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(colour())
            .with_env_filter(env_filter())
            .try_init()
    };
    let exit = dispatch(cli).unwrap_or_else(|e| e);
    if !exit.message.is_empty() {
        eprintln!("{}", exit.message);
    }
    ExitCode::from(stdout::reader_gone().unwrap_or(exit.code))
}
