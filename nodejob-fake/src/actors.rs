//! The actor methods and readers of nodes, namespaces, workloads, Pods, budgets and Leases:
//! what an administrator, a node's kubelet or another controller does, written through the
//! same store logic as the API verbs, never recorded nor faulted.

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus, Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_core::{ApiResult, NodeChange};
use nodejob_host::stratum::{StratumHost, StratumState};

use crate::FakeCluster;
use crate::registry::{self, BUDGETS, DAEMON_SETS, DEPLOYMENTS, REPLICA_SETS};
use crate::store::Key;

impl FakeCluster {
    // ---- namespaces ----

    /// Sets label `key` of namespace `name` to `value` (a write when it changes), e.g. the
    /// PodSecurity level it enforces:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use nodejob_fake::{FakeCluster, labels};
    /// let cluster = FakeCluster::new();
    /// cluster.label_namespace("default", labels::POD_SECURITY_ENFORCE, "baseline").unwrap();
    /// # }
    /// ```
    ///
    /// From then on a privileged pod created there is refused (a Job's: `FailedCreate`
    /// Events and retries). NotFound if there is no such namespace.
    pub fn label_namespace(&self, name: &str, key: &str, value: &str) -> ApiResult<()> {
        self.with_state(|st| st.store.label_namespace(name, key, Some(value)))
    }

    /// Removes label `key` of namespace `name` (no error when it is absent). NotFound if there
    /// is no such namespace.
    pub fn unlabel_namespace(&self, name: &str, key: &str) -> ApiResult<()> {
        self.with_state(|st| st.store.label_namespace(name, key, None))
    }

    /// The Namespace `name`, if it exists.
    pub fn namespace(&self, name: &str) -> Option<Namespace> {
        self.with_state(|st| st.store.namespaces.get(name).cloned())
    }

    // ---- nodes ----

    /// Patches Node `name` as another actor would (`kubectl cordon`, `kubectl annotate`): the
    /// `changes` applied to the node as it is now, without a resourceVersion precondition.
    /// Answers the node as stored. NotFound if there is no such node.
    pub fn patch_node_now(&self, name: &str, changes: &[NodeChange]) -> ApiResult<Node> {
        self.with_state(|st| registry::patch_node(&mut st.store, name, "", changes))
    }

    /// Sets label `key` of Node `name` to `value` (`kubectl label node`), e.g.
    /// [`labels::CONTROL_PLANE`](crate::labels::CONTROL_PLANE) (value `""`) or
    /// [`labels::ZONE`](crate::labels::ZONE). Answers the node. NotFound if there is no such
    /// node.
    pub fn label_node(&self, name: &str, key: &str, value: &str) -> ApiResult<Node> {
        self.with_state(|st| {
            st.update_node(name, |node| {
                let labels = node.metadata.labels.get_or_insert_default();
                labels.insert(key.to_string(), value.to_string());
            })
        })
    }

    /// Removes label `key` of Node `name` (no error when it is absent). NotFound if there is no
    /// such node.
    pub fn unlabel_node(&self, name: &str, key: &str) -> ApiResult<Node> {
        self.with_state(|st| {
            st.update_node(name, |node| {
                if let Some(labels) = node.metadata.labels.as_mut() {
                    labels.remove(key);
                }
            })
        })
    }

    /// The node's kubelet now reports `version` as `status.nodeInfo.kubeletVersion` (an
    /// upgraded kubelet; the default is
    /// [`DEFAULT_KUBELET_VERSION`](crate::DEFAULT_KUBELET_VERSION)), and its host model runs
    /// it. Answers the node. NotFound if there is no such node.
    pub fn set_kubelet_version(&self, name: &str, version: &str) -> ApiResult<Node> {
        self.with_state(|st| st.set_kubelet_version(name, version))
    }

    /// The node restarted: its kubelet reports a new `status.nodeInfo.bootID`, drawn from the
    /// seed (its host model's `boot_id` too). Nothing else happens to the node or its pods:
    /// compose with [`set_node_ready`](Self::set_node_ready) for the downtime. Answers the
    /// node. NotFound if there is no such node.
    pub fn reboot_node(&self, name: &str) -> ApiResult<Node> {
        self.with_state(|st| st.reboot_node(name))
    }

    // ---- hosts ----

    /// Gives node `name` the host model `host`: from now on the containers that start there and
    /// exec `stratum` are played by it (see [the model](crate::model#the-host-model-stratum)),
    /// and the node reports its `version` as `kubeletVersion` and its `boot_id` as `bootID` (a
    /// write when they change). Every node starts with
    /// [`StratumHost::new`](crate::stratum::StratumHost::new) at its kubelet version and boot
    /// ID, trusting and issuing from [`INITIAL_CA`](crate::stratum::INITIAL_CA). Change one
    /// part of it by reading it first:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use nodejob_fake::FakeCluster;
    /// use nodejob_fake::stratum::Fault;
    /// let cluster = FakeCluster::new();
    /// cluster.add_node("n1").unwrap();
    /// let host = cluster.host("n1").unwrap().with_fault(Fault::StaysDown);
    /// cluster.set_host("n1", host).unwrap();
    /// # }
    /// ```
    ///
    /// Answers the node. NotFound if there is no such node.
    pub fn set_host(&self, name: &str, host: StratumHost) -> ApiResult<Node> {
        self.with_state(|st| st.set_host(name, host))
    }

