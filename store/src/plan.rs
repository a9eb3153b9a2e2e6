//! The writes of an expansion plan (the migrator's step, or a timer
//! expanded when it is created, enabled or updated): its fires
//! ([`FireRepo::insert_planned_fires`]) and its timers' next fire
//! positions ([`TimerRepo::set_planned_next_runs`]), each written only
//! while its timer still has the `modify_time` the plan read.
//!
//! A plan is made from timers read before it is written; an `updateTimer`
//! (or a status change) may commit in between, delete the pending fires of
//! the old definition and expand the new one. Each statement therefore
//! joins its rows to `t_timer` on the id and the `modify_time` read, under
//! the timer row's lock: a shared one for inserts (`FOR SHARE`, `LOCK IN
//! SHARE MODE`; SQLite has one writer), the update's own for the next
//! fire position. Under that lock the row is the latest committed one, so either
//! the plan's write commits before the update takes the row (and the
//! update's delete, which follows its commit, sees and removes the fires)
//! or it reads the new `modify_time` and writes nothing. Still one
//! statement per batch, as the unchecked writes.
//!
//! [`FireRepo::insert_planned_fires`]: crate::FireRepo::insert_planned_fires
//! [`TimerRepo::set_planned_next_runs`]: crate::TimerRepo::set_planned_next_runs

use sqlx::{MySql, MySqlPool, PgPool, QueryBuilder, Sqlite, SqlitePool};

use crate::repo::{NextRun, PlannedFire};
use crate::sql::{padded, MAX_PARAMS, SQLITE_BATCH_ROWS};
use crate::{mysql, Database, Result};

/// The columns a planned fire is inserted into.
const INSERT_INTO: &str = "INTO t_timer_task (timer_id, app, run_timer, scheduled_timer, create_time, modify_time) ";

/// Fires per SQLite insert: five parameters a fire, two a statement.
const SQLITE_INSERT_ROWS: usize = (MAX_PARAMS - 2) / 5;

/// Fires per MySQL insert: well inside its packet and range optimizer limits.
const MYSQL_INSERT_ROWS: usize = 500;

/// Most timers of one MySQL next-fire update (a power of two).
const MYSQL_NEXT_ROWS: usize = 1024;

/// [`crate::FireRepo::insert_planned_fires`] on `db`.
pub(crate) async fn insert_fires(db: &Database, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
    if fires.is_empty() {
        return Ok(0);
    }
    match db {
        Database::Sqlite { write, .. } => insert_sqlite(write, fires, now_ms).await,
        Database::Postgres(pool) => insert_pg(pool, fires, now_ms).await,
        Database::Mysql(pool) => insert_mysql(pool, fires, now_ms).await,
    }
}

/// [`crate::TimerRepo::set_planned_next_runs`] on `db`.
pub(crate) async fn set_next_runs(db: &Database, next: &[NextRun]) -> Result<()> {
    if next.is_empty() {
        return Ok(());
    }
    match db {
        Database::Sqlite { write, .. } => set_next_runs_sqlite(write, next).await,
        Database::Postgres(pool) => set_next_runs_pg(pool, next).await,
        Database::Mysql(pool) => set_next_runs_mysql(pool, next).await,
    }
}

// ---- SQLite -------------------------------------------------------------

