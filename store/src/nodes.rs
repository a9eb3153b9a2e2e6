//! [`NodeRepo`] on [`Database`]: `t_node`, one text for every dialect but
//! the heartbeat's upsert, whose MySQL form sits beside it.

use async_trait::async_trait;
use xtimer_core::node::NodeInfo;

use crate::db::on_db;
use crate::driver::Dialect;
use crate::repo::NodeRepo;
use crate::sql::node_from_row;
use crate::{Database, Result};

#[async_trait]
impl NodeRepo for Database {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<()> {
        const SQL: &str = "INSERT INTO t_node (node_id, host, listen, started_at, heartbeat_at, shards)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, shards = excluded.shards,
             listen = excluded.listen";
        // The changed columns are bound again: MySQL 8 and MariaDB share no
        // other way to name the new row.
        const SQL_MYSQL: &str = "INSERT INTO t_node (node_id, host, listen, started_at, heartbeat_at, shards)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON DUPLICATE KEY UPDATE heartbeat_at = $7, shards = $8, listen = $9";
        let shards = serde_json::to_string(&node.shards).expect("strings serialize");
        if let Self::Mysql(pool) = self {
            sqlx::query(&pool.sql(SQL_MYSQL))
                .bind(&node.id)
                .bind(&node.host)
                .bind(&node.listen)
                .bind(node.started_at)
                .bind(node.heartbeat_at)
                .bind(&shards)
                .bind(node.heartbeat_at)
                .bind(&shards)
                .bind(&node.listen)
                .execute(pool)
                .await?;
            return Ok(());
        }
        on_db!(self, write, pool => sqlx::query(SQL)
            .bind(&node.id)
            .bind(&node.host)
            .bind(&node.listen)
            .bind(node.started_at)
            .bind(node.heartbeat_at)
            .bind(shards)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(())
    }

    async fn list_nodes(&self, since_ms: i64) -> Result<Vec<NodeInfo>> {
        const SQL: &str = "SELECT node_id, host, listen, started_at, heartbeat_at, shards FROM t_node
             WHERE heartbeat_at >= $1 ORDER BY node_id";
        on_db!(self, read, pool => sqlx::query(&pool.sql(SQL)).bind(since_ms).fetch_all(pool).await?
            .iter().map(node_from_row).collect())
    }

    async fn database_now_ms(&self) -> Result<Option<i64>> {
        // Both read the server's UTC clock, whatever the session's time zone,
        // in whole milliseconds rounded down (as the node reads its own).
        const PG: &str = "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)";
        const MYSQL: &str =
            "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)";
        Ok(match self {
            Self::Sqlite { .. } => None,
            Self::Postgres(pool) => Some(sqlx::query_scalar::<_, i64>(PG).fetch_one(pool).await?),
            Self::Mysql(pool) => Some(sqlx::query_scalar::<_, i64>(MYSQL).fetch_one(pool).await?),
        })
    }

    async fn remove_node(&self, id: &str) -> Result<()> {
        on_db!(self, write, pool => sqlx::query(&pool.sql("DELETE FROM t_node WHERE node_id = $1")).bind(id).execute(pool).await?.rows_affected());
        Ok(())
    }
}
