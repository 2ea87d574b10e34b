//! [`Plan`]: what a rolling upgrade does, validated when built ([`Plan::build`]) so that bad
//! input is refused before any API call, with an error naming the field and the rule.

use nodejob_core::duration::within_a_day;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::tz::TimeZone;
use nodejob_core::drain::DrainOptions;
use nodejob_core::{Spec, trunc_name};
use nodejob_roll::{
    Limits, NSENTER, Placement, PlanError, Stop, Window, check_selection, identity,
};

pub use crate::version::{Downgrade, VersionSource};
use crate::version::{is_version, version_numbers};

/// The annotation and label prefix of this driver's records.
pub(crate) const PREFIX: &str = "stratum.ciq.com/";

/// How many nodes of the plan may be unavailable at once (cordoned by us, or NotReady).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum MaxUnavailable {
    /// At most this many.
    Count(u32),
    /// At most this percentage of the plan's nodes, rounded down, at least one (as a
    /// Deployment rounds `maxUnavailable`).
    Percent(u32),
}

impl Default for MaxUnavailable {
    fn default() -> Self {
        MaxUnavailable::Count(1)
    }
}

impl MaxUnavailable {
    /// The count for a plan of `nodes` nodes.
    pub fn of(self, nodes: usize) -> usize {
        match self {
            MaxUnavailable::Count(n) => n as usize,
            MaxUnavailable::Percent(p) => (nodes * p as usize / 100).max(1),
        }
    }
}

/// A `max_unavailable` that is neither a count nor a percentage.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is neither a count (2) nor a percentage (25%)")]
pub struct NotCountOrPercent {
    /// The text given.
    pub text: String,
}

impl std::str::FromStr for MaxUnavailable {
    type Err = NotCountOrPercent;

    /// `3` or `25%`.
    fn from_str(s: &str) -> Result<Self, NotCountOrPercent> {
        let bad = |_| NotCountOrPercent { text: s.into() };
        match s.strip_suffix('%') {
            Some(p) => p.parse().map(MaxUnavailable::Percent).map_err(bad),
            None => s.parse().map(MaxUnavailable::Count).map_err(bad),
        }
    }
}

/// The fields of a [`Plan`], every one with a default but the target. Serialised whole (a
/// preview token hashes it), so a new field must serialise.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PlanSpec {
    /// The version every node is moved to, e.g. `v1.38.0`.
    pub target: String,
    /// Where a node reports its version.
    pub version_source: VersionSource,
    /// Nodes by label selector (`k=v,k2`); with `nodes` too, a node must match both.
    pub selector: Option<String>,
    /// Nodes by name; empty: every node the selector matches (every node when both are unset).
    pub nodes: Vec<String>,
    /// How many nodes of the plan may be unavailable at once.
    pub max_unavailable: MaxUnavailable,
    /// How each node is drained.
    #[serde(serialize_with = "debug_form")]
    pub drain: DrainOptions,
    /// The host Job's `activeDeadlineSeconds`.
    pub deadline: Duration,
    /// How long a node has to reboot and come back Ready after its upgrade.
    pub reboot_timeout: Duration,
    /// The on-host binary, an absolute path.
    pub binary: String,
    /// The upgrade's argv; `None`: `nsenter --target 1 --mount --uts --ipc --net --pid --
    /// <binary> upgrade --to <target>`. Every `{version}` in it becomes the target.
    pub command: Option<Vec<String>>,
    /// The health check's argv (exit 0 passes), run on each upgraded node before it is
    /// uncordoned; every `{version}` becomes the target. `None`: no check.
    pub health_check: Option<Vec<String>>,
    /// When nodes may start.
    pub window: Option<Window>,
    /// Stop starting nodes once this many failed.
    pub failure_budget: u32,
    /// Whether a target older than what a selected node runs is refused (the default) or
    /// allowed.
    pub downgrade: Downgrade,
    /// The namespace of the host Jobs, the Lease and the step Events.
    pub namespace: String,
    /// The image of the host Jobs; `None`: core's pinned image.
    pub image: Option<String>,
    /// The Lease both drivers share.
    pub lease_name: String,
    /// Who holds the Lease: unique per process. The default, `upgrade-driver-<pid>-<time>`, is
    /// the same for the life of the process, so a driver restarted as a new process waits out
    /// the Lease of the one that died (at most `lease_duration`) unless it is given that one's
    /// identity; two processes with the defaults never take each other's Lease as their own.
    pub identity: String,
    /// `leaseDurationSeconds`: renewed every third of it.
    pub lease_duration: Duration,
    /// Whether a kubelet upgrade keeps the Kubernetes version skew policy (the default:
    /// refused otherwise, before any write and before each batch) or may go past it
    /// ([`crate::skew`]).
    pub skew: Skew,
    /// What a node comes to whose drain budgets allowing no disruption hold past
    /// `drain.timeout`: it fails the roll (the default), or is skipped, or quarantined.
    pub on_undrainable: Undrainable,
    /// How many blocked nodes (skipped or quarantined) the roll goes on past; one more
    /// stops it as a failure does. Default 1.
    pub max_blocked: u32,
    /// How long each upgraded node must stay Ready on the same boot once back in service,
    /// the health check (if any) passing again at the end, before the roll goes on: the next
    /// batch starts only once every node of this one soaked. `None` (the default): no soak.
    pub soak: Option<Duration>,
    /// What a node that fails after its host upgrade was launched comes to: it stays as it
    /// is (the default), or is rolled back to the version it ran before.
    pub on_failure: OnFailure,
    /// A node held to the end of the roll: `nodejob controller` names the node its leader runs
    /// on, so that the leader hands over before that node is drained rather than being evicted
    /// mid-roll. A worker goes in a batch of its own after every other node; a control-plane
    /// node goes last of the control plane (no worker goes before the control plane); a node
    /// an earlier run left in flight is carried on first, as any. `None` (the default): none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<String>,
}

