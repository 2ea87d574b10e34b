//! What the flags and the MCP tools' arguments mean for each operation: one settings type per
//! operation, filled by [`crate::commands`] from the flags and by [`crate::mcp`] from the tool's
//! arguments, and turned here, once, into the driver's plan (or the node Job's spec).
//!
//! A field left `None` takes the driver's default. A refusal ([`Refused`]) names the setting as
//! [`Field`]; each front end says it its own way ([`Field::flag`], [`Field::argument`]).
//!
//! ```text
//!  flags ──commands::<cmd>──▶ UpgradeSettings ──plan──▶ upgrade_driver::Plan
//!  MCP arguments ──mcp::params──▶ RotationSettings ──plan──▶ certs_driver::Plan
//!                                 JobSettings ──spec──▶ nodejob_core::Spec
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nodejob_core::drain::{EmptyDir, Unreplicated};
use nodejob_core::{Spec, trunc_name};
use upgrade_driver::MaxUnavailable;

use crate::parse;

/// The label key of `nodejob run`'s Jobs (its value: the node, as core hashes it).
pub(crate) const RUN_LABEL_KEY: &str = "stratum.ciq.com/run";

/// The CA `rotate-ca --simulate` rotates to when no `--new-ca` is given: a public certificate
/// made for the simulation alone (its key was discarded when it was signed), so a simulated
/// rotation needs no file and shows the same fingerprint every time.
pub(crate) const SIMULATED_CA: &str = include_str!("simulated-ca.pem");

/// `nodejob run`'s (and the `run` tool's) default deadline.
pub(crate) const RUN_DEADLINE: Duration = Duration::from_secs(10 * 60);

/// A setting, as the flags and the tools' arguments both have it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    /// The upgrade's target version.
    To,
    /// The label selector.
    Selector,
    /// The nodes by name.
    Nodes,
    /// How many nodes may be unavailable at once.
    MaxUnavailable,
    /// The drain's bound.
    DrainTimeout,
    /// A host Job's deadline.
    Deadline,
    /// The upgrade's reboot bound.
    RebootTimeout,
    /// The rotation's bound for a node to be Ready again.
    ReadyTimeout,
    /// The rotation's bound for a node to begin its restart.
    RestartGrace,
    /// Which nodes trust the CA.
    TrustDomain,
    /// The on-host binary.
    Binary,
    /// The maintenance window.
    Window,
    /// The rotation's concurrency.
    Concurrency,
    /// How many failed nodes stop a run.
    FailureBudget,
    /// The upgrade's health check.
    HealthCheck,
    /// The new CA, from `source` (a path, or the simulation's built-in one).
    NewCa {
        /// Where the certificate came from, as a person reads it.
        source: String,
    },
    /// The namespace (a global flag; the MCP server's).
    Namespace,
    /// Whether a downgrade is allowed.
    AllowDowngrade,
    /// What a node a budget blocks comes to.
    OnUndrainable,
    /// How many blocked nodes a roll goes on past.
    MaxBlocked,
    /// How long each upgraded node soaks.
    Soak,
    /// Whether the version skew policy may be broken.
    AllowSkew,
    /// What a failed node comes to.
    OnFailure,
    /// Where a node reports its version.
    VersionFrom,
    /// A field of the driver's plan that no setting names.
    Other(&'static str),
}

impl Field {
    /// The field of a driver's plan as the setting that fills it.
    pub(crate) fn of_plan(field: &'static str, new_ca: &str) -> Field {
        match field {
            "target" => Field::To,
            "selector" => Field::Selector,
            "nodes" => Field::Nodes,
            "max_unavailable" => Field::MaxUnavailable,
            "drain.timeout" => Field::DrainTimeout,
            "deadline" => Field::Deadline,
            "reboot_timeout" => Field::RebootTimeout,
            "ready_timeout" => Field::ReadyTimeout,
            "restart_grace" => Field::RestartGrace,
            "cluster_wide" => Field::TrustDomain,
            "binary" => Field::Binary,
            "concurrency" => Field::Concurrency,
            "failure_budget" => Field::FailureBudget,
            "health_check" => Field::HealthCheck,
            "ca_certificate" | "fingerprint" => Field::NewCa {
                source: new_ca.to_string(),
            },
            "namespace" => Field::Namespace,
            "downgrade" => Field::AllowDowngrade,
            "on_undrainable" => Field::OnUndrainable,
            "max_blocked" => Field::MaxBlocked,
            "soak" => Field::Soak,
            "skew" => Field::AllowSkew,
            "on_failure" => Field::OnFailure,
            "version_source" => Field::VersionFrom,
            f if f.starts_with("window") => Field::Window,
            f => Field::Other(f),
        }
    }