    /// The host model of node `name` (state, timing and faults), if the node exists.
    pub fn host(&self, name: &str) -> Option<StratumHost> {
        self.with_state(|st| st.kubelets.host(name).cloned())
    }

    /// The state of node `name`'s host (version, boot, CA trust and issuer, executions per
    /// operation); for a node deleted since, its host's last state (its execution counts
    /// outlive the Node object, as the machine outlives its registration).
    pub fn host_state(&self, name: &str) -> Option<StratumState> {
        self.with_state(|st| st.kubelets.host_or_retired(name).map(|h| h.state.clone()))
    }

    // ---- pods ----

    /// Creates a Pod as an administrator would (`kubectl apply`; a bare Pod, or a mirror Pod
    /// carrying `kubernetes.io/config.mirror`): 422 for an invalid name or no container, 404
    /// for a missing namespace, 403 when admission refuses it (the namespace's PodSecurity
    /// level, or the bound node's [`NodeScript::refuse_pods`](crate::NodeScript::refuse_pods)),
    /// 409 when the name is taken. A Pod bound to a node (`spec.nodeName`) starts there; any
    /// other is placed by the scheduler. Answers the Pod as created.
    pub fn create_pod_now(&self, pod: &Pod) -> ApiResult<Pod> {
        self.with_state(|st| st.create_pod(pod))
    }

    /// Deletes one Pod as `kubectl delete pod` does: gracefully, with the Pod's own grace
    /// period (`deletionTimestamp` and `deletionGracePeriodSeconds`; its container gets
    /// SIGTERM, then SIGKILL at the end of the grace period if it ignores SIGTERM; the Pod goes
    /// once it ended). A Job's pod deleted this way counts as failed. A workload's is replaced
    /// by its ReplicaSet or DaemonSet. NotFound if there is no such Pod.
    pub fn delete_pod_now(&self, namespace: &str, name: &str) -> ApiResult<()> {
        self.with_state(|st| st.delete_pod_by_name(namespace, name))
    }

