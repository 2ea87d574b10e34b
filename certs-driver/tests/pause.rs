//! The pause switch (issue 22, item 3) in the CA rotation, on the fake in paused virtual time:
//! a rotation paused while it runs finishes the step in flight, starts no other until the
//! switch is lifted, says so, and then rotates every node, no phase twice; a rotation begun
//! paused runs no phase until the switch is lifted, then rotates every node; one still paused
//! at its pause deadline ends paused, no phase run on any node.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use certs_driver::{CaStep, Outcome, Progress, quiet, run};
use nodejob_core::Clock;
use nodejob_core::pause::{Pause, set_pause};
use nodejob_fake::{FakeCluster, Verb};
use nodejob_roll::EventSink;
use support::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn pause() -> Pause {
    Pause {
        by: "alice@console".into(),
        at: None,
        reason: "the storage team is failing over".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_rotation_begun_paused_runs_no_phase_until_resumed() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(7, 1, 2);
    set_pause(&*fake, NS, "nodejob", Some(&pause())).await?;
    {
        let fake = fake.clone();
        tokio::spawn(async move {
            fake.sleep(Duration::from_secs(1800)).await;
            set_pause(&*fake, NS, "nodejob", None).await.unwrap();
        });
    }
    let began = fake.now();
    // Half an hour in, still paused: no phase ran anywhere.
    let rotation = {
        let (fake, spec) = (fake.clone(), plan_spec(&ca));
        tokio::spawn(async move { run(&harness(fake), &plan(spec), quiet()).await })
    };
    fake.sleep(Duration::from_secs(1790)).await;
    for name in &names {
        assert_eq!(
            phase_runs(&fake, name),
            [0; 4],
            "{name} ran a phase while paused"
        );
    }
    let report = rotation.await??;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert!(fake.now().saturating_sub(began) >= Duration::from_secs(1800));
    for name in &names {
        assert_eq!(phase_runs(&fake, name)[..3], [1, 1, 1], "{name}");
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_rotation_still_paused_at_its_deadline_ends_paused() -> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(7, 1, 2);
    set_pause(&*fake, NS, "nodejob", Some(&pause())).await?;
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), quiet()).await?;
    let Outcome::Paused { why } = &report.outcome else {
        return Err(format!("ended {:?}", report.outcome).into());
    };
    assert!(
        why.starts_with("paused by alice@console: the storage team is failing over; still paused"),
        "{why}"
    );
    for name in &names {
        assert_eq!(
            phase_runs(&fake, name),
            [0; 4],
            "{name} ran a phase while paused"
        );
    }
    Ok(())
}

/// Progress, each event with the virtual time it was told at; the switch is set as `at`'s
/// issue starts (the pause set, with when it was set on the virtual clock, noted) and lifted
/// `after` later.
struct Timed {
    fake: Arc<FakeCluster>,
    events: Mutex<Vec<(Duration, Progress)>>,
    at: String,
    after: Duration,
    paused: Arc<Mutex<Option<(Duration, Pause)>>>,
}

impl EventSink<Progress> for Timed {
    fn event(&self, event: &Progress) {
        self.events
            .lock()
            .unwrap()
            .push((self.fake.now(), event.clone()));
        if let Progress::StepStarted { node, step } = event
            && *step == CaStep::Issue
            && *node == self.at
        {
            let (fake, after, paused) = (self.fake.clone(), self.after, self.paused.clone());
            tokio::spawn(async move {
                let pause = Pause {
                    at: Some(fake.wall_time()),
                    ..pause()
                };
                set_pause(&*fake, NS, "nodejob", Some(&pause))
                    .await
                    .unwrap();
                *paused.lock().unwrap() = Some((fake.now(), pause));
                fake.sleep(after).await;
                set_pause(&*fake, NS, "nodejob", None).await.unwrap();
            });
        }
    }
}

/// The Jobs the fake was asked to create, each with the virtual time it was asked at.
fn jobs_created(fake: &FakeCluster) -> Vec<(Duration, String)> {
    (fake.calls().into_iter())
        .filter(|c| c.verb == Verb::CreateJob)
        .map(|c| (c.at, c.name))
        .collect()
}

