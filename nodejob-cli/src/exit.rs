//! How the command ends, as scripts read it: an exit code and a message for stderr.

/// How the command ends.
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
    /// Stopped before the end with nothing failed: not now (outside the maintenance window,
    /// the Lease lost to another holder, too many nodes unavailable). A rerun resumes.
    pub(crate) const NOT_NOW: u8 = 4;
    /// The cluster's apiserver could not be reached (after a few attempts, within seconds).
    pub(crate) const UNREACHABLE: u8 = 5;
    /// Interrupted (Ctrl-C), as the shell reports a process SIGINT ended: 128 + 2.
    pub(crate) const INTERRUPTED: u8 = 130;
}

impl Exit {
    /// Ends with `code` and `message`.
    pub(crate) fn with(code: u8, message: impl Into<String>) -> Self {
        Exit {
            code,
            message: message.into(),
        }
    }

    /// Done, nothing to add.
    pub(crate) fn ok() -> Self {
        Exit::with(code::OK, "")
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
