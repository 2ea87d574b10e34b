//! The pause switch (issue 22, item 3) on a real control plane, through the built `nodejob`
//! binary as the ServiceAccount of `deploy/rbac.yaml`: an upgrade of two nodes running a
//! Deployment behind a budget, one at a time, is paused once its first node is cordoned
//! (`nodejob pause`); `nodejob status` says so; while paused its second node is not started;
//! `nodejob resume` lets it go on to the end, its progress having said who paused it and that
//! it resumed, its drains asserted ([`Drains`]). On the node agent's nodes and on real ones
//! ([`Kubelets`]), one after the other ([`one_driver`]): the switch is on the one Lease every
//! roll in the namespace shares, and a test binary of its own. Run by `e2e/run`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use nodejob_conformance::{Failure, ensure};
use nodejob_e2e::{
    CONTEXT, Drains, Kubelets, SA_NAME, SA_NAMESPACE, ThreeNodes, Workers, cli, nodejob,
    one_driver, sa_kubeconfig, wait_for,
};

nodejob_e2e::on_kubelets! {
    source: include_str!("pause.rs");
    both: a_roll_paused_mid_way_starts_no_other_node_and_goes_on_when_resumed;
    agent_only: ;
    no_nodes: ;
}

/// The version the nodes are rolled to.
const TARGET: &str = "v1.96.0";
/// The Deployment behind the budget, and its replicas.
const APP: &str = "web";
const REPLICAS: i32 = 3;

fn cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

async fn a_roll_paused_mid_way_starts_no_other_node_and_goes_on_when_resumed(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    cli()?;
    let _one = one_driver().await;
    let trio = ThreeNodes::of(kubelets, Workers::InTwoZones).await?;
    let limit = Duration::from_secs(120);
    trio.deployment_behind_budget(APP, REPLICAS, limit).await?;
    let drains = Drains::watch(&trio.admin, &trio.namespace, APP).await?;
    let (first, second) = (trio.names[1].clone(), trio.names[2].clone());
    let kubeconfig = sa_kubeconfig(&trio.admin, SA_NAME).await?;
    let kc = kubeconfig.path.clone();
    let nodes: Api<Node> = Api::all(trio.admin.clone());
    let roll = {
        let (kc, nodes) = (kc.clone(), format!("{first},{second}"));
        tokio::spawn(async move {
            let args = [
                "upgrade",
                "--to",
                TARGET,
                "--allow-skew",
                "--version-from",
                kubelets.version_from(),
                "--nodes",
                &nodes,
                "--drain-timeout",
                "60s",
                "--max-unavailable",
                "1",
                "--reboot-timeout",
                "60s",
                "--deadline",
                "2m",
            ];
            nodejob(&kc, CONTEXT, &args).await
        })
    };
    // The roll began: its first node is cordoned. Pause it there.
    wait_for(
        nodes.clone(),
        &first,
        "cordoned by the roll",
        limit,
        cordoned,
    )
    .await?;
    let paused = nodejob(
        &kc,
        CONTEXT,
        &["pause", "--by", "e2e", "--reason", "mid-roll"],
    )
    .await?;
    paused.exited(0)?;
    ensure!(
        paused.stdout.starts_with("paused by e2e at "),
        "{}",
        paused.stdout
    );
    let status = nodejob(&kc, CONTEXT, &["status"]).await?;
    status.exited(0)?;
    ensure!(
        status.stdout.contains("PAUSED: paused by e2e at ")
            && status.stdout.contains(": mid-roll; no roll starts a step"),
        "{}",
        status.stdout
    );
    // While paused, the second node is not started (the first waits before its next step).
    let started = wait_for(
        nodes.clone(),
        &second,
        "cordoned while paused",
        Duration::from_secs(30),
        cordoned,
    )
    .await;
    ensure!(
        started.is_err(),
        "node {second} was started while paused: {started:?}"
    );
    let resumed = nodejob(&kc, CONTEXT, &["resume"]).await?;
    resumed.exited(0)?;
    ensure!(
        resumed.stdout.starts_with("resumed ") && resumed.stdout.contains("paused by e2e"),
        "{}",
        resumed.stdout
    );
    let ran = roll
        .await
        .map_err(|e| Failure(format!("the roll's task: {e}")))??;
    ran.exited(0)?;
    ensure!(
        ran.stdout.contains(&format!("{first}: paused by e2e at "))
            && ran.stdout.contains(": mid-roll; waiting before ")
            && ran.stdout.contains(&format!("{first}: resumed after ")),
        "the roll's progress must say it waited and resumed:\n{}",
        ran.stdout
    );
    for node in [&first, &second] {
        let n = nodes
            .get(node)
            .await
            .map_err(|e| Failure(format!("reading node {node}: {e}")))?;
        ensure!(!cordoned(&n), "node {node} left cordoned");
    }
    // Drained: each Pod on a rolled node evicted once before its host Job, the budget whole.
    let drained = drains.check(
        &[first, second],
        REPLICAS - 1,
        &format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"),
    )?;
    eprintln!("pause ({kubelets:?}): drained {drained:?}");
    trio.remove().await
}
