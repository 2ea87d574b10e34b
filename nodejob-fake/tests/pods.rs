//! `PodApi` reads and watches; Pods created and deleted as an administrator would, with
//! graceful termination; PodSecurity admission per namespace.

mod common;

use std::time::Duration;

use common::{
    JobWatch, NS, TestResult, bare_pod, conditions, exit_code, job, node_of, phase, ready,
};
use k8s_openapi::api::core::v1::{Pod, SecurityContext};
use nodejob_core::{Change, ErrorKind, JobApi, PodApi};
use nodejob_fake::{Clock, FakeCluster, NodeScript, OnSigterm, host, labels};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Every change of pod `name` after `since` until it is deleted: `(virtual time, phase, Ready,
/// being deleted)`, then `None` for the deletion.
async fn follow(
    cluster: &FakeCluster,
    name: &str,
    mut since: String,
) -> Result<Vec<(Duration, Option<(String, bool, bool)>)>, Box<dyn std::error::Error>> {
    let mut seen = Vec::new();
    loop {
        match cluster
            .wait_pod(NS, name, Some(&since), Duration::from_secs(3600))
            .await?
        {
            Change::Applied(pod) => {
                since = pod.metadata.resource_version.clone().unwrap();
                let deleting = pod.metadata.deletion_timestamp.is_some();
                let ready = ready(&pod) || (deleting && pod_ready_condition(&pod));
                seen.push((cluster.now(), Some((phase(&pod), ready, deleting))));
            }
            Change::Deleted(_) => {
                seen.push((cluster.now(), None));
                return Ok(seen);
            }
            Change::TimedOut => return Err("timed out".into()),
        }
    }
}

