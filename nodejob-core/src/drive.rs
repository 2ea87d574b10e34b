//! What both drivers need around their per-node steps, so the rolling upgrade and the CA
//! rotation cannot drift: the Lease as a [`Fence`] (acquire, check before every write, renew
//! while anything waits, release, and the history a report shows) and its [`FenceEvent`]s, a
//! driver's default Lease [`identity`], the plan's [`Placement`] (namespace, image, Lease),
//! its [`PlanError`] and its [`check_selection`] (selector and node names), a [`Stop`]
//! request, [`retry`] for single calls, the [`NoteSink`] adapter from core's notes to a
//! driver's progress, [`write_node_event`], [`lease_holder`], [`select_nodes`] (no node
//! selected is an error), [`is_control_plane`] and the run's [`Outcome`].
//!
//! It holds no driver's steps, progress events or per-node reports: those stay in each
//! driver, which carries the [`FenceEvent`]s in its progress as they are.
//!
//! ```text
//!   Fence::acquire ──▶ Fence::renewing(work) ──▶ Fence::release ──▶ history lines
//!                           │   ▲
//!        work: check() before every write; the renewer checks every third of the duration
//! ```

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{Either, select};
use futures::lock::Mutex as AsyncMutex;
use k8s_openapi::api::core::v1::Node;

use crate::api::{Clock, JobApi, LeaseApi, NodeApi};
use crate::error::{ApiError, Error, Result};
use crate::event::{EventType, node_event};
use crate::lease::{Acquired, Claim, Held, Holder, LeaseConfig, acquire, holder};
use crate::names::is_dns1123_subdomain;
use crate::selector::LabelSelector;
use crate::spec::{Level, Note, Sink};
use crate::wait::delete_exact_and_wait;

/// The label that marks a control-plane node: drivers take those one at a time, first.
pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// Whether `node` carries [`CONTROL_PLANE_LABEL`] (whatever its value).
pub fn is_control_plane(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(CONTROL_PLANE_LABEL))
}

/// A request to stop starting nodes: nodes in flight finish their current step. Cloned
/// handles share one flag (a signal handler holds one, the run another).
///
/// Awaitable: [`Stop::asked`] is a future that ends when a stop is requested, so a run's
/// sleeps (a window, a soak, a backoff) end early when asked to.
#[derive(Clone, Debug, Default)]
pub struct Stop(Arc<StopFlag>);

#[derive(Debug, Default)]
struct StopFlag {
    requested: AtomicBool,
    /// The tasks awaiting [`Stop::asked`], woken by [`Stop::request`].
    waiting: std::sync::Mutex<Vec<std::task::Waker>>,
}

impl Stop {
    /// A handle nobody has asked to stop yet.
    pub fn new() -> Self {
        Stop::default()
    }

    /// Asks the run to stop starting nodes; wakes every [`Stop::asked`].
    pub fn request(&self) {
        self.0.requested.store(true, Ordering::SeqCst);
        let waiting =
            std::mem::take(&mut *self.0.waiting.lock().unwrap_or_else(|e| e.into_inner()));
        for waker in waiting {
            waker.wake();
        }
    }

    /// Whether a stop was asked.
    pub fn requested(&self) -> bool {
        self.0.requested.load(Ordering::SeqCst)
    }

    /// Ends when a stop is requested (at once if it was).
    pub fn asked(&self) -> Asked<'_> {
        Asked(self)
    }
}

/// The future of [`Stop::asked`].
#[derive(Debug)]
#[must_use = "a future does nothing unless awaited"]
pub struct Asked<'a>(&'a Stop);

impl std::future::Future for Asked<'_> {
    type Output = ();

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0.requested() {
            return std::task::Poll::Ready(());
        }
        let mut waiting = (self.0.0.waiting.lock()).unwrap_or_else(|e| e.into_inner());
        if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
            waiting.push(cx.waker().clone());
        }
        drop(waiting);
        // Requested between the first look and the registration: not missed.
        if self.0.requested() {
            return std::task::Poll::Ready(());
        }
        std::task::Poll::Pending
    }
}

