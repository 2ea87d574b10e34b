//! `trunc_name` and `node_label_value`: tables, golden vectors and properties.
//!
//! The validity checks here are written independently of the crate's own predicates, so a bug
//! in those cannot hide a bug in the derivations.

use std::collections::BTreeSet;

use nodejob_core::{node_label_value, trunc_name};
use proptest::prelude::*;

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
fn is_dns1123_label(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || c == '-')
}

/// `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`, at most 63 characters.
fn is_label_value(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.is_empty()
        || (s.len() <= 63
            && s.starts_with(alnum)
            && s.ends_with(alnum)
            && s.chars().all(|c| alnum(c) || "-_.".contains(c)))
}

/// Whether `out` has the derived shape: `prefix-hash` or just `hash`, with `hash` 10 lowercase
/// hex digits.
fn is_derived(out: &str) -> bool {
    let hash = &out[out.len().saturating_sub(10)..];
    out.len() >= 10
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && (out.len() == 10 || out.as_bytes()[out.len() - 11] == b'-')
}

/// A node name of exactly 253 characters, the most a DNS subdomain may have.
fn node_253() -> String {
    [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61),
    ]
    .join(".")
}

// ---------------------------------------------------------------------------------------------
// trunc_name

#[test]
fn trunc_name_keeps_valid_labels() {
    let sixty_three = "a".repeat(63);
    let cases = [
        "a",
        "0",
        "node-1",
        "a--b",
        "0123456789",
        "x1-upgrade-ip-10-0-0-1",
        &sixty_three,
    ];
    for name in cases {
        assert_eq!(trunc_name(name), name, "{name:?} is a DNS-1123 label");
    }
}

#[test]
fn trunc_name_derives_a_label_from_anything_else() {
    // (input, the readable prefix expected before `-<hash>`; "" for the hash alone)
    let sixty_four = "a".repeat(64);
    let cases: &[(&str, &str)] = &[
        (&sixty_four, &sixty_four[..52]),
        ("UPPER", "upper"),
        ("Foo_Bar", "foo-bar"),
        ("node.example.com", "node-example-com"),
        ("-leading", "leading"),
        ("trailing-", "trailing"),
        ("--both--", "both"),
        ("héllo wörld", "h-llo-w-rld"),
        ("ノード", ""),
        ("", ""),
        ("---", ""),
        ("...", ""),
    ];
    for (name, prefix) in cases {
        let out = trunc_name(name);
        assert!(
            is_dns1123_label(&out),
            "{name:?} -> {out:?} is not a DNS-1123 label"
        );
        assert!(is_derived(&out), "{name:?} -> {out:?} has no hash suffix");
        assert!(!out.contains('.'), "{name:?} -> {out:?} has a dot");
        let want_prefix = out.len().checked_sub(11).map_or("", |end| &out[..end]);
        assert_eq!(want_prefix, *prefix, "{name:?} -> {out:?}");
    }
}

#[test]
fn trunc_name_trims_a_cut_that_lands_on_a_dash() {
    // The 52nd character is '-': the prefix must end on the alphanumeric before it.
    let name = format!("{}-{}", "a".repeat(51), "b".repeat(20));
    assert_eq!(trunc_name(&name), format!("{}-c6901826cb", "a".repeat(51)));
}

#[test]
fn trunc_name_tells_apart_names_sharing_63_characters() {
    let base = "upgrade-".repeat(8);
    let one = trunc_name(&format!("{base}-node-1"));
    let two = trunc_name(&format!("{base}-node-2"));
    assert_ne!(one, two);
    assert_eq!(one.len(), 63);
    assert_eq!(two.len(), 63);
}

