//! The `nodejob` command as a user runs it: the binary `e2e/run` builds (`NODEJOB_E2E_CLI`),
//! given `--kubeconfig` and `--context` of a kubeconfig file that holds the apiserver's
//! address, its CA and a token of a ServiceAccount ([`sa_kubeconfig`]), and nothing else; what
//! it printed and how it exited ([`Ran`]). Used by `tests/cli.rs` on agent nodes and by
//! `tests/real_node_drivers.rs` on real ones.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::config::Kubeconfig;
use nodejob_conformance::{Failure, ensure};
use serde_json::{Value, json};

use crate::admin::{kubeconfig_path, unique};
use crate::conventions::SA_NAMESPACE;

/// How long one `nodejob` command may run before it is killed and fails: each blocks until its
/// operation is done, and the operations' own bounds (given by the tests) end a stuck one
/// sooner.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(300);
/// The kubeconfig context of [`sa_kubeconfig`]'s file, which the commands name. The file has
/// no current-context, so a command that ignored `--context` would fail rather than pass as
/// someone else.
pub const CONTEXT: &str = "nodejob-e2e-sa";

/// The `nodejob` binary: `NODEJOB_E2E_CLI`, set by `e2e/run`.
pub fn cli() -> Result<PathBuf, Failure> {
    let path = std::env::var_os("NODEJOB_E2E_CLI")
        .map(PathBuf::from)
        .ok_or_else(|| {
            Failure(
                "NODEJOB_E2E_CLI is not set: run the end-to-end suite with e2e/run, which builds \
             the nodejob binary (cargo build -p nodejob-cli) and sets it to its path"
                    .into(),
            )
        })?;
    ensure!(
        path.is_file(),
        "NODEJOB_E2E_CLI={}: no such file; e2e/run builds it",
        path.display()
    );
    Ok(path)
}

/// A kubeconfig file in the system's temporary directory, removed when dropped.
pub struct KubeconfigFile {
    /// Where it is.
    pub path: PathBuf,
}

impl Drop for KubeconfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes a kubeconfig as a user of ServiceAccount `SA_NAMESPACE/sa` would hold one: the
/// admin kubeconfig's apiserver address and CA, and a token of that ServiceAccount from a
/// TokenRequest (an hour), in context [`CONTEXT`]. The ServiceAccount must exist.
pub async fn sa_kubeconfig(admin: &Client, sa: &str) -> Result<KubeconfigFile, Failure> {
    let admin_path = kubeconfig_path();
    let kubeconfig = Kubeconfig::read_from(&admin_path)
        .map_err(|e| Failure(format!("reading {}: {e}", admin_path.display())))?;
    let context = kubeconfig
        .current_context
        .as_deref()
        .and_then(|c| kubeconfig.contexts.iter().find(|n| n.name == c))
        .and_then(|n| n.context.as_ref())
        .ok_or_else(|| Failure(format!("{}: no current context", admin_path.display())))?;
    let cluster = (kubeconfig.clusters.iter())
        .find(|n| n.name == context.cluster)
        .and_then(|n| n.cluster.as_ref())
        .ok_or_else(|| {
            Failure(format!(
                "{}: no cluster {}",
                admin_path.display(),
                context.cluster
            ))
        })?;
    let (Some(server), Some(ca)) = (&cluster.server, &cluster.certificate_authority_data) else {
        return Err(Failure(format!(
            "{}: cluster {} has no server or certificate-authority-data",
            admin_path.display(),
            context.cluster
        )));
    };

    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), SA_NAMESPACE)
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .map_err(|e| Failure(format!("requesting a token of {SA_NAMESPACE}/{sa}: {e}")))?
        .status
        .map(|s| s.token)
        .ok_or_else(|| {
            Failure(format!(
                "the token request of {SA_NAMESPACE}/{sa} has no status"
            ))
        })?;

    let user = format!("{SA_NAMESPACE}-{sa}");
    let file = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "nodejob-e2e",
            "cluster": {"server": server, "certificate-authority-data": ca},
        }],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": "nodejob-e2e", "user": user}}],
    });
    let text = serde_saphyr::to_string(&file)
        .map_err(|e| Failure(format!("writing the kubeconfig as YAML: {e}")))?;
    let path = std::env::temp_dir().join(unique("nodejob-e2e-kubeconfig"));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Failure(format!("writing {}: {e}", path.display())))?;
    Ok(KubeconfigFile { path })
}

