//! What a container "does", by the fake kubelet's rules ([`nodejob_fake::host`]): a node
//! Job's container plays a host program (its pod's argv read with the fake's vocabulary,
//! falling back to the fake's default [`NodeScript`]); any other container (a Deployment's, a
//! DaemonSet's, a bare pod's) is a workload that runs until its pod is deleted. Also the
//! termination message the kubelet derives from a container's end, and how a container ends
//! when its pod is deleted ([`nodejob_fake::termination::stop`]).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use nodejob_fake::host::{Directives, is_host_program};
use nodejob_fake::termination::OnSigterm;
use nodejob_fake::{NodeScript, Timing};

/// What one container does, fixed when its pod is first seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// How it runs and ends on its own.
    pub(crate) program: Program,
    /// What it does on SIGTERM where its argv says (`nodejob-test:sigterm=ignore`); `None`:
    /// as its node's annotation says when it starts.
    pub(crate) on_sigterm: Option<OnSigterm>,
    /// `terminationMessagePolicy: FallbackToLogsOnError`.
    pub(crate) fallback_to_logs: bool,
}

/// How a container runs until its pod is deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Program {
    /// A host program (a node Job's container): it runs `run`, then prints `log` (all at once)
    /// and exits with `exit_code`.
    Host {
        /// How long it runs before it exits on its own.
        run: Duration,
        /// Its exit status, in `0..=255`.
        exit_code: i32,
        /// What it prints when it exits on its own.
        log: String,
    },
    /// A workload (a server, a DaemonSet's agent): it runs, Ready, prints nothing and never
    /// exits on its own; only its pod's deletion stops it.
    Workload,
}

/// When, after its pod's deletion with grace period `grace`, a running container ends, and its
/// exit status: the fake kubelet's rule with its default timing (SIGTERM ends a program that
/// does not trap it after `kill_delay`, exit 143; SIGKILL at the end of the grace period, at
/// least 1s, exit 137).
pub(crate) fn stop(grace: Duration, on_sigterm: OnSigterm) -> (Duration, i32) {
    nodejob_fake::termination::stop(grace, Timing::default().kill_delay, on_sigterm)
}

impl Plan {
    /// The plan of `container`, the first container of `pod`: a host program when a Job
    /// controls the pod or its argv (`command` then `args`) carries an `exit`, `log` or `run`
    /// directive (read as the fake kubelet does, the defaults where it says nothing: 2s, exit
    /// 0, no output); a workload otherwise.
    pub(crate) fn of(pod: &Pod, container: &Container) -> Plan {
        let directives = Directives::of(container);
        let program = if is_host_program(pod, &directives) {
            let script = NodeScript::default();
            Program::Host {
                run: directives.run.unwrap_or(script.run_time),
                exit_code: directives.exit.unwrap_or(script.exit_code.rem_euclid(256)),
                log: directives.log_text().unwrap_or(script.log),
            }
        } else {
            Program::Workload
        };
        Plan {
            program,
            on_sigterm: directives.on_sigterm,
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
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use nodejob_fake::termination::SIGTERM_EXIT;

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

    fn owned_by(kind: &str, api_version: &str, controller: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                owner_references: Some(vec![OwnerReference {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    name: "owner".into(),
                    uid: "u".into(),
                    controller: Some(controller),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn host(run: u64, exit_code: i32, log: &str) -> Program {
        Program::Host {
            run: Duration::from_secs(run),
            exit_code,
            log: log.to_string(),
        }
    }

    #[test]
    fn argv_to_plan() {
        let fallback = Some("FallbackToLogsOnError");
        let bare = Pod::default();
        let job = owned_by("Job", "batch/v1", true);
        let table = [
            // (pod, command, args, policy) -> (program, fallback)
            (
                &job,
                container(&["true"], &[], None),
                (host(2, 0, ""), false),
            ),
            (
                &bare,
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
                (host(0, 3, "a\nb\n"), true),
            ),
            // args follow command: the last `exit` wins, wherever it is.
            (
                &bare,
                container(
                    &["nodejob-test:exit=1"],
                    &["nodejob-test:exit=-1"],
                    Some("File"),
                ),
                (host(2, 255, ""), false),
            ),
            (
                &bare,
                container(&[], &["nodejob-test:run=7", "nodejob-test:exit=x"], None),
                (host(7, 0, ""), false),
            ),
        ];
        for (pod, c, (program, fallback_to_logs)) in table {
            let want = Plan {
                program,
                on_sigterm: None,
                fallback_to_logs,
            };
            assert_eq!(Plan::of(pod, &c), want, "{c:?}");
        }
    }

    #[test]
    fn no_directive_and_no_job_is_a_workload() {
        let server = container(&["nginx", "-g", "daemon off;"], &[], None);
        let table = [
            (Pod::default(), Program::Workload),
            (owned_by("ReplicaSet", "apps/v1", true), Program::Workload),
            (owned_by("DaemonSet", "apps/v1", true), Program::Workload),
            // Only a controlling Job makes a node Job's pod.
            (owned_by("Job", "batch/v1", false), Program::Workload),
            (owned_by("Job", "example.com/v1", true), Program::Workload),
            (owned_by("Job", "batch/v1", true), host(2, 0, "")),
        ];
        for (pod, want) in table {
            assert_eq!(Plan::of(&pod, &server).program, want, "{pod:?}");
        }
        // A directive makes a host program of any pod; an unknown one does not.
        let directive = container(&["sleep"], &["nodejob-test:run=5"], None);
        assert_eq!(
            Plan::of(&Pod::default(), &directive).program,
            host(5, 0, "")
        );
        let unknown = container(&["sleep"], &["nodejob-test:nope=5"], None);
        assert_eq!(
            Plan::of(&Pod::default(), &unknown).program,
            Program::Workload
        );
        // The sigterm directive says how it ends, not whether it is a host program.
        let stubborn = container(&["sleep"], &["nodejob-test:sigterm=ignore"], None);
        let plan = Plan::of(&Pod::default(), &stubborn);
        assert_eq!(
            (plan.program, plan.on_sigterm),
            (Program::Workload, Some(OnSigterm::Ignore))
        );
    }

    #[test]
    fn stops_by_the_fakes_rule_and_timing() {
        // The rule is the fake's (tested there); its SIGTERM delay is the fake's default.
        let secs = Duration::from_secs;
        assert_eq!(
            stop(secs(30), OnSigterm::Exit),
            (Duration::from_millis(500), 143)
        );
        assert_eq!(stop(secs(30), OnSigterm::Ignore), (secs(30), 137));
    }

    #[test]
    fn termination_message_only_under_fallback_to_logs_for_a_failure() {
        let plan = |fallback_to_logs| Plan {
            program: Program::Workload,
            on_sigterm: None,
            fallback_to_logs,
        };
        assert_eq!(
            plan(true).termination_message(1, "x\n").as_deref(),
            Some("x\n")
        );
        assert_eq!(plan(true).termination_message(0, "x\n"), None);
        assert_eq!(plan(false).termination_message(1, "x\n"), None);
        assert_eq!(plan(true).termination_message(SIGTERM_EXIT, ""), None);
        // The cut itself (80 lines, 2048 bytes) is the fake kubelet's, tested there.
    }
}
