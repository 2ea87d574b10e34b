//! The host model of `stratum`, the on-host binary the drivers exec: a node's version, boot,
//! CA trust and issuer, what each `stratum` command does to them, and scriptable faults.
//!
//! A node's [`StratumHost`] is its [`StratumState`] (what the host is), its [`StratumTiming`]
//! (how long things take) and its [`Fault`]s. [`StratumHost::exec`] plays one command line
//! ([`HostModel::exec`]): it counts the execution, changes the state as the command does (as
//! the process starts), and answers the [`Execution`]: run time, exit status, log, and the
//! [`NodeStep`]s that follow the exit.
//!
//! # Commands
//! The program is the element after the first `--` of the argv, or its first element when
//! there is none, and is `stratum` when its file name is (`nsenter --target 1 --mount --uts
//! --ipc --net --pid -- /usr/local/bin/stratum upgrade --to v1.38.0`); `nodejob-test:`
//! elements are left out. A flag takes its value as the next element or after `=`
//! (`--to=v1.38.0`); a fingerprint is `sha256:` and something. Exit statuses: 0 done (or
//! nothing to do), 1 failed, 2 usage error, 3 (`verify`) not yet.
//!
//! | command | runs | does |
//! |---|---|---|
//! | `upgrade --to V` | `upgrade_time` (`op_time` at V already) | at V already (a leading `v` optional on both sides): "already at V", exit 0, nothing else. Else it logs the upgrade, exits 0, and the node reboots: `reboot_delay` after the exit [`NodeStep::NotReady`], `reboot_time` later [`NodeStep::Boot`] at V (a new `bootID`, `kubeletVersion` V with a leading `v`) and [`NodeStep::Ready`]. |
//! | `health` | `op_time` | exit 0, a line naming the version and boot. |
//! | `rollback --to V` | `op_time` | V is the version it runs, or the one it ran before its last upgrade ([`StratumState::previous`]: the other deployment): it logs the rollback, exits 0, and the node reboots into V (`reboot_delay` after the exit NotReady, `reboot_time` later a new boot at V, Ready), discarding whatever was staged; the versions swap. Any other V: exit 1 ("no deployment of V"), nothing changes. |
//! | `carotate stage --add FP` | `op_time` | FP trusted already: exit 0, nothing changes. While a rotation is issued (not finalized): exit 1. Else FP joins the trusted set; phase `staged`. |
//! | `carotate issue --ca FP [--expect FP]...` | `op_time` | FP issues already: exit 0, nothing changes. FP not trusted: exit 1. Else the leaves are issued by FP (`issuer`); phase `issued`; the node's components restart: `restart_delay` after the exit NotReady, `restart_time` later Ready (no new boot). With `--expect`, once it exits 0 it verifies as `carotate verify` given the same `--expect`s would, and prints that line and the verdict line ([`verdict_line`]): `{"verify": 0, "expect": ["sha256:…", …]}`, verify's exit status and what it expected. |
//! | `carotate finalize --keep FP` | `op_time` | FP does not issue the leaves: exit 1. Else the trusted set is {FP}; phase `finalized` (from `issued`). |
//! | `carotate abort --remove FP` | `op_time` | FP issues the leaves, or a rotation is issued: exit 1. FP not trusted: exit 0, nothing changes. Else FP leaves the trusted set; phase `idle`. |
//! | `carotate status` | `op_time` | prints one JSON line `{"phase": "staged", "trusted": ["sha256:…", …], "issuer": "sha256:…"}` ([`StratumState::status_line`]), exit 0. |
//! | `carotate verify --expect FP…` | `op_time` | 0 when the leaves chain to the first FP and the trusted set is exactly the FPs given; 1 when the leaves chain to a CA the node does not trust (an error); 3 otherwise (not yet). |
//! | anything else | `op_time` | a line naming the error and the one-line [`USAGE`], exit 2. |
//!
//! **The status lines of a phase.** `stage`, `issue`, `finalize` and `abort` that exit 0
//! begin their output with the line `carotate status` would have printed as they started, and
//! end it with the one it would print then (under [`Fault::GarbledStatus`], its garbage):
//! whoever runs a phase reads where the host stood before it and where it stands after from
//! the phase's own output, with no `carotate status` before or after it. Its first line is the
//! status before, its last line the status after; an `issue` given `--expect` prints its
//! verdict line just before the last. A failed phase (exit 1) prints its error only.
//!
//! # Kept between processes
//! The model keeps nothing itself: the fake and the node agent hold a [`StratumHost`] in
//! memory. `stratum` on a real node of the end-to-end suite reads its state before a command
//! and writes it back after, as the JSON record of [`StratumState::to_record`], and its timing
//! from a line that [`StratumTiming`]'s `FromStr` reads (`upgrade=2s,reboot-delay=1s`).
//!
//! Every execution is counted by [`Operation`] ([`StratumState::executions`]), whatever its
//! outcome, usage errors included, so a test can check that no phase ran twice (the verify
//! of an `issue --expect` is part of that `issue`, not counted apart).
//!
//! # Faults
//! Per node, in [`StratumHost::faults`]: [`Fault::UpgradeFails`] (exit 1 with a message,
//! nothing changes), [`Fault::BootsOldVersion`] (the node comes back at the version it had),
//! [`Fault::StaysDown`] (after an upgrade it goes NotReady and never comes back),
//! [`Fault::Unhealthy`] (`health` exits 1), [`Fault::RollbackFails`] (`rollback` exits 1,
//! nothing changes), [`Fault::IssueFails`] (exit 1, nothing changes),
//! [`Fault::ForeignCa`] (`issue` leaves the node's leaves chained to [`FOREIGN_CA`], which it
//! does not trust), [`Fault::DownAfterIssue`] (after `issue` the node goes NotReady and stays
//! so), [`Fault::GarbledStatus`] (the status line, of `status` or after a phase, is not JSON).
//!
//! ```
//! use nodejob_host::stratum::{CaPhase, Operation, StratumHost, INITIAL_CA};
//! use nodejob_host::{HostModel, NodeStep};
//!
//! let mut host = StratumHost::new("v1.37.2", "boot-1");
//! let argv = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
//! let upgrade = host.exec(&argv("nsenter -t 1 -- stratum upgrade --to v1.38.0")).unwrap();
//! assert_eq!(upgrade.exit_code, 0);
//! let steps: Vec<_> = upgrade.effects.iter().map(|e| e.step.clone()).collect();
//! let boot = NodeStep::Boot { kubelet_version: "v1.38.0".into() };
//! assert_eq!(steps, [NodeStep::NotReady, boot, NodeStep::Ready]);
//! host.booted("v1.38.0", "boot-2"); // as the kubelet applies the Boot step
//! let again = host.exec(&argv("stratum upgrade --to=1.38.0")).unwrap();
//! assert_eq!((again.exit_code, again.effects.len()), (0, 0));
//! assert_eq!(host.state.executions(Operation::Upgrade), 2);
//!
//! let stage = host.exec(&argv("stratum carotate stage --add sha256:new")).unwrap();
//! let status = host.exec(&argv("stratum carotate status")).unwrap();
//! assert_eq!(
//!     status.log,
//!     format!("{{\"phase\": \"staged\", \"trusted\": [\"{INITIAL_CA}\", \"sha256:new\"], \"issuer\": \"{INITIAL_CA}\"}}\n"),
//! );
//! // A phase ends with the status line: where the host stands after it (and begins with the
//! // one before it).
//! assert!(stage.log.ends_with(&status.log));
//! assert!(stage.log.starts_with("{\"phase\": \"idle\""));
//! assert_eq!(host.state.phase, CaPhase::Staged);
//! ```

