//! The run's and the preview's node selection, and what is refused before any write about
//! the nodes selected: the selector's nodes (narrowed to those named), a node the plan cannot
//! judge by version ([`refuse_versions`]), and a roll the version skew policy refuses
//! ([`before_any_write`]: [`crate::skew`] judges, this reads the apiserver's version). The
//! preview and the run share it.

use k8s_openapi::api::core::v1::Node;
use nodejob_core::NodeApi;
use nodejob_roll::retry;

use crate::plan::{Downgrade, Plan};
use crate::records;
use crate::skew::{Breach, Skew, Workers, applies, judge, moving, refusal};
use crate::version::{embedded_version, order_versions, version, version_numbers};
use crate::{Error, PlanError};

/// Selects the plan's nodes: the selector's, narrowed to `nodes` when named. A named node that
/// does not exist is an error.
pub(crate) async fn select_nodes<A: NodeApi + ?Sized>(
    api: &A,
    plan: &Plan,
) -> Result<Vec<Node>, Error> {
    let spec = plan.spec();
    Ok(nodejob_roll::select_nodes(api, spec.selector.as_deref(), &spec.nodes).await?)
}

/// Refuses, before any write, a plan that cannot judge its nodes by version: a selected node
/// that reports no version where the plan reads it, or one that cannot be ordered against the
/// target ([`order_versions`]), and one whose version is newer than the target, unless the
/// plan allows a downgrade. Names each such node
/// and what it reports: an upgrade that cannot tell where a node stands would drain, upgrade
/// and reboot it, then blame the upgrade.
pub(crate) fn refuse_versions(plan: &Plan, nodes: &[Node]) -> Result<(), Error> {
    let spec = plan.spec();
    let target = &spec.target;
    let (mut silent, mut unordered) = (Vec::new(), Vec::new());
    for node in nodes {
        match version(node, &spec.version_source) {
            None => silent.push(records::name(node).to_string()),
            Some(v) if order_versions(v, target).is_none() => {
                unordered.push(format!("{} at {v:?}", records::name(node)));
            }
            Some(_) => {}
        }
    }
    let source = spec.version_source.field();
    if !silent.is_empty() {
        return Err(Error::Plan(PlanError::new(
            "version_source",
            format!(
                "{} node(s) report no version in {source} ({}): the roll could not tell whether \
                 a node reached {target}; choose a version source every selected node reports, \
                 or leave those nodes out of the selection",
                silent.len(),
                silent.join(", ")
            ),
        )));
    }
    if !unordered.is_empty() {
        // The target reads as a version: the nodes' values are what cannot be ordered.
        let field = if version_numbers(target).is_some() || embedded_version(target).is_some() {
            "version_source"
        } else {
            "target"
        };
        return Err(Error::Plan(PlanError::new(
            field,
            format!(
                "{target:?} cannot be compared with what {} node(s) report in {source} ({}): \
                 both must read as vMAJOR.MINOR.PATCH, or as the same words around a version \
                 (Ubuntu 24.04.4 LTS), for the roll to tell an upgrade from a downgrade and \
                 whether a node reached the target",
                unordered.len(),
                unordered.join(", ")
            ),
        )));
    }
    match nodes
        .iter()
        .filter_map(|n| newer_than_target(plan, n))
        .collect::<Vec<_>>()
    {
        newer if newer.is_empty() => Ok(()),
        newer => Err(Error::Plan(PlanError::new(
            "downgrade",
            format!(
                "{target} is older than what {} node(s) run ({}): a downgrade, refused \
                 without `downgrade`",
                newer.len(),
                newer.join(", ")
            ),
        ))),
    }
}

/// `node at VERSION` when `node` runs a version newer than the plan's target and the plan does
/// not allow a downgrade.
pub(crate) fn newer_than_target(plan: &Plan, node: &Node) -> Option<String> {
    let spec = plan.spec();
    if spec.downgrade == Downgrade::Allow {
        return None;
    }
    let v = version(node, &spec.version_source)?;
    (order_versions(v, &spec.target)? == std::cmp::Ordering::Greater)
        .then(|| format!("{} at {v}", records::name(node)))
}

/// What the gate found before any write, on a plan it lets through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Before {
    /// Breaches the plan allows (`Skew::Allow`): each is said.
    pub(crate) allowed: Vec<Breach>,
    /// The workers' target is newer than the apiserver now, and the plan's control-plane
    /// nodes go first: what the workers wait for.
    pub(crate) waiting: Option<String>,
    /// The apiserver's version as read, when the gate applies: the run judges its first batch
    /// against it.
    pub(crate) server: Option<String>,
}

/// The apiserver's `gitVersion`, read (transient errors retried).
pub(crate) async fn server<A: NodeApi + ?Sized>(api: &A) -> Result<String, nodejob_core::ApiError> {
    retry(api, || api.version()).await.map(|i| i.git_version)
}

/// Judges moving `nodes` (the plan's, those carried on included) to the target against the
/// apiserver, before any write: a breach is refused ([`Error::Plan`] on `skew`) unless the
/// plan allows skew. Reads nothing unless the gate applies ([`applies`]); the version read is
/// answered ([`Before::server`]) for the run to judge its first batch against.
pub(crate) async fn before_any_write<A: NodeApi + ?Sized>(
    api: &A,
    plan: &Plan,
    nodes: &[Node],
) -> Result<Before, Error> {
    if !applies(plan) {
        return Ok(Before::default());
    }
    let server = server(api).await.map_err(|cause| Error::Reading {
        what: "the apiserver's version (GET /version)".into(),
        cause,
    })?;
    let (moving, workers) = moving(plan, nodes);
    let breaches = judge(plan.target(), &server, &moving, workers);
    if !breaches.is_empty() && plan.spec().skew == Skew::Enforce {
        return Err(Error::Plan(refusal(plan.target(), &breaches)));
    }
    // What the workers wait for: the newer rule, judged once the control plane went first.
    let later = judge(plan.target(), &server, &moving, Workers::Now);
    let waiting = (workers == Workers::AfterControlPlane
        && later
            .iter()
            .any(|b| matches!(b.rule, crate::skew::Rule::Newer { .. })))
    .then(|| {
        format!(
            "the apiserver is at {server}: no worker moves to {} before it is at that minor \
             version or newer (the control-plane nodes go first and carry it; checked before \
             each batch)",
            plan.target()
        )
    });
    Ok(Before {
        allowed: breaches,
        waiting,
        server: Some(server),
    })
}
