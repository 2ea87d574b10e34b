//! The upgrade under hostile actors on a real control plane: the promises that
//! `upgrade-driver/tests/hostile.rs` proves on the fake (items 1, 2 and 5 of the hostile-actors
//! issue), with [`upgrade_driver::run`] acting as the ServiceAccount of `deploy/rbac.yaml` on
//! nodes of the scenario's own, whose kubelet and host `nodejob-node-agent` plays, or real ones
//! ([`Kubelets`]; every test runs on both, `NOT_ON_REAL_NODES` is empty). Each
//! drain is asserted by the apiserver's audit log ([`Drains`]). Run by `e2e/run`.
//!
//! The other actors act through the real API as an administrator, a client of their own: a
//! person cordons and uncordons a Node, a Node is deleted, the scheduler and the ReplicaSet
//! controller place replacements, the pod garbage collector fails the Pods of a deleted Node,
//! and a host reboots by itself (the agent's `nodejob.test/reboot` annotation, a real node's
//! power cut: [`SelfReboot`](nodejob_e2e::SelfReboot)). They are staged at the right moment by
//! [`Interposed`] (an action run before the driver's n-th call of a verb) or by what the driver
//! reports, and the driver crashes where [`Crashing`] stops it. What ran on a host is what its
//! `stratum` model reports ([`ThreeNodes::host`]), not what the driver says.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
use nodejob_conformance::workloads::{APP_LABEL, budget, deployment};
use nodejob_conformance::{Backend, Crashing, Failure, Interposed, Object, Workloads, ensure};
use nodejob_core::{Clock, Verb};
use nodejob_e2e::{
    Drains, Kubelets, SA_NAME, SA_NAMESPACE, SelfReboot, ThreeNodes, Workers, boot_id,
    deployment_available, set_unschedulable, unique,
};
use nodejob_kube::KubeApi;
use tokio::sync::watch;
use upgrade_driver::records::{self, IN_PROGRESS, InProgress};
use upgrade_driver::{Failure as StepFailure, UpgradeStep};
use upgrade_driver::{
    NodeResult, Outcome, Plan, PlanSpec, Progress, ProgressSink, Report, VersionSource,
};

nodejob_e2e::on_kubelets! {
    source: include_str!("hostile.rs");
    both:
        an_uncordon_during_the_drain_lands_no_pod_and_is_cordoned_again_before_the_host_job,
        an_uncordon_right_before_the_host_job_lands_no_pod_before_the_node_is_back,
        a_node_rebooting_by_itself_during_the_drain_is_upgraded_without_a_false_failure,
        a_node_rebooting_during_the_drain_then_a_crash_before_the_host_job_is_upgraded_by_the_rerun,
        a_node_deleted_while_its_host_job_runs_ends_its_step_when_the_pod_gc_fails_the_pod,
        a_node_deleted_while_it_reboots_ends_its_step_within_seconds;
    agent_only: ;
    no_nodes: ;
}

/// The version the nodes are upgraded to: not the agent's (the apiserver's).
const TARGET: &str = "v1.99.0";
/// The Deployment whose replica sits on the node upgraded.
const APP: &str = "web";
/// How long the workloads may take to settle before a roll.
const SETTLE: Duration = Duration::from_secs(120);
/// How long an actor may wait for what it waits for (a replacement scheduled, a reboot, the
/// driver at a step).
const ACTOR: Duration = Duration::from_secs(90);
/// How long one run of the driver may take before the test gives up on it.
const RUN: Duration = Duration::from_secs(300);

fn fail(what: impl std::fmt::Display) -> impl FnOnce(kube::Error) -> Failure {
    move |e| Failure(format!("{what}: {e}"))
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

// --- what the driver reports, and when ---------------------------------------------------------

/// What a driver reports, each event with the backend's time ([`Clock::now`] of the driver's
/// own API) as it was reported: printed as it comes, kept in order, and awaitable.
#[derive(Clone)]
struct Timeline {
    api: Arc<KubeApi>,
    seen: Arc<watch::Sender<Vec<(Duration, Progress)>>>,
    prefix: &'static str,
}

impl Timeline {
    fn new(api: Arc<KubeApi>, prefix: &'static str) -> Self {
        Timeline {
            api,
            seen: Arc::new(watch::channel(Vec::new()).0),
            prefix,
        }
    }

    fn sink(&self) -> Arc<dyn ProgressSink> {
        let this = self.clone();
        Arc::new(move |p: &Progress| {
            let at = this.api.now();
            let line = serde_json::to_string(p).unwrap_or_else(|_| format!("{p:?}"));
            let now = k8s_openapi::jiff::Timestamp::now();
            eprintln!("{now} {} at {}: {line}", this.prefix, secs(at));
            this.seen.send_modify(|v| v.push((at, p.clone())));
        })
    }

    fn events(&self) -> Vec<(Duration, Progress)> {
        self.seen.borrow().clone()
    }

    /// The time of the first event `want` holds of, once reported (at most `limit`).
    async fn reported(
        &self,
        what: &str,
        limit: Duration,
        want: impl Fn(&Progress) -> bool,
    ) -> Result<Duration, Failure> {
        let mut seen = self.seen.subscribe();
        let first = |v: &[(Duration, Progress)]| v.iter().find(|(_, p)| want(p)).map(|(t, _)| *t);
        let waiting = seen.wait_for(|v| first(v).is_some());
        match tokio::time::timeout(limit, waiting).await {
            Ok(Ok(v)) => first(&v).ok_or_else(|| Failure(format!("{what}: lost"))),
            Ok(Err(_)) => Err(Failure(format!("{what}: the progress log is gone"))),
            Err(_) => Err(Failure(format!("{what} not reported after {limit:?}"))),
        }
    }

    /// When node `node` ended, and how.
    fn finished(&self, node: &str) -> Option<(Duration, NodeResult)> {
        self.events().into_iter().find_map(|(at, p)| match p {
            Progress::NodeFinished {
                node: n, result, ..
            } if n == node => Some((at, result)),
            _ => None,
        })
    }

    fn notes(&self) -> Vec<String> {
        (self.events().into_iter())
            .filter_map(|(_, p)| match p {
                Progress::Note { message, .. } => Some(message),
                _ => None,
            })
            .collect()
    }
}

fn step_started(node: &str, step: UpgradeStep) -> impl Fn(&Progress) -> bool + '_ {
    move |p| matches!(p, Progress::StepStarted { node: n, step: s } if n == node && *s == step)
}

