//! [`ThreeNodes`]: the drivers' and the `nodejob` command's three-node scenario, on the node
//! agent's nodes or on real ones ([`Kubelets`]); [`on_kubelets!`](crate::on_kubelets), a
//! driver suite's tests run on both, or on the agent's alone with the reason why.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DeleteParams};
use kube::{Client, Config};
use nodejob_conformance::{Backend, Failure, Object, Workloads};
use nodejob_host::stratum::StratumTiming;
use nodejob_kube::KubeApi;

use crate::admin::{annotate_node, client, config, label_node, lock_beside_kubeconfig};
use crate::backend::KubeBackend;
use crate::conventions::{QUICK_STRATUM, STRATUM_TIMING_ANNOTATION, ZONE_LABEL};
use crate::host::{HostReport, boot_id, host_report};
use crate::real_node::{PowerSwitch, RealNode, RealNodeBackend};
use crate::waits::{reboot_by_itself, wait_for};
use crate::workload::{HOSTNAME_LABEL, deployment_behind_budget};

/// Where the two workers of [`ThreeNodes`] stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// No zone label.
    Unzoned,
    /// The first in zone `zone-a`, the second in `zone-b` ([`ZONE_LABEL`]).
    InTwoZones,
}

/// What plays a scenario's kubelets and hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kubelets {
    /// The node agent (`nodejob-node-agent`): Nodes the scenario registers, whose kubelet and
    /// host (the `stratum` model, made quick by [`QUICK_STRATUM`]) the agent plays; a host
    /// upgrade moves the kubelet's version, and a restart of the node's components is seen
    /// NotReady.
    Agent,
    /// Real nodes ([`RealNode`]): a kubelet, containerd and runc each, whose host is the
    /// `stratum` model on the node's own state (quick, as `e2e/node/node prepare` sets it); a
    /// host upgrade reboots the node for real and moves its `osImage`, not its kubelet; a
    /// restart of its kubelet leaves the Node Ready (no node lifecycle controller runs).
    Real,
}

impl Kubelets {
    /// Where a roll reads the version its target names on these nodes, as `nodejob upgrade
    /// --version-from` takes it: the kubelet's version on the agent's nodes, `osImage` on real
    /// ones (their kubelet is the one binary built for the run and does not move).
    pub fn version_from(self) -> &'static str {
        match self {
            Kubelets::Agent => "kubelet",
            Kubelets::Real => "os-image",
        }
    }
}

/// One driver at a time on the cluster: hold the turn while a scenario runs a driver. A
/// driver carries on every node another run left in flight, whatever its plan selects, as the
/// one cluster-wide Lease of `DESIGN.md` has it ("one host-mutating operation at a time per
/// cluster"); scenarios that each take a Lease of their own to run side by side would each
/// see the other's nodes in flight (a skew gate judging them, a roll carrying them on), and
/// an action staged before a driver's n-th call of a verb must count that driver's calls only.
///
/// `e2e/run` runs several test binaries side by side on each control plane, so the turn is
/// taken first in the process (a tokio mutex: a waiting scenario holds no thread) and then
/// across the processes of that control plane: an exclusive `flock(2)` on a file beside its
/// admin kubeconfig, which the kernel releases when the turn is dropped or its process dies.
pub async fn one_driver() -> DriverTurn {
    static ONE_DRIVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let in_process = ONE_DRIVER.lock().await;
    let file = tokio::task::spawn_blocking(|| lock_beside_kubeconfig(".driver.lock"))
        .await
        .expect("taking the driver lock panicked")
        .unwrap_or_else(|e| panic!("the end-to-end driver turn: {e}"));
    DriverTurn {
        _across: file,
        _in_process: in_process,
    }
}

/// A scenario's turn to run a driver on the cluster ([`one_driver`]); dropping it lets the
/// next one go.
pub struct DriverTurn {
    // Closed before the process's guard is released: fields drop in declaration order.
    _across: std::fs::File,
    _in_process: tokio::sync::MutexGuard<'static, ()>,
}

/// The backend of a [`ThreeNodes`], acting as the ServiceAccount of `deploy/rbac.yaml`: the
/// conformance backend of its [`Kubelets`].
pub enum NodesBackend {
    /// On the node agent's nodes.
    Agent(KubeBackend),
    /// On real nodes, which stop when it is dropped.
    Real(RealNodeBackend),
}

