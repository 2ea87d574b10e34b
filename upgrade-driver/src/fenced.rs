//! [`FencedPods`]: the Pod verbs a drain uses, each eviction fenced by the Lease without a
//! request: once any step of the run has seen the Lease lost, a drain in flight elsewhere
//! evicts nothing more (its next eviction answers an error naming the loss), so no write of
//! the run follows the driver's knowledge of the loss.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::drive::Fence;
use nodejob_core::{ApiError, ApiResult, Change, Clock, DryRun, ErrorKind, Eviction, PodApi};

/// `api`'s Pod verbs, evictions refused once `fence` knows the Lease lost.
pub(crate) struct FencedPods<'a, A: ?Sized> {
    pub(crate) api: &'a A,
    pub(crate) fence: &'a Fence,
}

#[async_trait]
impl<A: PodApi + ?Sized> Clock for FencedPods<'_, A> {
    fn now(&self) -> Duration {
        self.api.now()
    }
    async fn sleep(&self, duration: Duration) {
        self.api.sleep(duration).await
    }
    fn wall_time(&self) -> Timestamp {
        self.api.wall_time()
    }
}

#[async_trait]
impl<A: PodApi + ?Sized> PodApi for FencedPods<'_, A> {
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        self.api.list_node_pods(node).await
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        self.api.get_pod(namespace, name).await
    }
    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        self.api.wait_pod(namespace, name, since, timeout).await
    }
    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        if let Some(why) = self.fence.lost() {
            // Not a passing fault: never retried.
            return Err(ApiError::new(
                ErrorKind::Other,
                0,
                format!("not evicting: the Lease was lost: {why}"),
            ));
        }
        (self.api)
            .evict_pod(namespace, name, uid, grace_period, dry_run)
            .await
    }
}