mod command;
mod record;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

pub use command::USAGE;
use command::{Command, stratum_args};

use crate::program::{Effect, Execution, HostModel, NodeStep};

/// The CA a node trusts, and that issues its leaves, until a rotation: `sha256:` and 64 `1`s,
/// a fixed test value (the fake's nodes and the end-to-end node agent's start with it).
pub const INITIAL_CA: &str =
    "sha256:1111111111111111111111111111111111111111111111111111111111111111";
/// The CA a node's leaves chain to under [`Fault::ForeignCa`]: `sha256:` and 64 `f`s.
pub const FOREIGN_CA: &str =
    "sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

/// A `stratum` operation, as executions are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// `upgrade`.
    Upgrade,
    /// `health`.
    Health,
    /// `rollback`.
    Rollback,
    /// `carotate stage`.
    CaStage,
    /// `carotate issue`.
    CaIssue,
    /// `carotate finalize`.
    CaFinalize,
    /// `carotate abort`.
    CaAbort,
    /// `carotate status`.
    CaStatus,
    /// `carotate verify`.
    CaVerify,
    /// Anything else: a usage error.
    Usage,
}

impl Operation {
    /// Whether it is a phase of a CA rotation (`carotate stage`, `issue`, `finalize`,
    /// `abort`): one that changes the host's trust and, exiting 0, ends its output with the
    /// status line.
    pub fn is_phase(self) -> bool {
        matches!(
            self,
            Operation::CaStage | Operation::CaIssue | Operation::CaFinalize | Operation::CaAbort
        )
    }

