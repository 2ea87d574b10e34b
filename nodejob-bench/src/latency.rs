//! Completion latency on the fake, in real (not paused) time: from the moment the Job's
//! finished status is written to the moment the runner function returns.
//!
//! The write happens inside the fake's driver task, so it is dated by the first party to see
//! it: a watcher of the Job started before the run (it is woken by the write itself, as the
//! runner's own wait is), or the run's own calls if they saw it first. The run goes through a
//! probe that notes when one of its calls first answered a finished Job.
//!
//! Each run has a cluster of its own (one node, its own driver task), so runs in flight at the
//! same time share the thread, not the fake's watch notifications.

use std::time::{Duration, Instant};

use nodejob_core::{Change, JobApi, finished};
use nodejob_fake::{Config, FakeCluster, NodeScript, Timing};

use crate::probe::Probe;
use crate::scenario::{Call, NAMESPACE, Waiter, scripted_argv, spec};

/// The node of every latency run.
const NODE: &str = "node-0";

/// How the runs of one latency measurement are laid out in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// One run after another, each host operation instant and every step of the cluster 1 ms:
    /// the runner's own latency, nothing else in flight.
    Serial,
    /// Run `i` starts at `i * spacing`, all in flight together; the cluster keeps its default
    /// timing and each host operation runs a time drawn uniformly from `[0, 5 s)`, so its end
    /// falls at any point of a poller's interval.
    Staggered {
        /// Between two starts.
        spacing: Duration,
    },
}

/// The latencies of `runs` runs of `call` waited for by `waiter`, laid out as `schedule` says,
/// in run order. Must run on a runtime whose time is not paused.
///
/// # Errors
/// The first run that failed, or that never saw its Job finished.
pub async fn measure(
    waiter: Waiter,
    call: Call,
    runs: usize,
    schedule: Schedule,
) -> anyhow::Result<Vec<Duration>> {
    match schedule {
        Schedule::Serial => {
            let mut out = Vec::with_capacity(runs);
            for i in 0..runs {
                out.push(one(waiter, call, i, Duration::ZERO, fast_timing()).await?);
            }
            Ok(out)
        }
        Schedule::Staggered { spacing } => {
            let mut draw = SplitMix(0x006e_6f64_656a_6f62);
            let tasks: Vec<_> = (0..runs)
                .map(|i| {
                    let start = spacing.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
                    let host = Duration::from_micros(draw.next() % 5_000_000);
                    tokio::spawn(async move {
                        tokio::time::sleep(start).await;
                        one(waiter, call, i, host, Timing::default()).await
                    })
                })
                .collect();
            let mut out = Vec::with_capacity(runs);
            for task in tasks {
                out.push(task.await??);
            }
            Ok(out)
        }
    }
}

/// Every step of the cluster 1 ms: a run takes a few ms of real time.
fn fast_timing() -> Timing {
    let ms = Duration::from_millis(1);
    Timing {
        pod_create: ms,
        container_start: ms,
        finish: ms,
        kill_delay: ms,
        pod_cleanup: ms,
        ..Timing::default()
    }
}

/// One run, on a cluster of its own, its host operation running `host`.
async fn one(
    waiter: Waiter,
    call: Call,
    i: usize,
    host: Duration,
    timing: Timing,
) -> anyhow::Result<Duration> {
    let fake = FakeCluster::with_config(Config {
        seed: i as u64,
        timing,
    });
    fake.add_node(NODE)?;
    fake.set_script(
        NODE,
        NodeScript {
            run_time: host,
            log: "done".into(),
            ..NodeScript::default()
        },
    );
    let name = format!("lat-{i}");
    let spec = spec(&name, NODE, scripted_argv(), Duration::from_secs(600));
    let observer = tokio::spawn(first_finished(
        fake.clone(),
        name.clone(),
        fake.resource_version(),
    ));
    let probe = Probe::new(&fake);
    waiter.run(&probe, &spec, call).await?;
    let returned = Instant::now();
    let seen_by_run = probe.finished_at();
    // Woken by the same write as the run's own wait, the watcher may not have run yet: let it.
    if !observer.is_finished() {
        tokio::task::yield_now().await;
    }
    let seen_by_watcher = if observer.is_finished() {
        observer.await?
    } else {
        observer.abort();
        None
    };
    let written = match (seen_by_run, seen_by_watcher) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a
            .or(b)
            .ok_or_else(|| anyhow::anyhow!("{name}: no one saw it finish"))?,
    };
    Ok(returned.saturating_duration_since(written))
}

/// The instant the Job `name` was first seen finished, watching from resourceVersion `since`.
async fn first_finished(fake: FakeCluster, name: String, since: String) -> Option<Instant> {
    let mut since = since;
    loop {
        match fake
            .wait_job(NAMESPACE, &name, Some(&since), Duration::from_secs(600))
            .await
        {
            Ok(Change::Applied(job)) if finished(&job) => return Some(Instant::now()),
            Ok(Change::Applied(job) | Change::Deleted(job)) => {
                since = job.metadata.resource_version.unwrap_or_default();
            }
            Ok(Change::TimedOut) | Err(_) => return None,
        }
    }
}

/// SplitMix64: a fixed, seeded stream of draws, so every bench run lays out the same runs.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
