//! Timers' change history (`t_timer_history`, `getTimerHistory`): rows
//! written by the service beside each change a caller asks for, and by
//! the store itself inside the transaction of each change xtimer makes on
//! its own (`by: "system"`: a disable after failures in a row, a
//! completion, a deletion by `deleteAfterRun`), so no path that changes a
//! timer's status can leave it out. An app-wide change (`pauseApp`,
//! `resumeApp`) is one row of timer 0, shown with each of the app's
//! timers' history. Read newest first, and forgotten with fire records
//! once their timer is deleted.

use const_format::formatcp;

use crate::backend::on_driver;
use crate::db::on_db;
use crate::db::{on_tx, Tx};
use crate::driver::{Dialect, Driver, TxDriver};
use crate::sql::{code, Columns};
use crate::{Database, Result};

pub use crate::change::{status_action, Change, HistoryEntry, APP_WIDE, BY_SYSTEM};

const SELECT: &str = "SELECT timer_id, app, at_ms, action, by_who, changes FROM t_timer_history
     WHERE timer_id = $1 ORDER BY history_id DESC LIMIT $2";
const SELECT_APP_WIDE: &str = "SELECT timer_id, app, at_ms, action, by_who, changes FROM t_timer_history
     WHERE timer_id = 0 AND app = $1 AND at_ms >= $2 ORDER BY history_id DESC LIMIT $3";
const FORGET: &str = formatcp!(
    "DELETE FROM t_timer_history WHERE at_ms < $1
       AND timer_id IN (SELECT timer_id FROM t_timer WHERE status = {})",
    code::TIMER_DELETED
);

impl Database {
    /// Writes `entries` on their own: in one transaction, or one
    /// statement of one array per column where the backend has arrays.
    pub(crate) async fn record_history(&self, entries: &[HistoryEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        on_driver!(self, d => d.record_history(entries).await)
    }

    /// Timer `timer_id`'s changes, newest first, at most `limit`.
    pub(crate) async fn timer_history(&self, timer_id: i64, limit: u32) -> Result<Vec<HistoryEntry>> {
        on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(SELECT)).bind(timer_id).bind(i64::from(limit)).fetch_all(pool).await?;
            rows.iter().map(entry_from_row).collect()
        })
    }

    /// `app`'s app-wide changes since `since_ms`, newest first, at most `limit`.
    pub(crate) async fn app_history(&self, app: &str, since_ms: i64, limit: u32) -> Result<Vec<HistoryEntry>> {
        on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(SELECT_APP_WIDE))
                .bind(app)
                .bind(since_ms)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
            rows.iter().map(entry_from_row).collect()
        })
    }

    /// Forgets the changes before `before_ms` of deleted timers; how many.
    pub(crate) async fn forget_history(&self, before_ms: i64) -> Result<u64> {
        Ok(on_db!(self, write, pool => {
            sqlx::query(&pool.sql(FORGET)).bind(before_ms).execute(pool).await?.rows_affected()
        }))
    }
}

/// A history row as an entry.
fn entry_from_row(row: &impl Columns) -> Result<HistoryEntry> {
    Ok(HistoryEntry {
        timer_id: row.int("timer_id")?,
        app: row.text("app")?,
        at_ms: row.int("at_ms")?,
        action: row.text("action")?,
        by: row.text("by_who")?,
        changes: row.text("changes")?,
    })
}

/// Writes `entries` inside `tx`, the transaction of the change they note.
pub(crate) async fn record_in(tx: &mut Tx, entries: &[HistoryEntry]) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    on_tx!(tx, c => c.insert_history(entries).await)
}
