//! What every measurement runs: the runner function called ([`Call`]), how its wait is done
//! ([`Waiter`]), and the [`Spec`] of a bench Job.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use nodejob_core::runner::{Mode, Policy, Report, run_with};
use nodejob_core::{JobApi, NodeApi, Note, POLL_INTERVAL, Result, Spec};

use crate::poll::run_polling;

/// The namespace of every bench Job.
pub const NAMESPACE: &str = "default";

/// The runner function a run calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// [`nodejob_core::run`]: success or an error.
    Run,
    /// [`nodejob_core::run_exit_code`]: the exit code.
    ExitCode,
    /// [`nodejob_core::run_exit_code_logs`]: the exit code and the log.
    ExitCodeLogs,
}

impl Call {
    /// Every runner function, in the order the table lists them.
    pub const ALL: [Call; 3] = [Call::Run, Call::ExitCode, Call::ExitCodeLogs];

    /// The runner's mode for this function.
    pub fn mode(self) -> Mode {
        match self {
            Call::Run => Mode::Run,
            Call::ExitCode => Mode::ExitCode,
            Call::ExitCodeLogs => Mode::ExitCodeLogs,
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Call::Run => "run",
            Call::ExitCode => "run_exit_code",
            Call::ExitCodeLogs => "run_exit_code_logs",
        })
    }
}

/// How a run waits for its Job to finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiter {
    /// The runner as it is: event-driven ([`nodejob_core::run_with`]).
    Watch,
    /// The polling baseline at this interval ([`run_polling`]).
    Poll(Duration),
}

impl Waiter {
    /// Both waiters, the baseline polling at the seed's interval ([`POLL_INTERVAL`]).
    pub const BOTH: [Waiter; 2] = [Waiter::Watch, Waiter::Poll(POLL_INTERVAL)];

    /// Runs the Job of `spec` as `call` does, waiting this way.
    pub async fn run<A: JobApi + NodeApi + ?Sized>(
        self,
        api: &A,
        spec: &Spec,
        call: Call,
    ) -> Result<Report> {
        match self {
            Waiter::Watch => run_with(api, spec, call.mode(), Policy::default()).await,
            Waiter::Poll(interval) => run_polling(api, spec, call.mode(), interval).await,
        }
    }
}

impl fmt::Display for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Waiter::Watch => f.write_str("watch (ours)"),
            Waiter::Poll(every) => write!(f, "poll every {}s", every.as_secs_f64()),
        }
    }
}

/// The Job `name` on `node`, whose container runs `argv`, waited for at most `bound` (rounded
/// up to whole [`POLL_INTERVAL`]s); its notes are dropped.
pub fn spec(name: &str, node: &str, argv: Vec<String>, bound: Duration) -> Spec {
    let attempts = bound.as_nanos().div_ceil(POLL_INTERVAL.as_nanos());
    Spec {
        namespace: NAMESPACE.into(),
        name: name.into(),
        node: node.into(),
        label_key: "nodejob.bench/node".into(),
        container: "run".into(),
        argv,
        active_deadline: bound.saturating_mul(2),
        poll_attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        kind: "bench".into(),
        critical: false,
        image: None,
        output: Some(Arc::new(|_: &Note| {})),
    }
}

/// A host command that does nothing of its own, so the fake's node script says how long it runs,
/// what it prints and how it exits.
pub fn scripted_argv() -> Vec<String> {
    [
        "nsenter",
        "-t",
        "1",
        "-m",
        "-u",
        "-i",
        "-n",
        "-p",
        "--",
        "/usr/local/bin/bench-op",
    ]
    .map(String::from)
    .to_vec()
}
