//! [`drain`] on the fake cluster. A seeded simulation under transient faults checks, after every
//! run, what the drain guarantees: it ends within its timeout; it answers only the outcomes it
//! documents; the budget is never violated; nothing is evicted after it returned; DaemonSet and
//! mirror Pods are left alone; every eviction carries the UID of a Pod it was shown. Table tests
//! pin its notes, the 500 of a Pod two budgets cover, and transient faults.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, ensure};
use async_trait::async_trait;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use nodejob_core::drain::{DrainOptions, Drained, MIRROR_ANNOTATION, Skip, drain};
use nodejob_core::{
    Action, ApiError, ApiResult, Change, Clock, DryRun, Error, Eviction, Level, NodeChange, Note,
    ObjectKind, PodApi,
};
use nodejob_fake::{FakeCluster, Times, Verb};

type TestResult = anyhow::Result<()>;

const NS: &str = "default";
/// The node drained.
const NODE: &str = "node-a";
/// Where the evicted replicas go.
const OTHERS: [&str; 3] = ["node-b", "node-c", "node-d"];
const TIMEOUT: Duration = Duration::from_secs(120);
/// How far past its timeout a drain may end: it bounds every sleep, retry and wait by what is
/// left of it, so in virtual time none is needed; 1 ms against rounding.
const SLACK: Duration = Duration::from_millis(1);
const SEEDS: u64 = 64;

// ---- the cluster, as an administrator sets it up ----

fn app(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), name.to_string())])
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(NS.to_string()),
        ..ObjectMeta::default()
    }
}

/// A server: no host directive, so it runs, Ready, until its Pod is deleted, and ends on SIGTERM.
fn server() -> Container {
    Container {
        name: "app".to_string(),
        image: Some("registry.k8s.io/pause:3.10".to_string()),
        ..Container::default()
    }
}

fn template(name: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(app(name)),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![server()],
            ..PodSpec::default()
        }),
    }
}

fn selector(name: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(app(name)),
        ..LabelSelector::default()
    }
}

fn deployment(name: &str, replicas: usize) -> anyhow::Result<Deployment> {
    Ok(Deployment {
        metadata: meta(name),
        spec: Some(DeploymentSpec {
            replicas: Some(i32::try_from(replicas)?),
            selector: selector(name),
            template: template(name),
            ..DeploymentSpec::default()
        }),
        status: None,
    })
}

/// A DaemonSet on every node, cordoned ones included.
fn daemon_set(name: &str) -> DaemonSet {
    DaemonSet {
        metadata: meta(name),
        spec: Some(DaemonSetSpec {
            selector: selector(name),
            template: template(name),
            ..DaemonSetSpec::default()
        }),
        status: None,
    }
}

/// The mirror Pod of a static Pod on `node`: no controller, the kubelet's annotation.
fn mirror_pod(name: &str, node: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: Some(app(name)),
            annotations: Some(BTreeMap::from([(
                MIRROR_ANNOTATION.to_string(),
                "0123456789abcdef".to_string(),
            )])),
            ..meta(name)
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_string()),
            containers: vec![server()],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// A budget `name` over the Pods labelled `app: web`.
fn budget(name: &str, min_available: usize) -> anyhow::Result<PodDisruptionBudget> {
    Ok(PodDisruptionBudget {
        metadata: meta(name),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(i32::try_from(min_available)?)),
            selector: Some(selector("web")),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    })
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn qualified(pod: &Pod) -> String {
    format!("{NS}/{}", name(pod))
}

