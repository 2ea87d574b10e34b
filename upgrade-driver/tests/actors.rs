//! The seeded **actor soak**: a roll runs while people, nodes and other controllers change the
//! cluster under it ([`nodejob_fake::schedule`]: cordons and uncordons, labels moving nodes in
//! and out of the selection, nodes deleted, added, rebooting by themselves, flapping, reporting
//! another version; budgets created, changed, deleted; Deployments created; Pods deleted; the
//! Lease taken by another holder; API faults), and the driver itself crashes before a drawn
//! call of a drawn verb and is resumed under another identity. Every write is checked against
//! the invariants below as it is made; each run's report against the cluster; the last run
//! must finish the roll once the actors are done and an operator removed the budgets they
//! left.
//!
//! # Invariants, checked at every write of the driver ([`Watch`])
//! 1. A host upgrade Job is created only on a cordoned node with no evictable Pod on it, and
//!    with no other host Pod live on it.
//! 2. At most `max_unavailable` nodes taken down (cordoned by us, or NotReady), and at most
//!    one control-plane node, over the nodes no actor touched (cordoned, uncordoned, flapped,
//!    rebooted, re-versioned, deleted or added: their state is not the driver's doing alone).
//! 3. An uncordon is only of a node our record says we cordoned.
//! 4. The done record is written only on a node that reports the target.
//! 5. At the start of every batch (its `BatchStarted` event, sent with no await after the
//!    driver's read of the nodes), over every node of the plan, touched or not: the nodes
//!    unavailable then and the batch are at most `max_unavailable`, and a control-plane node
//!    starts only while no other one is down.
//! 6. No write of any kind once the driver has read the Lease as another holder's (a Lease
//!    call after the theft), until it holds the Lease again.
//! 7. A node labelled quarantined is never uncordoned by us.
//!
//! And at the start of every batch of a run that keeps the version skew policy (until one is
//! refused by it: the operator then allows skew), 8: its nodes' move breaks no rule of the
//! policy against the apiserver's version then ([`SkewCheck`]).
//!
//! Invariant 1 holds for the rollback's host Job too.
//!
//! And 9: no node starts (its Cordon step) while the rolls are paused: in half the seeds an
//! operator pauses them ([`nodejob_core::pause`]) and lifts the switch minutes later
//! ([`pausing_operator`]), across runs, crashes and the Lease's thefts.
//!
//! # At the end of each run and of the seed
//! 10. The run ends within its bound.
//! 11. The report agrees with the cluster: a node reported upgraded has no in-progress record
//!     and carries the done record (if it still exists); a node failed or interrupted after it
//!     was marked keeps our record (if it still exists); a `Done` run leaves no record anywhere.
//! 12. The host upgrade ran at most once per node (deleted nodes included, by their retired
//!     host models), and exactly once on every node the last run reports upgraded.
//!
//! # Under the long-roll policies
//! Each seed runs twice: once with the plan's defaults (the digest of that soak changes only
//! when default behaviour does), and once under long-roll policies drawn for it from a stream
//! of its own (so the cluster, the actors and the crash are the same): `on_undrainable` skip
//! or quarantine with `max_blocked` 0 to 2; a soak of 1 to 5 minutes or none; `on_failure`
//! stop or rollback, with a host fault on one node (its upgrade fails, it boots the old
//! version, or it is unhealthy) half the time. The operator of the last runs then also fixes
//! that host and removes the quarantine labels. The report check gains: a node reported blocked
//! carries the blocked record and not ours, a quarantined one is still labelled; a node failed
//! or stopped at its soak carries the soak record; a node reported rolled back is at the version
//! it was rolled back to, and not ours.
//!
//! # Running
//! - `cargo test -p upgrade-driver --test actors`: seeds 0 to 63.
//! - The soak, in `.ci/run`: `NODEJOB_SOAK_SEEDS=1000 cargo test --release -p upgrade-driver
//!   --test actors -- --nocapture` prints the tally and each failing seed with its schedule.
//! - One seed, its schedule and each run's report: `NODEJOB_SEED=17 cargo test -p
//!   upgrade-driver --test actors -- --nocapture`.

mod invariants;
mod seed;
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use invariants::{check_report, short};
use nodejob_conformance::Crashing;
use nodejob_conformance::soak::{Summary, pausing_operator};
use nodejob_core::Clock;
use seed::*;
use support::*;
use upgrade_driver::EventSink;
use upgrade_driver::skew;
use upgrade_driver::{Outcome, Report, Skew, UpgradeStep, run};

/// Seeds run by `cargo test`.
const SEEDS: u64 = 64;

/// Whether a run was refused, or stopped, by the version skew policy.
fn refused_by_the_skew_policy(result: &Result<Report, upgrade_driver::Error>) -> bool {
    match result {
        Err(upgrade_driver::Error::Plan(p)) => p.field == "skew",
        Ok(r) => matches!(&r.outcome, Outcome::Stopped { why } if why.contains(skew::POLICY)),
        Err(_) => false,
    }
}

// ---- one seed ----

