//! The request counts the table prints are exact, so they are pinned here: the runner's calls
//! per run do not grow with the host operation's duration, the polling baseline's do.

use std::time::Duration;

use nodejob_bench::requests::{Counts, count};
use nodejob_bench::scenario::{Call, Waiter};
use nodejob_core::POLL_INTERVAL;
use nodejob_fake::Verb;

const SECOND: Duration = Duration::from_secs(1);
const HALF_HOUR: Duration = Duration::from_secs(30 * 60);

fn counts(calls: &[(Verb, usize)]) -> Counts {
    calls.iter().copied().collect()
}

/// What every run does besides waiting: read the name (404), create, delete the succeeded Job;
/// and, when the log is asked for, list its Pod and read the log.
fn besides_waiting(call: Call) -> Vec<(Verb, usize)> {
    let mut calls = vec![(Verb::CreateJob, 1), (Verb::DeleteJob, 1)];
    // A succeeded Job answers 0 with no Pod read; its log, when wanted, is read from the Pod
    // listed once, while it ran (or after the finish, when no change showed it running).
    if call == Call::ExitCodeLogs {
        calls.extend([(Verb::ListPods, 1), (Verb::PodLog, 1)]);
    }
    calls
}

#[tokio::test(start_paused = true)]
async fn the_runner_costs_the_same_for_a_short_and_a_long_host_operation() -> anyhow::Result<()> {
    for call in Call::ALL {
        // One wait per change of the Job: its Pod created, Ready, then finished.
        let mut expected = besides_waiting(call);
        expected.extend([(Verb::GetJob, 1), (Verb::WaitJob, 3)]);
        for host in [SECOND, HALF_HOUR] {
            let got = count(Waiter::Watch, call, host).await?;
            assert_eq!(got, counts(&expected), "{call}, host operation {host:?}");
        }
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_poller_reads_the_job_once_per_interval() -> anyhow::Result<()> {
    let poller = Waiter::Poll(POLL_INTERVAL);
    for call in Call::ALL {
        // The 1 s operation: the Job is created at 0 s and Complete at 2.3 s (200 ms to the
        // pod, 1 s to start, 1 s run, 100 ms to Complete), seen by the first read, at 5 s.
        let mut short = besides_waiting(call);
        short.push((Verb::GetJob, 1 + 1));
        assert_eq!(count(poller, call, SECOND).await?, counts(&short), "{call}");
        // The 30 min operation: Complete at 1801.3 s; the read at 5 s sees the Job changed
        // (Pod Ready), then one read every 5 s until the one at 1805 s: 361 in all.
        let mut long = besides_waiting(call);
        long.push((Verb::GetJob, 1 + 361));
        assert_eq!(
            count(poller, call, HALF_HOUR).await?,
            counts(&long),
            "{call}"
        );
    }
    Ok(())
}