/// `$e` with `$b` bound to the backend inside, whichever it is.
macro_rules! either {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            NodesBackend::Agent($b) => $e,
            NodesBackend::Real($b) => $e,
        }
    };
}

#[async_trait]
impl Backend for NodesBackend {
    type Api = KubeApi;

    fn api(&self) -> Arc<KubeApi> {
        either!(self, b => b.api())
    }
    fn namespace(&self) -> String {
        either!(self, b => b.namespace())
    }
    fn node(&self) -> String {
        either!(self, b => b.node())
    }
    async fn set_kubelet_reachable(&self, node: &str, reachable: bool) -> Result<(), Failure> {
        either!(self, b => b.set_kubelet_reachable(node, reachable).await)
    }
    async fn set_node_ready(&self, node: &str, ready: bool) -> Result<(), Failure> {
        either!(self, b => b.set_node_ready(node, ready).await)
    }
    async fn forbid_privileged_pods(&self) -> Result<String, Failure> {
        either!(self, b => b.forbid_privileged_pods().await)
    }
    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), Failure> {
        either!(self, b => b.delete_pod(namespace, name).await)
    }
    async fn remove_node(&self, node: &str) -> Result<(), Failure> {
        either!(self, b => b.remove_node(node).await)
    }
    async fn reboot_node(&self, node: &str) -> Result<(), Failure> {
        either!(self, b => b.reboot_node(node).await)
    }
}

#[async_trait]
impl Workloads for NodesBackend {
    fn nodes(&self) -> Vec<String> {
        either!(self, b => b.nodes())
    }
    fn node_label(&self) -> (String, String) {
        either!(self, b => b.node_label())
    }
    async fn create(&self, object: Object) -> Result<(), Failure> {
        either!(self, b => b.create(object).await)
    }
}

/// The drivers' and the `nodejob` command's scenario: three nodes of the scenario's own,
/// played as [`Kubelets`] says (a [`KubeBackend::for_workloads`], the agent's hosts made quick
/// with [`QUICK_STRATUM`], or a [`RealNodeBackend::for_workloads`]), the first labelled
/// control-plane, the other two workers placed as [`Workers`] says.
pub struct ThreeNodes {
    /// The backend acting as the ServiceAccount of `deploy/rbac.yaml`.
    pub backend: NodesBackend,
    /// An admin client.
    pub admin: Client,
    /// The nodes: the control-plane node, then the two workers.
    pub names: Vec<String>,
    /// The scenario's namespace.
    pub namespace: String,
    /// The label every node of the scenario carries ([`SCENARIO_LABEL`](crate::SCENARIO_LABEL)).
    pub label: (String, String),
}

impl ThreeNodes {
    /// Three agent nodes: [`ThreeNodes::of`] [`Kubelets::Agent`].
    pub async fn new(workers: Workers) -> Result<Self, Failure> {
        Self::on(config(None).await?, workers).await
    }

    /// Creates the agent's nodes or boots real ones, each Ready, and labels them.
    pub async fn of(kubelets: Kubelets, workers: Workers) -> Result<Self, Failure> {
        match kubelets {
            Kubelets::Agent => Self::new(workers).await,
            Kubelets::Real => {
                let backend = RealNodeBackend::for_workloads().await?;
                let admin = backend.admin();
                Self::placed(NodesBackend::Real(backend), admin, workers).await
            }
        }
    }

    /// Three agent nodes on the cluster that `admin`, an administrator's [`Config`], reaches
    /// (not necessarily the admin kubeconfig of `NODEJOB_E2E_KUBECONFIG`): what the bench's
    /// real roll runs on.
    pub async fn on(admin: Config, workers: Workers) -> Result<Self, Failure> {
        let backend = KubeBackend::for_workloads_on(admin.clone()).await?;
        let admin = client(admin)?;
        for name in &backend.nodes() {
            annotate_node(&admin, name, STRATUM_TIMING_ANNOTATION, Some(QUICK_STRATUM)).await?;
        }
        Self::placed(NodesBackend::Agent(backend), admin, workers).await
    }

