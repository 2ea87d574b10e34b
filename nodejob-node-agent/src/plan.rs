//! What a container "does": its pod's argv read with the fake kubelet's vocabulary
//! ([`nodejob_fake::host`]), falling back to the fake's default [`NodeScript`]; and the
//! termination message the kubelet derives from it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use nodejob_fake::NodeScript;
use nodejob_fake::host::Directives;

/// The exit status of a container the kubelet stopped on its pod's deletion: the programs do
/// not trap SIGTERM, so they end by it (128 + 15), as a real kubelet's containers do and as the
/// fake reports it.
pub(crate) const KILLED_EXIT_CODE: i32 = nodejob_fake::termination::SIGTERM_EXIT;

/// The host program one container plays, fixed when its pod is first seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// How long it runs before it exits on its own.
    pub(crate) run: Duration,
    /// Its exit status, in `0..=255`.
    pub(crate) exit_code: i32,
    /// What it prints (all at once, when it exits on its own).
    pub(crate) log: String,
    /// `terminationMessagePolicy: FallbackToLogsOnError`.
    pub(crate) fallback_to_logs: bool,
}

impl Plan {
    /// The plan of `container`: `command` followed by `args`, read as the fake kubelet does.
    pub(crate) fn of(container: &Container) -> Plan {
        let argv: Vec<&str> = (container.command.iter().flatten())
            .chain(container.args.iter().flatten())
            .map(String::as_str)
            .collect();
        let directives = Directives::parse(&argv);
        let script = NodeScript::default();
        Plan {
            run: directives.run.unwrap_or(script.run_time),
            exit_code: directives.exit.unwrap_or(script.exit_code.rem_euclid(256)),
            log: directives.log_text().unwrap_or(script.log),
            fallback_to_logs: container.termination_message_policy.as_deref()
                == Some("FallbackToLogsOnError"),
        }
    }

    /// The `terminated.message` the kubelet writes for an exit with `exit_code` and output
    /// `log`: with `FallbackToLogsOnError`, the fake kubelet's rule
    /// ([`nodejob_fake::termination::fallback_message`]); otherwise none (the program writes no
    /// `terminationMessagePath` file).
    pub(crate) fn termination_message(&self, exit_code: i32, log: &str) -> Option<String> {
        self.fallback_to_logs
            .then(|| nodejob_fake::termination::fallback_message(exit_code, log))
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(command: &[&str], args: &[&str], policy: Option<&str>) -> Container {
        let strings =
            |s: &[&str]| (!s.is_empty()).then(|| s.iter().map(|x| x.to_string()).collect());
        Container {
            name: "host".into(),
            command: strings(command),
            args: strings(args),
            termination_message_policy: policy.map(str::to_string),
            ..Container::default()
        }
    }

    #[test]
    fn argv_to_plan() {
        let fallback = Some("FallbackToLogsOnError");
        let table = [
            // (command, args, policy) -> (run secs, exit, log, fallback)
            (container(&["true"], &[], None), (2, 0, "", false)),
            (
                container(
                    &[
                        "nsenter",
                        "--",
                        "x",
                        "nodejob-test:exit=3",
                        "nodejob-test:log=a",
                    ],
                    &["nodejob-test:log=b", "nodejob-test:run=0"],
                    fallback,
                ),
                (0, 3, "a\nb\n", true),
            ),
            // args follow command: the last `exit` wins, wherever it is.
            (
                container(
                    &["nodejob-test:exit=1"],
                    &["nodejob-test:exit=-1"],
                    Some("File"),
                ),
                (2, 255, "", false),
            ),
            (
                container(&[], &["nodejob-test:run=7", "nodejob-test:exit=x"], None),
                (7, 0, "", false),
            ),
        ];
        for (c, (run, exit_code, log, fallback_to_logs)) in table {
            let want = Plan {
                run: Duration::from_secs(run),
                exit_code,
                log: log.to_string(),
                fallback_to_logs,
            };
            assert_eq!(Plan::of(&c), want, "{c:?}");
        }
    }

    #[test]
    fn termination_message_only_under_fallback_to_logs_for_a_failure() {
        let plan = |fallback_to_logs| Plan {
            run: Duration::ZERO,
            exit_code: 0,
            log: String::new(),
            fallback_to_logs,
        };
        assert_eq!(
            plan(true).termination_message(1, "x\n").as_deref(),
            Some("x\n")
        );
        assert_eq!(plan(true).termination_message(0, "x\n"), None);
        assert_eq!(plan(false).termination_message(1, "x\n"), None);
        assert_eq!(plan(true).termination_message(KILLED_EXIT_CODE, ""), None);
        // The cut itself (80 lines, 2048 bytes) is the fake kubelet's, tested there.
    }
}
