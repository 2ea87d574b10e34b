//! What a plan of either driver holds in common: where its host Jobs run and which Lease fences
//! them ([`Placement`], with its defaults and rules), a driver's default Lease [`identity`], the
//! [`PlanError`] that names a refused field, and which nodes are control-plane nodes.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nodejob_core::Error;
use nodejob_core::is_dns1123_subdomain;
use nodejob_core::lease::LeaseConfig;

/// The label that marks a control-plane node: drivers take those one at a time, first.
pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// Whether `node` carries [`CONTROL_PLANE_LABEL`] (whatever its value).
pub fn is_control_plane(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(CONTROL_PLANE_LABEL))
}

/// The entry into the host's namespaces, as the seed's Jobs do it: the argv before a host
/// binary, so that it runs in PID 1's mount, UTS, IPC, network and PID namespaces.
pub const NSENTER: [&str; 9] = [
    "nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--",
];

/// A driver's default Lease identity: `<prefix>-<pid>-<hex nanoseconds since the epoch>`, for
/// the process `pid` started at `since_epoch`: unique per process (a reused pid comes with
/// another time). The driver reads its pid and the time once, and keeps the answer for the
/// life of the process.
///
/// ```
/// # use std::time::Duration;
/// # use nodejob_roll::identity;
/// assert_eq!(identity("upgrade-driver", 42, Duration::from_nanos(255)), "upgrade-driver-42-ff");
/// ```
pub fn identity(prefix: &str, pid: u32, since_epoch: Duration) -> String {
    format!("{prefix}-{pid}-{:x}", since_epoch.as_nanos())
}

/// The namespace a driver's Jobs, Lease and step Events live in by default.
pub const DEFAULT_NAMESPACE: &str = "kube-system";

/// The Lease both drivers share by default: one host-mutating operation at a time.
pub const DEFAULT_LEASE_NAME: &str = "nodejob";

/// The shortest Lease duration a plan accepts.
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(15);

/// The longest Lease duration a plan accepts: what `leaseDurationSeconds`, an int32, holds.
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(i32::MAX as u64);

/// Where a driver's host Jobs run and which Lease fences them: the part of a plan both drivers
/// share, with its defaults ([`Placement::new`]) and its rules ([`Placement::validate`]). A
/// driver's `PlanSpec` keeps these as fields of its own and reads them back as one
/// ([`Placement`] is what it validates and acquires the Lease with).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The namespace of the host Jobs, the Lease and the step Events.
    pub namespace: String,
    /// The image of the host Jobs; `None`: core's pinned image.
    pub image: Option<String>,
    /// The Lease both drivers share.
    pub lease_name: String,
    /// Who holds the Lease: unique per process (see [`identity`]).
    pub identity: String,
    /// `leaseDurationSeconds`: renewed every third of it.
    pub lease_duration: Duration,
}

impl Placement {
    /// The defaults, held by `identity`: [`DEFAULT_NAMESPACE`], core's pinned image,
    /// [`DEFAULT_LEASE_NAME`], a 60s Lease.
    pub fn new(identity: String) -> Self {
        Placement {
            namespace: DEFAULT_NAMESPACE.into(),
            image: None,
            lease_name: DEFAULT_LEASE_NAME.into(),
            identity,
            lease_duration: Duration::from_secs(60),
        }
    }

    /// Refuses a namespace other than `kube-system` or `default`, an empty identity, a Lease
    /// shorter than [`MIN_LEASE_DURATION`] (zero included) or longer than
    /// [`MAX_LEASE_DURATION`], and a Lease name that is not a DNS-1123 subdomain, in that
    /// order. The image is checked with the Jobs ([`PlanError::job`]).
    pub fn validate(&self) -> std::result::Result<(), PlanError> {
        // The step Events are about Nodes: the apiserver takes those only in these two
        // namespaces (`legacyValidateEvent`, see nodejob_core::event).
        if self.namespace != "kube-system" && self.namespace != "default" {
            return Err(PlanError::new(
                "namespace",
                format!(
                    "{:?}: the driver's Jobs, Lease and step Events live in kube-system (or \
                     default): the apiserver accepts Events about Nodes only there",
                    self.namespace
                ),
            ));
        }
        if self.identity.is_empty() {
            return Err(PlanError::new("identity", "must not be empty"));
        }
        if self.lease_duration < MIN_LEASE_DURATION {
            return Err(PlanError::new(
                "lease_duration",
                format!("{:?} must be at least 15s", self.lease_duration),
            ));
        }
        // Written as `leaseDurationSeconds`, an int32 (coordination/v1 LeaseSpec): a longer
        // duration would be cut to what it holds, not the duration asked for.
        if self.lease_duration > MAX_LEASE_DURATION {
            return Err(PlanError::new(
                "lease_duration",
                format!(
                    "{:?} must be at most {}s: leaseDurationSeconds is an int32",
                    self.lease_duration,
                    MAX_LEASE_DURATION.as_secs()
                ),
            ));
        }
        if !is_dns1123_subdomain(&self.lease_name) {
            return Err(PlanError::new(
                "lease_name",
                format!("{:?} is not a DNS-1123 subdomain", self.lease_name),
            ));
        }
        Ok(())
    }

    /// The Lease to acquire.
    pub fn lease_config(&self) -> LeaseConfig {
        LeaseConfig {
            namespace: self.namespace.clone(),
            name: self.lease_name.clone(),
            identity: self.identity.clone(),
            duration: self.lease_duration,
        }
    }

    /// The Lease as `namespace/name`.
    pub fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.lease_name)
    }
}

/// A field of a driver's plan refused, and why. The rule never quotes secret material (a
/// certificate, a key).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid plan: {field}: {rule}")]
pub struct PlanError {
    /// The field, as the driver's `PlanSpec` names it.
    pub field: &'static str,
    /// The rule it breaks, with the value.
    pub rule: String,
}

impl PlanError {
    /// `field` refused by `rule`.
    pub fn new(field: &'static str, rule: impl Into<String>) -> Self {
        PlanError {
            field,
            rule: rule.into(),
        }
    }

    /// A plan's sample host Job refused by [`Spec::validate`](nodejob_core::Spec::validate): on
    /// `namespace` or `image` when the error names them, otherwise on `argv_field`, the plan's
    /// field the Job's argv comes from.
    pub fn job(error: &Error, argv_field: &'static str) -> Self {
        let rule = error.to_string();
        let field = match &rule {
            s if s.contains("namespace") => "namespace",
            s if s.contains("image") => "image",
            _ => argv_field,
        };
        PlanError { field, rule }
    }
}
