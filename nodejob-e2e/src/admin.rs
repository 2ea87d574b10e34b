//! The administrator's side of a scenario: the admin kubeconfig and client, names unique to
//! the run, namespaces and Nodes for the node agent to adopt, and the labels, annotations and
//! cordons a person would set on them.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use nodejob_conformance::Failure;
use nodejob_kube::KubeApi;
use serde_json::{Value, json};

use crate::conventions::AGENT_LABEL;

pub(crate) fn fail(what: &str) -> impl FnOnce(kube::Error) -> Failure + '_ {
    move |e| Failure(format!("{what}: {e}"))
}

/// The admin kubeconfig: `NODEJOB_E2E_KUBECONFIG`. The tests refuse to run without it rather
/// than pass vacuously.
pub fn kubeconfig_path() -> PathBuf {
    std::env::var_os("NODEJOB_E2E_KUBECONFIG").map(PathBuf::from).expect(
        "NODEJOB_E2E_KUBECONFIG is not set: run the end-to-end suite with e2e/run, which starts a \
         control plane and sets it",
    )
}

/// An exclusive `flock(2)` on the file `name` beside the admin kubeconfig (created when
/// missing), taken when it is free and held until the returned file is closed: one lock per
/// control plane, shared by every test binary `e2e/run` runs on it, and released by the kernel
/// if its process dies. Blocks the thread while another holds it.
pub(crate) fn lock_beside_kubeconfig(name: &str) -> Result<std::fs::File, Failure> {
    let mut path = kubeconfig_path().into_os_string();
    path.push(name);
    let locked = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .and_then(|file| file.lock().map(|()| file));
    locked.map_err(|e| Failure(format!("the lock {}: {e}", PathBuf::from(&path).display())))
}

/// A [`Config`] from the admin kubeconfig, acting as `impersonate` when given.
pub async fn config(impersonate: Option<&str>) -> Result<Config, Failure> {
    let path = kubeconfig_path();
    let kubeconfig = Kubeconfig::read_from(&path)
        .map_err(|e| Failure(format!("reading {}: {e}", path.display())))?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Failure(format!("loading {}: {e}", path.display())))?;
    config.auth_info.impersonate = impersonate.map(String::from);
    Ok(config)
}

/// An admin client.
pub async fn admin() -> Result<Client, Failure> {
    client(config(None).await?)
}

/// A client acting as `config` says.
pub(crate) fn client(config: Config) -> Result<Client, Failure> {
    Client::try_from(config).map_err(fail("admin client"))
}

/// A name unique to this process and call: `nj-<pid>-<n>`.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub(crate) fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, Failure> {
    serde_json::from_value(v).map_err(|e| Failure(format!("deploy/rbac.yaml: {e}")))
}

/// Creates `obj`; one that exists already (same name) is kept.
pub(crate) async fn create<K>(api: &Api<K>, obj: &K) -> Result<(), Failure>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(Failure(format!(
            "creating {}: {e}",
            obj.meta().name.as_deref().unwrap_or("?")
        ))),
    }
}

/// A namespace labelled with the PodSecurity `level` it enforces.
pub async fn namespace(admin: &Client, name: &str, level: &str) -> Result<(), Failure> {
    let ns: Namespace = typed(json!({
        "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": level}}
    }))?;
    create(&Api::all(admin.clone()), &ns).await
}

/// A Node for the agent to adopt; returns once it is Ready.
pub async fn node(admin: &Client, name: &str) -> Result<(), Failure> {
    labelled_node(admin, name, None).await
}

/// A Node for the agent to adopt, with one more label; returns once it is Ready.
pub async fn labelled_node(
    admin: &Client,
    name: &str,
    label: Option<&(String, String)>,
) -> Result<(), Failure> {
    let mut labels = json!({AGENT_LABEL: "true"});
    if let Some((key, value)) = label {
        labels[key] = json!(value);
    }
    let node: Node = typed(json!({"metadata": {"name": name, "labels": labels}}))?;
    create(&Api::all(admin.clone()), &node).await?;
    let api = KubeApi::new(admin.clone());
    nodejob_core::wait_ready(&api, name, 6).await.map_err(|e| {
        Failure(format!(
            "the node agent did not adopt node {name}: {e}; is nodejob-node-agent running?"
        ))
    })
}

/// Sets label `key=value` on a Node.
pub async fn label_node(admin: &Client, node: &str, key: &str, value: &str) -> Result<(), Failure> {
    let patch = json!({"metadata": {"labels": {key: value}}});
    Api::<Node>::all(admin.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(|e| Failure(format!("labelling node {node} {key}={value}: {e}")))
}

/// Sets (or with `None` removes) an annotation on a Node.
pub async fn annotate_node(
    admin: &Client,
    node: &str,
    key: &str,
    value: Option<&str>,
) -> Result<(), Failure> {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    Api::<Node>::all(admin.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(fail("annotating node"))
}

/// Cordons node `node` (`spec.unschedulable: true`) or, with `false`, uncordons it, as a person
/// with `kubectl cordon` would.
pub async fn set_unschedulable(
    admin: &Client,
    node: &str,
    unschedulable: bool,
) -> Result<(), Failure> {
    let patch = json!({"spec": {"unschedulable": unschedulable}});
    Api::<Node>::all(admin.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(|e| {
            Failure(format!(
                "setting node {node} unschedulable={unschedulable}: {e}"
            ))
        })
}
