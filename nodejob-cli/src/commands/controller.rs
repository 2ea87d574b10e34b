//! `nodejob controller`: the declarative rolls reconciled (`nodejob-controller`), on the
//! kubeconfig's cluster until Ctrl-C, or on a simulated one (`--simulate N -f FILE`) until
//! every resource given is settled. A resource's spec is read as the flags of `nodejob
//! upgrade` are ([`SpecPlanner`]), so both are refused for the same reasons.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_controller::kind::Declared;
use nodejob_controller::metrics::{Counted, Metrics};
use nodejob_controller::{Controller, Planner, Settings};
use nodejob_core::{Change, Clock};
use nodejob_crd::{
    CARotation, CARotationSpec, NodeUpgrade, NodeUpgradeSpec, OnFailure, OnUndrainable, Roll,
    RollApi, TrustDomain,
};
use upgrade_driver::{Plan, Stop};

use crate::args::{ControllerArgs, Global};
use crate::backend::{Api, Backend};
use crate::commands::endpoints;
use crate::exit::Exit;
use crate::interrupt::on_interrupt;
use crate::parse::{self, ParseError};
use crate::settings::{Field, NewCa, Refused, RotationSettings, UpgradeSettings, refusal_said};

/// Why a resource's spec makes no settings: named by the spec's field (`spec.drainTimeout`),
/// as `kubectl explain` names it, never by a flag.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpecError {
    /// A value that does not read by its grammar (a duration, `maxUnavailable`,
    /// `versionFrom`).
    #[error("{}: {cause}", field.spec())]
    Value {
        /// The field.
        field: Field,
        /// Why it does not read.
        cause: ParseError,
    },
    /// A count below zero.
    #[error("{}: {value} is negative", field.spec())]
    Negative {
        /// The field.
        field: Field,
        /// The count given.
        value: i32,
    },
    /// `maxUnavailable: 0`, which would start no node: holding a roll is `paused`'s.
    #[error("spec.maxUnavailable: 0 starts no node; to hold the roll, set spec.paused")]
    NoneUnavailable,
    /// The CA referenced in a ConfigMap or a Secret, which this controller does not read.
    #[error(
        "spec.ca.{what} ({namespace}/{name}): this controller reads the CA from spec.ca.pem \
         only; put the CA's certificate (PEM, no key) there"
    )]
    CaReference {
        /// `configMapRef` or `secretRef`.
        what: &'static str,
        /// The object's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `spec.ca` with none, or more than one, of its sources.
    #[error("spec.ca: exactly one of pem, configMapRef and secretRef")]
    CaSources,
    /// A selector requirement whose operator no selector has.
    #[error(
        "spec.selector: {operator:?} is not a valid label selector operator for {key} (In, \
         NotIn, Exists, DoesNotExist)"
    )]
    SelectorOperator {
        /// The requirement's key.
        key: String,
        /// The operator given.
        operator: String,
    },
}

/// Why flags have no resource form (`upgrade --apply`, `rotate-ca --apply`): named by the
/// flag. Bad usage (exit 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NoResourceForm {
    /// `--selector` does not parse.
    #[error("--selector {text:?}: {cause}")]
    Selector {
        /// The selector given.
        text: String,
        /// Why it does not parse.
        cause: nodejob_core::selector::SelectorError,
    },
    /// `--selector` compares (`k>n`, `k<n`), which a `LabelSelector` cannot say.
    #[error(
        "--selector {text:?}: a NodeUpgrade's selector is a LabelSelector, which has no \
         comparison (>, <) of {key}; name the nodes with --nodes"
    )]
    Comparison {
        /// The selector given.
        text: String,
        /// The key compared.
        key: String,
    },
}

/// Flags with no resource form: bad usage (exit 2), as any flag refused.
impl From<NoResourceForm> for Exit {
    fn from(e: NoResourceForm) -> Self {
        Exit::usage(e.to_string())
    }
}

/// A spec read as the command reads its flags.
pub(crate) struct SpecPlanner {
    /// The namespace of the host Jobs, the Lease and the Events (`--namespace`).
    pub(crate) namespace: String,
}

