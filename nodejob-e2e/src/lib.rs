//! The end-to-end harness: [`KubeBackend`] runs the conformance suite on a real control plane
//! through `nodejob-kube`, acting as the least-privilege ServiceAccount of `deploy/rbac.yaml`;
//! the drivers' scenarios (`tests/upgrade.rs`, `tests/rotate.rs`) run `upgrade-driver` and
//! `certs-driver` through it on three nodes of their own ([`ThreeNodes`]), whose hosts are made
//! quick with [`QUICK_STRATUM`]; `tests/cli.rs` runs the `nodejob` binary (`NODEJOB_E2E_CLI`) on such
//! nodes through a kubeconfig holding that ServiceAccount's token.
//!
//! It does **not** start the cluster: `e2e/run` builds and starts etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and `nodejob-node-agent`, then runs these tests with
//! `NODEJOB_E2E_KUBECONFIG` set to an admin kubeconfig. Each scenario gets a namespace and a
//! Node of its own (the node agent adopts Nodes labelled `nodejob.test/agent=true`), so the
//! scenarios run in parallel.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
use kube::{Client, Config};
use nodejob_conformance::{Backend, Failure, Object, Workloads};
use nodejob_core::{Clock, NodeApi};
use nodejob_kube::KubeApi;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The label that hands a Node to the node agent.
pub const AGENT_LABEL: &str = "nodejob.test/agent";
/// Node annotation: `"false"` makes the agent post Ready False.
pub const READY_ANNOTATION: &str = "nodejob.test/ready";
/// Node annotation: `"unreachable"` makes the agent stop serving the node's logs.
pub const KUBELET_ANNOTATION: &str = "nodejob.test/kubelet";
/// Node annotation: how long the node's `stratum` host model takes, for the programs that
/// start from then on (`upgrade=2s,reboot-delay=1s,reboot=3s`; fields left out keep the
/// model's default). See [`QUICK_STRATUM`].
pub const STRATUM_TIMING_ANNOTATION: &str = "nodejob.test/stratum-timing";
/// A [`STRATUM_TIMING_ANNOTATION`] for the drivers' scenarios: an upgrade runs 2s and the node
/// is down 3s from 1s after it exits (the default: 20s, 30s from 5s after); every other command
/// runs 200ms (1s); a `carotate issue` restarts the node's components from 500ms after its exit
/// for 2s (1s, 5s). Host Jobs still take the time their pods take to start and end.
pub const QUICK_STRATUM: &str =
    "upgrade=2s,reboot-delay=1s,reboot=3s,op=200ms,restart-delay=500ms,restart=2s";
/// Node annotation: each new value makes the agent reboot the node's host by itself (down at
/// once, a new `bootID` at the same version and Ready after the host model's reboot time), as
/// a watchdog or a person at the console would. See [`reboot_by_itself`].
pub const REBOOT_ANNOTATION: &str = "nodejob.test/reboot";
/// How long the node agent may take to act on an annotation.
const SETTLE: Duration = Duration::from_secs(20);
/// The taint a Node has while it is not Ready (the agent puts it back and lifts it).
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The label on the nodes of one scenario, with the scenario's name, for workloads' node
/// selectors.
pub const SCENARIO_LABEL: &str = "nodejob.test/scenario";

/// Where the ServiceAccount of `deploy/rbac.yaml` lives.
pub const SA_NAMESPACE: &str = "kube-system";
/// The name of the ServiceAccount of `deploy/rbac.yaml`, as [`KubeBackend::new`] and
/// [`KubeBackend::for_workloads`] bind it.
pub const SA_NAME: &str = "nodejob";

fn fail(what: &str) -> impl FnOnce(kube::Error) -> Failure + '_ {
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
    Client::try_from(config(None).await?).map_err(fail("admin client"))
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

/// The objects of `deploy/rbac.yaml`, to apply as they are or with one verb taken away.
#[derive(Clone, Debug)]
pub struct Rbac {
    docs: Vec<Value>,
}

