//! The **exhaustive actor soak** (issue 30): an actor at every write. The seeded actor soak
//! (`tests/actors.rs`) has actors act at random instants; the defects it cannot reach live in
//! the instants between two of the driver's own writes, or right after one of its waits. Here
//! a small roll (three nodes: `cp-0`, workers `z-0` and `z-1`, selected by label; two replicas
//! behind a budget allowing one disruption, with a fourth node `z-2` outside the selection for
//! them to go to) is run once undisturbed and its writes counted,
//! 1..N; then, for each write n and each [`Action`], the same roll runs again with that action
//! done to the cluster right after write n was served (synchronously, before the driver's next
//! call), with every invariant of `tests/actors.rs` checked at every write ([`Watch`]).
//!
//! After the disturbed run an operator reruns the roll (under another identity, once the
//! Lease could have expired, the budgets and the pause the actors left removed) until it ends:
//! each run's report is checked against the cluster, and at the end the roll must be done, or
//! refused or failed naming only a node an actor moved to another version. At the end too: no
//! node we cordoned is left cordoned without a record saying why (ours, the blocked record or
//! the quarantine label), and the host upgrade ran at most once per node but for a retry of one
//! recorded killed, a rerun toward another target, or a node an actor moved back.
//!
//! # Running
//! - `cargo test -p upgrade-driver --test every_write`: every write, each with one action
//!   (rotating through them, so each action meets writes all along the roll).
//! - The whole table, in `.ci/run`: `NODEJOB_EVERY_WRITE_ALL=1 cargo test --release -p
//!   upgrade-driver --test every_write -- --nocapture` prints the count of runs, the wall
//!   time, and each failing (write, action) pair with its replay command.
//! - One pair, its story: `NODEJOB_SEED=<index> cargo test -p upgrade-driver --test every_write
//!   -- --nocapture` (the index a failure names).

mod acts;
mod invariants;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use acts::*;
use invariants::{check_report, short};
use nodejob_conformance::Crashing;
use nodejob_conformance::soak::Summary;
use nodejob_core::Clock;
use nodejob_fake::FakeCluster;
use support::*;
use upgrade_driver::{Outcome, Plan, Report, run_until, skew};

/// One run through `api`, at most [`RUN_BOUND`].
async fn one_run(
    api: &Crashing<FakeCluster, AtWrite>,
    plan: &Plan,
) -> Result<Result<Report, upgrade_driver::Error>, String> {
    let stop = api.observer().stop.clone();
    let running = run_until(api, plan, upgrade_driver::quiet(), &stop);
    tokio::time::timeout(RUN_BOUND, running)
        .await
        .map_err(|_| format!("a run did not end within {RUN_BOUND:?}"))
}

/// How many writes the undisturbed roll makes.
async fn undisturbed(table: Table) -> Result<Summary, String> {
    let fake = build(table);
    fake.sleep(Duration::from_secs(30)).await;
    let api = Crashing::new(fake.clone(), at_write(&fake, TARGET, None));
    let report = one_run(&api, &plan_for(table, IDENTITIES[0], TARGET))
        .await?
        .map_err(|e| e.to_string())?;
    // Under the long-roll policies z-1 is rolled back: the roll fails naming it alone.
    let expected = match table {
        Table::Defaults => report.outcome == Outcome::Done,
        Table::LongRoll => {
            matches!(&report.outcome, Outcome::Failed { nodes, .. } if nodes == &["z-1"])
        }
    };
    if !expected {
        return Err(format!("the undisturbed roll: {report:#?}"));
    }
    let violations = api.observer().watch.violations.lock().unwrap().clone();
    if !violations.is_empty() {
        return Err(format!("the undisturbed roll broke: {violations:#?}"));
    }
    Ok(Summary {
        runs: vec![short(&Ok(report))],
        calls: api.observer().seen.load(Ordering::SeqCst),
        took: fake.now(),
    })
}

/// Whether a run's end is one an actor's re-versioning explains: refused or stopped by the
/// version skew policy (a control-plane node moved back takes the apiserver with it), refused
/// as a downgrade, or failed naming only nodes it moved.
fn explained(result: &Result<Report, upgrade_driver::Error>, versioned: &BTreeSet<String>) -> bool {
    if versioned.is_empty() {
        return false;
    }
    match result {
        Err(upgrade_driver::Error::Plan(p)) if p.field == "skew" => true,
        Err(upgrade_driver::Error::Plan(p)) => versioned.iter().any(|n| p.rule.contains(n)),
        Ok(r) if matches!(&r.outcome, Outcome::Stopped { why } if why.contains(skew::POLICY)) => {
            true
        }
        Ok(r) => {
            let failed: Vec<&str> = (r.nodes.iter())
                .filter(|n| n.failure().is_some())
                .map(|n| n.name.as_str())
                .collect();
            matches!(r.outcome, Outcome::Failed { .. })
                && failed.iter().all(|n| versioned.contains(*n))
        }
        Err(_) => false,
    }
}

