//! `nodejob controller`: the declarative rolls reconciled (`nodejob-controller`), on the
//! kubeconfig's cluster until Ctrl-C, or on a simulated one (`--simulate N -f FILE`) until
//! every resource given is settled. A resource's spec is read as the flags of `nodejob
//! upgrade` are ([`SpecPlanner`]), so both are refused for the same reasons.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodejob_controller::metrics::{Counted, Metrics};
use nodejob_controller::{Controller, Planner, Settings};
use nodejob_core::{Change, Clock};
use nodejob_crd::{NodeUpgrade, NodeUpgradeSpec, OnFailure, OnUndrainable, Roll, RollApi};
use upgrade_driver::{Plan, Stop};

use crate::args::{ControllerArgs, Global};
use crate::backend::{Api, Backend};
use crate::commands::endpoints;
use crate::exit::Exit;
use crate::interrupt::on_interrupt;
use crate::parse;
use crate::settings::{Field, Refused, UpgradeSettings, refusal_said};

/// A spec read as the command reads its flags.
pub(crate) struct SpecPlanner {
    /// The namespace of the host Jobs, the Lease and the Events (`--namespace`).
    pub(crate) namespace: String,
}

impl Planner for SpecPlanner {
    fn upgrade(&self, spec: &NodeUpgradeSpec) -> Result<Plan, String> {
        upgrade_settings(spec)?
            .plan(&self.namespace)
            .map_err(|refused| match refused {
                Refused::Value { field, why } => format!("{}: {why}", field.spec()),
                Refused::Plan { field, rule } => refusal_said(&field, &rule, Field::spec),
                Refused::Unreadable { path, why } => format!("{}: {why}", path.display()),
                Refused::NoCa => "spec.ca: required".into(),
            })
    }

    fn said(&self, refusal: String) -> String {
        crate::settings::rule_said(&refusal, Field::spec)
    }
}

