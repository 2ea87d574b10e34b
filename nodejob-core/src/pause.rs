//! The pause switch (`nodejob pause`, `nodejob resume`): an annotation on the shared Lease
//! object, so that it is kept in the cluster, seen by both drivers, by a run in flight (each
//! fenced write reads the Lease: [`crate::lease::Held::check`]) and by any later run, whoever
//! holds the Lease or none. The switch is not the lock: pausing takes no Lease and lifts none;
//! acquiring, renewing and releasing the Lease keep what others wrote on it, the switch
//! included (they write the Lease as they last read it).
//!
//! ```text
//!   nodejob pause --reason R ──PUT (resourceVersion)──▶ Lease annotated {by, at, reason}
//!   a driver, before a step starts ──▶ paused? wait (the step in flight finished), read again
//!   nodejob resume ──PUT──▶ annotation gone ──▶ the driver's next read goes on
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::serde_json::{self, Value, json};

use crate::api::LeaseApi;
use crate::error::{Action, ApiError, Error, ObjectKind, Operation, Result};
use crate::runner::retrying;

/// The annotation on the Lease object that pauses every roll: a JSON object `{"by": …, "at":
/// …, "reason": …}`.
pub const PAUSE_ANNOTATION: &str = "stratum.ciq.com/paused";

/// How many times setting the switch meeting a Conflict (a holder renewing the Lease) reads it
/// again and retries.
const CONFLICT_ROUNDS: u32 = 5;
/// How long a Lease call is retried on transient errors.
const CALL_BOUND: Duration = Duration::from_secs(30);

/// Who paused the rolls, when, why: the value of [`PAUSE_ANNOTATION`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pause {
    /// Who asked (`nodejob pause --by`, else the user and host).
    pub by: String,
    /// When, on the cluster's clock; `None` when the annotation does not say.
    pub at: Option<Timestamp>,
    /// Why, as given (may be empty).
    pub reason: String,
}

impl Pause {
    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        let mut value = json!({ "by": self.by });
        if let Some(at) = self.at {
            value["at"] = json!(at.to_string());
        }
        if !self.reason.is_empty() {
            value["reason"] = json!(self.reason);
        }
        value.to_string()
    }

    /// The pause as an event or a preview carries it, its time as RFC 3339 text (left out
    /// when it does not read as one).
    pub fn of(by: &str, at: Option<&str>, reason: &str) -> Pause {
        Pause {
            by: by.to_string(),
            at: at.and_then(|t| t.parse().ok()),
            reason: reason.to_string(),
        }
    }

    /// Reads an annotation's value. One that does not read as nodejob's still pauses (a switch
    /// half understood is still pulled): its text is the reason.
    pub fn from_annotation(raw: &str) -> Pause {
        let parsed: Option<Value> = serde_json::from_str(raw).ok();
        let field = |k: &str| {
            (parsed.as_ref())
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        match field("by") {
            Some(by) => Pause {
                by,
                at: field("at").and_then(|t| t.parse().ok()),
                reason: field("reason").unwrap_or_default(),
            },
            None => Pause {
                by: format!("an annotation {PAUSE_ANNOTATION} nodejob did not write"),
                at: None,
                reason: crate::quote(raw),
            },
        }
    }
}

impl std::fmt::Display for Pause {
    /// `paused by X at T: reason` (`: reason` only when there is one).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "paused by {}", self.by)?;
        if let Some(at) = self.at {
            write!(f, " at {at}")?;
        }
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

/// Whether `lease` carries the pause switch, and whose.
pub fn paused(lease: &Lease) -> Option<Pause> {
    let raw = lease.metadata.annotations.as_ref()?.get(PAUSE_ANNOTATION)?;
    Some(Pause::from_annotation(raw))
}

/// Sets the pause switch on the Lease `namespace/name` (`Some`), or lifts it (`None`); answers
/// the switch as it was before. The Lease is created, held by nobody, when there is none and a
/// pause is set; its holder and every other field are left as they are: the write is a `PUT`
/// under the resourceVersion read, read again after a Conflict (a holder renewing it). Setting
/// it when it is set already keeps the first (who paused first, and when).
///
/// # Errors
/// [`Error::Api`] naming the Lease when the apiserver refuses (RBAC: leases get, create,
/// update), or when it kept changing under other writers through five rounds.
pub async fn set_pause<A: LeaseApi + ?Sized>(
    api: &A,
    namespace: &str,
    name: &str,
    to: Option<&Pause>,
) -> Result<Option<Pause>> {
    let op = |doing| Operation::named(doing, ObjectKind::Lease, namespace, name);
    let failed = |doing, cause| Error::Api {
        op: op(doing),
        cause,
    };
    for _ in 0..CONFLICT_ROUNDS {
        let read = match retrying(api, CALL_BOUND, || api.get_lease(namespace, name)).await {
            Ok(lease) => Some(lease),
            Err(e) if e.is_not_found() => None,
            Err(cause) => return Err(failed(Action::Reading, cause)),
        };
        let before = read.as_ref().and_then(paused);
        if before.is_some() == to.is_some() {
            return Ok(before);
        }
        let written = match (read, to) {
            (None, None) => return Ok(None),
            (None, Some(pause)) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        namespace: Some(namespace.to_string()),
                        name: Some(name.to_string()),
                        annotations: Some(BTreeMap::from([(
                            PAUSE_ANNOTATION.to_string(),
                            pause.to_annotation(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec::default()),
                };
                match retrying(api, CALL_BOUND, || api.create_lease(&lease)).await {
                    Err(e) if e.is_already_exists() => continue,
                    other => other.map_err(|cause| failed(Action::Creating, cause)),
                }
            }
            (Some(mut lease), to) => {
                let annotations = lease.metadata.annotations.get_or_insert_default();
                match to {
                    Some(pause) => {
                        annotations.insert(PAUSE_ANNOTATION.to_string(), pause.to_annotation())
                    }
                    None => annotations.remove(PAUSE_ANNOTATION),
                };
                match retrying(api, CALL_BOUND, || api.replace_lease(&lease)).await {
                    Err(e) if e.is_conflict() || e.is_not_found() => continue,
                    other => other.map_err(|cause| failed(Action::Pausing, cause)),
                }
            }
        };
        written?;
        return Ok(before);
    }
    Err(failed(
        Action::Pausing,
        ApiError::conflict(format!(
            "the lease kept changing under other writers through {CONFLICT_ROUNDS} rounds; \
             run the command again"
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_reads_back_as_written_and_says_who_when_why() {
        let pause = Pause {
            by: "alice@ops-1".into(),
            at: Some("2026-01-01T00:01:00Z".parse().unwrap()),
            reason: "the storage team is failing over".into(),
        };
        assert_eq!(Pause::from_annotation(&pause.to_annotation()), pause);
        assert_eq!(
            pause.to_string(),
            "paused by alice@ops-1 at 2026-01-01T00:01:00Z: the storage team is failing over"
        );
        let bare = Pause {
            by: "bob".into(),
            at: None,
            reason: String::new(),
        };
        assert_eq!(Pause::from_annotation(&bare.to_annotation()), bare);
        assert_eq!(bare.to_string(), "paused by bob");
    }

    #[test]
    fn an_annotation_nodejob_did_not_write_still_pauses() {
        let pause = Pause::from_annotation("true");
        assert!(pause.by.contains(PAUSE_ANNOTATION), "{pause:?}");
        assert!(pause.reason.contains("true"), "{pause:?}");
    }
}
