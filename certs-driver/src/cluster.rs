//! What the cluster holds beyond what the plan's nodes report: the plan's nodes and every node of it (a CA is
//! cluster-wide, so `issue` and `finalize` run only on a plan that covers them all), the host
//! Jobs of ours on a node, and where `issue` has begun, as [`crate::abort`] refuses on it and
//! [`crate::preview`] shows it. Reads only.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions;
use nodejob_core::{JobApi, NodeApi};
use nodejob_roll::{Selecting, WRITE_ROUNDS, retry};

use crate::error::{Error, NotDeleted};
use crate::order::Order;
use crate::phase::{CaStep, Decision, decide};
use crate::plan::{LABEL_KEY, Plan};
use crate::records::last_reported;

/// The steps whose host Jobs a run or an abort leaves behind when it stops in flight.
pub(crate) const STEPS: [CaStep; 4] = [
    CaStep::Stage,
    CaStep::Issue,
    CaStep::Finalize,
    CaStep::Abort,
];

/// Selects the plan's nodes: the selector's, narrowed to `nodes` when named.
pub(crate) async fn select<A: NodeApi + ?Sized>(api: &A, plan: &Plan) -> Result<Vec<Node>, Error> {
    let spec = plan.spec();
    Ok(nodejob_roll::select_nodes(api, spec.selector.as_deref(), &spec.nodes).await?)
}

/// Every node of the cluster, whatever the plan selects.
pub(crate) async fn every_node<A: NodeApi + ?Sized>(api: &A) -> Result<Vec<Node>, Error> {
    retry(api, || api.list_nodes("")).await.map_err(|cause| {
        Error::Selecting(Selecting::Listing {
            selector: String::new(),
            cause,
        })
    })
}

/// The nodes of `cluster` that are not `planned`, in the rotation's order.
pub(crate) fn outside(cluster: &[Node], planned: &[String]) -> Vec<String> {
    Order::names(cluster)
        .into_iter()
        .filter(|n| !planned.contains(n))
        .collect()
}

/// The names of every host Job of ours in the plan's namespace (any node, any step), in one
/// list: a run that finds no Job of a step on a node there need not read it again (it is
/// created by that step alone). Jobs being deleted are listed too.
pub(crate) async fn our_jobs<A: JobApi + ?Sized>(
    api: &A,
    plan: &Plan,
) -> Result<BTreeSet<String>, Error> {
    let ns = &plan.spec().namespace;
    match retry(api, || api.list_jobs(ns, LABEL_KEY)).await {
        Ok(jobs) => Ok(jobs.into_iter().filter_map(|j| j.metadata.name).collect()),
        Err(cause) => Err(Error::Reading {
            what: format!("jobs {ns}/-l {LABEL_KEY}"),
            cause,
        }),
    }
}

/// Deletes our Job `namespace/name` of `uid`, without waiting for it to go:
/// [`nodejob_roll::delete_job`] without its wait, for a run that waits for all the Jobs it
/// deleted at once, later. First by its UID alone, with no read: the run decides nothing on
/// the state of a Job whose result it recorded, only on its identity. Gone already, replaced,
/// or being deleted already is done. A Conflict there (another Job of the name, by the UID
/// precondition) is told apart by a read: then exactly (UID and the resourceVersion read just
/// before), a conflict (the Job controller wrote to it) reading it again.
pub(crate) async fn delete_exactly<A: JobApi + ?Sized>(
    api: &A,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<(), NotDeleted> {
    let refused = |cause| NotDeleted::Deleting {
        namespace: namespace.into(),
        name: name.into(),
        uid: uid.into(),
        cause,
    };
    let by_uid = Preconditions {
        uid: Some(uid.to_string()),
        resource_version: None,
    };
    match retry(api, || api.delete_job(namespace, name, Some(&by_uid))).await {
        Ok(()) => return Ok(()),
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) if e.is_conflict() => {}
        Err(e) => return Err(refused(e)),
    }
    for _ in 0..WRITE_ROUNDS {
        let job = match retry(api, || api.get_job(namespace, name)).await {
            Ok(job) if job.metadata.uid.as_deref() == Some(uid) => job,
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(cause) => {
                return Err(NotDeleted::Reading {
                    namespace: namespace.into(),
                    name: name.into(),
                    cause,
                });
            }
        };
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let exact = Preconditions {
            uid: Some(uid.to_string()),
            resource_version: job.metadata.resource_version,
        };
        match retry(api, || api.delete_job(namespace, name, Some(&exact))).await {
            Ok(()) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(refused(e)),
        }
    }
    Err(NotDeleted::KeptChanging {
        namespace: namespace.into(),
        name: name.into(),
        uid: uid.into(),
        rounds: WRITE_ROUNDS,
    })
}

