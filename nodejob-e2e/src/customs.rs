//! [`CustomsBackend`]: the custom resource scenarios' backend on the real cluster: the CRDs of
//! `deploy/controller/crds.yaml` applied (server-side, as `kubectl apply --server-side` does)
//! and Established, the API acting as the administrator (the controller's own grants come with
//! its RBAC).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use nodejob_conformance::{Customs, Failure};
use nodejob_kube::KubeApi;
use serde_json::{Value, json};

use crate::admin::{client, config, unique};
use crate::conventions::SA_NAMESPACE;

/// The controller's RBAC as the repository deploys it.
const CONTROLLER_RBAC: &str = include_str!("../../deploy/controller/rbac.yaml");

/// The CRDs as the repository deploys them.
pub const CRDS: &str = include_str!("../../deploy/controller/crds.yaml");

/// The ClusterRole of `deploy/controller/rbac.yaml`, for ServiceAccount `sa` (named after it),
/// bound to it.
pub async fn bind_controller_role(admin: &kube::Client, sa: &str) -> Result<(), Failure> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(CONTROLLER_RBAC)
        .map_err(|e| Failure(format!("deploy/controller/rbac.yaml: {e}")))?;
    let mut role = (docs.iter())
        .find(|d| d["kind"] == "ClusterRole")
        .cloned()
        .ok_or_else(|| Failure("deploy/controller/rbac.yaml: no ClusterRole".into()))?;
    role["metadata"]["name"] = json!(sa);
    let role: ClusterRole = serde_json::from_value(role).map_err(|e| Failure(e.to_string()))?;
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .map_err(|e| Failure(format!("creating the controller's ClusterRole: {e}")))?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": sa},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": SA_NAMESPACE}],
    }))
    .map_err(|e| Failure(e.to_string()))?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .map_err(|e| Failure(format!("binding the controller's ClusterRole: {e}")))?;
    Ok(())
}

/// The controller's ServiceAccount, as `deploy/` and `deploy/controller/` grant it (a name of
/// its own, in [`SA_NAMESPACE`]), the CRDs installed first; its name.
pub async fn controller_account(admin: &kube::Client) -> Result<String, Failure> {
    install_crds(admin).await?;
    let sa = unique("nodejob-controller");
    crate::Rbac::committed()
        .apply(admin, &sa, &[SA_NAMESPACE])
        .await?;
    bind_controller_role(admin, &sa).await?;
    Ok(sa)
}

/// Writes `NodeUpgrade` `name` of `nodes` to `target` as the controller suites roll it (the
/// version read as `version_from` says; past the skew policy, asked: the nodes go to a release
/// the apiserver is not at; a minute's drain and reboot, two minutes' deadline), and returns
/// the kind's API.
pub async fn write_node_upgrade(
    admin: &kube::Client,
    name: &str,
    target: &str,
    nodes: &[String],
    version_from: &str,
) -> Result<Api<nodejob_crd::NodeUpgrade>, Failure> {
    let roll: nodejob_crd::NodeUpgrade = serde_json::from_value(json!({
        "apiVersion": "nodejob.stratum.ciq.com/v1alpha1",
        "kind": "NodeUpgrade",
        "metadata": {"name": name},
        "spec": {
            "target": target,
            "nodes": nodes,
            "versionFrom": version_from,
            "allowSkew": true,
            "drainTimeout": "60s",
            "rebootTimeout": "60s",
            "deadline": "120s",
        },
    }))
    .map_err(|e| Failure(e.to_string()))?;
    let rolls = Api::<nodejob_crd::NodeUpgrade>::all(admin.clone());
    rolls
        .create(&PostParams::default(), &roll)
        .await
        .map_err(|e| Failure(format!("creating NodeUpgrade {name}: {e}")))?;
    Ok(rolls)
}

/// The `type` condition of a `NodeUpgrade`'s status: its status and reason.
pub fn upgrade_condition(roll: &nodejob_crd::NodeUpgrade, type_: &str) -> Option<(String, String)> {
    let c = (roll.status.iter())
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

/// Applies every CRD of [`CRDS`] as an administrator and waits until each is Established.
pub async fn install_crds(admin: &kube::Client) -> Result<Vec<String>, Failure> {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut names = Vec::new();
    for doc in CRDS.split("\n---\n").skip(1) {
        let crd: CustomResourceDefinition = serde_saphyr::from_str(doc)
            .map_err(|e| Failure(format!("deploy/controller/crds.yaml: {e}")))?;
        let name = crd.name_any();
        crds.patch(
            &name,
            &PatchParams::apply("nodejob-e2e"),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|e| Failure(format!("applying CRD {name}: {e}")))?;
        names.push(name);
    }
    for name in &names {
        let established = await_condition(crds.clone(), name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(60), established)
            .await
            .map_err(|_| Failure(format!("CRD {name} not Established within 60s")))?
            .map_err(|e| Failure(format!("watching CRD {name}: {e}")))?;
    }
    Ok(names)
}

/// The CRDs installed, the API as the administrator, a name prefix of the scenario's own.
pub struct CustomsBackend {
    api: Arc<KubeApi>,
    prefix: String,
}

impl CustomsBackend {
    /// Installs the CRDs (a no-op when they are) and connects.
    pub async fn new() -> Result<Self, Failure> {
        let admin_config = config(None).await?;
        install_crds(&client(admin_config.clone())?).await?;
        let api = KubeApi::from_config(admin_config)
            .map_err(|e| Failure(format!("client as the administrator: {e}")))?;
        Ok(CustomsBackend {
            api: Arc::new(api),
            prefix: unique("nu"),
        })
    }
}

impl Customs for CustomsBackend {
    type Api = KubeApi;
    fn api(&self) -> Arc<KubeApi> {
        self.api.clone()
    }
    fn prefix(&self) -> String {
        self.prefix.clone()
    }
}
