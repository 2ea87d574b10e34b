//! PodSecurity admission (`k8s.io/pod-security-admission`): the level a namespace enforces
//! (its `pod-security.kubernetes.io/enforce` label) and the checks a Pod fails at that level,
//! with the plugin's message. A pure function: the apiserver's pod create and the controllers
//! that create pods call it.
//!
//! Modelled checks, in the order the plugin runs them at v1.37 (`policy/registry.go`
//! `EvaluatePod`: the baseline checks, then for `baseline` the baseline checks a restricted one
//! overlaps, for `restricted` the restricted checks; each list in the order the `check_*.go`
//! files register):
//!
//! | level | check | reason (detail) |
//! |---|---|---|
//! | baseline | `hostNamespaces` | `host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)` |
//! | baseline | `hostPorts` | `hostPort (container "c" uses hostPort 80)` |
//! | baseline | `privileged` | `privileged (container "c" must not set securityContext.privileged=true)` |
//! | baseline only | `hostPathVolumes` | `hostPath volumes (volume "v")` |
//! | restricted | `allowPrivilegeEscalation` | `allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false)` |
//! | restricted | `capabilities_restricted` | `unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"])` |
//! | restricted | `restrictedVolumes` | `restricted volume types (volume "v" uses restricted volume type "hostPath")` |
//! | restricted | `runAsNonRoot` | `runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)` |
//! | restricted | `seccompProfile_restricted` | `seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")` |
//!
//! Not modelled: the other checks (AppArmor, SELinux, `/proc` mount, sysctls, non-default
//! capabilities at `baseline`, `runAsUser=0`, probe and lifecycle hosts, Windows host process),
//! the checks' per-version variants (a version label only shows in the message), exemptions,
//! the `audit` and `warn` modes, and invalid label values (treated as no label).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, Volume};

use crate::labels::{
    POD_SECURITY_ENFORCE as ENFORCE_LABEL, POD_SECURITY_ENFORCE_VERSION as ENFORCE_VERSION_LABEL,
};

/// A Pod Security Standard level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// `singular` or `plural` for `n` things (`pluralize` in `policy/helpers.go`).
fn pluralize<'a>(singular: &'a str, plural: &'a str, n: usize) -> &'a str {
    if n == 1 { singular } else { plural }
}

/// `"a", "b"` (`joinQuote`).
fn join_quote(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    quoted.join(", ")
}

/// `containers "a", "b"`: the noun counted for `names`, then the names quoted, as the plugin
/// words its details.
fn counted(singular: &str, plural: &str, names: &[String]) -> String {
    format!(
        "{} {}",
        pluralize(singular, plural, names.len()),
        join_quote(names)
    )
}

/// One failed check: its reason and detail.
type Violation = (&'static str, String);

fn containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    // visitContainers: init containers first, then containers.
    (spec.init_containers.iter().flatten()).chain(spec.containers.iter())
}

/// Containers (by name) for which `bad` holds.
fn names(spec: &PodSpec, bad: impl Fn(&Container) -> bool) -> Vec<String> {
    containers(spec)
        .filter(|c| bad(c))
        .map(|c| c.name.clone())
        .collect()
}

fn host_namespaces(spec: &PodSpec) -> Option<Violation> {
    let namespaces: Vec<&str> = [
        (spec.host_network, "hostNetwork=true"),
        (spec.host_pid, "hostPID=true"),
        (spec.host_ipc, "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(set, _)| *set == Some(true))
    .map(|(_, name)| name)
    .collect();
    (!namespaces.is_empty()).then(|| ("host namespaces", namespaces.join(", ")))
}

fn host_ports(spec: &PodSpec) -> Option<Violation> {
    let ports = |c: &Container| -> Vec<i32> {
        (c.ports.iter().flatten())
            .filter_map(|p| p.host_port.filter(|h| *h != 0))
            .collect()
    };
    let bad = names(spec, |c| !ports(c).is_empty());
    if bad.is_empty() {
        return None;
    }
    // A set of strings: sorted as strings.
    let mut all: Vec<String> = containers(spec)
        .flat_map(ports)
        .map(|p| p.to_string())
        .collect();
    all.sort();
    all.dedup();
    Some((
        "hostPort",
        format!(
            "{} {} {} {}",
            counted("container", "containers", &bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", all.len()),
            all.join(", ")
        ),
    ))
}

fn privileged(spec: &PodSpec) -> Option<Violation> {
    let bad = names(spec, |c| {
        c.security_context.as_ref().and_then(|s| s.privileged) == Some(true)
    });
    (!bad.is_empty()).then(|| {
        (
            "privileged",
            format!(
                "{} must not set securityContext.privileged=true",
                counted("container", "containers", &bad)
            ),
        )
    })
}

fn host_path_volumes(spec: &PodSpec) -> Option<Violation> {
    let bad: Vec<String> = (spec.volumes.iter().flatten())
        .filter(|v| v.host_path.is_some())
        .map(|v| v.name.clone())
        .collect();
    (!bad.is_empty()).then(|| ("hostPath volumes", counted("volume", "volumes", &bad)))
}

fn allow_privilege_escalation(spec: &PodSpec) -> Option<Violation> {
    let bad = names(spec, |c| {
        c.security_context
            .as_ref()
            .and_then(|s| s.allow_privilege_escalation)
            != Some(false)
    });
    (!bad.is_empty()).then(|| {
        (
            "allowPrivilegeEscalation != false",
            format!(
                "{} must set securityContext.allowPrivilegeEscalation=false",
                counted("container", "containers", &bad)
            ),
        )
    })
}

fn capabilities_restricted(spec: &PodSpec) -> Option<Violation> {
    let caps = |c: &Container| {
        c.security_context
            .as_ref()
            .and_then(|s| s.capabilities.clone())
    };
    let missing_drop = names(spec, |c| {
        caps(c).is_none_or(|k| !k.drop.iter().flatten().any(|d| d == "ALL"))
    });
    let forbidden = |c: &Container| -> Vec<String> {
        (caps(c).and_then(|k| k.add).into_iter().flatten())
            .filter(|a| a != "NET_BIND_SERVICE")
            .collect()
    };
    let adding = names(spec, |c| !forbidden(c).is_empty());
    let mut added: Vec<String> = containers(spec).flat_map(forbidden).collect();
    added.sort();
    added.dedup();
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            counted("container", "containers", &missing_drop)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            counted("container", "containers", &adding),
            join_quote(&added)
        ));
    }
    (!details.is_empty()).then(|| ("unrestricted capabilities", details.join("; ")))
}

