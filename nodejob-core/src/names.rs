//! Names and label values that reach a cluster, and the Kubernetes name rules they obey.
//!
//! Every output here is pinned by golden tests: a changed hash is a breaking change, because
//! Jobs already on clusters are named and selected by these values.
//!
//! Both derivations work the same way. A value that already obeys the rule is kept as it is, so
//! ordinary names stay readable and legacy label-only Jobs are still found. Any other value
//! becomes a readable prefix of it, then `-`, then [`HASH_LEN`] lowercase hex digits of the
//! SHA-256 of the whole original value, so two values that share a long prefix still differ.

use sha2::{Digest, Sha256};

/// The most characters in a DNS-1123 label, and so in a Job name.
pub(crate) const DNS1123_LABEL_MAX: usize = 63;

/// The most characters in a DNS-1123 subdomain, and so in a node name.
pub(crate) const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// The most characters in a label value, and in the name part of a label key.
pub(crate) const LABEL_VALUE_MAX: usize = 63;

/// How many hex digits of SHA-256 a derived name carries: 40 bits.
const HASH_LEN: usize = 10;

/// The longest readable prefix: room for `-` and the hash within 63 characters.
const PREFIX_MAX: usize = LABEL_VALUE_MAX - 1 - HASH_LEN;

/// Returns `name` when it is a DNS-1123 label, else a valid one derived from it.
///
/// A derived name is the input lowercased, with every character outside `[a-z0-9]` turned into
/// `-`, trimmed to start and end with an alphanumeric and to at most 52 characters, then `-` and
/// the first 10 hex digits of the SHA-256 of the original `name`; just the 10 digits when no
/// alphanumeric is left. The result is always a DNS-1123 label of at most 63 characters, with no
/// `.`, so `trunc_name(&trunc_name(x)) == trunc_name(x)`; and two names that differ anywhere,
/// even past the 63rd character, get different Job names (but for a 40-bit hash collision).
///
/// ```
/// use nodejob_core::trunc_name;
///
/// assert_eq!(trunc_name("upgrade-node-1"), "upgrade-node-1");
/// assert_eq!(trunc_name("Upgrade.Node_1"), "upgrade-node-1-50793bf7e8");
/// ```
pub fn trunc_name(name: &str) -> String {
    if is_dns1123_label(name) {
        return name.to_owned();
    }
    let mapped = name.chars().map(|c| match c.to_ascii_lowercase() {
        c @ ('a'..='z' | '0'..='9') => c,
        _ => '-',
    });
    derive(name, mapped)
}

/// Returns `node` when it is a usable label value, else a stable hash-suffixed one.
///
/// Selecting on `label_key=node_label_value(node)` finds every Job targeting `node`, whichever
/// scheme wrote it: Jobs from before [`crate::NODE_ANNOTATION`] existed carry the node name
/// itself, which was only possible when it was a valid label value, and that is exactly when
/// this returns it unchanged.
///
/// Any other node (a DNS subdomain may be 253 characters, a label value 63) becomes its
/// characters with everything outside `[-A-Za-z0-9_.]` turned into `-`, trimmed to start and end
/// with an alphanumeric and to at most 52 characters, then `-` and the first 10 hex digits of the
/// SHA-256 of `node`. The result is a valid label value of at most 63 characters.
///
/// ```
/// use nodejob_core::node_label_value;
///
/// assert_eq!(node_label_value("worker-1.example.com"), "worker-1.example.com");
/// assert_eq!(node_label_value(&"n".repeat(64)).len(), 63);
/// ```
pub fn node_label_value(node: &str) -> String {
    if is_label_value(node) {
        return node.to_owned();
    }
    let mapped = node.chars().map(|c| match c {
        'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
        _ => '-',
    });
    derive(node, mapped)
}

/// `prefix-hash`: the `mapped` characters of `original` (already restricted to the target
/// alphabet) trimmed to start and end with an alphanumeric and to [`PREFIX_MAX`], then `-` and
/// [`HASH_LEN`] hex digits of the SHA-256 of `original`.
fn derive(original: &str, mapped: impl Iterator<Item = char>) -> String {
    let mut prefix: String = mapped
        .skip_while(|c| !c.is_ascii_alphanumeric())
        .take(PREFIX_MAX)
        .collect();
    // Every mapped character is ASCII, so truncating by bytes cannot split one.
    let end = prefix
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
        .len();
    prefix.truncate(end);

    let hash = short_hash(original);
    if prefix.is_empty() {
        hash
    } else {
        format!("{prefix}-{hash}")
    }
}

/// The first [`HASH_LEN`] lowercase hex digits of the SHA-256 of `value`'s UTF-8 bytes.
fn short_hash(value: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(value.as_bytes());
    digest
        .iter()
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]])
        .take(HASH_LEN)
        .map(char::from)
        .collect()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters: Job names, namespaces, container
