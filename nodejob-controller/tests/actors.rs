//! The upgrade's seeded **actor soak** (`upgrade-driver/tests/actors.rs`), run through the
//! controller: the same seeds draw the same cluster, actors, crash and long-roll policies, but
//! the roll is a `NodeUpgrade` written once and reconciled, not a command run again and again.
//! The controller crashes at the drawn call of the drawn verb and another replica, under
//! another identity, takes the resource on from what the cluster says; where the driver's soak
//! runs the command again, the operator edits the resource (the controller retries a stalled
//! resource only when its spec changes): a new target for the seeds that retarget, `allowSkew`
//! once the skew policy refused, any other edit for a plain retry, after the same fixes
//! (`seed::operator_fixes`).
//!
//! Checked as in the driver's soak, each where the driver's soak checks it:
//! - at every write of the roll (the resource's own status writes aside): invariants 1-4, 6
//!   and 7 (`invariants::Watch`);
//! - at the start of every batch, through the controller's progress
//!   ([`Controller::with_progress`]): 5 (the batch and the nodes down within `maxUnavailable`)
//!   and 8 (the version skew policy);
//! - 9: no node starts while the rolls are paused;
//! - 11: as each node's result is told, the cluster agrees with it; and once the resource says
//!   `Ready`, no node keeps our record;
//! - as the resource says a run ended: a stall on a node failure names the node;
//! - at the end: the resource `Ready` (or stalled only on nodes rolled back out of band), and
//!   12, the host upgrade at most once per node.
//!
//! # Running
//! - `cargo test -p nodejob-controller --test actors`: seeds 0 to 31, both policy sets.
//! - The soak: `NODEJOB_SOAK_SEEDS=1000 cargo test --release -p nodejob-controller --test
//!   actors -- --nocapture` prints the tally and each failing seed with its schedule.
//! - One seed: `NODEJOB_SEED=17 cargo test -p nodejob-controller --test actors --
//!   --nocapture`.

#[allow(dead_code)]
#[path = "../../upgrade-driver/tests/invariants/mod.rs"]
mod invariants;
#[path = "support/mod.rs"]
mod resource;
#[allow(dead_code)]
#[path = "../../upgrade-driver/tests/seed/mod.rs"]
mod seed;
#[path = "../../upgrade-driver/tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use invariants::{Watch, check_done, check_node};
use nodejob_conformance::soak::{Summary, pausing_operator};
use nodejob_conformance::{Crashing, Observe, Write};
use nodejob_controller::{Controller, Planner};
use nodejob_core::Clock;
use nodejob_crd::{NodeUpgrade, NodeUpgradeSpec, Roll, RollApi};
use resource::{End, edit, ended, resource, settings};
use seed::*;
use support::*;
use upgrade_driver::{EventSink, Plan, Progress, Skew, Stop, UpgradeStep};

/// Seeds run by `cargo test`.
const SEEDS: u64 = 32;

/// The seed's plans, as the command would read them from the resource: the drawn plan toward
/// the spec's `target`, under this replica's identity, keeping the skew policy unless the spec
/// allows skew. Every other field of the spec is the operator's edit and plans nothing.
struct SeedPlanner {
    draws: Draws,
    policies: Policies,
    identity: &'static str,
}

impl Planner for SeedPlanner {
    fn upgrade(&self, spec: &NodeUpgradeSpec) -> Result<Plan, String> {
        let skew = if spec.allow_skew {
            Skew::Allow
        } else {
            Skew::Enforce
        };
        Ok(plan_for(
            &self.draws,
            &self.policies,
            self.identity,
            &spec.target,
            skew,
        ))
    }
}

/// The invariants of the roll's writes: the resource's own status and finalizer writes are the
/// controller's, not the roll's (it says who holds the Lease while another does).
struct RollWrites(Watch);

impl Observe for RollWrites {
    fn before(&self, write: &Write) {
        if write.verb.api() != "CustomApi" {
            self.0.before(write);
        }
    }
    fn after(&self, write: &Write) {
        if write.verb.api() != "CustomApi" {
            self.0.after(write);
        }
    }
}

