//! `nodejob controller` on a cluster learns its resources from kube-runtime's controller: its
//! watcher (relists, bookmarks, the backoff of a failing watch) and its reflector store feed
//! the reconcile loop of `nodejob-controller` through [`Informer`]. kube-runtime calls the
//! reconciler on every change; what reaches the loop is filtered by its generation predicate
//! (`kube::runtime::predicates::generation`): a spec edited, or a delete asked (which bumps the
//! generation of a resource with a finalizer), not the controller's own status writes. The
//! loop's own list (after each run, each retry, each error) reads the store, not the
//! apiserver; the store may lag the controller's own last write, so the loop reads each
//! resource again before it decides on it (`nodejob-controller`'s `reconcile`). Under
//! `--simulate` the loop reads the in-memory cluster itself.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::{Action, Controller};
use kube::runtime::predicates;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use nodejob_controller::{Informer, Informers};
use nodejob_core::{ApiError, ApiResult};
use nodejob_crd::{CARotation, NodeUpgrade};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long a list waits for kube-runtime's first list of a kind (its store ready) before it
/// says the kind is not served yet (the loop lists again, backing off).
const FIRST_LIST: Duration = Duration::from_secs(10);

/// Each kind's informer: kube-runtime's controller over `client`.
pub(crate) struct KubeInformers {
    pub(crate) client: Client,
}

impl Informers for KubeInformers {
    fn upgrades(&self) -> Box<dyn Informer<NodeUpgrade>> {
        Box::new(Triggered::start(self.client.clone()))
    }

    fn rotations(&self) -> Box<dyn Informer<CARotation>> {
        Box::new(Triggered::start(self.client.clone()))
    }
}

/// kube-runtime's controller of kind `K`, its reconciler handing each object it is called for
/// to [`Informer::changes`].
struct Triggered<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    triggered: mpsc::UnboundedReceiver<Arc<K>>,
    /// The generation hash each resource (by UID) was last handed on with.
    seen: HashMap<String, Option<u64>>,
    task: JoinHandle<()>,
}

impl<K> Triggered<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn start(client: Client) -> Self {
        let (tx, triggered) = mpsc::unbounded_channel();
        let controller = Controller::new(Api::<K>::all(client), watcher::Config::default());
        let store = controller.store();
        let reconcile = |roll: Arc<K>, tx: Arc<mpsc::UnboundedSender<Arc<K>>>| async move {
            // The loop acts on it; kube-runtime calls again on the next change.
            let _ = tx.send(roll);
            Ok::<_, Infallible>(Action::await_change())
        };
        let never = |_: Arc<K>, _: &Infallible, _: Arc<mpsc::UnboundedSender<Arc<K>>>| {
            Action::await_change()
        };
        let runs = controller.run(reconcile, never, Arc::new(tx));
        let task = tokio::spawn(async move {
            use futures::StreamExt;
            runs.for_each(|ran| {
                if let Err(e) = ran {
                    tracing::debug!(error = %e, "kube-runtime's controller");
                }
                std::future::ready(())
            })
            .await;
        });
        Triggered {
            store,
            triggered,
            seen: HashMap::new(),
            task,
        }
    }

    /// Whether `roll` is new to the loop, or of another generation than it was last handed on
    /// with (kube-runtime's generation predicate); remembers it.
    fn changed(&mut self, roll: &K) -> bool {
        let uid = roll.uid().unwrap_or_default();
        let generation = predicates::generation(roll);
        self.seen.insert(uid, generation) != Some(generation)
    }
}

impl<K: Resource<DynamicType = ()> + 'static> Drop for Triggered<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[async_trait::async_trait]
impl<K> Informer<K> for Triggered<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async fn list(&mut self) -> ApiResult<Vec<K>> {
        if !matches!(
            tokio::time::timeout(FIRST_LIST, self.store.wait_until_ready()).await,
            Ok(Ok(()))
        ) {
            return Err(ApiError::not_found(format!(
                "{}: not listed yet (is its CRD installed?)",
                K::plural(&())
            )));
        }
        let rolls: Vec<K> = (self.store.state().iter())
            .map(|roll| (**roll).clone())
            .collect();
        for roll in &rolls {
            self.changed(roll);
        }
        Ok(rolls)
    }

    async fn changes(&mut self) -> ApiResult<Vec<K>> {
        loop {
            let Some(first) = self.triggered.recv().await else {
                return Err(ApiError::transient(
                    503,
                    format!("{}: kube-runtime's controller ended", K::plural(&())),
                ));
            };
            let mut triggered = vec![first];
            while let Ok(more) = self.triggered.try_recv() {
                triggered.push(more);
            }
            let changed: Vec<K> = (triggered.into_iter())
                .filter(|roll| self.changed(roll))
                .map(|roll| (*roll).clone())
                .collect();
            if !changed.is_empty() {
                return Ok(changed);
            }
        }
    }
}
