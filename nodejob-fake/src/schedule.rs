//! A seeded **actor schedule**: what people, nodes and other controllers do to a shared
//! cluster while a driver runs, drawn from a seed so that a failing seed replays exactly. Each
//! [`Act`] goes through the cluster's public actor methods (never recorded as the driver's
//! calls, never faulted); [`ActorSchedule::arm`] schedules them at their virtual times.
//!
//! ```
//! use std::time::Duration;
//! use nodejob_fake::FakeCluster;
//! use nodejob_fake::schedule::{ActorSchedule, Cast};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let cluster = FakeCluster::with_seed(3);
//! for n in ["a", "b"] {
//!     cluster.add_node(n).unwrap();
//! }
//! let cast = Cast::new(vec!["a".into(), "b".into()]);
//! let schedule = ActorSchedule::draw(3, &cast, Duration::from_secs(600), 8);
//! assert_eq!(schedule, ActorSchedule::draw(3, &cast, Duration::from_secs(600), 8));
//! schedule.arm(&cluster);
//! # }
//! ```

use std::fmt;
use std::time::Duration;

use nodejob_core::{ApiError, NodeChange, Verb};

use crate::{FakeCluster, Verbs};

/// What the actors may act on: the nodes, the label that puts a node into the driver's
/// selection, the versions a node may be made to report. The workloads the actors create and
/// delete live in `default` and run on nodes labelled [`WORKER`]; the Lease they take is the
/// drivers' default, [`LEASE`].
#[derive(Clone, Debug, PartialEq)]
pub struct Cast {
    /// The nodes of the cluster at the start.
    pub nodes: Vec<String>,
    /// The label `key=value` the plan selects by, if it selects by one: relabelling moves a
    /// node into or out of the selection.
    pub selection: Option<(String, String)>,
    /// The versions a node may be made to report (an out-of-band upgrade or downgrade).
    pub versions: Vec<String>,
}

/// The label of the nodes the actors' Deployments run on, and that a joining node carries.
pub const WORKER: (&str, &str) = ("role", "worker");
/// The Lease the actors take: `kube-system/nodejob`, the drivers' default.
pub const LEASE: (&str, &str) = ("kube-system", "nodejob");
/// The namespace of the actors' Deployments and budgets.
pub const NAMESPACE: &str = "default";

impl Cast {
    /// `nodes`, no selection label, versions `v1.37.2`, `v1.38.0` and `v1.36.9`.
    pub fn new(nodes: Vec<String>) -> Self {
        Cast {
            nodes,
            selection: None,
            versions: vec!["v1.37.2".into(), "v1.38.0".into(), "v1.36.9".into()],
        }
    }
}

/// One thing another actor does.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Act {
    /// `kubectl cordon`.
    Cordon(String),
    /// `kubectl uncordon`.
    Uncordon(String),
    /// `kubectl label node NODE KEY=VALUE`.
    Label {
        /// The node.
        node: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// `kubectl label node NODE KEY-`.
    Unlabel {
        /// The node.
        node: String,
        /// The key.
        key: String,
    },
    /// `kubectl delete node` (its Pods are collected 40 s later).
    DeleteNode(String),
    /// A node joins (a new name, or one deleted earlier coming back), with these labels.
    AddNode {
        /// Its name.
        name: String,
        /// Its labels.
        labels: Vec<(String, String)>,
    },
    /// The node reboots by itself: a new `bootID`.
    Reboot(String),
    /// The node goes NotReady for a while, then Ready again.
    Flap {
        /// The node.
        node: String,
        /// For how long.
        down_for: Duration,
    },
    /// The node reports another version than a moment before (upgraded or downgraded out of
    /// band).
    ReportVersion {
        /// The node.
        node: String,
        /// The version.
        version: String,
    },
    /// A PodDisruptionBudget over the pods of Deployment `app`.
    CreateBudget {
        /// The budget's name.
        name: String,
        /// The Deployment whose pods it covers.
        app: String,
        /// Its `minAvailable`.
        min_available: i32,
    },
    /// A budget's `minAvailable` changed.
    ChangeBudget {
        /// The budget's name.
        name: String,
        /// Its new `minAvailable`.
        min_available: i32,
    },
    /// A budget deleted.
    DeleteBudget(String),
    /// A Deployment of `replicas` on the workers.
    CreateDeployment {
        /// Its name.
        name: String,
        /// Its replicas.
        replicas: i32,
    },
    /// A Pod on the node deleted (`kubectl delete pod`), the first in name order, if any.
    DeletePod(String),
    /// The Lease taken by another holder.
    StealLease(String),
    /// The apiserver answers `error` to a share of the calls of `verbs` for a while.
    ApiFaults {
        /// The verbs.
        verbs: Verbs,
        /// The error.
        error: ApiError,
        /// The share of calls.
        probability: f64,
        /// For how long.
        for_: Duration,
    },
}