/// Ready and not being deleted: what a budget counts as healthy (`currentHealthy`).
fn healthy(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The Deployment's Pods, on every node, in name order.
fn web_pods(cluster: &FakeCluster) -> Vec<Pod> {
    let mut pods = cluster.pods(NS);
    pods.retain(|p| {
        let labels = p.metadata.labels.as_ref();
        labels.and_then(|l| l.get("app")).map(String::as_str) == Some("web")
    });
    pods
}

fn healthy_replicas(cluster: &FakeCluster) -> usize {
    web_pods(cluster).iter().filter(|p| healthy(p)).count()
}

/// A cluster of four nodes with Deployment `web` of `replicas` Pods all Ready on [`NODE`], the
/// given budgets over them, optionally a DaemonSet `agent` and a mirror Pod on [`NODE`]; then
/// [`NODE`] cordoned, as the caller of a drain does, and the others schedulable.
struct Fixture {
    cluster: FakeCluster,
    /// The replicas on [`NODE`], in name order.
    replicas: Vec<Pod>,
    /// The other Pods on [`NODE`] (DaemonSet, mirror), with why the drain must leave them.
    left_alone: Vec<(String, Skip)>,
}

impl Fixture {
    async fn new(
        seed: u64,
        replicas: usize,
        budgets: &[(&str, usize)],
        with_daemon_set: bool,
        with_mirror: bool,
    ) -> anyhow::Result<Fixture> {
        let cluster = FakeCluster::with_seed(seed);
        cluster.add_node(NODE)?;
        for node in OTHERS {
            cluster.add_node(node)?;
            cluster.patch_node_now(node, &[NodeChange::Cordon])?;
        }
        if with_daemon_set {
            cluster.create_daemon_set_now(&daemon_set("agent"))?;
        }
        if with_mirror {
            cluster.create_pod_now(&mirror_pod("kube-proxy-node-a", NODE))?;
        }
        cluster.create_deployment_now(&deployment("web", replicas)?)?;
        for (name, min_available) in budgets {
            cluster.create_budget_now(&budget(name, *min_available)?)?;
        }
        // The ReplicaSet creates its Pods 200ms after the Deployment, on the only schedulable
        // node; they are Ready 1s later (the crate docs' timeline).
        cluster.sleep(Duration::from_millis(1_500)).await;
        let pods = web_pods(&cluster);
        let on_node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(NODE);
        ensure!(
            pods.len() == replicas && pods.iter().all(|p| healthy(p) && on_node(p)),
            "the replicas are not all Ready on {NODE}: {pods:?}"
        );
        for node in OTHERS {
            cluster.patch_node_now(node, &[NodeChange::Uncordon])?;
        }
        cluster.patch_node_now(NODE, &[NodeChange::Cordon])?;
        let left_alone: Vec<(String, Skip)> = (cluster.pods_on(NODE).iter())
            .filter_map(|p| {
                let labels = p.metadata.labels.as_ref()?;
                match labels.get("app").map(String::as_str) {
                    Some("agent") => Some((qualified(p), Skip::DaemonSet)),
                    Some("kube-proxy-node-a") => Some((qualified(p), Skip::Mirror)),
                    _ => None,
                }
            })
            .collect();
        ensure!(
            left_alone.len() == usize::from(with_daemon_set) + usize::from(with_mirror),
            "{left_alone:?}"
        );
        Ok(Fixture {
            cluster,
            replicas: pods,
            left_alone,
        })
    }
}

// ---- the drain's view, observed ----

/// One eviction as the drain asked it, with the healthy replicas (across all nodes) just before
/// and just after. The fake serves an eviction without yielding, so nothing else happens in
/// between.
#[derive(Debug)]
struct Evicting {
    at: Duration,
    pod: String,
    was_healthy: bool,
    healthy_before: usize,
    answer: ApiResult<Eviction>,
    healthy_after: usize,
}

#[derive(Debug, Default)]
struct Seen {
    /// The UIDs of every Pod an answer showed the drain (listed or read).
    uids: BTreeSet<String>,
    /// The fewest healthy replicas at the start or end of any call of the drain.
    fewest_healthy: Option<usize>,
    evictions: Vec<Evicting>,
}

/// The fake as the drain sees it: every call is passed through unchanged, and what the drain
/// was shown and the healthy replicas around each call are kept.
struct Observed {
    cluster: FakeCluster,
    seen: Mutex<Seen>,
}

impl Observed {
    fn new(cluster: FakeCluster) -> Self {
        Observed {
            cluster,
            seen: Mutex::default(),
        }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap()
    }

    fn sample(&self) -> usize {
        let healthy = healthy_replicas(&self.cluster);
        let mut seen = self.seen();
        seen.fewest_healthy = Some(seen.fewest_healthy.map_or(healthy, |f| f.min(healthy)));
        healthy
    }

    fn shown<'p>(&self, pods: impl IntoIterator<Item = &'p Pod>) {
        let mut seen = self.seen();
        seen.uids.extend(pods.into_iter().map(uid));
    }
}

