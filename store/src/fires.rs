//! [`FireRepo`] on [`Database`]: `t_timer_task`. Reads, `mark_missed` and
//! the overdue scan are written once; the hot batch statements (insert,
//! claim, reclaim, record, release) differ by dialect and sit side by side:
//!
//! - SQLite batches are multi-row `VALUES` lists in one transaction on its
//!   one writer connection, so a claim is atomic without row locks.
//! - PostgreSQL batches bind one array per column and expand them with
//!   `UNNEST` (one statement of a fixed text whatever the batch size);
//!   claims lock the fires they take with `FOR UPDATE SKIP LOCKED`, so
//!   concurrent claimers never wait for each other and never both win a
//!   fire; inserts take keys in index order, so they cannot deadlock. The
//!   table is partitioned by UTC day of run time (see `partition`):
//!   claims, results and releases name each fire's run time and bound
//!   their batch's, so they read only the partitions of those days.
//! - MySQL has neither arrays nor `UPDATE ... RETURNING`: batches are
//!   multi-row `VALUES` lists, and a claim is a transaction that locks the
//!   fires it takes (`SELECT ... FOR UPDATE SKIP LOCKED`, as on PostgreSQL)
//!   and then updates them by id. Results and releases are one statement
//!   per fire in one transaction (MySQL assigns columns left to right, so
//!   each reads the row as it was).

use std::collections::HashMap;

use async_trait::async_trait;
use const_format::formatcp;
use sqlx::mysql::MySqlRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{
    MySql, MySqlConnection, MySqlPool, PgConnection, PgPool, QueryBuilder, Row, Sqlite, SqliteConnection, SqlitePool,
};
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};

use crate::db::{on_db, Dialect};
use crate::repo::{
    BackfillFire, ClaimOutcome, FireDetail, FireOutcome, FireRepo, FireResult, FireWindow, NewFire, Overdue,
    PartitionReport,
};
use crate::sql::{
    claim_taken_over, claimed_from_row, code, fire_from_row, fire_status, key_from_row, lease_judged_at, opt_text,
    padded, page_bound, push_id_list, rounds_by_task, CLAIMED_COLUMNS_PG, CLAIMED_COLUMNS_SQLITE, FIRE_COLUMNS,
    MAX_PARAMS, SKIPPED_OUTPUT, SQLITE_BATCH_ROWS, TIMER_ENABLED,
};
use crate::{mysql, partition, placement, Database, Error, Result};

/// The start of the statement that owes the `onMissed` of fires just
/// marked missed ([`OWE_MISSED_FROM`] goes on after the binds of its send
/// time and create time).
const OWE_MISSED_COLUMNS: &str = "t_notify_owed (task_id, kind, timer_id, run_timer, manual, attempt, output, sends, \
     owner, send_at, create_time) SELECT f.task_id, 2, f.timer_id, f.run_timer, f.manual, f.attempt, f.output, 0, \
     NULL, ";
const OWE_MISSED: &str = formatcp!("INSERT INTO {OWE_MISSED_COLUMNS}");
const OWE_MISSED_MYSQL: &str = formatcp!("INSERT IGNORE INTO {OWE_MISSED_COLUMNS}");
/// The fires marked missed at the bound time whose timer has an `onMissed`
/// (`AND` the ids follow).
const OWE_MISSED_FROM: &str = formatcp!(
    " FROM t_timer_task f JOIN t_timer t ON t.timer_id = f.timer_id
     WHERE t.on_missed IS NOT NULL AND f.status = {} AND f.modify_time = ",
    code::MISSED
);

const PENDING_BETWEEN: &str = formatcp!(
    "SELECT timer_id, run_timer FROM t_timer_task
     WHERE status = {} AND run_timer >= $1 AND run_timer < $2 ORDER BY run_timer LIMIT $3",
    code::PENDING
);
// A text of its own rather than `$4 IS NULL OR timer_id = $4`, so each gets
// a plan on its own index (a cached generic plan would serve both badly).
const PENDING_BETWEEN_OF_TIMER: &str = formatcp!(
    "SELECT timer_id, run_timer FROM t_timer_task
     WHERE timer_id = $1 AND status = {} AND run_timer >= $2 AND run_timer < $3 ORDER BY run_timer LIMIT $4",
    code::PENDING
);
/// A manual fire (triggerTimer) unless the timer has a fire at that time.
fn insert_manual(db: &Database) -> &'static str {
    match db {
        Database::Mysql(_) => {
            "INSERT IGNORE INTO t_timer_task (timer_id, app, run_timer, manual, create_time, modify_time)
             VALUES ($1, $2, $3, 1, $4, $5)"
        }
        _ => {
            "INSERT INTO t_timer_task (timer_id, app, run_timer, manual, create_time, modify_time)
             VALUES ($1, $2, $3, 1, $4, $5) ON CONFLICT (timer_id, run_timer) DO NOTHING"
        }
    }
}
/// Scheduled times in `[$4, $5)`: sent in `[$2, $3)`, the same window
/// widened by the widest spread (a fire is sent at most that much after
/// its scheduled time).
const RUN_TIMES_BETWEEN: &str = "SELECT COALESCE(scheduled_timer, run_timer) AS scheduled FROM t_timer_task
     WHERE timer_id = $1 AND run_timer >= $2 AND run_timer < $3
       AND COALESCE(scheduled_timer, run_timer) >= $4 AND COALESCE(scheduled_timer, run_timer) < $5
     ORDER BY 1";
const DELETE_PENDING_FROM: &str = formatcp!(
    "DELETE FROM t_timer_task WHERE timer_id = $1 AND status = {} AND run_timer >= $2 AND manual = 0
         AND COALESCE(scheduled_timer, run_timer) >= $3",
    code::PENDING
);
const RUNNING_BEFORE: &str = formatcp!(
    "SELECT COUNT(*) FROM t_timer_task WHERE timer_id = $1 AND task_id <> $2 AND status = {} AND run_timer < $3",
    code::RUNNING
);
// Listings bind: timer, the status filter twice, the window's time if any,
// then (lists) limit and offset.
const LIST: &str = formatcp!(
    "SELECT {FIRE_COLUMNS} FROM t_timer_task WHERE timer_id = $1 AND ($2 IS NULL OR status = $3)
     ORDER BY run_timer DESC LIMIT $4 OFFSET $5"
);
const COUNT: &str = "SELECT COUNT(*) FROM t_timer_task WHERE timer_id = $1 AND ($2 IS NULL OR status = $3)";
const LIST_DUE: &str = formatcp!(
    "SELECT {FIRE_COLUMNS} FROM t_timer_task WHERE timer_id = $1 AND ($2 IS NULL OR status = $3)
     AND run_timer <= $4 ORDER BY run_timer DESC LIMIT $5 OFFSET $6"
);
const COUNT_DUE: &str =
    "SELECT COUNT(*) FROM t_timer_task WHERE timer_id = $1 AND ($2 IS NULL OR status = $3) AND run_timer <= $4";
