//! [`AppRepo`] on [`Database`]: what is kept per app rather than per timer:
//! its timers counted (`getApps`) and its pause (`pauseApp`, `t_app_pause`).

use async_trait::async_trait;
use const_format::formatcp;
use sqlx::Row;

use crate::db::on_db;
use crate::driver::Dialect;
use crate::sql::{code, text};
use crate::{Database, Result};

/// One app as `getApps` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSummary {
    /// The app.
    pub app: String,
    /// Its timers that are not deleted.
    pub timers: u64,
    /// Those enabled.
    pub enabled: u64,
}

/// An app's pause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppPause {
    /// The app.
    pub app: String,
    /// When it resumes by itself, Unix ms; `None`: at `resumeApp`.
    pub until_ms: Option<i64>,
    /// Why, as given.
    pub reason: String,
    /// When it was paused, Unix ms.
    pub paused_at: i64,
}

/// What is kept per app.
#[async_trait]
pub trait AppRepo: Send + Sync {
    /// Every app with a timer that is not deleted, by name (only `app`
    /// when given), with its counts.
    async fn app_summaries(&self, only: Option<&str>) -> Result<Vec<AppSummary>>;
    /// Pauses `app` (again: the new until and reason replace the old).
    async fn pause_app(&self, pause: &AppPause) -> Result<()>;
    /// Resumes `app`; whether it was paused.
    async fn resume_app(&self, app: &str) -> Result<bool>;
    /// The apps paused at `now_ms` (their `until` not passed).
    async fn paused_apps(&self, now_ms: i64) -> Result<Vec<AppPause>>;
}

const SUMMARIES: &str = formatcp!(
    "SELECT app, CAST(COUNT(*) AS BIGINT) AS timers,
            CAST(SUM(CASE WHEN status = {enabled} THEN 1 ELSE 0 END) AS BIGINT) AS enabled
     FROM t_timer
     WHERE status <> {deleted} AND ($1 = '' OR app = $2) GROUP BY app ORDER BY app",
    enabled = code::TIMER_ENABLED,
    deleted = code::TIMER_DELETED
);
const FORGET: &str = "DELETE FROM t_app_pause WHERE app = $1";
const PAUSE: &str = "INSERT INTO t_app_pause (app, until_ms, reason, paused_at) VALUES ($1, $2, $3, $4)";
const PAUSED: &str =
    "SELECT app, until_ms, reason, paused_at FROM t_app_pause WHERE until_ms IS NULL OR until_ms > $1 ORDER BY app";

#[async_trait]
impl AppRepo for Database {
    async fn app_summaries(&self, only: Option<&str>) -> Result<Vec<AppSummary>> {
        let only = only.unwrap_or_default();
        on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(SUMMARIES)).bind(only).bind(only).fetch_all(pool).await?;
            rows.iter()
                .map(|row| {
                    Ok(AppSummary {
                        app: text(row, "app")?,
                        timers: row.try_get::<i64, _>("timers")? as u64,
                        enabled: row.try_get::<Option<i64>, _>("enabled")?.unwrap_or_default() as u64,
                    })
                })
                .collect()
        })
    }

    async fn pause_app(&self, pause: &AppPause) -> Result<()> {
        on_db!(self, write, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query(&pool.sql(FORGET)).bind(&pause.app).execute(&mut *tx).await?;
            sqlx::query(&pool.sql(PAUSE))
                .bind(&pause.app)
                .bind(pause.until_ms)
                .bind(&pause.reason)
                .bind(pause.paused_at)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        });
        Ok(())
    }

    async fn resume_app(&self, app: &str) -> Result<bool> {
        let done = on_db!(self, write, pool => {
            sqlx::query(&pool.sql(FORGET)).bind(app).execute(pool).await?.rows_affected()
        });
        Ok(done > 0)
    }

    async fn paused_apps(&self, now_ms: i64) -> Result<Vec<AppPause>> {
        on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(PAUSED)).bind(now_ms).fetch_all(pool).await?;
            rows.iter()
                .map(|row| {
                    Ok(AppPause {
                        app: text(row, "app")?,
                        until_ms: row.try_get("until_ms")?,
                        reason: text(row, "reason")?,
                        paused_at: row.try_get("paused_at")?,
                    })
                })
                .collect()
        })
    }
}
