//! The node Job on real nodes: a kubelet, containerd and runc (`e2e/node/node`), where the
//! privileged pod's `nsenter --target 1` reaches the node's PID 1 and execs its host binary.
//! Run by `e2e/run`.
//!
//! First the conformance scenarios that a real kubelet can stage (its exit codes, logs,
//! deadline and deletions are the runtime's own, not a model's); then what only a real node
//! shows: an argv reaching the host verbatim through runc and `nsenter`, a log cut by the
//! kubelet's `limitBytes`, the runtime's exit status of a deleted Pod, and a Pod that was
//! running across a reboot.

use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use nodejob_conformance::{Backend, Failure, ensure};
use nodejob_core::{CONTROLLER_UID_LABEL, JobApi, LOG_LIMIT_BYTES, Spec};
use nodejob_e2e::{RealNodeBackend, job_image, wait_for};
use nodejob_host::directives as host;

nodejob_conformance::conformance!(@each
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    RealNodeBackend::new().await.expect("a real node");
    exit_code_and_log_of_a_succeeded_job,
    dollars_in_the_argv_reach_the_host_as_written,
    non_zero_exit_leaves_the_job_for_inspection,
    stale_succeeded_job_is_replaced_exactly,
    stale_running_job_is_waited_for_not_killed,
    job_deleted_while_waiting_ends_the_run,
    deadline_kill_is_no_exit_status,
    timeout_leaves_the_host_operation_running,
    pod_security_refusal_fails_fast,
    logs_are_read_by_uid,
    pod_deleted_by_another_actor_is_no_exit_code,
    a_reboot_under_the_job_is_no_exit_code,
    finished_job_deleted_by_another_runner_says_so,
);

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