const LIST_UPCOMING: &str = formatcp!(
    "SELECT {FIRE_COLUMNS} FROM t_timer_task WHERE timer_id = $1 AND ($2 IS NULL OR status = $3)
     AND status = {pending} AND run_timer > $4 ORDER BY run_timer LIMIT $5 OFFSET $6",
    pending = code::PENDING
);
const COUNT_UPCOMING: &str = formatcp!(
    "SELECT COUNT(*) FROM t_timer_task WHERE timer_id = $1 AND ($2 IS NULL OR status = $3)
     AND status = {pending} AND run_timer > $4",
    pending = code::PENDING
);

/// A timer's fire of a scheduled time: sent in `[$2, $3]` (the time, and
/// up to the widest spread after it), of scheduled time `$4`; a scheduled
/// fire before a manual one of the same time.
const FIRE_AT: &str = formatcp!(
    "SELECT {FIRE_COLUMNS}, owner, lease_until FROM t_timer_task
     WHERE timer_id = $1 AND run_timer >= $2 AND run_timer <= $3 AND COALESCE(scheduled_timer, run_timer) = $4
     ORDER BY manual, run_timer LIMIT 1"
);
/// Status and lateness of a timer's fires run in `[$2, $3]`, newest first:
/// a range of the `(timer_id, run_timer)` key.
const OUTCOMES_BETWEEN: &str = "SELECT CAST(status AS BIGINT) AS status, cost_time FROM t_timer_task
     WHERE timer_id = $1 AND run_timer >= $2 AND run_timer <= $3 ORDER BY run_timer DESC LIMIT $4";

const ENDED_SINCE: &str = formatcp!(
    "SELECT {FIRE_COLUMNS} FROM t_timer_task WHERE status IN ({succeeded}, {failed}) AND run_timer >= $1
     ORDER BY run_timer DESC LIMIT $2",
    succeeded = code::SUCCEEDED,
    failed = code::FAILED
);

#[async_trait]
impl FireRepo for Database {
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> Result<u64> {
        if fires.is_empty() {
            return Ok(0);
        }
        match self {
            Self::Sqlite { write, .. } => insert_sqlite(write, fires, now_ms).await,
            Self::Postgres(pool) => insert_pg(pool, fires, now_ms).await,
            Self::Mysql(pool) => insert_mysql(pool, fires, now_ms).await,
        }
    }

    async fn insert_planned_fires(&self, fires: &[crate::repo::PlannedFire], now_ms: i64) -> Result<u64> {
        crate::plan::insert_fires(self, fires, now_ms).await
    }

