//! [`NotifyRepo`] on [`Database`]: `t_notify_owed`, the notifications fires
//! owe (a timer's `onFailure`, `onMissed` and `onLate`; one of each per
//! fire at most, keyed by fire and kind).
//!
//! A notification is stored in the transaction that writes the result
//! making it owed, and only if that result was written (under the
//! notification's owner: fencing, as for results) and is one its kind is
//! owed for ([`owed_for!`]). The reconciler's missed marks owe theirs in
//! their own transaction (`FireRepo::mark_missed`). It is
//! held under a lease (`owner`, `send_at`) by the node sending it: first
//! the node that recorded it, which sends at once; after a crash or a stop,
//! whichever node takes it once the lease lapsed. Sent or given up, it is
//! deleted, so the table holds only what is owed now and the sweep reads
//! it by `send_at` alone.

use async_trait::async_trait;
use const_format::formatcp;
use sqlx::{MySqlConnection, PgConnection, QueryBuilder, Row, SqliteConnection};
use xtimer_core::fire::FireKey;

use crate::db::{on_db, Dialect};
use crate::fires::{bind_pg_texts, record_mysql_on, record_pg_on, record_sqlite_on};
use crate::repo::{FireRepo, FireResult, NotifyRepo, OwedKind, OwedNotification, Recorded};
use crate::sql::code;
use crate::{Database, Error, Result};

/// The columns a notification is read back with, as 64-bit integers in
/// every dialect (MySQL's casts come from [`Dialect::sql`]).
const OWED_COLUMNS: &str = "task_id, CAST(kind AS BIGINT) AS kind, timer_id, run_timer, \
     CAST(manual AS BIGINT) AS manual, CAST(attempt AS BIGINT) AS attempt, output, CAST(sends AS BIGINT) AS sends";

/// Whether the fire `f`'s status is one a notification of kind `$kind`
/// (SQL) is owed for: `onFailure` a failed fire, `onMissed` a missed or
/// skipped one, `onLate` any result of its first attempt (running on to a
/// retry, succeeded or failed).
macro_rules! owed_for {
    ($kind:literal) => {
        formatcp!(
            "CASE {kind} WHEN {failure} THEN f.status = {failed}
                         WHEN {missed} THEN f.status IN ({skipped}, {missed_status})
                         ELSE f.status IN ({running}, {succeeded}, {failed}) END",
            kind = $kind,
            failure = OwedKind::Failure as i64,
            missed = OwedKind::Missed as i64,
            failed = code::FAILED,
            skipped = code::SKIPPED,
            missed_status = code::MISSED,
            running = code::RUNNING,
            succeeded = code::SUCCEEDED,
        )
    };
}

/// Stores one notification unless it is owed already, if its fire's result
/// was written under its owner and is one its kind is owed for (SQLite and
/// PostgreSQL; MySQL says it its way). Binds: task, kind, timer, run time,
/// manual, attempt, output, owner, lease end, now.
const OWE: &str = formatcp!(
    "INSERT INTO t_notify_owed (task_id, kind, timer_id, run_timer, manual, attempt, output, sends, owner, send_at,
                                create_time)
     SELECT $1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10
     WHERE EXISTS (SELECT 1 FROM t_timer_task f WHERE f.task_id = $1 AND f.run_timer = $4 AND f.owner = $8
                   AND {})
     ON CONFLICT (task_id, kind) DO NOTHING",
    owed_for!("$2")
);

/// [`OWE`] on MySQL: each placeholder once, in order.
const OWE_MYSQL: &str = formatcp!(
    "INSERT IGNORE INTO t_notify_owed (task_id, kind, timer_id, run_timer, manual, attempt, output, sends, owner,
                                       send_at, create_time)
     SELECT ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ? FROM DUAL
     WHERE EXISTS (SELECT 1 FROM t_timer_task f WHERE f.task_id = ? AND f.owner = ? AND {})",
    owed_for!("?")
);

const RESCHEDULE: &str =
    "UPDATE t_notify_owed SET sends = $1, send_at = $2 WHERE task_id = $3 AND kind = $4 AND owner = $5";