    async fn placed(
        backend: NodesBackend,
        admin: Client,
        workers: Workers,
    ) -> Result<Self, Failure> {
        let names = backend.nodes();
        // As a kubelet labels its Node (the agent's registered by the scenario are not): what
        // the workload's spread is over ([`deployment_behind_budget`]).
        for name in &names {
            label_node(&admin, name, HOSTNAME_LABEL, name).await?;
        }
        let control = &names[0];
        label_node(&admin, control, nodejob_roll::CONTROL_PLANE_LABEL, "").await?;
        if workers == Workers::InTwoZones {
            label_node(&admin, &names[1], ZONE_LABEL, "zone-a").await?;
            label_node(&admin, &names[2], ZONE_LABEL, "zone-b").await?;
        }
        Ok(ThreeNodes {
            namespace: backend.namespace(),
            label: backend.node_label(),
            backend,
            admin,
            names,
        })
    }

    /// What plays the nodes.
    pub fn kubelets(&self) -> Kubelets {
        match self.backend {
            NodesBackend::Agent(_) => Kubelets::Agent,
            NodesBackend::Real(_) => Kubelets::Real,
        }
    }

    /// The real nodes, in the order of [`ThreeNodes::names`]; none on the agent's.
    pub fn real_nodes(&self) -> Vec<&RealNode> {
        match &self.backend {
            NodesBackend::Agent(_) => Vec::new(),
            NodesBackend::Real(b) => b.real_nodes(),
        }
    }

    /// Makes node `name`'s host take `timing` (the `stratum` model's, as
    /// [`QUICK_STRATUM`]): the agent's by its annotation, a real node's in its `DIR/host/timing`,
    /// which its `stratum` reads at each command. A real node's kubelet restart takes what it
    /// takes, and so does its boot: the operations' own times and the delays before them
    /// apply, and a `reboot=` the timing names is how long the node stays off between its
    /// shutdown and its next boot ([`RealNode::stay_down_at_reboot`]).
    pub async fn host_timing(&self, name: &str, timing: &str) -> Result<(), Failure> {
        let NodesBackend::Real(real) = &self.backend else {
            return annotate_node(&self.admin, name, STRATUM_TIMING_ANNOTATION, Some(timing)).await;
        };
        let node = real.real_node(name)?;
        let path = node.dir().join("host/timing");
        std::fs::write(&path, format!("{timing}\n"))
            .map_err(|e| Failure(format!("writing {}: {e}", path.display())))?;
        if let Some(reboot) = timing.split(',').find(|kv| kv.starts_with("reboot=")) {
            let parsed: StratumTiming = (reboot.parse())
                .map_err(|e| Failure(format!("node {name}: timing {reboot:?}: {e}")))?;
            node.stay_down_at_reboot(parsed.reboot_time.as_secs())?;
        }
        Ok(())
    }

    /// How node `name`'s host reboots by itself, for an actor to make it: the agent's host
    /// when its reboot annotation changes ([`reboot_by_itself`]), a real node by a power cut
    /// ([`PowerSwitch`]).
    pub fn self_reboot(&self, name: &str) -> Result<SelfReboot, Failure> {
        match &self.backend {
            NodesBackend::Agent(_) => Ok(SelfReboot::Agent {
                admin: self.admin.clone(),
                node: name.to_string(),
            }),
            NodesBackend::Real(real) => Ok(SelfReboot::Real(real.real_node(name)?.power_switch())),
        }
    }

