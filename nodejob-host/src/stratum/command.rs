//! Reading a `stratum` command line: which program an argv execs, and the command it asks of
//! `stratum`.

use crate::directives::PREFIX;

use super::Operation;

/// The one-line usage of `stratum`, as it prints it after a usage error.
pub const USAGE: &str = "usage: stratum upgrade --to VERSION | stratum rollback --to VERSION | \
    stratum health | stratum carotate \
    {stage --add|issue --ca|finalize --keep|abort --remove} sha256:FINGERPRINT | stratum \
    carotate issue --ca sha256:FINGERPRINT --expect sha256:FINGERPRINT... | stratum \
    carotate status | stratum carotate verify --expect sha256:FINGERPRINT...";

/// What an argv asks of `stratum`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// `upgrade --to VERSION`.
    Upgrade { to: String },
    /// `health`.
    Health,
    /// `rollback --to VERSION`.
    Rollback { to: String },
    /// `carotate stage --add FP`.
    Stage { add: String },
    /// `carotate issue --ca FP [--expect FP]...`: with `--expect`, verified after as
    /// [`Command::Verify`] with the same `expect`.
    Issue { ca: String, expect: Vec<String> },
    /// `carotate finalize --keep FP`.
    Finalize { keep: String },
    /// `carotate abort --remove FP`.
    Abort { remove: String },
    /// `carotate status`.
    Status,
    /// `carotate verify --expect FP [--expect FP]...`: the first names the CA the leaves must
    /// chain to, all of them the exact trusted set.
    Verify { expect: Vec<String> },
    /// Anything else: a usage error, and why.
    Usage { error: String },
}

impl Command {
    /// The operation it is counted as.
    pub(crate) fn operation(&self) -> Operation {
        match self {
            Command::Upgrade { .. } => Operation::Upgrade,
            Command::Health => Operation::Health,
            Command::Rollback { .. } => Operation::Rollback,
            Command::Stage { .. } => Operation::CaStage,
            Command::Issue { .. } => Operation::CaIssue,
            Command::Finalize { .. } => Operation::CaFinalize,
            Command::Abort { .. } => Operation::CaAbort,
            Command::Status => Operation::CaStatus,
            Command::Verify { .. } => Operation::CaVerify,
            Command::Usage { .. } => Operation::Usage,
        }
    }

    /// Reads the arguments after the program name (directives already left out).
    pub(crate) fn parse(args: &[&str]) -> Command {
        let usage = |error: String| Command::Usage { error };
        let one = |flag: &str, rest: &[&str], fingerprint: bool| -> Result<String, String> {
            let mut values = values(flag, rest, fingerprint)?;
            match (values.pop(), values.is_empty()) {
                (Some(v), true) => Ok(v),
                (None, _) => Err(format!("{flag} is required")),
                (Some(_), false) => Err(format!("{flag} given more than once")),
            }
        };
        let parsed = match args {
            ["upgrade", rest @ ..] => one("--to", rest, false).map(|to| Command::Upgrade { to }),
            ["health"] => Ok(Command::Health),
            ["rollback", rest @ ..] => one("--to", rest, false).map(|to| Command::Rollback { to }),
            ["carotate", "stage", rest @ ..] => {
                one("--add", rest, true).map(|add| Command::Stage { add })
            }
            ["carotate", "issue", rest @ ..] => {
                // `--expect` apart from the rest, each read as its own flag.
                let (expect, ca): (Vec<_>, Vec<_>) =
                    pairs(rest).partition(|(flag, _)| flag.starts_with("--expect"));
                one("--ca", &words(ca), true).and_then(|ca| {
                    let expect = values("--expect", &words(expect), true)?;
                    Ok(Command::Issue { ca, expect })
                })
            }
            ["carotate", "finalize", rest @ ..] => {
                one("--keep", rest, true).map(|keep| Command::Finalize { keep })
            }
            ["carotate", "abort", rest @ ..] => {
                one("--remove", rest, true).map(|remove| Command::Abort { remove })
            }
            ["carotate", "status"] => Ok(Command::Status),
            ["carotate", "verify", rest @ ..] => match values("--expect", rest, true) {
                Ok(expect) if expect.is_empty() => Err("--expect is required".to_string()),
                Ok(expect) => Ok(Command::Verify { expect }),
                Err(e) => Err(e),
            },
            [] => Err("no command".to_string()),
            ["health", extra, ..] => Err(format!("health: unexpected argument {extra:?}")),
            ["carotate"] => Err("carotate: no subcommand".to_string()),
            ["carotate", "status", extra, ..] => {
                Err(format!("carotate status: unexpected argument {extra:?}"))
            }
            ["carotate", sub, ..] => Err(format!("carotate: unknown subcommand {sub:?}")),
            [command, ..] => Err(format!("unknown command {command:?}")),
        };
        parsed.unwrap_or_else(usage)
    }
}

