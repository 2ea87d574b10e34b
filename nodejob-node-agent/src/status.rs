//! The status the agent writes, rendered as JSON merge patches for the `nodes/status` and
//! `pods/status` subresources. Pure: every timestamp comes in as an argument.
//!
//! A merge patch replaces lists whole, so `conditions`, `addresses` and `containerStatuses`
//! are always written complete (a container's `state.running` cannot survive next to its
//! `state.terminated`, as it would under a strategic merge patch without a `null`); fields the
//! agent does not write (`qosClass`, ...) are kept.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    DaemonEndpoint, HostIP, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus,
    NodeSystemInfo, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

/// What the agent says about one of its nodes.
#[derive(Clone, Debug)]
pub(crate) struct NodeReport<'a> {
    /// The node's name (its `Hostname` address).
    pub(crate) name: &'a str,
    /// Its `InternalIP`, where its log server listens.
    pub(crate) ip: Ipv4Addr,
    /// `daemonEndpoints.kubeletEndpoint.Port`.
    pub(crate) port: u16,
    /// Whether `Ready` is `True`.
    pub(crate) ready: bool,
    /// `nodeInfo.kubeletVersion`: the apiserver's `gitVersion`.
    pub(crate) kubelet_version: &'a str,
    /// When the agent adopted the node: the pressure conditions' `lastTransitionTime`.
    pub(crate) adopted: Time,
    /// Now: `Ready`'s `lastHeartbeatTime` and `lastTransitionTime` (the agent writes only
    /// when `Ready` changes).
    pub(crate) now: Time,
}

/// The message of `Ready` `False`.
pub(crate) const NOT_READY_MESSAGE: &str = "nodejob test: marked NotReady";

fn node_condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    heartbeat: &Time,
    transition: &Time,
) -> NodeCondition {
    NodeCondition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(heartbeat.clone()),
        last_transition_time: Some(transition.clone()),
    }
}

/// `capacity` and `allocatable`: 4 CPUs, 8Gi, 110 pods.
fn resources() -> BTreeMap<String, Quantity> {
    [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .into()
}

/// The node's status, as a kubelet with 4 CPUs, 8Gi and 110 pods posts it.
pub(crate) fn node_status(r: &NodeReport<'_>) -> NodeStatus {
    let (now, adopted) = (&r.now, &r.adopted);
    let (reason, message) = if r.ready {
        ("KubeletReady", "kubelet is posting ready status")
    } else {
        ("KubeletNotReady", NOT_READY_MESSAGE)
    };
    let pressure = |type_: &str, reason: &str, message: &str| {
        node_condition(type_, false, reason, message, now, adopted)
    };
    NodeStatus {
        conditions: Some(vec![
            pressure(
                "MemoryPressure",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            pressure(
                "DiskPressure",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            pressure(
                "PIDPressure",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            node_condition("Ready", r.ready, reason, message, now, now),
        ]),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".to_string(),
                address: r.ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".to_string(),
                address: r.name.to_string(),
            },
        ]),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(r.port),
            }),
        }),
        capacity: Some(resources()),
        allocatable: Some(resources()),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".to_string(),
            operating_system: "linux".to_string(),
            kubelet_version: r.kubelet_version.to_string(),
            kube_proxy_version: String::new(),
            container_runtime_version: format!("nodejob://{}", env!("CARGO_PKG_VERSION")),
            kernel_version: String::new(),
            os_image: "nodejob-node-agent".to_string(),
            machine_id: String::new(),
            system_uuid: String::new(),
            boot_id: String::new(),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// `{"status": …}` for the `nodes/status` merge patch.
pub(crate) fn node_patch(r: &NodeReport<'_>) -> Value {
    json!({ "status": node_status(r) })
}

/// The node's `InternalIP`, if it reports one that parses.
pub(crate) fn internal_ip(status: Option<&NodeStatus>) -> Option<Ipv4Addr> {
    (status
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten())
    .find(|a| a.type_ == "InternalIP")
    .and_then(|a| a.address.parse().ok())
}

/// What the agent knows of a pod it runs.
#[derive(Clone, Debug)]
pub(crate) struct PodFacts {
    /// `metadata.uid`: the container ID is `nodejob://<uid>`.
    pub(crate) uid: String,
    /// The first container's name.
    pub(crate) container: String,
    /// The first container's image (also its `imageID`).
    pub(crate) image: String,
    /// The node's address: `hostIP`, and `podIP` of a `hostNetwork` pod.
    pub(crate) host_ip: Ipv4Addr,
    /// `spec.hostNetwork`.
    pub(crate) host_network: bool,
}

/// How a container ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Exit {
    /// Its exit status.
    pub(crate) exit_code: i32,
    /// `terminated.message`.
    pub(crate) message: Option<String>,
    /// When it started.
    pub(crate) started_at: Time,
    /// When it ended.
    pub(crate) finished_at: Time,
}

