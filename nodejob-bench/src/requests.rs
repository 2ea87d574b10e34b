//! API requests per run, counted by the fake's call record, in paused (virtual) time: one run on
//! a fresh cluster with the default timing, its host operation running a given time.
//!
//! Every verb call is one entry of the record. On the kube backend every call is one HTTP
//! request except a wait, which costs none while the Job's watch is open (see `nodejob-kube`):
//! the fake's count of `wait_job` is an upper bound of the watch requests.

use std::collections::BTreeMap;
use std::time::Duration;

use nodejob_fake::{FakeCluster, NodeScript, Verb};

use crate::scenario::{Call, Waiter, scripted_argv, spec};

/// The node of every counted run.
const NODE: &str = "node-0";

/// How many calls of each verb one run made, in [`Verb`] order.
pub type Counts = BTreeMap<Verb, usize>;

/// The calls of one run of `call` waited for by `waiter`, its host operation running `host`.
/// Must run on a runtime whose time is paused.
///
/// # Errors
/// When the run does not succeed.
pub async fn count(waiter: Waiter, call: Call, host: Duration) -> anyhow::Result<Counts> {
    let fake = FakeCluster::with_seed(1);
    fake.add_node(NODE)?;
    fake.set_script(
        NODE,
        NodeScript {
            run_time: host,
            log: "done".into(),
            ..NodeScript::default()
        },
    );
    let bound = host.saturating_add(Duration::from_secs(600));
    let spec = spec("count", NODE, scripted_argv(), bound);
    let before = fake.calls().len();
    waiter.run(&fake, &spec, call).await?;
    let mut counts = Counts::new();
    for c in &fake.calls()[before..] {
        *counts.entry(c.verb).or_default() += 1;
    }
    Ok(counts)
}

/// All calls of `counts`.
pub fn total(counts: &Counts) -> usize {
    counts.values().sum()
}

/// `get_job 1, create_job 1, ...`, in [`Verb`] order.
pub fn describe(counts: &Counts) -> String {
    counts
        .iter()
        .map(|(verb, n)| format!("{} {n}", verb.method()))
        .collect::<Vec<_>>()
        .join(", ")
}