impl fmt::Display for Act {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Act::Cordon(n) => write!(f, "cordon {n}"),
            Act::Uncordon(n) => write!(f, "uncordon {n}"),
            Act::Label { node, key, value } => write!(f, "label {node} {key}={value}"),
            Act::Unlabel { node, key } => write!(f, "label {node} {key}-"),
            Act::DeleteNode(n) => write!(f, "delete node {n}"),
            Act::AddNode { name, .. } => write!(f, "add node {name}"),
            Act::Reboot(n) => write!(f, "reboot {n}"),
            Act::Flap { node, down_for } => write!(f, "{node} NotReady for {down_for:?}"),
            Act::ReportVersion { node, version } => write!(f, "{node} reports {version}"),
            Act::CreateBudget {
                name,
                app,
                min_available,
            } => write!(f, "budget {name} over {app}, minAvailable {min_available}"),
            Act::ChangeBudget {
                name,
                min_available,
            } => write!(f, "budget {name} minAvailable {min_available}"),
            Act::DeleteBudget(n) => write!(f, "delete budget {n}"),
            Act::CreateDeployment { name, replicas } => {
                write!(f, "deployment {name} of {replicas}")
            }
            Act::DeletePod(n) => write!(f, "delete a pod on {n}"),
            Act::StealLease(h) => write!(f, "the Lease taken by {h}"),
            Act::ApiFaults {
                verbs,
                error,
                probability,
                for_,
            } => write!(
                f,
                "{:.0}% of {verbs:?} answer {} for {for_:?}",
                probability * 100.0,
                error.code
            ),
        }
    }
}

impl Act {
    /// Does it to `cluster`, now. An act on something gone (a node deleted meanwhile, a
    /// budget never created) does nothing: an actor would get a 404 and move on.
    pub fn apply(&self, cluster: &FakeCluster) {
        let ns = NAMESPACE;
        let _ = match self {
            Act::Cordon(n) => cluster.patch_node_now(n, &[NodeChange::Cordon]).map(drop),
            Act::Uncordon(n) => cluster.patch_node_now(n, &[NodeChange::Uncordon]).map(drop),
            Act::Label { node, key, value } => cluster.label_node(node, key, value).map(drop),
            Act::Unlabel { node, key } => cluster.unlabel_node(node, key).map(drop),
            Act::DeleteNode(n) => cluster.remove_node(n),
            Act::AddNode { name, labels } => cluster.add_node(name).map(|_| {
                for (k, v) in labels {
                    let _ = cluster.label_node(name, k, v);
                }
            }),
            Act::Reboot(n) => cluster.reboot_node(n).map(drop),
            Act::Flap { node, down_for } => cluster.set_node_ready(node, false).map(|()| {
                let node = node.clone();
                let at = nodejob_core::Clock::now(cluster) + *down_for;
                cluster.schedule(at, move |c| {
                    let _ = c.set_node_ready(&node, true);
                });
            }),
            Act::ReportVersion { node, version } => {
                cluster.set_kubelet_version(node, version).map(drop)
            }
            Act::CreateBudget {
                name,
                app,
                min_available,
            } => cluster
                .create_budget_now(&workload::budget(ns, name, app, *min_available))
                .map(drop),
            Act::ChangeBudget {
                name,
                min_available,
            } => cluster
                .set_budget_min_available_now(ns, name, *min_available)
                .map(drop),
            Act::DeleteBudget(n) => cluster.delete_budget_now(ns, n),
            Act::CreateDeployment { name, replicas } => cluster
                .create_deployment_now(&workload::deployment(ns, name, *replicas))
                .map(drop),
            Act::DeletePod(n) => {
                let pods = cluster.pods_on(n);
                match pods.first() {
                    Some(pod) => cluster.delete_pod_now(
                        pod.metadata.namespace.as_deref().unwrap_or_default(),
                        pod.metadata.name.as_deref().unwrap_or_default(),
                    ),
                    None => Ok(()),
                }
            }
            Act::StealLease(holder) => cluster.steal_lease(LEASE.0, LEASE.1, holder).map(drop),
            Act::ApiFaults {
                verbs,
                error,
                probability,
                for_,
            } => {
                cluster.fail_randomly(*verbs, error.clone(), *probability);
                let at = nodejob_core::Clock::now(cluster) + *for_;
                cluster.schedule(at, FakeCluster::clear_faults);
                Ok(())
            }
        };
    }

