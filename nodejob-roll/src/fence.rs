//! The Lease as a [`Fence`]: acquired, checked before every write, renewed while anything
//! waits, released; its [`FenceEvent`]s and the [`LeaseHistory`] a report shows.
//!
//! ```text
//!   Fence::acquire ──▶ Fence::renewing(work) ──▶ Fence::release ──▶ LeaseHistory
//!                           │   ▲
//!        work: check() before every write; the renewer checks every third of the duration
//! ```

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::{Either, select};
use futures::lock::Mutex as AsyncMutex;
use k8s_openapi::api::coordination::v1::Lease;
use nodejob_core::lease::{Claim, Held, Holder, LeaseConfig, acquire, holder};
use nodejob_core::{ApiError, LeaseApi, Result};

use crate::call::retry;
use crate::placement::Placement;

/// Who holds the Lease of `placement`, as [`holder`] reads it: `None` when it is free or does
/// not exist. Transient errors are retried ([`retry`]).
pub async fn lease_holder<A: LeaseApi + ?Sized>(
    api: &A,
    placement: &Placement,
) -> std::result::Result<Option<Holder>, ApiError> {
    Ok(read_lease(api, placement).await?.as_ref().and_then(holder))
}

/// The Lease of `placement` as it is now: `None` when it does not exist. Transient errors are
/// retried ([`retry`]).
pub async fn read_lease<A: LeaseApi + ?Sized>(
    api: &A,
    placement: &Placement,
) -> std::result::Result<Option<Lease>, ApiError> {
    let (namespace, name) = (&placement.namespace, &placement.lease_name);
    match retry(api, || api.get_lease(namespace, name)).await {
        Ok(lease) => Ok(Some(lease)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a [`Fence`] tells its driver as it happens, for the driver's progress.
///
/// Serialised as the drivers' progress events are, tagged by `event`: `{"event":
/// "lease_acquired", "lease": …, "epoch": …, "how": …}`, `{"event": "lease_renewed", "epoch":
/// …}`, `{"event": "lease_lost", "message": …}`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "event")]
#[non_exhaustive]
pub enum FenceEvent {
    /// The Lease is ours.
    #[serde(rename = "lease_acquired")]
    Acquired {
        /// `namespace/name`.
        lease: String,
        /// The epoch we hold.
        epoch: i32,
        /// `free`, `taken over from <holder>`, or `resumed from <holder>`.
        how: String,
    },
    /// The Lease was renewed at this epoch.
    #[serde(rename = "lease_renewed")]
    Renewed {
        /// The epoch held.
        epoch: i32,
    },
    /// The Lease is no longer ours: nothing more is written.
    #[serde(rename = "lease_lost")]
    Lost {
        /// Who holds it now, as the Lease says.
        message: String,
    },
}

/// The Lease in one run, as its report keeps it: how it was acquired (a takeover names whom
/// from), the epoch, the renewals counted (a roll of thousands of nodes renews it thousands of
/// times: no line each), and how it ended (a loss says why).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LeaseHistory {
    /// `namespace/name`.
    pub name: String,
    /// The epoch held.
    pub epoch: i32,
    /// How it was acquired: `free`, `taken over from <holder>`, or `resumed from <holder>`.
    pub acquired: String,
    /// How many times the run renewed it.
    pub renewals: u64,
    /// How it ended.
    pub ended: LeaseEnd,
}

/// How a run's hold of the Lease ended ([`LeaseHistory::ended`]).
///
/// Serialised tagged by `how`: `{"how": "released"}`, `{"how": "lost", "why": …}`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum LeaseEnd {
    /// Released: the next run acquires it at once.
    Released,
    /// Still ours, but the release failed: it expires after its duration.
    NotReleased {
        /// Why.
        why: String,
    },
    /// Lost to another holder (or unreadable): nothing was written after the run knew.
    Lost {
        /// Why.
        why: String,
    },
}

/// Receives a [`Fence`]'s events.
pub type FenceEvents = Box<dyn Fn(&FenceEvent) + Send + Sync>;

/// The Lease lost, and why (as the check that saw it said: another holder took it, its epoch
/// moved, it expired unrenewed). Once lost, every fenced write and wait of the run answers it;
/// it reads `the Lease was lost: WHY` wherever it is said.
#[derive(Clone, Debug, Default, PartialEq, Eq, thiserror::Error)]
#[error("the Lease was lost: {why}")]
pub struct LeaseLost {
    /// Why, as the check that saw it said.
    pub why: String,
}

/// A held Lease as a driver uses it: every write is fenced by [`Fence::check`]; the Lease is
/// renewed every third of its duration for as long as the work of [`Fence::renewing`] runs
/// (a 30-minute host Job included); once lost, it stays lost and nothing more is written.
///
/// Its [`LeaseHistory`] (acquired how, renewals, released or lost) is what a driver's report
/// shows.
pub struct Fence {
    held: AsyncMutex<Held>,
    name: String,
    epoch: i32,
    how: String,
    duration: Duration,
    lost: Mutex<Option<LeaseLost>>,
    /// Told when the loss is first seen, by whichever check saw it: [`Fence::renewing`] then
    /// drops its work at once, so no other step in flight writes on after the driver knows.
    lost_tx: Mutex<Option<futures::channel::oneshot::Sender<()>>>,
    lost_rx: Mutex<Option<futures::channel::oneshot::Receiver<()>>>,
    renewals: std::sync::atomic::AtomicU64,
    events: FenceEvents,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fence")
            .field("name", &self.name)
            .field("epoch", &self.epoch)
            .field("how", &self.how)
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl Fence {
    /// Acquires the Lease of `config` for `claim` ([`acquire`]); `events` hears of it
    /// ([`FenceEvent::Acquired`]), then of renewals and of the loss.
    ///
    /// # Errors
    /// As [`acquire`]: [`nodejob_core::Error::LeaseHeld`] when another holder's Lease is live.
    pub async fn acquire<A: LeaseApi + ?Sized>(
        api: &A,
        config: &LeaseConfig,
        claim: &Claim,
        events: FenceEvents,
    ) -> Result<Fence> {
        let (held, how) = acquire(api, config, claim).await?;
        let how = how.to_string();
        let (name, epoch) = (held.name(), held.epoch());
        events(&FenceEvent::Acquired {
            lease: name.clone(),
            epoch,
            how: how.clone(),
        });
        let (lost_tx, lost_rx) = futures::channel::oneshot::channel();
        Ok(Fence {
            lost_tx: Mutex::new(Some(lost_tx)),
            lost_rx: Mutex::new(Some(lost_rx)),
            renewals: std::sync::atomic::AtomicU64::new(0),
            held: AsyncMutex::new(held),
            name,
            epoch,
            how,
            duration: config.duration,
            lost: Mutex::new(None),
            events,
        })
    }

    /// The Lease's `namespace/name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The epoch acquired.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// How it was acquired: `free`, `taken over from <holder>`, `resumed from <holder>`.
    pub fn how(&self) -> &str {
        &self.how
    }

    /// The pause switch on the Lease as last read ([`nodejob_core::pause`]): every
    /// [`Fence::check`] reads the Lease (its renewal, when due, is the read), so this is as
    /// fresh as the last check, which no wait of the node asking came after.
    pub async fn paused(&self) -> Option<nodejob_core::pause::Pause> {
        nodejob_core::pause::paused(self.held.lock().await.lease())
    }

    /// The Lease lost, and why, once it was.
    pub fn lost(&self) -> Option<LeaseLost> {
        self.lost.lock().unwrap().clone()
    }

    /// Fences a write: the Lease still ours (renewed when due, [`Held::check`]). Once lost,
    /// always lost: the answer says why.
    pub async fn check<A: LeaseApi + ?Sized>(&self, api: &A) -> std::result::Result<(), LeaseLost> {
        if let Some(lost) = self.lost() {
            return Err(lost);
        }
        let mut held = self.held.lock().await;
        let before = renewed(&held);
        match held.check(api).await {
            Ok(()) => {
                if renewed(&held) != before {
                    let epoch = held.epoch();
                    (self.events)(&FenceEvent::Renewed { epoch });
                    (self.renewals).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(())
            }
            Err(e) => {
                let lost = LeaseLost { why: e.to_string() };
                *self.lost.lock().unwrap() = Some(lost.clone());
                (self.events)(&FenceEvent::Lost {
                    message: lost.why.clone(),
                });
                if let Some(tx) = self.lost_tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                Err(lost)
            }
        }
    }

    /// Runs `work` while a renewer checks the Lease every third of its duration. The answer
    /// is `work`'s, or why the Lease was lost: as soon as any check sees the loss (the
    /// renewer's, or a fenced write's), `work` is dropped where it waits, so a step in flight
    /// elsewhere (a drain between two evictions) writes nothing more once the driver knows.
    pub async fn renewing<A, F>(
        &self,
        api: &A,
        work: F,
    ) -> std::result::Result<F::Output, LeaseLost>
    where
        A: LeaseApi + ?Sized,
        F: Future,
    {
        let lost = self.lost_rx.lock().unwrap().take();
        let seen = async {
            // Sent when lost; a dropped sender (the Fence going away) never wakes it.
            if let Some(rx) = lost
                && rx.await.is_ok()
            {
                return self.lost().unwrap_or_default();
            }
            std::future::pending().await
        };
        let work = std::pin::pin!(work);
        let renew = std::pin::pin!(self.renew(api));
        let seen = std::pin::pin!(seen);
        let watch = select(renew, seen);
        match select(work, watch).await {
            Either::Left((done, _)) => Ok(done),
            Either::Right((Either::Left((why, _)) | Either::Right((why, _)), _)) => Err(why),
        }
    }

    /// Checks the Lease every third of its duration; returns only when it is lost.
    async fn renew<A: LeaseApi + ?Sized>(&self, api: &A) -> LeaseLost {
        let every = self.duration / 3;
        loop {
            api.sleep(every).await;
            if let Err(lost) = self.check(api).await {
                return lost;
            }
        }
    }

    /// Releases the Lease, unless it was lost, and answers its history in this run.
    pub async fn release<A: LeaseApi + ?Sized>(self, api: &A) -> LeaseHistory {
        let ended = match self.lost() {
            Some(LeaseLost { why }) => LeaseEnd::Lost { why },
            None => match self.held.into_inner().release(api).await {
                Ok(()) => LeaseEnd::Released,
                Err(e) => LeaseEnd::NotReleased { why: e.to_string() },
            },
        };
        LeaseHistory {
            name: self.name,
            epoch: self.epoch,
            acquired: self.how,
            renewals: self.renewals.into_inner(),
            ended,
        }
    }
}

fn renewed(held: &Held) -> Option<String> {
    held.lease()
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0.to_string())
}