    async fn pending_between(
        &self,
        timer_id: Option<i64>,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<FireKey>> {
        let sql = if timer_id.is_some() { PENDING_BETWEEN_OF_TIMER } else { PENDING_BETWEEN };
        on_db!(self, read, pool => {
            let sql = pool.sql(sql);
            let mut query = sqlx::query(&sql);
            if let Some(id) = timer_id {
                query = query.bind(id);
            }
            query.bind(from_ms).bind(to_ms).bind(i64::from(limit)).fetch_all(pool).await?.iter().map(key_from_row).collect()
        })
    }

    async fn insert_manual_fire(&self, fire: &NewFire, now_ms: i64) -> Result<bool> {
        let done = on_db!(self, write, pool => sqlx::query(&pool.sql(insert_manual(self)))
            .bind(fire.key.timer_id)
            .bind(&fire.app)
            .bind(fire.key.run_ms)
            .bind(now_ms)
            .bind(now_ms)
            .execute(pool)
            .await?
            .rows_affected());
        Ok(done == 1)
    }

    async fn insert_backfill(&self, fires: &[BackfillFire], now_ms: i64) -> Result<u64> {
        if fires.is_empty() {
            return Ok(0);
        }
        // Insert-or-ignore on the fire's key: MySQL says so up front.
        let (insert, on_conflict) = match self {
            Self::Mysql(_) => ("INSERT IGNORE", ""),
            _ => ("INSERT", " ON CONFLICT (timer_id, run_timer) DO NOTHING"),
        };
        on_db!(self, write, pool => {
            let mut inserted = 0;
            let mut tx = pool.begin().await?;
            for chunk in fires.chunks(MAX_PARAMS / 6) {
                let mut qb = QueryBuilder::new(format!(
                    "{insert} INTO t_timer_task (timer_id, app, run_timer, backfill_at, create_time, modify_time) "
                ));
                qb.push_values(chunk, |mut b, f| {
                    b.push_bind(f.fire.key.timer_id)
                        .push_bind(&f.fire.app)
                        .push_bind(f.fire.key.run_ms)
                        .push_bind(f.send_at_ms)
                        .push_bind(now_ms)
                        .push_bind(now_ms);
                });
                qb.push(on_conflict);
                inserted += qb.build().execute(&mut *tx).await?.rows_affected();
            }
            tx.commit().await?;
            Ok(inserted)
        })
    }

    async fn replayable(
        &self,
        timer_ids: &[i64],
        statuses: &[FireStatus],
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<(i64, i64, i64)>> {
        if timer_ids.is_empty() || statuses.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT task_id, timer_id, run_timer FROM t_timer_task WHERE timer_id IN ({}) AND status IN ({})
               AND run_timer >= $1 AND run_timer < $2 ORDER BY run_timer, task_id LIMIT {limit}",
            numbers(timer_ids.iter().copied()),
            numbers(statuses.iter().map(|s| s.code())),
        );
        Ok(on_db!(self, read, pool => {
            sqlx::query_as(&pool.sql(&sql)).bind(from_ms).bind(to_ms).fetch_all(pool).await?
        }))
    }

    async fn replay(&self, fires: &[(i64, i64)], statuses: &[FireStatus], now_ms: i64) -> Result<u64> {
        const CHUNK: usize = 500;
        let statuses = numbers(statuses.iter().map(|s| s.code()));
        let mut replayed = 0;
        for chunk in fires.chunks(CHUNK) {
            let send_at: String = chunk.iter().map(|(id, at)| format!(" WHEN {id} THEN {at}")).collect();
            let sql = format!(
                "UPDATE t_timer_task SET status = {pending}, backfill_at = CASE task_id{send_at} END, replayed = 1,
                     modify_time = $1
                 WHERE task_id IN ({ids}) AND status IN ({statuses})",
                pending = code::PENDING,
                ids = numbers(chunk.iter().map(|(id, _)| *id)),
            );
            replayed += on_db!(self, write, pool => {
                sqlx::query(&pool.sql(&sql)).bind(now_ms).execute(pool).await?.rows_affected()
            });
        }
        Ok(replayed)
    }

    async fn run_times_between(&self, timer_id: i64, from_ms: i64, to_ms: i64) -> Result<Vec<i64>> {
        let widest = xtimer_core::when::MAX_SPREAD_MS as i64;
        Ok(on_db!(self, read, pool => sqlx::query_scalar(&pool.sql(RUN_TIMES_BETWEEN))
            .bind(timer_id)
            .bind(from_ms)
            .bind(to_ms.saturating_add(widest))
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(pool)
            .await?))
    }

    async fn place_spread(&self, placements: &[(i64, i64, i64)]) -> Result<HashMap<(i64, i64), i64>> {
        placement::place(self, placements).await
    }

    async fn planned_per_second(&self, app: Option<&str>, from_ms: i64, to_ms: i64) -> Result<Vec<(i64, u64)>> {
        placement::planned_per_second(self, app, from_ms, to_ms).await
    }

    async fn forget_placements(&self, before_ms: i64, limit: u32) -> Result<u64> {
        placement::forget(self, before_ms, limit).await
    }

    async fn running_before(&self, timer_id: i64, task_id: i64, run_ms: i64) -> Result<u64> {
        let n: i64 = on_db!(self, read, pool => sqlx::query_scalar(&pool.sql(RUNNING_BEFORE))
            .bind(timer_id)
            .bind(task_id)
            .bind(run_ms)
            .fetch_one(pool)
            .await?);
        Ok(n as u64)
    }

    async fn delete_pending_from(&self, timer_id: i64, from_ms: i64) -> Result<u64> {
        Ok(on_db!(self, write, pool => sqlx::query(&pool.sql(DELETE_PENDING_FROM))
            .bind(timer_id)
            .bind(from_ms)
            .bind(from_ms)
            .execute(pool)
            .await?
            .rows_affected()))
    }

    async fn claim(&self, keys: &[FireKey], owner: &str, lease_ms: i64, now_ms: i64) -> Result<ClaimOutcome> {
        if keys.is_empty() {
            return Ok(ClaimOutcome::default());
        }
        match self {
            Self::Sqlite { write, .. } => claim_sqlite(write, keys, owner, lease_ms, now_ms).await,
            Self::Postgres(pool) => claim_pg(pool, keys, owner, lease_ms, now_ms).await,
            // A deadlock's victim was undone whole: it runs again.
            Self::Mysql(pool) => mysql::retry_deadlocks(|| claim_mysql(pool, keys, owner, lease_ms, now_ms)).await,
        }
    }

    async fn reclaim(
        &self,
        task_ids: &[i64],
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
    ) -> Result<ClaimOutcome> {
        if task_ids.is_empty() {
            return Ok(ClaimOutcome::default());
        }
        match self {
            Self::Sqlite { write, .. } => {
                reclaim_sqlite(write, task_ids, owner, lease_ms, now_ms, alive_since_ms).await
            }
            Self::Postgres(pool) => reclaim_pg(pool, task_ids, owner, lease_ms, now_ms, alive_since_ms).await,
            Self::Mysql(pool) => {
                let reclaim = || reclaim_mysql(pool, task_ids, owner, lease_ms, now_ms, alive_since_ms);
                mysql::retry_deadlocks(reclaim).await
            }
        }
    }

    async fn record(&self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        if results.is_empty() {
            return Ok(0);
        }
        match self {
            Self::Sqlite { write, .. } => record_sqlite(write, results, now_ms).await,
            Self::Postgres(pool) => record_pg(pool, results, now_ms).await,
            Self::Mysql(pool) => record_mysql(pool, results, now_ms).await,
        }
    }

    async fn release(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
        if claims.is_empty() {
            return Ok(0);
        }
        match self {
            Self::Postgres(pool) => release_pg(pool, claims, now_ms).await,
            // One statement per fire, in one transaction.
            db => on_db!(db, write, pool => {
                const SQL: &str = formatcp!(
                    "UPDATE t_timer_task SET status = {}, owner = NULL, lease_until = NULL, modify_time = $1
                     WHERE task_id = $2 AND owner = $3 AND status = {}",
                    code::PENDING,
                    code::RUNNING
                );
                let sql = pool.sql(SQL);
                let mut released = 0;
                let mut tx = pool.begin().await?;
                for c in claims {
                    released += sqlx::query(&sql)
                        .bind(now_ms)
                        .bind(c.task_id)
                        .bind(&c.owner)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                }
                tx.commit().await?;
                Ok(released)
            }),
        }
    }

    async fn confirm_claims(
        &self,
        node_id: &str,
        claims: &[ClaimedFire],
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<i64>> {
        crate::fence::confirm_claims(self, node_id, claims, lease_ms, now_ms).await
    }

    async fn mark_missed(&self, task_ids: &[i64], output: &str, now_ms: i64) -> Result<u64> {
        if task_ids.is_empty() {
            return Ok(0);
        }
        let mysql = matches!(self, Self::Mysql(_));
        on_db!(self, write, pool => {
            let mut marked = 0;
            let mut tx = pool.begin().await?;
            for chunk in task_ids.chunks(MAX_PARAMS / 2) {
                let mut qb = QueryBuilder::new(formatcp!("UPDATE t_timer_task SET status = {}, output = ", code::MISSED));
                qb.push_bind(output).push(", modify_time = ").push_bind(now_ms);
                qb.push(formatcp!(" WHERE status = {} AND ", code::PENDING));
                push_id_list(&mut qb, chunk.iter().copied());
                let done = qb.build().execute(&mut *tx).await?.rows_affected();
                marked += done;
                if done > 0 {
                    // The onMissed each one marked owes: anyone's to send
                    // at once (no owner, its lease ended).
                    let mut qb = QueryBuilder::new(if mysql { OWE_MISSED_MYSQL } else { OWE_MISSED });
                    qb.push_bind(now_ms).push(", ").push_bind(now_ms).push(OWE_MISSED_FROM).push_bind(now_ms);
                    qb.push(" AND f.");
                    push_id_list(&mut qb, chunk.iter().copied());
                    if !mysql {
                        qb.push(" ON CONFLICT (task_id, kind) DO NOTHING");
                    }
                    qb.build().execute(&mut *tx).await?;
                }
            }
            tx.commit().await?;
            Ok(marked)
        })
    }

    async fn overdue(
        &self,
        pending_before_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
        limit: u32,
    ) -> Result<Vec<Overdue>> {
        // Two ranges of (status, run_timer), merged newest first. `now` is
        // bound three times ($2, $3, $4).
        const SQL: &str = formatcp!(
            "SELECT task_id, timer_id, run_timer, status, backfill FROM (
                 SELECT task_id, timer_id, run_timer, CAST(status AS BIGINT) AS status,
                        CAST(CASE WHEN backfill_at IS NULL THEN 0 ELSE 1 END AS BIGINT) AS backfill
                 FROM t_timer_task
                 WHERE status = {pending} AND run_timer < $1 AND (backfill_at IS NULL OR backfill_at <= $2)
                 UNION ALL
                 SELECT task_id, timer_id, run_timer, CAST(status AS BIGINT) AS status,
                        CAST(CASE WHEN backfill_at IS NULL THEN 0 ELSE 1 END AS BIGINT) AS backfill
                 FROM t_timer_task f
                 WHERE status = {running} AND run_timer < $3 AND {taken_over}
             ) o ORDER BY run_timer DESC LIMIT $6",
            pending = code::PENDING,
            running = code::RUNNING,
            taken_over = claim_taken_over!("f.owner", "$4", "$5"),
        );
        on_db!(self, read, pool => sqlx::query(&pool.sql(SQL))
            .bind(pending_before_ms)
            .bind(now_ms)
            .bind(now_ms)
            .bind(lease_judged_at(now_ms, alive_since_ms))
            .bind(alive_since_ms)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
            .iter()
            .map(|r| {
                let task_id = r.try_get("task_id")?;
                Ok(Overdue {
                    task_id,
                    key: key_from_row(r)?,
                    status: fire_status(r.try_get("status")?, task_id)?,
                    backfill: r.try_get::<i64, _>("backfill")? == 1,
                })
            })
            .collect())
    }

    async fn delete_ended_before(&self, before_ms: i64, limit: u32) -> Result<u64> {
        // By the (status, run_timer) index: one short range per ended status.
        // The ids are a derived table: MySQL takes no `LIMIT` in an `IN`
        // subquery, nor a subquery on the table it deletes from.
        const SQL: &str = formatcp!(
            "DELETE FROM t_timer_task WHERE task_id IN (SELECT task_id FROM (
                 SELECT task_id FROM t_timer_task
                 WHERE status IN ({}, {}, {}, {}) AND run_timer < $1 LIMIT $2) ended)",
            code::SUCCEEDED,
            code::FAILED,
            code::SKIPPED,
            code::MISSED
        );
        Ok(on_db!(self, write, pool => sqlx::query(&pool.sql(SQL))
            .bind(before_ms)
            .bind(i64::from(limit))
            .execute(pool)
            .await?
            .rows_affected()))
    }

    async fn maintain_partitions(&self, now_ms: i64, keep_ms: i64) -> Result<PartitionReport> {
        match self {
            Self::Postgres(pool) => partition::maintain(pool, now_ms, Some(keep_ms)).await,
            Self::Sqlite { .. } | Self::Mysql(_) => Ok(PartitionReport::default()),
        }
    }

    async fn ended_since(&self, since_ms: i64, limit: u32) -> Result<Vec<Fire>> {
        on_db!(self, read, pool => sqlx::query(&pool.sql(ENDED_SINCE))
            .bind(since_ms)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
            .iter()
            .map(fire_from_row)
            .collect())
    }

    async fn list_fires(
        &self,
        timer_id: i64,
        status: Option<FireStatus>,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Fire>, u64)> {
        self.list_fires_in(timer_id, status, FireWindow::All, offset, limit).await
    }

    async fn fire_at(&self, timer_id: i64, scheduled_ms: i64) -> Result<Option<FireDetail>> {
        let widest = xtimer_core::when::MAX_SPREAD_MS as i64;
        on_db!(self, read, pool => {
            let row = sqlx::query(&pool.sql(FIRE_AT))
                .bind(timer_id)
                .bind(scheduled_ms)
                .bind(scheduled_ms.saturating_add(widest))
                .bind(scheduled_ms)
                .fetch_optional(pool)
                .await?;
            row.map(|row| {
                Ok(FireDetail {
                    fire: fire_from_row(&row)?,
                    owner: opt_text(&row, "owner")?,
                    lease_until: row.try_get("lease_until")?,
                })
            })
            .transpose()
        })
    }

    async fn outcomes_between(&self, timer_id: i64, from_ms: i64, to_ms: i64, limit: u32) -> Result<Vec<FireOutcome>> {
        on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(OUTCOMES_BETWEEN))
                .bind(timer_id)
                .bind(from_ms)
                .bind(to_ms)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
            rows.iter()
                .map(|row| {
                    let status: i64 = row.try_get("status")?;
                    Ok(FireOutcome { status: fire_status(status, 0)?, cost_time: row.try_get("cost_time")? })
                })
                .collect()
        })
    }

    async fn list_fires_in(
        &self,
        timer_id: i64,
        status: Option<FireStatus>,
        window: FireWindow,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Fire>, u64)> {
        let status = status.map(FireStatus::code);
        let (list, count, at) = match window {
            FireWindow::All => (LIST, COUNT, None),
            FireWindow::DueBy(at) => (LIST_DUE, COUNT_DUE, Some(at)),
            FireWindow::UpcomingAfter(at) => (LIST_UPCOMING, COUNT_UPCOMING, Some(at)),
        };
        let (fires, total) = on_db!(self, read, pool => {
            let (list, count) = (pool.sql(list), pool.sql(count));
            let mut rows = sqlx::query(&list).bind(timer_id).bind(status).bind(status);
            let mut total = sqlx::query_scalar(&count).bind(timer_id).bind(status).bind(status);
            if let Some(at) = at {
                rows = rows.bind(at);
                total = total.bind(at);
            }
            let rows = rows.bind(page_bound(limit)).bind(page_bound(offset)).fetch_all(pool).await?;
            let total: i64 = total.fetch_one(pool).await?;
            (rows.iter().map(fire_from_row).collect::<Result<Vec<_>>>()?, total)
        });
        Ok((fires, total as u64))
    }
}

