//! The `nodejob` command as a process: help, render, simulated runs, exit codes, JSON output,
//! and the progress bars on a pseudo-terminal.

use std::process::Output;

use anyhow::{Context, Result};
use assert_cmd::Command;
use k8s_openapi::api::batch::v1::Job;

const STRATUM_HEALTH: [&str; 11] = [
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
    "health",
];

/// Where the simulated clock starts in these tests (by default it is the machine's time): fixed,
/// so that every simulated run prints the same lines.
const SIMULATE_START: &str = "2026-01-01T00:00:00Z";

fn nodejob(args: &[&str]) -> Output {
    Command::cargo_bin("nodejob")
        .unwrap()
        .env_remove("KUBECONFIG")
        .env("NODEJOB_SIMULATE_START", SIMULATE_START)
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_wraps_to_the_terminals_width_and_at_most_100_columns() {
    // No terminal here: the width comes from `COLUMNS`, as a shell exports it.
    let width = |columns: &str| {
        let out = Command::cargo_bin("nodejob")
            .unwrap()
            .env("COLUMNS", columns)
            .args(["upgrade", "--help"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let help = text(&out.stdout);
        help.lines().map(|l| l.chars().count()).max().unwrap()
    };
    let narrow = width("60");
    assert!(
        (50..=60).contains(&narrow),
        "widest line at COLUMNS=60: {narrow}"
    );
    let wide = width("250");
    assert!(
        (90..=100).contains(&wide),
        "widest line at COLUMNS=250: {wide}"
    );
}

#[test]
fn every_subcommand_explains_itself() {
    let top = nodejob(&["--help"]);
    assert!(top.status.success());
    let help = text(&top.stdout);
    assert!(help.contains("kubectl nodejob"), "{help}");
    assert!(help.contains("--simulate"), "{help}");
    for sub in [
        "upgrade",
        "rotate-ca",
        "run",
        "render",
        "jobs",
        "status",
        "completions",
    ] {
        let out = nodejob(&[sub, "--help"]);
        assert!(out.status.success(), "{sub}");
        assert!(text(&out.stdout).contains("Usage: nodejob"), "{sub}");
    }
    let upgrade = text(&nodejob(&["upgrade", "--help"]).stdout);
    for flag in [
        "--to",
        "--max-unavailable",
        "--window",
        "--preview",
        "--health-check",
    ] {
        assert!(upgrade.contains(flag), "{flag}");
    }
    let rotate = text(&nodejob(&["rotate-ca", "--help"]).stdout);
    for flag in [
        "--new-ca <FILE>",
        "--preview",
        "--abort",
        "--simulate <N>",
        "--simulate-fail <NODE>",
        "--concurrency",
        "built-in",
    ] {
        assert!(
            rotate.contains(flag),
            "rotate-ca --help lacks {flag}: {rotate}"
        );
    }
    let jobs = text(&nodejob(&["jobs", "--help"]).stdout);
    for flag in ["--selector", "--simulate <N>", "--output", "--namespace"] {
        assert!(jobs.contains(flag), "jobs --help lacks {flag}: {jobs}");
    }
}

#[test]
fn render_prints_the_job_that_build_promises_and_the_example_keeps_it() {
    let mut args = vec!["render", "--node", "node-a", "-o", "json", "--"];
    args.extend(STRATUM_HEALTH);
    let out = nodejob(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job: Job = serde_json::from_slice(&out.stdout).unwrap();
    let pod = job.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.node_name.as_deref(), Some("node-a"));
    assert_eq!(pod.host_pid, Some(true));
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let container = &pod.containers[0];
    assert_eq!(container.command.clone().unwrap(), STRATUM_HEALTH);
    assert!(container.image.as_deref().unwrap().contains("@sha256:"));
    assert_eq!(
        container.security_context.as_ref().unwrap().privileged,
        Some(true)
    );

    // examples/job-example.yaml is the YAML rendering, after its comment lines.
    let mut args = vec!["render", "--node", "node-a", "--"];
    args.extend(STRATUM_HEALTH);
    let yaml = text(&nodejob(&args).stdout);
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/job-example.yaml"
    ))
    .unwrap();
    let body: String = example
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        body, yaml,
        "examples/job-example.yaml is stale: regenerate it with nodejob render"
    );
}

/// `kubectl apply -f deploy/` is the README's install step: it must create nothing that runs
/// (an example Job there ran a privileged Pod on a node named `node-a`). Every manifest in
/// the folder is of a kind that installs and runs nothing. `-f` without `-R` takes no
/// subfolder (`deploy/controller/` is applied on its own), as kubectl reads it.
#[test]
fn applying_the_deploy_folder_creates_nothing_that_runs() {
    const INSTALLS: [&str; 6] = [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");
    let mut kinds = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for kind in text.lines().filter_map(|l| l.strip_prefix("kind:")) {
            kinds.push((path.display().to_string(), kind.trim().to_string()));
        }
    }
    assert!(kinds.len() >= 6, "{kinds:?}");
    for (path, kind) in &kinds {
        assert!(INSTALLS.contains(&kind.as_str()), "{path}: kind {kind}");
    }
}

