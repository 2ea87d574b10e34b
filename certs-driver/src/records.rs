//! What the driver writes on a Node, and reads back: every annotation of the rotation, read
//! and written here only. The state of a rotation is what the nodes report, never these: a
//! record is what [`crate::preview`] and `nodejob status` show without a write, and where an
//! abort of any plan finds that `issue` began on a node outside it.
//!
//! | annotation | written | says |
//! |---|---|---|
//! | [`LAST_STATUS`] | after the run's first read of a node's `carotate status`, and after each phase's Job with the status line it printed (refused once the Lease is known lost; failing to is a note), and after `issue`, before its Job is deleted (the Lease checked right before; failing to fails the node, and the Job is kept as the mark) | `{"status": {…}, "at": "RFC 3339"}`: what the node reported, when |

use k8s_openapi::api::core::v1::Node;
use nodejob_core::NodeChange;
use serde::{Deserialize, Serialize};

use crate::status::{CaStatus, parse_status};

/// The annotation on a Node holding the status the driver last read from it, with when
/// (`{"status": {…}, "at": "RFC 3339"}`): what [`crate::preview`] shows without a write. The
/// driver never decides from it.
pub const LAST_STATUS: &str = "stratum.ciq.com/ca-status";

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