async fn scenario(seed: u64, verbose: bool, policies: &Policies) -> Result<Summary, String> {
    let draws = Draws::draw(seed);
    if verbose {
        println!("seed {seed}: {draws:#?}\nschedule:\n{}", draws.actors);
    }
    let (fake, names) = build(seed, &draws)?;
    fake.install_custom_kind(NodeUpgrade::KIND);
    if let Some((node, fault)) = policies.faulty(&names) {
        let host = fake.host(node).ok_or(format!("no host on {node}"))?;
        fake.set_host(node, host.with_fault(fault))
            .map_err(|e| e.to_string())?;
    }
    fake.sleep(Duration::from_secs(30)).await;
    let start = fake.now();
    let shifted = arm(&fake, &draws);
    let pauses = pausing_operator(&fake, seed, start);
    fake.create_roll(&resource(TARGET))
        .await
        .map_err(|e| e.to_string())?;
    let identities = ["controller-a", "controller-b", "controller-c"];
    let versioned = draws.versioned();
    let rolled_back = draws.rolled_back(policies, &names);
    let mut killed: BTreeMap<String, u32> = BTreeMap::new();
    let mut lives = Vec::new();
    let mut violations = Vec::new();
    let mut done = false;
    let starts: Arc<Mutex<Vec<(Duration, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut target = TARGET;
    let mut skew = Skew::Enforce;
    for attempt in 0..RUNS {
        if attempt > 0 {
            // The operator's fixes before the later runs, then the edit that is the retry.
            if attempt >= 2 {
                operator_fixes(&fake, &shifted, start, policies, &names).await;
            }
            if draws.retarget {
                target = OTHER_TARGET;
            }
            let allow_skew = skew == Skew::Allow;
            edit(&fake, |spec| {
                spec.target = target.into();
                spec.allow_skew = allow_skew;
                spec.deadline = Some(format!("{}h", 4 + attempt));
            })
            .await?;
        }
        let identity = identities[attempt.min(identities.len() - 1)];
        let mut api = Crashing::new(
            fake.clone(),
            RollWrites(draws.watch(&fake, target, &identities, &shifted)),
        );
        let crash = draws.crash.clone().filter(|_| attempt == 0);
        if let Some(c) = &crash {
            api = api.crashing_at_verb(c.verb, c.nth, c.after);
        }
        let api = Arc::new(api);
        // Invariant 5 is over the nodes of the run's plan: a replica runs again (after a
        // wait on the Lease, the pause switch, a blocked node) and each run selects anew, so
        // the check's nodes are read at each run's start (its `Planned`, told before any
        // batch starts).
        let batches = Arc::new(Mutex::new(BatchCheck {
            fake: fake.clone(),
            nodes: Vec::new(),
            width: draws.max_unavailable as usize,
            violations: Mutex::new(Vec::new()),
        }));
        let skews = Arc::new(SkewCheck {
            fake: fake.clone(),
            target: target.to_string(),
            skew,
            violations: Mutex::new(Vec::new()),
        });
        let told: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
        let sink: Arc<dyn upgrade_driver::ProgressSink> = {
            let (batches, skews, starts) = (batches.clone(), skews.clone(), starts.clone());
            let (fake, told, versioned) = (fake.clone(), told.clone(), versioned.clone());
            let draws = draws.clone();
            Arc::new(move |e: &Progress| {
                if let Progress::Planned { .. } = e {
                    let mut check = batches.lock().unwrap();
                    let before = std::mem::take(&mut *check.violations.lock().unwrap());
                    told.lock().unwrap().extend(before);
                    check.nodes = draws.plan_nodes(&fake);
                }
                batches.lock().unwrap().event(e);
                skews.event(e);
                match e {
                    Progress::StepStarted {
                        node,
                        step: UpgradeStep::Cordon,
                    } => starts.lock().unwrap().push((fake.now(), node.clone())),
                    Progress::NodeFinished { node, result, .. } => {
                        if let Err(e) = check_node(&fake, node, result, &versioned) {
                            told.lock().unwrap().push(format!("11: {e}"));
                        }
                    }
                    _ => {}
                }
            })
        };
        let planner = Arc::new(SeedPlanner {
            draws: draws.clone(),
            policies: policies.clone(),
            identity,
        });
        let controller =
            Controller::new(api.clone(), planner, settings()).with_progress(sink.clone());
        // The replica runs until the resource says its run ended (then it is stopped), or
        // until it crashes: gone, its calls never answered, and its run with it.
        let stop = Stop::new();
        let life = async {
            let (ran, end) = tokio::join!(controller.run(&stop), async {
                let end = ended(&fake).await;
                stop.request();
                end
            });
            ran.map_err(|e| format!("life {attempt}: the controller failed: {e}"))?;
            end
        };
        let end = tokio::select! {
            end = life => Some(end?),
            () = api.crashed() => None,
        };
        drop(controller);
        violations.extend(api.observer().0.violations.lock().unwrap().clone());
        violations.extend(batches.lock().unwrap().violations.lock().unwrap().clone());
        violations.extend(skews.violations.lock().unwrap().clone());
        violations.extend(told.lock().unwrap().clone());
        for (node, n) in api.observer().0.killed.lock().unwrap().iter() {
            *killed.entry(node.clone()).or_default() += n;
        }
        let Some(end) = end else {
            lives.push(format!("crashed at {crash:?}"));
            continue;
        };
        lives.push(match &end {
            End::Stalled { reason, failed, .. } => format!("Stalled({reason:?}, {failed:?})"),
            end => format!("{end:?}"),
        });
        if verbose {
            println!("life {attempt} at {:?}: {end:?}", fake.now());
        }
        match end {
            End::Ready => {
                if let Err(e) = check_done(&fake) {
                    violations.push(format!("11: {e}"));
                }
                if attempt >= 2 {
                    done = true;
                    break;
                }
            }
            End::Stalled { reason, failed, .. } => {
                // The status says why it stalled: a node failure names the node.
                if reason == "NodeFailed" && failed.is_empty() {
                    violations.push(format!(
                        "life {attempt}: stalled on a node failure naming none"
                    ));
                }
                if reason == "SkewRefused" {
                    skew = Skew::Allow;
                }
                // Rolled back out of band after our upgrade: failed and named, as it must be.
                let named = !failed.is_empty() && failed.iter().all(|n| rolled_back.contains(n));
                if reason == "NodeFailed" && named && attempt >= 2 {
                    done = true;
                    break;
                }
            }
            End::Blocked(nodes) => {
                if verbose {
                    println!("blocked: {nodes:?}");
                }
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
        runs: lives,
    }
    .judged()
}

/// A life's end in a word, for the tally.
fn kind(life: &str) -> String {
    life.split(['(', ' ']).next().unwrap_or(life).to_string()
}

#[test]
fn seeded_actor_schedules_through_the_controller_keep_every_invariant_and_every_roll_finishes() {
    soak(
        "actor soak through the controller",
        SEEDS,
        false,
        |seed, verbose, policies| async move { scenario(seed, verbose, &policies).await },
        kind,
    );
}

/// The same seeds under long-roll policies drawn for each.
#[test]
fn seeded_actor_schedules_through_the_controller_under_the_long_roll_policies() {
    soak(
        "actor soak through the controller (long-roll policies)",
        SEEDS,
        true,
        |seed, verbose, policies| async move { scenario(seed, verbose, &policies).await },
        kind,
    );
}

#[test]
fn an_actor_seed_through_the_controller_replays_exactly() {
    let scenario = |seed| async move { scenario(seed, false, &Policies::draw(seed)).await };
    let first = nodejob_conformance::soak::run_seed(5, &scenario);
    let second = nodejob_conformance::soak::run_seed(5, &scenario);
    assert_eq!(first, second);
}