#[async_trait]
impl Clock for Observed {
    fn now(&self) -> Duration {
        self.cluster.now()
    }
    async fn sleep(&self, duration: Duration) {
        self.cluster.sleep(duration).await;
    }
    fn wall_time(&self) -> Timestamp {
        self.cluster.wall_time()
    }
}

#[async_trait]
impl PodApi for Observed {
    async fn list_node_pods(&self, node: &str) -> ApiResult<Vec<Pod>> {
        self.sample();
        let answer = self.cluster.list_node_pods(node).await;
        if let Ok(pods) = &answer {
            self.shown(pods);
        }
        self.sample();
        answer
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> ApiResult<Pod> {
        self.sample();
        let answer = self.cluster.get_pod(namespace, name).await;
        if let Ok(pod) = &answer {
            self.shown([pod]);
        }
        self.sample();
        answer
    }

    async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> ApiResult<Change<Pod>> {
        self.sample();
        let answer = self.cluster.wait_pod(namespace, name, since, timeout).await;
        if let Ok(Change::Applied(pod) | Change::Deleted(pod)) = &answer {
            self.shown([pod]);
        }
        self.sample();
        answer
    }

    async fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        grace_period: Option<Duration>,
        dry_run: DryRun,
    ) -> ApiResult<Eviction> {
        let at = self.cluster.now();
        let was_healthy = self
            .cluster
            .pod(namespace, name)
            .is_some_and(|p| healthy(&p));
        let healthy_before = self.sample();
        let answer = (self.cluster)
            .evict_pod(namespace, name, uid, grace_period, dry_run)
            .await;
        let healthy_after = self.sample();
        self.seen().evictions.push(Evicting {
            at,
            pod: name.to_string(),
            was_healthy,
            healthy_before,
            answer: answer.clone(),
            healthy_after,
        });
        answer
    }
}

// ---- the simulation ----

/// The test's own draws from the seed (SplitMix64); the fake draws UIDs and faults from its own
/// streams of the same seed.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// In `low..high`.
    fn range(&mut self, low: usize, high: usize) -> usize {
        let span = u64::try_from(high - low).unwrap_or(u64::MAX);
        low + usize::try_from(self.next() % span).unwrap_or(0)
    }

    /// In `0..1`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What one seed sets up.
#[derive(Debug)]
struct Scenario {
    seed: u64,
    replicas: usize,
    min_available: usize,
    daemon_set: bool,
    mirror: bool,
    /// The budget is created just before the drain: its first eviction finds it not yet
    /// synced (429 `still being processed`) and reads the Pod again.
    late_budget: bool,
    /// Each verb fails with a transient 503 with this probability.
    faults: [(Verb, f64); 4],
}