// --- the other actors ---------------------------------------------------------------------------

/// What the other actors did (with the backend's time) and what went wrong for them: an action
/// staged before a driver's call cannot fail that call, so the test checks this after the run.
#[derive(Default)]
struct Actors {
    done: Mutex<Vec<(Duration, &'static str, String)>>,
    failed: Mutex<Vec<String>>,
}

impl Actors {
    /// What action `what` answered, if it ran and succeeded.
    fn did(&self, what: &str) -> Option<String> {
        let done = self.done.lock().unwrap();
        done.iter()
            .find(|(_, w, _)| *w == what)
            .map(|(_, _, d)| d.clone())
    }

    /// Every action named in `expected` ran, and none failed.
    fn check(&self, expected: &[&str]) -> Result<(), Failure> {
        let failed = self.failed.lock().unwrap().clone();
        ensure!(failed.is_empty(), "staged actions failed: {failed:?}");
        for what in expected {
            ensure!(
                self.did(what).is_some(),
                "the staged action {what:?} never ran: {:?}",
                self.done.lock().unwrap()
            );
        }
        Ok(())
    }
}

/// Runs `act` (another actor's action, as an administrator) right before the driver's
/// `(skip + 1)`-th call of `verb` is served, and keeps what it answered under `what`.
fn stage<F, Fut>(
    api: &Interposed<KubeApi>,
    verb: Verb,
    skip: usize,
    actors: &Arc<Actors>,
    what: &'static str,
    act: F,
) where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<String, Failure>> + Send + 'static,
{
    let actors = actors.clone();
    api.before(verb, skip, move |inner: Arc<KubeApi>| {
        async move {
            let answer = act().await;
            let at = inner.now();
            match answer {
                Ok(detail) => {
                    eprintln!("actor at {}: {what}: {detail}", secs(at));
                    actors.done.lock().unwrap().push((at, what, detail));
                }
                Err(Failure(e)) => {
                    eprintln!("actor at {}: {what} failed: {e}", secs(at));
                    actors.failed.lock().unwrap().push(format!("{what}: {e}"));
                }
            }
        }
        .boxed()
    });
}

/// Whether `pod` would be evicted by a drain: not ended, not being deleted, not a DaemonSet's,
/// not a Job's (a host Job itself).
fn evictable(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let owned_by = |kind: &str| {
        (pod.metadata.owner_references.iter().flatten())
            .any(|o| o.kind == kind && o.controller == Some(true))
    };
    pod.metadata.deletion_timestamp.is_none()
        && !matches!(phase, Some("Succeeded" | "Failed"))
        && !owned_by("DaemonSet")
        && !owned_by("Job")
}

fn key(pod: &Pod) -> String {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    format!("{ns}/{}", pod.metadata.name.as_deref().unwrap_or_default())
}

/// The Pods on `node` a drain would evict, as `namespace/name`, read as an administrator.
async fn evictable_on(admin: &Client, node: &str) -> Result<Vec<String>, Failure> {
    let pods = Api::<Pod>::all(admin.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(fail(format!("listing the pods on {node}")))?;
    Ok(pods
        .items
        .iter()
        .filter(|p| evictable(p))
        .map(key)
        .collect())
}

/// Waits (at most `limit`) until a Pod that `config` selects and `want` holds of is seen.
async fn pod_seen(
    api: Api<Pod>,
    config: watcher::Config,
    what: &str,
    limit: Duration,
    want: impl Fn(&Pod) -> bool,
) -> Result<Pod, Failure> {
    let found = async {
        let mut stream = std::pin::pin!(watcher::watcher(api, config).default_backoff());
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) if want(&p) => {
                    return Ok(p);
                }
                Ok(_) => {}
                Err(e) => eprintln!("watching pods for {what}: {e}"),
            }
        }
        Err(Failure(format!("the watch for {what} ended")))
    };
    tokio::time::timeout(limit, found)
        .await
        .map_err(|_| Failure(format!("{what} not seen after {limit:?}")))?
}

