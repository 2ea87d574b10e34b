//! The version-skew gate of a kubelet upgrade ([`VersionSource::KubeletVersion`]): the rules
//! of the Kubernetes version skew policy
//! (<https://kubernetes.io/releases/version-skew-policy/#kubelet>) a roll must keep, judged
//! before any write and again before each batch against the apiserver's `GET /version`:
//!
//! - **newer**: "kubelet must not be newer than kube-apiserver" — a worker's target whose
//!   minor is above the apiserver's. A control-plane node is not judged by it: its host
//!   upgrade moves the apiserver it carries, and control-plane nodes go first, so a plan
//!   that takes them keeps a valid order valid: its workers are judged before each of their
//!   batches, once the control plane had its turn.
//! - **too old**: "kubelet may be up to three minor versions older than kube-apiserver
//!   (kubelet < 1.25 may only be up to two minor versions older)".
//! - **skipped minor**: a kubelet moved past the next minor of the one it runs (the upgrade
//!   paths kubeadm supports, "Skipping MINOR versions when upgrading is unsupported", and
//!   Gardener's: one minor at a time).
//!
//! Versions compare by major and minor; a version that does not read as
//! `vMAJOR.MINOR.PATCH` (an OS image) is not judged. [`Skew::Allow`] lets a roll go past the
//! rules, and the run says each breach (a note, and the node's line of the report) and the
//! preview lists them.
//!
//! Pure: the driver reads the apiserver and the nodes, this judges them.

use std::fmt;

use k8s_openapi::api::core::v1::Node;
use nodejob_roll::{PlanError, is_control_plane};

use crate::plan::{Plan, VersionSource};
use crate::records;
use crate::version::version;
use crate::version::version_numbers;

/// Where the policy is written, as every refusal cites it.
pub const POLICY: &str = "https://kubernetes.io/releases/version-skew-policy/#kubelet";

pub use crate::plan::Skew;

/// A rule of the policy a node's move would break.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A worker's kubelet newer than the apiserver (`server`).
    Newer {
        /// The apiserver's `gitVersion`.
        server: String,
    },
    /// Older than the apiserver (`server`) by more than `most` minors.
    TooOld {
        /// The apiserver's `gitVersion`.
        server: String,
        /// The most minors older allowed (3; 2 below 1.25).
        most: u64,
    },
    /// Past the next minor of `from`, the version the node runs.
    Skips {
        /// The node's version now.
        from: String,
    },
}

/// One node whose move to the target would break a [`Rule`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    /// The node.
    pub node: String,
    /// The target.
    pub target: String,
    /// The rule.
    pub rule: Rule,
}

impl Breach {
    /// What the move breaks, the node unnamed: `v1.39.0 would be newer than the apiserver
    /// (v1.38.0): a kubelet must not be newer than kube-apiserver`, and the like.
    pub fn what(&self) -> String {
        let target = &self.target;
        match &self.rule {
            Rule::Newer { server } => format!(
                "{target} would be newer than the apiserver ({server}): a kubelet must not be \
                 newer than kube-apiserver"
            ),
            Rule::TooOld { server, most } => format!(
                "{target} would be more than {most} minor versions older than the apiserver \
                 ({server})"
            ),
            Rule::Skips { from } => format!(
                "{target} would skip a minor version from {from}: a kubelet is upgraded one \
                 minor version at a time"
            ),
        }
    }
}

impl fmt::Display for Breach {
    /// `worker-a-0: ` and [`Breach::what`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.node, self.what())
    }
}

/// What the gate needs of one node: its name, the kubelet version it reports, whether it is a
/// control-plane node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kubelet {
    /// The node.
    pub node: String,
    /// Its `kubeletVersion`.
    pub version: String,
    /// Whether it carries the control-plane role label.
    pub control_plane: bool,
}

impl Kubelet {
    /// `node` as the gate judges it, if the plan's versions are kubelet versions.
    pub fn of(node: &Node) -> Kubelet {
        Kubelet {
            node: records::name(node).to_string(),
            version: version(node, &VersionSource::KubeletVersion)
                .unwrap_or_default()
                .to_string(),
            control_plane: is_control_plane(node),
        }
    }
}

