//! [`Workloads`]: what the node, pod, eviction and Lease scenarios need of a backend beyond the
//! API under test: nodes of the scenario's own and the workloads a drain meets (a Deployment,
//! its PodDisruptionBudget, a DaemonSet, bare, mirror and emptyDir Pods), created as an
//! administrator would. The objects are built here, once, as `kubectl apply` would send them;
//! each backend only stores them.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, Pod, PodSpec, PodTemplateSpec, Volume,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_core::{LeaseApi, NodeApi, PodApi};

use crate::{Backend, Failure};

/// The annotation the kubelet puts on a mirror Pod.
pub const MIRROR_ANNOTATION: &str = nodejob_core::drain::MIRROR_ANNOTATION;

/// The label every workload Pod of the suite carries, with its workload's name.
pub const APP_LABEL: &str = "app";

/// An object the scenario asks the backend to create, as an administrator.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Object {
    /// A Deployment (its ReplicaSet and Pods follow, scheduled on the scenario's nodes).
    Deployment(Box<Deployment>),
    /// A PodDisruptionBudget.
    Budget(Box<PodDisruptionBudget>),
    /// A DaemonSet (a Pod on each of the scenario's nodes).
    DaemonSet(Box<DaemonSet>),
    /// A Pod, bound to a node by `spec.nodeName`.
    Pod(Box<Pod>),
}

/// A backend whose API serves every trait, with nodes and workloads for the drain scenarios.
#[async_trait]
pub trait Workloads: Backend<Api: NodeApi + PodApi + LeaseApi> {
    /// Three Ready, schedulable nodes of this scenario's own; the first is [`Backend::node`].
    fn nodes(&self) -> Vec<String>;
    /// The label `(key, value)` that exactly this scenario's nodes carry, for a workload's
    /// `nodeSelector`.
    fn node_label(&self) -> (String, String);
    /// Creates `object` as an administrator would.
    async fn create(&self, object: Object) -> Result<(), Failure>;
}

fn meta(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..ObjectMeta::default()
    }
}

fn app(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(APP_LABEL.to_string(), name.to_string())])
}

/// A container that is no host command: it runs until its Pod is deleted and ends on SIGTERM.
fn workload_container() -> Container {
    Container {
        name: "app".into(),
        image: Some("registry.k8s.io/pause:3.10".into()),
        ..Container::default()
    }
}

fn pod_spec(label: &(String, String), grace_seconds: i64) -> PodSpec {
    PodSpec {
        containers: vec![workload_container()],
        node_selector: Some(BTreeMap::from([label.clone()])),
        termination_grace_period_seconds: Some(grace_seconds),
        ..PodSpec::default()
    }
}

/// A Deployment of `replicas` Pods labelled `app: name`, on the nodes labelled `label`.
pub fn deployment(
    namespace: &str,
    name: &str,
    replicas: i32,
    label: &(String, String),
) -> Deployment {
    Deployment {
        metadata: meta(namespace, name),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(app(name)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app(name)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(label, 5)),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// The same Deployment whose Pods mount an `emptyDir` volume.
pub fn with_empty_dir(mut deployment: Deployment) -> Deployment {
    if let Some(spec) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        spec.volumes = Some(vec![Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        }]);
    }
    deployment
}

/// A PodDisruptionBudget `name` over the Pods labelled `app: app` with `minAvailable`.
pub fn budget(
    namespace: &str,
    name: &str,
    app_name: &str,
    min_available: i32,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta(namespace, name),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(min_available)),
            selector: Some(LabelSelector {
                match_labels: Some(app(app_name)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

/// A DaemonSet labelled `app: name` on the nodes labelled `label`.
pub fn daemonset(namespace: &str, name: &str, label: &(String, String)) -> DaemonSet {
    DaemonSet {
        metadata: meta(namespace, name),
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(app(name)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app(name)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(label, 5)),
            },
            ..DaemonSetSpec::default()
        }),
        status: None,
    }
}

/// A Pod no controller manages, bound to `node`, with `grace_seconds` to terminate.
pub fn bare_pod(namespace: &str, name: &str, node: &str, grace_seconds: i64) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: Some(app(name)),
            ..meta(namespace, name)
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            containers: vec![workload_container()],
            termination_grace_period_seconds: Some(grace_seconds),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// A mirror Pod on `node`: what the kubelet writes to the apiserver for a static Pod.
pub fn mirror_pod(namespace: &str, name: &str, node: &str) -> Pod {
    let mut pod = bare_pod(namespace, name, node, 30);
    pod.metadata.annotations = Some(BTreeMap::from([(
        MIRROR_ANNOTATION.to_string(),
        "mirror".to_string(),
    )]));
    pod
}
