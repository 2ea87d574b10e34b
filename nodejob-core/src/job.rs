//! [`build`]: the Job object for a [`Spec`].

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, PodSpec, PodTemplateSpec, SecurityContext, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::Spec;
use crate::names::node_label_value;

/// The annotation that carries the target node's name verbatim.
///
/// The label cannot: a node name is a DNS subdomain and may be 253 characters, while a label
/// value may be 63. [`build`] therefore puts [`crate::node_label_value`] in the label and the
/// full name here, where there is no limit.
pub const NODE_ANNOTATION: &str = "stratum.ciq.com/node";

/// The label the Job controller puts on a Job's pods, with the Job's UID as value.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// Renders the Job object for `spec`. Pure, so the pod spec is testable without a cluster.
///
/// The Job runs one privileged pod on `spec.node` that executes `spec.argv` once:
///
/// - the Job and its pod carry the `spec.label_key` label with [`node_label_value`] of the
///   node, so a selector finds every Job for a node, and [`NODE_ANNOTATION`] with the node
///   verbatim, so [`crate::job_node`] can name it whatever its length;
/// - `backoffLimit: 0`: a host operation is never retried behind the caller's back;
/// - `podReplacementPolicy: Failed`: no replacement pod, and so no second host exec, while the
///   first pod is still terminating;
/// - `activeDeadlineSeconds`: `spec.active_deadline` rounded up to whole seconds, so the
///   deadline is never shorter than asked;
/// - `nodeName`: bound to the node directly, bypassing the scheduler, which would refuse a
///   cordoned node;
/// - `restartPolicy: Never`: a failed exec fails the pod instead of re-running in place;
/// - `hostPID` and `hostNetwork`: `nsenter` reaches PID 1's namespaces, and the pod needs no
///   pod network (which may be what is being upgraded);
/// - `dnsPolicy: ClusterFirstWithHostNet`: cluster DNS still resolves on the host network;
/// - `automountServiceAccountToken: false` and `enableServiceLinks: false`: a privileged host
///   process gets no API credentials and no service environment it does not need;
/// - tolerations `[{operator: Exists}]`: it must run on a cordoned, tainted or NotReady node;
/// - `priorityClassName: system-node-critical` exactly when `spec.critical`, so the kubelet
///   admits it under node pressure (see [`Spec::critical`]);
/// - one container, `spec.container`, whose `command` is `spec.argv` with no `args` and no
///   shell, so no interpreter re-parses a caller's value, and every `$` doubled: the kubelet
///   expands `$(NAME)` in a command and turns `$$` into `$` (`ExpandContainerCommandAndArgs`,
///   `pkg/kubelet/container/helpers.go`), so only the doubled text reaches the process
///   verbatim (seen on a real node: `nodejob-e2e/tests/real_node.rs`); `privileged`, for
///   `nsenter`;
///   `terminationMessagePolicy: FallbackToLogsOnError`, so a failure's message carries the tail
///   of its output; image [`Spec::image`], pinned by digest.
pub fn build(spec: &Spec) -> Job {
    let labels = BTreeMap::from([(spec.label_key.clone(), node_label_value(&spec.node))]);
    let annotations = BTreeMap::from([(NODE_ANNOTATION.to_owned(), spec.node.clone())]);

    let container = Container {
        name: spec.container.clone(),
        image: Some(spec.image().to_owned()),
        command: Some(spec.argv.iter().map(|a| escape_dollars(a)).collect()),
        args: None,
        security_context: Some(SecurityContext {
            privileged: Some(true),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Container::default()
    };

    let pod = PodSpec {
        node_name: Some(spec.node.clone()),
        restart_policy: Some("Never".to_owned()),
        host_pid: Some(true),
        host_network: Some(true),
        dns_policy: Some("ClusterFirstWithHostNet".to_owned()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        tolerations: Some(vec![Toleration {
            operator: Some("Exists".to_owned()),
            ..Toleration::default()
        }]),
        priority_class_name: spec.critical.then(|| "system-node-critical".to_owned()),
        containers: vec![container],
        ..PodSpec::default()
    };

    Job {
        metadata: ObjectMeta {
            name: Some(spec.name.clone()),
            namespace: Some(spec.namespace.clone()),
            labels: Some(labels.clone()),
            annotations: Some(annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            pod_replacement_policy: Some("Failed".to_owned()),
            active_deadline_seconds: Some(deadline_seconds(spec.active_deadline)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// `element` with every `$` doubled, so that the kubelet's expansion of a container's command
/// (`$$` to `$`, `$(NAME)` to a variable's value) hands it back unchanged.
fn escape_dollars(element: &str) -> String {
    element.replace('$', "$$")
}

/// `deadline` in whole seconds, rounded up, saturating at `i64::MAX`.
fn deadline_seconds(deadline: std::time::Duration) -> i64 {
    let secs = deadline
        .as_secs()
        .saturating_add(u64::from(deadline.subsec_nanos() > 0));
    i64::try_from(secs).unwrap_or(i64::MAX)
}

/// Whether `job` does exactly the work `desired` (what [`build`] renders) asks for, on the same
/// node: the same node annotation, `nodeName`, and containers (name, image, command). This is
/// the test that lets a run adopt a Job whose create answer it lost.
pub(crate) fn same_work(job: &Job, desired: &Job) -> bool {
    let node = |j: &Job| {
        j.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODE_ANNOTATION))
            .cloned()
    };
    let pod = |j: &Job| {
        j.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|p| {
                (
                    p.node_name.clone(),
                    p.containers
                        .iter()
                        .map(|c| (c.name.clone(), c.image.clone(), c.command.clone()))
                        .collect::<Vec<_>>(),
                )
            })
    };
    node(job) == node(desired) && pod(job).is_some() && pod(job) == pod(desired)
}
