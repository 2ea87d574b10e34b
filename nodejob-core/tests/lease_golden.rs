//! The Lease's record of its holder: the annotation keys reach a cluster, so they are pinned, and
//! [`holder`] reads back what a holder writes.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use nodejob_core::lease::{Claim, OPERATION_ANNOTATION, TARGET_ANNOTATION, holder};

#[test]
fn annotation_keys_are_pinned() {
    assert_eq!(OPERATION_ANNOTATION, "stratum.ciq.com/lease-operation");
    assert_eq!(TARGET_ANNOTATION, "stratum.ciq.com/lease-target");
}

fn lease(identity: Option<&str>) -> Lease {
    Lease {
        metadata: ObjectMeta {
            annotations: Some(BTreeMap::from([
                (OPERATION_ANNOTATION.to_string(), "rotate-ca".to_string()),
                (TARGET_ANNOTATION.to_string(), "sha256:ab".to_string()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: identity.map(String::from),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(Timestamp::from_second(1_800_000_000).unwrap())),
            lease_transitions: Some(4),
            ..LeaseSpec::default()
        }),
    }
}

#[test]
fn holder_reads_identity_claim_epoch_and_expiry() {
    let h = holder(&lease(Some("host-a/42"))).unwrap();
    assert_eq!(h.identity, "host-a/42");
    assert_eq!(
        h.claim,
        Claim {
            operation: "rotate-ca".into(),
            target: "sha256:ab".into()
        }
    );
    assert_eq!(h.epoch, 4);
    assert_eq!(
        h.expires,
        Some(Timestamp::from_second(1_800_000_015).unwrap())
    );
    assert_eq!(
        h.to_string(),
        "host-a/42 (rotate-ca sha256:ab, epoch 4, renewed 2027-01-15T08:00:00Z)"
    );
}

#[test]
fn a_released_lease_has_no_holder() {
    assert_eq!(holder(&lease(None)), None);
    assert_eq!(holder(&lease(Some(""))), None);
}