    /// As a resource's spec names it (`NodeUpgrade`, `CARotation`): `spec.maxUnavailable`.
    pub(crate) fn spec(&self) -> String {
        let field = match self {
            Field::To => "target",
            Field::Selector => "selector",
            Field::Nodes => "nodes",
            Field::MaxUnavailable => "maxUnavailable",
            Field::DrainTimeout => "drainTimeout",
            Field::Deadline => "deadline",
            Field::RebootTimeout => "rebootTimeout",
            Field::ReadyTimeout => "readyTimeout",
            Field::RestartGrace => "restartGrace",
            Field::TrustDomain => "trustDomain: Selected",
            Field::Binary => "binary (the controller's --binary)",
            Field::Window => "window",
            Field::Concurrency => "concurrency",
            Field::FailureBudget => "failureBudget",
            Field::HealthCheck => "healthCheck",
            Field::NewCa { .. } => "ca",
            Field::Namespace => "namespace (the controller's --namespace)",
            Field::AllowDowngrade => "allowDowngrade",
            Field::OnUndrainable => "onUndrainable",
            Field::MaxBlocked => "maxBlocked",
            Field::Soak => "soak",
            Field::AllowSkew => "allowSkew",
            Field::OnFailure => "onFailure",
            Field::VersionFrom => "versionFrom",
            Field::Other(f) => f,
        };
        format!("spec.{field}")
    }

    /// As the command line names it: `--new-ca FILE`, `--selector`.
    pub(crate) fn flag(&self) -> String {
        let flag = match self {
            Field::To => "--to",
            Field::Selector => "--selector",
            Field::Nodes => "--nodes",
            Field::MaxUnavailable => "--max-unavailable",
            Field::DrainTimeout => "--drain-timeout",
            Field::Deadline => "--deadline",
            Field::RebootTimeout => "--reboot-timeout",
            Field::ReadyTimeout => "--ready-timeout",
            Field::RestartGrace => "--restart-grace",
            // Named in a rule only as the way to rotate the selected nodes alone.
            Field::TrustDomain => "--trust-domain selected",
            Field::Binary => "--binary",
            Field::Window => "--window",
            Field::Concurrency => "--concurrency",
            Field::FailureBudget => "--failure-budget",
            Field::HealthCheck => "--health-check",
            Field::NewCa { source } if source.is_empty() => "--new-ca",
            Field::NewCa { source } => return format!("--new-ca {source}"),
            Field::Namespace => "--namespace",
            Field::AllowDowngrade => "--allow-downgrade",
            Field::OnUndrainable => "--on-undrainable",
            Field::MaxBlocked => "--max-blocked",
            Field::Soak => "--soak",
            Field::AllowSkew => "--allow-skew",
            Field::OnFailure => "--on-failure",
            Field::VersionFrom => "--version-from",
            Field::Other(f) => f,
        };
        flag.to_string()
    }

