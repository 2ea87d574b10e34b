//! The verbs of the API traits, listed once, and [`Layer`]: one forwarding wrapper for
//! all of them, written once.
//!
//! Each verb is named by a [`Verb`], called as a [`Request`] (the verb and its arguments) and
//! answered by an [`Answer`]. A type that implements [`Layer`] names the backend below it
//! ([`Layer::below`]) and may wrap each request in [`Layer::around`]; it then implements
//! [`Clock`], [`JobApi`], [`NodeApi`], [`PodApi`] and [`LeaseApi`] wherever its backend does.
//! So a wrapper is its hook only: the drivers' `Fenced` writer (in `nodejob-roll`) refuses
//! writes, the conformance crate's `Interposed` records and injects, its `Crashing` stops at a
//! write, the bench's probe looks at answers and its polling baseline answers `wait_job`
//! itself. As in tower's `Service`, the request goes down and the answer comes up; `&T`,
//! `Arc<T>` and `Box<T>` are layers that pass both.
//!
//! ```text
//!   caller ──verb(args)──▶ around(Request, serve) ──serve──▶ below: kube, fake or a layer
//!      ▲                      │ refuse, record, stop, answer itself          │
//!      └──── typed answer ◀───┴───────────────── Answer ◀────────────────────┘
//! ```
//!
//! A new verb is its method in its trait (`api/`), its line in the `verbs!` list, its
//! [`Request`] variant and its forwarding here (an [`Answer`] variant if it returns a new
//! type), and its two backends (`nodejob-kube`, `nodejob-fake`); no wrapper changes.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Preconditions};
use k8s_openapi::apimachinery::pkg::version::Info;
use k8s_openapi::jiff::Timestamp;

use k8s_openapi::serde_json::Value;

use crate::api::{
    ApiResult, Change, Clock, CustomApi, CustomAt, CustomChanges, CustomKind, DryRun, Eviction,
    JobApi, LeaseApi, NodeApi, NodeChange, NodeChanges, NodesAt, PodApi,
};
use crate::error::{ApiError, ErrorKind};

/// Declares [`Verb`] and everything derived from its one list.
macro_rules! verbs {
    ($($trait:ident { $($verb:ident => $method:ident,)* })*) => {
        /// One API method of the traits in this crate (`JobApi`, `NodeApi`, `PodApi`,
        /// `LeaseApi`), as fakes, faults, hooks and call records name it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Verb {
            $($(
                #[doc = concat!("[`", stringify!($trait), "::", stringify!($method), "`](crate::",
                    stringify!($trait), "::", stringify!($method), ").")]
                $verb,
            )*)*
        }

        impl Verb {
            /// Every verb, in declaration order.
            pub const ALL: &'static [Verb] = &[$($(Verb::$verb,)*)*];

            /// The trait method's name, e.g. `create_job`.
            pub fn method(self) -> &'static str {
                match self {
                    $($(Verb::$verb => stringify!($method),)*)*
                }
            }

            /// The trait the method belongs to, e.g. `JobApi`.
            pub fn api(self) -> &'static str {
                match self {
                    $($(Verb::$verb => stringify!($trait),)*)*
                }
            }
        }
    };
}

verbs! {
    JobApi {
        CreateJob => create_job,
        GetJob => get_job,
        ListJobs => list_jobs,
        DeleteJob => delete_job,
        ListPods => list_pods,
        PodLog => pod_log,
        ListEvents => list_events,
        CreateEvent => create_event,
        WaitJob => wait_job,
    }
    NodeApi {
        GetNode => get_node,
        ListNodes => list_nodes,
        ListNodesAt => list_nodes_at,
        WaitNodes => wait_nodes,
        WaitNode => wait_node,
        PatchNode => patch_node,
        Version => version,
        PatchNodeConditions => patch_node_conditions,
    }
    PodApi {
        ListNodePods => list_node_pods,
        GetPod => get_pod,
        WaitPod => wait_pod,
        EvictPod => evict_pod,
    }
    LeaseApi {
        GetLease => get_lease,
        CreateLease => create_lease,
        ReplaceLease => replace_lease,
    }
    CustomApi {
        GetCustom => get_custom,
        ListCustomAt => list_custom_at,
        WaitCustom => wait_custom,
        CreateCustom => create_custom,
        ReplaceCustom => replace_custom,
        ApplyCustomStatus => apply_custom_status,
        DeleteCustom => delete_custom,
    }
}

