//! The tools' arguments: the JSON Schema each tool publishes, derived from the types here; the
//! arguments read strictly against it (an unknown field, a missing one, a wrong type: refused,
//! naming the field); and the settings they say (`crate::settings`, which the flags fill too),
//! refusals named as the tools' arguments. All of it before any API call.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nodejob_core::Spec;
use rmcp::handler::server::tool::schema_for_input;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::parse::{self, ParseError};
use crate::present::{DriverError, ErrorKind};
use crate::settings::{
    Field, JobSettings, NewCa, RUN_DEADLINE, Refused, RotationSettings, UpgradeSettings,
    refusal_said, rule_said,
};

/// The field a mutating tool takes its preview's token in.
pub(crate) const PREVIEW_TOKEN: &str = "preview_token";

/// `status`: no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatusArgs {}

/// `pause_preview`: the pause switch as `pause` would set it, or, with `resume`, lift it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PausePreviewArgs {
    /// Why the rolls pause: shown by `status` and in every paused run's progress.
    #[serde(default)]
    pub(crate) reason: Option<String>,
    /// Who pauses them. Default: the MCP server's user and host, marked `(MCP)`.
    #[serde(default)]
    pub(crate) by: Option<String>,
    /// Preview `resume` (lift the switch, whoever set it) rather than `pause`: the token
    /// returned is then good for `resume` only. Not with `reason` or `by`.
    #[serde(default)]
    pub(crate) resume: bool,
}

/// `pause`: the switch's who and why, as previewed.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PauseArgs {
    /// Why the rolls pause, as given to `pause_preview`.
    #[serde(default)]
    pub(crate) reason: Option<String>,
    /// Who pauses them, as given to `pause_preview`.
    #[serde(default)]
    pub(crate) by: Option<String>,
}

/// `resume`: no arguments but its preview token.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeArgs {}

/// `jobs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobsArgs {
    /// Only Jobs matching this label selector (as `kubectl get jobs -l`), e.g.
    /// `stratum.ciq.com/upgrade` for the upgrade's host Jobs.
    #[serde(default)]
    pub(crate) selector: Option<String>,
}

/// A count of nodes, or a percentage of them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum CountOrPercent {
    /// A count: `2`.
    Count(u32),
    /// A count or a percentage as text: `"2"`, `"25%"`.
    Text(String),
}

