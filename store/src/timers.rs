//! [`TimerRepo`] on [`Database`]: `t_timer`, written once for every dialect;
//! only the inserts (MySQL has no `RETURNING`), the read by many ids and the
//! batch move of next fire times differ, side by side.

use async_trait::async_trait;
use const_format::formatcp;
use sqlx::{MySql, QueryBuilder, Row, Sqlite};
use xtimer_core::timer::{NewTimer, Timer, TimerStatus};

use crate::db::{on_db, Dialect};
use crate::repo::TimerRepo;
use crate::sql::{code, name_taken_or, page_bound, schedule_columns, text, timer_from_row, MAX_PARAMS, TIMER_COLUMNS};
use crate::{Database, Error, Result};

// `next_run` starts at 0: an enabled timer is expanded at the next
// migrator step at the latest (its creator normally expands it at once).
const INSERT: &str = "INSERT INTO t_timer \
     (app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, create_time, modify_time, next_run) ";
const GET: &str = formatcp!("SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id = $1");
const LIST_APP: &str = formatcp!(
    "SELECT {TIMER_COLUMNS} FROM t_timer WHERE app = $1 AND status <> {} ORDER BY timer_id LIMIT $2 OFFSET $3",
    code::TIMER_DELETED
);
const COUNT_APP: &str = formatcp!("SELECT COUNT(*) FROM t_timer WHERE app = $1 AND status <> {}", code::TIMER_DELETED);
// The new status is bound twice: MySQL assigns left to right, so a
// `status` read after `SET status` would be the new one.
const SET_STATUS: &str = formatcp!(
    "UPDATE t_timer SET status = $1, modify_time = $2, next_run = CASE WHEN $3 = {enabled} THEN 0 ELSE next_run END
     WHERE timer_id = $4 AND status <> {deleted}",
    enabled = code::TIMER_ENABLED,
    deleted = code::TIMER_DELETED
);
const DUE: &str = formatcp!(
    "SELECT {TIMER_COLUMNS} FROM t_timer WHERE status = {} AND next_run < $1 ORDER BY next_run LIMIT $2",
    code::TIMER_ENABLED
);
const SET_NEXT_RUN: &str = "UPDATE t_timer SET next_run = $1 WHERE timer_id = $2";
const COMPLETE_FIRED_ONCE: &str = formatcp!(
    "UPDATE t_timer SET status = {completed}, modify_time = $1
     WHERE status = {enabled} AND next_run IS NULL AND kind = 'once'
       AND EXISTS (SELECT 1 FROM t_timer_task f WHERE f.timer_id = t_timer.timer_id
                   AND f.status NOT IN ({pending}, {running}))",
    completed = code::TIMER_COMPLETED,
    enabled = code::TIMER_ENABLED,
    pending = code::PENDING,
    running = code::RUNNING
);
const ENABLED: &str = formatcp!(
    "SELECT {TIMER_COLUMNS} FROM t_timer WHERE status = {} AND timer_id > $1 ORDER BY timer_id LIMIT $2",
    code::TIMER_ENABLED
);

fn notify_json(t: &NewTimer) -> String {
    serde_json::to_string(&t.notify).expect("notify serializes")
}

fn retry_json(t: &NewTimer) -> String {
    serde_json::to_string(&t.retry).expect("retry serializes")
}

/// The error of a batch whose insert hit the unique name index.
fn batch_name_taken(timers: &[NewTimer]) -> Error {
    Error::NameTaken { app: timers[0].app.clone(), name: "(one of the batch)".into() }
}

#[async_trait]
impl TimerRepo for Database {
    async fn create_timer(&self, t: &NewTimer, now_ms: i64) -> Result<Timer> {
        if let Self::Mysql(pool) = self {
            let ids = create_timers_mysql(pool, std::slice::from_ref(t), now_ms).await;
            return ids.map(|ids| t.stored(ids[0], now_ms)).map_err(|e| match e {
                Error::NameTaken { .. } => Error::NameTaken { app: t.app.clone(), name: t.name.clone() },
                e => e,
            });
        }
        let (kind, cron, timezone, run_at) = schedule_columns(&t.schedule);
        let sql =
            formatcp!("{INSERT} VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, 0) RETURNING timer_id");
        // `fetch_all`, not `fetch_one`: SQLite commits a RETURNING statement
        // only when it is stepped to its end, and an error there (a full
        // disk) would be lost if the statement were dropped after one row.
        let res: std::result::Result<Vec<i64>, sqlx::Error> = on_db!(self, write, pool => sqlx::query_scalar(sql)
            .bind(&t.app)
            .bind(&t.name)
            .bind(t.status.code())
            .bind(kind)
            .bind(cron)
            .bind(timezone)
            .bind(run_at)
            .bind(notify_json(t))
            .bind(retry_json(t))
            .bind(t.misfire.as_str())
            .bind(now_ms)
            .fetch_all(pool)
            .await);
        match res {
            Ok(ids) => match ids.first() {
                Some(&id) => Ok(t.stored(id, now_ms)),
                None => Err(Error::Corrupt("t_timer: an insert returned no id".into())),
            },
            Err(e) => Err(name_taken_or(e, &t.app, &t.name)),
        }
    }

