//! `nodejob controller`: the declarative rolls reconciled. A [`NodeUpgrade`] written to the
//! cluster is rolled by the upgrade driver, as `nodejob upgrade` would roll it; a
//! [`CARotation`] is rotated (or, with `abort: true`, aborted) by the CA rotation's driver,
//! as `nodejob rotate-ca` would; each status says how it goes. The controller keeps nothing
//! of its own: what it acts on is the resource, the nodes' records and the Lease, so a
//! controller restarted anywhere resumes.
//!
//! ```text
//!  each kind (kind.rs: what differs; upgrade.rs, rotation.rs), a loop of its own:
//!  list the kind ─▶ reconcile each ─▶ wait for: a change (the informer's: a watch from
//!        ▲          (each read again)            the list's version, or kube-runtime's), the
//!        │                                       run ending, the status interval, a retry
//!        └──────── the run ended, a retry is due, the watch expired ◀──┘
//!
//!  reconcile:  being deleted ─▶ its run asked to stop at a step boundary; once none runs,
//!                               the finalizer removed
//!              no finalizer ─▶ added (before any step, so a delete waits for the run)
//!              its run under way ─▶ a new generation or `paused`: asked to stop at a step
//!                                   boundary (the next generation starts once it stopped)
//!              another's run under way ─▶ waits (one run of a kind at a time)
//!              paused ─▶ status Paused;  settled for this generation ─▶ nothing
//!              else ─▶ the spec read as the command reads its flags ([`Planner`]): refused
//!                      ─▶ Stalled (InvalidSpec); a plan ─▶ the driver runs it
//! ```
//!
//! One operation at a time across both kinds is the rolls' fenced Lease's rule, as between
//! two commands: a run that finds it held (by the other kind's run, or a person's command)
//! ends at once, its resource waiting with the holder named, tried again after
//! [`Settings::retry_after`]. How a run ends becomes the status: every node at the target (or
//! on the new CA alone) is `Ready`; a failed node is `Stalled` (not retried until the spec
//! changes: a retry is an edit, as the command's printed retry is a command); a closed
//! window, the Lease of another operation or the pause switch is waited out. Between, the
//! status follows the run's progress at most every [`Settings::status_every`].
//!
//! It runs over core's traits, so the same loop drives a real cluster and the in-memory one
//! in virtual time (`nodejob controller --simulate`). Where the resources and their changes
//! come from is an [`Informer`]: its own list and watch, or one given
//! ([`Controller::with_informers`]; on a cluster, kube-runtime's controller).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nodejob_core::lease::{Claim, LeaseConfig, acquire};
use nodejob_core::{ApiError, ApiResult};
use nodejob_crd::{CARotation, NodeUpgrade, Reason, RollApi};
use tokio::task::JoinHandle;
use upgrade_driver::Stop;

use crate::informer::Source;
pub use crate::kind::Apis;
use crate::kind::{Declared, Ended, Hooks};
use crate::metrics::Metrics;
use crate::status::{Verdict, outcome_of};

mod informer;
pub mod kind;
pub mod metrics;
mod planner;
pub mod rotation;
pub mod status;
mod upgrade;

pub use crate::informer::{Informer, Informers};
pub use crate::planner::Planner;

/// The field manager of the controller's status writes.
pub const FIELD_MANAGER: &str = "nodejob-controller";
/// The finalizer the controller puts on each resource before it acts on it: a resource
/// deleted mid-roll stays until its run stopped at a step boundary.
pub const FINALIZER: &str = "nodejob.stratum.ciq.com/stopped-at-a-step-boundary";

/// The controller's pace.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// At most one status write in this span while a run goes.
    pub status_every: Duration,
    /// A run that waits (a closed window, the Lease of another, the pause switch) is tried
    /// again after this; a kind whose CRD is not installed is listed again after it.
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

/// The run under way of a resource of kind `K`: which, at which generation.
struct Running<K: Declared> {
    /// Set once the run started a step on this replica's own node: it stops at the next step
    /// boundary and the leadership is handed over (see [`Controller::on_node`]).
    handing_over: Arc<AtomicBool>,
    name: String,
    uid: String,
    generation: i64,
    stop: Stop,
    tracker: Arc<K::Tracker>,
    written: u64,
    task: JoinHandle<Ended>,
}

