//! `GET /api/xtimer/nodes`: the nodes of the cluster, as they report
//! themselves (id, host, listen address, start, last heartbeat, shards held).

use axum::extract::State;
use serde::Serialize;
use xtimer_core::clock::rfc3339;

use xtimer_service::LiveNode;

use crate::auth::AuthContext;
use crate::{ApiError, AppState, Envelope};

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

/// `GET nodes`: every node with a heartbeat in the last
/// [`xtimer_service::nodes::ALIVE_WINDOW_MS`].
///
/// With auth on, any valid token (an app's or the admin's) may read it.
#[utoipa::path(
    get,
    path = "/nodes",
    operation_id = "nodes",
    summary = "Every live node and the shards it holds.",
    responses((status = 200, description = crate::replies::ENVELOPED, body = NodeList))
)]
pub async fn nodes_list(State(state): State<AppState>, auth: AuthContext) -> Result<Envelope<NodeList>, ApiError> {
    auth.require_token()?;
    let nodes = match &state.nodes {
        Some(nodes) => nodes.alive().await?,
        None => Vec::new(),
    };
    let list: Vec<NodeView> = nodes.into_iter().map(NodeView::from).collect();
    Ok(Envelope(NodeList { total: list.len(), list }))
}

impl From<LiveNode> for NodeView {
    fn from(node: LiveNode) -> Self {
        let n = node.info;
        Self {
            heartbeat_age_ms: node.heartbeat_age_ms,
            started_at: rfc3339(n.started_at),
            heartbeat_at: rfc3339(n.heartbeat_at),
            shards_held: n.shards.len(),
            id: n.id,
            host: n.host,
            listen: n.listen,
            shards: n.shards,
        }
    }
}
