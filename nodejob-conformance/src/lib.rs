//! The conformance suite: scenario bodies written once, generic over the backend.
//!
//! Each scenario drives the runner through [`nodejob_core`]'s public functions and checks what a
//! user relies on. It scripts the host operation through the argv (the `nodejob-test:` vocabulary
//! of [`nodejob_fake::host`], which the fake's kubelet and the end-to-end node agent both read)
//! and everything else through the API: another actor's Job is created or deleted with the same
//! verbs, between two of the runner's calls, by [`Interposed`]. Only a few hooks are
//! backend-specific ([`Backend`]): an unreachable kubelet, a NotReady node, a namespace whose
//! PodSecurity level refuses privileged pods, and another actor deleting a Pod or a Node.
//!
//! [`conformance!`] expands every scenario into a test for one backend: the in-memory cluster in
//! `cargo test` (`tests/fake.rs`), a real control plane in the end-to-end suite.
//!
//! It does **not** start a cluster: a backend hands in a ready one.

mod crash;
pub mod custom;
mod fake;
mod interpose;
pub mod nodes;
pub mod scenarios;
pub mod soak;
pub mod workloads;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use nodejob_core::{ApiError, Change, Clock, JobApi, NodeApi, Note, Spec, finished};

pub use crash::{Crashing, Observe, Write};
pub use custom::Customs;
pub use fake::FakeBackend;
pub use interpose::{Action, Call, Interposed};
pub use workloads::{Object, Workloads};

/// A cluster the suite can run on: a fresh namespace and a Ready node per scenario.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The backend's API.
    type Api: JobApi + NodeApi + 'static;
    /// The API, as the runner uses it.
    fn api(&self) -> Arc<Self::Api>;
    /// A namespace of this scenario's own, where privileged pods are admitted.
    fn namespace(&self) -> String;
    /// A Ready node of this scenario's own, whose kubelet runs pods.
    fn node(&self) -> String;
    /// Makes the node's kubelet unreachable for logs (the apiserver answers 500) or reachable.
    async fn set_kubelet_reachable(&self, node: &str, reachable: bool) -> Result<(), Failure>;
    /// Posts the node's `Ready` condition.
    async fn set_node_ready(&self, node: &str, ready: bool) -> Result<(), Failure>;
    /// A namespace whose PodSecurity admission refuses privileged pods (`enforce=baseline`).
    async fn forbid_privileged_pods(&self) -> Result<String, Failure>;
    /// Deletes one Pod as another actor would (`kubectl delete pod`: graceful, no
    /// preconditions).
    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), Failure>;
    /// Deletes the Node object as another actor would (`kubectl delete node`).
    async fn remove_node(&self, node: &str) -> Result<(), Failure>;
    /// The node's host reboots by itself (a watchdog, a power cut, a person at the console):
    /// it comes back with a new `bootID`. Returns once the reboot began, or once it is over
    /// where the backend can only tell that.
    async fn reboot_node(&self, node: &str) -> Result<(), Failure>;
    /// A CA `node`'s host can rotate its trust to (`stratum carotate`), by its fingerprint.
    /// By default one with no CA behind it, which a host model rotates to by its name alone
    /// (the fake's and the node agent's); a host that re-keys its kubelet from the CA itself
    /// must hold it (a real node: placed in its keyring, and the control plane made to trust
    /// it for as long as the backend lives, so the kubelet it re-keys still talks to it).
    async fn rotation_ca(&self, node: &str) -> Result<String, Failure> {
        let _ = node;
        Ok(format!("sha256:{}", "ab".repeat(32)))
    }
    /// The version `node` says its host runs, after a `stratum upgrade` rebooted it: by
    /// default the kubelet's (`status.nodeInfo.kubeletVersion`), which the fake's and the node
    /// agent's hosts move with their version; a backend whose kubelet stays one binary reads
    /// where its host's version shows (a real node: `osImage`, its os-release).
    fn host_version(&self, node: &k8s_openapi::api::core::v1::Node) -> String {
        (node.status.as_ref())
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.kubelet_version.clone())
            .unwrap_or_default()
    }
}

