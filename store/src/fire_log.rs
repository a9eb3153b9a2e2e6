//! A fire's earlier attempts and takeovers (`t_fire_attempt`,
//! `t_fire_claim`), for `explainFire`.
//!
//! The fire row holds its last attempt (its answer, the claim that made
//! it, when it was sent and answered). Whatever would overwrite an
//! attempt first copies it here, as the row has it: the result of a later
//! attempt, a replay, a claim taken over from another node, a claim given
//! back. So a fire sent once (nearly all) writes nothing here, and a fire
//! sent several times keeps each attempt once (the first copy wins), with
//! the node that made it. Attempts kept per fire are bounded
//! ([`KEPT_ATTEMPTS`]); rows go with their fire's records (retention).

use sqlx::QueryBuilder;

use crate::db::on_db;
use crate::db::{on_tx, Tx};
use crate::driver::{Dialect, Statements};
use crate::repo::{AttemptRecord, ClaimRecord, FireLog, FireResult};
use crate::sql::{code, fire_status, numbers, Columns};
use crate::{Database, Result};

/// Earlier attempts kept per fire (the row holds one more: its last).
pub const KEPT_ATTEMPTS: i64 = 32;

/// Copies the attempt each of `task_ids`' rows holds (if any) into the
/// log; an attempt already there is kept as it was.
fn copy_statement(statements: &Statements, task_ids: &[i64]) -> String {
    let insert = statements.insert_skipping;
    let conflict = (statements.skip_taken)("task_id, attempt");
    format!(
        "{insert} INTO t_fire_attempt (task_id, attempt, timer_id, run_timer, owner, sent_at, answered_at, status, output)
         SELECT task_id, attempt, timer_id, run_timer, owner, sent_at, modify_time, status, output
         FROM t_timer_task WHERE task_id IN ({}) AND attempt >= 1{conflict}",
        numbers(task_ids.iter().copied())
    )
}

/// Forgets attempts more than [`KEPT_ATTEMPTS`] before each result's.
fn trim_statement(results: &[&FireResult]) -> Option<String> {
    let old: Vec<String> = results
        .iter()
        .filter(|r| i64::from(r.attempt) > KEPT_ATTEMPTS + 1)
        .map(|r| format!("(task_id = {} AND attempt <= {})", r.task_id, i64::from(r.attempt) - KEPT_ATTEMPTS - 1))
        .collect();
    (!old.is_empty()).then(|| format!("DELETE FROM t_fire_attempt WHERE {}", old.join(" OR ")))
}

/// Whether writing `r` overwrites an attempt its row holds: a later
/// attempt's result, or an earlier attempt's fire ending skipped or missed
/// (a retry held by a paused app, a disabled timer).
pub(crate) fn overwrites_an_attempt(r: &FireResult) -> bool {
    use xtimer_core::fire::FireStatus;
    r.attempt >= 2 || (r.attempt >= 1 && matches!(r.status, FireStatus::Skipped | FireStatus::Missed))
}