    /// The node it is about, if any.
    pub fn node(&self) -> Option<&str> {
        match self {
            Act::Cordon(n)
            | Act::Uncordon(n)
            | Act::DeleteNode(n)
            | Act::Reboot(n)
            | Act::DeletePod(n)
            | Act::Label { node: n, .. }
            | Act::Unlabel { node: n, .. }
            | Act::Flap { node: n, .. }
            | Act::ReportVersion { node: n, .. } => Some(n),
            Act::AddNode { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// The workloads the actors create, as an administrator writes them.
mod workload {
    use std::collections::BTreeMap;

    use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
    use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn app(name: &str) -> BTreeMap<String, String> {
        [("app".to_string(), name.to_string())].into()
    }

    fn meta(namespace: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        }
    }

    pub(super) fn deployment(namespace: &str, name: &str, replicas: i32) -> Deployment {
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
                    spec: Some(PodSpec {
                        node_selector: Some(
                            [(super::WORKER.0.to_string(), super::WORKER.1.to_string())].into(),
                        ),
                        containers: vec![Container {
                            name: "app".into(),
                            image: Some("registry.k8s.io/pause:3.10".into()),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                },
                ..DeploymentSpec::default()
            }),
            status: None,
        }
    }

    pub(super) fn budget(
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
}

/// splitmix64: small, deterministic, enough to draw a schedule.
#[derive(Clone, Debug)]
pub struct Draw(u64);

impl Draw {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Draw(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// Uniform in `lo..=hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64 - 1) as usize]
    }
}

/// Acts at virtual times (since the cluster was made), in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct ActorSchedule {
    /// When, and what.
    pub acts: Vec<(Duration, Act)>,
}

/// The transient answers an apiserver gives under load.
const TRANSIENT: &[(u16, &str)] = &[
    (500, "etcdserver: request timed out"),
    (503, "the server is currently unable to handle the request"),
    (
        429,
        "the server has received too many requests and has asked us to try again later",
    ),
];

/// The verbs a driver leans on, for drawn API faults.
const FAULTED: &[Verb] = &[
    Verb::GetNode,
    Verb::ListNodes,
    Verb::WaitNode,
    Verb::PatchNode,
    Verb::CreateJob,
    Verb::GetJob,
    Verb::WaitJob,
    Verb::DeleteJob,
    Verb::ListPods,
    Verb::PodLog,
    Verb::CreateEvent,
    Verb::ListNodePods,
    Verb::EvictPod,
    Verb::GetLease,
    Verb::ReplaceLease,
];

impl ActorSchedule {
    /// `count` acts drawn from `seed` over `cast`, at times in `0..span`.
    pub fn draw(seed: u64, cast: &Cast, span: Duration, count: usize) -> Self {
        let mut rng = Draw::new(seed ^ 0x6163_746f_7273);
        let mut nodes = cast.nodes.clone();
        let mut budgets: Vec<String> = Vec::new();
        let mut deployments: Vec<String> = vec!["web".into()];
        let mut added = 0;
        let mut acts = Vec::new();
        let span_ms = u64::try_from(span.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut times: Vec<Duration> = (0..count).map(|_| rng.millis(0, span_ms)).collect();
        times.sort();
        for at in times {
            let node = rng.pick(&nodes).clone();
            let act = match rng.range(0, 99) {
                0..=9 => Act::Cordon(node),
                10..=21 => Act::Uncordon(node),
                22..=29 => match &cast.selection {
                    Some((key, value)) if rng.chance(0.5) => Act::Label {
                        node,
                        key: key.clone(),
                        value: value.clone(),
                    },
                    Some((key, _)) => Act::Unlabel {
                        node,
                        key: key.clone(),
                    },
                    None => Act::Label {
                        node,
                        key: "team".into(),
                        value: format!("t{}", rng.range(0, 3)),
                    },
                },
                30..=33 => Act::DeleteNode(node),
                34..=38 => {
                    added += 1;
                    let name = format!("joined-{added}");
                    nodes.push(name.clone());
                    let mut labels = vec![(WORKER.0.to_string(), WORKER.1.to_string())];
                    labels.extend(cast.selection.clone());
                    Act::AddNode { name, labels }
                }
                39..=48 => Act::Reboot(node),
                49..=56 => Act::Flap {
                    node,
                    down_for: rng.millis(5_000, 90_000),
                },
                57..=60 => Act::ReportVersion {
                    node,
                    version: rng.pick(&cast.versions).clone(),
                },
                61..=66 => {
                    let name = format!("pdb-{}", budgets.len());
                    budgets.push(name.clone());
                    Act::CreateBudget {
                        name,
                        app: rng.pick(&deployments).clone(),
                        min_available: rng.range(0, 3) as i32,
                    }
                }
                67..=70 if !budgets.is_empty() => Act::ChangeBudget {
                    name: rng.pick(&budgets).clone(),
                    min_available: rng.range(0, 3) as i32,
                },
                71..=74 if !budgets.is_empty() => Act::DeleteBudget(rng.pick(&budgets).clone()),
                75..=79 => {
                    let name = format!("app-{}", deployments.len());
                    deployments.push(name.clone());
                    Act::CreateDeployment {
                        name,
                        replicas: rng.range(1, 4) as i32,
                    }
                }
                80..=87 => Act::DeletePod(node),
                88..=91 => Act::StealLease(format!("other-{}", rng.range(0, 9))),
                92..=99 => {
                    let verbs = if rng.chance(0.2) {
                        Verbs::All
                    } else {
                        Verbs::Only(*rng.pick(FAULTED))
                    };
                    let (code, message) = *rng.pick(TRANSIENT);
                    Act::ApiFaults {
                        verbs,
                        error: ApiError::transient(code, message),
                        probability: rng.range(2, 15) as f64 / 100.0,
                        for_: rng.millis(10_000, 120_000),
                    }
                }
                _ => Act::Reboot(node),
            };
            acts.push((at, act));
        }
        ActorSchedule { acts }
    }

    /// Schedules every act on `cluster` at its time.
    pub fn arm(&self, cluster: &FakeCluster) {
        for (at, act) in &self.acts {
            let act = act.clone();
            cluster.schedule(*at, move |c| act.apply(c));
        }
    }

    /// When the last act (and what it set going: a flap, a fault window) is over.
    pub fn over(&self) -> Duration {
        (self.acts.iter())
            .map(|(at, act)| match act {
                Act::Flap { down_for, .. } => *at + *down_for,
                Act::ApiFaults { for_, .. } => *at + *for_,
                _ => *at,
            })
            .max()
            .unwrap_or_default()
    }

    /// The nodes some act made unavailable or changed by itself (deleted, rebooted, flapped,
    /// cordoned, made to report another version): a check of what the driver took down leaves
    /// them out.
    pub fn touched(&self) -> std::collections::BTreeSet<String> {
        (self.acts.iter())
            .filter(|(_, act)| {
                matches!(
                    act,
                    Act::DeleteNode(_)
                        | Act::AddNode { .. }
                        | Act::Reboot(_)
                        | Act::Flap { .. }
                        | Act::Cordon(_)
                        | Act::Uncordon(_)
                        | Act::ReportVersion { .. }
                )
            })
            .filter_map(|(_, act)| act.node().map(str::to_string))
            .collect()
    }
}

impl fmt::Display for ActorSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (at, act) in &self.acts {
            writeln!(f, "  at {:>8.1}s: {act}", at.as_secs_f64())?;
        }
        Ok(())
    }
}
