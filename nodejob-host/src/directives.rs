//! The test vocabulary of the exec'd argv: what a kubelet of this crate's users (the fake's,
//! the end-to-end node agent) reads from a Job's command line. `nodejob_fake::host` is this
//! module.
//!
//! The argv is the container's `command` followed by its `args` ([`argv`]; a kubelet here
//! reads a pod's first container). Any element that starts with [`PREFIX`] (`nodejob-test:`)
//! is a directive; every other element is ignored, so a directive can ride along any real
//! command line (`nsenter … -- stratum upgrade nodejob-test:exit=3`). The directives:
//!
//! - `nodejob-test:exit=N`: the process exits with status `N`, an `i32` taken modulo 256 as a
//!   process exit status is (`-1` is 255, `256` is 0);
//! - `nodejob-test:log=TEXT`: the process prints `TEXT` and a newline; one element per line,
//!   in argv order; `TEXT` is everything after the first `=` and may be empty;
//! - `nodejob-test:run=SECONDS`: the process runs `SECONDS` (a non-negative decimal integer)
//!   seconds before it exits.
//! - `nodejob-test:sigterm=ignore`: the process traps SIGTERM and goes on: deleting its Pod
//!   ends it only with the SIGKILL at the end of the grace period (exit 137).
//!
//! A container plays a **host program** (it runs, prints its log and exits on its own, as the
//! runner's `stratum` does) when a `batch/v1` Job controls its Pod or its argv carries an
//! `exit`, `log` or `run` directive ([`is_host_program`]). Any other container plays a
//! **workload** (a Deployment's server, a DaemonSet's agent, a bare or static Pod): it runs,
//! Ready, prints nothing and never exits on its own; only its Pod's deletion ends it. The
//! `sigterm` directive applies to both.
//!
//! What a host program does is decided in this order ([`Plan::of`](crate::Plan::of)): an argv
//! with an `exit`, `log` or `run` directive is **scripted by hand**: the directives say what
//! they say and the kubelet's [`Fallback`](crate::Fallback) (the fake's `NodeScript`) fills in
//! the rest; no host model plays it or counts it. Otherwise the node's host model plays the
//! argv when it names its program ([`HostModel::exec`](crate::HostModel::exec): `stratum`, see
//! [`crate::stratum`]); any other argv is played by the fallback alone.
//!
//! Where one directive appears several times, the last `exit` and the last `run` win; every
//! `log` counts. An element with the prefix but no known key, or whose value does not parse
//! (`nodejob-test:exit=x`), is ignored like any other element. Directives win over the
//! fallback where both speak: `exit` over its exit code, `log` (any) over its log, `run` over
//! its run time.
//!
//! Build elements with [`exit`], [`log`] and [`run`] rather than spelling them:
//!
//! ```
//! use std::time::Duration;
//! use nodejob_host::directives;
//!
//! let argv = [
//!     "stratum".to_string(),
//!     directives::log("hello"),
//!     directives::run(Duration::from_secs(5)),
//!     directives::exit(3),
//! ];
//! let d = directives::Directives::parse(&argv);
//! assert_eq!(d.exit, Some(3));
//! assert_eq!(d.log, ["hello"]);
//! assert_eq!(d.run, Some(Duration::from_secs(5)));
//! assert!(d.scripts_process());
//! ```

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::termination::OnSigterm;

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

/// `nodejob-test:sigterm=ignore`: the process ignores SIGTERM and runs until the SIGKILL at the
/// end of its Pod's grace period.
pub fn ignore_sigterm() -> String {
    format!("{PREFIX}sigterm=ignore")
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
    /// What it does on SIGTERM ([`ignore_sigterm`]); `None` where the argv says nothing.
    pub on_sigterm: Option<OnSigterm>,
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
                "sigterm" if value == "ignore" => d.on_sigterm = Some(OnSigterm::Ignore),
                _ => {}
            }
        }
        d
    }

    /// The directives of a container's argv ([`argv`]).
    pub fn of(container: &Container) -> Self {
        Directives::parse(&argv(container))
    }

    /// Whether the argv scripts the process by hand: it carries an `exit`, `log` or `run`
    /// directive. The `sigterm` directive alone does not.
    pub fn scripts_process(&self) -> bool {
        self.exit.is_some() || !self.log.is_empty() || self.run.is_some()
    }

    /// The log the lines make: each followed by a newline.
    pub fn log_text(&self) -> Option<String> {
        (!self.log.is_empty()).then(|| self.log.iter().map(|l| format!("{l}\n")).collect())
    }
}

