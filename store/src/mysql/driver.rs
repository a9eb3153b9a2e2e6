//! MySQL's driver: its statement texts, and the operations it writes its
//! own way (see [`crate::driver`]). A shared statement reads on MySQL as
//! [`statement`](super::statement) writes it.

use std::borrow::Cow;

use const_format::formatcp;
use xtimer_core::fire::{ClaimedFire, FireKey};
use xtimer_core::load::Load;
use xtimer_core::task::TaskData;
use xtimer_core::timer::{NewTimer, Timer};

use super::fires::{claim_mysql, insert_mysql, reclaim_mysql, record_mysql_on};
use super::notify::{owe_mysql, take_mysql};
use super::plan;
use super::statement;
use super::tasks::{create_table_mysql, hold_fair_mysql, hold_mysql};
use super::timers::{
    complete_fired_once_mysql, scoped_mysql, set_next_runs_mysql, DELETING_ONCE_APPS_MYSQL, DUE_MYSQL,
};
use super::usage;
use crate::change::HistoryEntry;
use crate::conflict;
use crate::driver::{dialect, Driver, Statements, TxDriver};
use crate::repo::{ClaimOutcome, FireResult, NewFire, NextRun, PlannedFire};
use crate::sql::fence::confirm_by_select;
use crate::sql::fires::{release_one_by_one, MANUAL_FIRE};
use crate::sql::notify::{OwedRow, Owing, Taking};
use crate::sql::tasks::{self, insert_task_chunks, CFG_COLUMNS, INSERT_POSITIONS_HEAD};
use crate::sql::timers::timers_by_id_lists;
use crate::sql::usage::UNCOUNTED;
use crate::sql::Claimant;
use crate::sql::{text, timer_from_row};
use crate::Result;
use xtimer_core::node::NodeInfo;

/// MySQL's one pool.
pub(crate) struct MysqlDriver<'a>(pub(crate) &'a sqlx::MySqlPool);

/// MySQL's texts of the statements that differ: `INSERT IGNORE` and
/// `ON DUPLICATE KEY UPDATE` for `ON CONFLICT`.
pub(crate) static STATEMENTS: Statements = Statements {
    insert_skipping: "INSERT IGNORE",
    skip_taken: |_| String::new(),
    read_usage: crate::sql::usage::READ_USAGE_LOCKED,
    lock_usages: " ORDER BY app FOR UPDATE",
    reads_lock: true,
    add_usage_counts: usage::ADD_USAGE_COUNTS,
    add_minute_fires: usage::ADD_MINUTE_FIRES,
    upsert_rebinds: true,
    insert_secret: "INSERT INTO t_app_secret (app, secret, create_time) VALUES ($1, $2, $3) \
         ON DUPLICATE KEY UPDATE app = app",
    upsert_calendar: "INSERT INTO t_calendar (app, name, spec, create_time, modify_time) VALUES ($1, $2, $3, $4, $5)
         ON DUPLICATE KEY UPDATE spec = $6, modify_time = $7",
    upsert_flow_limit: "INSERT INTO t_flow_limit (app, flow_key, rate_per_sec, parallelism, paused, modify_time)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON DUPLICATE KEY UPDATE rate_per_sec = $7, parallelism = $8, paused = $9, modify_time = $10",
    delete_some: |table, _key, condition, limit| format!("DELETE FROM {table} WHERE {condition} LIMIT {limit}"),
    mark_hour_stale: " ON DUPLICATE KEY UPDATE stale = stale + 1",
    insert_manual_fire: formatcp!("INSERT IGNORE INTO {MANUAL_FIRE}"),
    task_table: create_table_mysql,
    insert_task_type: formatcp!(
        "INSERT IGNORE INTO t_schedule_cfg ({CFG_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    ),
    insert_task_positions: formatcp!("{INSERT_POSITIONS_HEAD} ON DUPLICATE KEY UPDATE task_type = task_type"),
};

// MySQL reads a shared statement as `statement` rewrites it.
dialect!(|text| Cow::Owned(statement(text)), STATEMENTS => sqlx::MySqlPool, sqlx::MySqlConnection);

impl Driver for MysqlDriver<'_> {
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> Result<u64> {
        insert_mysql(self.0, fires, now_ms).await
    }

    async fn claim_fires(&self, keys: &[FireKey], claimant: Claimant<'_>) -> Result<ClaimOutcome> {
        claim_mysql(self.0, keys, claimant).await
    }

    async fn reclaim_fires(
        &self,
        task_ids: &[i64],
        claimant: Claimant<'_>,
        alive_since_ms: i64,
    ) -> Result<ClaimOutcome> {
        reclaim_mysql(self.0, task_ids, claimant, alive_since_ms).await
    }

    async fn record_alone(&self, _results: &[FireResult], _now_ms: i64) -> Result<Option<u64>> {
        // With no `UPDATE ... FROM`, a record is a transaction.
        Ok(None)
    }

    async fn release_fires(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
        release_one_by_one!(self.0, claims, now_ms)
    }

    async fn confirm_claims(
        &self,
        node_id: &str,
        claims: &[ClaimedFire],
        lease_until: i64,
        now_ms: i64,
    ) -> Result<Vec<i64>> {
        confirm_by_select!(self.0, node_id, claims, lease_until, now_ms, " FOR UPDATE")
    }

    async fn insert_planned_fires(&self, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
        plan::insert_mysql(self.0, fires, now_ms).await
    }

    async fn set_planned_next_runs(&self, next: &[NextRun]) -> Result<()> {
        conflict::retry(|| plan::set_next_runs_mysql(self.0, next)).await
    }

    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        timers_by_id_lists!(self.0, ids)
    }

    async fn due_timers(&self, window: i64, before_ms: i64, limit: u32) -> Result<Vec<Timer>> {
        let rows = sqlx::query(&statement(DUE_MYSQL))
            .bind(window)
            .bind(before_ms)
            .bind(i64::from(limit))
            .fetch_all(self.0)
            .await?;
        rows.iter().map(timer_from_row).collect()
    }

    async fn set_next_runs(&self, next: &[(i64, Option<i64>)]) -> Result<()> {
        set_next_runs_mysql(self.0, next).await
    }

    async fn take_owed(&self, taking: &Taking<'_>) -> Result<Vec<OwedRow>> {
        take_mysql(self.0, taking).await
    }

    async fn heartbeat(&self, node: &NodeInfo, shards: &str) -> Result<()> {
        // The changed columns are bound again: MySQL 8 and MariaDB share no
        // other way to name the new row.
        const SQL: &str = "INSERT INTO t_node (node_id, host, listen, started_at, heartbeat_at, shards)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON DUPLICATE KEY UPDATE heartbeat_at = $7, shards = $8, listen = $9";
        sqlx::query(&statement(SQL))
            .bind(&node.id)
            .bind(&node.host)
            .bind(&node.listen)
            .bind(node.started_at)
            .bind(node.heartbeat_at)
            .bind(shards)
            .bind(node.heartbeat_at)
            .bind(shards)
            .bind(&node.listen)
            .execute(self.0)
            .await?;
        Ok(())
    }

    async fn database_now_ms(&self) -> Result<Option<i64>> {
        // The server's UTC clock, whatever the session's time zone, in
        // whole milliseconds rounded down (as the node reads its own).
        const SQL: &str =
            "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)";
        Ok(Some(sqlx::query_scalar::<_, i64>(SQL).fetch_one(self.0).await?))
    }

    async fn record_history(&self, entries: &[HistoryEntry]) -> Result<()> {
        let mut tx = self.0.begin().await?;
        (*tx).insert_history(entries).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn insert_tasks(&self, t: &str, tasks: &[TaskData], now_ms: i64) -> Result<()> {
        let head = tasks::insert_head(t).replacen("INSERT INTO", "INSERT IGNORE INTO", 1);
        insert_task_chunks!(self.0, head.as_str(), "", tasks, now_ms)
    }

    async fn hold_tasks(&self, t: &str, want: usize, fair: bool, now_ms: i64) -> Result<Vec<TaskData>> {
        if !fair {
            // Begins with a plain read of what is due.
            return hold_mysql(self.0, t, want, now_ms).await;
        }
        let now_s = now_ms.div_euclid(1_000);
        let due: Option<i32> =
            sqlx::query_scalar(&statement(&tasks::has_due(t))).bind(now_s).fetch_optional(self.0).await?;
        if due.is_none() {
            return Ok(Vec::new());
        }
        hold_fair_mysql(self.0, t, want, now_ms).await
    }
}