async fn pair_run(table: Table, index: u64, verbose: bool) -> Result<Summary, String> {
    let pair = Pair::of(index);
    let fake = build(table);
    fake.sleep(Duration::from_secs(30)).await;
    let mut runs = Vec::new();
    let mut violations = Vec::new();
    let mut killed: BTreeMap<String, u32> = BTreeMap::new();
    let fail = |what: String, runs: &[String]| format!("{what}; runs: {runs:#?}");

    // The disturbed run.
    let api = Crashing::new(fake.clone(), at_write(&fake, TARGET, Some(pair)));
    let first = one_run(&api, &plan_for(table, IDENTITIES[0], TARGET)).await?;
    let observer = api.observer();
    violations.extend(observer.watch.violations.lock().unwrap().clone());
    killed.extend(observer.watch.killed.lock().unwrap().clone());
    let acted = std::mem::take(&mut *observer.acted.lock().unwrap());
    runs.push(short(&first));
    if verbose {
        println!("{pair:?} (on {:?}): {first:#?}", acted.node);
    }
    if let Ok(report) = &first {
        check_report(&fake, report, &acted.versioned)
            .map_err(|e| fail(format!("run 0: {e}"), &runs))?;
    }
    let mut last = first;
    // Stopped, another run at once toward a newer target; else the operator's reruns.
    let mut target = TARGET;
    for attempt in 1..=RERUNS {
        let done = matches!(&last, Ok(r) if r.outcome == Outcome::Done && target == TARGET)
            || matches!(&last, Ok(r) if r.outcome == Outcome::Done && attempt > 1);
        if done || (attempt > 1 && explained(&last, &acted.versioned)) {
            break;
        }
        let identity = IDENTITIES[attempt.min(IDENTITIES.len() - 1)];
        if acted.stopped && attempt == 1 {
            target = NEWER;
        } else {
            let lease = plan_for(table, identity, target).spec().lease_duration;
            operator_fixes(&fake, lease).await;
        }
        let api = Crashing::new(fake.clone(), at_write(&fake, target, None));
        let result = one_run(&api, &plan_for(table, identity, target)).await?;
        violations.extend(api.observer().watch.violations.lock().unwrap().clone());
        for (node, n) in api.observer().watch.killed.lock().unwrap().iter() {
            *killed.entry(node.clone()).or_default() += n;
        }
        runs.push(short(&result));
        if verbose {
            println!("run {attempt} toward {target}: {result:#?}");
        }
        if let Ok(report) = &result {
            check_report(&fake, report, &acted.versioned)
                .map_err(|e| fail(format!("run {attempt}: {e}"), &runs))?;
        }
        last = result;
    }
    if !violations.is_empty() {
        return Err(fail(format!("invariants broken: {violations:#?}"), &runs));
    }
    let done = matches!(&last, Ok(r) if r.outcome == Outcome::Done);
    if !done && !explained(&last, &acted.versioned) {
        return Err(fail(format!("not done after {RERUNS} reruns"), &runs));
    }
    left_as_said(&fake, &acted, &killed).map_err(|e| fail(e, &runs))?;
    Ok(Summary {
        runs,
        calls: fake.calls().len(),
        took: fake.now(),
    })
}

/// This binary, for the replay commands.
const BINARY: &str = "-p upgrade-driver --test every_write";

#[test]
fn an_actor_right_after_every_write_of_a_small_roll_breaks_no_invariant() {
    every_write(Table::Defaults);
}

/// The same, under the long-roll policies: the soak's writes and waits, and a rollback's.
#[test]
fn an_actor_right_after_every_write_of_a_roll_that_soaks_and_rolls_back_breaks_no_invariant() {
    every_write(Table::LongRoll);
}

fn every_write(t: Table) {
    table(
        "every write",
        BINARY,
        t,
        || undisturbed(t),
        |index, verbose| pair_run(t, index, verbose),
        kind,
    );
}
