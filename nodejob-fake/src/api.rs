//! [`Clock`], [`JobApi`], [`NodeApi`], [`PodApi`], [`LeaseApi`] and [`CustomApi`] for
//! [`FakeCluster`]: each
//! verb is recorded, runs its hook, consults the faults, then is served by the store.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use k8s_openapi::apimachinery::pkg::version::Info;
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use k8s_openapi::serde_json::Value;
use nodejob_core::{
    ApiResult, Change, Clock, CustomApi, CustomAt, CustomChanges, CustomKind, DryRun, Eviction,
    JobApi, LeaseApi, NodeApi, NodeChange, NodeChanges, NodesAt, PodApi,
};
use tokio::time::Instant;

use crate::record::Call;
use crate::registry;
use crate::selector::Selector;
use crate::store::Key;
use crate::watch::{History, Since, Watched, every_node};
use crate::{FakeCluster, Verb};

impl FakeCluster {
    /// Serves one call: record, hook, faults, then `serve` (a future, so nothing of it runs
    /// before), recording how it ended.
    async fn serve<T>(
        &self,
        verb: Verb,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
        serve: impl Future<Output = ApiResult<T>>,
    ) -> ApiResult<T> {
        let call = Call {
            verb,
            namespace: namespace.to_string(),
            name: name.to_string(),
            preconditions: preconditions.cloned(),
            at: self.elapsed(),
            error: None,
        };
        let index = self.begin(call)?;
        let result = serve.await;
        self.end(index, result.as_ref().err().map(|e| e.kind));
        result
    }

    /// A watch on one name: the first event after `since`, waiting up to `timeout`.
    async fn wait_on<K: Clone + Serialize + DeserializeOwned>(
        &self,
        kind: Watched,
        key: Key,
        since: Option<&str>,
        timeout: Duration,
        history: impl Fn(&crate::state::State) -> (&History<K>, Option<&K>),
    ) -> ApiResult<Change<K>> {
        let deadline = Instant::now() + timeout;
        // Subscribe before the first look, so no write between the look and the wait is lost.
        let mut changed = self.subscribe((kind, key.clone()));
        let since = self.with_state(|st| Since::parse(since, st.store.rv()))?;
        let since = match since {
            Since::After(rv) => rv,
            Since::Any => {
                // A watch from "any" version first lists the object as a synthetic ADDED.
                let (current, rv) = self.with_state(|st| (history(st).1.cloned(), st.store.rv()));
                if let Some(object) = current {
                    return Ok(Change::Applied(object));
                }
                rv
            }
        };
        loop {
            if let Some(change) = self.with_state(|st| history(st).0.first_after(&key, since)) {
                return Ok(change);
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return Ok(Change::TimedOut),
            }
        }
    }
}

#[async_trait]
impl Clock for FakeCluster {
    /// Virtual time since the cluster was made.
    fn now(&self) -> Duration {
        self.elapsed()
    }

    /// `tokio::time::sleep`: virtual under paused time.
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }

    /// [`EPOCH_SECONDS`](crate::EPOCH_SECONDS) plus the virtual time, to the microsecond.
    fn wall_time(&self) -> k8s_openapi::jiff::Timestamp {
        crate::timing::wall(self.elapsed())
    }
}

