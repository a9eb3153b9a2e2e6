//! MySQL's fire batches. MySQL has neither arrays nor `UPDATE ...
//! RETURNING`: batches are multi-row `VALUES` lists, and a claim is a
//! transaction that locks the fires it takes (`SELECT ... FOR UPDATE SKIP
//! LOCKED`, as on PostgreSQL) and then updates them by id. Results are one
//! locking read and one joined `UPDATE` per round.

use std::collections::HashMap;

use const_format::formatcp;
use sqlx::mysql::MySqlRow;
use sqlx::{MySql, MySqlConnection, MySqlPool, QueryBuilder, Row};
use xtimer_core::fire::FireKey;

use crate::repo::{ClaimOutcome, FireResult, NewFire};
use crate::sql::{
    claimed_from_row, code, push_id_list, rounds_by_task, taken_over_at, Claimant, FIRE_SENDABLE, SKIPPED_OUTPUT,
};
use crate::Result;

/// Keys or ids per MySQL statement: well inside its packet and range
/// optimizer limits.
pub(crate) const MYSQL_CHUNK: usize = 500;

pub(crate) async fn insert_mysql(pool: &MySqlPool, fires: &[NewFire], now_ms: i64) -> Result<u64> {
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
pub(crate) const LOCKED_COLUMNS: &str = formatcp!(
    "SELECT f.task_id, f.timer_id, f.run_timer, COALESCE(f.scheduled_timer, f.run_timer) AS scheduled_timer, \
     CAST(f.attempt AS SIGNED) AS attempt, \
     CAST(f.manual AS SIGNED) AS manual, CAST(f.replayed AS SIGNED) AS replayed, \
     (SELECT t.modify_time FROM t_timer t WHERE t.timer_id = f.timer_id) AS timer_modified, \
     CAST({FIRE_SENDABLE} AS SIGNED) AS enabled FROM t_timer_task f WHERE "
);

pub(crate) async fn claim_mysql(pool: &MySqlPool, keys: &[FireKey], claimant: Claimant<'_>) -> Result<ClaimOutcome> {
    let Claimant { owner, lease_ms, now_ms } = claimant;
    let mut out = ClaimOutcome::default();
    let mut tx = pool.begin().await?;
    for chunk in keys.chunks(MYSQL_CHUNK) {
        let mut qb = QueryBuilder::<MySql>::new(LOCKED_COLUMNS);
        qb.push(formatcp!("f.status = {} AND f.backfill_at IS NULL AND (", code::PENDING));
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

pub(crate) async fn reclaim_mysql(
    pool: &MySqlPool,
    task_ids: &[i64],
    claimant: Claimant<'_>,
    alive_since_ms: i64,
) -> Result<ClaimOutcome> {
    let Claimant { owner, lease_ms, now_ms } = claimant;
    // Literal integers, not binds, as on SQLite.
    let claimable = format!(
        " AND (f.status = {} OR (f.status = {} AND {})) FOR UPDATE SKIP LOCKED",
        code::PENDING,
        code::RUNNING,
        taken_over_at(now_ms, alive_since_ms)
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
pub(crate) async fn take_locked_mysql(
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
                qb.push_bind(r.cost_time).push(" AS this_cost, ");
                qb.push_bind(r.lease_until).push(" AS lease_until");
            }
            qb.push(
                ") v ON f.task_id = v.task_id SET f.cost_time = v.cost_time, f.status = v.status, \
                 f.attempt = v.attempt, f.output = v.output, f.sent_at = f.run_timer + v.this_cost, \
                 f.lease_until = v.lease_until, f.modify_time = ",
            );
            qb.push_bind(now_ms);
            qb.push(formatcp!(" WHERE f.owner = v.owner AND f.status = {}", code::RUNNING));
            written += qb.build().execute(&mut *conn).await?.rows_affected();
        }
    }
    Ok(written)
}

/// How a MySQL claim sets the lease and the owner of a skipped fire.
#[derive(Clone, Copy)]
pub(crate) enum Takeover {
    /// A first claim: the lease runs from the later of the run time and
    /// now; a skipped fire keeps its owner column.
    Claim,
    /// A reclaim: the lease runs from now; a skipped fire loses its owner.
    Reclaim,
}
