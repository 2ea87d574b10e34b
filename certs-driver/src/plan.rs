//! [`Plan`]: what a CA rotation does, validated when built ([`Plan::build`]) so that bad input
//! is refused before any API call, with an error naming the field and the rule. The new CA is
//! named by its certificate (PEM) and its [`Fingerprint`], and the two must agree. The
//! certificate is read as X.509 (`x509-parser`): exactly one certificate, nothing after it,
//! a CA (`basicConstraints` CA:TRUE). Whether it is valid *now* needs the cluster's clock, so
//! the run and the preview check it first ([`Plan::check_ca_valid_at`]), before the Lease.

use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use nodejob_core::{Spec, trunc_name};
use nodejob_roll::{
    Limits, NSENTER, Placement, PlanError, Stop, Window, check_selection, identity,
};

use crate::fingerprint::Fingerprint;
use crate::phase::CaStep;

/// The label key of the driver's host Jobs (its value: the node, as core hashes it).
pub(crate) const LABEL_KEY: &str = "stratum.ciq.com/carotate";

/// The fields of a [`Plan`], every one with a default but the new CA. Serialised whole (a
/// preview token hashes it), so a new field must serialise.
#[derive(Clone, PartialEq, serde::Serialize)]
pub struct PlanSpec {
    /// The new CA's certificate, PEM: one `CERTIFICATE` block holding one X.509 certificate
    /// with `basicConstraints` CA:TRUE, and nothing secret. The driver checks it against
    /// `fingerprint`, and that it is valid by the cluster's clock when a run or a preview
    /// starts; it passes the hosts the fingerprint only.
    pub ca_certificate: String,
    /// The new CA's fingerprint, `sha256:` and 64 lowercase hex digits.
    pub fingerprint: String,
    /// Nodes by label selector (`k=v,k2`); with `nodes` too, a node must match both.
    pub selector: Option<String>,
    /// Nodes by name; empty: every node the selector matches (every node when both are unset).
    pub nodes: Vec<String>,
    /// Whether `issue` and `finalize` require every node of the cluster in the plan (the
    /// default, `true`: a CA is cluster-wide, and a node left out would stop trusting leaves the
    /// others present). `false` lets them run on the selected nodes alone, for clusters whose
    /// other nodes do not use this CA (another trust domain, the end-to-end suite's shared
    /// control plane); `abort` looks for a begun `issue` on every node either way.
    pub cluster_wide: bool,
    /// How many workers run a phase at once (control-plane nodes: always one at a time).
    pub concurrency: u32,
    /// Each host Job's `activeDeadlineSeconds`.
    pub deadline: Duration,
    /// After `issue`, how long the node may take to begin restarting its components (to go
    /// NotReady); a node that stays Ready through it is taken as restarted.
    pub restart_grace: Duration,
    /// After `issue`, how long the node has to be Ready again.
    pub ready_timeout: Duration,
    /// The on-host binary, an absolute path.
    pub binary: String,
    /// The argv before the binary; default [`NSENTER`]. Empty: the binary is exec'd directly.
    pub prefix: Vec<String>,
    /// The namespace of the host Jobs, the Lease and the step Events.
    pub namespace: String,
    /// The image of the host Jobs; `None`: core's pinned image.
    pub image: Option<String>,
    /// The Lease both drivers share.
    pub lease_name: String,
    /// Who holds the Lease: unique per process. Default `certs-driver-<pid>-<start>` (the
    /// process id and when this process first built a plan, in hex nanoseconds): the same for
    /// the life of the process, so a driver restarted as a new process waits out the Lease of
    /// the one that died (at most `lease_duration`) unless it is given that one's identity.
    pub identity: String,
    /// `leaseDurationSeconds`: renewed every third of it.
    pub lease_duration: Duration,
    /// When a batch may start (a node in flight finishes); `None`: any time. A phase that
    /// meets a closed window stops there; a rerun inside the window resumes.
    pub window: Option<Window>,
    /// How many failed nodes stop the rotation within a phase (default 1: the first). A phase
    /// goes on over the other nodes while fewer have failed; no phase starts after a failure.
    pub failure_budget: u32,
}

