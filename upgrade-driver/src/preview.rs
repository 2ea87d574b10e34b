//! [`preview`]: what a run would do, with no write of any kind (reads, and server-side dry-run
//! evictions, which change nothing).

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use nodejob_core::drain::{Verdict, verdict};
use nodejob_core::{DryRun, Eviction, LeaseApi, NodeApi, PodApi};
use nodejob_roll::{NotNow, batches, lease_now, retry};
use serde::Serialize;

use crate::Error;
use crate::held::HeldBack;
use crate::order::groups;
use crate::plan::{OnFailure, Plan, Undrainable};
use crate::records::at_target;
use crate::records::{self, cordoned_by_us, unschedulable};
use crate::select::{before_any_write, refuse_versions, select_nodes};
use crate::version::version;

/// What would happen to one Pod of a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum PodPlan {
    /// Evicted.
    Evict {
        /// `namespace/name`.
        pod: String,
    },
    /// Left on the node (DaemonSet, mirror, terminating).
    Leave {
        /// `namespace/name`.
        pod: String,
        /// Why.
        why: String,
    },
    /// Refused: the drain would stop before any eviction.
    Refuse {
        /// `namespace/name`.
        pod: String,
        /// Why, and the option that allows it.
        why: String,
    },
    /// A budget allows no disruption now (a server-side dry-run eviction said so): the drain
    /// would wait for it, up to its timeout.
    Blocked {
        /// `namespace/name`.
        pod: String,
        /// The apiserver's message, naming the budget.
        message: String,
    },
}

/// One node in a [`Preview`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodePreview {
    /// The node.
    pub name: String,
    /// The version it reports.
    pub version: Option<String>,
    /// Whether it is cordoned now.
    pub cordoned: bool,
    /// Whether an earlier run of ours is in flight on it (a run would carry it on).
    pub in_progress: bool,
    /// Its Pods, and what the drain would do with each.
    pub pods: Vec<PodPlan>,
    /// The Pods it would evict (`namespace/name`) that no other node can run now: every other
    /// node is cordoned, not Ready, drained in the same batch, does not match the Pod's node
    /// selector, or has a taint it does not tolerate. Their replacements stay Pending until
    /// this node is back, and a budget that needs them Ready blocks the drain.
    pub stranded: Vec<String>,
}

/// What a run would do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Preview {
    /// The target.
    pub target: String,
    /// The batches, in order: group and nodes.
    pub batches: Vec<(String, Vec<String>)>,
    /// Nodes at the target already, with why.
    pub skipped: Vec<(String, String)>,
    /// Every node that would be upgraded, in order.
    pub nodes: Vec<NodePreview>,
    /// Who holds the Lease now, if anyone.
    pub lease: Option<String>,
    /// What keeps a run from starting any node now: the maintenance window closed (when it
    /// next opens), the pause switch on (who, when, why). Left out when nothing does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_now: Vec<NotNow>,
    /// What the version skew policy says of the roll: each breach the plan allows
    /// (`--allow-skew`), or what the workers wait for (the control plane going first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skew: Vec<String>,
    /// What the plan does with a node whose drain budgets hold past its timeout (left out
    /// when `fail`, the default).
    #[serde(skip_serializing_if = "is_fail")]
    pub on_undrainable: Undrainable,
    /// With `skip` or `quarantine`: how many nodes may be blocked before the roll stops as a
    /// failure does (left out when `fail`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_blocked: Option<u32>,
    /// The nodes a budget allowing no disruption now would block, and what the plan would
    /// then do (left out when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub would_block: Vec<WouldBlock>,
    /// Nodes left as they are, quarantined by an earlier run (labelled), with why (left out
    /// when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<(String, String)>,
    /// How long each node soaks once back in service, in milliseconds (left out when the plan
    /// soaks none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak_ms: Option<u64>,
    /// What a node that fails after its host upgrade comes to (left out when `stop`, the
    /// default).
    #[serde(skip_serializing_if = "is_stop")]
    pub on_failure: OnFailure,
}

fn is_stop(policy: &OnFailure) -> bool {
    *policy == OnFailure::Stop
}