/// The restricted type of a volume, if it has one (`restrictedVolumes`: only configMap, csi,
/// downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected and secret pass).
fn restricted_type(v: &Volume) -> Option<&'static str> {
    let allowed = v.config_map.is_some()
        || v.csi.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
        || v.ephemeral.is_some()
        || v.persistent_volume_claim.is_some()
        || v.projected.is_some()
        || v.secret.is_some();
    if allowed {
        None
    } else if v.host_path.is_some() {
        Some("hostPath")
    } else if v.nfs.is_some() {
        Some("nfs")
    } else if v.iscsi.is_some() {
        Some("iscsi")
    } else {
        Some("unknown")
    }
}

fn restricted_volumes(spec: &PodSpec) -> Option<Violation> {
    let bad: Vec<(String, &str)> = (spec.volumes.iter().flatten())
        .filter_map(|v| Some((v.name.clone(), restricted_type(v)?)))
        .collect();
    if bad.is_empty() {
        return None;
    }
    let volumes: Vec<String> = bad.iter().map(|(n, _)| n.clone()).collect();
    let mut types: Vec<String> = bad.iter().map(|(_, t)| t.to_string()).collect();
    types.sort();
    types.dedup();
    Some((
        "restricted volume types",
        format!(
            "{} {} restricted volume {} {}",
            counted("volume", "volumes", &volumes),
            pluralize("uses", "use", volumes.len()),
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ),
    ))
}

fn run_as_non_root(spec: &PodSpec) -> Option<Violation> {
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_non_root);
    let container = |c: &Container| c.security_context.as_ref().and_then(|s| s.run_as_non_root);
    let mut setters = Vec::new();
    if pod == Some(false) {
        setters.push("pod".to_string());
    }
    let explicit = names(spec, |c| container(c) == Some(false));
    if !explicit.is_empty() {
        setters.push(counted("container", "containers", &explicit));
    }
    if !setters.is_empty() {
        return Some((
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        ));
    }
    let implicit = names(spec, |c| container(c).is_none() && pod != Some(true));
    (!implicit.is_empty()).then(|| {
        (
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                counted("container", "containers", &implicit)
            ),
        )
    })
}

fn seccomp_restricted(spec: &PodSpec) -> Option<Violation> {
    let valid = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
        .map(|p| p.type_.clone());
    let container = |c: &Container| {
        (c.security_context.as_ref())
            .and_then(|s| s.seccomp_profile.as_ref())
            .map(|p| p.type_.clone())
    };
    let mut setters = Vec::new();
    let mut values = Vec::new();
    if let Some(t) = pod.as_ref().filter(|t| !valid(t)) {
        setters.push("pod".to_string());
        values.push(t.clone());
    }
    let pod_set = pod.as_ref().is_some_and(|t| valid(t));
    let explicit = names(spec, |c| container(c).is_some_and(|t| !valid(&t)));
    values.extend(containers(spec).filter_map(container).filter(|t| !valid(t)));
    if !explicit.is_empty() {
        setters.push(counted("container", "containers", &explicit));
    }
    if !setters.is_empty() {
        values.sort();
        values.dedup();
        return Some((
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters.join(" and "),
                join_quote(&values)
            ),
        ));
    }
    let implicit = names(spec, |c| container(c).is_none() && !pod_set);
    (!implicit.is_empty()).then(|| {
        (
            "seccompProfile",
            format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                counted("container", "containers", &implicit)
            ),
        )
    })
}