fn pod_condition(type_: &str, status: bool, reason: Option<&str>, at: &Time) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        last_transition_time: Some(at.clone()),
        ..PodCondition::default()
    }
}

impl PodFacts {
    fn container_id(&self) -> String {
        format!("nodejob://{}", self.uid)
    }

    fn addresses(&self, status: &mut PodStatus) {
        let ip = self.host_ip.to_string();
        status.host_ip = Some(ip.clone());
        status.host_ips = Some(vec![HostIP { ip: ip.clone() }]);
        if self.host_network {
            status.pod_ip = Some(ip.clone());
            status.pod_ips = Some(vec![PodIP { ip }]);
        }
    }

    fn container_status(&self, running: bool, state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            name: self.container.clone(),
            image: self.image.clone(),
            image_id: self.image.clone(),
            container_id: Some(self.container_id()),
            ready: running,
            started: Some(running),
            restart_count: 0,
            state: Some(state),
            ..ContainerStatus::default()
        }
    }

    /// The container started at `now`: phase `Running`, every condition `True`.
    pub(crate) fn running(&self, now: &Time) -> Value {
        let mut status = PodStatus {
            phase: Some("Running".to_string()),
            start_time: Some(now.clone()),
            conditions: Some(vec![
                pod_condition("PodReadyToStartContainers", true, None, now),
                pod_condition("Initialized", true, None, now),
                pod_condition("Ready", true, None, now),
                pod_condition("ContainersReady", true, None, now),
                pod_condition("PodScheduled", true, None, now),
            ]),
            container_statuses: Some(vec![self.container_status(
                true,
                ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(now.clone()),
                    }),
                    ..ContainerState::default()
                },
            )]),
            ..PodStatus::default()
        };
        self.addresses(&mut status);
        json!({ "status": status })
    }

    /// The container ended: `terminated` with `reason` `Completed` (exit 0) or `Error`, phase
    /// `Succeeded` or `Failed`, `Ready` and `ContainersReady` `False` (`PodCompleted`).
    pub(crate) fn terminated(&self, exit: &Exit, now: &Time) -> Value {
        let (phase, reason) = if exit.exit_code == 0 {
            ("Succeeded", "Completed")
        } else {
            ("Failed", "Error")
        };
        let mut status = PodStatus {
            phase: Some(phase.to_string()),
            start_time: Some(exit.started_at.clone()),
            conditions: Some(vec![
                pod_condition("PodReadyToStartContainers", false, None, now),
                pod_condition("Initialized", true, Some("PodCompleted"), now),
                pod_condition("Ready", false, Some("PodCompleted"), now),
                pod_condition("ContainersReady", false, Some("PodCompleted"), now),
                pod_condition("PodScheduled", true, None, now),
            ]),
            container_statuses: Some(vec![self.container_status(
                false,
                ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: exit.exit_code,
                        reason: Some(reason.to_string()),
                        message: exit.message.clone(),
                        started_at: Some(exit.started_at.clone()),
                        finished_at: Some(exit.finished_at.clone()),
                        container_id: Some(self.container_id()),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                },
            )]),
            ..PodStatus::default()
        };
        self.addresses(&mut status);
        json!({ "status": status })
    }
}

