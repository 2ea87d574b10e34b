//! [`PodApi`] for [`KubeApi`]: the Pods bound to a node, read, watched and evicted.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction as EvictionBody;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, ObjectMeta, Preconditions, Status,
};
use kube::api::{GetParams, ListParams, ObjectList, PostParams};
use nodejob_core::{ApiError, ApiResult, Change, DryRun, ErrorKind, Eviction, PodApi};

use super::{KubeApi, collection, key};
use crate::classify::from_response;
use crate::transport::{Answer, call_json, exchange};

/// The `StatusCause` type (JSON `reason`) the eviction subresource gives the budget it would
/// violate (`policyv1.DisruptionBudgetCause`).
const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";

#[async_trait]
impl PodApi for KubeApi {
    /// One `GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`, unpaged. `spec.nodeName` is
    /// a field selector Pods support (`AddFieldLabelConversionsForPod`,
    /// `pkg/apis/core/v1/conversion.go`), as `kubectl drain` lists them.
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let list: ObjectList<Pod> =
            call_json(&self.client, collection::<Pod>(None).list(&lp)).await?;
        let mut pods = list.items;
        pods.sort_by(|a, b| {
            let a = (&a.metadata.namespace, &a.metadata.name);
            let b = (&b.metadata.namespace, &b.metadata.name);
            a.cmp(&b)
        });
        Ok(pods)
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        let request = collection::<Pod>(Some(namespace)).get(name, &GetParams::default());
        self.get_tracked(&self.pods, key(namespace, name), request)
            .await
    }

    /// As [`JobApi::wait_job`](nodejob_core::JobApi::wait_job), for a Pod: one watch kept open
    /// across calls, resumed after it ends, a 410 recovered by a re-list by name. A Pod known
    /// only from [`PodApi::list_node_pods`] that is deleted while its watch had expired is the
    /// one change a re-list cannot answer (its last state was never read here): that wait
    /// answers the 410, for the caller to read it again.
    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        self.wait_on(
            &self.pods,
            collection::<Pod>(Some(namespace)),
            key(namespace, name),
            since,
            timeout,
        )
        .await
    }

    /// One `POST /api/v1/namespaces/{ns}/pods/{name}/eviction` with a `policy/v1` `Eviction`:
    /// `deleteOptions.preconditions.uid`, `gracePeriodSeconds` when given, and for
    /// [`DryRun::All`] `dryRun: ["All"]` both in the body and as the `dryRun=All` query
    /// parameter: the eviction handler honours the body's, but admission (webhooks included) is
    /// told a request is a dry run by the query parameter only.
    ///
    /// kube's `Api::evict` is not used: it sends the options as `delete_options` (snake case),
    /// which the apiserver does not know, so the UID precondition would be dropped; and it
    /// hides the `Status` causes that name the budget.
    ///
    /// The answers, from `pkg/registry/core/pod/storage/eviction.go`: 201 with a `Success`
    /// Status when the pod is being deleted; 429 `TooManyRequests` "Cannot evict pod as it would
    /// violate the pod's disruption budget." with a `DisruptionBudget` cause naming the budget
    /// ("The disruption budget web needs 2 healthy pods and has 2 currently", or "... is still
    /// being processed by the server."); 404 when the pod is gone; 409 when the UID is not the
    /// stored pod's; 500 (no reason) "This pod has more than one PodDisruptionBudget, which
    /// the eviction subresource does not support.".
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        let eviction = eviction_body(namespace, name, uid, grace_period, dry_run);
        let body = serde_json::to_vec(&eviction).map_err(|e| {
            ApiError::new(ErrorKind::Invalid, 0, format!("encoding the eviction: {e}"))
        })?;
        let pp = PostParams {
            dry_run: dry_run == DryRun::All,
            ..PostParams::default()
        };
        let request =
            collection::<Pod>(Some(namespace)).create_subresource("eviction", name, &pp, body);
        eviction_answer(exchange(&self.client, request).await?)
    }
}