async fn scenario(seed: u64, verbose: bool, policies: &Policies) -> Result<Summary, String> {
    let draws = Draws::draw(seed);
    if verbose {
        println!("seed {seed}: {draws:#?}\nschedule:\n{}", draws.actors);
    }
    let (fake, names) = build(seed, &draws)?;
    if let Some((node, fault)) = policies.faulty(&names) {
        let host = fake.host(node).ok_or(format!("no host on {node}"))?;
        fake.set_host(node, host.with_fault(fault))
            .map_err(|e| e.to_string())?;
    }
    fake.sleep(Duration::from_secs(30)).await;
    let start = fake.now();
    let shifted = arm(&fake, &draws);
    let pauses = pausing_operator(&fake, seed, start);
    let identities = ["driver-a", "driver-b", "driver-c"];
    let versioned = draws.versioned();
    let mut killed: BTreeMap<String, u32> = BTreeMap::new();
    let rolled_back = draws.rolled_back(policies, &names);
    let mut runs = Vec::new();
    let mut violations = Vec::new();
    let mut done = false;
    // Each node's start (its Cordon step), with when: none may fall while paused.
    let starts: Arc<Mutex<Vec<(Duration, String)>>> = Arc::new(Mutex::new(Vec::new()));
    // The version skew policy is kept until a run is refused by it (an actor made a node, or
    // the control plane, report a version the target cannot follow): the operator then
    // allows skew for the runs after.
    let mut skew = Skew::Enforce;
    for attempt in 0..RUNS {
        let identity = identities[attempt.min(identities.len() - 1)];
        let target = if draws.retarget && attempt > 0 {
            OTHER_TARGET
        } else {
            TARGET
        };
        let plan = plan_for(&draws, policies, identity, target, skew);
        if attempt > 0 {
            // A rerun under another identity: the previous holder's Lease expires first.
            fake.sleep(plan.spec().lease_duration + Duration::from_secs(5))
                .await;
        }
        if attempt >= 2 {
            operator_fixes(&fake, &shifted, start, policies, &names).await;
        }
        let mut api = Crashing::new(
            fake.clone(),
            draws.watch(&fake, target, &identities, &shifted),
        );
        let batches = Arc::new(BatchCheck {
            fake: fake.clone(),
            nodes: draws.plan_nodes(&fake),
            width: draws.max_unavailable as usize,
            violations: Mutex::new(Vec::new()),
        });
        let skews = Arc::new(SkewCheck {
            fake: fake.clone(),
            target: target.to_string(),
            skew,
            violations: Mutex::new(Vec::new()),
        });
        let sinks: Arc<dyn upgrade_driver::ProgressSink> = {
            let (batches, skews, starts) = (batches.clone(), skews.clone(), starts.clone());
            let fake = fake.clone();
            Arc::new(move |e: &upgrade_driver::Progress| {
                batches.event(e);
                skews.event(e);
                if let upgrade_driver::Progress::StepStarted {
                    node,
                    step: UpgradeStep::Cordon,
                } = e
                {
                    starts.lock().unwrap().push((fake.now(), node.clone()));
                }
            })
        };
        let crash = draws.crash.clone().filter(|_| attempt == 0);
        if let Some(c) = &crash {
            api = api.crashing_at_verb(c.verb, c.nth, c.after);
        }
        let result = tokio::select! {
            result = tokio::time::timeout(RUN_BOUND, run(&api, &plan, sinks)) => {
                match result {
                    Ok(result) => Some(result),
                    Err(_) => return Err(format!("run {attempt} did not end within {RUN_BOUND:?}; runs {runs:#?}")),
                }
            }
            _ = api.crashed() => None,
        };
        violations.extend(api.observer().violations.lock().unwrap().clone());
        violations.extend(batches.violations.lock().unwrap().clone());
        violations.extend(skews.violations.lock().unwrap().clone());
        for (node, n) in api.observer().killed.lock().unwrap().iter() {
            *killed.entry(node.clone()).or_default() += n;
        }
        let Some(result) = result else {
            runs.push(format!("crashed at {:?}", crash));
            continue;
        };
        runs.push(short(&result));
        if refused_by_the_skew_policy(&result) {
            skew = Skew::Allow;
        }
        if verbose {
            println!("run {attempt} at {:?}: {result:#?}", fake.now());
        }
        if let Ok(report) = &result {
            check_report(&fake, report, &versioned)
                .map_err(|e| format!("run {attempt}: {e}; runs {runs:#?}"))?;
            if report.outcome == Outcome::Done && attempt >= 2 {
                done = true;
                break;
            }
            let failed: Vec<&str> = (report.nodes.iter())
                .filter(|n| n.failure().is_some())
                .map(|n| n.name.as_str())
                .collect();
            let named_rollbacks = matches!(report.outcome, Outcome::Failed { .. })
                && failed.iter().all(|n| rolled_back.contains(*n));
            if named_rollbacks && attempt >= 2 {
                // Rolled back out of band after our upgrade: failed and named, as it must be.
                done = true;
                break;
            }
        }
    }
    let starts = starts.lock().unwrap().clone();
    Ended {
        fake: &fake,
        names: &names,
        draws: &draws,
        policies,
        killed: &killed,
        starts: &starts,
        paused: *pauses.lock().unwrap(),
        violations,
        done,
        runs,
    }
    .judged()
}

#[test]
fn seeded_actor_schedules_keep_every_invariant_and_every_roll_finishes() {
    soak(
        "actor soak",
        SEEDS,
        false,
        |seed, verbose, policies| async move { scenario(seed, verbose, &policies).await },
        kind,
    );
}

/// The same seeds under long-roll policies drawn for each (see the module docs).
#[test]
fn seeded_actor_schedules_under_the_long_roll_policies_keep_every_invariant() {
    soak(
        "actor soak (long-roll policies)",
        SEEDS,
        true,
        |seed, verbose, policies| async move { scenario(seed, verbose, &policies).await },
        kind,
    );
}

#[test]
fn an_actor_seed_replays_exactly() {
    let policies = Policies::draw(5);
    for policies in [Policies::default(), policies] {
        let scenario = |seed| {
            let policies = policies.clone();
            async move { scenario(seed, false, &policies).await }
        };
        let first = nodejob_conformance::soak::run_seed(5, &scenario);
        let second = nodejob_conformance::soak::run_seed(5, &scenario);
        assert_eq!(first, second);
    }
}
