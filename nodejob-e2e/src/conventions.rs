//! The conventions the harness and the node agent share: the labels and annotations by which
//! a scenario hands a Node to the agent and steers it, the ServiceAccount of
//! `deploy/rbac.yaml`, and how long the agent may take to act.

use std::time::Duration;

/// The label that hands a Node to the node agent.
pub const AGENT_LABEL: &str = "nodejob.test/agent";
/// Node annotation: `"false"` makes the agent post Ready False.
pub const READY_ANNOTATION: &str = "nodejob.test/ready";
/// Node annotation: `"unreachable"` makes the agent stop serving the node's logs.
pub const KUBELET_ANNOTATION: &str = "nodejob.test/kubelet";
/// Node annotation: how long the node's `stratum` host model takes, for the programs that
/// start from then on (`upgrade=2s,reboot-delay=1s,reboot=3s`; fields left out keep the
/// model's default). See [`QUICK_STRATUM`].
pub const STRATUM_TIMING_ANNOTATION: &str = "nodejob.test/stratum-timing";
/// A [`STRATUM_TIMING_ANNOTATION`] for the drivers' scenarios: an upgrade runs 2s and the node
/// is down 3s from 1s after it exits (the default: 20s, 30s from 5s after); every other command
/// runs 200ms (1s); a `carotate issue` restarts the node's components from 500ms after its exit
/// for 2s (1s, 5s). Host Jobs still take the time their pods take to start and end.
pub const QUICK_STRATUM: &str =
    "upgrade=2s,reboot-delay=1s,reboot=3s,op=200ms,restart-delay=500ms,restart=2s";
/// Node annotation: each new value makes the agent reboot the node's host by itself (down at
/// once, a new `bootID` at the same version and Ready after the host model's reboot time), as
/// a watchdog or a person at the console would. See [`reboot_by_itself`](crate::reboot_by_itself).
pub const REBOOT_ANNOTATION: &str = "nodejob.test/reboot";
/// How long the node agent may take to act on an annotation.
pub(crate) const SETTLE: Duration = Duration::from_secs(20);
/// The taint a Node has while it is not Ready (the agent puts it back and lifts it).
pub(crate) const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The label on the nodes of one scenario, with the scenario's name, for workloads' node
/// selectors.
pub const SCENARIO_LABEL: &str = "nodejob.test/scenario";

/// Where the ServiceAccount of `deploy/rbac.yaml` lives.
pub const SA_NAMESPACE: &str = "kube-system";
/// The name of the ServiceAccount of `deploy/rbac.yaml`, as
/// [`KubeBackend::new`](crate::KubeBackend::new) and
/// [`KubeBackend::for_workloads`](crate::KubeBackend::for_workloads) bind it.
pub const SA_NAME: &str = "nodejob";

/// The well-known label of a Node's zone, which `upgrade-driver` batches by.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
