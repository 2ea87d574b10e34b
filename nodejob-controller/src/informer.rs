//! [`Informer`]: where a kind's loop learns its resources and their changes. The controller's
//! own, [`ListWatch`], reads them through core's traits (a list, then a watch from its
//! resourceVersion), so the in-memory cluster runs the loop in virtual time; on a real cluster
//! `nodejob-cli` gives kube-runtime's controller (its watcher, reflector store and the
//! generation predicate) through [`Informers`].

use std::sync::Arc;
use std::time::Duration;

use nodejob_core::{ApiResult, Change};
use nodejob_crd::{CARotation, NodeUpgrade, Roll, RollApi};

/// Where a kind's loop learns its resources: each as it stands ([`Informer::list`]), then each
/// that changed ([`Informer::changes`]). The loop lists again after an error of either and
/// after each run ends, so a change missed is found by the next list.
#[async_trait::async_trait]
pub trait Informer<K>: Send {
    /// Every resource of the kind as it stands now. A kind the apiserver does not serve (its
    /// CRD not installed yet) is `NotFound`.
    async fn list(&mut self) -> ApiResult<Vec<K>>;

    /// The resources that changed since the last list or changes, at least one: it waits until
    /// one does. An error (the watch's history gone, 410; the apiserver away) has the loop
    /// list again.
    async fn changes(&mut self) -> ApiResult<Vec<K>>;
}

/// Each kind's [`Informer`], made as its loop starts (and again when it starts over).
pub trait Informers: Send + Sync {
    /// The `NodeUpgrade`s'.
    fn upgrades(&self) -> Box<dyn Informer<NodeUpgrade>>;
    /// The `CARotation`s'.
    fn rotations(&self) -> Box<dyn Informer<CARotation>>;
}

/// A kind read through core's traits, as a reflector reads it: a list, then a watch from the
/// list's resourceVersion, `timeout` at a time. Only what was applied is told; a resource
/// deleted is gone from the next list.
pub(crate) struct ListWatch<A: ?Sized> {
    api: Arc<A>,
    timeout: Duration,
    /// Where the watch resumes; `None`: no list read yet.
    rv: Option<String>,
}

impl<A: RollApi + ?Sized> ListWatch<A> {
    async fn list<K: Roll>(&mut self) -> ApiResult<Vec<K>> {
        self.rv = None;
        let at = self.api.list_rolls_at::<K>().await?;
        self.rv = Some(at.resource_version);
        Ok(at.rolls)
    }

    async fn changes<K: Roll>(&mut self) -> ApiResult<Vec<K>> {
        loop {
            let Some(rv) = self.rv.clone() else {
                // No list read yet: nothing to watch from.
                return std::future::pending().await;
            };
            let got = self.api.wait_rolls::<K>(&rv, self.timeout).await?;
            self.rv = Some(got.resource_version);
            let applied: Vec<K> = (got.changes.into_iter())
                .filter_map(|c| match c {
                    Change::Applied(roll) => Some(roll),
                    _ => None,
                })
                .collect();
            if !applied.is_empty() {
                return Ok(applied);
            }
        }
    }
}

/// A kind's loop's source: the controller's own [`ListWatch`], or an [`Informer`] given.
pub(crate) enum Source<A: ?Sized, K> {
    Own(ListWatch<A>),
    Given(Box<dyn Informer<K>>),
}

impl<A: RollApi + ?Sized, K: Roll> Source<A, K> {
    /// The controller's own, over `api`.
    pub(crate) fn own(api: Arc<A>, timeout: Duration) -> Self {
        Source::Own(ListWatch {
            api,
            timeout,
            rv: None,
        })
    }

    /// [`Informer::list`].
    pub(crate) async fn list(&mut self) -> ApiResult<Vec<K>> {
        match self {
            Source::Own(own) => own.list().await,
            Source::Given(given) => given.list().await,
        }
    }

    /// [`Informer::changes`].
    pub(crate) async fn changes(&mut self) -> ApiResult<Vec<K>> {
        match self {
            Source::Own(own) => own.changes().await,
            Source::Given(given) => given.changes().await,
        }
    }
}
