//! The command line.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::register::Registration;

/// The most nodes `--register` takes: loopback addresses and ports stay plentiful below it.
const MAX_REGISTER: usize = 65_000;

/// The usage text.
pub(crate) const USAGE: &str = "\
usage: nodejob-node-agent [--kubeconfig PATH] [--port PORT] [--kubelet-version VERSION]
                          [--register N [--node-name-prefix PREFIX] [--node-labels K=V,...]
                           [--zones ZONE,...]]

Plays the kubelet of every Node labelled nodejob.test/agent=true (end-to-end tests only): its
status, its Lease in kube-node-lease (renewed every 10 s), its pods.

  --kubeconfig PATH          the cluster to talk to (default: KUBECONFIG, then ~/.kube/config)
  --port PORT                the log server's port on every node address (default 10250)
  --kubelet-version VERSION  the nodes' nodeInfo.kubeletVersion until a stratum upgrade
                             (default: the apiserver's version, e.g. v1.37.2)
  --register N               also register N Nodes of its own, PREFIX-0000 to PREFIX-<N-1>, as
                             N kubelets would (a Node of that name that exists is taken over),
                             and play them (at most 65,000)
  --node-name-prefix PREFIX  their names' prefix (default hollow)
  --node-labels K=V,...      labels of the Nodes it registers (the kubelet's --node-labels)
  --zones ZONE,...           the zone label (topology.kubernetes.io/zone) of the Nodes it
                             registers, round robin";

/// What the agent was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Args {
    /// `--kubeconfig`; `None`: as kubectl finds one.
    pub(crate) kubeconfig: Option<PathBuf>,
    /// `--port`.
    pub(crate) port: u16,
    /// `--kubelet-version`; `None`: the apiserver's.
    pub(crate) kubelet_version: Option<String>,
    /// `--register` and its companions; `None`: it registers nothing.
    pub(crate) register: Option<Registration>,
}

/// The command line, read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// Run the agent.
    Run(Args),
    /// `--help`.
    Help,
}

/// Reads the arguments after the program name: `--flag VALUE` or `--flag=VALUE`.
pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut parsed = Args {
        kubeconfig: None,
        port: 10250,
        kubelet_version: None,
        register: None,
    };
    let mut count: Option<usize> = None;
    let mut prefix: Option<String> = None;
    let mut labels: Option<BTreeMap<String, String>> = None;
    let mut zones: Option<Vec<String>> = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
            None => (arg, None),
        };
        if flag == "--help" || flag == "-h" {
            return Ok(Command::Help);
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--kubeconfig" => parsed.kubeconfig = Some(PathBuf::from(value()?)),
            "--port" => {
                let v = value()?;
                parsed.port = v
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("--port {v}: not a port number (1 to 65535)"))?;
            }
            "--kubelet-version" => {
                let v = value()?;
                if !v.starts_with('v') {
                    return Err(format!("--kubelet-version {v}: not a version like v1.37.2"));
                }
                parsed.kubelet_version = Some(v);
            }
            "--register" => {
                let v = value()?;
                count = Some(
                    v.parse()
                        .ok()
                        .filter(|n| (1..=MAX_REGISTER).contains(n))
                        .ok_or_else(|| {
                            format!("--register {v}: not a count of nodes (1 to {MAX_REGISTER})")
                        })?,
                );
            }
            "--node-name-prefix" => {
                let v = value()?;
                if !dns_label(&v) || v.len() > 50 {
                    return Err(format!(
                        "--node-name-prefix {v:?}: not a name prefix (lowercase letters, digits \
                         and '-', starting and ending with a letter or digit, at most 50)"
                    ));
                }
                prefix = Some(v);
            }
            "--node-labels" => labels = Some(node_labels(&value()?)?),
            "--zones" => {
                let v = value()?;
                let list: Vec<String> = v.split(',').map(str::to_string).collect();
                if list.iter().any(|z| z.is_empty()) {
                    return Err(format!("--zones {v:?}: an empty zone"));
                }
                zones = Some(list);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    match count {
        Some(count) => {
            parsed.register = Some(Registration {
                count,
                prefix: prefix.unwrap_or_else(|| "hollow".to_string()),
                labels: labels.unwrap_or_default(),
                zones: zones.unwrap_or_default(),
            });
        }
        None if prefix.is_some() || labels.is_some() || zones.is_some() => {
            return Err(
                "--node-name-prefix, --node-labels and --zones go with --register N".to_string(),
            );
        }
        None => {}
    }
    Ok(Command::Run(parsed))
}