/// nodejob-controller's `Planner` takes a refusal as text: a spec's refusal is said here, once,
/// naming the spec's fields.
impl Planner for SpecPlanner {
    fn upgrade(&self, spec: &NodeUpgradeSpec) -> Result<Plan, String> {
        let settings = upgrade_settings(spec).map_err(|e| e.to_string())?;
        settings.plan(&self.namespace).map_err(spec_refusal)
    }

    fn rotate(&self, spec: &CARotationSpec) -> Result<certs_driver::Plan, String> {
        let settings = rotation_settings(spec).map_err(|e| e.to_string())?;
        settings.plan(&self.namespace).map_err(spec_refusal)
    }

    fn said(&self, refusal: String) -> String {
        crate::settings::rule_said(&refusal, Field::spec)
    }
}

/// Settings refused, as a resource's status says it: naming the spec's field.
fn spec_refusal(refused: Refused) -> String {
    match refused {
        Refused::Value { field, why } => format!("{}: {why}", field.spec()),
        Refused::Plan { field, rule } => refusal_said(&field, &rule, Field::spec),
        Refused::Unreadable { path, why } => format!("{}: {why}", path.display()),
        Refused::NoCa => "spec.ca: required".into(),
    }
}

/// The duration `value` of `field`, if given.
fn duration(field: Field, value: Option<&str>) -> Result<Option<Duration>, SpecError> {
    (value.map(parse::duration).transpose()).map_err(|cause| SpecError::Value { field, cause })
}

/// The count `value` of `field`, if given; refused below zero.
fn count(field: Field, value: Option<i32>) -> Result<Option<u32>, SpecError> {
    (value.map(|n| u32::try_from(n).map_err(|_| SpecError::Negative { field, value: n })))
        .transpose()
}

/// A `CARotation`'s spec as the settings the flags of `nodejob rotate-ca` would make. The CA
/// is read from `spec.ca.pem`; a ConfigMap or Secret reference is refused, naming it (the
/// controller reads no ConfigMap or Secret yet: its RBAC grants none).
pub(crate) fn rotation_settings(spec: &CARotationSpec) -> Result<RotationSettings, SpecError> {
    let pem = match (&spec.ca.pem, &spec.ca.config_map_ref, &spec.ca.secret_ref) {
        (Some(pem), None, None) => pem.clone(),
        (None, Some(r), None) | (None, None, Some(r)) => {
            let what = if spec.ca.config_map_ref.is_some() {
                "configMapRef"
            } else {
                "secretRef"
            };
            return Err(SpecError::CaReference {
                what,
                namespace: r.namespace.clone(),
                name: r.name.clone(),
            });
        }
        _ => return Err(SpecError::CaSources),
    };
    Ok(RotationSettings {
        new_ca: NewCa::Pem(pem),
        selector: (spec.selector.as_ref())
            .map(selector_text)
            .transpose()?
            .filter(|s| !s.is_empty()),
        nodes: spec.nodes.clone(),
        concurrency: count(Field::Concurrency, spec.concurrency)?,
        deadline: duration(Field::Deadline, spec.deadline.as_deref())?,
        ready_timeout: duration(Field::ReadyTimeout, spec.ready_timeout.as_deref())?,
        restart_grace: duration(Field::RestartGrace, spec.restart_grace.as_deref())?,
        cluster_wide: Some(spec.trust_domain == TrustDomain::Cluster),
        binary: None,
        window: spec.window.clone(),
        failure_budget: count(Field::FailureBudget, spec.failure_budget)?,
    })
}

/// The `CARotation` spec that `settings` (the flags of `nodejob rotate-ca`) describe, its CA
/// `pem` (the certificate the plan read); `abort`: `--abort`. The inverse of
/// [`rotation_settings`], so a resource written by `rotate-ca --apply` is rotated as the
/// command line would have rotated it.
pub(crate) fn rotation_spec(
    settings: &RotationSettings,
    pem: &str,
    abort: bool,
) -> Result<CARotationSpec, NoResourceForm> {
    use nodejob_core::duration::said;
    let count = |n: Option<u32>| n.map(|n| i32::try_from(n).unwrap_or(i32::MAX));
    Ok(CARotationSpec {
        ca: nodejob_crd::CaSource {
            pem: Some(pem.to_string()),
            config_map_ref: None,
            secret_ref: None,
        },
        selector: (settings.selector.as_deref())
            .filter(|s| !s.trim().is_empty())
            .map(label_selector)
            .transpose()?,
        nodes: settings.nodes.clone(),
        trust_domain: if settings.cluster_wide == Some(false) {
            TrustDomain::Selected
        } else {
            TrustDomain::Cluster
        },
        concurrency: count(settings.concurrency),
        deadline: settings.deadline.map(said),
        restart_grace: settings.restart_grace.map(said),
        ready_timeout: settings.ready_timeout.map(said),
        window: settings.window.clone(),
        failure_budget: count(settings.failure_budget),
        paused: false,
        abort,
    })
}

