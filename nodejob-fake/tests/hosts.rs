//! The host model: Jobs that exec `stratum` on the fake, played by each node's `StratumHost`
//! (upgrades that reboot the node, CA rotations), its faults, and the actor methods.

mod common;

use std::time::Duration;

use common::{JobWatch, NS, TestResult, conditions, exit_code, job};
use k8s_openapi::api::core::v1::Node;
use nodejob_core::{Change, Clock, JobApi, NodeApi};
use nodejob_fake::stratum::{CaPhase, Fault, INITIAL_CA, Operation, StratumHost};
use nodejob_fake::{DEFAULT_KUBELET_VERSION, FakeCluster, host};

const NEW_CA: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// The argv a driver sends: `nsenter … -- /usr/local/bin/stratum` and `command`'s words.
fn stratum(command: &str) -> Vec<String> {
    let nsenter = "nsenter --target 1 --mount --uts --ipc --net --pid -- /usr/local/bin/stratum";
    format!("{nsenter} {command}")
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Runs Job `name` on `node` with `argv` until it finishes; answers its pod's exit code, its
/// log, and when it finished.
async fn run(
    cluster: &FakeCluster,
    name: &str,
    node: &str,
    argv: &[String],
) -> Result<(Option<i32>, String, Duration), Box<dyn std::error::Error>> {
    let created = cluster.create_job(&job(name, node, argv)).await?;
    let mut watch = JobWatch::after(&created);
    loop {
        let job = watch.applied(cluster).await?;
        let c = conditions(&job);
        if c.iter().any(|c| c == "Complete" || c == "Failed") {
            break;
        }
    }
    let pod = (cluster.list_pods(NS, &format!("job-name={name}")).await?).remove(0);
    let pod_name = pod.metadata.name.clone().unwrap();
    let log = cluster.pod_log(NS, &pod_name, "run", 1 << 20).await?;
    Ok((exit_code(&pod), log, cluster.now()))
}

/// `(Ready, kubeletVersion, bootID)` of a node.
fn report(node: &Node) -> (bool, String, String) {
    let status = node.status.clone().unwrap_or_default();
    let ready =
        (status.conditions.iter().flatten()).any(|c| c.type_ == "Ready" && c.status == "True");
    let info = status.node_info.unwrap_or_default();
    (ready, info.kubelet_version, info.boot_id)
}

/// The node's reports from now until `until` (virtual time), each with when it was seen.
async fn reports_until(
    cluster: &FakeCluster,
    name: &str,
    until: Duration,
) -> Result<Vec<(Duration, (bool, String, String))>, Box<dyn std::error::Error>> {
    let mut since = cluster.get_node(name).await?.metadata.resource_version;
    let mut seen = Vec::new();
    while cluster.now() < until {
        let left = until - cluster.now();
        match cluster.wait_node(name, since.as_deref(), left).await? {
            Change::Applied(node) => {
                since.clone_from(&node.metadata.resource_version);
                seen.push((cluster.now(), report(&node)));
            }
            Change::Deleted(_) => return Err("node deleted".into()),
            Change::TimedOut => break,
        }
    }
    Ok(seen)
}

#[tokio::test(start_paused = true)]
async fn an_upgrade_job_succeeds_then_the_node_reboots_into_the_new_version() -> TestResult {
    let cluster = FakeCluster::with_seed(3);
    cluster.add_node("n1")?;
    let (_, _, boot) = report(&cluster.get_node("n1").await?);
    let start = cluster.now();

    let (code, log, done) = run(&cluster, "up", "n1", &stratum("upgrade --to v1.38.0")).await?;
    assert_eq!(code, Some(0));
    assert_eq!(
        log,
        "stratum: upgrading v1.37.2 -> v1.38.0\nstratum: v1.38.0 installed; rebooting in 5s\n"
    );
    // 200ms to the pod, 1s to start, 20s to upgrade, 100ms to the terminal condition.
    assert_eq!(done - start, secs(21.3));
    let (ready, version, same_boot) = report(&cluster.get_node("n1").await?);
    assert_eq!(
        (ready, version.as_str(), &same_boot),
        (true, DEFAULT_KUBELET_VERSION, &boot)
    );

    // Exit at 21.2s; down 5s later; back 30s after that, booted anew at the new version.
    let seen = reports_until(&cluster, "n1", start + secs(120.0)).await?;
    let (when, reports): (Vec<_>, Vec<_>) = seen.into_iter().unzip();
    assert_eq!(
        when,
        [start + secs(26.2), start + secs(56.2), start + secs(56.2)]
    );
    let new_boot = reports[1].2.clone();
    assert_ne!(new_boot, boot);
    assert_eq!(
        reports,
        [
            (false, DEFAULT_KUBELET_VERSION.to_string(), boot.clone()),
            (false, "v1.38.0".to_string(), new_boot.clone()),
            (true, "v1.38.0".to_string(), new_boot.clone()),
        ]
    );
    let state = cluster.host_state("n1").unwrap();
    assert_eq!(
        (state.version.as_str(), &state.boot_id),
        ("v1.38.0", &new_boot)
    );
    assert_eq!(state.executions(Operation::Upgrade), 1);

    // Again: at the version already, nothing to do, no reboot.
    let (code, log, _) = run(&cluster, "again", "n1", &stratum("upgrade --to=1.38.0")).await?;
    assert_eq!(
        (code, log.as_str()),
        (Some(0), "stratum: already at 1.38.0\n")
    );
    let later = cluster.now() + secs(120.0);
    assert_eq!(reports_until(&cluster, "n1", later).await?, []);
    assert_eq!(
        cluster
            .host_state("n1")
            .unwrap()
            .executions(Operation::Upgrade),
        2
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_ca_rotation_through_jobs_and_its_status_in_their_logs() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let status = |log: String| -> Result<serde_json::Value, serde_json::Error> {
        assert_eq!(log.lines().count(), 1, "{log}");
        serde_json::from_str(&log)
    };

    let (code, log, _) = run(&cluster, "status-0", "n1", &stratum("carotate status")).await?;
    assert_eq!(code, Some(0));
    assert_eq!(
        status(log)?,
        serde_json::json!({"phase": "idle", "trusted": [INITIAL_CA], "issuer": INITIAL_CA})
    );

    let stage = stratum(&format!("carotate stage --add {NEW_CA}"));
    assert_eq!(run(&cluster, "stage", "n1", &stage).await?.0, Some(0));
    let issue = stratum(&format!("carotate issue --ca {NEW_CA}"));
    let (code, _, done) = run(&cluster, "issue", "n1", &issue).await?;
    assert_eq!(code, Some(0));
    // The components restart: down 1s after the exit, up 5s later; no new boot.
    let (_, _, boot) = report(&cluster.get_node("n1").await?);
    let seen = reports_until(&cluster, "n1", done + secs(30.0)).await?;
    let seen: Vec<_> = seen
        .into_iter()
        .map(|(at, (ready, _, b))| (at, ready, b == boot))
        .collect();
    assert_eq!(
        seen,
        [
            (done + secs(0.9), false, true),
            (done + secs(5.9), true, true)
        ]
    );

    let (_, log, _) = run(&cluster, "status-1", "n1", &stratum("carotate status")).await?;
    assert_eq!(
        status(log)?,
        serde_json::json!({"phase": "issued", "trusted": [INITIAL_CA, NEW_CA], "issuer": NEW_CA})
    );
    let verify = stratum(&format!("carotate verify --expect {NEW_CA}"));
    let (code, log, _) = run(&cluster, "verify-0", "n1", &verify).await?;
    assert_eq!(code, Some(3), "not yet: {log}");

    let finalize = stratum(&format!("carotate finalize --keep {NEW_CA}"));
    assert_eq!(run(&cluster, "finalize", "n1", &finalize).await?.0, Some(0));
    let (code, _, _) = run(&cluster, "verify-1", "n1", &verify).await?;
    assert_eq!(code, Some(0));
    let (_, log, _) = run(&cluster, "status-2", "n1", &stratum("carotate status")).await?;
    assert_eq!(status(log)?["phase"], "finalized");

    let state = cluster.host_state("n1").unwrap();
    assert_eq!(state.phase, CaPhase::Finalized);
    assert_eq!(state.trusted.iter().collect::<Vec<_>>(), [NEW_CA]);
    let ran: Vec<_> = state.executions.into_iter().collect();
    assert_eq!(
        ran,
        [
            (Operation::CaStage, 1),
            (Operation::CaIssue, 1),
            (Operation::CaFinalize, 1),
            (Operation::CaStatus, 3),
            (Operation::CaVerify, 2),
        ],
        "no phase ran twice"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn faults_of_the_host() -> TestResult {
    let cluster = FakeCluster::new();
    for node in ["fails", "old", "down"] {
        cluster.add_node(node)?;
    }
    let fault = |node: &str, fault: Fault| -> TestResult {
        let host = cluster.host(node).ok_or("no host")?.with_fault(fault);
        cluster.set_host(node, host)?;
        Ok(())
    };
    fault("fails", Fault::UpgradeFails)?;
    fault("old", Fault::BootsOldVersion)?;
    fault("down", Fault::StaysDown)?;
    let upgrade = stratum("upgrade --to v1.38.0");

    let (code, log, done) = run(&cluster, "fails", "fails", &upgrade).await?;
    assert_eq!(code, Some(1));
    assert!(log.contains("upgrade to v1.38.0 failed"), "{log}");
    assert_eq!(
        reports_until(&cluster, "fails", done + secs(600.0)).await?,
        []
    );

    let (_, _, boot) = report(&cluster.get_node("old").await?);
    let (code, _, done) = run(&cluster, "old", "old", &upgrade).await?;
    assert_eq!(code, Some(0));
    let seen = reports_until(&cluster, "old", done + secs(600.0)).await?;
    let (ready, version, new_boot) = seen.last().map(|(_, r)| r.clone()).unwrap();
    assert!(ready && new_boot != boot);
    assert_eq!(version, DEFAULT_KUBELET_VERSION, "back at the old version");

    let (code, _, done) = run(&cluster, "down", "down", &upgrade).await?;
    assert_eq!(code, Some(0));
    let seen = reports_until(&cluster, "down", done + secs(3600.0)).await?;
    let seen: Vec<bool> = seen.into_iter().map(|(_, (ready, _, _))| ready).collect();
    assert_eq!(seen, [false], "down, and never back");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn directives_script_a_stratum_argv_by_hand() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let mut argv = stratum("upgrade --to v1.38.0");
    argv.extend([host::log("scripted"), host::exit(0)]);
    let (code, log, done) = run(&cluster, "scripted", "n1", &argv).await?;
    assert_eq!((code, log.as_str()), (Some(0), "scripted\n"));
    assert_eq!(reports_until(&cluster, "n1", done + secs(600.0)).await?, []);
    let state = cluster.host_state("n1").unwrap();
    assert_eq!(state.executions(Operation::Upgrade), 0, "not the model's");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_killed_upgrade_does_not_reboot() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster
        .create_job(&job("up", "n1", &stratum("upgrade --to v1.38.0")))
        .await?;
    tokio::time::sleep(secs(5.0)).await;
    cluster.delete_job_now(NS, "up")?;
    let seen = reports_until(&cluster, "n1", cluster.now() + secs(600.0)).await?;
    assert_eq!(seen, []);
    let state = cluster.host_state("n1").unwrap();
    assert_eq!(
        (state.version.as_str(), state.executions(Operation::Upgrade)),
        (DEFAULT_KUBELET_VERSION, 1)
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_host_and_the_node_agree() -> TestResult {
    let cluster = FakeCluster::new();
    let node = cluster.add_node("n1")?;
    let (_, version, boot) = report(&node);
    let state = cluster.host_state("n1").unwrap();
    assert_eq!((&state.version, &state.boot_id), (&version, &boot));
    assert_eq!(state.issuer, INITIAL_CA);

    let node = cluster.set_kubelet_version("n1", "v1.39.0")?;
    assert_eq!(report(&node).1, "v1.39.0");
    assert_eq!(cluster.host_state("n1").unwrap().version, "v1.39.0");
    let node = cluster.reboot_node("n1")?;
    assert_eq!(cluster.host_state("n1").unwrap().boot_id, report(&node).2);

    let mut host = StratumHost::new("v1.40.1", "boot-x");
    host.state.trusted.insert(NEW_CA.into());
    let node = cluster.set_host("n1", host.clone())?;
    assert_eq!(report(&node), (true, "v1.40.1".into(), "boot-x".into()));
    assert_eq!(cluster.host("n1"), Some(host));

    assert!(cluster.set_host("n9", StratumHost::new("v1", "b")).is_err());
    assert_eq!(cluster.host_state("n9"), None);
    cluster.remove_node("n1")?;
    assert_eq!(cluster.host("n1"), None);
    Ok(())
}