/// SQLite has one writer: the check reads the latest committed timer, and
/// no update commits before this transaction does. In input order (the
/// migrator's is by run time: a second's fires lie side by side).
async fn insert_sqlite(write: &SqlitePool, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
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
fn insert_sqlite_statement(chunk: &[PlannedFire], now_ms: i64) -> QueryBuilder<'_, Sqlite> {
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

/// One `UPDATE ... FROM (VALUES ...)` per [`SQLITE_BATCH_ROWS`] timers;
/// padded (the last row again sets the same value), so each shape is
/// prepared once.
async fn set_next_runs_sqlite(write: &SqlitePool, next: &[NextRun]) -> Result<()> {
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
    if next.len() <= SQLITE_BATCH_ROWS {
        statement(next).build().execute(write).await?;
        return Ok(());
    }
    let mut tx = write.begin().await?;
    for chunk in next.chunks(SQLITE_BATCH_ROWS) {
        statement(chunk).build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

// ---- PostgreSQL ---------------------------------------------------------

/// One statement whatever the batch size. The batch's timers are locked
/// first, each once and in id order (`FOR SHARE`: an update of one in
/// flight is waited for, and READ COMMITTED then reads its committed row),
/// and each fire is joined to its timer's `modify_time` as locked; keys go
/// in index order, so overlapping inserts cannot deadlock.
async fn insert_pg(pool: &PgPool, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
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
async fn set_next_runs_pg(pool: &PgPool, next: &[NextRun]) -> Result<()> {
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

// ---- MySQL --------------------------------------------------------------

/// Keys in index order, so overlapping inserts cannot deadlock; the
/// transaction runs again if InnoDB undid it as a deadlock's victim anyway
/// (the shared timer locks meet other writers of the timers).
async fn insert_mysql(pool: &MySqlPool, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
    let mut sorted: Vec<&PlannedFire> = fires.iter().collect();
    sorted.sort_by_key(|p| (p.fire.key.timer_id, p.fire.key.run_ms));
    mysql::retry_deadlocks(|| insert_mysql_once(pool, &sorted, now_ms)).await
}

async fn insert_mysql_once(pool: &MySqlPool, sorted: &[&PlannedFire], now_ms: i64) -> Result<u64> {
    let mut inserted = 0;
    let mut tx = pool.begin().await?;
    for chunk in sorted.chunks(MYSQL_INSERT_ROWS) {
        inserted += insert_mysql_statement(chunk, now_ms).build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(inserted)
}

/// One MySQL insert of `chunk`: its rows as a derived table of `UNION ALL`
/// rows (MySQL and MariaDB read their `VALUES` constructors differently)
/// joined to their timers. READ COMMITTED reads the timers without a lock
/// unless told: `LOCK IN SHARE MODE` (both servers' spelling) waits for an
/// update in flight and reads the committed row.
fn insert_mysql_statement<'a>(chunk: &[&'a PlannedFire], now_ms: i64) -> QueryBuilder<'a, MySql> {
    let mut qb = QueryBuilder::<MySql>::new(format!(
        "INSERT IGNORE {INSERT_INTO}SELECT v.timer_id, v.app, v.run_timer, v.scheduled, "
    ));
    qb.push_bind(now_ms).push(", ").push_bind(now_ms).push(" FROM (");
    for (i, p) in chunk.iter().enumerate() {
        let first = i == 0;
        qb.push(if first { "SELECT " } else { " UNION ALL SELECT " });
        qb.push_bind(p.fire.key.timer_id).push(if first { " AS timer_id, " } else { ", " });
        qb.push_bind(&p.fire.app).push(if first { " AS app, " } else { ", " });
        qb.push_bind(p.fire.key.run_ms).push(if first { " AS run_timer, " } else { ", " });
        qb.push_bind(p.timer_modified).push(if first { " AS modified, " } else { ", " });
        qb.push_bind(p.scheduled_ms).push(if first { " AS scheduled" } else { "" });
    }
    qb.push(
        ") v JOIN t_timer t ON t.timer_id = v.timer_id AND t.modify_time = v.modified
         ORDER BY v.timer_id, v.run_timer LOCK IN SHARE MODE",
    );
    qb
}

/// One `UPDATE ... JOIN` on a derived table per [`MYSQL_NEXT_ROWS`]
/// timers, in one transaction; padded, so each shape is prepared once.
/// The update locks the row and compares its committed `modify_time`.
async fn set_next_runs_mysql(pool: &MySqlPool, next: &[NextRun]) -> Result<()> {
    let mut tx = pool.begin().await?;
    for chunk in next.chunks(MYSQL_NEXT_ROWS) {
        let mut qb = QueryBuilder::<MySql>::new("UPDATE t_timer t JOIN (");
        for (i, n) in padded(chunk).enumerate() {
            let first = i == 0;
            qb.push(if first { "SELECT " } else { " UNION ALL SELECT " });
            qb.push_bind(n.timer_id).push(if first { " AS timer_id, " } else { ", " });
            qb.push_bind(n.run_ms).push(if first { " AS next_run, " } else { ", " });
            qb.push_bind(n.timer_modified).push(if first { " AS modified" } else { "" });
        }
        qb.push(") v ON t.timer_id = v.timer_id AND t.modify_time = v.modified SET t.next_run = v.next_run");
        qb.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}
