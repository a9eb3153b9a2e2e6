//! [`NodeRepo`] on [`Database`]: `t_node`, one text for every dialect but
//! the heartbeat's upsert, whose MySQL form sits beside it.

use async_trait::async_trait;
use xtimer_core::node::NodeInfo;

use crate::backend::on_driver;
use crate::db::on_db;
use crate::driver::{Dialect, Driver};
use crate::repo::NodeRepo;
use crate::sql::node_from_row;
use crate::{Database, Result};

#[async_trait]
impl NodeRepo for Database {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<()> {
        let shards = serde_json::to_string(&node.shards).expect("strings serialize");
        on_driver!(self, d => d.heartbeat(node, &shards).await)
    }

    async fn list_nodes(&self, since_ms: i64) -> Result<Vec<NodeInfo>> {
        const SQL: &str = "SELECT node_id, host, listen, started_at, heartbeat_at, shards FROM t_node
             WHERE heartbeat_at >= $1 ORDER BY node_id";
        on_db!(self, read, pool => sqlx::query(&pool.sql(SQL)).bind(since_ms).fetch_all(pool).await?
            .iter().map(node_from_row).collect())
    }

    async fn database_now_ms(&self) -> Result<Option<i64>> {
        on_driver!(self, d => d.database_now_ms().await)
    }

    async fn remove_node(&self, id: &str) -> Result<()> {
        on_db!(self, write, pool => sqlx::query(&pool.sql("DELETE FROM t_node WHERE node_id = $1")).bind(id).execute(pool).await?.rows_affected());
        Ok(())
    }
}