/// The words of `pairs` again, in order.
fn words<'a>(pairs: Vec<(&'a str, Option<&'a str>)>) -> Vec<&'a str> {
    (pairs.into_iter())
        .flat_map(|(flag, value)| std::iter::once(flag).chain(value))
        .collect()
}

/// `args` as flags each with the value that follows it, if it is one (`--ca X` is one pair,
/// `--ca=X` one pair with no value after), in order, so they can be told apart by flag before
/// [`values`] reads each kind.
fn pairs<'a>(args: &[&'a str]) -> impl Iterator<Item = (&'a str, Option<&'a str>)> {
    let mut i = 0;
    std::iter::from_fn(move || {
        let flag = *args.get(i)?;
        i += 1;
        let value = (!flag.contains('='))
            .then(|| args.get(i).copied())
            .flatten()
            .filter(|v| !v.starts_with("--"));
        if value.is_some() {
            i += 1;
        }
        Some((flag, value))
    })
}

/// The values of every `flag VALUE` / `flag=VALUE` in `args`, which must hold nothing else;
/// `fingerprint`: each value must be `sha256:` and something.
fn values(flag: &str, args: &[&str], fingerprint: bool) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix(flag) {
            Some("") => args.next().copied(),
            Some(inline) => match inline.strip_prefix('=') {
                Some(value) => Some(value),
                None => return Err(format!("unexpected argument {arg:?}")),
            },
            None => return Err(format!("unexpected argument {arg:?}")),
        };
        let value = value.filter(|v| !v.is_empty() && !v.starts_with("--"));
        let Some(value) = value else {
            return Err(format!("{flag} needs a value"));
        };
        if fingerprint && value.strip_prefix("sha256:").is_none_or(str::is_empty) {
            return Err(format!("{flag} {value}: not a fingerprint like sha256:…"));
        }
        found.push(value.to_string());
    }
    Ok(found)
}