/// What a node comes to when its host upgrade fails, or it comes back at another version than
/// the target, or fails its health check or its soak.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// It fails and stays as it is (cordoned, its Job left for inspection): the default, and
    /// what a roll did before this option.
    #[default]
    Stop,
    /// The host's rollback (`stratum rollback --to V`, V the version recorded on the node
    /// before its host upgrade) runs on it, drained, once; it must come back at V on a new
    /// boot, and is then uncordoned if we cordoned it and reported rolled back, still a
    /// failure for the failure budget. A node that is not Ready, or has no version recorded,
    /// is not rolled back and fails as with `stop`.
    Rollback,
}

impl OnFailure {
    /// `stop` or `rollback`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Stop => "stop",
            OnFailure::Rollback => "rollback",
        }
    }
}

impl std::fmt::Display for OnFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a roll does with a node whose drain budgets allowing no disruption hold past the
/// drain's timeout (its Pods left, the budgets that refused them named). AKS's
/// `undrainableNodeBehavior`, with `max_blocked` as its `maxBlockedNodes`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Undrainable {
    /// The node fails (it stays cordoned, counted against the failure budget): no further
    /// node starts. The default, and what a roll did before this option.
    #[default]
    Fail,
    /// The node is uncordoned if we cordoned it, why is recorded on it (the budgets, the Pods
    /// left), and the roll goes on; every node skipped is tried once more at the end.
    Skip,
    /// The node is left cordoned with the label [`QUARANTINED`](crate::records::QUARANTINED)
    /// and why recorded on it; the roll goes on. No roll touches it again until a person
    /// removes the label.
    Quarantine,
}

impl Undrainable {
    /// `fail`, `skip` or `quarantine`.
    pub fn as_str(self) -> &'static str {
        match self {
            Undrainable::Fail => "fail",
            Undrainable::Skip => "skip",
            Undrainable::Quarantine => "quarantine",
        }
    }
}

impl std::fmt::Display for Undrainable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serialises a field whose type, of another crate, is not `Serialize`, as its derived `Debug`
/// text, which shows every field.
fn debug_form<T: std::fmt::Debug, S: serde::Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{value:?}"))
}