/// What one `nodejob` command did.
pub struct Ran {
    /// The command line, for messages.
    pub line: String,
    /// The exit code; `None`: ended by a signal.
    pub code: Option<i32>,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl Ran {
    /// Fails unless it exited with `code`.
    pub fn exited(&self, code: i32) -> Result<&Self, Failure> {
        ensure!(
            self.code == Some(code),
            "`{}` exited {:?}, not {code}\nstdout:\n{}\nstderr:\n{}",
            self.line,
            self.code,
            self.stdout,
            self.stderr
        );
        Ok(self)
    }

    /// The lines of its stdout from the one that starts with `header` (a table's) to the end,
    /// each split on whitespace.
    pub fn table(&self, header: &str) -> Result<Vec<Vec<&str>>, Failure> {
        let lines: Vec<&str> = self.stdout.lines().collect();
        let Some(start) = lines.iter().position(|l| l.starts_with(header)) else {
            return Err(Failure(format!(
                "`{}`: no table headed {header:?} in\n{}",
                self.line, self.stdout
            )));
        };
        Ok(lines[start + 1..]
            .iter()
            .map(|l| l.split_whitespace().collect())
            .collect())
    }

    /// The `items` of the one JSON `List` it printed (`jobs -o json`, as kubectl's lists).
    pub fn json_items(&self) -> Result<Vec<Value>, Failure> {
        let list: Value = serde_json::from_str(&self.stdout)
            .map_err(|e| Failure(format!("`{}`: {e} in {:?}", self.line, self.stdout)))?;
        match list["items"].as_array() {
            Some(items) if list["kind"] == "List" => Ok(items.clone()),
            _ => Err(Failure(format!("`{}`: not a List: {list}", self.line))),
        }
    }

    /// Its stdout as one JSON value a line.
    pub fn json_lines(&self) -> Result<Vec<Value>, Failure> {
        (self.stdout.lines())
            .map(|l| {
                serde_json::from_str(l)
                    .map_err(|e| Failure(format!("`{}`: {e} in line {l:?}", self.line)))
            })
            .collect()
    }
}

/// Runs `nodejob --kubeconfig FILE --context CONTEXT ARGS...` (and nothing from the test's
/// own `KUBECONFIG`) to its end, at most [`COMMAND_LIMIT`].
pub async fn nodejob(kubeconfig: &Path, context: &str, args: &[&str]) -> Result<Ran, Failure> {
    let binary = cli()?;
    let line = format!(
        "nodejob --kubeconfig {} --context {context} {}",
        kubeconfig.display(),
        args.join(" ")
    );
    let started = Instant::now();
    let child = tokio::process::Command::new(&binary)
        .env_remove("KUBECONFIG")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", context])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(COMMAND_LIMIT, child).await {
        Ok(output) => output.map_err(|e| Failure(format!("starting {}: {e}", binary.display())))?,
        Err(_) => {
            return Err(Failure(format!(
                "`{line}` did not end within {COMMAND_LIMIT:?}; killed"
            )));
        }
    };
    let ran = Ran {
        line,
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    eprintln!(
        "cli: `{}`: exit {:?} after {:.1}s\n--- stdout\n{}--- stderr\n{}---",
        ran.line,
        ran.code,
        started.elapsed().as_secs_f64(),
        ran.stdout,
        ran.stderr
    );
    Ok(ran)
}
