//! The upgrade's condition on each node ([`nodejob_roll::condition`], type `NodejobUpgrade`):
//! `True` with the step as its reason when a step starts, and how the node ended when it ends
//! (`False`, `Upgraded`; or `True`, `Failed` or `Stopped`, for a rerun to carry on). Written
//! through the run's fenced writer: nothing once the Lease is known lost. A write that fails
//! is a note, never the node's failure.
//!
//! Written only when it changes what `kubectl describe node` shows, so not for a step of one
//! write that the next condition follows at once: the cordon is said with the drain it begins
//! (`Drain`, "cordoning and draining", as `kubectl drain` cordons first), and the uncordon
//! with how the node ended, written right after it (after a crash between the two, the next
//! run lets the node go: [`Run::settle_conditions`]). A step whose condition says what the
//! last one said (a drain begun again) writes nothing. A step that begins right after a record
//! of ours that changes only the node's metadata (the launch record's Upgrade, a host Job's
//! record's Reboot) has its condition sent in that record's write, one `PATCH
//! nodes/NAME/status` ([`Run::carried`]): the status subresource keeps the metadata it is sent.
//! The cordon and the uncordon change the spec, which that subresource resets: their records
//! go apart from the conditions, through `nodes/NAME`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use nodejob_core::pause::Pause;
use nodejob_core::{ApiError, JobApi, LeaseApi, NodeApi, NodeChange, PodApi};
use nodejob_roll::{Fenced, Held, Standing, condition};

use super::Run;
use crate::machine::{NodeResult, UpgradeStep};
use crate::plan::Undrainable;

/// A node's resourceVersions as its loop knows them: the one it last read or wrote, and those
/// that only the run's own condition writes moved on from, each written under the one before
/// it. A guarded write the machine decided on one of those goes under the current one: the
/// node changed since by our condition alone, and the guard stays exact (a change by anyone
/// else breaks the chain, and the guarded write then meets its Conflict).
#[derive(Debug, Default)]
pub(super) struct Versions {
    current: Option<String>,
    ours: BTreeSet<String>,
}

impl Versions {
    /// The node as an intent read or wrote it.
    pub(super) fn saw(&mut self, node: &Node) {
        let rv = node.metadata.resource_version.clone();
        if rv.is_some() && rv != self.current {
            self.ours.clear();
            self.current = rv;
        }
    }

    /// The resourceVersion a write decided on `decided` goes under.
    pub(super) fn under(&self, decided: &str) -> String {
        match &self.current {
            Some(current) if self.ours.contains(decided) => current.clone(),
            _ => decided.to_string(),
        }
    }
}

/// What a node's condition says while `step` is under way, toward `target`.
fn doing(step: UpgradeStep) -> &'static str {
    match step {
        UpgradeStep::Cordon | UpgradeStep::Drain => "cordoning and draining",
        UpgradeStep::Upgrade => "running the host upgrade",
        UpgradeStep::Reboot => "waiting for a new boot, Ready at the target",
        UpgradeStep::Health => "running the health check",
        UpgradeStep::Uncordon => "uncordoning and recording it done",
        UpgradeStep::Rollback => "rolling it back to the version it ran before, on a new boot",
        UpgradeStep::Soak => "soaking: Ready on its new boot, the health check again at the end",
    }
}