/// `spec` as the settings the flags of `nodejob upgrade` would make.
pub(crate) fn upgrade_settings(spec: &NodeUpgradeSpec) -> Result<UpgradeSettings, SpecError> {
    let value = |field: Field| move |cause| SpecError::Value { field, cause };
    let max_unavailable = match &spec.max_unavailable {
        IntOrString::Int(0) => return Err(SpecError::NoneUnavailable),
        IntOrString::Int(n) => parse::max_unavailable(&n.to_string()),
        IntOrString::String(s) => parse::max_unavailable(s),
    }
    .map_err(value(Field::MaxUnavailable))?;
    Ok(UpgradeSettings {
        to: spec.target.clone(),
        selector: (spec.selector.as_ref())
            .map(selector_text)
            .transpose()?
            .filter(|s| !s.is_empty()),
        nodes: spec.nodes.clone(),
        max_unavailable: Some(max_unavailable),
        drain_timeout: duration(Field::DrainTimeout, spec.drain_timeout.as_deref())?,
        delete_emptydir_data: spec.delete_empty_dir_data,
        force: spec.force,
        deadline: duration(Field::Deadline, spec.deadline.as_deref())?,
        reboot_timeout: duration(Field::RebootTimeout, spec.reboot_timeout.as_deref())?,
        binary: None,
        version_from: Some(
            parse::version_source(&spec.version_from).map_err(value(Field::VersionFrom))?,
        ),
        window: spec.window.clone(),
        failure_budget: count(Field::FailureBudget, spec.failure_budget)?,
        health_check: (!spec.health_check.is_empty()).then(|| spec.health_check.clone()),
        allow_downgrade: spec.allow_downgrade,
        on_undrainable: Some(match spec.on_undrainable {
            OnUndrainable::Fail => upgrade_driver::Undrainable::Fail,
            OnUndrainable::Skip => upgrade_driver::Undrainable::Skip,
            OnUndrainable::Quarantine => upgrade_driver::Undrainable::Quarantine,
        }),
        max_blocked: count(Field::MaxBlocked, spec.max_blocked)?,
        soak: duration(Field::Soak, spec.soak.as_deref())?,
        allow_skew: spec.allow_skew,
        on_failure: Some(match spec.on_failure {
            OnFailure::Stop => upgrade_driver::OnFailure::Stop,
            OnFailure::Rollback => upgrade_driver::OnFailure::Rollback,
        }),
    })
}