/// `spec` as the settings the flags of `nodejob upgrade` would make.
pub(crate) fn upgrade_settings(spec: &NodeUpgradeSpec) -> Result<UpgradeSettings, String> {
    let refused = |field: Field| move |why: String| format!("{}: {why}", field.spec());
    let duration = |field: Field, value: &Option<String>| {
        (value.as_deref().map(parse::duration).transpose()).map_err(refused(field))
    };
    let count = |field: Field, value: Option<i32>| {
        value
            .map(|n| u32::try_from(n).map_err(|_| format!("{n} is negative")))
            .transpose()
            .map_err(refused(field))
    };
    let max_unavailable = match &spec.max_unavailable {
        IntOrString::Int(0) => Err("0 starts no node; to hold the roll, set spec.paused".into()),
        IntOrString::Int(n) => parse::max_unavailable(&n.to_string()),
        IntOrString::String(s) => parse::max_unavailable(s),
    }
    .map_err(refused(Field::MaxUnavailable))?;
    Ok(UpgradeSettings {
        to: spec.target.clone(),
        selector: (spec.selector.as_ref())
            .map(selector_text)
            .transpose()?
            .filter(|s| !s.is_empty()),
        nodes: spec.nodes.clone(),
        max_unavailable: Some(max_unavailable),
        drain_timeout: duration(Field::DrainTimeout, &spec.drain_timeout)?,
        delete_emptydir_data: spec.delete_empty_dir_data,
        force: spec.force,
        deadline: duration(Field::Deadline, &spec.deadline)?,
        reboot_timeout: duration(Field::RebootTimeout, &spec.reboot_timeout)?,
        binary: None,
        version_from: Some(
            parse::version_source(&spec.version_from).map_err(refused(Field::VersionFrom))?,
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
        soak: duration(Field::Soak, &spec.soak)?,
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
pub(crate) fn upgrade_spec(settings: &UpgradeSettings) -> Result<NodeUpgradeSpec, String> {
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
fn label_selector(text: &str) -> Result<LabelSelector, String> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use nodejob_core::selector::{LabelSelector as Parsed, Operator};
    let parsed = Parsed::parse(text).map_err(|e| format!("--selector {text:?}: {e}"))?;
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
                return Err(format!(
                    "--selector {text:?}: a NodeUpgrade's selector is a LabelSelector, which \
                     has no comparison (>, <) of {}; name the nodes with --nodes",
                    r.key
                ));
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
pub(crate) fn selector_text(selector: &LabelSelector) -> Result<String, String> {
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
            op => {
                return Err(format!(
                    "spec.selector: {:?} is not a valid label selector operator for {} \
                     (In, NotIn, Exists, DoesNotExist)",
                    op, e.key
                ));
            }
        });
    }
    Ok(parts.join(","))
}

/// Runs `nodejob controller`.
pub(crate) fn controller(global: &Global, args: ControllerArgs) -> Result<Exit, Exit> {
    let rolls = (args.files.iter())
        .map(|f| read_upgrade(f))
        .collect::<Result<Vec<_>, _>>()?;
    if args.sim.simulate.is_some() && rolls.is_empty() {
        return Err(Exit::usage(
            "--simulate: give the NodeUpgrades to reconcile with -f FILE (a simulated cluster \
             has none of its own)",
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
            for roll in &rolls {
                api.create_roll(roll).await.map_err(|e| {
                    Exit::usage(format!(
                        "NodeUpgrade {}: {e}",
                        roll.metadata.name.as_deref().unwrap_or_default()
                    ))
                })?;
            }
        }
        let planner = Arc::new(SpecPlanner { namespace });
        let counted = Arc::new(Counted::new(api.clone(), metrics.clone()));
        let mut controller =
            Controller::new(counted, planner, Settings::default()).with_metrics(metrics);
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
            let all = api
                .list_rolls_at::<NodeUpgrade>()
                .await
                .map_err(|e| Exit::failed(e.to_string()))?;
            out!("{}", table(&all.rolls));
        }
        Ok(if settled.iter().all(|ready| *ready) {
            Exit::ok()
        } else {
            Exit::failed("a NodeUpgrade stalled; its status says why (kubectl describe nu)")
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

/// Reads a `NodeUpgrade` manifest.
fn read_upgrade(path: &Path) -> Result<NodeUpgrade, Exit> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Exit::usage(format!("-f {}: {e}", path.display())))?;
    serde_saphyr::from_str(&text)
        .map_err(|e| Exit::usage(format!("-f {}: not a NodeUpgrade: {e}", path.display())))
}

/// Prints each resource's status as it changes (its Ready condition's reason and message);
/// simulated, asks `stop` once every resource is settled, and answers whether each is Ready.
async fn watch(
    api: &Arc<dyn Api>,
    stop: &Stop,
    simulated: bool,
    pacer: Option<crate::sim::Pacer>,
) -> Result<Vec<bool>, Exit> {
    let failed = |e: nodejob_core::ApiError| Exit::failed(format!("watching NodeUpgrades: {e}"));
    let at = api.list_rolls_at::<NodeUpgrade>().await.map_err(failed)?;
    let mut said = std::collections::BTreeMap::new();
    let mut last = by_name(at.rolls);
    let mut rv = at.resource_version;
    loop {
        for (name, roll) in &last {
            let line = line(name, roll);
            if said.get(name) != Some(&line) {
                if let Some(pacer) = &pacer {
                    pacer.pace();
                }
                let at = api.wall_time().strftime("%a %H:%M:%S");
                outln!("{at}  {line}");
                said.insert(name.clone(), line);
            }
        }
        let settled: Vec<Option<bool>> = last.values().map(settled).collect();
        if simulated && !settled.is_empty() && settled.iter().all(Option::is_some) {
            stop.request();
            return Ok(settled.into_iter().flatten().collect());
        }
        if stop.requested() {
            return Ok(settled.into_iter().map(|s| s == Some(true)).collect());
        }
        // One watch until a change (or its timeout), cut short by a stop.
        let changes = tokio::select! {
            c = api.wait_rolls::<NodeUpgrade>(&rv, Duration::from_secs(60)) => c,
            () = stop.asked() => continue,
        };
        match changes {
            Ok(changes) => {
                rv = changes.resource_version;
                for change in changes.changes {
                    match change {
                        Change::Applied(r) => {
                            last.insert(r.metadata.name.clone().unwrap_or_default(), r);
                        }
                        Change::Deleted(r) => {
                            last.remove(r.metadata.name.as_deref().unwrap_or_default());
                        }
                        Change::TimedOut => {}
                    }
                }
            }
            // Gone (410) or broken: the list read again, a moment later.
            Err(_) => {
                api.sleep(Duration::from_secs(1)).await;
                let at = api.list_rolls_at::<NodeUpgrade>().await.map_err(failed)?;
                rv = at.resource_version;
                last = by_name(at.rolls);
            }
        }
    }
}

/// `rolls` by name.
fn by_name(rolls: Vec<NodeUpgrade>) -> std::collections::BTreeMap<String, NodeUpgrade> {
    (rolls.into_iter())
        .map(|r| (r.metadata.name.clone().unwrap_or_default(), r))
        .collect()
}

/// `Some(true)` once Ready for its generation, `Some(false)` once Stalled, else `None`.
fn settled(roll: &NodeUpgrade) -> Option<bool> {
    let generation = roll.metadata.generation?;
    nodejob_controller::status::outcome(roll.status.as_ref(), generation)
}

/// One line of a resource's status: `nu/NAME Reason: message`.
fn line(name: &str, roll: &NodeUpgrade) -> String {
    let ready = (roll.status.iter())
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == "Ready");
    match ready {
        Some(c) => format!("nu/{name} {}: {}", c.reason, c.message),
        None => format!("nu/{name} Pending: written, not yet reconciled"),
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
