//! What every dialect shares: status codes as SQL text (from core's
//! enums), column lists, SQL fragments, and how a row becomes a domain
//! value. One place knows each.

pub(crate) mod definition;
pub(crate) mod fence;
pub(crate) mod fires;
pub(crate) mod history;
pub(crate) mod notify;
pub(crate) mod plan;
pub(crate) mod tasks;
pub(crate) mod timers;
pub(crate) mod usage;

use std::collections::HashMap;

use const_format::formatcp;
use sqlx::{ColumnIndex, Decode, QueryBuilder, Row, Type};
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};
use xtimer_core::node::NodeInfo;
use xtimer_core::timer::{
    Dedupe, MisfirePolicy, NewTimer, Notify, OverlapPolicy, RetryPolicy, Schedule, Timer, TimerStatus, Timing,
};

use crate::repo::FireResult;
use crate::{Error, Result};

/// Storage codes of the statuses, for SQL text. They come from core's
/// enums, so a statement can never disagree with the code that reads it.
pub(crate) mod code {
    use xtimer_core::fire::FireStatus;
    use xtimer_core::timer::TimerStatus;

    pub const TIMER_DISABLED: i64 = TimerStatus::Disabled as i64;
    pub const TIMER_ENABLED: i64 = TimerStatus::Enabled as i64;
    pub const TIMER_DELETED: i64 = TimerStatus::Deleted as i64;
    pub const TIMER_COMPLETED: i64 = TimerStatus::Completed as i64;
    pub const PENDING: i64 = FireStatus::Pending as i64;
    pub const RUNNING: i64 = FireStatus::Running as i64;
    pub const SUCCEEDED: i64 = FireStatus::Succeeded as i64;
    pub const FAILED: i64 = FireStatus::Failed as i64;
    pub const SKIPPED: i64 = FireStatus::Skipped as i64;
    pub const MISSED: i64 = FireStatus::Missed as i64;
}

/// Bound parameters per statement stay well under SQLite's limit (32766).
pub(crate) const MAX_PARAMS: usize = 30_000;

/// Most rows of one SQLite batch statement: a power of two, so padded
/// batches ([`padded`]) stay under SQLite's 32,766 parameters (7 a row at most).
pub(crate) const SQLITE_BATCH_ROWS: usize = 2048;

/// Output of a fire skipped because its timer is disabled or deleted.
pub const SKIPPED_OUTPUT: &str = "skipped: the timer is not enabled";

/// The `t_timer_task` columns every fire query selects; small integers are
/// read as 64-bit in every dialect.
pub(crate) const FIRE_COLUMNS: &str = "task_id, timer_id, app, run_timer, CAST(status AS BIGINT) AS status, \
     CAST(attempt AS BIGINT) AS attempt, output, cost_time, CAST(manual AS BIGINT) AS manual, create_time, \
     modify_time, COALESCE(scheduled_timer, run_timer) AS scheduled_timer, CAST(replayed AS BIGINT) AS replayed";

/// What a claim returns of each fire it took (`t_timer_task` as `f`): its
/// key, attempts, whether it is manual and its timer's `modify_time`.
/// PostgreSQL names the updated table by its alias.
pub(crate) const CLAIMED_COLUMNS_PG: &str = "f.task_id, f.timer_id, f.run_timer, \
     COALESCE(f.scheduled_timer, f.run_timer) AS scheduled_timer, \
     CAST(f.attempt AS BIGINT) AS attempt, CAST(f.manual AS BIGINT) AS manual, \
     CAST(f.replayed AS BIGINT) AS replayed, \
     (SELECT t.modify_time FROM t_timer t WHERE t.timer_id = f.timer_id) AS timer_modified";
/// [`CLAIMED_COLUMNS_PG`] for SQLite, whose `RETURNING` names the updated
/// table by its name only.
pub(crate) const CLAIMED_COLUMNS_SQLITE: &str = "task_id, timer_id, run_timer, \
     COALESCE(scheduled_timer, run_timer) AS scheduled_timer, CAST(attempt AS BIGINT) AS attempt, \
     CAST(manual AS BIGINT) AS manual, CAST(replayed AS BIGINT) AS replayed, \
     (SELECT t.modify_time FROM t_timer t WHERE t.timer_id = t_timer_task.timer_id) AS timer_modified";

