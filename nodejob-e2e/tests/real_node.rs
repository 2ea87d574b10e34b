//! The node Job on real nodes: a kubelet, containerd and runc (`e2e/node/node`), where the
//! privileged pod's `nsenter --target 1` reaches the node's PID 1 and execs its host binary.
//! Run by `e2e/run`.
//!
//! First the conformance scenarios, the Job scenarios on a real node each and the node
//! scenarios (cordons, taints, drains against real budgets, evictions, Leases, Events) on three
//! each, every one a real kubelet can stage (its exit codes, logs, deadline, deletions and
//! terminations are the runtime's own, not a model's); those that turn a node NotReady run
//! in `tests/real_node_ready.rs`, under the node lifecycle controller; those a real node cannot
//! stage are listed with why ([`NOT_ON_REAL_NODES`]). Then what only a real node shows: an
//! argv reaching the host verbatim through runc and `nsenter`, a log cut by the kubelet's
//! `limitBytes`, the runtime's exit status of a deleted Pod, and a Pod that was running across
//! a reboot.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use nodejob_conformance::{Backend, Failure, ensure};
use nodejob_core::{CONTROLLER_UID_LABEL, JobApi, LOG_LIMIT_BYTES, Spec};
use nodejob_e2e::{NOT_READY_SCENARIOS, RealNodeBackend, boot_id, job_image, wait_for};
use nodejob_host::directives as host;

/// The conformance scenarios run on real nodes, each on a node of its own (the Job scenarios)
/// or on three (the node scenarios), the same bodies as on the fake and on the agent's nodes.
/// Every scenario of the suite is here, in [`NOT_READY_SCENARIOS`] (run by
/// `tests/real_node_ready.rs` under the node lifecycle controller) or in
/// [`NOT_ON_REAL_NODES`] with its reason
/// (`every_scenario_runs_on_real_nodes_or_says_why`).
macro_rules! on_real_nodes {
    (jobs: $($job:ident),* $(,)?; nodes: $($node:ident),* $(,)?) => {
        nodejob_conformance::conformance!(@each
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            RealNodeBackend::new().await.expect("a real node");
            $($job),*
        );
        mod nodes {
            use nodejob_e2e::RealNodeBackend;
            nodejob_conformance::conformance_nodes!(@each
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                RealNodeBackend::for_workloads().await.expect("three real nodes");
                $($node),*
            );
        }
        /// The Job scenarios run on real nodes.
        const JOBS: &[&str] = &[$(stringify!($job)),*];
        /// The node scenarios run on real nodes.
        const NODES: &[&str] = &[$(stringify!($node)),*];
    };
}

on_real_nodes!(
    jobs:
    exit_code_and_log_of_a_succeeded_job,
    dollars_in_the_argv_reach_the_host_as_written,
    non_zero_exit_leaves_the_job_for_inspection,
    unreadable_log_keeps_the_exit_code,
    stale_succeeded_job_is_replaced_exactly,
    stale_failed_job_is_replaced_and_never_reported,
    stale_running_job_is_waited_for_not_killed,
    stale_job_being_deleted_is_waited_out,
    stale_job_replaced_between_inspect_and_delete_is_left_alone,
    already_exists_on_create_is_left_alone,
    job_deleted_while_waiting_ends_the_run,
    job_replaced_while_waiting_is_never_read,
    deadline_kill_is_no_exit_status,
    timeout_leaves_the_host_operation_running,
    pod_security_refusal_fails_fast,
    transient_errors_are_retried,
    create_whose_answer_was_lost_is_adopted,
    forbidden_fails_at_once,
    logs_are_read_by_uid,
    delete_exact_refuses_a_changed_job,
    delete_seen_takes_a_changed_job_by_its_uid,
    delete_of_a_missing_job_is_no_error,
    wait_ready_reports_a_missing_node,
    long_node_name_makes_valid_objects,
    pod_deleted_by_another_actor_is_no_exit_code,
    node_deleted_while_the_job_runs_is_named,
    a_reboot_under_the_job_is_no_exit_code,
    stratum_upgrade_reboots_the_node_into_the_new_version,
    stratum_carotate_phases_are_reported,
    finished_job_deleted_by_another_runner_says_so,
    jobs_are_listed_by_label_selector,
    jobs_of_a_missing_namespace_are_an_empty_list;
    nodes:
    cordon_and_uncordon_with_a_concurrent_writer,
    a_no_schedule_taint_is_added_beside_anothers_once_and_removed_by_key,
    nodes_are_listed_by_label,
    every_node_is_listed_then_watched_from_the_lists_version,
    drain_waits_out_a_budget_that_releases,
    drain_fails_at_its_timeout_naming_the_budget,
    daemonset_and_mirror_pods_stay,
    bare_pod_is_refused_unless_forced,
    empty_dir_pod_is_refused_unless_allowed,
    pod_terminating_with_a_long_grace_period,
    dry_run_eviction_changes_nothing,
    lease_is_acquired_renewed_and_released,
    lease_held_by_another_is_refused,
    expired_lease_is_taken_over_and_the_loser_stops,
    node_event_is_created_and_found_by_the_node_name,
    node_event_in_another_namespace_is_invalid,
    event_in_a_missing_namespace_is_refused,
    version_names_the_servers_release,
);

