//! [`FireRepo`] on [`Database`]: `t_timer_task`. Reads, `mark_missed` and
//! the overdue scan are written once here; the hot batch statements
//! (insert, claim, reclaim, record, release) differ by backend and come
//! from its driver ([`crate::driver`]; each backend's `fires` module).

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use const_format::formatcp;
use sqlx::{QueryBuilder, Row};
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};

use crate::backend::on_driver;
use crate::db::on_db;
use crate::db::{on_tx, Tx};
use crate::driver::{Dialect, Driver, TxDriver};
use crate::repo::{
    BackfillFire, ClaimOutcome, FireDetail, FireLog, FireOutcome, FireRepo, FireResult, FireWindow, NewFire, Overdue,
    PartitionReport, TimerFigures,
};
use crate::sql::{
    claim_taken_over, code, fire_from_row, fire_status, key_from_row, lease_judged_at, numbers, opt_text, page_bound,
    push_id_list, Claimant, FIRE_COLUMNS, MAX_PARAMS,
};
use crate::{conflict, fire_log, placement, timer_stats, Database, Result};

/// The statement that owes the `onMissed` of fires just marked missed,
/// after `INSERT INTO` (or MySQL's `INSERT IGNORE INTO`); [`OWE_MISSED_FROM`]
/// goes on after the binds of its send time and create time.
const OWE_MISSED_COLUMNS: &str = "t_notify_owed (task_id, kind, timer_id, run_timer, manual, attempt, output, sends, \
     owner, send_at, create_time) SELECT f.task_id, 2, f.timer_id, f.run_timer, f.manual, f.attempt, f.output, 0, \
     NULL, ";
/// The fires marked missed at the bound time whose timer has an `onMissed`
/// (`AND` the ids follow).
const OWE_MISSED_FROM: &str = formatcp!(
    " FROM t_timer_task f JOIN t_timer t ON t.timer_id = f.timer_id
     WHERE t.on_missed IS NOT NULL AND f.status = {} AND f.modify_time = ",
    code::MISSED
);