    async fn create_timers(&self, timers: &[NewTimer], now_ms: i64) -> Result<Vec<i64>> {
        if timers.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Self::Sqlite { write, .. } => create_timers_sqlite(write, timers, now_ms).await,
            Self::Postgres(pool) => create_timers_pg(pool, timers, now_ms).await,
            Self::Mysql(pool) => create_timers_mysql(pool, timers, now_ms).await,
        }
    }

    async fn get_timer(&self, id: i64) -> Result<Option<Timer>> {
        let row = on_db!(self, read, pool => sqlx::query(&pool.sql(GET)).bind(id).fetch_optional(pool).await?
            .as_ref().map(timer_from_row).transpose());
        row
    }

    async fn get_timers(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Self::Postgres(pool) => {
                let sql = formatcp!(
                    "SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id = ANY($1::bigint[]) ORDER BY timer_id"
                );
                sqlx::query(sql).bind(ids).fetch_all(pool).await?.iter().map(timer_from_row).collect()
            }
            db => on_db!(db, read, pool => {
                let mut out = Vec::with_capacity(ids.len());
                for chunk in ids.chunks(MAX_PARAMS) {
                    let mut qb =
                        QueryBuilder::new(pool.sql(formatcp!("SELECT {TIMER_COLUMNS} FROM t_timer WHERE timer_id IN (")));
                    let mut sep = qb.separated(", ");
                    for id in chunk {
                        sep.push_bind(*id);
                    }
                    qb.push(")");
                    for row in qb.build().fetch_all(pool).await? {
                        out.push(timer_from_row(&row)?);
                    }
                }
                Ok(out)
            }),
        }
    }

    async fn list_app_timers(&self, app: &str, offset: u64, limit: u64) -> Result<(Vec<Timer>, u64)> {
        let (timers, total) = on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(LIST_APP))
                .bind(app)
                .bind(page_bound(limit))
                .bind(page_bound(offset))
                .fetch_all(pool)
                .await?;
            let total: i64 = sqlx::query_scalar(&pool.sql(COUNT_APP)).bind(app).fetch_one(pool).await?;
            (rows.iter().map(timer_from_row).collect::<Result<Vec<_>>>()?, total)
        });
        Ok((timers, total as u64))
    }

    async fn set_timer_status(&self, id: i64, status: TimerStatus, now_ms: i64) -> Result<bool> {
        let done = on_db!(self, write, pool => sqlx::query(&pool.sql(SET_STATUS))
            .bind(status.code())
            .bind(now_ms)
            .bind(status.code())
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(done == 1)
    }

    async fn due_timers(&self, before_ms: i64, limit: u32) -> Result<Vec<Timer>> {
        on_db!(self, read, pool => sqlx::query(&pool.sql(DUE))
            .bind(before_ms)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
            .iter()
            .map(timer_from_row)
            .collect())
    }

    async fn set_next_runs(&self, next: &[(i64, Option<i64>)]) -> Result<()> {
        if next.is_empty() {
            return Ok(());
        }
        match self {
            Self::Postgres(pool) => {
                sqlx::query(
                    "UPDATE t_timer t SET next_run = v.next_run
                     FROM UNNEST($1::bigint[], $2::bigint[]) AS v(timer_id, next_run) WHERE t.timer_id = v.timer_id",
                )
                .bind(next.iter().map(|(id, _)| *id).collect::<Vec<_>>())
                .bind(next.iter().map(|(_, run)| *run).collect::<Vec<_>>())
                .execute(pool)
                .await?;
            }
            // One statement per timer, in one transaction.
            db => on_db!(db, write, pool => {
                let sql = pool.sql(SET_NEXT_RUN);
                let mut tx = pool.begin().await?;
                for (id, run) in next {
                    sqlx::query(&sql).bind(run).bind(id).execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }),
        }
        Ok(())
    }

    async fn complete_fired_once(&self, now_ms: i64) -> Result<u64> {
        Ok(on_db!(self, write, pool => sqlx::query(&pool.sql(COMPLETE_FIRED_ONCE))
            .bind(now_ms)
            .execute(pool)
            .await?
            .rows_affected()))
    }

    async fn enabled_timers(&self, after_id: i64, limit: u32) -> Result<Vec<Timer>> {
        on_db!(self, read, pool => sqlx::query(&pool.sql(ENABLED))
            .bind(after_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
            .iter()
            .map(timer_from_row)
            .collect())
    }
}

/// SQLite: multi-row `VALUES` statements in one transaction.
async fn create_timers_sqlite(write: &sqlx::SqlitePool, timers: &[NewTimer], now_ms: i64) -> Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(timers.len());
    let mut tx = write.begin().await?;
    for chunk in timers.chunks(MAX_PARAMS / 13) {
        let mut qb = QueryBuilder::<Sqlite>::new(INSERT);
        qb.push_values(chunk, |mut b, t| {
            let (kind, cron, timezone, run_at) = schedule_columns(&t.schedule);
            b.push_bind(t.app.clone())
                .push_bind(t.name.clone())
                .push_bind(t.status.code())
                .push_bind(kind)
                .push_bind(cron.map(str::to_string))
                .push_bind(timezone.to_string())
                .push_bind(run_at)
                .push_bind(notify_json(t))
                .push_bind(retry_json(t))
                .push_bind(t.misfire.as_str())
                .push_bind(now_ms)
                .push_bind(now_ms)
                .push_bind(0_i64);
        });
        qb.push(" RETURNING timer_id");
        match qb.build().fetch_all(&mut *tx).await {
            Ok(rows) => {
                for row in rows {
                    ids.push(row.try_get("timer_id")?);
                }
            }
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => return Err(batch_name_taken(chunk)),
            Err(e) => return Err(e.into()),
        }
    }
    tx.commit().await?;
    Ok(ids)
}

/// PostgreSQL: one `INSERT ... SELECT FROM UNNEST` of one array per column,
/// so the batch is one statement (all or nothing). Rows go in input order,
/// so their ids, drawn from the sequence one after another, ascend in
/// input order too.
async fn create_timers_pg(pool: &sqlx::PgPool, timers: &[NewTimer], now_ms: i64) -> Result<Vec<i64>> {
    let schedules: Vec<_> = timers.iter().map(|t| schedule_columns(&t.schedule)).collect();
    let sql = formatcp!(
        "{INSERT} SELECT app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, $11, $11, 0
         FROM UNNEST($1::text[], $2::text[], $3::smallint[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                     $8::text[], $9::text[], $10::text[])
              WITH ORDINALITY AS v(app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, ord)
         ORDER BY ord
         RETURNING timer_id"
    );
    let res = sqlx::query_scalar::<_, i64>(sql)
        .bind(timers.iter().map(|t| t.app.as_str()).collect::<Vec<_>>())
        .bind(timers.iter().map(|t| t.name.as_str()).collect::<Vec<_>>())
        .bind(timers.iter().map(|t| t.status.code() as i16).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.0).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.1).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.2).collect::<Vec<_>>())
        .bind(schedules.iter().map(|s| s.3).collect::<Vec<_>>())
        .bind(timers.iter().map(notify_json).collect::<Vec<_>>())
        .bind(timers.iter().map(retry_json).collect::<Vec<_>>())
        .bind(timers.iter().map(|t| t.misfire.as_str()).collect::<Vec<_>>())
        .bind(now_ms)
        .fetch_all(pool)
        .await;
    match res {
        Ok(mut ids) => {
            ids.sort_unstable();
            Ok(ids)
        }
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(batch_name_taken(timers)),
        Err(e) => Err(e.into()),
    }
}