/// The fire (`t_timer_task` as `f`) may be sent: its timer is enabled, or
/// the fire was replayed (`replayFires` sends whatever the timer's status
/// now, unless it was deleted). A primary-key probe per row; a fire of a
/// missing timer is never sent.
pub(crate) const FIRE_SENDABLE: &str = formatcp!(
    "EXISTS (SELECT 1 FROM t_timer t WHERE t.timer_id = f.timer_id AND (t.status = {} OR (f.replayed = 1 AND t.status <> {})))",
    code::TIMER_ENABLED,
    code::TIMER_DELETED
);

/// Whether a fire of a timer of status `timer_status` (`None`: gone) may
/// be sent: [`FIRE_SENDABLE`] read in Rust.
pub(crate) fn fire_sendable(timer_status: Option<i64>, replayed: bool) -> bool {
    match timer_status {
        Some(code::TIMER_ENABLED) => true,
        Some(status) => replayed && status != code::TIMER_DELETED,
        None => false,
    }
}

/// A `t_timer` row ([`TIMER_COLUMNS`](definition::TIMER_COLUMNS)) as a [`Timer`].
pub(crate) fn timer_from_row(row: &impl Columns) -> Result<Timer> {
    let id = row.int("timer_id")?;
    let corrupt = |what: &str| Error::Corrupt(format!("t_timer {id}: {what}"));
    let status = TimerStatus::from_code(row.int("status")?).ok_or_else(|| corrupt("status"))?;
    let kind = row.text("kind")?;
    let schedule = match kind.as_str() {
        "cron" => Schedule::Cron {
            expr: row.opt_text("cron")?.ok_or_else(|| corrupt("cron"))?,
            timezone: row.text("timezone")?,
        },
        "once" => Schedule::Once { run_at_ms: row.opt_int("run_at")?.ok_or_else(|| corrupt("run_at"))? },
        "every" => Schedule::Every {
            every_ms: row.opt_int("every_ms")?.ok_or_else(|| corrupt("every_ms"))?,
            anchor_ms: row.opt_int("run_at")?.ok_or_else(|| corrupt("run_at"))?,
            timezone: row.text("timezone")?,
        },
        _ => return Err(corrupt("kind")),
    };
    let timing = row
        .opt_text("timing")?
        .map(|json| serde_json::from_str(&json))
        .transpose()
        .map_err(|e| corrupt(&format!("timing: {e}")))?
        .unwrap_or_default();
    let notify: Notify = serde_json::from_str(&row.text("notify")?).map_err(|e| corrupt(&format!("notify: {e}")))?;
    let retry: RetryPolicy = serde_json::from_str(&row.text("retry")?).map_err(|e| corrupt(&format!("retry: {e}")))?;
    let misfire = MisfirePolicy::parse(&row.text("misfire")?).ok_or_else(|| corrupt("misfire"))?;
    let def = NewTimer {
        app: row.text("app")?,
        name: row.text("name")?,
        status,
        schedule,
        notify,
        retry,
        misfire,
        delete_after_run: row.int("delete_after_run")? != 0,
        on_failure: row
            .opt_text("on_failure")?
            .map(|json| serde_json::from_str(&json))
            .transpose()
            .map_err(|e| corrupt(&format!("on_failure: {e}")))?,
        on_missed: row
            .opt_text("on_missed")?
            .map(|json| serde_json::from_str(&json))
            .transpose()
            .map_err(|e| corrupt(&format!("on_missed: {e}")))?,
        on_late: row
            .opt_text("on_late")?
            .map(|json| serde_json::from_str(&json))
            .transpose()
            .map_err(|e| corrupt(&format!("on_late: {e}")))?,
        pause_after_failures: row
            .opt_int("pause_after_failures")?
            .map(|n| u32::try_from(n).map_err(|_| corrupt("pause_after_failures")))
            .transpose()?,
        overlap: OverlapPolicy::parse(&row.text("overlap")?).ok_or_else(|| corrupt("overlap"))?,
        timing,
        labels: row
            .opt_text("labels")?
            .map(|json| serde_json::from_str(&json))
            .transpose()
            .map_err(|e| corrupt(&format!("labels: {e}")))?
            .unwrap_or_default(),
        dedupe: match row.opt_text("dedupe_key")? {
            Some(key) => {
                Some(Dedupe::stored(key, row.opt_int("dedupe_first_run")?.ok_or_else(|| corrupt("dedupe_first_run"))?))
            }
            None => None,
        },
    };
    Ok(Timer {
        id,
        def,
        pause_reason: row.opt_text("pause_reason")?,
        create_time: row.int("create_time")?,
        modify_time: row.int("modify_time")?,
    })
}