/// The `NodeUpgrade` spec that `settings` (the flags of `nodejob upgrade`) describe: the
/// inverse of [`upgrade_settings`], so a resource written by `upgrade --apply` is rolled as the
/// command line would have rolled it.
pub(crate) fn upgrade_spec(settings: &UpgradeSettings) -> Result<NodeUpgradeSpec, NoResourceForm> {
    use nodejob_core::duration::said;
    let said_opt = |d: Option<Duration>| d.map(said);
    let count = |n: Option<u32>| n.map(|n| i32::try_from(n).unwrap_or(i32::MAX));
    Ok(NodeUpgradeSpec {
        target: settings.to.clone(),
        version_from: match &settings.version_from {
            None | Some(upgrade_driver::VersionSource::KubeletVersion) => "kubelet".into(),
            Some(upgrade_driver::VersionSource::OsImage) => "os-image".into(),
            Some(upgrade_driver::VersionSource::Label(key)) => format!("label={key}"),
        },
        selector: (settings.selector.as_deref())
            .filter(|s| !s.trim().is_empty())
            .map(label_selector)
            .transpose()?,
        nodes: settings.nodes.clone(),
        max_unavailable: match settings.max_unavailable {
            Some(upgrade_driver::MaxUnavailable::Percent(p)) => {
                IntOrString::String(format!("{p}%"))
            }
            Some(upgrade_driver::MaxUnavailable::Count(n)) => {
                IntOrString::Int(i32::try_from(n).unwrap_or(i32::MAX))
            }
            None => IntOrString::Int(1),
        },
        drain_timeout: said_opt(settings.drain_timeout),
        delete_empty_dir_data: settings.delete_emptydir_data,
        force: settings.force,
        on_undrainable: match settings.on_undrainable {
            None | Some(upgrade_driver::Undrainable::Fail) => OnUndrainable::Fail,
            Some(upgrade_driver::Undrainable::Skip) => OnUndrainable::Skip,
            Some(upgrade_driver::Undrainable::Quarantine) => OnUndrainable::Quarantine,
        },
        max_blocked: count(settings.max_blocked),
        deadline: said_opt(settings.deadline),
        reboot_timeout: said_opt(settings.reboot_timeout),
        window: settings.window.clone(),
        failure_budget: count(settings.failure_budget),
        on_failure: match settings.on_failure {
            None | Some(upgrade_driver::OnFailure::Stop) => OnFailure::Stop,
            Some(upgrade_driver::OnFailure::Rollback) => OnFailure::Rollback,
        },
        soak: said_opt(settings.soak),
        health_check: settings.health_check.clone().unwrap_or_default(),
        allow_downgrade: settings.allow_downgrade,
        allow_skew: settings.allow_skew,
        paused: false,
    })
}

/// `-l`'s string form as a `LabelSelector` (`k=v` a match label; `k!=v` NotIn one value); the
/// comparisons `k>n`, `k<n` have no `LabelSelector` form and are refused.
fn label_selector(text: &str) -> Result<LabelSelector, NoResourceForm> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use nodejob_core::selector::{LabelSelector as Parsed, Operator};
    let parsed = Parsed::parse(text).map_err(|cause| NoResourceForm::Selector {
        text: text.into(),
        cause,
    })?;
    let mut labels = std::collections::BTreeMap::new();
    let mut expressions = Vec::new();
    for r in parsed.requirements() {
        let expression = |operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
            key: r.key.clone(),
            operator: operator.into(),
            values,
        };
        match r.operator {
            Operator::Equals => {
                labels.insert(r.key.clone(), r.values[0].clone());
            }
            Operator::NotEquals => expressions.push(expression("NotIn", Some(r.values.clone()))),
            Operator::In => expressions.push(expression("In", Some(r.values.clone()))),
            Operator::NotIn => expressions.push(expression("NotIn", Some(r.values.clone()))),
            Operator::Exists => expressions.push(expression("Exists", None)),
            Operator::DoesNotExist => expressions.push(expression("DoesNotExist", None)),
            _ => {
                return Err(NoResourceForm::Comparison {
                    text: text.into(),
                    key: r.key.clone(),
                });
            }
        }
    }
    Ok(LabelSelector {
        match_labels: (!labels.is_empty()).then_some(labels),
        match_expressions: (!expressions.is_empty()).then_some(expressions),
    })
}

/// A `LabelSelector` in the string form `-l` takes (`k=v,k in (a,b),!k`), as the apiserver
/// turns one into a selector (`LabelSelectorAsSelector` in `apimachinery/pkg/apis/meta/v1`).
pub(crate) fn selector_text(selector: &LabelSelector) -> Result<String, SpecError> {
    let mut parts: Vec<String> = (selector.match_labels.iter().flatten())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            operator => {
                return Err(SpecError::SelectorOperator {
                    key: e.key.clone(),
                    operator: operator.into(),
                });
            }
        });
    }
    Ok(parts.join(","))
}

