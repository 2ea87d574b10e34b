//! What a container does, decided once as it starts: a host program's [`Execution`] (run
//! time, exit status, log, and what then happens to its node) or a workload; and the seam
//! where a node's host model plugs in ([`HostModel`]).
//!
//! ```text
//!  argv ─▶ workload? (no Job, no exit/log/run directive) ───────────────▶ Program::Workload
//!    │
//!    ├─▶ an exit, log or run directive: scripted by hand ─▶ directives, then the Fallback
//!    ├─▶ the host model plays it (HostModel::exec) ──────▶ its Execution (effects included)
//!    └─▶ otherwise ──────────────────────────────────────▶ the Fallback
//! ```

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::directives::{self, Directives, is_host_program};
use crate::termination::OnSigterm;

/// How long a host program runs when nothing says otherwise: the fake's default
/// `NodeScript::run_time`.
pub const DEFAULT_RUN_TIME: Duration = Duration::from_secs(2);

/// What a host program does: it runs `run`, prints `log` (all at once, as it exits: a
/// running program's log reads empty) and exits with `exit_code`; then, `effects` happen to
/// its node, each at its delay after the exit. A program ended by a signal before it exits
/// printed nothing, and its effects do not happen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Execution {
    /// How long it runs before it exits on its own.
    pub run: Duration,
    /// Its exit status, in `0..=255`.
    pub exit_code: i32,
    /// What it prints.
    pub log: String,
    /// What then happens to its node, in order.
    pub effects: Vec<Effect>,
}

/// Something that happens to a program's node after the program exited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    /// How long after the program's exit.
    pub after: Duration,
    /// What happens.
    pub step: NodeStep,
}

/// A change of a node that its kubelet reports, applied by whoever plays the kubelet (the
/// fake's timers, the node agent through the apiserver).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeStep {
    /// The node goes down (a reboot, a restart of its components): its `Ready` condition goes
    /// `False` and its kubelet stops acting until it is Ready again.
    NotReady,
    /// The node has booted again: `status.nodeInfo.bootID` is a new one (drawn by whoever
    /// applies the step, then told to the model with [`HostModel::booted`]) and
    /// `kubeletVersion` is `kubelet_version`.
    Boot {
        /// The kubelet version it runs now.
        kubelet_version: String,
    },
    /// The node is back: `Ready` goes `True`.
    Ready,
}

/// A model of what a node's host does when a container execs a program on it, with the host's
/// state: pluggable per node beside the `nodejob-test:` vocabulary. Pure and deterministic:
/// the answer depends on the argv and the state only; whoever plays the kubelet runs the
/// [`Execution`] and applies its [`Effect`]s in its own time.
pub trait HostModel {
    /// What the process of `argv` does on this host, its effects included, with the host's
    /// state changed as the process changes it (it is counted, and what it changes is changed
    /// as it starts); `None` when `argv` does not exec this model's program (the state is then
    /// untouched).
    fn exec(&mut self, argv: &[String]) -> Option<Execution>;

    /// The node booted again ([`NodeStep::Boot`] applied) with `boot_id`, running
    /// `kubelet_version`.
    fn booted(&mut self, kubelet_version: &str, boot_id: &str);
}

/// What a host program does where neither its argv's directives nor a host model speak: the
/// fake's `NodeScript` (scriptable per node), or the defaults (the node agent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The exit status (taken modulo 256). Default 0.
    pub exit_code: i32,
    /// What it prints. Default empty.
    pub log: String,
    /// How long it runs. Default [`DEFAULT_RUN_TIME`].
    pub run: Duration,
}

impl Default for Fallback {
    fn default() -> Self {
        Fallback {
            exit_code: 0,
            log: String::new(),
            run: DEFAULT_RUN_TIME,
        }
    }
}

impl Fallback {
    /// The execution of a program scripted by `directives` (where they speak) and this
    /// fallback (where they do not). It has no effects.
    pub fn execution(&self, directives: &Directives) -> Execution {
        Execution {
            run: directives.run.unwrap_or(self.run),
            exit_code: directives.exit.unwrap_or(self.exit_code.rem_euclid(256)),
            log: directives.log_text().unwrap_or_else(|| self.log.clone()),
            effects: Vec::new(),
        }
    }
}

/// How a container runs until its pod is deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// A host program (a node Job's container): it runs, prints and exits on its own.
    Host(Execution),
    /// A workload (a server, a DaemonSet's agent): it runs, Ready, prints nothing and never
    /// exits on its own; only its pod's deletion stops it.
    Workload,
}

/// What a starting container does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// How it runs and ends on its own.
    pub program: Program,
    /// What it does on SIGTERM where its argv says (`nodejob-test:sigterm=ignore`); `None`:
    /// as its node says when it starts.
    pub on_sigterm: Option<OnSigterm>,
}

impl Plan {
    /// The plan of `container` of `pod`, starting on a node whose host is `host` and whose
    /// kubelet falls back to `fallback` (see the [module docs](self)): a workload unless a Job
    /// controls `pod` or the argv carries an `exit`, `log` or `run` directive; a host program
    /// scripted by its directives and `fallback` when it carries one; else what `host` makes of
    /// the argv; else `fallback`'s. `host` is asked (and may count an execution) only when the
    /// argv carries no such directive.
    pub fn of(
        pod: &Pod,
        container: &Container,
        fallback: &Fallback,
        host: &mut impl HostModel,
    ) -> Plan {
        let directives = Directives::of(container);
        let program = if !is_host_program(pod, &directives) {
            Program::Workload
        } else if directives.scripts_process() {
            Program::Host(fallback.execution(&directives))
        } else {
            let played = host.exec(&directives::argv(container));
            Program::Host(played.unwrap_or_else(|| fallback.execution(&directives)))
        };
        let on_sigterm = if runs_through_nsenter(container) {
            Some(OnSigterm::Exit)
        } else {
            directives.on_sigterm
        };
        Plan {
            program,
            on_sigterm,
        }
    }
}

