//! What a **kubelet and a host do**, as rules and models shared by nodejob's in-memory cluster
//! (`nodejob-fake`) and the end-to-end node agent (`nodejob-node-agent`), so the two cannot
//! drift: the argv test vocabulary, what a starting container does, how a container's end is
//! reported, the pieces of pod and node status a kubelet writes, and the host models of the
//! on-host binary `stratum`.
//!
//! It is pure: it does not talk to a cluster, keep time, sleep, spawn or draw randomness.
//! Whoever plays the kubelet (the fake's timers in virtual time, the agent's tasks against a
//! real apiserver) runs what it answers, and draws what must be new (a boot ID).
//!
//! ```text
//!  container argv ─▶ Plan::of ─┬─ directives (nodejob-test:…) + Fallback ─▶ Execution
//!   (command, args)            ├─ the node's HostModel (stratum) ─────────▶ Execution + effects
//!                              └─ no Job, no directive ───────────────────▶ Workload
//!  Execution: run, exit code, log ─▶ termination (message, SIGTERM/SIGKILL) ─▶ status pieces
//!  effects: NotReady, Boot { kubeletVersion }, Ready ─▶ the node, after the exit
//! ```
//!
//! # The argv vocabulary
//! [`directives`] (`nodejob_fake::host`): `nodejob-test:exit=N`, `nodejob-test:log=TEXT`,
//! `nodejob-test:run=SECONDS` and `nodejob-test:sigterm=ignore` elements anywhere in a
//! container's `command` and `args`. A container is a **host program** (it runs, prints its
//! log and exits on its own) when a Job controls its pod or its argv has an `exit`, `log` or
//! `run` directive; any other is a **workload** that runs, Ready, until its pod is deleted.
//!
//! # What a host program does
//! Decided once, as its container starts ([`Plan::of`]), in this order:
//! 1. an argv with an `exit`, `log` or `run` directive is scripted by hand: the directives
//!    where they speak, the kubelet's [`Fallback`] (the fake's per-node `NodeScript`, else 2s,
//!    exit 0, no output) where they do not; no host model plays or counts it;
//! 2. else the node's [`HostModel`] plays it if the argv execs its program: [`stratum`] for
//!    `… -- /usr/local/bin/stratum …`;
//! 3. else the [`Fallback`].
//!
//! The answer is an [`Execution`]: run time, exit status, log (printed as it exits), and the
//! [`Effect`]s on its node after the exit ([`NodeStep::NotReady`], [`NodeStep::Boot`] with a
//! kubelet version, [`NodeStep::Ready`]). A process ended by a signal before it exits printed
//! nothing and has no effects.
//!
//! # The stratum model
//! [`stratum::StratumHost`] per node: its state ([`stratum::StratumState`]: kubelet version,
//! boot ID, trusted CA fingerprints, issuer, CA-rotation phase, executions counted per
//! [`stratum::Operation`]), its timing and its scripted [`stratum::Fault`]s. `upgrade --to V`
//! reboots the node into V; `health` checks; `carotate stage|issue|finalize|abort|status|verify`
//! rotate the node's CA. The [`stratum`] module documents each command, exit status and fault.
//!
//! # The kubelet's rules
//! [`termination`]: SIGTERM (exit 143) then SIGKILL (137) at the end of the grace period (at
//! least 1s), the default grace period, the termination message from the log's tail under
//! `FallbackToLogsOnError`. [`status`]: a container's running and terminated states, the pod
//! phase and kubelet conditions for each, a node's `Ready` condition.

pub mod directives;
pub mod expansion;
pub mod program;
pub mod status;
pub mod stratum;
pub mod termination;

pub use program::{
    DEFAULT_RUN_TIME, Effect, Execution, Fallback, HostModel, NodeStep, Plan, Program,
};
pub use termination::OnSigterm;