/// The scenarios a real node cannot stage, each with why (`e2e/README.md`, "Real nodes"):
/// none.
const NOT_ON_REAL_NODES: &[(&str, &str)] = &[];

/// Every scenario of the suite runs on real nodes (here or in `tests/real_node_ready.rs`) or is
/// in [`NOT_ON_REAL_NODES`] with a reason, never both, and no name there is stale.
#[test]
fn every_scenario_runs_on_real_nodes_or_says_why() {
    let all: Vec<&str> = (nodejob_conformance::scenarios::ALL.iter())
        .chain(nodejob_conformance::nodes::ALL)
        .copied()
        .collect();
    let run: Vec<&str> = (JOBS.iter().chain(NODES).chain(NOT_READY_SCENARIOS))
        .copied()
        .collect();
    for name in &all {
        let skipped = NOT_ON_REAL_NODES.iter().filter(|(n, _)| n == name).count();
        let ran = run.iter().filter(|n| *n == name).count();
        assert!(
            ran + skipped == 1,
            "scenario {name}: run {ran} times on real nodes, skipped {skipped} times"
        );
    }
    for (name, why) in NOT_ON_REAL_NODES {
        assert!(all.contains(name), "{name} is no scenario of the suite");
        assert!(!why.trim().is_empty(), "{name} is skipped with no reason");
    }
    for name in &run {
        assert!(all.contains(name), "{name} is no scenario of the suite");
    }
}

/// A Job on the backend's node running `host` (the program and its arguments, after
/// `nsenter`'s `--`) from the real nodes' image.
fn spec(b: &RealNodeBackend, name: &str, host: &[&str]) -> Spec {
    let mut argv: Vec<String> = [
        "nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--",
    ]
    .map(String::from)
    .into();
    argv.extend(host.iter().map(|s| s.to_string()));
    Spec {
        namespace: b.namespace(),
        name: name.into(),
        node: b.node(),
        label_key: "nodejob.test/real".into(),
        container: "host".into(),
        argv,
        active_deadline: Duration::from_secs(120),
        poll_attempts: 60,
        kind: "real-node job".into(),
        image: Some(job_image()),
        output: Some(Arc::new(|_: &nodejob_core::Note| {})),
        ..Spec::default()
    }
}

type Outcome = Result<(), Failure>;

fn check(outcome: Outcome) {
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// An argv with spaces, quotes, backslashes, unicode, an empty element and dollar signs
/// reaches the host program element for element: the pod's `command` is exec'd by runc (no
/// shell), `nsenter` passes it on. The host's python3 prints what it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argv_reaches_the_host_verbatim() {
    check(
        async {
            let b = RealNodeBackend::new().await?;
            let elements = [
                "two words",
                "it's \"quoted\"",
                "back\\slash",
                "ünïcødé ✓",
                "",
                "$HOME",
                "$$",
                "$(HOME)",
                "a\nnewline",
            ];
            let mut host = vec![
                "python3",
                "-c",
                "import json, sys; print(json.dumps(sys.argv[1:]))",
            ];
            host.extend(elements);
            let (code, log) =
                nodejob_core::run_exit_code_logs(&*b.api(), &spec(&b, "argv", &host)).await?;
            ensure!(code == 0, "exit {code}: {log}");
            let seen: Vec<String> = serde_json::from_str(log.trim_end())
                .map_err(|e| Failure(format!("{log:?}: {e}")))?;
            ensure!(seen == elements, "the host saw {seen:?}");
            Ok(())
        }
        .await,
    )
}

