//! The test vocabulary of the exec'd argv: what the fake kubelet (and a real test node agent)
//! reads from a Job's command line.
//!
//! The argv is the container's `command` followed by its `args` (the fake kubelet reads a
//! pod's first container). Any element that starts with [`PREFIX`] (`nodejob-test:`) is a
//! directive; every other element is ignored, so a directive can ride along any real command
//! line (`nsenter … -- stratum upgrade nodejob-test:exit=3`). The directives:
//!
//! - `nodejob-test:exit=N`: the process exits with status `N`, an `i32` taken modulo 256 as a
//!   process exit status is (`-1` is 255, `256` is 0);
//! - `nodejob-test:log=TEXT`: the process prints `TEXT` and a newline; one element per line,
//!   in argv order; `TEXT` is everything after the first `=` and may be empty;
//! - `nodejob-test:run=SECONDS`: the process runs `SECONDS` (a non-negative decimal integer)
//!   seconds before it exits.
//!
//! Where one directive appears several times, the last `exit` and the last `run` win; every
//! `log` counts. An element with the prefix but no known key, or whose value does not parse
//! (`nodejob-test:exit=x`), is ignored like any other element. Directives win over the node's
//! [`NodeScript`](crate::NodeScript) where both speak: `exit` over
//! [`exit_code`](crate::NodeScript::exit_code), `log` (any) over
//! [`log`](crate::NodeScript::log), `run` over [`run_time`](crate::NodeScript::run_time).
//!
//! Build elements with [`exit`], [`log`] and [`run`] rather than spelling them:
//!
//! ```
//! use std::time::Duration;
//! use nodejob_fake::host;
//!
//! let argv = [
//!     "stratum".to_string(),
//!     host::log("hello"),
//!     host::run(Duration::from_secs(5)),
//!     host::exit(3),
//! ];
//! let d = host::Directives::parse(&argv);
//! assert_eq!(d.exit, Some(3));
//! assert_eq!(d.log, ["hello"]);
//! assert_eq!(d.run, Some(Duration::from_secs(5)));
//! ```

use std::time::Duration;

/// The prefix that marks an argv element as a directive.
pub const PREFIX: &str = "nodejob-test:";

/// `nodejob-test:exit=N`: the process exits with status `code` (modulo 256).
pub fn exit(code: i32) -> String {
    format!("{PREFIX}exit={code}")
}

/// `nodejob-test:log=TEXT`: the process prints `line` and a newline.
pub fn log(line: impl AsRef<str>) -> String {
    format!("{PREFIX}log={}", line.as_ref())
}

/// `nodejob-test:run=SECONDS`: the process runs `duration`, rounded up to whole seconds.
pub fn run(duration: Duration) -> String {
    let secs = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    format!("{PREFIX}run={secs}")
}

/// What an argv says the process does, each field `None` (or empty) where it says nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Directives {
    /// The exit status, already reduced to `0..=255`.
    pub exit: Option<i32>,
    /// The lines printed, in order.
    pub log: Vec<String>,
    /// How long the process runs.
    pub run: Option<Duration>,
}

impl Directives {
    /// Reads the directives out of `argv`, ignoring every other element.
    pub fn parse<S: AsRef<str>>(argv: &[S]) -> Self {
        let mut d = Directives::default();
        for element in argv {
            let Some(directive) = element.as_ref().strip_prefix(PREFIX) else {
                continue;
            };
            let Some((key, value)) = directive.split_once('=') else {
                continue;
            };
            match key {
                "exit" => {
                    if let Ok(code) = value.parse::<i32>() {
                        d.exit = Some(code.rem_euclid(256));
                    }
                }
                "log" => d.log.push(value.to_string()),
                "run" => {
                    if let Ok(secs) = value.parse::<u64>() {
                        d.run = Some(Duration::from_secs(secs));
                    }
                }
                _ => {}
            }
        }
        d
    }

    /// The log the lines make: each followed by a newline.
    pub fn log_text(&self) -> Option<String> {
        (!self.log.is_empty()).then(|| self.log.iter().map(|l| format!("{l}\n")).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_ignores() {
        let argv = [
            "nsenter",
            "--target=1",
            "nodejob-test:exit=1",
            "nodejob-test:log=a=b",
            "nodejob-test:exit=-1",
            "nodejob-test:log=",
            "nodejob-test:run=x",
            "nodejob-test:run=7",
            "nodejob-test:nope=1",
            "nodejob-test:exit",
            "xnodejob-test:exit=9",
        ];
        let d = Directives::parse(&argv);
        assert_eq!(d.exit, Some(255));
        assert_eq!(d.log, ["a=b", ""]);
        assert_eq!(d.run, Some(Duration::from_secs(7)));
        assert_eq!(d.log_text().as_deref(), Some("a=b\n\n"));
    }

    #[test]
    fn constructors_round_trip() {
        assert_eq!(exit(256), "nodejob-test:exit=256");
        assert_eq!(run(Duration::from_millis(1500)), "nodejob-test:run=2");
        let d = Directives::parse(&[exit(256), log("x y"), run(Duration::from_secs(3))]);
        assert_eq!((d.exit, d.run), (Some(0), Some(Duration::from_secs(3))));
        assert_eq!(d.log, ["x y"]);
        assert_eq!(Directives::parse::<&str>(&[]), Directives::default());
    }
}
