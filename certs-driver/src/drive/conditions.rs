//! The rotation's condition on each node ([`nodejob_roll::condition`], type
//! `NodejobCARotation`): `True` with the phase as its reason when a phase step starts on the
//! node (`Stage`, `Issue`, `Finalize`, `Abort`; the reads, `Status` and `Verify`, change
//! nothing and say nothing), `False` `Rotated` as its `finalize` ends (with its record), and
//! how the node ended when the run ends (`False`, `Rotated` or `Restored`; or `True`, `Failed`,
//! `Disagrees` or `Stopped`, for a rerun to carry on), unless it says so already. Written
//! through the run's fenced writer: nothing once the Lease is known lost. A write that fails
//! is a note, never the node's failure.

use nodejob_core::{ApiError, JobApi, LeaseApi, NodeApi, NodeChange};
use nodejob_roll::{Held, OpError, Standing, condition};

use super::Rotation;
use crate::error::{Unmarked, Unrecorded};
use crate::phase::CaStep;
use crate::progress::NodeResult;
use crate::records;
use crate::status::CaStatus;
use nodejob_roll::Outcome;

impl<A> Rotation<'_, A>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    /// Writes `standing` on `name`; a failure is a note.
    async fn condition(&self, name: &str, standing: Standing) {
        if self.ctx.fence.lost().is_some() {
            return;
        }
        if let Err(e) = self.write(name, &standing, &[]).await {
            self.note(
                name,
                format!(
                    "could not set condition {} on node {name}: {e}",
                    self.conditions.type_()
                ),
            );
        }
    }

    /// Writes `standing` on `name` and, in the same write, `changes` to its records; the node
    /// as written is the one the run sees next.
    async fn write(
        &self,
        name: &str,
        standing: &Standing,
        changes: &[NodeChange],
    ) -> Result<(), ApiError> {
        let seen = self.seen.lock().unwrap().get(name).cloned();
        // No precondition: the rotation's records go under the resourceVersion it last saw and
        // are written again on a Conflict (they are not guards), so the node as our condition
        // leaves it is the one to see next.
        let node = (self.conditions)
            .set_with(&self.writer(), name, seen.as_ref(), standing, None, changes)
            .await?;
        self.saw([node]);
        Ok(())
    }

    /// `step` starts on `name`: said for the steps that change the node (unless the mark
    /// ahead of its Job said it already).
    pub(super) async fn condition_step(&self, name: &str, step: CaStep) {
        let Some(standing) = self.step_standing(step) else {
            return;
        };
        if self.conditions.says(name, &standing) {
            return;
        }
        self.condition(name, standing).await;
    }

    /// Before `step`'s Job on `name`, which the run did not read: the mark that a run of the
    /// rotation may change the host from now on ([`records::ROTATING`]), in the write of the
    /// step's condition. Refused once the Lease is known lost (the fenced writer), as every
    /// record; unlike them, an error here is the node's: no Job follows.
    pub(super) async fn mark_ahead(&self, name: &str, step: CaStep) -> Result<(), Unmarked> {
        if let Some(lost) = self.ctx.fence.lost() {
            let node = name.into();
            return Err(Unmarked::LeaseLost { node, lost });
        }
        // A read changes nothing on the host: nothing to mark ahead of it.
        let Some(standing) = self.step_standing(step) else {
            return Ok(());
        };
        let now = self.api.wall_time().to_string();
        let mark = [records::rotating(self.plan.fingerprint(), now)];
        (self.write(name, &standing, &mark).await).map_err(|cause| Unmarked::Writing {
            node: name.into(),
            cause,
        })
    }

    /// What the condition says as `step` starts (nothing for the reads).
    fn step_standing(&self, step: CaStep) -> Option<Standing> {
        let fingerprint = self.plan.fingerprint();
        let message = match step {
            CaStep::Stage => format!("rotating to CA {fingerprint}: staging it beside the old"),
            CaStep::Issue => {
                format!("rotating to CA {fingerprint}: reissuing the node's leaves from it")
            }
            CaStep::Finalize => format!("rotating to CA {fingerprint}: removing the old CA"),
            CaStep::Abort => {
                format!("aborting the rotation to CA {fingerprint}: removing it from the node")
            }
            CaStep::Status | CaStep::Verify => return None,
        };
        let by = &self.plan.spec().identity;
        Some(Standing::new(
            Held::Yes,
            step.as_str(),
            format!("{message} (by {by})"),
        ))
    }

    /// As the run ends (`outcome`): each node of the report, said, on a node the condition
    /// names already (this run wrote it, or an earlier run left it), so a node the run never
    /// changed gets none: how it ended, or, for a node the run left between two phases, that
    /// the rotation stopped there. A node whose finalize said it rotated already (with its
    /// record) is not written again.
    pub(super) async fn condition_ends(&self, outcome: &Outcome) {
        let ended: Vec<(String, Option<NodeResult>)> = (self.report.lock().unwrap().nodes.iter())
            .map(|n| (n.name.clone(), n.result.clone()))
            .collect();
        let fingerprint = self.plan.fingerprint();
        let stopped = match outcome {
            Outcome::Done => None,
            Outcome::Failed { nodes, .. } if nodes.is_empty() => {
                Some("the rotation could not go on".to_string())
            }
            Outcome::Failed { nodes, .. } => Some(format!(
                "the rotation stopped at a node that failed or disagrees: {}",
                nodes.join(", ")
            )),
            Outcome::Stopped { why } => Some(format!("the rotation stopped: {why}")),
            Outcome::Paused { why } => Some(format!("the rotation ended paused: {why}")),
        };
        for (name, result) in ended {
            let Some(result) = result else {
                // Left between two phases: said only on a node this run wrote its step on.
                if let (Some(why), Some(at)) = (&stopped, self.conditions.written(&name)) {
                    let at = at.reason.unwrap_or_default();
                    let message = format!(
                        "{why}, after {at} on this node; a rerun carries it on from what the \
                         node reports"
                    );
                    self.condition(&name, Standing::new(Held::Yes, "Stopped", message))
                        .await;
                }
                continue;
            };
            let seen = self.seen.lock().unwrap().get(&name).cloned();
            let ours = self.conditions.written(&name).is_some()
                || seen
                    .is_some_and(|n| condition::condition(&n, self.conditions.type_()).is_some());
            if !ours {
                continue;
            }
            let standing = match &result {
                NodeResult::Rotated => self.rotated(),
                NodeResult::Restored => Standing::new(
                    Held::No,
                    "Restored",
                    format!(
                        "the rotation to CA {fingerprint} was aborted: the node does not trust it"
                    ),
                ),
                NodeResult::Failed(f) => {
                    let exit = f
                        .exit_code
                        .map(|c| format!(" (exit code {c})"))
                        .unwrap_or_default();
                    Standing::new(
                        Held::Yes,
                        "Failed",
                        format!(
                            "the rotation to CA {fingerprint} failed at {}{exit}: {}; a rerun \
                             resumes from what the node reports",
                            f.step, f.message
                        ),
                    )
                }
                NodeResult::Disagrees { gate, what } => Standing::new(
                    Held::Yes,
                    "Disagrees",
                    format!("the rotation to CA {fingerprint} stopped at the gate {gate}: {what}"),
                ),
                NodeResult::Interrupted { step, why } => Standing::new(
                    Held::Yes,
                    "Stopped",
                    format!(
                        "the rotation to CA {fingerprint} stopped before {step}: {why}; a rerun \
                         carries it on"
                    ),
                ),
            };
            if self.conditions.says(&name, &standing) {
                continue;
            }
            self.condition(&name, standing).await;
        }
    }

    /// The node rotated: it trusts the new CA alone, which issues its leaves.
    fn rotated(&self) -> Standing {
        let fingerprint = self.plan.fingerprint();
        let message = format!("trusts the new CA {fingerprint} alone, which issues its leaves");
        Standing::new(Held::No, "Rotated", message)
    }

    /// After `finalize` on `name`: what it reports recorded ([`records::LAST_STATUS`]) in the
    /// write of the condition that says it rotated (a run that ends done writes no other
    /// there). Refused once the Lease is known lost, as every record.
    pub(super) async fn record_rotated(
        &self,
        name: &str,
        status: &CaStatus,
    ) -> Result<(), Unrecorded> {
        if let Some(lost) = self.ctx.fence.lost() {
            let node = name.into();
            return Err(Unrecorded::LeaseLost { node, lost });
        }
        let record = [records::last_status(
            status,
            self.api.wall_time().to_string(),
        )];
        (self.write(name, &self.rotated(), &record).await).map_err(|cause| Unrecorded::Writing {
            node: name.into(),
            cause: OpError::PatchingNode {
                node: name.into(),
                cause,
            },
        })
    }
}
