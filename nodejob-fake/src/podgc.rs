//! The pod garbage collector's part for deleted nodes (`gcOrphaned` in
//! `pkg/controller/podgc/gc_controller.go`): the pods bound to a Node that no longer exists are
//! looked at a quarantine after the Node went (`quarantineTime`, 40 s: the controller queues the
//! missing node with that delay and checks again with a fresh read before acting), then each is
//! marked `Failed` with a `DisruptionTarget` condition (reason `DeletionByPodGC`, message
//! `PodGC: node no longer exists`; `markFailedAndDeletePodWithCondition`) unless it has ended
//! already, and deleted with a grace period of 0. So a Job whose pod ran on a deleted node
//! fails about 40 s later, as on a real cluster, instead of waiting for ever.

use std::time::Duration;

use k8s_openapi::api::core::v1::PodCondition;

use crate::ctx::Ctx;
use crate::store::{key_of, pod_is_terminal};
use crate::timing::stamp;

/// `quarantineTime` of the pod garbage collector.
pub(crate) const QUARANTINE: Duration = Duration::from_secs(40);

/// The reason of the `DisruptionTarget` condition the collector adds.
pub(crate) const REASON: &str = "DeletionByPodGC";

/// Collects the pods bound to `node`, unless a Node of that name exists again.
pub(crate) fn collect_orphans(cx: &mut Ctx<'_>, node: &str) {
    if cx.store.nodes.contains_key(node) {
        return;
    }
    for mut pod in cx.store.pods_on(node) {
        let key = key_of(&pod.metadata);
        if !pod_is_terminal(&pod) {
            let status = pod.status.get_or_insert_default();
            status.phase = Some("Failed".into());
            let conditions = status.conditions.get_or_insert_default();
            conditions.retain(|c| c.type_ != "DisruptionTarget");
            conditions.push(PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some(REASON.into()),
                message: Some("PodGC: node no longer exists".into()),
                last_transition_time: Some(stamp(cx.now)),
                ..PodCondition::default()
            });
            cx.store.write_pod(pod);
        }
        cx.store.delete_pod(&key, Some(Duration::ZERO), cx.now);
    }
    cx.timers.settle(cx.now);
}