/// Whether the newer rule is judged now for workers, or waits for the control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// Judged now (before a batch, or a plan with no control-plane node to move).
    Now,
    /// The plan moves control-plane nodes first: the apiserver moves with them, so a
    /// worker's target newer than it now is judged before the workers' batches instead.
    AfterControlPlane,
}

/// Whether the gate applies to `plan` at all: a kubelet upgrade to a version that reads as
/// one.
pub fn applies(plan: &Plan) -> bool {
    plan.spec().version_source == VersionSource::KubeletVersion
        && version_numbers(plan.target()).is_some()
}

/// The breaches of moving `nodes` (each not at the target) to `target` with the apiserver at
/// `server`; none when `server` or the target does not read as a version.
pub fn judge(target: &str, server: &str, nodes: &[Kubelet], workers: Workers) -> Vec<Breach> {
    let (Some(t), Some(s)) = (version_numbers(target), version_numbers(server)) else {
        return Vec::new();
    };
    let full = t;
    let (t, s) = ((t.0, t.1), (s.0, s.1));
    let mut breaches = Vec::new();
    let breach = |node: &Kubelet, rule| Breach {
        node: node.node.clone(),
        target: target.to_string(),
        rule,
    };
    // A node that runs the target already (ours in flight, past its reboot) moves no more.
    for node in nodes
        .iter()
        .filter(|n| version_numbers(&n.version) != Some(full))
    {
        if !node.control_plane && workers == Workers::Now && t > s {
            let server = server.to_string();
            breaches.push(breach(node, Rule::Newer { server }));
        }
        // kubelet < 1.25 may only be up to two minor versions older.
        let most = if t < (1, 25) { 2 } else { 3 };
        if t.0 != s.0 || s.1.saturating_sub(t.1) > most {
            let too_old = t < s;
            if too_old {
                let server = server.to_string();
                breaches.push(breach(node, Rule::TooOld { server, most }));
            }
        }
        if let Some((major, minor, _)) = version_numbers(&node.version)
            && (t.0 != major || t.1 > minor + 1)
            && t > (major, minor)
        {
            let from = node.version.clone();
            breaches.push(breach(node, Rule::Skips { from }));
        }
    }
    breaches
}

/// The rule a plan that keeps the policy is refused with: the target, each breach (the nodes
/// that break a rule alike named together, at most a few, then how many more), where the
/// policy is written, and the way past it.
pub fn refusal(target: &str, breaches: &[Breach]) -> PlanError {
    const NAMED: usize = 5;
    let mut alike: Vec<(String, Vec<&str>)> = Vec::new();
    for b in breaches {
        let what = b.what();
        match alike.iter_mut().find(|(w, _)| *w == what) {
            Some((_, nodes)) => nodes.push(&b.node),
            None => alike.push((what, vec![&b.node])),
        }
    }
    let said: Vec<String> = alike
        .iter()
        .map(|(what, nodes)| {
            let mut named = nodes[..nodes.len().min(NAMED)].join(", ");
            if nodes.len() > NAMED {
                named.push_str(&format!(" and {} more", nodes.len() - NAMED));
            }
            format!("{named}: {what}")
        })
        .collect();
    PlanError::new(
        "skew",
        format!(
            "a roll to {target} breaks the Kubernetes version skew policy ({POLICY}): {}; \
             refused without `skew`",
            said.join("; ")
        ),
    )
}

