//! The plan refuses every bad field before any API call, naming it; a plan that selects no
//! node is refused before the Lease.

mod support;

use std::time::Duration;

use jiff::civil::{Time, Weekday};
use nodejob_core::Verb;
use upgrade_driver::{
    Error, MaxUnavailable, Plan, PlanSpec, Selecting, VersionSource, Window, preview, quiet, run,
};

use support::{cluster, plan, plan_spec};

type TestResult = Result<(), Box<dyn std::error::Error>>;

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
        // Read from the kubelet (the default), a target is a version the kubelet can report.
        ("target", Box::new(|s| s.target = "banana".into())),
        ("target", Box::new(|s| s.target = "latest".into())),
        ("target", Box::new(|s| s.target = "v1.38".into())),
        ("target", Box::new(|s| s.target = "1.38".into())),
        ("target", Box::new(|s| s.target = "v1.38.0.1".into())),
        ("target", Box::new(|s| s.target = "v1.38.0-".into())),
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
    let mut spec = PlanSpec::new("v2.0.0");
    spec.binary = "/opt/bin/stratum".into();
    assert_eq!(
        Plan::build(spec.clone()).unwrap().command().last().unwrap(),
        "v2.0.0"
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
        ["/opt/up", "--version=v2.0.0"]
    );
}