/// Runs `nodejob controller`.
pub(crate) fn controller(global: &Global, args: ControllerArgs) -> Result<Exit, Exit> {
    let manifests = (args.files.iter())
        .map(|f| read_manifest(f))
        .collect::<Result<Vec<_>, _>>()?;
    if args.sim.simulate.is_some() && manifests.is_empty() {
        return Err(Exit::usage(
            "--simulate: give the NodeUpgrades and CARotations to reconcile with -f FILE (a \
             simulated cluster has none of its own)",
        ));
    }
    let simulated = args.sim.simulate.is_some();
    // Served on a cluster by default (the Deployment's probes and scrape find them there);
    // simulated, only when asked.
    let on = |given: &Option<String>, default: &str| {
        given
            .clone()
            .or_else(|| (!simulated).then(|| default.to_string()))
    };
    let metrics_at = (on(&args.metrics_bind_address, ":8080"))
        .map(|a| endpoints::address("metrics-bind-address", &a))
        .transpose()?
        .flatten();
    let probes_at = (on(&args.health_probe_bind_address, ":8081"))
        .map(|a| endpoints::address("health-probe-bind-address", &a))
        .transpose()?
        .flatten();
    let metrics = Arc::new(Metrics::new());
    serve(metrics_at, probes_at, &metrics)?;
    let stop = Stop::new();
    let _notice = on_interrupt(Some(stop.clone()), Duration::from_secs(60));
    let backend = Backend::new(global, args.sim.simulate)
        .clocked(args.sim.speed, args.sim.start.simulate_start);
    let namespace = global.namespace.clone();
    backend.block_on(|t| async move {
        let api: Arc<dyn Api> = t.api.clone();
        // Paced as the command's simulations are: when a person watches, unless --speed says.
        let speed = t.speed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
        if let Some(setup) = &t.simulated {
            for line in crate::present::simulated::banner(setup, speed) {
                outln!("{line}");
            }
        }
        let pacer = t.pacer(speed);
        if let Some(fake) = &t.fake {
            fake.install_custom_kind(NodeUpgrade::KIND);
            fake.install_custom_kind(CARotation::KIND);
            for manifest in &manifests {
                let (kind, name, created) = match manifest {
                    Manifest::Upgrade(roll) => (
                        "NodeUpgrade",
                        roll.metadata.name.clone(),
                        api.create_roll(roll).await.map(drop),
                    ),
                    Manifest::Rotation(roll) => (
                        "CARotation",
                        roll.metadata.name.clone(),
                        api.create_roll(roll).await.map(drop),
                    ),
                };
                created.map_err(|e| {
                    Exit::usage(format!("{kind} {}: {e}", name.unwrap_or_default()))
                })?;
            }
        }
        let planner = Arc::new(SpecPlanner { namespace });
        let counted = Arc::new(Counted::new(api.clone(), metrics.clone()));
        let mut controller =
            Controller::new(counted, planner, Settings::default()).with_metrics(metrics);
        // On a cluster, the resources and their changes come from kube-runtime's controller.
        if let Some(kube) = t.kube.as_ref().filter(|_| !simulated) {
            let informers = super::informers::KubeInformers {
                client: kube.client().clone(),
            };
            controller = controller.with_informers(Arc::new(informers));
        }
        // In a Pod (`NODE_NAME` from `spec.nodeName`, as deploy/controller sets it): the node
        // it runs on goes last, and its leader hands over before that node is drained.
        if let Some(node) = std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty())
            && !simulated
        {
            controller = controller.on_node(node);
        }
        let watching = watch(&api, &stop, simulated, pacer);
        // On a cluster, replicas elect a leader; a simulated cluster has this one alone.
        let election = nodejob_core::lease::LeaseConfig {
            namespace: global.namespace.clone(),
            name: ELECTION_LEASE.into(),
            identity: identity(),
            duration: Duration::from_secs(15),
        };
        let reconciling = async {
            if simulated {
                controller.run(&stop).await
            } else {
                controller.run_elected(&election, &stop).await
            }
        };
        let (ran, shown) = tokio::join!(reconciling, watching);
        ran.map_err(|e| Exit::failed(format!("the controller stopped: {e}")))?;
        let settled = shown?;
        if simulated {
            let failed = |e: nodejob_core::ApiError| Exit::failed(e.to_string());
            let upgrades = api.list_rolls_at::<NodeUpgrade>().await.map_err(failed)?;
            let rotations = api.list_rolls_at::<CARotation>().await.map_err(failed)?;
            if !upgrades.rolls.is_empty() || rotations.rolls.is_empty() {
                out!("{}", table(&upgrades.rolls));
            }
            if !rotations.rolls.is_empty() {
                out!("{}", rotation_table(&rotations.rolls));
            }
        }
        Ok(if settled.iter().all(|ready| *ready) {
            Exit::ok()
        } else {
            Exit::failed(
                "a resource stalled; its status says why (kubectl describe nu/NAME or car/NAME)",
            )
        })
    })
}

