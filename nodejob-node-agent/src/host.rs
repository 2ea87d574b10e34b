//! The host of each adopted node: the `stratum` model shared with the fake
//! ([`nodejob_host::stratum`]), its state kept in memory for as long as the agent runs, and
//! whether the host is up. Pod workers exec the model as their container starts and play the
//! aftermath of a program's exit ([`play`]); the node worker reports the host through the
//! apiserver: `Ready` `False` while it is down, its `kubeletVersion` and `bootID`. The model's
//! timing is the default unless the node's [`TIMING_ANNOTATION`] says otherwise ([`timing`]).
//! A host also reboots by itself when the node's [`REBOOT_ANNOTATION`] takes a new value
//! ([`NodeHost::reboot`]), and tells what it is, executions included ([`NodeHost::report`]).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodejob_host::stratum::{StratumHost, StratumTiming};
use nodejob_host::{Effect, NodeStep};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

/// A node's host as the agent plays it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeHost {
    /// The `stratum` model: version, boot, CA trust and issuer, executions.
    pub(crate) model: StratumHost,
    /// Whether the host is up: `false` from a [`NodeStep::NotReady`] to the next
    /// [`NodeStep::Ready`] (a reboot, a restart of its components).
    pub(crate) up: bool,
}

impl NodeHost {
    /// The host of node `node`, just booted, running `kubelet_version` (`--kubelet-version`,
    /// else the apiserver's), trusting and issuing from
    /// [`INITIAL_CA`](nodejob_host::stratum::INITIAL_CA).
    pub(crate) fn new(node: &str, kubelet_version: &str) -> Self {
        NodeHost {
            model: StratumHost::new(kubelet_version, boot_id(node)),
            up: true,
        }
    }

    /// The node `node` was adopted again (deleted and registered anew): it has booted again.
    pub(crate) fn rebooted(&mut self, node: &str) {
        let version = self.model.state.version.clone();
        self.model.booted(&version, &boot_id(node));
        self.up = true;
    }

    /// A reboot of the host by itself (a watchdog, a kernel panic, a person at the console),
    /// not by `stratum`: down at once, the model's `reboot_time` later a new boot at the version
    /// it runs now, and Ready. The fake's `FakeCluster::reboot_node`, played out over time.
    pub(crate) fn reboot(&self) -> Vec<Effect> {
        let back = self.model.timing.reboot_time;
        let kubelet_version = self.model.state.version.clone();
        vec![
            Effect {
                after: Duration::ZERO,
                step: NodeStep::NotReady,
            },
            Effect {
                after: back,
                step: NodeStep::Boot { kubelet_version },
            },
            Effect {
                after: back,
                step: NodeStep::Ready,
            },
        ]
    }

    /// What the host is, as one JSON object: `{"version": "v1.37.2", "bootID": "…", "up":
    /// true, "executions": {"upgrade": 1, "carotate status": 2}}` (each operation that ran, by
    /// its command: [`Operation::as_str`](nodejob_host::stratum::Operation::as_str)). The
    /// node's log server answers it at `GET /stratum`: how a test counts what ran on a host.
    pub(crate) fn report(&self) -> String {
        let state = &self.model.state;
        let executions: serde_json::Map<String, serde_json::Value> = (state.executions.iter())
            .map(|(operation, n)| (operation.as_str().to_string(), (*n).into()))
            .collect();
        serde_json::json!({
            "version": state.version,
            "bootID": state.boot_id,
            "up": self.up,
            "executions": executions,
        })
        .to_string()
    }

    /// Applies `step` of a program's aftermath to node `node`'s host: a new boot draws a new
    /// boot ID.
    pub(crate) fn apply(&mut self, node: &str, step: &NodeStep) {
        match step {
            NodeStep::NotReady => self.up = false,
            NodeStep::Ready => self.up = true,
            NodeStep::Boot { kubelet_version } => {
                self.model.booted(kubelet_version, &boot_id(node));
            }
        }
    }
}