impl Rbac {
    /// `deploy/rbac.yaml` as committed.
    pub fn committed() -> Self {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let docs = serde_saphyr::from_multiple::<Value>(&text)
            .unwrap_or_else(|e| panic!("parsing {path}: {e}"));
        Rbac { docs }
    }

    /// Every `(resource, verb)` the Role and ClusterRole grant.
    pub fn grants(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for rule in self.rules() {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    out.push((resource.clone(), verb));
                }
            }
        }
        out
    }

    /// The same objects without `verb` on `resource`.
    pub fn without(&self, resource: &str, verb: &str) -> Self {
        let mut docs = self.docs.clone();
        for doc in &mut docs {
            if let Some(rules) = doc.get_mut("rules").and_then(Value::as_array_mut) {
                for rule in rules.iter_mut() {
                    if strings(&rule["resources"]).iter().any(|r| r == resource)
                        && let Some(verbs) = rule["verbs"].as_array_mut()
                    {
                        verbs.retain(|v| v.as_str() != Some(verb));
                    }
                }
                rules.retain(|rule| rule["verbs"].as_array().is_some_and(|v| !v.is_empty()));
            }
        }
        Rbac { docs }
    }

    fn rules(&self) -> Vec<Value> {
        self.docs
            .iter()
            .filter_map(|d| d["rules"].as_array())
            .flatten()
            .cloned()
            .collect()
    }

    fn of_kind(&self, kind: &str) -> Value {
        self.docs
            .iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} in deploy/rbac.yaml"))
    }

    /// Applies these objects for ServiceAccount `sa` (in [`SA_NAMESPACE`]): its ClusterRole and
    /// binding, and its Role and RoleBinding in each of `namespaces`. Names carry `sa`, so
    /// variants live side by side.
    pub async fn apply(
        &self,
        admin: &Client,
        sa: &str,
        namespaces: &[&str],
    ) -> Result<(), Failure> {
        let subject = json!([{"kind": "ServiceAccount", "name": sa, "namespace": SA_NAMESPACE}]);
        let mut account: ServiceAccount = typed(self.of_kind("ServiceAccount"))?;
        account.metadata.name = Some(sa.into());
        create(&Api::namespaced(admin.clone(), SA_NAMESPACE), &account).await?;

        let mut cluster_role: ClusterRole = typed(self.of_kind("ClusterRole"))?;
        cluster_role.metadata.name = Some(format!("{sa}-nodes"));
        create(&Api::all(admin.clone()), &cluster_role).await?;
        let mut binding = self.of_kind("ClusterRoleBinding");
        binding["metadata"]["name"] = json!(format!("{sa}-nodes"));
        binding["roleRef"]["name"] = json!(format!("{sa}-nodes"));
        binding["subjects"] = subject.clone();
        create(
            &Api::<ClusterRoleBinding>::all(admin.clone()),
            &typed(binding)?,
        )
        .await?;

        for ns in namespaces {
            let mut role: Role = typed(self.of_kind("Role"))?;
            role.metadata.name = Some(format!("{sa}-runner"));
            role.metadata.namespace = Some(ns.to_string());
            create(&Api::namespaced(admin.clone(), ns), &role).await?;
            let mut binding = self.of_kind("RoleBinding");
            binding["metadata"] = json!({"name": format!("{sa}-runner"), "namespace": ns});
            binding["roleRef"]["name"] = json!(format!("{sa}-runner"));
            binding["subjects"] = subject.clone();
            create(
                &Api::<RoleBinding>::namespaced(admin.clone(), ns),
                &typed(binding)?,
            )
            .await?;
        }
        self.wait_effective(admin, sa, namespaces).await
    }

    /// Waits until the apiserver's authorizer grants `sa` every rule applied: RBAC authorizes
    /// from informer caches, so a binding just created may still be refused for a moment
    /// (`plugin/pkg/auth/authorizer/rbac` reads Roles and bindings through listers). Asked
    /// with a SubjectAccessReview per verb, resource and namespace.
    async fn wait_effective(
        &self,
        admin: &Client,
        sa: &str,
        namespaces: &[&str],
    ) -> Result<(), Failure> {
        let reviews = Api::<SubjectAccessReview>::all(admin.clone());
        let mut pending: Vec<(Option<String>, Value, String)> = Vec::new();
        for doc in &self.docs {
            let scopes: Vec<Option<String>> = match doc["kind"].as_str() {
                Some("ClusterRole") => vec![None],
                Some("Role") => namespaces.iter().map(|ns| Some(ns.to_string())).collect(),
                _ => continue,
            };
            for rule in doc["rules"].as_array().into_iter().flatten() {
                let group = strings(&rule["apiGroups"])
                    .into_iter()
                    .next()
                    .unwrap_or_default();
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        for ns in &scopes {
                            let (resource, sub) = match resource.split_once('/') {
                                Some((r, s)) => (r.to_string(), s.to_string()),
                                None => (resource.clone(), String::new()),
                            };
                            let attributes = json!({
                                "namespace": ns, "verb": verb, "group": group,
                                "resource": resource, "subresource": sub,
                            });
                            pending.push((ns.clone(), attributes, format!("{verb} {resource}")));
                        }
                    }
                }
            }
        }
        let user = format!("system:serviceaccount:{SA_NAMESPACE}:{sa}");
        let deadline = tokio::time::Instant::now() + SETTLE;
        while let Some((ns, attributes, what)) = pending.last().cloned() {
            let review: SubjectAccessReview = typed(json!({
                "spec": {
                    "user": user,
                    "groups": ["system:serviceaccounts",
                               format!("system:serviceaccounts:{SA_NAMESPACE}"),
                               "system:authenticated"],
                    "resourceAttributes": attributes,
                }
            }))?;
            let answer = reviews
                .create(&PostParams::default(), &review)
                .await
                .map_err(fail("creating a SubjectAccessReview"))?;
            if answer.status.is_some_and(|s| s.allowed) {
                pending.pop();
                continue;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(Failure(format!(
                    "{user} still may not {what} in {} after {SETTLE:?}",
                    ns.as_deref().unwrap_or("the cluster")
                )));
            }
            // No watch reports an authorizer's cache: ask again shortly.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, Failure> {
    serde_json::from_value(v).map_err(|e| Failure(format!("deploy/rbac.yaml: {e}")))
}