    /// What node `name`'s host says ran there, independently of any driver: the agent's
    /// `stratum` model's report ([`host_report`]), or a real node's `stratum` state
    /// ([`RealNode::host_state`]) with the version the node runs now, its `osImage` (the state
    /// keeps the version of its last command's time, before a reboot it asked for).
    pub async fn host(&self, name: &str) -> Result<HostReport, Failure> {
        let NodesBackend::Real(real) = &self.backend else {
            return host_report(&self.admin, name).await;
        };
        let node = real.real_node(name)?;
        let read = Api::<Node>::all(self.admin.clone())
            .get(name)
            .await
            .map_err(|e| Failure(format!("reading node {name}: {e}")))?;
        let os_image = (read.status.as_ref())
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.os_image.clone())
            .unwrap_or_default();
        let executions = (node.host_state()?.into_iter())
            .flat_map(|state| state.executions.into_iter())
            .map(|(operation, count)| (operation.as_str().to_string(), count))
            .collect();
        Ok(HostReport {
            version: os_image,
            boot_id: boot_id(&read).to_string(),
            up: nodejob_core::ready(&read),
            executions,
        })
    }

    /// Runs Deployment `app` of `replicas` on the nodes, behind a budget allowing one
    /// disruption; returns once every replica is available and the budget allows that
    /// disruption (before the roll the scenarios start next), waiting for each at most `limit`.
    pub async fn deployment_behind_budget(
        &self,
        app: &str,
        replicas: i32,
        limit: Duration,
    ) -> Result<(), Failure> {
        let ns = &self.namespace;
        deployment_behind_budget(&self.admin, ns, &self.label, app, replicas, limit).await
    }

    /// Deletes the nodes (real ones stopped first) and the scenario's namespace (with what
    /// runs in it), for a caller that shares its cluster with later work (the bench); the
    /// suite's scenarios leave theirs to `e2e/run`, which throws the cluster away (a real
    /// node stops when its scenario is dropped). One already gone is not an error.
    pub async fn remove(self) -> Result<(), Failure> {
        let ThreeNodes {
            backend,
            admin,
            names,
            namespace,
            ..
        } = self;
        if let NodesBackend::Real(real) = backend {
            real.stop()?;
        }
        let params = DeleteParams::default();
        let nodes = Api::<Node>::all(admin.clone());
        for name in &names {
            gone_or(
                nodes.delete(name, &params).await,
                &format!("deleting node {name}"),
            )?;
        }
        let namespaces = Api::<Namespace>::all(admin.clone());
        let what = format!("deleting namespace {namespace}");
        gone_or(namespaces.delete(&namespace, &params).await, &what)
    }
}

/// A node's host rebooting by itself ([`ThreeNodes::self_reboot`]), as an actor in a task of its
/// own makes it.
#[derive(Clone)]
pub enum SelfReboot {
    /// The agent's host, by its reboot annotation.
    Agent {
        /// An admin client.
        admin: Client,
        /// The node.
        node: String,
    },
    /// A real node, by a power cut.
    Real(PowerSwitch),
}

impl SelfReboot {
    /// Reboots the host; returns once the node reports a new `bootID`, Ready (at most `limit`
    /// on the agent's; a real node's boot is bounded by [`BOOT_LIMIT`](crate::BOOT_LIMIT)),
    /// with the Node as then read.
    pub async fn reboot(&self, limit: Duration) -> Result<Node, Failure> {
        match self {
            SelfReboot::Agent { admin, node } => reboot_by_itself(admin, node, limit).await,
            SelfReboot::Real(switch) => switch.cycle().await,
        }
    }

    /// Returns once the host is down (at most `limit`), for an actor that acts while it is:
    /// the agent's Node NotReady (the agent posts it while its host is down), a real node off
    /// ([`PowerSwitch::off`]: its Node stays Ready, with no node lifecycle controller running).
    pub async fn down(&self, limit: Duration) -> Result<(), Failure> {
        match self {
            SelfReboot::Agent { admin, node } => {
                let nodes = Api::<Node>::all(admin.clone());
                let what = "NotReady (its host down)";
                wait_for(nodes, node, what, limit, |n| !nodejob_core::ready(n))
                    .await
                    .map(drop)
            }
            SelfReboot::Real(switch) => tokio::time::timeout(limit, switch.off())
                .await
                .map_err(|_| Failure(format!("node {}: not off after {limit:?}", switch.name())))?,
        }
    }
}

/// `Ok` for a deletion done or of an object already gone (404).
fn gone_or<T>(deleted: Result<T, kube::Error>, what: &str) -> Result<(), Failure> {
    match deleted {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Failure(format!("{what}: {e}"))),
    }
}

