//! SQLite's statements for planned fires.

use sqlx::{QueryBuilder, Sqlite, SqlitePool};

use crate::repo::{NextRun, PlannedFire};
use crate::sql::plan::INSERT_INTO;
use crate::sql::{padded, MAX_PARAMS};
use crate::sqlite::execute_chunked;
use crate::Result;

/// Fires per SQLite insert: five parameters a fire, two a statement.
pub(crate) const SQLITE_INSERT_ROWS: usize = (MAX_PARAMS - 2) / 5;

/// SQLite has one writer: the check reads the latest committed timer, and
/// no update commits before this transaction does. In input order (the
/// migrator's is by run time: a second's fires lie side by side).
pub(crate) async fn insert_sqlite(write: &SqlitePool, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
    let mut inserted = 0;
    let mut tx = write.begin().await?;
    for chunk in fires.chunks(SQLITE_INSERT_ROWS) {
        inserted += insert_sqlite_statement(chunk, now_ms).build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(inserted)
}

/// One SQLite insert of `chunk`: `VALUES` joined to their timers (the
/// `WHERE` also keeps SQLite from reading `ON CONFLICT` as a join's `ON`).
pub(crate) fn insert_sqlite_statement(chunk: &[PlannedFire], now_ms: i64) -> QueryBuilder<'_, Sqlite> {
    let mut qb =
        QueryBuilder::<Sqlite>::new(format!("INSERT {INSERT_INTO}SELECT v.column1, v.column2, v.column3, v.column5, "));
    qb.push_bind(now_ms).push(", ").push_bind(now_ms).push(" FROM (VALUES ");
    let mut sep = qb.separated(", ");
    for p in chunk {
        sep.push("(").push_bind_unseparated(p.fire.key.timer_id);
        sep.push_unseparated(", ").push_bind_unseparated(&p.fire.app);
        sep.push_unseparated(", ").push_bind_unseparated(p.fire.key.run_ms);
        sep.push_unseparated(", ").push_bind_unseparated(p.timer_modified);
        sep.push_unseparated(", ").push_bind_unseparated(p.scheduled_ms).push_unseparated(")");
    }
    qb.push(
        ") AS v JOIN t_timer t ON t.timer_id = v.column1 WHERE t.modify_time = v.column4
         ON CONFLICT (timer_id, run_timer) DO NOTHING",
    );
    qb
}

/// One `UPDATE ... FROM (VALUES ...)` per `SQLITE_BATCH_ROWS` timers;
/// padded (the last row again sets the same value), so each shape is
/// prepared once.
pub(crate) async fn set_next_runs_sqlite(write: &SqlitePool, next: &[NextRun]) -> Result<()> {
    fn statement(chunk: &[NextRun]) -> QueryBuilder<'_, Sqlite> {
        let mut qb = QueryBuilder::<Sqlite>::new("UPDATE t_timer AS t SET next_run = v.column2 FROM (VALUES ");
        let mut sep = qb.separated(", ");
        for n in padded(chunk) {
            sep.push("(").push_bind_unseparated(n.timer_id);
            sep.push_unseparated(", ").push_bind_unseparated(n.run_ms);
            sep.push_unseparated(", ").push_bind_unseparated(n.timer_modified).push_unseparated(")");
        }
        qb.push(") AS v WHERE t.timer_id = v.column1 AND t.modify_time = v.column3");
        qb
    }
    execute_chunked(write, next, statement).await?;
    Ok(())
}