const SETTLE: &str = "DELETE FROM t_notify_owed WHERE task_id = $1 AND kind = $2 AND owner = $3";

#[async_trait]
impl NotifyRepo for Database {
    async fn record_owing(
        &self,
        results: &[FireResult],
        owed: &[OwedNotification],
        lease_until: i64,
        now_ms: i64,
    ) -> Result<Recorded> {
        if owed.is_empty() {
            return Ok(Recorded { written: self.record(results, now_ms).await?, owed: Vec::new() });
        }
        let owing = Owing { owed, lease_until, now_ms };
        let (written, stored) = match self {
            Self::Sqlite { write, .. } => {
                let mut tx = write.begin().await?;
                let written = record_sqlite_on(&mut tx, results, now_ms).await?;
                let stored = owe_sqlite(&mut tx, &owing).await?;
                tx.commit().await?;
                (written, stored)
            }
            Self::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let written = record_pg_on(&mut tx, results, now_ms).await?;
                let stored = owe_pg(&mut tx, &owing).await?;
                tx.commit().await?;
                (written, stored)
            }
            Self::Mysql(pool) => {
                let mut tx = pool.begin().await?;
                let written = record_mysql_on(&mut tx, results, now_ms).await?;
                let stored = owe_mysql(&mut tx, &owing).await?;
                tx.commit().await?;
                (written, stored)
            }
        };
        let owed = owed.iter().zip(stored).filter(|(_, stored)| *stored).map(|(n, _)| n.clone()).collect();
        Ok(Recorded { written, owed })
    }

    async fn take_owed(&self, owner: &str, lease_until: i64, now_ms: i64, limit: u32) -> Result<Vec<OwedNotification>> {
        let rows = match self {
            Self::Sqlite { write, .. } => take_sqlite(write, owner, lease_until, now_ms, limit).await?,
            Self::Postgres(pool) => take_pg(pool, owner, lease_until, now_ms, limit).await?,
            Self::Mysql(pool) => take_mysql(pool, owner, lease_until, now_ms, limit).await?,
        };
        rows.into_iter().map(|row| row.owned_by(owner)).collect()
    }

    async fn reschedule_owed(&self, owed: &OwedNotification, sends: u32, send_at: i64) -> Result<bool> {
        let done = on_db!(self, write, pool => sqlx::query(&pool.sql(RESCHEDULE))
            .bind(i64::from(sends))
            .bind(send_at)
            .bind(owed.task_id)
            .bind(owed.kind.code())
            .bind(&owed.owner)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(done == 1)
    }

    async fn settle_owed(&self, owed: &OwedNotification) -> Result<bool> {
        let done = on_db!(self, write, pool => sqlx::query(&pool.sql(SETTLE))
            .bind(owed.task_id)
            .bind(owed.kind.code())
            .bind(&owed.owner)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(done == 1)
    }
}

/// Notifications to store with a batch of results, and their lease.
struct Owing<'a> {
    owed: &'a [OwedNotification],
    lease_until: i64,
    now_ms: i64,
}

/// Stores each notification of `owing` in the transaction `conn`; whether
/// each was stored, in order.
async fn owe_sqlite(conn: &mut SqliteConnection, owing: &Owing<'_>) -> Result<Vec<bool>> {
    let mut stored = Vec::with_capacity(owing.owed.len());
    for n in owing.owed {
        let done = sqlx::query(OWE)
            .bind(n.task_id)
            .bind(n.kind.code())
            .bind(n.key.timer_id)
            .bind(n.key.run_ms)
            .bind(i64::from(n.manual))
            .bind(i64::from(n.attempt))
            .bind(&n.output)
            .bind(&n.owner)
            .bind(owing.lease_until)
            .bind(owing.now_ms)
            .execute(&mut *conn)
            .await?;
        stored.push(done.rows_affected() == 1);
    }
    Ok(stored)
}