/// Whether a container of `pod` whose argv says `directives` plays a host program rather than a
/// workload (see the [module docs](self)): a `batch/v1` Job controls `pod`, or the argv carries
/// an `exit`, `log` or `run` directive. The `sigterm` directive alone does not make one.
pub fn is_host_program(pod: &Pod, directives: &Directives) -> bool {
    let job = (pod.metadata.owner_references.iter().flatten()).any(|o| {
        o.controller == Some(true) && o.kind == "Job" && o.api_version.starts_with("batch/")
    });
    job || directives.scripts_process()
}

/// A container's argv as its process is handed it: its `command` followed by its `args`, each
/// element [`expand`](crate::expansion::expand)ed as the kubelet does, with the container's
/// `env` values (a variable from a `valueFrom` source is not known here and stays a
/// reference).
pub fn argv(container: &Container) -> Vec<String> {
    let vars = |name: &str| {
        (container.env.iter().flatten())
            .rev()
            .find(|v| v.name == name)
            .and_then(|v| v.value.clone())
    };
    (container.command.iter().flatten())
        .chain(container.args.iter().flatten())
        .map(|element| crate::expansion::expand(element, vars))
        .collect()
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
        assert_eq!(d.on_sigterm, None);
        let ignores = Directives::parse(&[ignore_sigterm()]);
        assert_eq!(ignores.on_sigterm, Some(OnSigterm::Ignore));
        assert_eq!(
            Directives::parse(&["nodejob-test:sigterm=die"]).on_sigterm,
            None
        );
    }

    #[test]
    fn host_program_or_workload() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
        let owned = |kind: &str, api_version: &str, controller: bool| Pod {
            metadata: ObjectMeta {
                owner_references: Some(vec![OwnerReference {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    controller: Some(controller),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let none = Directives::default();
        let sigterm = Directives::parse(&[ignore_sigterm()]);
        let run = Directives::parse(&[run(Duration::from_secs(1))]);
        let table = [
            // (pod, directives) -> host program
            (owned("Job", "batch/v1", true), &none, true),
            (owned("Job", "batch/v1", false), &none, false),
            (owned("Job", "example.com/v1", true), &none, false),
            (owned("ReplicaSet", "apps/v1", true), &none, false),
            (owned("ReplicaSet", "apps/v1", true), &run, true),
            (Pod::default(), &sigterm, false),
            (Pod::default(), &Directives::parse(&[log("x")]), true),
            (Pod::default(), &Directives::parse(&[exit(0)]), true),
        ];
        for (pod, directives, want) in table {
            assert_eq!(
                is_host_program(&pod, directives),
                want,
                "{pod:?} {directives:?}"
            );
        }
    }

    #[test]
    fn constructors_round_trip() {
        assert_eq!(exit(256), "nodejob-test:exit=256");
        assert_eq!(run(Duration::from_millis(1500)), "nodejob-test:run=2");
        let d = Directives::parse(&[exit(256), log("x y"), run(Duration::from_secs(3))]);
        assert_eq!((d.exit, d.run), (Some(0), Some(Duration::from_secs(3))));
        assert_eq!(d.log, ["x y"]);
        assert_eq!(Directives::parse::<&str>(&[]), Directives::default());
        assert!(!Directives::parse(&[ignore_sigterm()]).scripts_process());
    }

    #[test]
    fn argv_is_command_then_args() {
        let c = Container {
            command: Some(vec!["a".into(), exit(1)]),
            args: Some(vec!["b".into()]),
            ..Container::default()
        };
        assert_eq!(argv(&c), ["a", "nodejob-test:exit=1", "b"]);
        assert_eq!(Directives::of(&c).exit, Some(1));
        assert!(argv(&Container::default()).is_empty());
    }
}