/// A driver suite's tests, each an `async fn NAME(kubelets: Kubelets) -> Result<(), Failure>`
/// in the test file (or `async fn NAME() -> Result<(), Failure>` for one that touches no
/// node), run as tests: those under `both:` on the node agent's nodes (`agent::NAME`) and on
/// real nodes (`real::NAME`); those under `agent_only:` on the agent's alone, each with the
/// reason a real node cannot stage it; those under `no_nodes:` once (`once::NAME`), with why
/// they need no real node. The reasons are `NOT_ON_REAL_NODES`, and
/// `every_test_runs_on_real_nodes_or_says_why` fails on a test of the file that is not under
/// the macro ([`every_test_is_run_or_listed`]); a body named nowhere is dead code, which the
/// lints deny.
///
/// ```text
/// nodejob_e2e::on_kubelets! {
///     source: include_str!("pause.rs");
///     both: a_roll_paused_mid_way_starts_no_other_node_and_goes_on_when_resumed;
///     agent_only: ;
///     no_nodes: ;
/// }
/// ```
#[macro_export]
macro_rules! on_kubelets {
    (
        source: $source:expr;
        both: $($both:ident),* $(,)?;
        agent_only: $($agent:ident => $why:expr),* $(,)?;
        no_nodes: $($none:ident => $none_why:expr),* $(,)?;
    ) => {
        /// The tests on the node agent's nodes.
        mod agent {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $both() -> Result<(), nodejob_conformance::Failure> {
                    super::$both($crate::Kubelets::Agent).await
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $agent() -> Result<(), nodejob_conformance::Failure> {
                    super::$agent($crate::Kubelets::Agent).await
                }
            )*
        }
        /// The tests on real nodes.
        mod real {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $both() -> Result<(), nodejob_conformance::Failure> {
                    super::$both($crate::Kubelets::Real).await
                }
            )*
        }
        /// The tests that touch no node.
        mod once {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $none() -> Result<(), nodejob_conformance::Failure> {
                    super::$none().await
                }
            )*
        }
        /// The tests not run on real nodes, each with why.
        const NOT_ON_REAL_NODES: &[(&str, &str)] = &[
            $((stringify!($agent), $why),)*
            $((stringify!($none), $none_why),)*
        ];
        /// Every test of the file runs on real nodes or is in `NOT_ON_REAL_NODES` with its
        /// reason.
        #[test]
        fn every_test_runs_on_real_nodes_or_says_why() -> Result<(), nodejob_conformance::Failure> {
            $crate::every_test_is_run_or_listed(
                $source,
                &[$(stringify!($both)),*],
                NOT_ON_REAL_NODES,
            )
        }
    };
}

/// The check of [`on_kubelets!`](crate::on_kubelets) over a test file's `source`: every test
/// is declared through the macro (no test attribute is written in the file itself, where it
/// would run on one backend and be listed nowhere), each is run on real nodes (`both`) or
/// listed in `not_on_real` with a reason, never both, and no name is listed twice.
pub fn every_test_is_run_or_listed(
    source: &str,
    both: &[&str],
    not_on_real: &[(&str, &str)],
) -> Result<(), Failure> {
    for attribute in ["#[tokio::test", "#[test]"] {
        let lines: Vec<(usize, &str)> = (source.lines().enumerate())
            .filter(|(_, l)| l.trim_start().starts_with(attribute))
            .map(|(n, l)| (n + 1, l))
            .collect();
        if !lines.is_empty() {
            return Err(Failure(format!(
                "a test declared outside on_kubelets!, run on one backend and listed nowhere: \
                 {lines:?}"
            )));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for name in both.iter().chain(not_on_real.iter().map(|(n, _)| n)) {
        if !seen.insert(*name) {
            return Err(Failure(format!("test {name} is listed twice")));
        }
    }
    if let Some((name, _)) = not_on_real.iter().find(|(_, why)| why.trim().is_empty()) {
        return Err(Failure(format!(
            "test {name} is not run on real nodes and does not say why"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::every_test_is_run_or_listed;

    /// The check of `on_kubelets!` refuses what it is there to refuse, and passes a file that
    /// declares its tests through the macro alone.
    #[test]
    fn a_test_neither_run_on_real_nodes_nor_listed_is_refused() {
        let through_the_macro = "nodejob_e2e::on_kubelets! { ... }\nasync fn a(k: Kubelets) {}\n";
        assert!(every_test_is_run_or_listed(through_the_macro, &["a"], &[("b", "why")]).is_ok());
        for stray in ["#[tokio::test(flavor = \"multi_thread\")]", "#[test]"] {
            let source = format!("{through_the_macro}{stray}\nasync fn c() {{}}\n");
            assert!(
                every_test_is_run_or_listed(&source, &["a"], &[]).is_err(),
                "{stray} passed"
            );
        }
        assert!(every_test_is_run_or_listed("", &["a"], &[("a", "why")]).is_err());
        assert!(every_test_is_run_or_listed("", &["a", "a"], &[]).is_err());
        assert!(every_test_is_run_or_listed("", &[], &[("b", " ")]).is_err());
    }
}
