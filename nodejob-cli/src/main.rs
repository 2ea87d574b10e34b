//! `nodejob`: rolling node upgrades, cluster CA rotations and privileged node Jobs, against a
//! cluster (kubeconfig as kubectl loads it) or, with `--simulate N`, an in-memory cluster of N
//! nodes.
//!
//! The only crate where a backend (`nodejob-kube`, `nodejob-fake`) meets a driver.

/// `println!` for what the command prints on stdout, through [`stdout_write`]: a reader that
/// went away ends the process quietly instead of a panic.
macro_rules! outln {
    () => { $crate::stdout_write(format_args!("\n")) };
    ($($t:tt)*) => { $crate::stdout_write(format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` through [`stdout_write`].
macro_rules! out {
    ($($t:tt)*) => { $crate::stdout_write(format_args!($($t)*)) };
}

mod args;
mod commands;
mod jobs;
mod mcp;
mod output;
mod rotate;
mod sim;
mod status;

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;

/// How the command ends, as scripts read it.
#[derive(Debug)]
pub(crate) struct Exit {
    /// The process exit code.
    pub(crate) code: u8,
    /// What to print on stderr (nothing when empty).
    pub(crate) message: String,
}

/// Exit codes.
pub(crate) mod code {
    /// Done.
    pub(crate) const OK: u8 = 0;
    /// The operation failed.
    pub(crate) const FAILED: u8 = 1;
    /// Bad usage or invalid input, before any API call.
    pub(crate) const USAGE: u8 = 2;
    /// Another holder has the Lease: try later.
    pub(crate) const LEASE_HELD: u8 = 3;
}

impl Exit {
    /// Ends with `code` and `message`.
    pub(crate) fn with(code: u8, message: impl Into<String>) -> Self {
        Exit {
            code,
            message: message.into(),
        }
    }

    /// Bad usage or invalid input.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Exit::with(code::USAGE, message)
    }

    /// The operation failed.
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Exit::with(code::FAILED, message)
    }
}

impl From<anyhow::Error> for Exit {
    fn from(e: anyhow::Error) -> Self {
        Exit::failed(format!("{e:#}"))
    }
}

/// The exit status a shell reports for a process ended by SIGPIPE (128 + 13).
const BROKEN_PIPE: i32 = 141;

/// Writes to stdout. When the reader has gone (`nodejob jobs | head`), the process ends at
/// once with [`BROKEN_PIPE`], as a Unix tool killed by SIGPIPE does (Rust ignores the signal
/// and `println!` would panic); a run in flight is then resumable as after Ctrl-C twice. Any
/// other write error ends it with a message.
pub(crate) fn stdout_write(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE);
        }
        eprintln!("writing to stdout: {e}");
        std::process::exit(i32::from(code::FAILED));
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = match cli.global.verbose {
        0 => "warn",
        1 => "info,nodejob=debug",
        _ => "debug",
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .try_init();
    let exit = commands::dispatch(cli).unwrap_or_else(|e| e);
    if !exit.message.is_empty() {
        eprintln!("{}", exit.message);
    }
    ExitCode::from(exit.code)
}