/// [`owe_sqlite`] on PostgreSQL: one statement for the batch.
async fn owe_pg(conn: &mut PgConnection, owing: &Owing<'_>) -> Result<Vec<bool>> {
    const SQL: &str = formatcp!(
        "INSERT INTO t_notify_owed (task_id, kind, timer_id, run_timer, manual, attempt, output, sends, owner, send_at,
                                    create_time)
         SELECT v.task_id, v.kind, v.timer_id, v.run_timer, v.manual, v.attempt, v.output, 0, v.owner, $9, $10
         FROM UNNEST($1::bigint[], $2::smallint[], $3::bigint[], $4::bigint[], $5::smallint[], $6::integer[],
                     $7::text[], $8::text[])
              AS v(task_id, kind, timer_id, run_timer, manual, attempt, output, owner)
         WHERE EXISTS (SELECT 1 FROM t_timer_task f WHERE f.task_id = v.task_id AND f.run_timer = v.run_timer
                       AND f.owner = v.owner AND {})
         ON CONFLICT (task_id, kind) DO NOTHING
         RETURNING task_id, kind",
        owed_for!("v.kind")
    );
    let owed = owing.owed;
    let query = sqlx::query(SQL)
        .bind(owed.iter().map(|n| n.task_id).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| n.kind.code() as i16).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| n.key.timer_id).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| n.key.run_ms).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| i16::from(n.manual)).collect::<Vec<_>>())
        .bind(owed.iter().map(|n| i32::try_from(n.attempt).unwrap_or(i32::MAX)).collect::<Vec<_>>());
    let query = bind_pg_texts(query, owed.iter().map(|n| n.output.as_str()));
    let rows = query
        .bind(owed.iter().map(|n| n.owner.as_str()).collect::<Vec<_>>())
        .bind(owing.lease_until)
        .bind(owing.now_ms)
        .fetch_all(&mut *conn)
        .await?;
    let mut stored = std::collections::HashSet::with_capacity(rows.len());
    for row in &rows {
        stored.insert((row.try_get::<i64, _>("task_id")?, i64::from(row.try_get::<i16, _>("kind")?)));
    }
    Ok(owed.iter().map(|n| stored.contains(&(n.task_id, n.kind.code()))).collect())
}

/// [`owe_sqlite`] on MySQL.
async fn owe_mysql(conn: &mut MySqlConnection, owing: &Owing<'_>) -> Result<Vec<bool>> {
    let mut stored = Vec::with_capacity(owing.owed.len());
    for n in owing.owed {
        let done = sqlx::query(OWE_MYSQL)
            .bind(n.task_id)
            .bind(n.kind.code())
            .bind(n.key.timer_id)
            .bind(n.key.run_ms)
            .bind(i64::from(n.manual))
            .bind(i64::from(n.attempt))
            .bind(&n.output)
            .bind(&n.owner)
            .bind(owing.lease_until)
            .bind(owing.now_ms)
            .bind(n.task_id)
            .bind(&n.owner)
            .bind(n.kind.code())
            .execute(&mut *conn)
            .await?;
        stored.push(done.rows_affected() == 1);
    }
    Ok(stored)
}

/// A notification as read back ([`OWED_COLUMNS`]), before its owner is set.
struct OwedRow {
    task_id: i64,
    kind: i64,
    key: FireKey,
    manual: bool,
    attempt: i64,
    output: String,
    sends: i64,
}

impl OwedRow {
    fn from_row<'r, R>(row: &'r R) -> Result<Self>
    where
        R: Row,
        &'r str: sqlx::ColumnIndex<R>,
        i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        String: sqlx::Decode<'r, R::Database>,
    {
        Ok(Self {
            task_id: row.try_get("task_id")?,
            kind: row.try_get("kind")?,
            key: FireKey { timer_id: row.try_get("timer_id")?, run_ms: row.try_get("run_timer")? },
            manual: row.try_get::<i64, _>("manual")? != 0,
            attempt: row.try_get("attempt")?,
            output: crate::sql::text(row, "output")?,
            sends: row.try_get("sends")?,
        })
    }

    /// The notification, held by `owner`.
    fn owned_by(self, owner: &str) -> Result<OwedNotification> {
        let kind = OwedKind::from_code(self.kind)
            .ok_or_else(|| Error::Corrupt(format!("t_notify_owed {}: kind {}", self.task_id, self.kind)))?;
        Ok(OwedNotification {
            task_id: self.task_id,
            kind,
            key: self.key,
            manual: self.manual,
            attempt: u32::try_from(self.attempt).unwrap_or(u32::MAX),
            output: self.output,
            sends: u32::try_from(self.sends).unwrap_or(u32::MAX),
            owner: owner.to_string(),
        })
    }
}