impl Verb {
    /// Whether the verb changes the cluster (creates, deletes, patches, evicts, replaces),
    /// a dry run aside.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Verb::CreateJob
                | Verb::DeleteJob
                | Verb::CreateEvent
                | Verb::PatchNode
                | Verb::PatchNodeConditions
                | Verb::EvictPod
                | Verb::CreateLease
                | Verb::ReplaceLease
                | Verb::CreateCustom
                | Verb::ReplaceCustom
                | Verb::ApplyCustomStatus
                | Verb::DeleteCustom
        )
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// A wrapper of the API traits: it implements each of them its backend implements, every verb
/// passed through [`Layer::around`]. See the module docs.
pub trait Layer: Send + Sync {
    /// The backend below.
    type Below: ?Sized;

    /// The backend below, which serves what the layer passes on (and answers [`Clock`]).
    fn below(&self) -> &Self::Below;

    /// Around one call: `serve` is the call sent to [`below`](Layer::below), not begun (a
    /// layer that does not await it sends nothing). The default passes it on.
    ///
    /// A layer may refuse (answer an error without serving), look at the answer, or answer
    /// itself; its answer must be the variant of the verb's return type (a
    /// [`Verb::WaitJob`] is answered [`Answer::JobChange`]), else the caller gets an error
    /// naming the mismatch.
    fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> impl Future<Output = ApiResult<Answer>> + Send + 'a {
        let _ = request;
        serve
    }
}

impl<T: ?Sized + Sync> Layer for &T {
    type Below = T;
    fn below(&self) -> &T {
        self
    }
}

impl<T: ?Sized + Send + Sync> Layer for Arc<T> {
    type Below = T;
    fn below(&self) -> &T {
        self
    }
}

impl<T: ?Sized + Send + Sync> Layer for Box<T> {
    type Below = T;
    fn below(&self) -> &T {
        self
    }
}