#[async_trait]
impl JobApi for FakeCluster {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let namespace = job.metadata.namespace.as_deref().unwrap_or("default");
        let meta = &job.metadata;
        let name = meta
            .name
            .as_deref()
            .or(meta.generate_name.as_deref())
            .unwrap_or_default();
        self.serve(Verb::CreateJob, namespace, name, None, async {
            self.with_state(|st| st.create_job(job))
        })
        .await
    }

    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        self.serve(Verb::GetJob, namespace, name, None, async {
            self.with_state(|st| st.store.get_job(namespace, name))
        })
        .await
    }

    async fn list_jobs(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Job>> {
        self.serve(Verb::ListJobs, namespace, label_selector, None, async {
            self.with_state(|st| st.store.list_jobs(namespace, label_selector))
        })
        .await
    }

    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<()> {
        self.serve(Verb::DeleteJob, namespace, name, preconditions, async {
            self.with_state(|st| st.store.delete_job(namespace, name, preconditions, st.now))
                .map(drop)
        })
        .await
    }

    async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>> {
        self.serve(Verb::ListPods, namespace, label_selector, None, async {
            self.with_state(|st| st.store.list_pods(namespace, label_selector))
        })
        .await
    }

    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        self.serve(Verb::PodLog, namespace, pod, None, async {
            self.with_state(|st| st.pod_log(namespace, pod, container, limit_bytes))
        })
        .await
    }

    async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>> {
        self.serve(Verb::ListEvents, namespace, involved_uid, None, async {
            Ok(self.with_state(|st| st.store.list_events(namespace, involved_uid)))
        })
        .await
    }

    async fn create_event(&self, event: &Event) -> ApiResult<Event> {
        let meta = &event.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or("default");
        let name = meta
            .name
            .as_deref()
            .or(meta.generate_name.as_deref())
            .unwrap_or_default();
        self.serve(Verb::CreateEvent, namespace, name, None, async {
            self.with_state(|st| registry::create_event(&mut st.store, event, st.now))
        })
        .await
    }

    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        let key = (namespace.to_string(), name.to_string());
        self.serve(Verb::WaitJob, namespace, name, None, async {
            self.wait_on(Watched::Job, key.clone(), since, timeout, |st| {
                (&st.store.job_history, st.store.jobs.get(&key))
            })
            .await
        })
        .await
    }
}

/// A precondition on the resourceVersion only, for the call record.
fn version(resource_version: &str) -> Preconditions {
    Preconditions {
        uid: None,
        resource_version: Some(resource_version.to_string()),
    }
}

#[async_trait]
impl NodeApi for FakeCluster {
    async fn get_node(&self, name: &str) -> ApiResult<Node> {
        self.serve(Verb::GetNode, "", name, None, async {
            self.with_state(|st| st.store.get_node(name))
        })
        .await
    }

    async fn list_nodes(&self, label_selector: &str) -> ApiResult<Vec<Node>> {
        self.serve(Verb::ListNodes, "", label_selector, None, async {
            let selector = Selector::parse(label_selector)?;
            Ok(self.with_state(|st| {
                (st.store.nodes.values())
                    .filter(|n| selector.matches(n.metadata.labels.as_ref()))
                    .cloned()
                    .collect()
            }))
        })
        .await
    }

    async fn list_nodes_at(&self) -> ApiResult<NodesAt> {
        self.serve(Verb::ListNodesAt, "", "", None, async {
            Ok(self.with_state(|st| NodesAt {
                nodes: st.store.nodes.values().cloned().collect(),
                resource_version: st.store.rv().to_string(),
            }))
        })
        .await
    }

    /// The whole history is kept, so no `since` is too old: never Gone (see `watch`).
    async fn wait_nodes(&self, since: &str, timeout: Duration) -> ApiResult<NodeChanges> {
        self.serve(Verb::WaitNodes, "", "", None, async {
            let deadline = Instant::now() + timeout;
            // Subscribe before the first look, so no write between the look and the wait is
            // lost.
            let mut changed = self.subscribe((Watched::Node, every_node()));
            let after = match self.with_state(|st| Since::parse(Some(since), st.store.rv()))? {
                Since::After(rv) => rv,
                // "" or "0": a watch from any version first lists every node as a synthetic
                // ADDED, then goes on from the latest resourceVersion.
                Since::Any => {
                    return Ok(self.with_state(|st| NodeChanges {
                        changes: st
                            .store
                            .nodes
                            .values()
                            .cloned()
                            .map(Change::Applied)
                            .collect(),
                        resource_version: st.store.rv().to_string(),
                    }));
                }
            };
            loop {
                let changes = self.with_state(|st| st.store.node_history.all_after(after));
                if let Some((last, _)) = changes.last() {
                    return Ok(NodeChanges {
                        resource_version: last.to_string(),
                        changes: changes.into_iter().map(|(_, c)| c).collect(),
                    });
                }
                let waited = tokio::time::timeout_at(deadline, changed.changed()).await;
                if !matches!(waited, Ok(Ok(()))) {
                    return Ok(NodeChanges {
                        changes: Vec::new(),
                        resource_version: since.to_string(),
                    });
                }
            }
        })
        .await
    }

