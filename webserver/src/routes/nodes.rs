//! `GET /api/xtimer/nodes`: the nodes of the cluster, as they report
//! themselves (id, host, listen address, start, last heartbeat, shards held).

use axum::extract::State;
use serde::Serialize;
use xtimer_core::clock::rfc3339;

use crate::{ApiError, AppState, Envelope};

/// A node is listed while its last heartbeat is this recent.
pub const ALIVE_WINDOW_MS: i64 = 15_000;

/// One node in the reply.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub id: String,
    pub host: String,
    pub listen: String,
    pub started_at: String,
    pub heartbeat_at: String,
    /// Milliseconds since the last heartbeat.
    pub heartbeat_age_ms: i64,
    pub shards_held: usize,
    pub shards: Vec<String>,
}

/// The reply's `result`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct NodeList {
    pub list: Vec<NodeView>,
    pub total: usize,
}

/// `GET nodes`: every node with a heartbeat in the last [`ALIVE_WINDOW_MS`].
///
/// With auth on, any valid token (an app's or the admin's) may read it.
pub async fn nodes_list(
    State(state): State<AppState>,
    auth: crate::auth::AuthContext,
) -> Result<Envelope<NodeList>, ApiError> {
    auth.require_token()?;
    let now = state.clock.now_ms();
    let nodes = match &state.nodes {
        Some(nodes) => nodes.list_nodes(now - ALIVE_WINDOW_MS).await?,
        None => Vec::new(),
    };
    let list: Vec<NodeView> = nodes
        .into_iter()
        .map(|n| NodeView {
            heartbeat_age_ms: now - n.heartbeat_at,
            started_at: rfc3339(n.started_at),
            heartbeat_at: rfc3339(n.heartbeat_at),
            shards_held: n.shards.len(),
            id: n.id,
            host: n.host,
            listen: n.listen,
            shards: n.shards,
        })
        .collect();
    Ok(Envelope(NodeList { total: list.len(), list }))
}
