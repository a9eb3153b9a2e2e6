//! MySQL's statements for timers (completion, next fire positions).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use const_format::formatcp;
use sqlx::{MySql, QueryBuilder, Row};

use crate::sql::timers::{deleting_once_apps, scoped, DUE_WHERE, NOTHING_LEFT};
use xtimer_core::load::Load;
use xtimer_core::timer::NewTimer;

use crate::sql::definition::{push_timer_rows, INSERT};
use crate::sql::{code, padded, push_list, text, MAX_PARAMS};
use crate::Result;

/// [`DUE`](crate::sql::timers::DUE) on MySQL, which keeps its `(status, next_run)` key (and whose
/// `/` divides in decimals; the window bound holds all the same).
pub(crate) const DUE_MYSQL: &str = formatcp!("{DUE_WHERE} ORDER BY next_run LIMIT $3");

/// [`FINISHED`](crate::sql::timers::FINISHED) for MySQL, its `EXISTS` tests written as counts, each a
/// probe of the timer's own fires. MariaDB turns an `EXISTS` into an `IN`
/// over a materialized table of every pending or running fire (or every
/// fire): during a 50,000 burst, 54,000 rows read per completion check of
/// 1,000 timers, against 1,500 this way.
pub(crate) const FINISHED_MYSQL: &str = formatcp!(
    "{NOTHING_LEFT}
       AND (SELECT COUNT(*) FROM t_timer_task f WHERE f.timer_id = t_timer.timer_id
            AND f.status IN ({pending}, {running})) = 0
       AND (kind <> 'once' OR (SELECT COUNT(*) FROM t_timer_task f WHERE f.timer_id = t_timer.timer_id) > 0)",
    pending = code::PENDING,
    running = code::RUNNING
);

/// [`DELETING_ONCE_APPS`](crate::sql::timers::DELETING_ONCE_APPS) for
/// MySQL ([`FINISHED_MYSQL`]).
pub(crate) const DELETING_ONCE_APPS_MYSQL: &str = deleting_once_apps!(FINISHED_MYSQL);

/// MySQL: [`COMPLETE_FIRED_ONCE`] in two steps, with no `RETURNING`: the
/// one-shots to end, locked, then set by id.
pub(crate) const FIRED_ONCE_MYSQL: &str = formatcp!(
    "SELECT timer_id, app, CAST(delete_after_run AS SIGNED) AS delete_after_run FROM t_timer
     WHERE status = {enabled} AND {FINISHED_MYSQL}
     FOR UPDATE",
    enabled = code::TIMER_ENABLED
);

/// [`scoped`] on MySQL, where the timers of a scope are read by primary key:
/// MySQL's planner otherwise takes the status index, every enabled timer.
pub(crate) fn scoped_mysql<'s>(statement: &'s str, scope: Option<&[i64]>) -> std::borrow::Cow<'s, str> {
    match scope {
        None => std::borrow::Cow::Borrowed(statement),
        Some(_) => std::borrow::Cow::Owned(scoped(statement, scope).replacen(
            "FROM t_timer\n",
            "FROM t_timer FORCE INDEX (PRIMARY)\n",
            1,
        )),
    }
}

/// MySQL: ends the enabled one-shots whose fire has ended (completed, or
/// deleted with deleteAfterRun); returns (app, new status) of each.
pub(crate) async fn complete_fired_once_mysql(
    c: &mut sqlx::MySqlConnection,
    scope: Option<&[i64]>,
    now_ms: i64,
) -> Result<Vec<(i64, String, i64)>> {
    let mut ended = Vec::new();
    let mut by_status: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for row in sqlx::query(&scoped_mysql(FIRED_ONCE_MYSQL, scope)).fetch_all(&mut *c).await? {
        let delete = row.try_get::<i64, _>("delete_after_run")? == 1;
        let status = if delete { code::TIMER_DELETED } else { code::TIMER_COMPLETED };
        let id: i64 = row.try_get("timer_id")?;
        by_status.entry(status).or_default().push(id);
        ended.push((id, text(&row, "app")?, status));
    }
    for (status, ids) in by_status {
        for chunk in ids.chunks(MAX_PARAMS) {
            let mut qb = QueryBuilder::<MySql>::new("UPDATE t_timer SET status = ");
            qb.push_bind(status).push(", modify_time = ").push_bind(now_ms).push(" WHERE timer_id IN (");
            push_list(&mut qb, chunk.iter().copied());
            qb.push(")");
            qb.build().execute(&mut *c).await?;
        }
    }
    Ok(ended)
}

