//! The pause switch (issue 22, item 3) on the fake, in paused virtual time: a run in flight
//! finishes the step under way and starts no other while paused, says so, and goes on when the
//! switch is lifted; a run begun paused writes nothing until then; a run still paused at its
//! pause deadline ends paused, with an outcome of its own, having written nothing.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_core::pause::{Pause, set_pause};
use nodejob_core::{Answer, ApiResult, Clock, Layer, Request, Verb};
use nodejob_fake::FakeCluster;
use support::*;
use upgrade_driver::{EventSink, NodeResult, Outcome, Progress, Report, UpgradeStep, run};

/// The Lease both drivers share, by default.
const LEASE: &str = "nodejob";

/// The fake, each write to a node or a Job noted with the virtual time it was made at.
struct Writes {
    fake: Arc<FakeCluster>,
    made: Mutex<Vec<(Duration, Verb, String)>>,
}

impl Layer for Writes {
    type Below = FakeCluster;

    fn below(&self) -> &FakeCluster {
        &self.fake
    }

    async fn around<'a>(
        &'a self,
        request: Request<'a>,
        serve: impl Future<Output = ApiResult<Answer>> + Send + 'a,
    ) -> ApiResult<Answer> {
        let verb = request.verb();
        if matches!(
            verb,
            Verb::PatchNode | Verb::CreateJob | Verb::EvictPod | Verb::PatchNodeConditions
        ) {
            let name = request.subject().to_string();
            self.made
                .lock()
                .unwrap()
                .push((self.fake.now(), verb, name));
        }
        serve.await
    }
}

fn writes(fake: &Arc<FakeCluster>) -> Writes {
    Writes {
        fake: fake.clone(),
        made: Mutex::new(Vec::new()),
    }
}

fn pause() -> Pause {
    Pause {
        by: "alice@console".into(),
        at: None,
        reason: "the storage team is failing over".into(),
    }
}

/// Progress, each event with the virtual time it was told at; when `pause_at` names a node and
/// a step, the rolls are paused as that step starts on it and resumed the duration later.
struct Timed {
    fake: Arc<FakeCluster>,
    events: Mutex<Vec<(Duration, Progress)>>,
    pause_at: Option<(String, UpgradeStep, Duration)>,
    /// Done to the cluster as the paused node says it waits on the pause.
    while_paused: Option<fn(&FakeCluster)>,
}

impl EventSink<Progress> for Timed {
    fn event(&self, event: &Progress) {
        self.events
            .lock()
            .unwrap()
            .push((self.fake.now(), event.clone()));
        if let (Progress::StepStarted { node, step }, Some((at, when, after))) =
            (event, &self.pause_at)
            && step == when
            && node == at
        {
            let (fake, after) = (self.fake.clone(), *after);
            tokio::spawn(async move {
                set_pause(&*fake, NS, LEASE, Some(&pause())).await.unwrap();
                fake.sleep(after).await;
                set_pause(&*fake, NS, LEASE, None).await.unwrap();
            });
        }
        if let (Progress::Paused { node: n, .. }, Some((at, ..)), Some(act)) =
            (event, &self.pause_at, self.while_paused)
            && n == at
        {
            act(&self.fake);
        }
    }
}

