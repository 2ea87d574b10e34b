//! The command line.

use std::path::PathBuf;

/// The usage text.
pub(crate) const USAGE: &str = "\
usage: nodejob-node-agent [--kubeconfig PATH] [--port PORT] [--kubelet-version VERSION]

Plays the kubelet of every Node labelled nodejob.test/agent=true (end-to-end tests only).

  --kubeconfig PATH          the cluster to talk to (default: KUBECONFIG, then ~/.kube/config)
  --port PORT                the log server's port on every node address (default 10250)
  --kubelet-version VERSION  the nodes' nodeInfo.kubeletVersion until a stratum upgrade
                             (default: the apiserver's version, e.g. v1.37.2)";

/// What the agent was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Args {
    /// `--kubeconfig`; `None`: as kubectl finds one.
    pub(crate) kubeconfig: Option<PathBuf>,
    /// `--port`.
    pub(crate) port: u16,
    /// `--kubelet-version`; `None`: the apiserver's.
    pub(crate) kubelet_version: Option<String>,
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
    };
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
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Command::Run(parsed))
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
            }))
        );
        let want = Command::Run(Args {
            kubeconfig: Some("/tmp/k".into()),
            port: 4321,
            kubelet_version: None,
        });
        assert_eq!(
            parse_str(&["--kubeconfig", "/tmp/k", "--port", "4321"]),
            Ok(want)
        );
        let want = Command::Run(Args {
            kubeconfig: Some("/tmp/k".into()),
            port: 4321,
            kubelet_version: Some("v1.36.0".into()),
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
}
