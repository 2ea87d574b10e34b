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
