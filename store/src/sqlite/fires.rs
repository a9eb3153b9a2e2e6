//! SQLite's fire batches: multi-row `VALUES` lists in one transaction on
//! its one writer connection, so a claim is atomic without row locks.

use const_format::formatcp;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Sqlite, SqliteConnection, SqlitePool};
use xtimer_core::fire::{ClaimedFire, FireKey};

use crate::repo::{ClaimOutcome, FireResult, NewFire};
use crate::sql::{
    claimed_from_row, code, fire_sendable, padded, push_id_list, rounds_by_task, taken_over_at, Claimant,
    CLAIMED_COLUMNS_SQLITE, FIRE_SENDABLE, MAX_PARAMS, SKIPPED_OUTPUT, SQLITE_BATCH_ROWS,
};
use crate::{Error, Result};

/// Appends `(VALUES (?, ?), ...) AS k`: fire keys to join on the unique
/// index (an `IN (VALUES ...)` would scan the status index instead).
pub(crate) fn push_key_values(qb: &mut QueryBuilder<'_, Sqlite>, keys: &[FireKey]) {
    qb.push("(VALUES ");
    let mut sep = qb.separated(", ");
    for key in padded(keys) {
        sep.push("(").push_bind_unseparated(key.timer_id).push_unseparated(", ");
        sep.push_bind_unseparated(key.run_ms).push_unseparated(")");
    }
    qb.push(") AS k");
}

/// Joins `t_timer_task` (as `f`) to the keys of [`push_key_values`].
pub(crate) const ON_KEYS: &str = "f.timer_id = k.column1 AND f.run_timer = k.column2";

pub(crate) fn claimed_from_sqlite(row: &SqliteRow, owner: &str) -> Result<ClaimedFire> {
    claimed_from_row(row, owner)
}

pub(crate) async fn insert_sqlite(write: &SqlitePool, fires: &[NewFire], now_ms: i64) -> Result<u64> {
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

pub(crate) async fn claim_sqlite(write: &SqlitePool, keys: &[FireKey], claimant: Claimant<'_>) -> Result<ClaimOutcome> {
    let Claimant { owner, lease_ms, now_ms } = claimant;
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
            ") AS k JOIN t_timer_task f ON {ON_KEYS} LEFT JOIN t_timer t ON t.timer_id = k.column1 WHERE f.status = {} \
             AND f.backfill_at IS NULL",
            code::PENDING
        ));
        let pending: String = qb.build_query_scalar().fetch_one(&mut *tx).await?;
        let pending: Vec<PendingFire> =
            serde_json::from_str(&pending).map_err(|err| Error::Corrupt(format!("pending fires: {err}")))?;
        let (enabled, disabled): (Vec<_>, Vec<_>) =
            pending.iter().partition(|f| fire_sendable(f.timer_status, f.replayed != 0));
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
pub(crate) struct PendingFire {
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

pub(crate) async fn reclaim_sqlite(
    write: &SqlitePool,
    task_ids: &[i64],
    claimant: Claimant<'_>,
    alive_since_ms: i64,
) -> Result<ClaimOutcome> {
    let Claimant { owner, lease_ms, now_ms } = claimant;
    let mut out = ClaimOutcome::default();
    // Literal integers, not binds: the id lists already use the binds.
    let claimable = format!(
        "(status = {} OR (status = {} AND {}))",
        code::PENDING,
        code::RUNNING,
        taken_over_at(now_ms, alive_since_ms)
    );
    let mut tx = write.begin().await?;
    for chunk in task_ids.chunks(MAX_PARAMS / 2) {
        let mut qb =
            QueryBuilder::<Sqlite>::new(formatcp!("UPDATE t_timer_task AS f SET status = {}, owner = ", code::RUNNING));
        qb.push_bind(owner).push(", lease_until = ").push_bind(now_ms + lease_ms);
        qb.push(", modify_time = ").push_bind(now_ms).push(" WHERE ");
        push_id_list(&mut qb, chunk.iter().copied());
        qb.push(" AND ").push(&claimable);
        qb.push(formatcp!(" AND {FIRE_SENDABLE} RETURNING {CLAIMED_COLUMNS_SQLITE}"));
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
        qb.push(formatcp!(" AND NOT {FIRE_SENDABLE}"));
        out.skipped += qb.build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(out)
}

/// One SQLite statement writing `chunk` (a fire at most once).
pub(crate) fn record_sqlite_statement<'a>(chunk: &'a [&'a FireResult], now_ms: i64) -> QueryBuilder<'a, Sqlite> {
    // VALUES columns: 1 task_id, 2 owner, 3 status, 4 attempt, 5 output, 6 cost_time, 7 lease_until
    let mut qb = QueryBuilder::<Sqlite>::new(
        "UPDATE t_timer_task AS f SET status = v.column3, attempt = v.column4, output = v.column5,
         cost_time = CASE WHEN f.attempt = 0 THEN v.column6 ELSE f.cost_time END,
         sent_at = f.run_timer + v.column6, lease_until = v.column7, modify_time = ",
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

/// A single round of at most `SQLITE_BATCH_ROWS` results as one statement,
/// with no transaction; `None` when there is more.
pub(crate) async fn record_sqlite_alone(
    write: &SqlitePool,
    results: &[FireResult],
    now_ms: i64,
) -> Result<Option<u64>> {
    match rounds_by_task(results).as_slice() {
        [round] if round.len() <= SQLITE_BATCH_ROWS => {
            Ok(Some(record_sqlite_statement(round, now_ms).build().execute(write).await?.rows_affected()))
        }
        _ => Ok(None),
    }
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