// ---- SQLite -------------------------------------------------------------

/// Appends `(VALUES (?, ?), ...) AS k`: fire keys to join on the unique
/// index (an `IN (VALUES ...)` would scan the status index instead).
fn push_key_values(qb: &mut QueryBuilder<'_, Sqlite>, keys: &[FireKey]) {
    qb.push("(VALUES ");
    let mut sep = qb.separated(", ");
    for key in padded(keys) {
        sep.push("(").push_bind_unseparated(key.timer_id).push_unseparated(", ");
        sep.push_bind_unseparated(key.run_ms).push_unseparated(")");
    }
    qb.push(") AS k");
}

/// Joins `t_timer_task` (as `f`) to the keys of [`push_key_values`].
const ON_KEYS: &str = "f.timer_id = k.column1 AND f.run_timer = k.column2";

fn claimed_from_sqlite(row: &SqliteRow, owner: &str) -> Result<ClaimedFire> {
    claimed_from_row(row, owner)
}

async fn insert_sqlite(write: &SqlitePool, fires: &[NewFire], now_ms: i64) -> Result<u64> {
    let mut inserted = 0;
    let mut tx = write.begin().await?;
    for chunk in fires.chunks(MAX_PARAMS / 5) {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "INSERT INTO t_timer_task (timer_id, app, run_timer, create_time, modify_time) ",
        );
        qb.push_values(chunk, |mut b, f| {
            b.push_bind(f.key.timer_id).push_bind(&f.app).push_bind(f.key.run_ms).push_bind(now_ms).push_bind(now_ms);
        });
        qb.push(" ON CONFLICT (timer_id, run_timer) DO NOTHING");
        inserted += qb.build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(inserted)
}

