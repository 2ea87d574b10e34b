//! What a person reads and what a script parses, pinned (uv's `uv_snapshot!` over insta): the
//! help texts, the simulated runs' progress lines and summaries, the previews, the JSON event
//! streams, the failure and refusal messages, `jobs` and `status`. Every run is `--simulate`,
//! so every line is the same each time (virtual time, a seeded cluster); the paths of this
//! checkout are filtered. A reviewed snapshot diff is the review of a change to what is shown.

use assert_cmd::Command;

/// Where the simulated clock starts in these tests (by default it is the machine's time): fixed,
/// so that every simulated run prints the same lines.
const SIMULATE_START: &str = "2026-01-01T00:00:00Z";

/// Runs `nodejob ARGS` and says what it did as uv's snapshots do: the arguments, the exit
/// code, stdout, stderr.
fn nodejob(args: &[&str]) -> String {
    let out = Command::cargo_bin("nodejob")
        .unwrap_or_else(|e| panic!("the nodejob binary: {e}"))
        .env_remove("KUBECONFIG")
        .env("NODEJOB_SIMULATE_START", SIMULATE_START)
        // `--help` wraps to the terminal's width, else `COLUMNS`, else 100 (at most 100): no
        // terminal (assert_cmd pipes all three streams) and no `COLUMNS` here, so the
        // snapshots are the same wherever they run.
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

/// The paths of this checkout, as a placeholder.
fn filters() -> Vec<(String, &'static str)> {
    vec![(regex_escape(env!("CARGO_MANIFEST_DIR")), "[CRATE]")]
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// Pins `nodejob ARGS` as the snapshot `NAME`.
macro_rules! nodejob_snapshot {
    ($name:expr, $args:expr) => {{
        let filters = filters();
        let filters: Vec<(&str, &str)> = filters.iter().map(|(r, p)| (r.as_str(), *p)).collect();
        insta::with_settings!({ filters => filters, prepend_module_to_snapshot => false }, {
            insta::assert_snapshot!($name, nodejob($args));
        });
    }};
}

#[test]
fn help_texts() {
    nodejob_snapshot!("help", &["--help"]);
    for command in [
        "upgrade",
        "rotate-ca",
        "run",
        "render",
        "jobs",
        "status",
        "pause",
        "resume",
        "mcp",
        "controller",
        "render-crds",
        "completions",
    ] {
        nodejob_snapshot!(format!("help_{command}"), &[command, "--help"]);
    }
}

#[test]
fn upgrade_progress_and_summary() {
    nodejob_snapshot!(
        "upgrade",
        &["upgrade", "--simulate", "5", "--to", "v1.38.0"]
    );
}

#[test]
fn upgrade_json_events() {
    nodejob_snapshot!(
        "upgrade_json",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "-o",
            "json"
        ]
    );
}

#[test]
fn upgrade_failure() {
    nodejob_snapshot!(
        "upgrade_failure",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--simulate-fail",
            "worker-b-0",
        ]
    );
}

/// The retry is the command as it was run (global flags, `-n`, `--binary`, `--simulate`),
/// its selection replaced by the failed node, quoted for a shell.
#[test]
fn upgrade_failure_retry_keeps_every_flag() {
    nodejob_snapshot!(
        "upgrade_failure_retry",
        &[
            "-n",
            "default",
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--binary",
            "/opt/stratum",
            "--window",
            "thu,fri 00:00-23:59 UTC",
            "-l",
            "topology.kubernetes.io/zone in (zone-a)",
            // Workers only, their control plane still at the version they leave: past the
            // version skew policy, as asked (and kept in the retry).
            "--allow-skew",
            "--simulate-fail",
            "worker-a-0",
        ]
    );
}

#[test]
fn upgrade_failure_json_names_the_nodes_to_retry() {
    nodejob_snapshot!(
        "upgrade_failure_json",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--simulate-fail",
            "worker-b-0",
            "-o",
            "json"
        ]
    );
}

#[test]
fn upgrade_in_a_closed_window_starts_nothing_and_exits_4() {
    nodejob_snapshot!(
        "upgrade_closed_window",
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--window",
            "sat 01:00-02:00 UTC"
        ]
    );
}

#[test]
fn rotation_in_a_closed_window_starts_nothing() {
    nodejob_snapshot!(
        "rotate_ca_closed_window",
        &[
            "rotate-ca",
            "--simulate",
            "3",
            "--window",
            "sun 01:00-02:00 UTC"
        ]
    );
}

