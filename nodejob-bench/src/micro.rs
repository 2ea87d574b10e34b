//! The micro figures, with criterion: core's pure functions and one step of the run machine, in
//! ns per call. `benches/micro.rs` runs them under `cargo bench`; the `nodejob-bench` command
//! runs them too and reads criterion's estimates back for its table.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use nodejob_core::runner::{Intent, Machine, Mode, Observation};
use nodejob_core::{ApiError, Change, Spec, build, finished, node_label_value, trunc_name};

use crate::scenario::{scripted_argv, spec};

/// The benchmarks, by the name criterion files them under, in the order the table lists them.
pub const NAMES: [&str; 5] = [
    "build",
    "trunc_name",
    "node_label_value",
    "finished",
    "machine_step",
];

/// A node name of 80 characters: too long for a label value, so hashed.
fn long_node() -> String {
    format!("{}.nodes.example.com", "worker-".repeat(9))
}

fn bench_spec() -> Spec {
    spec(
        "upgrade-worker-1",
        &long_node(),
        scripted_argv(),
        Duration::from_secs(600),
    )
}

/// The Job of `spec` as the apiserver answers its creation: with a UID and a resourceVersion.
fn created(spec: &Spec) -> Box<Job> {
    let mut job = build(spec);
    job.metadata.uid = Some("0b5ad1f4-8d9e-4c47-a2b8-3c4d5e6f7a8b".into());
    job.metadata.resource_version = Some("100".into());
    Box::new(job)
}

/// Its state once it has finished: `SuccessCriteriaMet` then `Complete`, as Kubernetes 1.31+
/// writes them.
fn complete(spec: &Spec) -> Job {
    let mut job = *created(spec);
    let condition = |type_: &str| JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some("CompletionsReached".into()),
        ..JobCondition::default()
    };
    job.status = Some(JobStatus {
        succeeded: Some(1),
        conditions: Some(vec![condition("SuccessCriteriaMet"), condition("Complete")]),
        ..JobStatus::default()
    });
    job
}

/// A machine for `spec` waiting for its Job, created at time zero.
fn waiting(spec: &Spec) -> Machine {
    let mut machine = Machine::new(spec, Mode::ExitCodeLogs, Duration::ZERO);
    machine.start();
    let absent = Observation::Failed(ApiError::not_found("jobs.batch \"x\" not found"));
    machine.step(Duration::ZERO, absent);
    let step = machine.step(Duration::ZERO, Observation::Job(created(spec)));
    debug_assert!(matches!(step.intent, Intent::WaitJob { .. }));
    machine
}

/// Registers every micro benchmark with `c`.
pub fn benches(c: &mut Criterion) {
    let spec = bench_spec();
    c.bench_function(NAMES[0], |b| b.iter(|| build(black_box(&spec))));
    let name = format!("upgrade-{}", long_node());
    c.bench_function(NAMES[1], |b| b.iter(|| trunc_name(black_box(&name))));
    let node = long_node();
    c.bench_function(NAMES[2], |b| b.iter(|| node_label_value(black_box(&node))));
    let done = complete(&spec);
    c.bench_function(NAMES[3], |b| b.iter(|| finished(black_box(&done))));
    // One observation in, one intent out: the Job (now running) changed, wait again.
    let mut running = created(&spec);
    running.metadata.resource_version = Some("101".into());
    running.status = Some(JobStatus {
        active: Some(1),
        ready: Some(1),
        ..JobStatus::default()
    });
    c.bench_function(NAMES[4], |b| {
        b.iter_batched(
            || {
                let obs = Observation::Changed(Change::Applied(running.clone()));
                (waiting(&spec), obs)
            },
            |(mut machine, obs)| machine.step(Duration::from_secs(2), obs),
            BatchSize::SmallInput,
        )
    });
}
