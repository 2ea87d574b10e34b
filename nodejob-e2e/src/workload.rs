//! The workload a roll drains: a Deployment on a scenario's nodes behind a budget allowing one
//! disruption, spread one replica a node ([`deployment_behind_budget`]), on agent nodes and
//! real ones alike.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, TopologySpreadConstraint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use nodejob_conformance::Failure;
use nodejob_conformance::workloads::APP_LABEL;

use crate::conventions::NOT_READY_TAINT;
use crate::waits::{deployment_available, wait_for};

/// The label a kubelet gives its Node, `v1.LabelHostname`: what the replicas spread over.
pub(crate) const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Runs Deployment `app` of `replicas` in `namespace` on the nodes labelled `label`, behind a
/// budget allowing one disruption, as an administrator; returns once every replica is
/// available and the budget allows that disruption, waiting for each at most `limit`.
///
/// The replicas are spread over the nodes, at most one more on a node than on another
/// schedulable one (a topology spread constraint on the hostname, `DoNotSchedule`, honouring
/// taints, so a cordoned node counts for nothing), once every node is schedulable (its
/// `not-ready` taint lifted): with as many replicas as nodes, one on each, so a roll of any of
/// them has a Pod to drain. Left to the scheduler's default spreading, the first node Ready
/// took them all.
pub async fn deployment_behind_budget(
    admin: &Client,
    namespace: &str,
    label: &(String, String),
    app: &str,
    replicas: i32,
    limit: Duration,
) -> Result<(), Failure> {
    let nodes = Api::<Node>::all(admin.clone());
    let listed = (nodes.list(&ListParams::default().labels(&format!("{}={}", label.0, label.1))))
        .await
        .map_err(|e| Failure(format!("listing the nodes labelled {label:?}: {e}")))?;
    for node in listed.items {
        let name = node.metadata.name.unwrap_or_default();
        wait_for(nodes.clone(), &name, "schedulable", limit, |n: &Node| {
            !(n.spec.as_ref().and_then(|s| s.taints.as_ref()))
                .is_some_and(|t| t.iter().any(|t| t.key == NOT_READY_TAINT))
        })
        .await?;
    }
    let mut web = nodejob_conformance::workloads::deployment(namespace, app, replicas, label);
    if let Some(pod) = web.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        pod.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: HOSTNAME_LABEL.into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            node_taints_policy: Some("Honor".into()),
            label_selector: Some(LabelSelector {
                match_labels: Some([(APP_LABEL.to_string(), app.to_string())].into()),
                ..LabelSelector::default()
            }),
            ..TopologySpreadConstraint::default()
        }]);
    }
    Api::<Deployment>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &web)
        .await
        .map_err(|e| Failure(format!("creating deployment {namespace}/{app}: {e}")))?;
    let pdb = nodejob_conformance::workloads::budget(namespace, app, app, replicas - 1);
    let budgets = Api::<PodDisruptionBudget>::namespaced(admin.clone(), namespace);
    budgets
        .create(&PostParams::default(), &pdb)
        .await
        .map_err(|e| Failure(format!("creating budget {namespace}/{app}: {e}")))?;
    deployment_available(admin, namespace, app, replicas, limit, "before the roll").await?;
    wait_for(budgets, app, "one disruption allowed", limit, |b| {
        b.status.as_ref().is_some_and(|s| {
            s.observed_generation >= b.metadata.generation && s.disruptions_allowed == 1
        })
    })
    .await
    .map(drop)
}
