//! What the read-only commands read from a cluster, as data: `jobs` ([`jobs`]) and `status`
//! ([`status`]). The command and the MCP tool of each read through the same `gather` and show
//! the same data (`crate::present` for people, serde for programs).

pub(crate) mod jobs;
pub(crate) mod status;
