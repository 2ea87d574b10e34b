//! The timer queue of the modelled cluster: what the controllers and kubelets will do, and
//! when, in virtual time. One driver task pops due entries in `(time, sequence)` order, so a
//! run is deterministic.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodejob_host::NodeStep;

use crate::store::{Key, key_of};

/// An object as a timer names it: by key and UID, so a timer never acts on a replacement of
/// the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ObjRef {
    pub(crate) key: Key,
    pub(crate) uid: String,
}

impl ObjRef {
    /// The object `meta` describes.
    pub(crate) fn of(meta: &ObjectMeta) -> Self {
        ObjRef {
            key: key_of(meta),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }
}

/// A step of a controller or kubelet, due at a virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Let the level-triggered controllers (Job controller, garbage collector, kube-scheduler,
    /// workload and disruption controllers, kubelet cleanup) react to writes.
    Settle,
    /// A controller asked to look again at this time (a workload's delayed pod creation, a
    /// budget's `disruptedPods` entry expiring): runs the same loops as [`Action::Settle`].
    Resync,
    /// The Job controller syncs a Job that has no pod yet: sets `startTime`, creates the pod.
    CreatePod(ObjRef),
    /// `activeDeadlineSeconds` of a Job has passed.
    Deadline(ObjRef),
    /// The Job controller adds the terminal condition after the interim one.
    Finish(ObjRef),
    /// The kubelet starts a pod's container.
    StartContainer(ObjRef),
    /// A pod's container exits on its own with `exit_code`, at `at`.
    ContainerExit {
        pod: ObjRef,
        exit_code: i32,
        at: Duration,
    },
    /// A deleted pod's running container ends by a signal of the kubelet: SIGTERM (exit 143)
    /// or, for a container that ignores it, SIGKILL at the end of the grace period (exit 137).
    Stop { pod: ObjRef, exit_code: i32 },
    /// The kubelet finishes a deleted pod in which nothing runs: marks a pod that never started
    /// Failed, and confirms the removal.
    Kill(ObjRef),
    /// A step of the aftermath a host model gave a program's exit (NotReady, a new boot,
    /// Ready), on this node (by name and UID).
    HostStep { node: ObjRef, step: NodeStep },
    /// The pod garbage collector's look at the pods bound to a Node deleted a quarantine ago
    /// (`gcOrphaned` in `pkg/controller/podgc/gc_controller.go`): if no Node of that name
    /// exists, each is marked Failed with a `DisruptionTarget` condition and force-deleted.
    OrphanedPods { node: String },
}

/// A due entry: a modelled step, or a test's closure (kept by the root, by this ticket).
#[derive(Debug)]
pub(crate) enum Task {
    Action(Action),
    User(u64),
}

/// Entries by `(due time, insertion sequence)`.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    queue: BTreeMap<(Duration, u64), Task>,
    seq: u64,
    settle_pending: bool,
    changed: bool,
}

impl Timers {
    pub(crate) fn at(&mut self, at: Duration, action: Action) {
        self.push(at, Task::Action(action));
    }

    pub(crate) fn push(&mut self, at: Duration, task: Task) {
        self.seq += 1;
        self.queue.insert((at, self.seq), task);
        self.changed = true;
    }

    /// Asks for one [`Action::Settle`] at `now` unless one is already pending.
    pub(crate) fn settle(&mut self, now: Duration) {
        if !self.settle_pending {
            self.settle_pending = true;
            self.at(now, Action::Settle);
        }
    }

    /// The earliest entry due at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Duration) -> Option<Task> {
        let entry = self.queue.first_entry().filter(|e| e.key().0 <= now)?;
        let task = entry.remove();
        if matches!(task, Task::Action(Action::Settle)) {
            self.settle_pending = false;
        }
        Some(task)
    }

    /// When the earliest entry is due.
    pub(crate) fn next_due(&self) -> Option<Duration> {
        self.queue.first_key_value().map(|((at, _), _)| *at)
    }

    /// Whether an entry was added since the last call (the driver must recompute its sleep).
    pub(crate) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }
}