/// `upgrade_preview` and `upgrade`: the rolling upgrade's plan, as `nodejob upgrade`'s flags
/// say it. A field left out takes the driver's default, as the flag's does.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpgradeArgs {
    /// The version to move the nodes to, e.g. `v1.38.0`: with `version_from` `kubelet` (the
    /// default) a Kubernetes version `vMAJOR.MINOR.PATCH[-pre]`; a target the selected nodes'
    /// versions cannot be ordered against, or a node reporting none, is refused before any
    /// write, naming the nodes.
    pub(crate) to: String,
    /// Only nodes matching this label selector, e.g. `node-role.kubernetes.io/worker`.
    #[serde(default)]
    pub(crate) selector: Option<String>,
    /// Only these nodes, by name (with `selector` too, a node must match both).
    #[serde(default)]
    pub(crate) nodes: Vec<String>,
    /// How many nodes may be unavailable at once: a count (`2`) or a percentage (`"25%"`).
    /// Default 1. Control-plane nodes go one at a time whatever it says.
    #[serde(default)]
    pub(crate) max_unavailable: Option<CountOrPercent>,
    /// The drain's bound per node: `90s`, `10m`, `1h30m`. Default `10m`.
    #[serde(default)]
    pub(crate) drain_timeout: Option<String>,
    /// Evict Pods with emptyDir volumes (their data is lost). Default false: such a Pod stops
    /// the drain.
    #[serde(default)]
    pub(crate) delete_emptydir_data: bool,
    /// Evict Pods no controller manages (they are not recreated). Default false: such a Pod
    /// stops the drain.
    #[serde(default)]
    pub(crate) force: bool,
    /// The host upgrade Job's deadline. Default `30m`.
    #[serde(default)]
    pub(crate) deadline: Option<String>,
    /// How long a node has to reboot and come back Ready at the target. Default `10m`.
    #[serde(default)]
    pub(crate) reboot_timeout: Option<String>,
    /// The on-host binary, an absolute path. Default `/usr/local/bin/stratum`.
    #[serde(default)]
    pub(crate) binary: Option<String>,
    /// Where each node reports the version `to` names: `kubelet` (its kubelet's version, for
    /// an upgrade that moves the kubelet), `os-image` (its osImage, for an OS upgrade that does
    /// not), or `label=KEY` (its label KEY). Default `kubelet`.
    #[serde(default)]
    pub(crate) version_from: Option<String>,
    /// A maintenance window, `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 Europe/Berlin`:
    /// no node starts outside it; a node in flight finishes.
    #[serde(default)]
    pub(crate) window: Option<String>,
    /// Stop starting nodes after this many failed. Default 1. At most `max_unavailable`: a
    /// failed node stays cordoned and counts as unavailable, so a larger budget is refused.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(crate) failure_budget: Option<u32>,
    /// A health check run on each upgraded node before the next (its argv; exit 0 passes;
    /// every `{version}` becomes the target).
    #[serde(default)]
    pub(crate) health_check: Option<Vec<String>>,
    /// Move nodes to a version older than the one they run. Default false: a target older
    /// than any selected node's version is refused, naming the nodes and their versions.
    #[serde(default)]
    pub(crate) allow_downgrade: bool,
    /// Go past the Kubernetes version skew policy
    /// (<https://kubernetes.io/releases/version-skew-policy/#kubelet>). Default false: a kubelet
    /// upgrade is refused, naming the rule, the nodes and the versions, when a worker would run
    /// a kubelet newer than the apiserver, more than three minor versions older, or a minor
    /// version past the one after its own (before any write, and again before each batch).
    /// With it, each breach is said in the preview, the progress and the report.
    #[serde(default)]
    pub(crate) allow_skew: bool,
    /// What a node comes to whose drain PodDisruptionBudgets allowing no disruption hold past
    /// `drain_timeout`: `fail` (default: it stays cordoned, the roll stops), `skip`
    /// (uncordoned if we cordoned it, why recorded on it; the roll goes on and tries it once
    /// more at the end), `quarantine` (left cordoned, labelled
    /// `stratum.ciq.com/upgrade-quarantined`; no run touches it until the label is removed).
    #[serde(default)]
    pub(crate) on_undrainable: Option<OnUndrainable>,
    /// How many blocked nodes (skipped or quarantined) the roll goes on past; one more stops
    /// it as a failure does. Default 1.
    #[serde(default)]
    pub(crate) max_blocked: Option<u32>,
    /// How long each upgraded node, back in service, must stay Ready on the same boot (and
    /// pass the health check again at the end) before the next batch starts: `10m`, `1h`
    /// (at most `24h`). A node that breaks its soak fails (failure budget). Default: none.
    #[serde(default)]
    pub(crate) soak: Option<String>,
    /// What a node comes to whose host upgrade fails, or that comes back at another version,
    /// or fails its health check or soak: `stop` (default: left as it is, the roll stops) or
    /// `rollback` (the host's `stratum rollback` to the version recorded before its upgrade,
    /// once; back on a new boot, uncordoned; still a failure for the failure budget).
    #[serde(default)]
    pub(crate) on_failure: Option<OnFailureArg>,
}

/// `trust_domain`: which nodes trust the CA a rotation replaces.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TrustDomainArg {
    /// Every node of the cluster.
    Cluster,
    /// The selected nodes alone.
    Selected,
}

/// `on_failure`: what a node that fails after its host upgrade comes to.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OnFailureArg {
    /// Left as it is; the roll stops.
    Stop,
    /// Rolled back to the version it ran before, once.
    Rollback,
}

/// `on_undrainable`: what a node comes to whose drain budgets block past its timeout.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OnUndrainable {
    /// The node fails; the roll stops.
    Fail,
    /// Uncordoned, recorded, tried once more at the end.
    Skip,
    /// Left cordoned and labelled; never touched again while labelled.
    Quarantine,
}

