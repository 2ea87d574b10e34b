//! `build`: every field of the Job, and why it matters, asserted on the struct.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_core::{IMAGE, NODE_ANNOTATION, Spec, build, job_node, node_label_value};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const LABEL_KEY: &str = "stratum.ciq.com/upgrade";

fn spec() -> Spec {
    Spec {
        namespace: "kube-system".into(),
        name: "upgrade-worker-1".into(),
        node: "worker-1".into(),
        label_key: LABEL_KEY.into(),
        container: "upgrade".into(),
        argv: vec![
            "nsenter".into(),
            "--target".into(),
            "1".into(),
            "--mount".into(),
            "--".into(),
            "/usr/bin/stratum".into(),
            "upgrade".into(),
        ],
        active_deadline: Duration::from_secs(600),
        poll_attempts: 120,
        kind: "per-node upgrade".into(),
        ..Spec::default()
    }
}

fn job_spec(job: &Job) -> Result<&JobSpec, &'static str> {
    job.spec.as_ref().ok_or("job has no spec")
}

fn pod_meta(job: &Job) -> Result<&ObjectMeta, &'static str> {
    job_spec(job)?
        .template
        .metadata
        .as_ref()
        .ok_or("pod template has no metadata")
}

fn pod_spec(job: &Job) -> Result<&PodSpec, &'static str> {
    job_spec(job)?
        .template
        .spec
        .as_ref()
        .ok_or("pod template has no spec")
}

fn container(job: &Job) -> Result<&Container, &'static str> {
    match pod_spec(job)?.containers.as_slice() {
        [c] => Ok(c),
        _ => Err("the pod must have exactly one container"),
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn job_metadata_names_the_job_and_its_node() -> TestResult {
    let job = build(&spec());
    let meta = &job.metadata;
    assert_eq!(meta.name.as_deref(), Some("upgrade-worker-1"));
    assert_eq!(meta.namespace.as_deref(), Some("kube-system"));
    assert_eq!(meta.labels, Some(map(&[(LABEL_KEY, "worker-1")])));
    assert_eq!(
        meta.annotations,
        Some(map(&[(NODE_ANNOTATION, "worker-1")]))
    );
    assert!(job.status.is_none());
    Ok(())
}

#[test]
fn job_spec_runs_the_pod_once_within_the_deadline() -> TestResult {
    let job = build(&spec());
    let js = job_spec(&job)?;
    assert_eq!(
        js.backoff_limit,
        Some(0),
        "a host operation is never retried"
    );
    assert_eq!(js.pod_replacement_policy.as_deref(), Some("Failed"));
    assert_eq!(js.active_deadline_seconds, Some(600));
    Ok(())
}

#[test]
fn active_deadline_rounds_up_to_whole_seconds() {
    let cases = [
        (Duration::from_nanos(1), 1),
        (Duration::from_millis(999), 1),
        (Duration::from_secs(1), 1),
        (Duration::from_millis(1001), 2),
        (Duration::from_secs(3600), 3600),
        (Duration::new(59, 1), 60),
        (Duration::MAX, i64::MAX),
    ];
    for (deadline, want) in cases {
        let job = build(&Spec {
            active_deadline: deadline,
            ..spec()
        });
        let got = job.spec.and_then(|s| s.active_deadline_seconds);
        assert_eq!(got, Some(want), "{deadline:?}");
    }
}

#[test]
fn pod_carries_the_same_label_and_annotation() -> TestResult {
    let job = build(&spec());
    let meta = pod_meta(&job)?;
    assert_eq!(meta.labels, job.metadata.labels);
    assert_eq!(meta.annotations, job.metadata.annotations);
    assert!(meta.name.is_none() && meta.namespace.is_none());
    Ok(())
}

#[test]
fn pod_is_pinned_privileged_and_tolerates_everything() -> TestResult {
    let job = build(&spec());
    let pod = pod_spec(&job)?;
    assert_eq!(
        pod.node_name.as_deref(),
        Some("worker-1"),
        "bound without the scheduler"
    );
    assert!(pod.scheduler_name.is_none() && pod.node_selector.is_none() && pod.affinity.is_none());
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod.host_pid, Some(true));
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(pod.enable_service_links, Some(false));
    let tolerations = pod.tolerations.as_deref().ok_or("no tolerations")?;
    assert_eq!(tolerations.len(), 1);
    let t = &tolerations[0];
    assert_eq!(t.operator.as_deref(), Some("Exists"));
    assert!(
        t.key.is_none() && t.effect.is_none() && t.value.is_none(),
        "tolerates every taint"
    );
    assert!(
        t.toleration_seconds.is_none(),
        "never evicted by a NoExecute taint"
    );
    assert!(pod.init_containers.is_none());
    Ok(())
}