#[test]
fn max_unavailable_parses_counts_and_percentages_and_rounds_down_to_at_least_one() {
    assert_eq!("3".parse(), Ok(MaxUnavailable::Count(3)));
    assert_eq!("25%".parse(), Ok(MaxUnavailable::Percent(25)));
    assert_eq!(
        "x%".parse::<MaxUnavailable>().unwrap_err().to_string(),
        "\"x%\" is neither a count (2) nor a percentage (25%)"
    );
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
        ..PlanSpec::new("v1.0.0")
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

/// The Lease verbs: none of them may be called by a run refused before the Lease.
const LEASE_VERBS: [Verb; 3] = [Verb::GetLease, Verb::CreateLease, Verb::ReplaceLease];

/// Refused before the Lease: nothing read of it, nothing written.
fn nothing_read_of_the_lease_nor_written(fake: &nodejob_fake::FakeCluster) {
    for verb in LEASE_VERBS.into_iter().chain([
        Verb::CreateJob,
        Verb::PatchNode,
        Verb::EvictPod,
        Verb::CreateEvent,
    ]) {
        assert_eq!(fake.count(verb), 0, "{verb:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_selector_matching_no_node_is_an_error_before_the_lease() -> TestResult {
    let (fake, _) = cluster(1, 1, &[("a", 2)], 0);
    let cases: [(Option<&str>, Vec<String>, &[&str]); 4] = [
        // A typo: `wrker`.
        (
            Some("role=wrker"),
            vec![],
            &["selector", "\"role=wrker\"", "matches no node"],
        ),
        (
            Some("role=worker"),
            vec!["cp-0".into()],
            &["selector", "\"role=worker\"", "nodes", "cp-0"],
        ),
        (
            None,
            vec!["a-7".into(), "a-8".into()],
            &["nodes", "a-7, a-8"],
        ),
        (
            Some("role in (infra)"),
            vec!["a-0".into(), "a-1".into()],
            &["selector", "\"role in (infra)\"", "a-0, a-1"],
        ),
    ];
    for (selector, nodes, says) in cases {
        let mut spec = plan_spec();
        spec.selector = selector.map(str::to_string);
        spec.nodes = nodes.clone();
        let plan = plan(spec);
        let refused = run(&*fake, &plan, quiet())
            .await
            .expect_err("no node selected");
        assert!(
            matches!(&refused, Error::Selecting(Selecting::NoneSelected { .. })),
            "{refused:?}"
        );
        let message = refused.to_string();
        assert!(message.contains("selects no node"), "{message}");
        for said in says {
            assert!(message.contains(said), "{selector:?} {nodes:?}: {message}");
        }
        // The preview says the same, and neither read nor wrote the Lease.
        let previewed = preview(&*fake, &plan).await.expect_err("no node selected");
        assert_eq!(previewed.to_string(), message);
    }
    for verb in LEASE_VERBS {
        assert_eq!(fake.count(verb), 0, "{verb:?}");
    }
    // A node named with one that exists is still the named node's error.
    let mut spec = plan_spec();
    spec.nodes = vec!["cp-0".into(), "a-9".into()];
    let refused = run(&*fake, &plan(spec), quiet())
        .await
        .expect_err("a-9 absent");
    assert!(
        matches!(&refused, Error::Selecting(Selecting::NotFound { node, .. }) if node == "a-9"),
        "{refused:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_set_based_selector_is_accepted_and_served_by_the_fake() -> TestResult {
    let (fake, _) = cluster(2, 1, &[("a", 2), ("b", 1), ("c", 1)], 0);
    // Workers only: the control plane's apiserver is at the target already.
    fake.set_server_version(nodejob_fake::ServerVersion::Fixed("v1.38.0".into()));
    let mut spec = plan_spec();
    spec.selector =
        Some("role in (worker),topology.kubernetes.io/zone notin (a),!node-role.kubernetes.io/control-plane".into());
    let preview = preview(&*fake, &plan(spec)).await?;
    let names: Vec<&str> = preview.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["b-0", "c-0"]);
    Ok(())
}

#[test]
fn a_lease_duration_beyond_int32_is_refused() {
    let most = Duration::from_secs(i32::MAX as u64);
    for too_long in [most + Duration::from_secs(1), Duration::MAX] {
        let (field, message) = refused(|s| s.lease_duration = too_long);
        assert_eq!(field, "lease_duration", "{message}");
        assert!(message.contains("int32"), "{message}");
    }
    for too_short in [Duration::ZERO, Duration::from_secs(14)] {
        let (field, message) = refused(|s| s.lease_duration = too_short);
        assert_eq!(field, "lease_duration", "{message}");
        assert!(message.contains("at least 15s"), "{message}");
    }
    for fits in [most, Duration::from_secs(15)] {
        let spec = PlanSpec {
            lease_duration: fits,
            ..PlanSpec::new("v1.38.0")
        };
        assert!(Plan::build(spec).is_ok(), "{fits:?}");
    }
}

#[test]
fn a_node_named_twice_is_refused() {
    let (field, message) = refused(|s| {
        s.nodes = ["cp-0", "w-0", "w-1", "cp-0", "w-0"]
            .map(String::from)
            .to_vec()
    });
    assert_eq!(field, "nodes", "{message}");
    assert!(
        message.contains("cp-0, w-0 named more than once"),
        "{message}"
    );
}

#[test]
fn a_malformed_selector_is_refused_before_any_call() {
    // Each refused by the apiserver's `labels.Parse` (a 400 on the first list): the plan, which
    // takes no API, refuses it with the same rule.
    for bad in [
        "=worker",
        "role=a=b",
        "role=(x)",
        "!",
        "role in (a",
        "Role/x",
        "",
    ] {
        let (field, message) = refused(|s| s.selector = Some(bad.into()));
        assert_eq!(field, "selector", "{bad:?}: {message}");
        assert!(message.contains(&format!("{bad:?}")), "{bad:?}: {message}");
    }
    // What the apiserver accepts, the plan accepts.
    for good in [
        "role=worker",
        "role==worker,zone",
        "!node-role.kubernetes.io/control-plane",
        "topology.kubernetes.io/zone in (a, b),role notin (infra)",
        "rank>3",
    ] {
        let spec = PlanSpec {
            selector: Some(good.into()),
            ..PlanSpec::new("v1.38.0")
        };
        assert!(Plan::build(spec).is_ok(), "{good:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_target_older_than_a_node_is_refused_before_any_write_unless_allowed() -> TestResult {
    use upgrade_driver::Downgrade;
    let (fake, _) = cluster(3, 1, &[("a", 2)], 0);
    for older in ["v1.36.0", "v1.37.1", "1.37.0"] {
        let mut spec = plan_spec();
        spec.target = older.into();
        let plan = plan(spec);
        let refused = run(&*fake, &plan, quiet()).await.expect_err("a downgrade");
        let Error::Plan(e) = &refused else {
            panic!("{refused:?}");
        };
        assert_eq!(e.field, "downgrade", "{refused}");
        for said in [
            older,
            "3 node(s)",
            "cp-0 at v1.37.2",
            "a-0 at v1.37.2",
            "a-1",
        ] {
            assert!(e.rule.contains(said), "{said:?} not in {refused}");
        }
        let previewed = preview(&*fake, &plan).await.expect_err("a downgrade");
        assert_eq!(previewed.to_string(), refused.to_string());
    }
    // Refused before the Lease: nothing read of it, nothing written.
    nothing_read_of_the_lease_nor_written(&fake);
    // The same version, a later patch (compared as numbers), or a downgrade asked for.
    for (target, downgrade) in [
        ("v1.37.2", Downgrade::Refuse),
        ("v1.37.10", Downgrade::Refuse),
        ("v1.36.0", Downgrade::Allow),
    ] {
        let mut spec = plan_spec();
        spec.target = target.into();
        spec.downgrade = downgrade;
        preview(&*fake, &plan(spec)).await?;
    }
    Ok(())
}

/// A failed node stays cordoned and counts against `max_unavailable`: a failure budget above it
/// could never be spent, the roll stopping on `max_unavailable` first. Refused, naming both.
#[test]
fn a_failure_budget_above_max_unavailable_is_refused_naming_both() {
    let (field, message) = refused(|s| {
        s.failure_budget = 2;
        s.max_unavailable = MaxUnavailable::Count(1);
    });
    assert_eq!(field, "failure_budget");
    for said in [
        "2 is more than `max_unavailable` (1)",
        "stays cordoned",
        "raise `max_unavailable` to at least 2",
        "lower `failure_budget` to at most 1",
    ] {
        assert!(message.contains(said), "{said}: {message}");
    }
    for (budget, max_unavailable) in [(1, 1), (2, 2), (2, 3)] {
        let mut spec = PlanSpec::new("v1.38.0");
        spec.failure_budget = budget;
        spec.max_unavailable = MaxUnavailable::Count(max_unavailable);
        assert!(
            Plan::build(spec).is_ok(),
            "{budget} within {max_unavailable}"
        );
    }
}

/// A percentage is a count only once the nodes are selected: the run and the preview refuse a
/// budget above it then, before the Lease (no write).
#[tokio::test(start_paused = true)]
async fn a_failure_budget_above_a_percentage_of_the_nodes_is_refused_before_the_lease() -> TestResult
{
    let (fake, _) = cluster(1, 1, &[("a", 3)], 0);
    let mut spec = plan_spec();
    spec.failure_budget = 2;
    spec.max_unavailable = MaxUnavailable::Percent(50);
    // 50% of 4 nodes: 2, the budget.
    assert!(preview(&*fake, &plan(spec.clone())).await.is_ok());
    spec.max_unavailable = MaxUnavailable::Percent(25);
    let plan = plan(spec);
    let refused = run(&*fake, &plan, quiet()).await.expect_err("1 of 4 < 2");
    let Error::Plan(refusal) = &refused else {
        panic!("not a plan error: {refused:?}");
    };
    assert_eq!(refusal.field, "failure_budget");
    assert!(
        refusal
            .rule
            .contains("`max_unavailable` (25% of 4 node(s), that is 1)"),
        "{refusal}"
    );
    let previewed = preview(&*fake, &plan).await.expect_err("the same");
    assert_eq!(previewed.to_string(), refused.to_string());
    // The first preview read the Lease; nothing wrote, the Lease included.
    let writes: Vec<_> = fake
        .calls()
        .into_iter()
        .filter(|c| c.verb.writes())
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    Ok(())
}

#[test]
fn a_kubelet_target_is_a_version_and_another_source_takes_any_name() -> TestResult {
    for target in ["v1.38.0", "1.38.0", "v1.38.0-rc.1", "v1.38.0+k3s1"] {
        let mut spec = PlanSpec::new(target);
        spec.version_source = VersionSource::KubeletVersion;
        Plan::build(spec).unwrap_or_else(|e| panic!("{target}: {e}"));
    }
    // An OS image or a label may name its versions as it likes; the nodes' values are judged
    // against it before any write (below).
    for source in [
        VersionSource::OsImage,
        VersionSource::Label("example.com/os".into()),
    ] {
        let mut spec = PlanSpec::new("banana");
        spec.version_source = source;
        Plan::build(spec)?;
    }
    let (field, message) = refused(|s| s.target = "v1.40".into());
    assert_eq!(field, "target");
    assert!(
        message.contains("\"v1.40\"") && message.contains("vMAJOR.MINOR.PATCH"),
        "{message}"
    );
    Ok(())
}

/// A plan whose nodes cannot be judged by version is refused before any write, in the run as
/// in the preview, naming the field and every such node: no value where the plan reads it, or
/// one that cannot be ordered against the target.
#[tokio::test(start_paused = true)]
async fn nodes_that_report_no_version_or_one_beside_the_target_are_refused_before_any_write()
-> TestResult {
    let (fake, _) = cluster(1, 1, &[("a", 2)], 0);
    fake.label_node("a-1", "example.com/os", "2.1.0")?;
    let cases: [(VersionSource, &str, &str, &[&str]); 4] = [
        // No node but a-1 carries the label.
        (
            VersionSource::Label("example.com/os".into()),
            "2.2.0",
            "version_source",
            &[
                "2 node(s) report no version",
                "the label example.com/os",
                "a-0, cp-0",
            ],
        ),
        // The fake's OS image is `Ubuntu 24.04.3 LTS`: not a version to order.
        (
            VersionSource::OsImage,
            "24.04.4",
            "version_source",
            &[
                "\"24.04.4\" cannot be compared",
                "3 node(s)",
                "cp-0 at \"Ubuntu 24.04.3 LTS\"",
            ],
        ),
        (
            VersionSource::OsImage,
            "noble",
            "target",
            &[
                "\"noble\" cannot be compared",
                "a-1 at \"Ubuntu 24.04.3 LTS\"",
            ],
        ),
        // The target itself is comparable: a node already there is skipped, not refused.
        (
            VersionSource::Label("example.com/os".into()),
            "2.1.0",
            "version_source",
            &["2 node(s) report no version", "a-0, cp-0"],
        ),
    ];
    for (source, target, field, says) in cases {
        let mut spec = plan_spec();
        spec.target = target.into();
        spec.version_source = source.clone();
        let plan = plan(spec);
        let refused = run(&*fake, &plan, quiet()).await.expect_err("refused");
        let Error::Plan(e) = &refused else {
            panic!("{refused:?}");
        };
        assert_eq!(e.field, field, "{source:?} {target}: {refused}");
        for said in says {
            assert!(e.rule.contains(said), "{said:?} not in {refused}");
        }
        let previewed = preview(&*fake, &plan).await.expect_err("refused");
        assert_eq!(previewed.to_string(), refused.to_string());
    }
    nothing_read_of_the_lease_nor_written(&fake);
    // Every node labelled with a version: previewed.
    for node in ["cp-0", "a-0"] {
        fake.label_node(node, "example.com/os", "v2.0.5")?;
    }
    let mut spec = plan_spec();
    spec.target = "2.1.0".into();
    spec.version_source = VersionSource::Label("example.com/os".into());
    preview(&*fake, &plan(spec)).await?;
    // Release names ordered by the version among the same words: previewed toward a newer
    // one, refused as a downgrade toward an older one.
    for node in ["cp-0", "a-0", "a-1"] {
        fake.label_node(node, "example.com/os", "stratum-2.1.0")?;
    }
    let mut spec = plan_spec();
    spec.target = "stratum-2.2.0".into();
    spec.version_source = VersionSource::Label("example.com/os".into());
    preview(&*fake, &plan(spec.clone())).await?;
    spec.target = "stratum-2.0.9".into();
    let refused = preview(&*fake, &plan(spec)).await.expect_err("a downgrade");
    assert!(
        matches!(&refused, Error::Plan(p) if p.field == "downgrade"),
        "{refused}"
    );
    Ok(())
}