    /// As the MCP tools' arguments name it: `new_ca`, `drain_timeout`.
    pub(crate) fn argument(&self) -> &'static str {
        match self {
            Field::To => "to",
            Field::Selector => "selector",
            Field::Nodes => "nodes",
            Field::MaxUnavailable => "max_unavailable",
            Field::DrainTimeout => "drain_timeout",
            Field::Deadline => "deadline",
            Field::RebootTimeout => "reboot_timeout",
            Field::ReadyTimeout => "ready_timeout",
            Field::RestartGrace => "restart_grace",
            Field::TrustDomain => "trust_domain: \"selected\"",
            Field::Binary => "binary",
            Field::Window => "window",
            Field::Concurrency => "concurrency",
            Field::FailureBudget => "failure_budget",
            Field::HealthCheck => "health_check",
            Field::NewCa { .. } => "new_ca",
            Field::Namespace => "namespace (the server's --namespace)",
            Field::AllowDowngrade => "allow_downgrade",
            Field::OnUndrainable => "on_undrainable",
            Field::MaxBlocked => "max_blocked",
            Field::Soak => "soak",
            Field::AllowSkew => "allow_skew",
            Field::OnFailure => "on_failure",
            Field::VersionFrom => "version_from",
            Field::Other(f) => f,
        }
    }
}

/// A plan's refusal of `field` as a front end says it: `FIELD: rule`, the field named by
/// `name` (`--max-unavailable: ...`); but where the field is the override that would let the
/// plan through (`--allow-skew`, `--allow-downgrade`), which is not at fault, the rule alone,
/// which ends naming it (`...; refused without --allow-skew`).
pub(crate) fn refusal_said(field: &Field, rule: &str, name: impl Fn(&Field) -> String) -> String {
    let rule = rule_said(rule, &name);
    match field {
        Field::AllowSkew | Field::AllowDowngrade => rule,
        field => format!("{}: {rule}", name(field)),
    }
}

/// A driver's `rule` as a front end says it: each other field of the plan it names in
/// backticks (`` `max_unavailable` ``) named by `name` (a flag, an argument); any other
/// backticked text kept.
pub(crate) fn rule_said(rule: &str, name: impl Fn(&Field) -> String) -> String {
    let mut said = String::with_capacity(rule.len());
    let mut rest = rule;
    while let Some(open) = rest.find('`') {
        let Some(len) = rest[open + 1..].find('`') else {
            break;
        };
        let quoted = &rest[open + 1..open + 1 + len];
        said.push_str(&rest[..open]);
        match plan_field(quoted).map(|f| Field::of_plan(f, "")) {
            Some(field) if !matches!(field, Field::Other(_)) => said.push_str(&name(&field)),
            _ => said.push_str(&rest[open..open + len + 2]),
        }
        rest = &rest[open + len + 2..];
    }
    said.push_str(rest);
    said
}

/// `text` as one of the plan fields a rule may name, if it is one.
fn plan_field(text: &str) -> Option<&'static str> {
    const NAMED: [&str; 13] = [
        "max_unavailable",
        "failure_budget",
        "concurrency",
        "nodes",
        "selector",
        "window",
        "on_undrainable",
        "max_blocked",
        "soak",
        "skew",
        "downgrade",
        "on_failure",
        "cluster_wide",
    ];
    NAMED.into_iter().find(|f| *f == text)
}

/// Why settings make no plan.
#[derive(Debug)]
pub(crate) enum Refused {
    /// A value does not read (a window that is not `DAYS START-END [TZ]`).
    Value {
        /// The setting.
        field: Field,
        /// Why.
        why: String,
    },
    /// The new CA's file could not be read.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        why: std::io::Error,
    },
    /// No new CA was given, and there is no simulation to lend its own.
    NoCa,
    /// The driver refused the plan.
    Plan {
        /// The setting behind the plan's field.
        field: Field,
        /// The rule the field breaks; other fields it names are in backticks
        /// ([`rule_said`]).
        rule: String,
    },
}