fn pod_ready_condition(pod: &Pod) -> bool {
    (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn state(phase: &str, ready: bool, deleting: bool) -> Option<(String, bool, bool)> {
    Some((phase.to_string(), ready, deleting))
}

#[tokio::test(start_paused = true)]
async fn a_bare_pod_runs_until_deleted_and_ends_on_sigterm() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let created = cluster.create_pod_now(&bare_pod("web", "n1", 5))?;
    assert_eq!(phase(&created), "Pending");
    cluster.schedule(secs(60.0), |c| c.delete_pod_now(NS, "web").unwrap());
    let seen = follow(&cluster, "web", created.metadata.resource_version.unwrap()).await?;
    assert_eq!(
        seen,
        [
            (secs(1.0), state("Running", true, false)),
            (secs(60.0), state("Running", true, true)),
            (secs(60.5), state("Failed", false, true)),
            (secs(60.6), None),
        ],
        "it runs until deleted, then ends on SIGTERM (kill delay) and goes (cleanup)"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_pod_that_ignores_sigterm_runs_out_its_grace_period() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.add_node("n2")?;
    cluster.set_script(
        "n2",
        NodeScript {
            on_sigterm: OnSigterm::Ignore,
            ..NodeScript::default()
        },
    );
    // By the argv's directive on n1, by the node's script on n2.
    let mut by_argv = bare_pod("argv", "n1", 7);
    by_argv.spec.as_mut().unwrap().containers[0].command =
        Some(vec!["sleep".into(), host::ignore_sigterm()]);
    cluster.create_pod_now(&by_argv)?;
    cluster.create_pod_now(&bare_pod("script", "n2", 7))?;
    cluster.sleep(secs(2.0)).await;
    cluster.delete_pod_now(NS, "argv")?;
    cluster.delete_pod_now(NS, "script")?;
    let deleting = cluster.pod(NS, "argv").unwrap();
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(7));
    assert_eq!(
        deleting.metadata.deletion_timestamp.unwrap().0.to_string(),
        "2026-01-01T00:00:09Z",
        "the deletion time plus the grace period"
    );
    cluster.sleep(secs(6.9)).await;
    for name in ["argv", "script"] {
        let pod = cluster.pod(NS, name).unwrap();
        assert_eq!(phase(&pod), "Running", "{name} still runs at 8.9s");
    }
    cluster.sleep(secs(0.15)).await;
    for name in ["argv", "script"] {
        let pod = cluster.pod(NS, name).unwrap();
        assert_eq!(
            (phase(&pod).as_str(), exit_code(&pod)),
            ("Failed", Some(137)),
            "{name}"
        );
    }
    cluster.sleep(secs(0.1)).await;
    assert!(cluster.pods(NS).is_empty());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn reads_of_pods_by_node_and_name() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_namespace("other");
    cluster.add_node("n1")?;
    cluster.add_node("n2")?;
    let mut elsewhere = bare_pod("b", "n1", 5);
    elsewhere.metadata.namespace = Some("other".into());
    cluster.create_pod_now(&bare_pod("c", "n1", 5))?;
    cluster.create_pod_now(&elsewhere)?;
    cluster.create_pod_now(&bare_pod("a", "n1", 5))?;
    cluster.create_pod_now(&bare_pod("d", "n2", 5))?;
    let on_n1: Vec<(String, String)> = (cluster.list_node_pods("n1").await?.into_iter())
        .map(|p| (p.metadata.namespace.unwrap(), p.metadata.name.unwrap()))
        .collect();
    let want =
        [("default", "a"), ("default", "c"), ("other", "b")].map(|(n, p)| (n.into(), p.into()));
    assert_eq!(on_n1, want, "every namespace, in (namespace, name) order");
    assert!(cluster.list_node_pods("n9").await?.is_empty());

    let pod = cluster.get_pod(NS, "d").await?;
    assert_eq!(node_of(&pod), "n2");
    let err = cluster.get_pod(NS, "zz").await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::NotFound, r#"pods "zz" not found"#)
    );
    let change = cluster.wait_pod(NS, "zz", None, secs(1.0)).await?;
    assert_eq!(change, Change::TimedOut);
    let current = cluster.wait_pod(NS, "d", Some("0"), secs(1.0)).await?;
    assert_eq!(current, Change::Applied(pod));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn pod_creation_is_validated_and_admitted_per_namespace() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.create_pod_now(&bare_pod("a", "n1", 5))?;
    let err = cluster.create_pod_now(&bare_pod("a", "n1", 5)).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::AlreadyExists, r#"pods "a" already exists"#)
    );
    let err = cluster.create_pod_now(&bare_pod("A", "n1", 5)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    let mut elsewhere = bare_pod("b", "n1", 5);
    elsewhere.metadata.namespace = Some("nope".into());
    let err = cluster.create_pod_now(&elsewhere).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::NotFound, r#"namespaces "nope" not found"#)
    );

    let mut privileged = bare_pod("p", "n1", 5);
    let spec = privileged.spec.as_mut().unwrap();
    spec.host_pid = Some(true);
    spec.host_network = Some(true);
    spec.containers[0].security_context = Some(SecurityContext {
        privileged: Some(true),
        ..SecurityContext::default()
    });
    cluster.label_namespace(NS, labels::POD_SECURITY_ENFORCE, "baseline")?;
    let err = cluster.create_pod_now(&privileged).unwrap_err();
    assert_eq!((err.kind, err.code), (ErrorKind::Forbidden, 403));
    assert_eq!(
        err.message,
        r#"pods "p" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true), privileged (container "app" must not set securityContext.privileged=true)"#
    );
    cluster.create_pod_now(&bare_pod("plain", "n1", 5))?;
    cluster.label_namespace(NS, labels::POD_SECURITY_ENFORCE, "privileged")?;
    cluster.create_pod_now(&privileged)?;
    let labels = cluster.namespace(NS).unwrap().metadata.labels.unwrap();
    assert_eq!(
        labels
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some(NS)
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_job_in_a_restricted_namespace_records_failed_create() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    cluster.label_namespace(NS, labels::POD_SECURITY_ENFORCE, "restricted")?;
    cluster.label_namespace(NS, labels::POD_SECURITY_ENFORCE_VERSION, "v1.36")?;
    let mut privileged = job("a", "n1", &[]);
    let pod = privileged
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap();
    pod.host_pid = Some(true);
    pod.containers[0].security_context = Some(SecurityContext {
        privileged: Some(true),
        ..SecurityContext::default()
    });
    let created = cluster.create_job(&privileged).await?;
    cluster.sleep(secs(1.0)).await;
    let events = cluster.list_events(NS, &common::uid(&created)).await?;
    assert_eq!(events.len(), 1);
    let message = events[0].message.clone().unwrap();
    let pod_name = message.split('"').nth(1).unwrap();
    assert_eq!(events[0].reason.as_deref(), Some("FailedCreate"));
    assert_eq!(
        message,
        format!(
            concat!(
                r#"Error creating: pods "{}" is forbidden: violates PodSecurity "restricted:v1.36": "#,
                r#"host namespaces (hostNetwork=true, hostPID=true), "#,
                r#"privileged (container "run" must not set securityContext.privileged=true), "#,
                r#"allowPrivilegeEscalation != false (container "run" must set securityContext.allowPrivilegeEscalation=false), "#,
                r#"unrestricted capabilities (container "run" must set securityContext.capabilities.drop=["ALL"]), "#,
                r#"runAsNonRoot != true (pod or container "run" must set securityContext.runAsNonRoot=true), "#,
                r#"seccompProfile (pod or container "run" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
            ),
            pod_name
        )
    );
    assert!(cluster.pods(NS).is_empty());
    // Once the namespace admits it, the controller's next retry creates the pod.
    cluster.unlabel_namespace(NS, labels::POD_SECURITY_ENFORCE)?;
    cluster.sleep(secs(10.0)).await;
    assert_eq!(cluster.pods(NS).len(), 1);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn deleting_a_jobs_pod_fails_the_job() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let argv = [host::run(Duration::from_secs(600))];
    let created = cluster.create_job(&job("a", "n1", &argv)).await?;
    cluster.sleep(secs(3.0)).await;
    let pod = cluster.pods(NS).remove(0);
    let mut watch = JobWatch::after(&cluster.get_job(NS, "a").await?);
    cluster.delete_pod_now(NS, pod.metadata.name.as_deref().unwrap())?;
    let failing = watch.applied(&cluster).await?;
    assert_eq!(conditions(&failing), ["FailureTarget"]);
    let status = failing.status.clone().unwrap();
    assert_eq!((status.failed, status.terminating), (Some(1), Some(1)));
    let reason = status.conditions.unwrap()[0].reason.clone();
    assert_eq!(reason.as_deref(), Some("BackoffLimitExceeded"));
    let failed = loop {
        let job = watch.applied(&cluster).await?;
        if conditions(&job).contains(&"Failed".to_string()) {
            break job;
        }
    };
    assert_eq!(common::uid(&failed), common::uid(&created));
    assert_eq!(
        cluster.now(),
        secs(3.6),
        "SIGTERM 0.5s, the pod gone 0.1s later, then Failed"
    );
    assert!(cluster.pods(NS).is_empty());
    let err = cluster.delete_pod_now(NS, "gone").unwrap_err();
    assert!(err.is_not_found());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn mirror_and_empty_dir_pods_are_stored_as_given_and_run() -> TestResult {
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume};
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let mut mirror = bare_pod("static-web", "n1", 30);
    mirror.metadata.annotations = Some(
        [(
            "kubernetes.io/config.mirror".to_string(),
            "hash".to_string(),
        )]
        .into(),
    );
    let mut scratch = bare_pod("scratch", "n1", 30);
    scratch.spec.as_mut().unwrap().volumes = Some(vec![Volume {
        name: "tmp".into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }]);
    cluster.create_pod_now(&mirror)?;
    cluster.create_pod_now(&scratch)?;
    cluster.sleep(secs(1.5)).await;
    let mirror = cluster.get_pod(NS, "static-web").await?;
    assert!(ready(&mirror));
    let annotations = mirror.metadata.annotations.unwrap();
    assert_eq!(
        annotations
            .get("kubernetes.io/config.mirror")
            .map(String::as_str),
        Some("hash")
    );
    let scratch = cluster.get_pod(NS, "scratch").await?;
    assert!(ready(&scratch));
    assert!(
        scratch.spec.unwrap().volumes.unwrap()[0]
            .empty_dir
            .is_some()
    );
    assert!(
        mirror.metadata.owner_references.is_none(),
        "no controller replaces them"
    );
    Ok(())
}