/// A driver's default Lease identity: `<prefix>-<pid>-<hex nanoseconds since the epoch>`, for
/// the process `pid` started at `since_epoch`: unique per process (a reused pid comes with
/// another time). The driver reads its pid and the time once, and keeps the answer for the
/// life of the process.
///
/// ```
/// # use std::time::Duration;
/// # use nodejob_core::drive::identity;
/// assert_eq!(identity("upgrade-driver", 42, Duration::from_nanos(255)), "upgrade-driver-42-ff");
/// ```
pub fn identity(prefix: &str, pid: u32, since_epoch: Duration) -> String {
    format!("{prefix}-{pid}-{:x}", since_epoch.as_nanos())
}

/// The namespace a driver's Jobs, Lease and step Events live in by default.
pub const DEFAULT_NAMESPACE: &str = "kube-system";

/// The Lease both drivers share by default: one host-mutating operation at a time.
pub const DEFAULT_LEASE_NAME: &str = "nodejob";

/// The shortest Lease duration a plan accepts.
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The longest Lease duration a plan accepts: what `leaseDurationSeconds`, an int32, holds.
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(i32::MAX as u64);

/// Where a driver's host Jobs run and which Lease fences them: the part of a plan both drivers
/// share, with its defaults ([`Placement::new`]) and its rules ([`Placement::validate`]). A
/// driver's `PlanSpec` keeps these as fields of its own and reads them back as one
/// ([`Placement`] is what it validates and acquires the Lease with).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The namespace of the host Jobs, the Lease and the step Events.
    pub namespace: String,
    /// The image of the host Jobs; `None`: core's pinned image.
    pub image: Option<String>,
    /// The Lease both drivers share.
    pub lease_name: String,
    /// Who holds the Lease: unique per process (see [`identity`]).
    pub identity: String,
    /// `leaseDurationSeconds`: renewed every third of it.
    pub lease_duration: Duration,
}

impl Placement {
    /// The defaults, held by `identity`: [`DEFAULT_NAMESPACE`], core's pinned image,
    /// [`DEFAULT_LEASE_NAME`], a 60s Lease.
    pub fn new(identity: String) -> Self {
        Placement {
            namespace: DEFAULT_NAMESPACE.into(),
            image: None,
            lease_name: DEFAULT_LEASE_NAME.into(),
            identity,
            lease_duration: Duration::from_secs(60),
        }
    }

    /// Refuses a namespace other than `kube-system` or `default`, an empty identity, a Lease
    /// shorter than [`MIN_LEASE_DURATION`] (zero included) or longer than
    /// [`MAX_LEASE_DURATION`], and a Lease name that is not a DNS-1123 subdomain, in that
    /// order. The image is checked with the Jobs ([`PlanError::job`]).
    pub fn validate(&self) -> std::result::Result<(), PlanError> {
        // The step Events are about Nodes: the apiserver takes those only in these two
        // namespaces (`legacyValidateEvent`, see crate::event).
        if self.namespace != "kube-system" && self.namespace != "default" {
            return Err(PlanError::new(
                "namespace",
                format!(
                    "{:?}: the driver's Jobs, Lease and step Events live in kube-system (or \
                     default): the apiserver accepts Events about Nodes only there",
                    self.namespace
                ),
            ));
        }
        if self.identity.is_empty() {
            return Err(PlanError::new("identity", "must not be empty"));
        }
        if self.lease_duration < MIN_LEASE_DURATION {
            return Err(PlanError::new(
                "lease_duration",
                format!("{:?} must be at least 15s", self.lease_duration),
            ));
        }
        // Written as `leaseDurationSeconds`, an int32 (coordination/v1 LeaseSpec): a longer
        // duration would be cut to what it holds, not the duration asked for.
        if self.lease_duration > MAX_LEASE_DURATION {
            return Err(PlanError::new(
                "lease_duration",
                format!(
                    "{:?} must be at most {}s: leaseDurationSeconds is an int32",
                    self.lease_duration,
                    MAX_LEASE_DURATION.as_secs()
                ),
            ));
        }
        if !is_dns1123_subdomain(&self.lease_name) {
            return Err(PlanError::new(
                "lease_name",
                format!("{:?} is not a DNS-1123 subdomain", self.lease_name),
            ));
        }
        Ok(())
    }

    /// The Lease to acquire.
    pub fn lease_config(&self) -> LeaseConfig {
        LeaseConfig {
            namespace: self.namespace.clone(),
            name: self.lease_name.clone(),
            identity: self.identity.clone(),
            duration: self.lease_duration,
        }
    }

    /// The Lease as `namespace/name`.
    pub fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.lease_name)
    }
}