/// An upgrade as asked for.
#[derive(Clone, Debug)]
pub(crate) struct UpgradeSettings {
    /// The target version.
    pub(crate) to: String,
    /// Only nodes matching this label selector.
    pub(crate) selector: Option<String>,
    /// Only these nodes.
    pub(crate) nodes: Vec<String>,
    /// How many nodes may be unavailable at once.
    pub(crate) max_unavailable: Option<MaxUnavailable>,
    /// The drain's bound per node.
    pub(crate) drain_timeout: Option<Duration>,
    /// Evict Pods with emptyDir volumes (`--delete-emptydir-data`, as kubectl drain's).
    pub(crate) delete_emptydir_data: bool,
    /// Evict Pods no controller manages (`--force`, as kubectl drain's).
    pub(crate) force: bool,
    /// The host upgrade Job's deadline.
    pub(crate) deadline: Option<Duration>,
    /// How long a node has to come back Ready at the target.
    pub(crate) reboot_timeout: Option<Duration>,
    /// The on-host binary.
    pub(crate) binary: Option<String>,
    /// Where each node reports its version.
    pub(crate) version_from: Option<upgrade_driver::VersionSource>,
    /// The maintenance window, as typed (`DAYS START-END [TZ]`).
    pub(crate) window: Option<String>,
    /// Stop starting nodes after this many failed.
    pub(crate) failure_budget: Option<u32>,
    /// The health check's argv.
    pub(crate) health_check: Option<Vec<String>>,
    /// Move nodes to an older version too (refused by default).
    pub(crate) allow_downgrade: bool,
    /// What a node a budget blocks comes to.
    pub(crate) on_undrainable: Option<upgrade_driver::Undrainable>,
    /// How many blocked nodes the roll goes on past.
    pub(crate) max_blocked: Option<u32>,
    /// How long each upgraded node soaks.
    pub(crate) soak: Option<Duration>,
    /// Go past the Kubernetes version skew policy (refused by default).
    pub(crate) allow_skew: bool,
    /// What a failed node comes to.
    pub(crate) on_failure: Option<upgrade_driver::OnFailure>,
}

impl UpgradeSettings {
    /// The upgrade's plan in `namespace`, this process holding the Lease.
    pub(crate) fn plan(&self, namespace: &str) -> Result<upgrade_driver::Plan, Refused> {
        let mut spec = upgrade_driver::PlanSpec::new(self.to.clone());
        spec.selector = self.selector.clone();
        spec.nodes = self.nodes.clone();
        if let Some(m) = self.max_unavailable {
            spec.max_unavailable = m;
        }
        if let Some(d) = self.drain_timeout {
            spec.drain.timeout = d;
        }
        if self.delete_emptydir_data {
            spec.drain.empty_dir = EmptyDir::Delete;
        }
        if self.force {
            spec.drain.unreplicated = Unreplicated::Force;
        }
        if let Some(d) = self.deadline {
            spec.deadline = d;
        }
        if let Some(d) = self.reboot_timeout {
            spec.reboot_timeout = d;
        }
        if let Some(binary) = &self.binary {
            spec.binary = binary.clone();
        }
        if let Some(source) = &self.version_from {
            spec.version_source = source.clone();
        }
        if let Some(budget) = self.failure_budget {
            spec.failure_budget = budget;
        }
        spec.namespace = namespace.to_string();
        spec.identity = identity();
        spec.health_check = self.health_check.clone();
        if self.allow_downgrade {
            spec.downgrade = upgrade_driver::Downgrade::Allow;
        }
        if self.allow_skew {
            spec.skew = upgrade_driver::Skew::Allow;
        }
        if let Some(window) = &self.window {
            spec.window = Some(parse::window(window).map_err(|why| Refused::Value {
                field: Field::Window,
                why: why.to_string(),
            })?);
        }
        if let Some(policy) = self.on_undrainable {
            spec.on_undrainable = policy;
        }
        if let Some(max) = self.max_blocked {
            if spec.on_undrainable == upgrade_driver::Undrainable::Fail {
                return Err(Refused::Value {
                    field: Field::MaxBlocked,
                    why: "applies only where undrainable nodes are skipped or quarantined; \
                          with fail (the default) a blocked drain fails its node"
                        .into(),
                });
            }
            spec.max_blocked = max;
        }
        if let Some(soak) = self.soak {
            spec.soak = Some(soak);
        }
        if let Some(policy) = self.on_failure {
            spec.on_failure = policy;
        }
        upgrade_driver::Plan::build(spec).map_err(|e| Refused::Plan {
            field: Field::of_plan(e.field, ""),
            rule: e.rule.clone(),
        })
    }
}

