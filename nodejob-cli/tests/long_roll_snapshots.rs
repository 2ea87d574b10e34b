//! What a person reads of the options that let a long roll run by itself (`--on-undrainable`
//! and `--max-blocked`, `--soak`, `--on-failure`), pinned as `tests/snapshots.rs` pins the
//! rest: each a `--simulate` run or preview where the option acts, every line the same each
//! time (virtual time, a seeded cluster).

use assert_cmd::Command;

/// Where the simulated clock starts in these tests (by default it is the machine's time): fixed,
/// so that every simulated run prints the same lines.
const SIMULATE_START: &str = "2026-01-01T00:00:00Z";

/// Runs `nodejob ARGS` and says what it did: the arguments, the exit code, stdout, stderr.
fn nodejob(args: &[&str]) -> String {
    let out = Command::cargo_bin("nodejob")
        .unwrap_or_else(|e| panic!("the nodejob binary: {e}"))
        .env_remove("KUBECONFIG")
        .env("NODEJOB_SIMULATE_START", SIMULATE_START)
        .env_remove("COLUMNS")
        .env("RUST_LOG", "error")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running nodejob {args:?}: {e}"));
    format!(
        "args: {}\nexit_code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
        args.join(" "),
        out.status.code().map_or("none".into(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    )
}

/// Pins `nodejob ARGS` as the snapshot `NAME`.
macro_rules! nodejob_snapshot {
    ($name:expr, $args:expr) => {{
        insta::with_settings!({ prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!($name, nodejob($args));
        });
    }};
}

/// Six nodes: three control-plane, workers worker-a-0, worker-b-0, worker-a-1.
const CLUSTER: [&str; 5] = ["upgrade", "--simulate", "6", "--to", "v1.38.0"];

fn upgrade(more: &[&'static str]) -> Vec<&'static str> {
    CLUSTER.iter().chain(more).copied().collect()
}

#[test]
fn a_node_a_budget_blocks_is_skipped_tried_once_more_and_named() {
    nodejob_snapshot!(
        "upgrade_undrainable_skip",
        &upgrade(&[
            "--on-undrainable",
            "skip",
            "--simulate-undrainable",
            "worker-a-0",
            "--drain-timeout",
            "2m",
        ])
    );
}

#[test]
fn a_node_a_budget_blocks_is_quarantined_and_named() {
    nodejob_snapshot!(
        "upgrade_undrainable_quarantine",
        &upgrade(&[
            "--on-undrainable",
            "quarantine",
            "--simulate-undrainable",
            "worker-a-0",
            "--drain-timeout",
            "2m",
        ])
    );
}

#[test]
fn past_max_blocked_the_roll_fails_naming_the_blocked_nodes() {
    // Five nodes: the two workers; worker-a-0 quarantined leaves worker-b-0 the only place
    // for the web replicas, so its drain is blocked too: the second blocked node.
    nodejob_snapshot!(
        "upgrade_undrainable_past_max_blocked",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--on-undrainable",
            "quarantine",
            "--simulate-undrainable",
            "worker-a-0",
            "--drain-timeout",
            "2m",
        ]
    );
}

#[test]
fn the_preview_names_the_nodes_a_budget_would_block() {
    nodejob_snapshot!(
        "upgrade_preview_undrainable",
        &upgrade(&[
            "--on-undrainable",
            "skip",
            "--simulate-undrainable",
            "worker-a-0",
            "--preview",
        ])
    );
    nodejob_snapshot!(
        "upgrade_preview_undrainable_json",
        &upgrade(&[
            "--on-undrainable",
            "quarantine",
            "--simulate-undrainable",
            "worker-a-0",
            "--preview",
            "-o",
            "json",
        ])
    );
}

#[test]
fn each_node_soaks_counting_down_before_the_next() {
    let two = ["upgrade", "--simulate", "2", "--to", "v1.38.0"];
    let with =
        |more: &[&'static str]| -> Vec<&'static str> { two.iter().chain(more).copied().collect() };
    nodejob_snapshot!("upgrade_soak", &with(&["--soak", "3m"]));
    nodejob_snapshot!(
        "upgrade_soak_failure",
        &with(&["--soak", "3m", "--simulate-soak-reboot", "worker-a-0"])
    );
    nodejob_snapshot!(
        "upgrade_preview_soak",
        &with(&["--soak", "3m", "--preview"])
    );
}

/// A node that reached the target and then failed (its health check, as its soak above) is
/// at the target: the summary's TO says so, as the JSON report's `to` does, not `-`.
#[test]
fn a_node_that_failed_after_reaching_the_target_shows_the_version_it_is_at() {
    nodejob_snapshot!(
        "upgrade_health_failure",
        &[
            "upgrade",
            "--simulate",
            "2",
            "--to",
            "v1.38.0",
            "--health-check",
            "--",
            "check",
            "nodejob-test:exit=1",
        ]
    );
}

#[test]
fn a_roll_paused_mid_way_waits_before_its_next_step_and_goes_on_when_resumed() {
    // An operator pauses as worker-a-0's drain starts and resumes 5 minutes later: the drain
    // finishes, the upgrade of worker-a-0 waits, saying who paused, when and why, then goes on.
    nodejob_snapshot!(
        "upgrade_paused",
        &upgrade(&["--simulate-pause", "worker-a-0"])
    );
}

#[test]
fn pause_and_resume_say_who_when_why_and_what_they_changed() {
    nodejob_snapshot!(
        "pause",
        &[
            "pause",
            "--simulate",
            "3",
            "--by",
            "alice@console",
            "--reason",
            "the storage team is failing over",
        ]
    );
    nodejob_snapshot!("resume_not_paused", &["resume", "--simulate", "3"]);
}

/// `pause` and `resume` honour `-o json|yaml`, as `status` does: one object, the switch
/// before and after, for a script to read.
#[test]
fn pause_and_resume_print_json_and_yaml() {
    let pause = [
        "pause",
        "--simulate",
        "3",
        "--by",
        "alice@console",
        "--reason",
        "failover",
    ];
    let with = |more: &[&'static str]| -> Vec<&'static str> {
        pause.iter().chain(more).copied().collect()
    };
    nodejob_snapshot!("pause_json", &with(&["-o", "json"]));
    nodejob_snapshot!("pause_yaml", &with(&["-o", "yaml"]));
    nodejob_snapshot!("resume_json", &["resume", "--simulate", "3", "-o", "json"]);
}

#[test]
fn a_failed_node_is_rolled_back_once_and_named() {
    let two = ["upgrade", "--simulate", "2", "--to", "v1.38.0"];
    let with =
        |more: &[&'static str]| -> Vec<&'static str> { two.iter().chain(more).copied().collect() };
    nodejob_snapshot!(
        "upgrade_rollback",
        &with(&["--on-failure", "rollback", "--simulate-fail", "worker-a-0"])
    );
    nodejob_snapshot!(
        "upgrade_rollback_json",
        &with(&[
            "--on-failure",
            "rollback",
            "--simulate-fail",
            "worker-a-0",
            "-o",
            "json"
        ])
    );
    nodejob_snapshot!(
        "upgrade_preview_rollback",
        &with(&["--on-failure", "rollback", "--preview"])
    );
}

#[test]
fn a_rotation_paused_mid_way_finishes_the_issue_in_flight_and_goes_on_when_resumed() {
    // An operator pauses as worker-a-0's issue starts and resumes 5 minutes later: that issue
    // finishes, worker-b-0's waits, saying who paused, when and why, then the rotation goes on.
    nodejob_snapshot!(
        "rotate_ca_paused",
        &[
            "rotate-ca",
            "--simulate",
            "5",
            "--simulate-pause",
            "worker-a-0"
        ]
    );
}
