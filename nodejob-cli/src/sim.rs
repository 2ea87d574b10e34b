//! `--simulate N`: an in-memory cluster of N nodes (`nodejob-fake`), shaped like a small
//! production one: three control-plane nodes when N >= 3, the workers in two zones, and a
//! Deployment `web` behind a PodDisruptionBudget so the drain has something to do.
//!
//! The fake runs in tokio's paused virtual time, run forward from
//! [`epoch`](crate::virtual_clock::epoch) (Thu 2026-01-01 00:00 UTC) to now
//! ([`default_start`]) or to `--simulate-start`; [`Pacer`] slows it to a watchable pace
//! ([`Speed`]) by holding the (single) runtime thread for real time in proportion to the
//! virtual time that passed between two progress events. Nothing is paced unless a person
//! watches or `--speed` asks for it.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_core::{Clock, JobApi, build};
use nodejob_fake::stratum::Fault;
use nodejob_fake::{FakeCluster, host};

use crate::exit::Exit;
use crate::settings::{RUN_LABEL_KEY, SIMULATED_CA};
pub(crate) use crate::virtual_clock::{Speed, default_start};

/// What a simulated cluster says of itself (the banner): its size, when its virtual clock
/// started, and the speed asked for (`--speed`, if given).
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    /// N, of `--simulate N`.
    pub(crate) nodes: usize,
    /// When its virtual clock started (`--simulate-start`, else [`default_start`]).
    pub(crate) start: jiff::Timestamp,
    /// `--speed`, if given.
    pub(crate) speed: Option<Speed>,
}

/// The label of the simulated workers (the Deployment's node selector).
const WORKER: (&str, &str) = ("node-role.kubernetes.io/worker", "");
const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
const ZONE: &str = "topology.kubernetes.io/zone";

/// What a simulated cluster of `n` nodes is made of, as the banner says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Control-plane nodes.
    pub(crate) control_plane: usize,
    /// Workers.
    pub(crate) workers: usize,
    /// The workers' zones.
    pub(crate) zones: Vec<String>,
}

impl Shape {
    /// The shape of [`cluster`]`(n, ..)`.
    pub(crate) fn of(n: usize) -> Shape {
        let names = node_names(n);
        let control_plane = names.iter().filter(|n| n.starts_with("cp-")).count();
        let workers = names.len() - control_plane;
        let zones = ["zone-a", "zone-b"]
            .into_iter()
            .take(workers.min(2))
            .map(String::from)
            .collect();
        Shape {
            control_plane,
            workers,
            zones,
        }
    }
}

/// The version the simulated history upgrades to.
const HISTORY_VERSION: &str = "v1.38.0";

/// Who the simulated history's drivers say they are on the Lease.
const HISTORY_IDENTITY: &str = "nodejob-simulated-history";

/// The names of a simulated cluster of `n` nodes.
pub(crate) fn node_names(n: usize) -> Vec<String> {
    let control = if n >= 3 { 3 } else { 0 };
    let mut names: Vec<String> = (0..control).map(|i| format!("cp-{i}")).collect();
    names.extend((0..n - control).map(|i| {
        let zone = if i % 2 == 0 { 'a' } else { 'b' };
        format!("worker-{zone}-{}", i / 2)
    }));
    names
}

/// A cluster of `n` nodes; each `(node, fault)` armed on that node's host model.
pub(crate) fn cluster(n: usize, faults: &[(&str, Fault)]) -> anyhow::Result<Arc<FakeCluster>> {
    let fake = FakeCluster::with_seed(1);
    let names = node_names(n);
    for name in &names {
        fake.add_node(name)?;
        if name.starts_with("cp-") {
            fake.label_node(name, CONTROL_PLANE, "")?;
        } else {
            let zone = if name.starts_with("worker-a") {
                "zone-a"
            } else {
                "zone-b"
            };
            fake.label_node(name, ZONE, zone)?;
            fake.label_node(name, WORKER.0, WORKER.1)?;
        }
    }
    for (node, fault) in faults {
        let host = fake
            .host(node)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--simulate-fail {node}: no such simulated node; the nodes are {}",
                    names.join(", ")
                )
            })?
            .with_fault(*fault);
        fake.set_host(node, host)?;
    }
    let workers = names.iter().filter(|n| n.starts_with("worker")).count();
    if let Some((replicas, min_available)) = workload(workers) {
        fake.create_deployment_now(&web(replicas))?;
        if let Some(min_available) = min_available {
            fake.create_budget_now(&budget(min_available))?;
        }
    }
    Ok(Arc::new(fake))
}