/// A log longer than the runner's limit is cut by the kubelet (`limitBytes`, counted in
/// bytes), then by the runner on a character boundary: the runner returns the first
/// `LOG_LIMIT_BYTES` bytes at most, whole characters only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_log_is_cut_at_the_limit() {
    check(
        async {
            let b = RealNodeBackend::new().await?;
            // 'é' is 2 bytes: a one-byte prefix makes the limit fall inside a character.
            let program = format!(
                "import sys; sys.stdout.write('x' + 'é' * {}); sys.exit(3)",
                LOG_LIMIT_BYTES
            );
            let (code, log) = nodejob_core::run_exit_code_logs(
                &*b.api(),
                &spec(&b, "long", &["python3", "-c", &program]),
            )
            .await?;
            ensure!(code == 3, "exit {code}");
            let limit = usize::try_from(LOG_LIMIT_BYTES).expect("limit fits");
            ensure!(log.len() == limit - 1, "{} bytes, limit {limit}", log.len());
            ensure!(
                log.starts_with("xé") && log[1..].chars().all(|c| c == 'é'),
                "not the log's first characters"
            );
            Ok(())
        }
        .await,
    )
}

/// No host model: the rules asked are the kubelet's, not a host's.
struct NoModel;

impl nodejob_host::HostModel for NoModel {
    fn exec(&mut self, _argv: &[String]) -> Option<nodejob_host::Execution> {
        None
    }
    fn booted(&mut self, _kubelet_version: &str, _boot_id: &str) {}
}

/// The terminated state of the Job's pod once it has ended.
async fn terminated(b: &RealNodeBackend, job: &str) -> Result<ContainerStateTerminated, Failure> {
    let job = b.api().get_job(&b.namespace(), job).await?;
    let uid = job.metadata.uid.unwrap_or_default();
    let pods = Api::<Pod>::namespaced(b.admin(), &b.namespace());
    let list = pods
        .list(&ListParams::default().labels(&format!("{CONTROLLER_UID_LABEL}={uid}")))
        .await
        .map_err(|e| Failure(format!("listing pods: {e}")))?;
    let name = list
        .items
        .first()
        .and_then(|p| p.metadata.name.clone())
        .ok_or_else(|| Failure("no pod".into()))?;
    let pod = wait_for(pods, &name, "its container terminated", LIMIT, |p: &Pod| {
        terminated_state(p).is_some()
    })
    .await?;
    terminated_state(&pod).ok_or_else(|| Failure("no terminated state".into()))
}

fn terminated_state(pod: &Pod) -> Option<ContainerStateTerminated> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses.first()?.state.as_ref()?.terminated.clone()
}

const LIMIT: Duration = Duration::from_secs(90);

/// Starts `host` as Job `name` and returns its pod's name once its container runs.
async fn running(b: &RealNodeBackend, name: &str, host: &[&str]) -> Result<String, Failure> {
    let created = b
        .api()
        .create_job(&nodejob_core::build(&spec(b, name, host)))
        .await?;
    let uid = created.metadata.uid.unwrap_or_default();
    let pods = Api::<Pod>::namespaced(b.admin(), &b.namespace());
    let config = watcher::Config::default().labels(&format!("{CONTROLLER_UID_LABEL}={uid}"));
    let stream = watcher(pods, config).applied_objects();
    let mut stream = std::pin::pin!(stream);
    let seen = tokio::time::timeout(LIMIT, async {
        while let Some(pod) = stream
            .try_next()
            .await
            .map_err(|e| Failure(e.to_string()))?
        {
            let runs = (pod.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.state.as_ref())
                .is_some_and(|s| s.running.is_some());
            if runs {
                return Ok(pod.metadata.name.unwrap_or_default());
            }
        }
        Err(Failure("the pod watch ended".into()))
    })
    .await;
    seen.map_err(|_| Failure(format!("job {name}'s pod not running after {LIMIT:?}")))?
}

