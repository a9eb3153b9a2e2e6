//! The cluster's nodes as they report themselves, and which of them are
//! alive (`GET nodes`).

use std::sync::Arc;

use xtimer_core::node::NodeInfo;
use xtimer_core::SharedClock;
use xtimer_store::NodeRepo;

use crate::error::Result;

/// A node is alive while its last heartbeat is at most this old, ms.
pub const ALIVE_WINDOW_MS: i64 = 15_000;

/// The nodes' rows. Cheap to clone.
#[derive(Clone)]
pub struct Nodes {
    repo: Arc<dyn NodeRepo>,
    clock: SharedClock,
}

/// A live node and how old its last heartbeat is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveNode {
    /// What it last reported.
    pub info: NodeInfo,
    /// Milliseconds since its last heartbeat.
    pub heartbeat_age_ms: i64,
}

impl Nodes {
    /// The nodes of `repo`, judged on `clock`.
    pub fn new(repo: Arc<dyn NodeRepo>, clock: SharedClock) -> Self {
        Self { repo, clock }
    }

    /// Every node with a heartbeat in the last [`ALIVE_WINDOW_MS`], by id.
    pub async fn alive(&self) -> Result<Vec<LiveNode>> {
        let now = self.clock.now_ms();
        let nodes = self.repo.list_nodes(now - ALIVE_WINDOW_MS).await?;
        Ok(nodes.into_iter().map(|info| LiveNode { heartbeat_age_ms: now - info.heartbeat_at, info }).collect())
    }
}