    /// The command as typed: `"upgrade"`, `"carotate issue"`, …; `"usage"` for a usage error.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Upgrade => "upgrade",
            Operation::Health => "health",
            Operation::Rollback => "rollback",
            Operation::CaStage => "carotate stage",
            Operation::CaIssue => "carotate issue",
            Operation::CaFinalize => "carotate finalize",
            Operation::CaAbort => "carotate abort",
            Operation::CaStatus => "carotate status",
            Operation::CaVerify => "carotate verify",
            Operation::Usage => "usage",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a node stands in a CA rotation, as `carotate status` reports it: the protocol's
/// word, named once here for the host model and for the rotation that reads it
/// (`certs-driver`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum CaPhase {
    /// No rotation under way (the initial phase, and after an abort).
    #[default]
    Idle,
    /// A new CA is trusted beside the old one; the old one still issues.
    Staged,
    /// The new CA issues the leaves; the old one is still trusted.
    Issued,
    /// Only the new CA is trusted.
    Finalized,
}

impl CaPhase {
    /// `idle`, `staged`, `issued` or `finalized`.
    pub fn as_str(self) -> &'static str {
        match self {
            CaPhase::Idle => "idle",
            CaPhase::Staged => "staged",
            CaPhase::Issued => "issued",
            CaPhase::Finalized => "finalized",
        }
    }
}

impl fmt::Display for CaPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scripted fault of a node's `stratum`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// `upgrade` (to another version) fails: exit 1 with a message; nothing changes, no reboot.
    UpgradeFails,
    /// After an upgrade the node reboots and comes back Ready at the version it had.
    BootsOldVersion,
    /// After an upgrade the node goes NotReady and never comes back (no new boot).
    StaysDown,
    /// `health` exits 1.
    Unhealthy,
    /// `rollback` fails: exit 1 with a message; nothing changes, no reboot.
    RollbackFails,
    /// `carotate issue` (of another CA) fails: exit 1 with a message; nothing changes.
    IssueFails,
    /// `carotate issue` leaves the node's leaves chained to [`FOREIGN_CA`], which it does not
    /// trust (and says it issued the CA asked for).
    ForeignCa,
    /// After `carotate issue` the node's components restart and it stays NotReady.
    DownAfterIssue,
    /// `carotate status` prints a line that is not JSON (exit 0), and so does a phase where it
    /// ends with the status line.
    GarbledStatus,
}

