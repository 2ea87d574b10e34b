//! What a rotation refuses before its Lease, on the fake: a new CA that is not exactly one
//! X.509 CA certificate (when the plan is built), a CA not valid by the cluster's clock (when
//! the run or the preview starts), a plan that selects no node, a node named twice, a Lease
//! duration `leaseDurationSeconds` cannot hold, a malformed selector.

mod support;

use std::time::Duration;

use certs_driver::{Error, Fingerprint, Plan, PlanError, Selecting, preview, quiet, run};
use nodejob_core::Verb;
use nodejob_fake::FakeCluster;
use support::{IDENTITY, NS, cluster, pem, plan, plan_spec};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Every verb that reads or writes a Lease.
const LEASE_VERBS: [Verb; 3] = [Verb::GetLease, Verb::CreateLease, Verb::ReplaceLease];

/// A certificate made with rcgen: its PEM and fingerprint; a CA unless `is_ca` says otherwise,
/// valid from 1975 to 4096 (rcgen's defaults) unless `validity` says otherwise.
struct Made {
    pem: String,
    fingerprint: String,
    der: Vec<u8>,
    key_der: Vec<u8>,
}

/// A day, as `(year, month, day)`.
type Day = (i32, u8, u8);

fn make(is_ca: rcgen::IsCa, validity: Option<(Day, Day)>) -> Made {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = is_ca;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "nodejob plan checks");
    if let Some(((y0, m0, d0), (y1, m1, d1))) = validity {
        params.not_before = rcgen::date_time_ymd(y0, m0, d0);
        params.not_after = rcgen::date_time_ymd(y1, m1, d1);
    }
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Made {
        pem: pem("CERTIFICATE", cert.der()),
        fingerprint: Fingerprint::of_der(cert.der()).to_string(),
        der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    }
}

fn ca() -> Made {
    make(
        rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained),
        None,
    )
}

/// A plan for the certificate `pem` of fingerprint `fingerprint`, the tests' other defaults.
fn spec(pem: String, fingerprint: String) -> certs_driver::PlanSpec {
    let mut spec = certs_driver::PlanSpec::new(pem, fingerprint);
    spec.namespace = NS.into();
    spec.identity = IDENTITY.into();
    spec
}

fn refused(spec: certs_driver::PlanSpec) -> PlanError {
    Plan::build(spec).expect_err("refused")
}

/// `text` holds no run of 16 base64 characters of `der`'s encoding: the message quotes no
/// secret (nor any DER).
fn quotes_none_of(text: &str, der: &[u8]) -> bool {
    let body: String = pem("X", der)
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    (0..body.len().saturating_sub(16)).all(|i| !text.contains(&body[i..i + 16]))
}

#[test]
fn a_private_key_in_a_certificate_block_is_refused() {
    let key_holder = ca();
    // A PKCS#8 private key's DER under a CERTIFICATE label: a SEQUENCE, as a certificate is.
    let key_as_certificate = pem("CERTIFICATE", &key_holder.key_der);
    let fingerprint = Fingerprint::of_der(&key_holder.key_der).to_string();
    let err = refused(spec(key_as_certificate.clone(), fingerprint));
    assert_eq!(err.field, "ca_certificate", "{err}");
    assert!(err.to_string().contains("X.509 certificate"), "{err}");
    assert!(
        quotes_none_of(&err.to_string(), &key_holder.key_der),
        "{err}"
    );
    // The same rule where a caller fills the fingerprint from the file.
    let err = Fingerprint::of_pem(&key_as_certificate).expect_err("a key");
    assert_eq!(err.field, "ca_certificate", "{err}");
}

#[test]
fn a_certificate_followed_by_extra_bytes_is_refused() {
    let made = ca();
    for junk in [&[0u8][..], &[0x30, 0x00], b"trailing text"] {
        let der = [made.der.as_slice(), junk].concat();
        let err = refused(spec(pem("CERTIFICATE", &der), made.fingerprint.clone()));
        assert_eq!(err.field, "ca_certificate", "{err}");
        assert!(
            err.to_string()
                .contains(&format!("{} more bytes after the certificate", junk.len())),
            "{err}"
        );
    }
    // A certificate cut short is not a certificate.
    let cut = &made.der[..made.der.len() - 1];
    let err = refused(spec(pem("CERTIFICATE", cut), made.fingerprint.clone()));
    assert_eq!(err.field, "ca_certificate", "{err}");
}

