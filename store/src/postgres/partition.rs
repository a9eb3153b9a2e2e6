//! PostgreSQL only: `t_timer_task` is partitioned by run time, one
//! partition per UTC day, so that retention drops a day of history whole
//! (`DROP TABLE`: no dead rows, no vacuum, no index bloat) instead of
//! deleting it row by row.
//!
//! # Layout
//!
//! - `t_timer_task_pYYYYMMDD` holds the fires of one UTC day,
//!   `[day start, next day start)` in Unix ms. [`maintain`] makes today's
//!   and the next [`DAYS_AHEAD`] days' partitions, so inserts (which the
//!   migrator makes a step ahead) always find theirs.
//! - `t_timer_task_default` (made by migration 0011) holds every fire no
//!   daily partition covers: rows from before that migration, backfills
//!   older than the partitions, fires far ahead. The batched delete of the
//!   retention loop cleans it, as it does on SQLite and MySQL.
//!
//! # Dropping
//!
//! A daily partition whose upper bound is at or before `now - keep` is
//! dropped, unless it still holds a pending or running fire (the
//! reconciler's): then it stays, and the batched delete takes its ended
//! fires. The check is made again under an exclusive lock on
//! `t_timer_task` (the lock `DROP TABLE` takes anyway), so a fire inserted
//! meanwhile is not dropped with it.
//!
//! # Locks
//!
//! Creating or dropping a partition takes `t_timer_task`'s exclusive lock:
//! fires wait for it. So each call is one short transaction, serialized
//! between nodes by a transaction advisory lock (per schema), and gives up
//! after [`LOCK_TIMEOUT`] rather than queue the fire path behind a long
//! transaction; the next retention pass tries again. Partitions are made
//! days ahead, so a failed pass costs nothing.
//!
//! # Rows in the default partition
//!
//! `CREATE TABLE ... PARTITION OF` fails while the default partition holds
//! a row of the new range (an upgraded database holds today's fires there).
//! Then the partition is made as a table of its own, those rows move into
//! it, and it is attached, in the same transaction.

use std::collections::BTreeSet;

use chrono::DateTime;
use const_format::formatcp;
use sqlx::{Connection, PgConnection, PgPool};

use crate::repo::PartitionReport;
use crate::sql::code;
use crate::Result;

/// Days after today whose partitions are made ahead of need: inserts
/// never wait for one to be made, and a retention loop that stopped for up
/// to this many days leaves no fire in the default partition.
pub const DAYS_AHEAD: i64 = 3;

/// How long creating or dropping a partition waits for `t_timer_task`'s
/// lock before giving up until the next pass; fires queue behind it
/// meanwhile.
const LOCK_TIMEOUT: &str = "2s";

/// One UTC day, ms.
const DAY_MS: i64 = 86_400_000;

/// Daily partitions are this and the day, `YYYYMMDD`.
const PREFIX: &str = "t_timer_task_p";

/// The partition of the fires no daily partition covers.
const DEFAULT_PARTITION: &str = "t_timer_task_default";

/// Makes missing daily partitions (today and [`DAYS_AHEAD`] days on) and,
/// with `keep_ms`, drops those that ended at or before `now_ms - keep_ms`
/// and hold no pending or running fire.
pub(crate) async fn maintain(pool: &PgPool, now_ms: i64, keep_ms: Option<i64>) -> Result<PartitionReport> {
    let mut conn = pool.acquire().await?;
    maintain_on(&mut conn, now_ms, keep_ms).await
}

