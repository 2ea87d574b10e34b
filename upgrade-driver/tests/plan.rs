//! The plan refuses every bad field before any API call, naming it.

use std::time::Duration;

use jiff::civil::{Time, Weekday};
use upgrade_driver::{MaxUnavailable, Plan, PlanSpec, VersionSource, Window};

/// One change to a valid plan.
type Edit = Box<dyn FnOnce(&mut PlanSpec)>;

fn refused(edit: impl FnOnce(&mut PlanSpec)) -> (&'static str, String) {
    let mut spec = PlanSpec::new("v1.38.0");
    edit(&mut spec);
    let err = Plan::build(spec).expect_err("refused");
    (err.field, err.to_string())
}

fn window() -> Window {
    Window {
        days: vec![Weekday::Saturday],
        start: Time::constant(1, 0, 0, 0),
        end: Time::constant(5, 0, 0, 0),
        time_zone: "UTC".into(),
    }
}

#[test]
fn every_bad_field_is_refused_by_name() {
    let cases: Vec<(&str, Edit)> = vec![
        ("target", Box::new(|s| s.target = String::new())),
        ("target", Box::new(|s| s.target = "v1 .38".into())),
        ("target", Box::new(|s| s.target = "v".repeat(64))),
        (
            "version_source",
            Box::new(|s| s.version_source = VersionSource::Label("a=b".into())),
        ),
        ("selector", Box::new(|s| s.selector = Some("  ".into()))),
        ("nodes", Box::new(|s| s.nodes = vec!["Node_A".into()])),
        (
            "max_unavailable",
            Box::new(|s| s.max_unavailable = MaxUnavailable::Count(0)),
        ),
        (
            "max_unavailable",
            Box::new(|s| s.max_unavailable = MaxUnavailable::Percent(0)),
        ),
        (
            "max_unavailable",
            Box::new(|s| s.max_unavailable = MaxUnavailable::Percent(101)),
        ),
        (
            "drain.timeout",
            Box::new(|s| s.drain.timeout = Duration::ZERO),
        ),
        ("deadline", Box::new(|s| s.deadline = Duration::ZERO)),
        (
            "deadline",
            Box::new(|s| s.deadline = Duration::from_secs(25 * 3600)),
        ),
        (
            "reboot_timeout",
            Box::new(|s| s.reboot_timeout = Duration::ZERO),
        ),
        ("binary", Box::new(|s| s.binary = "stratum".into())),
        ("command", Box::new(|s| s.command = Some(Vec::new()))),
        (
            "health_check",
            Box::new(|s| s.health_check = Some(vec![String::new()])),
        ),
        (
            "window.days",
            Box::new(|s| {
                s.window = Some(Window {
                    days: Vec::new(),
                    ..window()
                })
            }),
        ),
        (
            "window.end",
            Box::new(|s| {
                s.window = Some(Window {
                    end: window().start,
                    ..window()
                })
            }),
        ),
        (
            "window.time_zone",
            Box::new(|s| {
                s.window = Some(Window {
                    time_zone: "Mars/Olympus".into(),
                    ..window()
                })
            }),
        ),
        ("failure_budget", Box::new(|s| s.failure_budget = 0)),
        ("identity", Box::new(|s| s.identity = String::new())),
        (
            "lease_duration",
            Box::new(|s| s.lease_duration = Duration::from_secs(5)),
        ),
        (
            "lease_name",
            Box::new(|s| s.lease_name = "Not A Name".into()),
        ),
        ("namespace", Box::new(|s| s.namespace = "Bad_NS".into())),
        (
            "image",
            Box::new(|s| s.image = Some("busybox:latest".into())),
        ),
    ];
    for (field, edit) in cases {
        let (got, message) = refused(edit);
        assert_eq!(got, field, "{message}");
        assert!(message.contains(field), "{message}");
    }
}

