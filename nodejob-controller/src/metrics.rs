//! What `/metrics` says: the controller's figures in Prometheus' text formats
//! (prometheus-client). No node's name is a label: at 5,000 nodes a label per node is 5,000
//! series per family; a node's detail is on the Node and the resource's status.
//!
//! Fed from three places: the run's progress events ([`Metrics::progress`], through the
//! controller's sink), the controller's own decisions (reconciles, outcomes, leadership, the
//! pause), and every API request ([`Counted`], a [`Layer`] under the controller and its runs).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nodejob_core::{Answer, ApiResult, Layer, Request};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use upgrade_driver::{NodeResult, Progress, UpgradeEvent};

/// The operation the controller runs for a `NodeUpgrade`.
pub const UPGRADE: &str = "upgrade";
/// The operation the controller runs for a `CARotation`.
pub const ROTATE_CA: &str = "rotate-ca";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationState {
    operation: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Version {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationStep {
    operation: String,
    step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationResult {
    operation: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvictionResult {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationOutcome {
    operation: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbCode {
    verb: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Holder {
    holder: String,
}

/// The node states the `nodejob_nodes` gauge counts, as the status's counts name them.
const STATES: [&str; 7] = [
    "planned",
    "in_progress",
    "soaking",
    "up_to_date",
    "failed",
    "blocked",
    "rolled_back",
];

/// The controller's figures. One per process; shared by the controller, its runs, the API
/// layer and the HTTP server that encodes them.
pub struct Metrics {
    registry: Registry,
    nodes: Family<OperationState, Gauge>,
    node_versions: Family<Version, Gauge>,
    step_seconds: Family<OperationStep, Histogram>,
    node_cycle_seconds: Family<OperationResult, Histogram>,
    evictions: Family<EvictionResult, Counter>,
    operations: Family<OperationOutcome, Counter>,
    reconciles: Family<Kind, Counter>,
    reconcile_errors: Family<Kind, Counter>,
    requests: Family<VerbCode, Counter>,
    lease_holder: Family<Holder, Gauge>,
    leader: Gauge,
    paused: Gauge,
    last_progress: Gauge<f64, AtomicU64>,
    /// Whether the apiserver answered this replica yet (`/readyz`).
    answered: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Every family registered, each at zero.
    pub fn new() -> Self {
        // Steps run from seconds (a cordon) to an hour (a drain, a soak); a node's cycle to
        // hours: 1 s to 4.5 h in doubling buckets.
        let histogram = || Histogram::new(exponential_buckets(1.0, 2.0, 15));
        let mut m = Metrics {
            registry: Registry::with_prefix("nodejob"),
            nodes: Family::default(),
            node_versions: Family::default(),
            step_seconds: Family::new_with_constructor(histogram),
            node_cycle_seconds: Family::new_with_constructor(histogram),
            evictions: Family::default(),
            operations: Family::default(),
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            requests: Family::default(),
            lease_holder: Family::default(),
            leader: Gauge::default(),
            paused: Gauge::default(),
            last_progress: Gauge::default(),
            answered: AtomicBool::new(false),
        };
        m.registry.register(
            "nodes",
            "Nodes of the run under way by state (planned, in_progress, soaking, up_to_date, \
             failed, blocked, rolled_back)",
            m.nodes.clone(),
        );
        m.registry.register(
            "node_versions",
            "Nodes of the last run by the version each reported at its end",
            m.node_versions.clone(),
        );
        m.registry.register_with_unit(
            "step_duration",
            "How long each node's step took, by step",
            Unit::Seconds,
            m.step_seconds.clone(),
        );
        m.registry.register_with_unit(
            "node_cycle_duration",
            "How long a node took from its first step to its end, by result",
            Unit::Seconds,
            m.node_cycle_seconds.clone(),
        );
        m.registry.register(
            "drain_evictions",
            "Pods the drains evicted (result evicted), and nodes whose drain budgets blocked \
             (result blocked)",
            m.evictions.clone(),
        );
        m.registry.register(
            "operations",
            "Runs ended, by outcome (completed, failed, stopped, paused, waiting, refused)",
            m.operations.clone(),
        );
        m.registry.register(
            "reconciles",
            "Resources reconciled, by kind",
            m.reconciles.clone(),
        );
        m.registry.register(
            "reconcile_errors",
            "Reconciles that failed on an API error, by kind",
            m.reconcile_errors.clone(),
        );
        m.registry.register(
            "api_requests",
            "API requests by verb (the method of nodejob-core's traits) and HTTP code (2xx: \
             answered; none: no answer)",
            m.requests.clone(),
        );
        m.registry.register(
            "lease_holder",
            "1 for the holder of the rolls' Lease as this replica last saw it",
            m.lease_holder.clone(),
        );
        m.registry
            .register("leader", "1 while this replica leads", m.leader.clone());
        m.registry.register(
            "paused",
            "1 while a resource is paused (spec.paused) or its run waits on the pause switch",
            m.paused.clone(),
        );
        m.registry.register_with_unit(
            "last_progress_timestamp",
            "When the run under way last moved (Unix time): alert when it stands still",
            Unit::Seconds,
            m.last_progress.clone(),
        );
        m
    }

    /// The Prometheus text format (0.0.4), as `text/plain; version=0.0.4` serves it.
    pub fn prometheus_text(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }

    /// The OpenMetrics text format (ends with `# EOF`).
    pub fn openmetrics_text(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }

    /// Whether the apiserver has answered this replica (with anything but a transport error).
    pub fn answered(&self) -> bool {
        self.answered.load(Ordering::Relaxed)
    }

    /// A run's progress event, at `now` (Unix seconds of the backend's wall clock).
    pub fn progress(&self, event: &Progress, now: f64) {
        let state = |state: &str| OperationState {
            operation: UPGRADE.into(),
            state: state.into(),
        };
        match event {
            Progress::Planned { nodes } => {
                for s in STATES {
                    self.nodes.get_or_create(&state(s)).set(0);
                }
                self.nodes
                    .get_or_create(&state("planned"))
                    .set(i64::try_from(*nodes).unwrap_or(i64::MAX));
                self.paused.set(0);
            }
            Progress::StepFinished { step, took_ms, .. } => {
                self.step(UPGRADE, step.as_str(), *took_ms);
            }
            Progress::NodeFinished {
                result, took_ms, ..
            } => {
                let label = match result {
                    NodeResult::Upgraded => "upgraded",
                    NodeResult::Skipped { .. } => "skipped",
                    NodeResult::Failed(_) => "failed",
                    NodeResult::RolledBack { .. } => "rolled_back",
                    NodeResult::Blocked { .. } => "blocked",
                    NodeResult::Interrupted { .. } => "interrupted",
                    #[allow(unreachable_patterns)]
                    _ => "other",
                };
                self.node_cycle_seconds
                    .get_or_create(&OperationResult {
                        operation: UPGRADE.into(),
                        result: label.into(),
                    })
                    .observe(seconds(*took_ms));
                if matches!(result, NodeResult::Blocked { .. }) {
                    self.evictions
                        .get_or_create(&EvictionResult {
                            result: "blocked".into(),
                        })
                        .inc();
                }
            }
            Progress::Driver(UpgradeEvent::PodsEvicted { pods, .. }) => {
                self.evictions
                    .get_or_create(&EvictionResult {
                        result: "evicted".into(),
                    })
                    .inc_by(pods.len() as u64);
            }
            Progress::Paused { .. } => {
                self.paused.set(1);
            }
            Progress::Resumed { .. } => {
                self.paused.set(0);
            }
            _ => {}
        }
        self.moved(now);
    }

    /// A step of `operation` took `took_ms` (milliseconds of the backend's clock).
    pub fn step(&self, operation: &str, step: &str, took_ms: u64) {
        self.step_seconds
            .get_or_create(&OperationStep {
                operation: operation.into(),
                step: step.to_ascii_lowercase(),
            })
            .observe(seconds(took_ms));
    }

    /// The run under way moved at `now` (Unix seconds).
    pub fn moved(&self, now: f64) {
        self.last_progress.set(now);
    }

    /// The counts of the rotation under way, as its status says them.
    pub fn rotation_counts(&self, counts: &nodejob_crd::PhaseCounts) {
        for (s, n) in [
            ("planned", counts.nodes),
            ("staged", counts.staged),
            ("issued", counts.issued),
            ("finalized", counts.finalized),
            ("failed", counts.failed),
        ] {
            self.nodes
                .get_or_create(&OperationState {
                    operation: ROTATE_CA.into(),
                    state: s.into(),
                })
                .set(i64::from(n));
        }
    }

    /// The counts of the run under way, as its status says them.
    pub fn counts(&self, counts: &nodejob_crd::UpgradeCounts) {
        for (s, n) in [
            ("planned", counts.nodes),
            ("in_progress", counts.in_progress),
            ("soaking", counts.soaking),
            ("up_to_date", counts.up_to_date),
            ("failed", counts.failed),
            ("blocked", counts.blocked),
            ("rolled_back", counts.rolled_back),
        ] {
            self.nodes
                .get_or_create(&OperationState {
                    operation: UPGRADE.into(),
                    state: s.into(),
                })
                .set(i64::from(n));
        }
    }

    /// A run of `operation` ended with `outcome`; `versions`, if any, are its nodes' at its
    /// end.
    pub fn ended(&self, operation: &str, outcome: &str, versions: &[String]) {
        self.operations
            .get_or_create(&OperationOutcome {
                operation: operation.into(),
                outcome: outcome.into(),
            })
            .inc();
        if !versions.is_empty() {
            self.node_versions.clear();
            for v in versions {
                self.node_versions
                    .get_or_create(&Version { version: v.clone() })
                    .inc();
            }
        }
    }

    /// A resource of `kind` reconciled; `failed`: on an API error.
    pub fn reconciled(&self, kind: &str, failed: bool) {
        let kind = Kind { kind: kind.into() };
        self.reconciles.get_or_create(&kind).inc();
        if failed {
            self.reconcile_errors.get_or_create(&kind).inc();
        }
    }

    /// Whether this replica leads.
    pub fn leading(&self, yes: bool) {
        self.leader.set(i64::from(yes));
    }

    /// Whether a resource is paused by its spec.
    pub fn paused(&self, yes: bool) {
        self.paused.set(i64::from(yes));
    }

    /// Who holds the rolls' Lease, as last seen (`None`: nobody this replica knows of).
    pub fn lease_holder(&self, holder: Option<&str>) {
        self.lease_holder.clear();
        if let Some(holder) = holder {
            self.lease_holder
                .get_or_create(&Holder {
                    holder: holder.into(),
                })
                .set(1);
        }
    }

    /// One API request's answer.
    fn request(&self, verb: nodejob_core::Verb, answer: &ApiResult<Answer>) {
        let code = match answer {
            Ok(_) => "2xx".to_string(),
            Err(e) if e.code == 0 => "none".to_string(),
            Err(e) => e.code.to_string(),
        };
        if !matches!(answer, Err(e) if e.code == 0) {
            self.answered.store(true, Ordering::Relaxed);
        }
        self.requests
            .get_or_create(&VerbCode {
                verb: verb.method().into(),
                code,
            })
            .inc();
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// `api`'s verbs, each request counted in [`Metrics`] by verb and code.
pub struct Counted<A: ?Sized> {
    metrics: Arc<Metrics>,
    api: Arc<A>,
}

impl<A: ?Sized> Counted<A> {
    /// `api`, counted in `metrics`.
    pub fn new(api: Arc<A>, metrics: Arc<Metrics>) -> Self {
        Counted { metrics, api }
    }
}

impl<A: ?Sized + Send + Sync> Layer for Counted<A> {
    type Below = A;

    fn below(&self) -> &A {
        &self.api
    }

    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let verb = request.verb();
        let answer = serve.await;
        self.metrics.request(verb, &answer);
        answer
    }
}