/// The `policy/v1` `Eviction` of the pod `namespace/name`, under its `uid`.
fn eviction_body(
    namespace: &str,
    name: &str,
    uid: &str,
    grace_period: Option<Duration>,
    dry_run: DryRun,
) -> EvictionBody {
    EvictionBody {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        delete_options: Some(DeleteOptions {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            grace_period_seconds: grace_period
                .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
            dry_run: (dry_run == DryRun::All).then(|| vec!["All".to_string()]),
            ..DeleteOptions::default()
        }),
    }
}

/// What the apiserver's answer to an eviction means: 2xx evicted, 429 blocked, 404 gone,
/// anything else an error classified as every other answer is.
///
/// A 429 here is a budget's refusal, answered as [`Eviction::Blocked`] whatever its
/// `Retry-After` (the apiserver sends `Retry-After: 10` when a budget is still being processed,
/// `createTooManyRequestsError` in `eviction.go`): the drain's own backoff retries blocked
/// evictions, never the transient-error retry that honours `Retry-After`. A 429 from API
/// Priority and Fairness is answered as blocked too, with its own message (see
/// [`blocked_message`]): the drain tries it again after its backoff.
fn eviction_answer(answer: Answer) -> ApiResult<Eviction> {
    match answer.code {
        200..=299 => Ok(Eviction::Evicted),
        404 => Ok(Eviction::Gone),
        429 => Ok(Eviction::Blocked {
            message: blocked_message(&answer.body),
        }),
        _ => Err(answer.error()),
    }
}

/// The 429's message followed by its causes' (the `DisruptionBudget` one first: it names the
/// budget), `"Cannot evict pod as it would violate the pod's disruption budget. The disruption
/// budget web needs 2 healthy pods and has 2 currently"`. A 429 from API Priority and Fairness
/// (no cause) or a proxy (no Status) keeps its own message.
fn blocked_message(body: &[u8]) -> String {
    let mut message = from_response(429, body).message;
    let mut causes = serde_json::from_slice::<Status>(body)
        .ok()
        .and_then(|s| s.details)
        .and_then(|d| d.causes)
        .unwrap_or_default();
    causes.sort_by_key(|c| c.reason.as_deref() != Some(DISRUPTION_BUDGET_CAUSE));
    for cause in causes {
        let Some(text) = cause.message.filter(|m| !m.is_empty()) else {
            continue;
        };
        if !message.is_empty() {
            message.push(' ');
        }
        message.push_str(&text);
    }
    message
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(code: u16, body: &serde_json::Value) -> Answer {
        Answer {
            code,
            body: body.to_string().into_bytes(),
            retry_after: None,
        }
    }

    #[test]
    fn a_budget_cause_follows_the_message() {
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {
                "causes": [
                    { "reason": "Other", "message": "" },
                    { "reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently" }
                ]
            },
            "code": 429
        });
        assert_eq!(
            eviction_answer(answer(429, &body)),
            Ok(Eviction::Blocked {
                message: "Cannot evict pod as it would violate the pod's disruption budget. \
                          The disruption budget web needs 2 healthy pods and has 2 currently"
                    .into()
            })
        );
    }

    #[test]
    fn a_429_without_causes_or_status_keeps_its_message() {
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Too many requests, please try again later.",
            "reason": "TooManyRequests",
            "details": { "retryAfterSeconds": 1 },
            "code": 429
        });
        assert_eq!(
            blocked_message(body.to_string().as_bytes()),
            "Too many requests, please try again later."
        );
        assert_eq!(blocked_message(b""), "Too Many Requests");
    }

    #[test]
    fn grace_period_and_dry_run_are_sent_only_when_asked() -> Result<(), serde_json::Error> {
        let plain = eviction_body("ns", "p", "u", None, DryRun::No);
        assert_eq!(
            serde_json::to_value(&plain)?,
            json!({
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": { "name": "p", "namespace": "ns" },
                "deleteOptions": { "preconditions": { "uid": "u" } }
            })
        );
        Ok(())
    }
}
