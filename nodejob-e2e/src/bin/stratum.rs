//! `stratum` on a real node of the end-to-end suite: the host program a node Job `nsenter`s
//! and execs (`nsenter --target 1 … -- /usr/local/bin/stratum …`), installed in the node's
//! `/usr/local/bin` by `e2e/node/node prepare`. It runs in the node's mount and PID
//! namespaces (those of the node's PID 1, `e2e/node/init`).
//!
//! Two ways, as the fake's kubelet and the node agent tell them apart ([`nodejob_host::Plan`]):
//! - an argv scripted by `nodejob-test:` directives is played from the same rules
//!   ([`nodejob_host::directives`], [`nodejob_host::Fallback`]): it runs the `run` time,
//!   prints the `log` lines as it exits, and exits with the `exit` status; under
//!   `sigterm=ignore` it traps SIGTERM and goes on until the SIGKILL;
//! - any other argv is a `stratum` command of the host model ([`nodejob_host::stratum`]), the
//!   same code the fake and the node agent run, on a state that lives in the node's directory:
//!   [`STATE_DIR`] (`DIR/host`, bind-mounted there by the node's PID 1) holds the model's
//!   state record ([`StratumState::to_record`]) and its timing; the version is the node's
//!   `/etc/os-release` `VERSION_ID` (its `osImage`), the boot its kernel boot ID. What the
//!   model says follows the exit ([`Effect`]s) is asked of the node's PID 1: a reboot into the
//!   version the upgrade staged (`upgrade --to V`: the node comes back with a new boot ID and
//!   `osImage` V), or a restart of the kubelet (`carotate issue`).
//!
//! Here the process, the signals, the exit status and the log are real: the container runtime,
//! the kubelet and `nsenter` carry them.
//!
//! `carotate` re-keys the node's kubelet for real ([`nodejob_e2e::pki`]): what the model is
//! given as the host's trust and issuer is read from the kubelet's files (its trust bundle,
//! and the CA that issued its client certificate), whatever the record says, and what the
//! model changes is done to them: a CA the model comes to trust (`stage`) joins the bundle, one
//! it drops (`finalize`, `abort`) leaves it, and a new issuer (`issue`) signs the kubelet a
//! client and a serving certificate, the kubelet restarting as the model says. The CA's
//! certificate and key are the host's own, placed out of band in its keyring
//! ([`Keyring`], `/var/lib/stratum/ca`); the driver names it by fingerprint only. A CA the
//! model would trust or issue from that the keyring lacks fails the command (exit 1),
//! nothing changed.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use nodejob_e2e::pki::{self, Keyring, KubeletPki};
use nodejob_host::directives::Directives;
use nodejob_host::stratum::{StratumHost, StratumState};
use nodejob_host::{Effect, Fallback, NodeStep, OnSigterm};

/// The node's `DIR/host` as the node's namespace sees it (`e2e/node/init` bind-mounts it):
/// `state.json` (the model's state record), `timing` (a [`nodejob_host::stratum::StratumTiming`] line, written by
/// `e2e/node/node prepare`), `staged-version` (the version the next boot boots, read by
/// `e2e/node/node boot`), and `lock`.
const STATE_DIR: &str = "/var/lib/stratum";
/// The file in [`STATE_DIR`] naming the kubelet's certificate directory ([`KubeletPki`],
/// `DIR/pki`, written by `e2e/node/node prepare`).
const KUBELET_PKI: &str = "kubelet-pki";
/// The host's keyring in [`STATE_DIR`]: the CAs placed on it out of band ([`Keyring`]).
const KEYRING: &str = "ca";
/// The node's os-release (bind-mounted from `DIR/os-release`): its `VERSION_ID` is the
/// host's version, its `PRETTY_NAME` (the same) the Node's `osImage`.
const OS_RELEASE: &str = "/etc/os-release";
/// The node's boot ID (bind-mounted from `DIR/boot_id`, new at each boot).
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
/// Where a request to the node's PID 1 is written before it is sent SIGUSR2: `reboot DELAY`
/// or `restart DELAY DOWNTIME` (seconds), read by `e2e/node/init`.
const REQUEST: &str = "/run/stratum/request";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let directives = Directives::parse(&argv);
    if directives.scripts_process() {
        return scripted(&directives).await;
    }
    match model(&argv).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stratum: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// An argv scripted by `nodejob-test:` directives, played as the fake and the agent do.