    async fn wait_node(
        &self,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Node>> {
        let key = (String::new(), name.to_string());
        self.serve(Verb::WaitNode, "", name, None, async {
            self.wait_on(Watched::Node, key.clone(), since, timeout, |st| {
                (&st.store.node_history, st.store.nodes.get(name))
            })
            .await
        })
        .await
    }

    async fn patch_node(
        &self,
        name: &str,
        resource_version: &str,
        changes: &[NodeChange],
    ) -> ApiResult<Node> {
        let pre = version(resource_version);
        self.serve(Verb::PatchNode, "", name, Some(&pre), async {
            self.with_state(|st| {
                registry::patch_node(&mut st.store, name, resource_version, changes)
            })
        })
        .await
    }

    async fn patch_node_conditions(
        &self,
        name: &str,
        resource_version: Option<&str>,
        changes: &[NodeChange],
        conditions: &[NodeCondition],
    ) -> ApiResult<Node> {
        let pre = resource_version.map(version);
        self.serve(Verb::PatchNodeConditions, "", name, pre.as_ref(), async {
            self.with_state(|st| {
                let store = &mut st.store;
                let rv = resource_version;
                registry::patch_node_conditions(store, name, rv, changes, conditions)
            })
        })
        .await
    }

    async fn version(&self) -> ApiResult<Info> {
        self.serve(Verb::Version, "", "", None, async {
            Ok(self.with_state(|st| {
                crate::server::info(&st.server.git_version(st.store.control_plane_nodes()))
            }))
        })
        .await
    }
}

#[async_trait]
impl PodApi for FakeCluster {
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        self.serve(Verb::ListNodePods, "", node, None, async {
            Ok(self.with_state(|st| st.store.pods_on(node)))
        })
        .await
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        self.serve(Verb::GetPod, namespace, name, None, async {
            self.with_state(|st| st.store.get_pod(namespace, name))
        })
        .await
    }

    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        let key = (namespace.to_string(), name.to_string());
        self.serve(Verb::WaitPod, namespace, name, None, async {
            self.wait_on(Watched::Pod, key.clone(), since, timeout, |st| {
                (&st.store.pod_history, st.store.pods.get(&key))
            })
            .await
        })
        .await
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
        self.serve(Verb::EvictPod, namespace, name, Some(&pre), async {
            self.with_state(|st| st.evict_pod(namespace, name, uid, grace_period, dry_run))
        })
        .await
    }
}

#[async_trait]
impl LeaseApi for FakeCluster {
    async fn get_lease(&self, namespace: &str, name: &str) -> ApiResult<Lease> {
        self.serve(Verb::GetLease, namespace, name, None, async {
            self.with_state(|st| registry::get_lease(&st.store, namespace, name))
        })
        .await
    }

    async fn create_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let meta = &lease.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or("default");
        let name = meta.name.as_deref().unwrap_or_default();
        self.serve(Verb::CreateLease, namespace, name, None, async {
            self.with_state(|st| registry::create_lease(&mut st.store, lease, st.now))
        })
        .await
    }

    async fn replace_lease(&self, lease: &Lease) -> ApiResult<Lease> {
        let meta = &lease.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or("default");
        let name = meta.name.as_deref().unwrap_or_default();
        let pre = version(meta.resource_version.as_deref().unwrap_or_default());
        self.serve(Verb::ReplaceLease, namespace, name, Some(&pre), async {
            self.with_state(|st| registry::replace_lease(&mut st.store, lease, st.now))
        })
        .await
    }
}

