//! How to run a failed operation again, said the way it was asked for: the command line as it
//! was typed (every flag kept: `--simulate`, `--context`, `-n`, `--binary`...), narrowed to the
//! failed nodes, shell-quoted; for an MCP client, the tool's arguments as it sent them, narrowed
//! the same way.
//!
//! Printing a command rebuilt from a few fields would drop the flags that say *where* it runs: a
//! retry printed without `--simulate` or `--context` acts on the current real cluster.

use std::ffi::OsString;

use serde_json::{Map, Value};

/// The command line a command was run with (`std::env::args_os`), its program first.
#[derive(Clone, Debug)]
pub(crate) struct Invocation {
    argv: Vec<String>,
}

/// The flags that choose the nodes, each with its value: a narrowed retry replaces them.
const LONG_SELECTING: [&str; 2] = ["--nodes", "--selector"];
/// The short flags of the upgrade and the rotation that take a value, the selector's among them.
const SHORT_WITH_VALUE: [char; 3] = ['n', 'o', 'l'];
/// The selector's short flag.
const SHORT_SELECTOR: char = 'l';

impl Invocation {
    /// This process's command line.
    pub(crate) fn current() -> Self {
        Self::of(std::env::args_os())
    }

    /// The command line `argv`, its program first (a word that is not UTF-8 is kept as
    /// lossily read).
    pub(crate) fn of(argv: impl IntoIterator<Item = OsString>) -> Self {
        Invocation {
            argv: argv
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        }
    }

    /// The command as it was run, quoted for a POSIX shell: `nodejob` (or `kubectl nodejob`
    /// when run as the plugin) and every argument.
    pub(crate) fn as_run(&self) -> String {
        self.line(self.args().to_vec())
    }