/// The simulated workload sized to `workers`: the Deployment `web`'s replicas and, when the
/// workers can meet one, its budget's `minAvailable`. A replica per worker (at least two), at
/// most a tenth of them disrupted at once (at least one), as a budget sized for the cluster
/// would allow: one disruption for ten thousand replicas would hold every batch of a roll at 10%
/// to one drain at a time until the drain timeout. A single worker gets a single replica and no
/// budget,
/// since a budget there could never be met (the drained node's replacement Pod has nowhere else
/// to run) and every drain would wait for its timeout. No worker, no workload.
pub(crate) fn workload(workers: usize) -> Option<(i32, Option<i32>)> {
    match workers {
        0 => None,
        1 => Some((1, None)),
        n => {
            let replicas = i32::try_from(n).unwrap_or(i32::MAX);
            Some((replicas, Some(replicas - (replicas / 10).max(1))))
        }
    }
}

/// The longest one step of [`start_at`]: tokio's timer takes no longer a sleep.
const START_STEP: Duration = Duration::from_secs(365 * 24 * 3600);

/// Runs the idle simulated cluster forward so that its virtual clock reads `start`, a year at
/// a time (in paused time, a jump each, however far); nothing when `start` is not after the
/// clock.
pub(crate) async fn start_at(fake: &FakeCluster, start: jiff::Timestamp) {
    loop {
        let now = fake.wall_time();
        if start <= now {
            return;
        }
        let ahead = now.duration_until(start).unsigned_abs();
        fake.sleep(ahead.min(START_STEP)).await;
    }
}

/// The faults of the simulated history (see [`history`]): the last node's host upgrade and
/// `carotate issue` fail.
pub(crate) fn history_faults(names: &[String]) -> Vec<(&str, Fault)> {
    names
        .last()
        .map(|last| {
            vec![
                (last.as_str(), Fault::UpgradeFails),
                (last.as_str(), Fault::IssueFails),
            ]
        })
        .unwrap_or_default()
}

/// What `jobs --simulate` and `status --simulate` look at, each step run by the real drivers
/// and runner on `fake` (built with [`history_faults`]), in virtual time: an upgrade to
/// [`HISTORY_VERSION`] that fails on the last node (its host Job kept, failed), a rotation to
/// [`SIMULATED_CA`] whose `issue` fails on that node (its Job kept, failed), then a 10-minute
/// host probe started on the first node, still running. `n` is the cluster's size.
pub(crate) async fn history(fake: &FakeCluster, n: usize, namespace: &str) -> Result<(), Exit> {
    let plan_refused = |e: &dyn std::fmt::Display| {
        Exit::usage(format!(
            "--namespace {namespace}: the simulated history cannot run there: {e}"
        ))
    };
    settle(fake).await;
    let mut upgrade = upgrade_driver::PlanSpec::new(HISTORY_VERSION);
    upgrade.namespace = namespace.to_string();
    upgrade.identity = HISTORY_IDENTITY.into();
    let upgrade = upgrade_driver::Plan::build(upgrade).map_err(|e| plan_refused(&e))?;
    upgrade_driver::run(fake, &upgrade, upgrade_driver::quiet())
        .await
        .map_err(|e| Exit::failed(format!("the simulated upgrade: {e}")))?;

    let fingerprint = certs_driver::Fingerprint::of_pem(SIMULATED_CA)
        .map_err(|e| Exit::failed(format!("the simulated CA: {e}")))?;
    let mut rotation = certs_driver::PlanSpec::new(SIMULATED_CA, fingerprint.as_str());
    rotation.namespace = namespace.to_string();
    rotation.identity = HISTORY_IDENTITY.into();
    let rotation = certs_driver::Plan::build(rotation).map_err(|e| plan_refused(&e))?;
    certs_driver::run(fake, &rotation, certs_driver::quiet())
        .await
        .map_err(|e| Exit::failed(format!("the simulated CA rotation: {e}")))?;

    if let Some(first) = node_names(n).first() {
        let probe = nodejob_core::Spec {
            namespace: namespace.to_string(),
            name: nodejob_core::trunc_name(&format!("nodejob-run-{first}")),
            node: first.clone(),
            label_key: RUN_LABEL_KEY.into(),
            container: "run".into(),
            argv: vec![
                "/usr/local/bin/probe".into(),
                host::run(Duration::from_secs(600)),
            ],
            active_deadline: Duration::from_secs(3600),
            poll_attempts: 13,
            kind: "node".into(),
            critical: false,
            image: None,
            output: None,
        };
        fake.create_job(&build(&probe))
            .await
            .map_err(|e| Exit::failed(format!("the simulated probe: {e}")))?;
        // Its Pod scheduled and its container started.
        fake.sleep(Duration::from_secs(5)).await;
    }
    Ok(())
}

