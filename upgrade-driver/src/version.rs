//! A node's version, in one place: where a node reports it ([`VersionSource`], read by
//! [`version`]), how two versions compare ([`version_numbers`], [`same_version`],
//! [`order_versions`]) and whether a plan may move a node down ([`Downgrade`]). The plan
//! validates its target with it, the run and the preview judge nodes with it, the machine
//! decides on it; the version skew policy's rules ([`crate::skew`]) read versions with it.
//! Pure: no I/O, no plan.

use k8s_openapi::api::core::v1::Node;

/// Where a node reports its version.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum VersionSource {
    /// `status.nodeInfo.kubeletVersion` (an upgrade that moves the kubelet).
    #[default]
    KubeletVersion,
    /// `status.nodeInfo.osImage` (an OS upgrade that does not move the kubelet).
    OsImage,
    /// The value of this node label (set by the host's own agent after a boot).
    Label(String),
}

impl VersionSource {
    /// Where a node's version is read, in words: `status.nodeInfo.kubeletVersion`, `the
    /// label KEY`.
    pub fn field(&self) -> String {
        match self {
            VersionSource::KubeletVersion => "status.nodeInfo.kubeletVersion".into(),
            VersionSource::OsImage => "status.nodeInfo.osImage".into(),
            VersionSource::Label(key) => format!("the label {key}"),
        }
    }
}

/// Whether a plan may move a node to a version older than the one it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Downgrade {
    /// Refused, naming the nodes and their versions, before any write (the default).
    #[default]
    Refuse,
    /// Allowed: asked for.
    Allow,
}

/// A version as `major.minor.patch` numbers: `vMAJOR.MINOR.PATCH`, the leading `v` optional,
/// then nothing or a pre-release or build suffix (`-rc.1`, `+k3s1`, `-eks-1`), which is not
/// compared; `None` for anything else (`banana`, `latest`, `v1.38`, `Ubuntu 24.04.3 LTS`), as
/// apimachinery's `version.ParseSemantic` refuses what kubeadm cannot order.
pub fn version_numbers(version: &str) -> Option<(u64, u64, u64)> {
    let v = version.strip_prefix('v').unwrap_or(version);
    let end = v.find(['-', '+']).unwrap_or(v.len());
    let (core, suffix) = v.split_at(end);
    // A lone `-` or `+` is no suffix.
    if suffix.len() == 1 {
        return None;
    }
    let mut parts = core.split('.');
    let mut number = || -> Option<u64> {
        let part = parts.next()?;
        (!part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
    };
    let numbers = (number()?, number()?, number()?);
    parts.next().is_none().then_some(numbers)
}

/// Whether `s` may be a version: what a label value or a Job name's part may carry.
pub(crate) fn is_version(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c))
}

/// The version `node` reports through `source`, if any.
pub fn version<'n>(node: &'n Node, source: &VersionSource) -> Option<&'n str> {
    let info = node.status.as_ref().and_then(|s| s.node_info.as_ref());
    match source {
        VersionSource::KubeletVersion => info.map(|i| i.kubelet_version.as_str()),
        VersionSource::OsImage => info.map(|i| i.os_image.as_str()),
        VersionSource::Label(key) => node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map(String::as_str),
    }
    .filter(|v| !v.is_empty())
}

/// Whether `reported` is `target`, a leading `v` optional on both sides (`1.38.0` is `v1.38.0`).
pub fn same_version(reported: &str, target: &str) -> bool {
    reported.trim_start_matches('v') == target.trim_start_matches('v')
}

/// How a version `reported` by a node stands against `target`, `None` when the two cannot be
/// ordered: the same (a leading `v` optional), both `vMAJOR.MINOR.PATCH` (a suffix not
/// compared), or the same words around one version number each, as a release is often named
/// (`stratum-2.1.0` before `stratum-2.2.0`, `Ubuntu 24.04.3 LTS` before `Ubuntu 24.04.4 LTS`;
/// `Ubuntu 24.04.3 LTS` and `Debian 13.1` cannot be ordered).
pub fn order_versions(reported: &str, target: &str) -> Option<std::cmp::Ordering> {
    if same_version(reported, target) {
        return Some(std::cmp::Ordering::Equal);
    }
    if let (Some(a), Some(b)) = (version_numbers(reported), version_numbers(target)) {
        return Some(a.cmp(&b));
    }
    let (before_a, a, after_a) = embedded_version(reported)?;
    let (before_b, b, after_b) = embedded_version(target)?;
    (before_a == before_b && after_a == after_b).then(|| a.cmp(&b))
}

/// The first version number in `text` (digits and dots, at least one dot, 2 to 4 numbers), with
/// the words before and after it.
pub fn embedded_version(text: &str) -> Option<(&str, Vec<u64>, &str)> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let len = text[start..]
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len() - start);
    let token = text[start..start + len].trim_end_matches('.');
    let numbers: Vec<u64> = token
        .split('.')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (2..=4).contains(&numbers.len()).then(|| {
        let before = text[..start].strip_suffix('v').unwrap_or(&text[..start]);
        (before, numbers, &text[start + token.len()..])
    })
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering::{Equal, Greater, Less};

    use super::order_versions;

    #[test]
    fn versions_are_ordered_as_numbers_or_as_the_same_words_around_one() {
        let table = [
            ("v1.37.2", "v1.38.0", Some(Less)),
            ("1.38.0", "v1.38.0", Some(Equal)),
            ("v1.38.0+k3s1", "v1.38.0", Some(Equal)),
            ("v1.37.10", "v1.37.9", Some(Greater)),
            ("Ubuntu 24.04.3 LTS", "Ubuntu 24.04.4 LTS", Some(Less)),
            ("Ubuntu 24.04.3 LTS", "Ubuntu 24.04.3 LTS", Some(Equal)),
            ("Ubuntu 24.10 LTS", "Ubuntu 24.04.4 LTS", Some(Greater)),
            ("Flatcar v4230.2.1", "Flatcar v4230.2.3", Some(Less)),
            // Not the same words, or no version among them: not to be ordered.
            ("Ubuntu 24.04.3 LTS", "24.04.4", None),
            ("Ubuntu 24.04.3 LTS", "Debian 13.1", None),
            ("Ubuntu 24.04.3 LTS", "noble", None),
            ("banana", "v1.38.0", None),
            // A release without its patch number comes before one with it.
            ("v1.38", "v1.38.0", Some(Less)),
        ];
        for (reported, target, expected) in table {
            assert_eq!(
                order_versions(reported, target),
                expected,
                "{reported} against {target}"
            );
        }
    }
}
