//! What the drivers' seeded soaks share: running each seed in a fresh paused current-thread
//! runtime (so it replays alone as it ran in the loop), seeds spread over the machine's cores,
//! a panic counted as a failure; the seeds a test runs, from the environment; and the check
//! that nothing is written once the driver has read the Lease another holder took.

use std::collections::BTreeSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::jiff::SignedDuration;
use nodejob_core::{Clock, Verb};
use nodejob_fake::FakeCluster;
use nodejob_fake::schedule::{Act, ActorSchedule, LEASE};

/// Runs `scenario(seed)` in a fresh paused runtime; a panic is a failure too.
pub fn run_seed<S, F, Fut>(seed: u64, scenario: &F) -> Result<S, String>
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<S, String>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| format!("building a runtime: {e}"))?;
    std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(scenario(seed)))).unwrap_or_else(
        |panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {what}"))
        },
    )
}

/// Runs `seeds` over the machine's cores: each seed's result, in seed order.
pub fn run_seeds<S, F, Fut>(
    seeds: std::ops::Range<u64>,
    scenario: F,
) -> Vec<(u64, Result<S, String>)>
where
    S: Send,
    F: Fn(u64) -> Fut + Sync,
    Fut: Future<Output = Result<S, String>>,
{
    let next = AtomicU64::new(seeds.start);
    let results = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= seeds.end {
                        return;
                    }
                    let result = run_seed(seed, &scenario);
                    results.lock().unwrap().push((seed, result));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(seed, _)| *seed);
    results
}

/// The number in environment variable `key`, if set.
pub fn env_u64(key: &str) -> Option<u64> {
    let value = std::env::var(key).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|e| panic!("{key}={value:?} is not a number: {e}")),
    )
}

/// The seeds to run and whether to tell each one's story: `NODEJOB_SEED=N` runs seed N alone,
/// verbosely; else `NODEJOB_SOAK_SEEDS` seeds from 0 (`default` when unset).
pub fn seeds(default: u64) -> (std::ops::Range<u64>, bool) {
    match env_u64("NODEJOB_SEED") {
        Some(seed) => (seed..seed + 1, true),
        None => (0..env_u64("NODEJOB_SOAK_SEEDS").unwrap_or(default), false),
    }
}

/// Whether a write made now follows the driver's reading of the Lease as another's: the
/// Lease is live and held by none of `ours`, and a Lease call of the driver's was answered
/// after the instant the schedule's actor took it. `Err` says why the write should not be.
/// An expired Lease is anyone's to take, so one held by another but expired is no loss.
pub fn lease_known_lost(
    fake: &FakeCluster,
    schedule: &ActorSchedule,
    ours: &BTreeSet<String>,
) -> Result<(), String> {
    let spec = (fake.lease(LEASE.0, LEASE.1)).and_then(|l| l.spec);
    let holder = (spec.as_ref())
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default();
    let live = (spec.as_ref())
        .and_then(|s| Some((s.renew_time.clone()?, s.lease_duration_seconds?)))
        .and_then(|(at, secs)| {
            at.0.checked_add(SignedDuration::from_secs(secs.into()))
                .ok()
        })
        .is_some_and(|until| until > fake.wall_time());
    if ours.contains(&holder) || holder.is_empty() || !live {
        return Ok(());
    }
    // When it was taken (the last theft by this holder), and whether the driver has read the
    // Lease since (a call answered after that instant).
    let now = fake.now();
    let Some(taken) = (schedule.acts.iter().rev())
        .find(|(at, act)| *at <= now && matches!(act, Act::StealLease(h) if *h == holder))
        .map(|(at, _)| *at)
    else {
        return Err(format!("the Lease is held by {holder}, who never took it"));
    };
    let read = (fake.calls().iter()).any(|c| {
        matches!(
            c.verb,
            Verb::GetLease | Verb::ReplaceLease | Verb::CreateLease
        ) && c.error.is_none()
            && c.at > taken
    });
    if read {
        return Err(format!(
            "written after the driver read the Lease held by {holder}"
        ));
    }
    Ok(())
}

/// What one passing seed did: each run's outcome in short, the API calls made, the virtual
/// time at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Each run's outcome, in short.
    pub runs: Vec<String>,
    /// API calls made.
    pub calls: usize,
    /// Virtual time at the end.
    pub took: std::time::Duration,
}

/// Ends a soak: tallies the runs of the passing seeds by `kind` of their outcome, prints the
/// figures under `title` (seeds, wall time, failures, outcomes, calls and virtual time per
/// seed) and each failing seed with `context(seed)` (its schedule), and fails the test naming
/// every failing seed.
pub fn conclude(
    title: &str,
    seeds: std::ops::Range<u64>,
    wall: std::time::Duration,
    results: &[(u64, Result<Summary, String>)],
    kind: impl Fn(&str) -> String,
    context: impl Fn(u64) -> String,
) {
    let mut tally: std::collections::BTreeMap<String, usize> = Default::default();
    let mut failures = Vec::new();
    let (mut calls, mut took) = (0, std::time::Duration::ZERO);
    for (seed, result) in results {
        match result {
            Ok(summary) => {
                calls += summary.calls;
                took += summary.took;
                for run in &summary.runs {
                    *tally.entry(kind(run)).or_default() += 1;
                }
            }
            Err(why) => failures.push(format!("seed {seed}: {why}\n{}", context(*seed))),
        }
    }
    // Every seed's outcomes, in seed order: what a restructuring must leave as it was. The
    // digest is printed; NODEJOB_SOAK_OUTCOMES=<file> writes them a line a seed, to compare.
    let outcomes: String = results
        .iter()
        .map(|(seed, result)| match result {
            Ok(summary) => format!("{seed} {}\n", summary.runs.join(" | ")),
            Err(_) => format!("{seed} FAILED\n"),
        })
        .collect();
    if let Some(path) = std::env::var_os("NODEJOB_SOAK_OUTCOMES") {
        std::fs::write(&path, &outcomes).expect("writing NODEJOB_SOAK_OUTCOMES");
    }
    let passed = (results.len() - failures.len()).max(1);
    println!(
        "{title}: outcomes digest {:016x} (NODEJOB_SOAK_OUTCOMES=<file> writes them a line a \
         seed)",
        fnv1a(outcomes.as_bytes())
    );
    println!(
        "{title}: {} seed(s) from {} in {wall:.1?}: {} failed; runs by outcome {tally:?}; per \
         passing seed {} API calls and {:.0?} of virtual time on average",
        results.len(),
        seeds.start,
        failures.len(),
        calls / passed,
        took / u32::try_from(passed).unwrap_or(u32::MAX),
    );
    for failure in &failures {
        println!("FAILED {failure}");
    }
    assert_eq!(
        results.len() as u64,
        seeds.end - seeds.start,
        "every seed ran"
    );
    assert!(
        failures.is_empty(),
        "{} of {} seed(s) failed (replay one with NODEJOB_SEED=<seed>):\n{}",
        failures.len(),
        results.len(),
        failures.join("\n")
    );
}

/// FNV-1a, 64 bits: a digest of the outcomes that needs no dependency and is stable across
/// runs and platforms.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
