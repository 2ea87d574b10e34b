//! [`JobApi`] for [`KubeApi`]: Jobs, their Pods' logs, Events.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use kube::api::{
    DeleteParams, GetParams, ListParams, LogParams, ObjectList, PostParams, PropagationPolicy,
};
use nodejob_core::{ApiError, ApiResult, Change, ErrorKind, JobApi};

use super::{KubeApi, collection, key};
use crate::transport::{call, call_json};

#[async_trait]
impl JobApi for KubeApi {
    async fn create_job(&self, job: &Job) -> ApiResult<Job> {
        let ns = self.namespace_of(job.metadata.namespace.as_deref());
        let body = serde_json::to_vec(job)
            .map_err(|e| ApiError::new(ErrorKind::Invalid, 0, format!("encoding the job: {e}")))?;
        let answer = call_json::<Job>(
            &self.client,
            collection::<Job>(Some(ns)).create(&PostParams::default(), body),
        )
        .await;
        if let Ok(created) = &answer {
            let name = created.metadata.name.as_deref().unwrap_or_default();
            self.jobs.saw(&key(ns, name), created);
        }
        answer
    }

    async fn get_job(&self, namespace: &str, name: &str) -> ApiResult<Job> {
        let request = collection::<Job>(Some(namespace)).get(name, &GetParams::default());
        self.get_tracked(&self.jobs, key(namespace, name), request)
            .await
    }

    /// One `LIST` (no `limit`, so no continue token: the apiserver answers every match at
    /// once). A namespace that does not exist answers 200 with no items, as the apiserver
    /// does; a selector it cannot parse, 400 BadRequest.
    async fn list_jobs(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Job>> {
        let lp = ListParams::default().labels(label_selector);
        let list: ObjectList<Job> =
            call_json(&self.client, collection::<Job>(scope(namespace)).list(&lp)).await?;
        Ok(list.items)
    }

    /// `DeleteOptions` in the body: `propagationPolicy: Foreground`, so the Job is kept (with a
    /// `deletionTimestamp` and the `foregroundDeletion` finalizer) until the garbage collector
    /// has deleted its Pods
    /// (<https://kubernetes.io/docs/concepts/architecture/garbage-collection/#foreground-deletion>);
    /// and `preconditions {uid, resourceVersion}`, which the apiserver checks against the stored
    /// object before deleting, answering 409 Conflict when either differs
    /// (<https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/delete-options/>).
    async fn delete_job(
        &self,
        namespace: &str,
        name: &str,
        preconditions: Option<&Preconditions>,
    ) -> ApiResult<()> {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: preconditions.map(|p| kube::api::Preconditions {
                uid: p.uid.clone(),
                resource_version: p.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        // kube sends the options as a bare JSON object: the apiserver's delete handler decodes a
        // body without apiVersion/kind as meta.k8s.io/v1 DeleteOptions (its `defaultGVK`,
        // `apiserver/pkg/endpoints/handlers/delete.go`). It answers 200 with the Job (now carrying
        // a deletionTimestamp) or 200/202 with a Status: either way accepted.
        call(
            &self.client,
            collection::<Job>(Some(namespace)).delete(name, &dp),
        )
        .await
        .map(drop)
    }

    async fn list_pods(&self, namespace: &str, label_selector: &str) -> ApiResult<Vec<Pod>> {
        let lp = ListParams::default().labels(label_selector);
        let list: ObjectList<Pod> =
            call_json(&self.client, collection::<Pod>(scope(namespace)).list(&lp)).await?;
        Ok(list.items)
    }

    /// `limitBytes` bounds what the kubelet sends. The apiserver fetches the log from the
    /// node's kubelet; when it cannot reach it, it answers 500 with the dial error as the
    /// message and no reason (an error it did not classify), which stays
    /// [`ErrorKind::Transient`] with that message.
    async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        limit_bytes: u64,
    ) -> ApiResult<String> {
        let lp = LogParams {
            container: Some(container.to_string()),
            limit_bytes: Some(i64::try_from(limit_bytes).unwrap_or(i64::MAX)),
            ..LogParams::default()
        };
        let body = call(
            &self.client,
            collection::<Pod>(Some(namespace)).logs(pod, &lp),
        )
        .await?;
        // A log is the container's bytes: a multi-byte character cut by `limitBytes` is dropped,
        // other invalid UTF-8 replaced, and the text never exceeds the limit.
        Ok(nodejob_core::log_text(&body, limit_bytes))
    }

    /// `involvedObject.uid` is one of the field selectors core/v1 Events support
    /// (`AddFieldLabelConversionsForEvent` in `pkg/apis/core/v1/conversion.go`).
    async fn list_events(&self, namespace: &str, involved_uid: &str) -> ApiResult<Vec<Event>> {
        let lp = ListParams::default().fields(&format!("involvedObject.uid={involved_uid}"));
        let list: ObjectList<Event> =
            call_json(&self.client, collection::<Event>(Some(namespace)).list(&lp)).await?;
        Ok(list.items)
    }

    /// The namespace is the Event's own, else the client's default. The apiserver answers 201
    /// with the Event as stored (named from `generateName`); a refusal by its Event rules is a
    /// 422 Invalid.
    async fn create_event(&self, event: &Event) -> ApiResult<Event> {
        let ns = self.namespace_of(event.metadata.namespace.as_deref());
        let body = serde_json::to_vec(event).map_err(|e| {
            ApiError::new(ErrorKind::Invalid, 0, format!("encoding the event: {e}"))
        })?;
        call_json(
            &self.client,
            collection::<Event>(Some(ns)).create(&PostParams::default(), body),
        )
        .await
    }

    /// A watch with `fieldSelector=metadata.name=<name>`, from `since`, kept open across calls:
    /// a call whose `since` is the resourceVersion the previous call returned reads on from the
    /// same stream. A stream the apiserver ends is reopened from its last resourceVersion
    /// (bookmarks included); a 410 Gone re-lists the object by name and resumes from the list's
    /// resourceVersion, answering the change the watch missed (if any), never the error
    /// (unless the Job is gone and its last state was never read here).
    async fn wait_job(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Job>> {
        self.wait_on(
            &self.jobs,
            collection::<Job>(Some(namespace)),
            key(namespace, name),
            since,
            timeout,
        )
        .await
    }
}

/// The namespace of a list: `None`, every namespace (the collection's cluster-wide path), for
/// an empty one.
fn scope(namespace: &str) -> Option<&str> {
    (!namespace.is_empty()).then_some(namespace)
}
