//! Right before the host Job: the node and its Pods read again ([`Intent::Preflight`](crate::machine::Intent::Preflight)), after
//! the pause gate and every other wait, and the host Job's preconditions judged on that read
//! alone. The host Job is created only on the node the run began with (same UID), cordoned
//! and fenced by our taint, carrying our launch record of the boot it is on now, with no Pod
//! a drain would evict, and reporting a version below the target (or above it, where the plan
//! allows a downgrade). Whatever fails says why: a node gone or replaced leaves the roll
//! untouched further; one uncordoned, untainted, rebooted or given Pods is cordoned and
//! drained again (the taint put back with the launch record); one that reports no version,
//! one the target cannot be ordered against, or a newer one, fails without its upgrade; one
//! at the target already is finished without it.

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::Node;

use super::{Prepare, Prepared, Step};
use crate::machine::context::{Next, Run, Seen};
use crate::machine::protocol::{Failure, FailureKind, Mark, NodeResult, UpgradeStep};
use crate::plan::Downgrade;
use crate::records::{self, IN_PROGRESS, InProgress, boot_id, unschedulable};
use crate::version::{order_versions, same_version, version};

impl Prepare {
    /// Judges the read of [`Intent::Preflight`](crate::machine::Intent::Preflight): the host Job, or why not.
    pub(super) fn preflight(
        mut self,
        run: &Run,
        seen: &mut Seen,
        node: Option<Box<Node>>,
        pods: Vec<String>,
    ) -> Step {
        let Some(node) = node else {
            return skip(
                "deleted from the cluster after its drain, before its host upgrade: nothing was \
                 started on it"
                    .into(),
            );
        };
        let uid = node.metadata.uid.as_deref().unwrap_or_default();
        if uid != seen.uid {
            return skip(format!(
                "replaced by another node of the same name (uid {}, now {uid}) after its drain, \
                 before its host upgrade: nothing was started on it; a rerun rolls the new node",
                seen.uid
            ));
        }
        if let Some(step) = unversioned(run, seen, &node) {
            return step;
        }
        if !unschedulable(&node) {
            return self.changed(run, seen, node);
        }
        if !nodejob_core::tainted_no_schedule(&node, records::FENCE_TAINT) {
            return self.redrain(
                seen,
                node,
                format!(
                    "our taint {} was removed from it after the drain",
                    records::FENCE_TAINT
                ),
            );
        }
        let launched = seen.progress.as_ref().and_then(|p| p.host_boot_id.clone());
        let on_node = records::read::<InProgress>(&node, IN_PROGRESS)
            .ok()
            .flatten();
        if on_node != seen.progress {
            return self.redrain(
                seen,
                node,
                "our launch record on it changed after it was written (someone else's write)"
                    .into(),
            );
        }
        if launched.as_deref() != Some(boot_id(&node)) {
            let why = format!("it booted again (boot {}) after the drain", boot_id(&node));
            return self.redrain(seen, node, why);
        }
        if !pods.is_empty() {
            return self.redrain(
                seen,
                node,
                format!("pod(s) {} landed on it after the drain", pods.join(", ")),
            );
        }
        seen.node = Some(node);
        let known_free = std::mem::take(&mut self.free);
        Next::leave(Prepared::Launch { known_free })
    }
}

/// When the node's version forbids the host Job: it reports none, or one the target
/// cannot be ordered against, or a newer one without a downgrade allowed (a failure, the
/// host upgrade not started); or the target itself, reached without us (finished without
/// running it).
fn unversioned(run: &Run, seen: &mut Seen, node: &Node) -> Option<Step> {
    let reported = version(node, &run.source).map(str::to_string);
    let why = match reported.as_deref() {
        Some(v) if same_version(v, &run.target) => {
            seen.node = Some(Box::new(node.clone()));
            let marks = vec![Mark::Note(format!(
                "it reports {v} already, reached without our host upgrade (never started): \
                 finishing without running it"
            ))];
            return Some(Next::Leave(marks, Prepared::Check));
        }
        None => "it reports no version".to_string(),
        Some(v) => match order_versions(v, &run.target) {
            Some(Ordering::Greater) if run.downgrade != Downgrade::Allow => format!(
                "it reports {v}, newer than {}: a downgrade, not allowed",
                run.target
            ),
            Some(_) => return None,
            None => format!(
                "it reports {v:?}, which {} cannot be ordered against",
                run.target
            ),
        },
    };
    seen.node = Some(Box::new(node.clone()));
    Some(Next::fail(Failure::new(
        UpgradeStep::Upgrade,
        FailureKind::Node,
        format!("{why} right before its host upgrade; the host upgrade was not started"),
    )))
}

/// The node leaves the roll skipped, nothing of ours on it to undo.
fn skip(why: String) -> Step {
    Next::done(NodeResult::Skipped { why })
}
