//! The per-timer figures (`getTimer`'s `stats`, API 1h) on [`Database`],
//! rolled up by the hour so a read costs the same at any rate.
//!
//! - `t_timer_stats`: a row per timer and hour of run time that had fires:
//!   its fires by status, how many were paced (backfilled or replayed),
//!   and a histogram of the lateness of the others that were sent, in the
//!   fixed buckets of [`LATE_BUCKET_BOUNDS_MS`] (a column each), with
//!   their largest lateness. `stale` > 0 says the row is not to be
//!   trusted: the read counts that hour's fires instead, and the roll-up
//!   loop rolls it up again.
//! - `t_timer_stats_rolled`: one row, `upto_ms`: every hour before it is
//!   rolled up (from the oldest a read covers on).
//!
//! [`FireRepo::roll_up_hour`](crate::FireRepo::roll_up_hour) rolls an
//! hour once it has settled: one `GROUP BY` statement over that hour of
//! `t_timer_task` (by the `(status, run_timer)` index, or the hour's
//! partition on PostgreSQL), in the transaction that moves `upto_ms` on
//! (compare-and-set: two nodes never both roll it). A fire still pending
//! or running then makes its row stale.
//!
//! A fire changes after its hour was rolled in two ways only: a replay
//! makes an ended fire pending again, and a backfill inserts fires into
//! past hours. Both mark the rows of the hours they touch stale first, in
//! their own transaction ([`mark_fires_stale`], [`mark_hours_stale`]: an
//! upsert that adds one, so a re-roll that read the fires before the
//! change cannot clear it; the roll-up locks the same rows in the same
//! order). A fire that is still under way when its hour is rolled leaves
//! the row stale until it ends. Every other write of a fire is to a fire
//! of the last hour or so (claims, results, misses), which the read counts
//! from the fire rows anyway, or to one older than the window (retention).
//!
//! [`FireRepo::timer_figures`](crate::FireRepo::timer_figures) is one
//! statement: the timer's rolled rows of the window (at most one per
//! hour, by the primary key) and one row of its fires counted from
//! `upto_ms` on (by the `(timer_id, run_timer)` key: the hour or two not
//! rolled up yet), summed by the caller. Only while a row of the window is
//! stale does a second statement count that hour's fires (a range of the
//! same key an hour).

use std::sync::LazyLock;

use const_format::formatcp;
use sqlx::Row;

use crate::db::on_db;
use crate::driver::Dialect;
use crate::repo::{TimerFigures, LATE_BUCKETS, LATE_BUCKET_BOUNDS_MS, STATS_HOUR_MS};
use crate::sql::{code, numbers};
use crate::{Database, Result};

/// Hours back from the current one whose rows a replay or a backfill
/// marks stale: the 24 the figures read before the current one, and one
/// more for nodes whose clocks differ a little.
const MARKED_HOURS: i64 = 26;

/// The histogram's columns, a bucket each: `le_<bound>`, then `le_inf`.
static LATE_COLUMNS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut columns: Vec<String> = LATE_BUCKET_BOUNDS_MS.iter().map(|b| format!("le_{b}")).collect();
    columns.push("le_inf".into());
    columns
});

/// A fire `f` whose lateness counts: sent (succeeded or failed) and not
/// paced.
const SENT_ON_TIME: &str =
    formatcp!("f.status IN ({}, {}) AND f.backfill_at IS NULL AND f.replayed = 0", code::SUCCEEDED, code::FAILED);

/// Fires `f` from `from` where `filter`, counted by (`key`,) status,
/// paced or not, and lateness bucket (-1: not sent on time), with their
/// largest lateness: a few dozen groups however many fires, so each fire
/// costs one pass through a `CASE` (27 `SUM(CASE ...)` a fire cost four
/// times as much on SQLite).
fn groups(key: Option<&str>, from: &str, filter: &str) -> String {
    let mut bucket = String::from("CASE");
    for (i, bound) in LATE_BUCKET_BOUNDS_MS.iter().enumerate() {
        bucket.push_str(&format!(" WHEN f.cost_time <= {bound} THEN {i}"));
    }
    bucket.push_str(&format!(" ELSE {} END", LATE_BUCKETS - 1));
    let (key, by) = match key {
        Some(key) => (format!("{key} AS timer_id, "), "1, 2, 3, 4"),
        None => (String::new(), "1, 2, 3"),
    };
    format!(
        "SELECT {key}f.status AS status,
                CASE WHEN f.backfill_at IS NULL AND f.replayed = 0 THEN 0 ELSE 1 END AS paced,
                CASE WHEN {SENT_ON_TIME} THEN {bucket} ELSE -1 END AS bucket,
                COUNT(*) AS n, MAX(f.cost_time) AS late
         FROM {from} WHERE {filter} GROUP BY {by}"
    )
}