impl PlanSpec {
    /// A plan to move nodes to `target`, every other field at its default.
    pub fn new(target: impl Into<String>) -> Self {
        let Placement {
            namespace,
            image,
            lease_name,
            identity,
            lease_duration,
        } = Placement::new(process_identity());
        PlanSpec {
            target: target.into(),
            version_source: VersionSource::default(),
            selector: None,
            nodes: Vec::new(),
            max_unavailable: MaxUnavailable::default(),
            drain: DrainOptions::default(),
            deadline: Duration::from_secs(30 * 60),
            reboot_timeout: Duration::from_secs(10 * 60),
            binary: "/usr/local/bin/stratum".into(),
            command: None,
            health_check: None,
            window: None,
            failure_budget: 1,
            downgrade: Downgrade::Refuse,
            namespace,
            image,
            lease_name,
            identity,
            lease_duration,
            on_undrainable: Undrainable::Fail,
            max_blocked: 1,
            soak: None,
            skew: Skew::Enforce,
            on_failure: OnFailure::Stop,
            last: None,
        }
    }

    /// The namespace, the image and the Lease, as one.
    pub fn placement(&self) -> Placement {
        Placement {
            namespace: self.namespace.clone(),
            image: self.image.clone(),
            lease_name: self.lease_name.clone(),
            identity: self.identity.clone(),
            lease_duration: self.lease_duration,
        }
    }
}

/// This process's default Lease identity (see [`PlanSpec::identity`]).
fn process_identity() -> String {
    static IDENTITY: OnceLock<String> = OnceLock::new();
    IDENTITY
        .get_or_init(|| {
            let since_epoch = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            identity("upgrade-driver", std::process::id(), since_epoch)
        })
        .clone()
}

/// A validated rolling-upgrade plan. See [`PlanSpec`] for the fields.
#[derive(Clone, Debug)]
pub struct Plan {
    spec: PlanSpec,
    time_zone: Option<TimeZone>,
}

/// Refuses a failure budget above `width`, the nodes that may be unavailable at once
/// (`max_unavailable`, as `said`): a failed node stays cordoned, so it counts as unavailable,
/// and `width` failures stop the roll on `max_unavailable` before the budget is spent. A rule
/// names the other fields in backticks, for a front end to name them its way.
fn budget_within(budget: u32, width: usize, said: &str) -> Result<(), PlanError> {
    if budget as usize <= width {
        return Ok(());
    }
    Err(PlanError::new(
        "failure_budget",
        format!(
            "{budget} is more than `max_unavailable` ({said}): a failed node stays cordoned and \
             counts as unavailable, so the roll would stop once {width} node(s) failed, before \
             the budget is spent; raise `max_unavailable` to at least {budget}, or lower \
             `failure_budget` to at most {width}"
        ),
    ))
}

/// The name of the host Job for `node` toward `target` (see [`Plan::job_name`]): what the
/// node machine names when it speaks of a Job, so that `kubectl get job NAME` finds it.
pub(crate) fn host_job_name(node: &str, target: &str) -> String {
    trunc_name(&format!("upgrade-{node}-{target}"))
}

/// The name of the rollback Job for `node` rolling back from `target` (see
/// [`Plan::rollback_job_name`]).
pub(crate) fn rollback_job_name(node: &str, target: &str) -> String {
    trunc_name(&format!("rollback-{node}-{target}"))
}

