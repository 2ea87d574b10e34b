//! What the drivers' seeded soaks share: running each seed in a fresh paused current-thread
//! runtime (so it replays alone as it ran in the loop), seeds spread over the machine's cores,
//! a panic counted as a failure; the seeds a test runs, from the environment; the check
//! that nothing is written once the driver has read the Lease another holder took; and the
//! operator who pauses the rolls for a while ([`pausing_operator`]), with the window in which
//! no step may start.

use std::collections::BTreeSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// How long after the pause switch is set a step may still start: the driver reads the switch
/// with the Lease right before the step's first write, and that read may be answered just
/// before the switch lands.
pub const PAUSE_GRACE: Duration = Duration::from_secs(5);

/// The pause a seed draws, apart from every other draw of the seed (so schedules, crashes and
/// plans stay as they were): in half the seeds, `(after, lasting)`: the rolls are paused
/// `after` the start (0 to 10 minutes) for `lasting` (1 to 11 minutes).
pub fn pause_draw(seed: u64) -> Option<(Duration, Duration)> {
    let mixed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    if mixed % 2 == 1 {
        return None;
    }
    let after = Duration::from_secs((mixed >> 8) % 600);
    let lasting = Duration::from_secs(60 + (mixed >> 20) % 600);
    Some((after, lasting))
}

/// When the [`pausing_operator`] had the rolls paused, on the fake's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseWindow {
    /// When the call that set the switch was answered (it landed by then).
    pub set: Option<Duration>,
    /// When the operator began lifting it, with its first call: the switch cannot be lifted
    /// earlier, and a call that failed to the operator may still have landed.
    pub lifting: Option<Duration>,
}

impl PauseWindow {
    /// Whether a step that started `at` started while the rolls were paused: after the switch
    /// was set (and [`PAUSE_GRACE`] with it), before it was lifted.
    pub fn paused_at(&self, at: Duration) -> bool {
        let Some(set) = self.set else {
            return false;
        };
        at > set + PAUSE_GRACE && at < self.lifting.unwrap_or(Duration::MAX)
    }
}

/// The operator with the pause switch (`nodejob pause`, `nodejob resume`, on the drivers'
/// shared Lease [`LEASE`]): in the seeds [`pause_draw`] pauses, sets it `after` the drawn time
/// from `start` and lifts it `lasting` later, retrying each through the API faults armed then
/// (the switch is always lifted). Answers when the rolls were paused, as it goes.
pub fn pausing_operator(
    fake: &Arc<FakeCluster>,
    seed: u64,
    start: Duration,
) -> Arc<Mutex<PauseWindow>> {
    use nodejob_core::pause::{Pause, set_pause};
    let window = Arc::new(Mutex::new(PauseWindow::default()));
    let Some((after, lasting)) = pause_draw(seed) else {
        return window;
    };
    let (fake, said) = (fake.clone(), window.clone());
    tokio::spawn(async move {
        fake.sleep((start + after).saturating_sub(fake.now())).await;
        let pause = Pause {
            by: "operator".into(),
            at: Some(fake.wall_time()),
            reason: "the actor soak pulls the cord".into(),
        };
        let (ns, name) = LEASE;
        loop {
            if set_pause(&*fake, ns, name, Some(&pause)).await.is_ok() {
                said.lock().unwrap().set = Some(fake.now());
                break;
            }
            fake.sleep(Duration::from_secs(1)).await;
        }
        fake.sleep(lasting).await;
        said.lock().unwrap().lifting = Some(fake.now());
        while set_pause(&*fake, ns, name, None).await.is_err() {
            fake.sleep(Duration::from_secs(1)).await;
        }
    });
    window
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