/// The real runtime's exit status of a host program whose Pod is deleted while it runs: the
/// kubelet asks the runtime to stop the container, SIGTERM to its first process, `nsenter`,
/// which ends by it (143), and the runtime kills what is left; a trap in the host program
/// changes nothing. The kubelet rules of `nodejob-host`, which the fake and the node agent
/// follow, say the same for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_jobs_program_ends_by_sigterm() {
    check(
        async {
            let b = RealNodeBackend::new().await?;
            let run = host::run(Duration::from_secs(600));
            let term = running(&b, "term", &["stratum", &run]).await?;
            let ignoring = host::ignore_sigterm();
            let trap = running(&b, "trap", &["stratum", &run, &ignoring]).await?;
            let jobs =
                Api::<k8s_openapi::api::batch::v1::Job>::namespaced(b.admin(), &b.namespace());
            // Background propagation keeps the pod until the kubelet has stopped it, so its last
            // status can be read (kubectl's default is background too).
            let mut params = DeleteParams::background();
            params.grace_period_seconds = Some(3);
            let pods = Api::<Pod>::namespaced(b.admin(), &b.namespace());
            let mut seen = Vec::new();
            for (job, pod) in [("term", term), ("trap", trap)] {
                pods.delete(&pod, &params)
                    .await
                    .map_err(|e| Failure(format!("deleting pod: {e}")))?;
                let _ = jobs.delete(job, &DeleteParams::background()).await;
                let ended = wait_for(
                    pods.clone(),
                    &pod,
                    "its container terminated",
                    LIMIT,
                    |p: &Pod| terminated_state(p).is_some(),
                )
                .await?;
                seen.push((
                    job,
                    terminated_state(&ended).map(|t| (t.exit_code, t.reason)),
                ));
            }
            // What the kubelet rules of nodejob-host (the fake's and the node agent's) say of each:
            // the container's first process is nsenter, so a trap in the host program is moot.
            for (job, ended) in &seen {
                let host: &[&str] = if *job == "trap" {
                    &["stratum", &run, &ignoring]
                } else {
                    &["stratum", &run]
                };
                let container = nodejob_core::build(&spec(&b, job, host));
                let container = &container
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.clone())
                    .ok_or_else(|| Failure("no pod template".into()))?
                    .containers[0];
                let on_sigterm = nodejob_host::Plan::of(
                    &Pod::default(),
                    container,
                    &nodejob_host::Fallback::default(),
                    &mut NoModel,
                )
                .on_sigterm
                .unwrap_or_default();
                let grace = Duration::from_secs(3);
                let (_, rule) = nodejob_host::termination::stop(
                    grace,
                    nodejob_host::termination::KILL_DELAY,
                    on_sigterm,
                );
                ensure!(
                    ended.as_ref().map(|e| (e.0, e.1.as_deref()))
                        == Some((rule, Some(nodejob_host::status::terminated_reason(rule)))),
                    "job {job}: the real runtime ended it {ended:?}, the rules say {rule}"
                );
            }
            Ok(())
        }
        .await,
    )
}

/// A host program running when its node reboots: the pod ends Failed, its container with
/// what the kubelet records for a container it finds gone after a reboot (containerd's
/// `unknownExitCode` 255, reason `Unknown`, no message), as `nodejob_host::status` says and
/// the fake follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reboot_fails_the_running_pod() {
    check(
        async {
            let b = RealNodeBackend::new().await?;
            let run = host::run(Duration::from_secs(600));
            let pod = running(&b, "reboot", &["stratum", &run]).await?;
            b.node.power_cycle().await?;
            let state = terminated(&b, "reboot").await?;
            eprintln!("real kubelet, pod across a reboot: {state:?}");
            use nodejob_host::status::{REBOOT_EXIT, REBOOT_REASON};
            ensure!(
                (
                    state.exit_code,
                    state.reason.as_deref(),
                    state.message.as_deref()
                ) == (REBOOT_EXIT, Some(REBOOT_REASON), None),
                "the real kubelet ended it {state:?}; nodejob_host says {REBOOT_EXIT}, \
                 {REBOOT_REASON}, no message"
            );
            let pods = Api::<Pod>::namespaced(b.admin(), &b.namespace());
            let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
            let ended = wait_for(pods, &pod, "Failed", LIMIT, move |p: &Pod| {
                phase(p).as_deref() == Some("Failed")
            })
            .await?;
            ensure!(
                phase(&ended).as_deref() == Some("Failed"),
                "{:?}",
                ended.status
            );
            // What the runner reads as lost, not ended (`Error::LostInReboot`).
            ensure!(
                nodejob_core::lost_in_reboot(&ended, "host"),
                "nodejob_core::lost_in_reboot does not see it lost: {:?}",
                ended.status
            );
            Ok(())
        }
        .await,
    )
}