/// One control-plane node and three workers, two at once: the switch is set as w-0's issue
/// starts (w-1's starts with it), so w-0 and w-1 are in flight and w-2's issue is the next step
/// anywhere.
#[tokio::test(start_paused = true)]
async fn a_rotation_paused_in_flight_finishes_its_step_starts_none_and_goes_on_when_resumed()
-> TestResult {
    let ca = new_ca();
    let (fake, names) = cluster(7, 1, 3);
    let sink = Arc::new(Timed {
        fake: fake.clone(),
        events: Mutex::new(Vec::new()),
        at: "w-0".into(),
        after: Duration::from_secs(600),
        paused: Arc::default(),
    });
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), sink.clone()).await?;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let (paused_at, set) = sink.paused.lock().unwrap().clone().ok_or("never paused")?;
    let events = sink.events.lock().unwrap().clone();
    // The waits on the pause switch, in words: `paused by …; waiting before Step`, `resumed
    // after Ns paused; Step starts`.
    let notes: Vec<(Duration, String, String)> = (events.iter())
        .filter_map(|(at, e)| match e {
            Progress::Paused {
                node,
                before,
                by,
                at: when,
                reason,
            } => {
                let pause = Pause::of(by, when.as_deref(), reason);
                let said = format!("{pause}; waiting before {before}");
                Some((*at, node.clone(), said))
            }
            Progress::Resumed {
                node,
                before,
                waited_ms,
            } => {
                let said = format!(
                    "resumed after {}s paused; {before} starts",
                    waited_ms / 1000
                );
                Some((*at, node.clone(), said))
            }
            _ => None,
        })
        .collect();
    // The node whose step was next waited, saying who paused, when and why; then went on.
    let waiting: Vec<_> = (notes.iter())
        .filter(|(_, _, m)| m.starts_with("paused by"))
        .collect();
    let said = format!(
        "paused by alice@console at {}: the storage team is failing over; waiting before Issue",
        set.at.ok_or("the pause says no time")?
    );
    assert!(
        matches!(waiting[..], [(_, n, m)] if n == "w-2" && *m == said),
        "{waiting:#?}"
    );
    let resumed: Vec<_> = (notes.iter())
        .filter(|(_, _, m)| m.starts_with("resumed"))
        .collect();
    let [(resumed_at, node, message)] = resumed[..] else {
        return Err(format!("the resume said {resumed:#?}").into());
    };
    assert_eq!(
        (node.as_str(), message.as_str()),
        ("w-2", "resumed after 600s paused; Issue starts")
    );
    let resumed_at = *resumed_at;
    assert!(resumed_at >= paused_at + Duration::from_secs(600));
    // w-0's issue was in flight when the switch was set, and finished while it was on.
    let issue_done = (events.iter()).find_map(|(at, e)| match e {
        Progress::StepFinished { node, step, .. } if node == "w-0" && *step == CaStep::Issue => {
            Some(*at)
        }
        _ => None,
    });
    assert!(
        issue_done.is_some_and(|t| t > paused_at && t < resumed_at),
        "the step in flight did not finish while paused: {events:#?}"
    );
    // No step started while paused: not as progress, not as a Job the cluster was asked for.
    let started_while_paused: Vec<_> = (events.iter())
        .filter(|(at, e)| {
            matches!(e, Progress::StepStarted { .. }) && *at > paused_at && *at < resumed_at
        })
        .collect();
    assert!(started_while_paused.is_empty(), "{started_while_paused:#?}");
    let created = jobs_created(&fake);
    let created_while_paused: Vec<_> = (created.iter())
        .filter(|(at, _)| *at > paused_at && *at < resumed_at)
        .collect();
    assert!(created_while_paused.is_empty(), "{created_while_paused:#?}");
    let issue_created = |node: &str| {
        let prefix = format!("ca-issue-{node}-");
        (created.iter())
            .filter(|(_, name)| name.starts_with(&prefix))
            .map(|(at, _)| *at)
            .collect::<Vec<_>>()
    };
    for node in ["w-0", "w-1"] {
        let at = issue_created(node);
        assert!(matches!(at[..], [t] if t <= paused_at), "{node}: {at:?}");
    }
    let at = issue_created("w-2");
    assert!(matches!(at[..], [t] if t >= resumed_at), "w-2: {at:?}");
    // Then every node rotated, each phase once.
    for name in &names {
        assert_eq!(phase_runs(&fake, name), [1, 1, 1, 0], "{name}");
    }
    Ok(())
}