/// A controller that is dropped (its process gone, as a crash leaves it) takes its run with
/// it: the run's task is aborted, as the process's death would end it, never left behind.
impl<K: Declared> Drop for Running<K> {
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

/// What woke a kind's loop.
enum Woke<K> {
    Changes(ApiResult<Vec<K>>),
    Ended(Ended),
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
    progress: Option<Arc<dyn upgrade_driver::ProgressSink>>,
    informers: Option<Arc<dyn Informers>>,
}

impl<A: Apis + ?Sized> Controller<A> {
    /// A controller of the resources of `api`'s cluster.
    pub fn new(api: Arc<A>, planner: Arc<dyn Planner>, settings: Settings) -> Self {
        Controller {
            api,
            planner,
            settings,
            metrics: Arc::new(Metrics::new()),
            node: None,
            progress: None,
            informers: None,
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

    /// The controller, each `NodeUpgrade` run's progress also told to `sink`, as the driver
    /// tells it (for a caller that shows or checks the runs: the soaks run through the
    /// controller check their invariants on it).
    #[must_use]
    pub fn with_progress(mut self, sink: Arc<dyn upgrade_driver::ProgressSink>) -> Self {
        self.progress = Some(sink);
        self
    }

    /// The controller, learning each kind's resources and their changes from `informers`
    /// rather than by its own list and watch through core's traits (on a real cluster,
    /// `nodejob-cli` gives kube-runtime's controller).
    #[must_use]
    pub fn with_informers(mut self, informers: Arc<dyn Informers>) -> Self {
        self.informers = Some(informers);
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

    /// Reconciles both kinds until `stop` is requested: then the run under way is asked to
    /// stop at a step boundary, awaited, and its status written. Each kind has its loop (as
    /// kube-runtime has a controller per kind); one operation at a time across both is the
    /// rolls' fenced Lease's rule: a resource whose run finds it held waits, its status naming
    /// the holder.
    ///
    /// No error of the API ends it: a list, a watch or a write refused (the apiserver away, a
    /// CRD not installed yet, no right to a kind) is logged and tried again, backing off up to
    /// [`Settings::retry_after`].
    ///
    /// # Errors
    /// None today; the `Result` is kept for a backend that cannot go on at all.
    pub async fn run(&self, stop: &Stop) -> ApiResult<()> {
        self.reconcile_loop(stop, false).await.map(|_| ())
    }

    /// [`Controller::run`]; `hand_over`: a `NodeUpgrade` run that reaches this replica's node
    /// stops there, and the loops end with [`Ran::HandedOver`].
    async fn reconcile_loop(&self, stop: &Stop, hand_over: bool) -> ApiResult<Ran> {
        let both = Stop::new();
        let relay = async {
            tokio::select! {
                () = stop.asked() => both.request(),
                () = both.asked() => {}
            }
        };
        let upgrades = async {
            let ran = self.kind_loop::<NodeUpgrade>(&both, hand_over).await;
            both.request();
            ran
        };
        let rotations = async {
            let ran = self.kind_loop::<CARotation>(&both, false).await;
            both.request();
            ran
        };
        let ((), upgrades, rotations) = tokio::join!(relay, upgrades, rotations);
        let (upgrades, rotations) = (upgrades?, rotations?);
        Ok(
            if upgrades == Ran::HandedOver || rotations == Ran::HandedOver {
                Ran::HandedOver
            } else {
                Ran::Stopped
            },
        )
    }

    /// Lists the resources of kind `K` (waiting while its CRD is not installed), reconciles
    /// each, then waits on their watch, the run under way, the status interval and the
    /// earliest retry.
    async fn kind_loop<K: Declared>(&self, stop: &Stop, hand_over: bool) -> ApiResult<Ran> {
        let mut running: Option<Running<K>> = None;
        let mut retry = Waits::new();
        let mut relist = true;
        // Where the kind's resources and their changes come from.
        let mut source: Source<A, K> = match &self.informers {
            Some(informers) => Source::Given(K::informer(&**informers)),
            None => Source::own(self.api.clone(), self.settings.watch_timeout),
        };
        // After an error (a list or a reconcile refused, the apiserver away, the kind not
        // served yet), the list is read again then, backing off 1 s, 2 s, ... up to
        // `retry_after`: no error of the API ends the controller, as kube-runtime's requeue.
        let mut relist_at: Option<Duration> = None;
        let mut backoff = Backoff::new(self.settings.retry_after);
        let mut absent_said = false;
        loop {
            if relist && relist_at.is_none_or(|at| at <= self.api.now()) {
                relist_at = None;
                match source.list().await {
                    Ok(rolls) => {
                        relist = false;
                        absent_said = false;
                        let mut failed = false;
                        for roll in rolls {
                            failed |= (self.reconciled(roll, &mut running, &mut retry, hand_over))
                                .await
                                .is_err();
                        }
                        if failed {
                            relist = true;
                            relist_at = Some(self.api.now() + backoff.next());
                        } else {
                            backoff.reset();
                        }
                    }
                    Err(e) => {
                        let again = backoff.next();
                        if !e.is_not_found() {
                            tracing::warn!(kind = K::KIND.kind, error = %e, "listing failed: listed again in {again:?}");
                        } else if !absent_said {
                            // Its CRD not installed (yet): the other kind goes on.
                            tracing::warn!(
                                kind = K::KIND.kind,
                                "not served by the apiserver (its CRD is not installed): listed again until it is"
                            );
                            absent_said = true;
                        }
                        relist_at = Some(self.api.now() + again);
                    }
                }
            }
            let next = (retry.values().copied()).chain(relist_at).min();
            let woke = self.wait(&mut source, &mut running, next, stop).await;
            match woke {
                Woke::Changes(Ok(changed)) => {
                    for roll in changed {
                        if (self.reconciled(roll, &mut running, &mut retry, hand_over))
                            .await
                            .is_err()
                        {
                            relist = true;
                            relist_at = Some(self.api.now() + backoff.next());
                        }
                    }
                }
                // Gone (410), or the watch broke: read the list again.
                Woke::Changes(Err(_)) => relist = true,
                Woke::Ended(end) => {
                    let ended = running.take().expect("a run ended");
                    let handed = ended.handing_over.load(Ordering::SeqCst);
                    self.ended_logged(ended, end, &mut retry).await;
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
                        let end = (&mut run.task).await.unwrap_or_else(panicked);
                        self.ended_logged(run, end, &mut retry).await;
                    }
                    return Ok(Ran::Stopped);
                }
            }
        }
    }

    /// [`Controller::ended`], its error logged: the next list reads the resource again.
    async fn ended_logged<K: Declared>(&self, run: Running<K>, end: Ended, retry: &mut Waits) {
        let name = run.name.clone();
        if let Err(e) = self.ended(run, end, retry).await {
            tracing::error!(kind = K::KIND.kind, name = %name, error = %e, "writing how a run ended failed");
        }
    }

    /// Waits for whatever comes first.
    async fn wait<K: Declared>(
        &self,
        source: &mut Source<A, K>,
        running: &mut Option<Running<K>>,
        retry: Option<Duration>,
        stop: &Stop,
    ) -> Woke<K> {
        let api = &self.api;
        // Until a list was read, `changes` waits for ever (the next list comes first).
        let changes = source.changes();
        let has_run = running.is_some();
        let ended = async {
            match running.as_mut() {
                Some(run) => (&mut run.task).await.unwrap_or_else(panicked),
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
            e = ended => Woke::Ended(e),
            () = tick => Woke::Tick,
            () = retry => Woke::Retry,
            () = stop.asked() => Woke::Stop,
        }
    }

    /// [`Controller::reconcile`], counted and its error logged.
    async fn reconciled<K: Declared>(
        &self,
        roll: K,
        running: &mut Option<Running<K>>,
        retry: &mut Waits,
        hand_over: bool,
    ) -> ApiResult<()> {
        let name = roll.meta().name.clone().unwrap_or_default();
        let result = self.reconcile(roll, running, retry, hand_over).await;
        self.metrics.reconciled(K::KIND.kind, result.is_err());
        match &result {
            Err(e) if e.is_conflict() => {
                tracing::debug!(kind = K::KIND.kind, name = %name, error = %e, "changed meanwhile: read again");
            }
            Err(e) => {
                tracing::error!(kind = K::KIND.kind, name = %name, error = %e, "reconcile failed");
            }
            Ok(()) => {}
        }
        result
    }

    /// One resource as it stands now: see the crate docs.
    async fn reconcile<K: Declared>(
        &self,
        roll: K,
        running: &mut Option<Running<K>>,
        retry: &mut Waits,
        hand_over: bool,
    ) -> ApiResult<()> {
        let kind = K::KIND.kind;
        let name = roll.meta().name.clone().unwrap_or_default();
        // Decided on as it stands now, not as listed or told: a list or a watch (an
        // informer's cache above all) may predate this controller's own last status write,
        // and a run would start again on a resource it has just settled.
        let roll = match self.api.get_roll::<K>(&name).await {
            Ok(now) => now,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        let uid = roll.meta().uid.clone().unwrap_or_default();
        let generation = roll.meta().generation.unwrap_or(1);
        let ours = running.as_ref().filter(|r| r.uid == uid);
        if roll.meta().deletion_timestamp.is_some() {
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
            with.meta_mut()
                .finalizers
                .get_or_insert_default()
                .push(FINALIZER.into());
            match self.api.replace_roll(&with).await {
                Ok(roll) => roll,
                // Gone meanwhile: nothing to do.
                Err(e) if e.is_not_found() => return Ok(()),
                // Changed meanwhile (a change an informer filtering by generation may not
                // tell): an error, so the list is read again.
                Err(e) => return Err(e),
            }
        };
        if let Some(run) = running.as_ref() {
            if run.uid == uid && (run.generation != generation || roll.paused()) {
                run.stop.request();
            }
            return Ok(());
        }
        let before = roll.current();
        let empty = K::Tracker::default();
        self.metrics.paused(roll.paused());
        if roll.paused() {
            if !says::<K>(before, generation, Reason::PausedBySpec) {
                tracing::info!(kind, name = %name, generation, "paused by its spec");
                self.write::<K>(&name, before, generation, &Verdict::PausedBySpec, &empty)
                    .await;
            }
            return Ok(());
        }
        if outcome::<K>(before, generation).is_some() {
            return Ok(());
        }
        if retry.contains_key(&(uid.clone(), generation)) {
            return Ok(());
        }
        let plan = match roll.plan(&*self.planner, self.node.as_deref()) {
            Ok(plan) => plan,
            Err(why) => {
                tracing::warn!(kind, name = %name, generation, refused = %why, "spec refused");
                let verdict = Verdict::Stalled(Reason::InvalidSpec, why);
                self.write::<K>(&name, before, generation, &verdict, &empty)
                    .await;
                return Ok(());
            }
        };
        // A closed window is waited out here, holding no Lease: tried again as it opens.
        if let Some(window) = K::window(&plan)
            && let Ok(tz) = window.validate()
        {
            let now = self.api.wall_time();
            if !window.is_open(&tz, now)
                && let Some(opens) = window.next_open(&tz, now)
            {
                let wait = now.duration_until(opens).unsigned_abs();
                tracing::info!(kind, name = %name, generation, opens = %opens, "waiting for its window");
                retry.insert((uid, generation), self.api.now() + wait);
                let verdict = Verdict::Window(opens);
                self.write::<K>(&name, before, generation, &verdict, &empty)
                    .await;
                return Ok(());
            }
        }
        let tracker = Arc::new(K::Tracker::default());
        let stop = Stop::new();
        tracing::info!(kind, name = %name, generation, "run started");
        let handing_over = Arc::new(AtomicBool::new(false));
        let hooks = Hooks {
            metrics: self.metrics.clone(),
            own: self.node.clone().filter(|_| hand_over),
            handing_over: handing_over.clone(),
            stop: stop.clone(),
            planner: self.planner.clone(),
            progress: self.progress.clone(),
        };
        let task = K::spawn(self.api.clone(), plan, tracker.clone(), hooks);
        self.write::<K>(&name, before, generation, &Verdict::Progressing, &tracker)
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

    /// The status of the run under way, when its progress moved since the last write.
    async fn progress<K: Declared>(&self, run: &mut Running<K>) {
        let version = K::moved(&run.tracker);
        if version == run.written {
            return;
        }
        if let Ok(roll) = self.api.get_roll::<K>(&run.name).await
            && roll.meta().uid.as_deref() == Some(&run.uid)
        {
            let before = roll.current();
            self.write::<K>(
                &run.name,
                before,
                run.generation,
                &Verdict::Progressing,
                &run.tracker,
            )
            .await;
            run.written = version;
        }
        K::figures(&run.tracker, &self.metrics);
    }

    /// A run ended: its status written, or, for a resource being deleted, its finalizer
    /// removed.
    async fn ended<K: Declared>(
        &self,
        run: Running<K>,
        end: Ended,
        retry: &mut Waits,
    ) -> ApiResult<()> {
        K::figures(&run.tracker, &self.metrics);
        self.metrics.lease_holder(end.holder.as_deref());
        self.metrics.ended(K::OPERATION, end.outcome, &end.versions);
        tracing::info!(kind = K::KIND.kind, name = %run.name, generation = run.generation, outcome = end.outcome, "run ended");
        let roll = match self.api.get_roll::<K>(&run.name).await {
            Ok(roll) if roll.meta().uid.as_deref() == Some(&run.uid) => roll,
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        if roll.meta().deletion_timestamp.is_some() {
            return self.release(roll).await;
        }
        // Stopped by us: the next reconcile starts the new generation, or says paused.
        let Some(verdict) = end.verdict else {
            return Ok(());
        };
        let generation = roll.meta().generation.unwrap_or(run.generation);
        if matches!(verdict, Verdict::Waiting(..)) {
            let at = self.api.now() + self.settings.retry_after;
            retry.insert((run.uid.clone(), run.generation), at);
        }
        if generation == run.generation {
            self.write::<K>(
                &run.name,
                roll.current(),
                generation,
                &verdict,
                &run.tracker,
            )
            .await;
        }
        Ok(())
    }

    /// Removes the finalizer of a resource being deleted (no run of it goes on).
    async fn release<K: Declared>(&self, mut roll: K) -> ApiResult<()> {
        if !has_finalizer(&roll) {
            return Ok(());
        }
        if let Some(f) = roll.meta_mut().finalizers.as_mut() {
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
    async fn write<K: Declared>(
        &self,
        name: &str,
        before: Option<&K::Status>,
        generation: i64,
        verdict: &Verdict,
        tracker: &K::Tracker,
    ) {
        let now = self.api.wall_time();
        let status = K::status(before, generation, verdict, tracker, now);
        let _ = self
            .api
            .apply_roll_status::<K>(name, FIELD_MANAGER, &status)
            .await;
    }
}

/// Whether the controller's finalizer is on `roll`.
fn has_finalizer<K: Declared>(roll: &K) -> bool {
    (roll.meta().finalizers.iter().flatten()).any(|f| f == FINALIZER)
}

/// How `status` says the operation ended for `generation` (see [`status::outcome`]).
fn outcome<K: Declared>(status: Option<&K::Status>, generation: i64) -> Option<bool> {
    let (observed, conditions) = K::said(status?);
    outcome_of(observed, conditions, generation)
}

/// Whether `status` says `reason` for `generation` already.
fn says<K: Declared>(status: Option<&K::Status>, generation: i64, reason: Reason) -> bool {
    status.is_some_and(|s| {
        let (observed, conditions) = K::said(s);
        observed == Some(generation)
            && conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == reason.as_str())
    })
}

/// The wait before a list is read again after an error: 1 s, doubling, at most `cap`.
struct Backoff {
    next: Duration,
    cap: Duration,
}

impl Backoff {
    fn new(cap: Duration) -> Self {
        Backoff {
            next: Duration::from_secs(1).min(cap),
            cap,
        }
    }

    /// This wait; the next one twice as long.
    fn next(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(self.cap);
        now
    }

    /// After a success: from 1 s again.
    fn reset(&mut self) {
        self.next = Duration::from_secs(1).min(self.cap);
    }
}

/// A run's task that panicked (or was cancelled) ends as a refusal naming it.
fn panicked(e: tokio::task::JoinError) -> Ended {
    let cause = ApiError::new(
        nodejob_core::ErrorKind::Other,
        0,
        format!("the run panicked: {e}"),
    );
    Ended {
        verdict: Some(Verdict::Stalled(Reason::InvalidSpec, cause.to_string())),
        outcome: "refused",
        versions: Vec::new(),
        holder: None,
    }
}