/// `rotate_ca`, `rotate_ca_abort`: the CA rotation's plan, as `nodejob rotate-ca`'s flags say
/// it. A field left out takes the driver's default, as the flag's does.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RotateCaArgs {
    /// The new CA's public certificate: the path (on the server's machine) of a PEM file
    /// holding one CERTIFICATE block and nothing else, never its private key, or that PEM
    /// text itself (answers name the CA by its fingerprint and subject, never repeat the
    /// text). The hosts get its fingerprint only. On a simulated cluster it may be left out:
    /// the simulation's built-in CA is used.
    #[serde(default)]
    pub(crate) new_ca: Option<PathBuf>,
    /// Only nodes matching this label selector.
    #[serde(default)]
    pub(crate) selector: Option<String>,
    /// Only these nodes, by name.
    #[serde(default)]
    pub(crate) nodes: Vec<String>,
    /// How many workers run a phase at once (control-plane nodes: always one at a time).
    /// Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(crate) concurrency: Option<u32>,
    /// Each host Job's deadline. Default `10m`.
    #[serde(default)]
    pub(crate) deadline: Option<String>,
    /// After `issue`, how long a node has to restart its components and be Ready again.
    /// Default `10m`.
    #[serde(default)]
    pub(crate) ready_timeout: Option<String>,
    /// After `issue`, how long a node may take to begin restarting its components (to go
    /// NotReady); one that stays Ready through it is taken as restarted. Default `30s`.
    #[serde(default)]
    pub(crate) restart_grace: Option<String>,
    /// Which nodes trust the CA being replaced: `cluster` (default: every node; `issue` and
    /// `finalize` are refused while a node is outside `selector`/`nodes`) or `selected` (the
    /// selected nodes alone, for a cluster whose other nodes trust another CA).
    #[serde(default)]
    pub(crate) trust_domain: Option<TrustDomainArg>,
    /// The on-host binary, an absolute path. Default `/usr/local/bin/stratum`.
    #[serde(default)]
    pub(crate) binary: Option<String>,
    /// A maintenance window, `DAYS START-END [TZ]`, e.g. `sat,sun 01:00-05:00 Europe/Berlin`:
    /// no batch starts outside it; a node in flight finishes.
    #[serde(default)]
    pub(crate) window: Option<String>,
    /// Stop a phase after this many nodes failed (no phase starts after a failure). Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(crate) failure_budget: Option<u32>,
}

/// `render` and `run`: one privileged Job on a node, as `nodejob run`'s flags say it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobArguments {
    /// The node to run on.
    pub(crate) node: String,
    /// The command: the argv run on the host (through `nsenter` into PID 1's namespaces, when
    /// it starts with `nsenter`), e.g. `["nsenter", "--target", "1", "--mount", "--uts",
    /// "--ipc", "--net", "--pid", "--", "/usr/local/bin/stratum", "health"]`.
    pub(crate) argv: Vec<String>,
    /// Admit the pod as system-node-critical (only on a drained node: it may evict
    /// workloads). Default false.
    #[serde(default)]
    pub(crate) critical: bool,
    /// The Job's deadline. Default `10m`.
    #[serde(default)]
    pub(crate) deadline: Option<String>,
    /// The Job's name. Default `nodejob-run-<node>`.
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// The image, pinned by `@sha256:` digest. Default nodejob's pinned image.
    #[serde(default)]
    pub(crate) image: Option<String>,
}

/// A field a tool takes beside those of its arguments' type: how the operation is asked for,
/// not what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Extra {
    /// `preview_token` (required): a mutating tool's.
    PreviewToken,
    /// `abort` (optional): `rotate_ca_preview` previews `rotate_ca_abort`.
    Abort,
}

impl Extra {
    fn name(self) -> &'static str {
        match self {
            Extra::PreviewToken => PREVIEW_TOKEN,
            Extra::Abort => ABORT,
        }
    }
}

/// The field `rotate_ca_preview` is told to preview the abort in.
pub(crate) const ABORT: &str = "abort";

/// The extras of a call, as read.
#[derive(Debug, Default)]
pub(crate) struct Extras {
    /// `preview_token`.
    pub(crate) preview_token: Option<String>,
    /// `abort`.
    pub(crate) abort: bool,
}