async fn scripted(directives: &Directives) -> ExitCode {
    // Trapped from the start, as the model's program ignores SIGTERM for its whole run.
    let _trap = match directives.on_sigterm {
        Some(OnSigterm::Ignore) => Some(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("trapping SIGTERM"),
        ),
        _ => None,
    };
    let execution = Fallback::default().execution(directives);
    tokio::time::sleep(execution.run).await;
    print(&execution.log);
    exit_code(execution.exit_code)
}

/// A `stratum` command played by the host model on the node's state.
async fn model(argv: &[String]) -> Result<ExitCode, String> {
    let dir = Path::new(STATE_DIR);
    let lock_path = dir.join("lock");
    let lock = std::fs::File::create(&lock_path).map_err(at(&lock_path))?;
    // One command at a time changes the state: another Job's stratum waits here.
    lock.lock().map_err(at(&lock_path))?;
    let mut host = StratumHost::new(version()?, read(Path::new(BOOT_ID))?.trim());
    let state_path = dir.join("state.json");
    if state_path.exists() {
        let record = read(&state_path)?;
        let kept = StratumState::from_record(&record)
            .map_err(|e| format!("{}: {e}", state_path.display()))?;
        // The version and the boot are the node's own, whatever the record says.
        host.state = StratumState {
            version: host.state.version,
            boot_id: host.state.boot_id,
            ..kept
        };
    }
    let timing_path = dir.join("timing");
    if timing_path.exists() {
        host.timing = read(&timing_path)?
            .trim()
            .parse()
            .map_err(|e| format!("{}: {e}", timing_path.display()))?;
    }
    // The trust and the issuer are the kubelet's own, whatever the record says.
    let kubelet = KubeletPki::at(read(&dir.join(KUBELET_PKI))?.trim());
    let keyring = Keyring::at(dir.join(KEYRING));
    let trusted = kubelet.trusted()?;
    host.state.trusted = trusted.iter().map(|d| pki::fingerprint(d)).collect();
    let known: Vec<Vec<u8>> = trusted
        .iter()
        .cloned()
        .chain(keyring.certificates()?)
        .collect();
    host.state.issuer =
        pki::issuer_of(&kubelet.client()?, &known)?.unwrap_or_else(|| "unknown".to_string());
    let before = host.state.clone();
    let Some(mut execution) = host.exec(argv) else {
        return Err(format!("{argv:?} does not exec stratum"));
    };
    if let Err(e) = rekey(&before, &host.state, &kubelet, &keyring, &trusted) {
        // Nothing changed but the count of executions.
        host.state = StratumState {
            executions: host.state.executions.clone(),
            ..before
        };
        write(&state_path, &host.state.to_record())?;
        println!("stratum: error: {e}");
        return Ok(ExitCode::from(1));
    }
    // The model changed the state as the process started: kept before it runs on.
    write(&state_path, &host.state.to_record())?;
    drop(lock);
    if execution.exit_code == 0 && before.issuer != host.state.issuer {
        execution.log = format!(
            "stratum: the kubelet's client and serving certificates now from {}\n{}",
            host.state.issuer, execution.log
        );
    }
    tokio::time::sleep(execution.run).await;
    print(&execution.log);
    if !execution.effects.is_empty() {
        aftermath(dir, &execution.effects)?;
    }
    Ok(exit_code(execution.exit_code))
}

