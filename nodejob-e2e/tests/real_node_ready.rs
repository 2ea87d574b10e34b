//! The conformance scenarios that turn a node NotReady and Ready again, on a real node, by
//! the transitions a control plane really makes: the node's kubelet stops, and the node
//! lifecycle controller (kube-controller-manager's, run for the test: [`NodeLifecycle`])
//! turns its Ready `Unknown` once it has missed the kubelet's posts for its grace; the kubelet
//! starts again and posts Ready. The same bodies as on the fake and on the agent's nodes
//! ([`NOT_READY_SCENARIOS`]). Run by `e2e/run`; `e2e/lanes` runs this binary alone, as it
//! does every binary that starts the controller.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use nodejob_conformance::{Backend, Failure, ensure, nodes, scenarios};
use nodejob_e2e::{NOT_READY_SCENARIOS, NodeLifecycle, RealNodeBackend};

/// The controller's grace for a node whose kubelet stopped posting: past the kubelet's Lease
/// renewals (every 10 s, a quarter of its 40 s `nodeLeaseDurationSeconds`), as the drivers'
/// real-node tests use it.
const MONITOR_GRACE: Duration = Duration::from_secs(20);
/// Its period: how soon past its grace it sees a node go.
const MONITOR_PERIOD: Duration = Duration::from_secs(1);
/// How long the controller may take to start and register the node.
const SETTLE: Duration = Duration::from_secs(120);

type Scenario = fn(Arc<RealNodeBackend>) -> BoxFuture<'static, Result<(), Failure>>;

/// Each scenario, by its name in the suite.
const SCENARIOS: &[(&str, Scenario)] = &[
    ("wait_ready_sees_the_node_turn_ready", |b| {
        scenarios::wait_ready_sees_the_node_turn_ready(b).boxed()
    }),
    ("wait_ready_times_out_on_a_not_ready_node", |b| {
        scenarios::wait_ready_times_out_on_a_not_ready_node(b).boxed()
    }),
    (
        "a_node_condition_merges_by_type_and_outlives_the_kubelets_posts",
        |b| nodes::a_node_condition_merges_by_type_and_outlives_the_kubelets_posts(b).boxed(),
    ),
];

/// The scenarios, one after the other on one real node, under one node lifecycle controller
/// (two would both act on every node). Each scenario starts with the node Ready and leaves it
/// Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_node_turns_not_ready_and_ready_as_the_control_plane_makes_it() -> Result<(), Failure>
{
    let names: Vec<&str> = SCENARIOS.iter().map(|(name, _)| *name).collect();
    ensure!(
        names == NOT_READY_SCENARIOS,
        "this binary runs {names:?}, the suite's list is {NOT_READY_SCENARIOS:?}"
    );
    let backend = Arc::new(RealNodeBackend::new().await?);
    let node = backend.node();
    let lifecycle = NodeLifecycle::start(
        &backend.admin(),
        &node,
        MONITOR_GRACE,
        MONITOR_PERIOD,
        SETTLE,
    )
    .await?;
    let mut failed = Vec::new();
    for (name, scenario) in SCENARIOS {
        if let Err(Failure(why)) = scenario(backend.clone()).await {
            failed.push(format!("{name}: {why}"));
            // The next scenario starts from a Ready node, whatever this one left.
            backend.set_node_ready(&node, true).await?;
        }
    }
    lifecycle.stop()?;
    Arc::into_inner(backend)
        .ok_or_else(|| Failure("the backend is still shared".into()))?
        .stop()?;
    ensure!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}
