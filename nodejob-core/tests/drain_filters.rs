//! kubectl drain's filters, as [`verdict`] runs them: a table of Pods and options.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Pod, PodSpec, PodStatus, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use nodejob_core::drain::{
    DrainOptions, EmptyDir, MIRROR_ANNOTATION, Refusal, Skip, Unreplicated, Verdict, verdict,
};

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

#[derive(Default, Clone, Copy)]
struct Shape {
    owner: Option<&'static str>,
    mirror: bool,
    empty_dir: bool,
    phase: Option<&'static str>,
    terminating_for: Option<i64>,
}

fn pod(shape: Shape) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            owner_references: shape.owner.map(|kind| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: kind.into(),
                    name: "owner".into(),
                    uid: "owner-uid".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            annotations: shape
                .mirror
                .then(|| BTreeMap::from([(MIRROR_ANNOTATION.to_string(), "x".to_string())])),
            deletion_timestamp: shape
                .terminating_for
                .map(|s| Time(now().checked_sub(SignedDuration::from_secs(s)).unwrap())),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            volumes: shape.empty_dir.then(|| {
                vec![Volume {
                    name: "scratch".into(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                }]
            }),
            ..PodSpec::default()
        }),
        status: shape.phase.map(|p| PodStatus {
            phase: Some(p.into()),
            ..PodStatus::default()
        }),
    }
}

const RS: Option<&str> = Some("ReplicaSet");
const DS: Option<&str> = Some("DaemonSet");

#[test]
fn filters_decide_in_kubectls_order() {
    let default = DrainOptions::default();
    let lenient = DrainOptions {
        empty_dir: EmptyDir::Delete,
        unreplicated: Unreplicated::Force,
        skip_terminating_after: Some(Duration::from_secs(60)),
        ..DrainOptions::default()
    };
    let cases: &[(&str, Shape, &DrainOptions, Verdict)] = &[
        (
            "replicated",
            Shape {
                owner: RS,
                ..Shape::default()
            },
            &default,
            Verdict::Evict,
        ),
        (
            "daemonset",
            Shape {
                owner: DS,
                ..Shape::default()
            },
            &default,
            Verdict::Skip(Skip::DaemonSet),
        ),
        (
            "finished daemonset pod",
            Shape {
                owner: DS,
                phase: Some("Succeeded"),
                ..Shape::default()
            },
            &default,
            Verdict::Evict,
        ),
        (
            "mirror",
            Shape {
                mirror: true,
                ..Shape::default()
            },
            &default,
            Verdict::Skip(Skip::Mirror),
        ),
        // The mirror filter runs before the unreplicated one: a mirror pod has no controller.
        (
            "mirror with emptyDir",
            Shape {
                mirror: true,
                empty_dir: true,
                ..Shape::default()
            },
            &default,
            Verdict::Skip(Skip::Mirror),
        ),
        (
            "emptyDir",
            Shape {
                owner: RS,
                empty_dir: true,
                ..Shape::default()
            },
            &default,
            Verdict::Refuse(Refusal::LocalStorage),
        ),
        (
            "emptyDir allowed",
            Shape {
                owner: RS,
                empty_dir: true,
                ..Shape::default()
            },
            &lenient,
            Verdict::Evict,
        ),
        (
            "finished emptyDir pod",
            Shape {
                owner: RS,
                empty_dir: true,
                phase: Some("Failed"),
                ..Shape::default()
            },
            &default,
            Verdict::Evict,
        ),
        // Local storage is checked before the controller: a bare emptyDir pod is refused for it.
        (
            "bare with emptyDir",
            Shape {
                empty_dir: true,
                ..Shape::default()
            },
            &default,
            Verdict::Refuse(Refusal::LocalStorage),
        ),
        (
            "bare",
            Shape::default(),
            &default,
            Verdict::Refuse(Refusal::Unreplicated),
        ),
        ("bare forced", Shape::default(), &lenient, Verdict::Evict),
        (
            "finished bare pod",
            Shape {
                phase: Some("Succeeded"),
                ..Shape::default()
            },
            &default,
            Verdict::Evict,
        ),
        (
            "terminating past the skip timeout",
            Shape {
                owner: RS,
                terminating_for: Some(61),
                ..Shape::default()
            },
            &lenient,
            Verdict::Skip(Skip::Terminating),
        ),
        (
            "terminating within it",
            Shape {
                owner: RS,
                terminating_for: Some(60),
                ..Shape::default()
            },
            &lenient,
            Verdict::Evict,
        ),
        (
            "terminating, no skip timeout",
            Shape {
                owner: RS,
                terminating_for: Some(3600),
                ..Shape::default()
            },
            &default,
            Verdict::Evict,
        ),
        // The skip filter runs first: a terminating bare pod past the timeout is skipped, not
        // refused.
        (
            "terminating bare pod",
            Shape {
                terminating_for: Some(61),
                ..Shape::default()
            },
            &DrainOptions {
                skip_terminating_after: Some(Duration::from_secs(60)),
                ..DrainOptions::default()
            },
            Verdict::Skip(Skip::Terminating),
        ),
    ];
    for (what, shape, options, want) in cases {
        assert_eq!(verdict(&pod(*shape), options, now()), *want, "{what}");
    }
}
