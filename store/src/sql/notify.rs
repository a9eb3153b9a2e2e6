//! What the dialects' statements for owed notifications share.

use const_format::formatcp;
use sqlx::Row;
use xtimer_core::fire::FireKey;

use crate::repo::{OwedKind, OwedNotification};
use crate::sql::code;
use crate::{Error, Result};

/// The columns a notification is read back with, as 64-bit integers in
/// every dialect (MySQL's casts come from [`Dialect::sql`]).
pub(crate) const OWED_COLUMNS: &str = "task_id, CAST(kind AS BIGINT) AS kind, timer_id, run_timer, \
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
pub(crate) use owed_for;

/// Stores one notification unless it is owed already, if its fire's result
/// was written under its owner and is one its kind is owed for (SQLite and
/// PostgreSQL; MySQL says it its way). Binds: task, kind, timer, run time,
/// manual, attempt, output, owner, lease end, now.
pub(crate) const OWE: &str = formatcp!(
    "INSERT INTO t_notify_owed (task_id, kind, timer_id, run_timer, manual, attempt, output, sends, owner, send_at,
                                create_time)
     SELECT $1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10
     WHERE EXISTS (SELECT 1 FROM t_timer_task f WHERE f.task_id = $1 AND f.run_timer = $4 AND f.owner = $8
                   AND {})
     ON CONFLICT (task_id, kind) DO NOTHING",
    owed_for!("$2")
);

/// A take of due notifications: leased to `owner` until `lease_until`,
/// those due by `now_ms`, at most `limit`.
pub(crate) struct Taking<'a> {
    pub(crate) owner: &'a str,
    pub(crate) lease_until: i64,
    pub(crate) now_ms: i64,
    pub(crate) limit: i64,
}

/// Binds notification `$n` of `$owing` to `$query` in the order of
/// [`OWE`]'s placeholders (`$1` to `$10`).
macro_rules! bind_owed {
    ($query:expr, $n:expr, $owing:expr) => {
        $query
            .bind($n.task_id)
            .bind($n.kind.code())
            .bind($n.key.timer_id)
            .bind($n.key.run_ms)
            .bind(i64::from($n.manual))
            .bind(i64::from($n.attempt))
            .bind(&$n.output)
            .bind(&$n.owner)
            .bind($owing.lease_until)
            .bind($owing.now_ms)
    };
}
pub(crate) use bind_owed;

/// Notifications to store with a batch of results, and their lease.
pub(crate) struct Owing<'a> {
    pub(crate) owed: &'a [OwedNotification],
    pub(crate) lease_until: i64,
    pub(crate) now_ms: i64,
}

/// A notification as read back ([`OWED_COLUMNS`]), before its owner is set.
pub(crate) struct OwedRow {
    pub(crate) task_id: i64,
    pub(crate) kind: i64,
    pub(crate) key: FireKey,
    pub(crate) manual: bool,
    pub(crate) attempt: i64,
    pub(crate) output: String,
    pub(crate) sends: i64,
}

impl OwedRow {
    pub(crate) fn from_row<'r, R>(row: &'r R) -> Result<Self>
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
    pub(crate) fn owned_by(self, owner: &str) -> Result<OwedNotification> {
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
