//! [`preview`]: what a rotation would do, with no write of any kind. Reading `carotate status`
//! takes a host Job (a write), so a preview shows what each node reported when a run last read
//! it ([`LAST_STATUS`](crate::LAST_STATUS), recorded on the node), and says when a node never reported. It reads
//! our host Jobs too (`get_job`), so a step in flight shows, and where `issue` has begun in the
//! whole cluster, and which nodes the plan leaves out.

use nodejob_core::{JobApi, LeaseApi, NodeApi};
use nodejob_roll::{NotNow, lease_now};
use serde::Serialize;

use crate::cluster::{every_node, in_flight, issue_begun, left_out, outside, select};
use crate::error::Error;
use crate::gate::{Disagreement, Gate, check};
use crate::order::Order;
use crate::phase::CaStep;
use crate::plan::{CaSummary, Plan};
use crate::records;
use crate::records::last_reported;
use crate::status::CaStatus;

/// One node in a [`Preview`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodePreview {
    /// The node.
    pub name: String,
    /// Whether it is a control-plane node (those go first, one at a time).
    pub control_plane: bool,
    /// What it reported when a run last read it: phase, trusted set, issuer.
    pub reported: Option<CaStatus>,
    /// When (RFC 3339).
    pub at: Option<String>,
    /// Why the record could not be read, if it could not.
    pub unreadable: Option<String>,
    /// The steps whose host Job of ours is on it and not yet taken by a run (running, or
    /// succeeded and not yet deleted): a run waits for each before it reads or decides
    /// anything there. An `Issue` here means `issue` has begun (see [`Preview::issue_begun`]).
    pub in_flight: Vec<CaStep>,
}

/// Which phase a run would run next, and where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "next", rename_all = "snake_case")]
pub enum Next {
    /// Some nodes never reported (or their record is unreadable) and a run of the rotation has
    /// begun: a run reads every node's status first, and decides then. (Where none has, a run
    /// stages every node, each read by its stage.)
    Unknown {
        /// Those nodes.
        unreported: Vec<String>,
    },
    /// This phase, on these nodes (in order): the others passed it.
    Phase {
        /// The phase.
        phase: CaStep,
        /// Its nodes.
        nodes: Vec<String>,
    },
    /// Every node reported the new CA alone: a run would only check the last gate.
    Nothing,
}

/// What a run would do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Preview {
    /// The new CA's fingerprint.
    pub target: String,
    /// The new CA's certificate, by the cluster's clock (subject, issuer, validity, days
    /// left, whether it expires soon).
    pub ca: CaSummary,
    /// Every node, in the rotation's order.
    pub nodes: Vec<NodePreview>,
    /// The next phase, and where.
    pub next: Next,
    /// Nodes that already disagree, as last reported, and with what.
    pub disagreements: Vec<Disagreement>,
    /// Who holds the Lease now, if anyone.
    pub lease: Option<String>,
    /// What keeps a run from starting any node now: the maintenance window closed (when it
    /// next opens), the pause switch on (who, when, why). Left out when nothing does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_now: Vec<NotNow>,
    /// Each node of the cluster (in the plan or not) where `issue` has begun, with what shows
    /// it: our `issue` Job of it exists, or the status last recorded on it says so. While any,
    /// [`crate::abort`] is refused (only forward is safe); none, an abort would remove the
    /// staged CA.
    pub issue_begun: Vec<(String, String)>,
    /// The nodes of the cluster the plan leaves out: a run stages the plan's nodes, but runs
    /// issue and finalize only on a plan that leaves none out.
    pub outside_plan: Vec<String>,
}

impl Preview {
    /// What a run of `plan` would refuse, as it would say it, when this preview shows it: a
    /// cluster-wide plan that leaves nodes out ([`Error::Plan`], before any write); with
    /// `abort`, an abort once `issue` has begun somewhere ([`Error::AbortRefused`]). `None`
    /// when the run would go ahead, so that a preview can end as the run would (as kubectl's
    /// `--dry-run=server` fails where the request would).
    pub fn refusal(&self, plan: &Plan, abort: bool) -> Option<Error> {
        if abort {
            return (!self.issue_begun.is_empty())
                .then(|| Error::abort_refused(self.issue_begun.iter().cloned()));
        }
        left_out(plan, &self.outside_plan)
    }
}

