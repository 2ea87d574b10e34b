//! `nodejob controller`: the declarative rolls reconciled. A [`NodeUpgrade`] written to the
//! cluster is rolled by the upgrade driver, as `nodejob upgrade` would roll it, and its status
//! says how it goes; the controller keeps nothing of its own: what it acts on is the resource,
//! the nodes' records and the Lease, so a controller restarted anywhere resumes.
//!
//! ```text
//!  list the NodeUpgrades ─▶ reconcile each ─▶ wait for: a change (the watch from the list's
//!        ▲                                               version), the run ending, the status
//!        │                                               interval, a retry time
//!        └──────────── the run ended, a retry is due, the watch expired ◀──┘
//!
//!  reconcile:  being deleted ─▶ its run asked to stop at a step boundary; once none runs,
//!                               the finalizer removed
//!              no finalizer ─▶ added (before any step, so a delete waits for the run)
//!              its run under way ─▶ a new generation or `paused`: asked to stop at a step
//!                                   boundary (the next generation starts once it stopped)
//!              another's run under way ─▶ waits (one operation at a time)
//!              paused ─▶ status Paused;  settled for this generation ─▶ nothing
//!              else ─▶ the spec read as the command reads its flags ([`Planner`]): refused
//!                      ─▶ Stalled (InvalidSpec); a plan ─▶ the driver runs it
//! ```
//!
//! How a run ends becomes the status: every node at the target is `Ready`; a failed node is
//! `Stalled` (not retried until the spec changes: a retry is an edit, as the command's printed
//! retry is a command); a closed window, the Lease of another operation or the pause switch
//! is waited out, retried after [`Settings::retry_after`]. Between, the status follows the
//! run's progress at most every [`Settings::status_every`].
//!
//! It runs over core's traits, so the same loop drives a real cluster and the in-memory one
//! in virtual time (`nodejob controller --simulate`).

pub mod metrics;
pub mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nodejob_core::lease::{Claim, LeaseConfig, acquire};
use nodejob_core::{ApiError, ApiResult, Change, CustomApi, JobApi, LeaseApi, NodeApi, PodApi};
use nodejob_crd::{NodeUpgrade, NodeUpgradeSpec, NodeUpgradeStatus, Reason, Roll, RollApi};
use tokio::task::JoinHandle;
use upgrade_driver::{EventSink, Outcome, Plan, Report, Stop};

use crate::metrics::Metrics;
use crate::status::{Tracker, Verdict, outcome, status};

/// The field manager of the controller's status writes.
pub const FIELD_MANAGER: &str = "nodejob-controller";
/// The finalizer the controller puts on each resource before it acts on it: a resource
/// deleted mid-roll stays until its run stopped at a step boundary.
pub const FINALIZER: &str = "nodejob.stratum.ciq.com/stopped-at-a-step-boundary";

/// How a spec becomes the driver's plan: the command's own reading of its flags, so a
/// resource and a command line are refused for the same reasons, in the same words.
pub trait Planner: Send + Sync {
    /// The plan of `spec`, or why it is refused (naming the field).
    fn upgrade(&self, spec: &NodeUpgradeSpec) -> Result<Plan, String>;

    /// A driver's refusal of a run (`refused without `skew``) said in the spec's words.
    fn said(&self, refusal: String) -> String {
        refusal
    }
}

/// The controller's pace.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// At most one status write in this span while a run goes.
    pub status_every: Duration,
    /// A run that waits (a closed window, the Lease of another, the pause switch) is tried
    /// again after this.
    pub retry_after: Duration,
    /// How long one watch call waits before the list is read again.
    pub watch_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            status_every: Duration::from_secs(5),
            retry_after: Duration::from_secs(60),
            watch_timeout: Duration::from_secs(290),
        }
    }
}

/// The run under way: of which resource, at which generation.
struct Running {
    /// Set once the run started a step on this replica's own node: it stops at the next step
    /// boundary and the leadership is handed over (see [`Controller::on_node`]).
    handing_over: Arc<AtomicBool>,
    name: String,
    uid: String,
    generation: i64,
    stop: Stop,
    tracker: Arc<Tracker>,
    written: u64,
    task: JoinHandle<Result<Report, upgrade_driver::Error>>,
}

