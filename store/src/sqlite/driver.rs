//! SQLite's driver: its statement texts, and the operations it writes its
//! own way (see [`crate::driver`]).

use std::borrow::Cow;

use xtimer_core::fire::{ClaimedFire, FireKey};
use xtimer_core::load::Load;
use xtimer_core::task::TaskData;
use xtimer_core::timer::{NewTimer, Timer};

use super::fires::{claim_sqlite, insert_sqlite, reclaim_sqlite, record_sqlite_alone, record_sqlite_on};
use super::notify::{owe_sqlite, take_sqlite};
use super::plan;
use super::tasks::hold_fair_sqlite;
use super::timers::{page_unless_too_big, set_next_runs_sqlite, timers_as_json, GET_MANY_SQLITE};
use crate::change::HistoryEntry;
use crate::driver::{dialect, Driver, Statements, TxDriver};
use crate::repo::{ClaimOutcome, FireResult, NewFire, NextRun, PlannedFire};
use crate::sql::fence::confirm_by_select;
use crate::sql::fires::release_one_by_one;
use crate::sql::notify::{OwedRow, Owing, Taking};
use crate::sql::tasks::{self, insert_task_chunks, task_from_row};
use crate::sql::timer_from_row;
use crate::sql::timers::{scoped, timers_by_id_lists, COMPLETE_FIRED_ONCE, DUE};
use crate::sql::{self, Claimant};
use crate::Result;
use xtimer_core::node::NodeInfo;

/// SQLite's pools: every write goes through `write` (one connection),
/// reads use `read`.
pub(crate) struct SqliteDriver<'a> {
    pub(crate) write: &'a sqlx::SqlitePool,
    pub(crate) read: &'a sqlx::SqlitePool,
}

/// SQLite's texts of the statements that differ: `ON CONFLICT`'s, with
/// reads that lock nothing (its one writer keeps every other out).
pub(crate) static STATEMENTS: Statements =
    crate::driver::on_conflict_statements(false, |t| tasks::task_table(t, "id INTEGER PRIMARY KEY AUTOINCREMENT"));

// SQLite reads a shared statement as written.
dialect!(Cow::Borrowed, STATEMENTS => sqlx::SqlitePool, sqlx::SqliteConnection);