/// Starts serving `/metrics` on `metrics_at` and the probes on `probes_at` (one listener when
/// both are one address), for the life of the process.
fn serve(
    metrics_at: Option<std::net::SocketAddr>,
    probes_at: Option<std::net::SocketAddr>,
    metrics: &Arc<Metrics>,
) -> Result<(), Exit> {
    use endpoints::Serves;
    let mut listeners = Vec::new();
    match (metrics_at, probes_at) {
        (Some(m), Some(p)) if m == p => {
            let both = Serves {
                metrics: true,
                probes: true,
            };
            listeners.push((endpoints::bind("metrics-bind-address", m)?, both));
        }
        (m, p) => {
            if let Some(m) = m {
                let serves = Serves {
                    metrics: true,
                    probes: false,
                };
                listeners.push((endpoints::bind("metrics-bind-address", m)?, serves));
            }
            if let Some(p) = p {
                let serves = Serves {
                    metrics: false,
                    probes: true,
                };
                listeners.push((endpoints::bind("health-probe-bind-address", p)?, serves));
            }
        }
    }
    for (listener, serves) in &listeners {
        if let Ok(at) = listener.local_addr() {
            tracing::info!(address = %at, metrics = serves.metrics, probes = serves.probes, "serving");
        }
    }
    if listeners.is_empty() {
        return Ok(());
    }
    endpoints::spawn(listeners, metrics.clone())
}

/// The Lease the controller's replicas elect their leader by (in `--namespace`).
pub(crate) const ELECTION_LEASE: &str = "nodejob-controller";

/// Who this replica is in the election: its Pod's name (`POD_NAME`, from the downward API in
/// the Deployment) or the host's, with the process id.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|| "nodejob-controller".into());
    format!("{host}-{}", std::process::id())
}

/// A manifest given with `-f`.
enum Manifest {
    Upgrade(NodeUpgrade),
    Rotation(CARotation),
}

/// Reads a `NodeUpgrade` or `CARotation` manifest (its `kind` says which).
fn read_manifest(path: &Path) -> Result<Manifest, Exit> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Exit::usage(format!("-f {}: {e}", path.display())))?;
    let value: serde_json::Value = serde_saphyr::from_str(&text)
        .map_err(|e| Exit::usage(format!("-f {}: not YAML: {e}", path.display())))?;
    let not = |kind: &str, e: serde_json::Error| {
        Exit::usage(format!("-f {}: not a {kind}: {e}", path.display()))
    };
    match value["kind"].as_str() {
        Some("CARotation") => serde_json::from_value(value)
            .map(Manifest::Rotation)
            .map_err(|e| not("CARotation", e)),
        Some("NodeUpgrade") => serde_json::from_value(value)
            .map(Manifest::Upgrade)
            .map_err(|e| not("NodeUpgrade", e)),
        other => Err(Exit::usage(format!(
            "-f {}: kind {}: give a NodeUpgrade or a CARotation",
            path.display(),
            other.unwrap_or("(none)")
        ))),
    }
}

/// How a kind is named in the lines printed (`nu/NAME`, as kubectl's short names).
trait Short: Declared {
    const SHORT: &'static str;
}

impl Short for NodeUpgrade {
    const SHORT: &'static str = "nu";
}

impl Short for CARotation {
    const SHORT: &'static str = "car";
}

/// The resources of a kind as its watch last said them; `rv` `None`: the kind is not served
/// (its CRD not installed), nothing to watch.
struct Watched<K> {
    rolls: std::collections::BTreeMap<String, K>,
    rv: Option<String>,
}