/// Where the row readers ([`timer_from_row`], [`fire_from_row`], ...) read
/// a row's columns, by name: a database
/// row, or a row of a page SQLite hands over as one JSON value
/// ([`JsonRow`](crate::sqlite::json_row::JsonRow)).
pub(crate) trait Columns {
    fn int(&self, column: &str) -> Result<i64>;
    fn opt_int(&self, column: &str) -> Result<Option<i64>>;
    fn text(&self, column: &str) -> Result<String>;
    fn opt_text(&self, column: &str) -> Result<Option<String>>;
}

impl<R> Columns for R
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database>,
{
    fn int(&self, column: &str) -> Result<i64> {
        Ok(self.try_get(column)?)
    }

    fn opt_int(&self, column: &str) -> Result<Option<i64>> {
        Ok(self.try_get(column)?)
    }

    fn text(&self, column: &str) -> Result<String> {
        text(self, column)
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>> {
        opt_text(self, column)
    }
}

/// A text column, decoded unchecked: MySQL reports text that compares byte
/// for byte (`utf8mb4_bin`, as every MySQL text column here) as binary, and
/// sqlx decodes that as text only when told to. Text decodes as UTF-8 the
/// same way in every dialect.
pub(crate) fn text<'r, R>(row: &'r R, column: &'r str) -> Result<String>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    String: Decode<'r, R::Database>,
{
    Ok(row.try_get_unchecked(column)?)
}

/// A nullable text column (see [`text`]).
pub(crate) fn opt_text<'r, R>(row: &'r R, column: &'r str) -> Result<Option<String>>
where
    R: Row,
    &'r str: ColumnIndex<R>,
    Option<String>: Decode<'r, R::Database>,
{
    Ok(row.try_get_unchecked(column)?)
}

/// A `t_node` row as a [`NodeInfo`].
pub(crate) fn node_from_row(row: &impl Columns) -> Result<NodeInfo> {
    let id = row.text("node_id")?;
    let shards =
        serde_json::from_str(&row.text("shards")?).map_err(|e| Error::Corrupt(format!("t_node {id}: shards: {e}")))?;
    Ok(NodeInfo {
        id,
        host: row.text("host")?,
        listen: row.text("listen")?,
        started_at: row.int("started_at")?,
        heartbeat_at: row.int("heartbeat_at")?,
        shards,
    })
}

/// SQL true when the claim of a running fire may be taken over: its lease
/// ended before `now`, or the node named by its owner token
/// (`{node_id}:{seq}`) has a `t_node` row with no heartbeat since
/// `alive_since`: it died, and waiting for the lease would make a takeover
/// a minute long. An owner with no row at all (a node that never reported)
/// waits for its lease.
/// `owner` is the owner column as the statement names it; `now` and
/// `alive_since` are placeholders. The same text in every dialect, built at
/// compile time.
macro_rules! claim_taken_over {
    ($owner:literal, $now:literal, $alive_since:literal) => {
        const_format::formatcp!(
            "(lease_until < {} OR EXISTS (SELECT 1 FROM t_node n WHERE n.heartbeat_at < {} \
             AND substr({}, 1, length(n.node_id) + 1) = n.node_id || ':'))",
            $now,
            $alive_since,
            $owner
        )
    };
}
pub(crate) use claim_taken_over;

/// The time against which a running fire's lease counts as ended: `now_ms`,
/// unless the caller may not judge others at all (`alive_since_ms` is
/// `i64::MIN`: its own heartbeats are not steady, as right after a database
/// outage). Then no lease has ended either: the owner's results, held
/// through the outage, are written before anyone takes its fires.
pub(crate) fn lease_judged_at(now_ms: i64, alive_since_ms: i64) -> i64 {
    if alive_since_ms == i64::MIN {
        i64::MIN
    } else {
        now_ms
    }
}

/// [`claim_taken_over!`] of a fire `f`'s owner, its times written in as
/// literal integers (`now_ms` as [`lease_judged_at`] judges it): for a
/// reclaim whose binds the id lists take (SQLite, MySQL).
pub(crate) fn taken_over_at(now_ms: i64, alive_since_ms: i64) -> String {
    claim_taken_over!("f.owner", "{now}", "{alive_since}")
        .replace("{now}", &lease_judged_at(now_ms, alive_since_ms).to_string())
        .replace("{alive_since}", &alive_since_ms.to_string())
}

/// A fire row ([`FIRE_COLUMNS`]) as a [`Fire`].
pub(crate) fn fire_from_row(row: &impl Columns) -> Result<Fire> {
    let task_id = row.int("task_id")?;
    Ok(Fire {
        task_id,
        timer_id: row.int("timer_id")?,
        app: row.text("app")?,
        run_ms: row.int("run_timer")?,
        scheduled_ms: row.int("scheduled_timer")?,
        status: fire_status(row.int("status")?, task_id)?,
        attempt: u32::try_from(row.int("attempt")?).unwrap_or(u32::MAX),
        output: row.text("output")?,
        cost_time: row.int("cost_time")?,
        manual: row.int("manual")? != 0,
        replayed: row.int("replayed")? != 0,
        create_time: row.int("create_time")?,
        modify_time: row.int("modify_time")?,
    })
}

/// A fire's status code as a [`FireStatus`].
pub(crate) fn fire_status(code: i64, task_id: i64) -> Result<FireStatus> {
    FireStatus::from_code(code).ok_or_else(|| Error::Corrupt(format!("t_timer_task {task_id}: status")))
}

/// The key (`timer_id`, `run_timer`) of a fire row.
pub(crate) fn key_from_row(row: &impl Columns) -> Result<FireKey> {
    Ok(FireKey { timer_id: row.int("timer_id")?, run_ms: row.int("run_timer")? })
}

/// A row of [`CLAIMED_COLUMNS`] as a fire claimed under `owner`.
pub(crate) fn claimed_from_row(row: &impl Columns, owner: &str) -> Result<ClaimedFire> {
    Ok(ClaimedFire {
        task_id: row.int("task_id")?,
        key: key_from_row(row)?,
        scheduled_ms: row.int("scheduled_timer")?,
        attempt: u32::try_from(row.int("attempt")?).unwrap_or(u32::MAX),
        owner: owner.to_string(),
        manual: row.int("manual")? != 0,
        replay: row.int("replayed")? != 0,
        timer_modified: row.opt_int("timer_modified")?.unwrap_or(0),
    })
}

/// Appends `task_id IN (?, ...)` in any dialect.
pub(crate) fn push_id_list<DB: sqlx::Database>(qb: &mut QueryBuilder<'_, DB>, ids: impl IntoIterator<Item = i64>)
where
    i64: for<'q> sqlx::Encode<'q, DB> + Type<DB>,
{
    qb.push("task_id IN (");
    push_list(qb, ids);
    qb.push(")");
}

/// Binds `items` into `qb` as a comma-separated list (the inside of an `IN (...)`).
pub(crate) fn push_list<'args, DB, T>(qb: &mut QueryBuilder<'args, DB>, items: impl IntoIterator<Item = T>)
where
    DB: sqlx::Database,
    T: 'args + sqlx::Encode<'args, DB> + Type<DB>,
{
    let mut list = qb.separated(", ");
    for item in items {
        list.push_bind(item);
    }
}

/// The rows of a SQLite batch statement (`VALUES` rows, `IN` items),
/// padded to a power of two by repeating the last one, so that each batch
/// statement comes in a dozen shapes that are prepared once and cached:
/// SQLite parses a long list slowly, and batch sizes vary. A repeated row
/// changes nothing (a fire is claimed or written once per statement, an
/// `IN` list is a set). `rows` is not empty.
pub(crate) fn padded<T>(rows: &[T]) -> impl Iterator<Item = &T> {
    let extra = rows.len().next_power_of_two() - rows.len();
    rows.iter().chain(std::iter::repeat_n(&rows[rows.len() - 1], extra))
}

/// Splits results into rounds in which each fire appears at most once,
/// keeping each fire's results in order across rounds: one statement
/// joins each fire once.
pub(crate) fn rounds_by_task(results: &[FireResult]) -> Vec<Vec<&FireResult>> {
    let mut rounds: Vec<Vec<&FireResult>> = Vec::new();
    let mut next_round: HashMap<i64, usize> = HashMap::new();
    for r in results {
        let round = next_round.entry(r.task_id).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(r);
        *round += 1;
    }
    rounds
}

/// (kind, cron, timezone, run_at) columns of a schedule.
pub(crate) fn schedule_columns(schedule: &Schedule) -> ScheduleColumns<'_> {
    match schedule {
        Schedule::Cron { expr, timezone } => ("cron", Some(expr.as_str()), timezone.as_str(), None, None),
        Schedule::Once { run_at_ms } => ("once", None, "UTC", Some(*run_at_ms), None),
        Schedule::Every { every_ms, anchor_ms, timezone } => {
            ("every", None, timezone.as_str(), Some(*anchor_ms), Some(*every_ms))
        }
    }
}