impl TxDriver for sqlx::MySqlConnection {
    async fn insert_timer_rows(
        &mut self,
        timers: &[(&NewTimer, Load)],
        now_ms: i64,
    ) -> Result<Vec<(i64, String, String)>> {
        super::timers::insert_timers_mysql(self, timers, now_ms).await
    }

    async fn insert_history(&mut self, entries: &[HistoryEntry]) -> Result<()> {
        crate::sql::history::insert_history_values!(self, entries)
    }

    async fn owe_notifications(&mut self, owing: &Owing<'_>) -> Result<Vec<bool>> {
        owe_mysql(self, owing).await
    }

    async fn add_minute_fires(&mut self, app: &str, minute: i64, fires: i64) -> Result<()> {
        // The added fires are bound twice (MySQL 8 and MariaDB share no
        // other way to name the new row).
        sqlx::query(&statement(usage::ADD_MINUTE_MYSQL))
            .bind(app)
            .bind(minute)
            .bind(fires)
            .bind(fires)
            .execute(&mut *self)
            .await?;
        Ok(())
    }

    async fn hold_uncounted_usage(&mut self, app: &str) -> Result<bool> {
        sqlx::query(&statement(usage::PLACEHOLDER_USAGE_MYSQL)).bind(app).execute(&mut *self).await?;
        let timers: i64 = sqlx::query_scalar(&statement(usage::USAGE_TIMERS)).bind(app).fetch_one(&mut *self).await?;
        Ok(timers == UNCOUNTED)
    }

    async fn store_usage(&mut self, app: &str, timers: i64, cron_fpm: i64, minute_from: i64) -> Result<()> {
        // The placeholder row this transaction holds.
        sqlx::query(&statement(usage::SET_USAGE_MYSQL))
            .bind(timers)
            .bind(cron_fpm)
            .bind(app)
            .execute(&mut *self)
            .await?;
        sqlx::query(&statement(usage::INSERT_MINUTES_MYSQL)).bind(app).bind(minute_from).execute(&mut *self).await?;
        Ok(())
    }

    async fn deleting_once_apps(&mut self, scope: Option<&[i64]>) -> Result<Vec<String>> {
        let sql = statement(&scoped_mysql(DELETING_ONCE_APPS_MYSQL, scope));
        let rows = sqlx::query(&sql).fetch_all(&mut *self).await?;
        rows.iter().map(|row| text(row, "app")).collect()
    }

    async fn complete_fired_once(&mut self, scope: Option<&[i64]>, now_ms: i64) -> Result<Vec<(i64, String, i64)>> {
        complete_fired_once_mysql(self, scope, now_ms).await
    }

    async fn record_rows(&mut self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        record_mysql_on(self, results, now_ms).await
    }
}