/// The arguments `argv` passes to `stratum`, without `nodejob-test:` directives; `None` when
/// its program is not `stratum`. The program is the element after the first `--` (`nsenter
/// … -- /usr/local/bin/stratum …`), or the first element when there is no `--`; it is
/// `stratum` when its file name is.
pub(crate) fn stratum_args(argv: &[String]) -> Option<Vec<&str>> {
    let argv: Vec<&str> = (argv.iter().map(String::as_str))
        .filter(|a| !a.starts_with(PREFIX))
        .collect();
    let program_at = argv.iter().position(|a| *a == "--").map_or(0, |i| i + 1);
    let program = argv.get(program_at)?;
    let name = program.rsplit('/').next().unwrap_or_default();
    (name == "stratum").then(|| argv[program_at + 1..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(argv: &[&str]) -> Vec<String> {
        argv.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finds_stratum_after_the_double_dash() {
        let table: [(&[&str], Option<&[&str]>); 8] = [
            (
                &[
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
                ],
                Some(&["upgrade", "--to", "v1.38.0"]),
            ),
            (&["stratum", "health"], Some(&["health"])),
            (&["stratum"], Some(&[])),
            (
                &[
                    "nsenter",
                    "-t",
                    "1",
                    "--",
                    "stratum",
                    "nodejob-test:sigterm=ignore",
                ],
                Some(&[]),
            ),
            (
                &["nsenter", "-t", "1", "--", "/bin/stratumx", "health"],
                None,
            ),
            (&["nsenter", "-t", "1", "stratum", "health"], None),
            (&["nsenter", "--"], None),
            (&[], None),
        ];
        for (argv, want) in table {
            assert_eq!(
                stratum_args(&strings(argv)),
                want.map(<[&str]>::to_vec),
                "{argv:?}"
            );
        }
    }

    #[test]
    fn parses_commands() {
        let fp = "sha256:ab";
        let table: [(&[&str], Command); 14] = [
            (
                &["upgrade", "--to", "v1.38.0"],
                Command::Upgrade {
                    to: "v1.38.0".into(),
                },
            ),
            (
                &["upgrade", "--to=1.38"],
                Command::Upgrade { to: "1.38".into() },
            ),
            (&["health"], Command::Health),
            (
                &["rollback", "--to", "v1.37.2"],
                Command::Rollback {
                    to: "v1.37.2".into(),
                },
            ),
            (
                &["carotate", "stage", "--add", fp],
                Command::Stage { add: fp.into() },
            ),
            (
                &["carotate", "issue", "--ca", fp],
                Command::Issue {
                    ca: fp.into(),
                    expect: vec![],
                },
            ),
            (
                &[
                    "carotate",
                    "issue",
                    "--expect",
                    fp,
                    "--ca=sha256:cd",
                    "--expect=sha256:ef",
                ],
                Command::Issue {
                    ca: "sha256:cd".into(),
                    expect: vec![fp.into(), "sha256:ef".into()],
                },
            ),
            (
                &["carotate", "finalize", "--keep", fp],
                Command::Finalize { keep: fp.into() },
            ),
            (
                &["carotate", "abort", "--remove", fp],
                Command::Abort { remove: fp.into() },
            ),
            (&["carotate", "status"], Command::Status),
            (
                &["carotate", "verify", "--expect", fp, "--expect=sha256:cd"],
                Command::Verify {
                    expect: vec![fp.into(), "sha256:cd".into()],
                },
            ),
            (
                &["conformance"],
                Command::Usage {
                    error: "unknown command \"conformance\"".into(),
                },
            ),
            (
                &["upgrade"],
                Command::Usage {
                    error: "--to is required".into(),
                },
            ),
            (
                &[],
                Command::Usage {
                    error: "no command".into(),
                },
            ),
        ];
        for (args, want) in table {
            assert_eq!(Command::parse(args), want, "{args:?}");
        }
    }

    #[test]
    fn usage_errors() {
        let table: [&[&str]; 16] = [
            &["upgrade", "--to"],
            &["upgrade", "--to", "--to", "v1"],
            &["upgrade", "--to", "v1", "--to", "v2"],
            &["upgrade", "--too=v1"],
            &["upgrade", "v1"],
            &["health", "now"],
            &["carotate"],
            &["carotate", "rotate"],
            &["carotate", "stage", "--add", "md5:ab"],
            &["carotate", "issue", "--ca", "sha256:"],
            &["carotate", "issue", "--ca", "sha256:ab", "--expect"],
            &["carotate", "issue", "--expect", "sha256:ab"],
            &[
                "carotate",
                "issue",
                "--ca",
                "sha256:ab",
                "--expect",
                "md5:ab",
            ],
            &[
                "carotate",
                "issue",
                "--ca",
                "sha256:ab",
                "--ca",
                "sha256:cd",
            ],
            &["carotate", "verify"],
            &["carotate", "status", "--json"],
        ];
        for args in table {
            let command = Command::parse(args);
            assert!(
                matches!(command, Command::Usage { .. }),
                "{args:?}: {command:?}"
            );
            assert_eq!(command.operation(), Operation::Usage);
        }
    }
}