/// The input schema of a tool taking `T` and `extras`.
pub(crate) fn schema<T: JsonSchema + 'static>(extras: &[Extra]) -> Arc<JsonObject> {
    let schema = schema_for_input::<T>().unwrap_or_else(|e| {
        // The types above are objects: a failure here is a bug in them, seen by every test.
        panic!("the input schema of {}: {e}", std::any::type_name::<T>())
    });
    if extras.is_empty() {
        return schema;
    }
    let mut schema = (*schema).clone();
    for extra in extras {
        let property = match extra {
            Extra::PreviewToken => json!({
                "type": "string",
                "description": "The preview_token the preview of this operation returned, \
                    with the same arguments. It is refused (nothing changes) when the arguments \
                    or the cluster changed since the preview: preview again.",
            }),
            Extra::Abort => json!({
                "type": "boolean",
                "default": false,
                "description": "Preview rotate_ca_abort (undo a rotation that has not begun \
                    issue) rather than rotate_ca: the token returned is then good for \
                    rotate_ca_abort only.",
            }),
        };
        // A type of no fields has no `properties` of its own: the extra makes them.
        if let Value::Object(properties) =
            (schema.entry("properties")).or_insert_with(|| Value::Object(JsonObject::new()))
        {
            properties.insert(extra.name().into(), property);
        }
        if *extra == Extra::PreviewToken {
            match schema.get_mut("required") {
                Some(Value::Array(required)) => required.push(json!(PREVIEW_TOKEN)),
                _ => {
                    schema.insert("required".into(), json!([PREVIEW_TOKEN]));
                }
            }
        }
    }
    Arc::new(schema)
}

/// Why a tool's arguments make no call: refused before any API call, naming the argument (as
/// the tool's schema names it), and what would be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgumentError {
    /// An argument the tool's schema does not name.
    #[error("{key}: no such argument; the arguments are: {}", known.join(", "))]
    Unknown {
        /// The argument given.
        key: String,
        /// The tool's arguments.
        known: Vec<String>,
    },
    /// A required argument missing (or null).
    #[error("{field}: required")]
    Required {
        /// The argument.
        field: String,
    },
    /// A mutating tool called without its preview's token.
    #[error(
        "preview_token: required; call this operation's preview with the same arguments \
         first, and pass the preview_token it returns"
    )]
    NoToken,
    /// `preview_token` given, but not as text.
    #[error("preview_token: must be a string as the preview returned it, got {got}")]
    TokenNotText {
        /// The value given.
        got: Value,
    },
    /// `abort` given, but not as a boolean.
    #[error("abort: must be true or false, got {got}")]
    AbortNotBool {
        /// The value given.
        got: Value,
    },
    /// A value of the wrong type or shape, at its path (`nodes`, `to`).
    #[error("{path}: {cause}")]
    Shape {
        /// The argument's path.
        path: String,
        /// serde's reason.
        cause: serde_json::Error,
    },
    /// A value that does not read by its grammar (a duration, `max_unavailable`,
    /// `version_from`).
    #[error("{argument}: {cause}")]
    Value {
        /// The argument.
        argument: &'static str,
        /// Why it does not read.
        cause: ParseError,
    },
    /// The settings make no plan (a window that does not read, a plan the driver refuses, a
    /// CA file not read), said naming the argument.
    #[error("{}", refused(.0))]
    Settings(Refused),
    /// `run` or `render` without a command.
    #[error("argv: must name a command (at least one element)")]
    NoArgv,
    /// The node Job refused by core's rules (its name, the node's, the image), naming the
    /// field.
    #[error(transparent)]
    Spec(nodejob_core::Error),
    /// `pause_preview` asked to resume with a reason or a who, which a resume has not.
    #[error(
        "reason, by: not with resume: true (a resume lifts the switch, whoever pulled it and \
         why)"
    )]
    NotWithResume,
}