fn is_fail(policy: &Undrainable) -> bool {
    *policy == Undrainable::Fail
}

/// A node whose drain budgets allowing no disruption would block if they do not release.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WouldBlock {
    /// The node.
    pub node: String,
    /// The budgets that refuse an eviction now, `namespace/name`.
    pub budgets: Vec<String>,
    /// The Pods they protect, `namespace/name`.
    pub pods: Vec<String>,
    /// What the plan would do after the drain's timeout, in words.
    pub then: String,
}

impl Preview {
    /// Every Pod a budget blocks now, with its node.
    pub fn blocked(&self) -> Vec<(&str, &str, &str)> {
        self.nodes
            .iter()
            .flat_map(|n| {
                n.pods.iter().filter_map(move |p| match p {
                    PodPlan::Blocked { pod, message } => {
                        Some((n.name.as_str(), pod.as_str(), message.as_str()))
                    }
                    _ => None,
                })
            })
            .collect()
    }
}

pub(crate) async fn preview<A>(api: &A, plan: &Plan) -> Result<Preview, Error>
where
    A: NodeApi + PodApi + LeaseApi + ?Sized,
{
    let nodes = select_nodes(api, plan).await?;
    refuse_versions(plan, &nodes)?;
    let gate = before_any_write(api, plan, &nodes).await?;
    let skew = (gate.allowed.iter())
        .map(|b| format!("allowed past the version skew policy: {b}"))
        .chain(gate.waiting)
        .collect();
    let mut skipped = Vec::new();
    let mut todo = Vec::new();
    let held = HeldBack::of(plan, &nodes);
    for node in &nodes {
        match at_target(plan, node) {
            Some(why) => skipped.push((records::name(node).to_string(), why)),
            None if held.holds(records::name(node)) => {}
            None => todo.push(node),
        }
    }
    let width = plan.width(nodes.len())?;
    let mut order = groups(&todo, width, plan.spec().last.as_deref());
    order.extend(held.skipped_group(width));
    let todo: Vec<&Node> = nodes
        .iter()
        .filter(|n| at_target(plan, n).is_none() && !held.quarantines(records::name(n)))
        .collect();
    let batched = batches(&order);
    let everyone = retry(api, || api.list_nodes(""))
        .await
        .map_err(|cause| Error::Reading {
            what: "the nodes".into(),
            cause,
        })?;
    let mut previews = Vec::new();
    for name in order.iter().flat_map(|g| &g.nodes) {
        let Some(node) = todo.iter().find(|n| records::name(n) == name) else {
            continue;
        };
        let batch: &[String] = (batched.iter())
            .map(|(_, nodes)| nodes.as_slice())
            .find(|nodes| nodes.contains(name))
            .unwrap_or_default();
        let pods = retry(api, || api.list_node_pods(name))
            .await
            .map_err(|cause| Error::Reading {
                what: format!("the pods of node {name}"),
                cause,
            })?;
        let mut plans = Vec::new();
        let mut stranded = Vec::new();
        for pod in &pods {
            let pod_plan = pod_plan(api, plan, pod).await?;
            if let PodPlan::Evict { pod: id } = &pod_plan {
                let elsewhere = (everyone.iter())
                    .filter(|n| {
                        records::name(n) != name && !batch.contains(&records::name(n).to_string())
                    })
                    .any(|n| could_run(n, pod));
                if !elsewhere {
                    stranded.push(id.clone());
                }
            }
            plans.push(pod_plan);
        }
        previews.push(NodePreview {
            name: name.clone(),
            version: version(node, &plan.spec().version_source).map(str::to_string),
            cordoned: unschedulable(node),
            in_progress: cordoned_by_us(node)
                || node
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(records::IN_PROGRESS)),
            pods: plans,
            stranded,
        });
    }
    let placement = plan.spec().placement();
    let window = (plan.spec().window.clone()).zip(plan.time_zone().cloned());
    let (lease, not_now) = (lease_now(api, &placement, window.as_ref(), api.wall_time()).await)
        .map_err(|cause| Error::Reading {
            what: format!("lease {}", placement.lease()),
            cause,
        })?;
    let would_block = previews
        .iter()
        .filter_map(|n| would_block(plan, n))
        .collect();
    Ok(Preview {
        target: plan.target().to_string(),
        batches: batched,
        skipped,
        nodes: previews,
        lease,
        not_now,
        skew,
        on_undrainable: plan.spec().on_undrainable,
        max_blocked: (plan.spec().on_undrainable != Undrainable::Fail)
            .then_some(plan.spec().max_blocked),
        would_block,
        quarantined: held.quarantined_why(),
        soak_ms: plan.spec().soak.map(nodejob_roll::millis),
        on_failure: plan.spec().on_failure,
    })
}

