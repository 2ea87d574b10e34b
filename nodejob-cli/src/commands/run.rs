//! `nodejob run`: one privileged Job on a node; prints its log, exits with its container's
//! exit code.

use k8s_openapi::api::core::v1::Node;
use nodejob_core::NODE_ANNOTATION;
use nodejob_core::{LeaseApi, NodeApi, PodApi, run_exit_code, run_exit_code_logs};
use nodejob_roll::{Placement, lease_holder};
use upgrade_driver::records::{self, InProgress};

use super::render::{print, settings};
use super::{Banner, say_simulated};
use crate::args::{DryRun, Format, Global, Run};
use crate::backend::Backend;
use crate::exit::{Exit, code};
use crate::inspect::status::lease_name;

/// Runs `nodejob run`.
pub(crate) fn run(global: &Global, args: Run) -> Result<Exit, Exit> {
    let spec = settings(&args.job)
        .spec(&global.namespace)
        .map_err(|e| Exit::usage(e.to_string()))?;
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(args.sim.speed, args.sim.start.simulate_start);
    backend.has_node("--node", &spec.node)?;
    // kubectl's `--dry-run`: the object printed, nothing created. `client` (and the bare
    // flag) touches no cluster, as `render`; `server` first reads the node, as the run would.
    if let Some(dry_run) = args.dry_run.filter(|d| *d != DryRun::None) {
        let json = global.output == Format::Json;
        if dry_run == DryRun::Server {
            let node = spec.node.clone();
            backend.block_on(|t| async move { node_exists(&*t.api, &node).await })?;
        }
        print(&spec, json)?;
        return Ok(Exit::ok());
    }
    let output = global.output.text_or_json("run")?;
    let outcome = backend.block_on(|t| async move {
        say_simulated(&t, Banner::Stderr);
        let node = node_exists(&*t.api, &spec.node).await?;
        if !args.force {
            refuse_busy(&*t.api, &spec.namespace, &node).await?;
        }
        Ok(if args.exit_code_only {
            run_exit_code(&*t.api, &spec).await.map(|c| (c, None))
        } else {
            run_exit_code_logs(&*t.api, &spec)
                .await
                .map(|(c, l)| (c, Some(l)))
        })
    })?;
    match outcome {
        Ok((exit, log)) => {
            match (output, log) {
                // One object: the exit code and the log (null with --exit-code-only).
                (Format::Json, log) => {
                    outln!("{}", serde_json::json!({"exit_code": exit, "log": log}))
                }
                (_, Some(log)) => out!("{log}"),
                (_, None) => {}
            }
            Ok(Exit::with(u8::try_from(exit).unwrap_or(code::FAILED), ""))
        }
        Err(e) => Err(Exit::failed(e.to_string())),
    }
}

/// Refuses (exit 2) a `--node` the cluster has no node of, before any Job is created: a Job
/// pinned to a node that does not exist would stay Pending until its deadline, then be left
/// Failed.
pub(crate) async fn node_exists<A: NodeApi + ?Sized>(api: &A, node: &str) -> Result<Node, Exit> {
    match api.get_node(node).await {
        Ok(found) => Ok(found),
        Err(e) if e.is_not_found() => Err(Exit::usage(format!(
            "--node {node}: no such node in the cluster (`kubectl get nodes` lists them); no \
             Job was created"
        ))),
        Err(e) => Err(Exit::failed(format!("reading node {node}: {e}"))),
    }
}

