//! What passes between the [`Machine`](super::Machine) and the loop that drives it: the
//! machine answers every [`Observation`] with a [`Step`] (notes, then one [`Intent`]).

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;

use crate::Change;
use crate::error::{ApiError, Result};
use crate::spec::Note;

/// What a run reports: which runner function asked decides how much of it is filled.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// [`crate::run`]: success or an error; a failed Job is an error.
    Run,
    /// [`crate::run_exit_code`]: the container's exit code.
    ExitCode,
    /// [`crate::run_exit_code_logs`]: the exit code and the log.
    ExitCodeLogs,
}

/// How a Job ended, as far as the mode asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The UID of the Job that answered: ours, or the one adopted ([`Policy::adopt`]).
    pub uid: String,
    /// The container's exit code: 0 when the Job succeeded.
    pub exit_code: i32,
    /// The container's log, in [`Mode::ExitCodeLogs`], at most [`crate::LOG_LIMIT_BYTES`].
    pub log: Option<String>,
    /// The Job's last resourceVersion the run saw, when its [`Policy::keep`] kept a Job that
    /// succeeded (`None` otherwise): where the caller's wait for the deletion it makes starts,
    /// with no read of the Job first.
    pub resource_version: Option<String>,
}

/// What a run does with an earlier Job of its name, and with its own once it succeeded. The
/// default is the runner's contract: replace an earlier Job, delete ours once it succeeded.
///
/// A driver that must never run a host operation twice (the upgrade driver) uses both: after a
/// crash it adopts the Job it had started instead of replacing it, and it keeps a succeeded Job
/// until it has recorded the result in the cluster, then deletes it exactly itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// The UID of an earlier Job of the spec's name to take the result of instead of replacing
    /// it: it is waited for (from the time of adoption, within the bound) and read as ours. A
    /// Job of that name with another UID, or none, ends the run with [`crate::Error::Vanished`].
    pub adopt: Option<String>,
    /// Leave ours in place after it succeeded (it is always left when it failed).
    pub keep: bool,
    /// The caller read the spec's Job name and found no Job there (a 404, since its last write
    /// of that name): the run creates ours at once instead of reading the name again, one read
    /// fewer per Job. A Job that took the name since is met by the create (AlreadyExists) and
    /// then inspected as the guard inspects any earlier Job, so a wrong hint costs a read, never
    /// a replaced Job. Ignored when adopting. The caller's read stands in for the guard's: a
    /// create whose answer was lost, then met by AlreadyExists, adopts a Job of exactly our work
    /// there as ours. So set it only when nothing but the caller (under its Lease) creates Jobs
    /// of that name since its read.
    pub known_free: bool,
}

/// One action for the async loop to perform on the Job the spec names (or its node).
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    /// `get_job(namespace, name)`.
    GetJob,
    /// `create_job(job)`.
    CreateJob(Box<Job>),
    /// `delete_job(namespace, name, Some(preconditions))`: always exact.
    DeleteJob(Preconditions),
    /// `wait_job(namespace, name, since, timeout)`. When it times out with no change, the loop
    /// also reads the spec's node, `get_node(node)`, and answers both at once with
    /// [`Observation::TimedOut`]: a wait that times out is the one moment the Job says nothing,
    /// and its node may say why. A wait that sees a change costs no node read.
    WaitJob {
        /// The resourceVersion last seen.
        since: Option<String>,
        /// How long to wait at most.
        timeout: Duration,
    },
    /// `get_node(node)`: the spec's node.
    GetNode,
    /// `list_pods(namespace, selector)`.
    ListPods {
        /// `batch.kubernetes.io/controller-uid=<uid>`.
        selector: String,
    },
    /// `pod_log(namespace, pod, container, LOG_LIMIT_BYTES)`.
    ReadLog {
        /// The Pod's name.
        pod: String,
    },
    /// `list_events(namespace, uid)`.
    ListEvents {
        /// The Job's UID.
        uid: String,
    },
    /// Back off before retrying a transient failure.
    Sleep(Duration),
    /// The run is over.
    Finish(Result<Report>),
}

/// The answer to the last [`Intent`].
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    /// `GetJob` or `CreateJob` answered with this Job.
    Job(Box<Job>),
    /// `DeleteJob` was accepted.
    Deleted,
    /// `WaitJob` saw this. `Change::TimedOut` here is a timeout whose node was not read: the
    /// machine then knows nothing of the node (see [`Observation::TimedOut`]).
    Changed(Change<Box<Job>>),
    /// `WaitJob` timed out with no change, and the loop then read the spec's node: the node,
    /// or the error reading it (NotFound: it does not exist).
    TimedOut(std::result::Result<Box<Node>, ApiError>),
    /// `GetNode` answered with this Node.
    Node(Box<Node>),
    /// `ListPods` answered.
    Pods(Vec<Pod>),
    /// `ReadLog` answered.
    Log(String),
    /// `ListEvents` answered.
    Events(Vec<Event>),
    /// `Sleep` is over.
    Slept,
    /// The last intent's API call failed.
    Failed(ApiError),
}

/// What the machine wants next: notes for the operator, then one intent.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Progress and warnings, in order, before the intent.
    pub notes: Vec<Note>,
    /// The one thing to do.
    pub intent: Intent,
}