#[test]
fn a_simulated_five_node_upgrade_exits_0_and_its_summary_lists_every_node() {
    let out = nodejob(&["upgrade", "--simulate", "5", "--to", "v1.38.0"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("NODE"))
        .collect();
    for node in ["cp-0", "cp-1", "cp-2", "worker-a-0", "worker-b-0"] {
        assert!(
            table
                .iter()
                .any(|l| l.starts_with(node) && l.contains("v1.38.0") && l.contains("upgraded")),
            "{node}: {stdout}"
        );
    }
    assert!(table.last().unwrap().contains("5 upgraded"), "{stdout}");
}

#[test]
fn a_simulated_failure_exits_1_naming_the_node_the_step_and_where_to_look() {
    let out = nodejob(&[
        "upgrade",
        "--simulate",
        "5",
        "--to",
        "v1.38.0",
        "--simulate-fail",
        "worker-a-0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("node worker-a-0 failed at Upgrade with exit code 1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("kubectl -n kube-system logs job/upgrade-worker-a-0"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "retry: nodejob upgrade --simulate 5 --to v1.38.0 --simulate-fail worker-a-0 --nodes \
             worker-a-0"
        ),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("not started"));
}

#[test]
fn run_exits_with_the_containers_code_and_prints_its_log() {
    let out = nodejob(&[
        "run",
        "--simulate",
        "3",
        "--node",
        "cp-1",
        "--",
        "/bin/probe",
        "nodejob-test:log=hello from the host",
        "nodejob-test:exit=7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello from the host\n");
}

#[test]
fn bad_input_exits_2_naming_the_field_before_any_api_call() {
    // A kubeconfig whose server does not exist: reaching it would fail differently (exit 1).
    let dir = std::env::temp_dir().join(format!("nodejob-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let kc = kubeconfig.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "run",
                "--kubeconfig",
                kc,
                "--node",
                "Bad_Node",
                "--",
                "/bin/true",
            ],
            "node",
        ),
        (vec!["run", "--kubeconfig", kc, "--node", "n1"], "ARGV"),
        (
            vec![
                "run",
                "--kubeconfig",
                kc,
                "--node",
                "n1",
                "--image",
                "busybox:latest",
                "--",
                "/bin/true",
            ],
            "image",
        ),
        (
            vec![
                "run",
                "--kubeconfig",
                kc,
                "--node",
                "n1",
                "--deadline",
                "0s",
                "--",
                "/bin/true",
            ],
            "deadline",
        ),
        (
            vec!["status", "--kubeconfig", kc, "--context", "nope"],
            "--context nope",
        ),
        (
            vec![
                "upgrade",
                "--kubeconfig",
                kc,
                "--to",
                "v2.0.0",
                "--max-unavailable",
                "x%",
            ],
            "max-unavailable",
        ),
        (vec!["upgrade", "--kubeconfig", kc, "--to", "v 2"], "--to"),
        (
            vec![
                "upgrade",
                "--kubeconfig",
                kc,
                "--to",
                "v2.0.0",
                "--nodes",
                "Node_A",
            ],
            "nodes",
        ),
        (
            vec![
                "upgrade",
                "--simulate",
                "3",
                "--to",
                "v2.0.0",
                "--simulate-fail",
                "nope",
            ],
            "simulate-fail",
        ),
        (
            vec![
                "upgrade",
                "--simulate",
                "3",
                "--to",
                "v2.0.0",
                "--simulate-pause",
                "nope",
            ],
            "--simulate-pause nope: no such node in the simulated cluster (cp-0, cp-1, cp-2)",
        ),
        (
            vec!["rotate-ca", "--simulate", "3", "--simulate-pause", "nope"],
            "--simulate-pause nope: no such node in the simulated cluster (cp-0, cp-1, cp-2)",
        ),
        // The bound the help states, refused by the parser: no cluster is built.
        (
            vec!["upgrade", "--simulate", "10001", "--to", "v2.0.0"],
            "10001 is not in 1..=10000",
        ),
        (
            vec!["jobs", "--simulate", "10001"],
            "10001 is not in 1..=10000",
        ),
    ];
    for (args, field) in cases {
        let out = nodejob(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(field),
            "{args:?} should name {field}: {stderr}"
        );
        assert!(
            !stderr.contains("invalid plan"),
            "{args:?} names the flag, not the plan's field: {stderr}"
        );
        assert!(
            !stderr.contains("127.0.0.1"),
            "{args:?} reached for the server: {stderr}"
        );
    }
}

/// `--simulate-undrainable` takes nodes as `--nodes` does (comma-separated, and the flag
/// repeated): each is blocked by a budget of its own, and every node the simulated cluster
/// lacks is named in one refusal (issue 33: it took one node only).
#[test]
fn simulate_undrainable_blocks_each_node_named_and_refuses_every_node_it_lacks() -> Result<()> {
    let out = nodejob(&[
        "upgrade",
        "--simulate",
        "6",
        "--to",
        "v1.38.0",
        "--on-undrainable",
        "skip",
        "--simulate-undrainable",
        "worker-a-0,worker-b-0",
        "--simulate-undrainable",
        "worker-a-1",
        "--preview",
        "-o",
        "json",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let preview: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))?;
    let blocked: Vec<(&str, &serde_json::Value)> = (preview["would_block"].as_array())
        .context("would_block")?
        .iter()
        .map(|b| (b["node"].as_str().unwrap_or(""), &b["budgets"]))
        .collect();
    assert_eq!(
        blocked,
        [
            (
                "worker-a-0",
                &serde_json::json!(["default/pinned-worker-a-0"])
            ),
            (
                "worker-a-1",
                &serde_json::json!(["default/pinned-worker-a-1"])
            ),
            (
                "worker-b-0",
                &serde_json::json!(["default/pinned-worker-b-0"])
            ),
        ],
        "{stdout}"
    );
    let out = nodejob(&[
        "upgrade",
        "--simulate",
        "3",
        "--to",
        "v1.38.0",
        "--simulate-undrainable",
        "cp-0,nope",
        "--simulate-undrainable",
        "nix",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "--simulate-undrainable nope,nix: no such nodes in the simulated cluster \
             (cp-0, cp-1, cp-2)"
        ),
        "{stderr}"
    );
    Ok(())
}

/// A target that is no version the kubelet reports, and nodes that report no version where
/// the plan reads it (or one the target cannot be ordered against), are refused with exit 2,
/// naming the flag and the nodes, in the preview as in the run, before the Lease or any node is
/// written: a run that cannot tell where a node stands would drain, upgrade and reboot it, then
/// blame the upgrade.
#[test]
fn a_target_or_version_source_the_nodes_cannot_be_judged_by_exits_2_before_any_write() {
    let cases: [(&[&str], &str, &str); 6] = [
        (&["--to", "banana"], "--to", "\"banana\""),
        (&["--to", "latest"], "--to", "vMAJOR.MINOR.PATCH"),
        (&["--to", "v1.38"], "--to", "\"v1.38\""),
        (&["--to", "1.38"], "--to", "\"1.38\""),
        (
            &["--to", "v1.38.0", "--version-from", "label=example.com/os"],
            "--version-from",
            "3 node(s) report no version in the label example.com/os (cp-0, cp-1, cp-2)",
        ),
        (
            &["--to", "24.04.4", "--version-from", "os-image"],
            "--version-from",
            "cp-0 at \"Ubuntu 24.04.3 LTS\"",
        ),
    ];
    for (flags, flag, says) in cases {
        for preview in [true, false] {
            let mut args = vec!["upgrade", "--simulate", "3"];
            args.extend_from_slice(flags);
            if preview {
                args.push("--preview");
            }
            let out = nodejob(&args);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.starts_with(&format!("{flag}: ")) && stderr.contains(says),
                "{args:?} should name {flag} and say {says:?}: {stderr}"
            );
            for written in ["lease", "Cordon", "cordoned"] {
                assert!(!stdout.contains(written), "{args:?} wrote: {stdout}");
            }
        }
    }
}

#[test]
fn json_output_is_one_parseable_event_per_line_ending_with_the_report() {
    let out = nodejob(&[
        "upgrade",
        "--simulate",
        "3",
        "--to",
        "v1.38.0",
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(lines.iter().all(|l| l["event"].is_string()));
    // A simulated run says so first, as an event of its own.
    assert_eq!(lines[0]["event"], "simulated");
    assert_eq!(lines[0]["nodes"], 3);
    assert_eq!(lines[0]["clock_start"], "2026-01-01T00:00:00Z");
    assert_eq!(lines[0]["speed"], "max", "a pipe is not paced");
    assert_eq!(lines[1]["event"], "lease_acquired");
    assert!(lines.iter().any(|l| l["event"] == "step_finished"));
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "report");
    assert_eq!(last["report"]["outcome"]["outcome"], "done");
    // Every event carries its time (RFC 3339, the cluster's clock: here the virtual one, from
    // its start on), in order.
    let times: Vec<jiff::Timestamp> = (lines.iter())
        .map(|l| {
            let time = l["time"].as_str().unwrap_or_else(|| panic!("no time: {l}"));
            time.parse().unwrap_or_else(|e| panic!("{time}: {e}"))
        })
        .collect();
    let start: jiff::Timestamp = lines[0]["clock_start"].as_str().unwrap().parse().unwrap();
    assert!(times[0] >= start, "{times:?}");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(times.last() > times.first(), "{times:?}");
}

/// Runs `nodejob ARGS` on a pseudo-terminal (stdout, stderr and stdin); its exit code and
/// every byte it wrote there.
fn on_a_terminal(args: &[&str]) -> (Option<i32>, String) {
    let bin = assert_cmd::cargo::cargo_bin("nodejob");
    // A pseudo-terminal from Python's standard library: the child sees a tty on stdout.
    let script = r#"
import os, pty, subprocess, sys
master, slave = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdout=slave, stderr=slave, stdin=slave)
os.close(slave)
out = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
sys.stdout.buffer.write(out)
sys.exit(p.wait())
"#;
    let out = std::process::Command::new("python3")
        .env("NODEJOB_SIMULATE_START", SIMULATE_START)
        .arg("-c")
        .arg(script)
        .arg(bin)
        .args(args)
        .output()
        .expect("python3 runs");
    (out.status.code(), text(&out.stdout))
}

#[test]
fn on_a_terminal_the_board_draws_and_the_summary_ends_the_output() {
    let (code, screen) = on_a_terminal(&["upgrade", "--simulate", "3", "--to", "v1.38.0"]);
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("] 1/6 Drain..."), "no bar drawn: {screen}");
    assert!(screen.contains(" in flight"), "no counts drawn: {screen}");
    let last = screen.trim_end().lines().last().unwrap();
    assert!(
        last.contains("3 upgraded") && last.contains("done"),
        "{last}"
    );
}

#[test]
fn on_a_terminal_nothing_is_drawn_after_a_failed_rotations_summary() {
    let (code, screen) = on_a_terminal(&[
        "rotate-ca",
        "--simulate",
        "5",
        "--simulate-fail",
        "worker-b-0",
    ]);
    assert_eq!(code, Some(1), "{screen}");
    let summary = screen.find("NODE ").expect("a summary");
    let after = &screen[summary..];
    assert!(
        !after.contains("] 3/3"),
        "a bar drawn after the summary: {after}"
    );
    assert!(
        !after.contains(" in flight"),
        "the board drawn after the summary: {after}"
    );
}

/// The built-in CA of `rotate-ca --simulate` (nodejob-cli/src/simulated-ca.pem), valid from
/// 2025-01-01, before the simulated cluster's clock starts (2026-01-01), to 2125.
const SIMULATED_CA: &str =
    "sha256:d4501ab39bde6004e557e7837a0b062fc75b30fe766c7165e43c3aed251ede27";
/// tests/fixtures/new-ca.pem: a public CA certificate (its key was never kept), valid from
/// 2025-01-01, before the simulated cluster's clock starts (2026-01-01), to 2125.
const FIXTURE_CA: &str = "sha256:29c67ddf75cc9ebaa8f6150a871f1f79a477f683189ee35c0ffb7d61a342a46a";
const FIVE: [&str; 5] = ["cp-0", "cp-1", "cp-2", "worker-a-0", "worker-b-0"];

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The summary table of a run: from its header to the end.
fn summary_table<'a>(stdout: &'a str, header: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(header))
        .collect()
}