#[test]
fn a_certificate_that_is_not_a_ca_is_refused() {
    for (is_ca, says) in [
        (rcgen::IsCa::ExplicitNoCa, "CA:FALSE"),
        (rcgen::IsCa::NoCa, "no basicConstraints"),
    ] {
        let leaf = make(is_ca, None);
        let err = refused(spec(leaf.pem, leaf.fingerprint));
        assert_eq!(err.field, "ca_certificate", "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    let made = ca();
    assert!(Plan::build(spec(made.pem, made.fingerprint)).is_ok());
}

/// The fake's clock starts at 2026-01-01T00:00:00Z.
#[tokio::test(start_paused = true)]
async fn an_expired_ca_is_refused() -> TestResult {
    let (fake, _) = cluster(1, 1, 2);
    let expired = make(
        rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained),
        Some(((2020, 1, 1), (2025, 12, 31))),
    );
    let not_yet = make(
        rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained),
        Some(((2026, 6, 1), (2036, 6, 1))),
    );
    for (made, says) in [
        (&expired, "expired: its notAfter, 2025-12-31T00:00:00Z"),
        (
            &not_yet,
            "not valid yet: its notBefore, 2026-06-01T00:00:00Z",
        ),
    ] {
        // Its structure is a CA's: the plan is built; the clock is the run's to read.
        let plan = plan(spec(made.pem.clone(), made.fingerprint.clone()));
        for refused in [
            run(&*fake, &plan, quiet()).await.expect_err("refused"),
            preview(&*fake, &plan).await.expect_err("refused"),
        ] {
            let Error::Plan(e) = &refused else {
                panic!("{refused:?}");
            };
            assert_eq!(e.field, "ca_certificate", "{e}");
            let message = refused.to_string();
            assert!(message.contains(says), "{message}");
            assert!(
                message.contains("2026-01-01T00:00:00Z by the cluster's clock"),
                "{message}"
            );
        }
    }
    // Refused before anything was read: no list, no Lease.
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    // Valid through notAfter inclusive, from notBefore inclusive.
    let plan = plan(spec(expired.pem.clone(), expired.fingerprint.clone()));
    let (not_before, not_after) = plan.ca_validity();
    assert!(plan.check_ca_valid_at(not_after).is_ok());
    assert!(plan.check_ca_valid_at(not_before).is_ok());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_selector_matching_no_node_is_an_error_before_the_lease() -> TestResult {
    let (fake, _) = cluster(2, 1, 2);
    let made = ca();
    let cases: [(Option<&str>, Vec<String>, &[&str]); 3] = [
        (
            Some("node-role.kubernetes.io/contol-plane"),
            vec![],
            &["selector", "\"node-role.kubernetes.io/contol-plane\""],
        ),
        (None, vec!["w-7".into()], &["nodes", "w-7"]),
        (
            Some("!node-role.kubernetes.io/control-plane"),
            vec!["cp-0".into()],
            &[
                "selector",
                "\"!node-role.kubernetes.io/control-plane\"",
                "cp-0",
            ],
        ),
    ];
    for (selector, nodes, says) in cases {
        let mut spec = spec(made.pem.clone(), made.fingerprint.clone());
        spec.selector = selector.map(str::to_string);
        spec.nodes = nodes;
        let plan = plan(spec);
        for refused in [
            run(&*fake, &plan, quiet())
                .await
                .expect_err("none selected"),
            preview(&*fake, &plan).await.expect_err("none selected"),
        ] {
            assert!(
                matches!(&refused, Error::Selecting(Selecting::NoneSelected { .. })),
                "{refused:?}"
            );
            let message = refused.to_string();
            assert!(message.contains("the plan selects no node"), "{message}");
            for said in says {
                assert!(message.contains(said), "{message}");
            }
        }
    }
    assert_no_lease_call(&fake);
    Ok(())
}

fn assert_no_lease_call(fake: &FakeCluster) {
    for verb in LEASE_VERBS {
        assert_eq!(fake.count(verb), 0, "{verb:?}: {:?}", fake.calls());
    }
}

#[test]
fn a_node_named_twice_is_refused() {
    let made = ca();
    let mut spec = spec(made.pem, made.fingerprint);
    spec.nodes = ["cp-0", "w-0", "w-1", "cp-0", "w-0"]
        .map(String::from)
        .to_vec();
    let err = refused(spec);
    assert_eq!(err.field, "nodes", "{err}");
    assert!(
        err.to_string().contains("cp-0, w-0 named more than once"),
        "{err}"
    );
}

#[test]
fn a_lease_duration_beyond_int32_is_refused() {
    let made = ca();
    let with = |duration: Duration| {
        let mut spec = spec(made.pem.clone(), made.fingerprint.clone());
        spec.lease_duration = duration;
        Plan::build(spec)
    };
    let most = Duration::from_secs(i32::MAX as u64);
    let err = with(most + Duration::from_secs(1)).expect_err("beyond int32");
    assert_eq!(err.field, "lease_duration", "{err}");
    assert!(err.to_string().contains("int32"), "{err}");
    let err = with(Duration::ZERO).expect_err("zero");
    assert_eq!(err.field, "lease_duration", "{err}");
    assert!(with(most).is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_malformed_selector_is_refused_before_any_call() -> TestResult {
    let made = ca();
    for bad in ["=worker", "role=a=b", "role=(x)", "!"] {
        let mut spec = spec(made.pem.clone(), made.fingerprint.clone());
        spec.selector = Some(bad.into());
        let err = refused(spec);
        assert_eq!(err.field, "selector", "{bad:?}: {err}");
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
    // A set-based selector is accepted, and the fake serves it as the apiserver does.
    let (fake, _) = cluster(3, 2, 2);
    let mut spec = plan_spec(&support::new_ca());
    spec.selector =
        Some("node-role.kubernetes.io/control-plane,kubernetes.io/hostname notin (cp-1)".into());
    spec.cluster_wide = false;
    let preview = preview(&*fake, &plan(spec)).await?;
    let names: Vec<&str> = preview.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cp-0"]);
    Ok(())
}

/// The preview shows the new CA as a person checks it (subject, issuer, validity, fingerprint,
/// days left by the cluster's clock), and flags one that expires within 90 days.
#[tokio::test(start_paused = true)]
async fn the_preview_shows_the_new_ca_and_flags_one_that_expires_soon() -> TestResult {
    let (fake, _) = cluster(1, 1, 2);
    // The fake's clock starts at 2026-01-01T00:00:00Z.
    let cases = [
        ((2025, 1, 1), (2026, 3, 31), 89, true),
        ((2025, 1, 1), (2026, 4, 1), 90, false),
        ((2025, 1, 1), (2036, 1, 1), 3652, false),
    ];
    for (not_before, not_after, days_left, expires_soon) in cases {
        let made = make(
            rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained),
            Some((not_before, not_after)),
        );
        let plan = plan(spec(made.pem.clone(), made.fingerprint.clone()));
        let seen = preview(&*fake, &plan).await?.ca;
        assert_eq!(seen.subject, "CN=nodejob plan checks");
        assert_eq!(seen.issuer, "CN=nodejob plan checks");
        assert_eq!(seen.not_before, "2025-01-01T00:00:00Z");
        assert_eq!(
            seen.not_after,
            format!(
                "{}-{:02}-{:02}T00:00:00Z",
                not_after.0, not_after.1, not_after.2
            )
        );
        assert_eq!(seen.fingerprint, made.fingerprint);
        assert_eq!(seen.days_left, days_left, "{seen:?}");
        assert_eq!(seen.expires_soon, expires_soon, "{seen:?}");
    }
    Ok(())
}