/// Waits until a replica of [`APP`] other than `before` (`namespace/name`) is bound to
/// `node` and not being deleted: the scheduler put a replacement there. Answers it.
async fn replacement_landed(
    admin: Client,
    namespace: String,
    node: String,
    before: String,
) -> Result<String, Failure> {
    let config = watcher::Config::default().labels(&format!("{APP_LABEL}={APP}"));
    let what = format!("a replacement of {before} on {node}");
    let pod = pod_seen(
        Api::namespaced(admin, &namespace),
        config,
        &what,
        ACTOR,
        |p| {
            let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node.as_str());
            on && key(p) != before && p.metadata.deletion_timestamp.is_none()
        },
    )
    .await?;
    Ok(key(&pod))
}

/// What the cluster looked like right before the driver's first host Job was created:
/// whether the node was cordoned, and the Pods on it a drain would evict.
type AtHostJob = Arc<Mutex<Option<(bool, Vec<String>)>>>;

/// Reads `node` as an administrator right before the driver's first `create_job`.
fn check_at_host_job(
    api: &Interposed<KubeApi>,
    actors: &Arc<Actors>,
    admin: &Client,
    node: &str,
) -> AtHostJob {
    let seen: AtHostJob = Arc::default();
    let (out, admin, node) = (seen.clone(), admin.clone(), node.to_string());
    stage(
        api,
        Verb::CreateJob,
        0,
        actors,
        "at the host job",
        move || async move {
            let read = Api::<Node>::all(admin.clone())
                .get(&node)
                .await
                .map_err(fail(format!("reading node {node}")))?;
            let cordoned = records::unschedulable(&read);
            let pods = evictable_on(&admin, &node).await?;
            let detail = format!("cordoned {cordoned}, evictable pods {pods:?}");
            *out.lock().unwrap() = Some((cordoned, pods));
            Ok(detail)
        },
    );
    seen
}

// --- the scenarios' cluster -----------------------------------------------------------------------

/// The fake's `one_place` on the real cluster: three nodes of the scenario's own, of which only
/// `target` (a worker) is schedulable (someone else cordoned the others), and one replica of
/// Deployment [`APP`] on it with nowhere else to go, so a replacement lands on `target`
/// whenever it is schedulable; a budget over it with `minAvailable` 0 (the drain may take it),
/// which [`Drains`] reads.
struct OnePlace {
    trio: ThreeNodes,
    target: String,
    /// The replica on `target` before the roll, `namespace/name`.
    replica: String,
}

async fn one_place(kubelets: Kubelets) -> Result<OnePlace, Failure> {
    let trio = ThreeNodes::of(kubelets, Workers::Unzoned).await?;
    let target = trio.names[1].clone();
    for other in [&trio.names[0], &trio.names[2]] {
        set_unschedulable(&trio.admin, other, true).await?;
    }
    let web = deployment(&trio.namespace, APP, 1, &trio.label);
    trio.backend
        .create(Object::Deployment(Box::new(web)))
        .await?;
    let pdb = budget(&trio.namespace, APP, APP, 0);
    trio.backend.create(Object::Budget(Box::new(pdb))).await?;
    deployment_available(
        &trio.admin,
        &trio.namespace,
        APP,
        1,
        SETTLE,
        "before the roll",
    )
    .await?;
    let on_target = evictable_on(&trio.admin, &target).await?;
    ensure!(
        on_target.len() == 1,
        "the one replica of {APP} must run on {target}: {on_target:?}"
    );
    let replica = on_target[0].clone();
    Ok(OnePlace {
        trio,
        target,
        replica,
    })
}

/// Where a roll on `trio` reads the version: the agent's kubelet moves, a real node's
/// `osImage` does.
fn source(trio: &ThreeNodes) -> VersionSource {
    match trio.kubelets() {
        Kubelets::Agent => VersionSource::KubeletVersion,
        Kubelets::Real => VersionSource::OsImage,
    }
}

/// Checks `drains` of the roll of `node` alone ([`Drains::check`]): the budget of
/// [`one_place`] keeps none.
fn drained(drains: Drains, node: &str) -> Result<(), Failure> {
    let sa = format!("system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}");
    let drained = drains.check(&[node.to_string()], 0, &sa)?;
    eprintln!("hostile: drained {drained:?}");
    Ok(())
}

/// A plan for node `node` of `trio` alone, its bounds well above what the quick hosts take.
fn plan_for(
    trio: &ThreeNodes,
    node: &str,
    tweak: impl FnOnce(&mut PlanSpec),
) -> Result<Plan, Failure> {
    let mut spec = PlanSpec::new(TARGET);
    spec.version_source = source(trio);
    spec.nodes = vec![node.to_string()];
    spec.namespace = SA_NAMESPACE.into();
    spec.lease_name = unique("hostile-e2e");
    spec.identity = unique("hostile-e2e-driver");
    spec.drain.timeout = Duration::from_secs(60);
    spec.reboot_timeout = Duration::from_secs(60);
    spec.deadline = Duration::from_secs(120);
    spec.lease_duration = Duration::from_secs(15);
    // The agent's kubelets go to a release the apiserver is not at: past the version skew
    // policy, as asked (the gate's refusal has its own test, `tests/long_rolls.rs`).
    spec.skew = upgrade_driver::Skew::Allow;
    tweak(&mut spec);
    Plan::build(spec).map_err(|e| Failure(e.to_string()))
}