/// A pod deleted before its container started: the kubelet marks it `Failed` (as the fake
/// does) before it confirms the deletion.
pub(crate) fn failed_unstarted(now: &Time) -> Value {
    let status = PodStatus {
        phase: Some("Failed".to_string()),
        conditions: Some(vec![
            pod_condition("PodReadyToStartContainers", false, None, now),
            pod_condition("Initialized", true, None, now),
            pod_condition("Ready", false, Some("PodCompleted"), now),
            pod_condition("ContainersReady", false, Some("PodCompleted"), now),
            pod_condition("PodScheduled", true, None, now),
        ]),
        ..PodStatus::default()
    };
    json!({ "status": status })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(1_767_225_600 + secs).unwrap())
    }

    fn facts(host_network: bool) -> PodFacts {
        PodFacts {
            uid: "u-1".into(),
            container: "host".into(),
            image: "img@sha256:00".into(),
            host_ip: Ipv4Addr::new(127, 0, 0, 2),
            host_network,
        }
    }

    fn node_ready(status: Option<&NodeStatus>) -> bool {
        (status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
    }

    #[test]
    fn node_ready_and_not() {
        let report = NodeReport {
            name: "n1",
            ip: Ipv4Addr::new(127, 0, 0, 3),
            port: 10250,
            ready: true,
            kubelet_version: "v1.37.2",
            adopted: at(0),
            now: at(5),
        };
        let patch = node_patch(&report);
        assert_eq!(
            patch["status"]["addresses"],
            json!([
                {"type": "InternalIP", "address": "127.0.0.3"},
                {"type": "Hostname", "address": "n1"},
            ])
        );
        assert_eq!(
            patch["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 10250}})
        );
        assert_eq!(
            patch["status"]["capacity"],
            json!({"cpu": "4", "memory": "8Gi", "pods": "110"})
        );
        assert_eq!(patch["status"]["allocatable"], patch["status"]["capacity"]);
        let info = &patch["status"]["nodeInfo"];
        assert_eq!(
            (
                &info["kubeletVersion"],
                &info["architecture"],
                &info["operatingSystem"]
            ),
            (&json!("v1.37.2"), &json!("amd64"), &json!("linux"))
        );
        let conditions = patch["status"]["conditions"].as_array().unwrap();
        let summary: Vec<_> = conditions
            .iter()
            .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap()))
            .collect();
        assert_eq!(
            summary,
            [
                ("MemoryPressure", "False"),
                ("DiskPressure", "False"),
                ("PIDPressure", "False"),
                ("Ready", "True"),
            ]
        );
        assert_eq!(conditions[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(conditions[3]["lastTransitionTime"], "2026-01-01T00:00:05Z");
        assert_eq!(conditions[3]["reason"], "KubeletReady");

        let status = node_status(&report);
        assert!(node_ready(Some(&status)));
        assert_eq!(
            internal_ip(Some(&status)),
            Some(Ipv4Addr::new(127, 0, 0, 3))
        );

        let status = node_status(&NodeReport {
            ready: false,
            ..report
        });
        assert!(!node_ready(Some(&status)));
        let ready = status.conditions.unwrap().pop().unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_deref(),
                ready.message.as_deref()
            ),
            ("False", Some("KubeletNotReady"), Some(NOT_READY_MESSAGE))
        );
    }

    #[test]
    fn pod_running() {
        let patch = facts(true).running(&at(1));
        let status = &patch["status"];
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["startTime"], "2026-01-01T00:00:01Z");
        assert_eq!(status["hostIP"], "127.0.0.2");
        assert_eq!(status["hostIPs"], json!([{"ip": "127.0.0.2"}]));
        assert_eq!(status["podIP"], "127.0.0.2");
        assert_eq!(status["podIPs"], json!([{"ip": "127.0.0.2"}]));
        let conditions = status["conditions"].as_array().unwrap();
        assert!(conditions.iter().all(|c| c["status"] == "True"));
        assert_eq!(
            status["containerStatuses"],
            json!([{
                "name": "host",
                "image": "img@sha256:00",
                "imageID": "img@sha256:00",
                "containerID": "nodejob://u-1",
                "started": true,
                "ready": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}},
            }])
        );
        // A pod on the pod network has no podIP from the agent.
        let patch = facts(false).running(&at(1));
        assert!(patch["status"].get("podIP").is_none());
        assert_eq!(patch["status"]["hostIP"], "127.0.0.2");
    }

    #[test]
    fn pod_terminated() {
        let table = [
            (0, None, "Succeeded", "Completed"),
            (3, Some("boom\n"), "Failed", "Error"),
            (143, None, "Failed", "Error"),
        ];
        for (exit_code, message, phase, reason) in table {
            let exit = Exit {
                exit_code,
                message: message.map(str::to_string),
                started_at: at(1),
                finished_at: at(3),
            };
            let patch = facts(true).terminated(&exit, &at(4));
            let status = &patch["status"];
            assert_eq!(status["phase"], phase);
            let mut terminated = json!({
                "exitCode": exit_code,
                "reason": reason,
                "startedAt": "2026-01-01T00:00:01Z",
                "finishedAt": "2026-01-01T00:00:03Z",
                "containerID": "nodejob://u-1",
            });
            if let Some(m) = message {
                terminated["message"] = json!(m);
            }
            let cs = &status["containerStatuses"][0];
            assert_eq!(
                cs["state"],
                json!({ "terminated": terminated }),
                "{exit_code}"
            );
            assert_eq!(
                (&cs["ready"], &cs["started"]),
                (&json!(false), &json!(false))
            );
            let ready: Vec<_> = (status["conditions"].as_array().unwrap().iter())
                .filter(|c| c["type"] == "Ready" || c["type"] == "ContainersReady")
                .map(|c| (c["status"].as_str().unwrap(), c["reason"].as_str().unwrap()))
                .collect();
            assert_eq!(
                ready,
                [("False", "PodCompleted"), ("False", "PodCompleted")]
            );
        }
    }

    #[test]
    fn pod_failed_before_start() {
        let patch = failed_unstarted(&at(2));
        assert_eq!(patch["status"]["phase"], "Failed");
        assert!(patch["status"].get("containerStatuses").is_none());
    }
}
