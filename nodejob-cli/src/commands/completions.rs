//! `nodejob completions SHELL`: shell completions.

use clap::CommandFactory;

use crate::args::Cli;
use crate::exit::Exit;

/// Prints the completions of `shell`, through [`crate::stdout::write`]: generated whole first,
/// so that a reader gone early (`nodejob completions bash | head`) ends the command as SIGPIPE
/// would, where the generator writing to stdout itself would panic.
pub(crate) fn completions(shell: clap_complete::Shell) -> Result<Exit, Exit> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "nodejob", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    Ok(Exit::ok())
}
