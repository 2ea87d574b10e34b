//! A fenced Lease: the one cluster-wide lock both drivers share, so one host-mutating operation
//! runs at a time per cluster.
//!
//! The Lease (`coordination.k8s.io/v1`) records who holds it (`holderIdentity`), what for (the
//! operation and its target, as annotations), when it was last renewed (`renewTime`, on the
//! backend's wall clock, [`Clock::wall_time`](crate::Clock::wall_time)) and an **epoch**,
//! `leaseTransitions`, raised by every acquisition. A holder keeps the epoch it acquired; before
//! each mutating step it calls [`Held::check`], which reads the Lease and stops the holder if
//! the epoch moved on (another actor took the Lease over after it expired) or the identity
//! changed. A holder that lost the Lease therefore stops before its next write.
//!
//! ```text
//!   absent ──create──▶ held(epoch 0) ──renew (PUT, resourceVersion)──▶ held
//!   held, expired ──PUT epoch+1──▶ held by the newcomer (the old holder's check fails)
//!   held ──release (PUT holderIdentity unset)──▶ free ──PUT epoch+1──▶ held
//! ```
//!
//! Every write is a `PUT` carrying the resourceVersion that was read (or a create), so two
//! contenders racing for one expired Lease cannot both win: the second gets Conflict, reads the
//! Lease again and finds it held.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::LeaseApi;
use crate::error::{Action, ApiError, Error, ObjectKind, Operation, Result};
use crate::runner::retrying;

/// The annotation on the Lease naming the operation that holds it (`upgrade`, `rotate-ca`).
pub const OPERATION_ANNOTATION: &str = "stratum.ciq.com/lease-operation";
/// The annotation on the Lease naming the operation's target (`v1.37.2`, a CA fingerprint).
pub const TARGET_ANNOTATION: &str = "stratum.ciq.com/lease-target";

/// How many times a renewal meeting Conflicts (the Lease changed by another writer, still ours)
/// reads it again and retries.
const CONFLICT_ROUNDS: u32 = 5;

/// How long a Lease call is retried on transient errors.
const CALL_BOUND: Duration = Duration::from_secs(30);

/// Which Lease, held by whom, for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// Who asks: unique per process (e.g. `host/pid/start time`). The same identity acquiring
    /// again (a restarted driver) takes the Lease over at once, with a new epoch.
    pub identity: String,
    /// `leaseDurationSeconds`: a Lease not renewed for this long may be taken over.
    pub duration: Duration,
}

/// What a holder does with the Lease: written on it, so `nodejob status` and a contender can
/// say who holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claim {
    /// The operation: `upgrade`, `rotate-ca`.
    pub operation: String,
    /// Its target: the version, the new CA's fingerprint.
    pub target: String,
}

/// Who holds a Lease, as read from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// `holderIdentity`.
    pub identity: String,
    /// What it holds the Lease for.
    pub claim: Claim,
    /// `leaseTransitions`.
    pub epoch: i32,
    /// `renewTime`, if set.
    pub renewed: Option<Timestamp>,
    /// When the Lease expires unless renewed (`renewTime + leaseDurationSeconds`).
    pub expires: Option<Timestamp>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (", self.identity)?;
        if !self.claim.operation.is_empty() {
            write!(f, "{} {}, ", self.claim.operation, self.claim.target)?;
        }
        write!(f, "epoch {}", self.epoch)?;
        if let Some(renewed) = self.renewed {
            write!(f, ", renewed {renewed}")?;
        }
        write!(f, ")")
    }
}

/// Reads who holds `lease`, if anyone does (`holderIdentity` set and non-empty).
pub fn holder(lease: &Lease) -> Option<Holder> {
    let spec = lease.spec.as_ref()?;
    let identity = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let annotation = |key: &str| {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
            .unwrap_or_default()
    };
    let renewed = spec.renew_time.as_ref().map(|t| t.0);
    let duration = spec.lease_duration_seconds.unwrap_or(0);
    Some(Holder {
        identity,
        claim: Claim {
            operation: annotation(OPERATION_ANNOTATION),
            target: annotation(TARGET_ANNOTATION),
        },
        epoch: spec.lease_transitions.unwrap_or(0),
        renewed,
        expires: renewed.and_then(|t| {
            t.checked_add(SignedDuration::from_secs(duration.into()))
                .ok()
        }),
    })
}