/// A preview in a closed window says so, with its next opening, and exits 4 as the run would.
#[test]
fn previews_in_a_closed_window_say_not_now_and_exit_4() {
    nodejob_snapshot!(
        "upgrade_preview_closed_window",
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--window",
            "sat 01:00-02:00 UTC",
            "--preview"
        ]
    );
    nodejob_snapshot!(
        "rotate_ca_preview_closed_window",
        &[
            "rotate-ca",
            "--simulate",
            "3",
            "--window",
            "sun 01:00-02:00 Europe/Paris",
            "--preview"
        ]
    );
}

#[test]
fn upgrade_previews() {
    nodejob_snapshot!(
        "upgrade_preview",
        &["upgrade", "--simulate", "5", "--to", "v1.38.0", "--preview"]
    );
    nodejob_snapshot!(
        "upgrade_preview_json",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--preview",
            "-o",
            "json",
        ]
    );
}

#[test]
fn upgrade_refusals() {
    nodejob_snapshot!(
        "upgrade_refused_window",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--window",
            "someday",
        ]
    );
    nodejob_snapshot!(
        "upgrade_refused_target",
        &["upgrade", "--simulate", "5", "--to", "v 2"]
    );
    // A plan error names the flag, never the plan's field (`window.time_zone`).
    nodejob_snapshot!(
        "upgrade_refused_time_zone",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--window",
            "sat 01:00-05:00 Mars/Olympus",
        ]
    );
    // A failed node stays cordoned: a budget above --max-unavailable could never be spent.
    nodejob_snapshot!(
        "upgrade_refused_failure_budget",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--failure-budget",
            "2",
        ]
    );
    // A percentage is a count once the nodes are selected: 20% of 5 is 1.
    nodejob_snapshot!(
        "upgrade_refused_failure_budget_percent",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--max-unavailable",
            "20%",
            "--failure-budget",
            "2",
        ]
    );
    nodejob_snapshot!(
        "upgrade_refused_downgrade",
        &["upgrade", "--simulate", "3", "--to", "v1.36.0"]
    );
    nodejob_snapshot!(
        "upgrade_no_such_node",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--nodes",
            "nope"
        ]
    );
}

#[test]
fn an_argv_nothing_takes_is_refused_and_dry_run_is_the_preview() {
    // As the parser's tip for `--dry-run` once led a kubectl user to type it: refused, exit 2,
    // nothing run.
    nodejob_snapshot!(
        "upgrade_refused_argv",
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--",
            "--dry-run"
        ]
    );
    nodejob_snapshot!(
        "upgrade_dry_run",
        &["upgrade", "--simulate", "3", "--to", "v1.38.0", "--dry-run"]
    );
}

/// `run --dry-run` is kubectl's: the Job printed (as `render` prints it), nothing created;
/// an unknown flag gets no tip to move it after `--`, where `run` would execute it.
#[test]
fn run_dry_run_prints_the_job_and_no_tip_moves_a_flag_into_the_argv() {
    nodejob_snapshot!(
        "run_dry_run",
        &["run", "--node", "cp-0", "--dry-run", "--", "/bin/true"]
    );
    nodejob_snapshot!(
        "run_unknown_flag",
        &["run", "--node", "cp-0", "--bogus", "--", "/bin/true"]
    );
}

#[test]
fn rotation_progress_and_summary() {
    nodejob_snapshot!("rotate_ca", &["rotate-ca", "--simulate", "5"]);
}

#[test]
fn rotation_json_events() {
    nodejob_snapshot!(
        "rotate_ca_json",
        &["rotate-ca", "--simulate", "5", "-o", "json"]
    );
}

#[test]
fn rotation_failure() {
    nodejob_snapshot!(
        "rotate_ca_failure",
        &[
            "rotate-ca",
            "--simulate",
            "5",
            "--simulate-fail",
            "worker-b-0"
        ]
    );
}

#[test]
fn rotation_previews_and_abort() {
    nodejob_snapshot!(
        "rotate_ca_preview",
        &["rotate-ca", "--simulate", "5", "--preview"]
    );
    nodejob_snapshot!(
        "rotate_ca_preview_json",
        &["rotate-ca", "--simulate", "5", "--preview", "-o", "json"]
    );
    nodejob_snapshot!(
        "rotate_ca_abort",
        &["rotate-ca", "--simulate", "5", "--abort"]
    );
    nodejob_snapshot!(
        "rotate_ca_abort_preview",
        &["rotate-ca", "--simulate", "5", "--abort", "--preview"]
    );
}