/// A DNS-1123 label's characters: lowercase letters, digits and `-`, a letter or digit at
/// each end.
fn dns_label(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.chars().all(|c| ok(c) || c == '-')
        && s.chars().next().is_some_and(ok)
        && s.chars().last().is_some_and(ok)
}

/// `--node-labels`: `K=V` pairs, comma-separated (the kubelet's form).
fn node_labels(v: &str) -> Result<BTreeMap<String, String>, String> {
    v.split(',')
        .map(|pair| match pair.split_once('=') {
            Some((k, value)) if !k.is_empty() => Ok((k.to_string(), value.to_string())),
            _ => Err(format!("--node-labels {v:?}: {pair:?} is not KEY=VALUE")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Command, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn reads_flags() {
        assert_eq!(
            parse_str(&[]),
            Ok(Command::Run(Args {
                kubeconfig: None,
                port: 10250,
                kubelet_version: None,
                register: None,
            }))
        );
        let want = Command::Run(Args {
            kubeconfig: Some("/tmp/k".into()),
            port: 4321,
            kubelet_version: None,
            register: None,
        });
        assert_eq!(
            parse_str(&["--kubeconfig", "/tmp/k", "--port", "4321"]),
            Ok(want)
        );
        let want = Command::Run(Args {
            kubeconfig: Some("/tmp/k".into()),
            port: 4321,
            kubelet_version: Some("v1.36.0".into()),
            register: None,
        });
        assert_eq!(
            parse_str(&[
                "--port=4321",
                "--kubeconfig=/tmp/k",
                "--kubelet-version=v1.36.0"
            ]),
            Ok(want)
        );
        assert!(parse_str(&["--kubelet-version", "1.36"]).is_err());
        assert_eq!(parse_str(&["--port", "1", "--help"]), Ok(Command::Help));
        assert!(parse_str(&["--port"]).is_err());
        assert!(parse_str(&["--port", "0"]).is_err());
        assert!(parse_str(&["--port", "70000"]).is_err());
        assert!(parse_str(&["--node", "x"]).is_err());
    }

    fn registration(args: &[&str]) -> Result<Option<Registration>, String> {
        match parse_str(args)? {
            Command::Run(a) => Ok(a.register),
            Command::Help => Err("help".into()),
        }
    }

    #[test]
    fn reads_a_registration() {
        assert_eq!(
            registration(&["--register", "500"]),
            Ok(Some(Registration {
                count: 500,
                prefix: "hollow".into(),
                labels: BTreeMap::new(),
                zones: Vec::new(),
            }))
        );
        assert_eq!(
            registration(&[
                "--register=3",
                "--node-name-prefix",
                "h2",
                "--node-labels",
                "role=worker,tier=",
                "--zones=zone-a,zone-b"
            ]),
            Ok(Some(Registration {
                count: 3,
                prefix: "h2".into(),
                labels: BTreeMap::from([
                    ("role".to_string(), "worker".to_string()),
                    ("tier".to_string(), String::new()),
                ]),
                zones: vec!["zone-a".into(), "zone-b".into()],
            }))
        );
        for bad in [
            &["--register", "0"][..],
            &["--register", "65001"],
            &["--register", "x"],
            &["--register", "3", "--node-name-prefix", "Hollow"],
            &["--register", "3", "--node-name-prefix", "h-"],
            &["--register", "3", "--node-labels", "role"],
            &["--register", "3", "--node-labels", "=x"],
            &["--register", "3", "--zones", "a,,b"],
            &["--zones", "a"],
            &["--node-labels", "a=b"],
        ] {
            assert!(registration(bad).is_err(), "{bad:?}");
        }
    }
}
