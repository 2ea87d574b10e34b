//! The node's Lease in `kube-node-lease`, kept as the kubelet's lease controller keeps it
//! (`k8s.io/component-helpers/apimachinery/lease/controller.go`, v0.37.2): renewed every
//! [`LEASE_RENEW`] (jittered) for [`LEASE_DURATION_SECONDS`], by an `update` of the Lease as
//! last written (no read first); on a conflict, or once the Lease is gone, it is read again
//! (`GET`, and created when absent, with the node as its owner so the garbage collector deletes
//! it with the node), with a backoff from 200 ms doubling to 7 s while that fails.
//!
//! A kubelet renews only while it runs: while the node's host is down (a reboot) nothing is
//! renewed, and the first renewal after it is back is at once, as a kubelet that starts
//! renews first thing.
//!
//! One difference, and why: the owner reference names the node's UID as the agent's watch of
//! the nodes delivered it, where the kubelet `GET`s the node for it
//! (`util.SetNodeOwnerFunc`): the agent plays many nodes from one watch, and that read would be
//! one request per node for what it already holds.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use tokio::time::sleep;

use crate::heartbeat::{Jitter, LEASE_DURATION_SECONDS, LEASE_RENEW};
use crate::host::NodeHost;
use crate::writer::WriteError;

/// Where node Leases live (`v1.NamespaceNodeLease`).
pub(crate) const NAMESPACE: &str = "kube-node-lease";
/// `maxUpdateRetries`: immediate tries of a renewal before the next interval.
const MAX_UPDATE_RETRIES: usize = 5;
/// The first pause of the backoff of a failing read or create; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// `maxBackoff`.
const MAX_BACKOFF: Duration = Duration::from_secs(7);

/// The three calls the lease controller makes, over kube in `apiserver.rs`, a recorder in
/// the tests.
pub(crate) trait LeaseWriter: Send + Sync + 'static {
    /// `GET` the Lease `name` of [`NAMESPACE`]; `None` when there is none (404).
    fn get(&self, name: &str) -> impl Future<Output = Result<Option<Lease>, WriteError>> + Send;
    /// `POST` `lease`: the Lease as created.
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, WriteError>> + Send;
    /// `PUT` `lease` (under its `resourceVersion`): the Lease as written;
    /// [`WriteError::Gone`] for a conflict (409) or a Lease gone (404).
    fn update(&self, lease: &Lease) -> impl Future<Output = Result<Lease, WriteError>> + Send;
}

/// The node a Lease is for: its name (the Lease's name and holder) and UID (its owner).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeRef {
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// One node's lease controller.
pub(crate) struct LeaseKeeper<W> {
    writer: W,
    node: NodeRef,
    /// The Lease as last written: the base of the next renewal.
    latest: Option<Lease>,
}

impl<W: LeaseWriter> LeaseKeeper<W> {
    pub(crate) fn new(writer: W, node: NodeRef) -> Self {
        LeaseKeeper {
            writer,
            node,
            latest: None,
        }
    }

    /// One renewal (the controller's `sync`): an update of the Lease last written; failing
    /// that (or at first), the Lease read or created, and then renewed if it was read.
    pub(crate) async fn sync(&mut self) {
        if let Some(latest) = self.latest.clone()
            && self.retry_update(latest).await
        {
            return;
        }
        let (lease, created) = self.ensure().await;
        self.latest = Some(lease.clone());
        if !created && !self.retry_update(lease).await {
            say!(
                "node {}: lease: not renewed, trying again in {LEASE_RENEW:?}",
                self.node.name
            );
        }
    }

    /// `retryUpdateLease`: up to [`MAX_UPDATE_RETRIES`] updates, the Lease read again after a
    /// conflict. `true` once one passed.
    async fn retry_update(&mut self, mut base: Lease) -> bool {
        for _ in 0..MAX_UPDATE_RETRIES {
            match self.writer.update(&self.renewed(Some(&base))).await {
                Ok(lease) => {
                    self.latest = Some(lease);
                    return true;
                }
                Err(WriteError::Gone) => base = self.ensure().await.0,
                Err(WriteError::Refused(e) | WriteError::Failed(e)) => {
                    say!("node {}: lease: renewing: {e}", self.node.name);
                }
            }
        }
        false
    }

