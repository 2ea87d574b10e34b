//! The upgrade's **exhaustive actor soak** (`upgrade-driver/tests/every_write.rs`) run through
//! the controller: the same small roll and the same table of (write, action) pairs, but the
//! roll is a `NodeUpgrade` the controller reconciles. The actor acts right after write n of the
//! roll (the controller's writes of its own resource are neither counted nor checked);
//! `Restart` is the operator editing the resource toward a newer target, which the same
//! controller takes at a step boundary. After the disturbed life, each rerun is the operator's
//! fixes and an edit, the resource taken on by another replica, until it is `Ready` or stalled
//! in a way the actor explains (a node it moved to another version).
//!
//! The invariants of every write are the driver's soak's; the target they judge the host Jobs
//! and done records by follows the resource's, from the start of the run toward it (its
//! `Planned`, told through [`Controller::with_progress`]). At the end, as in the driver's: no
//! node we cordoned left cordoned without a record of why, and the host upgrade at most once
//! per node.
//!
//! # Running
//! - `cargo test -p nodejob-controller --test every_write`: every write, each with one action.
//! - The whole table: `NODEJOB_EVERY_WRITE_ALL=1 cargo test --release -p nodejob-controller
//!   --test every_write -- --nocapture`.
//! - One pair: `NODEJOB_SEED=<index> cargo test -p nodejob-controller --test every_write --
//!   --nocapture`.

#[allow(dead_code)]
#[path = "../../upgrade-driver/tests/acts/mod.rs"]
mod acts;
#[allow(dead_code)]
#[path = "../../upgrade-driver/tests/invariants/mod.rs"]
mod invariants;
#[path = "support/mod.rs"]
mod resource;
#[path = "../../upgrade-driver/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acts::*;
use nodejob_conformance::Crashing;
use nodejob_conformance::soak::Summary;
use nodejob_controller::{Controller, Planner};
use nodejob_core::Clock;
use nodejob_crd::{NodeUpgrade, NodeUpgradeSpec, Roll, RollApi};
use nodejob_fake::FakeCluster;
use resource::{End, edit, ended, resource, settings};
use support::TARGET;
use upgrade_driver::{Plan, Progress, Stop};

/// This binary, for the replay commands.
const BINARY: &str = "-p nodejob-controller --test every_write";

/// The table's plan toward the spec's `target`, under this replica's identity.
struct TablePlanner {
    table: Table,
    identity: &'static str,
}

impl Planner for TablePlanner {
    fn upgrade(&self, spec: &NodeUpgradeSpec) -> Result<Plan, String> {
        Ok(plan_for(self.table, self.identity, &spec.target))
    }
}

/// What one replica's life left to check.
struct Life {
    end: End,
    violations: Vec<String>,
    killed: BTreeMap<String, u32>,
    acted: Acted,
    writes: usize,
}

/// A replica under `identity` reconciles the resource until it says its run ended; the actor of
/// `pair` (if any) acts at its write. `wanted`: the resource's target, as the operator last
/// wrote it.
async fn life(
    fake: &Arc<FakeCluster>,
    table: Table,
    identity: &'static str,
    pair: Option<Pair>,
    wanted: &Arc<Mutex<String>>,
) -> Result<Life, String> {
    let target = wanted.lock().unwrap().clone();
    let mut at = at_write(fake, &target, pair);
    at.restart = {
        let (fake, wanted) = (fake.clone(), wanted.clone());
        Box::new(move || {
            *wanted.lock().unwrap() = NEWER.into();
            let fake = fake.clone();
            tokio::spawn(async move {
                let _ = edit(&fake, |spec| spec.target = NEWER.into()).await;
            });
        })
    };
    let api = Arc::new(Crashing::new(fake.clone(), at));
    // Each run judges by the target it was started toward: the one wanted at its start.
    let sink: Arc<dyn upgrade_driver::ProgressSink> = {
        let (api, wanted) = (api.clone(), wanted.clone());
        Arc::new(move |e: &Progress| {
            if let Progress::Planned { .. } = e {
                let wanted = wanted.lock().unwrap().clone();
                *api.observer().watch.target.lock().unwrap() = wanted;
            }
        })
    };
    let planner = Arc::new(TablePlanner { table, identity });
    let controller = Controller::new(api.clone(), planner, settings()).with_progress(sink);
    let stop = Stop::new();
    let (ran, end) = tokio::join!(controller.run(&stop), async {
        let end = ended(fake).await;
        stop.request();
        end
    });
    ran.map_err(|e| format!("the controller failed: {e}"))?;
    let end = end?;
    let observer = api.observer();
    Ok(Life {
        end,
        violations: observer.watch.violations.lock().unwrap().clone(),
        killed: observer.watch.killed.lock().unwrap().clone(),
        acted: std::mem::take(&mut *observer.acted.lock().unwrap()),
        writes: observer.seen.load(Ordering::SeqCst),
    })
}

/// A life's end in a line.
fn said(end: &End) -> String {
    match end {
        End::Stalled { reason, failed, .. } => format!("Stalled({reason}, {failed:?})"),
        end => format!("{end:?}"),
    }
}