/// How long `stratum`'s operations and their aftermath take on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StratumTiming {
    /// How long `upgrade` runs (when it upgrades). Default 20s.
    pub upgrade_time: Duration,
    /// From an upgrade's exit to the node going NotReady for its reboot. Default 5s.
    pub reboot_delay: Duration,
    /// How long the reboot keeps the node down: NotReady to a new boot, Ready. Default 30s.
    pub reboot_time: Duration,
    /// How long every other command runs. Default 1s.
    pub op_time: Duration,
    /// From `carotate issue`'s exit to the restart of the node's components (NotReady).
    /// Default 1s.
    pub restart_delay: Duration,
    /// How long that restart keeps the node NotReady. Default 5s.
    pub restart_time: Duration,
}

impl Default for StratumTiming {
    fn default() -> Self {
        StratumTiming {
            upgrade_time: Duration::from_secs(20),
            reboot_delay: Duration::from_secs(5),
            reboot_time: Duration::from_secs(30),
            op_time: Duration::from_secs(1),
            restart_delay: Duration::from_secs(1),
            restart_time: Duration::from_secs(5),
        }
    }
}

/// What a node's host is, as `stratum` sees and changes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StratumState {
    /// The kubelet version the node runs (its `nodeInfo.kubeletVersion`).
    pub version: String,
    /// The version it ran before its last upgrade (the other deployment, which `rollback`
    /// boots back into); `None` until it upgraded.
    pub previous: Option<String>,
    /// Its current boot (its `nodeInfo.bootID`).
    pub boot_id: String,
    /// The fingerprints of the CAs it trusts.
    pub trusted: BTreeSet<String>,
    /// The fingerprint of the CA its leaves chain to.
    pub issuer: String,
    /// Where it stands in a CA rotation.
    pub phase: CaPhase,
    /// How many times each operation ran on it.
    pub executions: BTreeMap<Operation, u32>,
}

impl StratumState {
    /// A host running `version`, booted as `boot_id`, trusting and issuing from
    /// [`INITIAL_CA`], in no rotation, that has run nothing.
    pub fn new(version: impl Into<String>, boot_id: impl Into<String>) -> Self {
        StratumState {
            version: version.into(),
            previous: None,
            boot_id: boot_id.into(),
            trusted: BTreeSet::from([INITIAL_CA.to_string()]),
            issuer: INITIAL_CA.to_string(),
            phase: CaPhase::Idle,
            executions: BTreeMap::new(),
        }
    }

    /// How many times `operation` ran on this host.
    pub fn executions(&self, operation: Operation) -> u32 {
        self.executions.get(&operation).copied().unwrap_or(0)
    }

    /// What `carotate status` prints (without its newline): `{"phase": "…", "trusted":
    /// ["…", …], "issuer": "…"}`, the trusted fingerprints in order.
    pub fn status_line(&self) -> String {
        let quote = |s: &str| serde_json::Value::from(s).to_string();
        let trusted: Vec<String> = self.trusted.iter().map(|t| quote(t)).collect();
        format!(
            "{{\"phase\": {}, \"trusted\": [{}], \"issuer\": {}}}",
            quote(self.phase.as_str()),
            trusted.join(", "),
            quote(&self.issuer)
        )
    }
}

/// What `carotate issue --expect FP…` prints of its verify (without its newline): `{"verify":
/// 0, "expect": ["…", …]}`, the exit status `carotate verify --expect FP…` would have had and
/// the fingerprints it was given, in order.
pub fn verdict_line(exit_code: i32, expect: &[String]) -> String {
    let quote = |s: &str| serde_json::Value::from(s).to_string();
    let expect: Vec<String> = expect.iter().map(|e| quote(e)).collect();
    format!(
        "{{\"verify\": {exit_code}, \"expect\": [{}]}}",
        expect.join(", ")
    )
}

/// A node's `stratum` model: its state, timing and faults. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StratumHost {
    /// What the host is.
    pub state: StratumState,
    /// How long things take.
    pub timing: StratumTiming,
    /// What goes wrong.
    pub faults: BTreeSet<Fault>,
}

