//! [`Interposed`]: a wrapper of every API trait ([`JobApi`], [`NodeApi`], [`PodApi`], [`LeaseApi`]) that records every call, answers injected errors, and
//! runs another actor's writes between two calls, over any backend. It is what lets a race be
//! staged the same way on the in-memory cluster and on a real apiserver.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::{
    ApiError, ApiResult, Change, Clock, DryRun, ErrorKind, Eviction, JobApi, LeaseApi, NodeApi,
    NodeChange, PodApi, Verb,
};

/// One call that went through an [`Interposed`] API.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The verb.
    pub verb: Verb,
    /// The Job, Pod or Node the call names (an Event's `generateName` when it has no name);
    /// the selector for [`Verb::ListJobs`] and [`Verb::ListPods`], the UID for
    /// [`Verb::ListEvents`].
    pub name: String,
    /// The preconditions of a [`Verb::DeleteJob`]; the UID of a [`Verb::EvictPod`]; the
    /// resourceVersion of a [`Verb::ReplaceLease`].
    pub preconditions: Option<Preconditions>,
    /// The backend's time when the call began.
    pub at: Duration,
    /// How it failed, if it did (filled in when it returns).
    pub error: Option<ErrorKind>,
}

/// Another actor's action, run with the backend's API just before a call is served.
pub type Action<A> = Box<dyn FnOnce(Arc<A>) -> BoxFuture<'static, ()> + Send>;

struct Hook<A> {
    verb: Verb,
    /// How many more calls of the verb pass before the hook runs.
    skip: usize,
    action: Action<A>,
}

struct State<A> {
    calls: Vec<Call>,
    hooks: Vec<Hook<A>>,
    faults: VecDeque<(Verb, ApiError)>,
}

/// A [`JobApi`] over `A` that records, injects and interposes. See the module docs.
pub struct Interposed<A> {
    inner: Arc<A>,
    state: Mutex<State<A>>,
}

impl<A: Clock + 'static> Interposed<A> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<A>) -> Self {
        Interposed {
            inner,
            state: Mutex::new(State {
                calls: Vec::new(),
                hooks: Vec::new(),
                faults: VecDeque::new(),
            }),
        }
    }

    /// The backend below, for another actor's writes (not recorded).
    pub fn inner(&self) -> &Arc<A> {
        &self.inner
    }

    /// Runs `action` before the `(skip + 1)`-th next call of `verb` is served.
    pub fn before<F>(&self, verb: Verb, skip: usize, action: F)
    where
        F: FnOnce(Arc<A>) -> BoxFuture<'static, ()> + Send + 'static,
    {
        self.lock().hooks.push(Hook {
            verb,
            skip,
            action: Box::new(action),
        });
    }

    /// Answers the next `times` calls of `verb` with `error` instead of serving them.
    pub fn fail(&self, verb: Verb, error: ApiError, times: usize) {
        let mut state = self.lock();
        for _ in 0..times {
            state.faults.push_back((verb, error.clone()));
        }
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// How many calls of `verb` were made.
    pub fn count(&self, verb: Verb) -> usize {
        self.lock().calls.iter().filter(|c| c.verb == verb).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<A>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the call, runs a due hook, answers a due fault; returns the call's index.
    async fn enter(
        &self,
        verb: Verb,
        name: &str,
        pre: Option<&Preconditions>,
    ) -> Result<usize, ApiError> {
        let (index, action) = {
            let mut state = self.lock();
            state.calls.push(Call {
                verb,
                name: name.to_string(),
                preconditions: pre.cloned(),
                at: self.inner.now(),
                error: None,
            });
            let due = state
                .hooks
                .iter()
                .position(|h| h.verb == verb && h.skip == 0);
            for hook in state
                .hooks
                .iter_mut()
                .filter(|h| h.verb == verb && h.skip > 0)
            {
                hook.skip -= 1;
            }
            (
                state.calls.len() - 1,
                due.map(|i| state.hooks.remove(i).action),
            )
        };
        if let Some(action) = action {
            action(self.inner.clone()).await;
        }
        let mut state = self.lock();
        if let Some(i) = state.faults.iter().position(|(v, _)| *v == verb) {
            let (_, error) = state.faults.remove(i).expect("position is in range");
            state.calls[index].error = Some(error.kind);
            return Err(error);
        }
        Ok(index)
    }

    fn exit<T>(&self, index: usize, result: ApiResult<T>) -> ApiResult<T> {
        if let Err(e) = &result {
            self.lock().calls[index].error = Some(e.kind);
        }
        result
    }
}

#[async_trait]
impl<A: Clock + 'static> Clock for Interposed<A> {
    fn now(&self) -> Duration {
        self.inner.now()
    }
    async fn sleep(&self, duration: Duration) {
        self.inner.sleep(duration).await
    }
    fn wall_time(&self) -> k8s_openapi::jiff::Timestamp {
        self.inner.wall_time()
    }
}