#[test]
fn the_defaults_are_valid_and_say_what_the_issue_says() {
    let plan = Plan::build(PlanSpec::new("v1.38.0")).unwrap();
    assert_eq!(
        plan.command(),
        [
            "nsenter",
            "--target",
            "1",
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--",
            "/usr/local/bin/stratum",
            "upgrade",
            "--to",
            "v1.38.0",
        ]
    );
    let spec = plan.spec();
    assert_eq!(spec.max_unavailable, MaxUnavailable::Count(1));
    assert_eq!(spec.failure_budget, 1);
    assert_eq!(spec.version_source, VersionSource::KubeletVersion);
    let host = plan.host_spec("node-a");
    assert!(
        host.critical,
        "the node is drained: the host Job is critical"
    );
    assert_eq!(host.active_deadline, spec.deadline);
    assert!(host.wait_bound() > spec.deadline);
}

#[test]
fn a_custom_binary_and_command_take_the_version() {
    let mut spec = PlanSpec::new("v2");
    spec.binary = "/opt/bin/stratum".into();
    assert_eq!(
        Plan::build(spec.clone()).unwrap().command().last().unwrap(),
        "v2"
    );
    assert!(
        Plan::build(spec.clone())
            .unwrap()
            .command()
            .contains(&"/opt/bin/stratum".to_string())
    );
    spec.command = Some(vec!["/opt/up".into(), "--version={version}".into()]);
    assert_eq!(
        Plan::build(spec).unwrap().command(),
        ["/opt/up", "--version=v2"]
    );
}

#[test]
fn max_unavailable_parses_counts_and_percentages_and_rounds_down_to_at_least_one() {
    assert_eq!("3".parse(), Ok(MaxUnavailable::Count(3)));
    assert_eq!("25%".parse(), Ok(MaxUnavailable::Percent(25)));
    assert!("x%".parse::<MaxUnavailable>().is_err());
    assert!("-1".parse::<MaxUnavailable>().is_err());
    assert_eq!(MaxUnavailable::Percent(25).of(10), 2);
    assert_eq!(MaxUnavailable::Percent(10).of(5), 1);
    assert_eq!(MaxUnavailable::Count(4).of(2), 4);
}

#[test]
fn a_window_opens_on_its_days_and_may_run_past_midnight() {
    use jiff::Timestamp;
    let plan = Plan::build(PlanSpec {
        window: Some(Window {
            days: vec![Weekday::Friday],
            start: Time::constant(22, 0, 0, 0),
            end: Time::constant(2, 0, 0, 0),
            time_zone: "+02:00".into(),
        }),
        ..PlanSpec::new("v1")
    })
    .unwrap();
    let (w, tz) = (
        plan.spec().window.clone().unwrap(),
        plan.time_zone().unwrap().clone(),
    );
    let at = |s: &str| s.parse::<Timestamp>().unwrap();
    // Friday 2026-01-02 22:30 at +02:00 is 20:30Z.
    assert!(w.is_open(&tz, at("2026-01-02T20:30:00Z")));
    // Saturday 01:30 local, still Friday's window.
    assert!(w.is_open(&tz, at("2026-01-02T23:30:00Z")));
    assert!(!w.is_open(&tz, at("2026-01-03T00:30:00Z")));
    assert!(!w.is_open(&tz, at("2026-01-01T20:30:00Z")), "Thursday");
    assert_eq!(
        w.next_open(&tz, at("2026-01-01T00:00:00Z")),
        Some(at("2026-01-02T20:00:00Z"))
    );
}

#[test]
fn the_default_identity_is_unique_to_the_process() {
    let identity = PlanSpec::new("v1.38.0").identity;
    let pid = std::process::id().to_string();
    assert!(
        identity.starts_with("upgrade-driver-")
            && identity.split('-').any(|part| part == pid.as_str()),
        "{identity}"
    );
    // The same for the life of the process: a plan built twice holds the Lease as one holder.
    assert_eq!(PlanSpec::new("v1.39.0").identity, identity);
}
