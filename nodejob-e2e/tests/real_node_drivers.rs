//! The drivers on real nodes (a kubelet, containerd and runc each, `e2e/node/node`), whose
//! host is the `stratum` model of `nodejob-host` on a state kept in the node's directory
//! (`src/bin/stratum.rs`): a host upgrade stages the node's os-release and reboots it for
//! real; a CA rotation's `issue` restarts its kubelet. Run by `e2e/run`.
//!
//! - `nodejob upgrade --version-from os-image`, the binary, through a kubeconfig holding the
//!   token of the ServiceAccount of `deploy/rbac.yaml`, rolls two nodes running a Deployment of
//!   real Pods behind a budget: the real drain (each Pod evicted once through the eviction
//!   subresource before its node's host Job, as the apiserver's audit log says; the budget
//!   never broken), the host Job, the real reboot, the version the kubelet reads from the
//!   os-release (`osImage`; the kubelet itself does not move);
//! - `nodejob rotate-ca --trust-domain selected`, the binary, through the same kubeconfig,
//!   rotates two nodes' CA (the kubelet restarted by `issue`).
//!
//! - with the node lifecycle controller running for the test ([`NodeLifecycle`]), a real
//!   node whose kubelet `carotate issue` stops past the controller's grace goes NotReady by
//!   the control plane, and `nodejob rotate-ca` waits at its Ready gate for its return; and a
//!   real node whose kubelet stops during its upgrade's soak goes NotReady the same way, and
//!   `nodejob upgrade --soak` fails it at `Soak`, left in service.
//!
//! What ran on each host is read from the node's own directory, not from any driver: the
//! model's executions, the reboots its PID 1 was asked for, the kubelet's starts.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::watcher;
use nodejob_conformance::{Failure, ensure};
use nodejob_e2e::{
    Audited, CONTEXT, Ca, ControlPlaneTrust, Drains, Keyring, NodeLifecycle, RealNodes, SA_NAME,
    SA_NAMESPACE, audited, deployment_available, nodejob, record, sa_kubeconfig, unique, wait_for,
};
use nodejob_host::stratum::{CaPhase, Operation};
use upgrade_driver::VersionSource;
use upgrade_driver::records::{self, DONE, Done, Soak};

/// The version a real node boots at first (`e2e/node/node prepare`'s default), as its
/// os-release says it: its `osImage`.
const FROM: &str = "v1.37.2";
/// The version the nodes are upgraded to.
const TARGET: &str = "v1.38.0";
/// The Deployment behind the budget.
const APP: &str = "web";
const REPLICAS: i32 = 2;
/// How long the workloads may take to settle, before and after the roll.
const SETTLE: Duration = Duration::from_secs(120);

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

async fn read_nodes(api: &Api<Node>, names: &[String]) -> Result<Vec<Node>, Failure> {
    let mut out = Vec::new();
    for name in names {
        out.push(
            api.get(name)
                .await
                .map_err(fail(format!("reading node {name}")))?,
        );
    }
    Ok(out)
}