/// One run of the driver through `api`, at most [`RUN`].
async fn run<A>(api: &A, plan: &Plan, timeline: &Timeline) -> Result<Report, Failure>
where
    A: nodejob_core::JobApi + nodejob_core::NodeApi + nodejob_core::PodApi + nodejob_core::LeaseApi,
{
    let running = upgrade_driver::run(api, plan, timeline.sink());
    match tokio::time::timeout(RUN, running).await {
        Ok(Ok(report)) => Ok(report),
        Ok(Err(e)) => Err(Failure(format!("the upgrade did not start: {e}"))),
        Err(_) => Err(Failure(format!("the upgrade did not end within {RUN:?}"))),
    }
}

fn node_result(report: &Report, node: &str) -> Result<NodeResult, Failure> {
    (report.node(node).and_then(|n| n.result.clone()))
        .ok_or_else(|| Failure(format!("{node} has no result: {report:#?}")))
}

async fn read_node(admin: &Client, node: &str) -> Result<Node, Failure> {
    Api::<Node>::all(admin.clone())
        .get(node)
        .await
        .map_err(fail(format!("reading node {node}")))
}

/// How many times `stratum upgrade` ran on `node`'s host, as its host model counts.
async fn upgrades(trio: &ThreeNodes, node: &str) -> Result<u32, Failure> {
    Ok(trio.host(node).await?.executions("upgrade"))
}

/// After a roll that upgraded `node`: it reports [`TARGET`], is schedulable, Ready, and holds no
/// in-flight record; its host ran exactly one upgrade.
async fn upgraded_once(trio: &ThreeNodes, node: &str) -> Result<Node, Failure> {
    let read = read_node(&trio.admin, node).await?;
    let version = upgrade_driver::version::version(&read, &source(trio));
    ensure!(version == Some(TARGET), "node {node} reports {version:?}");
    ensure!(nodejob_core::ready(&read), "node {node} is not Ready");
    ensure!(
        !records::unschedulable(&read),
        "node {node} is left cordoned"
    );
    let record = records::read::<InProgress>(&read, IN_PROGRESS).map_err(Failure)?;
    ensure!(record.is_none(), "node {node} keeps {record:?}");
    let host = trio.host(node).await?;
    ensure!(
        host.executions("upgrade") == 1,
        "node {node}'s host ran the upgrade {} times: {host:?}",
        host.executions("upgrade")
    );
    Ok(read)
}

// --- one driver at a time, and what a scenario leaves ---------------------------------------------

/// Runs `scenario` (a roll of `trio`'s nodes) while no other scenario of this binary runs a
/// driver, then removes whatever it left: see [`clean_up`].
async fn alone(
    trio: &ThreeNodes,
    job: String,
    scenario: impl Future<Output = Result<(), Failure>>,
) -> Result<(), Failure> {
    let one = nodejob_e2e::one_driver().await;
    let result = scenario.await;
    clean_up(trio, &job).await;
    drop(one);
    result
}

/// Removes what a scenario made that a later driver (here, or in `tests/upgrade.rs` and
/// `tests/cli.rs`) could take up or trip on, whether it passed or not: its Nodes (with whatever
/// records a failed roll left on them; a driver carries on any node left in flight), its
/// namespace, and host Job `job` if it is left. The agent releases a deleted Node; the pod
/// garbage collector removes its Pods. Best effort: what cannot be removed is said.
async fn clean_up(trio: &ThreeNodes, job: &str) {
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
    let mut left = Vec::new();
    let nodes = Api::<Node>::all(trio.admin.clone());
    for name in &trio.names {
        if let Err(e) = nodes.delete(name, &DeleteParams::default()).await
            && !gone(&e)
        {
            left.push(format!("node {name}: {e}"));
        }
    }
    let jobs = Api::<Job>::namespaced(trio.admin.clone(), SA_NAMESPACE);
    if let Err(e) = jobs.delete(job, &DeleteParams::background()).await
        && !gone(&e)
    {
        left.push(format!("job {job}: {e}"));
    }
    let namespaces = Api::<Namespace>::all(trio.admin.clone());
    if let Err(e) = namespaces
        .delete(&trio.namespace, &DeleteParams::background())
        .await
        && !gone(&e)
    {
        left.push(format!("namespace {}: {e}", trio.namespace));
    }
    if !left.is_empty() {
        eprintln!("clean-up left: {left:?}");
    }
}
// --- 1. a person uncordons the node while it is drained -------------------------------------