/// Reads `arguments` as `T` and its extras, against `schema` (the tool's): a field the schema
/// does not name, a required one missing, a value of the wrong type or shape is refused,
/// naming the field.
pub(crate) fn parse<T: DeserializeOwned>(
    schema: &JsonObject,
    arguments: Option<JsonObject>,
) -> Result<(T, Extras), ArgumentError> {
    let mut arguments = arguments.unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    for key in arguments.keys() {
        if !properties.is_some_and(|p| p.contains_key(key)) {
            let known: Vec<String> = properties
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            return Err(ArgumentError::Unknown {
                key: key.clone(),
                known,
            });
        }
    }
    let required = (schema.get("required").and_then(Value::as_array))
        .map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    for field in required {
        if arguments.get(field).is_none_or(Value::is_null) {
            return Err(if field == PREVIEW_TOKEN {
                ArgumentError::NoToken
            } else {
                ArgumentError::Required {
                    field: field.into(),
                }
            });
        }
    }
    // The extras are the schema's: `parse` refused them above for a tool without them.
    let mut extras = Extras::default();
    match arguments.remove(PREVIEW_TOKEN) {
        Some(Value::String(token)) => extras.preview_token = Some(token),
        Some(got) => return Err(ArgumentError::TokenNotText { got }),
        None => {}
    }
    match arguments.remove(ABORT) {
        Some(Value::Bool(abort)) => extras.abort = abort,
        Some(Value::Null) | None => {}
        Some(got) => return Err(ArgumentError::AbortNotBool { got }),
    }
    let args = serde_path_to_error::deserialize(Value::Object(arguments)).map_err(|e| {
        let path = e.path().to_string();
        ArgumentError::Shape {
            path,
            cause: e.into_inner(),
        }
    })?;
    Ok((args, extras))
}

fn duration(
    argument: &'static str,
    value: Option<&String>,
) -> Result<Option<Duration>, ArgumentError> {
    value
        .map(|v| parse::duration(v).map_err(|cause| ArgumentError::Value { argument, cause }))
        .transpose()
}

/// Settings refused, as the tools say it: naming the argument.
fn refused(refusal: &Refused) -> String {
    match refusal {
        Refused::Value { field, why } => format!("{}: {why}", field.argument()),
        Refused::Unreadable { path, why } => {
            format!("new_ca: reading {}: {why}", path.display())
        }
        Refused::NoCa => "new_ca: required (the new CA's PEM file)".into(),
        Refused::Plan { field, rule, .. } => format!(
            "{}: {}",
            field.argument(),
            rule_said(rule, |f| f.argument().to_string())
        ),
    }
}

/// A setting as the tools name it.
fn argument(field: &Field) -> String {
    field.argument().to_string()
}

/// A driver's error, as the tools say it.
pub(crate) fn driver_said(e: &DriverError) -> String {
    match &e.kind {
        ErrorKind::LeaseHeld => format!("{}; try again later", e.text),
        // The text names the arguments to check (`nodes`, `selector`).
        ErrorKind::NoSuchNode => rule_said(&e.text, argument),
        ErrorKind::Plan { field, rule } => refusal_said(&Field::of_plan(field, ""), rule, |f| {
            f.argument().to_string()
        }),
        ErrorKind::Failed => rule_said(&e.text, argument),
    }
}

impl UpgradeArgs {
    /// The settings these arguments say.
    fn settings(&self) -> Result<UpgradeSettings, ArgumentError> {
        let max_unavailable = match &self.max_unavailable {
            None => None,
            Some(m) => {
                let text = match m {
                    CountOrPercent::Count(n) => n.to_string(),
                    CountOrPercent::Text(t) => t.clone(),
                };
                Some(
                    parse::max_unavailable(&text).map_err(|cause| ArgumentError::Value {
                        argument: "max_unavailable",
                        cause,
                    })?,
                )
            }
        };
        Ok(UpgradeSettings {
            to: self.to.clone(),
            selector: self.selector.clone(),
            nodes: self.nodes.clone(),
            max_unavailable,
            drain_timeout: duration("drain_timeout", self.drain_timeout.as_ref())?,
            delete_emptydir_data: self.delete_emptydir_data,
            force: self.force,
            deadline: duration("deadline", self.deadline.as_ref())?,
            reboot_timeout: duration("reboot_timeout", self.reboot_timeout.as_ref())?,
            binary: self.binary.clone(),
            version_from: (self.version_from.as_deref())
                .map(parse::version_source)
                .transpose()
                .map_err(|cause| ArgumentError::Value {
                    argument: "version_from",
                    cause,
                })?,
            window: self.window.clone(),
            failure_budget: self.failure_budget,
            health_check: self.health_check.clone(),
            allow_downgrade: self.allow_downgrade,
            on_undrainable: self.on_undrainable.map(|p| match p {
                OnUndrainable::Fail => upgrade_driver::Undrainable::Fail,
                OnUndrainable::Skip => upgrade_driver::Undrainable::Skip,
                OnUndrainable::Quarantine => upgrade_driver::Undrainable::Quarantine,
            }),
            max_blocked: self.max_blocked,
            soak: duration("soak", self.soak.as_ref())?,
            allow_skew: self.allow_skew,
            on_failure: self.on_failure.map(|p| match p {
                OnFailureArg::Stop => upgrade_driver::OnFailure::Stop,
                OnFailureArg::Rollback => upgrade_driver::OnFailure::Rollback,
            }),
        })
    }