/// The nodes of `nodes` a kubelet upgrade would move (not at the target, or ours in flight),
/// as the gate judges them, and whether the newer rule waits for the control plane.
pub fn moving(plan: &Plan, nodes: &[Node]) -> (Vec<Kubelet>, Workers) {
    let moving: Vec<Kubelet> = nodes
        .iter()
        .filter(|n| records::at_target(plan, n).is_none())
        .map(Kubelet::of)
        .collect();
    let workers = if moving.iter().any(|k| k.control_plane) {
        Workers::AfterControlPlane
    } else {
        Workers::Now
    };
    (moving, workers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubelet(node: &str, version: &str, control_plane: bool) -> Kubelet {
        Kubelet {
            node: node.into(),
            version: version.into(),
            control_plane,
        }
    }

    fn rules(breaches: &[Breach]) -> Vec<(&str, &Rule)> {
        breaches
            .iter()
            .map(|b| (b.node.as_str(), &b.rule))
            .collect()
    }

    #[test]
    fn each_rule_of_the_policy_names_the_node_and_the_versions() {
        let w = kubelet("w", "v1.37.2", false);
        let cp = kubelet("cp", "v1.37.2", true);
        // One minor up, the apiserver there already: kept.
        assert!(judge("v1.38.0", "v1.38.0", &[w.clone(), cp.clone()], Workers::Now).is_empty());
        // Newer than the apiserver: the worker, not the control-plane node.
        let newer = judge("v1.38.0", "v1.37.9", &[w.clone(), cp.clone()], Workers::Now);
        let server = "v1.37.9".to_string();
        assert_eq!(rules(&newer), [("w", &Rule::Newer { server })]);
        assert_eq!(
            newer[0].to_string(),
            "w: v1.38.0 would be newer than the apiserver (v1.37.9): a kubelet must not be \
             newer than kube-apiserver"
        );
        // ... unless the control plane goes first: judged before the workers' batches.
        let later = judge(
            "v1.38.0",
            "v1.37.9",
            &[w.clone(), cp],
            Workers::AfterControlPlane,
        );
        assert!(later.is_empty(), "{later:?}");
        // A patch release newer than the apiserver's is the same minor: kept.
        assert!(judge("v1.37.9", "v1.37.2", std::slice::from_ref(&w), Workers::Now).is_empty());
        // Three minors older is the most (two below 1.25).
        let old = kubelet("o", "v1.33.0", false);
        assert!(
            judge(
                "v1.34.0",
                "v1.37.2",
                std::slice::from_ref(&old),
                Workers::Now
            )
            .is_empty()
        );
        let too_old = judge(
            "v1.34.0",
            "v1.38.0",
            std::slice::from_ref(&old),
            Workers::Now,
        );
        let server = "v1.38.0".to_string();
        assert_eq!(rules(&too_old), [("o", &Rule::TooOld { server, most: 3 })]);
        let ancient = kubelet("a", "v1.21.0", false);
        let two = judge("v1.22.0", "v1.25.0", &[ancient], Workers::Now);
        assert!(
            matches!(two[0].rule, Rule::TooOld { most: 2, .. }),
            "{two:?}"
        );
        // A skipped minor, from the node's own version.
        let skips = judge("v1.39.0", "v1.39.0", std::slice::from_ref(&w), Workers::Now);
        let from = "v1.37.2".to_string();
        assert_eq!(rules(&skips), [("w", &Rule::Skips { from })]);
        assert!(
            skips[0]
                .to_string()
                .contains("would skip a minor version from v1.37.2")
        );
        // A downgrade skips nothing (it is the downgrade rule's), nor does an OS image.
        assert!(judge("v1.36.0", "v1.38.0", std::slice::from_ref(&w), Workers::Now).is_empty());
        assert!(
            judge(
                "v1.38.0",
                "v1.38.0",
                &[kubelet("x", "?", false)],
                Workers::Now
            )
            .is_empty()
        );
        assert!(judge("ubuntu-24.04", "v1.38.0", &[w], Workers::Now).is_empty());
    }

    #[test]
    fn a_refusal_cites_the_policy_and_names_the_nodes_alike_together_a_few_then_how_many_more() {
        let breaches: Vec<Breach> = (0..7)
            .map(|i| Breach {
                node: format!("w{i}"),
                target: "v1.39.0".into(),
                rule: Rule::Skips {
                    from: "v1.37.2".into(),
                },
            })
            .collect();
        let mut breaches = breaches;
        breaches.push(Breach {
            node: "w9".into(),
            target: "v1.39.0".into(),
            rule: Rule::Skips {
                from: "v1.36.0".into(),
            },
        });
        let refused = refusal("v1.39.0", &breaches);
        assert_eq!(refused.field, "skew");
        assert_eq!(
            refused.rule,
            format!(
                "a roll to v1.39.0 breaks the Kubernetes version skew policy ({POLICY}): w0, w1, \
                 w2, w3, w4 and 2 more: v1.39.0 would skip a minor version from v1.37.2: a \
                 kubelet is upgraded one minor version at a time; w9: v1.39.0 would skip a \
                 minor version from v1.36.0: a kubelet is upgraded one minor version at a time; \
                 refused without `skew`"
            )
        );
    }
}