/// One call of a verb with its arguments, as a [`Layer`] sees it: one variant per method of the
/// API traits, its fields named as the method's parameters.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
#[allow(missing_docs)] // The fields are the trait methods' parameters, documented there.
pub enum Request<'a> {
    /// [`JobApi::create_job`].
    CreateJob { job: &'a Job },
    /// [`JobApi::get_job`].
    GetJob { namespace: &'a str, name: &'a str },
    /// [`JobApi::list_jobs`].
    ListJobs {
        namespace: &'a str,
        label_selector: &'a str,
    },
    /// [`JobApi::delete_job`].
    DeleteJob {
        namespace: &'a str,
        name: &'a str,
        preconditions: Option<&'a Preconditions>,
    },
    /// [`JobApi::list_pods`].
    ListPods {
        namespace: &'a str,
        label_selector: &'a str,
    },
    /// [`JobApi::pod_log`].
    PodLog {
        namespace: &'a str,
        pod: &'a str,
        container: &'a str,
        limit_bytes: u64,
    },
    /// [`JobApi::list_events`].
    ListEvents {
        namespace: &'a str,
        involved_uid: &'a str,
    },
    /// [`JobApi::create_event`].
    CreateEvent { event: &'a Event },
    /// [`JobApi::wait_job`].
    WaitJob {
        namespace: &'a str,
        name: &'a str,
        since: Option<&'a str>,
        timeout: Duration,
    },
    /// [`NodeApi::get_node`].
    GetNode { name: &'a str },
    /// [`NodeApi::list_nodes`].
    ListNodes { label_selector: &'a str },
    /// [`NodeApi::list_nodes_at`].
    ListNodesAt,
    /// [`NodeApi::wait_nodes`].
    WaitNodes { since: &'a str, timeout: Duration },
    /// [`NodeApi::wait_node`].
    WaitNode {
        name: &'a str,
        since: Option<&'a str>,
        timeout: Duration,
    },
    /// [`NodeApi::patch_node`].
    PatchNode {
        name: &'a str,
        resource_version: &'a str,
        changes: &'a [NodeChange],
    },
    /// [`NodeApi::version`].
    Version,
    /// [`NodeApi::patch_node_conditions`].
    PatchNodeConditions {
        name: &'a str,
        resource_version: Option<&'a str>,
        changes: &'a [NodeChange],
        conditions: &'a [NodeCondition],
    },
    /// [`PodApi::list_node_pods`].
    ListNodePods { node: &'a str },
    /// [`PodApi::get_pod`].
    GetPod { namespace: &'a str, name: &'a str },
    /// [`PodApi::wait_pod`].
    WaitPod {
        namespace: &'a str,
        name: &'a str,
        since: Option<&'a str>,
        timeout: Duration,
    },
    /// [`PodApi::evict_pod`].
    EvictPod {
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    },
    /// [`LeaseApi::get_lease`].
    GetLease { namespace: &'a str, name: &'a str },
    /// [`LeaseApi::create_lease`].
    CreateLease { lease: &'a Lease },
    /// [`LeaseApi::replace_lease`].
    ReplaceLease { lease: &'a Lease },
    /// [`CustomApi::get_custom`].
    GetCustom { kind: CustomKind, name: &'a str },
    /// [`CustomApi::list_custom_at`].
    ListCustomAt { kind: CustomKind },
    /// [`CustomApi::wait_custom`].
    WaitCustom {
        kind: CustomKind,
        since: &'a str,
        timeout: Duration,
    },
    /// [`CustomApi::create_custom`].
    CreateCustom { kind: CustomKind, object: &'a Value },
    /// [`CustomApi::replace_custom`].
    ReplaceCustom { kind: CustomKind, object: &'a Value },
    /// [`CustomApi::apply_custom_status`].
    ApplyCustomStatus {
        kind: CustomKind,
        name: &'a str,
        manager: &'a str,
        status: &'a Value,
    },
    /// [`CustomApi::delete_custom`].
    DeleteCustom {
        kind: CustomKind,
        name: &'a str,
        preconditions: Option<&'a Preconditions>,
    },
}

impl<'a> Request<'a> {
    /// The verb.
    pub fn verb(&self) -> Verb {
        match self {
            Request::CreateJob { .. } => Verb::CreateJob,
            Request::GetJob { .. } => Verb::GetJob,
            Request::ListJobs { .. } => Verb::ListJobs,
            Request::DeleteJob { .. } => Verb::DeleteJob,
            Request::ListPods { .. } => Verb::ListPods,
            Request::PodLog { .. } => Verb::PodLog,
            Request::ListEvents { .. } => Verb::ListEvents,
            Request::CreateEvent { .. } => Verb::CreateEvent,
            Request::WaitJob { .. } => Verb::WaitJob,
            Request::GetNode { .. } => Verb::GetNode,
            Request::ListNodes { .. } => Verb::ListNodes,
            Request::ListNodesAt => Verb::ListNodesAt,
            Request::WaitNodes { .. } => Verb::WaitNodes,
            Request::WaitNode { .. } => Verb::WaitNode,
            Request::PatchNode { .. } => Verb::PatchNode,
            Request::Version => Verb::Version,
            Request::PatchNodeConditions { .. } => Verb::PatchNodeConditions,
            Request::ListNodePods { .. } => Verb::ListNodePods,
            Request::GetPod { .. } => Verb::GetPod,
            Request::WaitPod { .. } => Verb::WaitPod,
            Request::EvictPod { .. } => Verb::EvictPod,
            Request::GetLease { .. } => Verb::GetLease,
            Request::CreateLease { .. } => Verb::CreateLease,
            Request::ReplaceLease { .. } => Verb::ReplaceLease,
            Request::GetCustom { .. } => Verb::GetCustom,
            Request::ListCustomAt { .. } => Verb::ListCustomAt,
            Request::WaitCustom { .. } => Verb::WaitCustom,
            Request::CreateCustom { .. } => Verb::CreateCustom,
            Request::ReplaceCustom { .. } => Verb::ReplaceCustom,
            Request::ApplyCustomStatus { .. } => Verb::ApplyCustomStatus,
            Request::DeleteCustom { .. } => Verb::DeleteCustom,
        }
    }

    /// Whether this call changes the cluster: a verb that [writes](Verb::writes), except a
    /// server-side dry run ([`DryRun::All`]).
    pub fn writes(&self) -> bool {
        match self {
            Request::EvictPod { dry_run, .. } => *dry_run == DryRun::No,
            other => other.verb().writes(),
        }
    }

    /// The namespace the call is in (an object's own, `""` when it has none); `None` for
    /// cluster-scoped verbs (Nodes, every node's Pods).
    pub fn namespace(&self) -> Option<&'a str> {
        match *self {
            Request::CreateJob { job } => Some(namespace_of(&job.metadata)),
            Request::CreateEvent { event } => Some(namespace_of(&event.metadata)),
            Request::CreateLease { lease } | Request::ReplaceLease { lease } => {
                Some(namespace_of(&lease.metadata))
            }
            Request::GetJob { namespace, .. }
            | Request::ListJobs { namespace, .. }
            | Request::DeleteJob { namespace, .. }
            | Request::ListPods { namespace, .. }
            | Request::PodLog { namespace, .. }
            | Request::ListEvents { namespace, .. }
            | Request::WaitJob { namespace, .. }
            | Request::GetPod { namespace, .. }
            | Request::WaitPod { namespace, .. }
            | Request::EvictPod { namespace, .. }
            | Request::GetLease { namespace, .. } => Some(namespace),
            Request::GetNode { .. }
            | Request::ListNodes { .. }
            | Request::ListNodesAt
            | Request::WaitNodes { .. }
            | Request::WaitNode { .. }
            | Request::PatchNode { .. }
            | Request::Version
            | Request::PatchNodeConditions { .. }
            | Request::ListNodePods { .. }
            | Request::GetCustom { .. }
            | Request::ListCustomAt { .. }
            | Request::WaitCustom { .. }
            | Request::CreateCustom { .. }
            | Request::ReplaceCustom { .. }
            | Request::ApplyCustomStatus { .. }
            | Request::DeleteCustom { .. } => None,
        }
    }

    /// What the call names: the object's name (a sent object's `generateName` when it has no
    /// name, `""` when it has neither); a list's label selector (`""` for every node's list
    /// and watch); the involved UID of
    /// [`Verb::ListEvents`]; the node of [`Verb::ListNodePods`]; the pod of [`Verb::PodLog`].
    pub fn subject(&self) -> &'a str {
        match *self {
            Request::CreateJob { job } => name_of(&job.metadata),
            Request::CreateEvent { event } => name_of(&event.metadata),
            Request::CreateLease { lease } | Request::ReplaceLease { lease } => {
                name_of(&lease.metadata)
            }
            Request::GetJob { name, .. }
            | Request::DeleteJob { name, .. }
            | Request::WaitJob { name, .. }
            | Request::GetNode { name }
            | Request::WaitNode { name, .. }
            | Request::PatchNode { name, .. }
            | Request::PatchNodeConditions { name, .. }
            | Request::GetPod { name, .. }
            | Request::WaitPod { name, .. }
            | Request::EvictPod { name, .. }
            | Request::GetLease { name, .. }
            | Request::GetCustom { name, .. }
            | Request::ApplyCustomStatus { name, .. }
            | Request::DeleteCustom { name, .. } => name,
            Request::CreateCustom { object, .. } | Request::ReplaceCustom { object, .. } => object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            Request::ListJobs { label_selector, .. }
            | Request::ListPods { label_selector, .. }
            | Request::ListNodes { label_selector } => label_selector,
            Request::ListEvents { involved_uid, .. } => involved_uid,
            // Every node: no name, no selector; the apiserver's version names nothing.
            Request::ListNodesAt | Request::WaitNodes { .. } | Request::Version => "",
            // A kind's every object.
            Request::ListCustomAt { kind } | Request::WaitCustom { kind, .. } => kind.plural,
            Request::ListNodePods { node } => node,
            Request::PodLog { pod, .. } => pod,
        }
    }
}

fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or_default()
}

fn name_of(meta: &ObjectMeta) -> &str {
    (meta.name.as_deref())
        .or(meta.generate_name.as_deref())
        .unwrap_or_default()
}

/// Declares [`Answer`], one variant per return type of the verbs, and its conversions.
macro_rules! answers {
    ($($variant:ident($ty:ty): $doc:literal,)*) => {
        /// What a verb answered, as a [`Layer`] sees it: one variant per return type.
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        #[allow(clippy::large_enum_variant)] // Moved once per call, never stored.
        pub enum Answer {
            $(#[doc = $doc] $variant($ty),)*
        }

        $(impl Answered for $ty {
            fn into_answer(self) -> Answer {
                Answer::$variant(self)
            }
            fn from_answer(answer: Answer) -> Option<Self> {
                match answer {
                    Answer::$variant(value) => Some(value),
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        })*

        impl Answer {
            /// The variant's name, for a mismatch's message.
            fn kind(&self) -> &'static str {
                match self {
                    $(Answer::$variant(_) => stringify!($variant),)*
                }
            }
        }
    };
}

answers! {
    Job(Job): "A Job: [`JobApi::create_job`], [`JobApi::get_job`].",
    Jobs(Vec<Job>): "[`JobApi::list_jobs`].",
    Done(()): "Nothing but success: [`JobApi::delete_job`].",
    Pods(Vec<Pod>): "Pods: [`JobApi::list_pods`], [`PodApi::list_node_pods`].",
    Log(String): "[`JobApi::pod_log`].",
    Events(Vec<Event>): "[`JobApi::list_events`].",
    Event(Event): "[`JobApi::create_event`].",
    JobChange(Change<Job>): "[`JobApi::wait_job`].",
    Node(Node): "A Node: [`NodeApi::get_node`], [`NodeApi::patch_node`], [`NodeApi::patch_node_conditions`].",
    Nodes(Vec<Node>): "[`NodeApi::list_nodes`].",
    NodeChange(Change<Node>): "[`NodeApi::wait_node`].",
    NodesAt(NodesAt): "[`NodeApi::list_nodes_at`].",
    NodeChanges(NodeChanges): "[`NodeApi::wait_nodes`].",
    Pod(Pod): "[`PodApi::get_pod`].",
    PodChange(Change<Pod>): "[`PodApi::wait_pod`].",
    Eviction(Eviction): "[`PodApi::evict_pod`].",
    Lease(Lease): "A Lease: every [`LeaseApi`] verb.",
    Version(Info): "[`NodeApi::version`].",
    Custom(Value): "A custom resource: [`CustomApi::get_custom`], [`CustomApi::create_custom`], [`CustomApi::replace_custom`], [`CustomApi::apply_custom_status`].",
    CustomAt(CustomAt): "[`CustomApi::list_custom_at`].",
    CustomChanges(CustomChanges): "[`CustomApi::wait_custom`].",
    CustomDeleted(Option<Value>): "[`CustomApi::delete_custom`].",
}

/// A verb's return type, carried up through [`Layer::around`] as an [`Answer`].
trait Answered: Sized {
    fn into_answer(self) -> Answer;
    fn from_answer(answer: Answer) -> Option<Self>;
}

/// Sends `request` through `layer`'s [`around`](Layer::around), `serve` being its call below,
/// and gives the answer its type back.
async fn through<'a, L: Layer, T: Answered + Send + 'a>(
    layer: &'a L,
    request: Request<'a>,
    serve: impl Future<Output = ApiResult<T>> + Send + 'a,
) -> ApiResult<T> {
    let verb = request.verb();
    let serve = async move { serve.await.map(T::into_answer) };
    let answer = layer.around(request, serve).await?;
    let kind = answer.kind();
    T::from_answer(answer).ok_or_else(|| {
        ApiError::new(
            ErrorKind::Other,
            0,
            format!("a layer answered {} with {kind}", verb.method()),
        )
    })
}

#[async_trait]
impl<L: Layer> Clock for L
where
    L::Below: Clock,
{
    fn now(&self) -> Duration {
        self.below().now()
    }
    async fn sleep(&self, duration: Duration) {
        self.below().sleep(duration).await
    }
    fn wall_time(&self) -> Timestamp {
        self.below().wall_time()
    }
}

#[async_trait]
impl<L: Layer> JobApi for L
where
    L::Below: JobApi,
{
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let serve = self.below().create_job(job);
        through(self, Request::CreateJob { job }, serve).await
    }
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        let serve = self.below().get_job(namespace, name);
        through(self, Request::GetJob { namespace, name }, serve).await
    }
    async fn list_jobs(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Job>> {
        let serve = self.below().list_jobs(namespace, label_selector);
        let request = Request::ListJobs {
            namespace,
            label_selector,
        };
        through(self, request, serve).await
    }
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<()> {
        let serve = self.below().delete_job(namespace, name, preconditions);
        let request = Request::DeleteJob {
            namespace,
            name,
            preconditions,
        };
        through(self, request, serve).await
    }
    async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>> {
        let serve = self.below().list_pods(namespace, label_selector);
        let request = Request::ListPods {
            namespace,
            label_selector,
        };
        through(self, request, serve).await
    }
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        let serve = self.below().pod_log(namespace, pod, container, limit_bytes);
        let request = Request::PodLog {
            namespace,
            pod,
            container,
            limit_bytes,
        };
        through(self, request, serve).await
    }
    async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>> {
        let serve = self.below().list_events(namespace, involved_uid);
        let request = Request::ListEvents {
            namespace,
            involved_uid,
        };
        through(self, request, serve).await
    }
    async fn create_event(&self, event: &Event) -> ApiResult<Event> {
        let serve = self.below().create_event(event);
        through(self, Request::CreateEvent { event }, serve).await
    }
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        let serve = self.below().wait_job(namespace, name, since, timeout);
        let request = Request::WaitJob {
            namespace,
            name,
            since,
            timeout,
        };
        through(self, request, serve).await
    }
}

#[async_trait]
impl<L: Layer> NodeApi for L
where
    L::Below: NodeApi,
{
    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        let serve = self.below().get_node(name);
        through(self, Request::GetNode { name }, serve).await
    }
    async fn list_nodes(&self, label_selector: &str) -> ApiResult<Vec<Node>> {
        let serve = self.below().list_nodes(label_selector);
        through(self, Request::ListNodes { label_selector }, serve).await
    }
    async fn list_nodes_at(&self) -> ApiResult<NodesAt> {
        let serve = self.below().list_nodes_at();
        through(self, Request::ListNodesAt, serve).await
    }
    async fn wait_nodes(&self, since: &str, timeout: Duration) -> ApiResult<NodeChanges> {
        let serve = self.below().wait_nodes(since, timeout);
        through(self, Request::WaitNodes { since, timeout }, serve).await
    }
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>> {
        let serve = self.below().wait_node(name, since, timeout);
        let request = Request::WaitNode {
            name,
            since,
            timeout,
        };
        through(self, request, serve).await
    }
    async fn patch_node(
        &self,
        name: &str,
        resource_version: &str,
        changes: &[NodeChange],
    ) -> ApiResult<Node> {
        let serve = self.below().patch_node(name, resource_version, changes);
        let request = Request::PatchNode {
            name,
            resource_version,
            changes,
        };
        through(self, request, serve).await
    }
    async fn version(&self) -> ApiResult<Info> {
        let serve = self.below().version();
        through(self, Request::Version, serve).await
    }
    async fn patch_node_conditions(
        &self,
        name: &str,
        resource_version: Option<&str>,
        changes: &[NodeChange],
        conditions: &[NodeCondition],
    ) -> ApiResult<Node> {
        let below = self.below();
        let serve = below.patch_node_conditions(name, resource_version, changes, conditions);
        let request = Request::PatchNodeConditions {
            name,
            resource_version,
            changes,
            conditions,
        };
        through(self, request, serve).await
    }
}

#[async_trait]
impl<L: Layer> PodApi for L
where
    L::Below: PodApi,
{
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        let serve = self.below().list_node_pods(node);
        through(self, Request::ListNodePods { node }, serve).await
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        let serve = self.below().get_pod(namespace, name);
        through(self, Request::GetPod { namespace, name }, serve).await
    }
    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        let serve = self.below().wait_pod(namespace, name, since, timeout);
        let request = Request::WaitPod {
            namespace,
            name,
            since,
            timeout,
        };
        through(self, request, serve).await
    }
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        let serve = (self.below()).evict_pod(namespace, name, uid, grace_period, dry_run);
        let request = Request::EvictPod {
            namespace,
            name,
            uid,
            grace_period,
            dry_run,
        };
        through(self, request, serve).await
    }
}

#[async_trait]
impl<L: Layer> LeaseApi for L
where
    L::Below: LeaseApi,
{
    async fn get_lease(&self, namespace: &str, name: &str) -> ApiResult<Lease> {
        let serve = self.below().get_lease(namespace, name);
        through(self, Request::GetLease { namespace, name }, serve).await
    }
    async fn create_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let serve = self.below().create_lease(lease);
        through(self, Request::CreateLease { lease }, serve).await
    }
    async fn replace_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let serve = self.below().replace_lease(lease);
        through(self, Request::ReplaceLease { lease }, serve).await
    }
}

