//! [`Timing`]: how long each step of the modelled cluster takes, in virtual time; and how
//! virtual time is written into objects.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// 2026-01-01T00:00:00Z: the wall-clock time the fake's virtual time starts from.
pub const EPOCH_SECONDS: i64 = 1_767_225_600;

/// The delays of the modelled cluster. Each default names the real component it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timing {
    /// From a Job's creation to the Job controller's first sync, which sets `startTime` and
    /// creates the pod. Default 200ms: the controller queues a new Job at once (`addJob` ->
    /// `enqueueSyncJobImmediately` in `pkg/controller/job/job_controller.go`; the 1s
    /// `syncJobBatchPeriod` batches pod events only), and a real control plane (v1.37) showed
    /// the pod about 0.2s after the Job.
    pub pod_create: Duration,
    /// From a pod's binding to a node (its creation, for a pod created bound, as a Job's is;
    /// the scheduler's binding otherwise) to its container running and, for a workload, Ready
    /// (kubelet admission, image present, container start). Default 1s.
    pub container_start: Duration,
    /// From the interim condition (`SuccessCriteriaMet` / `FailureTarget`) to the terminal one
    /// (`Complete` / `Failed`), the controller having removed its pod finalizers in between.
    /// Default 100ms.
    pub finish: Duration,
    /// How long a running container lives on after its pod's deletion: the kubelet sends
    /// SIGTERM at once, and a program that does not trap it ends with exit 143 (128 + 15),
    /// reason `Error`; this is the time to deliver the signal and reap the process. Default
    /// 500ms. (A container whose [`NodeScript`](crate::NodeScript) ignores SIGTERM runs
    /// instead until the SIGKILL at the end of the grace period: exit 137.)
    pub kill_delay: Duration,
    /// How long the kubelet takes to finish a deleted pod once no container runs in it: from
    /// the deletion of a pod whose container never started (it is marked Failed), or from a
    /// container's exit or kill, to the pod's removal. A pod already terminal when deleted
    /// goes at once (grace period 0). Default 100ms.
    pub pod_cleanup: Duration,
    /// The first retry delay after a refused pod creation (`FailedCreate`); it doubles on every
    /// further refusal. Default 10s.
    pub create_backoff: Duration,
    /// The cap of that retry delay. Default 360s.
    pub create_backoff_max: Duration,
    /// From a ReplicaSet or DaemonSet falling short of its pods (created, or one of its pods
    /// deleted, evicted or ended) to its controller's creation of the missing ones. Default
    /// 200ms, like the Job controller's first sync; a ReplicaSet's pod then waits for the
    /// scheduler (at once) and starts, Ready, [`Timing::container_start`] after it is bound.
    pub replica_create: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            pod_create: Duration::from_millis(200),
            container_start: Duration::from_secs(1),
            finish: Duration::from_millis(100),
            kill_delay: nodejob_host::termination::KILL_DELAY,
            pod_cleanup: nodejob_host::termination::POD_CLEANUP,
            // Job controller before 1.27: its workqueue retried a failed sync with
            // DefaultJobBackOff = 10s doubling up to MaxJobBackOff = 360s (newer releases use
            // 1s..1min for API errors and keep 10s..6min for pod failures).
            create_backoff: Duration::from_secs(10),
            create_backoff_max: Duration::from_secs(360),
            replica_create: Duration::from_millis(200),
        }
    }
}

impl Timing {
    /// The delay before retry number `attempt` (0 for the first retry) of a refused pod
    /// creation: `create_backoff * 2^attempt`, capped at `create_backoff_max`.
    pub fn create_retry(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.create_backoff
            .saturating_mul(factor)
            .min(self.create_backoff_max)
    }
}

/// The wall-clock timestamp of virtual time `elapsed`: [`EPOCH_SECONDS`] plus whole seconds,
/// as the apiserver serialises `metav1.Time` (RFC 3339, second precision).
pub(crate) fn stamp(elapsed: Duration) -> Time {
    let secs = EPOCH_SECONDS.saturating_add(i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX));
    Time(Timestamp::from_second(secs).unwrap_or(Timestamp::MAX))
}

/// [`EPOCH_SECONDS`] plus `elapsed`, to the microsecond: the cluster's wall clock.
pub(crate) fn wall(elapsed: Duration) -> Timestamp {
    let micros = i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX);
    Timestamp::from_second(EPOCH_SECONDS)
        .ok()
        .and_then(|t| {
            t.checked_add(k8s_openapi::jiff::SignedDuration::from_micros(micros))
                .ok()
        })
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_whole_seconds_from_epoch() {
        assert_eq!(stamp(Duration::ZERO).0.to_string(), "2026-01-01T00:00:00Z");
        assert_eq!(
            stamp(Duration::from_millis(61_900)).0.to_string(),
            "2026-01-01T00:01:01Z"
        );
    }

    #[test]
    fn create_retry_doubles_then_caps() {
        let t = Timing::default();
        let secs: Vec<u64> = (0..8).map(|a| t.create_retry(a).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 320, 360, 360]);
        assert_eq!(t.create_retry(u32::MAX).as_secs(), 360);
    }
}