/// The reasons of the Events the node's kubelet recorded about it (`default` namespace,
/// source component `kubelet`).
async fn kubelet_events(admin: &kube::Client, node: &str) -> Result<Vec<String>, Failure> {
    let events = Api::<Event>::namespaced(admin.clone(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
        .await
        .map_err(fail(format!("listing the events of node {node}")))?;
    Ok((events.items.into_iter())
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("kubelet"))
        .filter_map(|e| e.reason)
        .collect())
}

/// Two real nodes running a Deployment of real Pods behind a budget allowing one disruption
/// are upgraded by `nodejob upgrade --to v1.38.0 --version-from os-image`, as the
/// ServiceAccount of `deploy/rbac.yaml`: each is cordoned, drained (the real evictions, the
/// budget honoured), upgraded by its host Job (the model stages the os-release and asks the
/// node for a reboot), really rebooted (a new boot ID; the kubelet reads the new os-release),
/// and uncordoned. The kubelet's own version does not move: only `osImage` says the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_real_nodes_upgrade_by_the_command_to_the_version_of_their_os_image()
-> Result<(), Failure> {
    let scenario = RealNodes::start(2).await?;
    scenario
        .deployment_behind_budget(APP, REPLICAS, SETTLE)
        .await?;
    let (admin, namespace, names) = (&scenario.admin, &scenario.namespace, scenario.names());
    let nodes = Api::<Node>::all(admin.clone());
    let before = read_nodes(&nodes, &names).await?;
    for node in &before {
        let name = records::name(node);
        let os_image = upgrade_driver::version::version(node, &VersionSource::OsImage);
        ensure!(
            os_image == Some(FROM),
            "node {name} boots at {FROM}: osImage {os_image:?}"
        );
        eprintln!(
            "real upgrade: node {name} before: osImage {os_image:?}, kubelet {:?}, boot {}",
            upgrade_driver::version::version(node, &VersionSource::KubeletVersion),
            records::boot_id(node)
        );
    }

    // The Pods and the budget as they go through the roll; the evictions from the audit log.
    let drains = Drains::watch(admin, namespace, APP).await?;
    let kubeconfig = sa_kubeconfig(admin, SA_NAME).await?;
    let upgrade = {
        let _turn = nodejob_e2e::one_driver().await;
        nodejob(
            &kubeconfig.path,
            CONTEXT,
            &[
                "upgrade",
                "--to",
                TARGET,
                "--nodes",
                &names.join(","),
                "--version-from",
                "os-image",
                "--drain-timeout",
                "60s",
                "--reboot-timeout",
                "2m",
                "--deadline",
                "2m",
            ],
        )
        .await
    };
    let upgrade = upgrade?;
    upgrade.exited(0)?;

    // What the command says: both upgraded from FROM to TARGET, the replicas evicted.
    let summary = upgrade.table("NODE")?;
    for name in &names {
        let row = summary.iter().find(|r| r.first() == Some(&name.as_str()));
        ensure!(
            row.is_some_and(|r| r.get(1..4) == Some(&[FROM, TARGET, "upgraded"][..])),
            "node {name} is not upgraded from {FROM} to {TARGET} in the summary: {row:?}\n{}",
            upgrade.stdout
        );
    }
    let totals = summary.last().map(|r| r.join(" ")).unwrap_or_default();
    ensure!(
        totals.starts_with("2 upgraded, 0 skipped, 0 failed, 0 stopped, 0 not started;")
            && totals.ends_with("; done"),
        "totals line {totals:?}"
    );

    // What the cluster says: a new boot at the target by osImage, the kubelet where it was.
    let after = read_nodes(&nodes, &names).await?;
    for (old, node) in before.iter().zip(&after) {
        let name = records::name(node);
        let os_image = upgrade_driver::version::version(node, &VersionSource::OsImage);
        ensure!(
            os_image == Some(TARGET),
            "node {name} reports osImage {os_image:?}, not {TARGET}"
        );
        let kubelet = |n: &Node| {
            upgrade_driver::version::version(n, &VersionSource::KubeletVersion).map(String::from)
        };
        ensure!(
            kubelet(node) == kubelet(old),
            "node {name}: the kubelet moved from {:?} to {:?}",
            kubelet(old),
            kubelet(node)
        );
        ensure!(
            records::boot_id(node) != records::boot_id(old),
            "node {name} did not reboot: boot {} before and after",
            records::boot_id(old)
        );
        ensure!(nodejob_core::ready(node), "node {name} is not Ready");
        ensure!(
            !records::unschedulable(node),
            "node {name} is left cordoned"
        );
        let done = records::read::<Done>(node, DONE).map_err(Failure)?;
        ensure!(
            done.as_ref().is_some_and(|d| d.version == TARGET),
            "node {name}: done record {done:?}"
        );
        // The kubelet saw the reboot itself (pkg/kubelet/kubelet_node_status.go records
        // `Rebooted` when the boot ID changes).
        let events = kubelet_events(admin, name).await?;
        ensure!(
            events.iter().any(|r| r == "Rebooted"),
            "node {name}: no Rebooted event of its kubelet: {events:?}"
        );
    }

    // What the hosts say: the upgrade ran once on each, and each rebooted once, as asked.
    for node in &scenario.nodes {
        let name = node.name();
        let state = node
            .host_state()?
            .ok_or_else(|| Failure(format!("node {name}: its stratum never ran")))?;
        ensure!(
            state.executions(Operation::Upgrade) == 1,
            "node {name}: stratum upgrade ran {} times",
            state.executions(Operation::Upgrade)
        );
        let (asked, other) = node.reboots()?;
        ensure!(
            (asked, other) == (1, 0),
            "node {name}: {asked} reboots asked by its host, {other} others"
        );
    }

    // Drained for real: each Pod evicted once through the eviction API before its node's
    // host Job, the budget never broken (its status, the Pods' readiness); and the Deployment
    // is whole again.
    let drained = drains.check(
        &names,
        REPLICAS - 1,
        &format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"),
    )?;
    eprintln!("real upgrade: drained {drained:?}");
    deployment_available(admin, namespace, APP, REPLICAS, SETTLE, "after the roll").await?;
    scenario.stop()
}

/// A new CA, its key the test's, placed in the keyring of each of `nodes`' hosts (what their
/// `stratum carotate` stages and issues from, `nodejob_e2e::pki`), and the apiserver extended
/// to it for the rotation ([`ControlPlaneTrust`]).
async fn new_ca(nodes: &RealNodes) -> Result<(Ca, ControlPlaneTrust), Failure> {
    let ca = Ca::generate("nodejob e2e real-node CA 2").map_err(Failure)?;
    for node in &nodes.nodes {
        Keyring::at(node.dir().join("host/ca"))
            .place(&ca)
            .map_err(Failure)?;
    }
    let control_plane = ControlPlaneTrust::extend(&ca).await?;
    Ok((ca, control_plane))
}

/// Two real nodes trusting and issuing from the run's CA are rotated to a new one, for real
/// (their kubelets re-keyed, `nodejob_e2e::pki`), by
/// `nodejob rotate-ca`, the binary, through the ServiceAccount's kubeconfig, the two nodes
/// named by their label as the whole trust domain (`--trust-domain selected`: the shared
/// control plane's other nodes do not use this CA): stage, issue (each node's kubelet
/// restarts), finalize, each phase once on each host, as the hosts' own records say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_real_nodes_rotate_their_ca_by_the_command() -> Result<(), Failure> {
    let scenario = RealNodes::start(2).await?;
    let (admin, names) = (&scenario.admin, scenario.names());
    let (ca, control_plane) = new_ca(&scenario).await?;
    let (pem, new) = (ca.certificate_pem(), ca.fingerprint());
    let (key, value) = &scenario.label;
    let ca_file = std::env::temp_dir().join(unique("nodejob-e2e-new-ca"));
    std::fs::write(&ca_file, &pem)
        .map_err(|e| Failure(format!("writing {}: {e}", ca_file.display())))?;
    let kubeconfig = sa_kubeconfig(admin, SA_NAME).await?;

    let watched = watcher::Config::default().labels(&format!("{key}={value}"));
    let history = record(Api::<Node>::all(admin.clone()), watched).await?;
    let rotate = {
        // One disruptive run at a time holds the namespace's Lease, as an operator runs them.
        let _turn = nodejob_e2e::one_driver().await;
        nodejob(
            &kubeconfig.path,
            CONTEXT,
            &[
                "rotate-ca",
                "--new-ca",
                &ca_file.display().to_string(),
                "--selector",
                &format!("{key}={value}"),
                "--trust-domain",
                "selected",
                "--deadline",
                "2m",
                "--ready-timeout",
                "2m",
                // A real kubelet's restart is not seen as NotReady (no node lifecycle
                // controller runs here, and on a cluster where one does, a restart of a
                // second or two is well inside its 40 s grace): the driver waits out the
                // grace in full on each node. The default, 30 s, made each `issue` step
                // take 34 s.
                "--restart-grace",
                "5s",
                "-o",
                "json",
            ],
        )
        .await
    };
    let history = history.stop();
    let _ = std::fs::remove_file(&ca_file);
    let rotate = rotate?;
    rotate.exited(0)?;
    let lines = rotate.json_lines()?;
    let report = lines
        .iter()
        .rev()
        .find_map(|l| l.get("report"))
        .ok_or_else(|| Failure(format!("no report line in\n{}", rotate.stdout)))?;
    for n in report["nodes"].as_array().into_iter().flatten() {
        eprintln!(
            "real rotate: node {}: {} {}",
            n["name"], n["result"], n["steps"]
        );
    }
    ensure!(
        report["outcome"]["outcome"] == "done",
        "the rotation's outcome: {}",
        report["outcome"]
    );
    ensure!(
        report["totals"]["rotated"] == names.len() && report["totals"]["failed"] == 0,
        "totals {}",
        report["totals"]
    );
    ensure!(
        report["target"] == new.as_str(),
        "rotated to {}, not {new}",
        report["target"]
    );
    let rotated: BTreeSet<&str> = (report["nodes"].as_array().into_iter().flatten())
        .filter(|n| n["result"]["result"] == "rotated")
        .filter_map(|n| n["name"].as_str())
        .collect();
    ensure!(
        rotated == names.iter().map(String::as_str).collect(),
        "rotated {rotated:?}, not {names:?}"
    );

    // What each host keeps: the new CA alone, issuing; each phase once, no verify Job (the
    // issue Job printed its verdict).
    for node in &scenario.nodes {
        let name = node.name();
        let state = node
            .host_state()?
            .ok_or_else(|| Failure(format!("node {name}: its stratum never ran")))?;
        ensure!(
            state.phase == CaPhase::Finalized
                && state.trusted == BTreeSet::from([new.clone()])
                && state.issuer == new,
            "node {name}: {}; expected finalized, trusting {new} alone, issued by it (it \
             started from the run's CA)",
            state.status_line()
        );
        for (operation, times) in [
            (Operation::CaStage, 1),
            (Operation::CaIssue, 1),
            (Operation::CaFinalize, 1),
            (Operation::CaVerify, 0),
            (Operation::CaAbort, 0),
        ] {
            ensure!(
                state.executions(operation) == times,
                "node {name}: `{operation}` ran {} times, not {times}",
                state.executions(operation)
            );
        }
        // `issue` restarted the kubelet (once per boot, once for the restart).
        let starts = node.kubelet_starts()?;
        ensure!(
            starts == 2,
            "node {name}: the kubelet started {starts} times"
        );
        let seen_down = (history.iter())
            .any(|n| n.metadata.name.as_deref() == Some(name) && !nodejob_core::ready(n));
        eprintln!(
            "real rotate: node {name}: NotReady seen through the kubelet restart: {seen_down}"
        );
    }
    let nodes = Api::<Node>::all(admin.clone());
    for name in &names {
        let node = nodes
            .get(name)
            .await
            .map_err(fail(format!("reading node {name}")))?;
        ensure!(nodejob_core::ready(&node), "node {name} is not Ready");
        ensure!(!records::unschedulable(&node), "node {name} is cordoned");
    }
    scenario.stop()?;
    control_plane.restore()
}

