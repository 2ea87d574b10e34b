//! Long rolls that run themselves (issue 22) on a real control plane: the version-skew gate
//! refusing before any write, the drivers' node conditions read back as `kubectl describe
//! node` prints them, and a pause and resume mid-roll through the built `nodejob` binary.
//! Run by `e2e/run`.

use std::time::Duration;

use nodejob_conformance::{Backend, Failure, Interposed, ensure};
use nodejob_core::{LeaseApi, NodeApi};
use nodejob_e2e::{SA_NAMESPACE, ThreeNodes, Workers, unique};
use upgrade_driver::skew::POLICY;
use upgrade_driver::{Error, Plan, PlanSpec, Skew};

/// A plan to `target` for `nodes`, in the drivers' namespace, under a Lease of its own.
fn plan_for(target: &str, nodes: &[String], skew: Skew) -> Result<Plan, Failure> {
    let mut spec = PlanSpec::new(target);
    spec.nodes = nodes.to_vec();
    spec.namespace = SA_NAMESPACE.into();
    spec.lease_name = unique("long-rolls-e2e");
    spec.identity = unique("long-rolls-e2e-driver");
    spec.drain.timeout = Duration::from_secs(60);
    spec.reboot_timeout = Duration::from_secs(60);
    spec.deadline = Duration::from_secs(120);
    spec.lease_duration = Duration::from_secs(15);
    spec.skew = skew;
    Plan::build(spec).map_err(|e| Failure(e.to_string()))
}

/// The version-skew gate against the real apiserver's `/version`: the two workers (their
/// kubelets at the apiserver's release, as the agent plays them) rolled one minor past it are
/// refused before any write, naming the rule, both nodes, the versions and where the policy
/// is written; the Lease is never created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skew_gate_refuses_a_worker_roll_past_the_apiserver_before_any_write()
-> Result<(), Failure> {
    let three = ThreeNodes::new(Workers::InTwoZones).await?;
    let api = Interposed::new(three.backend.api());
    let server = api.version().await?;
    let minor: u64 = (server.minor.trim_end_matches('+').parse())
        .map_err(|e| Failure(format!("the apiserver's minor {:?}: {e}", server.minor)))?;
    let target = format!("v{}.{}.0", server.major, minor + 1);
    let workers = three.names[1..].to_vec();
    let plan = plan_for(&target, &workers, Skew::Enforce)?;
    let refused = upgrade_driver::run(&api, &plan, upgrade_driver::quiet()).await;
    let rule = match refused {
        Err(Error::Plan(p)) if p.field == "skew" => p.rule,
        other => return Err(Failure(format!("not refused by the skew gate: {other:?}"))),
    };
    let newer = format!(
        "{}: {target} would be newer than the apiserver ({})",
        workers.join(", "),
        server.git_version
    );
    ensure!(
        rule.contains(POLICY) && rule.contains(&newer),
        "{newer:?} and the policy not in {rule}"
    );
    let writes: Vec<String> = (api.calls().into_iter())
        .filter(|c| c.verb.writes())
        .map(|c| format!("{} {}", c.verb, c.name))
        .collect();
    ensure!(writes.is_empty(), "writes before the refusal: {writes:?}");
    let lease = api
        .inner()
        .get_lease(SA_NAMESPACE, &plan.spec().lease_name)
        .await;
    ensure!(
        lease.as_ref().is_err_and(|e| e.is_not_found()),
        "the Lease exists: {lease:?}"
    );
    three.remove().await
}
