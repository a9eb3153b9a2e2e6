//! PostgreSQL's statements for task queues: the batch insert, the fair
//! hold, the planner's statistics.

use sqlx::Row;
use xtimer_core::task::{TaskData, TaskStatus};

use crate::sql::tasks::{fair_candidate_cap, fair_candidates, fair_order, task_from_row, FAIR_ORDER, TASK_COLUMNS};
use crate::Result;

/// Changed rows after which [`refresh_task_stats`] re-analyzes a table.
const STATS_MIN_CHANGES: i64 = 10_000;

/// PostgreSQL: the batch as one column array per field, in one statement
/// of one shape whatever the batch size (one round trip, one plan).
pub(crate) async fn insert_unnest(pool: &sqlx::PgPool, head: &str, tasks: &[TaskData], now_ms: i64) -> Result<()> {
    let text = |f: fn(&TaskData) -> &String| tasks.iter().map(|t| f(t).clone()).collect::<Vec<_>>();
    let int = |f: fn(&TaskData) -> i64| tasks.iter().map(f).collect::<Vec<_>>();
    let sql = format!(
        "{head}SELECT u.*, $13, $13 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], \
         $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::bigint[]) AS u \
         ON CONFLICT (task_id) DO NOTHING"
    );
    sqlx::query(&sql)
        .bind(text(|t| &t.user_id))
        .bind(text(|t| &t.task_id))
        .bind(text(|t| &t.task_type))
        .bind(text(|t| &t.task_stage))
        .bind(int(|t| i64::from(t.status)))
        .bind(int(|t| t.priority.unwrap_or(0)))
        .bind(int(|t| t.crt_retry_num))
        .bind(int(|t| t.max_retry_num))
        .bind(int(|t| t.max_retry_interval))
        .bind(text(|t| &t.schedule_log))
        .bind(text(|t| &t.context))
        .bind(int(|t| t.order_time))
        .bind(now_ms)
        .execute(pool)
        .await?;
    Ok(())
}

/// PostgreSQL: the fair hold of table `t` ([`FAIR_ORDER`]), one statement.
/// Only the rows of `h` are locked (`SKIP LOCKED`, as an oldest-first hold).
pub(crate) async fn hold_fair_postgres(
    pool: &sqlx::PgPool,
    t: &str,
    want: usize,
    now_ms: i64,
) -> Result<Vec<TaskData>> {
    let sql = format!(
        "UPDATE \"{t}\" SET status = {processing}, modify_time = $1 WHERE id IN (\
         SELECT h.id FROM {from} ORDER BY {FAIR_ORDER} LIMIT $5 FOR UPDATE OF h SKIP LOCKED) \
         RETURNING id, {TASK_COLUMNS}",
        processing = TaskStatus::Processing.code(),
        from = fair_candidates(t, ["$2", "$3", "$4"]),
    );
    let rows = sqlx::query(&sql)
        .bind(now_ms)
        .bind(now_ms.div_euclid(1_000))
        .bind(want as i64)
        .bind(fair_candidate_cap(want))
        .bind(want as i64)
        .fetch_all(pool)
        .await?;
    Ok(fair_order(rows.iter().map(|row| Ok((row.try_get("id")?, task_from_row(row)?.data))).collect::<Result<_>>()?))
}

/// Refreshes the planner's statistics of task table `t` when many rows
/// changed since they were taken; returns whether it did. Autovacuum does
/// the same, but up to a minute later, and a burst of creates meanwhile
/// makes the planner trade the hold's index scan for a sort of the whole
/// table.
pub(crate) async fn refresh_task_stats(pool: &sqlx::PgPool, t: &str) -> Result<bool> {
    let stale: Option<bool> = sqlx::query_scalar(
        "SELECT n_mod_since_analyze > $2 AND n_mod_since_analyze > n_live_tup / 5 \
         FROM pg_stat_user_tables WHERE relname = $1 AND schemaname = current_schema()",
    )
    .bind(t)
    .bind(STATS_MIN_CHANGES)
    .fetch_optional(pool)
    .await?;
    if stale != Some(true) {
        return Ok(false);
    }
    // SKIP_LOCKED: a table a VACUUM holds is analyzed on a later pass.
    sqlx::query(&format!("ANALYZE (SKIP_LOCKED) \"{t}\"")).execute(pool).await?;
    Ok(true)
}
