//! SQLite's driver: its statement texts, and the operations it writes its
//! own way (see [`crate::driver`]).

use std::borrow::Cow;

use xtimer_core::fire::{ClaimedFire, FireKey};
use xtimer_core::task::TaskData;

use super::fires::{claim_sqlite, insert_sqlite, reclaim_sqlite, record_sqlite_alone, record_sqlite_on};
use super::plan;
use super::tasks::hold_fair_sqlite;
use crate::driver::{Dialect, Driver, Statements, TxDriver};
use crate::repo::{ClaimOutcome, FireResult, NewFire, NextRun, PartitionReport, PlannedFire};
use crate::sql::fence::confirm_by_select;
use crate::sql::fires::release_one_by_one;
use crate::sql::tasks::{self, insert_task_chunks, task_from_row};
use crate::sql::{self, Claimant};
use crate::Result;

/// SQLite's pools: every write goes through `write` (one connection),
/// reads use `read`.
pub(crate) struct SqliteDriver<'a> {
    pub(crate) write: &'a sqlx::SqlitePool,
    pub(crate) read: &'a sqlx::SqlitePool,
}

/// SQLite's texts of the statements that differ.
pub(crate) static STATEMENTS: Statements = Statements {
    insert_skipping: "INSERT",
    skip_taken: sql::on_conflict_do_nothing,
    delete_some: sql::delete_by_key,
    mark_hour_stale: sql::MARK_HOUR_STALE,
    insert_manual_fire: sql::fires::INSERT_MANUAL,
    task_table: |t| tasks::task_table(t, "id INTEGER PRIMARY KEY AUTOINCREMENT"),
    insert_task_type: tasks::INSERT_TYPE,
    insert_task_positions: tasks::INSERT_POSITIONS,
};

/// SQLite reads a shared statement as written.
macro_rules! as_written {
    ($($t:ty),*) => {$(
        impl Dialect for $t {
            fn sql<'s>(&self, text: &'s str) -> Cow<'s, str> {
                Cow::Borrowed(text)
            }

            fn statements(&self) -> &'static Statements {
                &STATEMENTS
            }
        }
    )*};
}
as_written!(sqlx::SqlitePool, sqlx::SqliteConnection);

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

    async fn maintain_partitions(&self, _now_ms: i64, _keep_ms: i64) -> Result<PartitionReport> {
        // `t_timer_task` is one table.
        Ok(PartitionReport::default())
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

    async fn refresh_task_stats(&self, _t: &str) -> Result<bool> {
        // SQLite's planner needs none.
        Ok(false)
    }
}

impl TxDriver for sqlx::SqliteConnection {
    async fn record_rows(&mut self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        record_sqlite_on(self, results, now_ms).await
    }
}
