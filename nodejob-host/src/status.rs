//! The pieces of status a kubelet writes, built the same way by the fake's kubelet and the
//! end-to-end node agent: a container running or terminated, the pod's phase and the
//! kubelet's conditions for each, and a node's `Ready` condition. Pure: every timestamp comes
//! in as an argument; where the status goes (a store, a merge patch) is the caller's.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, NodeCondition, Pod,
    PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The pod phase of a pod whose (only) container ended with `exit_code`: `Succeeded` for 0,
/// else `Failed` (`restartPolicy: Never`).
pub fn terminated_phase(exit_code: i32) -> &'static str {
    if exit_code == 0 {
        "Succeeded"
    } else {
        "Failed"
    }
}

/// The `state.terminated.reason` of a container that ended with `exit_code`: `Completed` for
/// 0, else `Error` (a signal's 143 and 137 included).
pub fn terminated_reason(exit_code: i32) -> &'static str {
    if exit_code == 0 { "Completed" } else { "Error" }
}

/// A pod condition of `type_`, `True` or `False`, that changed at `at`.
pub fn pod_condition(type_: &str, status: bool, reason: Option<&str>, at: &Time) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.map(str::to_string),
        last_transition_time: Some(at.clone()),
        ..PodCondition::default()
    }
}

/// The conditions of a pod whose container runs (and is Ready: no probes here), as of `at`:
/// `PodReadyToStartContainers`, `Initialized`, `Ready`, `ContainersReady`, `PodScheduled`,
/// all `True`.
pub fn running_conditions(at: &Time) -> Vec<PodCondition> {
    [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .map(|type_| pod_condition(type_, true, None, at))
    .into()
}

/// The conditions of a pod whose container ended, as of `at`: `Ready` and `ContainersReady`
/// `False` for `PodCompleted`, `Initialized` `True` (`PodCompleted`), `PodScheduled` `True`,
/// `PodReadyToStartContainers` `False`.
pub fn terminated_conditions(at: &Time) -> Vec<PodCondition> {
    vec![
        pod_condition("PodReadyToStartContainers", false, None, at),
        pod_condition("Initialized", true, Some("PodCompleted"), at),
        pod_condition("Ready", false, Some("PodCompleted"), at),
        pod_condition("ContainersReady", false, Some("PodCompleted"), at),
        pod_condition("PodScheduled", true, None, at),
    ]
}

/// `state.running` of a container started at `started_at`.
pub fn running_state(started_at: &Time) -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(started_at.clone()),
        }),
        ..ContainerState::default()
    }
}

/// How a container ended, for [`terminated_state`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    /// Its exit status.
    pub exit_code: i32,
    /// `terminated.message` ([`termination::message`](crate::termination::message)).
    pub message: Option<String>,
    /// When it started, if known.
    pub started_at: Option<Time>,
    /// When it ended.
    pub finished_at: Time,
    /// Its `containerID`.
    pub container_id: Option<String>,
}

/// `state.terminated` of a container that ended as `ended` says, with its
/// [`terminated_reason`].
pub fn terminated_state(ended: Ended) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: ended.exit_code,
            reason: Some(terminated_reason(ended.exit_code).to_string()),
            message: ended.message,
            started_at: ended.started_at,
            finished_at: Some(ended.finished_at),
            container_id: ended.container_id,
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

/// The exit status the kubelet reports for a container that was running when its node
/// rebooted: the runtime finds its task gone and gives it containerd's `unknownExitCode`
/// (`internal/cri/server/helpers.go`). Seen on a real node: a Job's pod running across a
/// reboot ended `Failed`, its container terminated with 255, reason `Unknown`, no message.
/// The fake and the node agent play it; the runner reads it as no answer
/// (`nodejob_core::lost_in_reboot`, `nodejob_core::UNKNOWN_EXIT_CODE`: the same pair).
pub const REBOOT_EXIT: i32 = 255;
/// The `terminated.reason` of such a container: containerd's `unknownExitReason`.
pub const REBOOT_REASON: &str = "Unknown";