/// A schedule's columns: `kind`, `cron`, `timezone`, `run_at` (a one-shot's
/// time, an interval's anchor), `every_ms`.
pub(crate) type ScheduleColumns<'a> = (&'static str, Option<&'a str>, &'a str, Option<i64>, Option<i64>);

/// The peak column of a timer's load (NULL for one-shots).
pub(crate) fn peak_column(load: xtimer_core::load::Load) -> Option<i64> {
    match load {
        xtimer_core::load::Load::Cron(peak) => Some(peak as i64),
        xtimer_core::load::Load::Minute(_) => None,
    }
}

/// The `timing` column: JSON, or NULL when it says nothing.
pub(crate) fn timing_column(timing: &Timing) -> Option<String> {
    (!timing.is_plain()).then(|| serde_json::to_string(timing).expect("timing serializes"))
}

/// ` ON CONFLICT (key) DO NOTHING`: the end of an insert that skips a row
/// whose unique `key` is taken (SQLite, PostgreSQL).
pub(crate) fn on_conflict_do_nothing(key: &str) -> String {
    format!(" ON CONFLICT ({key}) DO NOTHING")
}

/// Deletes at most `limit` rows of `table` that meet `condition`, by their
/// unique `key`, through a bounded subquery (SQLite, PostgreSQL).
pub(crate) fn delete_by_key(table: &str, key: &str, condition: &str, limit: u32) -> String {
    format!("DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE {condition} LIMIT {limit})")
}

