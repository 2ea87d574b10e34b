//! `nodejob completions SHELL`: shell completions.

use clap::CommandFactory;

use crate::args::Cli;
use crate::exit::Exit;

/// Prints the completions of `shell`.
pub(crate) fn completions(shell: clap_complete::Shell) -> Result<Exit, Exit> {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "nodejob", &mut std::io::stdout());
    Ok(Exit::ok())
}