/// [`TimerRepo::set_next_runs`] on MySQL: one `UPDATE ... JOIN` on a
/// derived table per [`MYSQL_BATCH_ROWS`] timers, in one transaction, not
/// one statement per timer (a round trip each).
pub(crate) async fn set_next_runs_mysql(pool: &sqlx::MySqlPool, next: &[(i64, Option<i64>)]) -> Result<()> {
    let mut tx = pool.begin().await?;
    for chunk in next.chunks(MYSQL_BATCH_ROWS) {
        // `UNION ALL` rows, as both MySQL and MariaDB read them (their
        // `VALUES` constructors differ); padded, like SQLite's, so each
        // shape is prepared once.
        let mut qb = QueryBuilder::<MySql>::new("UPDATE t_timer t JOIN (");
        for (i, (id, run)) in padded(chunk).enumerate() {
            qb.push(if i == 0 { "SELECT " } else { " UNION ALL SELECT " });
            qb.push_bind(*id).push(if i == 0 { " AS timer_id, " } else { ", " });
            qb.push_bind(*run).push(if i == 0 { " AS next_run" } else { "" });
        }
        qb.push(") v ON t.timer_id = v.timer_id SET t.next_run = v.next_run");
        qb.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Most rows of one MySQL `set_next_runs` statement (a power of two).
pub(crate) const MYSQL_BATCH_ROWS: usize = 1024;

/// Inserts timers in multi-row `INSERT IGNORE` statements (a taken name
/// skips its row, as `ON CONFLICT DO NOTHING` does). With no `RETURNING`,
/// each statement's rows are read back by app from the first id it drew
/// on, and kept by name: the caller holds the usage lock of every app in
/// the batch, so no other transaction adds a timer of these apps
/// meanwhile, and a name taken before has a smaller id.
pub(crate) async fn insert_timers_mysql(
    c: &mut sqlx::MySqlConnection,
    timers: &[(&NewTimer, Load)],
    now_ms: i64,
) -> Result<Vec<(i64, String, String)>> {
    let mut made = Vec::with_capacity(timers.len());
    for chunk in timers.chunks(500) {
        let mut qb = QueryBuilder::<MySql>::new(INSERT.replacen("INSERT", "INSERT IGNORE", 1));
        push_timer_rows!(qb, chunk, now_ms);
        let done = qb.build().execute(&mut *c).await?;
        if done.rows_affected() == 0 {
            continue;
        }
        // By app, not by (app, name) pairs: an `OR` of 500 pairs cost the
        // server ~9 ms to plan and run. The rows of these apps from the
        // statement's first id on are its own (and this transaction's
        // earlier chunks', left out by name).
        let apps: BTreeSet<&str> = chunk.iter().map(|(t, _)| t.app.as_str()).collect();
        let mut qb = QueryBuilder::<MySql>::new("SELECT timer_id, app, name FROM t_timer WHERE timer_id >= ");
        qb.push_bind(done.last_insert_id() as i64).push(" AND app IN (");
        push_list(&mut qb, apps);
        qb.push(") ORDER BY timer_id");
        let names: HashSet<(&str, &str)> = chunk.iter().map(|(t, _)| (t.app.as_str(), t.name.as_str())).collect();
        for row in qb.build().fetch_all(&mut *c).await? {
            let (app, name) = (text(&row, "app")?, text(&row, "name")?);
            if names.contains(&(app.as_str(), name.as_str())) {
                made.push((row.try_get("timer_id")?, app, name));
            }
        }
    }
    Ok(made)
}