async fn claim_sqlite(
    write: &SqlitePool,
    keys: &[FireKey],
    owner: &str,
    lease_ms: i64,
    now_ms: i64,
) -> Result<ClaimOutcome> {
    // Read, then write, in one immediate transaction: no other writer can
    // come between, so what was read pending is what gets claimed. The
    // read is one row (the pending fires as one JSON array): SQLite hands
    // over a row at a cost far above its own, and an `UPDATE ... RETURNING`
    // returns a row per fire. Pending fires of enabled timers become
    // running under `owner`, the others skipped. A fire claimed after its
    // time still gets a whole lease.
    let mut out = ClaimOutcome::default();
    let mut tx = write.begin_with("BEGIN IMMEDIATE").await?;
    for chunk in keys.chunks(SQLITE_BATCH_ROWS) {
        let mut qb = QueryBuilder::<Sqlite>::new(
            "SELECT json_group_array(json_array(f.task_id, f.timer_id, f.run_timer, \
             COALESCE(f.scheduled_timer, f.run_timer), f.attempt, f.manual, \
             t.modify_time, t.status, f.replayed)) FROM (SELECT DISTINCT column1, column2 FROM ",
        );
        // Distinct: a key given twice (or padded) is one fire.
        push_key_values(&mut qb, chunk);
        qb.push(formatcp!(
            ") AS k JOIN t_timer_task f ON {ON_KEYS} LEFT JOIN t_timer t ON t.timer_id = k.column1 WHERE f.status = {}",
            code::PENDING
        ));
        let pending: String = qb.build_query_scalar().fetch_one(&mut *tx).await?;
        let pending: Vec<PendingFire> =
            serde_json::from_str(&pending).map_err(|err| Error::Corrupt(format!("pending fires: {err}")))?;
        let (enabled, disabled): (Vec<_>, Vec<_>) =
            pending.iter().partition(|f| f.timer_status == Some(code::TIMER_ENABLED));
        if !enabled.is_empty() {
            let mut qb =
                QueryBuilder::<Sqlite>::new(formatcp!("UPDATE t_timer_task SET status = {}, owner = ", code::RUNNING));
            qb.push_bind(owner)
                .push(", lease_until = MAX(run_timer, ")
                .push_bind(now_ms)
                .push(") + ")
                .push_bind(lease_ms);
            qb.push(", modify_time = ").push_bind(now_ms).push(" WHERE ");
            push_id_list(&mut qb, padded(&enabled).map(|f| f.task_id));
            qb.build().execute(&mut *tx).await?;
            out.claimed.extend(enabled.iter().map(|f| f.claimed(owner)));
        }
        if !disabled.is_empty() {
            let mut qb =
                QueryBuilder::<Sqlite>::new(formatcp!("UPDATE t_timer_task SET status = {}, output = ", code::SKIPPED));
            qb.push_bind(SKIPPED_OUTPUT).push(", modify_time = ").push_bind(now_ms).push(" WHERE ");
            push_id_list(&mut qb, padded(&disabled).map(|f| f.task_id));
            out.skipped += qb.build().execute(&mut *tx).await?.rows_affected();
        }
    }
    tx.commit().await?;
    Ok(out)
}

/// A pending fire as a SQLite claim reads it, in its JSON array's order.
#[derive(serde::Deserialize)]
struct PendingFire {
    task_id: i64,
    timer_id: i64,
    run_ms: i64,
    scheduled_ms: i64,
    attempt: i64,
    manual: i64,
    /// `None` when the timer is gone.
    timer_modified: Option<i64>,
    timer_status: Option<i64>,
    replayed: i64,
}

impl PendingFire {
    fn claimed(&self, owner: &str) -> ClaimedFire {
        ClaimedFire {
            task_id: self.task_id,
            key: FireKey { timer_id: self.timer_id, run_ms: self.run_ms },
            scheduled_ms: self.scheduled_ms,
            attempt: u32::try_from(self.attempt).unwrap_or(u32::MAX),
            owner: owner.to_string(),
            manual: self.manual != 0,
            replay: self.replayed != 0,
            timer_modified: self.timer_modified.unwrap_or(0),
        }
    }
}