/// A controller that is dropped (its process gone, as a crash leaves it) takes its run with
/// it: the run's task is aborted, as the process's death would end it, never left behind.
impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The resources waiting to be tried again, by `(uid, generation)`: when (the backend's
/// clock). A new generation is not held by the wait of an older one.
type Waits = BTreeMap<(String, i64), Duration>;

/// How a reconcile loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ran {
    /// On the stop asked.
    Stopped,
    /// Its run reached this replica's own node and stopped there, before its drain: the
    /// leadership goes to another replica, which drains this one's node.
    HandedOver,
}

/// What woke the loop.
enum Woke {
    Changes(ApiResult<nodejob_crd::RollChanges<NodeUpgrade>>),
    Ended(Box<Result<Report, upgrade_driver::Error>>),
    Tick,
    Retry,
    Stop,
}

/// The controller over `api`.
pub struct Controller<A: ?Sized> {
    api: Arc<A>,
    planner: Arc<dyn Planner>,
    settings: Settings,
    metrics: Arc<Metrics>,
    node: Option<String>,
}

impl<A> Controller<A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + CustomApi + ?Sized + 'static,
{
    /// A controller of the resources of `api`'s cluster.
    pub fn new(api: Arc<A>, planner: Arc<dyn Planner>, settings: Settings) -> Self {
        Controller {
            api,
            planner,
            settings,
            metrics: Arc::new(Metrics::new()),
            node: None,
        }
    }

    /// The controller, told the node it runs on (a Pod's `spec.nodeName`): every roll holds
    /// that node to the end ([`upgrade_driver::PlanSpec::last`]), and, elected
    /// ([`Controller::run_elected`]), a leader whose run starts on that node stops at the next
    /// step boundary (the node cordoned, recorded in flight, not drained) and hands the
    /// leadership over: another replica, on a node already rolled, carries the node on and
    /// drains it. A replica that finds no other to take over leads again and drains its own
    /// node itself (the next leader resumes the run).
    #[must_use]
    pub fn on_node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// The controller, its figures told to `metrics` (the ones `/metrics` serves; its API
    /// requests are counted by wrapping the API in [`metrics::Counted`] before
    /// [`Controller::new`]).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Its figures.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// As [`Controller::run`], while this replica leads: the Lease of `election` (a Lease of
    /// the controllers' own, not the rolls' one) is taken when free or expired and renewed
    /// every third of its duration; a replica that cannot take it waits and tries again. A
    /// leader whose renewal fails stops reconciling (its run stops at a step boundary) and
    /// goes back to waiting; on `stop` it releases the Lease, so another leads at once. The
    /// rolls' own fenced Lease still guards every write: two leaders for a moment never run a
    /// host step twice.
    ///
    /// # Errors
    /// As [`Controller::run`].
    pub async fn run_elected(&self, election: &LeaseConfig, stop: &Stop) -> ApiResult<()> {
        let claim = Claim {
            operation: "controller".into(),
            target: "leader".into(),
        };
        let every = election.duration / 3;
        // Whether this term's run hands over at this replica's node: not right after a
        // hand-over nobody took (this replica leads again: it goes on itself).
        let mut hand_over = true;
        while !stop.requested() {
            let mut held = match acquire(&*self.api, election, &claim).await {
                Ok((held, _)) => {
                    tracing::info!(lease = %election.name, identity = %election.identity, "leading");
                    self.metrics.leading(true);
                    held
                }
                // Another leads, or the apiserver did not answer: wait and try again.
                Err(_) => {
                    self.pause(every, stop).await;
                    continue;
                }
            };
            let lost = Stop::new();
            let done = Stop::new();
            let leading = async {
                loop {
                    tokio::select! {
                        () = self.api.sleep(every) => {}
                        () = stop.asked() => {}
                        () = done.asked() => {}
                    }
                    if stop.requested() || done.requested() {
                        lost.request();
                        return Some(held);
                    }
                    if held.renew(&*self.api).await.is_err() {
                        lost.request();
                        return None;
                    }
                }
            };
            let running = async {
                let ran = self.reconcile_loop(&lost, hand_over).await;
                done.request();
                ran
            };
            let (ran, held) = tokio::join!(running, leading);
            self.metrics.leading(false);
            tracing::info!(lease = %election.name, "no longer leading");
            let ran = ran?;
            if let Some(held) = held {
                let _ = held.release(&*self.api).await;
            }
            hand_over = ran != Ran::HandedOver;
            if ran == Ran::HandedOver {
                // Released: another replica takes it within a third of its duration; this one
                // stands aside for a whole duration before it tries again.
                tracing::info!(lease = %election.name, node = ?self.node, "handed the leadership over before this replica's node is drained");
                self.pause(election.duration, stop).await;
            }
        }
        Ok(())
    }

