//! Jobs for the tests, built by hand with k8s-openapi types (core's `build` is not used, so
//! these tests prove the fake alone).

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

pub const NS: &str = "default";

/// A one-pod, node-pinned Job like the runner's: backoffLimit 0, restartPolicy Never,
/// hostNetwork, container `run` with `argv` as its command.
pub fn job(name: &str, node: &str, argv: &[String]) -> Job {
    let labels = BTreeMap::from([("app".to_string(), "nodejob-test".to_string())]);
    Job {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NS.to_string()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    node_name: Some(node.to_string()),
                    restart_policy: Some("Never".to_string()),
                    host_network: Some(true),
                    containers: vec![Container {
                        name: "run".to_string(),
                        image: Some("alpine".to_string()),
                        command: Some(argv.to_vec()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// The same Job with `activeDeadlineSeconds`.
pub fn job_with_deadline(name: &str, node: &str, argv: &[String], secs: i64) -> Job {
    let mut job = job(name, node, argv);
    job.spec.as_mut().unwrap().active_deadline_seconds = Some(secs);
    job
}

/// The types of the Job's conditions whose status is "True", in order.
pub fn conditions(job: &Job) -> Vec<String> {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .filter(|c| c.status == "True")
        .map(|c| c.type_.clone())
        .collect()
}

/// The resourceVersion as a number.
pub fn rv(meta: &ObjectMeta) -> u64 {
    meta.resource_version.as_deref().unwrap().parse().unwrap()
}

pub fn uid(job: &Job) -> String {
    job.metadata.uid.clone().unwrap()
}

pub fn phase(pod: &k8s_openapi::api::core::v1::Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

/// The first container's terminated exit code, if it terminated.
pub fn exit_code(pod: &k8s_openapi::api::core::v1::Pod) -> Option<i32> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    Some(status.state.as_ref()?.terminated.as_ref()?.exit_code)
}

/// A watch on the Job `name` that follows its resourceVersion from change to change.
pub struct JobWatch {
    pub name: String,
    pub since: String,
}

impl JobWatch {
    /// Starts after `job` (as created or read).
    pub fn after(job: &Job) -> Self {
        JobWatch {
            name: job.metadata.name.clone().unwrap(),
            since: job.metadata.resource_version.clone().unwrap(),
        }
    }

    /// The next change (waiting up to an hour of virtual time).
    pub async fn next(
        &mut self,
        cluster: &nodejob_fake::FakeCluster,
    ) -> Result<nodejob_core::Change<Job>, nodejob_core::ApiError> {
        use nodejob_core::{Change, JobApi};
        let hour = std::time::Duration::from_secs(3600);
        let change = cluster
            .wait_job(NS, &self.name, Some(&self.since), hour)
            .await?;
        if let Change::Applied(job) | Change::Deleted(job) = &change {
            self.since = job.metadata.resource_version.clone().unwrap();
        }
        Ok(change)
    }

    /// The next change, which must be an update: the Job as updated.
    pub async fn applied(&mut self, cluster: &nodejob_fake::FakeCluster) -> Result<Job, String> {
        match self.next(cluster).await.map_err(|e| e.to_string())? {
            nodejob_core::Change::Applied(job) => Ok(job),
            other => Err(format!("expected an update, got {other:?}")),
        }
    }
}

// ---- workloads, as an administrator would apply them ----

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub fn app(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), name.to_string())])
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(NS.to_string()),
        ..ObjectMeta::default()
    }
}

/// A server container: no host command, so it runs until its pod is deleted.
pub fn server() -> Container {
    Container {
        name: "app".to_string(),
        image: Some("registry.k8s.io/pause:3.10".to_string()),
        ..Container::default()
    }
}

pub fn template(name: &str, grace_seconds: i64) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(app(name)),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![server()],
            termination_grace_period_seconds: Some(grace_seconds),
            ..PodSpec::default()
        }),
    }
}

/// A Deployment `name` of `replicas` pods labelled `app: name`, grace period 5s.
pub fn deployment(name: &str, replicas: i32) -> Deployment {
    Deployment {
        metadata: meta(name),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(app(name)),
                ..LabelSelector::default()
            },
            template: template(name, 5),
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// A DaemonSet `name` on the nodes labelled `node_label` (every node when `None`).
pub fn daemon_set(name: &str, node_label: Option<(&str, &str)>) -> DaemonSet {
    let mut template = template(name, 5);
    if let Some((k, v)) = node_label {
        template.spec.as_mut().unwrap().node_selector =
            Some(BTreeMap::from([(k.to_string(), v.to_string())]));
    }
    DaemonSet {
        metadata: meta(name),
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(app(name)),
                ..LabelSelector::default()
            },
            template,
            ..DaemonSetSpec::default()
        }),
        status: None,
    }
}

/// A budget `name` over the pods labelled `app: app_name`.
pub fn budget(
    name: &str,
    app_name: &str,
    min_available: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(name),
        spec: Some(PodDisruptionBudgetSpec {
            min_available,
            max_unavailable,
            selector: Some(LabelSelector {
                match_labels: Some(app(app_name)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

/// A pod no controller manages, labelled `app: name`, bound to `node` (unbound when empty).
pub fn bare_pod(name: &str, node: &str, grace_seconds: i64) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: Some(app(name)),
            ..meta(name)
        },
        spec: Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.to_string()),
            containers: vec![server()],
            termination_grace_period_seconds: Some(grace_seconds),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// Whether the pod is Ready and not being deleted.
pub fn ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// The pods of `namespace` labelled `app: name`.
pub fn pods_of(cluster: &nodejob_fake::FakeCluster, name: &str) -> Vec<Pod> {
    cluster
        .pods(NS)
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .map(String::as_str)
                == Some(name)
        })
        .collect()
}

/// `(currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed)` of budget `name`.
pub fn budget_counts(cluster: &nodejob_fake::FakeCluster, name: &str) -> (i32, i32, i32, i32) {
    let status = cluster.budget(NS, name).unwrap().status.unwrap_or_default();
    (
        status.current_healthy,
        status.desired_healthy,
        status.expected_pods,
        status.disruptions_allowed,
    )
}