impl Scenario {
    fn draw(seed: u64) -> Self {
        let mut d = Draws(seed);
        let replicas = d.range(2, 6);
        // A quarter of the seeds: a budget that never releases.
        let min_available = if d.range(0, 4) == 0 {
            replicas
        } else {
            d.range(1, replicas)
        };
        let daemon_set = d.range(0, 2) == 0;
        let mirror = d.range(0, 2) == 0;
        let late_budget = d.range(0, 4) == 0;
        let faults = [
            Verb::EvictPod,
            Verb::ListNodePods,
            Verb::GetPod,
            Verb::WaitPod,
        ]
        .map(|verb| (verb, 0.3 * d.unit()));
        Scenario {
            seed,
            replicas,
            min_available,
            daemon_set,
            mirror,
            late_budget,
            faults,
        }
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ended {
    Drained,
    BudgetNeverReleased,
}

/// What a run came to, for the summary.
struct Run {
    ended: Ended,
    took: Duration,
    /// Calls that failed with an injected 503.
    faults: usize,
    /// Pods read again after an eviction's conflict or 429 `still being processed`.
    reads: usize,
}

/// One seed: set up, arm the faults, drain, check every property.
async fn simulate(scenario: &Scenario) -> anyhow::Result<Run> {
    let budget_now = [("web", scenario.min_available)];
    let fixture = Fixture::new(
        scenario.seed,
        scenario.replicas,
        if scenario.late_budget {
            &[]
        } else {
            &budget_now
        },
        scenario.daemon_set,
        scenario.mirror,
    )
    .await?;
    let cluster = fixture.cluster.clone();
    if scenario.late_budget {
        cluster.create_budget_now(&budget("web", scenario.min_available)?)?;
    }
    for (verb, probability) in scenario.faults {
        let fault =
            ApiError::transient(503, "the server is currently unable to handle the request");
        cluster.fail_randomly(verb, fault, probability);
    }
    let observed = Observed::new(cluster.clone());
    let options = DrainOptions {
        timeout: TIMEOUT,
        ..DrainOptions::default()
    };
    let started = cluster.now();
    let outcome = drain(&observed, NODE, &options, &|_: &Note| {}).await;
    let returned = cluster.now();
    let evictions_then = cluster.count(Verb::EvictPod);
    let pods_then = cluster.pods(NS);
    cluster.clear_faults();
    cluster.sleep(Duration::from_secs(60)).await;
    let calls = cluster.calls();
    let seen = observed.seen.into_inner().unwrap();

    // 1. Bounded: the drain gives up by its deadline, waiting for evicted Pods included.
    ensure!(
        returned.saturating_sub(started) <= TIMEOUT + SLACK,
        "ran {:?}, past its timeout of {TIMEOUT:?}: {outcome:?}",
        returned - started
    );

    // 2. Only the documented outcomes, transient faults retried and never surfaced.
    let replica_names: BTreeSet<String> = fixture.replicas.iter().map(qualified).collect();
    let ended = match &outcome {
        Ok(Drained {
            evicted,
            skipped,
            blocked,
        }) => {
            ensure!(
                scenario.min_available < scenario.replicas,
                "drained past a budget that never releases: {outcome:?}"
            );
            let evicted_set: BTreeSet<String> = evicted.iter().cloned().collect();
            ensure!(
                evicted_set == replica_names && evicted.len() == replica_names.len(),
                "evicted {evicted:?}, not each replica once: {replica_names:?}"
            );
            ensure!(
                *skipped == fixture.left_alone,
                "skipped {skipped:?}, not {:?}",
                fixture.left_alone
            );
            ensure!(blocked.is_empty(), "blocked {blocked:?} outside a dry run");
            // Gone by UID when the drain said so (a replacement has another name anyway).
            let replica_uids: BTreeSet<String> = fixture.replicas.iter().map(uid).collect();
            let still: Vec<String> = (pods_then.iter())
                .filter(|p| replica_uids.contains(&uid(p)))
                .map(qualified)
                .collect();
            ensure!(still.is_empty(), "drained, yet still there: {still:?}");
            Ended::Drained
        }
        Err(Error::DrainTimeout {
            node,
            waited,
            blocked,
            pods_left,
            budgets,
        }) => {
            ensure!(
                scenario.min_available == scenario.replicas,
                "timed out though the budget releases: {outcome:?}"
            );
            ensure!(node == NODE && *waited == TIMEOUT, "{outcome:?}");
            let n = scenario.replicas;
            let names_budget = format!(
                "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs {n} healthy pods and has {n} currently"
            );
            ensure!(
                blocked.as_deref() == Some(names_budget.as_str()),
                "the timeout does not name the budget that blocked: {blocked:?}"
            );
            let left: BTreeSet<String> = pods_left.iter().cloned().collect();
            ensure!(
                left == replica_names,
                "pods left {pods_left:?}, not {replica_names:?}"
            );
            ensure!(
                budgets.as_slice() == ["default/web"],
                "the timeout names the budgets {budgets:?}, not default/web"
            );
            Ended::BudgetNeverReleased
        }
        Err(other) => bail!("neither drained nor timed out: {other}"),
    };

    // 3. The budget: every Pod the budget selects is a replica, and nothing but evictions
    //    deletes one here (no other actor, the kubelet never ends a server on its own, the
    //    ReplicaSet does not scale down), while replacements only add healthy replicas. So the
    //    healthy count falls only at an admitted eviction, which the fake serves atomically:
    //    sampling around each eviction (and each other call) sees every minimum. The eviction
    //    subresource admits a healthy Pod only when `disruptionsAllowed` > 0, decrementing it in
    //    the same write; the disruption controller computes `disruptionsAllowed` as
    //    `currentHealthy - minAvailable`, and a lagging status only under-counts (a replacement
    //    turning Ready) since every disruption is already subtracted. Hence the strongest
    //    statement: never fewer than `minAvailable` healthy replicas, and every admitted
    //    eviction of a healthy Pod found at least `minAvailable + 1`.
    let min = scenario.min_available;
    ensure!(
        seen.fewest_healthy.is_some_and(|f| f >= min),
        "the healthy replicas fell to {:?}, below minAvailable {min}",
        seen.fewest_healthy
    );
    for e in &seen.evictions {
        match &e.answer {
            Ok(Eviction::Evicted) if e.was_healthy => ensure!(
                e.healthy_before > min && e.healthy_after + 1 == e.healthy_before,
                "eviction of {} at {:?} admitted below the budget: {e:?}",
                e.pod,
                e.at
            ),
            Ok(Eviction::Blocked { .. }) => ensure!(
                e.healthy_after == e.healthy_before,
                "a blocked eviction changed the healthy count: {e:?}"
            ),
            _ => {}
        }
        ensure!(e.healthy_after >= min, "below the budget after {e:?}");
    }

    // 4. Nothing evicted once the drain returned (60s of virtual time later).
    ensure!(
        cluster.count(Verb::EvictPod) == evictions_then,
        "evicted after the drain returned at {returned:?}: {:?}",
        (calls.iter())
            .filter(|c| c.verb == Verb::EvictPod && c.at >= returned)
            .collect::<Vec<_>>()
    );

    // 5. DaemonSet and mirror Pods are never evicted.
    let evictions: Vec<&nodejob_fake::Call> =
        calls.iter().filter(|c| c.verb == Verb::EvictPod).collect();
    for (pod, _) in &fixture.left_alone {
        ensure!(
            !evictions
                .iter()
                .any(|c| format!("{}/{}", c.namespace, c.name) == *pod),
            "{pod} was evicted"
        );
    }

    // 6. Every eviction's UID precondition is that of a Pod the drain listed or read.
    for call in &evictions {
        let uid = (call.preconditions.as_ref()).and_then(|p| p.uid.as_deref());
        ensure!(
            uid.is_some_and(|u| !u.is_empty() && seen.uids.contains(u)),
            "evicted {}/{} with UID {uid:?}, never shown to the drain",
            call.namespace,
            call.name
        );
    }
    // The observer saw every eviction the fake recorded.
    ensure!(seen.evictions.len() == evictions.len());
    Ok(Run {
        ended,
        took: returned - started,
        faults: (calls.iter())
            .filter(|c| c.error == Some(nodejob_core::ErrorKind::Transient))
            .count(),
        reads: cluster.count(Verb::GetPod),
    })
}

#[tokio::test(start_paused = true)]
async fn a_drain_keeps_its_guarantees_under_faults() -> TestResult {
    let mut failures = Vec::new();
    let mut ended: BTreeMap<Ended, usize> = BTreeMap::new();
    let (mut faults, mut reads, mut slowest) = (0, 0, Duration::ZERO);
    for seed in 0..SEEDS {
        let scenario = Scenario::draw(seed);
        match simulate(&scenario).await {
            Ok(run) => {
                *ended.entry(run.ended).or_default() += 1;
                faults += run.faults;
                reads += run.reads;
                if run.ended == Ended::Drained {
                    slowest = slowest.max(run.took);
                }
            }
            Err(e) => {
                eprintln!("seed {seed} failed: {e:#}\n  {scenario:?}");
                failures.push(seed);
            }
        }
    }
    println!(
        "{SEEDS} seeds: {ended:?}; {faults} transient faults injected, {reads} pods read again; \
         the slowest drain took {slowest:?}"
    );
    ensure!(failures.is_empty(), "failing seeds: {failures:?}");
    // The seeds cover both outcomes, faults fired, and the re-read path ran.
    ensure!(
        ended.len() == 2 && faults > 0 && reads > 0,
        "{ended:?}, {faults} faults, {reads} reads"
    );
    Ok(())
}

// ---- tables ----

/// Notes go here.
fn notes() -> (Arc<Mutex<Vec<Note>>>, impl Fn(&Note) + Send + Sync) {
    let notes: Arc<Mutex<Vec<Note>>> = Arc::default();
    let sink = Arc::clone(&notes);
    (notes, move |n: &Note| sink.lock().unwrap().push(n.clone()))
}

#[tokio::test(start_paused = true)]
async fn notes_report_each_eviction_and_each_block_with_the_budgets_message() -> TestResult {
    let blocked = |pods: usize, needs: usize, has: usize| {
        format!(
            "{pods} pod(s) blocked, retrying in @: Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs {needs} healthy pods and has {has} currently"
        )
    };
    // (what, the budget's minAvailable over 2 replicas, the timeout in seconds, whether it
    // drains, the Warn notes with the delay as `@`)
    let cases = [
        ("no budget", None, 120, true, vec![]),
        // The second eviction comes at once after the first, which used the one disruption
        // allowed: the budget's `currentHealthy` still counts the Pod being evicted until the
        // disruption controller syncs, and the apiserver's message says what the status says.
        (
            "a budget that releases one at a time",
            Some(1),
            120,
            true,
            vec![blocked(1, 1, 2), blocked(1, 1, 1)],
        ),
        (
            "a budget that never releases",
            Some(2),
            5,
            false,
            // Retries after 1 s and 2 s, then a last one shortened to end just before the
            // deadline, rather than giving up a whole backoff early.
            vec![blocked(2, 2, 2); 3],
        ),
    ];
    for (what, min_available, timeout, drains, warns) in cases {
        let budgets: Vec<(&str, usize)> = min_available.map(|m| ("web", m)).into_iter().collect();
        let fixture = Fixture::new(1, 2, &budgets, false, false).await?;
        let (notes, sink) = notes();
        let options = DrainOptions {
            timeout: Duration::from_secs(timeout),
            ..DrainOptions::default()
        };
        let outcome = drain(&fixture.cluster, NODE, &options, &sink).await;
        ensure!(outcome.is_ok() == drains, "{what}: {outcome:?}");
        let notes = notes.lock().unwrap().clone();
        let infos: BTreeSet<String> = (notes.iter())
            .filter(|n| n.level == Level::Info)
            .map(|n| n.message.clone())
            .collect();
        let evicted: BTreeSet<String> = match drains {
            true => (fixture.replicas.iter())
                .map(|p| format!("evicted pod {} from node {NODE}", qualified(p)))
                .collect(),
            false => BTreeSet::new(),
        };
        ensure!(infos == evicted, "{what}: {infos:?}");
        // The delay varies with the attempt; the rest is fixed.
        let prefix = format!("drain of node {NODE}: ");
        let got: Vec<String> = (notes.iter())
            .filter(|n| n.level == Level::Warn)
            .map(|n| {
                let text = n.message.strip_prefix(&prefix).unwrap_or(&n.message);
                match (text.find(" retrying in "), text.find(": Cannot")) {
                    (Some(a), Some(b)) => {
                        // Said for people: seconds to a tenth, `0.9 s`.
                        let delay = &text[a + 13..b];
                        let tenths = delay.strip_suffix(" s").and_then(|d| d.split_once('.'));
                        assert!(
                            tenths.is_some_and(|(s, t)| s.parse::<u64>().is_ok() && t.len() == 1),
                            "{delay:?}"
                        );
                        format!("{}@{}", &text[..a + 13], &text[b..])
                    }
                    _ => text.to_string(),
                }
            })
            .collect();
        ensure!(got == warns, "{what}: {got:#?}");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_pod_two_budgets_cover_fails_the_drain_at_once_with_the_apiservers_message() -> TestResult
{
    let fixture = Fixture::new(2, 2, &[("web", 1), ("web-too", 1)], false, false).await?;
    let cluster = &fixture.cluster;
    let started = cluster.now();
    let options = DrainOptions {
        timeout: TIMEOUT,
        ..DrainOptions::default()
    };
    let outcome = drain(cluster, NODE, &options, &|_: &Note| {}).await;
    let Err(Error::Api { op, cause }) = &outcome else {
        bail!("expected the apiserver's 500 as Error::Api, got {outcome:?}");
    };
    let first = &fixture.replicas[0];
    ensure!(
        (op.verb, op.kind) == (Action::Evicting, ObjectKind::Pod)
            && op.detail.as_deref() == Some(&format!("uid {}", uid(first))),
        "{op:?}"
    );
    ensure!(
        cause.code == 500
            && cause.message
                == "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
            && !cause.is_retryable(),
        "{cause:?}"
    );
    // At once: one eviction, no backoff, nothing deleted.
    ensure!(cluster.count(Verb::EvictPod) == 1 && cluster.now() == started);
    ensure!(healthy_replicas(cluster) == 2);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn transient_faults_are_retried_within_the_bound_and_surface_past_it() -> TestResult {
    // (what, the fault's repetitions, whether it drains, EvictPod calls)
    let cases = [
        ("three 503s", Times::N(3), true, 2 + 3),
        ("503s until the bound", Times::Always, false, 0),
    ];
    for (what, times, drains, calls) in cases {
        let fixture = Fixture::new(3, 2, &[], false, false).await?;
        let cluster = &fixture.cluster;
        let fault =
            ApiError::transient(503, "the server is currently unable to handle the request");
        cluster.fail(Verb::EvictPod, fault.clone(), times);
        let options = DrainOptions {
            timeout: Duration::from_secs(30),
            ..DrainOptions::default()
        };
        let started = cluster.now();
        let outcome = drain(cluster, NODE, &options, &|_: &Note| {}).await;
        let took = cluster.now() - started;
        ensure!(took <= options.timeout, "{what}: took {took:?}");
        match outcome {
            Ok(drained) if drains => {
                ensure!(drained.evicted.len() == 2, "{what}: {drained:?}");
                ensure!(cluster.count(Verb::EvictPod) == calls, "{what}");
            }
            Err(Error::Api { op, cause }) if !drains => {
                ensure!(
                    op.verb == Action::Evicting && cause == fault,
                    "{what}: {op:?}"
                );
                ensure!(healthy_replicas(cluster) == 2, "{what}: nothing evicted");
            }
            other => bail!("{what}: {other:?}"),
        }
    }
    Ok(())
}

#[test]
fn the_seeds_draw_every_shape() -> TestResult {
    let scenarios: Vec<Scenario> = (0..SEEDS).map(Scenario::draw).collect();
    let shapes: BTreeSet<(usize, bool)> = (scenarios.iter())
        .map(|s| (s.replicas, s.min_available == s.replicas))
        .collect();
    ensure!(shapes.len() == 8, "{shapes:?}");
    let with = |f: fn(&Scenario) -> bool| scenarios.iter().filter(|s| f(s)).count();
    ensure!(with(|s| s.daemon_set) > 0 && with(|s| !s.daemon_set) > 0);
    ensure!(with(|s| s.mirror) > 0 && with(|s| !s.mirror) > 0);
    ensure!(with(|s| s.min_available == 1) > 0);
    let max_p = (scenarios.iter())
        .flat_map(|s| s.faults.iter().map(|(_, p)| *p))
        .fold(0.0, f64::max);
    ensure!(
        (0.25..0.3).contains(&max_p),
        "fault probabilities up to {max_p}"
    );
    Ok(())
}