impl fmt::Debug for PlanSpec {
    /// The certificate is shown by its size only: a plan is printed in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlanSpec")
            .field(
                "ca_certificate",
                &format_args!("<{} bytes>", self.ca_certificate.len()),
            )
            .field("fingerprint", &self.fingerprint)
            .field("selector", &self.selector)
            .field("nodes", &self.nodes)
            .field("cluster_wide", &self.cluster_wide)
            .field("concurrency", &self.concurrency)
            .field("deadline", &self.deadline)
            .field("restart_grace", &self.restart_grace)
            .field("ready_timeout", &self.ready_timeout)
            .field("binary", &self.binary)
            .field("prefix", &self.prefix)
            .field("namespace", &self.namespace)
            .field("image", &self.image)
            .field("lease_name", &self.lease_name)
            .field("identity", &self.identity)
            .field("lease_duration", &self.lease_duration)
            .field("window", &self.window)
            .field("failure_budget", &self.failure_budget)
            .finish()
    }
}

impl PlanSpec {
    /// A rotation to the CA of `ca_certificate` (PEM) and `fingerprint`, every other field at
    /// its default.
    pub fn new(ca_certificate: impl Into<String>, fingerprint: impl Into<String>) -> Self {
        let Placement {
            namespace,
            image,
            lease_name,
            identity,
            lease_duration,
        } = Placement::new(process_identity());
        PlanSpec {
            ca_certificate: ca_certificate.into(),
            fingerprint: fingerprint.into(),
            selector: None,
            nodes: Vec::new(),
            cluster_wide: true,
            concurrency: 1,
            deadline: Duration::from_secs(10 * 60),
            restart_grace: Duration::from_secs(30),
            ready_timeout: Duration::from_secs(10 * 60),
            binary: "/usr/local/bin/stratum".into(),
            prefix: NSENTER.iter().map(|s| s.to_string()).collect(),
            namespace,
            image,
            lease_name,
            identity,
            lease_duration,
            window: None,
            failure_budget: 1,
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

/// `certs-driver-<pid>-<hex nanoseconds since the epoch>`, fixed at the first call: unique per
/// process (a reused pid comes with another time), the same for its whole life.
fn process_identity() -> String {
    static IDENTITY: OnceLock<String> = OnceLock::new();
    IDENTITY
        .get_or_init(|| {
            let since_epoch = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            identity("certs-driver", std::process::id(), since_epoch)
        })
        .clone()
}

/// A validated CA-rotation plan. See [`PlanSpec`] for the fields.
#[derive(Clone, Debug)]
pub struct Plan {
    spec: PlanSpec,
    fingerprint: Fingerprint,
    /// The window's time zone, when there is a window.
    time_zone: Option<TimeZone>,
    /// The new CA's `notBefore` and `notAfter`.
    validity: (Timestamp, Timestamp),
    /// The new CA's subject and issuer, as RFC 4514 strings.
    names: (String, String),
}

/// How soon before its `notAfter` a new CA is warned about: 90 days. The nodes' leaves issued
/// from it cannot outlive it, so a rotation to it buys little time.
pub const CA_EXPIRY_WARNING: Duration = Duration::from_secs(90 * 24 * 3600);

/// The new CA's certificate as a person checks it before a rotation: who it is, who signed
/// it, when it is valid, its fingerprint, and how long it has left by the cluster's clock.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CaSummary {
    /// The subject (RFC 4514, e.g. `CN=cluster CA,O=example`).
    pub subject: String,
    /// The issuer (RFC 4514); the subject again for a self-signed root.
    pub issuer: String,
    /// Its `notBefore` (RFC 3339).
    pub not_before: String,
    /// Its `notAfter` (RFC 3339).
    pub not_after: String,
    /// `sha256:` and the hex of its DER.
    pub fingerprint: String,
    /// Whole days from the cluster's clock to `notAfter` (negative once expired).
    pub days_left: i64,
    /// Whether it expires within [`CA_EXPIRY_WARNING`] of the cluster's clock (not yet
    /// expired: an expired CA is refused, [`Plan::check_ca_valid_at`]).
    pub expires_soon: bool,
}

impl Plan {
    /// Validates `spec`: every bad field is refused with a [`PlanError`] naming it.
    pub fn build(spec: PlanSpec) -> Result<Plan, PlanError> {
        let bad = |field, rule: String| Err(PlanError { field, rule });
        let Some(fingerprint) = Fingerprint::parse(&spec.fingerprint) else {
            return bad(
                "fingerprint",
                format!(
                    "{:?} must be sha256: and 64 lowercase hex digits",
                    spec.fingerprint
                ),
            );
        };
        let ca = match CaCertificate::read(&spec.ca_certificate) {
            Ok(ca) => ca,
            Err(rule) => return bad("ca_certificate", rule),
        };
        let of_certificate = Fingerprint::of_der(&ca.der);
        if of_certificate != fingerprint {
            return bad(
                "fingerprint",
                format!(
                    "{fingerprint} is not the certificate's: its DER hashes to {of_certificate}"
                ),
            );
        }
        // The selector by the apiserver's grammar, the node names, none twice: core's rules.
        check_selection(spec.selector.as_deref(), &spec.nodes)?;
        if spec.concurrency == 0 {
            return bad("concurrency", "must be at least 1".into());
        }
        for (field, d) in [
            ("deadline", spec.deadline),
            ("ready_timeout", spec.ready_timeout),
        ] {
            if let Err(why) = nodejob_core::duration::within_a_day(d) {
                return bad(field, why);
            }
        }
        if !spec.binary.starts_with('/') || spec.binary.contains(char::is_whitespace) {
            return bad(
                "binary",
                format!("{:?} must be an absolute path without spaces", spec.binary),
            );
        }
        if spec.prefix.iter().any(String::is_empty) {
            return bad("prefix", "must have no empty element".into());
        }
        let time_zone = spec.window.as_ref().map(Window::validate).transpose()?;
        if spec.failure_budget == 0 {
            return bad("failure_budget", "must be at least 1".into());
        }
        spec.placement().validate()?;
        let plan = Plan {
            spec,
            fingerprint,
            time_zone,
            validity: (ca.not_before, ca.not_after),
            names: (ca.subject, ca.issuer),
        };
        // The Jobs themselves: core's own rules (namespace, image pin, argv) on a sample node.
        (plan.host_spec(CaStep::Stage, "node", &[]).validate())
            .map_err(|e| PlanError::job(&e, "prefix"))?;
        Ok(plan)
    }

    /// The validated fields.
    pub fn spec(&self) -> &PlanSpec {
        &self.spec
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
            ..Limits::new(stop.clone())
        }
    }

    /// The new CA's fingerprint.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// The new CA's validity: its `notBefore` and `notAfter`.
    pub fn ca_validity(&self) -> (Timestamp, Timestamp) {
        self.validity
    }

    /// The new CA's certificate as of `now` (the cluster's clock).
    pub fn ca_summary(&self, now: Timestamp) -> CaSummary {
        let (not_before, not_after) = self.validity;
        let left = not_after.as_second().saturating_sub(now.as_second());
        CaSummary {
            subject: self.names.0.clone(),
            issuer: self.names.1.clone(),
            not_before: not_before.to_string(),
            not_after: not_after.to_string(),
            fingerprint: self.fingerprint.to_string(),
            days_left: left.div_euclid(24 * 3600),
            expires_soon: (0..CA_EXPIRY_WARNING.as_secs() as i64).contains(&left),
        }
    }

    /// Refuses a new CA that is not valid at `now`, which must come from the cluster's clock
    /// (the backend's [`nodejob_core::Clock::wall_time`]): [`run`](crate::run) and
    /// [`preview`](crate::preview) check it first, before the Lease. Valid means `notBefore
    /// <= now <= notAfter` (RFC 5280, 4.1.2.5): a rotation to a CA that expired, or is not
    /// valid yet, would leave every node with leaves nothing verifies.
    ///
    /// # Errors
    /// A [`PlanError`] on `ca_certificate` naming the bound and `now`.
    pub fn check_ca_valid_at(&self, now: Timestamp) -> Result<(), PlanError> {
        let (not_before, not_after) = self.validity;
        let rule = if now < not_before {
            format!(
                "the certificate is not valid yet: its notBefore, {not_before}, is after now \
                 ({now} by the cluster's clock)"
            )
        } else if now > not_after {
            format!(
                "the certificate expired: its notAfter, {not_after}, is before now ({now} by \
                 the cluster's clock)"
            )
        } else {
            return Ok(());
        };
        Err(PlanError::new("ca_certificate", rule))
    }

    /// The argv of `carotate <step>` on a host: the prefix, the binary, `carotate`, the
    /// step's subcommand and its arguments (the new CA's fingerprint; for `verify`, and after
    /// `issue`'s `--ca`, `--expect` the new CA then each of `also`).
    pub fn command(&self, step: CaStep, also: &[Fingerprint]) -> Vec<String> {
        let fp = self.fingerprint.to_string();
        let mut argv = self.spec.prefix.clone();
        argv.extend([self.spec.binary.clone(), "carotate".into()]);
        let args: Vec<String> = match step {
            CaStep::Status => vec!["status".into()],
            CaStep::Stage => vec!["stage".into(), "--add".into(), fp],
            // Verified after it, as `verify` below: the gate before finalize reads the answer
            // from the issue Job's own output.
            CaStep::Issue => {
                let mut v = vec!["issue".into(), "--ca".into(), fp.clone()];
                v.extend(["--expect".into(), fp]);
                for other in also {
                    v.extend(["--expect".into(), other.to_string()]);
                }
                v
            }
            CaStep::Finalize => vec!["finalize".into(), "--keep".into(), fp],
            CaStep::Abort => vec!["abort".into(), "--remove".into(), fp],
            CaStep::Verify => {
                let mut v = vec!["verify".into(), "--expect".into(), fp];
                for other in also {
                    v.extend(["--expect".into(), other.to_string()]);
                }
                v
            }
        };
        argv.extend(args);
        argv
    }

    /// The name of `step`'s host Job on `node`: `ca-<step>-<node>-<fingerprint hex>` through
    /// [`trunc_name`], so at most 63 characters, unique per node, step and new CA.
    pub fn job_name(&self, step: CaStep, node: &str) -> String {
        trunc_name(&format!(
            "ca-{}-{node}-{}",
            step.subcommand(),
            self.fingerprint.hex()
        ))
    }

    /// The host Job of `step` on `node` (never critical: a rotation drains nothing).
    pub fn host_spec(&self, step: CaStep, node: &str, also: &[Fingerprint]) -> Spec {
        // The wait bound covers the deadline, with a minute for the pod to start and the Job
        // controller to write the terminal condition.
        let bound = self.spec.deadline + Duration::from_secs(60);
        Spec {
            namespace: self.spec.namespace.clone(),
            name: self.job_name(step, node),
            node: node.to_string(),
            label_key: LABEL_KEY.into(),
            container: "carotate".into(),
            argv: self.command(step, also),
            active_deadline: self.spec.deadline,
            poll_attempts: bound
                .as_secs()
                .div_ceil(nodejob_core::POLL_INTERVAL.as_secs()) as u32,
            kind: format!("carotate {}", step.subcommand()),
            critical: false,
            image: self.spec.image.clone(),
            output: None,
        }
    }
}

impl Fingerprint {
    /// The fingerprint of the certificate in `pem`, read by the rules [`Plan::build`] applies
    /// to [`PlanSpec::ca_certificate`] (exactly one `CERTIFICATE` block holding exactly one
    /// X.509 CA certificate, nothing else, no key material), so a caller holding only the
    /// certificate file fills [`PlanSpec::fingerprint`] from it. A refusal is a [`PlanError`]
    /// on `ca_certificate` whose rule never quotes the text.
    pub fn of_pem(pem: &str) -> Result<Fingerprint, PlanError> {
        CaCertificate::read(pem)
            .map(|ca| Fingerprint::of_der(&ca.der))
            .map_err(|rule| PlanError::new("ca_certificate", rule))
    }
}

/// The new CA's certificate, as [`Plan::build`] reads it.
struct CaCertificate {
    /// Its DER encoding: what the fingerprint hashes.
    der: Vec<u8>,
    not_before: Timestamp,
    not_after: Timestamp,
    subject: String,
    issuer: String,
}

impl CaCertificate {
    /// The one certificate of `pem`, or the rule it breaks: the PEM block
    /// ([`certificate_der`]), then its DER as exactly one X.509 certificate with nothing
    /// after it, then `basicConstraints` CA:TRUE. No rule quotes the text or the DER.
    fn read(pem: &str) -> Result<CaCertificate, String> {
        let der = certificate_der(pem)?;
        let (after, certificate) = x509_parser::parse_x509_certificate(&der).map_err(|_| {
            "the CERTIFICATE block does not hold an X.509 certificate (DER); give the CA's \
             certificate, never a key"
                .to_string()
        })?;
        if !after.is_empty() {
            return Err(format!(
                "the CERTIFICATE block holds {} more bytes after the certificate: it must hold \
                 exactly one X.509 certificate",
                after.len()
            ));
        }
        match certificate.basic_constraints() {
            Ok(Some(constraints)) if constraints.value.ca => {}
            Ok(Some(_)) => {
                return Err(
                    "the certificate is not a CA's: its basicConstraints say CA:FALSE".into(),
                );
            }
            Ok(None) => {
                return Err("the certificate is not a CA's: it has no basicConstraints \
                            extension with CA:TRUE"
                    .into());
            }
            Err(e) => {
                return Err(format!(
                    "the certificate's basicConstraints are unreadable: {e}"
                ));
            }
        }
        let at = |seconds: i64, otherwise: Timestamp| {
            Timestamp::from_second(seconds).unwrap_or(otherwise)
        };
        let validity = certificate.validity();
        Ok(CaCertificate {
            not_before: at(validity.not_before.timestamp(), Timestamp::MAX),
            not_after: at(validity.not_after.timestamp(), Timestamp::MIN),
            subject: certificate.subject().to_string(),
            issuer: certificate.issuer().to_string(),
            der,
        })
    }
}

/// The DER of the one `CERTIFICATE` block of `pem`, or the rule it breaks. Anything that
/// looks like a private key is refused without being quoted.
fn certificate_der(pem: &str) -> Result<Vec<u8>, String> {
    if pem.contains("PRIVATE KEY") {
        return Err(
            "holds a private key: give the CA's public certificate only; the driver never \
             takes key material"
                .into(),
        );
    }
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let blocks = pem.matches("-----BEGIN ").count();
    if blocks != 1 || pem.matches(BEGIN).count() != 1 {
        return Err(format!(
            "must hold exactly one PEM CERTIFICATE block, found {blocks} PEM block(s)"
        ));
    }
    let (before, rest) = pem.split_once(BEGIN).unwrap_or_default();
    let Some((body, after)) = rest.split_once(END) else {
        return Err(format!("the CERTIFICATE block has no {END} line"));
    };
    if !before.trim().is_empty() || !after.trim().is_empty() {
        return Err("must hold the CERTIFICATE block and nothing else".into());
    }
    base64(body).ok_or_else(|| "the CERTIFICATE block is not base64".into())
}

/// Decodes standard base64 (whitespace ignored, `=` padding at the end only).
fn base64(text: &str) -> Option<Vec<u8>> {
    let symbols: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let data = symbols
        .strip_suffix(b"==")
        .or_else(|| symbols.strip_suffix(b"="))
        .unwrap_or(&symbols);
    if !symbols.len().is_multiple_of(4) {
        return None;
    }
    let value = |b: u8| -> Option<u32> {
        Some(match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(data.len() * 3 / 4);
    for chunk in data.chunks(4) {
        let mut acc = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            acc |= value(*b)? << (18 - 6 * i);
        }
        let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        let table: [(&str, Option<&[u8]>); 6] = [
            ("", Some(b"")),
            ("TQ==", Some(b"M")),
            ("TWE=", Some(b"Ma")),
            ("TWFu", Some(b"Man")),
            ("TW\nFu\n", Some(b"Man")),
            ("TW*u", None),
        ];
        for (text, want) in table {
            assert_eq!(base64(text).as_deref(), want, "{text:?}");
        }
    }
}
