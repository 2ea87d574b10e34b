//! What the driver writes on a Node, and reads back: every annotation of the rotation, read
//! and written here only. The state of a rotation is what the nodes report, never these (but
//! for one decision, and only toward a read: below): a record is what [`crate::preview`] and `nodejob status` show without a write, and where an
//! abort of any plan finds that `issue` began on a node outside it.
//!
//! | annotation | written | says |
//! |---|---|---|
//! | [`LAST_STATUS`] | after the run's first read of a node's `carotate status`, and after each phase's Job with the status line it printed (after `finalize`, in the write of the node's `Rotated` condition; refused once the Lease is known lost; failing to is a note), and after `issue`, before its Job is deleted (the Lease checked right before; failing to fails the node, and the Job is kept as the mark) | `{"status": {…}, "at": "RFC 3339"}`: what the node reported, when |
//! | [`ROTATING`] | before a run's `stage` Job on a node it did not read first (a rotation no run has touched anywhere), in the write of the step's `NodejobCARotation` condition; failing to fails the node, and no Job is created | `{"ca": "sha256:…", "at": "RFC 3339"}`: a run of the rotation to that CA may have begun changing the host since |
//!
//! [`ROTATING`] and [`LAST_STATUS`] are the one thing decided from a record, and only toward a
//! read: a node that carries either for the run's new CA, anywhere in the plan, makes the run
//! read every node's `carotate status` before any step (as a rerun always did), and a run
//! takes its nodes through `stage` unread only when no node carries them, no Job of ours of
//! the rotation is there, and so no run of it has begun. Should every trace be gone (each Node
//! deleted and registered again), `stage` on a host that trusts the new CA already changes
//! nothing (the host protocol, [`nodejob_host::stratum`]).

use k8s_openapi::api::core::v1::Node;
use nodejob_core::NodeChange;
use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::status::{CaStatus, parse_status};

/// The annotation on a Node holding the status the driver last read from it, with when
/// (`{"status": {…}, "at": "RFC 3339"}`): what [`crate::preview`] shows without a write. The
/// driver decides nothing from it but to read every node before any step (see the module
/// docs).
pub const LAST_STATUS: &str = "stratum.ciq.com/ca-status";

/// The annotation on a Node that says a run of the rotation to a CA may have begun changing
/// its host (`{"ca": "sha256:…", "at": "RFC 3339"}`): written before a `stage` Job the run did
/// not read the node for (see the module docs).
pub const ROTATING: &str = "stratum.ciq.com/ca-rotating";

#[derive(Serialize, Deserialize)]
struct Rotating {
    ca: String,
    at: String,
}

/// The write that marks a node as one a run of the rotation to `ca` may change from now on,
/// `at` (RFC 3339): one annotation.
pub(crate) fn rotating(ca: &Fingerprint, at: String) -> NodeChange {
    let value = serde_json::to_value(Rotating {
        ca: ca.to_string(),
        at,
    })
    .map(|v| v.to_string())
    .unwrap_or_default();
    NodeChange::set_annotation(ROTATING, value)
}

/// Whether `node` carries a trace of a run of the rotation to `ca`: its [`ROTATING`] mark
/// names `ca`, or its [`LAST_STATUS`] says it trusts `ca` or that `ca` issues its leaves. A
/// record that is not the driver's is taken as a trace: it is a read more, never a step.
pub(crate) fn traced(node: &Node, ca: &Fingerprint) -> bool {
    let annotation = |key| (node.metadata.annotations.as_ref()).and_then(|a| a.get(key));
    let marked = annotation(ROTATING).is_some_and(|value| {
        serde_json::from_str::<Rotating>(value).map_or(true, |r| r.ca == ca.as_str())
    });
    let name = node.metadata.name.as_deref().unwrap_or_default();
    marked
        || match last_reported(node, name) {
            Ok(Some((status, _))) => status.trusts(ca) || &status.issuer == ca,
            Ok(None) => false,
            Err(_) => true,
        }
}

/// [`LAST_STATUS`]: `status` (a [`CaStatus`] when written; read as any JSON value, then
/// strictly as `carotate status` is read) and when.
#[derive(Serialize, Deserialize)]
struct LastStatus<S> {
    status: S,
    at: String,
}

/// The write that records `status`, read `at` (RFC 3339), on a node: one annotation.
pub(crate) fn last_status(status: &CaStatus, at: String) -> NodeChange {
    // Through a JSON value, so the text is the one the driver always wrote: keys in the
    // order `serde_json`'s map keeps them.
    let value = serde_json::to_value(LastStatus { status, at })
        .map(|v| v.to_string())
        .unwrap_or_default();
    NodeChange::set_annotation(LAST_STATUS, value)
}

/// What `node` (named `name`) last reported to a run, with when (RFC 3339), from its
/// [`LAST_STATUS`] annotation: `None` when no run ever read it; the reason when the annotation
/// is not the driver's record. Nothing is decided from it: it is what [`crate::preview`] and
/// `nodejob status` show.
pub fn last_reported(node: &Node, name: &str) -> Result<Option<(CaStatus, String)>, String> {
    let Some(value) = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LAST_STATUS))
    else {
        return Ok(None);
    };
    let record: LastStatus<serde_json::Value> = serde_json::from_str(value)
        .map_err(|e| format!("annotation {LAST_STATUS} is not the driver's record: {e}"))?;
    let status = parse_status(name, &record.status.to_string()).map_err(|e| e.to_string())?;
    Ok(Some((status, record.at)))
}