impl<A> Run<'_, A>
where
    A: JobApi + NodeApi + PodApi + LeaseApi + ?Sized,
{
    /// Writes `standing` on `name`, under the resourceVersion `versions` knows when given (a
    /// Conflict: someone else changed the node; written then without, and the chain broken);
    /// a failure is a note.
    async fn condition(&self, name: &str, standing: Standing, versions: Option<&mut Versions>) {
        if self.ctx.fence.lost().is_some() || self.conditions.says(name, &standing) {
            return;
        }
        let seen = self.view.node(name);
        let writer = Fenced::new(self.api, &self.ctx.fence);
        let set = |under: Option<String>| {
            let (writer, seen, standing) = (&writer, seen.as_ref(), &standing);
            async move {
                (self.conditions)
                    .set(writer, name, seen, standing, under.as_deref())
                    .await
            }
        };
        let under = versions.as_ref().and_then(|v| v.current.clone());
        let written = match set(under.clone()).await {
            Ok(node) => Ok((node, under)),
            Err(e) if e.is_conflict() && under.is_some() => set(None).await.map(|n| (n, None)),
            Err(e) => Err(e),
        };
        match (written, versions) {
            (Ok((node, Some(before))), Some(v)) => {
                v.current = node.metadata.resource_version.clone();
                v.ours.insert(before);
            }
            (Ok((node, None)), Some(v)) => {
                v.ours.clear();
                v.current = node.metadata.resource_version.clone();
            }
            (Ok(_), None) => {}
            (Err(e), _) => self.note(
                name,
                format!(
                    "could not set condition {} on node {name}: {e}",
                    self.conditions.type_()
                ),
            ),
        }
    }

    /// What the condition says while `step` is under way; `None` for the uncordon, said with
    /// how the node ends, written right after its one write.
    fn step_standing(&self, step: UpgradeStep) -> Option<Standing> {
        let reason = match step {
            UpgradeStep::Uncordon => return None,
            // The first half of the drain, said with it.
            UpgradeStep::Cordon => UpgradeStep::Drain.as_str(),
            step => step.as_str(),
        };
        let message = format!(
            "upgrading to {}: {} (by {})",
            self.plan.target(),
            doing(step),
            self.plan.spec().identity
        );
        Some(Standing::new(Held::Yes, reason, message))
    }

    /// `step` starts on `name`, whose resourceVersions are `versions`.
    pub(super) async fn condition_step(
        &self,
        name: &str,
        step: UpgradeStep,
        versions: &mut Versions,
    ) {
        if let Some(standing) = self.step_standing(step) {
            self.condition(name, standing, Some(versions)).await;
        }
    }

    /// The condition of `next`, the step that starts on `name` once a record write lands (the
    /// launch record's Upgrade, a host Job's record's Reboot), to send in that write: when
    /// the write is to the node's metadata alone (the status subresource carries it: see
    /// [`NodeApi::patch_node_conditions`]), the rolls are not paused as the Lease read that
    /// fences the write says (so `next` starts unless a stop is asked or the write fails),
    /// and the condition says something new. Its start then writes nothing: one write where
    /// there were two. `None`: the write goes as it is, the condition at the step's start.
    pub(super) async fn carried(
        &self,
        name: &str,
        next: Option<UpgradeStep>,
        changes: &[NodeChange],
    ) -> Option<Standing> {
        let standing = self.step_standing(next?)?;
        let metadata = changes.iter().all(NodeChange::to_metadata);
        if !metadata
            || self.ctx.limits.stop.requested()
            || self.ctx.fence.lost().is_some()
            || self.conditions.says(name, &standing)
            || self.ctx.fence.paused().await.is_some()
        {
            return None;
        }
        Some(standing)
    }

    /// Writes `changes` (to the node's metadata) under `rv` (with no precondition when `None`),
    /// and `standing` ([`Run::carried`]) with them: one `PATCH nodes/NAME/status`. Its errors
    /// are the write's (a Conflict included): nothing of it landed.
    pub(super) async fn write_carrying(
        &self,
        name: &str,
        rv: Option<&str>,
        changes: &[NodeChange],
        standing: &Standing,
    ) -> Result<Node, ApiError> {
        let seen = self.view.node(name);
        let writer = Fenced::new(self.api, &self.ctx.fence);
        (self.conditions)
            .set_with(&writer, name, seen.as_ref(), standing, rv, changes)
            .await
    }

    /// The rolls are paused (`pause`) where `step` would begin on `name`: said on a node the
    /// condition names already (a node never started gets none, and nothing is written on
    /// it), in place of the step before, while it waits; the step's start says it next.
    pub(super) async fn condition_paused(
        &self,
        name: &str,
        step: UpgradeStep,
        pause: &Pause,
        versions: &mut Versions,
    ) {
        if !self.condition_ours(name) {
            return;
        }
        let message = format!(
            "upgrading to {}: {pause}; waiting before {step} (by {})",
            self.plan.target(),
            self.plan.spec().identity
        );
        let standing = Standing::new(Held::Yes, "Paused", message);
        self.condition(name, standing, Some(versions)).await;
    }

    /// Whether `name` carries our condition: this run wrote it, or an earlier run left it.
    fn condition_ours(&self, name: &str) -> bool {
        self.conditions.written(name).is_some()
            || (self.view.node(name))
                .is_some_and(|n| condition::condition(&n, self.conditions.type_()).is_some())
    }

    /// `name` ended as `result`: said only on a node the condition names already (this run
    /// wrote it, or an earlier run left it), so a node never started gets none.
    pub(super) async fn condition_end(&self, name: &str, result: &NodeResult) {
        let ours = self.condition_ours(name);
        if !ours {
            return;
        }
        let target = self.plan.target();
        let standing = match result {
            NodeResult::Upgraded => {
                Standing::new(Held::No, "Upgraded", format!("upgraded to {target}"))
            }
            NodeResult::Failed(f) => {
                let exit = f
                    .exit_code
                    .map(|c| format!(" (exit code {c})"))
                    .unwrap_or_default();
                Standing::new(
                    Held::Yes,
                    "Failed",
                    format!(
                        "the upgrade to {target} failed at {}{exit}: {}; a rerun retries it",
                        f.step, f.message
                    ),
                )
            }
            NodeResult::Interrupted { step, why } => Standing::new(
                Held::Yes,
                "Stopped",
                format!(
                    "the upgrade to {target} stopped before {step}: {why}; a rerun carries it on"
                ),
            ),
            NodeResult::RolledBack { failure, version } => Standing::new(
                Held::Yes,
                "RolledBack",
                format!(
                    "the upgrade to {target} failed at {}: {}; rolled back to {version} on a new \
                     boot; a rerun retries it",
                    failure.step, failure.message
                ),
            ),
            NodeResult::Blocked {
                policy,
                budgets,
                why,
                ..
            } => {
                let (reason, after) = match policy {
                    Undrainable::Quarantine => (
                        "Quarantined",
                        "left cordoned and labelled; no roll touches it until the label is removed",
                    ),
                    _ => ("Blocked", "the roll comes back to it once at the end"),
                };
                Standing::new(
                    Held::Yes,
                    reason,
                    format!(
                        "the upgrade to {target} could not drain it (budgets {}): {why}; {after}",
                        budgets.join(", ")
                    ),
                )
            }
            NodeResult::Skipped { .. } => return,
        };
        self.condition(name, standing, None).await;
    }

    /// After the roll: each node of the plan it skipped (at the target) whose condition still
    /// says the upgrade holds it (a run that ended, or crashed, before saying it was done) is
    /// let go.
    pub(super) async fn settle_conditions(&self) {
        let skipped: Vec<String> = self.ledger.read(|nodes| {
            (nodes.iter())
                .filter(|n| matches!(n.result, Some(NodeResult::Skipped { .. })))
                .map(|n| n.name.clone())
                .collect()
        });
        for name in skipped {
            let held = (self.view.node(&name)).is_some_and(|n| {
                condition::condition(&n, self.conditions.type_())
                    .is_some_and(|c| c.status == Held::Yes.as_str())
            });
            if held && self.conditions.written(&name).is_none() {
                let message = format!("at {}, as a later run found it", self.plan.target());
                let standing = Standing::new(Held::No, "Upgraded", message);
                self.condition(&name, standing, None).await;
            }
        }
    }
}