/// How a Lease was acquired.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Acquired {
    /// There was no Lease, or nobody held it.
    Free,
    /// Its holder had let it expire; it is ours now, and that holder's next check fails.
    TakenOver {
        /// The holder it was taken from.
        previous: Holder,
    },
    /// It was held under our own identity for the same operation (a restarted driver): taken
    /// over at once, with a new epoch, so the earlier process, if it still runs, stops at its
    /// next check. The same identity holding it for another operation is another holder.
    Resumed {
        /// The earlier holding.
        previous: Holder,
    },
}

impl std::fmt::Display for Acquired {
    /// `free`, `taken over from <holder>`, `resumed from <holder>`: as a report says it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Acquired::Free => write!(f, "free"),
            Acquired::TakenOver { previous } => write!(f, "taken over from {previous}"),
            Acquired::Resumed { previous } => write!(f, "resumed from {previous}"),
        }
    }
}

/// A Lease we hold: the epoch we acquired and the Lease as we last wrote it.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    config: LeaseConfig,
    epoch: i32,
    lease: Lease,
}

impl Held {
    /// The epoch (`leaseTransitions`) we acquired.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// The Lease as we last wrote or read it.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The Lease's `namespace/name`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// Fences a mutating step: answers [`Error::LeaseLost`] unless we still hold the Lease at
    /// our epoch now, and keeps it as it is now ([`Held::lease`]: the pause switch on it
    /// included); renews it when a third of its duration has passed since our last renewal.
    /// Call it before every write a driver makes.
    ///
    /// One request: a renewal due is the read. The renewal is a `PUT` under the
    /// resourceVersion last read or written, so it lands only on the Lease exactly as we last
    /// knew it, ours at our epoch, and answers it as it is now: it replaces the `GET` that
    /// would have come before it. Any change since (a pause switch set, another holder) is a
    /// Conflict, which reads the Lease again ([`Held::renew`]). Otherwise the Lease is read.
    pub async fn check<A: LeaseApi + ?Sized>(&mut self, api: &A) -> Result<()> {
        if self.due(api) {
            return self.renew(api).await;
        }
        self.reread(api).await?;
        if self.due(api) {
            self.renew(api).await
        } else {
            Ok(())
        }
    }