/// The replicas of [`APP`] other than `before` (the one there before the roll) seen bound to
/// `node` while it still carried our in-progress record (read as an administrator as each is
/// seen), `namespace/name`: workload Pods a host operation could kill. A watch kept until the
/// returned sender is dropped.
fn landings_while_ours(
    admin: &Client,
    namespace: &str,
    node: &str,
    before: &str,
) -> (Arc<Mutex<Vec<String>>>, tokio::sync::oneshot::Sender<()>) {
    let landed: Arc<Mutex<Vec<String>>> = Arc::default();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (admin, namespace, node, before, out) = (
        admin.clone(),
        namespace.to_string(),
        node.to_string(),
        before.to_string(),
        landed.clone(),
    );
    tokio::spawn(async move {
        let config = watcher::Config::default().labels(&format!("{APP_LABEL}={APP}"));
        let pods = Api::<Pod>::namespaced(admin.clone(), &namespace);
        let watching = async {
            let mut stream = std::pin::pin!(watcher::watcher(pods, config).default_backoff());
            while let Some(event) = stream.next().await {
                let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = event else {
                    continue;
                };
                let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&node);
                if !on || !evictable(&p) || key(&p) == before {
                    continue;
                }
                let ours = (Api::<Node>::all(admin.clone()).get(&node).await.ok())
                    .and_then(|n| records::read::<InProgress>(&n, IN_PROGRESS).ok().flatten())
                    .is_some();
                if ours {
                    eprintln!("{} landed on {node} while it was ours", key(&p));
                    out.lock().unwrap().push(key(&p));
                }
            }
        };
        tokio::select! {
            _ = watching => {}
            _ = stopped => {}
        }
    });
    (landed, stop)
}

/// Checks a roll of `place.target` in which a person uncordoned it mid-roll: the host Job was
/// created on the node cordoned with no evictable Pod; no replica of [`APP`] landed on it while
/// it was ours (our taint kept the Pending replacement off it, whoever uncordoned it); the
/// drain evicted the one replica; the node upgraded once and left schedulable, untainted.
async fn fenced_through_the_uncordon(
    place: &OnePlace,
    report: &Report,
    at_host_job: &AtHostJob,
    landed: &Arc<Mutex<Vec<String>>>,
) -> Result<(), Failure> {
    let target = place.target.as_str();
    ensure!(report.outcome == Outcome::Done, "{report:#?}");
    ensure!(
        node_result(report, target)? == NodeResult::Upgraded,
        "{report:#?}"
    );
    let seen = at_host_job.lock().unwrap().clone();
    let Some((cordoned, evictable)) = seen else {
        return Err(Failure("no host job was created".into()));
    };
    ensure!(
        evictable.is_empty(),
        "evictable pods at the host job: {evictable:?}"
    );
    let landed = landed.lock().unwrap().clone();
    ensure!(
        landed.is_empty(),
        "replicas landed on {target} while it was ours: {landed:?}"
    );
    let evicted = &report
        .node(target)
        .map(|n| n.pods_evicted.clone())
        .unwrap_or_default();
    ensure!(
        evicted == std::slice::from_ref(&place.replica),
        "the drain evicts {} alone, its replacement never there: {evicted:?}",
        place.replica
    );
    let node = upgraded_once(&place.trio, target).await?;
    ensure!(
        !nodejob_core::tainted_no_schedule(&node, records::FENCE_TAINT),
        "node {target} keeps our taint: {:?}",
        node.spec
    );
    eprintln!("at the host job {target} was cordoned: {cordoned}");
    Ok(())
}

/// A person uncordons the node right before the drain's first eviction: the evicted replica's
/// replacement does not land on it (our taint, put on with the cordon, keeps it off), the
/// driver sees the uncordon and cordons it again before its host Job.
async fn an_uncordon_during_the_drain_lands_no_pod_and_is_cordoned_again_before_the_host_job(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let place = one_place(kubelets).await?;
    let (admin, target) = (place.trio.admin.clone(), place.target.clone());
    let plan = plan_for(&place.trio, &target, |_| {})?;
    let drains = Drains::watch(&admin, &place.trio.namespace, APP).await?;
    alone(&place.trio, plan.job_name(&target), async {
        let kube = place.trio.backend.api();
        let api = Interposed::new(kube.clone());
        let actors = Arc::new(Actors::default());
        let (a, t) = (admin.clone(), target.clone());
        stage(
            &api,
            Verb::EvictPod,
            0,
            &actors,
            "uncordon",
            move || async move {
                set_unschedulable(&a, &t, false).await?;
                Ok(format!("{t} uncordoned"))
            },
        );
        let at_host_job = check_at_host_job(&api, &actors, &admin, &target);
        let (landed, watching) =
            landings_while_ours(&admin, &place.trio.namespace, &target, &place.replica);
        let timeline = Timeline::new(kube, "hostile uncordon-during-drain");

        let report = run(&api, &plan, &timeline).await?;
        drop(watching);

        actors.check(&["uncordon", "at the host job"])?;
        let seen = at_host_job.lock().unwrap().clone();
        ensure!(
            seen.is_some_and(|(cordoned, _)| cordoned),
            "the host job was created on a schedulable node"
        );
        let notes = timeline.notes();
        ensure!(
            notes.iter().any(|n| n.contains("uncordoned")),
            "no note of the uncordon: {notes:?}"
        );
        fenced_through_the_uncordon(&place, &report, &at_host_job, &landed).await?;
        drained(drains, &target)
    })
    .await
}

