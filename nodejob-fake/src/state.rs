//! [`State`]: everything behind the cluster's one lock, and how a due [`Action`] is applied.

use std::time::Duration;

use crate::controller::Controller;
use crate::faults::Faults;
use crate::hooks::Hooks;
use crate::kubelet::Kubelets;
use crate::record::Call;
use crate::rng::Rng;
use crate::scheduler::{Action, Scheduler};
use crate::store::Store;
use crate::timing::Timing;

/// Random streams of one seed: adding a fault does not change the names a run draws.
const IDS_STREAM: u64 = 1;
const FAULTS_STREAM: u64 = 2;

/// The whole modelled cluster. Every transition happens with the lock held, so each is atomic
/// with respect to API calls; waiters are woken after each locked section that wrote.
#[derive(Debug)]
pub(crate) struct State {
    /// Virtual time of the locked section (set when the lock is taken).
    pub(crate) now: Duration,
    pub(crate) timing: Timing,
    pub(crate) store: Store,
    pub(crate) sched: Scheduler,
    pub(crate) controller: Controller,
    pub(crate) kubelets: Kubelets,
    pub(crate) faults: Faults,
    pub(crate) hooks: Hooks,
    pub(crate) calls: Vec<Call>,
}

impl State {
    pub(crate) fn new(seed: u64, timing: Timing) -> Self {
        State {
            now: Duration::ZERO,
            timing,
            store: Store::new(Rng::new(seed, IDS_STREAM)),
            sched: Scheduler::default(),
            controller: Controller::default(),
            kubelets: Kubelets::default(),
            faults: Faults::new(Rng::new(seed, FAULTS_STREAM)),
            hooks: Hooks::default(),
            calls: Vec::new(),
        }
    }

    /// Applies one due step.
    pub(crate) fn apply(&mut self, action: Action) {
        match action {
            Action::Settle => self.settle(),
            Action::CreatePod(job) => self.sync_new_job(&job),
            Action::Deadline(job) => self.deadline(&job),
            Action::Finish(job) => self.finish(&job),
            Action::StartContainer(pod) => self.start_container(pod),
            Action::ContainerExit { pod, exit_code, at } => self.container_exit(pod, exit_code, at),
            Action::Stop { pod, exit_code } => self.stop(pod, exit_code),
            Action::Kill(pod) => self.kill(pod),
        }
    }

    /// Runs the level-triggered loops until nothing more changes: the Job controller's sync of
    /// every Job, the apiserver's removal of pods the kubelet is done with, and the garbage
    /// collector.
    pub(crate) fn settle(&mut self) {
        for _ in 0..64 {
            let before = self.store.rv();
            self.sync_jobs();
            self.remove_finished_pods();
            self.collect_garbage();
            if self.store.rv() == before {
                return;
            }
        }
    }
}
