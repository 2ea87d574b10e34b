//! `Spec::validate`: each rule refuses what it must, names the field and the rule, and quotes
//! the value; everything at the edge of a rule passes.

use std::time::Duration;

use nodejob_core::{Error, IMAGE, Spec, trunc_name};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn spec() -> Spec {
    Spec {
        namespace: "kube-system".into(),
        name: "upgrade-worker-1".into(),
        node: "worker-1.example.com".into(),
        label_key: "stratum.ciq.com/upgrade".into(),
        container: "upgrade".into(),
        argv: vec![
            "nsenter".into(),
            "-t".into(),
            "1".into(),
            "--".into(),
            "stratum".into(),
        ],
        active_deadline: Duration::from_secs(600),
        poll_attempts: 120,
        kind: "per-node upgrade".into(),
        ..Spec::default()
    }
}

fn digest_image(hex: &str) -> Option<String> {
    Some(format!("registry.example/tools:1.0@sha256:{hex}"))
}

/// A spec that must be refused: (case, spec, field, a phrase naming the rule, the value as the
/// message must quote it).
type Refused = (&'static str, Spec, &'static str, &'static str, String);

fn refused() -> Vec<Refused> {
    let s = spec();
    let quoted = |v: &str| format!("{v:?}");
    let label = "must be a DNS-1123 label";
    let subdomain = "must be a DNS-1123 subdomain";
    let qualified = "must be a qualified name";
    let digest = "must be pinned by digest";
    let name_64 = "a".repeat(64);
    let node_254 = format!("{}.{}", "a".repeat(200), "b".repeat(53));
    let hex_64 = "a".repeat(64);
    vec![
        (
            "name uppercase",
            Spec {
                name: "Foo_Bar".into(),
                ..s.clone()
            },
            "name",
            label,
            quoted("Foo_Bar"),
        ),
        (
            "name 64 chars",
            Spec {
                name: name_64.clone(),
                ..s.clone()
            },
            "name",
            label,
            quoted(&name_64),
        ),
        (
            "name empty",
            Spec {
                name: "".into(),
                ..s.clone()
            },
            "name",
            label,
            quoted(""),
        ),
        (
            "name leading -",
            Spec {
                name: "-a".into(),
                ..s.clone()
            },
            "name",
            label,
            quoted("-a"),
        ),
        (
            "name trailing -",
            Spec {
                name: "a-".into(),
                ..s.clone()
            },
            "name",
            label,
            quoted("a-"),
        ),
        (
            "name with dot",
            Spec {
                name: "a.b".into(),
                ..s.clone()
            },
            "name",
            label,
            quoted("a.b"),
        ),
        (
            "name unicode",
            Spec {
                name: "nœud".into(),
                ..s.clone()
            },
            "name",
            label,
            quoted("nœud"),
        ),
        (
            "namespace uppercase",
            Spec {
                namespace: "Kube".into(),
                ..s.clone()
            },
            "namespace",
            label,
            quoted("Kube"),
        ),
        (
            "namespace 64 chars",
            Spec {
                namespace: name_64.clone(),
                ..s.clone()
            },
            "namespace",
            label,
            quoted(&name_64),
        ),
        (
            "namespace empty",
            Spec {
                namespace: "".into(),
                ..s.clone()
            },
            "namespace",
            label,
            quoted(""),
        ),
        (
            "namespace with dot",
            Spec {
                namespace: "kube.system".into(),
                ..s.clone()
            },
            "namespace",
            label,
            quoted("kube.system"),
        ),
        (
            "node 254 chars",
            Spec {
                node: node_254.clone(),
                ..s.clone()
            },
            "node",
            subdomain,
            quoted(&node_254),
        ),
        (
            "node empty",
            Spec {
                node: "".into(),
                ..s.clone()
            },
            "node",
            subdomain,
            quoted(""),
        ),
        (
            "node uppercase",
            Spec {
                node: "Worker-1".into(),
                ..s.clone()
            },
            "node",
            subdomain,
            quoted("Worker-1"),
        ),
        (
            "node trailing dot",
            Spec {
                node: "worker.".into(),
                ..s.clone()
            },
            "node",
            subdomain,
            quoted("worker."),
        ),
        (
            "node part ends in -",
            Spec {
                node: "worker-.example".into(),
                ..s.clone()
            },
            "node",
            subdomain,
            quoted("worker-.example"),
        ),
        (
            "node underscore",
            Spec {
                node: "worker_1".into(),
                ..s.clone()
            },
            "node",
            subdomain,
            quoted("worker_1"),
        ),
        (
            "label key empty",
            Spec {
                label_key: "".into(),
                ..s.clone()
            },
            "label_key",
            qualified,
            quoted(""),
        ),
        (
            "label key empty name",
            Spec {
                label_key: "example.com/".into(),
                ..s.clone()
            },
            "label_key",
            qualified,
            quoted("example.com/"),
        ),
        (
            "label key empty prefix",
            Spec {
                label_key: "/upgrade".into(),
                ..s.clone()
            },
            "label_key",
            qualified,
            quoted("/upgrade"),
        ),
        (
            "label key two slashes",
            Spec {
                label_key: "a/b/c".into(),
                ..s.clone()
            },
            "label_key",
            qualified,
            quoted("a/b/c"),
        ),
        (
            "label key uppercase prefix",
            Spec {
                label_key: "Example.com/x".into(),
                ..s.clone()
            },
            "label_key",
            qualified,
            quoted("Example.com/x"),
        ),
        (
            "label key space",
            Spec {
                label_key: "a b".into(),
                ..s.clone()
            },
            "label_key",
            qualified,
            quoted("a b"),
        ),
        (
            "label key name 64",
            Spec {
                label_key: format!("example.com/{name_64}"),
                ..s.clone()
            },
            "label_key",
            qualified,
            quoted(&format!("example.com/{name_64}")),
        ),
        (
            "container empty",
            Spec {
                container: "".into(),
                ..s.clone()
            },
            "container",
            label,
            quoted(""),
        ),
        (
            "container uppercase",
            Spec {
                container: "Upgrade".into(),
                ..s.clone()
            },
            "container",
            label,
            quoted("Upgrade"),
        ),
        (
            "container 64 chars",
            Spec {
                container: name_64.clone(),
                ..s.clone()
            },
            "container",
            label,
            quoted(&name_64),
        ),
        (
            "argv empty",
            Spec {
                argv: vec![],
                ..s.clone()
            },
            "argv",
            "must not be empty",
            "[]".into(),
        ),
        (
            "argv program empty",
            Spec {
                argv: vec![String::new(), "x".into()],
                ..s.clone()
            },
            "argv",
            "the program, argv[0], must not be empty",
            quoted(""),
        ),
        (
            "argv over the limit",
            Spec {
                argv: vec!["echo".into(), "x".repeat(nodejob_core::ARGV_LIMIT)],
                ..s.clone()
            },
            "argv",
            "must be at most 131072 bytes in all",
            format!("{} bytes in 2 arguments", nodejob_core::ARGV_LIMIT + 6),
        ),
        (
            "argv NUL",
            Spec {
                argv: vec!["nsenter".into(), "a\0b".into()],
                ..s.clone()
            },
            "argv",
            "must not contain NUL",
            quoted("a\0b"),
        ),
        (
            "active_deadline zero",
            Spec {
                active_deadline: Duration::ZERO,
                ..s.clone()
            },
            "active_deadline",
            "must be positive",
            "0ns".into(),
        ),
        (
            "poll_attempts zero",
            Spec {
                poll_attempts: 0,
                ..s.clone()
            },
            "poll_attempts",
            "must be at least 1",
            "0".into(),
        ),
        (
            "image tag only",
            Spec {
                image: Some("alpine:3.22".into()),
                ..s.clone()
            },
            "image",
            digest,
            quoted("alpine:3.22"),
        ),
        (
            "image empty",
            Spec {
                image: Some("".into()),
                ..s.clone()
            },
            "image",
            digest,
            quoted(""),
        ),
        (
            "image digest uppercase",
            Spec {
                image: digest_image(&"A".repeat(64)),
                ..s.clone()
            },
            "image",
            digest,
            quoted(&digest_image(&"A".repeat(64)).unwrap_or_default()),
        ),
        (
            "image digest 63 hex",
            Spec {
                image: digest_image(&hex_64[..63]),
                ..s.clone()
            },
            "image",
            digest,
            quoted(&digest_image(&hex_64[..63]).unwrap_or_default()),
        ),
        (
            "image digest 65 hex",
            Spec {
                image: digest_image(&format!("{hex_64}a")),
                ..s.clone()
            },
            "image",
            digest,
            quoted(&digest_image(&format!("{hex_64}a")).unwrap_or_default()),
        ),
        (
            "image digest not hex",
            Spec {
                image: digest_image(&"g".repeat(64)),
                ..s.clone()
            },
            "image",
            digest,
            quoted(&digest_image(&"g".repeat(64)).unwrap_or_default()),
        ),
        (
            "image sha512",
            Spec {
                image: Some(format!("alpine@sha512:{hex_64}{hex_64}")),
                ..s.clone()
            },
            "image",
            digest,
            quoted(&format!("alpine@sha512:{hex_64}{hex_64}")),
        ),
        (
            "image digest only",
            Spec {
                image: Some(format!("@sha256:{hex_64}")),
                ..s.clone()
            },
            "image",
            digest,
            quoted(&format!("@sha256:{hex_64}")),
        ),
        (
            "image digest then tag",
            Spec {
                image: Some(format!("alpine@sha256:{hex_64}:latest")),
                ..s.clone()
            },
            "image",
            digest,
            quoted(&format!("alpine@sha256:{hex_64}:latest")),
        ),
    ]
}

#[test]
fn the_base_spec_is_valid() -> TestResult {
    spec().validate()?;
    Ok(())
}

#[test]
fn each_rule_names_the_field_and_the_rule_and_quotes_the_value() {
    for (case, s, want_field, want_rule, want_value) in refused() {
        match s.validate() {
            Err(Error::InvalidSpec { field, rule }) => {
                assert_eq!(field, want_field, "{case}: {rule}");
                assert!(
                    rule.contains(want_rule),
                    "{case}: {rule:?} does not name the rule"
                );
                assert!(
                    rule.contains(&want_value),
                    "{case}: {rule:?} does not quote {want_value}"
                );
                assert!(
                    rule.starts_with(|c: char| c.is_ascii_lowercase()),
                    "{case}: {rule:?}"
                );
                assert!(!rule.ends_with('.'), "{case}: {rule:?} ends with a period");
            }
            other => panic!("{case}: want InvalidSpec on {want_field}, got {other:?}"),
        }
    }
}

#[test]
fn the_message_reads_as_field_and_rule() {
    let err = Spec {
        name: "Foo_Bar".into(),
        ..spec()
    }
    .validate()
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid spec: name: must be a DNS-1123 label (lowercase alphanumerics and '-', starting \
         and ending with an alphanumeric, at most 63 characters), got \"Foo_Bar\"; trunc_name \
         derives one"
    );
}