/// A preview ends as the run would: a plan the run refuses (a cluster-wide CA rotated on some
/// nodes only) exits 2 with the run's refusal after the preview, as `upgrade --preview` does,
/// and the same plan over the selected trust domain exits 0.
#[test]
fn rotation_preview_of_a_plan_the_run_refuses_exits_as_the_run_would() {
    let partial = ["rotate-ca", "--simulate", "5", "--nodes", "worker-a-0"];
    let with = |more: &[&'static str]| -> Vec<&'static str> {
        partial.iter().chain(more).copied().collect()
    };
    // `rotate_ca_preview_partial` (above) is the preview's refusal.
    nodejob_snapshot!("rotate_ca_run_refused", &with(&[]));
    nodejob_snapshot!(
        "rotate_ca_preview_selected",
        &with(&["--preview", "--trust-domain", "selected"])
    );
}

#[test]
fn rotation_refusals() {
    nodejob_snapshot!(
        "rotate_ca_refused_file",
        &[
            "rotate-ca",
            "--simulate",
            "5",
            "--new-ca",
            "tests/fixtures/none.pem"
        ]
    );
    nodejob_snapshot!(
        "rotate_ca_refused_concurrency",
        &[
            "rotate-ca",
            "--simulate",
            "5",
            "--new-ca",
            "tests/fixtures/new-ca.pem",
            "--concurrency",
            "0",
        ]
    );
}

/// The new CA's file, checked before any write: not a CA (CA:FALSE), expired by the simulated
/// clock (2026-01-01), DER rather than PEM; and a plan that leaves out nodes of the cluster.
#[test]
fn rotation_refuses_a_bad_ca_or_a_partial_plan_before_any_write() {
    for (name, file) in [
        ("rotate_ca_refused_not_a_ca", "tests/fixtures/not-a-ca.pem"),
        ("rotate_ca_refused_expired", "tests/fixtures/expired-ca.pem"),
        ("rotate_ca_refused_der", "tests/fixtures/new-ca.der"),
    ] {
        nodejob_snapshot!(name, &["rotate-ca", "--simulate", "5", "--new-ca", file]);
    }
    nodejob_snapshot!(
        "rotate_ca_refused_partial",
        &["rotate-ca", "--simulate", "5", "--nodes", "worker-a-0"]
    );
    // The selected nodes as the whole trust domain: rotated alone, the others untouched.
    nodejob_snapshot!(
        "rotate_ca_selected",
        &[
            "rotate-ca",
            "--simulate",
            "5",
            "--selector",
            "node-role.kubernetes.io/control-plane",
            "--trust-domain",
            "selected",
            "--restart-grace",
            "10s",
        ]
    );
    nodejob_snapshot!(
        "rotate_ca_preview_partial",
        &[
            "rotate-ca",
            "--simulate",
            "5",
            "--nodes",
            "worker-a-0",
            "--preview"
        ]
    );
}

/// A CA that expires within 90 days of the simulated clock: shown, and warned about.
#[test]
fn rotation_preview_warns_of_a_ca_that_expires_soon() {
    nodejob_snapshot!(
        "rotate_ca_preview_expiring",
        &[
            "rotate-ca",
            "--simulate",
            "3",
            "--new-ca",
            "tests/fixtures/expiring-ca.pem",
            "--preview",
        ]
    );
}

#[test]
fn jobs_and_status_after_the_simulated_history() {
    nodejob_snapshot!("jobs", &["jobs", "--simulate", "5"]);
    nodejob_snapshot!("jobs_json", &["jobs", "--simulate", "5", "-o", "json"]);
    nodejob_snapshot!("jobs_all_namespaces", &["jobs", "--simulate", "5", "-A"]);
    nodejob_snapshot!(
        "jobs_delete_failed",
        &["jobs", "--simulate", "5", "--delete-failed"]
    );
    nodejob_snapshot!("status", &["status", "--simulate", "5"]);
    nodejob_snapshot!("status_json", &["status", "--simulate", "5", "-o", "json"]);
    nodejob_snapshot!("status_yaml", &["status", "--simulate", "5", "-o", "yaml"]);
}

/// `-o wide`, as kubectl's: `status` adds each node's ROLES (its `node-role.kubernetes.io/*`
/// labels) and ZONE, `jobs` each Job's UID and CREATED; a command with no table has no wide
/// form and says so (exit 2) (issue 33: `-o wide` was refused everywhere).
#[test]
fn wide_output_adds_kubectls_wide_columns() {
    nodejob_snapshot!("status_wide", &["status", "--simulate", "5", "-o", "wide"]);
    nodejob_snapshot!("jobs_wide", &["jobs", "--simulate", "5", "-o", "wide"]);
    nodejob_snapshot!(
        "upgrade_wide_refused",
        &[
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "-o",
            "wide"
        ]
    );
}

/// `status` scales: the table for every node, the conditions only of nodes not in a clean
/// final state, nodes that say the same shown once; `status NODE...` shows those nodes only,
/// each with its conditions, as `kubectl get nodes NAME...`; a node the cluster lacks exits 2.
#[test]
fn status_shows_conditions_where_they_matter_and_of_the_nodes_named() {
    nodejob_snapshot!("status_many", &["status", "--simulate", "30"]);
    nodejob_snapshot!(
        "status_named",
        &["status", "--simulate", "5", "worker-b-0", "cp-0"]
    );
    nodejob_snapshot!(
        "status_named_json",
        &["status", "--simulate", "5", "worker-b-0", "-o", "json"]
    );
    nodejob_snapshot!(
        "status_no_such_node",
        &["status", "--simulate", "5", "cp-0", "nope"]
    );
}

#[test]
fn output_json_for_render_and_run_and_yaml_refused_where_there_is_none() {
    nodejob_snapshot!(
        "render_json",
        &[
            "render",
            "--node",
            "cp-0",
            "-o",
            "json",
            "--",
            "/usr/local/bin/stratum",
            "health"
        ]
    );
    nodejob_snapshot!(
        "run_json",
        &[
            "run",
            "--simulate",
            "3",
            "--node",
            "cp-0",
            "-o",
            "json",
            "--",
            "/usr/local/bin/stratum",
            "health"
        ]
    );
    nodejob_snapshot!(
        "jobs_refused_yaml",
        &["jobs", "--simulate", "3", "-o", "yaml"]
    );
}

/// `rotate-ca -o yaml`: the CARotation the flags describe (the CA's certificate in
/// `spec.ca.pem`), for Git; nothing read or written.
#[test]
fn rotate_ca_as_a_resource() {
    nodejob_snapshot!(
        "rotate_ca_o_yaml",
        &[
            "rotate-ca",
            "--simulate",
            "3",
            "--concurrency",
            "2",
            "--window",
            "sat 01:00-05:00 UTC",
            "-o",
            "yaml"
        ]
    );
}

#[test]
fn render_and_run() {
    nodejob_snapshot!(
        "render",
        &[
            "render",
            "--node",
            "cp-0",
            "--",
            "/usr/local/bin/stratum",
            "health"
        ]
    );
    nodejob_snapshot!(
        "run",
        &[
            "run",
            "--simulate",
            "3",
            "--node",
            "cp-0",
            "--",
            "/usr/local/bin/stratum",
            "health",
        ]
    );
}

#[test]
fn simulated_runs_say_so_and_how_fast_they_are_shown() {
    // Explicitly paced: a pipe is not paced unless asked.
    nodejob_snapshot!(
        "upgrade_speed",
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--speed",
            "1000x"
        ]
    );
    nodejob_snapshot!(
        "simulate_refused_speed",
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--speed",
            "0"
        ]
    );
    nodejob_snapshot!(
        "simulate_refused_start",
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--simulate-start",
            "2025-12-31T00:00:00Z"
        ]
    );
}

