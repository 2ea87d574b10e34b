//! [`preview`]: what a run would do, with no write of any kind (reads, and server-side dry-run
//! evictions, which change nothing).

use k8s_openapi::api::core::v1::Pod;
use nodejob_core::drain::{Verdict, verdict};
use nodejob_core::{DryRun, Eviction, LeaseApi, NodeApi, PodApi};
use nodejob_roll::lease_holder;
use serde::Serialize;

use crate::Error;
use crate::drive::{at_target, cordoned_by_us, retry, select_nodes};
use crate::order::groups;
use crate::plan::Plan;
use crate::records::{self, unschedulable, version};
use nodejob_roll::batches;

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
    let mut skipped = Vec::new();
    let mut todo = Vec::new();
    for node in &nodes {
        match at_target(plan, node) {
            Some(why) => skipped.push((records::name(node).to_string(), why)),
            None => todo.push(node),
        }
    }
    let width = plan.width(nodes.len())?;
    let order = groups(&todo, width);
    let mut previews = Vec::new();
    for name in order.iter().flat_map(|g| &g.nodes) {
        let Some(node) = todo.iter().find(|n| records::name(n) == name) else {
            continue;
        };
        let pods = retry(api, || api.list_node_pods(name))
            .await
            .map_err(|cause| Error::Reading {
                what: format!("the pods of node {name}"),
                cause,
            })?;
        let mut plans = Vec::new();
        for pod in &pods {
            plans.push(pod_plan(api, plan, pod).await?);
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
        });
    }
    let placement = plan.spec().placement();
    let lease = (lease_holder(api, &placement).await)
        .map_err(|cause| Error::Reading {
            what: format!("lease {}", placement.lease()),
            cause,
        })?
        .map(|h| h.to_string());
    Ok(Preview {
        target: plan.target().to_string(),
        batches: batches(&order),
        skipped,
        nodes: previews,
        lease,
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