/// Does to the kubelet's files what the model did to the host's trust and issuer, from
/// `before` to `after`: the bundle becomes the CAs `after` trusts (each from the bundle or the
/// keyring), and a new issuer signs the kubelet's certificates. Checks every CA it needs first,
/// so a missing one changes nothing.
fn rekey(
    before: &StratumState,
    after: &StratumState,
    kubelet: &KubeletPki,
    keyring: &Keyring,
    trusted: &[Vec<u8>],
) -> Result<(), String> {
    let issuer = if after.issuer == before.issuer {
        None
    } else {
        let ca = keyring.ca(&after.issuer)?.ok_or_else(|| {
            format!(
                "no CA {} (certificate and key) in this host's keyring",
                after.issuer
            )
        })?;
        Some(ca)
    };
    let bundle = if after.trusted == before.trusted {
        None
    } else {
        let mut cas = Vec::new();
        for fp in &after.trusted {
            let kept = trusted.iter().find(|d| pki::fingerprint(d) == *fp).cloned();
            let der = match kept {
                Some(der) => der,
                None => keyring
                    .certificate(fp)?
                    .ok_or_else(|| format!("no CA {fp} in this host's keyring"))?,
            };
            cas.push(der);
        }
        Some(cas)
    };
    if let Some(cas) = bundle {
        kubelet.set_trusted(&cas)?;
    }
    if let Some(ca) = issuer {
        kubelet.issue(&ca)?;
    }
    Ok(())
}

/// Asks the node's PID 1 for what the model says follows the exit: a reboot (into the
/// version a [`NodeStep::Boot`] names, staged for `e2e/node/node boot`) when the node goes
/// down and boots again, else a restart of the kubelet when it goes down and comes back.
fn aftermath(dir: &Path, effects: &[Effect]) -> Result<(), String> {
    let at = |step: fn(&NodeStep) -> bool| effects.iter().find(|e| step(&e.step));
    let down = at(|s| *s == NodeStep::NotReady).map(|e| e.after);
    let back = at(|s| *s == NodeStep::Ready).map(|e| e.after);
    let boot = effects.iter().find_map(|e| match &e.step {
        NodeStep::Boot { kubelet_version } => Some(kubelet_version.clone()),
        _ => None,
    });
    let seconds = |d: Duration| format!("{:.3}", d.as_secs_f64());
    let request = match (down, boot, back) {
        (Some(down), Some(version), Some(_)) => {
            write(&dir.join("staged-version"), &version)?;
            format!("reboot {}", seconds(down))
        }
        (Some(down), None, Some(back)) => {
            format!("restart {} {}", seconds(down), seconds(back - down))
        }
        _ => return Err(format!("a real node does not play {effects:?}")),
    };
    write(Path::new(REQUEST), &format!("{request}\n"))?;
    // The node's PID 1 (a trap of e2e/node/init) reads the request.
    let signalled = std::process::Command::new("kill")
        .args(["-USR2", "1"])
        .status()
        .map_err(|e| format!("kill -USR2 1: {e}"))?;
    if !signalled.success() {
        return Err(format!("kill -USR2 1: {signalled}"));
    }
    Ok(())
}

/// The node's version: `VERSION_ID` of its os-release.
fn version() -> Result<String, String> {
    let text = read(Path::new(OS_RELEASE))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_ID="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .ok_or_else(|| format!("{OS_RELEASE}: no VERSION_ID"))
}

/// An I/O error on `path`, said with it.
fn at(path: &Path) -> impl FnOnce(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes `text` to `path` whole or not at all (a new file renamed over it).
fn write(path: &Path, text: &str) -> Result<(), String> {
    let new = path.with_extension("new");
    std::fs::write(&new, text)
        .and_then(|()| std::fs::rename(&new, path))
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn print(log: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout (the container gone) does not change the exit status.
    let _ = out.write_all(log.as_bytes());
    let _ = out.flush();
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code.rem_euclid(256)).unwrap_or(u8::MAX))
}
