//! What a CA rotation costs the cluster per node is counted exactly, so its bound is pinned:
//! at most 4 host Jobs and 56 API calls per node for a whole rotation (issue 21's goal was
//! 50; before it: 9 and 121.4). Issue 22 added the node's `NodejobCARotation` condition,
//! written as stage, issue and finalize start on it and as the rotation ends (4 writes, 52.4
//! per node); the runner no longer reads the name of a Job the run knows absent before
//! creating it (`Policy::known_free`, 3 reads fewer: 49.4). Issue 30 fences each of a node's
//! 3 Events by a read of the Lease right before it, as every other write is fenced, so no
//! Event follows another identity's taking the Lease (3 reads more: 52.9 at 40 nodes), and reads
//! it again right before each new phase Job, after the step's `Started` condition write (the
//! exhaustive actor soak found a theft there unseen before the Job: 3 reads more, 55.9).
//! Issue 34: that read right before the Job is the step's only one (the machine's own read
//! before the step's `Started` condition fenced only that condition, a write refused once the
//! Lease is known lost: 3 reads fewer); the read right before issue's record (the mark) fences
//! the issue Job's delete and its `Finished` Event, with nothing waited on between (1 fewer);
//! the first status read's Job, absent from the run's list of our Jobs, is created without
//! reading its name (1 fewer): 50.4 at 100 nodes. Then the 4th host Job, the status read
//! before the start gate, went: a rotation no run has begun anywhere is read by its `stage`,
//! whose output begins with where the node stood (the start gate checked on that, before
//! issue), behind the mark written ahead of its Job in the write of stage's condition (no call
//! more); a rerun, finding a mark, reads every node first as before.
//! Counts, never timings: the rotation runs on the fake in paused time.

use nodejob_bench::rotation::rotate;
use nodejob_fake::Verb;

/// The most a node may cost.
const HOST_JOBS_PER_NODE: f64 = 3.0;
const CALLS_PER_NODE: f64 = 40.0;

#[tokio::test(start_paused = true)]
async fn a_rotation_costs_three_host_jobs_and_at_most_forty_calls_per_node() -> anyhow::Result<()> {
    // Sizes where the run's own fixed calls (the Lease, listing the nodes and our Jobs) are
    // spread thin, as the bench's 100.
    for nodes in [40, 100] {
        let r = rotate(nodes).await?;
        assert_eq!(r.nodes, nodes);
        // Stage, issue and finalize, each answering the node's status (stage, where it stood
        // too; issue, its verify) in its own output: no other `carotate` command ran.
        let per_node = |command: &str| {
            f64::from(r.commands.get(command).copied().unwrap_or_default()) / nodes as f64
        };
        for command in ["carotate stage", "carotate issue", "carotate finalize"] {
            assert_eq!(per_node(command), 1.0, "{command}: {:?}", r.commands);
        }
        assert_eq!(r.commands.len(), 3, "{:?}", r.commands);
        assert_eq!(r.host_jobs(), 3 * nodes, "{}", r.calls_by_verb());
        assert!(r.host_jobs_per_node() <= HOST_JOBS_PER_NODE);
        assert!(
            r.calls_per_node() <= CALLS_PER_NODE,
            "{nodes} nodes: {} ({})",
            r.per_node_line(),
            r.calls_by_verb()
        );
        // The Lease read before the status read, right before each phase Job's create, before
        // issue's record (fencing its Job's delete and Event), before stage's and finalize's
        // Finished Events, and the run's own few: no more.
        let per =
            |verb: Verb| r.calls.get(&verb).copied().unwrap_or_default() as f64 / nodes as f64;
        assert!(per(Verb::GetLease) <= 7.1, "{}", r.calls_by_verb());
        // The status read's Job, like every phase Job, is created without its name read first.
        assert!(per(Verb::GetJob) <= 1.0, "{}", r.calls_by_verb());
        // The verbs a rotation needs, and no other (no eviction, no pod listing by node).
        let verbs: Vec<Verb> = r.calls.keys().copied().collect();
        for verb in verbs {
            assert!(
                !matches!(verb, Verb::EvictPod | Verb::ListNodePods),
                "{verb:?}: {}",
                r.calls_by_verb()
            );
        }
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_figures_are_the_same_at_every_run() -> anyhow::Result<()> {
    let (a, b) = (rotate(20).await?, rotate(20).await?);
    assert_eq!((a.calls, a.commands), (b.calls, b.commands));
    Ok(())
}
