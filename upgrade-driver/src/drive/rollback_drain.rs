//! The drain before a rollback: as any drain, but the Pods of our own host Jobs are left (the
//! failed upgrade's Pod among them, kept for inspection: `kubectl logs job/...`). kubectl's
//! filters evict a Pod that has ended, so a plain drain would delete it.

use nodejob_core::{Answer, ApiResult, Layer, Request};

/// `inner`, its node's Pod list without the Pods carrying `label_key` (our host Jobs').
pub(super) struct KeepingHostPods<L> {
    inner: L,
    label_key: String,
}

impl<L> KeepingHostPods<L> {
    /// `inner`, hiding the Pods labelled `label_key` from a drain.
    pub(super) fn new(inner: L, label_key: String) -> Self {
        KeepingHostPods { inner, label_key }
    }
}

impl<L: Layer + Send + Sync> Layer for KeepingHostPods<L> {
    type Below = L;

    fn below(&self) -> &L {
        &self.inner
    }

    /// A node's Pods, those of our host Jobs left out; every other call as it is.
    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let listing = matches!(request, Request::ListNodePods { .. });
        match serve.await? {
            Answer::Pods(pods) if listing => Ok(Answer::Pods(
                pods.into_iter()
                    .filter(|p| {
                        (p.metadata.labels.as_ref())
                            .is_none_or(|l| !l.contains_key(&self.label_key))
                    })
                    .collect(),
            )),
            other => Ok(other),
        }
    }
}