/// Golden vectors: the Job name of each input. A changed vector is a breaking change: a runner
/// finds the Job a previous run (or the Go implementation's successor) left by this name, and a
/// different name would orphan it and run the host operation a second time.
#[test]
fn trunc_name_golden_vectors() {
    let vectors: &[(String, &str)] = &[
        ("Upgrade.Node_1".into(), "upgrade-node-1-50793bf7e8"),
        ("Foo_Bar".into(), "foo-bar-61db3f22d0"),
        (
            "a".repeat(64),
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-ffe054fe7a",
        ),
        (
            format!("{}-node-1", "upgrade-".repeat(8)),
            "upgrade-upgrade-upgrade-upgrade-upgrade-upgrade-upgr-9eb8e71a56",
        ),
        (
            format!("{}-node-2", "upgrade-".repeat(8)),
            "upgrade-upgrade-upgrade-upgrade-upgrade-upgrade-upgr-dd8d84950f",
        ),
        ("héllo wörld".into(), "h-llo-w-rld-a1003f7d04"),
        ("".into(), "e3b0c44298"),
        ("---".into(), "cb3f91d54e"),
    ];
    for (name, want) in vectors {
        assert_eq!(trunc_name(name), *want, "{name:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// node_label_value

#[test]
fn node_label_value_keeps_valid_values() {
    let sixty_three = "n".repeat(63);
    let cases = [
        "worker-1",
        "ip-10-0-0-1.ec2.internal",
        "Worker_1.Example",
        "a..b",
        "0",
        &sixty_three,
    ];
    for node in cases {
        assert_eq!(node_label_value(node), node, "{node:?} is a label value");
    }
}

#[test]
fn node_label_value_derives_a_value_from_anything_else() {
    // (input, the readable prefix expected before `-<hash>`; "" for the hash alone)
    let sixty_four = "n".repeat(64);
    let node = node_253();
    let cases: &[(&str, &str)] = &[
        (&sixty_four, &sixty_four[..52]),
        (&node, &node[..52]),
        ("node:with:colons", "node-with-colons"),
        ("-node-", "node"),
        ("_node.", "node"),
        ("Node With Spaces", "Node-With-Spaces"),
        ("ünïcode-node", "n-code-node"),
        ("---", ""),
        ("ノード", ""),
    ];
    for (node, prefix) in cases {
        let out = node_label_value(node);
        assert!(
            is_label_value(&out),
            "{node:?} -> {out:?} is not a label value"
        );
        assert!(is_derived(&out), "{node:?} -> {out:?} has no hash suffix");
        let want_prefix = out.len().checked_sub(11).map_or("", |end| &out[..end]);
        assert_eq!(want_prefix, *prefix, "{node:?} -> {out:?}");
    }
}

/// Golden vectors: the label value of each node. A changed vector is a breaking change: Jobs
/// already on clusters are selected by `label_key=node_label_value(node)`, so a new value would
/// miss them (and a stale Job would never be found and replaced).
#[test]
fn node_label_value_golden_vectors() {
    let vectors: &[(String, &str)] = &[
        (
            node_253(),
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-5fcf065db5",
        ),
        (
            "n".repeat(64),
            "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn-ce068a195a",
        ),
        (
            format!("{}x", "a".repeat(63)),
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-2e41c41826",
        ),
        ("node:with:colons".into(), "node-with-colons-3b3fea88fb"),
        ("-node-".into(), "node-7ce8cbb256"),
        ("ünïcode-node".into(), "n-code-node-514b823291"),
        ("---".into(), "cb3f91d54e"),
        ("Worker_1.Example".into(), "Worker_1.Example"),
    ];
    for (node, want) in vectors {
        assert_eq!(node_label_value(node), *want, "{node:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Properties

/// Strings that look like names (the alphabets both rules care about), up to 300 characters.
fn name_like() -> impl Strategy<Value = String> {
    "[-a-zA-Z0-9._/: ]{0,300}"
}

/// Any string at all, including unicode and control characters.
fn anything() -> impl Strategy<Value = String> {
    prop_oneof![name_like(), any::<String>()]
}

/// Distinct names that all share their first 63 characters.
fn sharing_63() -> impl Strategy<Value = (String, BTreeSet<String>)> {
    (
        "[a-zA-Z0-9.-]{63}",
        prop::collection::btree_set("[a-zA-Z0-9.-]{1,40}", 2..20),
    )
}

/// Distinct names too long for a label.
fn long_names() -> impl Strategy<Value = BTreeSet<String>> {
    prop::collection::btree_set("[a-z0-9.-]{64,120}", 2..30)
}

proptest! {
    #[test]
    fn trunc_name_output_is_a_dns1123_label(name in anything()) {
        let out = trunc_name(&name);
        prop_assert!(is_dns1123_label(&out), "{:?} -> {:?}", name, out);
        prop_assert!(!out.contains('.'));
    }

    #[test]
    fn trunc_name_is_stable(name in anything()) {
        prop_assert_eq!(trunc_name(&name), trunc_name(&name.clone()));
    }

    #[test]
    fn trunc_name_is_idempotent(name in anything()) {
        let once = trunc_name(&name);
        prop_assert_eq!(trunc_name(&once), once);
    }

    #[test]
    fn trunc_name_is_identity_on_labels(name in "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?") {
        prop_assert_eq!(trunc_name(&name), name);
    }

    #[test]
    fn trunc_name_derives_only_for_invalid_input(name in anything()) {
        let out = trunc_name(&name);
        prop_assert_eq!(out == name, is_dns1123_label(&name));
    }

    #[test]
    fn trunc_name_tells_apart_names_sharing_a_prefix((prefix, suffixes) in sharing_63()) {
        let outs: BTreeSet<String> =
            suffixes.iter().map(|s| trunc_name(&format!("{prefix}{s}"))).collect();
        prop_assert_eq!(outs.len(), suffixes.len());
    }

    #[test]
    fn trunc_name_tells_apart_long_names(names in long_names()) {
        let outs: BTreeSet<String> = names.iter().map(|n| trunc_name(n)).collect();
        prop_assert_eq!(outs.len(), names.len());
    }

    #[test]
    fn node_label_value_output_is_a_label_value(node in anything()) {
        let out = node_label_value(&node);
        prop_assert!(is_label_value(&out), "{:?} -> {:?}", node, out);
    }

    #[test]
    fn node_label_value_is_stable(node in anything()) {
        prop_assert_eq!(node_label_value(&node), node_label_value(&node.clone()));
    }

    #[test]
    fn node_label_value_is_idempotent(node in anything()) {
        let once = node_label_value(&node);
        prop_assert_eq!(node_label_value(&once), once);
    }

    #[test]
    fn node_label_value_is_identity_on_label_values(
        node in "([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
    ) {
        prop_assert_eq!(node_label_value(&node), node);
    }

    #[test]
    fn node_label_value_derives_only_for_invalid_input(node in anything()) {
        let out = node_label_value(&node);
        prop_assert_eq!(out == node, is_label_value(&node));
    }

    #[test]
    fn node_label_value_tells_apart_nodes_sharing_a_prefix((prefix, suffixes) in sharing_63()) {
        let outs: BTreeSet<String> =
            suffixes.iter().map(|s| node_label_value(&format!("{prefix}{s}"))).collect();
        prop_assert_eq!(outs.len(), suffixes.len());
    }

    #[test]
    fn node_label_value_tells_apart_long_nodes(nodes in long_names()) {
        let outs: BTreeSet<String> = nodes.iter().map(|n| node_label_value(n)).collect();
        prop_assert_eq!(outs.len(), nodes.len());
    }
}