async fn reclaim_sqlite(
    write: &SqlitePool,
    task_ids: &[i64],
    owner: &str,
    lease_ms: i64,
    now_ms: i64,
    alive_since_ms: i64,
) -> Result<ClaimOutcome> {
    let mut out = ClaimOutcome::default();
    // Literal integers, not binds: the id lists already use the binds.
    let claimable = format!(
        "(status = {} OR (status = {} AND {}))",
        code::PENDING,
        code::RUNNING,
        claim_taken_over!("f.owner", "{now}", "{alive_since}")
            .replace("{now}", &lease_judged_at(now_ms, alive_since_ms).to_string())
            .replace("{alive_since}", &alive_since_ms.to_string())
    );
    let mut tx = write.begin().await?;
    for chunk in task_ids.chunks(MAX_PARAMS / 2) {
        let mut qb =
            QueryBuilder::<Sqlite>::new(formatcp!("UPDATE t_timer_task AS f SET status = {}, owner = ", code::RUNNING));
        qb.push_bind(owner).push(", lease_until = ").push_bind(now_ms + lease_ms);
        qb.push(", modify_time = ").push_bind(now_ms).push(" WHERE ");
        push_id_list(&mut qb, chunk.iter().copied());
        qb.push(" AND ").push(&claimable);
        qb.push(formatcp!(" AND {TIMER_ENABLED} RETURNING {CLAIMED_COLUMNS_SQLITE}"));
        for row in qb.build().fetch_all(&mut *tx).await? {
            out.claimed.push(claimed_from_sqlite(&row, owner)?);
        }
        let mut qb = QueryBuilder::<Sqlite>::new(formatcp!(
            "UPDATE t_timer_task AS f SET status = {}, owner = NULL, output = ",
            code::SKIPPED
        ));
        qb.push_bind(SKIPPED_OUTPUT).push(", modify_time = ").push_bind(now_ms).push(" WHERE ");
        push_id_list(&mut qb, chunk.iter().copied());
        qb.push(" AND ").push(&claimable);
        qb.push(formatcp!(" AND NOT {TIMER_ENABLED}"));
        out.skipped += qb.build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(out)
}

/// One SQLite statement writing `chunk` (a fire at most once).
fn record_sqlite_statement<'a>(chunk: &'a [&'a FireResult], now_ms: i64) -> QueryBuilder<'a, Sqlite> {
    // VALUES columns: 1 task_id, 2 owner, 3 status, 4 attempt, 5 output, 6 cost_time, 7 lease_until
    let mut qb = QueryBuilder::<Sqlite>::new(
        "UPDATE t_timer_task AS f SET status = v.column3, attempt = v.column4, output = v.column5,
         cost_time = CASE WHEN f.attempt = 0 THEN v.column6 ELSE f.cost_time END,
         lease_until = v.column7, modify_time = ",
    );
    qb.push_bind(now_ms).push(" FROM (VALUES ");
    let mut sep = qb.separated(", ");
    for r in padded(chunk) {
        sep.push("(").push_bind_unseparated(r.task_id);
        sep.push_unseparated(", ").push_bind_unseparated(&r.owner);
        sep.push_unseparated(", ").push_bind_unseparated(r.status.code());
        sep.push_unseparated(", ").push_bind_unseparated(i64::from(r.attempt));
        sep.push_unseparated(", ").push_bind_unseparated(&r.output);
        sep.push_unseparated(", ").push_bind_unseparated(r.cost_time);
        sep.push_unseparated(", ").push_bind_unseparated(r.lease_until);
        sep.push_unseparated(")");
    }
    qb.push(formatcp!(") AS v WHERE f.task_id = v.column1 AND f.owner = v.column2 AND f.status = {}", code::RUNNING));
    qb
}

async fn record_sqlite(write: &SqlitePool, results: &[FireResult], now_ms: i64) -> Result<u64> {
    // One statement per round (a fire appears once in each) and chunk; a
    // single one (the usual case) needs no transaction.
    let rounds = rounds_by_task(results);
    if let [round] = rounds.as_slice() {
        if round.len() <= SQLITE_BATCH_ROWS {
            return Ok(record_sqlite_statement(round, now_ms).build().execute(write).await?.rows_affected());
        }
    }
    let mut tx = write.begin().await?;
    let written = record_sqlite_on(&mut tx, results, now_ms).await?;
    tx.commit().await?;
    Ok(written)
}

/// [`FireRepo::record`] on SQLite within the caller's transaction `conn`.
pub(crate) async fn record_sqlite_on(conn: &mut SqliteConnection, results: &[FireResult], now_ms: i64) -> Result<u64> {
    let mut written = 0;
    for round in &rounds_by_task(results) {
        for chunk in round.chunks(SQLITE_BATCH_ROWS) {
            written += record_sqlite_statement(chunk, now_ms).build().execute(&mut *conn).await?.rows_affected();
        }
    }
    Ok(written)
}

// ---- PostgreSQL ---------------------------------------------------------

/// Splits the rows a claim statement returned into fires won (running) and
/// a count of fires skipped.
fn claim_outcome_pg(rows: &[PgRow], owner: &str) -> Result<ClaimOutcome> {
    let mut out = ClaimOutcome::default();
    for row in rows {
        let task_id: i64 = row.try_get("task_id")?;
        match fire_status(i64::from(row.try_get::<i16, _>("status")?), task_id)? {
            FireStatus::Running => out.claimed.push(claimed_from_row(row, owner)?),
            _ => out.skipped += 1,
        }
    }
    Ok(out)
}

/// The UPDATE after a claim's CTE `c` (the locked fires: `task_id`,
/// `run_timer`, `enabled`): a fire whose timer is enabled becomes running
/// under `$owner` until `$lease`; any other becomes skipped (its owner set
/// to `$skipped_owner`). Returns each fire with its new status. Arguments
/// are SQL expressions; `$and` is appended to the join's condition. The
/// join names the run time, so each fire is looked for in its partition
/// only.
macro_rules! claim_update {
    ($owner:literal, $lease:literal, $skipped_owner:literal, $now:literal, $skipped_output:literal, $and:literal) => {
        formatcp!(
            "UPDATE t_timer_task f SET
                 status = CASE WHEN c.enabled THEN {running} ELSE {skipped} END,
                 owner = CASE WHEN c.enabled THEN {} ELSE {} END,
                 lease_until = CASE WHEN c.enabled THEN {} ELSE f.lease_until END,
                 output = CASE WHEN c.enabled THEN f.output ELSE {} END,
                 modify_time = {}
             FROM c WHERE f.task_id = c.task_id AND f.run_timer = c.run_timer{}
             RETURNING {CLAIMED_COLUMNS_PG}, f.status",
            $owner,
            $skipped_owner,
            $lease,
            $skipped_output,
            $now,
            $and,
            running = code::RUNNING,
            skipped = code::SKIPPED,
        )
    };
}

async fn insert_pg(pool: &PgPool, fires: &[NewFire], now_ms: i64) -> Result<u64> {
    let timer_ids: Vec<i64> = fires.iter().map(|f| f.key.timer_id).collect();
    let apps: Vec<&str> = fires.iter().map(|f| f.app.as_str()).collect();
    let runs: Vec<i64> = fires.iter().map(|f| f.key.run_ms).collect();
    // Keys in index order: two inserts of overlapping batches wait for
    // each other's rows in the same order, so they cannot deadlock.
    let done = sqlx::query(
        "INSERT INTO t_timer_task (timer_id, app, run_timer, create_time, modify_time)
         SELECT timer_id, app, run_timer, $4, $4
         FROM UNNEST($1::bigint[], $2::text[], $3::bigint[]) AS v(timer_id, app, run_timer)
         ORDER BY timer_id, run_timer
         ON CONFLICT (timer_id, run_timer) DO NOTHING",
    )
    .bind(timer_ids)
    .bind(apps)
    .bind(runs)
    .bind(now_ms)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

async fn claim_pg(pool: &PgPool, keys: &[FireKey], owner: &str, lease_ms: i64, now_ms: i64) -> Result<ClaimOutcome> {
    // Compare-and-set on pending, joined to the timer's status. Rows
    // another claimer holds are skipped rather than waited for: it holds
    // them only to take them. A fire claimed after its time still gets a
    // whole lease. The batch's first and last run times ($7, $8) bound
    // both scans, so a cached generic plan still reads only the
    // partitions of those days (the keys come as arrays, which the planner
    // cannot prune by).
    const SQL: &str = formatcp!(
        "WITH k AS (
             SELECT DISTINCT timer_id, run_timer FROM UNNEST($1::bigint[], $2::bigint[]) AS k(timer_id, run_timer)
         ), c AS MATERIALIZED (
             SELECT f.task_id, f.run_timer, {TIMER_ENABLED} AS enabled
             FROM t_timer_task f JOIN k ON f.timer_id = k.timer_id AND f.run_timer = k.run_timer
             WHERE f.status = {} AND f.run_timer BETWEEN $7 AND $8
             FOR UPDATE OF f SKIP LOCKED
         )
         {}",
        code::PENDING,
        claim_update!(
            "$3",
            "GREATEST(f.run_timer, $5) + $4",
            "f.owner",
            "$5",
            "$6",
            " AND f.run_timer BETWEEN $7 AND $8"
        )
    );
    let (first, last) = run_range(keys.iter().map(|k| k.run_ms));
    let rows = sqlx::query(SQL)
        .bind(keys.iter().map(|k| k.timer_id).collect::<Vec<_>>())
        .bind(keys.iter().map(|k| k.run_ms).collect::<Vec<_>>())
        .bind(owner)
        .bind(lease_ms)
        .bind(now_ms)
        .bind(SKIPPED_OUTPUT)
        .bind(first)
        .bind(last)
        .fetch_all(pool)
        .await?;
    claim_outcome_pg(&rows, owner)
}

/// The first and last of `runs` (not empty): the bounds that let a
/// PostgreSQL batch statement read only the partitions it needs.
fn run_range(runs: impl Iterator<Item = i64>) -> (i64, i64) {
    runs.fold((i64::MAX, i64::MIN), |(lo, hi), run| (lo.min(run), hi.max(run)))
}

async fn reclaim_pg(
    pool: &PgPool,
    task_ids: &[i64],
    owner: &str,
    lease_ms: i64,
    now_ms: i64,
    alive_since_ms: i64,
) -> Result<ClaimOutcome> {
    // By task id only (the reconciler's overdue fires, off the fire
    // path): a probe of each partition's primary key.
    const SQL: &str = formatcp!(
        "WITH c AS MATERIALIZED (
             SELECT f.task_id, f.run_timer, {TIMER_ENABLED} AS enabled
             FROM t_timer_task f
             WHERE f.task_id = ANY($1::bigint[]) AND (f.status = {} OR (f.status = {} AND {}))
             FOR UPDATE OF f SKIP LOCKED
         )
         {}",
        code::PENDING,
        code::RUNNING,
        claim_taken_over!("f.owner", "$7", "$6"),
        claim_update!("$2", "$3", "NULL", "$4", "$5", "")
    );
    let rows = sqlx::query(SQL)
        .bind(task_ids)
        .bind(owner)
        .bind(now_ms + lease_ms)
        .bind(now_ms)
        .bind(SKIPPED_OUTPUT)
        .bind(alive_since_ms)
        .bind(lease_judged_at(now_ms, alive_since_ms))
        .fetch_all(pool)
        .await?;
    claim_outcome_pg(&rows, owner)
}

/// Writes results on PostgreSQL, each fire once (one round).
const RECORD_PG: &str = formatcp!(
    "UPDATE t_timer_task f SET status = v.status, attempt = v.attempt, output = v.output,
         cost_time = CASE WHEN f.attempt = 0 THEN v.cost_time ELSE f.cost_time END,
         lease_until = v.lease_until, modify_time = $8
     FROM UNNEST($1::bigint[], $2::text[], $3::smallint[], $4::integer[], $5::text[], $6::bigint[], $7::bigint[],
                 $9::bigint[])
          AS v(task_id, owner, status, attempt, output, cost_time, lease_until, run_timer)
     WHERE f.task_id = v.task_id AND f.run_timer = v.run_timer AND f.owner = v.owner AND f.status = {}
       AND f.run_timer BETWEEN $10 AND $11",
    code::RUNNING
);

/// Binds `texts` as a `text[]`. PostgreSQL's text holds no NUL character
/// (a callback's answer may): each becomes U+FFFD, so such a result is
/// written rather than refused over and over. Texts without one (nearly
/// all) are bound as they are.
pub(crate) fn bind_pg_texts<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    texts: impl Iterator<Item = &'q str> + Clone,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    if texts.clone().any(|t| t.contains('\0')) {
        query.bind(texts.map(|t| t.replace('\0', "\u{FFFD}")).collect::<Vec<String>>())
    } else {
        query.bind(texts.collect::<Vec<&str>>())
    }
}