/// A node that reboots while a Job's program runs: the pod ends `Failed`, its container
/// terminated with 255, reason `Unknown`, no message, as a real kubelet reports it (seen on a
/// real node, `nodejob-e2e/tests/real_node.rs`); the program's own end never comes. A
/// Deployment's pod (`restartPolicy: Always`) is not ended by it.
#[tokio::test(start_paused = true)]
async fn a_reboot_ends_a_running_jobs_pod_as_lost() -> TestResult {
    let cluster = FakeCluster::new();
    cluster.add_node("n1")?;
    let argv = [host::run(Duration::from_secs(600)), host::log("never")];
    cluster.create_job(&job("a", "n1", &argv)).await?;
    let mut web = bare_pod("web", "n1", 5);
    web.spec.as_mut().unwrap().restart_policy = Some("Always".into());
    cluster.create_pod_now(&web)?;
    cluster.sleep(secs(3.0)).await;
    let of_job = |p: &Pod| p.metadata.name.as_deref() != Some("web");
    let running = cluster.pods(NS);
    assert!(running.iter().all(|p| phase(p) == "Running"), "{running:?}");
    cluster.reboot_node("n1")?;
    let (mut ours, others): (Vec<Pod>, Vec<Pod>) = cluster.pods(NS).into_iter().partition(of_job);
    assert_eq!(phase(&others[0]), "Running", "{others:?}");
    let pod = ours.remove(0);
    assert_eq!(phase(&pod), "Failed");
    // What the runner reads as a container lost, not ended: no answer.
    let container = &pod.spec.as_ref().unwrap().containers[0].name;
    assert!(nodejob_core::lost_in_reboot(&pod, container), "{pod:?}");
    let statuses = pod.status.and_then(|s| s.container_statuses).unwrap();
    let ended = statuses[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .unwrap();
    assert_eq!(
        (ended.exit_code, ended.reason.as_deref(), ended.message),
        (255, Some("Unknown"), None)
    );
    cluster.sleep(secs(700.0)).await;
    let after: Vec<Pod> = cluster.pods(NS).into_iter().filter(of_job).collect();
    assert!(after.iter().all(|p| exit_code(p) == Some(255)), "{after:?}");
    Ok(())
}