#[async_trait]
impl CustomApi for FakeCluster {
    async fn get_custom(&self, kind: CustomKind, name: &str) -> ApiResult<Value> {
        self.serve(Verb::GetCustom, "", name, None, async {
            self.with_state(|st| st.store.customs.kind(kind)?.get(name))
        })
        .await
    }

    async fn list_custom_at(&self, kind: CustomKind) -> ApiResult<CustomAt> {
        self.serve(Verb::ListCustomAt, "", kind.plural, None, async {
            self.with_state(|st| Ok(st.store.customs.kind(kind)?.list_at(st.store.rv())))
        })
        .await
    }

    /// As [`NodeApi::wait_nodes`] for the kind's collection: the whole history is kept, so
    /// never Gone.
    async fn wait_custom(
        &self,
        kind: CustomKind,
        since: &str,
        timeout: Duration,
    ) -> ApiResult<CustomChanges> {
        self.serve(Verb::WaitCustom, "", kind.plural, None, async {
            let deadline = Instant::now() + timeout;
            let mut changed = self.subscribe((Watched::Custom(kind.plural), every_node()));
            let after = match self.with_state(|st| Since::parse(Some(since), st.store.rv()))? {
                Since::After(rv) => rv,
                Since::Any => {
                    return self.with_state(|st| {
                        let at = st.store.customs.kind(kind)?.list_at(st.store.rv());
                        Ok(CustomChanges {
                            changes: at.objects.into_iter().map(Change::Applied).collect(),
                            resource_version: at.resource_version,
                        })
                    });
                }
            };
            loop {
                let changes = self.with_state(|st| {
                    Ok::<_, nodejob_core::ApiError>(
                        st.store.customs.kind(kind)?.history.all_after(after),
                    )
                })?;
                if let Some((last, _)) = changes.last() {
                    return Ok(CustomChanges {
                        resource_version: last.to_string(),
                        changes: changes.into_iter().map(|(_, c)| c).collect(),
                    });
                }
                let waited = tokio::time::timeout_at(deadline, changed.changed()).await;
                if !matches!(waited, Ok(Ok(()))) {
                    return Ok(CustomChanges {
                        changes: Vec::new(),
                        resource_version: since.to_string(),
                    });
                }
            }
        })
        .await
    }

    async fn create_custom(&self, kind: CustomKind, object: &Value) -> ApiResult<Value> {
        let name = object.pointer("/metadata/name").and_then(Value::as_str);
        self.serve(
            Verb::CreateCustom,
            "",
            name.unwrap_or_default(),
            None,
            async { self.with_state(|st| st.store.create_custom(kind, object, st.now)) },
        )
        .await
    }

    async fn replace_custom(&self, kind: CustomKind, object: &Value) -> ApiResult<Value> {
        let name = object.pointer("/metadata/name").and_then(Value::as_str);
        let rv = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        let pre = rv.map(version);
        self.serve(
            Verb::ReplaceCustom,
            "",
            name.unwrap_or_default(),
            pre.as_ref(),
            async { self.with_state(|st| st.store.replace_custom(kind, object)) },
        )
        .await
    }

    async fn apply_custom_status(
        &self,
        kind: CustomKind,
        name: &str,
        manager: &str,
        status: &Value,
    ) -> ApiResult<Value> {
        self.serve(Verb::ApplyCustomStatus, "", name, None, async {
            self.with_state(|st| st.store.apply_custom_status(kind, name, manager, status))
        })
        .await
    }

    async fn delete_custom(
        &self,
        kind: CustomKind,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<Option<Value>> {
        self.serve(Verb::DeleteCustom, "", name, preconditions, async {
            self.with_state(|st| st.store.delete_custom(kind, name, preconditions, st.now))
        })
        .await
    }
}