impl<K: Short> Watched<K> {
    /// Lists the kind.
    async fn list(api: &Arc<dyn Api>) -> Result<Self, Exit> {
        match api.list_rolls_at::<K>().await {
            Ok(at) => Ok(Watched {
                rolls: (at.rolls.into_iter())
                    .map(|r| (r.meta().name.clone().unwrap_or_default(), r))
                    .collect(),
                rv: Some(at.resource_version),
            }),
            Err(e) if e.is_not_found() => Ok(Watched {
                rolls: Default::default(),
                rv: None,
            }),
            Err(e) => Err(Exit::failed(format!("watching {}s: {e}", K::KIND.kind))),
        }
    }

    /// Waits for the next change (one watch until a change or its timeout); after an error
    /// (410 Gone, a broken watch), lists again a moment later.
    async fn next(&mut self, api: &Arc<dyn Api>) -> Result<(), Exit> {
        let Some(rv) = self.rv.clone() else {
            return std::future::pending().await;
        };
        match api.wait_rolls::<K>(&rv, Duration::from_secs(60)).await {
            Ok(changes) => {
                self.rv = Some(changes.resource_version);
                for change in changes.changes {
                    match change {
                        Change::Applied(r) => {
                            self.rolls
                                .insert(r.meta().name.clone().unwrap_or_default(), r);
                        }
                        Change::Deleted(r) => {
                            self.rolls
                                .remove(r.meta().name.as_deref().unwrap_or_default());
                        }
                        Change::TimedOut => {}
                    }
                }
            }
            Err(_) => {
                api.sleep(Duration::from_secs(1)).await;
                *self = Self::list(api).await?;
            }
        }
        Ok(())
    }

    /// Each resource's line: `nu/NAME Reason: message`.
    fn lines(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.rolls.iter().map(|(name, roll)| {
            let key = format!("{}/{name}", K::SHORT);
            let ready = (roll.current().into_iter())
                .flat_map(|s| K::said(s).1)
                .find(|c| c.type_ == "Ready");
            let line = match ready {
                Some(c) => format!("{key} {}: {}", c.reason, c.message),
                None => format!("{key} Pending: written, not yet reconciled"),
            };
            (key, line)
        })
    }

    /// Each resource: `Some(true)` once Ready for its generation, `Some(false)` once Stalled,
    /// else `None`.
    fn settled(&self) -> impl Iterator<Item = Option<bool>> + '_ {
        self.rolls.values().map(|roll| {
            let generation = roll.meta().generation?;
            let (observed, conditions) = K::said(roll.current()?);
            nodejob_controller::status::outcome_of(observed, conditions, generation)
        })
    }
}

/// Prints each resource's status as it changes (its Ready condition's reason and message);
/// simulated, asks `stop` once every resource is settled, and answers whether each is Ready.
async fn watch(
    api: &Arc<dyn Api>,
    stop: &Stop,
    simulated: bool,
    pacer: Option<crate::sim::Pacer>,
) -> Result<Vec<bool>, Exit> {
    let mut upgrades = Watched::<NodeUpgrade>::list(api).await?;
    let mut rotations = Watched::<CARotation>::list(api).await?;
    let mut said = std::collections::BTreeMap::new();
    loop {
        for (key, line) in upgrades.lines().chain(rotations.lines()) {
            if said.get(&key) != Some(&line) {
                if let Some(pacer) = &pacer {
                    pacer.pace();
                }
                let at = api.wall_time().strftime("%a %H:%M:%S");
                outln!("{at}  {line}");
                said.insert(key, line);
            }
        }
        let settled: Vec<Option<bool>> = upgrades.settled().chain(rotations.settled()).collect();
        if simulated && !settled.is_empty() && settled.iter().all(Option::is_some) {
            stop.request();
            return Ok(settled.into_iter().flatten().collect());
        }
        if stop.requested() {
            return Ok(settled.into_iter().map(|s| s == Some(true)).collect());
        }
        tokio::select! {
            next = upgrades.next(api) => next?,
            next = rotations.next(api) => next?,
            () = stop.asked() => {}
        }
    }
}