/// The counts of [`groups`] `g` summed, in the order of a row's columns
/// (`fires, succeeded, failed, missed, paced`, with `stale`: the fires
/// still under way, then `late_max` and the buckets).
fn sums(with_stale: bool) -> String {
    let count = |cond: &str| format!("CAST(SUM(CASE WHEN {cond} THEN g.n ELSE 0 END) AS BIGINT)");
    let mut parts = vec![
        "CAST(SUM(g.n) AS BIGINT)".to_owned(),
        count(&format!("g.status = {}", code::SUCCEEDED)),
        count(&format!("g.status = {}", code::FAILED)),
        count(&format!("g.status = {}", code::MISSED)),
        count("g.paced = 1"),
    ];
    if with_stale {
        parts.push(count(&format!("g.status IN ({}, {})", code::PENDING, code::RUNNING)));
    }
    parts.push(
        "CAST(MAX(CASE WHEN g.bucket >= 0 THEN CASE WHEN g.late < 0 THEN 0 ELSE g.late END END) AS BIGINT)".into(),
    );
    parts.extend((0..LATE_BUCKETS).map(|i| count(&format!("g.bucket = {i}"))));
    let names = row_columns(with_stale);
    parts.iter().zip(names.split(", ")).map(|(sum, name)| format!("{sum} AS {name}")).collect::<Vec<_>>().join(", ")
}

/// A row's columns after its key, in [`sums`]' order.
fn row_columns(with_stale: bool) -> String {
    let stale = if with_stale { "stale, " } else { "" };
    format!("fires, succeeded, failed, missed, paced, {stale}late_max, {}", LATE_COLUMNS.join(", "))
}

/// Every timer's fires run in `[$2, $3)` rolled up into rows of hour `$1`.
/// By the `(status, run_timer)` index: one range per status.
static ROLL_HOUR: LazyLock<String> = LazyLock::new(|| {
    let statuses =
        numbers([code::PENDING, code::RUNNING, code::SUCCEEDED, code::FAILED, code::SKIPPED, code::MISSED].into_iter());
    let filter = format!("f.status IN ({statuses}) AND f.run_timer >= $2 AND f.run_timer < $3");
    format!(
        "INSERT INTO t_timer_stats (timer_id, hour_ms, {columns})
         SELECT g.timer_id, $1, {sums} FROM ({groups}) g GROUP BY g.timer_id",
        columns = row_columns(true),
        sums = sums(true),
        groups = groups(Some("f.timer_id"), "t_timer_task f", &filter),
    )
});

/// Timer `$2`'s fires run in `[$3, $4)` rolled up into its row of hour `$1`.
static ROLL_TIMER_HOUR: LazyLock<String> = LazyLock::new(|| {
    let filter = "f.timer_id = $2 AND f.run_timer >= $3 AND f.run_timer < $4";
    format!(
        "INSERT INTO t_timer_stats (timer_id, hour_ms, {columns})
         SELECT g.timer_id, $1, {sums} FROM ({groups}) g GROUP BY g.timer_id",
        columns = row_columns(true),
        sums = sums(true),
        groups = groups(Some("f.timer_id"), "t_timer_task f", filter),
    )
});

