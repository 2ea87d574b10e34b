//! [`ThreeNodes`]: the drivers' and the `nodejob` command's three-node scenario, and the
//! Deployment behind a budget that the rolls drain ([`deployment_behind_budget`]).

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config};
use nodejob_conformance::{Backend, Failure, Workloads};

use crate::admin::{annotate_node, client, config, label_node};
use crate::backend::KubeBackend;
use crate::conventions::{QUICK_STRATUM, STRATUM_TIMING_ANNOTATION, ZONE_LABEL};
use crate::waits::{deployment_available, wait_for};

/// Where the two workers of [`ThreeNodes`] stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// No zone label.
    Unzoned,
    /// The first in zone `zone-a`, the second in `zone-b` ([`ZONE_LABEL`]).
    InTwoZones,
}

/// One driver at a time in a test binary: hold the guard while a scenario runs a driver. A
/// driver carries on every node another run left in flight, whatever its plan selects, as the
/// one cluster-wide Lease of `DESIGN.md` has it ("one host-mutating operation at a time per
/// cluster"); scenarios that each take a Lease of their own to run side by side would each
/// see the other's nodes in flight (a skew gate judging them, a roll carrying them on), and
/// an action staged before a driver's n-th call of a verb must count that driver's calls only.
pub async fn one_driver() -> tokio::sync::MutexGuard<'static, ()> {
    static ONE_DRIVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ONE_DRIVER.lock().await
}

/// The drivers' and the `nodejob` command's scenario: three nodes of the scenario's own (a
/// [`KubeBackend::for_workloads`]), the first labelled control-plane, the other two workers
/// placed as [`Workers`] says, every host made quick with [`QUICK_STRATUM`].
pub struct ThreeNodes {
    /// The backend acting as the ServiceAccount of `deploy/rbac.yaml`.
    pub backend: KubeBackend,
    /// An admin client.
    pub admin: Client,
    /// The nodes: the control-plane node, then the two workers.
    pub names: Vec<String>,
    /// The scenario's namespace.
    pub namespace: String,
    /// The label every node of the scenario carries ([`SCENARIO_LABEL`](crate::SCENARIO_LABEL)).
    pub label: (String, String),
}

impl ThreeNodes {
    /// Creates the nodes (each Ready), labels them and makes their hosts quick.
    pub async fn new(workers: Workers) -> Result<Self, Failure> {
        Self::on(config(None).await?, workers).await
    }

    /// [`ThreeNodes::new`] on the cluster that `admin`, an administrator's [`Config`], reaches
    /// (not necessarily the admin kubeconfig of `NODEJOB_E2E_KUBECONFIG`): what the bench's
    /// real roll runs on.
    pub async fn on(admin: Config, workers: Workers) -> Result<Self, Failure> {
        let backend = KubeBackend::for_workloads_on(admin.clone()).await?;
        let admin = client(admin)?;
        let names = backend.nodes();
        let control = &names[0];
        label_node(&admin, control, nodejob_roll::CONTROL_PLANE_LABEL, "").await?;
        if workers == Workers::InTwoZones {
            label_node(&admin, &names[1], ZONE_LABEL, "zone-a").await?;
            label_node(&admin, &names[2], ZONE_LABEL, "zone-b").await?;
        }
        for name in &names {
            annotate_node(&admin, name, STRATUM_TIMING_ANNOTATION, Some(QUICK_STRATUM)).await?;
        }
        Ok(ThreeNodes {
            namespace: backend.namespace(),
            label: backend.node_label(),
            backend,
            admin,
            names,
        })
    }

    /// Runs Deployment `app` of `replicas` on the nodes, behind a budget allowing one
    /// disruption; returns once every replica is available and the budget allows that
    /// disruption (before the roll the scenarios start next), waiting for each at most `limit`.
    pub async fn deployment_behind_budget(
        &self,
        app: &str,
        replicas: i32,
        limit: Duration,
    ) -> Result<(), Failure> {
        let ns = &self.namespace;
        deployment_behind_budget(&self.admin, ns, &self.label, app, replicas, limit).await
    }

    /// Deletes the nodes and the scenario's namespace (with what runs in it), for a caller
    /// that shares its cluster with later work (the bench); the suite's scenarios leave theirs
    /// to `e2e/run`, which throws the cluster away. One already gone is not an error.
    pub async fn remove(self) -> Result<(), Failure> {
        let params = DeleteParams::default();
        let nodes = Api::<Node>::all(self.admin.clone());
        for name in &self.names {
            gone_or(
                nodes.delete(name, &params).await,
                &format!("deleting node {name}"),
            )?;
        }
        let namespaces = Api::<Namespace>::all(self.admin.clone());
        let what = format!("deleting namespace {}", self.namespace);
        gone_or(namespaces.delete(&self.namespace, &params).await, &what)
    }
}

/// `Ok` for a deletion done or of an object already gone (404).
fn gone_or<T>(deleted: Result<T, kube::Error>, what: &str) -> Result<(), Failure> {
    match deleted {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Failure(format!("{what}: {e}"))),
    }
}

/// Runs Deployment `app` of `replicas` in `namespace` on the nodes labelled `label`, behind a
/// budget allowing one disruption, as an administrator; returns once every replica is
/// available and the budget allows that disruption, waiting for each at most `limit`.
pub async fn deployment_behind_budget(
    admin: &Client,
    namespace: &str,
    label: &(String, String),
    app: &str,
    replicas: i32,
    limit: Duration,
) -> Result<(), Failure> {
    let web = nodejob_conformance::workloads::deployment(namespace, app, replicas, label);
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
