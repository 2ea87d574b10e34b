//! [`Ctx`]: what a component works on during one step. A component (the Job controller, the
//! kubelets, the workload and disruption controllers, the scheduler) takes it, and imports
//! neither its siblings nor the state that owns the parts and lends them.

use std::time::Duration;

use crate::store::Store;
use crate::timers::Timers;
use crate::timing::Timing;

/// The store, the timer queue, the virtual time of the step and the cluster's delays.
pub(crate) struct Ctx<'a> {
    pub(crate) store: &'a mut Store,
    pub(crate) timers: &'a mut Timers,
    pub(crate) now: Duration,
    pub(crate) timing: &'a Timing,
}