impl Plan {
    /// Validates `spec`: every bad field is refused with a [`PlanError`] naming it.
    pub fn build(spec: PlanSpec) -> Result<Plan, PlanError> {
        let bad = |field, rule: String| Err(PlanError { field, rule });
        if !is_version(&spec.target) {
            return bad(
                "target",
                format!(
                    "{:?} must be 1 to 63 characters of letters, digits, '.', '-', '_' or '+', \
                     starting with a letter or digit",
                    spec.target
                ),
            );
        }
        // The kubelet reports `vMAJOR.MINOR.PATCH`: a target that is not one could never be
        // reached, nor ordered against what the nodes run (the skew policy, a downgrade).
        if spec.version_source == VersionSource::KubeletVersion
            && version_numbers(&spec.target).is_none()
        {
            return bad(
                "target",
                format!(
                    "{:?} is not a Kubernetes version vMAJOR.MINOR.PATCH[-pre] (v1.38.0, say), \
                     as the kubelet reports its version (an OS image or a node label is another \
                     version source)",
                    spec.target
                ),
            );
        }
        if let VersionSource::Label(key) = &spec.version_source
            && (key.is_empty() || key.contains(['=', ',', ' ']))
        {
            return bad(
                "version_source",
                format!("label key {key:?} is not a label key"),
            );
        }
        // The selector by the apiserver's grammar, the node names, none twice: core's rules.
        check_selection(spec.selector.as_deref(), &spec.nodes)?;
        match spec.max_unavailable {
            MaxUnavailable::Count(0) => {
                return bad("max_unavailable", "must be at least 1".into());
            }
            MaxUnavailable::Percent(p) if p == 0 || p > 100 => {
                return bad(
                    "max_unavailable",
                    format!("{p}% must be between 1% and 100%"),
                );
            }
            _ => {}
        }
        for (field, d) in [
            ("drain.timeout", spec.drain.timeout),
            ("deadline", spec.deadline),
            ("reboot_timeout", spec.reboot_timeout),
        ] {
            if let Err(why) = within_a_day(d) {
                return bad(field, why);
            }
        }
        if !spec.binary.starts_with('/') || spec.binary.contains(char::is_whitespace) {
            return bad(
                "binary",
                format!("{:?} must be an absolute path without spaces", spec.binary),
            );
        }
        for (field, argv) in [
            ("command", &spec.command),
            ("health_check", &spec.health_check),
        ] {
            if let Some(argv) = argv
                && (argv.is_empty() || argv.iter().any(String::is_empty))
            {
                return bad(
                    field,
                    "must be a non-empty argv with no empty element".into(),
                );
            }
        }
        let time_zone = spec.window.as_ref().map(Window::validate).transpose()?;
        if spec.failure_budget == 0 {
            return bad("failure_budget", "must be at least 1".into());
        }
        if let Some(soak) = spec.soak
            && let Err(why) = within_a_day(soak)
        {
            return bad("soak", format!("{why} (leave it unset for none)"));
        }
        if let MaxUnavailable::Count(width) = spec.max_unavailable {
            budget_within(spec.failure_budget, width as usize, &width.to_string())?;
        }
        spec.placement().validate()?;
        let plan = Plan { spec, time_zone };
        // The Jobs themselves: core's own rules (namespace, image pin, argv) on a sample node.
        for job in [Some(plan.host_spec("node")), plan.health_spec("node")]
            .into_iter()
            .flatten()
        {
            job.validate().map_err(|e| PlanError::job(&e, "command"))?;
        }
        Ok(plan)
    }

    /// The validated fields.
    pub fn spec(&self) -> &PlanSpec {
        &self.spec
    }

    /// The target version.
    pub fn target(&self) -> &str {
        &self.spec.target
    }

    /// The window's time zone, when there is a window.
    pub fn time_zone(&self) -> Option<&TimeZone> {
        self.time_zone.as_ref()
    }

    /// What keeps the next batch from starting: `stop`, the failure budget, the window.
    pub fn limits(&self, stop: &Stop) -> Limits {
        Limits {
            failure_budget: self.spec.failure_budget,
            window: (self.spec.window.clone()).zip(self.time_zone.clone()),
            max_blocked: self.spec.max_blocked,
            ..Limits::new(stop.clone())
        }
    }

    /// How many of `nodes` nodes may be unavailable at once, refused when that caps the
    /// failure budget: with a percentage, a [`PlanError`] only the selected nodes can tell (a
    /// count is checked by [`Plan::build`]).
    pub fn width(&self, nodes: usize) -> Result<usize, PlanError> {
        let width = self.spec.max_unavailable.of(nodes);
        if let MaxUnavailable::Percent(p) = self.spec.max_unavailable {
            let said = format!("{p}% of {nodes} node(s), that is {width}");
            budget_within(self.spec.failure_budget, width, &said)?;
        }
        Ok(width)
    }

