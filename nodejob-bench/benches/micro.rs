//! `cargo bench -p nodejob-bench --bench micro`: core's pure functions and one step of the run
//! machine, with criterion (see `nodejob_bench::micro`).

use criterion::{criterion_group, criterion_main};

criterion_group!(benches, nodejob_bench::micro::benches);
criterion_main!(benches);