/// [`maintain`] on one connection (start-up uses the migration's).
pub(crate) async fn maintain_on(conn: &mut PgConnection, now_ms: i64, keep_ms: Option<i64>) -> Result<PartitionReport> {
    let mut report = PartitionReport::default();
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.t_timer_task partitions'))")
        .execute(&mut *tx)
        .await?;
    sqlx::query(formatcp!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")).execute(&mut *tx).await?;
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 't_timer_task'::regclass",
    )
    .fetch_all(&mut *tx)
    .await?;
    let days: BTreeSet<i64> = names.iter().filter_map(|n| day_of(n)).collect();

    let today = now_ms.div_euclid(DAY_MS);
    for day in (today..=today + DAYS_AHEAD).filter(|d| !days.contains(d)) {
        let moved = create(&mut tx, day).await?;
        if moved > 0 {
            tracing::info!(partition = %name(day), moved, "Fires moved from the default partition into a new one.");
        }
        report.created.push(name(day));
    }

    if let Some(keep_ms) = keep_ms {
        let before = now_ms.saturating_sub(keep_ms);
        for day in days.into_iter().filter(|d| (d + 1) * DAY_MS <= before) {
            let name = name(day);
            if !unfinished(&mut tx, &name).await? {
                // Again under the lock DROP takes: an insert may have come in between.
                sqlx::query("LOCK TABLE ONLY t_timer_task IN ACCESS EXCLUSIVE MODE").execute(&mut *tx).await?;
                if !unfinished(&mut tx, &name).await? {
                    sqlx::query(&format!("DROP TABLE {name}")).execute(&mut *tx).await?;
                    report.dropped.push(name);
                    continue;
                }
            }
            report.kept.push(name);
        }
    }
    tx.commit().await?;
    Ok(report)
}

/// Makes the partition of `day`; returns how many fires it took over
/// from the default partition.
async fn create(tx: &mut PgConnection, day: i64) -> Result<u64> {
    let (from, to, name) = (day * DAY_MS, (day + 1) * DAY_MS, name(day));
    let stray: bool = sqlx::query_scalar(formatcp!(
        "SELECT EXISTS (SELECT 1 FROM {DEFAULT_PARTITION} WHERE run_timer >= $1 AND run_timer < $2)"
    ))
    .bind(from)
    .bind(to)
    .fetch_one(&mut *tx)
    .await?;
    if !stray {
        sqlx::query(&format!("CREATE TABLE {name} PARTITION OF t_timer_task FOR VALUES FROM ({from}) TO ({to})"))
            .execute(&mut *tx)
            .await?;
        return Ok(0);
    }
    // The default partition has the parent's columns in the parent's order, as has LIKE.
    sqlx::query(&format!("CREATE TABLE {name} (LIKE t_timer_task INCLUDING DEFAULTS)")).execute(&mut *tx).await?;
    let moved = sqlx::query(&format!(
        "WITH moved AS (DELETE FROM {DEFAULT_PARTITION} WHERE run_timer >= $1 AND run_timer < $2 RETURNING *)
         INSERT INTO {name} SELECT * FROM moved"
    ))
    .bind(from)
    .bind(to)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query(&format!("ALTER TABLE t_timer_task ATTACH PARTITION {name} FOR VALUES FROM ({from}) TO ({to})"))
        .execute(&mut *tx)
        .await?;
    Ok(moved)
}

/// True when partition `name` holds a pending or running fire.
async fn unfinished(tx: &mut PgConnection, name: &str) -> Result<bool> {
    Ok(sqlx::query_scalar(&format!(
        "SELECT EXISTS (SELECT 1 FROM {name} WHERE status IN ({}, {}))",
        code::PENDING,
        code::RUNNING
    ))
    .fetch_one(&mut *tx)
    .await?)
}

/// The partition of UTC day `day` (days since the Unix epoch).
pub(crate) fn name(day: i64) -> String {
    let date = DateTime::from_timestamp_millis(day * DAY_MS).map(|t| t.format("%Y%m%d").to_string());
    format!("{PREFIX}{}", date.unwrap_or_default())
}

/// The day of a daily partition's name; `None` for any other table.
fn day_of(name: &str) -> Option<i64> {
    let digits = name.strip_prefix(PREFIX).filter(|d| d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()))?;
    let date = chrono::NaiveDate::parse_from_str(digits, "%Y%m%d").ok()?;
    Some(date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis().div_euclid(DAY_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_named_by_their_utc_day() {
        // 2026-11-23 00:00:00 UTC.
        let day = 1_795_392_000_000 / DAY_MS;
        assert_eq!(name(day), "t_timer_task_p20261123");
        assert_eq!(day_of("t_timer_task_p20261123"), Some(day));
        assert_eq!(day_of(&name(day + 40)), Some(day + 40));
        assert_eq!(day_of("t_timer_task_default"), None);
        assert_eq!(day_of("t_timer_task_p2026112"), None);
    }
}
