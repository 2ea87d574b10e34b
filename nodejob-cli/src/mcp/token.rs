//! The preview token: what a mutating tool must present, so that nothing changes a cluster but
//! the plan a preview showed, on the cluster as the preview saw it.
//!
//! It is the sha256 of the operation, its plan (every field, defaults included, and the server's
//! Lease identity, so a token is good for this session only; serialised with serde, so a field
//! added to a plan is covered or the plan does not compile) and the state of the cluster the
//! operation decides from: every node's name and resourceVersion, and the Lease's holder and
//! resourceVersion (and, for `run`, the Job of that name). Any change to any of them (a node
//! cordoned, upgraded, relabelled, added; the Lease taken) makes the token stale: preview again.

use k8s_openapi::api::batch::v1::Job;
use nodejob_core::lease::holder;
use nodejob_core::pause::{Pause, paused};
use nodejob_core::{ApiError, JobApi, LeaseApi, NodeApi};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::inspect::{ReadError, read};

/// Why a token could not be made, or was refused. (What it covers not read is a
/// [`ReadError`].)
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    /// The plan does not serialise (a map with keys that are not strings).
    #[error("serialising the plan: {0}")]
    Serialising(serde_json::Error),
    /// The token presented is not the one the plan and the cluster make now: preview again.
    #[error(
        "preview_token: does not match the current plan and cluster state (the arguments \
         differ from the preview's, or the cluster changed since: a node, the Lease{}); \
         nothing was changed: call {} again with the same arguments and pass the \
         preview_token it returns",
        if *.operation == Operation::Run { ", the Job" } else { "" },
        .operation.preview_tool()
    )]
    Stale {
        /// The operation the token was presented for.
        operation: Operation,
    },
}

/// What the token covers of the cluster, as read.
#[derive(Debug, Serialize)]
pub(crate) struct Seen {
    /// Every node: name and resourceVersion, by name.
    nodes: Vec<(String, String)>,
    /// The Lease: holder (if held) and resourceVersion; `None`: no Lease.
    lease: Option<(Option<String>, String)>,
    /// For `run`: the Job of that name, UID and resourceVersion; `None` otherwise or absent.
    job: Option<(String, String)>,
    /// For `pause` and `resume`: the switch on the Lease as read (its annotation's value).
    #[serde(skip_serializing_if = "Option::is_none")]
    switch: Option<String>,
}

/// The operation a token is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Operation {
    /// `upgrade`.
    Upgrade,
    /// `rotate_ca`.
    RotateCa,
    /// `rotate_ca_abort`.
    RotateCaAbort,
    /// `run`.
    Run,
    /// `pause`.
    Pause,
    /// `resume`.
    Resume,
}

impl Operation {
    /// The tool that previews it.
    pub(crate) fn preview_tool(self) -> &'static str {
        match self {
            Operation::Upgrade => "upgrade_preview",
            Operation::RotateCa => "rotate_ca_preview",
            Operation::RotateCaAbort => "rotate_ca_preview (with abort: true)",
            Operation::Run => "render",
            Operation::Pause => "pause_preview",
            Operation::Resume => "pause_preview (with resume: true)",
        }
    }
}