/// Creates `obj`; one that exists already (same name) is kept.
async fn create<K>(api: &Api<K>, obj: &K) -> Result<(), Failure>
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

/// The address the apiserver dials for a Node's kubelet: its InternalIP and kubelet port.
fn kubelet_address(node: &Node) -> Option<SocketAddr> {
    let status = node.status.as_ref()?;
    let ip = status
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")?;
    let port = status
        .daemon_endpoints
        .as_ref()?
        .kubelet_endpoint
        .as_ref()?
        .port;
    Some(SocketAddr::new(
        ip.address.parse().ok()?,
        u16::try_from(port).ok()?,
    ))
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

/// Every version of the objects a watch sees, from the moment [`record`] returns until
/// [`Recorder::stop`]: what a driver created and deleted, or how a workload fared, while it
/// ran.
pub struct Recorder<K> {
    seen: Arc<Mutex<Vec<K>>>,
    task: JoinHandle<()>,
}

impl<K: Clone> Recorder<K> {
    /// Stops watching; every version seen, in order.
    pub fn stop(self) -> Vec<K> {
        self.task.abort();
        self.seen.lock().unwrap().clone()
    }
}

impl<K> Drop for Recorder<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts recording the objects of `api` that `config` selects; returns once the watch has
/// listed what exists, so nothing written after is missed.
pub async fn record<K>(api: Api<K>, config: watcher::Config) -> Result<Recorder<K>, Failure>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync,
    K: 'static,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let (listed, listing) = oneshot::channel();
    let what = format!("{:?} {:?}", config.label_selector, config.field_selector);
    let watching = what.clone();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed);
        let mut stream = std::pin::pin!(watcher::watcher(api, config));
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(k) | watcher::Event::InitApply(k)) => {
                    sink.lock().unwrap().push(k);
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                }
                Ok(_) => {}
                Err(e) => eprintln!("watching {watching}: {e}"),
            }
        }
    });
    let recorder = Recorder { seen, task };
    match tokio::time::timeout(SETTLE, listing).await {
        Ok(Ok(())) => Ok(recorder),
        _ => Err(Failure(format!("the watch of {what} did not list"))),
    }
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

