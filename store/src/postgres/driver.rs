//! PostgreSQL's driver: its statement texts, and the operations it writes
//! its own way (see [`crate::driver`]).

use std::borrow::Cow;

use xtimer_core::fire::{ClaimedFire, FireKey};
use xtimer_core::load::Load;
use xtimer_core::task::TaskData;
use xtimer_core::timer::{NewTimer, Timer};

use super::fires::{claim_pg, confirm_pg, insert_pg, reclaim_pg, record_pg_alone, record_pg_on, release_pg};
use super::notify::{owe_pg, take_pg};
use super::partition;
use super::plan;
use super::tasks::{hold_fair_postgres, insert_unnest, refresh_task_stats};
use super::timers::{get_timers_pg, set_next_runs_pg};
use crate::change::HistoryEntry;
use crate::conflict;
use crate::driver::{dialect, Driver, Statements, TxDriver};
use crate::repo::{ClaimOutcome, FireResult, NewFire, NextRun, PartitionReport, PlannedFire};
use crate::sql::notify::{OwedRow, Owing, Taking};
use crate::sql::tasks::{self, task_from_row};
use crate::sql::timer_from_row;
use crate::sql::timers::{scoped, COMPLETE_FIRED_ONCE, DELETING_ONCE_APPS, DUE};
use crate::sql::{self, Claimant};
use crate::Result;
use xtimer_core::node::NodeInfo;

/// PostgreSQL's one pool.
pub(crate) struct PgDriver<'a>(pub(crate) &'a sqlx::PgPool);

/// PostgreSQL's texts of the statements that differ: `ON CONFLICT`'s, with
/// reads that lock.
pub(crate) static STATEMENTS: Statements =
    crate::driver::on_conflict_statements(true, |t| tasks::task_table(t, "id BIGSERIAL PRIMARY KEY"));

// PostgreSQL reads a shared statement as written.
dialect!(Cow::Borrowed, STATEMENTS => sqlx::PgPool, sqlx::PgConnection);

