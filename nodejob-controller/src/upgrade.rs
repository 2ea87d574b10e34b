//! A `NodeUpgrade` reconciled: its spec read by the [`Planner`] as the command reads its flags,
//! rolled by the upgrade driver, its status from the run's [`Tracker`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use nodejob_crd::{NodeUpgrade, NodeUpgradeStatus, Reason};
use tokio::task::JoinHandle;
use upgrade_driver::{EventSink, Plan, Progress, Window};

use crate::informer::{Informer, Informers};
use crate::kind::{Apis, Declared, Ended, Hooks, held_by, said};
use crate::metrics::{Metrics, UPGRADE};
use crate::planner::Planner;
use crate::status::{Tracker, Verdict, status};

impl Declared for NodeUpgrade {
    type Plan = Plan;
    type Tracker = Tracker;
    const OPERATION: &'static str = UPGRADE;

    fn paused(&self) -> bool {
        self.spec.paused
    }

    fn current(&self) -> Option<&NodeUpgradeStatus> {
        self.status.as_ref()
    }

    fn said(status: &NodeUpgradeStatus) -> (Option<i64>, &[Condition]) {
        (status.observed_generation, &status.conditions)
    }

    fn plan(&self, planner: &dyn Planner, node: Option<&str>) -> Result<Plan, String> {
        let plan = planner.upgrade(&self.spec)?;
        let Some(node) = node else {
            return Ok(plan);
        };
        let mut spec = plan.spec().clone();
        spec.last = Some(node.to_string());
        Plan::build(spec).map_err(|e| e.to_string())
    }

    fn informer(informers: &dyn Informers) -> Box<dyn Informer<Self>> {
        informers.upgrades()
    }

    fn window(plan: &Plan) -> Option<&Window> {
        plan.spec().window.as_ref()
    }

    fn spawn<A: Apis + ?Sized>(
        api: Arc<A>,
        plan: Plan,
        tracker: Arc<Tracker>,
        hooks: Hooks,
    ) -> JoinHandle<Ended> {
        let Hooks {
            metrics,
            own,
            handing_over,
            stop,
            planner,
            progress,
        } = hooks;
        tokio::spawn(async move {
            let told = api.clone();
            let reported = tracker.clone();
            let stopping = stop.clone();
            let figures = metrics.clone();
            let sink: Arc<dyn upgrade_driver::ProgressSink> = Arc::new(move |event: &Progress| {
                // This replica's node starts its first step (a node at the target already
                // starts none): the stop asked here ends the node at the next step boundary,
                // cordoned and recorded in flight, before its drain; the next leader carries
                // it on.
                if let (Some(own), Progress::StepStarted { node, .. }) = (&own, event)
                    && node == own
                {
                    handing_over.store(true, Ordering::SeqCst);
                    stopping.request();
                }
                tracker.event(event);
                if let Some(progress) = &progress {
                    progress.event(event);
                }
                let now = told.wall_time().as_millisecond() as f64 / 1000.0;
                figures.progress(event, now);
            });
            let result = upgrade_driver::run_until(&*api, &plan, sink, &stop).await;
            if let Ok(report) = &result {
                reported.reported(report);
            }
            ended(result, stop.requested(), &*planner)
        })
    }

    fn moved(tracker: &Tracker) -> u64 {
        tracker.version()
    }

    fn status(
        before: Option<&NodeUpgradeStatus>,
        generation: i64,
        verdict: &Verdict,
        tracker: &Tracker,
        now: Timestamp,
    ) -> NodeUpgradeStatus {
        status(before, generation, verdict, tracker, now)
    }

    fn figures(tracker: &Tracker, metrics: &Metrics) {
        metrics.counts(&tracker.counts().0);
    }
}

/// How a run's `result` is said; `asked`: the controller asked it to stop.
fn ended(
    result: Result<upgrade_driver::Report, upgrade_driver::Error>,
    asked: bool,
    planner: &dyn Planner,
) -> Ended {
    let versions = (result.iter())
        .flat_map(|r| &r.nodes)
        .filter_map(|n| n.to.clone().or_else(|| n.from.clone()))
        .collect();
    let (outcome, verdict, holder) = match result {
        Ok(report) => {
            // A run fails on a node that failed, or, none failing, on more nodes blocked than
            // the plan allows (`maxBlocked`): the stall's reason says which.
            let failed = if report.nodes.iter().any(|n| n.failure().is_some()) {
                Reason::NodeFailed
            } else {
                Reason::TooManyBlocked
            };
            let (outcome, verdict) = said(report.outcome, asked, failed);
            (outcome, verdict, None)
        }
        Err(upgrade_driver::Error::Core(nodejob_core::Error::LeaseHeld { holder, .. })) => {
            held_by(holder)
        }
        Err(e) => {
            let text = planner.said(e.to_string());
            let reason = if text.contains("skew") {
                Reason::SkewRefused
            } else {
                Reason::InvalidSpec
            };
            ("refused", Some(Verdict::Stalled(reason, text)), None)
        }
    };
    Ended {
        verdict,
        outcome,
        versions,
        holder,
    }
}
