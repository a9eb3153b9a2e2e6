//! PostgreSQL's statements for planned fires.

use sqlx::PgPool;

use crate::repo::{NextRun, PlannedFire};
use crate::Result;

/// One statement whatever the batch size. The batch's timers are locked
/// first, each once and in id order (`FOR SHARE`: an update of one in
/// flight is waited for, and READ COMMITTED then reads its committed row),
/// and each fire is joined to its timer's `modify_time` as locked; keys go
/// in index order, so overlapping inserts cannot deadlock.
pub(crate) async fn insert_pg(pool: &PgPool, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
    const SQL: &str = "WITH t AS MATERIALIZED (
             SELECT timer_id, modify_time FROM t_timer WHERE timer_id = ANY($1::bigint[])
             ORDER BY timer_id FOR SHARE
         )
         INSERT INTO t_timer_task (timer_id, app, run_timer, scheduled_timer, create_time, modify_time)
         SELECT v.timer_id, v.app, v.run_timer, v.scheduled, $5, $5
         FROM UNNEST($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $6::bigint[])
              AS v(timer_id, app, run_timer, modified, scheduled)
         JOIN t ON t.timer_id = v.timer_id AND t.modify_time = v.modified
         ORDER BY v.timer_id, v.run_timer
         ON CONFLICT (timer_id, run_timer) DO NOTHING";
    let done = sqlx::query(SQL)
        .bind(fires.iter().map(|p| p.fire.key.timer_id).collect::<Vec<_>>())
        .bind(fires.iter().map(|p| p.fire.app.as_str()).collect::<Vec<_>>())
        .bind(fires.iter().map(|p| p.fire.key.run_ms).collect::<Vec<_>>())
        .bind(fires.iter().map(|p| p.timer_modified).collect::<Vec<_>>())
        .bind(now_ms)
        .bind(fires.iter().map(|p| p.scheduled_ms).collect::<Vec<_>>())
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// One statement; an update of the timer in flight is waited for and its
/// committed `modify_time` compared.
pub(crate) async fn set_next_runs_pg(pool: &PgPool, next: &[NextRun]) -> Result<()> {
    const SQL: &str = "UPDATE t_timer t SET next_run = v.next_run
         FROM UNNEST($1::bigint[], $2::bigint[], $3::bigint[]) AS v(timer_id, next_run, modified)
         WHERE t.timer_id = v.timer_id AND t.modify_time = v.modified";
    sqlx::query(SQL)
        .bind(next.iter().map(|n| n.timer_id).collect::<Vec<_>>())
        .bind(next.iter().map(|n| n.run_ms).collect::<Vec<_>>())
        .bind(next.iter().map(|n| n.timer_modified).collect::<Vec<_>>())
        .execute(pool)
        .await?;
    Ok(())
}