/// The node lifecycle controller's grace for a Node whose kubelet stopped posting
/// ([`NodeLifecycle::start`]).
const MONITOR_GRACE: Duration = Duration::from_secs(20);
/// Its period: how soon past its grace it sees a node go.
const MONITOR_PERIOD: Duration = Duration::from_secs(1);
/// How long the kubelet stays down after `carotate issue`: past the controller's grace, and
/// past the rotation's restart grace ([`RESTART_GRACE`]).
const KUBELET_DOWN: Duration = Duration::from_secs(50);
/// The rotation's `--restart-grace`: long enough for the controller to turn the node NotReady
/// (its grace and a period), shorter than the kubelet's downtime, so a rotation that only
/// waited out its restart grace would go on while the kubelet is still down.
const RESTART_GRACE: Duration = Duration::from_secs(35);

/// With the node lifecycle controller running (as on a real cluster; `e2e/cluster` does not
/// run it: [`NodeLifecycle`]), a real node whose kubelet `carotate issue` stops for 50 s goes
/// NotReady by the control plane (`Ready` `Unknown`, reason `NodeStatusUnknown`, the
/// `unreachable` taint) once the controller's 20 s grace has passed, and `nodejob rotate-ca`
/// sees it within its 35 s restart grace, then waits at its Ready gate for the node's return:
/// no host Job after `issue` is created before the kubelet has started again (the audit log,
/// against the node's own record of its kubelet's starts). A rotation that took the node as
/// restarted at the end of its restart grace would create the next one about 15 s too early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_stopped_past_the_grace_goes_not_ready_and_the_rotation_waits_for_its_return()
-> Result<(), Failure> {
    let scenario = RealNodes::start(1).await?;
    let (admin, names) = (&scenario.admin, scenario.names());
    let node = &scenario.nodes[0];
    let name = node.name().to_string();
    // The node's host model: `carotate issue` stops the kubelet 3 s after it exits (time for
    // the kubelet to report the Job's end first), for KUBELET_DOWN.
    let timing = node.dir().join("host/timing");
    std::fs::write(
        &timing,
        format!(
            "op=0ms,restart-delay=3s,restart={}s\n",
            KUBELET_DOWN.as_secs()
        ),
    )
    .map_err(|e| Failure(format!("writing {}: {e}", timing.display())))?;
    let lifecycle =
        NodeLifecycle::start(admin, &name, MONITOR_GRACE, MONITOR_PERIOD, SETTLE).await?;
    let (ca, control_plane) = new_ca(&scenario).await?;
    let (pem, new) = (ca.certificate_pem(), ca.fingerprint());
    let (key, value) = &scenario.label;
    let ca_file = std::env::temp_dir().join(unique("nodejob-e2e-new-ca"));
    std::fs::write(&ca_file, &pem)
        .map_err(|e| Failure(format!("writing {}: {e}", ca_file.display())))?;
    let kubeconfig = sa_kubeconfig(admin, SA_NAME).await?;
    let watched = watcher::Config::default().labels(&format!("{key}={value}"));
    let history = record(Api::<Node>::all(admin.clone()), watched).await?;
    let rotate = {
        let _turn = nodejob_e2e::one_driver().await;
        nodejob(
            &kubeconfig.path,
            CONTEXT,
            &[
                "rotate-ca",
                "--new-ca",
                &ca_file.display().to_string(),
                "--selector",
                &format!("{key}={value}"),
                "--trust-domain",
                "selected",
                "--deadline",
                "3m",
                "--ready-timeout",
                "2m",
                "--restart-grace",
                &format!("{}s", RESTART_GRACE.as_secs()),
                "-o",
                "json",
            ],
        )
        .await
    };
    let history = history.stop();
    let _ = std::fs::remove_file(&ca_file);
    let rotate = rotate?;
    rotate.exited(0)?;
    let report = (rotate.json_lines()?.into_iter().rev())
        .find_map(|l| l.get("report").cloned())
        .ok_or_else(|| Failure(format!("no report line in\n{}", rotate.stdout)))?;
    ensure!(
        report["outcome"]["outcome"] == "done" && report["totals"]["rotated"] == names.len(),
        "the rotation: {} {}",
        report["outcome"],
        report["totals"]
    );
    ensure!(
        report["target"] == new.as_str(),
        "rotated to {}",
        report["target"]
    );

    // NotReady by the control plane: the controller's Unknown, and its taint.
    not_ready_by_the_control_plane(&name, &history)?;

    // The rotation's Ready gate waited for the return: the host Jobs after `issue` were
    // created once the kubelet had started again.
    let starts = node.kubelet_started_at()?;
    ensure!(
        starts.len() == 2,
        "node {name}: the kubelet started {} times: {starts:?}",
        starts.len()
    );
    let back = starts[1];
    let mut jobs: Vec<Audited> = (audited()?.into_iter())
        .filter(|a| a.is_job_creation() && a.succeeded() && a.node.as_deref() == Some(&name))
        .collect();
    jobs.sort_by_key(|a| a.received);
    let issue = (jobs.iter())
        .position(|a| a.name.starts_with("ca-issue-"))
        .ok_or_else(|| Failure(format!("no issue Job on node {name}: {jobs:?}")))?;
    let after: Vec<&Audited> = jobs[issue + 1..].iter().collect();
    ensure!(
        !after.is_empty() && jobs[issue].received < back,
        "node {name}: the issue Job at {}, the kubelet back at {back}, Jobs after: {after:?}",
        jobs[issue].received
    );
    for job in &after {
        ensure!(
            job.received > back,
            "node {name}: Job {} was created at {}, while the kubelet was down (back at \
             {back}): the rotation did not wait for the node's return",
            job.name,
            job.received
        );
    }
    eprintln!(
        "real lifecycle: node {name} issue Job at {}, Ready Unknown seen, kubelet back at \
         {back}, next Job {} at {}",
        jobs[issue].received, after[0].name, after[0].received
    );

    back_ready(admin, &name).await?;
    lifecycle.stop()?;
    scenario.stop()?;
    control_plane.restore()
}