/// Timer `$1`'s rolled-up hours from `$2` (stale ones too, which the
/// caller counts from their fires), then one row (`hour_ms` -1) of its
/// fires counted from `upto_ms` (or `$5`, the later) to `$4`: at most an
/// hour row per hour and a row, every column a `BIGINT`.
/// Binds: timer, from, timer, to, from, from.
static FIGURES: LazyLock<String> = LazyLock::new(|| {
    let cast = |c: &String| format!("CAST({c} AS BIGINT) AS {c}");
    let columns: Vec<String> = ["stale", "fires", "succeeded", "failed", "missed", "paced", "late_max"]
        .iter()
        .map(|c| c.to_string())
        .chain(LATE_COLUMNS.iter().cloned())
        .map(|c| cast(&c))
        .collect();
    let recent = groups(
        None,
        "t_timer_task f",
        "f.timer_id = $3 AND f.run_timer <= $4
           AND f.run_timer >= (SELECT CASE WHEN upto_ms > $5 THEN upto_ms ELSE $6 END
                               FROM t_timer_stats_rolled WHERE id = 1)",
    );
    format!(
        "SELECT hour_ms, {columns}, CAST(0 AS BIGINT) AS raw FROM t_timer_stats
         WHERE timer_id = $1 AND hour_ms >= $2 AND hour_ms < (SELECT upto_ms FROM t_timer_stats_rolled WHERE id = 1)
         UNION ALL
         SELECT -1, 0, {sums}, CAST(SUM(g.n) AS BIGINT) FROM ({recent}) g",
        columns = columns.join(", "),
        sums = sums(false),
    )
});

/// Timer `timer_id`'s fires counted in each of `hours` (whose roll-up is
/// stale), in the columns of [`FIGURES`]: one range of the `(timer_id,
/// run_timer)` key an hour (the values inline: ids and times only).
fn stale_hours_counted(timer_id: i64, hours: &[i64]) -> String {
    let ranges: Vec<String> = hours
        .iter()
        .map(|h| {
            format!(
                "SELECT status, backfill_at, replayed, cost_time FROM t_timer_task
                 WHERE timer_id = {timer_id} AND run_timer >= {h} AND run_timer < {end}",
                end = h + STATS_HOUR_MS
            )
        })
        .collect();
    let fires = format!("({}) f", ranges.join(" UNION ALL "));
    format!(
        "SELECT -1 AS hour_ms, 0 AS stale, {sums}, CAST(SUM(g.n) AS BIGINT) AS raw FROM ({groups}) g",
        sums = sums(false),
        groups = groups(None, &fires, "1 = 1"),
    )
}

const UPTO: &str = "SELECT upto_ms FROM t_timer_stats_rolled WHERE id = 1";
const MOVE_UPTO: &str = "UPDATE t_timer_stats_rolled SET upto_ms = $1 WHERE id = 1 AND upto_ms = $2";
const DELETE_HOUR: &str = "DELETE FROM t_timer_stats WHERE hour_ms = $1";
const STALE: &str = "SELECT timer_id, hour_ms, CAST(stale AS BIGINT) AS stale FROM t_timer_stats
     WHERE stale > 0 AND hour_ms >= $1 AND hour_ms < (SELECT upto_ms FROM t_timer_stats_rolled WHERE id = 1)
     ORDER BY hour_ms LIMIT $2";
const DELETE_STALE: &str = "DELETE FROM t_timer_stats WHERE timer_id = $1 AND hour_ms = $2 AND stale = $3";
/// Forgetting, oldest hour first, a range of timers at a time, all by the
/// `(hour_ms, timer_id)` index.
const OLDEST_HOUR: &str = "SELECT MIN(hour_ms) FROM t_timer_stats WHERE hour_ms < $1";
const NTH_TIMER: &str = "SELECT timer_id FROM t_timer_stats WHERE hour_ms = $1 ORDER BY timer_id LIMIT 1 OFFSET $2";
const FORGET: &str = "DELETE FROM t_timer_stats WHERE hour_ms = $1 AND timer_id <= $2";

/// The start of the hour of `ms`.
pub(crate) fn hour_of(ms: i64) -> i64 {
    ms.div_euclid(STATS_HOUR_MS) * STATS_HOUR_MS
}

/// Adds a row of [`FIGURES`]' columns to `figures`: a rolled-up hour's,
/// or fires counted.
fn add<'r, R>(figures: &mut TimerFigures, row: &'r R, rolled: bool) -> Result<()>
where
    R: Row,
    &'r str: sqlx::ColumnIndex<R>,
    Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let n = |c: &'static str| -> Result<u64> { Ok(row.try_get::<Option<i64>, _>(c)?.unwrap_or(0).max(0) as u64) };
    figures.fires += n("fires")?;
    figures.succeeded += n("succeeded")?;
    figures.failed += n("failed")?;
    figures.missed += n("missed")?;
    figures.paced += n("paced")?;
    for (bucket, column) in figures.late.iter_mut().zip(LATE_COLUMNS.iter()) {
        *bucket += n(column.as_str())?;
    }
    figures.late_max = figures.late_max.max(row.try_get::<Option<i64>, _>("late_max")?);
    if rolled {
        figures.rolled_hours += 1;
    }
    figures.raw_fires += n("raw")?;
    Ok(())
}

