//! The status the agent writes, rendered as JSON merge patches for the `nodes/status` and
//! `pods/status` subresources. Pure: every timestamp comes in as an argument.
//!
//! A merge patch replaces lists whole, so `conditions`, `addresses` and `containerStatuses`
//! are always written complete (a container's `state.running` cannot survive next to its
//! `state.terminated`, as it would under a strategic merge patch without a `null`); fields the
//! agent does not write (`qosClass`, ...) are kept, and so are the pod conditions other
//! components own (`DisruptionTarget`, a scheduler's `PodScheduled`: [`keep_conditions`]).
//! The pieces themselves (container states, phases, kubelet conditions, the node's `Ready`)
//! are the fake kubelet's, from [`nodejob_host::status`].

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStatus, DaemonEndpoint, HostIP, NodeAddress, NodeCondition,
    NodeDaemonEndpoints, NodeStatus, NodeSystemInfo, PodCondition, PodIP, PodStatus, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodejob_host::status::{
    Ended, lost_in_reboot, node_ready_condition, pod_condition, running_conditions, running_state,
    terminated_conditions, terminated_phase, terminated_state,
};
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
    /// The message of `Ready` when it is `False`: why.
    pub(crate) not_ready_message: &'a str,
    /// `nodeInfo.kubeletVersion`: the host's (`--kubelet-version`, else the apiserver's
    /// `gitVersion`, until a `stratum upgrade`).
    pub(crate) kubelet_version: &'a str,
    /// `nodeInfo.bootID`: new with every adoption and every boot of the host.
    pub(crate) boot_id: &'a str,
    /// When the agent adopted the node: the pressure conditions' `lastTransitionTime`.
    pub(crate) adopted: Time,
    /// Since when `Ready` has had the status it has: its `lastTransitionTime`.
    pub(crate) ready_since: Time,
    /// Now: every condition's `lastHeartbeatTime`.
    pub(crate) now: Time,
}

/// What a status says of a node that the agent decides, heartbeat times aside: whether the
/// kubelet's sync finds it changed (`nodeStatusHasChanged` compares the whole status but the
/// heartbeat times; the agent compares what it writes that a reader acts on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reported {
    /// `Ready`'s status is `True`.
    pub(crate) ready: bool,
    /// `Ready`'s message.
    pub(crate) message: String,
    /// `nodeInfo.kubeletVersion`.
    pub(crate) kubelet_version: String,
    /// `nodeInfo.bootID`.
    pub(crate) boot_id: String,
    /// The `InternalIP`.
    pub(crate) ip: Option<Ipv4Addr>,
    /// `daemonEndpoints.kubeletEndpoint.Port`.
    pub(crate) port: Option<i32>,
}

impl Reported {
    /// What `r` reports.
    pub(crate) fn of_report(r: &NodeReport<'_>) -> Reported {
        Reported {
            ready: r.ready,
            message: ready_message(r).to_string(),
            kubelet_version: r.kubelet_version.to_string(),
            boot_id: r.boot_id.to_string(),
            ip: Some(r.ip),
            port: Some(i32::from(r.port)),
        }
    }

    /// What `status` (a node's, as read) reports; `None` without a `Ready` condition.
    pub(crate) fn of_status(status: Option<&NodeStatus>) -> Option<Reported> {
        let s = status?;
        let ready = (s.conditions.as_ref()?.iter()).find(|c| c.type_ == "Ready")?;
        let info = s.node_info.as_ref();
        Some(Reported {
            ready: ready.status == "True",
            message: ready.message.clone().unwrap_or_default(),
            kubelet_version: info.map(|i| i.kubelet_version.clone()).unwrap_or_default(),
            boot_id: info.map(|i| i.boot_id.clone()).unwrap_or_default(),
            ip: internal_ip(status),
            port: (s.daemon_endpoints.as_ref())
                .and_then(|d| d.kubelet_endpoint.as_ref())
                .map(|e| e.port),
        })
    }
}

/// `Ready`'s message in `r`.
fn ready_message<'a>(r: &NodeReport<'a>) -> &'a str {
    if r.ready {
        nodejob_host::status::READY_MESSAGE
    } else {
        r.not_ready_message
    }
}

