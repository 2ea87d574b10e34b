//! What a small roll costs in API calls, by verb, on the fake (issue 34): the reads that the
//! run's other reads and writes already make stay removed. Each bound is one the code before
//! that issue broke (in parentheses, per node, on this roll):
//!
//! - the Lease read once per stretch of writes between two waits, its renewal the read when
//!   due, not once per write and per Event (13 `get_lease` a node before);
//! - the node's condition written only when what `kubectl describe node` shows changes: the
//!   cordon said with the drain, the uncordon with the end (4 a node; 6 if written at every
//!   step);
//! - the node's first read the run's watch of every node, and the wait for its new boot
//!   watched from our last write (3 `get_node` a node before);
//! - a record that changes only the node's metadata written with the condition of the step it
//!   leads to, in one `PATCH nodes/NAME/status` (4 `patch_node` a node before: the launch
//!   record's and the host Job's went apart);
//! - the cordon said in the drain's Event, the new boot in the next step's (5 Events a node
//!   before).
//!
//! And the pause switch, read from those reads of the Lease, is still honoured where a step
//! begins after a wait: set while a host Job runs, the next step does not start until it is
//! lifted.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodejob_core::pause::{Pause, set_pause};
use nodejob_core::{Clock, Verb};
use nodejob_fake::FakeCluster;
use support::*;
use upgrade_driver::{EventSink, MaxUnavailable, Outcome, Progress, Skew, UpgradeStep, run};

/// The Lease both drivers share, by default.
const LEASE: &str = "nodejob";

/// Three workers in two zones, a Deployment of 3 behind a budget allowing one down, quick
/// hosts: the real control plane's roll of `e2e/bench`, on the fake.
fn three() -> (Arc<FakeCluster>, Vec<String>) {
    let (fake, names) = cluster(7, 0, &[("zone-a", 2), ("zone-b", 1)], 3);
    for name in &names {
        let mut host = fake.host(name).unwrap();
        host.timing = quick_host_timing();
        fake.set_host(name, host).unwrap();
    }
    (fake, names)
}

fn spec_for(names: &[String]) -> upgrade_driver::PlanSpec {
    let mut spec = plan_spec();
    spec.nodes = names.to_vec();
    spec.max_unavailable = MaxUnavailable::Count(1);
    spec.skew = Skew::Allow;
    spec
}

#[tokio::test(start_paused = true)]
async fn a_roll_reads_the_lease_once_a_stretch_of_writes_and_says_each_condition_once()
-> Result<(), Box<dyn std::error::Error>> {
    let (fake, names) = three();
    fake.sleep(Duration::from_secs(10)).await;
    let before = fake.calls().len();
    let report = run(&*fake, &plan(spec_for(&names)), Arc::new(Events::default())).await?;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    assert_eq!(report.totals.upgraded, 3, "{report:#?}");
    let mut by_verb: BTreeMap<Verb, usize> = BTreeMap::new();
    for call in &fake.calls()[before..] {
        *by_verb.entry(call.verb).or_default() += 1;
    }
    let n = names.len();
    let count = |verb| by_verb.get(&verb).copied().unwrap_or(0);
    // Per node: the cordon's, the launch record's, the host Job's record's, the Event after
    // the Job's delete, the uncordon's; and one a renewal not made by a write's read.
    assert!(
        count(Verb::GetLease) <= 6 * n,
        "the Lease read per write again: {by_verb:?}"
    );
    // Drain, Upgrade (with the launch record), Reboot (with the host Job's record),
    // Upgraded: through `nodes/status`.
    assert_eq!(
        count(Verb::PatchNodeConditions),
        4 * n,
        "a condition written that says what the last one said: {by_verb:?}"
    );
    // The cordon and the uncordon, which change the spec: the records of the launch and of
    // the host Job went with the condition of the step after them (6 writes of the node a node
    // in all, 8 before).
    assert_eq!(
        count(Verb::PatchNode),
        2 * n,
        "a record written apart from the condition it could go with: {by_verb:?}"
    );
    // Drain (with the cordon), Upgrade, Uncordon (with the new boot): 5 a node before.
    assert_eq!(
        count(Verb::CreateEvent),
        3 * n,
        "an Event of its own for a step said with the next: {by_verb:?}"
    );
    // The preflight's, right before the host Job.
    assert!(
        count(Verb::GetNode) <= n,
        "the node read where the watch has it: {by_verb:?}"
    );
    // The apiserver's version once, before any write: no control-plane node moves.
    assert_eq!(count(Verb::Version), 1, "{by_verb:?}");
    Ok(())
}