/// Why a scenario failed: what was expected and what was seen.
#[derive(Debug)]
pub struct Failure(pub String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

impl From<nodejob_core::Error> for Failure {
    fn from(e: nodejob_core::Error) -> Self {
        Failure(format!("runner error: {e}"))
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure(format!("api error: {e}"))
    }
}

/// Fails the scenario with a message unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::Failure(format!("{}: {}", stringify!($cond), format!($($fmt)+))));
        }
    };
}

/// What a scenario works with: the backend, the runner's API (interposed), where notes go.
pub struct Ctx<B: Backend> {
    /// The backend, for its hooks.
    pub backend: Arc<B>,
    /// The API the runner is given.
    pub api: Arc<Interposed<B::Api>>,
    /// Every note the runner emitted.
    pub notes: Arc<Mutex<Vec<Note>>>,
    /// This scenario's namespace.
    pub namespace: String,
    /// This scenario's node.
    pub node: String,
}

impl<B: Backend> Ctx<B> {
    /// A context over `backend`.
    pub fn new(backend: Arc<B>) -> Self {
        let api = Arc::new(Interposed::new(backend.api()));
        let (namespace, node) = (backend.namespace(), backend.node());
        Ctx {
            backend,
            api,
            notes: Arc::default(),
            namespace,
            node,
        }
    }

    /// A spec for a Job `name` on this scenario's node whose host operation follows `host`
    /// (`nodejob_fake::host` directives), with a bound of `poll_attempts` intervals.
    pub fn spec(&self, name: &str, host: &[String]) -> Spec {
        let sink = self.notes.clone();
        let mut argv: Vec<String> = ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--"]
            .map(String::from)
            .into();
        argv.extend(["stratum".into(), "conformance".into()]);
        argv.extend(host.iter().cloned());
        Spec {
            namespace: self.namespace.clone(),
            name: name.into(),
            node: self.node.clone(),
            label_key: "stratum.ciq.com/conformance".into(),
            container: "host".into(),
            argv,
            active_deadline: Duration::from_secs(300),
            poll_attempts: 12,
            kind: "conformance".into(),
            critical: false,
            image: None,
            output: Some(Arc::new(move |n: &Note| {
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(n.clone())
            })),
        }
    }