/// How far back [`FireRepo::paced_soon`] looks for paced fires whose send
/// time has come but whose run time is too recent for the overdue scan.
const PACED_LOOKBACK_MS: i64 = 3_600_000;

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
    "SELECT {FIRE_COLUMNS}, owner, lease_until, sent_at, backfill_at FROM t_timer_task
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
/// [`ENDED_SINCE`], each with whether it was paced (backfilled or replayed).
const ENDED_SINCE_PACED: &str = formatcp!(
    "SELECT {FIRE_COLUMNS}, CAST(CASE WHEN backfill_at IS NULL AND replayed = 0 THEN 0 ELSE 1 END AS BIGINT) AS paced
     FROM t_timer_task WHERE status IN ({succeeded}, {failed}) AND run_timer >= $1
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
        // One statement, or one transaction: a conflict's loser runs again.
        conflict::retry(|| async { on_driver!(self, d => d.insert_fires(fires, now_ms).await) }).await
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
        let done = conflict::retry(|| async {
            Ok(on_db!(self, write, pool => sqlx::query(&pool.sql(pool.statements().insert_manual_fire))
                .bind(fire.key.timer_id)
                .bind(&fire.app)
                .bind(fire.key.run_ms)
                .bind(now_ms)
                .bind(now_ms)
                .execute(pool)
                .await?
                .rows_affected()))
        })
        .await?;
        Ok(done == 1)
    }

    async fn insert_backfill(&self, fires: &[BackfillFire], now_ms: i64) -> Result<u64> {
        if fires.is_empty() {
            return Ok(0);
        }
        // Insert-or-ignore on the fire's key.
        let statements = self.statements();
        let (insert, on_conflict) = (statements.insert_skipping, (statements.skip_taken)("timer_id, run_timer"));
        // Hours already rolled up gain fires: their figures are counted
        // from the fires again until rolled up anew (marked first, as a
        // replay's).
        let stale =
            timer_stats::mark_hours_stale(self, fires.iter().map(|f| (f.fire.key.timer_id, f.fire.key.run_ms)), now_ms);
        on_db!(self, write, pool => {
            let mut inserted = 0;
            let mut tx = pool.begin().await?;
            if let Some(stale) = &stale {
                sqlx::query(stale).execute(&mut *tx).await?;
            }
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
                qb.push(&on_conflict);
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
        // Each fire's last attempt is kept, with the node that made it,
        // before the replay's takes its place.
        self.keep_attempts(&fires.iter().map(|(id, _)| *id).collect::<Vec<_>>()).await?;
        for chunk in fires.chunks(CHUNK) {
            let send_at: String = chunk.iter().map(|(id, at)| format!(" WHEN {id} THEN {at}")).collect();
            let sql = format!(
                "UPDATE t_timer_task SET status = {pending}, backfill_at = CASE task_id{send_at} END, replayed = 1,
                     modify_time = $1
                 WHERE task_id IN ({ids}) AND status IN ({statuses})",
                pending = code::PENDING,
                ids = numbers(chunk.iter().map(|(id, _)| *id)),
            );
            // The hours of the fires replayed are counted from their
            // fires again until rolled up anew: their outcomes change. The
            // mark first, in the replay's transaction: the roll-up takes
            // the same locks in the same order.
            let (stale, oldest) =
                timer_stats::mark_fires_stale(self, &chunk.iter().map(|(id, _)| *id).collect::<Vec<_>>(), now_ms);
            replayed += on_db!(self, write, pool => {
                let mut tx = pool.begin().await?;
                sqlx::query(&pool.sql(&stale)).bind(oldest).execute(&mut *tx).await?;
                let done = sqlx::query(&pool.sql(&sql)).bind(now_ms).execute(&mut *tx).await?.rows_affected();
                tx.commit().await?;
                done
            });
        }
        Ok(replayed)
    }

    async fn count_of_deleted(
        &self,
        app: &str,
        timer_id: Option<i64>,
        statuses: &[FireStatus],
        from_ms: i64,
        to_ms: i64,
    ) -> Result<u64> {
        if statuses.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "SELECT COUNT(*) FROM t_timer_task WHERE timer_id IN
                 (SELECT timer_id FROM t_timer WHERE app = $1 AND status = {deleted} AND ($2 IS NULL OR timer_id = $3))
               AND status IN ({}) AND run_timer >= $4 AND run_timer < $5",
            numbers(statuses.iter().map(|s| s.code())),
            deleted = code::TIMER_DELETED,
        );
        let n: i64 = on_db!(self, read, pool => sqlx::query_scalar(&pool.sql(&sql))
            .bind(app)
            .bind(timer_id)
            .bind(timer_id)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_one(pool)
            .await?);
        Ok(n.max(0) as u64)
    }

    async fn paced_soon(
        &self,
        pending_before_ms: i64,
        after_ms: i64,
        until_ms: i64,
        limit: u32,
    ) -> Result<Vec<(i64, i64)>> {
        // By the send-time index (only paced fires have one): those due
        // before the next pass that the overdue scan leaves (sent later
        // than now, or run too recently for it).
        const SQL: &str = formatcp!(
            "SELECT task_id, backfill_at FROM t_timer_task
             WHERE backfill_at > $1 AND backfill_at <= $2 AND status = {}
               AND (backfill_at > $3 OR run_timer >= $4)
             ORDER BY backfill_at LIMIT $5",
            code::PENDING
        );
        Ok(on_db!(self, read, pool => sqlx::query_as(&pool.sql(SQL))
            .bind(after_ms - PACED_LOOKBACK_MS)
            .bind(until_ms)
            .bind(after_ms)
            .bind(pending_before_ms)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?))
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

    async fn spread_load(&self, from_ms: i64, to_ms: i64) -> Result<Vec<(i64, u64)>> {
        placement::spread_load(self, from_ms, to_ms).await
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
        // With their spread placements, so the re-plan places them anew.
        on_db!(self, write, pool => {
            let mut tx = pool.begin().await?;
            let deleted = sqlx::query(&pool.sql(DELETE_PENDING_FROM))
                .bind(timer_id)
                .bind(from_ms)
                .bind(from_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(&pool.sql(placement::FORGET_REPLANNED))
                .bind(timer_id)
                .bind(from_ms)
                .bind(timer_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(deleted)
        })
    }

    async fn claim(&self, keys: &[FireKey], owner: &str, lease_ms: i64, now_ms: i64) -> Result<ClaimOutcome> {
        if keys.is_empty() {
            return Ok(ClaimOutcome::default());
        }
        let claimant = Claimant { owner, lease_ms, now_ms };
        // A conflict's loser (a deadlock's victim, a Galera certification
        // failure) was undone whole: it runs again.
        conflict::retry(|| async { on_driver!(self, d => d.claim_fires(keys, claimant).await) }).await
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
        let claimant = Claimant { owner, lease_ms, now_ms };
        // Claims this may take over: their attempts kept first, the
        // takeovers noted after (off the fire path: the reconciler's).
        let running = self.running_owners(task_ids).await?;
        if !running.is_empty() {
            self.keep_attempts(&running.iter().map(|(id, ..)| *id).collect::<Vec<_>>()).await?;
        }
        let outcome = conflict::retry(|| async {
            on_driver!(self, d => d.reclaim_fires(task_ids, claimant, alive_since_ms).await)
        })
        .await?;
        if !running.is_empty() {
            let won: HashSet<i64> = outcome.claimed.iter().map(|c| c.task_id).collect();
            let taken: Vec<(i64, i64, &str, &str)> = running
                .iter()
                .filter(|(id, ..)| won.contains(id))
                .map(|(id, run, old)| (*id, *run, owner, old.as_str()))
                .collect();
            if let Err(err) = self.note_takeovers(&taken, now_ms).await {
                tracing::warn!(error = %err, "Noting claims taken over failed; the fires go on.");
            }
        }
        Ok(outcome)
    }

    async fn fire_log(&self, task_id: i64) -> Result<FireLog> {
        Database::fire_log(self, task_id).await
    }

    async fn forget_fire_log(&self, before_ms: i64, limit: u32) -> Result<u64> {
        Database::forget_fire_log(self, before_ms, limit).await
    }

    async fn record(&self, results: &[FireResult], now_ms: i64) -> Result<u64> {
        if results.is_empty() {
            return Ok(0);
        }
        // A single round (the usual case) is one statement with no
        // transaction where the dialect allows. A result that overwrites
        // an earlier attempt keeps that attempt first, in its transaction.
        // Either way one statement or one transaction: a conflict's loser
        // runs again.
        let keeps = results.iter().any(fire_log::overwrites_an_attempt);
        conflict::retry(|| async {
            let alone = match keeps {
                true => None,
                false => on_driver!(self, d => d.record_alone(results, now_ms).await?),
            };
            if let Some(written) = alone {
                return Ok(written);
            }
            let mut tx = Tx::begin(self).await?;
            let written = record_on(&mut tx, results, now_ms).await?;
            tx.commit().await?;
            Ok(written)
        })
        .await
    }

    async fn release(&self, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
        if claims.is_empty() {
            return Ok(0);
        }
        // A retry given back keeps the attempt before it, with its node.
        let answered: Vec<i64> = claims.iter().filter(|c| c.attempt >= 1).map(|c| c.task_id).collect();
        self.keep_attempts(&answered).await?;
        // One transaction (one statement on PostgreSQL): a conflict's loser runs again.
        conflict::retry(|| async { on_driver!(self, d => d.release_fires(claims, now_ms).await) }).await
    }

    async fn confirm_claims(
        &self,
        node_id: &str,
        claims: &[ClaimedFire],
        lease_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<i64>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let lease_until = now_ms + lease_ms;
        on_driver!(self, d => d.confirm_claims(node_id, claims, lease_until, now_ms).await)
    }

    async fn mark_missed(&self, task_ids: &[i64], output: &str, now_ms: i64) -> Result<u64> {
        if task_ids.is_empty() {
            return Ok(0);
        }
        let statements = self.statements();
        let owe_missed = format!("{} INTO {OWE_MISSED_COLUMNS}", statements.insert_skipping);
        let skip_taken = (statements.skip_taken)("task_id, kind");
        // One transaction: a conflict's loser runs again.
        conflict::retry(|| async {
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
                        let mut qb = QueryBuilder::new(owe_missed.as_str());
                        qb.push_bind(now_ms).push(", ").push_bind(now_ms).push(OWE_MISSED_FROM).push_bind(now_ms);
                        qb.push(" AND f.");
                        push_id_list(&mut qb, chunk.iter().copied());
                        qb.push(&skip_taken);
                        qb.build().execute(&mut *tx).await?;
                    }
                }
                tx.commit().await?;
                Ok(marked)
            })
        })
        .await
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
        on_driver!(self, d => d.maintain_partitions(now_ms, keep_ms).await)
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
                    sent_at: row.try_get("sent_at")?,
                    backfill_at: row.try_get("backfill_at")?,
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

    async fn ended_since_paced(&self, since_ms: i64, limit: u32) -> Result<Vec<(Fire, bool)>> {
        on_db!(self, read, pool => sqlx::query(&pool.sql(ENDED_SINCE_PACED))
            .bind(since_ms)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
            .iter()
            .map(|row| Ok((fire_from_row(row)?, row.try_get::<i64, _>("paced")? != 0)))
            .collect())
    }

    async fn timer_figures(&self, timer_id: i64, from_ms: i64, to_ms: i64) -> Result<TimerFigures> {
        Database::timer_figures(self, timer_id, from_ms, to_ms).await
    }

    async fn roll_up_hour(&self, settled_ms: i64, oldest_hour_ms: i64) -> Result<Option<i64>> {
        Database::roll_up_hour(self, settled_ms, oldest_hour_ms).await
    }

    async fn reroll_stale_hours(&self, from_hour_ms: i64, limit: u32) -> Result<u64> {
        Database::reroll_stale_hours(self, from_hour_ms, limit).await
    }

    async fn forget_rolled_hours(&self, before_ms: i64, limit: u32) -> Result<u64> {
        Database::forget_rolled_hours(self, before_ms, limit).await
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

/// [`FireRepo::record`] within the transaction `tx`, in its backend's way.
pub(crate) async fn record_on(tx: &mut Tx, results: &[FireResult], now_ms: i64) -> Result<u64> {
    if !results.iter().any(fire_log::overwrites_an_attempt) {
        return record_rows(tx, results, now_ms).await;
    }
    // Round by round, so each attempt is kept before its own next one lands.
    let mut written = 0;
    for round in crate::sql::rounds_by_task(results) {
        fire_log::keep_overwritten(tx, &round).await?;
        let round: Vec<FireResult> = round.into_iter().cloned().collect();
        written += record_rows(tx, &round, now_ms).await?;
    }
    Ok(written)
}

/// Writes `results` inside `tx`, in its backend's statements.
async fn record_rows(tx: &mut Tx, results: &[FireResult], now_ms: i64) -> Result<u64> {
    on_tx!(tx, c => c.record_rows(results, now_ms).await)
}