/// The end of the insert of a `t_timer_stats` row marked stale: on a taken
/// key, the stored row's `stale` goes up by one (SQLite, PostgreSQL).
pub(crate) const MARK_HOUR_STALE: &str =
    " ON CONFLICT (timer_id, hour_ms) DO UPDATE SET stale = t_timer_stats.stale + 1";

/// A node's row, made or updated (SQLite, PostgreSQL): binds its id, host,
/// listen address, start, heartbeat and shards.
pub(crate) const HEARTBEAT: &str = "INSERT INTO t_node (node_id, host, listen, started_at, heartbeat_at, shards)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (node_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, shards = excluded.shards,
     listen = excluded.listen";

/// Writes node `$node`'s row ([`HEARTBEAT`], `$shards` its shards as JSON)
/// on `$db` (SQLite, PostgreSQL).
macro_rules! heartbeat {
    ($db:expr, $node:expr, $shards:expr) => {{
        let node: &xtimer_core::node::NodeInfo = $node;
        sqlx::query($crate::sql::HEARTBEAT)
            .bind(&node.id)
            .bind(&node.host)
            .bind(&node.listen)
            .bind(node.started_at)
            .bind(node.heartbeat_at)
            .bind($shards)
            .execute($db)
            .await?;
        Ok(())
    }};
}
pub(crate) use heartbeat;

/// Clamps a page bound to what `LIMIT` / `OFFSET` take.
pub(crate) fn page_bound(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Who claims fires, for how long and when: what every dialect's claim and
/// reclaim bind.
#[derive(Clone, Copy)]
pub(crate) struct Claimant<'a> {
    pub(crate) owner: &'a str,
    pub(crate) lease_ms: i64,
    pub(crate) now_ms: i64,
}

/// Numbers as a SQL list (`1, 2, 3`): ids and codes, written in.
pub(crate) fn numbers(values: impl Iterator<Item = i64>) -> String {
    values.map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_rows_fill_a_power_of_two_with_the_last_row() {
        let pad = |rows: &[i64]| padded(rows).copied().collect::<Vec<_>>();
        assert_eq!(pad(&[7]), [7]);
        assert_eq!(pad(&[1, 2, 3]), [1, 2, 3, 3]);
        assert_eq!(pad(&[1, 2, 3, 4]), [1, 2, 3, 4]);
        assert_eq!(pad(&[1, 2, 3, 4, 5]).len(), 8);
        let shapes: std::collections::HashSet<usize> = (1..=2048).map(|n| padded(&vec![0; n]).count()).collect();
        assert_eq!(shapes.len(), 12, "2,048 batch sizes share 12 statement shapes");
    }
}