/// Whether the container's first process is `nsenter` (the runner's `nsenter --target 1 … --
/// stratum …`). The kubelet's SIGTERM then reaches `nsenter`, not the program it runs: it
/// does not trap the signal and ends by it (143), whatever that program does; and since the
/// container shares the host's PID namespace, the runtime then kills every process left in
/// it (containerd's runc shim, `ShouldKillAllOnExit` in
/// `cmd/containerd-shim-runc-v2/runc/util.go`). Seen on a real node: a host program trapping
/// SIGTERM ended with 143 at once, not 137 at the end of the grace period
/// (`nodejob-e2e/tests/real_node.rs`).
fn runs_through_nsenter(container: &Container) -> bool {
    (container.command.iter().flatten())
        .chain(container.args.iter().flatten())
        .next()
        .is_some_and(|program| program.rsplit('/').next() == Some("nsenter"))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;
    use crate::directives::{exit, ignore_sigterm, log, run};

    /// A model whose program is `echo`: prints its arguments after 1s, exits 0, then reboots.
    #[derive(Default)]
    struct Echo {
        execs: u32,
    }

    impl HostModel for Echo {
        fn exec(&mut self, argv: &[String]) -> Option<Execution> {
            let (program, args) = argv.split_first()?;
            (program == "echo").then(|| {
                self.execs += 1;
                Execution {
                    run: Duration::from_secs(1),
                    exit_code: 0,
                    log: format!("{}\n", args.join(" ")),
                    effects: vec![Effect {
                        after: Duration::ZERO,
                        step: NodeStep::NotReady,
                    }],
                }
            })
        }

        fn booted(&mut self, _: &str, _: &str) {}
    }

    fn job_pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                owner_references: Some(vec![OwnerReference {
                    api_version: "batch/v1".into(),
                    kind: "Job".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn container(argv: &[String]) -> Container {
        Container {
            command: Some(argv.to_vec()),
            ..Container::default()
        }
    }

    fn strings(argv: &[&str]) -> Vec<String> {
        argv.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn directives_then_model_then_fallback() {
        let fallback = Fallback {
            exit_code: -1,
            log: "fallback\n".into(),
            run: Duration::from_secs(9),
        };
        let secs = Duration::from_secs;
        let echo = |log: &str| Execution {
            run: secs(1),
            exit_code: 0,
            log: log.into(),
            effects: vec![Effect {
                after: Duration::ZERO,
                step: NodeStep::NotReady,
            }],
        };
        let scripted = |run, exit_code, log: &str| Execution {
            run,
            exit_code,
            log: log.into(),
            effects: Vec::new(),
        };
        let table = [
            // (pod, argv) -> (program, execs of the model)
            (
                job_pod(),
                strings(&["echo", "a", "b"]),
                Program::Host(echo("a b\n")),
                1,
            ),
            // A directive scripts the process by hand: the model is not asked.
            (
                job_pod(),
                vec!["echo".into(), "a".into(), run(secs(3))],
                Program::Host(scripted(secs(3), 255, "fallback\n")),
                0,
            ),
            (
                job_pod(),
                vec!["echo".into(), exit(4), log("x")],
                Program::Host(scripted(secs(9), 4, "x\n")),
                0,
            ),
            // The sigterm directive alone does not script it.
            (
                job_pod(),
                vec!["echo".into(), "c".into(), ignore_sigterm()],
                Program::Host(echo("c nodejob-test:sigterm=ignore\n")),
                1,
            ),
            // Not the model's program: the fallback.
            (
                job_pod(),
                strings(&["true"]),
                Program::Host(scripted(secs(9), 255, "fallback\n")),
                0,
            ),
            // Not a Job's pod and no directive: a workload, whatever its argv.
            (
                Pod::default(),
                strings(&["echo", "a"]),
                Program::Workload,
                0,
            ),
            (
                Pod::default(),
                vec!["sleep".into(), run(secs(5))],
                Program::Host(scripted(secs(5), 255, "fallback\n")),
                0,
            ),
        ];
        for (pod, argv, want, execs) in table {
            let mut model = Echo::default();
            let plan = Plan::of(&pod, &container(&argv), &fallback, &mut model);
            assert_eq!((plan.program, model.execs), (want, execs), "{argv:?}");
        }
    }

    #[test]
    fn sigterm_comes_from_the_argv() {
        let mut model = Echo::default();
        let fallback = Fallback::default();
        // Through nsenter, the program's trap does not matter: nsenter gets the SIGTERM.
        let entered = Container {
            command: Some(vec![
                "nsenter".into(),
                "--".into(),
                "sleep".into(),
                ignore_sigterm(),
            ]),
            ..Container::default()
        };
        let plan = Plan::of(
            &job_pod(),
            &entered,
            &Fallback::default(),
            &mut Echo::default(),
        );
        assert_eq!(plan.on_sigterm, Some(OnSigterm::Exit));
        let stubborn = container(&[ignore_sigterm()]);
        let plan = Plan::of(&Pod::default(), &stubborn, &fallback, &mut model);
        assert_eq!(
            (plan.program, plan.on_sigterm),
            (Program::Workload, Some(OnSigterm::Ignore))
        );
        let plain = Plan::of(&job_pod(), &container(&[]), &fallback, &mut model);
        assert_eq!(plain.on_sigterm, None);
        assert_eq!(
            plain.program,
            Program::Host(Execution {
                run: DEFAULT_RUN_TIME,
                ..Execution::default()
            })
        );
    }
}