/// Issue 30, item 1: a person uncordons the node right after the driver's last write before
/// its host Job, too late for any read of the driver's to see (right before the create): no
/// workload Pod lands on the node before it is back, its host Job run and its reboot over.
async fn an_uncordon_right_before_the_host_job_lands_no_pod_before_the_node_is_back(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let place = one_place(kubelets).await?;
    let (admin, target) = (place.trio.admin.clone(), place.target.clone());
    let plan = plan_for(&place.trio, &target, |_| {})?;
    let drains = Drains::watch(&admin, &place.trio.namespace, APP).await?;
    alone(&place.trio, plan.job_name(&target), async {
        let kube = place.trio.backend.api();
        let api = Interposed::new(kube.clone());
        let actors = Arc::new(Actors::default());
        // One action before the create (one per call): the node as the create finds it, then
        // the person's uncordon.
        let at_host_job: AtHostJob = Arc::default();
        let (a, t, out) = (admin.clone(), target.clone(), at_host_job.clone());
        stage(
            &api,
            Verb::CreateJob,
            0,
            &actors,
            "uncordon",
            move || async move {
                let read = read_node(&a, &t).await?;
                let pods = evictable_on(&a, &t).await?;
                *out.lock().unwrap() = Some((records::unschedulable(&read), pods));
                set_unschedulable(&a, &t, false).await?;
                Ok(format!("{t} uncordoned"))
            },
        );
        let (landed, watching) =
            landings_while_ours(&admin, &place.trio.namespace, &target, &place.replica);
        let timeline = Timeline::new(kube, "hostile uncordon-before-host-job");

        let report = run(&api, &plan, &timeline).await?;
        drop(watching);

        actors.check(&["uncordon"])?;
        let seen = at_host_job.lock().unwrap().clone();
        ensure!(
            seen.is_some_and(|(cordoned, _)| cordoned),
            "the host job was created on a schedulable node"
        );
        fenced_through_the_uncordon(&place, &report, &at_host_job, &landed).await?;
        drained(drains, &target)?;
        // Back and untainted, the Pending replacement lands on it.
        replacement_landed(
            admin.clone(),
            place.trio.namespace.clone(),
            target.clone(),
            place.replica.clone(),
        )
        .await
        .map(drop)
    })
    .await
}

// --- 2. a node reboots by itself during the drain ----------------------------------------------

/// Reboots a node by itself (`reboot`) right before the driver's first eviction, and waits
/// until it is back (a new boot, Ready); answers the new `bootID`.
fn reboot_during_the_drain(api: &Interposed<KubeApi>, actors: &Arc<Actors>, reboot: SelfReboot) {
    stage(
        api,
        Verb::EvictPod,
        0,
        actors,
        "reboot",
        move || async move {
            let back = reboot.reboot(ACTOR).await?;
            Ok(boot_id(&back).to_string())
        },
    );
}

/// The node reboots by itself while it is drained: the driver neither takes the new boot for
/// its upgrade nor fails the node for an upgrade that "did not take"; it upgrades it, once.
async fn a_node_rebooting_by_itself_during_the_drain_is_upgraded_without_a_false_failure(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let place = one_place(kubelets).await?;
    let (admin, target) = (place.trio.admin.clone(), place.target.clone());
    let plan = plan_for(&place.trio, &target, |_| {})?;
    let drains = Drains::watch(&admin, &place.trio.namespace, APP).await?;
    alone(&place.trio, plan.job_name(&target), async {
        let kube = place.trio.backend.api();
        let api = Interposed::new(kube.clone());
        let actors = Arc::new(Actors::default());
        reboot_during_the_drain(&api, &actors, place.trio.self_reboot(&target)?);
        let timeline = Timeline::new(kube, "hostile reboot-during-drain");

        let report = run(&api, &plan, &timeline).await?;

        actors.check(&["reboot"])?;
        ensure!(report.outcome == Outcome::Done, "{report:#?}");
        ensure!(
            node_result(&report, &target)? == NodeResult::Upgraded,
            "{report:#?}"
        );
        let node = upgraded_once(&place.trio, &target).await?;
        let rebooted = actors.did("reboot").unwrap_or_default();
        ensure!(
            boot_id(&node) != rebooted,
            "node {target} did not reboot after its upgrade: still boot {rebooted}"
        );
        drained(drains, &target)
    })
    .await
}