#[test]
fn container_execs_argv_privileged_with_the_default_image() -> TestResult {
    let s = spec();
    let job = build(&s);
    let c = container(&job)?;
    assert_eq!(c.name, "upgrade");
    assert_eq!(c.image.as_deref(), Some(IMAGE));
    assert_eq!(c.command.as_ref(), Some(&s.argv));
    assert!(c.args.is_none());
    let sc = c.security_context.as_ref().ok_or("no security context")?;
    assert_eq!(sc.privileged, Some(true));
    assert_eq!(
        c.termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );
    Ok(())
}

#[test]
fn container_uses_the_spec_image_when_given() -> TestResult {
    let image = format!("registry.example/tools@sha256:{}", "0".repeat(64));
    let job = build(&Spec {
        image: Some(image.clone()),
        ..spec()
    });
    assert_eq!(container(&job)?.image.as_deref(), Some(image.as_str()));
    Ok(())
}

#[test]
fn critical_toggles_the_priority_class() -> TestResult {
    let plain = build(&Spec {
        critical: false,
        ..spec()
    });
    assert_eq!(pod_spec(&plain)?.priority_class_name, None);
    let critical = build(&Spec {
        critical: true,
        ..spec()
    });
    assert_eq!(
        pod_spec(&critical)?.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    // Nothing else changes.
    let mut critical_pod = pod_spec(&critical)?.clone();
    critical_pod.priority_class_name = None;
    assert_eq!(&critical_pod, pod_spec(&plain)?);
    Ok(())
}

#[test]
fn argv_with_shell_metacharacters_lands_verbatim_in_command() -> TestResult {
    let argv: Vec<String> = [
        "nsenter",
        "-t",
        "1",
        "-m",
        "--",
        "/usr/bin/stratum",
        "--message=$(reboot); rm -rf / && echo `id` | tee >/dev/null",
        "'quoted' \"double\" \\back * ? ~ #",
        "",
        "line\nbreak",
    ]
    .map(String::from)
    .to_vec();
    let job = build(&Spec {
        argv: argv.clone(),
        ..spec()
    });
    let c = container(&job)?;
    // Every `$` doubled: the kubelet turns `$$` back into `$` and leaves nothing to expand
    // (`$(reboot)` would otherwise be a variable reference), so the process gets `argv`.
    let mut escaped = argv.clone();
    escaped[6] = "--message=$$(reboot); rm -rf / && echo `id` | tee >/dev/null".into();
    assert_eq!(c.command.as_ref(), Some(&escaped));
    assert!(
        c.args.is_none(),
        "no args: nothing is appended to the command"
    );
    assert!(
        c.command
            .iter()
            .flatten()
            .all(|a| a != "/bin/sh" && a != "-c"),
        "no shell"
    );
    Ok(())
}

#[test]
fn long_node_gets_a_hashed_label_and_the_verbatim_annotation() -> TestResult {
    let node = [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61),
    ]
    .join(".");
    assert_eq!(node.len(), 253);
    let job = build(&Spec {
        node: node.clone(),
        ..spec()
    });

    let value = node_label_value(&node);
    assert_ne!(value, node);
    assert!(value.len() <= 63);
    assert!(value.starts_with(|c: char| c.is_ascii_alphanumeric()));
    assert!(value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    assert!(
        value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    );

    for meta in [&job.metadata, pod_meta(&job)?] {
        assert_eq!(meta.labels, Some(map(&[(LABEL_KEY, &value)])));
        assert_eq!(meta.annotations, Some(map(&[(NODE_ANNOTATION, &node)])));
    }
    assert_eq!(pod_spec(&job)?.node_name.as_deref(), Some(node.as_str()));
    assert_eq!(job_node(&job, LABEL_KEY), Some(node.as_str()));
    Ok(())
}

#[test]
fn build_is_deterministic() {
    assert_eq!(build(&spec()), build(&spec()));
}
