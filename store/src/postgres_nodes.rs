//! [`NodeRepo`] over PostgreSQL.

use async_trait::async_trait;
use xtimer_core::node::NodeInfo;

use crate::postgres::PgRepo;
use crate::repo::NodeRepo;
use crate::rows::node_from_row;
use crate::Result;

#[async_trait]
impl NodeRepo for PgRepo {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<()> {
        sqlx::query(
            "INSERT INTO t_node (node_id, host, listen, started_at, heartbeat_at, shards) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, shards = excluded.shards,
             listen = excluded.listen",
        )
        .bind(&node.id)
        .bind(&node.host)
        .bind(&node.listen)
        .bind(node.started_at)
        .bind(node.heartbeat_at)
        .bind(serde_json::to_string(&node.shards).expect("strings serialize"))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    async fn list_nodes(&self, since_ms: i64) -> Result<Vec<NodeInfo>> {
        let rows = sqlx::query(
            "SELECT node_id, host, listen, started_at, heartbeat_at, shards FROM t_node
             WHERE heartbeat_at >= $1 ORDER BY node_id",
        )
        .bind(since_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(node_from_row).collect()
    }

    async fn remove_node(&self, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM t_node WHERE node_id = $1").bind(id).execute(self.pool()).await?;
        Ok(())
    }
}