    /// The upgrade's plan in `namespace`; refused naming the argument.
    pub(crate) fn plan(&self, namespace: &str) -> Result<upgrade_driver::Plan, ArgumentError> {
        (self.settings()?.plan(namespace)).map_err(ArgumentError::Settings)
    }
}

impl RotateCaArgs {
    /// The rotation's plan in `namespace`; refused naming the argument. Without `new_ca`, on a
    /// simulated cluster, the simulation's built-in CA.
    pub(crate) fn plan(
        &self,
        namespace: &str,
        simulated: bool,
    ) -> Result<certs_driver::Plan, ArgumentError> {
        let settings = RotationSettings {
            new_ca: match &self.new_ca {
                Some(path) => match path.to_str() {
                    Some(text) if text.contains("-----BEGIN") => NewCa::Pem(text.to_string()),
                    _ => NewCa::File(path.clone()),
                },
                None => NewCa::Unset { simulated },
            },
            selector: self.selector.clone(),
            nodes: self.nodes.clone(),
            concurrency: self.concurrency,
            deadline: duration("deadline", self.deadline.as_ref())?,
            ready_timeout: duration("ready_timeout", self.ready_timeout.as_ref())?,
            restart_grace: duration("restart_grace", self.restart_grace.as_ref())?,
            cluster_wide: self.trust_domain.map(|d| d == TrustDomainArg::Cluster),
            binary: self.binary.clone(),
            window: self.window.clone(),
            failure_budget: self.failure_budget,
        };
        settings.plan(namespace).map_err(ArgumentError::Settings)
    }
}

impl JobArguments {
    /// The node Job's spec in `namespace`, as `nodejob run` builds it from the same flags.
    pub(crate) fn spec(&self, namespace: &str) -> Result<Spec, ArgumentError> {
        let settings = JobSettings {
            node: self.node.clone(),
            critical: self.critical,
            deadline: duration("deadline", self.deadline.as_ref())?.unwrap_or(RUN_DEADLINE),
            name: self.name.clone(),
            image: self.image.clone(),
            argv: self.argv.clone(),
        };
        if settings.argv.is_empty() {
            return Err(ArgumentError::NoArgv);
        }
        settings.spec(namespace).map_err(ArgumentError::Spec)
    }
}

#[cfg(test)]
mod tests {
    use super::parse as parse_args;
    use super::*;

    fn object(v: Value) -> Option<JsonObject> {
        v.as_object().cloned()
    }