/// Progress with the virtual time each event was told at; the rolls paused as `at`'s step
/// `when` starts, lifted `after` later.
struct PauseAt {
    fake: Arc<FakeCluster>,
    events: Mutex<Vec<(Duration, Progress)>>,
    at: (String, UpgradeStep, Duration),
}

impl EventSink<Progress> for PauseAt {
    fn event(&self, event: &Progress) {
        self.events
            .lock()
            .unwrap()
            .push((self.fake.now(), event.clone()));
        let (node, when, after) = &self.at;
        if let Progress::StepStarted { node: n, step } = event
            && n == node
            && step == when
        {
            let (fake, after) = (self.fake.clone(), *after);
            tokio::spawn(async move {
                let pause = Pause {
                    by: "alice@console".into(),
                    at: None,
                    reason: "a change freeze".into(),
                };
                set_pause(&*fake, NS, LEASE, Some(&pause)).await.unwrap();
                fake.sleep(after).await;
                set_pause(&*fake, NS, LEASE, None).await.unwrap();
            });
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_pause_set_while_a_host_job_runs_holds_the_next_step_until_lifted()
-> Result<(), Box<dyn std::error::Error>> {
    let (fake, names) = three();
    fake.sleep(Duration::from_secs(10)).await;
    let first = names[0].clone();
    let sink = Arc::new(PauseAt {
        fake: fake.clone(),
        events: Mutex::new(Vec::new()),
        at: (
            first.clone(),
            UpgradeStep::Upgrade,
            Duration::from_secs(600),
        ),
    });
    let report = run(&*fake, &plan(spec_for(&names)), sink.clone()).await?;
    assert_eq!(report.outcome, Outcome::Done, "{report:#?}");
    let events = sink.events.lock().unwrap().clone();
    let at = |want: &dyn Fn(&Progress) -> bool| {
        (events.iter())
            .find(|(_, e)| want(e))
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("{events:#?}"))
    };
    let paused = at(&|e| {
        matches!(e, Progress::Paused { node, before, .. }
            if *node == first && *before == UpgradeStep::Reboot)
    });
    let resumed = at(&|e| {
        matches!(e, Progress::Resumed { node, before, .. }
            if *node == first && *before == UpgradeStep::Reboot)
    });
    let upgrade_done = at(&|e| {
        matches!(e, Progress::StepFinished { node, step, .. }
            if *node == first && *step == UpgradeStep::Upgrade)
    });
    let reboot = at(&|e| {
        matches!(e, Progress::StepStarted { node, step }
            if *node == first && *step == UpgradeStep::Reboot)
    });
    // The host Job ran to its end; the Reboot step began only once the switch was lifted.
    assert!(upgrade_done <= paused, "{events:#?}");
    assert!(resumed >= paused + Duration::from_secs(590), "{events:#?}");
    assert!(reboot >= resumed, "{events:#?}");
    let started_while_paused: Vec<_> = (events.iter())
        .filter(|(t, e)| matches!(e, Progress::StepStarted { .. }) && *t > paused && *t < resumed)
        .collect();
    assert!(started_while_paused.is_empty(), "{started_while_paused:#?}");
    Ok(())
}