#[test]
fn values_at_the_edge_of_each_rule_pass() -> TestResult {
    let s = spec();
    let node_253 = [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61),
    ]
    .join(".");
    let hex_64 = "0123456789abcdef".repeat(4);
    let cases = [
        (
            "name 63 chars",
            Spec {
                name: "a".repeat(63),
                ..s.clone()
            },
        ),
        (
            "name one char",
            Spec {
                name: "a".into(),
                ..s.clone()
            },
        ),
        (
            "name digits",
            Spec {
                name: "0".into(),
                ..s.clone()
            },
        ),
        (
            "name from trunc_name",
            Spec {
                name: trunc_name(&"Upgrade.".repeat(20)),
                ..s.clone()
            },
        ),
        (
            "namespace 63 chars",
            Spec {
                namespace: "n".repeat(63),
                ..s.clone()
            },
        ),
        (
            "node 253 chars",
            Spec {
                node: node_253,
                ..s.clone()
            },
        ),
        (
            "node with a part over 63",
            Spec {
                node: format!("{}.example", "a".repeat(100)),
                ..s.clone()
            },
        ),
        (
            "node single label",
            Spec {
                node: "worker-1".into(),
                ..s.clone()
            },
        ),
        (
            "label key without prefix",
            Spec {
                label_key: "Upgrade_Node.x".into(),
                ..s.clone()
            },
        ),
        (
            "label key name 63",
            Spec {
                label_key: format!("example.com/{}", "a".repeat(63)),
                ..s.clone()
            },
        ),
        (
            "container 63 chars",
            Spec {
                container: "c".repeat(63),
                ..s.clone()
            },
        ),
        (
            "argv with empty and shell text",
            Spec {
                argv: vec!["a".into(), "".into(), "$(x); y".into()],
                ..s.clone()
            },
        ),
        (
            "active_deadline 1ns",
            Spec {
                active_deadline: Duration::from_nanos(1),
                ..s.clone()
            },
        ),
        (
            "poll_attempts 1",
            Spec {
                poll_attempts: 1,
                ..s.clone()
            },
        ),
        (
            "image None",
            Spec {
                image: None,
                ..s.clone()
            },
        ),
        (
            "image IMAGE",
            Spec {
                image: Some(IMAGE.into()),
                ..s.clone()
            },
        ),
        (
            "image with a port and digest",
            Spec {
                image: Some(format!("registry:5000/a/b@sha256:{hex_64}")),
                ..s.clone()
            },
        ),
        (
            "image digest without tag",
            Spec {
                image: Some(format!("alpine@sha256:{hex_64}")),
                ..s.clone()
            },
        ),
    ];
    for (case, spec) in cases {
        if let Err(e) = spec.validate() {
            return Err(format!("{case}: {e}").into());
        }
    }
    Ok(())
}

#[test]
fn the_default_image_is_pinned() -> TestResult {
    // `image: None` uses IMAGE without checking it; checking it as if given proves it would pass.
    Spec {
        image: Some(IMAGE.to_owned()),
        ..spec()
    }
    .validate()?;
    assert_eq!(spec().image(), IMAGE);
    Ok(())
}

#[test]
fn rules_are_checked_in_field_order() {
    let all_bad = Spec {
        name: "A".into(),
        namespace: "B".into(),
        node: "C".into(),
        label_key: "".into(),
        container: "".into(),
        argv: vec![],
        active_deadline: Duration::ZERO,
        poll_attempts: 0,
        image: Some("x".into()),
        ..spec()
    };
    match all_bad.validate() {
        Err(Error::InvalidSpec { field, .. }) => assert_eq!(field, "name"),
        other => panic!("want InvalidSpec on name, got {other:?}"),
    }
}