/// The node reboots by itself while drained, and the driver crashes right before it creates
/// its host Job (after its Launch record): the rerun upgrades the node, exactly once, with no
/// false failure; a second rerun finds nothing to do.
async fn a_node_rebooting_during_the_drain_then_a_crash_before_the_host_job_is_upgraded_by_the_rerun(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let place = one_place(kubelets).await?;
    let (admin, target) = (place.trio.admin.clone(), place.target.clone());
    let plan = plan_for(&place.trio, &target, |_| {})?;
    let drains = Drains::watch(&admin, &place.trio.namespace, APP).await?;
    alone(&place.trio, plan.job_name(&target), async {
        let kube = place.trio.backend.api();
        let api = Arc::new(Interposed::new(kube.clone()));
        let actors = Arc::new(Actors::default());
        reboot_during_the_drain(&api, &actors, place.trio.self_reboot(&target)?);

        let first = Crashing::new(api.clone(), ()).crashing_at_verb(Verb::CreateJob, 0, false);
        let timeline = Timeline::new(kube.clone(), "hostile crashed run");
        let crashed = async {
            tokio::select! {
                report = upgrade_driver::run(&first, &plan, timeline.sink()) => Err(Failure(
                    format!("the run ended before it created its host job: {report:#?}")
                )),
                () = first.crashed() => Ok(()),
            }
        };
        tokio::time::timeout(RUN, crashed).await.map_err(|_| {
            Failure(format!(
                "the driver did not reach its host job within {RUN:?}"
            ))
        })??;
        actors.check(&["reboot"])?;
        // The crash came before the host Job: none exists, nothing ran, the node is ours.
        let jobs = Api::<Job>::namespaced(admin.clone(), SA_NAMESPACE);
        let job = plan.job_name(&target);
        let left = (jobs.get_opt(&job).await).map_err(fail(format!("reading job {job}")))?;
        ensure!(left.is_none(), "the crashed run created {job}");
        let ran = upgrades(&place.trio, &target).await?;
        ensure!(ran == 0, "{ran} upgrades ran before the crash");
        let node = read_node(&admin, &target).await?;
        let record = records::read::<InProgress>(&node, IN_PROGRESS).map_err(Failure)?;
        ensure!(
            record.as_ref().is_some_and(|r| r.host_boot_id.is_some()),
            "the crashed run must have written its Launch record: {record:?}"
        );

        // The rerun takes the Lease over (the same identity) and carries the node on.
        for rerun in 0..2 {
            let timeline = Timeline::new(kube.clone(), "hostile rerun");
            let report = run(&*kube, &plan, &timeline).await?;
            ensure!(
                report.outcome == Outcome::Done,
                "rerun {rerun}: {report:#?}"
            );
            let result = node_result(&report, &target)?;
            if rerun == 0 {
                ensure!(result == NodeResult::Upgraded, "rerun {rerun}: {report:#?}");
            } else {
                ensure!(
                    matches!(result, NodeResult::Skipped { .. }),
                    "rerun {rerun}: {report:#?}"
                );
            }
            upgraded_once(&place.trio, &target).await?;
        }
        drained(drains, &target)
    })
    .await
}

// --- 5. a node deleted from the cluster ------------------------------------------------------------

/// Deletes Node `node` as an administrator; answers the backend's time of the deletion.
async fn delete_node(admin: &Client, api: &KubeApi, node: &str) -> Result<Duration, Failure> {
    Api::<Node>::all(admin.clone())
        .delete(node, &DeleteParams::default())
        .await
        .map_err(fail(format!("deleting node {node}")))?;
    let at = api.now();
    eprintln!("actor at {}: node {node} deleted", secs(at));
    Ok(at)
}

/// What a spawned actor answered, once the driver's run has ended (`report`): it acted before
/// that end, so it has ended too, or soon will (at most [`ACTOR`]).
async fn acted<T>(
    actor: tokio::task::JoinHandle<Result<T, Failure>>,
    report: &Result<Report, Failure>,
) -> Result<T, Failure> {
    let outcome = || match report {
        Ok(r) => format!(
            "{:?}",
            r.nodes.iter().map(|n| &n.result).collect::<Vec<_>>()
        ),
        Err(e) => e.to_string(),
    };
    match tokio::time::timeout(ACTOR, actor).await {
        Ok(Ok(Ok(answer))) => Ok(answer),
        Ok(Ok(Err(e))) => Err(Failure(format!("the actor: {e}; the run: {}", outcome()))),
        Ok(Err(e)) => Err(Failure(format!("the actor panicked: {e}"))),
        Err(_) => Err(Failure(format!(
            "the actor did not end with the run: {}",
            outcome()
        ))),
    }
}

/// The node is deleted while it reboots after its upgrade (its host down for minutes): the
/// reboot wait sees the deletion and ends the node's step within seconds, a failure at Reboot
/// that says the node was deleted, not the reboot timeout.
async fn a_node_deleted_while_it_reboots_ends_its_step_within_seconds(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let trio = ThreeNodes::of(kubelets, Workers::Unzoned).await?;
    let (admin, target) = (trio.admin.clone(), trio.names[1].clone());
    // Down 1s after the upgrade exits, for 4 minutes (a real node: off that long after its
    // shutdown, its Node still Ready, with no node lifecycle controller running).
    let timing = "upgrade=2s,reboot-delay=1s,reboot=240s,op=200ms";
    trio.host_timing(&target, timing).await?;
    let plan = plan_for(&trio, &target, |s| {
        s.reboot_timeout = Duration::from_secs(300)
    })?;
    alone(&trio, plan.job_name(&target), async {
        let kube = trio.backend.api();
        let timeline = Timeline::new(kube.clone(), "hostile deleted-while-rebooting");
        // The actor: once the driver waits for the reboot and the host is down, the node goes.
        let actor = {
            let (timeline, admin, target, kube) = (
                timeline.clone(),
                admin.clone(),
                target.clone(),
                kube.clone(),
            );
            let host = trio.self_reboot(&target)?;
            tokio::spawn(async move {
                let reboot = step_started(&target, UpgradeStep::Reboot);
                timeline.reported("the reboot step", RUN, reboot).await?;
                host.down(ACTOR).await?;
                delete_node(&admin, &kube, &target).await
            })
        };
        let report = run(&*kube, &plan, &timeline).await;
        let removed = acted(actor, &report).await?;
        let report = report?;

        let NodeResult::Failed(StepFailure { step, message, .. }) = node_result(&report, &target)?
        else {
            return Err(Failure(format!("{report:#?}")));
        };
        ensure!(step == UpgradeStep::Reboot, "failed at {step}: {message}");
        ensure!(message.contains("deleted"), "{message}");
        let (ended, _) = timeline
            .finished(&target)
            .ok_or_else(|| Failure(format!("no NodeFinished for {target}")))?;
        eprintln!(
            "hostile deleted-while-rebooting: node deleted at {}, its step ended at {} ({} later)",
            secs(removed),
            secs(ended),
            secs(ended.saturating_sub(removed))
        );
        ensure!(
            ended >= removed && ended < removed + Duration::from_secs(5),
            "the step ended at {}, the node deleted at {}",
            secs(ended),
            secs(removed)
        );
        Ok(())
    })
    .await
}