    /// `backoffEnsureLease`: the Lease read, or created when there is none (`true`), tried
    /// until it passes.
    async fn ensure(&mut self) -> (Lease, bool) {
        let mut pause = FIRST_BACKOFF;
        loop {
            let tried = match self.writer.get(&self.node.name).await {
                Ok(Some(lease)) => Ok((lease, false)),
                Ok(None) => self.writer.create(&self.renewed(None)).await.map(|lease| {
                    say!(
                        "node {}: lease {NAMESPACE}/{} created",
                        self.node.name,
                        self.node.name
                    );
                    (lease, true)
                }),
                Err(e) => Err(e),
            };
            let why = match tried {
                Ok(found) => return found,
                // Created by another between our read and our create (409): read it next.
                Err(WriteError::Gone) => "created meanwhile".to_string(),
                Err(WriteError::Refused(e) | WriteError::Failed(e)) => e,
            };
            say!(
                "node {}: lease: reading or creating: {why}; again in {pause:?}",
                self.node.name
            );
            sleep(pause).await;
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }

    /// `newLease`: `base` (else a new Lease held by the node) renewed now, for
    /// [`LEASE_DURATION_SECONDS`], owned by the node.
    fn renewed(&self, base: Option<&Lease>) -> Lease {
        let mut lease = base.cloned().unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.node.name.clone()),
                namespace: Some(NAMESPACE.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.node.name.clone()),
                ..LeaseSpec::default()
            }),
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        let owners = lease.metadata.owner_references.get_or_insert_with(Vec::new);
        if owners.is_empty() {
            owners.push(OwnerReference {
                api_version: "v1".to_string(),
                kind: "Node".to_string(),
                name: self.node.name.clone(),
                uid: self.node.uid.clone(),
                ..OwnerReference::default()
            });
        }
        lease
    }
}