/// Keeps, inside `tx`, the attempts that writing `results` overwrites.
pub(crate) async fn keep_overwritten(tx: &mut Tx, results: &[&FireResult]) -> Result<()> {
    let ids: Vec<i64> = results.iter().filter(|r| overwrites_an_attempt(r)).map(|r| r.task_id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let copy = copy_statement(tx.statements(), &ids);
    let trim = trim_statement(results);
    on_tx!(tx, c => {
        sqlx::query(&copy).execute(&mut *c).await?;
        if let Some(trim) = &trim {
            sqlx::query(trim).execute(&mut *c).await?;
        }
    });
    Ok(())
}

impl Database {
    /// Keeps the attempts `task_ids`' rows hold, before a replay, a
    /// takeover or a release changes them.
    pub(crate) async fn keep_attempts(&self, task_ids: &[i64]) -> Result<()> {
        if task_ids.is_empty() {
            return Ok(());
        }
        for chunk in task_ids.chunks(1_000) {
            let copy = copy_statement(self.statements(), chunk);
            on_db!(self, write, pool => {
                sqlx::query(&copy).execute(pool).await?;
            });
        }
        Ok(())
    }

    /// The running fires of `task_ids` and their claims' tokens: the
    /// claims a reclaim may take over.
    pub(crate) async fn running_owners(&self, task_ids: &[i64]) -> Result<Vec<(i64, i64, String)>> {
        if task_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT task_id, run_timer, owner FROM t_timer_task WHERE task_id IN ({}) AND status = {} \
             AND owner IS NOT NULL",
            numbers(task_ids.iter().copied()),
            code::RUNNING
        );
        on_db!(self, write, pool => {
            let rows = sqlx::query(&pool.sql(&sql)).fetch_all(pool).await?;
            rows.iter().map(|r| Ok((r.int("task_id")?, r.int("run_timer")?, r.text("owner")?))).collect()
        })
    }

    /// Notes claims taken over: `(task_id, run_timer, new owner, old owner)`.
    pub(crate) async fn note_takeovers(&self, taken: &[(i64, i64, &str, &str)], now_ms: i64) -> Result<()> {
        if taken.is_empty() {
            return Ok(());
        }
        on_db!(self, write, pool => {
            let mut qb = QueryBuilder::new("INSERT INTO t_fire_claim (task_id, run_timer, owner, taken_over_from, at_ms) ");
            qb.push_values(taken, |mut row, (task, run, new, old)| {
                row.push_bind(*task).push_bind(*run).push_bind(*new).push_bind(*old).push_bind(now_ms);
            });
            qb.build().execute(pool).await?;
        });
        Ok(())
    }

    /// Fire `task_id`'s kept attempts and takeovers, oldest first.
    pub(crate) async fn fire_log(&self, task_id: i64) -> Result<FireLog> {
        const ATTEMPTS: &str = "SELECT CAST(attempt AS BIGINT) AS attempt, owner, sent_at, answered_at, \
             CAST(status AS BIGINT) AS status, output FROM t_fire_attempt WHERE task_id = $1 ORDER BY attempt";
        const CLAIMS: &str =
            "SELECT owner, taken_over_from, at_ms FROM t_fire_claim WHERE task_id = $1 ORDER BY claim_id";
        on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(ATTEMPTS)).bind(task_id).fetch_all(pool).await?;
            let attempts = rows
                .iter()
                .map(|r| {
                    Ok(AttemptRecord {
                        attempt: u32::try_from(r.int("attempt")?).unwrap_or(u32::MAX),
                        owner: r.opt_text("owner")?,
                        sent_at: r.opt_int("sent_at")?,
                        answered_at: r.int("answered_at")?,
                        status: fire_status(r.int("status")?, task_id)?,
                        output: r.text("output")?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let rows = sqlx::query(&pool.sql(CLAIMS)).bind(task_id).fetch_all(pool).await?;
            let claims = rows
                .iter()
                .map(|r| {
                    Ok(ClaimRecord {
                        owner: r.text("owner")?,
                        taken_over_from: r.opt_text("taken_over_from")?,
                        at_ms: r.int("at_ms")?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(FireLog { attempts, claims })
        })
    }

    /// Forgets the log rows of fires run before `before_ms`, at most
    /// `limit` of each table; how many.
    pub(crate) async fn forget_fire_log(&self, before_ms: i64, limit: u32) -> Result<u64> {
        let mut forgotten = 0;
        for (table, key) in [("t_fire_attempt", "task_id, attempt"), ("t_fire_claim", "claim_id")] {
            let sql = (self.statements().delete_some)(table, key, "run_timer < $1", limit);
            forgotten += on_db!(self, write, pool => {
                sqlx::query(&pool.sql(&sql)).bind(before_ms).execute(pool).await?.rows_affected()
            });
        }
        Ok(forgotten)
    }
}