    /// The upgrade's argv.
    pub fn command(&self) -> Vec<String> {
        let argv = self.spec.command.clone().unwrap_or_else(|| {
            let mut argv: Vec<String> = NSENTER.iter().map(|s| s.to_string()).collect();
            argv.extend([self.spec.binary.clone(), "upgrade".into(), "--to".into()]);
            argv.push("{version}".into());
            argv
        });
        self.expand(argv)
    }

    fn expand(&self, argv: Vec<String>) -> Vec<String> {
        argv.into_iter()
            .map(|a| a.replace("{version}", &self.spec.target))
            .collect()
    }

    /// The name of the host Job for `node`: `upgrade-<node>-<target>` through [`trunc_name`],
    /// so at most 63 characters and, as a target has dots, suffixed with a hash of the whole:
    /// unique per node and target.
    pub fn job_name(&self, node: &str) -> String {
        self.job_name_toward(node, &self.spec.target)
    }

    /// The name of the host Job for `node` toward `target`: an earlier run's toward another
    /// target is found by it.
    pub fn job_name_toward(&self, node: &str, target: &str) -> String {
        host_job_name(node, target)
    }

    /// The name of the health-check Job for `node`: `health-<node>-<target>`, likewise.
    pub fn health_job_name(&self, node: &str) -> String {
        trunc_name(&format!("health-{node}-{}", self.spec.target))
    }

    /// The host Job of `node`: critical (the node is drained).
    pub fn host_spec(&self, node: &str) -> Spec {
        self.job(
            node,
            self.job_name(node),
            self.command(),
            "per-node upgrade",
        )
    }

    /// The name of the rollback Job for `node`: `rollback-<node>-<target>` (the target it rolls
    /// back from), likewise.
    pub fn rollback_job_name(&self, node: &str) -> String {
        rollback_job_name(node, &self.spec.target)
    }

    /// The rollback's argv toward `version`: `nsenter ... -- <binary> rollback --to <version>`.
    pub fn rollback_command(&self, version: &str) -> Vec<String> {
        let mut argv: Vec<String> = NSENTER.iter().map(|s| s.to_string()).collect();
        argv.extend([
            self.spec.binary.clone(),
            "rollback".into(),
            "--to".into(),
            version.into(),
        ]);
        argv
    }

    /// The rollback Job of `node` toward `version`: critical (the node is drained).
    pub fn rollback_spec(&self, node: &str, version: &str) -> Spec {
        self.job(
            node,
            self.rollback_job_name(node),
            self.rollback_command(version),
            "per-node rollback",
        )
    }

    /// The health-check Job of `node`, when the plan has one.
    pub fn health_spec(&self, node: &str) -> Option<Spec> {
        let argv = self.expand(self.spec.health_check.clone()?);
        Some(self.job(node, self.health_job_name(node), argv, "health check"))
    }

    fn job(&self, node: &str, name: String, argv: Vec<String>, kind: &str) -> Spec {
        // The wait bound covers the deadline, with a minute for the pod to start and the Job
        // controller to write the terminal condition.
        let bound = self.spec.deadline + Duration::from_secs(60);
        Spec {
            namespace: self.spec.namespace.clone(),
            name,
            node: node.to_string(),
            label_key: format!("{PREFIX}upgrade"),
            container: "upgrade".into(),
            argv,
            active_deadline: self.spec.deadline,
            poll_attempts: bound
                .as_secs()
                .div_ceil(nodejob_core::POLL_INTERVAL.as_secs()) as u32,
            kind: kind.into(),
            critical: true,
            image: self.spec.image.clone(),
            output: None,
        }
    }
}

/// Whether a plan keeps the version skew policy (the default) or may go past it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Skew {
    /// A roll that breaks the policy is refused, naming the rule, the nodes and the
    /// versions: before any write, and before each batch.
    #[default]
    Enforce,
    /// Allowed: asked for. The run and the preview say every breach.
    Allow,
}