/// Our Job of `step` on `node`, if any.
pub(crate) async fn job_of<A: JobApi + ?Sized>(
    api: &A,
    plan: &Plan,
    step: CaStep,
    node: &str,
) -> Result<Option<Job>, Error> {
    let ns = &plan.spec().namespace;
    let name = plan.job_name(step, node);
    match retry(api, || api.get_job(ns, &name)).await {
        Ok(job) => Ok(Some(job)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(cause) => Err(Error::Reading {
            what: format!("job {ns}/{name}"),
            cause,
        }),
    }
}

/// The steps whose host Job of ours is on `node` and not yet taken by a run: running, or
/// succeeded and not yet deleted (a run waits for each before it decides anything there).
pub(crate) async fn in_flight<A: JobApi + ?Sized>(
    api: &A,
    plan: &Plan,
    node: &str,
) -> Result<Vec<CaStep>, Error> {
    let mut steps = Vec::new();
    for step in STEPS {
        let job = job_of(api, plan, step, node).await?;
        if matches!(decide(job.as_ref(), true), Decision::Adopt(_)) {
            steps.push(step);
        }
    }
    Ok(steps)
}

/// What shows that `issue` has begun on a node, from what the cluster holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Our `issue` Job of the node exists, and has not failed.
    Job,
    /// The status last recorded on the node says so.
    Record,
}

/// A node where `issue` has begun, as the cluster shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Begun {
    /// The node.
    pub(crate) node: String,
    /// What shows it.
    pub(crate) shown: Shown,
    /// The same, in words naming the Job or the record.
    pub(crate) why: String,
}

/// Each node of `cluster` where `issue` has begun, with what shows it, from what the cluster
/// holds (no host is read), in the rotation's order: our `issue` Job of the node exists (and
/// has not failed: a failed `issue` changes nothing); else the status last recorded on the
/// node says so ([`crate::CaStatus::issue_begun`]). Once `issue` began on a node, one of the
/// two shows it at every instant.
pub(crate) async fn issue_begun<A: JobApi + ?Sized>(
    api: &A,
    plan: &Plan,
    cluster: &[Node],
) -> Result<Vec<Begun>, Error> {
    let new = plan.fingerprint();
    let mut begun = Vec::new();
    for node in Order::names(cluster) {
        let job = job_of(api, plan, CaStep::Issue, &node).await?;
        if job.as_ref().is_some_and(|j| !nodejob_core::failed(j)) {
            let job = plan.job_name(CaStep::Issue, &node);
            let why = format!("its `carotate issue` job {job} exists");
            begun.push(Begun {
                node,
                shown: Shown::Job,
                why,
            });
            continue;
        }
        let Some(read) = cluster
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node.as_str()))
        else {
            continue;
        };
        // An unreadable record says nothing either way: it is not the driver's.
        if let Ok(Some((status, at))) = last_reported(read, &node)
            && status.issue_begun(new)
        {
            let why = format!("its status recorded at {at} says {}", status.describe());
            begun.push(Begun {
                node,
                shown: Shown::Record,
                why,
            });
        }
    }
    Ok(begun)
}

/// Refuses, before anything is written, a cluster-wide plan that leaves out nodes of the
/// cluster: its `issue` would be refused after `stage` had written to the plan's nodes. A
/// [`PlanError`](nodejob_roll::PlanError) on the field that narrowed the plan (`nodes`, else
/// `selector`), naming the nodes left out. A plan that is not cluster-wide passes.
pub(crate) async fn covers_cluster<A: NodeApi + ?Sized>(
    api: &A,
    plan: &Plan,
    selected: &[Node],
) -> Result<(), Error> {
    if !plan.spec().cluster_wide {
        return Ok(());
    }
    let planned = Order::names(selected);
    match left_out(plan, &outside(&every_node(api).await?, &planned)) {
        Some(refused) => Err(refused),
        None => Ok(()),
    }
}

/// The refusal of a cluster-wide `plan` that leaves out the nodes `left_out` of the cluster
/// ([`covers_cluster`]): on the field that narrowed the plan (`nodes`, else `selector`),
/// naming them. `None` when the plan is not cluster-wide or leaves none out.
pub(crate) fn left_out(plan: &Plan, left_out: &[String]) -> Option<Error> {
    let spec = plan.spec();
    if !spec.cluster_wide || left_out.is_empty() {
        return None;
    }
    let field = if spec.nodes.is_empty() {
        "selector"
    } else {
        "nodes"
    };
    Some(Error::Plan(nodejob_roll::PlanError::new(
        field,
        format!(
            "a CA is cluster-wide: a rotation must cover every node of the cluster, and these \
             nodes are outside the plan: {}; give no `selector` and no `nodes`, or, when those \
             nodes trust another CA, name the selected ones the whole trust domain \
             (`cluster_wide`) (nothing was written)",
            left_out.join(", ")
        ),
    )))
}