/// What `node` was told in words: its notes, and its waits on the pause switch as
/// `paused by …; waiting before Step` and `resumed after Ns paused; Step starts`.
fn notes(events: &[(Duration, Progress)], node: &str) -> Vec<(Duration, String)> {
    (events.iter())
        .filter_map(|(at, e)| match e {
            Progress::Note {
                node: Some(n),
                message,
            } if n == node => Some((*at, message.clone())),
            Progress::Paused {
                node: n,
                before,
                by,
                at: when,
                reason,
            } if n == node => {
                let pause = Pause {
                    by: by.clone(),
                    at: when.as_deref().map(|t| t.parse().unwrap()),
                    reason: reason.clone(),
                };
                Some((*at, format!("{pause}; waiting before {before}")))
            }
            Progress::Resumed {
                node: n,
                before,
                waited_ms,
            } if n == node => Some((
                *at,
                format!(
                    "resumed after {}s paused; {before} starts",
                    waited_ms / 1000
                ),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_run_in_flight_finishes_its_step_starts_no_other_while_paused_and_goes_on_when_resumed() {
    let (fake, _) = cluster(1, 0, &[("z", 2)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    let mut spec = plan_spec();
    spec.nodes = vec!["z-0".into(), "z-1".into()];
    let api = writes(&fake);
    let sink = Arc::new(Timed {
        fake: fake.clone(),
        events: Mutex::new(Vec::new()),
        pause_at: Some(("z-0".into(), UpgradeStep::Drain, Duration::from_secs(300))),
        while_paused: None,
    });
    let report = run(&api, &plan(spec), sink.clone()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let events = sink.events.lock().unwrap().clone();
    let said = notes(&events, "z-0");
    let (paused_at, paused) = (said.iter())
        .find(|(_, m)| m.starts_with("paused by alice@console"))
        .cloned()
        .unwrap_or_else(|| panic!("the pause unsaid: {said:?}"));
    assert_eq!(
        paused,
        "paused by alice@console: the storage team is failing over; waiting before Upgrade"
    );
    let (resumed_at, resumed) = (said.iter())
        .find(|(_, m)| m.starts_with("resumed"))
        .cloned()
        .unwrap_or_else(|| panic!("the resume unsaid: {said:?}"));
    assert_eq!(resumed, "resumed after 300s paused; Upgrade starts");
    assert!(resumed_at >= paused_at + Duration::from_secs(300));
    // The drain in flight finished before the wait; nothing started during it.
    let finished_drain = (events.iter()).find_map(|(at, e)| match e {
        Progress::StepFinished { node, step, .. }
            if node == "z-0" && *step == UpgradeStep::Drain =>
        {
            Some(*at)
        }
        _ => None,
    });
    assert!(
        finished_drain.is_some_and(|t| t <= paused_at),
        "{events:#?}"
    );
    let started_while_paused: Vec<_> = (events.iter())
        .filter(|(at, e)| {
            matches!(e, Progress::StepStarted { .. }) && *at > paused_at && *at < resumed_at
        })
        .collect();
    assert!(started_while_paused.is_empty(), "{started_while_paused:#?}");
    let written_while_paused: Vec<_> = (api.made.lock().unwrap().iter())
        .filter(|(at, ..)| *at > paused_at && *at < resumed_at)
        .cloned()
        .collect();
    assert!(written_while_paused.is_empty(), "{written_while_paused:#?}");
    // The node's time in the report is its own: the wait is apart, not in it.
    let z0 = report.node("z-0").unwrap();
    let waited = resumed_at - paused_at;
    assert_eq!(z0.paused_ms, waited.as_millis() as u64, "{z0:#?}");
    let first_step = (events.iter()).find_map(|(at, e)| match e {
        Progress::StepStarted { node, .. } if node == "z-0" => Some(*at),
        _ => None,
    });
    let finished = (events.iter()).find_map(|(at, e)| match e {
        Progress::NodeFinished { node, .. } if node == "z-0" => Some(*at),
        _ => None,
    });
    let span = (finished.unwrap() - first_step.unwrap()).as_millis() as u64;
    assert!(
        z0.took_ms + z0.paused_ms >= span && z0.took_ms + 300_000 <= span,
        "took {} and paused {} over a span of {span} ms",
        z0.took_ms,
        z0.paused_ms
    );
    // The switch is gone, and the Lease it sat on released as ever.
    let lease = nodejob_core::LeaseApi::get_lease(&*fake, NS, LEASE)
        .await
        .unwrap();
    assert!(nodejob_core::pause::paused(&lease).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_run_begun_paused_writes_nothing_until_resumed() {
    let (fake, _) = cluster(1, 0, &[("z", 2)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    set_pause(&*fake, NS, LEASE, Some(&pause())).await.unwrap();
    let lifted = fake.now() + Duration::from_secs(3600);
    {
        let fake = fake.clone();
        tokio::spawn(async move {
            fake.sleep(Duration::from_secs(3600)).await;
            set_pause(&*fake, NS, LEASE, None).await.unwrap();
        });
    }
    let mut spec = plan_spec();
    spec.nodes = vec!["z-0".into()];
    let api = writes(&fake);
    let report = run(&api, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let made = api.made.lock().unwrap().clone();
    assert!(!made.is_empty());
    assert!(made.iter().all(|(at, ..)| *at >= lifted), "{made:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_run_still_paused_at_its_deadline_ends_paused_having_written_nothing() {
    let (fake, _) = cluster(1, 0, &[("z", 2)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    set_pause(&*fake, NS, LEASE, Some(&pause())).await.unwrap();
    let began = fake.now();
    let mut spec = plan_spec();
    spec.nodes = vec!["z-0".into(), "z-1".into()];
    let api = writes(&fake);
    let report = run(&api, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    let Outcome::Paused { why } = &report.outcome else {
        panic!("not paused: {report:#?}");
    };
    assert!(
        why.starts_with(
            "paused by alice@console: the storage team is failing over; still paused after \
             12h, the run's pause deadline"
        ),
        "{why}"
    );
    let waited = fake.now().saturating_sub(began);
    assert!(
        waited >= Duration::from_secs(12 * 3600) && waited < Duration::from_secs(13 * 3600),
        "{waited:?}"
    );
    assert_eq!(*api.made.lock().unwrap(), []);
    // The node that waited is reported stopped before its first step; the other never began.
    let z0 = report.nodes.iter().find(|n| n.name == "z-0").unwrap();
    assert!(
        matches!(
            &z0.result,
            Some(NodeResult::Interrupted {
                step: UpgradeStep::Cordon,
                ..
            })
        ),
        "{z0:#?}"
    );
    // The switch stays on: nobody lifted it.
    let lease = nodejob_core::LeaseApi::get_lease(&*fake, NS, LEASE)
        .await
        .unwrap();
    assert_eq!(nodejob_core::pause::paused(&lease), Some(pause()));
}

/// A node deleted while the run waited, paused, before its first step: nothing of ours was on
/// it, so it leaves the roll skipped (as a node deleted before its turn does), not failed at
/// Cordon on the 404 of its first write; the others go on.
#[tokio::test(start_paused = true)]
async fn a_node_deleted_while_the_rolls_are_paused_is_skipped_not_failed() {
    let (fake, _) = cluster(1, 0, &[("z", 3)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    set_pause(&*fake, NS, LEASE, Some(&pause())).await.unwrap();
    {
        let fake = fake.clone();
        tokio::spawn(async move {
            fake.sleep(Duration::from_secs(600)).await;
            fake.remove_node("z-0").unwrap();
            fake.sleep(Duration::from_secs(600)).await;
            set_pause(&*fake, NS, LEASE, None).await.unwrap();
        });
    }
    let mut spec = plan_spec();
    spec.nodes = vec!["z-0".into(), "z-1".into()];
    let report = run(&writes(&fake), &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let result = |name: &str| {
        (report.nodes.iter().find(|n| n.name == name))
            .and_then(|n| n.result.clone())
            .unwrap_or_else(|| panic!("{name}: no result: {report:#?}"))
    };
    let NodeResult::Skipped { why } = result("z-0") else {
        panic!("{report:#?}")
    };
    assert!(why.contains("deleted from the cluster"), "{why}");
    assert_eq!(result("z-1"), NodeResult::Upgraded);
}

/// A node relabelled out of the plan's selection while the rolls are paused, before anything
/// of ours is on it, is not started once they resume: skipped, as a node relabelled before its
/// turn is; the others roll on.
#[tokio::test(start_paused = true)]
async fn a_node_relabelled_out_while_the_rolls_are_paused_is_not_started() {
    let (fake, _) = cluster(1, 0, &[("z", 3)], 2);
    for node in ["z-0", "z-1"] {
        fake.label_node(node, "upgrade", "yes").unwrap();
    }
    fake.sleep(Duration::from_secs(30)).await;
    set_pause(&*fake, NS, LEASE, Some(&pause())).await.unwrap();
    {
        let fake = fake.clone();
        tokio::spawn(async move {
            fake.sleep(Duration::from_secs(600)).await;
            fake.unlabel_node("z-0", "upgrade").unwrap();
            fake.sleep(Duration::from_secs(600)).await;
            set_pause(&*fake, NS, LEASE, None).await.unwrap();
        });
    }
    let mut spec = plan_spec();
    spec.selector = Some("upgrade=yes".into());
    let api = writes(&fake);
    let report = run(&api, &plan(spec), upgrade_driver::quiet())
        .await
        .unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let z0 = report.nodes.iter().find(|n| n.name == "z-0").unwrap();
    let Some(NodeResult::Skipped { why }) = &z0.result else {
        panic!("{report:#?}")
    };
    assert!(why.contains("no longer selected"), "{why}");
    let touched: Vec<_> = (api.made.lock().unwrap().iter())
        .filter(|(_, _, name)| name.contains("z-0"))
        .cloned()
        .collect();
    assert!(
        touched.is_empty(),
        "z-0 written though relabelled out: {touched:?}"
    );
}

/// Rolls z-0 then z-1 (two replicas on the three workers, behind a budget), paused as z-0's
/// `step` starts and resumed 300 s later, `while_paused` done to the cluster as z-0 says it
/// waits on the pause: the report, the progress with its times, and the writes with theirs.
async fn paused_at_z0(
    step: UpgradeStep,
    while_paused: Option<fn(&FakeCluster)>,
) -> (
    Report,
    Vec<(Duration, Progress)>,
    Vec<(Duration, Verb, String)>,
) {
    // A third worker, z-2, not rolled: where the replicas go while the others are cordoned.
    let (fake, _) = cluster(1, 0, &[("z", 3)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    let mut spec = plan_spec();
    spec.nodes = vec!["z-0".into(), "z-1".into()];
    let api = writes(&fake);
    let sink = Arc::new(Timed {
        fake: fake.clone(),
        events: Mutex::new(Vec::new()),
        pause_at: Some(("z-0".into(), step, Duration::from_secs(300))),
        while_paused,
    });
    let report = run(&api, &plan(spec), sink.clone()).await.unwrap();
    let events = sink.events.lock().unwrap().clone();
    let made = api.made.lock().unwrap().clone();
    (report, events, made)
}

/// Issue 30, item 3: a node deleted while the rolls are paused after its drain gets no host
/// Job once they resume; it leaves the roll skipped, saying why, and the roll goes on.
#[tokio::test(start_paused = true)]
async fn a_node_deleted_while_paused_after_its_drain_gets_no_host_job_on_resume() {
    let (report, _, made) = paused_at_z0(
        UpgradeStep::Drain,
        Some(|fake| {
            fake.remove_node("z-0").unwrap();
        }),
    )
    .await;
    let jobs: Vec<_> = (made.iter())
        .filter(|(_, verb, _)| *verb == Verb::CreateJob)
        .map(|(_, _, name)| name.as_str())
        .collect();
    assert!(
        jobs.iter().all(|j| !j.contains("z-0")),
        "a host job for the deleted node: {jobs:?}"
    );
    assert!(jobs.iter().any(|j| j.contains("z-1")), "{jobs:?}");
    let z0 = report.nodes.iter().find(|n| n.name == "z-0").unwrap();
    let Some(NodeResult::Skipped { why }) = &z0.result else {
        panic!("z-0 not skipped: {report:#?}")
    };
    assert!(
        why == "deleted from the cluster while the rolls were paused: Upgrade was not started on it",
        "{why}"
    );
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
}

/// Issue 30, item 7: a step that finished during a pause (z-0's host upgrade, which the pause
/// found in flight) is reported finished when it finished: its finish is told before the
/// resume, and its duration holds none of the pause.
#[tokio::test(start_paused = true)]
async fn a_step_finished_during_a_pause_is_reported_when_it_finished() {
    let (report, events, _) = paused_at_z0(UpgradeStep::Upgrade, None).await;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let resumed_at = (notes(&events, "z-0").into_iter())
        .find(|(_, m)| m.starts_with("resumed"))
        .map(|(at, _)| at)
        .expect("the resume said");
    let (finished_at, took_ms) = (events.iter())
        .find_map(|(at, e)| match e {
            Progress::StepFinished {
                node,
                step: UpgradeStep::Upgrade,
                took_ms,
                ..
            } if node == "z-0" => Some((*at, *took_ms)),
            _ => None,
        })
        .expect("z-0's upgrade finished");
    assert!(finished_at < resumed_at, "{events:#?}");
    assert!(
        took_ms < 300_000,
        "the upgrade took {took_ms} ms, the pause included"
    );
    let z0 = report.nodes.iter().find(|n| n.name == "z-0").unwrap();
    let upgrade = (z0.steps.iter()).find(|(s, _)| *s == UpgradeStep::Upgrade);
    assert!(upgrade.is_some_and(|(_, ms)| *ms < 300_000), "{z0:#?}");
}

/// While the rolls are paused, a node of ours in flight says so on its condition (who paused
/// them, why, and the step it waits before), not the step before as if it were still under
/// way; the step's start says it next. Issue 33, item 18.
#[tokio::test(start_paused = true)]
async fn a_node_waiting_on_the_pause_says_paused_on_its_condition() {
    let (fake, _) = cluster(3, 0, &[("z", 2)], 2);
    fake.sleep(Duration::from_secs(30)).await;
    let mut spec = plan_spec();
    spec.nodes = vec!["z-0".into()];
    let sink = Arc::new(Timed {
        fake: fake.clone(),
        events: Mutex::new(Vec::new()),
        pause_at: Some(("z-0".into(), UpgradeStep::Drain, Duration::from_secs(300))),
        // Read as the node says it waits: its condition then.
        while_paused: Some(|fake: &FakeCluster| {
            let node = fake.node("z-0").unwrap();
            let said = nodejob_roll::condition::condition(&node, nodejob_roll::condition::UPGRADE)
                .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()));
            let Some((status, Some(reason), Some(message))) = said else {
                panic!("no condition while paused: {said:?}");
            };
            assert_eq!((status.as_str(), reason.as_str()), ("True", "Paused"));
            assert!(
                message.contains("paused by alice@console: the storage team is failing over")
                    && message.contains("waiting before Upgrade"),
                "{message}"
            );
        }),
    });
    let report = run(&*fake, &plan(spec), sink.clone()).await.unwrap();
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let said = notes(&sink.events.lock().unwrap(), "z-0");
    assert!(
        said.iter().any(|(_, m)| m.starts_with("paused by")),
        "the node never waited: {said:?}"
    );
    let node = fake.node("z-0").unwrap();
    let end = nodejob_roll::condition::condition(&node, nodejob_roll::condition::UPGRADE)
        .and_then(|c| c.reason.clone());
    assert_eq!(end.as_deref(), Some("Upgraded"));
}
