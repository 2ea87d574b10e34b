//! The `nodejob` command as a process: help, render, simulated runs, exit codes, JSON output,
//! and the progress bars on a pseudo-terminal.

use std::process::Output;

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

fn nodejob(args: &[&str]) -> Output {
    Command::cargo_bin("nodejob")
        .unwrap()
        .env_remove("KUBECONFIG")
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_subcommand_explains_itself() {
    let top = nodejob(&["--help"]);
    assert!(top.status.success());
    let help = text(&top.stdout);
    assert!(help.contains("kubectl nodejob"), "{help}");
    assert!(help.contains("--simulate"), "{help}");
    for sub in ["upgrade", "run", "render", "status", "completions"] {
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
}

#[test]
fn render_prints_the_job_that_build_promises_and_deploy_keeps_it() {
    let mut args = vec!["render", "--node", "node-a", "-f", "json", "--"];
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

    // deploy/job-example.yaml is the YAML rendering, after its comment lines.
    let mut args = vec!["render", "--node", "node-a", "--"];
    args.extend(STRATUM_HEALTH);
    let yaml = text(&nodejob(&args).stdout);
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/job-example.yaml"
    ))
    .unwrap();
    let body: String = example
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        body, yaml,
        "deploy/job-example.yaml is stale: regenerate it with nodejob render"
    );
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
        stderr.contains("retry: nodejob upgrade --to v1.38.0"),
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
                "v2",
                "--max-unavailable",
                "x%",
            ],
            "max-unavailable",
        ),
        (vec!["upgrade", "--kubeconfig", kc, "--to", "v 2"], "target"),
        (
            vec![
                "upgrade",
                "--kubeconfig",
                kc,
                "--to",
                "v2",
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
                "v2",
                "--simulate-fail",
                "nope",
            ],
            "simulate-fail",
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
            !stderr.contains("127.0.0.1"),
            "{args:?} reached for the server: {stderr}"
        );
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
    assert_eq!(lines[0]["event"], "lease_acquired");
    assert!(lines.iter().any(|l| l["event"] == "step_finished"));
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "report");
    assert_eq!(last["report"]["outcome"]["outcome"], "done");
}

#[test]
fn on_a_terminal_the_bars_draw_and_the_summary_ends_the_output() {
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
        .arg("-c")
        .arg(script)
        .arg(bin)
        .args(["upgrade", "--simulate", "3", "--to", "v1.38.0"])
        .output()
        .expect("python3 runs");
    let screen = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{screen}");
    assert!(
        screen.contains("[========================] 6/6"),
        "no finished bar drawn: {screen}"
    );
    let last = screen.trim_end().lines().last().unwrap();
    assert!(
        last.contains("3 upgraded") && last.contains("done"),
        "{last}"
    );
}