    /// Whether the runner emitted a note containing `part`.
    pub fn said(&self, part: &str) -> bool {
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|n| n.message.contains(part))
    }

    /// The Job `name` in this scenario's namespace, if any (read below the interposer).
    pub async fn job(&self, name: &str) -> Result<Option<Job>, Failure> {
        match self.api.inner().get_job(&self.namespace, name).await {
            Ok(job) => Ok(Some(job)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits (event-driven, below the interposer) until the Job `name` satisfies `pred`.
    pub async fn wait_until(
        &self,
        name: &str,
        bound: Duration,
        pred: impl Fn(&Job) -> bool,
    ) -> Result<Job, Failure> {
        let api = self.api.inner();
        let deadline = api.now() + bound;
        loop {
            let job = self.job(name).await?;
            if let Some(job) = job.as_ref().filter(|j| pred(j)) {
                return Ok(job.clone());
            }
            let since = job
                .as_ref()
                .and_then(|j| j.metadata.resource_version.clone());
            let left = deadline.saturating_sub(api.now());
            ensure!(
                !left.is_zero(),
                "job {}/{name} not in the expected state after {bound:?}",
                self.namespace
            );
            match api
                .wait_job(&self.namespace, name, since.as_deref(), left)
                .await
            {
                Ok(Change::Applied(j)) if pred(&j) => return Ok(j),
                Ok(_) => {}
                Err(e) if e.is_retryable() || e.is_gone() => {
                    api.sleep(Duration::from_millis(200)).await
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Waits until the Job `name` has finished.
    pub async fn wait_finished(&self, name: &str) -> Result<Job, Failure> {
        self.wait_until(name, Duration::from_secs(120), finished)
            .await
    }

    /// Waits until the Job `name` has a running pod (its `ready` counter is 1).
    pub async fn wait_running(&self, name: &str) -> Result<Job, Failure> {
        self.wait_until(name, Duration::from_secs(120), |j| {
            j.status.as_ref().and_then(|s| s.ready).unwrap_or(0) > 0
        })
        .await
    }
}

/// Expands every scenario of [`scenarios`] into a test for one backend:
/// `conformance!(#[tokio::test(start_paused = true)] make_backend().await);`
#[macro_export]
macro_rules! conformance {
    (#[$test:meta] $make:expr) => {
        $crate::conformance!(@each #[$test] $make;
            exit_code_and_log_of_a_succeeded_job,
            dollars_in_the_argv_reach_the_host_as_written,
            non_zero_exit_leaves_the_job_for_inspection,
            stale_succeeded_job_is_replaced_exactly,
            stale_failed_job_is_replaced_and_never_reported,
            stale_running_job_is_waited_for_not_killed,
            stale_job_being_deleted_is_waited_out,
            stale_job_replaced_between_inspect_and_delete_is_left_alone,
            already_exists_on_create_is_left_alone,
            job_deleted_while_waiting_ends_the_run,
            job_replaced_while_waiting_is_never_read,
            unreadable_log_keeps_the_exit_code,
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
            wait_ready_sees_the_node_turn_ready,
            wait_ready_times_out_on_a_not_ready_node,
            wait_ready_reports_a_missing_node,
            long_node_name_makes_valid_objects,
            pod_deleted_by_another_actor_is_no_exit_code,
            node_deleted_while_the_job_runs_is_named,
            a_reboot_under_the_job_is_no_exit_code,
            finished_job_deleted_by_another_runner_says_so,
            stratum_upgrade_reboots_the_node_into_the_new_version,
            stratum_carotate_phases_are_reported,
            jobs_are_listed_by_label_selector,
            jobs_of_a_missing_namespace_are_an_empty_list
        );
    };
    (@each #[$test:meta] $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[$test]
            async fn $name() {
                let backend = std::sync::Arc::new($make);
                if let Err(failure) = $crate::scenarios::$name(backend).await {
                    panic!("scenario {} failed: {failure}", stringify!($name));
                }
            }
        )*
    };
}

/// Expands every scenario of [`nodes`] (node, pod, eviction, Lease and node-Event verbs; drain;
/// the fenced Lease) into a test for one [`Workloads`] backend, as [`conformance!`] does.
#[macro_export]
macro_rules! conformance_nodes {
    (#[$test:meta] $make:expr) => {
        $crate::conformance_nodes!(@each #[$test] $make;
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
            a_node_condition_merges_by_type_and_outlives_the_kubelets_posts
        );
    };
    (@each #[$test:meta] $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[$test]
            async fn $name() {
                let backend = std::sync::Arc::new($make);
                if let Err(failure) = $crate::nodes::$name(backend).await {
                    panic!("scenario {} failed: {failure}", stringify!($name));
                }
            }
        )*
    };
}

/// Expands every scenario of [`custom`] (the declarative rolls' custom resources: generation,
/// the status subresource and its server-side apply, finalizers, the watch) into a test for one
/// [`Customs`] backend, as [`conformance!`] does.
#[macro_export]
macro_rules! conformance_custom {
    (#[$test:meta] $make:expr) => {
        $crate::conformance_custom!(@each #[$test] $make;
            a_roll_is_created_then_listed_and_watched_from_the_lists_version,
            the_generation_follows_the_spec_and_the_status_is_written_apart,
            a_status_apply_owns_its_fields_and_merges_conditions_by_type,
            a_finalizer_holds_a_deleted_roll_until_it_is_removed,
            a_kind_not_installed_is_not_found
        );
    };
    (@each #[$test:meta] $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[$test]
            async fn $name() {
                let backend = std::sync::Arc::new($make);
                if let Err(failure) = $crate::custom::$name(backend).await {
                    panic!("scenario {} failed: {failure}", stringify!($name));
                }
            }
        )*
    };
}