/// A field of a driver's plan refused, and why. The rule never quotes secret material (a
/// certificate, a key).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid plan: {field}: {rule}")]
pub struct PlanError {
    /// The field, as the driver's `PlanSpec` names it.
    pub field: &'static str,
    /// The rule it breaks, with the value.
    pub rule: String,
}

impl PlanError {
    /// `field` refused by `rule`.
    pub fn new(field: &'static str, rule: impl Into<String>) -> Self {
        PlanError {
            field,
            rule: rule.into(),
        }
    }

    /// A plan's sample host Job refused by [`Spec::validate`](crate::Spec::validate): on
    /// `namespace` or `image` when the error names them, otherwise on `argv_field`, the plan's
    /// field the Job's argv comes from.
    pub fn job(error: &Error, argv_field: &'static str) -> Self {
        let rule = error.to_string();
        let field = match &rule {
            s if s.contains("namespace") => "namespace",
            s if s.contains("image") => "image",
            _ => argv_field,
        };
        PlanError { field, rule }
    }
}

/// Who holds the Lease of `placement`, as [`holder`] reads it: `None` when it is free or does
/// not exist. Transient errors are retried ([`retry`]).
pub async fn lease_holder<A: LeaseApi + ?Sized>(
    api: &A,
    placement: &Placement,
) -> std::result::Result<Option<Holder>, ApiError> {
    let (namespace, name) = (&placement.namespace, &placement.lease_name);
    match retry(api, || api.get_lease(namespace, name)).await {
        Ok(lease) => Ok(holder(&lease)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// How a driver's run ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Every node of the plan is where the plan wants it.
    Done,
    /// Nodes failed (or, for a rotation, a gate found nodes disagreeing); nothing further was
    /// started.
    Failed {
        /// What to do, and the command that retries (a rerun resumes).
        retry: String,
    },
    /// Stopped before the end without a node failing: why (a closed window, a stop request,
    /// the Lease lost, too many nodes unavailable). A rerun resumes.
    Stopped {
        /// Why.
        why: String,
    },
}

/// What a [`Fence`] tells its driver as it happens, for the driver's progress.
///
/// Serialised as the drivers' progress events are, tagged by `event`: `{"event":
/// "lease_acquired", "lease": …, "epoch": …, "how": …}`, `{"event": "lease_renewed", "epoch":
/// …}`, `{"event": "lease_lost", "message": …}`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "event")]
#[non_exhaustive]
pub enum FenceEvent {
    /// The Lease is ours.
    #[serde(rename = "lease_acquired")]
    Acquired {
        /// `namespace/name`.
        lease: String,
        /// The epoch we hold.
        epoch: i32,
        /// `free`, `taken over from <holder>`, or `resumed from <holder>`.
        how: String,
    },
    /// The Lease was renewed at this epoch.
    #[serde(rename = "lease_renewed")]
    Renewed {
        /// The epoch held.
        epoch: i32,
    },
    /// The Lease is no longer ours: nothing more is written.
    #[serde(rename = "lease_lost")]
    Lost {
        /// Who holds it now, as the Lease says.
        message: String,
    },
}

/// Receives a [`Fence`]'s events.
pub type FenceEvents = Box<dyn Fn(&FenceEvent) + Send + Sync>;

/// A held Lease as a driver uses it: every write is fenced by [`Fence::check`]; the Lease is
/// renewed every third of its duration for as long as the work of [`Fence::renewing`] runs
/// (a 30-minute host Job included); once lost, it stays lost and nothing more is written.
///
/// The history (acquired how, renewals, released or lost) is what a driver's report shows.
pub struct Fence {
    held: AsyncMutex<Held>,
    name: String,
    epoch: i32,
    how: String,
    duration: Duration,
    lost: Mutex<Option<String>>,
    /// Told when the loss is first seen, by whichever check saw it: [`Fence::renewing`] then
    /// drops its work at once, so no other step in flight writes on after the driver knows.
    lost_tx: Mutex<Option<futures::channel::oneshot::Sender<()>>>,
    lost_rx: Mutex<Option<futures::channel::oneshot::Receiver<()>>>,
    history: Mutex<Vec<String>>,
    events: FenceEvents,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("name", &self.name)
            .field("epoch", &self.epoch)
            .field("how", &self.how)
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl Fence {
    /// Acquires the Lease of `config` for `claim` ([`acquire`]); `events` hears of it
    /// ([`FenceEvent::Acquired`]), then of renewals and of the loss.
    ///
    /// # Errors
    /// As [`acquire`]: [`crate::Error::LeaseHeld`] when another holder's Lease is live.
    pub async fn acquire<A: LeaseApi + ?Sized>(
        api: &A,
        config: &LeaseConfig,
        claim: &Claim,
        events: FenceEvents,
    ) -> Result<Fence> {
        let (held, how) = acquire(api, config, claim).await?;
        let how = match how {
            Acquired::Free => "free".to_string(),
            Acquired::TakenOver { previous } => format!("taken over from {previous}"),
            Acquired::Resumed { previous } => format!("resumed from {previous}"),
        };
        let (name, epoch) = (held.name(), held.epoch());
        events(&FenceEvent::Acquired {
            lease: name.clone(),
            epoch,
            how: how.clone(),
        });
        let (lost_tx, lost_rx) = futures::channel::oneshot::channel();
        Ok(Fence {
            lost_tx: Mutex::new(Some(lost_tx)),
            lost_rx: Mutex::new(Some(lost_rx)),
            history: Mutex::new(vec![format!("acquired {name} at epoch {epoch} ({how})")]),
            held: AsyncMutex::new(held),
            name,
            epoch,
            how,
            duration: config.duration,
            lost: Mutex::new(None),
            events,
        })
    }

    /// The Lease's `namespace/name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The epoch acquired.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// How it was acquired: `free`, `taken over from <holder>`, `resumed from <holder>`.
    pub fn how(&self) -> &str {
        &self.how
    }

    /// Why the Lease was lost, once it was.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap().clone()
    }

    /// Fences a write: the Lease still ours (renewed when due, [`Held::check`]). Once lost,
    /// always lost: the answer is why.
    pub async fn check<A: LeaseApi + ?Sized>(&self, api: &A) -> std::result::Result<(), String> {
        if let Some(why) = self.lost() {
            return Err(why);
        }
        let mut held = self.held.lock().await;
        let before = renewed(&held);
        match held.check(api).await {
            Ok(()) => {
                if renewed(&held) != before {
                    let epoch = held.epoch();
                    (self.events)(&FenceEvent::Renewed { epoch });
                    self.history
                        .lock()
                        .unwrap()
                        .push(format!("renewed at epoch {epoch}"));
                }
                Ok(())
            }
            Err(e) => {
                let why = e.to_string();
                *self.lost.lock().unwrap() = Some(why.clone());
                (self.events)(&FenceEvent::Lost {
                    message: why.clone(),
                });
                if let Some(tx) = self.lost_tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                Err(why)
            }
        }
    }

    /// Runs `work` while a renewer checks the Lease every third of its duration. The answer
    /// is `work`'s, or why the Lease was lost: as soon as any check sees the loss (the
    /// renewer's, or a fenced write's), `work` is dropped where it waits, so a step in flight
    /// elsewhere (a drain between two evictions) writes nothing more once the driver knows.
    pub async fn renewing<A, F>(&self, api: &A, work: F) -> std::result::Result<F::Output, String>
    where
        A: LeaseApi + ?Sized,
        F: Future,
    {
        let lost = self.lost_rx.lock().unwrap().take();
        let seen = async {
            // Sent when lost; a dropped sender (the Fence going away) never wakes it.
            if let Some(rx) = lost
                && rx.await.is_ok()
            {
                return self.lost().unwrap_or_default();
            }
            std::future::pending().await
        };
        let work = std::pin::pin!(work);
        let renew = std::pin::pin!(self.renew(api));
        let seen = std::pin::pin!(seen);
        let watch = select(renew, seen);
        match select(work, watch).await {
            Either::Left((done, _)) => Ok(done),
            Either::Right((Either::Left((why, _)) | Either::Right((why, _)), _)) => Err(why),
        }
    }

    /// Checks the Lease every third of its duration; returns only when it is lost.
    async fn renew<A: LeaseApi + ?Sized>(&self, api: &A) -> String {
        let every = self.duration / 3;
        loop {
            api.sleep(every).await;
            if let Err(why) = self.check(api).await {
                return why;
            }
        }
    }

    /// Releases the Lease, unless it was lost, and answers the history: `acquired <lease> at
    /// epoch N (how)`, `renewed at epoch N`…, then `released`, `not released: <why>` or
    /// `lost: <why>`.
    pub async fn release<A: LeaseApi + ?Sized>(self, api: &A) -> Vec<String> {
        let lost = self.lost();
        let mut history = self.history.into_inner().unwrap();
        match lost {
            Some(why) => history.push(format!("lost: {why}")),
            None => match self.held.into_inner().release(api).await {
                Ok(()) => history.push("released".into()),
                Err(e) => history.push(format!("not released: {e}")),
            },
        }
        history
    }
}

fn renewed(held: &Held) -> Option<String> {
    held.lease()
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0.to_string())
}

/// How long [`retry`] retries a single call on transient errors.
pub const CALL_BOUND: Duration = Duration::from_secs(60);

/// Calls `op` until it answers something other than a transient error, backing off from
/// 250ms, doubling, at most 5s apart, for at most [`CALL_BOUND`] of the backend's time.
pub async fn retry<A, T, F, Fut>(api: &A, mut op: F) -> std::result::Result<T, ApiError>
where
    A: Clock + ?Sized,
    F: FnMut() -> Fut,
    Fut: Future<Output = std::result::Result<T, ApiError>>,
{
    let deadline = api.now().saturating_add(CALL_BOUND);
    let mut pause = Duration::from_millis(250);
    loop {
        match op().await {
            Err(e) if e.is_retryable() && api.now().saturating_add(pause) < deadline => {
                api.sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

/// Receives a node's notes as `(node, message)`.
pub type NoteTo = Arc<dyn Fn(&str, String) + Send + Sync>;

/// Core's notes (the runner's, the drain's) about one node, handed to a driver's progress as
/// `(node, message)`; a warning's message starts with `warning: `.
pub struct NoteSink {
    node: String,
    to: NoteTo,
}

impl NoteSink {
    /// Notes about `node`, to `to`.
    pub fn new(node: impl Into<String>, to: NoteTo) -> Self {
        NoteSink {
            node: node.into(),
            to,
        }
    }
}

impl NoteSink {
    /// Notes about `node`, as [`DriverEvent::note`] events to `sink`.
    pub fn to<E, S>(node: impl Into<String>, sink: &Arc<S>) -> Self
    where
        E: DriverEvent,
        S: EventSink<E> + ?Sized + 'static,
    {
        let sink = sink.clone();
        NoteSink::new(
            node,
            Arc::new(move |node: &str, message: String| sink.event(&E::note(node, message))),
        )
    }
}

impl Sink for NoteSink {
    /// Passes the note on, bounded as a quotation of host output ([`quote`]): the runner
    /// quotes what a host or another actor wrote into its notes (a node's NotReady message),
    /// and a progress event stays that size whatever they wrote.
    fn note(&self, note: &Note) {
        let message = match note.level {
            Level::Warn => format!("warning: {}", note.message),
            _ => note.message.clone(),
        };
        (self.to)(&self.node, quote(&message));
    }
}

/// Where a driver's progress events go: any `Fn(&E)` is one. Each driver names it for its own
/// events (its `ProgressSink`), and core's helpers ([`NoteSink::to`], [`fence_events`]) feed it.
pub trait EventSink<E>: Send + Sync {
    /// Receives one event.
    fn event(&self, event: &E);
}

impl<E, F: Fn(&E) + Send + Sync> EventSink<E> for F {
    fn event(&self, event: &E) {
        self(event)
    }
}

/// What a driver's progress events must be for core's helpers to make some: a note about a
/// node, a [`Fence`]'s event carried as it is.
pub trait DriverEvent {
    /// A note about `node`: a runner's warning, an adopted Job.
    fn note(node: &str, message: String) -> Self;
    /// The Lease acquired, renewed or lost, as the [`Fence`] tells it.
    fn lease(event: &FenceEvent) -> Self;
}

/// A [`Fence`]'s events, as [`DriverEvent::lease`] events to `sink`.
pub fn fence_events<E, S>(sink: &Arc<S>) -> FenceEvents
where
    E: DriverEvent,
    S: EventSink<E> + ?Sized + 'static,
{
    let sink = sink.clone();
    Box::new(move |e: &FenceEvent| sink.event(&E::lease(e)))
}

/// Writes a [`node_event`] about `node` in `namespace` from `component`, retried on transient
/// errors. The caller decides what a failure means (for the drivers: a note, never a node's
/// failure) and fences it (no Event once the Lease is lost).
pub async fn write_node_event<A: JobApi + ?Sized>(
    api: &A,
    namespace: &str,
    node: &str,
    kind: EventType,
    reason: &str,
    message: &str,
    component: &str,
) -> std::result::Result<(), ApiError> {
    let event = node_event(
        namespace,
        node,
        kind,
        reason,
        message,
        component,
        api.wall_time(),
    );
    retry(api, || api.create_event(&event)).await.map(|_| ())
}

/// Why [`select_nodes`] found no answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Selecting {
    /// The plan selects no node at all: a selector that matches none (a typo, most often), or
    /// none of the named nodes there. Said before the Lease, so it never looks like a roll
    /// that finished.
    #[error("the plan selects no node: {}", none_selected(selector.as_deref(), nodes))]
    NoneSelected {
        /// The selector, if any.
        selector: Option<String>,
        /// The nodes named, if any.
        nodes: Vec<String>,
    },
    /// A named node does not exist (or does not match the selector).
    #[error("node {node} does not exist{}; check the plan's nodes", match selector {
        Some(s) => format!(" or does not match the selector {s:?}"),
        None => String::new(),
    })]
    NotFound {
        /// The node.
        node: String,
        /// The selector, if any.
        selector: Option<String>,
    },
    /// The nodes could not be listed.
    #[error("listing nodes (selector {selector:?}): {cause}")]
    Listing {
        /// The selector.
        selector: String,
        /// Why.
        cause: ApiError,
    },
}

fn none_selected(selector: Option<&str>, nodes: &[String]) -> String {
    match (selector, nodes) {
        (None, []) => "the cluster has no node".into(),
        (Some(s), []) => format!("the selector {s:?} matches no node; check the plan's selector"),
        (None, names) => format!(
            "none of the nodes {} exists; check the plan's nodes",
            names.join(", ")
        ),
        (Some(s), names) => format!(
            "none of the nodes {} exists and matches the selector {s:?}; check the plan's \
             nodes and selector",
            names.join(", ")
        ),
    }
}

/// The nodes a plan names: those `selector` matches (every node when `None`), narrowed to
/// `names`, in that order, when some are named.
///
/// # Errors
/// [`Selecting::NoneSelected`] when that is no node at all; [`Selecting::NotFound`] when some
/// named node is there and another is not; [`Selecting::Listing`] when the nodes cannot be
/// listed.
pub async fn select_nodes<A: NodeApi + ?Sized>(
    api: &A,
    selector: Option<&str>,
    names: &[String],
) -> std::result::Result<Vec<Node>, Selecting> {
    let label_selector = selector.unwrap_or_default();
    let listed = retry(api, || api.list_nodes(label_selector))
        .await
        .map_err(|cause| Selecting::Listing {
            selector: label_selector.to_string(),
            cause,
        })?;
    let name_of = |n: &Node| n.metadata.name.clone().unwrap_or_default();
    let none_selected = || Selecting::NoneSelected {
        selector: selector.map(str::to_string),
        nodes: names.to_vec(),
    };
    if names.is_empty() {
        return match listed.is_empty() {
            true => Err(none_selected()),
            false => Ok(listed),
        };
    }
    if !names
        .iter()
        .any(|want| listed.iter().any(|n| &name_of(n) == want))
    {
        return Err(none_selected());
    }
    names
        .iter()
        .map(|want| {
            listed
                .iter()
                .find(|n| &name_of(n) == want)
                .cloned()
                .ok_or_else(|| Selecting::NotFound {
                    node: want.clone(),
                    selector: selector.map(str::to_string),
                })
        })
        .collect()
}

/// Checks a plan's `selector` and `nodes`, before any API call: the selector, when given,
/// parses by the apiserver's grammar ([`crate::selector`]) and is not blank (leave it unset to
/// select every node); each node name is a DNS-1123 subdomain, and none is named twice.
///
/// # Errors
/// A [`PlanError`] on `selector` or `nodes`, naming the value and the rule.
pub fn check_selection(
    selector: Option<&str>,
    nodes: &[String],
) -> std::result::Result<(), PlanError> {
    if let Some(sel) = selector {
        if sel.trim().is_empty() {
            return Err(PlanError::new(
                "selector",
                format!(
                    "{sel:?} is blank: give a label selector such as `role=worker,zone`, or \
                     none to select every node"
                ),
            ));
        }
        if let Err(e) = LabelSelector::parse(sel) {
            return Err(PlanError::new(
                "selector",
                format!(
                    "{sel:?} is not a label selector (such as `role=worker,zone in (a,b)`): {e}"
                ),
            ));
        }
    }
    for node in nodes {
        if !is_dns1123_subdomain(node) {
            return Err(PlanError::new(
                "nodes",
                format!("{node:?} is not a node name (a lowercase DNS-1123 subdomain)"),
            ));
        }
    }
    let mut twice: Vec<&str> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        if nodes[..i].contains(node) && !twice.contains(&node.as_str()) {
            twice.push(node);
        }
    }
    if !twice.is_empty() {
        return Err(PlanError::new(
            "nodes",
            format!("{} named more than once", twice.join(", ")),
        ));
    }
    Ok(())
}

