//! SQLite's statements for timers: pages of timers read as one JSON value,
//! and the batch move of next fire positions.

use sqlx::{QueryBuilder, Row, Sqlite};
use xtimer_core::load::Load;
use xtimer_core::timer::NewTimer;
use xtimer_core::timer::Timer;

use const_format::formatcp;

use crate::sql::definition::{push_timer_rows, INSERT, ON_NAME_TAKEN, TIMER_COLUMNS};
use crate::sql::{padded, timer_from_row, MAX_PARAMS};
use crate::sqlite::execute_chunked;
use crate::sqlite::json_row::{JsonRow, TIMER_JSON};
use crate::{Error, Result};

/// SQLite: the timers of the ids in `$1`, a JSON array.
pub(crate) const GET_MANY_SQLITE: &str = formatcp!(
    "SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id IN (SELECT value FROM json_each($1)) ORDER BY timer_id"
);

/// `select` (of [`TIMER_COLUMNS`](crate::sql::definition::TIMER_COLUMNS), in the order
/// it gives) as one row: a JSON array of its rows. SQLite hands a statement's
/// rows over one at a time, each column copied, at a cost far above its own
/// reading: a page of 500 timers of 23 columns cost ~4.5 µs a timer that
/// way (most of planning a one-shot timer on the embedded default).
pub(crate) fn timers_as_json(select: &str) -> String {
    format!("SELECT json_group_array({}) FROM ({select})", TIMER_JSON.0)
}

/// The timers of a page read by [`timers_as_json`], or `None` when the
/// read failed as SQLite's "string or blob too big": a page over its length
/// limit (1,000,000,000 bytes: timers whose callbacks carry bodies near the
/// largest request), which the caller then reads row by row.
pub(crate) fn page_unless_too_big(read: std::result::Result<String, sqlx::Error>) -> Result<Option<Vec<Timer>>> {
    match read {
        Ok(page) => timers_from_json(&page).map(Some),
        Err(err) if too_big(&err) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Whether `err` is SQLite's "string or blob too big".
fn too_big(err: &sqlx::Error) -> bool {
    const SQLITE_TOOBIG: &str = "18";
    matches!(err, sqlx::Error::Database(e) if e.code().as_deref() == Some(SQLITE_TOOBIG))
}

/// The timers of a page read by [`timers_as_json`], in its order.
pub(crate) fn timers_from_json(page: &str) -> Result<Vec<Timer>> {
    let rows: Vec<JsonRow> = serde_json::from_str(page).map_err(|err| Error::Corrupt(format!("timers: {err}")))?;
    rows.iter().map(timer_from_row).collect()
}

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

/// Inserts timers in multi-row `VALUES` statements, skipping any whose
/// name is taken; `(timer_id, app, name)` of each row made.
pub(crate) async fn insert_timers_sqlite(
    c: &mut sqlx::SqliteConnection,
    timers: &[(&NewTimer, Load)],
    now_ms: i64,
) -> Result<Vec<(i64, String, String)>> {
    let mut made = Vec::with_capacity(timers.len());
    for chunk in timers.chunks(MAX_PARAMS / 22) {
        let mut qb = QueryBuilder::<Sqlite>::new(INSERT);
        push_timer_rows!(qb, chunk, now_ms);
        qb.push(ON_NAME_TAKEN);
        for row in qb.build().fetch_all(&mut *c).await? {
            made.push((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?));
        }
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value over SQLite's length limit fails as "too big", which
    /// [`too_big`] tells from every other failure.
    #[tokio::test]
    async fn a_value_over_the_length_limit_is_told_apart() {
        let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.unwrap();
        let err = sqlx::query("SELECT zeroblob(2000000000)").execute(&pool).await.unwrap_err();
        assert!(too_big(&err), "{err}");
        let err = sqlx::query("SELECT * FROM no_such_table").execute(&pool).await.unwrap_err();
        assert!(!too_big(&err), "{err}");
    }
}