#[async_trait]
impl<L: Layer> CustomApi for L
where
    L::Below: CustomApi,
{
    async fn get_custom(&self, kind: CustomKind, name: &str) -> ApiResult<Value> {
        let serve = self.below().get_custom(kind, name);
        through(self, Request::GetCustom { kind, name }, serve).await
    }
    async fn list_custom_at(&self, kind: CustomKind) -> ApiResult<CustomAt> {
        let serve = self.below().list_custom_at(kind);
        through(self, Request::ListCustomAt { kind }, serve).await
    }
    async fn wait_custom(
        &self,
        kind: CustomKind,
        since: &str,
        timeout: Duration,
    ) -> ApiResult<CustomChanges> {
        let serve = self.below().wait_custom(kind, since, timeout);
        let request = Request::WaitCustom {
            kind,
            since,
            timeout,
        };
        through(self, request, serve).await
    }
    async fn create_custom(&self, kind: CustomKind, object: &Value) -> ApiResult<Value> {
        let serve = self.below().create_custom(kind, object);
        through(self, Request::CreateCustom { kind, object }, serve).await
    }
    async fn replace_custom(&self, kind: CustomKind, object: &Value) -> ApiResult<Value> {
        let serve = self.below().replace_custom(kind, object);
        through(self, Request::ReplaceCustom { kind, object }, serve).await
    }
    async fn apply_custom_status(
        &self,
        kind: CustomKind,
        name: &str,
        manager: &str,
        status: &Value,
    ) -> ApiResult<Value> {
        let serve = self
            .below()
            .apply_custom_status(kind, name, manager, status);
        let request = Request::ApplyCustomStatus {
            kind,
            name,
            manager,
            status,
        };
        through(self, request, serve).await
    }
    async fn delete_custom(
        &self,
        kind: CustomKind,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<Option<Value>> {
        let serve = self.below().delete_custom(kind, name, preconditions);
        let request = Request::DeleteCustom {
            kind,
            name,
            preconditions,
        };
        through(self, request, serve).await
    }
}