    /// The Pod `namespace/name`, if it exists.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.with_state(|st| st.store.get_pod(namespace, name).ok())
    }

    /// Every Pod bound to `node`, in `(namespace, name)` order.
    pub fn pods_on(&self, node: &str) -> Vec<Pod> {
        self.with_state(|st| st.store.pods_on(node))
    }

    // ---- workloads ----

    /// Creates a Deployment as an administrator would (404 for a missing namespace, 422 for an
    /// invalid name, 409 when taken). The Deployment controller gives it one ReplicaSet,
    /// `<name>-<pod-template-hash>`, whose pods follow (see
    /// [the model](crate::model#workloads-and-disruption)). Answers the Deployment as created.
    pub fn create_deployment_now(&self, deployment: &Deployment) -> ApiResult<Deployment> {
        self.with_state(|st| {
            let taken = |s: &crate::store::Store, k: &Key| s.deployments.contains_key(k);
            let mut d = registry::prepare_create(
                &mut st.store,
                &DEPLOYMENTS,
                deployment,
                Vec::new(),
                taken,
                st.now,
            )?;
            d.status = None;
            Ok(st.store.write_deployment(d))
        })
    }

    /// Creates a ReplicaSet as an administrator would (as
    /// [`create_deployment_now`](Self::create_deployment_now)); it keeps `replicas` pods.
    pub fn create_replica_set_now(&self, replica_set: &ReplicaSet) -> ApiResult<ReplicaSet> {
        self.with_state(|st| {
            let taken = |s: &crate::store::Store, k: &Key| s.replica_sets.contains_key(k);
            let mut rs = registry::prepare_create(
                &mut st.store,
                &REPLICA_SETS,
                replica_set,
                Vec::new(),
                taken,
                st.now,
            )?;
            rs.status = None;
            Ok(st.store.write_replica_set(rs))
        })
    }

    /// Creates a DaemonSet as an administrator would; it keeps a pod on each node its
    /// template's `nodeSelector` matches.
    pub fn create_daemon_set_now(&self, daemon_set: &DaemonSet) -> ApiResult<DaemonSet> {
        self.with_state(|st| {
            let taken = |s: &crate::store::Store, k: &Key| s.daemon_sets.contains_key(k);
            let mut ds = registry::prepare_create(
                &mut st.store,
                &DAEMON_SETS,
                daemon_set,
                Vec::new(),
                taken,
                st.now,
            )?;
            ds.status = Some(DaemonSetStatus::default());
            Ok(st.store.write_daemon_set(ds))
        })
    }

    /// Creates a PodDisruptionBudget as an administrator would, with an empty status
    /// (`observedGeneration` 0: evictions it covers answer 429 until the disruption controller
    /// has synced it, at once). Answers it as created.
    pub fn create_budget_now(
        &self,
        budget: &PodDisruptionBudget,
    ) -> ApiResult<PodDisruptionBudget> {
        self.with_state(|st| {
            let taken = |s: &crate::store::Store, k: &Key| s.budgets.contains_key(k);
            let mut b = registry::prepare_create(
                &mut st.store,
                &BUDGETS,
                budget,
                Vec::new(),
                taken,
                st.now,
            )?;
            b.status = Some(PodDisruptionBudgetStatus::default());
            Ok(st.store.write_budget(b))
        })
    }

    /// Changes the `minAvailable` of PodDisruptionBudget `namespace/name` as `kubectl edit`
    /// would: a new `generation`, so that evictions it covers answer 429 until the disruption
    /// controller has synced it (at once). Answers it as written. NotFound if there is none.
    pub fn set_budget_min_available_now(
        &self,
        namespace: &str,
        name: &str,
        min_available: i32,
    ) -> ApiResult<PodDisruptionBudget> {
        let key = (namespace.to_string(), name.to_string());
        self.with_state(|st| {
            let mut budget = st.store.budgets.get(&key).cloned().ok_or_else(|| {
                nodejob_core::ApiError::not_found(format!(
                    "poddisruptionbudgets.policy \"{name}\" not found"
                ))
            })?;
            let spec = budget.spec.get_or_insert_default();
            spec.min_available = Some(IntOrString::Int(min_available));
            spec.max_unavailable = None;
            budget.metadata.generation = Some(budget.metadata.generation.unwrap_or(1) + 1);
            Ok(st.store.write_budget(budget))
        })
    }

    /// Deletes PodDisruptionBudget `namespace/name` (`kubectl delete pdb`). NotFound if there
    /// is none.
    pub fn delete_budget_now(&self, namespace: &str, name: &str) -> ApiResult<()> {
        let key = (namespace.to_string(), name.to_string());
        self.with_state(|st| {
            st.store.remove_budget(&key).map(drop).ok_or_else(|| {
                nodejob_core::ApiError::not_found(format!(
                    "poddisruptionbudgets.policy \"{name}\" not found"
                ))
            })
        })
    }

    /// The Deployment `namespace/name`, if it exists.
    pub fn deployment(&self, namespace: &str, name: &str) -> Option<Deployment> {
        let key = (namespace.to_string(), name.to_string());
        self.with_state(|st| st.store.deployments.get(&key).cloned())
    }

    /// The ReplicaSets of `namespace`, in name order.
    pub fn replica_sets(&self, namespace: &str) -> Vec<ReplicaSet> {
        self.with_state(|st| {
            (st.store.replica_sets.iter())
                .filter(|((ns, _), _)| ns == namespace)
                .map(|(_, rs)| rs.clone())
                .collect()
        })
    }

    /// The DaemonSet `namespace/name`, if it exists.
    pub fn daemon_set(&self, namespace: &str, name: &str) -> Option<DaemonSet> {
        let key = (namespace.to_string(), name.to_string());
        self.with_state(|st| st.store.daemon_sets.get(&key).cloned())
    }

    /// The PodDisruptionBudget `namespace/name`, if it exists.
    pub fn budget(&self, namespace: &str, name: &str) -> Option<PodDisruptionBudget> {
        let key = (namespace.to_string(), name.to_string());
        self.with_state(|st| st.store.budgets.get(&key).cloned())
    }

    /// The Lease `namespace/name`, if it exists.
    pub fn lease(&self, namespace: &str, name: &str) -> Option<Lease> {
        self.with_state(|st| registry::get_lease(&st.store, namespace, name).ok())
    }

    /// Another holder takes the Lease `namespace/name` as a client-go leader elector does
    /// once it saw the Lease expire (or as a person with `kubectl edit`): `holderIdentity`
    /// `holder`, `leaseTransitions` + 1, `acquireTime` and `renewTime` now, whatever the
    /// current holder thinks. Answers the Lease as written. NotFound if there is none.
    pub fn steal_lease(&self, namespace: &str, name: &str, holder: &str) -> ApiResult<Lease> {
        self.with_state(|st| {
            let mut lease = registry::get_lease(&st.store, namespace, name)?;
            let now = MicroTime(crate::timing::stamp(st.now).0);
            let spec = lease.spec.get_or_insert_default();
            spec.holder_identity = Some(holder.to_string());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
            Ok(st.store.write_lease(lease))
        })
    }
}