/// How many times [`delete_job_of`] and [`patch_node_again`] read their object again after a
/// conflict before giving up.
const WRITE_ROUNDS: u32 = 5;

/// Patches node `name` with `changes` under `resource_version`; a conflict (someone wrote the
/// node since) reads it again and applies the same changes, which must be idempotent (set or
/// remove an annotation, cordon, uncordon), to the version read, at most five times. Transient
/// errors are retried ([`retry`]). The error is a sentence naming the node.
pub async fn patch_node_again<A: NodeApi + ?Sized>(
    api: &A,
    name: &str,
    resource_version: &str,
    changes: &[crate::NodeChange],
) -> std::result::Result<Node, String> {
    let mut rv = resource_version.to_string();
    for _ in 0..WRITE_ROUNDS {
        match retry(api, || api.patch_node(name, &rv, changes)).await {
            Ok(node) => return Ok(node),
            Err(e) if e.is_conflict() => {
                let node = retry(api, || api.get_node(name))
                    .await
                    .map_err(|e| format!("reading node {name}: {e}"))?;
                rv = node.metadata.resource_version.unwrap_or_default();
            }
            Err(e) => return Err(format!("patching node {name}: {e}")),
        }
    }
    Err(format!(
        "patching node {name}: it kept changing under other writers ({WRITE_ROUNDS} conflicts)"
    ))
}