/// Refuses (exit 3) a run on `node` (as just read) while a roll is under way on it, before any
/// Job is created: a host operation of ours in flight there (a node Job's Pod running: a
/// roll's step, or another `run`), or an upgrade in flight on it (cordoned, drained, or its
/// host upgraded and awaiting its reboot). The roll's reboot would kill what this run starts,
/// or this run would act on a host mid-operation. Names what shows it and who holds the
/// Lease; `--force` goes on anyway.
pub(crate) async fn refuse_busy<A>(api: &A, namespace: &str, node: &Node) -> Result<(), Exit>
where
    A: PodApi + LeaseApi + ?Sized,
{
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let mut shown = Vec::new();
    if let Ok(Some(record)) = records::read::<InProgress>(node, records::IN_PROGRESS) {
        let cordoned = match record.cordoned {
            true => ", cordoned by it",
            false => "",
        };
        shown.push(format!(
            "an upgrade to {} is in flight on it{cordoned}",
            record.target
        ));
    }
    let pods = (api.list_node_pods(name).await)
        .map_err(|e| Exit::failed(format!("reading the pods of node {name}: {e}")))?;
    for pod in &pods {
        let meta = &pod.metadata;
        let ours = (meta.annotations.as_ref()).is_some_and(|a| a.contains_key(NODE_ANNOTATION));
        if ours && !nodejob_core::drain::ended(pod) {
            let job = (meta.owner_references.iter().flatten())
                .find(|o| o.kind == "Job")
                .map_or_else(|| meta.name.clone().unwrap_or_default(), |o| o.name.clone());
            let ns = meta.namespace.as_deref().unwrap_or_default();
            shown.push(format!("node job {ns}/{job} is running on it"));
        }
    }
    if shown.is_empty() {
        return Ok(());
    }
    let mut placement = Placement::new(String::new());
    placement.namespace = namespace.to_string();
    placement.lease_name = lease_name();
    let holder = match lease_holder(api, &placement).await {
        Ok(Some(holder)) => format!("the Lease {} is held by {holder}", placement.lease()),
        Ok(None) => format!(
            "the Lease {} is free (the roll is not running; a rerun carries it on)",
            placement.lease()
        ),
        Err(e) => format!("the Lease {} could not be read: {e}", placement.lease()),
    };
    Err(Exit::with(
        code::LEASE_HELD,
        format!(
            "--node {name}: a roll is under way on it: {}; {holder}. Its reboot would kill what \
             this run starts, or this run would act on a host mid-operation; no Job was \
             created. Wait for it (`nodejob status {name}`), or run `nodejob run --force` if you mean it",
            shown.join("; ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::{Pod, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use tokio::sync::Notify;
    use upgrade_driver::{PlanSpec, Progress, UpgradeStep};

    use super::*;
    use crate::sim;

    const NS: &str = "kube-system";

    /// Wakes the test once a node waits on the pause switch.
    struct OnPause(Arc<Notify>);

    impl upgrade_driver::EventSink<Progress> for OnPause {
        fn event(&self, event: &Progress) {
            if matches!(event, Progress::Paused { .. }) {
                self.0.notify_one();
            }
        }
    }

    /// Issue 33, item 13: while a roll holds `cp-0` drained and waits before its host
    /// upgrade, a run there is refused (exit 3, naming the upgrade and the Lease's holder);
    /// a node the roll is not on, and the same node once the roll is over, are not.
    #[tokio::test(start_paused = true)]
    async fn a_run_is_refused_on_a_node_a_roll_is_under_way_on() {
        let fake = sim::cluster(5, &[]).unwrap();
        sim::settle(&fake).await;
        let mut spec = PlanSpec::new("v1.38.0");
        spec.nodes = vec!["cp-0".into()];
        let plan = upgrade_driver::Plan::build(spec).unwrap();
        let paused = Arc::new(Notify::new());
        let sink = Arc::new(sim::PauseAtStep::new(
            fake.clone(),
            (NS, &lease_name()),
            ("cp-0", UpgradeStep::Drain),
            Arc::new(OnPause(paused.clone())),
        ));
        let stop = upgrade_driver::Stop::new();
        let roll = upgrade_driver::run_until(&*fake, &plan, sink, &stop);
        let check = async {
            // Virtual time: an hour passes at once if the roll never pauses.
            let waited = tokio::time::timeout(Duration::from_secs(3600), paused.notified());
            waited.await.expect("the roll never paused");
            let busy = fake.node("cp-0").unwrap();
            let refused = refuse_busy(&*fake, NS, &busy).await.unwrap_err();
            assert_eq!(refused.code, code::LEASE_HELD, "{}", refused.message);
            for said in [
                "--node cp-0: a roll is under way on it: an upgrade to v1.38.0 is in \
                 flight on it, cordoned by it; the Lease kube-system/nodejob is held by ",
                "no Job was created",
                "`nodejob run --force`",
            ] {
                assert!(
                    refused.message.contains(said),
                    "{said}: {}",
                    refused.message
                );
            }
            let idle = fake.node("worker-a-0").unwrap();
            assert!(refuse_busy(&*fake, NS, &idle).await.is_ok());
        };
        let (report, ()) = tokio::join!(roll, check);
        assert_eq!(report.unwrap().outcome, upgrade_driver::Outcome::Done);
        let done = fake.node("cp-0").unwrap();
        assert!(refuse_busy(&*fake, NS, &done).await.is_ok());
    }

    /// A node Job of ours still running on a node (a host operation in flight) refuses a run
    /// there, naming the Job.
    #[tokio::test(start_paused = true)]
    async fn a_run_is_refused_on_a_node_a_node_job_of_ours_runs_on() {
        let fake = sim::cluster(5, &[]).unwrap();
        let mut pod = Pod::default();
        pod.metadata.name = Some("stage-worker-a-0-abcde".into());
        pod.metadata.namespace = Some(NS.into());
        pod.metadata.annotations = Some([(NODE_ANNOTATION.into(), "worker-a-0".into())].into());
        pod.metadata.owner_references = Some(vec![OwnerReference {
            kind: "Job".into(),
            name: "stage-worker-a-0".into(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        pod.spec = Some(PodSpec {
            node_name: Some("worker-a-0".into()),
            containers: vec![k8s_openapi::api::core::v1::Container {
                name: "stratum".into(),
                image: Some("busybox".into()),
                ..Default::default()
            }],
            ..PodSpec::default()
        });
        fake.create_pod_now(&pod).unwrap();
        let node = fake.node("worker-a-0").unwrap();
        let refused = refuse_busy(&*fake, NS, &node).await.unwrap_err();
        assert_eq!(refused.code, code::LEASE_HELD);
        assert!(
            refused
                .message
                .contains("node job kube-system/stage-worker-a-0 is running on it")
                && refused
                    .message
                    .contains("the Lease kube-system/nodejob is free"),
            "{}",
            refused.message
        );
    }
}