/// Stages `plan`'s CA on every node: a rotation stopped as its `issue` phase begins (the
/// event `issue_begins` tells), so that `rotate-ca --abort --simulate` has a staged CA to
/// remove.
pub(crate) async fn stage(
    fake: &FakeCluster,
    plan: &certs_driver::Plan,
    issue_begins: fn(&certs_driver::Progress) -> bool,
) -> Result<(), Exit> {
    let stop = certs_driver::Stop::new();
    let at_issue = stop.clone();
    let sink = Arc::new(move |event: &certs_driver::Progress| {
        if issue_begins(event) {
            at_issue.request();
        }
    });
    certs_driver::run_until(fake, plan, sink, &stop)
        .await
        .map_err(|e| Exit::failed(format!("staging the simulated cluster: {e}")))?;
    Ok(())
}

/// The writes among `fake`'s recorded API calls from the `since`-th on, each as `verb name`.
pub(crate) fn writes_since(fake: &FakeCluster, since: usize) -> Vec<String> {
    fake.calls()
        .into_iter()
        .skip(since)
        .filter(|c| c.verb.writes())
        .map(|c| format!("{} {}", c.verb.method(), c.name))
        .collect()
}

/// The Deployment (and its budget) `--simulate-undrainable` pins to a node; `pinned-NODE`
/// for each node when it names several.
const UNDRAINABLE: &str = "pinned";

/// `--simulate-undrainable NODES`: for each node, one replica of a Deployment `pinned` (of
/// `pinned-NODE` when there are several) that only that node can run (its node selector names
/// it by `kubernetes.io/hostname`), behind a budget whose `minAvailable` is 1, so that it never
/// allows a disruption and the node's drain is blocked; then the cluster settles so that they
/// run.
pub(crate) async fn undrainable(fake: &FakeCluster, nodes: &[String]) -> Result<(), Exit> {
    for node in nodes {
        let name = match nodes.len() {
            1 => UNDRAINABLE.to_string(),
            _ => format!("{UNDRAINABLE}-{node}"),
        };
        let labels = BTreeMap::from([("app".to_string(), name.clone())]);
        let mut deployment = web(1);
        deployment.metadata.name = Some(name.clone());
        if let Some(spec) = deployment.spec.as_mut() {
            spec.selector.match_labels = Some(labels.clone());
            if let Some(meta) = spec.template.metadata.as_mut() {
                meta.labels = Some(labels.clone());
            }
            if let Some(pod) = spec.template.spec.as_mut() {
                pod.node_selector = Some(BTreeMap::from([(
                    "kubernetes.io/hostname".to_string(),
                    node.to_string(),
                )]));
            }
        }
        let mut pdb = budget(1);
        pdb.metadata.name = Some(name);
        if let Some(spec) = pdb.spec.as_mut() {
            spec.selector = Some(LabelSelector {
                match_labels: Some(labels),
                ..LabelSelector::default()
            });
        }
        let failed =
            |e: nodejob_core::ApiError| Exit::failed(format!("--simulate-undrainable {node}: {e}"));
        fake.create_deployment_now(&deployment).map_err(failed)?;
        fake.create_budget_now(&pdb).map_err(failed)?;
    }
    settle(fake).await;
    Ok(())
}