    /// Sleeps `span` on the backend's clock, cut short by `stop`.
    async fn pause(&self, span: Duration, stop: &Stop) {
        tokio::select! {
            () = self.api.sleep(span) => {}
            () = stop.asked() => {}
        }
    }

    /// Reconciles until `stop` is requested: then the run under way is asked to stop at a
    /// step boundary, awaited, and its status written.
    ///
    /// # Errors
    /// An API error the loop cannot go on from (the kind not installed, no right to list it).
    pub async fn run(&self, stop: &Stop) -> ApiResult<()> {
        self.reconcile_loop(stop, false).await.map(|_| ())
    }

    /// [`Controller::run`]; `hand_over`: a run that reaches this replica's node stops there,
    /// and the loop ends with [`Ran::HandedOver`].
    async fn reconcile_loop(&self, stop: &Stop, hand_over: bool) -> ApiResult<Ran> {
        let mut running: Option<Running> = None;
        let mut retry = Waits::new();
        let mut relist = true;
        let mut rv = String::new();
        loop {
            if relist {
                let at = self.api.list_rolls_at::<NodeUpgrade>().await?;
                rv = at.resource_version;
                for roll in at.rolls {
                    self.reconciled(roll, &mut running, &mut retry, hand_over)
                        .await?;
                }
                relist = false;
            }
            let woke = self
                .wait(&rv, &mut running, retry.values().min().copied(), stop)
                .await;
            match woke {
                Woke::Changes(Ok(changes)) => {
                    rv = changes.resource_version;
                    for change in changes.changes {
                        if let Change::Applied(roll) = change {
                            self.reconciled(roll, &mut running, &mut retry, hand_over)
                                .await?;
                        }
                    }
                }
                // Gone (410), or the watch broke: read the list again.
                Woke::Changes(Err(_)) => relist = true,
                Woke::Ended(result) => {
                    let ended = running.take().expect("a run ended");
                    let handed = ended.handing_over.load(Ordering::SeqCst);
                    self.ended(ended, *result, &mut retry).await?;
                    if handed {
                        return Ok(Ran::HandedOver);
                    }
                    relist = true;
                }
                Woke::Tick => {
                    if let Some(run) = running.as_mut() {
                        self.progress(run).await;
                    }
                }
                Woke::Retry => {
                    let now = self.api.now();
                    retry.retain(|_, at| *at > now);
                    relist = true;
                }
                Woke::Stop => {
                    if let Some(mut run) = running.take() {
                        run.stop.request();
                        let result = (&mut run.task).await.unwrap_or_else(|e| Err(panicked(e)));
                        self.ended(run, result, &mut retry).await?;
                    }
                    return Ok(Ran::Stopped);
                }
            }
        }
    }