/// What happens to the node that waits on the switch, as it starts waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WhileWaiting {
    /// Deleted.
    Deleted,
    /// Deleted, and a node of the same name (a new UID) joins.
    Replaced,
}

/// [`Timed`], and the node that waits on the switch is deleted (or replaced) as it starts
/// waiting, at the virtual time kept.
struct Deleting {
    timed: Timed,
    what: WhileWaiting,
    at: Mutex<Option<Duration>>,
}

impl EventSink<Progress> for Deleting {
    fn event(&self, event: &Progress) {
        self.timed.event(event);
        if let Progress::Paused { node, .. } = event
            && self.at.lock().unwrap().is_none()
        {
            let fake = &self.timed.fake;
            fake.remove_node(node).unwrap();
            if self.what == WhileWaiting::Replaced {
                fake.add_node(node).unwrap();
            }
            *self.at.lock().unwrap() = Some(fake.now());
        }
    }
}

/// Issue 30, item 3: w-2 waits on the switch before its issue; it is deleted (or replaced by a
/// node of the same name) while it waits. After the resume, no issue Job is created for it: it
/// ends interrupted before issue, its report saying it was deleted (or replaced) during the
/// pause, and the run stops there.
async fn a_node_deleted_while_paused(what: WhileWaiting) -> TestResult {
    let ca = new_ca();
    let (fake, _) = cluster(7, 1, 3);
    let first_uid = fake.node("w-2").and_then(|n| n.metadata.uid);
    let sink = Arc::new(Deleting {
        timed: Timed {
            fake: fake.clone(),
            events: Mutex::new(Vec::new()),
            at: "w-0".into(),
            after: Duration::from_secs(600),
            paused: Arc::default(),
        },
        what,
        at: Mutex::new(None),
    });
    let report = run(&harness(fake.clone()), &plan(plan_spec(&ca)), sink.clone()).await?;
    let deleted_at = sink.at.lock().unwrap().ok_or("w-2 never waited")?;
    if what == WhileWaiting::Replaced {
        let now = fake.node("w-2").and_then(|n| n.metadata.uid);
        assert!(now.is_some() && now != first_uid, "not replaced: {now:?}");
    }
    // No Job for w-2 after it went: not its issue, nor any step after.
    let created: Vec<_> = (jobs_created(&fake).into_iter())
        .filter(|(at, name)| *at >= deleted_at && name.contains("-w-2-"))
        .collect();
    assert!(
        created.is_empty(),
        "created for w-2 after it went: {created:#?}"
    );
    let w2 = report.node("w-2").ok_or("w-2 not in the report")?;
    let said = match what {
        WhileWaiting::Deleted => "was deleted from the cluster while the rolls were paused",
        WhileWaiting::Replaced => "was replaced",
    };
    assert!(
        matches!(
            &w2.result,
            Some(certs_driver::NodeResult::Interrupted { step: CaStep::Issue, why })
                if why.starts_with("node w-2 ") && why.contains(said)
                    && why.contains("`carotate issue` was not started on it")
        ),
        "w-2: {:?}",
        w2.result
    );
    assert!(
        w2.steps.iter().all(|(s, _)| *s != CaStep::Issue),
        "{:?}",
        w2.steps
    );
    let Outcome::Stopped { why } = &report.outcome else {
        return Err(format!("not stopped: {:?}", report.outcome).into());
    };
    assert!(why.contains("w-2"), "{why}");
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_node_deleted_while_paused_gets_no_job_after_the_resume() -> TestResult {
    a_node_deleted_while_paused(WhileWaiting::Deleted).await
}

#[tokio::test(start_paused = true)]
async fn a_node_replaced_while_paused_gets_no_job_after_the_resume() -> TestResult {
    a_node_deleted_while_paused(WhileWaiting::Replaced).await
}