/// The message of `Ready` `False` when the harness asks for it.
pub(crate) const NOT_READY_MESSAGE: &str = "nodejob test: marked NotReady";
/// The message of `Ready` `False` while the node's host is down (a reboot, a restart).
pub(crate) const HOST_DOWN_MESSAGE: &str = "nodejob test: host down (stratum)";

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
            NodeCondition {
                last_transition_time: Some(r.ready_since.clone()),
                ..node_ready_condition(r.ready, r.not_ready_message, now)
            },
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
            boot_id: r.boot_id.to_string(),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// `{"status": …}` for the `nodes/status` strategic-merge patch: the kubelet's own conditions,
/// merged into the node's by type (any other condition kept).
pub(crate) fn node_patch(r: &NodeReport<'_>) -> Value {
    json!({ "status": node_status(r) })
}

/// The taint of a node whose `Ready` is `False` (`v1.TaintNodeNotReady`).
pub(crate) const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// The taint of a node whose `Ready` is `Unknown` (`v1.TaintNodeUnreachable`).
pub(crate) const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// The taints a node should have, given `taints` and whether it is Ready; `None` when it has
/// them. The node lifecycle controller's `NoSchedule` pass (`doNoScheduleTaintingPass` in
/// `pkg/controller/nodelifecycle`): `not-ready:NoSchedule` while `Ready` is `False`, neither
/// that nor `unreachable:NoSchedule` while it is `True`; every other taint (the `NoExecute`
/// ones, the harness's own) is left as it is.
pub(crate) fn condition_taints(taints: &[Taint], ready: bool) -> Option<Vec<Taint>> {
    let condition = |t: &&Taint| {
        t.effect == "NoSchedule" && (t.key == NOT_READY_TAINT || t.key == UNREACHABLE_TAINT)
    };
    let have: Vec<&str> = taints
        .iter()
        .filter(condition)
        .map(|t| t.key.as_str())
        .collect();
    let want: &[&str] = if ready { &[] } else { &[NOT_READY_TAINT] };
    if have == want {
        return None;
    }
    let mut taints: Vec<Taint> = taints.iter().filter(|t| !condition(t)).cloned().collect();
    taints.extend(want.iter().map(|key| Taint {
        key: (*key).to_string(),
        effect: "NoSchedule".to_string(),
        ..Taint::default()
    }));
    Some(taints)
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
            conditions: Some(running_conditions(now)),
            container_statuses: Some(vec![self.container_status(true, running_state(now))]),
            ..PodStatus::default()
        };
        self.addresses(&mut status);
        json!({ "status": status })
    }

    /// The container ended: `terminated` with `reason` `Completed` (exit 0) or `Error`, phase
    /// `Succeeded` or `Failed`, `Ready` and `ContainersReady` `False` (`PodCompleted`).
    pub(crate) fn terminated(&self, exit: &Exit, now: &Time) -> Value {
        let ended = terminated_state(Ended {
            exit_code: exit.exit_code,
            message: exit.message.clone(),
            started_at: Some(exit.started_at.clone()),
            finished_at: exit.finished_at.clone(),
            container_id: Some(self.container_id()),
        });
        let phase = terminated_phase(exit.exit_code);
        self.ended(phase, &exit.started_at, ended, now)
    }

    /// The container, started at `started_at`, was lost when its node booted again (found gone
    /// at `finished_at`, [`ends_in_reboot`](nodejob_host::status::ends_in_reboot)): phase
    /// `Failed`, `terminated` as [`lost_in_reboot`] (exit 255, reason `Unknown`, no message),
    /// the conditions of any ended pod.
    pub(crate) fn lost(&self, started_at: &Time, finished_at: &Time, now: &Time) -> Value {
        let lost = lost_in_reboot(
            Some(started_at.clone()),
            finished_at.clone(),
            Some(self.container_id()),
        );
        self.ended("Failed", started_at, lost, now)
    }

    /// A pod whose container, started at `started_at`, ended in `state`, in `phase`.
    fn ended(&self, phase: &str, started_at: &Time, state: ContainerState, now: &Time) -> Value {
        let mut status = PodStatus {
            phase: Some(phase.to_string()),
            start_time: Some(started_at.clone()),
            conditions: Some(terminated_conditions(now)),
            container_statuses: Some(vec![self.container_status(false, state)]),
            ..PodStatus::default()
        };
        self.addresses(&mut status);
        json!({ "status": status })
    }
}

/// The pod condition types the kubelet owns (`PodConditionsByKubelet` in
/// `pkg/kubelet/types/pod_status.go`, with `PodReadyToStartContainers`); the agent writes all of
/// them but keeps any other a pod has.
const KUBELET_CONDITIONS: [&str; 4] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
];