/// `kubectl get nu` of `rolls`.
fn table(rolls: &[NodeUpgrade]) -> String {
    let mut rows = vec![[
        "NAME".to_string(),
        "TARGET".into(),
        "READY".into(),
        "REASON".into(),
        "NODES".into(),
        "UP-TO-DATE".into(),
        "FAILED".into(),
    ]];
    for roll in rolls {
        let status = roll.status.clone().unwrap_or_default();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        rows.push([
            roll.metadata.name.clone().unwrap_or_default(),
            roll.spec.target.clone(),
            ready.map_or("<none>".into(), |c| c.status.clone()),
            ready.map_or("<none>".into(), |c| c.reason.clone()),
            status.counts.nodes.to_string(),
            status.counts.up_to_date.to_string(),
            status.counts.failed.to_string(),
        ]);
    }
    crate::present::table(&rows)
}

/// `kubectl get car` of `rolls`.
fn rotation_table(rolls: &[CARotation]) -> String {
    let mut rows = vec![[
        "NAME".to_string(),
        "FINGERPRINT".into(),
        "PHASE".into(),
        "READY".into(),
        "STAGED".into(),
        "ISSUED".into(),
        "FINALIZED".into(),
        "FAILED".into(),
    ]];
    for roll in rolls {
        let status = roll.status.clone().unwrap_or_default();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        rows.push([
            roll.metadata.name.clone().unwrap_or_default(),
            status
                .short_fingerprint
                .clone()
                .unwrap_or_else(|| "<none>".into()),
            format!("{:?}", status.phase),
            ready.map_or("<none>".into(), |c| c.status.clone()),
            status.counts.staged.to_string(),
            status.counts.issued.to_string(),
            status.counts.finalized.to_string(),
            status.counts.failed.to_string(),
        ]);
    }
    crate::present::table(&rows)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Each refusal of a resource's spec names the spec's field, and what would be taken.
    #[test]
    fn a_spec_refused_names_its_field_and_what_would_be_taken() -> anyhow::Result<()> {
        let upgrades = [
            (
                json!({"maxUnavailable": 0}),
                "spec.maxUnavailable: 0 starts no node; to hold the roll, set spec.paused",
            ),
            (
                json!({"maxUnavailable": "150%"}),
                "spec.maxUnavailable: 150% must be between 1% and 100%",
            ),
            (
                json!({"failureBudget": -1}),
                "spec.failureBudget: -1 is negative",
            ),
            (
                json!({"versionFrom": "osImage"}),
                "spec.versionFrom: \"osImage\" is none of kubelet, os-image, label=KEY (where \
                 each node reports its version)",
            ),
            (
                json!({"soak": "0s"}),
                "spec.soak: \"0s\": must be more than zero",
            ),
            (
                json!({"selector": {"matchExpressions": [
                    {"key": "rack", "operator": "Gt", "values": ["3"]}
                ]}}),
                "spec.selector: \"Gt\" is not a valid label selector operator for rack (In, \
                 NotIn, Exists, DoesNotExist)",
            ),
        ];
        for (fields, want) in upgrades {
            let mut spec = json!({"target": "v1.38.0", "maxUnavailable": 1});
            if let (Some(spec), Some(fields)) = (spec.as_object_mut(), fields.as_object()) {
                spec.extend(fields.clone());
            }
            let spec: NodeUpgradeSpec = serde_json::from_value(spec)?;
            let got = upgrade_settings(&spec).err().map(|e| e.to_string());
            assert_eq!(got.as_deref(), Some(want));
        }
        let rotations = [
            (
                json!({"configMapRef": {"namespace": "kube-system", "name": "ca"}}),
                "spec.ca.configMapRef (kube-system/ca): this controller reads the CA from \
                 spec.ca.pem only; put the CA's certificate (PEM, no key) there",
            ),
            (
                json!({"secretRef": {"namespace": "kube-system", "name": "ca"}}),
                "spec.ca.secretRef (kube-system/ca): this controller reads the CA from \
                 spec.ca.pem only; put the CA's certificate (PEM, no key) there",
            ),
            (
                json!({}),
                "spec.ca: exactly one of pem, configMapRef and secretRef",
            ),
        ];
        for (ca, want) in rotations {
            let spec: CARotationSpec = serde_json::from_value(json!({"ca": ca}))?;
            let got = rotation_settings(&spec).err().map(|e| e.to_string());
            assert_eq!(got.as_deref(), Some(want));
        }
        Ok(())
    }
}