/// Reads what a token covers: the nodes, the Lease `namespace/lease`, and, when `job` names one,
/// that Job.
pub(crate) async fn seen<A>(
    api: &A,
    namespace: &str,
    lease: &str,
    job: Option<&str>,
) -> Result<Seen, ReadError>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    let mut nodes: Vec<(String, String)> = read(api, || api.list_nodes(""))
        .await
        .map_err(|cause| ReadError::ListingNodes { cause })?
        .into_iter()
        .map(|n| {
            (
                n.metadata.name.unwrap_or_default(),
                n.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect();
    nodes.sort();
    let lease = match read(api, || api.get_lease(namespace, lease)).await {
        Ok(l) => Some((
            holder(&l).map(|h| h.identity),
            l.metadata.resource_version.unwrap_or_default(),
        )),
        Err(e) if e.is_not_found() => None,
        Err(cause) => {
            return Err(ReadError::ReadingLease {
                namespace: namespace.into(),
                name: lease.into(),
                cause,
            });
        }
    };
    let job = match job {
        Some(name) => absent_ok(read(api, || api.get_job(namespace, name)).await)
            .map_err(|cause| ReadError::ReadingJob {
                namespace: namespace.into(),
                name: name.into(),
                cause,
            })?
            .map(|j: Job| {
                (
                    j.metadata.uid.unwrap_or_default(),
                    j.metadata.resource_version.unwrap_or_default(),
                )
            }),
        None => None,
    };
    Ok(Seen {
        nodes,
        lease,
        job,
        switch: None,
    })
}

/// The pause switch on the Lease `namespace/lease` (`None`: not paused, or no Lease), and what
/// a `pause` or `resume` token covers of the cluster: that switch alone. Not the Lease's
/// resourceVersion, which a roll in flight renews every few seconds (and a pause is what one
/// sends to a roll in flight): the switch is all the operation decides from and changes.
pub(crate) async fn switch<A>(
    api: &A,
    namespace: &str,
    lease: &str,
) -> Result<(Option<Pause>, Seen), ReadError>
where
    A: LeaseApi + ?Sized,
{
    let now = match read(api, || api.get_lease(namespace, lease)).await {
        Ok(l) => paused(&l),
        Err(e) if e.is_not_found() => None,
        Err(cause) => {
            return Err(ReadError::ReadingLease {
                namespace: namespace.into(),
                name: lease.into(),
                cause,
            });
        }
    };
    let seen = Seen {
        nodes: Vec::new(),
        lease: None,
        job: None,
        switch: now.as_ref().map(Pause::to_annotation),
    };
    Ok((now, seen))
}

fn absent_ok<T>(result: Result<T, ApiError>) -> Result<Option<T>, ApiError> {
    match result {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The token of `operation` with `plan` (a driver's `PlanSpec`, or the node Job: every field,
/// as serde serialises it) on `seen`.
///
/// # Errors
/// [`TokenError::Serialising`]: the plan does not serialise (a map with keys that are not
/// strings).
pub(crate) fn token<P: Serialize + ?Sized>(
    operation: Operation,
    plan: &P,
    seen: &Seen,
) -> Result<String, TokenError> {
    let plan = serde_json::to_value(plan).map_err(TokenError::Serialising)?;
    let body = serde_json::json!({
        "operation": operation,
        "plan": plan,
        "seen": seen,
    });
    let digest = Sha256::digest(body.to_string().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

/// Whether the token `presented` for `operation` is the `current` one.
///
/// # Errors
/// [`TokenError::Stale`]: it is not (the arguments or the cluster changed since the preview).
pub(crate) fn check(
    operation: Operation,
    presented: &str,
    current: &str,
) -> Result<(), TokenError> {
    if presented == current {
        Ok(())
    } else {
        Err(TokenError::Stale { operation })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(rv: &str) -> Seen {
        Seen {
            nodes: vec![("a".into(), rv.into()), ("b".into(), "7".into())],
            lease: None,
            job: None,
            switch: None,
        }
    }

    #[test]
    fn a_token_binds_the_operation_the_plan_and_the_state() -> anyhow::Result<()> {
        let t = token(Operation::Upgrade, "plan", &seen("1"))?;
        assert!(t.starts_with("sha256:") && t.len() == 7 + 64, "{t}");
        assert_eq!(t, token(Operation::Upgrade, "plan", &seen("1"))?);
        assert_ne!(t, token(Operation::RotateCa, "plan", &seen("1"))?);
        assert_ne!(t, token(Operation::Upgrade, "plan2", &seen("1"))?);
        assert_ne!(t, token(Operation::Upgrade, "plan", &seen("2"))?);
        assert!(check(Operation::Upgrade, &t, &t).is_ok());
        let why = |operation| {
            check(operation, "sha256:00", &t)
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(
            why(Operation::Upgrade).as_deref(),
            Some(
                "preview_token: does not match the current plan and cluster state (the \
                 arguments differ from the preview's, or the cluster changed since: a node, the \
                 Lease); nothing was changed: call upgrade_preview again with the same \
                 arguments and pass the preview_token it returns"
            )
        );
        let run = why(Operation::Run).unwrap_or_default();
        assert!(run.contains("a node, the Lease, the Job); "), "{run}");
        assert!(run.contains("call render again"), "{run}");
        Ok(())
    }

    /// A field the rotation's hand-written `Debug` leaves out, or shows by its size only,
    /// still changes the token: the token hashes the serialised plan, not its `Debug` text.
    #[test]
    fn every_field_of_a_plan_binds_the_token() -> anyhow::Result<()> {
        let plan = certs_driver::PlanSpec::new("PEM A", "sha256:aa");
        let base = token(Operation::RotateCa, &plan, &seen("1"))?;
        let mut other_ca = plan.clone();
        other_ca.ca_certificate = "PEM B".into();
        assert_eq!(format!("{plan:?}"), format!("{other_ca:?}"));
        assert_ne!(base, token(Operation::RotateCa, &other_ca, &seen("1"))?);
        let mut grace = plan.clone();
        grace.restart_grace += std::time::Duration::from_secs(1);
        assert_ne!(base, token(Operation::RotateCa, &grace, &seen("1"))?);
        let upgrade = upgrade_driver::PlanSpec::new("v1");
        let mut windowed = upgrade.clone();
        windowed.window = Some(crate::parse::window("sat 01:00-05:00")?);
        assert_ne!(
            token(Operation::Upgrade, &upgrade, &seen("1"))?,
            token(Operation::Upgrade, &windowed, &seen("1"))?
        );
        Ok(())
    }
}