impl Driver for PgDriver<'_> {
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> Result<u64> {
        insert_pg(self.0, fires, now_ms).await
    }

    async fn claim_fires(&self, keys: &[FireKey], claimant: Claimant<'_>) -> Result<ClaimOutcome> {
        claim_pg(self.0, keys, claimant).await
    }

    async fn reclaim_fires(
        &self,
        task_ids: &[i64],
        claimant: Claimant<'_>,
        alive_since_ms: i64,
    ) -> Result<ClaimOutcome> {
        reclaim_pg(self.0, task_ids, claimant, alive_since_ms).await
    }

    async fn record_alone(&self, results: &[FireResult], now_ms: i64) -> Result<Option<u64>> {
        record_pg_alone(self.0, results, now_ms).await
    }

    async fn release_fires(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
        release_pg(self.0, claims, now_ms).await
    }

    async fn confirm_claims(
        &self,
        node_id: &str,
        claims: &[ClaimedFire],
        lease_until: i64,
        now_ms: i64,
    ) -> Result<Vec<i64>> {
        confirm_pg(self.0, node_id, claims, lease_until, now_ms).await
    }

    async fn insert_planned_fires(&self, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
        conflict::retry(|| plan::insert_pg(self.0, fires, now_ms)).await
    }

    async fn set_planned_next_runs(&self, next: &[NextRun]) -> Result<()> {
        conflict::retry(|| plan::set_next_runs_pg(self.0, next)).await
    }

    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        get_timers_pg(self.0, ids).await
    }

    async fn due_timers(&self, window: i64, before_ms: i64, limit: u32) -> Result<Vec<Timer>> {
        let rows = sqlx::query(DUE).bind(window).bind(before_ms).bind(i64::from(limit)).fetch_all(self.0).await?;
        rows.iter().map(timer_from_row).collect()
    }

    async fn set_next_runs(&self, next: &[(i64, Option<i64>)]) -> Result<()> {
        set_next_runs_pg(self.0, next).await
    }

    async fn refresh_planner_stats(&self) {
        super::stats::refresh_if_stale(self.0).await;
    }

    async fn take_owed(&self, taking: &Taking<'_>) -> Result<Vec<OwedRow>> {
        take_pg(self.0, taking).await
    }

    async fn heartbeat(&self, node: &NodeInfo, shards: &str) -> Result<()> {
        sql::heartbeat!(self.0, node, shards)
    }

    async fn database_now_ms(&self) -> Result<Option<i64>> {
        // The server's UTC clock, in whole milliseconds rounded down (as
        // the node reads its own).
        const SQL: &str = "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)";
        Ok(Some(sqlx::query_scalar::<_, i64>(SQL).fetch_one(self.0).await?))
    }

    async fn record_history(&self, entries: &[HistoryEntry]) -> Result<()> {
        // One statement of one array per column: one prepared statement
        // whatever the count.
        const SQL: &str = "INSERT INTO t_timer_history (timer_id, app, at_ms, action, by_who, changes)
             SELECT timer_id, app, at_ms, action, by_who, changes
             FROM UNNEST($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[])
                  WITH ORDINALITY AS v(timer_id, app, at_ms, action, by_who, changes, ord)
             ORDER BY ord";
        sqlx::query(SQL)
            .bind(entries.iter().map(|e| e.timer_id).collect::<Vec<_>>())
            .bind(entries.iter().map(|e| e.app.as_str()).collect::<Vec<_>>())
            .bind(entries.iter().map(|e| e.at_ms).collect::<Vec<_>>())
            .bind(entries.iter().map(|e| e.action.as_str()).collect::<Vec<_>>())
            .bind(entries.iter().map(|e| e.by.as_str()).collect::<Vec<_>>())
            .bind(entries.iter().map(|e| e.changes.as_str()).collect::<Vec<_>>())
            .execute(self.0)
            .await?;
        Ok(())
    }

    async fn maintain_partitions(&self, now_ms: i64, keep_ms: i64) -> Result<PartitionReport> {
        partition::maintain(self.0, now_ms, Some(keep_ms)).await
    }

    async fn insert_tasks(&self, t: &str, tasks: &[TaskData], now_ms: i64) -> Result<()> {
        insert_unnest(self.0, &tasks::insert_head(t), tasks, now_ms).await
    }

    async fn hold_tasks(&self, t: &str, want: usize, fair: bool, now_ms: i64) -> Result<Vec<TaskData>> {
        let now_s = now_ms.div_euclid(1_000);
        let due: Option<i32> = sqlx::query_scalar(&tasks::has_due(t)).bind(now_s).fetch_optional(self.0).await?;
        if due.is_none() {
            return Ok(Vec::new());
        }
        if fair {
            return hold_fair_postgres(self.0, t, want, now_ms).await;
        }
        // Holds of other nodes skip the rows this one locked.
        let rows = sqlx::query(&tasks::hold_oldest(t, " FOR UPDATE SKIP LOCKED"))
            .bind(now_ms)
            .bind(now_s)
            .bind(want as i64)
            .fetch_all(self.0)
            .await?;
        let mut held = rows.iter().map(task_from_row).collect::<Result<Vec<_>>>()?;
        held.sort_by_key(|t| t.data.order_time);
        Ok(held.into_iter().map(|t| t.data).collect())
    }

    async fn refresh_task_stats(&self, t: &str) -> Result<bool> {
        refresh_task_stats(self.0, t).await
    }
}

impl TxDriver for sqlx::PgConnection {
    async fn insert_timer_rows(
        &mut self,
        timers: &[(&NewTimer, Load)],
        now_ms: i64,
    ) -> Result<Vec<(i64, String, String)>> {
        super::timers::insert_timers_pg(self, timers, now_ms).await
    }

    async fn insert_history(&mut self, entries: &[HistoryEntry]) -> Result<()> {
        crate::sql::history::insert_history_values!(self, entries)
    }

    async fn owe_notifications(&mut self, owing: &Owing<'_>) -> Result<Vec<bool>> {
        owe_pg(self, owing).await
    }

    async fn add_minute_fires(&mut self, app: &str, minute: i64, fires: i64) -> Result<()> {
        sql::usage::add_minute!(self, app, minute, fires)
    }

    async fn store_usage(&mut self, app: &str, timers: i64, cron_fpm: i64, minute_from: i64) -> Result<()> {
        sql::usage::insert_usage!(self, app, timers, cron_fpm, minute_from)
    }

    async fn deleting_once_apps(&mut self, scope: Option<&[i64]>) -> Result<Vec<String>> {
        let rows = sqlx::query(&scoped(DELETING_ONCE_APPS, scope)).fetch_all(&mut *self).await?;
        rows.iter().map(|row| sql::text(row, "app")).collect()
    }

    async fn complete_fired_once(&mut self, scope: Option<&[i64]>, now_ms: i64) -> Result<Vec<(i64, String, i64)>> {
        Ok(sqlx::query_as(&scoped(COMPLETE_FIRED_ONCE, scope)).bind(now_ms).fetch_all(&mut *self).await?)
    }

    async fn record_rows(&mut self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        record_pg_on(self, results, now_ms).await
    }
}
