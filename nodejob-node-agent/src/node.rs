//! The node worker: one task per adopted node. It posts the node's status (Ready or not, as
//! its annotations ask and its host allows: NotReady while the host is down) with what
//! kube-scheduler needs to place pods there (capacity, allocatable, `nodeInfo` with the host's
//! kubelet version and boot ID), keeps the node's condition taints as the node lifecycle
//! controller would, tells the node's pod workers whether the node is Ready and what its
//! containers do on SIGTERM, and runs the node's log server while its kubelet is to be
//! reachable.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nodejob_host::OnSigterm;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use crate::apiserver::Apiserver;
use crate::heartbeat::{Jitter, StatusSchedule};
use crate::host::NodeHost;
use crate::lease::{self, LeaseKeeper, NodeRef};
use crate::logbook::LogBook;
use crate::logserver::{Identity, LogServer};
use crate::node_state::NodeState;
use crate::status::{
    HOST_DOWN_MESSAGE, NOT_READY_MESSAGE, NodeReport, Reported, condition_taints, node_patch,
};
use crate::task::Task;
use crate::writer::WriteError;

/// `"false"`: the node is NotReady; absent or `"true"`: Ready.
pub(crate) const READY_ANNOTATION: &str = "nodejob.test/ready";
/// `"unreachable"`: the node's kubelet accepts no connection; absent: it listens.
pub(crate) const KUBELET_ANNOTATION: &str = "nodejob.test/kubelet";
/// `"ignore"`: the containers that start on the node from now on ignore SIGTERM (they run
/// until the SIGKILL at the end of their pod's grace period, exit 137) unless their argv says
/// otherwise; absent: they end by it (exit 143). The fake's `NodeScript::on_sigterm`.
pub(crate) const SIGTERM_ANNOTATION: &str = "nodejob.test/sigterm";
/// How long a failed status write or listen waits before its next try.
const RETRY: Duration = Duration::from_secs(1);

/// What the harness asks of a node, through its annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Wish {
    /// Ready (`nodejob.test/ready` not `"false"`).
    pub(crate) ready: bool,
    /// The log server listens (`nodejob.test/kubelet` not `"unreachable"`).
    pub(crate) reachable: bool,
    /// What a container started now does on SIGTERM (`nodejob.test/sigterm`).
    pub(crate) on_sigterm: OnSigterm,
}

/// What the node worker last posted: `Ready`, `kubeletVersion`, `bootID`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Posted {
    ready: bool,
    kubelet_version: String,
    boot_id: String,
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
            on_sigterm: match annotation(SIGTERM_ANNOTATION) {
                Some("ignore") => OnSigterm::Ignore,
                _ => OnSigterm::Exit,
            },
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
    /// The node as last seen; the sender is dropped when the node is gone.
    pub(crate) node: watch::Receiver<Node>,
    /// The node's host: whether it is up, the kubelet version it runs, its boot.
    pub(crate) host: watch::Receiver<NodeHost>,
    /// The node's state, for its pod workers.
    pub(crate) state: watch::Sender<NodeState>,
}

