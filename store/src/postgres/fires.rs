//! PostgreSQL's fire batches: one array per column, expanded with `UNNEST`
//! (one statement of a fixed text whatever the batch size). Claims lock the
//! fires they take with `FOR UPDATE SKIP LOCKED`, so concurrent claimers
//! never wait for each other and never both win a fire; inserts take keys
//! in index order, so they cannot deadlock. The table is partitioned by UTC
//! day of run time (see `partition`): claims, results and releases name each
//! fire's run time and bound their batch's, so they read only the partitions
//! of those days.

use const_format::formatcp;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Row};
use xtimer_core::fire::{ClaimedFire, FireKey, FireStatus};

use crate::repo::{ClaimOutcome, FireResult, NewFire};
use crate::sql::{
    claim_taken_over, claimed_from_row, code, fire_status, lease_judged_at, rounds_by_task, Claimant,
    CLAIMED_COLUMNS_PG, FIRE_SENDABLE, SKIPPED_OUTPUT,
};
use crate::Result;

/// Splits the rows a claim statement returned into fires won (running) and
/// a count of fires skipped.
pub(crate) fn claim_outcome_pg(rows: &[PgRow], owner: &str) -> Result<ClaimOutcome> {
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

pub(crate) async fn insert_pg(pool: &PgPool, fires: &[NewFire], now_ms: i64) -> Result<u64> {
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

pub(crate) async fn claim_pg(pool: &PgPool, keys: &[FireKey], claimant: Claimant<'_>) -> Result<ClaimOutcome> {
    let Claimant { owner, lease_ms, now_ms } = claimant;
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
             SELECT f.task_id, f.run_timer, {FIRE_SENDABLE} AS enabled
             FROM t_timer_task f JOIN k ON f.timer_id = k.timer_id AND f.run_timer = k.run_timer
             WHERE f.status = {} AND f.backfill_at IS NULL AND f.run_timer BETWEEN $7 AND $8
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
pub(crate) fn run_range(runs: impl Iterator<Item = i64>) -> (i64, i64) {
    runs.fold((i64::MAX, i64::MIN), |(lo, hi), run| (lo.min(run), hi.max(run)))
}

pub(crate) async fn reclaim_pg(
    pool: &PgPool,
    task_ids: &[i64],
    claimant: Claimant<'_>,
    alive_since_ms: i64,
) -> Result<ClaimOutcome> {
    let Claimant { owner, lease_ms, now_ms } = claimant;
    // By task id only (the reconciler's overdue fires, off the fire
    // path): a probe of each partition's primary key.
    const SQL: &str = formatcp!(
        "WITH c AS MATERIALIZED (
             SELECT f.task_id, f.run_timer, {FIRE_SENDABLE} AS enabled
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
pub(crate) const RECORD_PG: &str = formatcp!(
    "UPDATE t_timer_task f SET status = v.status, attempt = v.attempt, output = v.output,
         cost_time = CASE WHEN f.attempt = 0 THEN v.cost_time ELSE f.cost_time END,
         sent_at = f.run_timer + v.cost_time, lease_until = v.lease_until, modify_time = $8
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
pub(crate) fn record_pg_round<'q>(
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

/// A single round of results as one statement, with no transaction (a
/// final fire keeps its owner token: it names the node that fired it);
/// `None` when there are several rounds.
pub(crate) async fn record_pg_alone(pool: &PgPool, results: &[FireResult], now_ms: i64) -> Result<Option<u64>> {
    match rounds_by_task(results).as_slice() {
        [round] => Ok(Some(record_pg_round(round, now_ms).execute(pool).await?.rows_affected())),
        _ => Ok(None),
    }
}

/// [`FireRepo::record`] on PostgreSQL within the caller's transaction `conn`.
pub(crate) async fn record_pg_on(conn: &mut PgConnection, results: &[FireResult], now_ms: i64) -> Result<u64> {
    let mut written = 0;
    for round in &rounds_by_task(results) {
        written += record_pg_round(round, now_ms).execute(&mut *conn).await?.rows_affected();
    }
    Ok(written)
}

pub(crate) async fn release_pg(pool: &PgPool, claims: &[ClaimedFire], now_ms: i64) -> Result<u64> {
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

/// Confirms `claims` (see `FireRepo::confirm_claims`): the heartbeat, then
/// one statement that extends the leases still owned and returns their ids.
pub(crate) async fn confirm_pg(
    pool: &PgPool,
    node_id: &str,
    claims: &[ClaimedFire],
    lease_until: i64,
    now_ms: i64,
) -> Result<Vec<i64>> {
    const SQL: &str = formatcp!(
        "UPDATE t_timer_task f SET lease_until = GREATEST(f.lease_until, $4)
             FROM UNNEST($1::bigint[], $2::text[], $3::bigint[]) AS v(task_id, owner, run_timer)
             WHERE f.task_id = v.task_id AND f.run_timer = v.run_timer AND f.owner = v.owner
               AND f.status = {} AND f.run_timer BETWEEN $5 AND $6
             RETURNING f.task_id",
        code::RUNNING
    );
    let (first, last) =
        claims.iter().fold((i64::MAX, i64::MIN), |(lo, hi), c| (lo.min(c.key.run_ms), hi.max(c.key.run_ms)));
    let mut tx = pool.begin().await?;
    sqlx::query(crate::sql::fence::BEAT).bind(now_ms).bind(node_id).bind(now_ms).execute(&mut *tx).await?;
    let rows = sqlx::query(SQL)
        .bind(claims.iter().map(|c| c.task_id).collect::<Vec<_>>())
        .bind(claims.iter().map(|c| c.owner.as_str()).collect::<Vec<_>>())
        .bind(claims.iter().map(|c| c.key.run_ms).collect::<Vec<_>>())
        .bind(lease_until)
        .bind(first)
        .bind(last)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter().map(|r| Ok(r.try_get("task_id")?)).collect()
}
