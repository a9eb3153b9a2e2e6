//! A node of the cluster as it reports itself.

use serde::{Deserialize, Serialize};

/// One node's identity and liveness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// `{host}-{pid}-{random}`.
    pub id: String,
    pub host: String,
    /// Address its HTTP API listens on.
    pub listen: String,
    /// Unix milliseconds.
    pub started_at: i64,
    /// Unix milliseconds of its last heartbeat.
    pub heartbeat_at: i64,
    /// Shards it holds now (`YYYY-MM-DD HH:MM#bucket`).
    pub shards: Vec<String>,
}