/// Deletes the Job `namespace/name` if it is still the one of `uid` (a driver's host Job,
/// kept after it ran), and waits until it is gone. Gone already, or replaced by another Job
/// of that name, is done: that one is not ours to delete. A conflict (the Job changed between
/// the read and the delete, whose preconditions are its UID and resourceVersion) reads it
/// again, at most five times. The error is a sentence naming the Job.
pub async fn delete_job_of<A: JobApi + ?Sized>(
    api: &A,
    namespace: &str,
    name: &str,
    uid: &str,
) -> std::result::Result<(), String> {
    for _ in 0..WRITE_ROUNDS {
        let job = match retry(api, || api.get_job(namespace, name)).await {
            Ok(job) if job.metadata.uid.as_deref() == Some(uid) => job,
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(format!("reading the host job {namespace}/{name}: {e}")),
        };
        match delete_exact_and_wait(api, &job).await {
            Ok(()) => return Ok(()),
            Err(Error::Api { cause, .. }) if cause.is_conflict() => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "deleting the host job {namespace}/{name}: it kept changing ({WRITE_ROUNDS} conflicts)"
    ))
}

/// The most characters of host output (a log, a status line, a field of it) that any message,
/// report, progress event or Event quotes: [`quote`] and [`log_tail`] cut to it.
pub const QUOTE_LIMIT: usize = 500;

/// `text` as a message quotes host output: whole when it has at most [`QUOTE_LIMIT`]
/// characters, else its first [`QUOTE_LIMIT`] and how many more were cut. Every quotation of
/// what a host printed goes through this (or [`log_tail`]), so a host that prints a megabyte
/// never makes a megabyte message, report or Event.
pub fn quote(text: &str) -> String {
    let mut chars = text.char_indices();
    match chars.nth(QUOTE_LIMIT) {
        None => text.to_string(),
        Some((cut, _)) => {
            let more = text[cut..].chars().count();
            format!("{}… ({more} more characters)", &text[..cut])
        }
    }
}

/// The last `lines` lines of `log`, as a report quotes a failed host step's log, at most the
/// last [`QUOTE_LIMIT`] characters of them (the end of a log says why it failed).
pub fn log_tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    let count = tail.chars().count();
    if count <= QUOTE_LIMIT {
        return tail;
    }
    let skip = count - QUOTE_LIMIT;
    let start = tail.char_indices().nth(skip).map_or(0, |(i, _)| i);
    format!("({skip} characters before) …{}", &tail[start..])
}

/// `d` in whole milliseconds, as reports count durations.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