/// Keeps the node's Lease for as long as it runs (the node worker aborts it when the node
/// goes): a renewal at once, then one every jittered [`LEASE_RENEW`] after the last ended,
/// none while the host is down.
pub(crate) async fn keep<W: LeaseWriter>(
    mut keeper: LeaseKeeper<W>,
    mut host: watch::Receiver<NodeHost>,
    mut jitter: Jitter,
) {
    loop {
        if host.wait_for(|h| h.up).await.is_err() {
            return;
        }
        keeper.sync().await;
        sleep(jitter.period(LEASE_RENEW)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;

    /// A call, at a millisecond of paused time since the start.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Call {
        Get(u64),
        Create(u64),
        Update(u64),
    }

    /// A Lease store of one Lease with resourceVersions, recording every call.
    #[derive(Clone)]
    struct Store {
        start: Instant,
        calls: Arc<Mutex<Vec<Call>>>,
        lease: Arc<Mutex<Option<Lease>>>,
        version: Arc<Mutex<u64>>,
        /// The next calls (of any kind) that fail transiently.
        fail: Arc<Mutex<usize>>,
    }

    impl Store {
        fn new() -> Self {
            Store {
                start: Instant::now(),
                calls: Arc::default(),
                lease: Arc::default(),
                version: Arc::default(),
                fail: Arc::default(),
            }
        }

        fn ms(&self) -> u64 {
            u64::try_from(self.start.elapsed().as_millis()).unwrap()
        }

        fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }

        fn stored(&self) -> Option<Lease> {
            self.lease.lock().unwrap().clone()
        }

        /// Another writer changes the Lease (a new resourceVersion).
        fn touch(&self) {
            let mut v = self.version.lock().unwrap();
            *v += 1;
            if let Some(l) = self.lease.lock().unwrap().as_mut() {
                l.metadata.resource_version = Some(v.to_string());
            }
        }

        fn delete(&self) {
            *self.lease.lock().unwrap() = None;
        }

        fn failing(&self) -> bool {
            let mut fail = self.fail.lock().unwrap();
            let failing = *fail > 0;
            *fail = fail.saturating_sub(1);
            failing
        }

        fn store(&self, mut lease: Lease) -> Lease {
            let mut v = self.version.lock().unwrap();
            *v += 1;
            lease.metadata.resource_version = Some(v.to_string());
            *self.lease.lock().unwrap() = Some(lease.clone());
            lease
        }
    }

    impl LeaseWriter for Store {
        async fn get(&self, _: &str) -> Result<Option<Lease>, WriteError> {
            self.calls.lock().unwrap().push(Call::Get(self.ms()));
            if self.failing() {
                return Err(WriteError::Failed("connection refused".into()));
            }
            Ok(self.stored())
        }

        async fn create(&self, lease: &Lease) -> Result<Lease, WriteError> {
            self.calls.lock().unwrap().push(Call::Create(self.ms()));
            if self.failing() {
                return Err(WriteError::Failed("connection refused".into()));
            }
            Ok(self.store(lease.clone()))
        }

        async fn update(&self, lease: &Lease) -> Result<Lease, WriteError> {
            self.calls.lock().unwrap().push(Call::Update(self.ms()));
            if self.failing() {
                return Err(WriteError::Failed("connection refused".into()));
            }
            let stored = self.stored().ok_or(WriteError::Gone)?;
            if stored.metadata.resource_version != lease.metadata.resource_version {
                return Err(WriteError::Gone);
            }
            Ok(self.store(lease.clone()))
        }
    }

    fn node() -> NodeRef {
        NodeRef {
            name: "n1".into(),
            uid: "uid-1".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn created_owned_by_the_node_then_renewed_every_ten_seconds_without_a_read() {
        let store = Store::new();
        let (_host, rx) = watch::channel(NodeHost::new("n1", "v1.37.2"));
        let task = tokio::spawn(keep(
            LeaseKeeper::new(store.clone(), node()),
            rx,
            Jitter::None,
        ));
        sleep(Duration::from_millis(30_500)).await;
        task.abort();
        assert_eq!(
            store.calls(),
            [
                Call::Get(0),
                Call::Create(0),
                Call::Update(10_000),
                Call::Update(20_000),
                Call::Update(30_000)
            ]
        );
        let lease = store.stored().unwrap();
        assert_eq!(lease.metadata.name.as_deref(), Some("n1"));
        assert_eq!(lease.metadata.namespace.as_deref(), Some(NAMESPACE));
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert!(spec.renew_time.is_some());
        let owner = &lease.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str()
            ),
            ("v1", "Node", "n1", "uid-1")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_existing_lease_is_read_and_renewed_and_a_conflict_reads_it_again() {
        let store = Store::new();
        store.store(Lease {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..ObjectMeta::default()
            },
            spec: None,
        });
        let mut keeper = LeaseKeeper::new(store.clone(), node());
        keeper.sync().await;
        assert_eq!(store.calls(), [Call::Get(0), Call::Update(0)]);
        // Someone else wrote it: the renewal conflicts, is read again and passes.
        store.touch();
        keeper.sync().await;
        assert_eq!(
            store.calls()[2..],
            [Call::Update(0), Call::Get(0), Call::Update(0)]
        );
        // Deleted: the renewal finds it gone, creates it, and renews the one created.
        store.delete();
        keeper.sync().await;
        assert_eq!(
            store.calls()[5..],
            [
                Call::Update(0),
                Call::Get(0),
                Call::Create(0),
                Call::Update(0)
            ]
        );
        assert!(store.stored().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_read_backs_off_from_200_ms_doubling() {
        let store = Store::new();
        *store.fail.lock().unwrap() = 4;
        let mut keeper = LeaseKeeper::new(store.clone(), node());
        keeper.sync().await;
        assert_eq!(
            store.calls(),
            [
                Call::Get(0),
                Call::Get(200),
                Call::Get(600),
                Call::Get(1400),
                Call::Get(3000),
                Call::Create(3000)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_renewal_while_the_host_is_down_and_one_at_once_when_it_is_back() {
        let store = Store::new();
        let (host, rx) = watch::channel(NodeHost::new("n1", "v1.37.2"));
        let task = tokio::spawn(keep(
            LeaseKeeper::new(store.clone(), node()),
            rx,
            Jitter::None,
        ));
        sleep(Duration::from_millis(15_000)).await;
        host.send_modify(|h| h.up = false);
        sleep(Duration::from_millis(30_000)).await;
        host.send_modify(|h| h.up = true);
        sleep(Duration::from_millis(10_500)).await;
        task.abort();
        assert_eq!(
            store.calls(),
            [
                Call::Get(0),
                Call::Create(0),
                Call::Update(10_000),
                // Down from 15 s to 45 s: the renewal due at 20 s waits for it.
                Call::Update(45_000),
                Call::Update(55_000)
            ]
        );
    }
}
