//! What a container "does": its pod's argv read with the fake kubelet's vocabulary
//! ([`nodejob_fake::host`]), falling back to the fake's default [`NodeScript`]; and the
//! termination message the kubelet derives from it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use nodejob_fake::NodeScript;
use nodejob_fake::host::Directives;

/// The kubelet's `MaxContainerTerminationMessageLogLines`: how many lines of the log a
/// `FallbackToLogsOnError` message keeps.
const MESSAGE_LOG_LINES: usize = 80;
/// The kubelet's `MaxContainerTerminationMessageLogLength`: how many bytes (the last ones) of
/// those lines it keeps.
const MESSAGE_LOG_BYTES: usize = 2 * 1024;

/// The exit status of a container the kubelet stopped on its pod's deletion: the programs do
/// not trap SIGTERM, so they end by it (128 + 15), as a real kubelet's containers do and as the
/// fake reports it.
pub(crate) const KILLED_EXIT_CODE: i32 = 143;

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
    /// `log`: with `FallbackToLogsOnError` and a non-zero exit, the last
    /// [`MESSAGE_LOG_LINES`] lines of the log cut to their last [`MESSAGE_LOG_BYTES`] bytes
    /// (`readLastStringFromContainerLogs`); otherwise none (the program writes no
    /// `terminationMessagePath` file).
    pub(crate) fn termination_message(&self, exit_code: i32, log: &str) -> Option<String> {
        if !self.fallback_to_logs || exit_code == 0 {
            return None;
        }
        let tail = tail_lines(log, MESSAGE_LOG_LINES).as_bytes();
        let last = &tail[tail.len().saturating_sub(MESSAGE_LOG_BYTES)..];
        // The kubelet keeps bytes; a character cut in two becomes U+FFFD once encoded in JSON,
        // as Go's encoder does.
        let message = String::from_utf8_lossy(last).into_owned();
        (!message.is_empty()).then_some(message)
    }
}

/// The last `n` lines of `text` (a final line without a newline counts), as the kubelet's
/// `tailLines` reads a log.
pub(crate) fn tail_lines(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.rmatch_indices('\n').nth(n - 1) {
        Some((at, _)) => &text[at + 1..],
        None => text,
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
    fn tails() {
        let table = [
            ("a\nb\nc\n", 2, "b\nc\n"),
            ("a\nb\nc", 2, "b\nc"),
            ("a\nb\nc\n", 3, "a\nb\nc\n"),
            ("a\nb\nc\n", 9, "a\nb\nc\n"),
            ("a\nb\nc\n", 0, ""),
            ("", 1, ""),
            ("\n\n", 1, "\n"),
        ];
        for (text, n, want) in table {
            assert_eq!(tail_lines(text, n), want, "{text:?} {n}");
        }
    }

    #[test]
    fn termination_messages() {
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

        let lines: String = (0..100).map(|i| format!("{i}\n")).collect();
        let message = plan(true).termination_message(1, &lines).unwrap();
        assert_eq!(
            message,
            (20..100).map(|i| format!("{i}\n")).collect::<String>()
        );

        let long = format!("{}\n{}\n", "a".repeat(3000), "b".repeat(100));
        let message = plan(true).termination_message(1, &long).unwrap();
        assert_eq!(message.len(), MESSAGE_LOG_BYTES);
        assert!(message.ends_with(&format!("a\n{}\n", "b".repeat(100))));

        // 1100 two-byte characters and a newline, cut at an odd byte: the first half-character is replaced.
        let message = plan(true)
            .termination_message(1, &format!("{}\n", "é".repeat(1100)))
            .unwrap();
        assert!(message.starts_with('\u{FFFD}'), "{message:.8}");
    }
}