/// MySQL: multi-row `VALUES` statements in one transaction. With no
/// `RETURNING`, the ids are read back by the unique (app, live name) index,
/// from the first id the statement drew on, and given in input order.
async fn create_timers_mysql(pool: &sqlx::MySqlPool, timers: &[NewTimer], now_ms: i64) -> Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(timers.len());
    let mut tx = pool.begin().await?;
    for chunk in timers.chunks(500) {
        let mut qb = QueryBuilder::<MySql>::new(INSERT);
        qb.push_values(chunk, |mut b, t| {
            let (kind, cron, timezone, run_at) = schedule_columns(&t.schedule);
            b.push_bind(t.app.clone())
                .push_bind(t.name.clone())
                .push_bind(t.status.code())
                .push_bind(kind)
                .push_bind(cron.map(str::to_string))
                .push_bind(timezone.to_string())
                .push_bind(run_at)
                .push_bind(notify_json(t))
                .push_bind(retry_json(t))
                .push_bind(t.misfire.as_str())
                .push_bind(now_ms)
                .push_bind(now_ms)
                .push_bind(0_i64);
        });
        let first = match qb.build().execute(&mut *tx).await {
            Ok(done) => done.last_insert_id() as i64,
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => return Err(batch_name_taken(chunk)),
            Err(e) => return Err(e.into()),
        };
        let mut qb = QueryBuilder::<MySql>::new("SELECT timer_id, app, name FROM t_timer WHERE timer_id >= ");
        qb.push_bind(first).push(" AND (");
        let mut sep = qb.separated(" OR ");
        for t in chunk {
            sep.push("(app = ").push_bind_unseparated(&t.app);
            sep.push_unseparated(" AND live_name = ").push_bind_unseparated(&t.name).push_unseparated(")");
        }
        qb.push(")");
        let rows = qb.build().fetch_all(&mut *tx).await?;
        let mut by_key = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let key = (text(row, "app")?, text(row, "name")?);
            by_key.insert(key, row.try_get::<i64, _>("timer_id")?);
        }
        for t in chunk {
            match by_key.get(&(t.app.clone(), t.name.clone())) {
                Some(&id) => ids.push(id),
                None => return Err(Error::Corrupt(format!("t_timer: inserted {}/{} not found", t.app, t.name))),
            }
        }
    }
    tx.commit().await?;
    Ok(ids)
}