/// The statement of one round of results.
fn record_pg_round<'q>(
    round: &'q [&'q FireResult],
    now_ms: i64,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let (first, last) = run_range(round.iter().map(|r| r.run_ms));
    let query = sqlx::query(RECORD_PG)
        .bind(round.iter().map(|r| r.task_id).collect::<Vec<_>>())
        .bind(round.iter().map(|r| r.owner.as_str()).collect::<Vec<_>>())
        .bind(round.iter().map(|r| r.status.code() as i16).collect::<Vec<_>>())
        .bind(round.iter().map(|r| i32::try_from(r.attempt).unwrap_or(i32::MAX)).collect::<Vec<_>>());
    bind_pg_texts(query, round.iter().map(|r| r.output.as_str()))
        .bind(round.iter().map(|r| r.cost_time).collect::<Vec<_>>())
        .bind(round.iter().map(|r| r.lease_until).collect::<Vec<_>>())
        .bind(now_ms)
        .bind(round.iter().map(|r| r.run_ms).collect::<Vec<_>>())
        .bind(first)
        .bind(last)
}

async fn record_pg(pool: &PgPool, results: &[FireResult], now_ms: i64) -> Result<u64> {
    // One statement per round, all in one transaction. A final fire keeps
    // its owner token: it names the node that fired it.
    let rounds = rounds_by_task(results);
    if let [round] = rounds.as_slice() {
        return Ok(record_pg_round(round, now_ms).execute(pool).await?.rows_affected());
    }
    let mut tx = pool.begin().await?;
    let written = record_pg_on(&mut tx, results, now_ms).await?;
    tx.commit().await?;
    Ok(written)
}

/// [`FireRepo::record`] on PostgreSQL within the caller's transaction `conn`.
pub(crate) async fn record_pg_on(conn: &mut PgConnection, results: &[FireResult], now_ms: i64) -> Result<u64> {
    let mut written = 0;
    for round in &rounds_by_task(results) {
        written += record_pg_round(round, now_ms).execute(&mut *conn).await?.rows_affected();
    }
    Ok(written)
}