/// Watches object `name` of `api` until `want` holds of it, at most `limit`; `what` says what
/// is awaited, for the failure.
pub async fn wait_for<K>(
    api: Api<K>,
    name: &str,
    what: &str,
    limit: Duration,
    want: impl Fn(&K) -> bool + Send + 'static,
) -> Result<K, Failure>
where
    K: Clone + std::fmt::Debug + Send + serde::de::DeserializeOwned + kube::Resource + 'static,
{
    let waiting = await_condition(api, name, move |k: Option<&K>| k.is_some_and(&want));
    match tokio::time::timeout(limit, waiting).await {
        Ok(Ok(Some(k))) => Ok(k),
        Ok(Ok(None)) => Err(Failure(format!("{name}: gone while waiting for {what}"))),
        Ok(Err(e)) => Err(Failure(format!("watching {name} for {what}: {e}"))),
        Err(_) => Err(Failure(format!("{name}: {what} not seen after {limit:?}"))),
    }
}

/// Waits (at most `limit`) until Deployment `namespace/name` has all its `replicas` updated,
/// Ready and available; `when` says at which point of the scenario, for the failure.
pub async fn deployment_available(
    admin: &Client,
    namespace: &str,
    name: &str,
    replicas: i32,
    limit: Duration,
    when: &str,
) -> Result<Deployment, Failure> {
    let api = Api::<Deployment>::namespaced(admin.clone(), namespace);
    let what = format!("{replicas} replicas available {when}");
    wait_for(api, name, &what, limit, move |d: &Deployment| {
        let Some(s) = &d.status else { return false };
        s.observed_generation >= d.metadata.generation
            && s.updated_replicas == Some(replicas)
            && s.ready_replicas == Some(replicas)
            && s.available_replicas == Some(replicas)
            && s.unavailable_replicas.unwrap_or(0) == 0
    })
    .await
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

/// A node's host as the node agent's `stratum` model reports it (`GET /stratum` on the node's
/// kubelet address): what ran there, independently of what any driver says.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct HostReport {
    /// The kubelet version the host runs.
    pub version: String,
    /// Its boot.
    #[serde(rename = "bootID")]
    pub boot_id: String,
    /// Whether it is up (not rebooting).
    pub up: bool,
    /// How many times each `stratum` operation ran on it, by command (`upgrade`, `carotate
    /// status`, ...).
    pub executions: std::collections::BTreeMap<String, u32>,
}

impl HostReport {
    /// How many times `command` (`"upgrade"`, `"carotate issue"`, ...) ran on the host.
    pub fn executions(&self, command: &str) -> u32 {
        self.executions.get(command).copied().unwrap_or(0)
    }
}

/// What node `node`'s host model reports: `GET /stratum` at the address the apiserver dials
/// for its kubelet (its InternalIP and kubelet port, read as an administrator), over TLS
/// without verifying the agent's self-signed certificate, as the apiserver does. Not through
/// the apiserver's node proxy: it refuses loopback addresses ("address not allowed"), which
/// the agent's nodes have.
pub async fn host_report(admin: &Client, node: &str) -> Result<HostReport, Failure> {
    let asking = |e: &dyn std::fmt::Display| Failure(format!("asking node {node}'s host: {e}"));
    let read = KubeApi::new(admin.clone()).get_node(node).await?;
    let address = kubelet_address(&read)
        .ok_or_else(|| Failure(format!("node {node} has no InternalIP or kubelet port")))?;
    let url: http::Uri = format!("https://{address}")
        .parse()
        .map_err(|e| asking(&e))?;
    let mut config = Config::new(url);
    config.accept_invalid_certs = true;
    let kubelet = Client::try_from(config).map_err(|e| asking(&e))?;
    let request = http::Request::get("/stratum")
        .body(Vec::new())
        .map_err(|e| asking(&e))?;
    let text = kubelet
        .request_text(request)
        .await
        .map_err(|e| asking(&e))?;
    serde_json::from_str(&text)
        .map_err(|e| Failure(format!("node {node}'s host answered {text:?}: {e}")))
}

