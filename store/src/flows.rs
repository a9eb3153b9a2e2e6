//! [`FlowRepo`] on [`Database`]: `t_flow_limit`, the limits of each app's
//! flows as `setFlowLimit` sets them (API 1g), by app and flow key.

use async_trait::async_trait;
use sqlx::Row;

use crate::db::on_db;
use crate::driver::Dialect;
use crate::sql::text;
use crate::{Database, Error, Result};

/// A flow's limits, as `setFlowLimit` sets them (API 1g).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowLimit {
    /// The app the flow belongs to.
    pub app: String,
    /// The flow's key within its app (at most 128 chars).
    pub key: String,
    /// Callbacks per second across the cluster; `None`: no rate.
    pub rate_per_sec: Option<f64>,
    /// Callbacks open at once across the cluster; `None`: no cap.
    pub parallelism: Option<u32>,
    /// Whether the flow's fires are held.
    pub paused: bool,
    /// When it was last set, Unix ms.
    pub modify_time: i64,
}

/// The flows' limits (`setFlowLimit`, `getFlows`, `delFlowLimit`).
#[async_trait]
pub trait FlowRepo: Send + Sync {
    /// Sets a flow's limits, replacing any it had.
    async fn set_flow_limit(&self, limit: &FlowLimit) -> Result<()>;
    /// Removes a flow's limits; whether it had any.
    async fn delete_flow_limit(&self, app: &str, key: &str) -> Result<bool>;
    /// The limits of `app`'s flows by key, or of every app's (by app, then key) when `None`.
    async fn flow_limits(&self, app: Option<&str>) -> Result<Vec<FlowLimit>>;
}

const COLUMNS: &str = "app, flow_key, rate_per_sec, parallelism, CAST(paused AS BIGINT) AS paused, modify_time";
const SELECT_APP: &str = const_format::concatcp!("SELECT ", COLUMNS, " FROM t_flow_limit WHERE app = $1");
const SELECT_ALL: &str = const_format::concatcp!("SELECT ", COLUMNS, " FROM t_flow_limit");
const DELETE: &str = "DELETE FROM t_flow_limit WHERE app = $1 AND flow_key = $2";

#[async_trait]
impl FlowRepo for Database {
    async fn set_flow_limit(&self, limit: &FlowLimit) -> Result<()> {
        let parallelism = limit.parallelism.map(i64::from);
        let paused = i64::from(limit.paused);
        on_db!(self, write, pool => {
            let statement = pool.sql(pool.statements().upsert_flow_limit);
            let mut upsert = sqlx::query(&statement)
                .bind(&limit.app)
                .bind(&limit.key)
                .bind(limit.rate_per_sec)
                .bind(parallelism)
                .bind(paused)
                .bind(limit.modify_time);
            if pool.statements().upsert_rebinds {
                upsert = upsert.bind(limit.rate_per_sec).bind(parallelism).bind(paused).bind(limit.modify_time);
            }
            upsert.execute(pool).await?;
        });
        Ok(())
    }

    async fn delete_flow_limit(&self, app: &str, key: &str) -> Result<bool> {
        let done = on_db!(self, write, pool => {
            sqlx::query(&pool.sql(DELETE)).bind(app).bind(key).execute(pool).await?.rows_affected()
        });
        Ok(done > 0)
    }

    async fn flow_limits(&self, app: Option<&str>) -> Result<Vec<FlowLimit>> {
        let mut list = on_db!(self, read, pool => {
            let rows = match app {
                Some(app) => sqlx::query(&pool.sql(SELECT_APP)).bind(app).fetch_all(pool).await?,
                None => sqlx::query(&pool.sql(SELECT_ALL)).fetch_all(pool).await?,
            };
            rows.iter().map(flow_from_row).collect::<Result<Vec<_>>>()?
        });
        // Byte order in every dialect, whatever the server's collation.
        list.sort_by(|a, b| (&a.app, &a.key).cmp(&(&b.app, &b.key)));
        Ok(list)
    }
}

/// A `t_flow_limit` row ([`COLUMNS`]) as a [`FlowLimit`].
fn flow_from_row<'r, R>(row: &'r R) -> Result<FlowLimit>
where
    R: Row,
    &'r str: sqlx::ColumnIndex<R>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    f64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database>,
{
    let app = text(row, "app")?;
    let key = text(row, "flow_key")?;
    let parallelism = row
        .try_get::<Option<i64>, _>("parallelism")?
        .map(u32::try_from)
        .transpose()
        .map_err(|e| Error::Corrupt(format!("t_flow_limit {app}/{key}: parallelism: {e}")))?;
    Ok(FlowLimit {
        rate_per_sec: row.try_get("rate_per_sec")?,
        parallelism,
        paused: row.try_get::<i64, _>("paused")? != 0,
        modify_time: row.try_get("modify_time")?,
        app,
        key,
    })
}
