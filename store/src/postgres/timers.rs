//! PostgreSQL's statements for timers: the read by many ids and the batch
//! move of next fire positions, each one statement over arrays.

use const_format::formatcp;
use xtimer_core::timer::Timer;

use crate::sql::{timer_from_row, TIMER_COLUMNS};
use crate::Result;

/// The timers of `ids`, by id: one statement over an array.
pub(crate) async fn get_timers_pg(pool: &sqlx::PgPool, ids: &[i64]) -> Result<Vec<Timer>> {
    let sql = formatcp!("SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id = ANY($1::bigint[]) ORDER BY timer_id");
    sqlx::query(sql).bind(ids).fetch_all(pool).await?.iter().map(timer_from_row).collect()
}

/// [`TimerRepo::set_next_runs`](crate::TimerRepo::set_next_runs) on
/// PostgreSQL: one `UPDATE ... FROM UNNEST`.
pub(crate) async fn set_next_runs_pg(pool: &sqlx::PgPool, next: &[(i64, Option<i64>)]) -> Result<()> {
    sqlx::query(
        "UPDATE t_timer t SET next_run = v.next_run
         FROM UNNEST($1::bigint[], $2::bigint[]) AS v(timer_id, next_run) WHERE t.timer_id = v.timer_id",
    )
    .bind(next.iter().map(|(id, _)| *id).collect::<Vec<_>>())
    .bind(next.iter().map(|(_, run)| *run).collect::<Vec<_>>())
    .execute(pool)
    .await?;
    Ok(())
}