/// The `Ready` condition of `node`: its status and reason.
fn ready_said(node: &Node) -> Option<(String, String)> {
    (node.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// The keys of `node`'s taints.
fn taints(node: &Node) -> Vec<&str> {
    (node.spec.as_ref().and_then(|s| s.taints.as_ref()))
        .map(|t| t.iter().map(|t| t.key.as_str()).collect())
        .unwrap_or_default()
}

/// Our soak record on `node`, if it reads as one.
fn soak_record(node: &Node) -> Option<Soak> {
    records::read::<Soak>(node, records::SOAK).ok().flatten()
}

/// Whether `node` carries the node lifecycle controller's taint of a node unreachable.
fn unreachable(node: &Node) -> bool {
    taints(node).contains(&nodejob_core::UNREACHABLE_TAINT)
}

/// Node `name` went NotReady by the control plane in `history`: the node lifecycle
/// controller's `Ready` `Unknown` (reason `NodeStatusUnknown`, which no kubelet posts), and its
/// `unreachable` taint.
fn not_ready_by_the_control_plane(name: &str, history: &[Node]) -> Result<(), Failure> {
    let own: Vec<&Node> = (history.iter())
        .filter(|n| n.metadata.name.as_deref() == Some(name))
        .collect();
    let unknown = (own.iter())
        .any(|n| ready_said(n).is_some_and(|(s, r)| s == "Unknown" && r == "NodeStatusUnknown"));
    ensure!(
        unknown,
        "node {name} never went Ready Unknown (NodeStatusUnknown) while its kubelet was down: \
         {:?}",
        own.iter().filter_map(|n| ready_said(n)).collect::<Vec<_>>()
    );
    ensure!(
        own.iter().any(|n| unreachable(n)),
        "node {name} was never tainted {}",
        nodejob_core::UNREACHABLE_TAINT
    );
    Ok(())
}

/// Waits until node `name` is back: Ready, the controller's taint lifted.
async fn back_ready(admin: &kube::Client, name: &str) -> Result<(), Failure> {
    let nodes = Api::<Node>::all(admin.clone());
    let back = wait_for(nodes, name, "Ready, untainted", SETTLE, |n: &Node| {
        nodejob_core::ready(n) && !unreachable(n)
    })
    .await?;
    ensure!(nodejob_core::ready(&back), "node {name} is not Ready");
    Ok(())
}

/// How long the upgrade's soak is: long past the controller's grace and the kubelet's
/// downtime, so that only a break ends it early.
const SOAK: Duration = Duration::from_secs(180);

/// The controller's period in the soak's test: its `NoExecute` `unreachable` taint outlasts a
/// node's return by up to this long, so a reboot wait that ended on `Ready` alone would
/// uncordon a node still tainted.
const SOAK_MONITOR_PERIOD: Duration = Duration::from_secs(10);
/// How long the node stays off at its reboot: past the controller's grace and a period (its
/// last Lease renewal up to 10 s before it went).
const DOWN_AT_REBOOT: Duration = Duration::from_secs(45);

/// The upgrade's Ready gate and soak met with transitions the control plane makes: with the
/// node lifecycle controller running ([`NodeLifecycle`]), `nodejob upgrade --soak` upgrades a
/// real node that stays off 45 s at its reboot, so the controller turns it `Ready` `Unknown`
/// and taints it `unreachable` while it is down; the reboot wait ends only once the node is
/// back Ready and the controller has lifted its taint (the uncordon that starts the soak lands
/// on a Ready node carrying neither taint of a node not Ready; the new boot's first `Ready`
/// `True` may still carry the controller's, which lifts it on its next pass, and the test says
/// whether it did). Then its kubelet stops for 50 s as its soak starts, as a crashed kubelet
/// started again by its supervisor: past the controller's 20 s grace (and its 10 s period
/// here) the control plane turns the node `Ready` `Unknown` again, and the soak breaks on it.
/// The command exits 1, the node failed at `Soak` as NotReady, left in service (uncordoned,
/// its soak record saying why, no done record), its host upgraded once, rebooted once. No
/// kubelet posts `Unknown`: without the controller the stopped kubelet's last `Ready` `True`
/// would stand and the soak would pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_broken_by_the_control_planes_not_ready_fails_its_node_at_soak()
-> Result<(), Failure> {
    let scenario = RealNodes::start(1).await?;
    let admin = scenario.admin.clone();
    let name = scenario.nodes[0].name().to_string();
    let lifecycle =
        NodeLifecycle::start(&admin, &name, MONITOR_GRACE, SOAK_MONITOR_PERIOD, SETTLE).await?;
    // The node ends failed at Soak on purpose, our records on it, and a driver carries on
    // every node left in flight: no other driver runs until its Node is gone, whatever the
    // checks found (the turn held to the end; the node stopped before its Node is deleted, or
    // its kubelet would register it again).
    let turn = nodejob_e2e::one_driver().await;
    let checked = soak_broken(&scenario).await;
    let stopped = lifecycle.stop();
    scenario.stop()?;
    let gone = Api::<Node>::all(admin)
        .delete(&name, &DeleteParams::default())
        .await;
    drop(turn);
    checked?;
    stopped?;
    gone.map(drop)
        .map_err(fail(format!("deleting node {name}")))
}

/// The body of [`a_soak_broken_by_the_control_planes_not_ready_fails_its_node_at_soak`], on
/// `scenario`'s one node, the lifecycle controller running and the driver's turn held.
async fn soak_broken(scenario: &RealNodes) -> Result<(), Failure> {
    let admin = &scenario.admin;
    let node = &scenario.nodes[0];
    let name = node.name().to_string();
    node.stay_down_at_reboot(DOWN_AT_REBOOT.as_secs())?;
    let nodes = Api::<Node>::all(admin.clone());
    let kubeconfig = sa_kubeconfig(admin, SA_NAME).await?;
    let (key, value) = &scenario.label;
    let watched = watcher::Config::default().labels(&format!("{key}={value}"));
    let history = record(nodes.clone(), watched).await?;
    let soak = format!("{}s", SOAK.as_secs());
    let upgrade = async {
        nodejob(
            &kubeconfig.path,
            CONTEXT,
            &[
                "upgrade",
                "--to",
                TARGET,
                "--nodes",
                &name,
                "--version-from",
                "os-image",
                "--soak",
                &soak,
                "--drain-timeout",
                "60s",
                "--reboot-timeout",
                "2m",
                "--deadline",
                "2m",
                "-o",
                "json",
            ],
        )
        .await
    };
    // The kubelet stops once the soak has started: its record on the node.
    let stop = async {
        let soaking = wait_for(nodes.clone(), &name, "soaking", SOAK, |n: &Node| {
            soak_record(n).is_some_and(|s| s.failed.is_none())
        })
        .await?;
        node.stop_kubelet_for(KUBELET_DOWN.as_secs())?;
        Ok::<Node, Failure>(soaking)
    };
    let (upgrade, soaking) = futures::join!(upgrade, stop);
    let history = history.stop();
    let upgrade = upgrade?;
    let soaking = soaking?;
    upgrade.exited(1)?;

    // The reboot seen by the control plane, and the reboot wait's Ready gate: the uncordon that
    // started the soak came on a Ready node with neither taint of a node not Ready.
    let own: Vec<Node> = (history.iter())
        .filter(|n| n.metadata.name.as_deref() == Some(name.as_str()))
        .cloned()
        .collect();
    let started = (own.iter().position(|n| soak_record(n).is_some()))
        .ok_or_else(|| Failure(format!("node {name}: no soak record seen")))?;
    not_ready_by_the_control_plane(&name, &own[..started])?;
    let at = &own[started];
    // The taints named here, not through `nodejob_core::unready_taint`, the gate under test.
    let unready = [
        nodejob_core::NOT_READY_TAINT,
        nodejob_core::UNREACHABLE_TAINT,
    ];
    ensure!(
        ready_said(at).is_some_and(|(s, _)| s == "True")
            && !taints(at).iter().any(|t| unready.contains(t)),
        "node {name} went back in service {:?}, tainted {:?}",
        ready_said(at),
        taints(at)
    );
    ensure!(!records::unschedulable(at), "node {name} soaks cordoned");
    ensure!(
        records::boot_id(&soaking) == records::boot_id(at),
        "node {name} soaking on another boot"
    );
    let early = (own[..started].iter()).any(|n| {
        records::boot_id(n) == records::boot_id(at) && nodejob_core::ready(n) && unreachable(n)
    });
    eprintln!(
        "real lifecycle: node {name}'s new boot Ready while still tainted unreachable before the \
         uncordon: {early}"
    );

    // The control plane's NotReady again, and the soak broken on it.
    not_ready_by_the_control_plane(&name, &own[started..])?;
    let result = (upgrade.json_lines()?.into_iter().rev())
        .find_map(|l| l.get("report").cloned())
        .and_then(|r| {
            (r["nodes"].as_array()?.iter())
                .find(|n| n["name"] == name.as_str())
                .map(|n| n["result"].clone())
        })
        .ok_or_else(|| Failure(format!("no report of node {name} in\n{}", upgrade.stdout)))?;
    ensure!(
        result["result"] == "failed"
            && result["step"] == "Soak"
            && result["message"]
                .as_str()
                .is_some_and(|m| m.contains("NotReady during its soak")),
        "node {name}: {result}"
    );

    // Left in service, why recorded on it; upgraded and rebooted once.
    let after = nodes
        .get(&name)
        .await
        .map_err(fail(format!("reading node {name}")))?;
    ensure!(
        !records::unschedulable(&after),
        "node {name} is left cordoned after its soak broke"
    );
    let record = records::read::<Soak>(&after, records::SOAK).map_err(Failure)?;
    ensure!(
        record
            .as_ref()
            .and_then(|r| r.failed.as_deref())
            .is_some_and(|f| f.contains("NotReady")),
        "node {name}: soak record {record:?}"
    );
    let done = records::read::<Done>(&after, DONE).map_err(Failure)?;
    ensure!(done.is_none(), "node {name} recorded done: {done:?}");
    let state = node
        .host_state()?
        .ok_or_else(|| Failure(format!("node {name}: its stratum never ran")))?;
    ensure!(
        state.executions(Operation::Upgrade) == 1,
        "node {name}: stratum upgrade ran {} times",
        state.executions(Operation::Upgrade)
    );
    let (asked, other) = node.reboots()?;
    ensure!(
        (asked, other) == (1, 0),
        "node {name}: {asked} reboots asked by its host, {other} others"
    );
    eprintln!(
        "real lifecycle: node {name}'s soak broke: {}",
        result["message"]
    );
    Ok(())
}
