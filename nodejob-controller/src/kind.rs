//! What differs between the kinds the controller reconciles ([`Declared`]): how a spec becomes
//! a plan, how its run is started and ends, how its status is written. The loop of the crate
//! root is the same for both; a `NodeUpgrade` runs the upgrade driver (`upgrade.rs`), a
//! `CARotation` the CA rotation's (`rotation.rs`).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::{CustomApi, JobApi, LeaseApi, NodeApi, PodApi};
use nodejob_crd::{Reason, Roll};
use tokio::task::JoinHandle;
use upgrade_driver::{Outcome, Stop, Window};

use crate::informer::{Informer, Informers};
use crate::metrics::Metrics;
use crate::planner::Planner;
use crate::status::Verdict;

/// The verbs the controller and its runs use.
pub trait Apis: JobApi + NodeApi + PodApi + LeaseApi + CustomApi + Send + Sync + 'static {}

impl<T> Apis for T where
    T: JobApi + NodeApi + PodApi + LeaseApi + CustomApi + ?Sized + Send + Sync + 'static
{
}

/// How a run ended, as the status and the figures say it.
#[derive(Debug)]
pub struct Ended {
    /// What the status says; `None`: stopped on the controller's own request (a new
    /// generation, `paused`, a delete, a hand-over), which says it itself.
    pub verdict: Option<Verdict>,
    /// The figures' outcome: `completed`, `failed`, `stopped`, `waiting`, `paused`, `refused`.
    pub outcome: &'static str,
    /// Each node's version at the end, when the run says them.
    pub versions: Vec<String>,
    /// The holder of the rolls' Lease, when another held it.
    pub holder: Option<String>,
}

/// What a run's task is given besides its plan.
pub struct Hooks {
    /// The figures its progress feeds.
    pub metrics: Arc<Metrics>,
    /// This replica's node, when it hands over there (see `Controller::on_node`).
    pub own: Option<String>,
    /// Set when the run started on `own` (and asked `stop`).
    pub handing_over: Arc<AtomicBool>,
    /// What stops it at a step boundary.
    pub stop: Stop,
    /// How a driver's refusal is said in the spec's words.
    pub planner: Arc<dyn Planner>,
    /// Whom an upgrade's progress is also told (see `Controller::with_progress`).
    pub progress: Option<Arc<dyn upgrade_driver::ProgressSink>>,
}

/// A kind the controller reconciles.
pub trait Declared: Roll {
    /// The driver's plan of a spec.
    type Plan: Send + 'static;
    /// What follows a run's progress, for the status.
    type Tracker: Default + Send + Sync + 'static;
    /// The figures' `operation` label.
    const OPERATION: &'static str;

    /// `spec.paused`.
    fn paused(&self) -> bool;

    /// Its status as read.
    fn current(&self) -> Option<&Self::Status>;

    /// A status's `observedGeneration` and conditions.
    fn said(status: &Self::Status) -> (Option<i64>, &[Condition]);

    /// The plan of its spec (`node`, if given, held to the end), or why it is refused,
    /// naming the field.
    fn plan(&self, planner: &dyn Planner, node: Option<&str>) -> Result<Self::Plan, String>;

    /// Its kind's informer, of `informers`.
    fn informer(informers: &dyn Informers) -> Box<dyn Informer<Self>>;

    /// The plan's maintenance window.
    fn window(plan: &Self::Plan) -> Option<&Window>;

    /// Starts the run of `plan` on `api`, its progress told to `tracker`.
    fn spawn<A: Apis + ?Sized>(
        api: Arc<A>,
        plan: Self::Plan,
        tracker: Arc<Self::Tracker>,
        hooks: Hooks,
    ) -> JoinHandle<Ended>;

    /// Bumped at each change of `tracker` the status shows.
    fn moved(tracker: &Self::Tracker) -> u64;

    /// The status `verdict` says at `generation`, with what `tracker` knows (empty: what
    /// `before` said of the nodes stands).
    fn status(
        before: Option<&Self::Status>,
        generation: i64,
        verdict: &Verdict,
        tracker: &Self::Tracker,
        now: Timestamp,
    ) -> Self::Status;

    /// The node counts `tracker` knows, into the figures.
    fn figures(tracker: &Self::Tracker, metrics: &Metrics);
}

/// How a run that started ended, as both kinds say it: the figures' outcome and the verdict
/// (`None`: stopped on the controller's own request, `asked`); `failed`: the reason of a
/// failure.
pub(crate) fn said(
    outcome: Outcome,
    asked: bool,
    failed: Reason,
) -> (&'static str, Option<Verdict>) {
    match outcome {
        Outcome::Done => ("completed", Some(Verdict::Completed)),
        Outcome::Failed { retry: what, .. } => ("failed", Some(Verdict::Stalled(failed, what))),
        Outcome::Stopped { .. } if asked => ("stopped", None),
        Outcome::Stopped { why } => {
            let reason = if why.contains("window") {
                Reason::WindowClosed
            } else {
                Reason::Progressing
            };
            ("waiting", Some(Verdict::Waiting(reason, why)))
        }
        Outcome::Paused { why } => (
            "paused",
            Some(Verdict::Waiting(Reason::PausedBySwitch, why)),
        ),
    }
}

/// A run that could not take the rolls' Lease: its holder, as the status and figures say it.
pub(crate) fn held_by(holder: String) -> (&'static str, Option<Verdict>, Option<String>) {
    (
        "waiting",
        Some(Verdict::Waiting(Reason::LeaseHeldByOther, holder.clone())),
        Some(holder),
    )
}