async fn release_pg(pool: &PgPool, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
    const SQL: &str = formatcp!(
        "UPDATE t_timer_task f SET status = {}, owner = NULL, lease_until = NULL, modify_time = $3
         FROM UNNEST($1::bigint[], $2::text[], $4::bigint[]) AS v(task_id, owner, run_timer)
         WHERE f.task_id = v.task_id AND f.run_timer = v.run_timer AND f.owner = v.owner AND f.status = {}
           AND f.run_timer BETWEEN $5 AND $6",
        code::PENDING,
        code::RUNNING
    );
    let (first, last) = run_range(claims.iter().map(|c| c.key.run_ms));
    let done = sqlx::query(SQL)
        .bind(claims.iter().map(|c| c.task_id).collect::<Vec<_>>())
        .bind(claims.iter().map(|c| c.owner.as_str()).collect::<Vec<_>>())
        .bind(now_ms)
        .bind(claims.iter().map(|c| c.key.run_ms).collect::<Vec<_>>())
        .bind(first)
        .bind(last)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

// ---- MySQL --------------------------------------------------------------

/// Keys or ids per MySQL statement: well inside its packet and range
/// optimizer limits.
const MYSQL_CHUNK: usize = 500;

async fn insert_mysql(pool: &MySqlPool, fires: &[NewFire], now_ms: i64) -> Result<u64> {
    // Keys in index order, so overlapping inserts cannot deadlock.
    let mut sorted: Vec<&NewFire> = fires.iter().collect();
    sorted.sort_by_key(|f| (f.key.timer_id, f.key.run_ms));
    let mut inserted = 0;
    let mut tx = pool.begin().await?;
    for chunk in sorted.chunks(MYSQL_CHUNK) {
        let mut qb = QueryBuilder::<MySql>::new(
            "INSERT IGNORE INTO t_timer_task (timer_id, app, run_timer, create_time, modify_time) ",
        );
        qb.push_values(chunk, |mut b, f| {
            b.push_bind(f.key.timer_id).push_bind(&f.app).push_bind(f.key.run_ms).push_bind(now_ms).push_bind(now_ms);
        });
        inserted += qb.build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(inserted)
}

/// The columns a MySQL claim reads from the fires it locks: those of
/// [`CLAIMED_COLUMNS_PG`] and whether the timer is enabled. (A locking read
/// locks no row its subqueries read.)
const LOCKED_COLUMNS: &str = formatcp!(
    "SELECT f.task_id, f.timer_id, f.run_timer, COALESCE(f.scheduled_timer, f.run_timer) AS scheduled_timer, \
     CAST(f.attempt AS SIGNED) AS attempt, \
     CAST(f.manual AS SIGNED) AS manual, CAST(f.replayed AS SIGNED) AS replayed, \
     (SELECT t.modify_time FROM t_timer t WHERE t.timer_id = f.timer_id) AS timer_modified, \
     CAST({TIMER_ENABLED} AS SIGNED) AS enabled FROM t_timer_task f WHERE "
);

/// How a MySQL claim sets the lease and the owner of a skipped fire.
#[derive(Clone, Copy)]
enum Takeover {
    /// A first claim: the lease runs from the later of the run time and
    /// now; a skipped fire keeps its owner column.
    Claim,
    /// A reclaim: the lease runs from now; a skipped fire loses its owner.
    Reclaim,
}

async fn claim_mysql(
    pool: &MySqlPool,
    keys: &[FireKey],
    owner: &str,
    lease_ms: i64,
    now_ms: i64,
) -> Result<ClaimOutcome> {
    let mut out = ClaimOutcome::default();
    let mut tx = pool.begin().await?;
    for chunk in keys.chunks(MYSQL_CHUNK) {
        let mut qb = QueryBuilder::<MySql>::new(LOCKED_COLUMNS);
        qb.push(formatcp!("f.status = {} AND (", code::PENDING));
        let mut sep = qb.separated(" OR ");
        for key in chunk {
            sep.push("(f.timer_id = ").push_bind_unseparated(key.timer_id);
            sep.push_unseparated(" AND f.run_timer = ").push_bind_unseparated(key.run_ms).push_unseparated(")");
        }
        qb.push(") FOR UPDATE SKIP LOCKED");
        let locked = qb.build().fetch_all(&mut *tx).await?;
        take_locked_mysql(&mut tx, &locked, owner, Takeover::Claim, lease_ms, now_ms, &mut out).await?;
    }
    tx.commit().await?;
    Ok(out)
}

async fn reclaim_mysql(
    pool: &MySqlPool,
    task_ids: &[i64],
    owner: &str,
    lease_ms: i64,
    now_ms: i64,
    alive_since_ms: i64,
) -> Result<ClaimOutcome> {
    // Literal integers, not binds, as on SQLite.
    let claimable = format!(
        " AND (f.status = {} OR (f.status = {} AND {})) FOR UPDATE SKIP LOCKED",
        code::PENDING,
        code::RUNNING,
        claim_taken_over!("f.owner", "{now}", "{alive_since}")
            .replace("{now}", &lease_judged_at(now_ms, alive_since_ms).to_string())
            .replace("{alive_since}", &alive_since_ms.to_string())
    );
    let mut out = ClaimOutcome::default();
    let mut tx = pool.begin().await?;
    for chunk in task_ids.chunks(MYSQL_CHUNK) {
        let mut qb = QueryBuilder::<MySql>::new(LOCKED_COLUMNS);
        qb.push("f.");
        push_id_list(&mut qb, chunk.iter().copied());
        qb.push(&claimable);
        let locked = qb.build().fetch_all(&mut *tx).await?;
        take_locked_mysql(&mut tx, &locked, owner, Takeover::Reclaim, lease_ms, now_ms, &mut out).await?;
    }
    tx.commit().await?;
    Ok(out)
}

/// Claims the fires a MySQL claim locked ([`LOCKED_COLUMNS`] rows): those of
/// an enabled timer become running under `owner`, the others skipped.
async fn take_locked_mysql(
    tx: &mut sqlx::MySqlConnection,
    locked: &[MySqlRow],
    owner: &str,
    takeover: Takeover,
    lease_ms: i64,
    now_ms: i64,
    out: &mut ClaimOutcome,
) -> Result<()> {
    let mut won = Vec::new();
    let mut skipped = Vec::new();
    for row in locked {
        let task_id: i64 = row.try_get("task_id")?;
        if row.try_get::<i64, _>("enabled")? == 1 {
            won.push(task_id);
            out.claimed.push(claimed_from_row(row, owner)?);
        } else {
            skipped.push(task_id);
        }
    }
    if !won.is_empty() {
        let lease = match takeover {
            Takeover::Claim => "GREATEST(run_timer, ",
            Takeover::Reclaim => "(",
        };
        let mut qb =
            QueryBuilder::<MySql>::new(formatcp!("UPDATE t_timer_task SET status = {}, owner = ", code::RUNNING));
        qb.push_bind(owner).push(", lease_until = ").push(lease).push_bind(now_ms).push(") + ").push_bind(lease_ms);
        qb.push(", modify_time = ").push_bind(now_ms).push(" WHERE ");
        push_id_list(&mut qb, won.iter().copied());
        qb.build().execute(&mut *tx).await?;
    }
    if !skipped.is_empty() {
        let owner_column = match takeover {
            Takeover::Claim => "",
            Takeover::Reclaim => ", owner = NULL",
        };
        let mut qb = QueryBuilder::<MySql>::new(formatcp!("UPDATE t_timer_task SET status = {}", code::SKIPPED));
        qb.push(owner_column).push(", output = ").push_bind(SKIPPED_OUTPUT).push(", modify_time = ").push_bind(now_ms);
        qb.push(" WHERE ");
        push_id_list(&mut qb, skipped.iter().copied());
        out.skipped += qb.build().execute(&mut *tx).await?.rows_affected();
    }
    Ok(())
}

async fn record_mysql(pool: &MySqlPool, results: &[FireResult], now_ms: i64) -> Result<u64> {
    let mut tx = pool.begin().await?;
    let written = record_mysql_on(&mut tx, results, now_ms).await?;
    tx.commit().await?;
    Ok(written)
}

/// [`FireRepo::record`] on MySQL within the caller's transaction `conn`.
///
/// Two statements per round (a fire at most once in each) and chunk: the
/// fires' current `attempt` and `cost_time`, locked, then one multi-table
/// `UPDATE` joining the results. MySQL does not promise the order of a
/// multi-table `UPDATE`'s assignments, so no assignment reads a column the
/// statement sets: the kept `cost_time` (the first attempt's) is worked out
/// here from the locked row.
pub(crate) async fn record_mysql_on(conn: &mut MySqlConnection, results: &[FireResult], now_ms: i64) -> Result<u64> {
    let mut written = 0;
    for round in &rounds_by_task(results) {
        for chunk in round.chunks(MYSQL_CHUNK) {
            let mut qb = QueryBuilder::<MySql>::new("SELECT task_id, attempt, cost_time FROM t_timer_task WHERE ");
            push_id_list(&mut qb, chunk.iter().map(|r| r.task_id));
            qb.push(" FOR UPDATE");
            let mut kept_cost = HashMap::with_capacity(chunk.len());
            for row in qb.build().fetch_all(&mut *conn).await? {
                let (task_id, attempt, cost): (i64, i64, i64) =
                    (row.try_get("task_id")?, row.try_get("attempt")?, row.try_get("cost_time")?);
                if attempt != 0 {
                    kept_cost.insert(task_id, cost);
                }
            }
            let mut qb = QueryBuilder::<MySql>::new("UPDATE t_timer_task f JOIN (");
            for (i, r) in chunk.iter().enumerate() {
                qb.push(if i == 0 { "SELECT " } else { " UNION ALL SELECT " });
                qb.push_bind(r.task_id).push(" AS task_id, ");
                qb.push_bind(&r.owner).push(" AS owner, ");
                qb.push_bind(r.status.code()).push(" AS status, ");
                qb.push_bind(i64::from(r.attempt)).push(" AS attempt, ");
                qb.push_bind(&r.output).push(" AS output, ");
                qb.push_bind(kept_cost.get(&r.task_id).copied().unwrap_or(r.cost_time)).push(" AS cost_time, ");
                qb.push_bind(r.lease_until).push(" AS lease_until");
            }
            qb.push(
                ") v ON f.task_id = v.task_id SET f.cost_time = v.cost_time, f.status = v.status, \
                 f.attempt = v.attempt, f.output = v.output, f.lease_until = v.lease_until, f.modify_time = ",
            );
            qb.push_bind(now_ms);
            qb.push(formatcp!(" WHERE f.owner = v.owner AND f.status = {}", code::RUNNING));
            written += qb.build().execute(&mut *conn).await?.rows_affected();
        }
    }
    Ok(written)
}

/// Numbers as a SQL list (`1, 2, 3`): ids and codes, written in.
fn numbers(values: impl Iterator<Item = i64>) -> String {
    values.map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
}
