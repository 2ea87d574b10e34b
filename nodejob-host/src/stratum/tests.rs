use std::time::Duration;

use super::*;

const NEW: &str = "sha256:2222";
const OTHER: &str = "sha256:3333";

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The argv the drivers send: `nsenter … -- /usr/local/bin/stratum` and `line`'s words.
fn argv(line: &str) -> Vec<String> {
    let nsenter = "nsenter --target 1 --mount --uts --ipc --net --pid -- /usr/local/bin/stratum";
    format!("{nsenter} {line}")
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn host() -> StratumHost {
    StratumHost::new("v1.37.2", "boot-0")
}

fn run(host: &mut StratumHost, line: &str) -> Execution {
    host.exec(&argv(line))
        .unwrap_or_else(|| panic!("{line}: not stratum"))
}

fn steps(e: &Execution) -> Vec<(u64, NodeStep)> {
    (e.effects.iter())
        .map(|e| (e.after.as_secs(), e.step.clone()))
        .collect()
}

fn boot(version: &str) -> NodeStep {
    NodeStep::Boot {
        kubelet_version: version.into(),
    }
}

fn trusted(host: &StratumHost) -> Vec<&str> {
    host.state.trusted.iter().map(String::as_str).collect()
}

#[test]
fn upgrade_reboots_into_the_new_version() {
    let mut h = host();
    let e = run(&mut h, "upgrade --to v1.38.0");
    assert_eq!((e.run, e.exit_code), (secs(20), 0));
    assert_eq!(
        e.log,
        "stratum: upgrading v1.37.2 -> v1.38.0\nstratum: v1.38.0 installed; rebooting in 5s\n"
    );
    assert_eq!(
        steps(&e),
        [
            (5, NodeStep::NotReady),
            (35, boot("v1.38.0")),
            (35, NodeStep::Ready)
        ]
    );
    assert_eq!(
        h.state.version, "v1.37.2",
        "it runs the old one until it boots"
    );
    h.booted("v1.38.0", "boot-1");
    assert_eq!(
        (h.state.version.as_str(), h.state.boot_id.as_str()),
        ("v1.38.0", "boot-1")
    );
    let again = run(&mut h, "upgrade --to 1.38.0");
    assert_eq!(
        (again.run, again.exit_code, again.log.as_str()),
        (secs(1), 0, "stratum: already at 1.38.0\n")
    );
    assert!(again.effects.is_empty(), "no reboot");
    assert_eq!(h.state.executions(Operation::Upgrade), 2);
    // A version without its `v` is reported with one.
    let e = run(&mut h, "upgrade --to=1.39.1");
    assert_eq!(e.effects[1].step, boot("v1.39.1"));
}

#[test]
fn argv_to_outcome_on_a_fresh_host() {
    let verify_initial = format!("carotate verify --expect {INITIAL_CA}");
    let issue_initial = format!("carotate issue --ca {INITIAL_CA}");
    let table: [(&str, i32, &str); 14] = [
        // (command line, exit, a part of the log)
        ("health", 0, "healthy: v1.37.2, boot boot-0"),
        ("carotate status", 0, "\"phase\": \"idle\""),
        (
            "carotate stage --add sha256:2222",
            0,
            "staged sha256:2222; trusting 2 CAs",
        ),
        (
            "carotate issue --ca sha256:2222",
            1,
            "sha256:2222 is not trusted; stage it first",
        ),
        (
            "carotate finalize --keep sha256:2222",
            1,
            "refusing to drop the others",
        ),
        (
            "carotate abort --remove sha256:2222",
            0,
            "sha256:2222 is not staged",
        ),
        (&verify_initial, 0, "ok: leaves chain to"),
        (
            "carotate verify --expect sha256:2222",
            3,
            "not yet: leaves chain to",
        ),
        (&issue_initial, 0, "already"),
        (
            "conformance",
            2,
            "stratum: unknown command \"conformance\"\nusage: stratum upgrade",
        ),
        ("", 2, "stratum: no command"),
        ("upgrade", 2, "--to is required"),
        ("carotate stage --add md5:x", 2, "not a fingerprint"),
        ("carotate rotate", 2, "unknown subcommand \"rotate\""),
    ];
    for (line, exit_code, part) in table {
        let mut h = host();
        let e = run(&mut h, line);
        assert_eq!(e.exit_code, exit_code, "{line}: {}", e.log);
        assert!(
            e.log.contains(part),
            "{line}: {:?} not in {:?}",
            part,
            e.log
        );
        assert_eq!(e.run, secs(1), "{line}");
        assert!(e.effects.is_empty(), "{line}");
        assert_eq!(h.state.executions.values().sum::<u32>(), 1, "{line}");
    }
}

#[test]
fn a_whole_rotation_and_its_status() {
    let mut h = host();
    let status = |h: &mut StratumHost| {
        let e = run(h, "carotate status");
        assert_eq!(e.exit_code, 0);
        let line = e.log.strip_suffix('\n').unwrap().to_string();
        assert!(!line.contains('\n'), "one line: {line}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let trusted: Vec<String> = (v["trusted"].as_array().unwrap().iter())
            .map(|t| t.as_str().unwrap().to_string())
            .collect();
        (
            v["phase"].as_str().unwrap().to_string(),
            trusted,
            v["issuer"].as_str().unwrap().to_string(),
        )
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        status(&mut h),
        ("idle".into(), s(&[INITIAL_CA]), INITIAL_CA.into())
    );

    assert_eq!(
        run(&mut h, &format!("carotate stage --add {NEW}")).exit_code,
        0
    );
    assert_eq!(
        status(&mut h),
        ("staged".into(), s(&[INITIAL_CA, NEW]), INITIAL_CA.into())
    );
    let verify_both = format!("carotate verify --expect {NEW} --expect {INITIAL_CA}");
    assert_eq!(run(&mut h, &verify_both).exit_code, 3, "staged: not yet");

    let issue = run(&mut h, &format!("carotate issue --ca {NEW}"));
    assert_eq!(issue.exit_code, 0, "{}", issue.log);
    assert_eq!(
        steps(&issue),
        [(1, NodeStep::NotReady), (6, NodeStep::Ready)]
    );
    assert_eq!(
        status(&mut h),
        ("issued".into(), s(&[INITIAL_CA, NEW]), NEW.into())
    );
    assert_eq!(
        run(&mut h, &verify_both).exit_code,
        0,
        "issued, both trusted"
    );
    let verify_new = format!("carotate verify --expect {NEW}");
    assert_eq!(run(&mut h, &verify_new).exit_code, 3);
    // Nothing new may be staged, nor the rotation aborted, once it is issued.
    assert_eq!(
        run(&mut h, &format!("carotate stage --add {OTHER}")).exit_code,
        1
    );
    assert_eq!(
        run(&mut h, &format!("carotate abort --remove {NEW}")).exit_code,
        1
    );
    assert_eq!(
        run(&mut h, &format!("carotate finalize --keep {INITIAL_CA}")).exit_code,
        1
    );

    let finalize = run(&mut h, &format!("carotate finalize --keep {NEW}"));
    assert_eq!(
        (finalize.exit_code, finalize.log.as_str()),
        (
            0,
            format!(
                "{{\"phase\": \"issued\", \"trusted\": [\"{INITIAL_CA}\", \"sha256:2222\"], \
                 \"issuer\": \"sha256:2222\"}}\n\
                 stratum: finalized: trusting only sha256:2222; dropped 1 CAs\n\
                 {{\"phase\": \"finalized\", \"trusted\": [\"sha256:2222\"], \"issuer\": \"sha256:2222\"}}\n"
            )
            .as_str()
        )
    );
    assert_eq!(status(&mut h), ("finalized".into(), s(&[NEW]), NEW.into()));
    assert_eq!(run(&mut h, &verify_new).exit_code, 0);
    assert_eq!(
        run(&mut h, &verify_both).exit_code,
        3,
        "the old one is gone"
    );

    // Every step again: each is a no-op that succeeds, so a resumed driver may repeat one.
    for line in [
        format!("carotate stage --add {NEW}"),
        format!("carotate issue --ca {NEW}"),
        format!("carotate finalize --keep {NEW}"),
    ] {
        let e = run(&mut h, &line);
        assert_eq!((e.exit_code, e.effects.len()), (0, 0), "{line}: {}", e.log);
    }
    assert_eq!(status(&mut h).0, "finalized");
    let counts: Vec<(Operation, u32)> = h.state.executions.clone().into_iter().collect();
    assert_eq!(
        counts,
        [
            (Operation::CaStage, 3),
            (Operation::CaIssue, 2),
            (Operation::CaFinalize, 3),
            (Operation::CaAbort, 1),
            (Operation::CaStatus, 5),
            (Operation::CaVerify, 5),
        ]
    );
}

#[test]
fn a_phase_that_exits_0_ends_with_the_status_line_and_a_failed_one_does_not() {
    let status_after = |h: &mut StratumHost| run(h, "carotate status").log;
    // (command line, exit status) in order on one host.
    let table = [
        (format!("carotate issue --ca {NEW}"), 1),
        (format!("carotate stage --add {NEW}"), 0),
        // Again: nothing to do, exit 0, the status all the same.
        (format!("carotate stage --add {NEW}"), 0),
        (format!("carotate abort --remove {NEW}"), 0),
        (format!("carotate stage --add {NEW}"), 0),
        (format!("carotate issue --ca {NEW}"), 0),
        (format!("carotate abort --remove {NEW}"), 1),
        (format!("carotate finalize --keep {INITIAL_CA}"), 1),
        (format!("carotate finalize --keep {NEW}"), 0),
    ];
    let mut h = host();
    for (line, exit_code) in table {
        let e = run(&mut h, &line);
        assert_eq!(e.exit_code, exit_code, "{line}: {}", e.log);
        let status = status_after(&mut h);
        if exit_code == 0 {
            assert!(e.log.ends_with(&status), "{line}: {:?}", e.log);
            assert!(e.log.len() > status.len(), "{line}: its own line first");
        } else {
            assert!(!e.log.contains("\"phase\""), "{line}: {:?}", e.log);
        }
    }
    // Reads and usage errors print no status line after them.
    for line in [
        "health",
        "carotate verify --expect sha256:2222",
        "carotate rotate",
    ] {
        let e = run(&mut h, line);
        assert!(!e.log.contains("\"phase\""), "{line}: {:?}", e.log);
    }
    // Under a garbled status, the line after a phase is the same garbage.
    let mut h = host().with_fault(Fault::GarbledStatus);
    let e = run(&mut h, &format!("carotate stage --add {NEW}"));
    assert!(e.log.ends_with(&status_after(&mut h)), "{:?}", e.log);
    assert!(e.log.contains("<truncated"), "{:?}", e.log);
}

#[test]
fn issue_with_expect_verifies_after_it_and_prints_the_verdict_before_the_status() {
    // (fault, the --expect list) -> verify's exit status
    let table: [(Option<Fault>, Vec<&str>, i32); 4] = [
        (None, vec![NEW, INITIAL_CA], 0),
        (None, vec![NEW], 3),
        (None, vec![NEW, INITIAL_CA, OTHER], 3),
        (Some(Fault::ForeignCa), vec![NEW, INITIAL_CA], 1),
    ];
    for (fault, expect, verdict) in table {
        let mut h = host();
        if let Some(fault) = fault {
            h = h.with_fault(fault);
        }
        run(&mut h, &format!("carotate stage --add {NEW}"));
        let flags: Vec<String> = expect.iter().map(|e| format!("--expect {e}")).collect();
        let e = run(
            &mut h,
            &format!("carotate issue --ca {NEW} {}", flags.join(" ")),
        );
        assert_eq!(e.exit_code, 0, "{expect:?}: {}", e.log);
        let lines: Vec<&str> = e.log.lines().collect();
        // The status before, what issue did, what verify did, the verdict, the status after.
        assert_eq!(lines.len(), 5, "{expect:?}: {lines:?}");
        assert!(lines[0].starts_with("{\"phase\": \"staged\""), "{lines:?}");
        let expect: Vec<String> = expect.iter().map(|e| e.to_string()).collect();
        assert_eq!(lines[3], verdict_line(verdict, &expect));
        let v: serde_json::Value = serde_json::from_str(lines[3]).unwrap();
        assert_eq!(
            (v["verify"].as_i64(), v["expect"][0].as_str()),
            (Some(i64::from(verdict)), Some(NEW))
        );
        // The same answer as `carotate verify` now, and that line above the verdict.
        let verify = run(&mut h, &format!("carotate verify {}", flags.join(" ")));
        assert_eq!(
            (verify.exit_code, lines[2]),
            (verdict, verify.log.trim_end())
        );
        assert_eq!(
            format!("{}\n", lines[4]),
            run(&mut h, "carotate status").log
        );
        // The verify is part of the issue, not an execution of its own.
        assert_eq!(
            h.state.executions(Operation::CaVerify),
            1,
            "the one run here"
        );
        assert_eq!(h.state.executions(Operation::CaIssue), 1);
    }
    // An issue that fails verifies nothing.
    let mut h = host().with_fault(Fault::IssueFails);
    run(&mut h, &format!("carotate stage --add {NEW}"));
    let e = run(&mut h, &format!("carotate issue --ca {NEW} --expect {NEW}"));
    assert_eq!(e.exit_code, 1);
    assert!(!e.log.contains("verify"), "{:?}", e.log);
}

#[test]
fn abort_drops_a_staged_ca_before_issue() {
    let mut h = host();
    run(&mut h, &format!("carotate stage --add {NEW}"));
    run(&mut h, &format!("carotate stage --add {OTHER}"));
    assert_eq!(trusted(&h), [INITIAL_CA, NEW, OTHER]);
    let e = run(&mut h, &format!("carotate abort --remove {NEW}"));
    assert_eq!(e.exit_code, 0, "{}", e.log);
    assert_eq!(h.state.phase, CaPhase::Idle);
    assert!(!h.state.trusted.contains(NEW));
    let e = run(&mut h, &format!("carotate abort --remove {INITIAL_CA}"));
    assert_eq!(e.exit_code, 1, "the issuer cannot be aborted: {}", e.log);
    assert!(h.state.trusted.contains(INITIAL_CA));
}

/// A row of the fault table: the fault, the commands before, the last one's exit, a part of
/// its log, its effects.
type FaultRow<'a> = (Fault, &'a [&'a str], i32, &'a str, Vec<(u64, NodeStep)>);

#[test]
fn faults() {
    let issue = format!("carotate issue --ca {NEW}");
    let stage = format!("carotate stage --add {NEW}");
    let table: [FaultRow<'_>; 8] = [
        (
            Fault::UpgradeFails,
            &[],
            1,
            "upgrade to v1.38.0 failed",
            vec![],
        ),
        (
            Fault::BootsOldVersion,
            &[],
            0,
            "installed",
            vec![
                (5, NodeStep::NotReady),
                (35, boot("v1.37.2")),
                (35, NodeStep::Ready),
            ],
        ),
        (
            Fault::StaysDown,
            &[],
            0,
            "installed",
            vec![(5, NodeStep::NotReady)],
        ),
        (Fault::Unhealthy, &[], 1, "unhealthy", vec![]),
        (
            Fault::IssueFails,
            &[&stage],
            1,
            "failed (injected fault)",
            vec![],
        ),
        (
            Fault::ForeignCa,
            &[&stage, &issue],
            1,
            "leaves chain to sha256:ffff",
            vec![],
        ),
        (
            Fault::DownAfterIssue,
            &[&stage],
            0,
            "restarting",
            vec![(1, NodeStep::NotReady)],
        ),
        (Fault::GarbledStatus, &[], 0, "<truncated", vec![]),
    ];
    for (fault, before, exit_code, part, effects) in table {
        let mut h = host().with_fault(fault);
        for line in before {
            run(&mut h, line);
        }
        let last = match fault {
            Fault::UpgradeFails | Fault::BootsOldVersion | Fault::StaysDown => {
                "upgrade --to v1.38.0".to_string()
            }
            Fault::Unhealthy => "health".into(),
            Fault::IssueFails | Fault::DownAfterIssue => issue.clone(),
            Fault::ForeignCa => format!("carotate verify --expect {NEW} --expect {INITIAL_CA}"),
            _ => "carotate status".into(),
        };
        let before_state = h.state.clone();
        let e = run(&mut h, &last);
        assert_eq!(e.exit_code, exit_code, "{fault:?}: {}", e.log);
        assert!(
            e.log.contains(part),
            "{fault:?}: {part:?} not in {:?}",
            e.log
        );
        assert_eq!(steps(&e), effects, "{fault:?}");
        if exit_code == 1 && fault != Fault::ForeignCa {
            let mut unchanged = before_state.clone();
            unchanged.executions = h.state.executions.clone();
            assert_eq!(h.state, unchanged, "{fault:?}: a failure changes nothing");
        }
    }
    // A garbled status is not JSON.
    let mut h = host().with_fault(Fault::GarbledStatus);
    let log = run(&mut h, "carotate status").log;
    assert!(serde_json::from_str::<serde_json::Value>(log.trim_end()).is_err());
    // The foreign CA shows in the status.
    let mut h = host().with_fault(Fault::ForeignCa);
    run(&mut h, &stage);
    assert_eq!(run(&mut h, &issue).exit_code, 0);
    assert_eq!(h.state.issuer, FOREIGN_CA);
    assert!(run(&mut h, "carotate status").log.contains(FOREIGN_CA));
}

#[test]
fn other_programs_are_not_played() {
    let mut h = host();
    let before = h.clone();
    for line in [
        &["nsenter", "--", "/usr/bin/kubeadm", "upgrade"][..],
        &["sleep", "stratum"],
        &[],
    ] {
        let line: Vec<String> = line.iter().map(|s| s.to_string()).collect();
        assert_eq!(h.exec(&line), None, "{line:?}");
    }
    assert_eq!(h, before, "nothing counted");
    // The directives are left out of stratum's arguments.
    let mut with_sigterm = argv("health");
    with_sigterm.push(crate::directives::ignore_sigterm());
    assert_eq!(h.exec(&with_sigterm).map(|e| e.exit_code), Some(0));
}

#[test]
fn timing_is_the_hosts() {
    let mut h = host();
    h.timing = StratumTiming {
        upgrade_time: secs(7),
        reboot_delay: secs(1),
        reboot_time: secs(2),
        op_time: secs(3),
        restart_delay: secs(4),
        restart_time: secs(5),
    };
    let e = run(&mut h, "upgrade --to v2");
    assert_eq!(e.run, secs(7));
    assert_eq!(
        steps(&e),
        [
            (1, NodeStep::NotReady),
            (3, boot("v2")),
            (3, NodeStep::Ready)
        ]
    );
    run(&mut h, &format!("carotate stage --add {NEW}"));
    let e = run(&mut h, &format!("carotate issue --ca {NEW}"));
    assert_eq!(e.run, secs(3));
    assert_eq!(steps(&e), [(4, NodeStep::NotReady), (9, NodeStep::Ready)]);
}

#[test]
fn status_line_escapes() {
    let mut state = StratumState::new("v1", "b");
    state.trusted.insert("sha256:\"q\"".into());
    let v: serde_json::Value = serde_json::from_str(&state.status_line()).unwrap();
    assert_eq!(v["trusted"][0], "sha256:\"q\"");
    assert_eq!(Operation::CaIssue.to_string(), "carotate issue");
    assert_eq!(CaPhase::Finalized.to_string(), "finalized");
}

#[test]
fn rollback_boots_back_into_the_version_it_ran_before_its_upgrade() {
    let mut h = host();
    run(&mut h, "upgrade --to v1.38.0");
    h.booted("v1.38.0", "boot-1");
    assert_eq!(h.state.previous.as_deref(), Some("v1.37.2"));
    let e = run(&mut h, "rollback --to v1.37.2");
    assert_eq!((e.run, e.exit_code), (secs(1), 0));
    assert_eq!(
        e.log,
        "stratum: rolling back v1.38.0 -> v1.37.2\nstratum: v1.37.2 selected; rebooting in 5s\n"
    );
    assert_eq!(
        steps(&e),
        [
            (5, NodeStep::NotReady),
            (35, boot("v1.37.2")),
            (35, NodeStep::Ready)
        ]
    );
    h.booted("v1.37.2", "boot-2");
    // The deployments swapped: a rollback again would go to v1.38.0.
    assert_eq!(h.state.previous.as_deref(), Some("v1.38.0"));
    assert_eq!(h.state.executions(Operation::Rollback), 1);
}

#[test]
fn rollback_to_the_version_it_runs_reboots_into_it_and_to_another_is_refused() {
    // A failed upgrade changed nothing: rolling back to what it runs is a clean boot of it.
    let mut h = host().with_fault(Fault::UpgradeFails);
    assert_eq!(run(&mut h, "upgrade --to v1.38.0").exit_code, 1);
    let e = run(&mut h, "rollback --to 1.37.2");
    assert_eq!(e.exit_code, 0);
    assert_eq!(steps(&e)[1], (35, boot("v1.37.2")));
    let e = run(&mut h, "rollback --to v1.36.0");
    assert_eq!(e.exit_code, 1);
    assert!(
        e.log
            .contains("no deployment of v1.36.0 to roll back to (running v1.37.2)"),
        "{}",
        e.log
    );
    assert!(e.effects.is_empty());
    let mut failing = host().with_fault(Fault::RollbackFails);
    let e = run(&mut failing, "rollback --to v1.37.2");
    assert_eq!((e.exit_code, e.effects.len()), (1, 0));
    assert!(e.log.contains("injected fault"), "{}", e.log);
    assert_eq!(failing.state.executions(Operation::Rollback), 1);
}
