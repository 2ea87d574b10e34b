//! Long rolls that run themselves (issue 22) on a real control plane: the version-skew gate
//! refusing before any write, and the drivers' node conditions read back as `kubectl describe
//! node` prints them, each on the node agent's nodes and on real ones ([`Kubelets`]). The
//! pause and resume mid-roll through the built `nodejob` binary is `tests/pause.rs`. Run by
//! `e2e/run`.

use std::time::Duration;

use nodejob_conformance::{Backend, Failure, Interposed, ensure};
use nodejob_core::{LeaseApi, NodeApi};
use nodejob_e2e::{Drains, Kubelets, SA_NAME, SA_NAMESPACE, ThreeNodes, Workers, unique};
use upgrade_driver::skew::POLICY;
use upgrade_driver::{Error, Plan, PlanSpec, Skew, VersionSource};

nodejob_e2e::on_kubelets! {
    source: include_str!("long_rolls.rs");
    both:
        the_skew_gate_refuses_a_worker_roll_past_the_apiserver_before_any_write,
        the_upgrades_condition_reads_back_as_kubectl_describe_shows_it;
    agent_only: ;
    no_nodes: ;
}

/// Where a roll on `kubelets` reads the version: the agent's kubelet moves, a real node's
/// `osImage` does.
fn source(kubelets: Kubelets) -> VersionSource {
    match kubelets {
        Kubelets::Agent => VersionSource::KubeletVersion,
        Kubelets::Real => VersionSource::OsImage,
    }
}

/// A plan to `target` for `nodes`, in the drivers' namespace, under a Lease of its own.
fn plan_for(
    target: &str,
    nodes: &[String],
    skew: Skew,
    version_source: VersionSource,
) -> Result<Plan, Failure> {
    let mut spec = PlanSpec::new(target);
    spec.version_source = version_source;
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
/// kubelets at the apiserver's release, as the agent plays them and as a real one is built)
/// rolled one minor past it are refused before any write, naming the rule, both nodes, the
/// versions and where the policy is written; the Lease is never created.
async fn the_skew_gate_refuses_a_worker_roll_past_the_apiserver_before_any_write(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    // The other test's worker, in flight, would be carried on and judged here too.
    let _one = nodejob_e2e::one_driver().await;
    let three = ThreeNodes::of(kubelets, Workers::InTwoZones).await?;
    let api = Interposed::new(three.backend.api());
    let server = api.version().await?;
    let minor: u64 = (server.minor.trim_end_matches('+').parse())
        .map_err(|e| Failure(format!("the apiserver's minor {:?}: {e}", server.minor)))?;
    let target = format!("v{}.{}.0", server.major, minor + 1);
    let workers = three.names[1..].to_vec();
    // The gate judges kubelets: a roll that moves them.
    let plan = plan_for(
        &target,
        &workers,
        Skew::Enforce,
        VersionSource::KubeletVersion,
    )?;
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

/// The upgrade's condition on a node, read back from the real apiserver: each step said as it
/// starts (`True`, the step as the reason), the end (`False`, `Upgraded`), the transition time
/// moving only with the status, the kubelet's conditions (the node agent's, posted as a kubelet
/// posts them, by a strategic-merge patch) kept beside it through the node's reboot; and the
/// drivers' rows `nodejob status` shows as `kubectl describe node` prints them, each a row of
/// `kubectl`'s own table when a `kubectl` is installed. On real nodes, the kubelet's
/// conditions are a real kubelet's, posted again after a real reboot; the worker's drain is
/// asserted ([`Drains`]).
async fn the_upgrades_condition_reads_back_as_kubectl_describe_shows_it(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::Api;
    use kube::runtime::watcher;
    use nodejob_e2e::record;
    use nodejob_roll::condition::{UPGRADE, condition};
    let _one = nodejob_e2e::one_driver().await;
    let three = ThreeNodes::of(kubelets, Workers::InTwoZones).await?;
    let settle = Duration::from_secs(120);
    three.deployment_behind_budget("web", 3, settle).await?;
    let drains = Drains::watch(&three.admin, &three.namespace, "web").await?;
    let worker = three.names[1].clone();
    let nodes: Api<Node> = Api::all(three.admin.clone());
    let watching = watcher::Config::default().fields(&format!("metadata.name={worker}"));
    let seen = record(nodes, watching).await?;
    // The agent's kubelets go to a release the apiserver is not at: past the skew policy.
    let plan = plan_for(
        "v1.99.0",
        std::slice::from_ref(&worker),
        Skew::Allow,
        source(kubelets),
    )?;
    let report = upgrade_driver::run(&*three.backend.api(), &plan, upgrade_driver::quiet())
        .await
        .map_err(|e| Failure(format!("the upgrade did not start: {e}")))?;
    ensure!(
        report.outcome == upgrade_driver::Outcome::Done,
        "{report:#?}"
    );
    let versions = seen.stop();
    let sa = format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}");
    let drained = drains.check(std::slice::from_ref(&worker), 2, &sa)?;
    eprintln!("long rolls ({kubelets:?}): drained {drained:?}");
    // The node as read now ends what the watch saw: stopped as the run returned, the watch
    // may not have delivered the run's last write yet.
    let (now, described) = nodejob_e2e::described_conditions(&three.admin, &worker).await?;
    // What the node said, change by change (the watch may merge two quick writes into one
    // version, never reorder them).
    let mut said: Vec<(String, String)> = Vec::new();
    let mut since = Vec::new();
    for node in versions.iter().chain([&now]) {
        if let Some(c) = condition(node, UPGRADE) {
            let now = (c.status.clone(), c.reason.clone().unwrap_or_default());
            if said.last() != Some(&now) {
                since.push((c.status.clone(), c.last_transition_time.clone()));
                said.push(now);
            }
        }
    }
    let order = ["Cordon", "Drain", "Upgrade", "Reboot", "Uncordon"];
    let steps: Vec<&str> = (said.iter())
        .filter(|(s, _)| s == "True")
        .map(|(_, r)| r.as_str())
        .collect();
    ensure!(
        steps.windows(2).all(|w| {
            let at = |s: &str| order.iter().position(|o| *o == s);
            at(w[0]) < at(w[1])
        }) && steps.contains(&"Upgrade"),
        "the steps said out of order, or the upgrade unsaid: {said:?}"
    );
    ensure!(
        said.last()
            .is_some_and(|(s, r)| s == "False" && r == "Upgraded"),
        "the end: {said:?}"
    );
    let held: Vec<_> = since
        .iter()
        .filter(|(s, _)| s == "True")
        .map(|(_, t)| t)
        .collect();
    ensure!(
        held.windows(2).all(|w| w[0] == w[1]),
        "the transition time moved while the status stayed True: {since:?}"
    );
    // As `kubectl describe node` prints it (the command's rows held to it:
    // `described_conditions`).
    eprintln!("node {worker}:\n{described}");
    let line = |t: &str| {
        described
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{t} ")))
    };
    let ours = line(UPGRADE).unwrap_or_default();
    let reason_and_message: Vec<&str> = (ours.rsplit("+0000").next().unwrap_or_default())
        .split_whitespace()
        .collect();
    ensure!(
        ours.split_whitespace().nth(1) == Some("False")
            && reason_and_message == ["Upgraded", "upgraded", "to", "v1.99.0"],
        "{described}"
    );
    // The kubelet's Ready kept beside ours (the node as read, whether or not a kubectl showed it).
    ensure!(
        condition(&now, "Ready").is_some_and(|c| c.status == "True"),
        "the kubelet's Ready kept: {described}"
    );
    three.remove().await
}