    /// Whether a third of the duration has passed since the renewal last known.
    fn due<A: LeaseApi + ?Sized>(&self, api: &A) -> bool {
        let renewed = self
            .lease
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0);
        renewed.is_none_or(|t| {
            api.wall_time().duration_since(t)
                >= SignedDuration::try_from(self.config.duration / 3).unwrap_or(SignedDuration::MAX)
        })
    }

    /// Renews the Lease (`renewTime` = now) under the resourceVersion last read. A Conflict is
    /// read again: still ours at our epoch, the renewal is retried once; else
    /// [`Error::LeaseLost`].
    pub async fn renew<A: LeaseApi + ?Sized>(&mut self, api: &A) -> Result<()> {
        for _ in 0..CONFLICT_ROUNDS {
            // Stamped at each attempt: a renewal retried past a transient error says when it
            // landed, else the Lease it leaves could already be expired.
            let lease = &self.lease;
            let attempt = || {
                let mut next = lease.clone();
                next.spec.get_or_insert_default().renew_time = Some(MicroTime(api.wall_time()));
                async move { api.replace_lease(&next).await }
            };
            match retrying(api, CALL_BOUND, attempt).await {
                Ok(written) => {
                    self.lease = written;
                    return Ok(());
                }
                Err(e) if e.is_conflict() || e.is_not_found() => {
                    self.reread(api).await?;
                }
                Err(cause) => return Err(api_error(&self.config, Action::Renewing, cause)),
            }
        }
        // Still ours at every read, but other writers kept moving it: not lost, contended.
        Err(api_error(
            &self.config,
            Action::Renewing,
            ApiError::conflict(format!(
                "the lease kept changing under other writers through {CONFLICT_ROUNDS} renewals; it is still ours at epoch {}",
                self.epoch
            )),
        ))
    }

    /// Releases the Lease: `holderIdentity` unset, the epoch kept, so the next acquisition is
    /// not delayed by the duration. A Lease no longer ours is left alone (nothing to release).
    pub async fn release<A: LeaseApi + ?Sized>(mut self, api: &A) -> Result<()> {
        for _ in 0..2 {
            let mut next = self.lease.clone();
            let spec = next.spec.get_or_insert_default();
            spec.holder_identity = None;
            spec.renew_time = Some(MicroTime(api.wall_time()));
            match retrying(api, CALL_BOUND, || api.replace_lease(&next)).await {
                Ok(_) => return Ok(()),
                Err(e) if e.is_conflict() => match self.reread(api).await {
                    Err(Error::LeaseLost { .. }) => return Ok(()),
                    other => other?,
                },
                Err(e) if e.is_not_found() => return Ok(()),
                Err(cause) => return Err(api_error(&self.config, Action::Releasing, cause)),
            }
        }
        Err(self.lost(None))
    }

    /// Reads the Lease again and keeps it: [`Error::LeaseLost`] unless it is still ours at our
    /// epoch.
    async fn reread<A: LeaseApi + ?Sized>(&mut self, api: &A) -> Result<()> {
        let read = get(api, &self.config).await?;
        self.verify(read.as_ref())?;
        if let Some(lease) = read {
            self.lease = lease;
        }
        Ok(())
    }

    fn verify(&self, read: Option<&Lease>) -> Result<()> {
        let now = read.and_then(holder);
        match &now {
            Some(h) if h.identity == self.config.identity && h.epoch == self.epoch => Ok(()),
            _ => Err(self.lost(now)),
        }
    }

    fn lost(&self, now: Option<Holder>) -> Error {
        Error::LeaseLost {
            lease: self.name(),
            epoch: self.epoch,
            now: now
                .map(|h| h.to_string())
                .unwrap_or_else(|| "nobody".to_string()),
        }
    }
}