/// Whether a container of `pod` that was running when its node rebooted ends there (the pod
/// `Failed`, the container [`lost_in_reboot`]): under `restartPolicy: Never`, as a Job's pod.
/// Under `Always` or `OnFailure` the kubelet starts it again in a new sandbox instead.
pub fn ends_in_reboot(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("Never")
}

/// `state.terminated` of a container lost in its node's reboot: exit [`REBOOT_EXIT`], reason
/// [`REBOOT_REASON`], no message (nothing could be read of its end).
pub fn lost_in_reboot(
    started_at: Option<Time>,
    finished_at: Time,
    container_id: Option<String>,
) -> ContainerState {
    let mut state = terminated_state(Ended {
        exit_code: REBOOT_EXIT,
        message: None,
        started_at,
        finished_at,
        container_id,
    });
    if let Some(t) = state.terminated.as_mut() {
        t.reason = Some(REBOOT_REASON.to_string());
    }
    state
}

/// The message of a Ready node's `Ready` condition.
pub const READY_MESSAGE: &str = "kubelet is posting ready status";

/// A node's `Ready` condition as its kubelet posts it at `at`: `True` (`KubeletReady`), or
/// `False` (`KubeletNotReady`) with `not_ready_message`.
pub fn node_ready_condition(ready: bool, not_ready_message: &str, at: &Time) -> NodeCondition {
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", READY_MESSAGE)
    } else {
        ("False", "KubeletNotReady", not_ready_message)
    };
    NodeCondition {
        type_: "Ready".to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(at.clone()),
        last_transition_time: Some(at.clone()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(1_767_225_600 + secs).unwrap())
    }

    fn summary(conditions: &[PodCondition]) -> Vec<(&str, &str, Option<&str>)> {
        (conditions.iter())
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_deref()))
            .collect()
    }

    #[test]
    fn phases_and_reasons_by_exit_code() {
        let table = [
            (0, "Succeeded", "Completed"),
            (1, "Failed", "Error"),
            (143, "Failed", "Error"),
            (137, "Failed", "Error"),
        ];
        for (code, phase, reason) in table {
            assert_eq!(
                (terminated_phase(code), terminated_reason(code)),
                (phase, reason)
            );
        }
    }

    #[test]
    fn conditions_running_and_terminated() {
        let running = running_conditions(&at(1));
        assert!(running.iter().all(|c| c.status == "True"));
        assert_eq!(running.len(), 5);
        assert_eq!(running[2].last_transition_time, Some(at(1)));
        assert_eq!(
            summary(&terminated_conditions(&at(2))),
            [
                ("PodReadyToStartContainers", "False", None),
                ("Initialized", "True", Some("PodCompleted")),
                ("Ready", "False", Some("PodCompleted")),
                ("ContainersReady", "False", Some("PodCompleted")),
                ("PodScheduled", "True", None),
            ]
        );
    }

    #[test]
    fn container_states() {
        let running = running_state(&at(1));
        assert_eq!(running.running.unwrap().started_at, Some(at(1)));
        let ended = terminated_state(Ended {
            exit_code: 3,
            message: Some("boom\n".into()),
            started_at: Some(at(1)),
            finished_at: at(3),
            container_id: Some("c://1".into()),
        })
        .terminated
        .unwrap();
        assert_eq!(
            (
                ended.exit_code,
                ended.reason.as_deref(),
                ended.message.as_deref()
            ),
            (3, Some("Error"), Some("boom\n"))
        );
        assert_eq!(
            (ended.started_at, ended.finished_at),
            (Some(at(1)), Some(at(3)))
        );
    }

    #[test]
    fn node_ready_and_not() {
        let ready = node_ready_condition(true, "down", &at(5));
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_deref(),
                ready.message.as_deref()
            ),
            ("True", Some("KubeletReady"), Some(READY_MESSAGE))
        );
        let down = node_ready_condition(false, "down", &at(5));
        assert_eq!(
            (
                down.status.as_str(),
                down.reason.as_deref(),
                down.message.as_deref()
            ),
            ("False", Some("KubeletNotReady"), Some("down"))
        );
        assert_eq!(down.last_heartbeat_time, Some(at(5)));
    }
}