impl NewCa {
    /// Where the certificate comes from, as a person reads it (a path, or the simulation's
    /// built-in CA).
    pub(crate) fn source(&self) -> String {
        match self {
            NewCa::File(path) => path.display().to_string(),
            NewCa::Pem(pem) => match certs_driver::Fingerprint::of_pem(pem) {
                Ok(fingerprint) => format!("(the PEM text of CA {fingerprint})"),
                Err(_) => "(the PEM text given)".into(),
            },
            NewCa::Unset { .. } => "(the simulation's built-in CA)".into(),
        }
    }
}

/// Where the new CA comes from.
#[derive(Clone, Debug)]
pub(crate) enum NewCa {
    /// A PEM file.
    File(PathBuf),
    /// The PEM text itself (MCP's `new_ca` may hold it): never repeated, said by its
    /// fingerprint.
    Pem(String),
    /// None given: the simulation's built-in CA ([`SIMULATED_CA`]) on a simulated cluster.
    Unset {
        /// Whether the cluster is simulated.
        simulated: bool,
    },
}

/// A CA rotation (or its abort) as asked for.
#[derive(Clone, Debug)]
pub(crate) struct RotationSettings {
    /// The new CA.
    pub(crate) new_ca: NewCa,
    /// Only nodes matching this label selector.
    pub(crate) selector: Option<String>,
    /// Only these nodes.
    pub(crate) nodes: Vec<String>,
    /// How many workers run a phase at once.
    pub(crate) concurrency: Option<u32>,
    /// Each host Job's deadline.
    pub(crate) deadline: Option<Duration>,
    /// After `issue`, how long a node has to be Ready again.
    pub(crate) ready_timeout: Option<Duration>,
    /// After `issue`, how long a node may take to go NotReady.
    pub(crate) restart_grace: Option<Duration>,
    /// Whether every node of the cluster trusts the CA (`--trust-domain cluster`).
    pub(crate) cluster_wide: Option<bool>,
    /// The on-host binary.
    pub(crate) binary: Option<String>,
    /// The maintenance window, as typed (`DAYS START-END [TZ]`).
    pub(crate) window: Option<String>,
    /// Stop a phase after this many failed.
    pub(crate) failure_budget: Option<u32>,
}

impl RotationSettings {
    /// The rotation's plan in `namespace`, this process holding the Lease.
    pub(crate) fn plan(&self, namespace: &str) -> Result<certs_driver::Plan, Refused> {
        let (pem, source) = match &self.new_ca {
            NewCa::File(path) => {
                let bytes = std::fs::read(path).map_err(|why| Refused::Unreadable {
                    path: path.clone(),
                    why,
                })?;
                let source = self.new_ca.source();
                (pem_text(bytes, &source)?, source)
            }
            NewCa::Pem(pem) => (pem.clone(), self.new_ca.source()),
            NewCa::Unset { simulated: true } => (SIMULATED_CA.to_string(), self.new_ca.source()),
            NewCa::Unset { simulated: false } => return Err(Refused::NoCa),
        };
        let refused = |e: certs_driver::PlanError| Refused::Plan {
            field: Field::of_plan(e.field, &source),
            rule: e.rule.clone(),
        };
        let fingerprint = certs_driver::Fingerprint::of_pem(&pem).map_err(refused)?;
        let mut spec = certs_driver::PlanSpec::new(pem, fingerprint.as_str());
        spec.selector = self.selector.clone();
        spec.nodes = self.nodes.clone();
        if let Some(c) = self.concurrency {
            spec.concurrency = c;
        }
        if let Some(d) = self.deadline {
            spec.deadline = d;
        }
        if let Some(d) = self.ready_timeout {
            spec.ready_timeout = d;
        }
        if let Some(d) = self.restart_grace {
            spec.restart_grace = d;
        }
        if let Some(wide) = self.cluster_wide {
            spec.cluster_wide = wide;
        }
        if let Some(binary) = &self.binary {
            spec.binary = binary.clone();
        }
        if let Some(budget) = self.failure_budget {
            spec.failure_budget = budget;
        }
        if let Some(window) = &self.window {
            spec.window = Some(parse::window(window).map_err(|why| Refused::Value {
                field: Field::Window,
                why: why.to_string(),
            })?);
        }
        spec.namespace = namespace.to_string();
        spec.identity = identity();
        certs_driver::Plan::build(spec).map_err(refused)
    }
}

