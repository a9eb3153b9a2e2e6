//! PostgreSQL's statements for timers: the read by many ids and the batch
//! move of next fire positions, each one statement over arrays.

use const_format::formatcp;
use xtimer_core::load::Load;
use xtimer_core::timer::{NewTimer, Timer};

use crate::sql::definition::{json, DEFINITION, INSERT, ON_NAME_TAKEN, PG_TYPES, TIMER_COLUMNS};
use crate::sql::{peak_column, schedule_columns, timer_from_row, timing_column};
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

/// A create: one array per column (app, then the definition in its order,
/// the next run and the peak), the create time once, rows in input order.
static INSERT_TIMERS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let types = std::iter::once("text").chain(PG_TYPES.iter().copied()).chain(["bigint", "bigint"]);
    let arrays: Vec<String> = types.enumerate().map(|(i, t)| format!("${}::{t}[]", i + 1)).collect();
    let now = arrays.len() + 1;
    format!(
        "{INSERT} SELECT app, {DEFINITION}, ${now}, ${now}, next_run, peak FROM UNNEST({})
         WITH ORDINALITY AS v(app, {DEFINITION}, next_run, peak, ord) ORDER BY ord{ON_NAME_TAKEN}",
        arrays.join(", ")
    )
});

/// Inserts timers in one `INSERT ... SELECT FROM UNNEST` of one array per
/// column, rows in input order, skipping any whose name is taken;
/// `(timer_id, app, name)` of each row made.
pub(crate) async fn insert_timers_pg(
    c: &mut sqlx::PgConnection,
    timers: &[(&NewTimer, Load)],
    now_ms: i64,
) -> Result<Vec<(i64, String, String)>> {
    let schedules: Vec<_> = timers.iter().map(|(t, _)| schedule_columns(&t.schedule)).collect();
    // The nullable text columns.
    let column = |f: fn(&NewTimer) -> Option<String>| timers.iter().map(|(t, _)| f(t)).collect::<Vec<_>>();
    let rows = sqlx::query_as::<_, (i64, String, String)>(&INSERT_TIMERS)
        .bind(timers.iter().map(|(t, _)| t.app.as_str()).collect::<Vec<_>>())
        .bind(timers.iter().map(|(t, _)| t.name.as_str()).collect::<Vec<_>>())
        .bind(timers.iter().map(|(t, _)| t.status.code() as i16).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.0).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.1).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.2).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.3).collect::<Vec<_>>())
        .bind(timers.iter().map(|(t, _)| json(&t.notify)).collect::<Vec<_>>())
        .bind(timers.iter().map(|(t, _)| json(&t.retry)).collect::<Vec<_>>())
        .bind(timers.iter().map(|(t, _)| t.misfire.as_str()).collect::<Vec<_>>())
        .bind(timers.iter().map(|(t, _)| i16::from(t.delete_after_run)).collect::<Vec<_>>())
        .bind(column(|t| t.on_failure.as_ref().map(json)))
        .bind(timers.iter().map(|(t, _)| t.pause_after_failures.map(|n| n as i32)).collect::<Vec<_>>())
        .bind(timers.iter().map(|(t, _)| t.overlap.as_str()).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.4).collect::<Vec<_>>())
        .bind(column(|t| timing_column(&t.timing)))
        .bind(column(|t| t.on_missed.as_ref().map(json)))
        .bind(column(|t| t.on_late.as_ref().map(json)))
        .bind(column(|t| t.dedupe.as_ref().map(|d| d.key.clone())))
        .bind(timers.iter().map(|(t, _)| t.dedupe.as_ref().map(|d| d.first_run_ms)).collect::<Vec<_>>())
        .bind(timers.iter().map(|(t, _)| t.first_next_run(now_ms)).collect::<Vec<_>>())
        .bind(timers.iter().map(|(_, load)| peak_column(*load)).collect::<Vec<_>>())
        .bind(now_ms)
        .fetch_all(&mut *c)
        .await?;
    Ok(rows)
}