/// The oldest hour a replay or a backfill at `now_ms` marks stale.
fn oldest_marked(now_ms: i64) -> i64 {
    hour_of(now_ms) - MARKED_HOURS * STATS_HOUR_MS
}

/// The upsert that adds one to `stale` of a row, or inserts it stale.
fn mark_conflict(db: &Database) -> &'static str {
    db.statements().mark_hour_stale
}

/// Marks stale the rows of the hours of fires `task_ids` (just replayed),
/// as of `now_ms`: a statement binding `$1` (the oldest hour marked), to
/// run in the replay's transaction.
pub(crate) fn mark_fires_stale(db: &Database, task_ids: &[i64], now_ms: i64) -> (String, i64) {
    let sql = format!(
        "INSERT INTO t_timer_stats (timer_id, hour_ms, stale)
         SELECT DISTINCT timer_id, run_timer - run_timer % {STATS_HOUR_MS}, 1 FROM t_timer_task
         WHERE task_id IN ({}) AND run_timer >= $1{}",
        numbers(task_ids.iter().copied()),
        mark_conflict(db),
    );
    (sql, oldest_marked(now_ms))
}

/// Marks stale the rows of timer hours `keys` (`(timer_id, run_ms)` of
/// fires just backfilled), as of `now_ms`: a statement with its values
/// inline (ids and times only), or `None` when every one is too old to
/// be read.
pub(crate) fn mark_hours_stale(
    db: &Database,
    keys: impl IntoIterator<Item = (i64, i64)>,
    now_ms: i64,
) -> Option<String> {
    hours_marked(mark_conflict(db), keys, now_ms)
}

fn hours_marked(conflict: &str, keys: impl IntoIterator<Item = (i64, i64)>, now_ms: i64) -> Option<String> {
    let oldest = oldest_marked(now_ms);
    let mut hours: Vec<(i64, i64)> =
        keys.into_iter().map(|(timer, run)| (timer, hour_of(run))).filter(|(_, hour)| *hour >= oldest).collect();
    hours.sort_unstable();
    hours.dedup();
    if hours.is_empty() {
        return None;
    }
    let values: Vec<String> = hours.iter().map(|(timer, hour)| format!("({timer}, {hour}, 1)")).collect();
    Some(format!("INSERT INTO t_timer_stats (timer_id, hour_ms, stale) VALUES {}{}", values.join(", "), conflict))
}

impl Database {
    /// [`crate::FireRepo::timer_figures`].
    pub(crate) async fn timer_figures(&self, timer_id: i64, from_ms: i64, to_ms: i64) -> Result<TimerFigures> {
        let from = hour_of(from_ms);
        let mut figures = TimerFigures::default();
        let mut stale = Vec::new();
        on_db!(self, read, pool => {
            let rows = sqlx::query(&pool.sql(&FIGURES))
                .bind(timer_id)
                .bind(from)
                .bind(timer_id)
                .bind(to_ms)
                .bind(from)
                .bind(from)
                .fetch_all(pool)
                .await?;
            for row in &rows {
                let hour: i64 = row.try_get("hour_ms")?;
                if row.try_get::<Option<i64>, _>("stale")?.unwrap_or(0) > 0 {
                    stale.push(hour);
                    continue;
                }
                add(&mut figures, row, hour >= 0)?;
            }
            // Hours a replay or a backfill changed since they were rolled
            // up (rare, until the loop rolls them up again): their fires.
            if !stale.is_empty() {
                let row = sqlx::query(&pool.sql(&stale_hours_counted(timer_id, &stale))).fetch_one(pool).await?;
                add(&mut figures, &row, false)?;
            }
        });
        Ok(figures)
    }

