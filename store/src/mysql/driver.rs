//! MySQL's driver: its statement texts, and the operations it writes its
//! own way (see [`crate::driver`]). A shared statement reads on MySQL as
//! [`statement`](super::statement) writes it.

use std::borrow::Cow;

use const_format::formatcp;
use xtimer_core::fire::{ClaimedFire, FireKey};
use xtimer_core::task::TaskData;

use super::fires::{claim_mysql, insert_mysql, reclaim_mysql, record_mysql_on};
use super::plan;
use super::statement;
use super::tasks::{create_table_mysql, hold_fair_mysql, hold_mysql};
use crate::conflict;
use crate::driver::{Dialect, Driver, Statements, TxDriver};
use crate::repo::{ClaimOutcome, FireResult, NewFire, NextRun, PartitionReport, PlannedFire};
use crate::sql::fence::confirm_by_select;
use crate::sql::fires::{release_one_by_one, MANUAL_FIRE};
use crate::sql::tasks::{self, insert_task_chunks, CFG_COLUMNS, INSERT_POSITIONS_HEAD};
use crate::sql::Claimant;
use crate::Result;

/// MySQL's one pool.
pub(crate) struct MysqlDriver<'a>(pub(crate) &'a sqlx::MySqlPool);

/// MySQL's texts of the statements that differ: `INSERT IGNORE` and
/// `ON DUPLICATE KEY UPDATE` for `ON CONFLICT`.
pub(crate) static STATEMENTS: Statements = Statements {
    insert_skipping: "INSERT IGNORE",
    skip_taken: |_| String::new(),
    delete_some: |table, _key, condition, limit| format!("DELETE FROM {table} WHERE {condition} LIMIT {limit}"),
    mark_hour_stale: " ON DUPLICATE KEY UPDATE stale = stale + 1",
    insert_manual_fire: formatcp!("INSERT IGNORE INTO {MANUAL_FIRE}"),
    task_table: create_table_mysql,
    insert_task_type: formatcp!(
        "INSERT IGNORE INTO t_schedule_cfg ({CFG_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    ),
    insert_task_positions: formatcp!("{INSERT_POSITIONS_HEAD} ON DUPLICATE KEY UPDATE task_type = task_type"),
};

impl Dialect for sqlx::MySqlPool {
    fn sql<'s>(&self, text: &'s str) -> Cow<'s, str> {
        Cow::Owned(statement(text))
    }

    fn statements(&self) -> &'static Statements {
        &STATEMENTS
    }
}

impl Dialect for sqlx::MySqlConnection {
    fn sql<'s>(&self, text: &'s str) -> Cow<'s, str> {
        Cow::Owned(statement(text))
    }

    fn statements(&self) -> &'static Statements {
        &STATEMENTS
    }
}

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

    async fn maintain_partitions(&self, _now_ms: i64, _keep_ms: i64) -> Result<PartitionReport> {
        Ok(PartitionReport::default())
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

    async fn refresh_task_stats(&self, _t: &str) -> Result<bool> {
        Ok(false)
    }
}

impl TxDriver for sqlx::MySqlConnection {
    async fn record_rows(&mut self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        record_mysql_on(self, results, now_ms).await
    }
}