impl Driver for SqliteDriver<'_> {
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> Result<u64> {
        insert_sqlite(self.write, fires, now_ms).await
    }

    async fn claim_fires(&self, keys: &[FireKey], claimant: Claimant<'_>) -> Result<ClaimOutcome> {
        claim_sqlite(self.write, keys, claimant).await
    }

    async fn reclaim_fires(
        &self,
        task_ids: &[i64],
        claimant: Claimant<'_>,
        alive_since_ms: i64,
    ) -> Result<ClaimOutcome> {
        reclaim_sqlite(self.write, task_ids, claimant, alive_since_ms).await
    }

    async fn record_alone(&self, results: &[FireResult], now_ms: i64) -> Result<Option<u64>> {
        record_sqlite_alone(self.write, results, now_ms).await
    }

    async fn release_fires(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
        release_one_by_one!(self.write, claims, now_ms)
    }

    async fn confirm_claims(
        &self,
        node_id: &str,
        claims: &[ClaimedFire],
        lease_until: i64,
        now_ms: i64,
    ) -> Result<Vec<i64>> {
        // One writer: the transaction alone keeps others out.
        confirm_by_select!(self.write, node_id, claims, lease_until, now_ms, "")
    }

    async fn insert_planned_fires(&self, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
        plan::insert_sqlite(self.write, fires, now_ms).await
    }

    async fn set_planned_next_runs(&self, next: &[NextRun]) -> Result<()> {
        plan::set_next_runs_sqlite(self.write, next).await
    }

    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        // The ids as one JSON array, the timers as another (row by row
        // when that is over SQLite's length limit).
        let sql = timers_as_json(GET_MANY_SQLITE);
        let json = serde_json::to_string(ids).expect("ids serialize");
        if let Some(timers) = page_unless_too_big(sqlx::query_scalar(&sql).bind(json).fetch_one(self.read).await)? {
            return Ok(timers);
        }
        timers_by_id_lists!(self.read, ids)
    }

    async fn due_timers(&self, window: i64, before_ms: i64, limit: u32) -> Result<Vec<Timer>> {
        let page = timers_as_json(DUE);
        let page = sqlx::query_scalar(&page).bind(window).bind(before_ms).bind(i64::from(limit));
        // Over SQLite's length limit: row by row.
        if let Some(timers) = page_unless_too_big(page.fetch_one(self.read).await)? {
            return Ok(timers);
        }
        let rows = sqlx::query(DUE).bind(window).bind(before_ms).bind(i64::from(limit)).fetch_all(self.read).await?;
        rows.iter().map(timer_from_row).collect()
    }

    async fn set_next_runs(&self, next: &[(i64, Option<i64>)]) -> Result<()> {
        set_next_runs_sqlite(self.write, next).await
    }

    async fn take_owed(&self, taking: &Taking<'_>) -> Result<Vec<OwedRow>> {
        take_sqlite(self.write, taking).await
    }

    async fn heartbeat(&self, node: &NodeInfo, shards: &str) -> Result<()> {
        sql::heartbeat!(self.write, node, shards)
    }

    async fn database_now_ms(&self) -> Result<Option<i64>> {
        Ok(None)
    }

    async fn record_history(&self, entries: &[HistoryEntry]) -> Result<()> {
        let mut tx = self.write.begin().await?;
        (*tx).insert_history(entries).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn insert_tasks(&self, t: &str, tasks: &[TaskData], now_ms: i64) -> Result<()> {
        insert_task_chunks!(
            self.write,
            tasks::insert_head(t).as_str(),
            " ON CONFLICT (task_id) DO NOTHING",
            tasks,
            now_ms
        )
    }

    async fn hold_tasks(&self, t: &str, want: usize, fair: bool, now_ms: i64) -> Result<Vec<TaskData>> {
        let now_s = now_ms.div_euclid(1_000);
        let due: Option<i32> = sqlx::query_scalar(&tasks::has_due(t)).bind(now_s).fetch_optional(self.read).await?;
        if due.is_none() {
            return Ok(Vec::new());
        }
        if fair {
            return hold_fair_sqlite(self.write, self.read, t, want, now_ms).await;
        }
        // One statement on the one writer: no lock needed.
        let rows = sqlx::query(&tasks::hold_oldest(t, ""))
            .bind(now_ms)
            .bind(now_s)
            .bind(want as i64)
            .fetch_all(self.write)
            .await?;
        let mut held = rows.iter().map(task_from_row).collect::<Result<Vec<_>>>()?;
        held.sort_by_key(|t| t.data.order_time);
        Ok(held.into_iter().map(|t| t.data).collect())
    }
}

impl TxDriver for sqlx::SqliteConnection {
    async fn insert_timer_rows(
        &mut self,
        timers: &[(&NewTimer, Load)],
        now_ms: i64,
    ) -> Result<Vec<(i64, String, String)>> {
        super::timers::insert_timers_sqlite(self, timers, now_ms).await
    }

    async fn insert_history(&mut self, entries: &[HistoryEntry]) -> Result<()> {
        crate::sql::history::insert_history_values!(self, entries)
    }

    async fn owe_notifications(&mut self, owing: &Owing<'_>) -> Result<Vec<bool>> {
        owe_sqlite(self, owing).await
    }

    async fn add_minute_fires(&mut self, app: &str, minute: i64, fires: i64) -> Result<()> {
        sql::usage::add_minute!(self, app, minute, fires)
    }

    async fn store_usage(&mut self, app: &str, timers: i64, cron_fpm: i64, minute_from: i64) -> Result<()> {
        sql::usage::insert_usage!(self, app, timers, cron_fpm, minute_from)
    }

    async fn deleting_once_apps(&mut self, _scope: Option<&[i64]>) -> Result<Vec<String>> {
        // One writer: the completion takes no lock another write waits on.
        Ok(Vec::new())
    }

    async fn complete_fired_once(&mut self, scope: Option<&[i64]>, now_ms: i64) -> Result<Vec<(i64, String, i64)>> {
        Ok(sqlx::query_as(&scoped(COMPLETE_FIRED_ONCE, scope)).bind(now_ms).fetch_all(&mut *self).await?)
    }

    async fn record_rows(&mut self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        record_sqlite_on(self, results, now_ms).await
    }
}