/// `--simulate-soak-reboot NODE`: the progress of a simulated upgrade passed on to `inner`,
/// and, once `node` is told soaking, that node's host reboots by itself 90 s later (a new
/// boot ID, as [`FakeCluster::reboot_node`]), so that its soak fails.
pub(crate) struct RebootInSoak<S: ?Sized> {
    fake: Arc<FakeCluster>,
    node: String,
    armed: std::sync::atomic::AtomicBool,
    inner: Arc<S>,
}

impl<S: ?Sized> RebootInSoak<S> {
    /// Reboots `node` once into its soak, passing every event on to `inner`.
    pub(crate) fn new(fake: Arc<FakeCluster>, node: &str, inner: Arc<S>) -> Self {
        RebootInSoak {
            fake,
            node: node.to_string(),
            armed: std::sync::atomic::AtomicBool::new(true),
            inner,
        }
    }
}

impl<S> upgrade_driver::EventSink<upgrade_driver::Progress> for RebootInSoak<S>
where
    S: upgrade_driver::EventSink<upgrade_driver::Progress> + ?Sized,
{
    fn event(&self, event: &upgrade_driver::Progress) {
        if let upgrade_driver::Progress::Driver(upgrade_driver::UpgradeEvent::Soaking {
            node, ..
        }) = event
            && *node == self.node
            && self.armed.swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            let node = node.clone();
            let at = self.fake.now() + Duration::from_secs(90);
            self.fake.schedule(at, move |c| {
                let _ = c.reboot_node(&node);
            });
        }
        self.inner.event(event);
    }
}

/// `--simulate-pause NODE`: the progress of a simulated run passed on to `inner`, and, once
/// `node`'s `step` starts (the upgrade's drain, the rotation's issue), an operator pauses the
/// rolls (`nodejob pause`, on the Lease of `namespace`) and resumes them 5 minutes later.
pub(crate) struct PauseAtStep<S: ?Sized, T> {
    fake: Arc<FakeCluster>,
    namespace: String,
    lease: String,
    node: String,
    step: T,
    armed: std::sync::atomic::AtomicBool,
    inner: Arc<S>,
}

impl<S: ?Sized, T> PauseAtStep<S, T> {
    /// Pauses once, as `node`'s `step` starts, passing every event on to `inner`.
    pub(crate) fn new(
        fake: Arc<FakeCluster>,
        (namespace, lease): (&str, &str),
        (node, step): (&str, T),
        inner: Arc<S>,
    ) -> Self {
        PauseAtStep {
            fake,
            namespace: namespace.to_string(),
            lease: lease.to_string(),
            node: node.to_string(),
            step,
            armed: std::sync::atomic::AtomicBool::new(true),
            inner,
        }
    }
}

impl<S, T, R, E> nodejob_roll::EventSink<nodejob_roll::Progress<T, R, E>> for PauseAtStep<S, T>
where
    S: nodejob_roll::EventSink<nodejob_roll::Progress<T, R, E>> + ?Sized,
    T: PartialEq + Send + Sync,
{
    fn event(&self, event: &nodejob_roll::Progress<T, R, E>) {
        self.inner.event(event);
        if let nodejob_roll::Progress::StepStarted { node, step } = event
            && *node == self.node
            && *step == self.step
            && self.armed.swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            let (fake, namespace) = (self.fake.clone(), self.namespace.clone());
            let lease = self.lease.clone();
            tokio::spawn(async move {
                use nodejob_core::pause::{Pause, set_pause};
                let pause = Pause {
                    by: "operator@console (simulated)".into(),
                    at: Some(fake.wall_time()),
                    reason: "the storage team is failing over".into(),
                };
                let _ = set_pause(&*fake, &namespace, &lease, Some(&pause)).await;
                fake.sleep(Duration::from_secs(300)).await;
                let _ = set_pause(&*fake, &namespace, &lease, None).await;
            });
        }
    }
}