/// What a budget allowing no disruption now would do to `node`'s drain, if one does.
fn would_block(plan: &Plan, node: &NodePreview) -> Option<WouldBlock> {
    let mut budgets: Vec<String> = Vec::new();
    let mut pods = Vec::new();
    for pod_plan in &node.pods {
        let PodPlan::Blocked { pod, message } = pod_plan else {
            continue;
        };
        pods.push(pod.clone());
        let namespace = pod.split('/').next().unwrap_or_default();
        if let Some(budget) = nodejob_core::drain::budget_named(message) {
            let budget = format!("{namespace}/{budget}");
            if !budgets.contains(&budget) {
                budgets.push(budget);
            }
        }
    }
    if pods.is_empty() {
        return None;
    }
    let timeout = plan.spec().drain.timeout;
    let after = format!("unless they release within its drain timeout ({timeout:?})");
    let then = match plan.spec().on_undrainable {
        Undrainable::Fail => format!("{after}, the node fails and the roll stops"),
        Undrainable::Skip => format!(
            "{after}, the node is skipped (uncordoned if we cordoned it) and tried once more \
             at the end"
        ),
        Undrainable::Quarantine => format!(
            "{after}, the node is quarantined: left cordoned, labelled {}",
            records::QUARANTINED
        ),
    };
    Some(WouldBlock {
        node: node.name.clone(),
        budgets,
        pods,
        then,
    })
}

async fn pod_plan<A: PodApi + ?Sized>(api: &A, plan: &Plan, pod: &Pod) -> Result<PodPlan, Error> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let id = format!("{ns}/{name}");
    Ok(match verdict(pod, &plan.spec().drain, api.wall_time()) {
        Verdict::Skip(why) => PodPlan::Leave {
            pod: id,
            why: why.to_string(),
        },
        Verdict::Refuse(why) => PodPlan::Refuse {
            pod: id,
            why: why.to_string(),
        },
        Verdict::Evict => {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let grace = plan.spec().drain.grace_period;
            match retry(api, || api.evict_pod(&ns, &name, &uid, grace, DryRun::All)).await {
                Ok(Eviction::Blocked { message }) => PodPlan::Blocked { pod: id, message },
                Ok(_) => PodPlan::Evict { pod: id },
                Err(cause) => {
                    return Err(Error::Reading {
                        what: format!("a dry-run eviction of pod {id}"),
                        cause,
                    });
                }
            }
        }
    })
}

/// Whether `node` could run `pod` now, as the scheduler would judge it in the large: Ready,
/// not cordoned, matching the Pod's node selector, and no `NoSchedule` or `NoExecute` taint
/// the Pod does not tolerate. (Affinity, resources and ports are not weighed.)
fn could_run(node: &Node, pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let selected = (spec.and_then(|s| s.node_selector.as_ref()))
        .is_none_or(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let taints = (node.spec.as_ref())
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let tolerated = taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| tolerates(pod, t));
    nodejob_core::ready(node) && !unschedulable(node) && selected && tolerated
}

/// Whether one of `pod`'s tolerations matches `taint`.
fn tolerates(pod: &Pod, taint: &Taint) -> bool {
    let tolerations = (pod.spec.as_ref()).and_then(|s| s.tolerations.as_ref());
    tolerations.into_iter().flatten().any(|t| {
        let key = match t.key.as_deref() {
            None | Some("") => t.operator.as_deref() == Some("Exists"),
            Some(key) => key == taint.key,
        };
        let effect = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let value = t.operator.as_deref() == Some("Exists")
            || t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("");
        key && effect && value
    })
}