/// A reboot the host asks for (`stratum upgrade`: the node's PID 1 reboots it 5 s after the
/// Job exits) is a graceful node shutdown, as `systemctl reboot` on a real host: the kubelet
/// holds a delay lock of the node's logind (`e2e/node/init`); told by `PrepareForShutdown`, it
/// stops the running Pod with SIGTERM and its grace (its shell's TERM trap runs and ends it
/// with 42), says so in its own log, and releases the lock; only then does the node reboot,
/// with a new boot ID. Beside it, a power cut (`a_reboot_fails_the_running_pod`) gives no
/// grace: 255, `Unknown`. What the kubelet then posts (the Pod `Terminated`, its Node NotReady
/// "node is shutting down", a `NodeShutdown` Event) races the reboot, as on a host whose
/// shutdown goes on once the locks are released: printed, not required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reboot_the_host_asks_for_gives_the_pods_their_grace() {
    check(
        async {
            let b = RealNodeBackend::new().await?;
            let (node, ns) = (b.node(), b.namespace());
            let pods = Api::<Pod>::namespaced(b.admin(), &ns);
            let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(b.admin());
            let before = nodes
                .get(&node)
                .await
                .map_err(|e| Failure(format!("reading node {node}: {e}")))?;
            // A program that ends 42 on SIGTERM, after a second of clean-up.
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "graceful", "namespace": ns},
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{
                        "name": "app",
                        "image": job_image(),
                        "command": ["sh", "-c",
                            "trap 'echo TERM; sleep 1; exit 42' TERM; while :; do sleep 1; done"],
                    }],
                },
            }))
            .map_err(|e| Failure(e.to_string()))?;
            pods.create(&Default::default(), &pod)
                .await
                .map_err(|e| Failure(format!("creating pod graceful: {e}")))?;
            let runs = |p: &Pod| {
                (p.status.as_ref())
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|c| c.first())
                    .and_then(|c| c.state.as_ref())
                    .is_some_and(|s| s.running.is_some())
            };
            wait_for(pods.clone(), "graceful", "running", LIMIT, runs).await?;
            let history = nodejob_e2e::record(
                nodes.clone(),
                watcher::Config::default().fields(&format!("metadata.name={node}")),
            )
            .await?;
            let upgrade = spec(&b, "upgrade", &["stratum", "upgrade", "--to", "v1.38.0"]);
            let (code, log) = nodejob_core::run_exit_code_logs(&*b.api(), &upgrade).await?;
            ensure!(code == 0, "stratum upgrade exited {code}: {log}");
            let back = b.node.until_ready(Some(boot_id(&before).to_string())).await?;
            let history = history.stop();
            ensure!(
                boot_id(&back) != boot_id(&before),
                "node {node} did not reboot"
            );

            // The Pod: ended by its own TERM trap, in its grace.
            let ended = wait_for(pods, "graceful", "terminated", LIMIT, |p: &Pod| {
                terminated_state(p).is_some()
            })
            .await?;
            let state = terminated_state(&ended);
            ensure!(
                state.as_ref().map(|t| t.exit_code) == Some(42),
                "the pod was not ended by its TERM trap (42): {state:?}"
            );
            // The node's own record: the kubelet held its delay lock when the shutdown was
            // signalled, and released it; its log: it took the shutdown and killed the Pod
            // with the grace of its group (shutdownGracePeriod 10 s less 2 s for critical Pods).
            let read = |path: &str| {
                std::fs::read_to_string(b.node.dir().join(path))
                    .map_err(|e| Failure(format!("node {node}'s {path}: {e}")))
            };
            let init = read("log/init.log")?;
            let signalled = (init.lines()).find(|l| l.contains("shutdown: PrepareForShutdown"));
            ensure!(
                signalled.is_some_and(|l| l.contains("\"kubelet\"") && l.contains("\"delay\""))
                    && init.contains("shutdown: delay locks released"),
                "the kubelet held no delay lock, or did not release it: {init}"
            );
            let kubelet = read("log/kubelet.log")?;
            let killing = format!(
                "\"Shutdown manager killing pod with gracePeriod\" pod=\"{ns}/graceful\" gracePeriod=8"
            );
            ensure!(
                kubelet.contains("Shutdown manager detected new shutdown event")
                    && kubelet.contains(&killing),
                "the kubelet's log does not say it took the shutdown and killed the pod: no \
                 {killing}"
            );
            // What the kubelet posted before the power went, for the record.
            let status = ended.status.clone().unwrap_or_default();
            let shutting_down = history.iter().any(|n| {
                (n.status.as_ref().and_then(|s| s.conditions.as_ref())).is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_ == "Ready"
                            && c.message
                                .as_deref()
                                .is_some_and(|m| m.contains("node is shutting down"))
                    })
                })
            });
            eprintln!(
                "real kubelet, a pod through a graceful reboot: {state:?}; phase {:?}, reason \
                 {:?}; the Node seen NotReady \"node is shutting down\": {shutting_down}",
                status.phase, status.reason
            );
            Ok(())
        }
        .await,
    )
}

