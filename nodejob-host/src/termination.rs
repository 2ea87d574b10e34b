//! How a container's end is reported: the signal that ends the container of a deleted pod (and
//! so its exit status), the grace periods, and the termination message the kubelet derives
//! from its log. The fake's kubelet and the end-to-end node agent both follow these rules
//! (`nodejob_fake::termination` is this module).

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

/// The exit status of a process ended by SIGTERM (128 + 15), as the container runtime reports
/// a program that does not trap the signal.
pub const SIGTERM_EXIT: i32 = 143;
/// The exit status of a process ended by SIGKILL (128 + 9).
pub const SIGKILL_EXIT: i32 = 137;
/// The API default of `terminationGracePeriodSeconds` (`DefaultTerminationGracePeriodSeconds`
/// in `pkg/apis/core/v1/defaults.go`), for a pod spec that leaves it unset.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);
/// The shortest time the kubelet leaves between SIGTERM and SIGKILL: `pkg/kubelet/pod_workers.go`
/// `calculateEffectiveGracePeriod` supplies at least 1s, whatever the deletion said.
pub const MINIMUM_GRACE_PERIOD: Duration = Duration::from_secs(1);

/// How long a running program that does not trap SIGTERM lives on after its pod's deletion: the
/// kubelet sends SIGTERM at once, and the program ends with exit 143 this much later (the time
/// to deliver the signal and reap the process). The fake's default `Timing::kill_delay`.
pub const KILL_DELAY: Duration = Duration::from_millis(500);
/// How long the kubelet takes to finish a deleted pod once nothing runs in it, to its final
/// `DELETE` (grace 0). The fake's default `Timing::pod_cleanup`.
pub const POD_CLEANUP: Duration = Duration::from_millis(100);

/// What a container's program does when the kubelet sends it SIGTERM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnSigterm {
    /// It does not trap the signal and ends by it (exit 143), shortly: the default, like the
    /// host programs the runner execs and most servers.
    #[default]
    Exit,
    /// It traps the signal and carries on, until the SIGKILL at the end of the grace period
    /// (exit 137).
    Ignore,
}

/// The kubelet's `MaxContainerTerminationMessageLogLines` (`pkg/kubelet/container/runtime.go`):
/// how many lines of the log a `FallbackToLogsOnError` message keeps.
pub const MESSAGE_LOG_LINES: usize = 80;
/// The kubelet's `MaxContainerTerminationMessageLogLength`: how many bytes (the last ones) of
/// those lines it keeps.
pub const MESSAGE_LOG_BYTES: usize = 2048;

/// When, after its pod's deletion with grace period `grace`, a running container ends, and its
/// exit status. The kubelet (`killContainer` in
/// `pkg/kubelet/kuberuntime/kuberuntime_container.go`) asks the runtime to stop the container
/// with that grace period: SIGTERM at once, SIGKILL once it has passed. A program that does not
/// trap SIGTERM ends `sigterm_exit_after` later with 143 (unless the SIGKILL comes first); one
/// that ignores it runs until the SIGKILL: 137.
pub fn stop(
    grace: Duration,
    sigterm_exit_after: Duration,
    on_sigterm: OnSigterm,
) -> (Duration, i32) {
    let sigkill_at = grace.max(MINIMUM_GRACE_PERIOD);
    match on_sigterm {
        OnSigterm::Exit if sigterm_exit_after <= sigkill_at => (sigterm_exit_after, SIGTERM_EXIT),
        OnSigterm::Exit | OnSigterm::Ignore => (sigkill_at, SIGKILL_EXIT),
    }
}

/// The `state.terminated.message` the kubelet writes for a container that ended with
/// `exit_code` after printing `log`, under `terminationMessagePolicy: FallbackToLogsOnError`
/// (`convertToKubeContainerStatus` in `pkg/kubelet/kuberuntime/kuberuntime_container.go`):
/// for a non-zero exit, the last [`MESSAGE_LOG_LINES`] lines of the log cut to their last
/// [`MESSAGE_LOG_BYTES`] bytes (`readLastStringFromContainerLogs`); none for exit 0 (the
/// programs here write no `terminationMessagePath` file) or an empty log.
pub fn fallback_message(exit_code: i32, log: &str) -> Option<String> {
    if exit_code == 0 {
        return None;
    }
    let tail = tail_lines(log, MESSAGE_LOG_LINES).as_bytes();
    let last = &tail[tail.len().saturating_sub(MESSAGE_LOG_BYTES)..];
    // The kubelet keeps bytes: a character cut in two is replaced when the status is encoded.
    let message = String::from_utf8_lossy(last).into_owned();
    (!message.is_empty()).then_some(message)
}

/// The `state.terminated.message` of `container` ended with `exit_code` after printing `log`:
/// [`fallback_message`] under `terminationMessagePolicy: FallbackToLogsOnError`, none under any
/// other policy (the programs here write no `terminationMessagePath` file).
pub fn message(container: &Container, exit_code: i32, log: &str) -> Option<String> {
    let policy = container.termination_message_policy.as_deref();
    (policy == Some("FallbackToLogsOnError"))
        .then(|| fallback_message(exit_code, log))
        .flatten()
}

/// The last `n` lines of `text` (a final line without a newline counts), as the kubelet's
/// `tailLines` reads a log.
pub fn tail_lines(text: &str, n: usize) -> &str {
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

    #[test]
    fn sigterm_ends_a_program_unless_it_ignores_it() {
        let ms = Duration::from_millis;
        let secs = Duration::from_secs;
        let table = [
            // (grace, sigterm exit after, on SIGTERM) -> (ends after, exit)
            ((secs(30), ms(500), OnSigterm::Exit), (ms(500), 143)),
            ((secs(30), ms(500), OnSigterm::Ignore), (secs(30), 137)),
            ((secs(0), ms(500), OnSigterm::Exit), (ms(500), 143)),
            ((secs(0), ms(500), OnSigterm::Ignore), (secs(1), 137)),
            ((secs(2), secs(5), OnSigterm::Exit), (secs(2), 137)),
        ];
        for ((grace, after, on_sigterm), want) in table {
            assert_eq!(
                stop(grace, after, on_sigterm),
                want,
                "{grace:?} {after:?} {on_sigterm:?}"
            );
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
    fn messages() {
        assert_eq!(fallback_message(1, "x\n").as_deref(), Some("x\n"));
        assert_eq!(fallback_message(0, "x\n"), None);
        assert_eq!(fallback_message(SIGTERM_EXIT, ""), None);
        let long = format!("{}\n{}\n", "a".repeat(3000), "b".repeat(100));
        let message = fallback_message(1, &long).unwrap();
        assert_eq!(message.len(), MESSAGE_LOG_BYTES);
        assert!(message.ends_with(&format!("a\n{}\n", "b".repeat(100))));
        let cut = fallback_message(1, &format!("{}\n", "é".repeat(1100))).unwrap();
        assert!(cut.starts_with('\u{FFFD}'), "{cut:.8}");
    }

    #[test]
    fn messages_only_under_fallback_to_logs() {
        let with = |policy: Option<&str>| Container {
            termination_message_policy: policy.map(str::to_string),
            ..Container::default()
        };
        let fallback = with(Some("FallbackToLogsOnError"));
        assert_eq!(message(&fallback, 1, "x\n").as_deref(), Some("x\n"));
        assert_eq!(message(&fallback, 0, "x\n"), None);
        assert_eq!(message(&with(Some("File")), 1, "x\n"), None);
        assert_eq!(message(&with(None), 1, "x\n"), None);
    }
}
