//! `nodejob controller` on the real control plane, as a process acting as a ServiceAccount
//! bound by `deploy/rbac.yaml` and `deploy/controller/rbac.yaml`, the CRDs of
//! `deploy/controller/` installed: a `NodeUpgrade` written rolls three nodes of the scenario's
//! own; the controller killed (SIGKILL) once a node is up to date, and started again, resumes
//! and ends with the resource Ready, each host upgraded once; `kubectl get nu` shows it
//! (the apiserver's Table, which kubectl prints); deleted, it goes once the controller removed
//! its finalizer. Run by `e2e/run`.

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use nodejob_conformance::{Failure, ensure};
use nodejob_crd::NodeUpgrade;
use nodejob_e2e::{
    CONTEXT, KubeconfigFile, Kubelets, Rbac, SA_NAMESPACE, ThreeNodes, Workers, cli, install_crds,
    nodejob, one_driver, sa_kubeconfig, unique, wait_for,
};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

nodejob_e2e::on_kubelets! {
    source: include_str!("controller.rs");
    both: a_node_upgrade_is_rolled_by_the_controller_killed_and_started_again_mid_roll;
    agent_only: ;
    no_nodes: ;
}

/// The version the nodes are rolled to.
const TARGET: &str = "v1.96.0";
/// How long the roll may take, a controller restart (the Lease of the killed one waited out)
/// included.
const ROLL: Duration = Duration::from_secs(420);

const CONTROLLER_RBAC: &str = include_str!("../../deploy/controller/rbac.yaml");

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

/// The ClusterRole of `deploy/controller/rbac.yaml`, for ServiceAccount `sa` (named after it),
/// bound to it.
async fn bind_controller_role(admin: &Client, sa: &str) -> Result<(), Failure> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(CONTROLLER_RBAC)
        .map_err(|e| Failure(format!("deploy/controller/rbac.yaml: {e}")))?;
    let mut role = (docs.iter())
        .find(|d| d["kind"] == "ClusterRole")
        .cloned()
        .ok_or_else(|| Failure("deploy/controller/rbac.yaml: no ClusterRole".into()))?;
    role["metadata"]["name"] = json!(sa);
    let role: ClusterRole = serde_json::from_value(role).map_err(|e| Failure(e.to_string()))?;
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .map_err(fail("creating the controller's ClusterRole"))?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": sa},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": SA_NAMESPACE}],
    }))
    .map_err(|e| Failure(e.to_string()))?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .map_err(fail("binding the controller's ClusterRole"))?;
    Ok(())
}

/// `nodejob controller` as a process, in context [`CONTEXT`] of `kubeconfig`; killed if
/// dropped.
fn start_controller(kubeconfig: &KubeconfigFile) -> Result<Child, Failure> {
    Command::new(cli()?)
        .env_remove("KUBECONFIG")
        .arg("--kubeconfig")
        .arg(&kubeconfig.path)
        .args(["--context", CONTEXT, "controller"])
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure(format!("starting nodejob controller: {e}")))
}

fn condition(roll: &NodeUpgrade, type_: &str) -> Option<(String, String)> {
    let c = (roll.status.iter())
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

async fn a_node_upgrade_is_rolled_by_the_controller_killed_and_started_again_mid_roll(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let _one = one_driver().await;
    let trio = ThreeNodes::of(kubelets, Workers::InTwoZones).await?;
    let admin = trio.admin.clone();
    install_crds(&admin).await?;
    let sa = unique("nodejob-controller");
    Rbac::committed()
        .apply(&admin, &sa, &[SA_NAMESPACE])
        .await?;
    bind_controller_role(&admin, &sa).await?;
    let kubeconfig = sa_kubeconfig(&admin, &sa).await?;

    let name = unique("nu");
    let roll: NodeUpgrade = serde_json::from_value(json!({
        "apiVersion": "nodejob.stratum.ciq.com/v1alpha1",
        "kind": "NodeUpgrade",
        "metadata": {"name": name},
        "spec": {
            "target": TARGET,
            "nodes": trio.names,
            "versionFrom": kubelets.version_from(),
            // The nodes go to a release the apiserver is not at: past the skew policy, asked.
            "allowSkew": true,
            "drainTimeout": "60s",
            "rebootTimeout": "60s",
            "deadline": "120s",
        },
    }))
    .map_err(|e| Failure(e.to_string()))?;
    let rolls = Api::<NodeUpgrade>::all(admin.clone());
    rolls
        .create(&PostParams::default(), &roll)
        .await
        .map_err(fail(format!("creating NodeUpgrade {name}")))?;

    let mut first = start_controller(&kubeconfig)?;
    let one_done = wait_for(rolls.clone(), &name, "a node up to date", ROLL, |r| {
        (r.status.as_ref()).is_some_and(|s| s.counts.up_to_date >= 1)
    })
    .await?;
    eprintln!("controller: {:?} before the kill", one_done.status);
    first
        .kill()
        .await
        .map_err(|e| Failure(format!("killing the controller: {e}")))?;
    let _second = start_controller(&kubeconfig)?;
    // `kubectl wait --for=condition=Ready nu/NAME`.
    let ready = wait_for(rolls.clone(), &name, "Ready", ROLL, |r| {
        condition(r, "Ready").is_some_and(|(s, _)| s == "True")
    })
    .await?;
    let status = ready.status.clone().unwrap_or_default();
    ensure!(
        condition(&ready, "Ready") == Some(("True".into(), "Completed".into()))
            && status.counts.nodes == 3
            && status.counts.up_to_date == 3
            && status.observed_generation == ready.metadata.generation,
        "{status:#?}"
    );
    ensure!(
        (ready.metadata.finalizers.iter().flatten()).any(|f| f == nodejob_controller::FINALIZER),
        "{:?}",
        ready.metadata.finalizers
    );
    for node in &trio.names {
        let host = trio.host(node).await?;
        ensure!(
            host.executions("upgrade") == 1,
            "{node}: the host upgrade ran {} times: {host:?}",
            host.executions("upgrade")
        );
    }

    // `nodejob status` as the controller's ServiceAccount lists it as `kubectl get nu` does.
    let shown = nodejob(&kubeconfig.path, CONTEXT, &["status"]).await?;
    shown.exited(0)?;
    let row = (shown.stdout.lines()).find(|l| l.starts_with(&name));
    ensure!(
        row.is_some_and(|r| {
            let cells: Vec<&str> = r.split_whitespace().collect();
            cells == [name.as_str(), TARGET, "True", "Completed", "3", "3", "0"]
        }),
        "nodejob status shows {row:?}:\n{}",
        shown.stdout
    );

    // Deleted, it stays until the controller removed its finalizer, then goes.
    let uid = ready.uid().unwrap_or_default();
    rolls
        .delete(&name, &DeleteParams::default())
        .await
        .map_err(fail(format!("deleting NodeUpgrade {name}")))?;
    let gone = kube::runtime::wait::await_condition(
        rolls.clone(),
        &name,
        kube::runtime::wait::conditions::is_deleted(&uid),
    );
    tokio::time::timeout(Duration::from_secs(60), gone)
        .await
        .map_err(|_| {
            Failure(format!(
                "NodeUpgrade {name} still there 60s after its delete"
            ))
        })?
        .map_err(|e| Failure(format!("watching {name} go: {e}")))?;
    trio.remove().await
}