/// The Job round trip (created to exit code and log returned, `run_exit_code_logs` through
/// `nodejob-kube`) on a real node beside the node agent's, over `NODEJOB_E2E_ROUND_TRIPS` runs
/// each (default 10; the README's figures: 50), a host program that answers at once; every run
/// must answer its exit code and log. Prints p50/p99 of both and the real node's memory:
///
/// ```text
/// NODEJOB_E2E_ROUND_TRIPS=50 e2e/run -- --test real_node round_trip -- --nocapture
/// ```
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_on_a_real_node_beside_the_agent() {
    check(
        async {
            let runs: usize = std::env::var("NODEJOB_E2E_ROUND_TRIPS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(10);
            let real = RealNodeBackend::new().await?;
            let agent = nodejob_e2e::KubeBackend::new().await?;
            let answer = ["stratum".to_string(), host::run(Duration::ZERO), host::log("done"), host::exit(7)];
            let answer: Vec<&str> = answer.iter().map(String::as_str).collect();
            let mut times = [Vec::new(), Vec::new()];
            for i in 0..runs {
                let name = format!("rt-{i}");
                let on_real = spec(&real, &name, &answer);
                let mut on_agent = spec(&real, &name, &answer);
                (on_agent.namespace, on_agent.node) = (agent.namespace(), agent.node());
                for (k, (api, s)) in [(real.api(), on_real), (agent.api(), on_agent)]
                    .into_iter()
                    .enumerate()
                {
                    let start = std::time::Instant::now();
                    let (code, log) = nodejob_core::run_exit_code_logs(&*api, &s).await?;
                    times[k].push(start.elapsed());
                    ensure!((code, log.as_str()) == (7, "done\n"), "run {i}: ({code}, {log:?})");
                }
            }
            let (bytes, processes) = real.node.memory()?;
            for (k, what) in ["real node (kubelet, containerd, runc)", "node agent"].iter().enumerate() {
                let t = &mut times[k];
                t.sort();
                let at = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize];
                eprintln!(
                    "round trip on a {what}: p50 {:.2}s, p99 {:.2}s, min {:.2}s, max {:.2}s over {} runs",
                    at(0.5).as_secs_f64(),
                    at(0.99).as_secs_f64(),
                    t[0].as_secs_f64(),
                    t[t.len() - 1].as_secs_f64(),
                    t.len()
                );
            }
            eprintln!(
                "real node memory: {:.0} MiB resident in {processes} processes",
                bytes as f64 / (1024.0 * 1024.0)
            );
            Ok(())
        }
        .await,
    )
}
