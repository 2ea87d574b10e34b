//! A node's host as the node agent plays it: where its kubelet listens, its boot, and what its
//! `stratum` model reports ran there.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Node;
use kube::{Client, Config};
use nodejob_conformance::Failure;
use nodejob_core::NodeApi;
use nodejob_kube::KubeApi;

/// The address the apiserver dials for a Node's kubelet: its InternalIP and kubelet port.
pub(crate) fn kubelet_address(node: &Node) -> Option<SocketAddr> {
    let status = node.status.as_ref()?;
    let ip = status
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")?;
    let port = status
        .daemon_endpoints
        .as_ref()?
        .kubelet_endpoint
        .as_ref()?
        .port;
    Some(SocketAddr::new(
        ip.address.parse().ok()?,
        u16::try_from(port).ok()?,
    ))
}

/// A node's host as the node agent's `stratum` model reports it (`GET /stratum` on the node's
/// kubelet address), or a real node's `stratum` keeps it (`ThreeNodes::host`): what ran
/// there, independently of what any driver says.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct HostReport {
    /// The version the host runs: the agent's kubelet's, a real node's `osImage`.
    pub version: String,
    /// Its boot.
    #[serde(rename = "bootID")]
    pub boot_id: String,
    /// Whether it is up (not rebooting).
    pub up: bool,
    /// How many times each `stratum` operation ran on it, by command (`upgrade`, `carotate
    /// status`, ...).
    pub executions: std::collections::BTreeMap<String, u32>,
}

impl HostReport {
    /// How many times `command` (`"upgrade"`, `"carotate issue"`, ...) ran on the host.
    pub fn executions(&self, command: &str) -> u32 {
        self.executions.get(command).copied().unwrap_or(0)
    }
}

/// What node `node`'s host model reports: `GET /stratum` at the address the apiserver dials
/// for its kubelet (its InternalIP and kubelet port, read as an administrator), over TLS
/// without verifying the agent's self-signed certificate, as the apiserver does. Not through
/// the apiserver's node proxy: it refuses loopback addresses ("address not allowed"), which
/// the agent's nodes have.
pub async fn host_report(admin: &Client, node: &str) -> Result<HostReport, Failure> {
    let asking = |e: &dyn std::fmt::Display| Failure(format!("asking node {node}'s host: {e}"));
    let read = KubeApi::new(admin.clone()).get_node(node).await?;
    let address = kubelet_address(&read)
        .ok_or_else(|| Failure(format!("node {node} has no InternalIP or kubelet port")))?;
    let url: http::Uri = format!("https://{address}")
        .parse()
        .map_err(|e| asking(&e))?;
    let mut config = Config::new(url);
    config.accept_invalid_certs = true;
    let kubelet = Client::try_from(config).map_err(|e| asking(&e))?;
    let request = http::Request::get("/stratum")
        .body(Vec::new())
        .map_err(|e| asking(&e))?;
    let text = kubelet
        .request_text(request)
        .await
        .map_err(|e| asking(&e))?;
    serde_json::from_str(&text)
        .map_err(|e| Failure(format!("node {node}'s host answered {text:?}: {e}")))
}

/// The `bootID` a Node reports.
pub fn boot_id(node: &Node) -> &str {
    (node.status.as_ref())
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.as_str())
        .unwrap_or_default()
}