#[test]
fn a_window_is_checked_against_the_simulated_clock_which_can_start_later() {
    // The clock starts on a Thursday: a Friday window is closed...
    nodejob_snapshot!(
        "upgrade_window_closed_on_the_default_start",
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--window",
            "fri 00:00-23:59"
        ]
    );
    // ... and open when the clock starts on the Friday.
    nodejob_snapshot!(
        "upgrade_window_open_on_a_later_start",
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--window",
            "fri 00:00-23:59",
            "--simulate-start",
            "2026-01-02T00:00:00Z"
        ]
    );
}

#[test]
fn the_smallest_simulations_succeed() {
    // One worker: the workload is sized to it (one replica, no budget it could never meet),
    // and the preview says the evicted Pod has nowhere else to run.
    nodejob_snapshot!(
        "upgrade_preview_one_node",
        &["upgrade", "--simulate", "1", "--to", "v1.38.0", "--preview"]
    );
    nodejob_snapshot!(
        "upgrade_one_node",
        &["upgrade", "--simulate", "1", "--to", "v1.38.0"]
    );
    nodejob_snapshot!(
        "upgrade_two_nodes",
        &["upgrade", "--simulate", "2", "--to", "v1.38.0"]
    );
}

#[test]
fn simulated_host_programs_are_said_to_be_and_directives_script_them() {
    // `/bin/false` does not run: the banner says host programs are simulated (exit 0)...
    nodejob_snapshot!(
        "run_simulated_false",
        &[
            "run",
            "--simulate",
            "3",
            "--node",
            "cp-0",
            "--",
            "/bin/false"
        ]
    );
    // ... and the directives documented in --help script them.
    nodejob_snapshot!(
        "run_simulated_directives",
        &[
            "run",
            "--simulate",
            "3",
            "--node",
            "cp-0",
            "--",
            "check",
            "nodejob-test:log=unhealthy",
            "nodejob-test:exit=3"
        ]
    );
}