/// The version `v` as a kubelet reports it: with a leading `v`.
fn kubelet_version(v: &str) -> String {
    if v.starts_with('v') {
        v.to_string()
    } else {
        format!("v{v}")
    }
}

/// Whether the versions `a` and `b` are the same, a leading `v` aside.
fn same_version(a: &str, b: &str) -> bool {
    a.strip_prefix('v').unwrap_or(a) == b.strip_prefix('v').unwrap_or(b)
}

/// An execution that runs `run`, prints `lines` and exits with `exit_code`, with no effect.
fn ends(run: Duration, exit_code: i32, lines: &[String]) -> Execution {
    Execution {
        run,
        exit_code,
        log: lines.iter().map(|l| format!("{l}\n")).collect(),
        effects: Vec::new(),
    }
}

impl StratumHost {
    /// A host with [`StratumState::new`], the default timing and no fault.
    pub fn new(version: impl Into<String>, boot_id: impl Into<String>) -> Self {
        StratumHost {
            state: StratumState::new(version, boot_id),
            timing: StratumTiming::default(),
            faults: BTreeSet::new(),
        }
    }

    /// This host with `fault` too.
    #[must_use]
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.faults.insert(fault);
        self
    }

    fn has(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// What `argv` does on this host, if it execs `stratum` (see the [module docs](self)).
    pub fn exec(&mut self, argv: &[String]) -> Option<Execution> {
        let command = Command::parse(&stratum_args(argv)?);
        *self
            .state
            .executions
            .entry(command.operation())
            .or_default() += 1;
        let phase = command.operation().is_phase();
        let before = phase.then(|| self.status().log);
        let mut run = match command {
            Command::Upgrade { to } => self.upgrade(&to),
            Command::Health => self.health(),
            Command::Rollback { to } => self.rollback(&to),
            Command::Stage { add } => self.stage(add),
            Command::Issue { ca, expect } => self.issue(ca, &expect),
            Command::Finalize { keep } => self.finalize(keep),
            Command::Abort { remove } => self.abort(&remove),
            Command::Status => self.status(),
            Command::Verify { expect } => self.verify(&expect),
            Command::Usage { error } => ends(
                self.timing.op_time,
                2,
                &[format!("stratum: {error}"), USAGE.to_string()],
            ),
        };
        // A phase that went through begins with where the host stood as it started and ends
        // with where it stands now: status lines, so whoever ran it needs no `carotate status`
        // before or after it.
        if let Some(before) = before
            && run.exit_code == 0
        {
            run.log.insert_str(0, &before);
            run.log.push_str(&self.status().log);
        }
        Some(run)
    }

    /// The node booted again as `boot_id`, running `kubelet_version`.
    pub fn booted(&mut self, kubelet_version: &str, boot_id: &str) {
        self.state.version = kubelet_version.to_string();
        self.state.boot_id = boot_id.to_string();
    }

    fn upgrade(&mut self, to: &str) -> Execution {
        let t = &self.timing;
        let from = self.state.version.clone();
        if same_version(&from, to) {
            return ends(t.op_time, 0, &[format!("stratum: already at {to}")]);
        }
        let to = kubelet_version(to);
        let start = format!("stratum: upgrading {from} -> {to}");
        if self.has(Fault::UpgradeFails) {
            let error = format!(
                "stratum: error: upgrade to {to} failed: transaction check failed (injected fault)"
            );
            return ends(t.upgrade_time, 1, &[start, error]);
        }
        let done = format!(
            "stratum: {to} installed; rebooting in {}s",
            t.reboot_delay.as_secs()
        );
        // The version it runs now stays as the other deployment, for a rollback.
        self.state.previous = Some(from.clone());
        let mut run = ends(t.upgrade_time, 0, &[start, done]);
        run.effects.push(Effect {
            after: t.reboot_delay,
            step: NodeStep::NotReady,
        });
        if !self.has(Fault::StaysDown) {
            let back = t.reboot_delay + t.reboot_time;
            let kubelet_version = if self.has(Fault::BootsOldVersion) {
                from
            } else {
                to
            };
            run.effects.extend([
                Effect {
                    after: back,
                    step: NodeStep::Boot { kubelet_version },
                },
                Effect {
                    after: back,
                    step: NodeStep::Ready,
                },
            ]);
        }
        run
    }

    fn rollback(&mut self, to: &str) -> Execution {
        let t = &self.timing;
        let running = self.state.version.clone();
        let previous = self.state.previous.clone();
        let known =
            same_version(&running, to) || previous.as_deref().is_some_and(|p| same_version(p, to));
        if !known {
            let error = format!(
                "stratum: error: no deployment of {to} to roll back to (running {running}{})",
                previous
                    .as_deref()
                    .map(|p| format!(", previous {p}"))
                    .unwrap_or_default()
            );
            return ends(t.op_time, 1, &[error]);
        }
        let to = kubelet_version(to);
        let start = format!("stratum: rolling back {running} -> {to}");
        if self.has(Fault::RollbackFails) {
            let error = format!(
                "stratum: error: rollback to {to} failed: bootloader entry not found (injected fault)"
            );
            return ends(t.op_time, 1, &[start, error]);
        }
        let done = format!(
            "stratum: {to} selected; rebooting in {}s",
            t.reboot_delay.as_secs()
        );
        let mut run = ends(t.op_time, 0, &[start, done]);
        // The deployments swap: what ran is the other one now.
        if !same_version(&running, &to) {
            self.state.previous = Some(running);
        }
        let back = t.reboot_delay + t.reboot_time;
        run.effects.extend([
            Effect {
                after: t.reboot_delay,
                step: NodeStep::NotReady,
            },
            Effect {
                after: back,
                step: NodeStep::Boot {
                    kubelet_version: to,
                },
            },
            Effect {
                after: back,
                step: NodeStep::Ready,
            },
        ]);
        run
    }

    fn health(&self) -> Execution {
        let s = &self.state;
        if self.has(Fault::Unhealthy) {
            let line = "stratum: unhealthy: kubelet is not responding (injected fault)";
            return ends(self.timing.op_time, 1, &[line.to_string()]);
        }
        let line = format!("stratum: healthy: {}, boot {}", s.version, s.boot_id);
        ends(self.timing.op_time, 0, &[line])
    }

    fn stage(&mut self, add: String) -> Execution {
        let op = self.timing.op_time;
        let s = &mut self.state;
        if s.trusted.contains(&add) {
            return ends(op, 0, &[format!("stratum: {add} is trusted already")]);
        }
        if s.phase == CaPhase::Issued {
            let error = format!(
                "stratum: error: the rotation to {} is not finalized; finalize it first",
                s.issuer
            );
            return ends(op, 1, &[error]);
        }
        s.trusted.insert(add.clone());
        s.phase = CaPhase::Staged;
        let line = format!("stratum: staged {add}; trusting {} CAs", s.trusted.len());
        ends(op, 0, &[line])
    }

    fn issue(&mut self, ca: String, expect: &[String]) -> Execution {
        let mut run = self.issue_only(ca);
        if run.exit_code == 0 && !expect.is_empty() {
            let verified = self.verify(expect);
            run.log.push_str(&verified.log);
            run.log
                .push_str(&format!("{}\n", verdict_line(verified.exit_code, expect)));
        }
        run
    }

    fn issue_only(&mut self, ca: String) -> Execution {
        let t = &self.timing;
        let (op, faults) = (t.op_time, &self.faults);
        let s = &mut self.state;
        if s.issuer == ca {
            return ends(
                op,
                0,
                &[format!("stratum: leaves are issued by {ca} already")],
            );
        }
        if !s.trusted.contains(&ca) {
            let error = format!("stratum: error: {ca} is not trusted; stage it first");
            return ends(op, 1, &[error]);
        }
        if faults.contains(&Fault::IssueFails) {
            let error = format!("stratum: error: issuing leaves from {ca} failed (injected fault)");
            return ends(op, 1, &[error]);
        }
        s.issuer = if faults.contains(&Fault::ForeignCa) {
            FOREIGN_CA.to_string()
        } else {
            ca.clone()
        };
        s.phase = CaPhase::Issued;
        let line = format!("stratum: leaves now issued by {ca}; restarting components");
        let mut run = ends(op, 0, &[line]);
        run.effects.push(Effect {
            after: t.restart_delay,
            step: NodeStep::NotReady,
        });
        if !faults.contains(&Fault::DownAfterIssue) {
            run.effects.push(Effect {
                after: t.restart_delay + t.restart_time,
                step: NodeStep::Ready,
            });
        }
        run
    }

    fn finalize(&mut self, keep: String) -> Execution {
        let op = self.timing.op_time;
        let s = &mut self.state;
        if s.issuer != keep {
            let error = format!(
                "stratum: error: leaves are issued by {}, not {keep}; refusing to drop the others",
                s.issuer
            );
            return ends(op, 1, &[error]);
        }
        if s.phase == CaPhase::Issued {
            s.phase = CaPhase::Finalized;
        }
        let dropped = s.trusted.len() - usize::from(s.trusted.contains(&keep));
        if dropped == 0 {
            return ends(op, 0, &[format!("stratum: trusting only {keep} already")]);
        }
        s.trusted = BTreeSet::from([keep.clone()]);
        let line = format!("stratum: finalized: trusting only {keep}; dropped {dropped} CAs");
        ends(op, 0, &[line])
    }

    fn abort(&mut self, remove: &str) -> Execution {
        let op = self.timing.op_time;
        let s = &mut self.state;
        if s.issuer == remove || s.phase == CaPhase::Issued {
            let error = format!(
                "stratum: error: leaves are issued by {}; too late to abort, finalize instead",
                s.issuer
            );
            return ends(op, 1, &[error]);
        }
        if !s.trusted.remove(remove) {
            return ends(op, 0, &[format!("stratum: {remove} is not staged")]);
        }
        s.phase = CaPhase::Idle;
        ends(
            op,
            0,
            &[format!("stratum: aborted: {remove} no longer trusted")],
        )
    }

    fn status(&self) -> Execution {
        let line = if self.has(Fault::GarbledStatus) {
            "{\"phase\": \"iss\u{fffd}\u{fffd} <truncated".to_string()
        } else {
            self.state.status_line()
        };
        ends(self.timing.op_time, 0, &[line])
    }

    fn verify(&self, expect: &[String]) -> Execution {
        let op = self.timing.op_time;
        let s = &self.state;
        let wanted: BTreeSet<String> = expect.iter().cloned().collect();
        let leaf_ca = expect.first().map(String::as_str).unwrap_or_default();
        let list = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
        if !s.trusted.contains(&s.issuer) {
            let error = format!(
                "stratum: error: leaves chain to {}, which this node does not trust",
                s.issuer
            );
            return ends(op, 1, &[error]);
        }
        if s.issuer == leaf_ca && s.trusted == wanted {
            let line = format!(
                "stratum: ok: leaves chain to {leaf_ca}; trusting {}",
                list(&wanted)
            );
            return ends(op, 0, &[line]);
        }
        let line = format!(
            "stratum: not yet: leaves chain to {}; trusting {}; expected {leaf_ca}; {}",
            s.issuer,
            list(&s.trusted),
            list(&wanted)
        );
        ends(op, 3, &[line])
    }
}

impl HostModel for StratumHost {
    fn exec(&mut self, argv: &[String]) -> Option<Execution> {
        StratumHost::exec(self, argv)
    }

    fn booted(&mut self, kubelet_version: &str, boot_id: &str) {
        StratumHost::booted(self, kubelet_version, boot_id);
    }
}

#[cfg(test)]
mod tests;
