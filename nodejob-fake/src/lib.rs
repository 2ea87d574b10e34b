//! An in-memory **model of Kubernetes** that implements nodejob's [`JobApi`] and [`Clock`]:
//! an apiserver store with resourceVersions, UIDs, preconditions and watches; a Job
//! controller; a garbage collector; and a scriptable kubelet per node, all running in tokio's
//! virtual time. It is not a mock of expected calls: tests drive it through the same verbs a
//! real cluster serves and observe the same kinds of answers, so a test that passes here
//! exercises behaviour a real cluster has.
//!
//! It does **not** talk to a cluster, read the wall clock or draw OS randomness: a run is a
//! function of its seed, its [`Timing`] and the calls made.
//!
//! ```text
//!   JobApi call ──▶ record ─▶ hook ─▶ faults ─▶ apiserver store ──▶ watch history ──▶ wait_*
//!                                                  ▲      │
//!                     driver task (virtual time)   │      ▼ settle after every write
//!           timers: pod creation, container start/exit, stop, kill, deadline, terminal condition
//!           level-triggered: Job controller sync, garbage collector, pod removal
//! ```
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
//!
//! # Time
//! Virtual time is tokio's paused time: run tests with `#[tokio::test(start_paused = true)]`.
//! [`Clock::now`] is the time since the cluster was made and [`Clock::sleep`] is
//! `tokio::time::sleep`. Timestamps written into objects (`creationTimestamp`,
//! `deletionTimestamp`, `startTime`, `completionTime`, condition and event times) are
//! 2026-01-01T00:00:00Z ([`EPOCH_SECONDS`]) plus the virtual time, in whole seconds.
//!
//! The modelled components run on one driver task spawned by [`FakeCluster::new`]: a step due
//! at virtual time `t` is applied when that task runs at `t`, so a test that sleeps until
//! exactly `t` may look before it. Wait for the change (`wait_job`, `wait_node`) or sleep past
//! `t`. Every step happens under one lock, and waiters are woken after each write.
//!
//! # Apiserver
//! - Namespaces `default` and `kube-system` exist; [`FakeCluster::add_namespace`] adds one.
//! - One global resourceVersion counter (decimal), bumped by every write of any object
//!   (Events included); UIDs are version-4-shaped and drawn from the seed.
//! - `create_job`: 404 for a missing namespace; 422 (name a DNS-1123 subdomain, every label
//!   key and value valid, values at most 63 characters, which with the generated `job-name`
//!   label limits the name to 63; `restartPolicy` `Never` or `OnFailure`; a selector only with
//!   `manualSelector`); 409 AlreadyExists when the name is taken, also by a Job being deleted.
//!   With `manualSelector` unset the selector `batch.kubernetes.io/controller-uid=<uid>` is set
//!   and the pod template gets the labels `batch.kubernetes.io/controller-uid`,
//!   `batch.kubernetes.io/job-name`, `controller-uid` and `job-name`; `generateName` works.
//! - `delete_job` is foreground: preconditions are checked (UID first, then
//!   resourceVersion: 409 with the apiserver's `Precondition failed: ...` message), then the
//!   Job gets a `deletionTimestamp` and the `foregroundDeletion` finalizer; the garbage
//!   collector deletes its pods and removes the Job (a DELETED event) once none is left.
//! - `list_pods` takes `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated; anything else
//!   (set-based selectors included) is a 400.
//! - `pod_log` (`LogLocation` in `pkg/registry/core/pod/strategy.go`): 404 for a missing pod;
//!   400 for an invalid container; an empty log (204 No Content) for a pod without `nodeName`;
//!   404 `pods "<node>" not found` (sic: the Node is read under the request's resource) for a
//!   missing node; a 500 (transient) `Get "https://<ip>:<port>/containerLogs/<ns>/<pod>/<c>?limitBytes=N":
//!   dial tcp <ip>:<port>: connect: connection refused` when the node's kubelet is scripted
//!   unreachable (the port from the Node's `daemonEndpoints`, 10250); 400 for a container not
//!   started; else the log cut to `limit_bytes`.
//! - `wait_job` / `wait_node` replay a per-name history of ADDED/MODIFIED
//!   ([`Change::Applied`]) and DELETED ([`Change::Deleted`], last state) events: the first
//!   after `since` (after the call when `None`; `"0"` or `""` start with the current object),
//!   else [`Change::TimedOut`] after the timeout. A Job deleted and recreated since is reported
//!   deleted first.
//!
//! # Job controller
//! Per Job, with the default [`Timing`] (all delays configurable):
//!
//! ```text
//!  t+0       created (apiserver)
//!  t+200ms   first sync: startTime; pod <job>-xxxxx created (labels from the template,
//!            controller ownerReference, finalizer batch.kubernetes.io/job-tracking); status
//!            active: 1 [refused by the node's script: FailedCreate Warning event, retry after
//!            10s, 20s, ... capped at 360s]
//!  +1s       kubelet: container running, pod Ready; status ready: 1
//!  +run      container exits: pod Succeeded (exit 0) / Failed; in one status update
//!            succeeded: 1 / failed: 1 and SuccessCriteriaMet (CompletionsReached) /
//!            FailureTarget (BackoffLimitExceeded); then the pod's tracking finalizer is removed
//!  +100ms    separate update: Complete (+ completionTime) / Failed, same reason and message
//! ```
//!
//! With `activeDeadlineSeconds`, when `startTime` + deadline passes before the Job finished
//! (`pkg/controller/job/job_controller.go`): in one sync `FailureTarget` `DeadlineExceeded`
//! (`Job was active longer than specified deadline`), its pods deleted, their tracking
//! finalizers removed and the pods counted at once (`failed: 1`, `terminating: 1`, `active`
//! unset) while they still run or terminate; once none terminates, `Failed` with the same
//! reason.
//!
//! While a Job is being deleted, the controller removes the tracking finalizer from all its
//! pods at once, running ones included (not counting those that have not ended), and keeps
//! writing its status: `active` drops and `terminating` rises as the garbage collector deletes
//! the pods, and `terminating` falls back to 0 as they end. A deleted pod that still carries
//! the finalizer counts as failed (`isPodFailed`, unless `podReplacementPolicy: Failed` or a
//! `podFailurePolicy` is set).
//!
//! # Kubelet and the argv vocabulary
//! Each node's kubelet follows its [`NodeScript`] (exit code, log, run time, never start,
//! refuse pod creation, log endpoint unreachable, ignore SIGTERM) and, where they speak, the
//! directives in the container's argv (`command` then `args`), which win over the script:
//!
//! - `nodejob-test:exit=N`: exit status `N` (modulo 256);
//! - `nodejob-test:log=TEXT`: prints `TEXT` and a newline; one element per line;
//! - `nodejob-test:run=SECONDS`: runs that many whole seconds;
//! - any other element is ignored.
//!
//! [`host`] documents the vocabulary exactly and builds the elements ([`host::exit`],
//! [`host::log`], [`host::run`]); a real test node agent reads argv the same way
//! ([`host::Directives::parse`]). A process prints its log when it exits on its own.
//!
//! A container that ends with a non-zero status under `terminationMessagePolicy:
//! FallbackToLogsOnError` gets the tail of its log as `state.terminated.message`: the last 80
//! lines, then their last 2048 bytes (`pkg/kubelet/kuberuntime/kuberuntime_container.go`); none
//! on exit 0 (no program writes its `terminationMessagePath` file).
//!
//! On a pod's deletion the kubelet sends its running container SIGTERM: a program that does not
//! trap it (the default, like the host programs the runner execs) ends
//! [`Timing::kill_delay`] later with exit 143, reason `Error`, having printed nothing. One whose
//! script says [`ignore_sigterm`](NodeScript::ignore_sigterm) runs until the SIGKILL at the end
//! of the grace period (the pod's `terminationGracePeriodSeconds`, else 30s; at least 1s): exit
//! 137, reason `Error`.
//!
//! # Faults, hooks, record
//! Every [`JobApi`] call is recorded ([`FakeCluster::calls`], [`FakeCluster::count`]), then
//! runs the hook armed for its verb ([`FakeCluster::before`]), then consults the faults
//! ([`FakeCluster::fail`], [`FakeCluster::fail_randomly`]), then is served. Actor methods
//! ([`FakeCluster::create_job_now`], [`FakeCluster::delete_job_now`],
//! [`FakeCluster::replace_job_now`], [`FakeCluster::touch_job_now`]) write through the same
//! store logic and are neither recorded nor faulted.
//!
//! # Not modelled
//! - More than one pod per Job: `parallelism`/`completions` > 1, indexed Jobs, retries after a
//!   failed pod (every Job behaves as `backoffLimit: 0`), `podFailurePolicy`, `successPolicy`,
//!   `ttlSecondsAfterFinished`; `restartPolicy: OnFailure` behaves as `Never`.
//! - Defaulting of unset Job fields (`backoffLimit: 6`, `completions`, ...): they stay unset.
//! - A scheduler (a pod without `nodeName` stays Pending), node pressure, eviction, taints,
//!   the node lifecycle controller (pods on a NotReady node are not marked NotReady) and the
//!   pod garbage collector of pods bound to deleted nodes.
//! - Containers other than a pod's first; container restarts; a program that traps SIGTERM and
//!   exits on its own terms (it either ends at once or ignores the signal); `preStop` hooks;
//!   logs of a running container; a `terminationMessagePath` file (a termination message comes
//!   only from the log, for `FallbackToLogsOnError`).
//! - The intermediate `uncountedTerminatedPods` write: a finished pod is counted in the same
//!   status update that records it.
//! - Watch expiry (410 Gone): the whole history is kept; watches of Pods and Events.
//! - Event aggregation beyond identical events (`count` bumps); the `events.k8s.io` API.
//! - Update and patch verbs other than the actor methods; resuming a suspended Job.

mod api;
mod cluster;
mod controller;
mod faults;
mod hooks;
pub mod host;
mod kubelet;
mod record;
mod rng;
mod scheduler;
mod selector;
mod state;
mod store;
pub mod termination;
mod timing;
mod validation;
mod verb;
mod watch;

pub use cluster::{Config, FakeCluster};
pub use faults::Times;
pub use kubelet::NodeScript;
pub use record::Call;
pub use timing::{EPOCH_SECONDS, Timing};
pub use verb::{Verb, Verbs};

#[doc(no_inline)]
pub use nodejob_core::{Change, Clock, JobApi};