    #[test]
    fn arguments_are_read_strictly_naming_the_field() {
        let plain = schema::<UpgradeArgs>(&[]);
        let gated = schema::<UpgradeArgs>(&[Extra::PreviewToken]);
        let ok: Result<(UpgradeArgs, _), _> = parse(&plain, object(json!({"to": "v1.38.0"})));
        assert!(ok.is_ok());
        let cases = [
            (&plain, json!({}), "to: required"),
            (
                &plain,
                json!({"to": "v1.38.0", "max_unavailble": 2}),
                "max_unavailble: no such",
            ),
            (&plain, json!({"to": 3}), "to: invalid type"),
            (
                &plain,
                json!({"to": "v1.38.0", "nodes": "a"}),
                "nodes: invalid type",
            ),
            (&gated, json!({"to": "v1.38.0"}), "preview_token: required"),
            (
                &gated,
                json!({"to": "v1.38.0", "preview_token": 1}),
                "preview_token: must be",
            ),
        ];
        for (schema, args, want) in cases {
            let got = parse::<UpgradeArgs>(schema, object(args.clone()))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(got.starts_with(want), "{args}: {got}");
        }
        let (_, extras) = parse::<UpgradeArgs>(
            &gated,
            object(json!({"to": "v1.38.0", "preview_token": "t"})),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(extras.preview_token.as_deref(), Some("t"));
        let rotation = schema::<RotateCaArgs>(&[Extra::Abort]);
        let (_, extras) = parse::<RotateCaArgs>(&rotation, object(json!({"abort": true})))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(extras.abort);
        let bad = parse::<RotateCaArgs>(&rotation, object(json!({"concurrency": "two"})));
        assert!(
            bad.err()
                .map(|e| e.to_string())
                .unwrap_or_default()
                .starts_with("concurrency: invalid type")
        );
        let bad = parse::<RotateCaArgs>(&rotation, object(json!({"abort": "yes"})));
        assert_eq!(
            bad.err().map(|e| e.to_string()).as_deref(),
            Some("abort: must be true or false, got \"yes\"")
        );
    }

    #[test]
    fn plans_refuse_naming_the_argument() {
        let args = |v: Value| {
            parse::<UpgradeArgs>(&schema::<UpgradeArgs>(&[]), object(v))
                .unwrap_or_else(|e| panic!("{e}"))
                .0
        };
        let cases = [
            (json!({"to": ""}), "to: "),
            (
                json!({"to": "v1.38.0", "max_unavailable": 0}),
                "max_unavailable: ",
            ),
            (
                json!({"to": "v1.38.0", "max_unavailable": "150%"}),
                "max_unavailable: ",
            ),
            (
                json!({"to": "v1.38.0", "drain_timeout": "soon"}),
                "drain_timeout: ",
            ),
            (json!({"to": "v1.38.0", "window": "someday"}), "window: "),
            (json!({"to": "v1.38.0", "binary": "stratum"}), "binary: "),
        ];
        for (v, want) in cases {
            let got = args(v.clone())
                .plan("kube-system")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(got.starts_with(want), "{v}: {got}");
        }
        assert!(
            args(json!({"to": "v1.38.0", "max_unavailable": "25%"}))
                .plan("kube-system")
                .is_ok()
        );
    }

    /// The flags' defaults and the tools' (a field left out) make the same plan: the command
    /// line and MCP share one settings layer, and clap's defaults are the drivers'.
    #[test]
    fn the_flags_defaults_and_the_tools_defaults_make_the_same_plans() -> anyhow::Result<()> {
        use clap::Parser;

        use crate::args::{Cli, Command};
        let parse = |args: &[&str]| Cli::try_parse_from(args);
        let Command::Upgrade(flags) = parse(&["nodejob", "upgrade", "--to", "v1.38.0"])?.command
        else {
            anyhow::bail!("not an upgrade");
        };
        let from_flags = crate::commands::upgrade::settings(&flags).plan("kube-system");
        let (from_tool, _) = parse_args::<UpgradeArgs>(
            &schema::<UpgradeArgs>(&[]),
            object(json!({"to": "v1.38.0"})),
        )?;
        let (a, b) = (
            from_flags.map_err(|e| anyhow::anyhow!("{e:?}"))?,
            from_tool.plan("kube-system")?,
        );
        assert_eq!(a.spec(), b.spec());
        let Command::RotateCa(flags) = parse(&["nodejob", "rotate-ca", "--simulate", "3"])?.command
        else {
            anyhow::bail!("not a rotation");
        };
        let from_flags = crate::commands::rotate_ca::settings(&flags).plan("kube-system");
        let (from_tool, _) =
            parse_args::<RotateCaArgs>(&schema::<RotateCaArgs>(&[]), object(json!({})))?;
        let (a, b) = (
            from_flags.map_err(|e| anyhow::anyhow!("{e:?}"))?,
            from_tool.plan("kube-system", true)?,
        );
        assert!(a.spec() == b.spec(), "{:?} != {:?}", a.spec(), b.spec());
        Ok(())
    }
}
