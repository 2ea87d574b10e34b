//! An in-memory **model of Kubernetes** that implements nodejob's API traits ([`JobApi`],
//! [`NodeApi`], [`PodApi`], [`LeaseApi`]) and [`Clock`]: an apiserver store with
//! resourceVersions, UIDs, preconditions, watches, PodSecurity admission and the eviction
//! subresource; a Job controller; a garbage collector; the pod garbage collector's collection
//! of a deleted node's pods (`gcOrphaned`: Failed and force-deleted after a 40 s quarantine); Deployment, ReplicaSet and DaemonSet
//! controllers; a scheduler; the disruption controller; and a scriptable kubelet and a host
//! model (what the on-host `stratum` does: upgrades that reboot the node, CA rotations) per
//! node, all running in tokio's virtual time. It is not a mock of expected calls: tests drive it through
//! the same verbs a real cluster serves and observe the same kinds of answers, so a test that
//! passes here exercises behaviour a real cluster has.
//!
//! It does **not** talk to a cluster, read the wall clock or draw OS randomness: a run is a
//! function of its seed, its [`Timing`] and the calls made.
//!
//! What it models, part by part, and what it does not: [`model`]. A cluster, a Job run on it
//! and the answer read:
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::batch::v1::{Job, JobSpec};
//! use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! use nodejob_fake::{Change, Clock, FakeCluster, JobApi, host};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = FakeCluster::with_seed(7);
//! cluster.add_node("n1")?;
//! let pod = PodSpec {
//!     node_name: Some("n1".into()),
//!     restart_policy: Some("Never".into()),
//!     containers: vec![Container {
//!         name: "run".into(),
//!         command: Some(vec!["stratum".into(), host::log("done"), host::exit(3)]),
//!         ..Container::default()
//!     }],
//!     ..PodSpec::default()
//! };
//! let job = Job {
//!     metadata: ObjectMeta {
//!         name: Some("up-n1".into()),
//!         namespace: Some("default".into()),
//!         ..ObjectMeta::default()
//!     },
//!     spec: Some(JobSpec {
//!         backoff_limit: Some(0),
//!         template: PodTemplateSpec { metadata: None, spec: Some(pod) },
//!         ..JobSpec::default()
//!     }),
//!     status: None,
//! };
//! let mut since = cluster.create_job(&job).await?.metadata.resource_version;
//! loop {
//!     let minute = Duration::from_secs(60);
//!     let change = cluster.wait_job("default", "up-n1", since.as_deref(), minute).await?;
//!     let Change::Applied(job) = change else { unreachable!("the Job runs to its end") };
//!     let status = job.status.unwrap_or_default();
//!     if status.conditions.iter().flatten().any(|c| c.type_ == "Failed") {
//!         assert_eq!(status.failed, Some(1));
//!         break;
//!     }
//!     since = job.metadata.resource_version;
//! }
//! assert_eq!(cluster.now(), Duration::from_millis(3_300)); // 200ms + 1s + 2s run + 100ms
//! let pod = cluster.list_pods("default", "job-name=up-n1").await?.remove(0);
//! let log = cluster.pod_log("default", &pod.metadata.name.unwrap(), "run", 1 << 20).await?;
//! assert_eq!(log, "done\n");
//! # Ok(())
//! # }
//! ```

mod actors;
mod admission;
mod api;
mod budget;
mod cluster;
mod controller;
mod ctx;
mod custom;
mod custom_registry;
mod disruption;
mod eviction;
mod faults;
mod hooks;
mod index;
mod kubelet;
pub mod labels;
pub mod model;
mod object;
mod podgc;
mod record;
mod registry;
mod rng;
pub mod schedule;
mod scheduler;
mod selector;
mod server;
mod state;
mod store;
mod timers;
mod timing;
mod validation;
mod verb;
mod watch;
mod workloads;

pub use cluster::{Config, FakeCluster};
pub use faults::Times;
pub use kubelet::{ContainerStart, DEFAULT_KUBELET_VERSION, LogEndpoint, NodeScript};
#[doc(inline)]
pub use nodejob_host::directives as host;
#[doc(inline)]
pub use nodejob_host::{stratum, termination};
pub use record::Call;
pub use server::{DEFAULT_SERVER_VERSION, ServerVersion};
pub use termination::OnSigterm;
pub use timing::{EPOCH_SECONDS, Timing};
pub use verb::{Verb, Verbs};

#[doc(no_inline)]
pub use nodejob_core::{
    Change, Clock, DryRun, Eviction, JobApi, LeaseApi, NodeApi, NodeChange, PodApi,
};
