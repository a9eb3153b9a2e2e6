//! SQLite's statements for timers (completion, next fire positions).

use sqlx::{QueryBuilder, Sqlite};

use crate::sql::padded;
use crate::sqlite::execute_chunked;
use crate::Result;

/// [`TimerRepo::set_next_runs`] on SQLite: one `UPDATE ... FROM (VALUES ...)`
/// per `SQLITE_BATCH_ROWS` timers (one, as the migrator pages them), not
/// one statement per timer: each statement is a round trip to the
/// connection's thread, and a page of due timers is thousands of them.
pub(crate) async fn set_next_runs_sqlite(write: &sqlx::SqlitePool, next: &[(i64, Option<i64>)]) -> Result<()> {
    fn statement(chunk: &[(i64, Option<i64>)]) -> QueryBuilder<'_, Sqlite> {
        let mut qb = QueryBuilder::<Sqlite>::new("UPDATE t_timer AS t SET next_run = v.column2 FROM (VALUES ");
        let mut sep = qb.separated(", ");
        // Padding repeats the last pair, which sets the same value again.
        for (id, run) in padded(chunk) {
            sep.push("(").push_bind_unseparated(*id).push_unseparated(", ");
            sep.push_bind_unseparated(*run).push_unseparated(")");
        }
        qb.push(") AS v WHERE t.timer_id = v.column1");
        qb
    }
    execute_chunked(write, next, statement).await?;
    Ok(())
}