/// Acquires the Lease of `config` for `claim`: creates it when absent, takes it when nobody
/// holds it, when its holder let it expire (`renewTime + leaseDurationSeconds` before the
/// backend's [`wall_time`](crate::Clock::wall_time)), or when it is held under our own identity.
/// Every acquisition raises the epoch, except the creation (epoch 0).
///
/// # Errors
/// [`Error::LeaseHeld`] naming the holder, what it holds the Lease for and when it expires,
/// when another holder's Lease is live; [`Error::Api`] when the apiserver refuses.
pub async fn acquire<A: LeaseApi + ?Sized>(
    api: &A,
    config: &LeaseConfig,
    claim: &Claim,
) -> Result<(Held, Acquired)> {
    // Two rounds: a contender racing us on one write (AlreadyExists, Conflict) is read again.
    for _ in 0..2 {
        let now = api.wall_time();
        let Some(current) = get(api, config).await? else {
            let lease = fresh(config, claim, now);
            let attempt = || {
                let lease = acquired_at(&lease, api.wall_time());
                async move { api.create_lease(&lease).await }
            };
            match retrying(api, CALL_BOUND, attempt).await {
                Ok(lease) => {
                    let held = Held {
                        config: config.clone(),
                        epoch: 0,
                        lease,
                    };
                    return Ok((held, Acquired::Free));
                }
                Err(e) if e.is_already_exists() => continue,
                Err(cause) => return Err(api_error(config, Action::Creating, cause)),
            }
        };
        let previous = holder(&current);
        let how = match previous {
            None => Acquired::Free,
            // Ours only for the same operation: one process running two (the controller's
            // upgrade and rotation, two tools of one MCP server) under one identity must not
            // take each other's Lease as its own.
            Some(p) if p.identity == config.identity && p.claim.operation == claim.operation => {
                Acquired::Resumed { previous: p }
            }
            Some(p) if p.expires.is_none_or(|e| e <= now) => Acquired::TakenOver { previous: p },
            Some(p) => {
                return Err(Error::LeaseHeld {
                    lease: format!("{}/{}", config.namespace, config.name),
                    expires_in: p.expires.map_or(Duration::ZERO, |e| {
                        Duration::try_from(e.duration_since(now)).unwrap_or_default()
                    }),
                    holder: p.to_string(),
                });
            }
        };
        let epoch = current
            .spec
            .as_ref()
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0)
            .saturating_add(1);
        let mut next = fresh(config, claim, now);
        next.metadata.resource_version = current.metadata.resource_version.clone();
        next.metadata.uid = current.metadata.uid.clone();
        // Keep what others wrote on the Lease besides our annotations.
        let mut annotations = current.metadata.annotations.clone().unwrap_or_default();
        annotations.extend(next.metadata.annotations.take().unwrap_or_default());
        next.metadata.annotations = Some(annotations);
        next.metadata.labels = current.metadata.labels.clone();
        next.spec.get_or_insert_default().lease_transitions = Some(epoch);
        let attempt = || {
            let next = acquired_at(&next, api.wall_time());
            async move { api.replace_lease(&next).await }
        };
        match retrying(api, CALL_BOUND, attempt).await {
            Ok(lease) => {
                let held = Held {
                    config: config.clone(),
                    epoch,
                    lease,
                };
                return Ok((held, how));
            }
            Err(e) if e.is_conflict() || e.is_not_found() => continue,
            Err(cause) => return Err(api_error(config, Action::Acquiring, cause)),
        }
    }
    // Two rounds lost to contenders: someone else is acquiring right now.
    let current = get(api, config).await?;
    Err(Error::LeaseHeld {
        lease: format!("{}/{}", config.namespace, config.name),
        holder: current
            .as_ref()
            .and_then(holder)
            .map_or_else(|| "a contender".to_string(), |h| h.to_string()),
        expires_in: config.duration,
    })
}

/// `lease` acquired at `now`, the time of the write attempt: a write retried past transient
/// errors must not hand over a Lease that is already older than the write (or expired).
fn acquired_at(lease: &Lease, now: Timestamp) -> Lease {
    let mut lease = lease.clone();
    let spec = lease.spec.get_or_insert_default();
    spec.acquire_time = Some(MicroTime(now));
    spec.renew_time = Some(MicroTime(now));
    lease
}

/// A Lease held by `config.identity` for `claim` from `now`, epoch 0.
fn fresh(config: &LeaseConfig, claim: &Claim, now: Timestamp) -> Lease {
    let annotations = BTreeMap::from([
        (OPERATION_ANNOTATION.to_string(), claim.operation.clone()),
        (TARGET_ANNOTATION.to_string(), claim.target.clone()),
    ]);
    Lease {
        metadata: ObjectMeta {
            namespace: Some(config.namespace.clone()),
            name: Some(config.name.clone()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(config.duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

/// Reads the Lease; `None` when there is none.
async fn get<A: LeaseApi + ?Sized>(api: &A, config: &LeaseConfig) -> Result<Option<Lease>> {
    match retrying(api, CALL_BOUND, || {
        api.get_lease(&config.namespace, &config.name)
    })
    .await
    {
        Ok(lease) => Ok(Some(lease)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(cause) => Err(api_error(config, Action::Reading, cause)),
    }
}

fn api_error(config: &LeaseConfig, doing: Action, cause: ApiError) -> Error {
    Error::Api {
        op: Operation::named(doing, ObjectKind::Lease, &config.namespace, &config.name),
        cause,
    }
}
