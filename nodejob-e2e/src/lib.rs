//! The end-to-end harness: [`KubeBackend`] runs the conformance suite on a real control plane
//! through `nodejob-kube`, acting as the least-privilege ServiceAccount of `deploy/rbac.yaml`;
//! the drivers' scenarios (`tests/upgrade.rs`, `tests/rotate.rs` and the other driver suites)
//! run `upgrade-driver` and `certs-driver` through it on three nodes of their own
//! ([`ThreeNodes`]), the node agent's (hosts made quick with [`QUICK_STRATUM`]) and again real
//! ones ([`Kubelets`], [`on_kubelets!`]); `tests/cli.rs` runs the `nodejob` binary
//! (`NODEJOB_E2E_CLI`) on such nodes through a kubeconfig holding that ServiceAccount's token.
//!
//! It does **not** start the cluster: `e2e/run` builds and starts etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and `nodejob-node-agent`, then runs these tests with
//! `NODEJOB_E2E_KUBECONFIG` set to an admin kubeconfig. Each scenario gets a namespace and a
//! Node of its own (the node agent adopts Nodes labelled `nodejob.test/agent=true`), so the
//! scenarios run in parallel.
//!
//! The modules, each importing only those listed before it (`.ci/circles`):
//!
//! - `pki`: a real node's kubelet certificates as `stratum carotate` changes them ([`KubeletPki`],
//!   the CAs placed on its host, [`Keyring`]), a CA that signs ([`Ca`]), fingerprints;
//! - `conventions`: the labels and annotations the node agent reads, the ServiceAccount's
//!   names, how long the agent may take;
//! - `admin`: the admin kubeconfig and client, unique names, namespaces and Nodes, labels,
//!   annotations and cordons;
//! - `control_plane`: [`ControlPlaneTrust`], the shared apiserver made to trust a real
//!   rotation's new CA and to present chains it verifies, for the rotation's length;
//! - `audit`: the apiserver's audit log (`e2e/cluster`'s policy: evictions, Job creations),
//!   what proves which requests a driver sent, and in what order;
//! - `host`: a node's kubelet address, its boot, what its `stratum` model reports;
//! - `lifecycle`: [`NodeLifecycle`], the node lifecycle controller run for one test;
//! - `describe`: a node's conditions as `kubectl describe node` prints them, checked against
//!   `kubectl`'s own table;
//! - `rbac`: `deploy/rbac.yaml` applied (as committed or with a verb taken away) and waited for;
//! - `recorder`: what a watch and a driver's progress saw while the driver ran;
//! - `drains`: [`Drains`], what proves a roll's drain: each Pod evicted once through the
//!   eviction subresource before its node's host Job, the budget never broken;
//! - `waits`: bounded waits on a watch (an object, a Deployment, a self-reboot, a Lease);
//! - `workload`: the Deployment behind a budget that a roll drains;
//! - `command`: the `nodejob` binary as a user runs it, through a kubeconfig holding a
//!   ServiceAccount's token;
//! - `backend`: [`KubeBackend`], the conformance suite's backend;
//! - `real_node`: [`RealNode`], a real kubelet, containerd and runc in namespaces of their own
//!   (`e2e/node/node`) whose host is the `stratum` model on a state of the node's own,
//!   [`RealNodeBackend`], the conformance backend on one (`tests/real_node.rs`), and
//!   [`RealNodes`], the drivers' scenario on several (`tests/real_node_drivers.rs`);
//! - `serves`: whether a real node still serves ([`serves`]: Ready, its Lease renewed, a
//!   [`talker`] Pod's log read through the apiserver), what a CA rotation must keep;
//! - `three_nodes`: [`ThreeNodes`], the drivers' and the command's three-node scenario, on the
//!   node agent's nodes or on real ones ([`Kubelets`]), and [`on_kubelets!`], which runs a
//!   driver suite's tests on both, or says why a test runs on the agent's alone.

mod admin;
mod audit;
mod backend;
mod command;
mod control_plane;
mod conventions;
mod customs;
mod describe;
mod drains;
mod host;
mod lifecycle;
pub mod pki;
mod rbac;
mod real_node;
mod recorder;
mod serves;
mod three_nodes;
mod waits;
mod workload;

pub use admin::{
    admin, annotate_node, config, kubeconfig_path, label_node, labelled_node, namespace, node,
    set_unschedulable, unique,
};
pub use audit::{Audited, audited};
pub use backend::KubeBackend;
pub use command::{COMMAND_LIMIT, CONTEXT, KubeconfigFile, Ran, cli, nodejob, sa_kubeconfig};
pub use control_plane::{ControlPlaneTrust, run_ca_fingerprint};
pub use conventions::{
    AGENT_LABEL, KUBELET_ANNOTATION, QUICK_STRATUM, READY_ANNOTATION, REBOOT_ANNOTATION, SA_NAME,
    SA_NAMESPACE, SCENARIO_LABEL, STRATUM_TIMING_ANNOTATION, ZONE_LABEL,
};
pub use customs::{
    CRDS, CustomsBackend, bind_controller_role, controller_account, install_crds,
    upgrade_condition, write_node_upgrade,
};
pub use describe::described_conditions;
pub use drains::{Drained, Drains};
pub use host::{HostReport, boot_id, host_report};
pub use lifecycle::{NodeLifecycle, free_port};
pub use pki::{Ca, Keyring, KubeletPki};
pub use rbac::Rbac;
pub use real_node::{
    BOOT_LIMIT, NOT_READY_SCENARIOS, PowerSwitch, RealNode, RealNodeBackend, RealNodes, job_image,
};
pub use recorder::{ProgressLog, Recorder, Seen, record, record_changes};
pub use serves::{LINE, LOG_LIMIT, RENEW_LIMIT, serves, talker};
pub use three_nodes::{
    DriverTurn, Kubelets, NodesBackend, SelfReboot, ThreeNodes, Workers,
    every_test_is_run_or_listed, one_driver,
};
pub use waits::{deployment_available, lease_released, reboot_by_itself, wait_for};
pub use workload::deployment_behind_budget;