    /// The command as it was run with `--nodes`, `--selector` and `-l` (and their values)
    /// replaced by `--nodes NODES`, before any `--`: the same operation, on those nodes only.
    pub(crate) fn narrowed_to(&self, nodes: &[String]) -> String {
        let args = self.args();
        let mut kept = Vec::with_capacity(args.len() + 2);
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            if arg == "--" {
                kept.push(arg.clone());
                kept.extend(rest.by_ref().cloned());
                break;
            }
            if LONG_SELECTING.contains(&arg.as_str()) {
                rest.next();
                continue;
            }
            if LONG_SELECTING
                .iter()
                .any(|flag| arg.strip_prefix(flag).is_some_and(|v| v.starts_with('=')))
            {
                continue;
            }
            if let Some(cluster) = short_cluster(arg) {
                match without_selector(cluster) {
                    Short::Kept => kept.push(arg.clone()),
                    Short::Dropped {
                        before,
                        value_follows,
                    } => {
                        if !before.is_empty() {
                            kept.push(format!("-{before}"));
                        }
                        if value_follows {
                            rest.next();
                        }
                    }
                }
                continue;
            }
            kept.push(arg.clone());
        }
        let at = kept.iter().position(|a| a == "--").unwrap_or(kept.len());
        kept.splice(at..at, ["--nodes".to_string(), nodes.join(",")]);
        self.line(kept)
    }

    /// The arguments after the program.
    /// Whether the command ran against the in-memory cluster (`--simulate`, before any `--`):
    /// a rerun then starts on a fresh one, with nothing of this run kept.
    pub(crate) fn simulated(&self) -> bool {
        (self.args().iter())
            .take_while(|a| *a != "--")
            .any(|a| a == "--simulate" || a.starts_with("--simulate="))
    }

    /// What a rerun of this command finds: `kept` (the cluster keeps the run's state, in the
    /// driver's words) on a real cluster; under `--simulate`, a fresh simulated cluster.
    pub(crate) fn rerun_finds(&self, kept: &str) -> String {
        match self.simulated() {
            true => "under --simulate each run starts on a fresh simulated cluster, nothing of \
                     this one kept: a rerun starts afresh"
                .into(),
            false => kept.to_string(),
        }
    }

    fn args(&self) -> &[String] {
        self.argv.get(1..).unwrap_or_default()
    }

    /// The program as a person types it, then `args`, each quoted.
    fn line(&self, args: Vec<String>) -> String {
        let program = match self.argv.first() {
            Some(p) if is_plugin(p) => "kubectl nodejob",
            _ => "nodejob",
        };
        std::iter::once(program.to_string())
            .chain(args.iter().map(|a| quote(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Whether `program` (argv's first word) is the kubectl plugin's name, `kubectl-nodejob`.
fn is_plugin(program: &str) -> bool {
    std::path::Path::new(program)
        .file_name()
        .and_then(|f| f.to_str())
        .is_some_and(|f| f.starts_with("kubectl-nodejob"))
}

/// The flags of `-abc` (`abc`), or `None` for a long flag, a lone `-` or a word.
fn short_cluster(arg: &str) -> Option<&str> {
    let cluster = arg.strip_prefix('-')?;
    (!cluster.is_empty() && !cluster.starts_with('-')).then_some(cluster)
}

/// What narrowing does to a cluster of short flags.
enum Short {
    /// No selector in it: kept whole.
    Kept,
    /// `-l` and its value dropped: the flags before it stay (as `-BEFORE`); the value was the
    /// next word when the cluster ends at the `l`.
    Dropped { before: String, value_follows: bool },
}

/// Reads `cluster` as clap does: flags until one that takes a value, whose value is the rest
/// (after an optional `=`) or, when nothing is left, the next word.
fn without_selector(cluster: &str) -> Short {
    for (i, flag) in cluster.char_indices() {
        if SHORT_WITH_VALUE.contains(&flag) {
            if flag != SHORT_SELECTOR {
                return Short::Kept;
            }
            return Short::Dropped {
                before: cluster[..i].to_string(),
                value_follows: i + flag.len_utf8() == cluster.len(),
            };
        }
    }
    Short::Kept
}

/// `word` as a POSIX shell reads it back: as is when every character is safe, else in single
/// quotes (a `'` inside as `'\''`).
pub(crate) fn quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:,=@%+".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// An MCP tool's `arguments` narrowed to `nodes`: without its `preview_token` (a new preview
/// makes a new one), its `selector` and `nodes` replaced by `nodes`.
pub(crate) fn narrowed_arguments(arguments: &Map<String, Value>, nodes: &[String]) -> Value {
    let mut narrowed = arguments.clone();
    narrowed.remove("preview_token");
    narrowed.remove("selector");
    narrowed.insert(
        "nodes".into(),
        Value::Array(nodes.iter().cloned().map(Value::String).collect()),
    );
    Value::Object(narrowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invocation(args: &[&str]) -> Invocation {
        Invocation::of(args.iter().map(OsString::from))
    }

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_retry_keeps_every_flag_and_replaces_the_selection() {
        let cases: &[(&[&str], &str)] = &[
            (
                &[
                    "nodejob",
                    "upgrade",
                    "--simulate",
                    "5",
                    "--to",
                    "v1.38.0",
                    "-n",
                    "default",
                ],
                "nodejob upgrade --simulate 5 --to v1.38.0 -n default --nodes worker-a-0",
            ),
            (
                &[
                    "/usr/bin/nodejob",
                    "--context",
                    "prod",
                    "upgrade",
                    "--to=v1.38.0",
                    "--nodes",
                    "a,b",
                    "--selector",
                    "zone=x",
                    "--binary",
                    "/opt/stratum",
                ],
                "nodejob --context prod upgrade --to=v1.38.0 --binary /opt/stratum --nodes \
                 worker-a-0",
            ),
            (
                &[
                    "nodejob",
                    "upgrade",
                    "--nodes=a",
                    "--selector=k in (a,b)",
                    "--to",
                    "v2",
                ],
                "nodejob upgrade --to v2 --nodes worker-a-0",
            ),
            (
                &[
                    "nodejob", "upgrade", "-l", "k=v", "-vl", "k=v", "-vlk=v", "-lk", "-vv",
                ],
                "nodejob upgrade -v -v -vv --nodes worker-a-0",
            ),
            (
                &["nodejob", "upgrade", "-ndefault", "-ol", "--to", "v2"],
                "nodejob upgrade -ndefault -ol --to v2 --nodes worker-a-0",
            ),
            (
                &[
                    "nodejob",
                    "upgrade",
                    "--health-check",
                    "--to",
                    "v2",
                    "--",
                    "sh",
                    "-c",
                    "test -f '/x'",
                    "--nodes",
                    "-l",
                ],
                "nodejob upgrade --health-check --to v2 --nodes worker-a-0 -- sh -c \
                 'test -f '\\''/x'\\''' --nodes -l",
            ),
            (
                &[
                    "/home/me/bin/kubectl-nodejob",
                    "upgrade",
                    "--window",
                    "sat 01:00-05:00 UTC",
                    "--kubeconfig",
                    "/tmp/my config",
                ],
                "kubectl nodejob upgrade --window 'sat 01:00-05:00 UTC' --kubeconfig \
                 '/tmp/my config' --nodes worker-a-0",
            ),
        ];
        for (argv, retry) in cases {
            assert_eq!(
                invocation(argv).narrowed_to(&nodes(&["worker-a-0"])),
                *retry,
                "{argv:?}"
            );
        }
    }

    #[test]
    fn a_retry_names_every_failed_node() {
        assert_eq!(
            invocation(&["nodejob", "upgrade", "--to", "v2"]).narrowed_to(&nodes(&["a", "b"])),
            "nodejob upgrade --to v2 --nodes a,b"
        );
    }

    #[test]
    fn the_command_as_run_is_quoted_whole() {
        assert_eq!(
            invocation(&[
                "nodejob",
                "rotate-ca",
                "--new-ca",
                "my ca.pem",
                "--nodes",
                "a",
                ""
            ])
            .as_run(),
            "nodejob rotate-ca --new-ca 'my ca.pem' --nodes a ''"
        );
    }

    #[test]
    fn narrowed_arguments_drop_the_token_and_the_selector() {
        let arguments = serde_json::json!({
            "to": "v1.38.0", "selector": "zone=a", "nodes": ["x"], "preview_token": "t",
            "binary": "/opt/stratum",
        });
        let Value::Object(arguments) = arguments else {
            unreachable!()
        };
        assert_eq!(
            narrowed_arguments(&arguments, &nodes(&["worker-a-0"])),
            serde_json::json!({"to": "v1.38.0", "nodes": ["worker-a-0"], "binary": "/opt/stratum"})
        );
    }
}
