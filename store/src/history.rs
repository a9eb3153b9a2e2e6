//! Timers' change history (`t_timer_history`, `getTimerHistory`): rows
//! written by the service beside each change, read newest first, and
//! forgotten with fire records once their timer is deleted.

use const_format::formatcp;
use sqlx::Row;

use crate::db::{on_db, Dialect};
use crate::repo::HistoryEntry;
use crate::sql::{code, text};
use crate::{Database, Result};

const INSERT: &str = "INSERT INTO t_timer_history (timer_id, app, at_ms, action, by_who, changes) ";
/// [`INSERT`] on PostgreSQL: the rows as one array per column.
const INSERT_POSTGRES: &str = "INSERT INTO t_timer_history (timer_id, app, at_ms, action, by_who, changes)
     SELECT timer_id, app, at_ms, action, by_who, changes
     FROM UNNEST($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[])
          WITH ORDINALITY AS v(timer_id, app, at_ms, action, by_who, changes, ord)
     ORDER BY ord";
/// Rows per insert statement (six parameters each).
const ROWS_PER_STATEMENT: usize = crate::sql::MAX_PARAMS / 6;
const SELECT: &str = "SELECT timer_id, app, at_ms, action, by_who, changes FROM t_timer_history
     WHERE timer_id = $1 ORDER BY history_id DESC LIMIT $2";
const FORGET: &str = formatcp!(
    "DELETE FROM t_timer_history WHERE at_ms < $1
       AND timer_id IN (SELECT timer_id FROM t_timer WHERE status = {})",
    code::TIMER_DELETED
);

impl Database {
    /// Writes `entries`: on PostgreSQL in one statement of one array per
    /// column (one prepared statement whatever the count), elsewhere in one
    /// statement per [`ROWS_PER_STATEMENT`]. One statement is its own
    /// transaction; more are written in one.
    pub(crate) async fn record_history(&self, entries: &[HistoryEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        if let Database::Postgres(pool) = self {
            sqlx::query(INSERT_POSTGRES)
                .bind(entries.iter().map(|e| e.timer_id).collect::<Vec<_>>())
                .bind(entries.iter().map(|e| e.app.as_str()).collect::<Vec<_>>())
                .bind(entries.iter().map(|e| e.at_ms).collect::<Vec<_>>())
                .bind(entries.iter().map(|e| e.action.as_str()).collect::<Vec<_>>())
                .bind(entries.iter().map(|e| e.by.as_str()).collect::<Vec<_>>())
                .bind(entries.iter().map(|e| e.changes.as_str()).collect::<Vec<_>>())
                .execute(pool)
                .await?;
            return Ok(());
        }
        on_db!(self, write, pool => {
            let mut tx = if entries.len() > ROWS_PER_STATEMENT { Some(pool.begin().await?) } else { None };
            for chunk in entries.chunks(ROWS_PER_STATEMENT) {
                let mut qb = sqlx::QueryBuilder::new(INSERT);
                qb.push_values(chunk, |mut row, e| {
                    row.push_bind(e.timer_id)
                        .push_bind(e.app.as_str())
                        .push_bind(e.at_ms)
                        .push_bind(e.action.as_str())
                        .push_bind(e.by.as_str())
                        .push_bind(e.changes.as_str());
                });
                match &mut tx {
                    Some(tx) => qb.build().execute(&mut **tx).await?,
                    None => qb.build().execute(pool).await?,
                };
            }
            if let Some(tx) = tx {
                tx.commit().await?;
            }
        });
        Ok(())
    }

    /// Timer `timer_id`'s changes, newest first, at most `limit`.
    pub(crate) async fn timer_history(&self, timer_id: i64, limit: u32) -> Result<Vec<HistoryEntry>> {
        on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(SELECT)).bind(timer_id).bind(i64::from(limit)).fetch_all(pool).await?;
            rows.iter()
                .map(|row| {
                    Ok(HistoryEntry {
                        timer_id: row.try_get("timer_id")?,
                        app: text(row, "app")?,
                        at_ms: row.try_get("at_ms")?,
                        action: text(row, "action")?,
                        by: text(row, "by_who")?,
                        changes: text(row, "changes")?,
                    })
                })
                .collect()
        })
    }

    /// Forgets the changes before `before_ms` of deleted timers; how many.
    pub(crate) async fn forget_history(&self, before_ms: i64) -> Result<u64> {
        Ok(on_db!(self, write, pool => {
            sqlx::query(&pool.sql(FORGET)).bind(before_ms).execute(pool).await?.rows_affected()
        }))
    }
}