/// The `bootID` a Node reports.
pub fn boot_id(node: &Node) -> &str {
    (node.status.as_ref())
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.as_str())
        .unwrap_or_default()
}

/// Node `node`'s host reboots by itself ([`REBOOT_ANNOTATION`], a fresh value); returns once the
/// node reports a new `bootID`, Ready and without the not-ready taint (at most `limit`, the
/// reboot's time included), with the Node as then read.
pub async fn reboot_by_itself(
    admin: &Client,
    node: &str,
    limit: Duration,
) -> Result<Node, Failure> {
    let nodes = Api::<Node>::all(admin.clone());
    let before = nodes
        .get(node)
        .await
        .map_err(|e| Failure(format!("reading node {node}: {e}")))?;
    let old = boot_id(&before).to_string();
    annotate_node(admin, node, REBOOT_ANNOTATION, Some(&unique("reboot"))).await?;
    wait_for(nodes, node, "a new boot, Ready", limit, move |n: &Node| {
        let tainted = (n.spec.as_ref().and_then(|s| s.taints.as_ref()))
            .is_some_and(|t| t.iter().any(|t| t.key == NOT_READY_TAINT));
        boot_id(n) != old && nodejob_core::ready(n) && !tainted
    })
    .await
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

/// The conformance backend on the real cluster: the runner's API acts as a ServiceAccount bound
/// by `deploy/rbac.yaml` (or a variant of it); each scenario has its own namespace and Node.
pub struct KubeBackend {
    admin: Client,
    api: Arc<KubeApi>,
    rbac: Rbac,
    sa: String,
    namespace: String,
    node: String,
    /// For [`Workloads`]: the scenario's nodes (the first is `node`) and their label.
    nodes: Vec<String>,
    label: (String, String),
}

impl KubeBackend {
    /// A backend acting as the ServiceAccount of `deploy/rbac.yaml` as committed.
    pub async fn new() -> Result<Self, Failure> {
        Self::with_rbac(Rbac::committed(), SA_NAME).await
    }

    /// A backend acting as ServiceAccount `sa`, bound by `rbac`.
    pub async fn with_rbac(rbac: Rbac, sa: &str) -> Result<Self, Failure> {
        Self::with_nodes(rbac, sa, 1).await
    }

    /// A backend for the [`Workloads`] scenarios: three nodes of the scenario's own, labelled
    /// [`SCENARIO_LABEL`], acting as the ServiceAccount of `deploy/rbac.yaml`.
    pub async fn for_workloads() -> Result<Self, Failure> {
        Self::with_nodes(Rbac::committed(), SA_NAME, 3).await
    }

    async fn with_nodes(rbac: Rbac, sa: &str, count: usize) -> Result<Self, Failure> {
        let admin = admin().await?;
        let name = unique("nj");
        namespace(&admin, &name, "privileged").await?;
        // The Role in the scenario's namespace, and where deploy/rbac.yaml puts it, the
        // drivers' namespace: the only one (with default) where an Event about a Node is taken.
        rbac.apply(&admin, sa, &[&name, SA_NAMESPACE]).await?;
        let label = (SCENARIO_LABEL.to_string(), name.clone());
        let nodes: Vec<String> = (0..count)
            .map(|i| {
                if i == 0 {
                    name.clone()
                } else {
                    format!("{name}-{i}")
                }
            })
            .collect();
        for node in &nodes {
            labelled_node(&admin, node, Some(&label)).await?;
        }
        let user = format!("system:serviceaccount:{SA_NAMESPACE}:{sa}");
        let api = KubeApi::from_config(config(Some(&user)).await?)
            .map_err(|e| Failure(format!("client as {user}: {e}")))?;
        Ok(KubeBackend {
            admin,
            api: Arc::new(api),
            rbac,
            sa: sa.into(),
            namespace: name.clone(),
            node: name,
            nodes,
            label,
        })
    }
}

#[async_trait]
impl Backend for KubeBackend {
    type Api = KubeApi;

    fn api(&self) -> Arc<KubeApi> {
        self.api.clone()
    }
    fn namespace(&self) -> String {
        self.namespace.clone()
    }
    fn node(&self) -> String {
        self.node.clone()
    }
    async fn set_kubelet_reachable(&self, node: &str, reachable: bool) -> Result<(), Failure> {
        annotate_node(
            &self.admin,
            node,
            KUBELET_ANNOTATION,
            (!reachable).then_some("unreachable"),
        )
        .await?;
        // The agent closes or reopens the node's log listener on the annotation's watch event:
        // wait until a connection to the address the apiserver dials is refused, or accepted.
        let api = KubeApi::new(self.admin.clone());
        let address = kubelet_address(&api.get_node(node).await?)
            .ok_or_else(|| Failure(format!("node {node} has no InternalIP or kubelet port")))?;
        let deadline = api.now() + SETTLE;
        while tokio::net::TcpStream::connect(address).await.is_ok() != reachable {
            if api.now() > deadline {
                return Err(Failure(format!(
                    "node {node}: the agent did not make {address} reachable={reachable}"
                )));
            }
            api.sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
    async fn set_node_ready(&self, node: &str, ready: bool) -> Result<(), Failure> {
        annotate_node(
            &self.admin,
            node,
            READY_ANNOTATION,
            Some(if ready { "true" } else { "false" }),
        )
        .await?;
        // Wait (on the Node's watch) until the agent has posted the condition, so the scenario
        // sees a settled node.
        let api = KubeApi::new(self.admin.clone());
        let deadline = api.now() + SETTLE;
        loop {
            let seen = api.get_node(node).await?;
            if nodejob_core::ready(&seen) == ready {
                return Ok(());
            }
            let left = deadline.saturating_sub(api.now());
            if left.is_zero() {
                return Err(Failure(format!(
                    "node {node}: the agent did not post Ready={ready}"
                )));
            }
            let since = seen.metadata.resource_version;
            api.wait_node(node, since.as_deref(), left).await?;
        }
    }
    async fn forbid_privileged_pods(&self) -> Result<String, Failure> {
        let name = format!("{}-baseline", self.namespace);
        namespace(&self.admin, &name, "baseline").await?;
        self.rbac.apply(&self.admin, &self.sa, &[&name]).await?;
        Ok(name)
    }
    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), Failure> {
        Api::<Pod>::namespaced(self.admin.clone(), namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(fail("deleting a pod"))
    }
    async fn remove_node(&self, node: &str) -> Result<(), Failure> {
        Api::<Node>::all(self.admin.clone())
            .delete(node, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(fail("deleting a node"))
    }
}

#[async_trait]
impl Workloads for KubeBackend {
    fn nodes(&self) -> Vec<String> {
        self.nodes.clone()
    }
    fn node_label(&self) -> (String, String) {
        self.label.clone()
    }
    async fn create(&self, object: Object) -> Result<(), Failure> {
        let admin = self.admin.clone();
        let ns = self.namespace.as_str();
        let params = PostParams::default();
        let result = match object {
            Object::Deployment(d) => Api::<Deployment>::namespaced(admin, ns)
                .create(&params, &d)
                .await
                .map(drop),
            Object::Budget(b) => Api::<PodDisruptionBudget>::namespaced(admin, ns)
                .create(&params, &b)
                .await
                .map(drop),
            Object::DaemonSet(d) => Api::<DaemonSet>::namespaced(admin, ns)
                .create(&params, &d)
                .await
                .map(drop),
            Object::Pod(p) => Api::<Pod>::namespaced(admin, ns)
                .create(&params, &p)
                .await
                .map(drop),
            other => return Err(Failure(format!("cannot create {other:?}"))),
        };
        result.map_err(fail("creating a workload"))
    }
}

/// The well-known label of a Node's zone, which `upgrade-driver` batches by.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Where the two workers of [`ThreeNodes`] stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// No zone label.
    Unzoned,
    /// The first in zone `zone-a`, the second in `zone-b` ([`ZONE_LABEL`]).
    InTwoZones,
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
    /// The label every node of the scenario carries ([`SCENARIO_LABEL`]).
    pub label: (String, String),
}

impl ThreeNodes {
    /// Creates the nodes (each Ready), labels them and makes their hosts quick.
    pub async fn new(workers: Workers) -> Result<Self, Failure> {
        let backend = KubeBackend::for_workloads().await?;
        let admin = admin().await?;
        let names = backend.nodes();
        let control = &names[0];
        label_node(
            &admin,
            control,
            nodejob_core::drive::CONTROL_PLANE_LABEL,
            "",
        )
        .await?;
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
        let ns = self.namespace.as_str();
        let web = nodejob_conformance::workloads::deployment(ns, app, replicas, &self.label);
        self.backend
            .create(Object::Deployment(Box::new(web)))
            .await?;
        let pdb = nodejob_conformance::workloads::budget(ns, app, app, replicas - 1);
        self.backend.create(Object::Budget(Box::new(pdb))).await?;
        deployment_available(&self.admin, ns, app, replicas, limit, "before the roll").await?;
        let budgets = Api::<PodDisruptionBudget>::namespaced(self.admin.clone(), ns);
        wait_for(budgets, app, "one disruption allowed", limit, |b| {
            b.status.as_ref().is_some_and(|s| {
                s.observed_generation >= b.metadata.generation && s.disruptions_allowed == 1
            })
        })
        .await
        .map(drop)
    }
}

/// What a driver reports as it runs: each event printed as a timestamped JSON line after a
/// prefix (the scenario's), and kept, in order.
pub struct ProgressLog<P> {
    seen: Arc<Mutex<Vec<P>>>,
    prefix: &'static str,
}

impl<P: serde::Serialize + std::fmt::Debug + Clone + Send + 'static> ProgressLog<P> {
    /// An empty log whose lines start with `prefix`.
    pub fn new(prefix: &'static str) -> Self {
        ProgressLog {
            seen: Arc::default(),
            prefix,
        }
    }

    /// What the driver reports to: prints and keeps each event.
    pub fn sink(&self) -> impl Fn(&P) + Send + Sync + 'static {
        let (sink, prefix) = (self.seen.clone(), self.prefix);
        move |p: &P| {
            let line = serde_json::to_string(p).unwrap_or_else(|_| format!("{p:?}"));
            eprintln!("{} {prefix}: {line}", k8s_openapi::jiff::Timestamp::now());
            sink.lock().unwrap().push(p.clone());
        }
    }

    /// Every event so far, in order.
    pub fn events(&self) -> Vec<P> {
        self.seen.lock().unwrap().clone()
    }
}

/// Checks a driver's account of its Lease, `history` (its report's: acquired first, released
/// last), and that Lease `name` in [`SA_NAMESPACE`] is held by no one now; returns the Lease.
pub async fn lease_released(
    admin: &Client,
    name: &str,
    history: &[String],
) -> Result<Lease, Failure> {
    nodejob_conformance::ensure!(
        history.first().is_some_and(|l| l.starts_with("acquired"))
            && history.last().map(String::as_str) == Some("released"),
        "the Lease must be acquired and released: {history:?}"
    );
    let lease = Api::<Lease>::namespaced(admin.clone(), SA_NAMESPACE)
        .get(name)
        .await
        .map_err(|e| Failure(format!("reading lease {name}: {e}")))?;
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
    nodejob_conformance::ensure!(holder.is_none(), "lease {name} still held by {holder:?}");
    Ok(lease)
}