#[async_trait]
impl<A: JobApi + 'static> JobApi for Interposed<A> {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let i = self
            .enter(
                Verb::CreateJob,
                job.metadata.name.as_deref().unwrap_or(""),
                None,
            )
            .await?;
        self.exit(i, self.inner.create_job(job).await)
    }
    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        let i = self.enter(Verb::GetJob, name, None).await?;
        self.exit(i, self.inner.get_job(namespace, name).await)
    }
    async fn list_jobs(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Job>> {
        let i = self.enter(Verb::ListJobs, selector, None).await?;
        self.exit(i, self.inner.list_jobs(namespace, selector).await)
    }
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        pre: Option<&Preconditions>,
    ) -> ApiResult<()> {
        let i = self.enter(Verb::DeleteJob, name, pre).await?;
        self.exit(i, self.inner.delete_job(namespace, name, pre).await)
    }
    async fn list_pods(&self, namespace: &str, selector: &str) -> ApiResult<Vec<Pod>> {
        let i = self.enter(Verb::ListPods, selector, None).await?;
        self.exit(i, self.inner.list_pods(namespace, selector).await)
    }
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit: u64,
    ) -> ApiResult<String> {
        let i = self.enter(Verb::PodLog, pod, None).await?;
        self.exit(
            i,
            self.inner.pod_log(namespace, pod, container, limit).await,
        )
    }
    async fn list_events(&self, namespace: &str, uid: &str) -> ApiResult<Vec<Event>> {
        let i = self.enter(Verb::ListEvents, uid, None).await?;
        self.exit(i, self.inner.list_events(namespace, uid).await)
    }
    async fn create_event(&self, event: &Event) -> ApiResult<Event> {
        let meta = &event.metadata;
        let name = meta.name.as_deref().or(meta.generate_name.as_deref());
        let i = self
            .enter(Verb::CreateEvent, name.unwrap_or(""), None)
            .await?;
        self.exit(i, self.inner.create_event(event).await)
    }
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        let i = self.enter(Verb::WaitJob, name, None).await?;
        self.exit(
            i,
            self.inner.wait_job(namespace, name, since, timeout).await,
        )
    }
}

#[async_trait]
impl<A: NodeApi + 'static> NodeApi for Interposed<A> {
    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        let i = self.enter(Verb::GetNode, name, None).await?;
        self.exit(i, self.inner.get_node(name).await)
    }
    async fn list_nodes(&self, selector: &str) -> ApiResult<Vec<Node>> {
        let i = self.enter(Verb::ListNodes, selector, None).await?;
        self.exit(i, self.inner.list_nodes(selector).await)
    }
    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>> {
        let i = self.enter(Verb::WaitNode, name, None).await?;
        self.exit(i, self.inner.wait_node(name, since, timeout).await)
    }
    async fn patch_node(
        &self,
        name: &str,
        resource_version: &str,
        changes: &[NodeChange],
    ) -> ApiResult<Node> {
        let i = self.enter(Verb::PatchNode, name, None).await?;
        self.exit(
            i,
            self.inner.patch_node(name, resource_version, changes).await,
        )
    }
}

#[async_trait]
impl<A: PodApi + 'static> PodApi for Interposed<A> {
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        let i = self.enter(Verb::ListNodePods, node, None).await?;
        self.exit(i, self.inner.list_node_pods(node).await)
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        let i = self.enter(Verb::GetPod, name, None).await?;
        self.exit(i, self.inner.get_pod(namespace, name).await)
    }
    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        let i = self.enter(Verb::WaitPod, name, None).await?;
        self.exit(
            i,
            self.inner.wait_pod(namespace, name, since, timeout).await,
        )
    }
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        let pre = Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        };
        let i = self.enter(Verb::EvictPod, name, Some(&pre)).await?;
        self.exit(
            i,
            self.inner
                .evict_pod(namespace, name, uid, grace_period, dry_run)
                .await,
        )
    }
}

#[async_trait]
impl<A: LeaseApi + 'static> LeaseApi for Interposed<A> {
    async fn get_lease(&self, namespace: &str, name: &str) -> ApiResult<Lease> {
        let i = self.enter(Verb::GetLease, name, None).await?;
        self.exit(i, self.inner.get_lease(namespace, name).await)
    }
    async fn create_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let name = lease.metadata.name.as_deref().unwrap_or("");
        let i = self.enter(Verb::CreateLease, name, None).await?;
        self.exit(i, self.inner.create_lease(lease).await)
    }
    async fn replace_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let name = lease.metadata.name.as_deref().unwrap_or("");
        let pre = Preconditions {
            uid: None,
            resource_version: lease.metadata.resource_version.clone(),
        };
        let i = self.enter(Verb::ReplaceLease, name, Some(&pre)).await?;
        self.exit(i, self.inner.replace_lease(lease).await)
    }
}