    /// [`crate::FireRepo::roll_up_hour`].
    pub(crate) async fn roll_up_hour(&self, settled_ms: i64, oldest_hour_ms: i64) -> Result<Option<i64>> {
        on_db!(self, write, pool => {
            let upto: i64 = sqlx::query_scalar(UPTO).fetch_one(pool).await?;
            let hour = hour_of(upto.max(oldest_hour_ms));
            if hour + STATS_HOUR_MS > settled_ms {
                return Ok(None);
            }
            let mut tx = pool.begin().await?;
            let moved = sqlx::query(&pool.sql(MOVE_UPTO))
                .bind(hour + STATS_HOUR_MS)
                .bind(upto)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if moved == 0 {
                return Ok(None);
            }
            // Marks left by replays and backfills before the hour was
            // rolled: the roll-up counts their fires as they are now.
            sqlx::query(&pool.sql(DELETE_HOUR)).bind(hour).execute(&mut *tx).await?;
            sqlx::query(&pool.sql(&ROLL_HOUR))
                .bind(hour)
                .bind(hour)
                .bind(hour + STATS_HOUR_MS)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Some(hour))
        })
    }

    /// [`crate::FireRepo::reroll_stale_hours`].
    pub(crate) async fn reroll_stale_hours(&self, from_hour_ms: i64, limit: u32) -> Result<u64> {
        on_db!(self, write, pool => {
            let stale: Vec<(i64, i64, i64)> = sqlx::query_as(&pool.sql(STALE))
                .bind(from_hour_ms)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
            let mut rolled = 0;
            for (timer_id, hour, seen) in stale {
                let mut tx = pool.begin().await?;
                // Only as it was read: a mark since then stays.
                let taken = sqlx::query(&pool.sql(DELETE_STALE))
                    .bind(timer_id)
                    .bind(hour)
                    .bind(seen)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if taken == 0 {
                    continue;
                }
                sqlx::query(&pool.sql(&ROLL_TIMER_HOUR))
                    .bind(hour)
                    .bind(timer_id)
                    .bind(hour)
                    .bind(hour + STATS_HOUR_MS)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                rolled += 1;
            }
            Ok(rolled)
        })
    }

    /// [`crate::FireRepo::forget_rolled_hours`]: from the oldest hour
    /// before `before_ms`, at most `limit` rows of it.
    pub(crate) async fn forget_rolled_hours(&self, before_ms: i64, limit: u32) -> Result<u64> {
        on_db!(self, write, pool => {
            let oldest: Option<i64> = sqlx::query_scalar(&pool.sql(OLDEST_HOUR)).bind(before_ms).fetch_one(pool).await?;
            let Some(hour) = oldest else { return Ok(0) };
            let last: Option<i64> = sqlx::query_scalar(&pool.sql(NTH_TIMER))
                .bind(hour)
                .bind(i64::from(limit.max(1)) - 1)
                .fetch_optional(pool)
                .await?;
            Ok(sqlx::query(&pool.sql(FORGET))
                .bind(hour)
                .bind(last.unwrap_or(i64::MAX))
                .execute(pool)
                .await?
                .rows_affected())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bucket_has_its_column_and_its_sum() {
        assert_eq!(LATE_COLUMNS.len(), LATE_BUCKETS);
        assert_eq!((LATE_COLUMNS[0].as_str(), LATE_COLUMNS[LATE_BUCKETS - 1].as_str()), ("le_0", "le_inf"));
        let sums = sums(true);
        assert_eq!(sums.matches("SUM(").count(), 6 + LATE_BUCKETS, "{sums}");
        let last = format!("SUM(CASE WHEN g.bucket = {} THEN g.n ELSE 0 END) AS BIGINT) AS le_inf", LATE_BUCKETS - 1);
        assert!(sums.ends_with(&last), "{sums}");
        let groups = groups(None, "t_timer_task f", "true");
        assert!(groups.contains("WHEN f.cost_time <= 60000 THEN 25 ELSE 26 END"), "{groups}");
        // MySQL reads each placeholder once, in order.
        let mysql = crate::mysql::statement(&FIGURES);
        assert_eq!(mysql.matches('?').count(), 6);
        assert!(!mysql.contains("AS BIGINT)"));
    }

    #[test]
    fn a_backfill_marks_each_timer_hour_once_and_none_too_old() {
        let now = 100 * STATS_HOUR_MS + 60_000;
        let keys = [(7, now - 10), (7, now - 20), (8, now - 10), (7, now - 30 * STATS_HOUR_MS)];
        let sql = hours_marked(crate::sql::MARK_HOUR_STALE, keys, now).unwrap();
        let hour = 100 * STATS_HOUR_MS;
        assert!(sql.contains(&format!("VALUES (7, {hour}, 1), (8, {hour}, 1) ON CONFLICT")), "{sql}");
        assert_eq!(hours_marked(crate::sql::MARK_HOUR_STALE, [(7, now - 30 * STATS_HOUR_MS)], now), None);
    }
}