/// The text of the new CA's file `source`, refused when it is binary: DER (an X.509
/// certificate's binary form begins with a SEQUENCE, `0x30`) is named, with how to convert it.
fn pem_text(bytes: Vec<u8>, source: &str) -> Result<String, Refused> {
    let field = Field::NewCa {
        source: source.to_string(),
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) if e.as_bytes().first() == Some(&0x30) => {
            let stem = [".der", ".cer", ".crt"]
                .iter()
                .find_map(|ext| source.strip_suffix(ext))
                .unwrap_or(source);
            Err(Refused::Value {
                field,
                why: format!(
                    "the file is DER (binary), not PEM: convert it with `openssl x509 -inform \
                     der -in {source} -out {stem}.pem` and give {stem}.pem"
                ),
            })
        }
        Err(_) => Err(Refused::Value {
            field,
            why: "the file is binary, not a PEM certificate (text between -----BEGIN \
                  CERTIFICATE----- and -----END CERTIFICATE-----)"
                .into(),
        }),
    }
}

/// One privileged Job on a node, as asked for (`run`, `render`).
#[derive(Clone, Debug)]
pub(crate) struct JobSettings {
    /// The node.
    pub(crate) node: String,
    /// Admit the pod as system-node-critical.
    pub(crate) critical: bool,
    /// The Job's deadline.
    pub(crate) deadline: Duration,
    /// The Job's name; default `nodejob-run-<node>`.
    pub(crate) name: Option<String>,
    /// The image; default core's pinned one.
    pub(crate) image: Option<String>,
    /// The command.
    pub(crate) argv: Vec<String>,
}

impl JobSettings {
    /// The node Job's spec in `namespace`; its runner's notes go to stderr until the caller
    /// sends them elsewhere.
    ///
    /// # Errors
    /// Core's [`nodejob_core::Error::InvalidSpec`] ([`Spec::validate`]), naming the field and
    /// the rule it breaks.
    pub(crate) fn spec(&self, namespace: &str) -> Result<Spec, nodejob_core::Error> {
        let spec = Spec {
            namespace: namespace.to_string(),
            name: self
                .name
                .clone()
                .unwrap_or_else(|| trunc_name(&format!("nodejob-run-{}", self.node))),
            node: self.node.clone(),
            label_key: RUN_LABEL_KEY.into(),
            container: "run".into(),
            argv: self.argv.clone(),
            active_deadline: self.deadline,
            poll_attempts: u32::try_from(
                (self.deadline.as_secs() + 60).div_ceil(nodejob_core::POLL_INTERVAL.as_secs()),
            )
            .unwrap_or(u32::MAX),
            kind: "node".into(),
            critical: self.critical,
            image: self.image.clone(),
            output: Some(Arc::new(|note: &nodejob_core::Note| {
                eprintln!("{}", note.message)
            })),
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// `nodejob-<host>-<pid>`: who holds the Lease, unique per process, stable for its life.
pub(crate) fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "nodejob".into());
    format!("nodejob-{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_names_the_other_fields_as_the_front_end_does() {
        let rule = "2 is more than `max_unavailable` (1); lower `failure_budget`, not \
                    `DAYS START-END`, `unknown` or `";
        assert_eq!(
            rule_said(rule, Field::flag),
            "2 is more than --max-unavailable (1); lower --failure-budget, not `DAYS START-END`, \
             `unknown` or `"
        );
        assert_eq!(
            rule_said(rule, |f| f.argument().to_string()),
            "2 is more than max_unavailable (1); lower failure_budget, not `DAYS START-END`, \
             `unknown` or `"
        );
    }

    #[test]
    fn every_plan_field_a_rule_may_name_has_a_flag() {
        for field in [
            "max_unavailable",
            "failure_budget",
            "concurrency",
            "nodes",
            "selector",
        ] {
            assert!(
                Field::of_plan(field, "").flag().starts_with("--"),
                "{field}"
            );
        }
        assert_eq!(Field::of_plan("window.time_zone", "").flag(), "--window");
    }
}