/// Lets the simulated workloads start (their pods scheduled and Ready) before a run.
pub(crate) async fn settle(fake: &FakeCluster) {
    fake.sleep(Duration::from_secs(30)).await;
}

fn app() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), "web".to_string())])
}

fn web(replicas: i32) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(app()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some("registry.k8s.io/pause:3.10".into()),
                        ..Container::default()
                    }],
                    node_selector: Some(BTreeMap::from([(
                        WORKER.0.to_string(),
                        WORKER.1.to_string(),
                    )])),
                    termination_grace_period_seconds: Some(5),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

fn budget(min_available: i32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(min_available)),
            selector: Some(LabelSelector {
                match_labels: Some(app()),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

/// Holds real time in proportion to the virtual time since its last call: `times` virtual
/// seconds per real second, at most half a second at once.
pub(crate) struct Pacer {
    fake: Arc<FakeCluster>,
    times: NonZeroU32,
    last: Mutex<(Duration, Instant)>,
}

impl Pacer {
    /// A pacer for `fake`'s clock at `speed`; none at [`Speed::Max`].
    pub(crate) fn new(fake: Arc<FakeCluster>, speed: Speed) -> Option<Self> {
        let Speed::Times(times) = speed else {
            return None;
        };
        let now = fake.now();
        Some(Pacer {
            fake,
            times,
            last: Mutex::new((now, Instant::now())),
        })
    }

    /// Called before showing an event: waits until the real time has caught up.
    pub(crate) fn pace(&self) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let virtual_now = self.fake.now();
        let wait = wait(
            virtual_now.saturating_sub(last.0),
            last.1.elapsed(),
            self.times,
        );
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        *last = (virtual_now, Instant::now());
    }
}

/// How long to wait before showing an event `virtual_elapsed` of virtual time after the last
/// one, `spent` of real time having passed since, at `times` virtual seconds a real second:
/// the whole rest, uncapped, so `--speed 1` is real time. (Every event is paced, the Lease's
/// renewals every few virtual seconds among them, so a Ctrl-C is seen within one.)
fn wait(virtual_elapsed: Duration, spent: Duration, times: NonZeroU32) -> Duration {
    (virtual_elapsed / times.get()).saturating_sub(spent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica per worker; its budget allows a tenth of them down, one at least, and no
    /// budget a single worker could never meet.
    #[test]
    fn the_workload_allows_a_tenth_of_its_replicas_down() {
        // workers -> (replicas, minAvailable)
        let table = [
            (0, None),
            (1, Some((1, None))),
            (2, Some((2, Some(1)))),
            (19, Some((19, Some(18)))),
            (20, Some((20, Some(18)))),
            (4_997, Some((4_997, Some(4_498)))),
            (9_997, Some((9_997, Some(8_998)))),
        ];
        for (workers, want) in table {
            assert_eq!(workload(workers), want, "{workers} workers");
        }
    }

    /// `--speed N` shows N virtual seconds a real second, at 1 too: the wait before an event
    /// is the whole virtual gap over N, less the real time already spent, never capped.
    #[test]
    fn a_speed_of_one_is_real_time() {
        let times = |t| NonZeroU32::new(t).unwrap();
        let s = Duration::from_secs;
        assert_eq!(wait(s(60), Duration::ZERO, times(1)), s(60));
        assert_eq!(wait(s(60), s(20), times(1)), s(40));
        assert_eq!(wait(s(600), Duration::ZERO, times(100)), s(6));
        assert_eq!(wait(s(600), s(7), times(100)), Duration::ZERO);
    }
}