impl NodeWorker {
    /// Runs until the node is gone, then says NotReady to its pods and stops listening.
    ///
    /// The node's status is posted at once when what the agent makes it report changes (the
    /// host goes down or comes back, an annotation asks), and otherwise as the kubelet's
    /// status loop does ([`StatusSchedule`]): computed every 10 s while the host is up,
    /// patched when the node as last read reports otherwise (another writer's change) or,
    /// unchanged, every 5 minutes with new heartbeat times. Its Lease is kept by a task of its
    /// own ([`lease::keep`]), ended with the worker.
    pub(crate) async fn run(mut self) {
        let name = self.name.clone();
        let identity = match Identity::self_signed(&name, IpAddr::V4(self.ip)) {
            Ok(identity) => identity,
            Err(e) => {
                say!("node {name}: no certificate, no log server: {e:#}");
                return;
            }
        };
        let uid = (self.node.borrow().metadata.uid.clone()).unwrap_or_default();
        let keeper = LeaseKeeper::new(
            self.api.clone(),
            NodeRef {
                name: name.clone(),
                uid,
            },
        );
        let lease = tokio::spawn(lease::keep(
            keeper,
            self.host.clone(),
            Jitter::random(&name),
        ));
        // Ends with the worker.
        let _lease = Task(lease);
        let adopted = Time(Timestamp::now());
        let mut jitter = Jitter::random(&name);
        let mut schedule = StatusSchedule::new(Instant::now());
        let mut posted: Option<Posted> = None;
        // `Ready`'s `lastTransitionTime` as posted.
        let mut ready_since = adopted.clone();
        let mut server: Option<LogServer> = None;
        loop {
            let mut node = self.node.borrow_and_update().clone();
            let wish = Wish::of(&node);
            let (up, state) = {
                let host = self.host.borrow_and_update();
                (host.up, host.model.state.clone())
            };
            let ready = wish.ready && up;
            let now_posting = Posted {
                ready,
                kubelet_version: state.version,
                boot_id: state.boot_id,
            };
            let now = Instant::now();
            // What the agent reports changed: posted at once.
            let ours = posted.as_ref() != Some(&now_posting);
            // The kubelet's sync, while it runs (its host up).
            let sync = up && schedule.sync_due(now);
            let since = match &posted {
                Some(p) if p.ready == ready => ready_since.clone(),
                _ => Time(Timestamp::now()),
            };
            let report = NodeReport {
                name: &name,
                ip: self.ip,
                port: self.port,
                ready,
                not_ready_message: if up {
                    NOT_READY_MESSAGE
                } else {
                    HOST_DOWN_MESSAGE
                },
                kubelet_version: &now_posting.kubelet_version,
                boot_id: &now_posting.boot_id,
                adopted: adopted.clone(),
                ready_since: since.clone(),
                now: Time(Timestamp::now()),
            };
            // Another writer's change to what the node reports, seen on the node as read.
            let theirs = sync
                && Reported::of_status(node.status.as_ref()) != Some(Reported::of_report(&report));
            let heartbeat = sync && schedule.should_report(now, theirs);
            if sync {
                schedule.synced(now, &mut jitter);
            }
            let mut retry = false;
            if ours || heartbeat {
                let shown = if ready { "Ready" } else { "NotReady" };
                match self
                    .api
                    .patch_node_status(&name, &node_patch(&report))
                    .await
                {
                    Ok(updated) => {
                        if ours || theirs {
                            say!(
                                "node {name}: status {shown} (InternalIP {}, port {}, kubelet {}, boot {})",
                                self.ip,
                                self.port,
                                now_posting.kubelet_version,
                                now_posting.boot_id,
                            );
                        }
                        schedule.reported(Instant::now(), ours || theirs, &mut jitter);
                        posted = Some(now_posting);
                        ready_since = since;
                        // Its resourceVersion is the one the taints' write must name.
                        node = updated;
                    }
                    Err(WriteError::Gone) => break,
                    Err(WriteError::Refused(e) | WriteError::Failed(e)) => {
                        say!("node {name}: posting status {shown}: {e}");
                        retry = true;
                    }
                }
            }
            let ready_posted = posted.as_ref().is_some_and(|p| p.ready == ready);
            if ready_posted && !self.set_taints(&node, ready).await {
                retry = true;
            }
            let state = NodeState {
                ready,
                on_sigterm: wish.on_sigterm,
            };
            self.state
                .send_if_modified(|s| std::mem::replace(s, state) != state);
            match (wish.reachable, server.take()) {
                (true, None) => {
                    let addr = SocketAddr::new(IpAddr::V4(self.ip), self.port);
                    let (logs, host) = (self.logs.clone(), self.host.clone());
                    match LogServer::bind(addr, &name, logs, host, &identity).await {
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
                // The agent keeps every host's sender: this one does not end.
                Ok(()) = self.host.changed() => {}
                () = tokio::time::sleep(RETRY), if retry => {}
                () = sleep_until(schedule.next_sync()), if up => {}
            }
        }
        self.state.send_modify(|s| s.ready = false);
        if let Some(s) = server {
            s.close().await;
        }
        say!("node {name}: released");
    }

    /// Gives `node` the condition taints its readiness calls for, where it does not have them
    /// yet (a write conditional on its `resourceVersion`): the node lifecycle controller's part, which
    /// this control plane does not run. A node is created with `node.kubernetes.io/not-ready`
    /// (the TaintNodesByCondition admission plugin); it goes once the node is Ready, and comes
    /// back while it is not, so kube-scheduler and the DaemonSet controller place pods only on
    /// Ready nodes. `false` when the write is to be tried again (it failed, or the node
    /// changed since it was read).
    async fn set_taints(&self, node: &Node, ready: bool) -> bool {
        let taints: &[Taint] = (node.spec.as_ref())
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        let Some(wanted) = condition_taints(taints, ready) else {
            return true;
        };
        let version = node
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default();
        let name = &self.name;
        let listed: Vec<&str> = wanted.iter().map(|t| t.key.as_str()).collect();
        match self.api.patch_node_taints(name, version, &wanted).await {
            Ok(true) => {
                say!("node {name}: taints now {listed:?}");
                true
            }
            // Read before a write of ours or another's: the watch brings the node as it is now.
            Ok(false) => false,
            // The node is gone: the watch says so next.
            Err(WriteError::Gone) => true,
            Err(WriteError::Refused(e) | WriteError::Failed(e)) => {
                say!("node {name}: setting taints {listed:?}: {e}");
                false
            }
        }
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
        let wish = |ready, reachable| Wish {
            ready,
            reachable,
            on_sigterm: OnSigterm::Exit,
        };
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
        assert_eq!(
            Wish::of(&node(&[(SIGTERM_ANNOTATION, "ignore")])).on_sigterm,
            OnSigterm::Ignore
        );
        assert_eq!(
            Wish::of(&node(&[(SIGTERM_ANNOTATION, "exit")])).on_sigterm,
            OnSigterm::Exit
        );
    }
}
