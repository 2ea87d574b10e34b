//! `stratum` on a real node of the end-to-end suite: the host program a node Job `nsenter`s
//! and execs (`nsenter --target 1 … -- stratum …`), installed in the node's `/usr/local/bin`
//! by `e2e/node/node prepare`.
//!
//! It plays an argv scripted by `nodejob-test:` directives as the fake's kubelet and the node
//! agent do, from the same rules ([`nodejob_host::directives`], [`nodejob_host::Fallback`]):
//! it runs the `run` time, prints the `log` lines as it exits, and exits with the `exit`
//! status; under `sigterm=ignore` it traps SIGTERM and goes on until the SIGKILL. Here the
//! process, the signals, the exit status and the log are real: the container runtime, the
//! kubelet and `nsenter` carry them. An argv with no directive is a usage error (exit 2).

use std::io::Write;

use nodejob_host::directives::Directives;
use nodejob_host::{Fallback, OnSigterm};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let directives = Directives::parse(&argv);
    if !directives.scripts_process() {
        eprintln!("stratum: no nodejob-test: directive in {argv:?}");
        std::process::exit(2);
    }
    // Trapped from the start, as the model's program ignores SIGTERM for its whole run.
    let _trap = match directives.on_sigterm {
        Some(OnSigterm::Ignore) => Some(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("trapping SIGTERM"),
        ),
        _ => None,
    };
    let execution = Fallback::default().execution(&directives);
    tokio::time::sleep(execution.run).await;
    let mut out = std::io::stdout().lock();
    // A closed stdout (the container gone) does not change the exit status.
    let _ = out.write_all(execution.log.as_bytes());
    let _ = out.flush();
    std::process::exit(execution.exit_code);
}
