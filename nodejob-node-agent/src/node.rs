//! The node worker: one task per adopted node. It posts the node's status (Ready or not, as
//! its annotations ask), tells the node's pod workers whether the node is Ready, and runs the
//! node's log server while its kubelet is to be reachable.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;

use crate::apiserver::Apiserver;
use crate::logbook::LogBook;
use crate::logserver::{Identity, LogServer};
use crate::pod::WriteError;
use crate::status::{NodeReport, node_patch};

/// `"false"`: the node is NotReady; absent or `"true"`: Ready.
pub(crate) const READY_ANNOTATION: &str = "nodejob.test/ready";
/// `"unreachable"`: the node's kubelet accepts no connection; absent: it listens.
pub(crate) const KUBELET_ANNOTATION: &str = "nodejob.test/kubelet";
/// How long a failed status write or listen waits before its next try.
const RETRY: Duration = Duration::from_secs(1);

/// What the harness asks of a node, through its annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Wish {
    /// Ready (`nodejob.test/ready` not `"false"`).
    pub(crate) ready: bool,
    /// The log server listens (`nodejob.test/kubelet` not `"unreachable"`).
    pub(crate) reachable: bool,
}

impl Wish {
    pub(crate) fn of(node: &Node) -> Wish {
        let annotation = |key: &str| {
            (node.metadata.annotations.as_ref())
                .and_then(|a| a.get(key))
                .map(String::as_str)
        };
        Wish {
            ready: annotation(READY_ANNOTATION) != Some("false"),
            reachable: annotation(KUBELET_ANNOTATION) != Some("unreachable"),
        }
    }
}

/// What a node worker works with.
pub(crate) struct NodeWorker {
    pub(crate) api: Apiserver,
    pub(crate) logs: LogBook,
    pub(crate) name: String,
    pub(crate) ip: Ipv4Addr,
    pub(crate) port: u16,
    pub(crate) kubelet_version: String,
    /// The node as last seen; the sender is dropped when the node is gone.
    pub(crate) node: watch::Receiver<Node>,
    /// Whether the node is Ready, for its pod workers.
    pub(crate) ready: watch::Sender<bool>,
}

impl NodeWorker {
    /// Runs until the node is gone, then says NotReady to its pods and stops listening.
    pub(crate) async fn run(mut self) {
        let name = self.name.clone();
        let identity = match Identity::self_signed(&name, IpAddr::V4(self.ip)) {
            Ok(identity) => identity,
            Err(e) => {
                say!("node {name}: no certificate, no log server: {e:#}");
                return;
            }
        };
        let adopted = Time(Timestamp::now());
        let mut posted: Option<bool> = None;
        let mut server: Option<LogServer> = None;
        loop {
            let wish = Wish::of(&self.node.borrow_and_update());
            let mut retry = false;
            if posted != Some(wish.ready) {
                let report = NodeReport {
                    name: &name,
                    ip: self.ip,
                    port: self.port,
                    ready: wish.ready,
                    kubelet_version: &self.kubelet_version,
                    adopted: adopted.clone(),
                    now: Time(Timestamp::now()),
                };
                let ready = if wish.ready { "Ready" } else { "NotReady" };
                match self
                    .api
                    .patch_node_status(&name, &node_patch(&report))
                    .await
                {
                    Ok(()) => {
                        say!(
                            "node {name}: status {ready} (InternalIP {}, port {})",
                            self.ip,
                            self.port
                        );
                        posted = Some(wish.ready);
                    }
                    Err(WriteError::Gone) => break,
                    Err(WriteError::Refused(e) | WriteError::Failed(e)) => {
                        say!("node {name}: posting status {ready}: {e}");
                        retry = true;
                    }
                }
            }
            self.ready
                .send_if_modified(|r| std::mem::replace(r, wish.ready) != wish.ready);
            match (wish.reachable, server.take()) {
                (true, None) => {
                    let addr = SocketAddr::new(IpAddr::V4(self.ip), self.port);
                    match LogServer::bind(addr, &name, self.logs.clone(), &identity).await {
                        Ok(s) => {
                            say!("node {name}: log server listening on https://{addr}");
                            server = Some(s);
                        }
                        Err(e) => {
                            say!("node {name}: {e:#}");
                            retry = true;
                        }
                    }
                }
                (false, Some(s)) => {
                    let addr = s.local_addr();
                    s.close().await;
                    say!("node {name}: log server on {addr} closed (kubelet unreachable)");
                }
                (_, kept) => server = kept,
            }
            tokio::select! {
                changed = self.node.changed() => if changed.is_err() { break },
                () = tokio::time::sleep(RETRY), if retry => {}
            }
        }
        self.ready.send_replace(false);
        if let Some(s) = server {
            s.close().await;
        }
        say!("node {name}: released");
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn wishes_from_annotations() {
        let node = |pairs: &[(&str, &str)]| Node {
            metadata: ObjectMeta {
                annotations: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        let wish = |ready, reachable| Wish { ready, reachable };
        assert_eq!(Wish::of(&Node::default()), wish(true, true));
        assert_eq!(
            Wish::of(&node(&[(READY_ANNOTATION, "true")])),
            wish(true, true)
        );
        assert_eq!(
            Wish::of(&node(&[(READY_ANNOTATION, "false")])),
            wish(false, true)
        );
        assert_eq!(
            Wish::of(&node(&[(KUBELET_ANNOTATION, "unreachable")])),
            wish(true, false)
        );
        assert_eq!(
            Wish::of(&node(&[
                (READY_ANNOTATION, "false"),
                (KUBELET_ANNOTATION, "unreachable")
            ])),
            wish(false, false)
        );
        assert_eq!(
            Wish::of(&node(&[(KUBELET_ANNOTATION, "reachable")])),
            wish(true, true)
        );
    }
}