/// Node annotation: how long the node's `stratum` takes, for the programs that start from then
/// on: `upgrade=2s,reboot-delay=1s,reboot=3s` (fields of [`StratumTiming`]: `upgrade`,
/// `reboot-delay`, `reboot`, `op`, `restart-delay`, `restart`; each `<n>s` or `<n>ms`), every
/// field left out at its default. Absent: the model's default timing. The fake's
/// `FakeCluster::set_host` with its own timing.
pub(crate) const TIMING_ANNOTATION: &str = "nodejob.test/stratum-timing";

/// The timing [`TIMING_ANNOTATION`]'s `value` asks for (the default for `None`), or why it
/// cannot be read: read as the real hosts read theirs ([`StratumTiming`]'s `FromStr`).
pub(crate) fn timing(value: Option<&str>) -> Result<StratumTiming, String> {
    value.map_or_else(|| Ok(StratumTiming::default()), str::parse)
}

/// Node annotation: each new value (any string; set it to a fresh one per reboot) makes the
/// node's host reboot by itself ([`NodeHost::reboot`]); the value the node has when the agent
/// adopts it reboots nothing (adoption is a boot already). Removing it reboots nothing.
pub(crate) const REBOOT_ANNOTATION: &str = "nodejob.test/reboot";

/// Plays `effects`, the aftermath of a program that exited at `exited` on node `node`: each
/// step at its time, on `host` (which the node worker reports). Runs to its end even when
/// the program's pod is gone: the host goes on.
pub(crate) async fn play(
    host: watch::Sender<NodeHost>,
    node: String,
    exited: Instant,
    effects: Vec<Effect>,
) {
    for Effect { after, step } in effects {
        sleep_until(exited + after).await;
        say!("node {node}: host: {}", describe(&step));
        host.send_modify(|h| h.apply(&node, &step));
    }
}

fn describe(step: &NodeStep) -> String {
    match step {
        NodeStep::NotReady => "down".to_string(),
        NodeStep::Boot { kubelet_version } => format!("booted, running {kubelet_version}"),
        NodeStep::Ready => "up".to_string(),
    }
}