/// `patch` (a `pods/status` merge patch from [`PodFacts`] or [`failed_unstarted`]) with its
/// `conditions` merged into those the pod has, as the kubelet's status manager merges them
/// (`mergePodStatus`): the conditions of other components (the eviction's
/// `DisruptionTarget`, the scheduler's `PodScheduled`) are kept, since a merge patch replaces
/// the list whole; a condition whose status does not change keeps its `lastTransitionTime`.
pub(crate) fn keep_conditions(mut patch: Value, seen: Option<&PodStatus>) -> Value {
    let seen: &[PodCondition] = seen
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let Some(ours) = patch.pointer_mut("/status/conditions") else {
        return patch;
    };
    let Ok(mut conditions) = serde_json::from_value::<Vec<PodCondition>>(ours.take()) else {
        return patch;
    };
    for c in &mut conditions {
        let before = seen.iter().find(|s| s.type_ == c.type_);
        match before {
            // Someone else's (PodScheduled from the scheduler): theirs, untouched.
            Some(s) if !KUBELET_CONDITIONS.contains(&c.type_.as_str()) => *c = s.clone(),
            Some(s) if s.status == c.status => {
                c.last_transition_time.clone_from(&s.last_transition_time);
            }
            _ => {}
        }
    }
    let written: Vec<String> = conditions.iter().map(|c| c.type_.clone()).collect();
    conditions.extend(seen.iter().filter(|s| !written.contains(&s.type_)).cloned());
    *ours = json!(conditions);
    patch
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
            not_ready_message: NOT_READY_MESSAGE,
            kubelet_version: "v1.37.2",
            boot_id: "b-1",
            adopted: at(0),
            ready_since: at(5),
            now: at(7),
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
        assert_eq!(info["bootID"], "b-1");
        assert!(patch["spec"].is_null(), "a status patch touches no taint");
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
        assert!(
            conditions
                .iter()
                .all(|c| c["lastHeartbeatTime"] == "2026-01-01T00:00:07Z")
        );
        assert_eq!(conditions[3]["reason"], "KubeletReady");

        let status = node_status(&report);
        assert!(node_ready(Some(&status)));
        assert_eq!(
            internal_ip(Some(&status)),
            Some(Ipv4Addr::new(127, 0, 0, 3))
        );

        let not_ready = NodeReport {
            ready: false,
            ..report.clone()
        };
        let status = node_status(&not_ready);
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

    /// What the node worker compares at each sync: what it would report against what the
    /// node it read reports, read back the way it was written.
    #[test]
    fn what_a_status_reports_reads_back_and_ignores_heartbeats() {
        let report = NodeReport {
            name: "n1",
            ip: Ipv4Addr::new(127, 0, 0, 3),
            port: 10250,
            ready: true,
            not_ready_message: NOT_READY_MESSAGE,
            kubelet_version: "v1.37.2",
            boot_id: "b-1",
            adopted: at(0),
            ready_since: at(5),
            now: at(7),
        };
        let read_back = |r: &NodeReport<'_>| {
            let status: NodeStatus =
                serde_json::from_value(node_patch(r)["status"].clone()).unwrap();
            Reported::of_status(Some(&status))
        };
        let reported = Reported::of_report(&report);
        assert_eq!(read_back(&report), Some(reported.clone()));
        assert_eq!(reported.message, nodejob_host::status::READY_MESSAGE);
        // A later heartbeat reports the same.
        let later = NodeReport {
            now: at(300),
            ..report.clone()
        };
        assert_eq!(read_back(&later), Some(reported.clone()));
        // What differs is seen: readiness and its message, the boot, the address.
        let down = NodeReport {
            ready: false,
            not_ready_message: HOST_DOWN_MESSAGE,
            ..report.clone()
        };
        assert_eq!(read_back(&down).unwrap().message, HOST_DOWN_MESSAGE);
        assert_ne!(read_back(&down), Some(reported.clone()));
        let booted = NodeReport {
            boot_id: "b-2",
            ..report.clone()
        };
        assert_ne!(read_back(&booted), Some(reported.clone()));
        let moved = NodeReport {
            ip: Ipv4Addr::new(127, 0, 0, 4),
            ..report
        };
        assert_ne!(read_back(&moved), Some(reported));
        assert_eq!(Reported::of_status(None), None);
        assert_eq!(Reported::of_status(Some(&NodeStatus::default())), None);
    }

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Taint::default()
        }
    }

    #[test]
    fn condition_taints_follow_readiness() {
        let not_ready = taint(NOT_READY_TAINT, "NoSchedule");
        let unreachable = taint(UNREACHABLE_TAINT, "NoSchedule");
        let evicting = taint(NOT_READY_TAINT, "NoExecute");
        let theirs = taint("example.com/dedicated", "NoSchedule");
        let table = [
            // (taints, ready) -> wanted (None: as they are)
            (vec![not_ready.clone()], true, Some(vec![])),
            (vec![], true, None),
            (
                vec![theirs.clone(), not_ready.clone(), unreachable.clone()],
                true,
                Some(vec![theirs.clone()]),
            ),
            (vec![evicting.clone()], true, None),
            (vec![], false, Some(vec![not_ready.clone()])),
            (vec![not_ready.clone(), theirs.clone()], false, None),
            (
                vec![unreachable.clone(), theirs.clone()],
                false,
                Some(vec![theirs.clone(), not_ready.clone()]),
            ),
        ];
        for (taints, ready, want) in table {
            assert_eq!(
                condition_taints(&taints, ready),
                want,
                "{taints:?} ready={ready}"
            );
        }
    }

    #[test]
    fn foreign_conditions_and_unchanged_transitions_are_kept() {
        let seen = PodStatus {
            conditions: Some(vec![
                pod_condition("PodScheduled", true, None, &at(0)),
                pod_condition("Ready", true, None, &at(1)),
                pod_condition("Initialized", true, None, &at(1)),
                pod_condition(
                    "DisruptionTarget",
                    true,
                    Some("EvictionByEvictionAPI"),
                    &at(2),
                ),
            ]),
            ..PodStatus::default()
        };
        let exit = Exit {
            exit_code: 143,
            message: None,
            started_at: at(1),
            finished_at: at(3),
        };
        let patch = keep_conditions(facts(false).terminated(&exit, &at(4)), Some(&seen));
        let summary: Vec<_> = (patch["status"]["conditions"].as_array().unwrap().iter())
            .map(|c| {
                (
                    c["type"].as_str().unwrap(),
                    c["status"].as_str().unwrap(),
                    c["lastTransitionTime"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("PodReadyToStartContainers", "False", "2026-01-01T00:00:04Z"),
                ("Initialized", "True", "2026-01-01T00:00:01Z"),
                ("Ready", "False", "2026-01-01T00:00:04Z"),
                ("ContainersReady", "False", "2026-01-01T00:00:04Z"),
                ("PodScheduled", "True", "2026-01-01T00:00:00Z"),
                ("DisruptionTarget", "True", "2026-01-01T00:00:02Z"),
            ]
        );
        // Nothing seen: the patch as it was.
        let patch = facts(false).running(&at(1));
        assert_eq!(keep_conditions(patch.clone(), None), patch);
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
    fn pod_lost_in_a_reboot() {
        let patch = facts(true).lost(&at(1), &at(30), &at(31));
        let status = &patch["status"];
        assert_eq!(status["phase"], "Failed");
        let cs = &status["containerStatuses"][0];
        assert_eq!(
            cs["state"],
            json!({ "terminated": {
                "exitCode": 255,
                "reason": "Unknown",
                "startedAt": "2026-01-01T00:00:01Z",
                "finishedAt": "2026-01-01T00:00:30Z",
                "containerID": "nodejob://u-1",
            }}),
            "no message"
        );
        assert_eq!(
            (&cs["ready"], &cs["started"]),
            (&json!(false), &json!(false))
        );
        let conditions: Vec<_> = (status["conditions"].as_array().unwrap().iter())
            .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap()))
            .collect();
        assert_eq!(
            conditions,
            [
                ("PodReadyToStartContainers", "False"),
                ("Initialized", "True"),
                ("Ready", "False"),
                ("ContainersReady", "False"),
                ("PodScheduled", "True"),
            ]
        );
        assert_eq!(status["hostIP"], "127.0.0.2");
    }

    #[test]
    fn pod_failed_before_start() {
        let patch = failed_unstarted(&at(2));
        assert_eq!(patch["status"]["phase"], "Failed");
        assert!(patch["status"].get("containerStatuses").is_none());
    }
}
