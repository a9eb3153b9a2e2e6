//! PostgreSQL's driver: its statement texts, and the operations it writes
//! its own way (see [`crate::driver`]).

use std::borrow::Cow;

use xtimer_core::fire::{ClaimedFire, FireKey};
use xtimer_core::task::TaskData;

use super::fires::{claim_pg, confirm_pg, insert_pg, reclaim_pg, record_pg_alone, record_pg_on, release_pg};
use super::partition;
use super::plan;
use super::tasks::{hold_fair_postgres, insert_unnest, refresh_task_stats};
use crate::conflict;
use crate::driver::{Dialect, Driver, Statements, TxDriver};
use crate::repo::{ClaimOutcome, FireResult, NewFire, NextRun, PartitionReport, PlannedFire};
use crate::sql::tasks::{self, task_from_row};
use crate::sql::{self, Claimant};
use crate::Result;

/// PostgreSQL's one pool.
pub(crate) struct PgDriver<'a>(pub(crate) &'a sqlx::PgPool);

/// PostgreSQL's texts of the statements that differ.
pub(crate) static STATEMENTS: Statements = Statements {
    insert_skipping: "INSERT",
    skip_taken: sql::on_conflict_do_nothing,
    delete_some: sql::delete_by_key,
    mark_hour_stale: sql::MARK_HOUR_STALE,
    insert_manual_fire: sql::fires::INSERT_MANUAL,
    task_table: |t| tasks::task_table(t, "id BIGSERIAL PRIMARY KEY"),
    insert_task_type: tasks::INSERT_TYPE,
    insert_task_positions: tasks::INSERT_POSITIONS,
};

/// PostgreSQL reads a shared statement as written.
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
as_written!(sqlx::PgPool, sqlx::PgConnection);

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
    async fn record_rows(&mut self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        record_pg_on(self, results, now_ms).await
    }
}
