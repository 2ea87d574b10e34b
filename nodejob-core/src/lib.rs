//! The pure core of nodejob: everything about running one privileged, node-pinned Kubernetes
//! Job except talking to a cluster.
//!
//! A Job's pod is `hostPID`/`hostNetwork`/privileged; its container `nsenter`s PID 1 and execs
//! an on-host binary with a shell-free argv; the caller gates on the result (success, exit code,
//! log). This crate holds:
//!
//! - pure functions: [`build`], [`trunc_name`], [`node_label_value`], [`job_node`],
//!   [`finished`], [`ready`], [`Spec::validate`], [`node_event`];
//! - the run state machine ([`runner::Machine`]), sans-IO: it takes observations and returns
//!   intents, and never awaits;
//! - the [`JobApi`] trait, one method per API verb, and thin async loops over it: [`run`],
//!   [`run_exit_code`], [`run_exit_code_logs`], [`logs`], [`delete_and_wait`],
//!   [`delete_exact_and_wait`], [`delete_seen_and_wait`], [`wait_ready`];
//! - label selectors parsed and matched by the apiserver's grammar ([`selector`]), so a plan
//!   refuses a malformed one before any API call.
//!
//! It does **not** talk to a cluster, read a clock or draw randomness: backends
//! (`nodejob-kube`, `nodejob-fake`) implement [`JobApi`] and [`Clock`].
//!
//! ```text
//!   Spec ──validate──▶ Machine ──Intent──▶ async loop ──▶ JobApi (kube / fake)
//!                         ▲                     │
//!                         └────Observation──────┘
//! ```

mod api;
pub mod drain;
pub mod duration;
mod error;
pub mod event;
pub mod forward;
mod image;
mod job;
pub mod lease;
mod names;
pub mod pause;
mod quote;
pub mod runner;
pub mod selector;
mod spec;
mod status;
mod wait;
pub mod watch;

use std::time::Duration;

pub use api::{
    ApiResult, Change, Clock, CustomApi, CustomAt, CustomChanges, CustomKind, DryRun, Eviction,
    JobApi, LeaseApi, NO_SCHEDULE, NodeApi, NodeChange, NodeChanges, NodesAt, PodApi,
    tainted_no_schedule,
};
pub use error::{
    Action, ApiError, Error, ErrorKind, JobRef, ObjectKind, Operation, RETRY_AFTER_CAP, Result,
    Target,
};
pub use event::{EventType, node_event};
pub use forward::{Answer, Layer, Request, Verb};
pub use image::IMAGE;
pub use job::{CONTROLLER_UID_LABEL, NODE_ANNOTATION, build};
pub use names::{is_dns1123_subdomain, node_label_value, trunc_name};
pub use quote::{QUOTE_LIMIT, log_tail, quote};
pub use runner::{
    Mode, Policy, Report, log_text, logs, run, run_exit_code, run_exit_code_logs, run_with,
};
pub use spec::{ARGV_LIMIT, Level, Note, Sink, Spec};
pub use status::{
    ConditionStatus, Disruption, JobConditionReason, JobConditionType, NOT_READY_TAINT,
    NodeConditionType, PodConditionType, PodPhase, UNKNOWN_EXIT_CODE, UNKNOWN_EXIT_REASON,
    UNREACHABLE_TAINT, UnknownValue, condition, container_exit_code, disruption, failed,
    failure_condition, finished, is_pod_of_job, job_node, lost_in_reboot, pod_condition, pod_phase,
    ready, succeeded, unready_taint,
};
pub use wait::{
    DELETE_TIMEOUT, delete_and_wait, delete_exact_and_wait, delete_seen_and_wait, wait_pod_gone,
    wait_ready,
};

/// One unit of the wait bound: a runner waits `poll_attempts` x `POLL_INTERVAL` at most. Waiting
/// itself is event-driven, so this is a bound, not a polling period.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The most of a log a runner reads (`limitBytes`).
pub const LOG_LIMIT_BYTES: u64 = 4 << 20;

/// The library example of `docs/library.md` (moved there from the README) runs as a doctest, so
/// it cannot drift from the code.
#[cfg(doctest)]
#[doc = include_str!("../../docs/library.md")]
struct LibraryDocDoctests;