/// names.
pub(crate) fn is_dns1123_label(s: &str) -> bool {
    s.len() <= DNS1123_LABEL_MAX && is_dns1123_label_body(s)
}

/// [`is_dns1123_label`] without the length limit, as each part of a subdomain is checked.
fn is_dns1123_label_body(s: &str) -> bool {
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.as_bytes().first().is_some_and(alnum)
        && s.as_bytes().last().is_some_and(alnum)
        && s.bytes().all(|c| alnum(&c) || c == b'-')
}

/// DNS-1123 labels joined by `.`, at most 253 characters in all: node names, label key
/// prefixes, Lease names. As in Kubernetes, the parts are not limited to 63 characters each.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX && s.split('.').all(is_dns1123_label_body)
}

/// `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`, at most 63 characters. The empty string is a
/// valid label value.
pub(crate) fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_label_name(s)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters: a non-empty label value,
/// and the name part of a label key.
fn is_label_name(s: &str) -> bool {
    let ends_ok = |c: &u8| c.is_ascii_alphanumeric();
    s.len() <= LABEL_VALUE_MAX
        && s.as_bytes().first().is_some_and(ends_ok)
        && s.as_bytes().last().is_some_and(ends_ok)
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A label (or annotation) key: an optional DNS-1123 subdomain prefix of at most 253 characters
/// and `/`, then a name of at most 63 characters matching
/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        None => is_label_name(s),
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_label_name(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123_label() {
        let cases: &[(&str, bool)] = &[
            ("a", true),
            ("0", true),
            ("a-b", true),
            ("a--b", true),
            (&"a".repeat(63), true),
            (&"a".repeat(64), false),
            ("", false),
            ("-a", false),
            ("a-", false),
            ("-", false),
            ("A", false),
            ("a.b", false),
            ("a_b", false),
            ("é", false),
        ];
        for (s, want) in cases {
            assert_eq!(is_dns1123_label(s), *want, "{s:?}");
        }
    }

    #[test]
    fn dns1123_subdomain() {
        let long_part = "a".repeat(100);
        let cases: &[(&str, bool)] = &[
            ("a", true),
            ("a.b", true),
            ("node-1.example.com", true),
            (&long_part, true),
            (&["a"; 127].join("."), true), // 253 characters
            (&[&"a".repeat(125), "b", &"c".repeat(125)].join("."), true),
            (&"a".repeat(254), false),
            ("", false),
            (".a", false),
            ("a.", false),
            ("a..b", false),
            ("a.-b", false),
            ("a-.b", false),
            ("A.b", false),
            ("a_b", false),
            ("a/b", false),
        ];
        for (s, want) in cases {
            assert_eq!(is_dns1123_subdomain(s), *want, "{s:?}");
        }
    }

    #[test]
    fn label_value() {
        let cases: &[(&str, bool)] = &[
            ("", true),
            ("a", true),
            ("Z", true),
            ("a.b_c-D", true),
            ("a..b", true),
            (&"a".repeat(63), true),
            (&"a".repeat(64), false),
            ("-a", false),
            ("a-", false),
            ("_a", false),
            ("a.", false),
            ("a/b", false),
            ("a b", false),
            ("é", false),
        ];
        for (s, want) in cases {
            assert_eq!(is_label_value(s), *want, "{s:?}");
        }
    }

    #[test]
    fn qualified_name() {
        let cases: &[(String, bool)] = &[
            ("app".into(), true),
            ("App.Name_1".into(), true),
            ("stratum.ciq.com/upgrade".into(), true),
            ("example.com/Name".into(), true),
            (format!("{}/n", ["a"; 127].join(".")), true),
            (format!("p/{}", "a".repeat(63)), true),
            (format!("p/{}", "a".repeat(64)), false),
            (format!("{}/n", "a".repeat(254)), false),
            ("".into(), false),
            ("/".into(), false),
            ("/name".into(), false),
            ("example.com/".into(), false),
            ("Example.com/name".into(), false),
            ("a/b/c".into(), false),
            ("-name".into(), false),
            ("name-".into(), false),
            ("na me".into(), false),
        ];
        for (s, want) in cases {
            assert_eq!(is_qualified_name(s), *want, "{s:?}");
        }
    }

    #[test]
    fn short_hash_is_sha256_prefix() {
        // SHA-256("") = e3b0c442 98fc1c14 ...
        assert_eq!(short_hash(""), "e3b0c44298");
        // SHA-256("abc") = ba7816bf 8f01cfea ...
        assert_eq!(short_hash("abc"), "ba7816bf8f");
    }
}