pub(crate) async fn preview<A>(api: &A, plan: &Plan) -> Result<Preview, Error>
where
    A: JobApi + NodeApi + LeaseApi + ?Sized,
{
    // As a run would refuse it, before anything is read: the new CA valid by the cluster's
    // clock.
    let now = api.wall_time();
    plan.check_ca_valid_at(now)?;
    let nodes = select(api, plan).await?;
    let order = Order::names(&nodes);
    let cluster = every_node(api).await?;
    let mut previews = Vec::new();
    let mut reported = Vec::new();
    let mut unreported = Vec::new();
    for name in &order {
        let Some(node) = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
        else {
            continue;
        };
        let mut preview = NodePreview {
            name: name.clone(),
            control_plane: nodejob_roll::is_control_plane(node),
            reported: None,
            at: None,
            unreadable: None,
            in_flight: in_flight(api, plan, name).await?,
        };
        match last_reported(node, name) {
            Ok(Some((status, at))) => {
                reported.push((name.clone(), status.clone()));
                preview.reported = Some(status);
                preview.at = Some(at);
            }
            Ok(None) => unreported.push(name.clone()),
            Err(why) => {
                unreported.push(name.clone());
                preview.unreadable = Some(why);
            }
        }
        previews.push(preview);
    }
    let new = plan.fingerprint();
    let pending = |phase: CaStep| -> Vec<String> {
        reported
            .iter()
            .filter(|(_, s)| !phase.passed(s, new))
            .map(|(n, _)| n.clone())
            .collect()
    };
    // No run of the rotation has begun (no node carries a trace of it, no Job of ours is under
    // way): a run reads each node by its stage.
    let untouched = nodes.iter().all(|n| !records::traced(n, new))
        && previews.iter().all(|p| p.in_flight.is_empty());
    let next = if untouched && !unreported.is_empty() {
        let nodes = previews.iter().map(|p| p.name.clone()).collect();
        Next::Phase {
            phase: CaStep::Stage,
            nodes,
        }
    } else if !unreported.is_empty() {
        Next::Unknown { unreported }
    } else {
        CaStep::PHASES
            .into_iter()
            .map(|phase| (phase, pending(phase)))
            .find(|(_, nodes)| !nodes.is_empty())
            .map_or(Next::Nothing, |(phase, nodes)| Next::Phase { phase, nodes })
    };
    // The gates a run would meet first, on what the nodes last reported.
    let gates: &[Gate] = match &next {
        Next::Phase {
            phase: CaStep::Issue,
            ..
        } => &[Gate::Start, Gate::BeforeIssue],
        Next::Phase {
            phase: CaStep::Finalize,
            ..
        } => &[Gate::Start, Gate::BeforeIssue, Gate::BeforeFinalize],
        Next::Nothing => &[Gate::AfterFinalize],
        _ => &[Gate::Start],
    };
    let mut disagreements: Vec<Disagreement> = Vec::new();
    for gate in gates {
        for d in check(*gate, new, &reported, &[]).disagreements {
            if !disagreements.iter().any(|seen| seen.node == d.node) {
                disagreements.push(d);
            }
        }
    }
    let placement = plan.spec().placement();
    let window = (plan.spec().window.clone()).zip(plan.time_zone().cloned());
    let (lease, not_now) =
        (lease_now(api, &placement, window.as_ref(), now).await).map_err(|cause| {
            Error::Reading {
                what: format!("lease {}", placement.lease()),
                cause,
            }
        })?;
    Ok(Preview {
        target: new.to_string(),
        ca: plan.ca_summary(now),
        nodes: previews,
        next,
        disagreements,
        lease,
        not_now,
        issue_begun: (issue_begun(api, plan, &cluster).await?.into_iter())
            .map(|b| (b.node, b.why))
            .collect(),
        outside_plan: outside(&cluster, &order),
    })
}