// ---- issue 22: long rolls ----

/// The version skew policy: a worker roll past the apiserver refused before any write (exit
/// 2, naming the rule, the nodes, the versions and the flag), a skipped minor likewise, and
/// `--allow-skew` saying in the preview what it lets through.
#[test]
fn upgrade_version_skew() {
    let workers = ["--nodes", "worker-a-0,worker-b-0"];
    let mut refused = vec!["upgrade", "--simulate", "5", "--to", "v1.38.0"];
    refused.extend(workers);
    nodejob_snapshot!("upgrade_skew_refused", &refused);
    nodejob_snapshot!(
        "upgrade_skew_skipped_minor",
        &["upgrade", "--simulate", "5", "--to", "v1.39.0"]
    );
    let mut allowed = refused.clone();
    allowed.extend(["--allow-skew", "--preview"]);
    nodejob_snapshot!("upgrade_skew_allowed_preview", &allowed);
}

/// The declarative flow with no cluster: the example `NodeUpgrade` waits for its window, then
/// rolls every node; one the skew policy refuses is Stalled, naming the spec's field (exit 1);
/// one with `maxUnavailable: 0` is refused as the flag would be, saying what to set instead.
#[test]
fn controller_simulated() {
    nodejob_snapshot!(
        "controller_example",
        &[
            "controller",
            "--simulate",
            "8",
            "-f",
            "../examples/nodeupgrade.yaml"
        ]
    );
    nodejob_snapshot!(
        "controller_skew_refused",
        &[
            "controller",
            "--simulate",
            "5",
            "-f",
            "tests/fixtures/nodeupgrade-too-far.yaml"
        ]
    );
    nodejob_snapshot!(
        "controller_max_unavailable_zero",
        &[
            "controller",
            "--simulate",
            "5",
            "-f",
            "tests/fixtures/nodeupgrade-zero.yaml"
        ]
    );
    nodejob_snapshot!(
        "controller_simulate_without_a_file",
        &["controller", "--simulate", "5"]
    );
    nodejob_snapshot!(
        "controller_rotation_example",
        &[
            "controller",
            "--simulate",
            "5",
            "-f",
            "../examples/carotation.yaml"
        ]
    );
    nodejob_snapshot!(
        "controller_rotation_from_a_config_map",
        &[
            "controller",
            "--simulate",
            "5",
            "-f",
            "tests/fixtures/carotation-configmap.yaml"
        ]
    );
}

/// `upgrade -o yaml`: the NodeUpgrade the flags describe, for Git; nothing read or written.
/// `--apply` under --simulate is refused (the controller acts on a real cluster's resources).
#[test]
fn upgrade_as_a_resource() {
    nodejob_snapshot!(
        "upgrade_o_yaml",
        &[
            "upgrade",
            "--to",
            "v1.38.0",
            "-l",
            "role=worker,!gpu",
            "--max-unavailable",
            "25%",
            "--window",
            "sat,sun 01:00-05:00 Europe/Berlin",
            "--soak",
            "10m",
            "--on-failure",
            "rollback",
            "-o",
            "yaml",
        ]
    );
    nodejob_snapshot!(
        "upgrade_apply_simulated",
        &["upgrade", "--simulate", "5", "--to", "v1.38.0", "--apply"]
    );
}