/// Whether a stall is one the actor's re-versioning explains: refused by the version skew
/// policy (a control-plane node moved back takes the apiserver with it), refused naming a node
/// it moved (a downgrade), or failed naming only nodes it moved.
fn explained(end: &End, versioned: &BTreeSet<String>) -> bool {
    if versioned.is_empty() {
        return false;
    }
    match end {
        End::Stalled { reason, .. } if reason == "SkewRefused" => true,
        End::Stalled {
            reason, message, ..
        } if reason == "InvalidSpec" => versioned.iter().any(|n| message.contains(n)),
        End::Stalled { reason, failed, .. } if reason == "NodeFailed" => {
            !failed.is_empty() && failed.iter().all(|n| versioned.contains(n))
        }
        _ => false,
    }
}

/// The table's cluster, its kind installed, and the resource toward [`TARGET`] written half a
/// minute in; the target wanted.
async fn written(table: Table) -> Result<(Arc<FakeCluster>, Arc<Mutex<String>>), String> {
    let fake = build(table);
    fake.install_custom_kind(NodeUpgrade::KIND);
    fake.sleep(Duration::from_secs(30)).await;
    fake.create_roll(&resource(TARGET))
        .await
        .map_err(|e| e.to_string())?;
    Ok((fake, Arc::new(Mutex::new(TARGET.to_string()))))
}

/// How many writes the roll left alone makes through the controller.
async fn undisturbed(table: Table) -> Result<Summary, String> {
    let (fake, wanted) = written(table).await?;
    let life = life(&fake, table, IDENTITIES[0], None, &wanted).await?;
    // Under the long-roll policies z-1 is rolled back: the resource stalls naming it alone.
    let expected = match (table, &life.end) {
        (Table::Defaults, End::Ready) => true,
        (Table::LongRoll, End::Stalled { reason, failed, .. }) => {
            reason == "NodeFailed" && failed == &["z-1"]
        }
        _ => false,
    };
    if !expected {
        return Err(format!("the undisturbed roll: {:?}", life.end));
    }
    if !life.violations.is_empty() {
        return Err(format!(
            "the undisturbed roll broke: {:#?}",
            life.violations
        ));
    }
    Ok(Summary {
        runs: vec![said(&life.end)],
        calls: life.writes,
        took: fake.now(),
    })
}

async fn pair_run(table: Table, index: u64, verbose: bool) -> Result<Summary, String> {
    let pair = Pair::of(index);
    let (fake, wanted) = written(table).await?;
    let fail = |what: String, runs: &[String]| format!("{what}; lives: {runs:#?}");
    let mut runs = Vec::new();

    // The disturbed life.
    let first = life(&fake, table, IDENTITIES[0], Some(pair), &wanted).await?;
    let mut violations = first.violations;
    let mut killed = first.killed;
    let acted = first.acted;
    runs.push(said(&first.end));
    if verbose {
        println!("{pair:?} (on {:?}): {:?}", acted.node, first.end);
    }
    let mut last = first.end;
    for attempt in 1..=RERUNS {
        let done = matches!(last, End::Ready);
        if done || (attempt > 1 && explained(&last, &acted.versioned)) {
            break;
        }
        // The operator: fixes, then the edit that is the retry; another replica takes it on.
        let identity = IDENTITIES[attempt.min(IDENTITIES.len() - 1)];
        let target = wanted.lock().unwrap().clone();
        let lease = plan_for(table, identity, &target).spec().lease_duration;
        operator_fixes(&fake, lease).await;
        edit(&fake, |spec| {
            spec.deadline = Some(format!("{}h", 4 + attempt))
        })
        .await?;
        let next = life(&fake, table, identity, None, &wanted).await?;
        violations.extend(next.violations);
        for (node, n) in next.killed {
            *killed.entry(node).or_default() += n;
        }
        runs.push(said(&next.end));
        if verbose {
            println!("life {attempt} toward {target}: {:?}", next.end);
        }
        last = next.end;
    }
    if !violations.is_empty() {
        return Err(fail(format!("invariants broken: {violations:#?}"), &runs));
    }
    if !matches!(last, End::Ready) && !explained(&last, &acted.versioned) {
        return Err(fail(format!("not Ready after {RERUNS} reruns"), &runs));
    }
    left_as_said(&fake, &acted, &killed).map_err(|e| fail(e, &runs))?;
    Ok(Summary {
        runs,
        calls: fake.calls().len(),
        took: fake.now(),
    })
}

/// A life's end in a word, for the tally.
fn kind(life: &str) -> String {
    life.split(['(', ' ']).next().unwrap_or(life).to_string()
}

#[test]
fn an_actor_right_after_every_write_of_a_small_roll_through_the_controller_breaks_nothing() {
    every_write(Table::Defaults);
}

/// The same, under the long-roll policies: the soak's writes and waits, and a rollback's.
#[test]
fn an_actor_right_after_every_write_of_a_roll_that_soaks_and_rolls_back_through_the_controller() {
    every_write(Table::LongRoll);
}

fn every_write(t: Table) {
    table(
        "every write through the controller",
        BINARY,
        t,
        || undisturbed(t),
        |index, verbose| pair_run(t, index, verbose),
        kind,
    );
}