    /// Waits for whatever comes first.
    async fn wait(
        &self,
        rv: &str,
        running: &mut Option<Running>,
        retry: Option<Duration>,
        stop: &Stop,
    ) -> Woke {
        let api = &self.api;
        let changes = api.wait_rolls::<NodeUpgrade>(rv, self.settings.watch_timeout);
        let has_run = running.is_some();
        let ended = async {
            match running.as_mut() {
                Some(run) => (&mut run.task).await.unwrap_or_else(|e| Err(panicked(e))),
                None => std::future::pending().await,
            }
        };
        let tick = async {
            if has_run {
                api.sleep(self.settings.status_every).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let retry = async {
            match retry {
                Some(at) => api.sleep(at.saturating_sub(api.now())).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            c = changes => Woke::Changes(c),
            r = ended => Woke::Ended(Box::new(r)),
            () = tick => Woke::Tick,
            () = retry => Woke::Retry,
            () = stop.asked() => Woke::Stop,
        }
    }

    /// [`Controller::reconcile`], counted and its error logged.
    async fn reconciled(
        &self,
        roll: NodeUpgrade,
        running: &mut Option<Running>,
        retry: &mut Waits,
        hand_over: bool,
    ) -> ApiResult<()> {
        let name = roll.metadata.name.clone().unwrap_or_default();
        let result = self.reconcile(roll, running, retry, hand_over).await;
        self.metrics
            .reconciled(NodeUpgrade::KIND.kind, result.is_err());
        if let Err(e) = &result {
            tracing::error!(nodeupgrade = %name, error = %e, "reconcile failed");
        }
        result
    }

    /// One resource as it stands now: see the crate docs.
    async fn reconcile(
        &self,
        roll: NodeUpgrade,
        running: &mut Option<Running>,
        retry: &mut Waits,
        hand_over: bool,
    ) -> ApiResult<()> {
        let name = roll.metadata.name.clone().unwrap_or_default();
        let uid = roll.metadata.uid.clone().unwrap_or_default();
        let generation = roll.metadata.generation.unwrap_or(1);
        let ours = running.as_ref().filter(|r| r.uid == uid);
        if roll.metadata.deletion_timestamp.is_some() {
            match ours {
                Some(run) => run.stop.request(),
                None => self.release(roll).await?,
            }
            return Ok(());
        }
        let roll = if has_finalizer(&roll) {
            roll
        } else {
            let mut with = roll;
            with.metadata
                .finalizers
                .get_or_insert_default()
                .push(FINALIZER.into());
            match self.api.replace_roll(&with).await {
                Ok(roll) => roll,
                // Changed meanwhile: its change comes next on the watch.
                Err(e) if e.is_conflict() || e.is_not_found() => return Ok(()),
                Err(e) => return Err(e),
            }
        };
        if let Some(run) = running.as_ref() {
            if run.uid == uid && (run.generation != generation || roll.spec.paused) {
                run.stop.request();
            }
            return Ok(());
        }
        let before = roll.status.as_ref();
        self.metrics.paused(roll.spec.paused);
        if roll.spec.paused {
            if !says(before, generation, Reason::PausedBySpec) {
                tracing::info!(nodeupgrade = %name, generation, "paused by its spec");
                self.write(
                    &name,
                    before,
                    generation,
                    &Verdict::PausedBySpec,
                    &Tracker::default(),
                )
                .await;
            }
            return Ok(());
        }
        if outcome(before, generation).is_some() {
            return Ok(());
        }
        if retry.contains_key(&(uid.clone(), generation)) {
            return Ok(());
        }
        let plan = match self.planner.upgrade(&roll.spec).and_then(|p| self.held(p)) {
            Ok(plan) => plan,
            Err(why) => {
                tracing::warn!(nodeupgrade = %name, generation, refused = %why, "spec refused");
                let verdict = Verdict::Stalled(Reason::InvalidSpec, why);
                self.write(&name, before, generation, &verdict, &Tracker::default())
                    .await;
                return Ok(());
            }
        };
        // A closed window is waited out here, holding no Lease: tried again as it opens.
        if let Some(window) = plan.spec().window.as_ref()
            && let Ok(tz) = window.validate()
        {
            let now = self.api.wall_time();
            if !window.is_open(&tz, now)
                && let Some(opens) = window.next_open(&tz, now)
            {
                let wait = now.duration_until(opens).unsigned_abs();
                tracing::info!(nodeupgrade = %name, generation, opens = %opens, "waiting for its window");
                retry.insert((uid, generation), self.api.now() + wait);
                let verdict = Verdict::Window(opens);
                self.write(&name, before, generation, &verdict, &Tracker::default())
                    .await;
                return Ok(());
            }
        }
        let tracker = Arc::new(Tracker::default());
        let stop = Stop::new();
        tracing::info!(nodeupgrade = %name, generation, target = %roll.spec.target, "run started");
        self.metrics.lease_holder(Some(&plan.spec().identity));
        let handing_over = Arc::new(AtomicBool::new(false));
        let task = {
            let (api, tracker, stop) = (self.api.clone(), tracker.clone(), stop.clone());
            let metrics = self.metrics.clone();
            let own = self.node.clone().filter(|_| hand_over);
            let handing = handing_over.clone();
            tokio::spawn(async move {
                let told = api.clone();
                let stopping = stop.clone();
                let sink: Arc<dyn upgrade_driver::ProgressSink> =
                    Arc::new(move |event: &upgrade_driver::Progress| {
                        // This replica's node starts its first step (a node at the target
                        // already starts none): the stop asked here ends the node at the next
                        // step boundary, cordoned and recorded in flight, before its drain;
                        // the next leader carries it on.
                        if let (Some(own), upgrade_driver::Progress::StepStarted { node, .. }) =
                            (&own, event)
                            && node == own
                        {
                            handing.store(true, Ordering::SeqCst);
                            stopping.request();
                        }
                        tracker.event(event);
                        let now = told.wall_time().as_millisecond() as f64 / 1000.0;
                        metrics.progress(event, now);
                    });
                upgrade_driver::run_until(&*api, &plan, sink, &stop).await
            })
        };
        self.write(&name, before, generation, &Verdict::Progressing, &tracker)
            .await;
        *running = Some(Running {
            handing_over,
            name,
            uid,
            generation,
            stop,
            tracker,
            written: 0,
            task,
        });
        Ok(())
    }

    /// `plan` with this replica's node held to the end, if it knows its node.
    fn held(&self, plan: Plan) -> Result<Plan, String> {
        let Some(node) = &self.node else {
            return Ok(plan);
        };
        let mut spec = plan.spec().clone();
        spec.last = Some(node.clone());
        Plan::build(spec).map_err(|e| e.to_string())
    }

    /// The status of the run under way, when its progress moved since the last write.
    async fn progress(&self, run: &mut Running) {
        let version = run.tracker.version();
        if version == run.written {
            return;
        }
        if let Ok(roll) = self.api.get_roll::<NodeUpgrade>(&run.name).await
            && roll.metadata.uid.as_deref() == Some(&run.uid)
        {
            let before = roll.status.as_ref();
            self.write(
                &run.name,
                before,
                run.generation,
                &Verdict::Progressing,
                &run.tracker,
            )
            .await;
            run.written = version;
        }
        self.metrics.counts(&run.tracker.counts().0);
    }

    /// A run ended: its status written, or, for a resource being deleted, its finalizer
    /// removed.
    async fn ended(
        &self,
        run: Running,
        result: Result<Report, upgrade_driver::Error>,
        retry: &mut Waits,
    ) -> ApiResult<()> {
        let roll = match self.api.get_roll::<NodeUpgrade>(&run.name).await {
            Ok(roll) if roll.metadata.uid.as_deref() == Some(&run.uid) => roll,
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        if roll.metadata.deletion_timestamp.is_some() {
            return self.release(roll).await;
        }
        let asked = run.stop.requested();
        self.metrics.counts(&run.tracker.counts().0);
        self.metrics.lease_holder(None);
        let said = match &result {
            Ok(report) => match &report.outcome {
                Outcome::Done => "completed",
                Outcome::Failed { .. } => "failed",
                Outcome::Stopped { .. } if asked => "stopped",
                Outcome::Stopped { .. } => "waiting",
                Outcome::Paused { .. } => "paused",
            },
            Err(upgrade_driver::Error::Core(nodejob_core::Error::LeaseHeld { holder, .. })) => {
                self.metrics.lease_holder(Some(holder));
                "waiting"
            }
            Err(_) => "refused",
        };
        self.metrics.ended(said, result.as_ref().ok());
        tracing::info!(nodeupgrade = %run.name, generation = run.generation, outcome = said, "run ended");
        let verdict = match result {
            Ok(report) => match report.outcome {
                Outcome::Done => Verdict::Completed,
                Outcome::Failed { retry: what, .. } => Verdict::Stalled(Reason::NodeFailed, what),
                // Stopped by us: the next reconcile starts the new generation, or says paused.
                Outcome::Stopped { .. } if asked => return Ok(()),
                Outcome::Stopped { why } => {
                    let reason = if why.contains("window") {
                        Reason::WindowClosed
                    } else {
                        Reason::Progressing
                    };
                    Verdict::Waiting(reason, why)
                }
                Outcome::Paused { why } => Verdict::Waiting(Reason::PausedBySwitch, why),
            },
            Err(upgrade_driver::Error::Core(nodejob_core::Error::LeaseHeld { holder, .. })) => {
                Verdict::Waiting(Reason::LeaseHeldByOther, holder)
            }
            Err(e) => {
                let text = self.planner.said(e.to_string());
                let reason = if text.contains("skew") {
                    Reason::SkewRefused
                } else {
                    Reason::InvalidSpec
                };
                Verdict::Stalled(reason, text)
            }
        };
        let generation = roll.metadata.generation.unwrap_or(run.generation);
        if matches!(verdict, Verdict::Waiting(..)) {
            let at = self.api.now() + self.settings.retry_after;
            retry.insert((run.uid.clone(), run.generation), at);
        }
        if generation == run.generation {
            self.write(
                &run.name,
                roll.status.as_ref(),
                generation,
                &verdict,
                &run.tracker,
            )
            .await;
        }
        Ok(())
    }

    /// Removes the finalizer of a resource being deleted (no run of it goes on).
    async fn release(&self, mut roll: NodeUpgrade) -> ApiResult<()> {
        if !has_finalizer(&roll) {
            return Ok(());
        }
        if let Some(f) = roll.metadata.finalizers.as_mut() {
            f.retain(|f| f != FINALIZER);
        }
        match self.api.replace_roll(&roll).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Writes the status; a failure is left to the next write (the status follows the run, it
    /// does not steer it).
    async fn write(
        &self,
        name: &str,
        before: Option<&NodeUpgradeStatus>,
        generation: i64,
        verdict: &Verdict,
        tracker: &Tracker,
    ) {
        let now = self.api.wall_time();
        let status = status(before, generation, verdict, tracker, now);
        let _ = self
            .api
            .apply_roll_status::<NodeUpgrade>(name, FIELD_MANAGER, &status)
            .await;
    }
}

/// Whether the controller's finalizer is on `roll`.
fn has_finalizer(roll: &NodeUpgrade) -> bool {
    (roll.metadata.finalizers.iter().flatten()).any(|f| f == FINALIZER)
}

/// Whether `status` says `reason` for `generation` already.
fn says(status: Option<&NodeUpgradeStatus>, generation: i64, reason: Reason) -> bool {
    status.is_some_and(|s| {
        s.observed_generation == Some(generation)
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == reason.as_str())
    })
}

fn panicked(e: tokio::task::JoinError) -> upgrade_driver::Error {
    upgrade_driver::Error::Core(nodejob_core::Error::Api {
        op: nodejob_core::Operation::named(
            nodejob_core::Action::Watching,
            nodejob_core::ObjectKind::Node,
            "",
            "the run",
        ),
        cause: ApiError::new(
            nodejob_core::ErrorKind::Other,
            0,
            format!("the run panicked: {e}"),
        ),
    })
}