#[test]
fn a_simulated_five_node_rotation_exits_0_and_its_summary_lists_every_node() {
    let out = nodejob(&["rotate-ca", "--simulate", "5"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let table = summary_table(&stdout, "NODE");
    assert_eq!(table.len(), 1 + 5 + 1, "{stdout}");
    for node in FIVE {
        let row = table
            .iter()
            .find(|l| l.split_whitespace().next() == Some(node))
            .unwrap_or_else(|| panic!("{node} not in the summary: {stdout}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[..4], [node, "idle", "finalized", "rotated"], "{row}");
        assert!(row.contains("Stage, Issue, Finalize"), "{row}");
    }
    let last = table.last().unwrap();
    assert!(
        last.starts_with("5 rotated, 0 failed") && last.contains(SIMULATED_CA),
        "{last}"
    );
    assert!(last.ends_with("done"), "{last}");
    // Every gate was shown, and passed.
    for gate in ["start", "before issue", "before finalize", "after finalize"] {
        assert!(
            stdout.contains(&format!("gate {gate}: passed, 5 node(s) agree")),
            "gate {gate}: {stdout}"
        );
    }
}

#[test]
fn a_simulated_rotation_failure_exits_1_naming_the_node_the_step_and_where_to_look() {
    let out = nodejob(&[
        "rotate-ca",
        "--simulate",
        "5",
        "--simulate-fail",
        "worker-a-0",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("node worker-a-0 failed at Issue with exit code 1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("kubectl -n kube-system logs job/ca-issue-worker-a-0-"),
        "{stderr}"
    );
    assert!(stderr.contains("injected fault"), "the log tail: {stderr}");
    assert!(stderr.contains("retry: "), "{stderr}");
    let table = summary_table(&stdout, "NODE");
    let row = |node: &str| {
        table
            .iter()
            .find(|l| l.split_whitespace().next() == Some(node))
            .copied()
            .unwrap_or_else(|| panic!("{node}: {stdout}"))
    };
    assert!(row("worker-a-0").contains("failed at Issue"), "{stdout}");
    // No phase after the failed one started anywhere; the node after it never issued.
    assert!(!stdout.contains("Finalize..."), "{stdout}");
    assert!(!stdout.contains("worker-b-0: Issue..."), "{stdout}");
    assert!(row("cp-0").contains("Stage, Issue"), "{stdout}");
    assert!(table.last().unwrap().ends_with("FAILED"), "{stdout}");
}

#[test]
fn a_rotation_preview_on_a_simulated_cluster_changes_nothing() {
    let out = nodejob(&["rotate-ca", "--preview", "--simulate", "5"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with("simulated cluster (--simulate 5)"),
        "{stdout}"
    );
    let stdout = stdout.lines().skip(2).collect::<Vec<_>>().join("\n");
    assert!(
        stdout.starts_with(&format!(
            "rotate-ca to {SIMULATED_CA}: preview (nothing changed)"
        )),
        "{stdout}"
    );
    for node in FIVE {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(node) && l.ends_with(": never reported to a rotation")),
            "{node}: {stdout}"
        );
    }
    // The process checks the simulated cluster's call record: not one write.
    assert!(stderr.contains("none of them a write"), "{stderr}");
    assert!(!stdout.contains("created"), "a job was created: {stdout}");

    let out = nodejob(&["rotate-ca", "--preview", "--simulate", "3", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let preview: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(preview["target"], SIMULATED_CA);
    assert_eq!(preview["nodes"].as_array().unwrap().len(), 3);
    // No run has begun: a run stages every node, each read by its stage.
    assert_eq!(preview["next"]["next"], "phase");
    assert_eq!(preview["next"]["phase"], "Stage");
    assert!(preview["lease"].is_null());
}

#[test]
fn a_simulated_abort_removes_the_staged_ca_from_every_node() {
    let out = nodejob(&["rotate-ca", "--abort", "--simulate", "3"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let table = summary_table(&stdout, "NODE");
    for node in ["cp-0", "cp-1", "cp-2"] {
        let row = table
            .iter()
            .find(|l| l.split_whitespace().next() == Some(node))
            .unwrap_or_else(|| panic!("{node}: {stdout}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells[..5],
            [node, "staged", "idle", "restored", "Abort"],
            "{row}"
        );
    }
    assert!(
        (table.last().unwrap()).starts_with("3 restored")
            && table
                .last()
                .unwrap()
                .contains(&format!("removed {SIMULATED_CA}")),
        "{stdout}"
    );
}

#[test]
fn rotation_json_is_one_event_per_line_ending_with_the_report_for_the_given_ca() {
    let ca = fixture("new-ca.pem");
    let out = nodejob(&[
        "rotate-ca",
        "--simulate",
        "3",
        "--new-ca",
        &ca,
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(lines.iter().all(|l| l["event"].is_string()));
    assert_eq!(lines[0]["event"], "simulated");
    assert_eq!(lines[1]["event"], "lease_acquired");
    for node in ["cp-0", "cp-1", "cp-2"] {
        for step in ["Stage", "Issue", "Finalize"] {
            assert!(
                lines.iter().any(|l| l["event"] == "step_finished"
                    && l["node"] == node
                    && l["step"] == step),
                "{node} {step}"
            );
        }
    }
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "report");
    assert_eq!(last["report"]["target"], FIXTURE_CA);
    assert_eq!(last["report"]["outcome"]["outcome"], "done");
    assert_eq!(last["report"]["totals"]["rotated"], 3);
    // The certificate itself never shows: the hosts and the output get its fingerprint.
    let pem = std::fs::read_to_string(&ca).unwrap();
    let body_line = pem.lines().nth(1).unwrap();
    assert!(!text(&out.stdout).contains(body_line));
}

#[test]
fn a_bad_new_ca_exits_2_naming_the_field_before_any_api_call() {
    let dir = std::env::temp_dir().join(format!("nodejob-cli-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let kc = kubeconfig.to_str().unwrap().to_string();
    let write = |name: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        path.to_str().unwrap().to_string()
    };
    let certificate = std::fs::read_to_string(fixture("new-ca.pem")).unwrap();
    // Not a real key: the refusal is of anything that says it is one.
    let key_body = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgNotARealKeyAtAllXX";
    let key = format!("-----BEGIN PRIVATE KEY-----\n{key_body}\n-----END PRIVATE KEY-----\n");
    let not_pem = write("notes.txt", "the new CA is on the shared drive\n");
    let key_only = write("key.pem", &key);
    let with_key = write("bundle.pem", &format!("{certificate}{key}"));
    let two = write("two.pem", &format!("{certificate}{certificate}"));
    let garbled = write(
        "garbled.pem",
        "-----BEGIN CERTIFICATE-----\n@@@@\n-----END CERTIFICATE-----\n",
    );
    let missing = dir.join("absent.pem").to_str().unwrap().to_string();
    let fixture_ca = fixture("new-ca.pem");
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (
            vec!["rotate-ca", "--kubeconfig", &kc, "--new-ca", &not_pem],
            &["--new-ca", "notes.txt", "CERTIFICATE block"],
        ),
        (
            vec!["rotate-ca", "--kubeconfig", &kc, "--new-ca", &key_only],
            &["--new-ca", "key.pem", "private key"],
        ),
        (
            vec!["rotate-ca", "--kubeconfig", &kc, "--new-ca", &with_key],
            &["--new-ca", "bundle.pem", "private key"],
        ),
        (
            vec!["rotate-ca", "--kubeconfig", &kc, "--new-ca", &two],
            &["--new-ca", "two.pem", "exactly one"],
        ),
        (
            vec!["rotate-ca", "--kubeconfig", &kc, "--new-ca", &garbled],
            &["--new-ca", "garbled.pem", "base64"],
        ),
        (
            vec!["rotate-ca", "--kubeconfig", &kc, "--new-ca", &missing],
            &["--new-ca", "absent.pem"],
        ),
        (vec!["rotate-ca", "--kubeconfig", &kc], &["--new-ca"]),
        (
            vec![
                "rotate-ca",
                "--kubeconfig",
                &kc,
                "--new-ca",
                &fixture_ca,
                "--concurrency",
                "0",
            ],
            &["--concurrency"],
        ),
        (
            vec![
                "rotate-ca",
                "--kubeconfig",
                &kc,
                "--new-ca",
                &fixture_ca,
                "--nodes",
                "Node_A",
            ],
            &["--nodes"],
        ),
        (
            vec![
                "rotate-ca",
                "--kubeconfig",
                &kc,
                "--new-ca",
                &fixture_ca,
                "--namespace",
                "ops",
            ],
            &["--namespace"],
        ),
        (
            vec!["rotate-ca", "--simulate", "3", "--simulate-fail", "nope"],
            &["--simulate-fail nope"],
        ),
    ];
    for (args, names) in cases {
        let out = nodejob(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for name in names {
            assert!(
                stderr.contains(name),
                "{args:?} should name {name}: {stderr}"
            );
        }
        for field in ["invalid plan", "ca_certificate", "fingerprint:"] {
            assert!(
                !stderr.contains(field),
                "{args:?} names the flag, not the plan's field: {stderr}"
            );
        }
        assert!(
            !stderr.contains("127.0.0.1"),
            "{args:?} reached for the server: {stderr}"
        );
        assert!(
            !stderr.contains(key_body),
            "{args:?} quoted the key: {stderr}"
        );
    }
}

/// The rows of `nodejob jobs`' table, each as its cells.
fn job_rows(stdout: &str) -> Vec<Vec<String>> {
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "NODE", "STATUS", "EXIT", "AGE"],
        "{stdout}"
    );
    lines
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn jobs_on_a_simulated_cluster_lists_the_jobs_its_history_left() {
    let out = nodejob(&["jobs", "--simulate", "5"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let rows = job_rows(&stdout);
    assert_eq!(rows.len(), 3, "{stdout}");
    let find = |prefix: &str| {
        rows.iter()
            .find(|r| r[0].starts_with(prefix))
            .unwrap_or_else(|| panic!("no job {prefix}*: {stdout}"))
    };
    // The upgrade's and the rotation's failed host Jobs, kept for inspection with their
    // container's exit code; the probe still running, no exit code yet.
    let upgrade = find("upgrade-worker-b-0-v1-38-0-");
    assert_eq!(upgrade[1..4], ["worker-b-0", "Failed", "1"], "{stdout}");
    let issue = find("ca-issue-worker-b-0-d4501ab3");
    assert_eq!(issue[1..4], ["worker-b-0", "Failed", "1"], "{stdout}");
    let probe = find("nodejob-run-cp-0");
    assert_eq!(probe[1..4], ["cp-0", "Running", "-"], "{stdout}");
    for row in &rows {
        let age = &row[4];
        assert!(
            age.ends_with('s') && age.trim_end_matches('s').parse::<u32>().is_ok(),
            "age {age}: {stdout}"
        );
    }
    // The failed upgrade is older than the failed issue, which is older than the probe.
    let seconds = |r: &Vec<String>| r[4].trim_end_matches('s').parse::<u32>().unwrap();
    assert!(seconds(upgrade) > seconds(issue) && seconds(issue) >= seconds(probe));

    // A label selector narrows the list on the server's side.
    let out = nodejob(&["jobs", "--simulate", "5", "-l", "stratum.ciq.com/upgrade"]);
    let rows = job_rows(&text(&out.stdout));
    assert_eq!(rows.len(), 1, "{}", text(&out.stdout));
    assert!(rows[0][0].starts_with("upgrade-worker-b-0-"));
}

#[test]
fn jobs_json_is_one_list_as_kubectl_prints() {
    let out = nodejob(&["jobs", "--simulate", "5", "--output", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "List", "{list}");
    assert_eq!(list["apiVersion"], "v1", "{list}");
    let jobs = list["items"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 3);
    for job in &jobs {
        assert_eq!(job["namespace"], "kube-system");
        assert!(job["uid"].as_str().is_some_and(|u| u.len() == 36), "{job}");
        assert!(
            job["created"]
                .as_str()
                .is_some_and(|c| c.starts_with("2026-")),
            "{job}"
        );
        assert!(job["age_seconds"].as_i64().is_some(), "{job}");
    }
    let by_label = |label: &str| {
        jobs.iter()
            .find(|j| j["label"] == label)
            .unwrap_or_else(|| panic!("no job labelled {label}"))
    };
    let upgrade = by_label("stratum.ciq.com/upgrade");
    assert_eq!(
        (&upgrade["node"], &upgrade["status"], &upgrade["exit_code"]),
        (&"worker-b-0".into(), &"Failed".into(), &1.into())
    );
    let issue = by_label("stratum.ciq.com/carotate");
    assert_eq!(
        (&issue["status"], &issue["exit_code"], &issue["disrupted"]),
        (&"Failed".into(), &1.into(), &false.into())
    );
    let probe = by_label("stratum.ciq.com/run");
    assert_eq!(
        (&probe["node"], &probe["status"], &probe["exit_code"]),
        (&"cp-0".into(), &"Running".into(), &serde_json::Value::Null)
    );

    // A selector the apiserver cannot parse is bad input, refused by its grammar.
    let out = nodejob(&["jobs", "--simulate", "3", "-l", "a=b=c"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "--selector \"a=b=c\": found '=', expected: ',' or 'end of string'\n"
    );
}

#[test]
fn a_version_source_that_is_none_is_bad_usage_naming_the_flag() {
    // A label key that is none: refused by the plan, named as the flag that gave it.
    let out = nodejob(&[
        "upgrade",
        "--to",
        "v1.38.0",
        "--simulate",
        "3",
        "--version-from",
        "label=a,b",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--version-from") && stderr.contains("\"a,b\" is not a label key"),
        "{stderr}"
    );
    // A source that is none of the three: clap's usage error, naming the choices.
    let out = nodejob(&["upgrade", "--to", "v1.38.0", "--version-from", "os"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--version-from") && stderr.contains("kubelet, os-image, label=KEY"),
        "{stderr}"
    );
}

#[test]
fn a_selector_or_names_matching_no_node_exit_2_naming_them() {
    // A typo in the selector is no finished roll: the plan selects no node, said before the
    // Lease and before any change, as bad input (exit 2, as a named node that is not there).
    let said =
        "the plan selects no node: the selector \"role=wrker\" matches no node; check --selector\n";
    for command in [&["upgrade", "--to", "v1.38.0"][..], &["rotate-ca"]] {
        let mut args = command.to_vec();
        args.extend(["--simulate", "3", "--selector", "role=wrker"]);
        let out = nodejob(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&out.stderr), said, "{args:?}");
        // Nothing but the banner that says the cluster is simulated.
        let stdout = text(&out.stdout);
        assert_eq!(stdout.lines().count(), 2, "{args:?}: {stdout}");
        assert!(
            stdout.starts_with("simulated cluster"),
            "{args:?}: {stdout}"
        );
    }
    // With names too, the message names them.
    let out = nodejob(&[
        "upgrade",
        "--simulate",
        "3",
        "--to",
        "v1.38.0",
        "--selector",
        "!node-role.kubernetes.io/control-plane",
        "--nodes",
        "cp-0,cp-1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "the plan selects no node: none of the nodes cp-0, cp-1 exists and matches the \
         selector \"!node-role.kubernetes.io/control-plane\"; check --nodes and --selector\n"
    );
    // A name alone that is not there, as a named node among others that are.
    for nodes in ["nope", "cp-0,nope"] {
        let out = nodejob(&[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--nodes",
            nodes,
        ]);
        assert_eq!(out.status.code(), Some(2), "{nodes}");
        let said = match nodes {
            "nope" => "the plan selects no node: none of the nodes nope exists; check --nodes\n",
            _ => "node nope does not exist; check --nodes\n",
        };
        assert_eq!(text(&out.stderr), said);
    }
}

#[test]
fn status_shows_the_lease_operation_and_each_nodes_ca_phase_and_upgrade() {
    let out = nodejob(&["status", "--simulate", "5"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with("lease kube-system/nodejob: free (last: rotate-ca sha256:d4501ab3")
            && first.contains("epoch 1"),
        "{first}"
    );
    // The table, then each node's conditions as `kubectl describe node` shows them.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip(2)
        .take_while(|l| !l.starts_with("node "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 5, "{stdout}");
    let failed: Vec<&str> = (stdout.lines())
        .skip_while(|l| {
            *l != "node worker-b-0, as `kubectl describe node` shows the drivers' conditions:"
        })
        .filter(|l| l.starts_with("  NodejobUpgrade "))
        .collect();
    assert!(
        failed.first().is_some_and(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells[1] == "True"
                && l.contains("+0000   Failed   the upgrade to v1.38.0 failed at Upgrade")
        }),
        "{stdout}"
    );
    let troubled = rows.iter().find(|r| r[0] == "worker-b-0").unwrap();
    // NODE VERSION READY CORDONED CA UPGRADE...: its upgrade and its `issue` failed.
    assert_eq!(
        troubled[1..5],
        ["v1.37.2", "yes", "yes", "staged"],
        "{stdout}"
    );
    assert!(
        troubled.join(" ").ends_with(
            "FAILED upgrading to v1.38.0 (host upgrade failed; epoch 0, cordoned by us)"
        ),
        "{stdout}"
    );
    assert!(
        rows.iter()
            .any(|r| r[0] == "cp-0" && r[5..8] == ["upgraded", "to", "v1.38.0"])
    );

    // The same cluster (the history is deterministic), as JSON: the CA phase the table shows
    // is the rotation's record on each node.
    let out = nodejob(&["status", "--simulate", "5", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["lease"]["operation"], "rotate-ca");
    assert_eq!(status["lease"]["name"], "kube-system/nodejob");
    assert!(status["lease"]["holder"].is_null());
    let nodes = status["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5);
    for node in nodes {
        let row = rows.iter().find(|r| node["node"] == r[0]).unwrap();
        assert_eq!(node["ca"]["phase"], row[4], "{node}");
        // Mid-rotation: the new CA is trusted beside the old one everywhere.
        assert_eq!(node["ca"]["trusted"].as_array().unwrap().len(), 2, "{node}");
    }
}

#[test]
fn a_reader_that_stops_early_ends_the_command_quietly_as_sigpipe_would() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command as Process, Stdio};

    // As `nodejob upgrade ... | head -1`: the reader goes after the first line while the
    // simulated roll goes on printing.
    let mut child = Process::new(env!("CARGO_BIN_EXE_nodejob"))
        .env("NODEJOB_SIMULATE_START", SIMULATE_START)
        .args(["upgrade", "--simulate", "5", "--to", "v1.38.0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("simulated cluster"), "{first}");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(141), "{status:?}, stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

#[test]
fn completions_to_a_reader_already_gone_end_as_sigpipe_would() {
    use std::process::{Command as Process, Stdio};

    // As `nodejob completions bash | head -0`, made certain: the pipe's read end is closed
    // before the command starts, so its first write meets a reader that has gone.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Process::new(env!("CARGO_BIN_EXE_nodejob"))
        .args(["completions", "bash"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(141),
        "{:?}, stderr: {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `nodejob upgrade ... | head`: a reader of stdout gone stops the roll as one Ctrl-C does
/// (no node starts after; the stop, with the nodes it left, said on stderr; the Lease
/// released), and the process then ends as SIGPIPE would have ended it, not mid-step.
#[test]
fn a_roll_whose_reader_is_gone_stops_as_on_ctrl_c_and_ends_as_sigpipe_would() {
    use std::process::{Command as Process, Stdio};

    // The read end closed before the command starts: its first line (the simulated
    // cluster's banner, before any node) meets a reader that has gone.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Process::new(env!("CARGO_BIN_EXE_nodejob"))
        .args(["upgrade", "--simulate", "6", "--to", "v1.38.0"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(
        stderr.contains("stdout's reader went away: stopping as on Ctrl-C"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stopped: as asked; the nodes in flight finished their step"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn an_argv_after_dashdash_is_refused_by_every_command_that_takes_none() {
    let upgrade = ["upgrade", "--simulate", "3", "--to", "v1.38.0"];
    let commands: [&[&str]; 7] = [
        &upgrade,
        &["rotate-ca", "--simulate", "3"],
        &["jobs", "--simulate", "3"],
        &["status", "--simulate", "3"],
        &["mcp", "--simulate", "3"],
        &["completions", "bash"],
        &["upgrade", "--simulate", "3", "--to", "v1.38.0", "--preview"],
    ];
    for command in commands {
        let args: Vec<&str> = command.iter().copied().chain(["--", "--dry-run"]).collect();
        let out = nodejob(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            out.stdout.is_empty(),
            "{args:?} printed {}",
            text(&out.stdout)
        );
        assert!(
            text(&out.stderr).contains("--dry-run"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let refused = text(&nodejob(&[&upgrade[..], &["--", "--dry-run"]].concat()).stderr);
    assert!(refused.contains("--health-check"), "{refused}");
}

#[test]
fn dry_run_in_each_of_kubectls_forms_is_the_preview() {
    let upgrade = ["upgrade", "--simulate", "3", "--to", "v1.38.0"];
    let rotate = ["rotate-ca", "--simulate", "3"];
    for command in [&upgrade[..], &rotate[..]] {
        let preview = nodejob(&[command, &["--preview"]].concat());
        assert_eq!(preview.status.code(), Some(0));
        for form in ["--dry-run", "--dry-run=client", "--dry-run=server"] {
            let dry = nodejob(&[command, &[form]].concat());
            assert_eq!(dry.status.code(), Some(0), "{command:?} {form}");
            assert_eq!(
                text(&dry.stdout),
                text(&preview.stdout),
                "{command:?} {form}"
            );
            assert_eq!(
                text(&dry.stderr),
                text(&preview.stderr),
                "{command:?} {form}"
            );
        }
    }
    // kubectl's `--dry-run=none` is no dry run: the roll runs, as kubectl's request would.
    let none = nodejob(&[&upgrade[..], &["--dry-run=none"]].concat());
    assert_eq!(none.status.code(), Some(0), "{}", text(&none.stderr));
    assert!(
        text(&none.stdout).contains("3 upgraded, 0 skipped"),
        "{}",
        text(&none.stdout)
    );
}

/// `run --dry-run`, in kubectl's three forms, prints the Job `render` prints and creates
/// nothing: the bare flag and `=client` with no cluster at all (no kubeconfig here),
/// `=server` after reading the node, as the run would; `-o json` as `render -o json`.
#[test]
fn run_dry_run_prints_what_render_prints_and_creates_nothing() {
    let argv = ["--", "/bin/true"];
    for output in [&[][..], &["-o", "json"], &["-o", "yaml"]] {
        let render = nodejob(&[&["render", "--node", "cp-0"], output, &argv[..]].concat());
        assert_eq!(render.status.code(), Some(0), "{}", text(&render.stderr));
        for form in [
            &["--dry-run"][..],
            &["--dry-run=client"],
            &["--simulate", "3", "--dry-run=server"],
        ] {
            let run = nodejob(&[&["run", "--node", "cp-0"], form, output, &argv[..]].concat());
            assert_eq!(
                run.status.code(),
                Some(0),
                "{form:?} {output:?}: {}",
                text(&run.stderr)
            );
            assert_eq!(
                text(&run.stdout),
                text(&render.stdout),
                "{form:?} {output:?}"
            );
        }
    }
    // The server's dry run reads the node first, and refuses one the cluster lacks.
    let out = nodejob(&[
        "run",
        "--simulate",
        "3",
        "--node",
        "nope",
        "--dry-run=server",
        "--",
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

/// clap's tip for an unknown flag, "to pass '--x' as a value, use '-- --x'", would move the
/// flag into the argv `run` and `upgrade --health-check` execute: it is never given (a
/// similar flag's tip still is).
#[test]
fn no_parser_tip_moves_a_flag_after_dashdash() {
    let commands: [&[&str]; 4] = [
        &["run", "--node", "cp-0", "--bogus", "--", "/bin/true"],
        &[
            "run",
            "--simulate",
            "3",
            "--node",
            "cp-0",
            "--dry-runn",
            "--",
            "/bin/true",
        ],
        &[
            "upgrade",
            "--simulate",
            "3",
            "--to",
            "v1.38.0",
            "--health-check",
            "--bogus",
            "--",
            "true",
        ],
        &["render", "--node", "cp-0", "--bogus", "--", "/bin/true"],
    ];
    for args in commands {
        let out = nodejob(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("unexpected argument"), "{args:?}: {stderr}");
        assert!(!stderr.contains("as a value"), "{args:?}: {stderr}");
        assert!(!stderr.contains("use '--"), "{args:?}: {stderr}");
    }
    let near = text(&nodejob(&["run", "--node", "cp-0", "--dry-runn", "--", "true"]).stderr);
    assert!(
        near.contains("a similar argument exists: '--dry-run'"),
        "{near}"
    );
}

/// The requests a [`scripted_apiserver`] was sent, each `METHOD PATH`.
type Requests = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// An apiserver on plain HTTP at the returned address, answering each request with what
/// `answer` says for its method and path (a status and a JSON body), recording every request.
fn scripted_apiserver(answer: fn(&str, &str) -> (u16, String)) -> (String, Requests) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    let requests = Requests::default();
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut words = line.split_whitespace();
                    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
                    let mut length = 0;
                    loop {
                        let mut header = String::new();
                        reader.read_line(&mut header).unwrap();
                        if header.trim().is_empty() {
                            break;
                        }
                        if let Some((name, value)) = header.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    seen.lock().unwrap().push(format!("{method} {path}"));
                    let (status, body) = answer(method, path);
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (server, requests)
}

/// On a real cluster, as under `--simulate`, `run --node` names a node the cluster does not
/// have: refused (exit 2) after reading the node, and no Job is created (a Job pinned to it
/// stayed Pending, then was left Failed).
#[test]
fn run_on_a_node_the_cluster_lacks_is_refused_before_any_job_is_created() {
    let (server, requests) = scripted_apiserver(|method, path| match (method, path) {
        ("GET", "/version") => (
            200,
            r#"{"major":"1","minor":"33","gitVersion":"v1.33.0"}"#.into(),
        ),
        ("GET", path) if path.starts_with("/api/v1/nodes/") => {
            let name = path.trim_start_matches("/api/v1/nodes/");
            (
                404,
                format!(
                    r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"nodes \"{name}\" not found","reason":"NotFound","details":{{"name":"{name}","kind":"nodes"}},"code":404}}"#
                ),
            )
        }
        // Anything else refused at once (a 5xx would be retried).
        _ => (
            403,
            r#"{"kind":"Status","status":"Failure","reason":"Forbidden","code":403}"#.into(),
        ),
    });
    let path = kubeconfig_at("run-no-such-node", &server);
    let kubeconfig = path.to_str().unwrap();
    for dry_run in [&[][..], &["--dry-run=server"]] {
        let args = [
            &["--kubeconfig", kubeconfig, "run", "--node", "no-such-node"],
            dry_run,
            &["--", "/bin/true"],
        ]
        .concat();
        let out = nodejob(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("--node no-such-node: no such node in the cluster"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }
    let requests = requests.lock().unwrap().clone();
    assert!(
        requests.contains(&"GET /api/v1/nodes/no-such-node".to_string()),
        "{requests:?}"
    );
    assert!(
        requests.iter().all(|r| r.starts_with("GET ")),
        "a write: {requests:?}"
    );
    let _ = std::fs::remove_file(&path);
}

/// A CA certificate (PEM) of its own, self-signed, that signed nothing the tests serve.
fn other_ca() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "not the cluster's CA");
    params.self_signed(&key).unwrap().pem()
}

/// An apiserver on TLS at the returned `https://` address whose certificate is self-signed
/// for 127.0.0.1: no kubeconfig's CA trusts it. It completes no handshake.
/// A kubeconfig (in the temporary folder, named for `tag` and this process) whose one
/// context and cluster, `name`, is `server` trusted by `ca_pem` (written beside it), with a
/// token user: the CA's path and the kubeconfig's.
fn kubeconfig_of(
    tag: &str,
    name: &str,
    server: &str,
    ca_pem: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir();
    let path = |ext: &str| dir.join(format!("nodejob-cli-{tag}-{}.{ext}", std::process::id()));
    let (ca, kubeconfig) = (path("ca.pem"), path("kubeconfig"));
    std::fs::write(&ca, ca_pem).unwrap();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: \
             {server}\n    certificate-authority: {}\ncontexts:\n- name: {name}\n  context:\n    \
             cluster: {name}\n    user: operator\ncurrent-context: {name}\nusers:\n- name: \
             operator\n  user:\n    token: not-a-real-token\n",
            ca.display()
        ),
    )
    .unwrap();
    (ca, kubeconfig)
}

/// A TLS server on 127.0.0.1 with `cert` (DER, for `key`), its `https://` address: each
/// connection, its handshake begun, handed to `serve` on the server's thread.
fn tls_server(
    cert: &rcgen::Certificate,
    key: &rcgen::KeyPair,
    serve: impl Fn(std::net::TcpStream, rustls::ServerConnection) + Send + 'static,
) -> String {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let config = std::sync::Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = format!("https://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if let (Ok(stream), Ok(tls)) = (stream, rustls::ServerConnection::new(config.clone())) {
                serve(stream, tls);
            }
        }
    });
    server
}

fn untrusted_apiserver() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::IpAddress([127, 0, 0, 1].into())];
    let cert = params.self_signed(&key).unwrap();
    tls_server(&cert, &key, |mut stream, mut tls| {
        // Until the client refuses the certificate (its alert ends the handshake).
        let _ = tls.complete_io(&mut stream);
    })
}

/// A kubeconfig whose apiserver's certificate its certificate-authority does not trust (as
/// kubectl's `x509: certificate signed by unknown authority`): said at once, as its own
/// error (exit 2), pointing at the certificate-authority, never retried as unreachable.
#[test]
fn an_untrusted_apiserver_certificate_is_said_at_once_pointing_at_the_ca() {
    let server = untrusted_apiserver();
    let (ca, kubeconfig) = kubeconfig_of("untrusted", "prod", &server, &other_ca());
    let kubeconfig_arg = kubeconfig.to_str().unwrap();
    for command in [
        &["status"][..],
        &["run", "--node", "cp-0", "--", "/bin/true"],
    ] {
        let args = [&["--kubeconfig", kubeconfig_arg], command].concat();
        let started = std::time::Instant::now();
        let out = nodejob(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        for said in [
            format!(
                "the apiserver {server} (context prod of the kubeconfig) presented a certificate this machine does not trust"
            ),
            "UnknownIssuer".to_string(),
            format!(
                "the certificate-authority of cluster prod in the kubeconfig ({})",
                ca.display()
            ),
        ] {
            assert!(stderr.contains(&said), "{args:?}: {said:?} not in {stderr}");
        }
        assert!(!stderr.contains("retrying"), "{args:?}: {stderr}");
        assert!(!stderr.contains("cannot reach"), "{args:?}: {stderr}");
        // At once: no retry's pause (1 s, then 2 s).
        assert!(
            started.elapsed() < std::time::Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
    let _ = std::fs::remove_file(&ca);
    let _ = std::fs::remove_file(&kubeconfig);
}

/// An HTTPS server at the returned `https://` address that is no apiserver: it answers every
/// request `404 Not Found`, with a certificate for 127.0.0.1 signed by the returned CA (PEM).
fn not_an_apiserver() -> (String, String) {
    use std::io::{Read, Write};
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "a web server's CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::IpAddress([127, 0, 0, 1].into())];
    let cert = params.signed_by(&key, &issuer).unwrap();
    let server = tls_server(&cert, &key, |mut stream, tls| {
        let mut tls = rustls::StreamOwned::new(tls, &mut stream);
        // One request per connection: read its head, answer 404, close.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && matches!(tls.read(&mut byte), Ok(1)) {
            head.push(byte[0]);
        }
        let body = "404 page not found\n";
        let _ = write!(
            tls,
            "HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = tls.flush();
        tls.conn.send_close_notify();
        let _ = tls.flush();
    });
    (server, ca.pem())
}

/// A kubeconfig whose server is an HTTPS endpoint that is no apiserver (404 to everything):
/// said at once, naming the server and the context, exit 2 as a certificate it does not trust,
/// for a read (`status`) as for a write (`resume`, which said "not paused"; issue 33).
#[test]
fn a_server_that_is_no_apiserver_is_said_at_once_naming_it() {
    let (server, ca_pem) = not_an_apiserver();
    let (ca, kubeconfig) = kubeconfig_of("not-apiserver", "web", &server, &ca_pem);
    let kubeconfig_arg = kubeconfig.to_str().unwrap();
    for command in [&["status"][..], &["resume"]] {
        let args = [&["--kubeconfig", kubeconfig_arg], command].concat();
        let out = nodejob(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        let said = format!(
            "the server at {server} (context web of the kubeconfig) does not answer as a \
             Kubernetes apiserver (GET /version: 404 Not Found): is the kubeconfig's server right?"
        );
        assert!(stderr.contains(&said), "{args:?}: {said:?} not in {stderr}");
        assert!(!stderr.contains("retrying"), "{args:?}: {stderr}");
        assert!(!stderr.contains("not paused"), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_file(&ca);
    let _ = std::fs::remove_file(&kubeconfig);
}

/// Unless `--simulate-start` (or NODEJOB_SIMULATE_START) says, the simulated clock starts at
/// the machine's time, so that a CA made today is valid in the simulation.
#[test]
fn the_simulated_clock_starts_now_by_default() {
    let day = |t: jiff::Timestamp| t.strftime("%a %Y-%m-%d").to_string();
    let before = jiff::Timestamp::now();
    let out = Command::cargo_bin("nodejob")
        .unwrap()
        .env_remove("KUBECONFIG")
        .env_remove("NODEJOB_SIMULATE_START")
        .args(["upgrade", "--simulate", "3", "--to", "v1.38.0", "--preview"])
        .output()
        .unwrap();
    let after = jiff::Timestamp::now();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let said = [before, after].map(|t| format!("virtual clock from {}", day(t)));
    assert!(
        said.iter().any(|s| stdout.contains(s)),
        "{said:?} not in {stdout}"
    );
    // The flag starts a simulated clock: given without --simulate, it is refused; the
    // variable the tests set (`nodejob()` sets it) is ignored by a run without --simulate.
    let out = nodejob(&[
        "run",
        "--node",
        "cp-0",
        "--simulate-start",
        "2026-01-01T00:00:00Z",
        "--dry-run",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("needs --simulate N"),
        "{}",
        text(&out.stderr)
    );
    let out = nodejob(&["run", "--node", "cp-0", "--dry-run", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// A CA made after the simulated clock's start (its notBefore later) is refused as the run
/// refuses it, exit 2, and the refusal names `--simulate-start` and the instant the CA is
/// valid from; started there, the rotation's preview takes it. `--simulate-start` has no
/// upper bound (a CA of 2031 can be tried).
#[test]
fn a_ca_not_valid_yet_in_the_simulation_names_simulate_start() {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "made in 2031");
    params.not_before = rcgen::date_time_ymd(2031, 6, 1);
    params.not_after = rcgen::date_time_ymd(2041, 6, 1);
    let path = std::env::temp_dir().join(format!("nodejob-cli-ca-2031-{}.pem", std::process::id()));
    std::fs::write(&path, params.self_signed(&key).unwrap().pem()).unwrap();
    let ca = path.to_str().unwrap();
    let rotate = ["rotate-ca", "--simulate", "3", "--new-ca", ca, "--preview"];
    let out = nodejob(&[&rotate[..], &["--simulate-start", "2026-01-01T00:00:00Z"]].concat());
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for said in [
        format!("--new-ca {ca}: the certificate is not valid yet"),
        "the simulated cluster's clock started at 2026-01-01T00:00:00Z".to_string(),
        "`--simulate-start 2031-06-01T00:00:00Z` (or later)".to_string(),
    ] {
        assert!(stderr.contains(&said), "{said:?} not in {stderr}");
    }
    let out = nodejob(&[&rotate[..], &["--simulate-start", "2031-06-01T00:00:00Z"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("virtual clock from Sun 2031-06-01 00:00 UTC"));
    let _ = std::fs::remove_file(&path);
}

/// A kubeconfig whose current context `dead` points at `server`, written for `test`.
fn kubeconfig_at(test: &str, server: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "nodejob-cli-{test}-{}.kubeconfig",
        std::process::id()
    ));
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster:\n    server: \
         {server}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: dead\n  context:\n    \
         cluster: dead\n    user: operator\ncurrent-context: dead\nusers:\n- name: operator\n  \
         user:\n    token: not-a-real-token\n"
    );
    std::fs::write(&path, kubeconfig).unwrap();
    path
}

#[test]
fn an_unreachable_cluster_fails_promptly_naming_the_server_and_context_with_exit_5() {
    // A port that was bound and let go: connections to it are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("https://127.0.0.1:{port}");
    let path = kubeconfig_at("unreachable", &server);
    let kubeconfig = path.to_str().unwrap();
    let ca = fixture("new-ca.pem");
    let commands: [&[&str]; 5] = [
        &["upgrade", "--to", "v1.38.0", "--preview"],
        &["upgrade", "--to", "v1.38.0"],
        &["rotate-ca", "--new-ca", &ca, "--preview"],
        &["run", "--node", "worker-0", "--", "true"],
        &["jobs"],
    ];
    let runs: Vec<_> = commands
        .iter()
        .map(|command| {
            let args: Vec<String> = ["--kubeconfig", kubeconfig]
                .iter()
                .chain(command.iter())
                .map(|a| a.to_string())
                .collect();
            std::thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                (args.join(" "), nodejob(&args))
            })
        })
        .collect();
    for run in runs {
        let (args, out) = run.join().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{args}: {stderr}");
        assert!(out.stdout.is_empty(), "{args}: {}", text(&out.stdout));
        for said in [
            format!("cannot reach {server} ("),
            "retrying 2/3".to_string(),
            "retrying 3/3".to_string(),
            format!("cannot reach the apiserver {server} (context dead of the kubeconfig)"),
            "Connection refused".to_string(),
        ] {
            assert!(stderr.contains(&said), "{args}: {said:?} not in {stderr}");
        }
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_server_that_hangs_up_and_a_kubeconfig_list_with_a_missing_file_fail_as_unreachable() {
    // Accepts every connection and closes it at once: the TLS handshake finds no one.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = format!("https://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    let path = kubeconfig_at("hangs-up", &server);
    // KUBECONFIG as a list with a file that does not exist: skipped, as kubectl skips it.
    let list = format!("{}:/nonexistent/nodejob.kubeconfig", path.display());
    let out = Command::cargo_bin("nodejob")
        .unwrap()
        .env("KUBECONFIG", &list)
        .args(["status"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot reach the apiserver {server} (context dead"
        )),
        "{stderr}"
    );
    // Alone, a missing kubeconfig is an error of its own, as kubectl's --kubeconfig.
    let out = nodejob(&["--kubeconfig", "/nonexistent/nodejob.kubeconfig", "status"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // The path said once, unquoted.
    assert_eq!(
        text(&out.stderr).trim_end(),
        "--kubeconfig /nonexistent/nodejob.kubeconfig: no such file"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn render_honours_o_json_and_yaml_and_the_old_format_flag_hidden_without_f() {
    let argv = ["--node", "cp-0", "--", "true"];
    let render = |extra: &[&str]| {
        let out = nodejob(&[&["render"], extra, &argv[..]].concat());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let json = render(&["-o", "json"]);
    let job: Job = serde_json::from_str(&json).expect("-o json is JSON");
    assert_eq!(job.metadata.name.as_deref(), Some("nodejob-run-cp-0"));
    let yaml = render(&["-o", "yaml"]);
    assert!(yaml.starts_with("apiVersion: batch/v1"), "{yaml}");
    assert_eq!(render(&[]), yaml);
    assert_eq!(render(&["--format", "json"]), json);
    // kubectl's `-f` is `--filename`: not taken here.
    let f = nodejob(&[&["render", "-f", "json"], &argv[..]].concat());
    assert_eq!(f.status.code(), Some(2));
    let help = text(&nodejob(&["render", "--help"]).stdout);
    assert!(!help.contains("--format"), "{help}");
}

#[test]
fn status_json_nests_the_records_and_says_a_failed_upgrade_failed() {
    let out = nodejob(&["status", "--simulate", "5", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = status["nodes"].as_array().unwrap();
    let failed = nodes.iter().find(|n| n["node"] == "worker-b-0").unwrap();
    assert_eq!(failed["upgrade_state"], "failed", "{failed}");
    assert_eq!(failed["in_progress"]["target"], "v1.38.0", "{failed}");
    assert_eq!(failed["host_job"]["exit_code"], 1, "{failed}");
    // Every key in nodejob's style: the records' too (`bootID` on the node).
    assert!(failed["in_progress"]["boot_id"].is_string(), "{failed}");
    assert!(
        failed["in_progress"]["host_boot_id"].is_string(),
        "{failed}"
    );
    let done = nodes.iter().find(|n| n["node"] == "cp-0").unwrap();
    assert_eq!(done["upgrade_state"], "upgraded", "{done}");
    assert_eq!(done["done"]["version"], "v1.38.0", "{done}");
}

#[test]
fn completions_and_render_refuse_the_flags_that_mean_nothing_to_them() {
    let render = ["render", "--node", "cp-0", "--", "/bin/true"];
    let refused: [(&[&str], &[&str]); 8] = [
        (&["completions", "bash"], &["-o", "json"]),
        (&["completions", "bash"], &["--context", "prod"]),
        (&["completions", "bash"], &["--kubeconfig", "/dev/null"]),
        (&["completions", "bash"], &["-n", "default"]),
        (&["completions", "bash"], &["--qps", "5"]),
        (&render, &["--context", "prod"]),
        (&render, &["--kubeconfig", "/dev/null"]),
        (&render, &["--burst", "5"]),
    ];
    for (command, flag) in refused {
        // The flag before the command's own arguments (after `--` is the Job's argv).
        let out = nodejob(&[&command[..1], flag, &command[1..]].concat());
        assert_eq!(out.status.code(), Some(2), "{command:?} {flag:?}");
        assert!(out.stdout.is_empty(), "{flag:?}");
        let said = format!("means nothing to `{}`", command[0]);
        assert!(
            text(&out.stderr).contains(&said),
            "{flag:?}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(nodejob(&["completions", "bash"]).status.code(), Some(0));
    // What render does use: the namespace and the output.
    let out = nodejob(&[&render[..1], &["-n", "ops", "-o", "json"], &render[1..]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"namespace\": \"ops\""));
}

#[test]
fn an_empty_program_and_an_argv_over_the_limit_are_refused_before_anything_is_built() {
    let empty = nodejob(&["render", "--node", "cp-0", "--", ""]);
    assert_eq!(empty.status.code(), Some(2));
    assert!(empty.stdout.is_empty());
    let said = text(&empty.stderr);
    assert!(said.contains("argv[0], must not be empty"), "{said}");
    // 1.6 MB, as the issue tried (16 arguments of 100 kB: exec takes none over 128 KiB):
    // refused naming the limit.
    let chunk = "x".repeat(100_000);
    let mut args = vec!["render", "--node", "cp-0", "--", "echo"];
    args.extend(std::iter::repeat_n(chunk.as_str(), 16));
    let out = nodejob(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let said = text(&out.stderr);
    assert!(said.contains("at most 131072 bytes"), "{said}");
    assert!(
        said.len() < 1000,
        "the refusal quotes the argv: {} bytes",
        said.len()
    );
}

/// A kubeconfig with insecure-skip-tls-verify: no "Server cert bypassed" warning from the
/// client at each handshake (kubectl says nothing of it), unless -v asks for the logs.
#[test]
fn insecure_skip_tls_verify_is_not_warned_of_at_each_connection() {
    let server = untrusted_apiserver();
    let kubeconfig =
        std::env::temp_dir().join(format!("nodejob-insecure-{}.yaml", std::process::id()));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster: {{server: \"{server}\", \
             insecure-skip-tls-verify: true}}\n  name: c\ncontexts:\n- context: {{cluster: c, \
             user: u}}\n  name: x\ncurrent-context: x\nusers:\n- name: u\n  user: {{token: abc}}\n"
        ),
    )
    .unwrap();
    let run = |verbose: &[&str]| {
        Command::cargo_bin("nodejob")
            .unwrap()
            .env_remove("RUST_LOG")
            .args(["jobs", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(verbose)
            .output()
            .unwrap()
    };
    let quiet = run(&[]);
    let verbose = run(&["-v"]);
    let _ = std::fs::remove_file(&kubeconfig);
    // The handshake was made (the server speaks no HTTP after it, so the command fails).
    assert_ne!(quiet.status.code(), Some(0));
    assert!(
        !text(&quiet.stderr).contains("Server cert bypassed"),
        "{}",
        text(&quiet.stderr)
    );
    assert!(
        text(&verbose.stderr).contains("Server cert bypassed"),
        "{}",
        text(&verbose.stderr)
    );
}

#[test]
fn no_colour_codes_go_to_a_pipe() {
    // A cluster that refuses connections, and -vv: the client's debug logs go to stderr,
    // which is a pipe here, so they carry no escape codes.
    let kubeconfig =
        std::env::temp_dir().join(format!("nodejob-colour-{}.yaml", std::process::id()));
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster: {server: \"https://127.0.0.1:1\", \
         insecure-skip-tls-verify: true}\n  name: c\ncontexts:\n- context: {cluster: c, user: u}\n  \
         name: x\ncurrent-context: x\nusers:\n- name: u\n  user: {token: abc}\n",
    )
    .unwrap();
    let out = Command::cargo_bin("nodejob")
        .unwrap()
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .args(["jobs", "-vv", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&kubeconfig);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("DEBUG"), "no debug log: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "an escape code in a pipe: {stderr:?}"
    );
}

#[test]
fn lease_renewals_show_only_with_verbose() {
    let quiet = nodejob(&["upgrade", "--simulate", "3", "--to", "v1.38.0"]);
    assert!(!text(&quiet.stdout).contains("lease renewed"));
    let verbose = nodejob(&["upgrade", "--simulate", "3", "--to", "v1.38.0", "-v"]);
    assert!(text(&verbose.stdout).contains("lease renewed (epoch 0)"));
    // JSON keeps every event: a program filters what it wants.
    let json = nodejob(&[
        "upgrade",
        "--simulate",
        "3",
        "--to",
        "v1.38.0",
        "-o",
        "json",
    ]);
    assert!(text(&json.stdout).contains("\"lease_renewed\""));
}

#[test]
fn a_rotation_to_a_ca_that_expires_within_90_days_runs_with_a_warning() {
    let ca = fixture("expiring-ca.pem");
    let out = nodejob(&["rotate-ca", "--simulate", "3", "--new-ca", &ca]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.starts_with("warning: the new CA expires in 29 days (2026-01-31T00:00:00Z)"),
        "{stderr}"
    );
}

#[test]
fn a_real_sigint_stops_starting_nodes_says_so_and_exits_130() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command as Process, Stdio};

    // Paced (100x), so the roll is still going when the signal lands: SIGINT as the terminal
    // sends it on Ctrl-C, to the process, after its first node has started.
    let mut child = Process::new(env!("CARGO_BIN_EXE_nodejob"))
        .env("NODEJOB_SIMULATE_START", SIMULATE_START)
        .args([
            "upgrade",
            "--simulate",
            "5",
            "--to",
            "v1.38.0",
            "--speed",
            "100",
            "-o",
            "json",
        ])
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut events = Vec::new();
    loop {
        let mut line = String::new();
        assert_ne!(
            stdout.read_line(&mut line).unwrap(),
            0,
            "ended early: {events:?}"
        );
        let event: serde_json::Value = serde_json::from_str(&line).unwrap();
        let started = event["event"] == "step_started";
        events.push(event);
        if started {
            break;
        }
    }
    let kill = Process::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}\n{rest}");
    assert!(
        stderr.contains("stopping: no further node starts"),
        "{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(rest.lines().last().expect("a report")).unwrap();
    assert_eq!(report["event"], "report", "{report}");
    assert_eq!(
        report["report"]["outcome"]["outcome"], "stopped",
        "{report}"
    );
    // The node in flight finished its step; not every node was upgraded: the stop held.
    let nodes = report["report"]["nodes"].as_array().unwrap();
    assert!(!nodes.is_empty(), "{report}");
    let upgraded = (nodes.iter())
        .filter(|n| n["result"]["result"] == "upgraded")
        .count();
    assert!(upgraded < 5, "{report}");
    // Each node left between two steps is named on stderr, with its way out.
    for n in nodes {
        if n["result"]["result"] == "interrupted"
            && let Some(step) = n["result"]["step"].as_str()
        {
            let said = format!(
                "node {} stopped before {step}: ",
                n["name"].as_str().unwrap()
            );
            assert!(stderr.contains(&said), "{said}\n{stderr}");
        }
    }
    assert!(stderr.contains("way out: a rerun"), "{stderr}");
}

#[test]
fn a_rate_limit_of_zero_or_less_or_one_under_simulate_exits_2_naming_the_flag() {
    let cases: [(&[&str], &str); 5] = [
        (&["upgrade", "--to", "v1.38.0", "--qps", "0"], "'--qps <N>'"),
        (
            &["upgrade", "--to", "v1.38.0", "--qps", "-5"],
            "'--qps <N>'",
        ),
        (&["status", "--burst", "0"], "'--burst <N>'"),
        (&["--burst", "-1", "jobs"], "'--burst <N>'"),
        // A simulated cluster takes no HTTP request: the flag is refused, not ignored.
        (
            &[
                "upgrade",
                "--simulate",
                "3",
                "--to",
                "v1.38.0",
                "--qps",
                "50",
            ],
            "--qps: limits the requests to a real cluster's apiserver; --simulate sends none",
        ),
    ];
    for (args, said) in cases {
        let out = nodejob(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
}

/// `--max-blocked` counts nodes only `skip` and `quarantine` leave blocked: with `fail` (the
/// default) it is refused, exit 2, before any change, not accepted without a word.
#[test]
fn max_blocked_without_skip_or_quarantine_is_refused() {
    let roll = [
        "upgrade",
        "--simulate",
        "3",
        "--to",
        "v1.38.0",
        "--max-blocked",
        "2",
    ];
    let out = nodejob(&roll);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("--max-blocked: applies only where undrainable nodes"),
        "{}",
        text(&out.stderr)
    );
    let skip = nodejob(&[&roll[..], &["--on-undrainable", "skip", "--preview"]].concat());
    assert_eq!(skip.status.code(), Some(0), "{}", text(&skip.stderr));
}

/// `deploy/controller/crds.yaml` is what `nodejob render-crds` prints: the CRDs a cluster gets
/// from the directory are the ones the types say. After a change to nodejob-crd's types:
/// `cargo run -p nodejob-cli -- render-crds > deploy/controller/crds.yaml`.
#[test]
fn the_deployed_crds_are_what_render_crds_prints() {
    let out = nodejob(&["render-crds"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let deployed = include_str!("../../deploy/controller/crds.yaml");
    assert!(
        text(&out.stdout) == deployed,
        "deploy/controller/crds.yaml differs from `nodejob render-crds`; write it anew with \
         `cargo run -p nodejob-cli -- render-crds > deploy/controller/crds.yaml`"
    );
    // As JSON: a List of the same two CRDs.
    let json = nodejob(&["render-crds", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "nodeupgrades.nodejob.stratum.ciq.com",
            "carotations.nodejob.stratum.ciq.com"
        ]
    );
}

/// `deploy/controller/deployment.yaml` runs what this binary is: its arguments are flags
/// `nodejob controller` takes, its probes and scrape point at the ports those flags bind, the
/// replica's identity comes from `POD_NAME` (as the election reads it), its ServiceAccount is
/// the one `rbac.yaml` grants, two replicas on two nodes, and a budget of their own that
/// selects them.
#[test]
fn the_controllers_deployment_runs_the_controller_as_its_flags_and_rbac_say() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let manifest = include_str!("../../deploy/controller/deployment.yaml");
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(manifest).unwrap();
    let of = |kind: &str| {
        let found: Vec<_> = docs.iter().filter(|d| d["kind"] == kind).collect();
        assert_eq!(found.len(), 1, "one {kind} in deployment.yaml");
        found[0].clone()
    };
    let deployment: Deployment = serde_json::from_value(of("Deployment")).unwrap();
    let pdb: PodDisruptionBudget = serde_json::from_value(of("PodDisruptionBudget")).unwrap();
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    let rbac = include_str!("../../deploy/controller/rbac.yaml");
    let account = pod.service_account_name.clone().unwrap();
    assert!(
        rbac.contains(&format!(
            "kind: ServiceAccount\nmetadata:\n  name: {account}\n"
        )),
        "rbac.yaml grants no ServiceAccount {account}"
    );
    let anti = pod.affinity.unwrap().pod_anti_affinity.unwrap();
    let spread = anti
        .required_during_scheduling_ignored_during_execution
        .unwrap();
    assert_eq!(spread[0].topology_key, "kubernetes.io/hostname");
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap();
    assert_eq!(args[0], "controller");
    // Every flag it gives, `nodejob controller` takes (a typo would stop the Pod at start).
    let help = nodejob(&["controller", "--help"]);
    let help = text(&help.stdout);
    let mut ports = std::collections::BTreeMap::new();
    for arg in &args[1..] {
        let (flag, value) = arg.split_once('=').unwrap();
        assert!(
            help.contains(&format!("{flag} ")),
            "{flag} is not a flag of nodejob controller"
        );
        if let Some(port) = value.strip_prefix(':') {
            ports.insert(flag.to_string(), port.parse::<i32>().unwrap());
        }
    }
    let port = |name: &str| {
        (container.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port)
    };
    assert_eq!(
        port("metrics"),
        ports.get("--metrics-bind-address").copied()
    );
    assert_eq!(
        port("probes"),
        ports.get("--health-probe-bind-address").copied()
    );
    let probe = |p: Option<k8s_openapi::api::core::v1::Probe>| {
        let get = p.unwrap().http_get.unwrap();
        (get.path.unwrap(), format!("{:?}", get.port))
    };
    assert_eq!(
        probe(container.liveness_probe.clone()),
        ("/healthz".into(), r#"String("probes")"#.into())
    );
    assert_eq!(
        probe(container.readiness_probe.clone()),
        ("/readyz".into(), r#"String("probes")"#.into())
    );
    let field = |name: &str| {
        (container.env.iter().flatten())
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.clone())
            .and_then(|v| v.field_ref)
            .map(|f| f.field_path)
    };
    // The election's identity, and the node held to the end of every roll.
    assert_eq!(field("POD_NAME"), Some("metadata.name".into()));
    assert_eq!(field("NODE_NAME"), Some("spec.nodeName".into()));
    let pdb = pdb.spec.unwrap();
    assert_eq!(pdb.selector, Some(spec.selector));
    assert_eq!(
        pdb.min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
}
