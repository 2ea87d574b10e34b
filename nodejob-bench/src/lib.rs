//! nodejob's benchmarks: what costs users time and cluster capacity, measured beside a polling
//! baseline built from the same core, so a ratio holds on a noisy shared machine.
//!
//! - [`latency`]: from a Job's finished status being written to the runner function returning,
//!   on the in-memory cluster in real time;
//! - [`requests`]: API calls per run, counted by the fake's call record, for a short and a long
//!   host operation, in virtual time;
//! - [`roll`]: whole rolling upgrades of simulated clusters of growing size, in virtual time:
//!   wall time, peak memory, requests and bytes answered per node ([`weigh`]), at
//!   `max_unavailable` 1 and 10%;
//! - [`command`]: the `nodejob upgrade --simulate N` command beside the engine's roll of the
//!   same size: CPU, wall time and peak memory, each in a process of its own;
//! - [`rotation`]: a whole CA rotation of a simulated cluster, in virtual time: host Jobs and
//!   API calls per node;
//! - [`micro`]: core's pure functions and one step of the run machine, with criterion;
//! - [`real`]: completion latency, requests per run and what a client holds open, on a real
//!   control plane (`e2e/bench`);
//! - [`hollow`]: a roll of hundreds of hollow nodes (the node agent's) on a real control
//!   plane, beside the same roll on the fake (`e2e/bench hollow`).
//!
//! The baseline ([`poll::run_polling`]) drives core's own run machine and answers its waits by
//! reading the Job every interval, as the Go original did; everything else is the runner's.
//!
//! This crate asserts no timing: figures are printed by the `nodejob-bench` command (see the
//! bench's README.md), never checked by `cargo test`. Request counts are exact, and
//! `tests/requests.rs` pins them.

pub mod command;
pub mod critical;
pub mod hollow;
pub mod latency;
pub mod micro;
pub mod poll;
mod probe;
pub mod real;
pub mod requests;
pub mod roll;
pub mod rotation;
pub mod scenario;
pub mod stats;
pub mod weigh;
