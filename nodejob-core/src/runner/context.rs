//! What every sub-machine shares and none owns: [`Run`], what the run is about (fixed at its
//! start), and [`Next`], how a sub-machine answers an observation. The sub-machines ([`guard`],
//! [`ours`], [`result`]) import this file and the protocol, nothing of each other or of the root.
//!
//! [`guard`]: super::guard
//! [`ours`]: super::ours
//! [`result`]: super::result

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;

use super::protocol::{Intent, Mode, Observation, Policy, Report};
use crate::api::ApiResult;
use crate::error::{Action, ApiError, Error, ErrorKind, JobRef, ObjectKind, Operation, Result};
use crate::quote::quote;
use crate::spec::{Level, Note};
use crate::status::not_ready_because;

/// The cause of an error that is a bug in the loop or the machine, not in the cluster.
fn internal(what: &str) -> ApiError {
    ApiError::new(ErrorKind::Other, 0, format!("internal: {what}"))
}

/// How the root may retry a transient failure of the intent a state waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Retries {
    /// While the backoff ends before this deadline (the wait bound of the state).
    Until(Duration),
    /// This many times in a row (no wait bound applies: the Job has finished).
    Times(u32),
    /// Never: the state takes a failure as an answer.
    Never,
}

/// What a run is about: fixed when the machine is made.
#[derive(Debug)]
pub(super) struct Run {
    /// The Job, as errors name it.
    pub(super) job: Box<JobRef>,
    /// The container whose exit code and log answer.
    pub(super) container: String,
    /// How much the caller asked for.
    pub(super) mode: Mode,
    /// The wait bound: `poll_attempts` x `POLL_INTERVAL`.
    pub(super) bound: Duration,
    /// The Job we create: built once, so every retry creates the same object.
    pub(super) desired: Job,
    /// What to do with an earlier Job, and with ours once it succeeded.
    pub(super) policy: Policy,
}

/// How a sub-machine in state `S` answers an observation.
#[derive(Debug)]
pub(super) enum Next<S, X> {
    /// It goes on, now in state `S`: these notes, then this intent.
    Stay(S, Vec<Note>, Intent),
    /// It is done; the root hands `X` to the next sub-machine.
    Leave(X),
    /// The run is over.
    Finish(Vec<Note>, Result<Report>),
}

impl<S, X> Next<S, X> {
    /// Stays in `state` and issues `intent`, with no notes.
    pub(super) fn stay(state: S, intent: Intent) -> Self {
        Next::Stay(state, Vec::new(), intent)
    }

    /// Ends the run with `error`.
    pub(super) fn fail(error: Error) -> Self {
        Next::Finish(Vec::new(), Err(error))
    }
}

impl Run {
    /// A note about this run.
    pub(super) fn note(&self, level: Level, message: String) -> Note {
        Note { level, message }
    }

    /// The Job of our name belongs to another actor now.
    pub(super) fn contended(&self, detail: String) -> Error {
        Error::Contended {
            job: self.job.clone(),
            detail,
        }
    }

    /// Our Job (UID `uid`) is gone or replaced.
    pub(super) fn vanished(&self, uid: &str, detail: String) -> Error {
        Error::Vanished {
            job: self.job.clone(),
            uid: uid.to_string(),
            detail,
        }
    }

    /// The wait bound ran out waiting for `what`.
    pub(super) fn timeout(&self, what: String) -> Error {
        Error::Timeout {
            job: self.job.clone(),
            what,
            waited: self.bound,
        }
    }

    /// The operation `verb` on the Job (`kind` [`ObjectKind::Job`]) or on its object of `kind`.
    pub(super) fn op(&self, verb: Action, kind: ObjectKind) -> Operation {
        Operation::of_job(verb, kind, self.job.clone())
    }

    /// An API call failed while `verb`-ing the Job (or its object of `kind`).
    pub(super) fn api_error(&self, verb: Action, kind: ObjectKind, cause: ApiError) -> Error {
        Error::Api {
            op: self.op(verb, kind),
            cause,
        }
    }

    /// A bug in the loop or the machine, not in the cluster.
    pub(super) fn internal(&self, what: &str) -> Error {
        self.api_error(Action::Running, ObjectKind::Job, internal(what))
    }

    /// An answer the state does not expect: an API error is reported with its operation (the
    /// state's `verb` and `kind`); any other observation is a bug in the loop, reported with the
    /// operation too.
    pub(super) fn unexpected<S, X>(
        &self,
        obs: Observation,
        verb: Action,
        kind: ObjectKind,
    ) -> Next<S, X> {
        let cause = match obs {
            Observation::Failed(e) => e,
            other => internal(&format!("unexpected answer {other:?}")),
        };
        Next::fail(self.api_error(verb, kind, cause))
    }

    /// What a timed-out wait learnt of the node, to append to a timeout's `what`: `""` when it
    /// is Ready or was not read.
    pub(super) fn node_state(&self, node: Option<&ApiResult<Box<Node>>>) -> String {
        let name = &self.job.node;
        match node {
            // The Ready condition's message is the node's (its kubelet's): quoted.
            Some(Ok(node)) => not_ready_because(node)
                .map(|why| format!("; node {name} is NotReady ({})", quote(&why)))
                .unwrap_or_default(),
            Some(Err(e)) if e.is_not_found() => format!("; node {name} does not exist"),
            Some(Err(_)) | None => String::new(),
        }
    }
}

/// The Job's UID (empty when it has none).
pub(super) fn uid_of(job: &Job) -> String {
    job.metadata.uid.clone().unwrap_or_default()
}

/// The Job's resourceVersion.
pub(super) fn rv_of(job: &Job) -> Option<String> {
    job.metadata.resource_version.clone()
}

/// Preconditions naming exactly one object: its UID and resourceVersion.
pub(super) fn exact(uid: String, resource_version: Option<String>) -> Preconditions {
    Preconditions {
        uid: Some(uid),
        resource_version,
    }
}