/// What PodSecurity answers for a pod with `spec` in a namespace labelled `labels`: `None` when
/// it is admitted, else the refusal the apiserver puts after `pods "NAME" is forbidden: `, e.g.
/// `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), privileged
/// (container "run" must not set securityContext.privileged=true)`.
pub(crate) fn pod_security(labels: &BTreeMap<String, String>, spec: &PodSpec) -> Option<String> {
    let level = labels
        .get(ENFORCE_LABEL)
        .and_then(|l| Level::parse(l))
        .unwrap_or(Level::Privileged);
    if level == Level::Privileged {
        return None;
    }
    let version = labels
        .get(ENFORCE_VERSION_LABEL)
        .map_or("latest", String::as_str);
    let mut checks: Vec<fn(&PodSpec) -> Option<Violation>> =
        vec![host_namespaces, host_ports, privileged];
    match level {
        Level::Restricted => checks.extend([
            allow_privilege_escalation as fn(&PodSpec) -> Option<Violation>,
            capabilities_restricted,
            restricted_volumes,
            run_as_non_root,
            seccomp_restricted,
        ]),
        _ => checks.push(host_path_volumes),
    }
    let violations: Vec<String> = checks
        .iter()
        .filter_map(|check| check(spec))
        .map(|(reason, detail)| format!("{reason} ({detail})"))
        .collect();
    (!violations.is_empty()).then(|| {
        format!(
            "violates PodSecurity \"{}:{version}\": {}",
            level.name(),
            violations.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Capabilities, ContainerPort, EmptyDirVolumeSource, HostPathVolumeSource,
        PodSecurityContext, SeccompProfile, SecurityContext,
    };

    use super::*;

    fn labels(level: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(ENFORCE_LABEL.to_string(), level.to_string())])
    }

    /// A node Job's pod: hostPID, hostNetwork, a privileged container `run`.
    fn node_job() -> PodSpec {
        PodSpec {
            host_pid: Some(true),
            host_network: Some(true),
            containers: vec![Container {
                name: "run".into(),
                security_context: Some(SecurityContext {
                    privileged: Some(true),
                    ..SecurityContext::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }
    }

    /// A pod that passes `restricted`.
    fn hardened() -> PodSpec {
        PodSpec {
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    ..SeccompProfile::default()
                }),
                ..PodSecurityContext::default()
            }),
            containers: vec![Container {
                name: "app".into(),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".into()]),
                        add: Some(vec!["NET_BIND_SERVICE".into()]),
                    }),
                    ..SecurityContext::default()
                }),
                ..Container::default()
            }],
            volumes: Some(vec![Volume {
                name: "scratch".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }
    }

    #[test]
    fn levels() {
        let job = node_job();
        let table = [
            // (labels, spec) -> refusal
            (BTreeMap::new(), job.clone(), None),
            (labels("privileged"), job.clone(), None),
            (labels("bogus"), job.clone(), None),
            (
                labels("baseline"),
                job.clone(),
                Some(
                    r#"violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true), privileged (container "run" must not set securityContext.privileged=true)"#,
                ),
            ),
            (
                labels("restricted"),
                job.clone(),
                Some(concat!(
                    r#"violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true, hostPID=true), "#,
                    r#"privileged (container "run" must not set securityContext.privileged=true), "#,
                    r#"allowPrivilegeEscalation != false (container "run" must set securityContext.allowPrivilegeEscalation=false), "#,
                    r#"unrestricted capabilities (container "run" must set securityContext.capabilities.drop=["ALL"]), "#,
                    r#"runAsNonRoot != true (pod or container "run" must set securityContext.runAsNonRoot=true), "#,
                    r#"seccompProfile (pod or container "run" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
                )),
            ),
            (labels("baseline"), hardened(), None),
            (labels("restricted"), hardened(), None),
        ];
        for (labels, spec, want) in table {
            assert_eq!(pod_security(&labels, &spec).as_deref(), want, "{labels:?}");
        }
    }

    #[test]
    fn version_ports_and_volumes() {
        let mut spec = hardened();
        spec.containers[0].ports = Some(vec![
            ContainerPort {
                host_port: Some(8080),
                container_port: 80,
                ..ContainerPort::default()
            },
            ContainerPort {
                host_port: Some(443),
                container_port: 443,
                ..ContainerPort::default()
            },
        ]);
        spec.volumes.get_or_insert_default().push(Volume {
            name: "root".into(),
            host_path: Some(HostPathVolumeSource {
                path: "/".into(),
                ..HostPathVolumeSource::default()
            }),
            ..Volume::default()
        });
        let mut baseline = labels("baseline");
        baseline.insert(ENFORCE_VERSION_LABEL.into(), "v1.30".into());
        assert_eq!(
            pod_security(&baseline, &spec).as_deref(),
            Some(
                r#"violates PodSecurity "baseline:v1.30": hostPort (container "app" uses hostPorts 443, 8080), hostPath volumes (volume "root")"#
            )
        );
        assert_eq!(
            pod_security(&labels("restricted"), &spec).as_deref(),
            Some(
                r#"violates PodSecurity "restricted:latest": hostPort (container "app" uses hostPorts 443, 8080), restricted volume types (volume "root" uses restricted volume type "hostPath")"#
            )
        );
    }
}
