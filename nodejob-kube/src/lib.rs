//! nodejob over kube-rs: [`KubeApi`] implements `nodejob_core`'s [`JobApi`] and [`Clock`]
//! against a real apiserver. It is the only crate of the workspace that depends on `kube`.
//!
//! It holds no policy: what to create, when to delete and how long to wait are the runner's
//! (`nodejob-core`). It does not retry either (kube's retry layer is turned off by
//! [`KubeApi::connect`] and [`KubeApi::from_config`]): every verb is one request, and failures
//! are classified into core's [`ApiError`] by HTTP status code and `Status` reason, so the
//! runner's bounds hold.
//!
//! ```text
//!   runner ──JobApi──▶ KubeApi ──one request per verb──────────────▶ apiserver
//!                         │  wait_job / wait_node: one open watch per object, read on
//!                         └─ across waits, resumed after close / 410 ─▶
//! ```
//!
//! ```no_run
//! # async fn example(spec: nodejob_core::Spec) -> Result<(), Box<dyn std::error::Error>> {
//! let api = nodejob_kube::KubeApi::try_default().await?;
//! let (exit_code, log) = nodejob_core::run_exit_code_logs(&api, &spec).await?;
//! # let _ = (exit_code, log);
//! # Ok(())
//! # }
//! ```
//!
//! [`JobApi`]: nodejob_core::JobApi
//! [`Clock`]: nodejob_core::Clock
//! [`ApiError`]: nodejob_core::ApiError

mod api;
mod classify;
mod config;
mod watch;

pub use api::{KubeApi, REQUEST_TIMEOUT};
pub use config::{ConnectError, load_config};