/// A fresh `nodeInfo.bootID` for `node`, in the UUID form a kernel's
/// `/proc/sys/kernel/random/boot_id` has.
pub(crate) fn boot_id(node: &str) -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    // RandomState is seeded from the OS once per process and stepped for each instance.
    let random = std::collections::hash_map::RandomState::new();
    let half = |salt: u8| {
        let mut h = random.build_hasher();
        h.write(node.as_bytes());
        h.write_u8(salt);
        h.write_i128(Timestamp::now().as_nanosecond());
        h.finish()
    };
    let (a, b) = (half(0), half(1));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nodejob_host::stratum::INITIAL_CA;

    use super::*;

    #[test]
    fn boot_ids_look_like_uuids_and_differ() {
        let (a, b) = (boot_id("n1"), boot_id("n1"));
        assert_ne!(a, b);
        let lengths: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(lengths, [8, 4, 4, 4, 12], "{a}");
        assert!(a.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{a}");
    }

    #[test]
    fn steps_change_the_host() {
        let mut host = NodeHost::new("n1", "v1.37.2");
        assert!(host.up);
        assert_eq!(host.model.state.issuer, INITIAL_CA);
        let boot = host.model.state.boot_id.clone();
        host.apply("n1", &NodeStep::NotReady);
        assert!(!host.up);
        let kubelet_version = "v1.38.0".to_string();
        host.apply("n1", &NodeStep::Boot { kubelet_version });
        assert_eq!(host.model.state.version, "v1.38.0");
        assert_ne!(host.model.state.boot_id, boot);
        host.apply("n1", &NodeStep::Ready);
        assert!(host.up);
        let boot = host.model.state.boot_id.clone();
        host.rebooted("n1");
        assert_ne!(host.model.state.boot_id, boot);
        assert_eq!(host.model.state.version, "v1.38.0");
    }

    #[test]
    fn a_reboot_by_itself_goes_down_at_once_and_comes_back_at_the_same_version() {
        let mut host = NodeHost::new("n1", "v1.37.2");
        host.model.timing.reboot_time = Duration::from_secs(3);
        let steps: Vec<(Duration, NodeStep)> = (host.reboot().into_iter())
            .map(|e| (e.after, e.step))
            .collect();
        let boot = NodeStep::Boot {
            kubelet_version: "v1.37.2".into(),
        };
        let back = Duration::from_secs(3);
        assert_eq!(
            steps,
            [
                (Duration::ZERO, NodeStep::NotReady),
                (back, boot),
                (back, NodeStep::Ready)
            ]
        );
    }

    #[test]
    fn the_report_names_version_boot_and_executions() {
        let mut host = NodeHost::new("n1", "v1.37.2");
        let argv = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
        host.model.exec(&argv("stratum upgrade --to v1.38.0"));
        host.model.exec(&argv("stratum carotate status"));
        host.model.exec(&argv("stratum carotate status"));
        let report: serde_json::Value = serde_json::from_str(&host.report()).unwrap();
        assert_eq!(report["version"], "v1.37.2");
        assert_eq!(report["bootID"], host.model.state.boot_id.as_str());
        assert_eq!(report["up"], true);
        assert_eq!(
            report["executions"],
            serde_json::json!({"upgrade": 1, "carotate status": 2})
        );
    }

    #[test]
    fn a_rollback_boots_the_host_back_into_its_version_before_the_upgrade() {
        let mut host = NodeHost::new("n1", "v1.37.2");
        let argv = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
        let upgrade = host
            .model
            .exec(&argv("stratum upgrade --to v1.38.0"))
            .unwrap();
        for effect in &upgrade.effects {
            host.apply("n1", &effect.step);
        }
        let upgraded = host.model.state.boot_id.clone();
        assert_eq!(host.model.state.version, "v1.38.0");
        let rollback = host
            .model
            .exec(&argv("stratum rollback --to v1.37.2"))
            .unwrap();
        assert_eq!(rollback.exit_code, 0);
        for effect in &rollback.effects {
            host.apply("n1", &effect.step);
        }
        assert_eq!(host.model.state.version, "v1.37.2");
        assert_ne!(host.model.state.boot_id, upgraded, "a new boot");
        let report: serde_json::Value = serde_json::from_str(&host.report()).unwrap();
        assert_eq!(
            report["executions"],
            serde_json::json!({"upgrade": 1, "rollback": 1})
        );
    }

    #[test]
    fn timing_from_the_annotation() {
        assert_eq!(timing(None), Ok(StratumTiming::default()));
        let t = timing(Some("upgrade=2s,op=0s")).unwrap();
        assert_eq!(
            (t.upgrade_time, t.op_time),
            (Duration::from_secs(2), Duration::ZERO)
        );
        assert!(timing(Some("boot=1s")).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn effects_are_played_at_their_times() {
        let (tx, mut rx) = watch::channel(NodeHost::new("n1", "v1"));
        let start = Instant::now();
        let effects = vec![
            Effect {
                after: Duration::from_secs(5),
                step: NodeStep::NotReady,
            },
            Effect {
                after: Duration::from_secs(35),
                step: NodeStep::Boot {
                    kubelet_version: "v2".into(),
                },
            },
            Effect {
                after: Duration::from_secs(35),
                step: NodeStep::Ready,
            },
        ];
        tokio::spawn(play(tx, "n1".into(), start, effects));
        rx.changed().await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert!(!rx.borrow_and_update().up);
        tokio::time::sleep(Duration::from_secs(31)).await;
        let host = rx.borrow_and_update().clone();
        assert!(host.up);
        assert_eq!(host.model.state.version, "v2");
    }
}