/// The node is deleted while its host Job runs (an upgrade of 10 minutes, the Job's deadline
/// as long): the runner's Job wait ends once the real pod garbage collector fails the Job's Pod
/// (its 40 s quarantine, checked every 20 s: 40 to 80 s after the deletion), within seconds of
/// that, a failure at Upgrade, not the Job's deadline.
async fn a_node_deleted_while_its_host_job_runs_ends_its_step_when_the_pod_gc_fails_the_pod(
    kubelets: Kubelets,
) -> Result<(), Failure> {
    let trio = ThreeNodes::of(kubelets, Workers::Unzoned).await?;
    let (admin, target) = (trio.admin.clone(), trio.names[1].clone());
    trio.host_timing(&target, "upgrade=600s,op=200ms").await?;
    let plan = plan_for(&trio, &target, |s| s.deadline = Duration::from_secs(600))?;
    alone(&trio, plan.job_name(&target), async {
        let kube = trio.backend.api();
        let timeline = Timeline::new(kube.clone(), "hostile deleted-while-upgrading");
        // The actor: once the host Job's Pod runs on the node (the upgrade under way), the node
        // goes; then it notes when the pod garbage collector fails (or deletes) that Pod.
        let actor = {
            let (timeline, admin, target, kube) = (
                timeline.clone(),
                admin.clone(),
                target.clone(),
                kube.clone(),
            );
            tokio::spawn(async move {
                let upgrade = step_started(&target, UpgradeStep::Upgrade);
                timeline.reported("the upgrade step", RUN, upgrade).await?;
                let pods = Api::<Pod>::namespaced(admin.clone(), SA_NAMESPACE);
                let on_node = watcher::Config::default().fields(&format!("spec.nodeName={target}"));
                let running =
                    |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                let what = "the host job's pod running";
                let pod = pod_seen(pods.clone(), on_node, what, ACTOR, running).await?;
                let name = pod.metadata.name.clone().unwrap_or_default();
                let removed = delete_node(&admin, &kube, &target).await?;
                let failed = await_condition(pods, &name, |p: Option<&Pod>| {
                    p.is_none_or(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
                    })
                });
                let gc = Duration::from_secs(150);
                tokio::time::timeout(gc, failed)
                    .await
                    .map_err(|_| {
                        Failure(format!("pod {name} not failed {gc:?} after the deletion"))
                    })?
                    .map_err(|e| Failure(format!("watching pod {name}: {e}")))?;
                let failed = kube.now();
                eprintln!("actor at {}: pod {name} failed (or gone)", secs(failed));
                Ok::<_, Failure>((removed, failed))
            })
        };
        let report = run(&*kube, &plan, &timeline).await;
        let (removed, pod_failed) = acted(actor, &report).await?;
        let report = report?;

        let NodeResult::Failed(StepFailure { step, message, .. }) = node_result(&report, &target)?
        else {
            return Err(Failure(format!("{report:#?}")));
        };
        ensure!(step == UpgradeStep::Upgrade, "failed at {step}: {message}");
        let (ended, _) = timeline
            .finished(&target)
            .ok_or_else(|| Failure(format!("no NodeFinished for {target}")))?;
        eprintln!(
            "hostile deleted-while-upgrading: node deleted at {}, its pod failed at {} ({} \
             later), its step ended at {} ({} after the deletion): {message}",
            secs(removed),
            secs(pod_failed),
            secs(pod_failed.saturating_sub(removed)),
            secs(ended),
            secs(ended.saturating_sub(removed))
        );
        // Ended by the pod garbage collector's failure, not the Job's deadline nor the upgrade's
        // end (600 s): within seconds of the Pod failing, and well within 100 s of the deletion.
        ensure!(
            ended + Duration::from_secs(1) >= pod_failed
                && ended < pod_failed + Duration::from_secs(10),
            "the step ended at {}, the pod failed at {}",
            secs(ended),
            secs(pod_failed)
        );
        ensure!(
            ended < removed + Duration::from_secs(100),
            "the step ended at {}, the node deleted at {}",
            secs(ended),
            secs(removed)
        );
        Ok(())
    })
    .await
}
