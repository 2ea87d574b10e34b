//! What the apiserver says of itself: `GET /version` ([`ServerVersion`]).
//!
//! A real apiserver answers its own build (`k8s.io/component-base/version.Get`, served by
//! `k8s.io/apiserver/pkg/endpoints/discovery/version.go`). The fake has no build: it answers
//! either a version set by the test ([`ServerVersion::Fixed`]), or the one its control plane
//! runs ([`ServerVersion::ControlPlane`], the default): the oldest kubelet version among the
//! nodes labelled [`CONTROL_PLANE`](crate::labels::CONTROL_PLANE), as a cluster whose
//! apiservers run on those nodes and are upgraded with their kubelets (a kubeadm cluster whose
//! host upgrade moves both) answers at worst behind a load balancer. With no such node (a
//! managed control plane), it answers [`DEFAULT_SERVER_VERSION`], a release ahead of the
//! nodes' [`DEFAULT_KUBELET_VERSION`](crate::DEFAULT_KUBELET_VERSION): the control plane is
//! upgraded before its nodes, as the version skew policy has it.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::version::Info;

use crate::labels::CONTROL_PLANE;

/// What a fake cluster without control-plane nodes answers for its version, unless a test
/// set another ([`FakeCluster::set_server_version`](crate::FakeCluster::set_server_version)).
pub const DEFAULT_SERVER_VERSION: &str = "v1.38.0";

/// Where the fake's `/version` comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ServerVersion {
    /// The oldest kubelet version of the control-plane nodes, or [`DEFAULT_SERVER_VERSION`]
    /// when there is none (see the module docs).
    #[default]
    ControlPlane,
    /// This version, whatever the nodes run.
    Fixed(String),
}

impl ServerVersion {
    /// The `gitVersion` answered over `nodes`.
    pub(crate) fn git_version<'n>(&self, nodes: impl Iterator<Item = &'n Node>) -> String {
        match self {
            ServerVersion::Fixed(v) => v.clone(),
            ServerVersion::ControlPlane => nodes
                .filter(|n| {
                    (n.metadata.labels.as_ref()).is_some_and(|l| l.contains_key(CONTROL_PLANE))
                })
                .filter_map(|n| {
                    let v = &n.status.as_ref()?.node_info.as_ref()?.kubelet_version;
                    Some((numbers(v)?, v.clone()))
                })
                .min()
                .map_or_else(|| DEFAULT_SERVER_VERSION.to_string(), |(_, v)| v),
        }
    }
}

/// `/version` for `git_version`, as a release build of the apiserver fills it (`major` and
/// `minor` from it; a build's other fields, fixed).
pub(crate) fn info(git_version: &str) -> Info {
    let (major, minor) = numbers(git_version).map_or((0, 0), |(major, minor, _)| (major, minor));
    Info {
        build_date: "2026-01-01T00:00:00Z".into(),
        compiler: "gc".into(),
        emulation_major: Some(major.to_string()),
        emulation_minor: Some(minor.to_string()),
        git_commit: String::new(),
        git_tree_state: "clean".into(),
        git_version: git_version.to_string(),
        go_version: "go1.26.8".into(),
        major: major.to_string(),
        min_compatibility_major: Some(major.to_string()),
        min_compatibility_minor: Some(minor.saturating_sub(1).to_string()),
        minor: minor.to_string(),
        platform: "linux/amd64".into(),
    }
}

/// `vMAJOR.MINOR.PATCH[...]` as numbers.
fn numbers(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.trim_start_matches('v').splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch: String = (parts.next()?.chars())
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor, patch.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_is_answered_with_its_major_and_minor() {
        let info = info("v1.38.2");
        assert_eq!(
            (
                info.git_version.as_str(),
                info.major.as_str(),
                info.minor.as_str()
            ),
            ("v1.38.2", "1", "38")
        );
        assert_eq!(numbers("v1.37.10+k3s1"), Some((1, 37, 10)));
        assert_eq!(numbers("1.37"), None);
    }
}