/// SQLite's one writer makes the read and the update one step.
async fn take_sqlite(
    write: &sqlx::SqlitePool,
    owner: &str,
    lease_until: i64,
    now_ms: i64,
    limit: u32,
) -> Result<Vec<OwedRow>> {
    const SQL: &str = formatcp!(
        "UPDATE t_notify_owed SET owner = $1, send_at = $2
         WHERE rowid IN (SELECT rowid FROM t_notify_owed WHERE send_at <= $3 ORDER BY send_at LIMIT $4)
         RETURNING {OWED_COLUMNS}"
    );
    let rows =
        sqlx::query(SQL).bind(owner).bind(lease_until).bind(now_ms).bind(i64::from(limit)).fetch_all(write).await?;
    rows.iter().map(OwedRow::from_row).collect()
}

/// Rows another taker holds are skipped, not waited for.
async fn take_pg(pool: &sqlx::PgPool, owner: &str, lease_until: i64, now_ms: i64, limit: u32) -> Result<Vec<OwedRow>> {
    const SQL: &str = formatcp!(
        "UPDATE t_notify_owed n SET owner = $1, send_at = $2
         FROM (SELECT task_id, kind FROM t_notify_owed WHERE send_at <= $3 ORDER BY send_at LIMIT $4
               FOR UPDATE SKIP LOCKED) d
         WHERE n.task_id = d.task_id AND n.kind = d.kind
         RETURNING n.task_id, CAST(n.kind AS BIGINT) AS kind, n.timer_id, n.run_timer,
                   CAST(n.manual AS BIGINT) AS manual, CAST(n.attempt AS BIGINT) AS attempt, n.output,
                   CAST(n.sends AS BIGINT) AS sends"
    );
    let rows =
        sqlx::query(SQL).bind(owner).bind(lease_until).bind(now_ms).bind(i64::from(limit)).fetch_all(pool).await?;
    rows.iter().map(OwedRow::from_row).collect()
}

/// MySQL has no `UPDATE ... RETURNING`: the due rows are locked (skipping
/// those another taker holds), then leased by key, in one transaction.
async fn take_mysql(
    pool: &sqlx::MySqlPool,
    owner: &str,
    lease_until: i64,
    now_ms: i64,
    limit: u32,
) -> Result<Vec<OwedRow>> {
    const SQL: &str = formatcp!(
        "SELECT {OWED_COLUMNS} FROM t_notify_owed WHERE send_at <= $1 ORDER BY send_at LIMIT $2 FOR UPDATE SKIP LOCKED"
    );
    let mut tx = pool.begin().await?;
    let rows = sqlx::query(&pool.sql(SQL)).bind(now_ms).bind(i64::from(limit)).fetch_all(&mut *tx).await?;
    let rows: Vec<OwedRow> = rows.iter().map(OwedRow::from_row).collect::<Result<_>>()?;
    if !rows.is_empty() {
        let mut qb = QueryBuilder::<sqlx::MySql>::new("UPDATE t_notify_owed SET owner = ");
        qb.push_bind(owner).push(", send_at = ").push_bind(lease_until).push(" WHERE (task_id, kind) IN (");
        let mut sep = qb.separated(", ");
        for r in &rows {
            sep.push("(").push_bind_unseparated(r.task_id).push_unseparated(", ");
            sep.push_bind_unseparated(r.kind).push_unseparated(")");
        }
        qb.push(")");
        qb.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(rows)
}
