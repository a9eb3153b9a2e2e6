//! What the dialects' statements for timers share.

use const_format::formatcp;

use crate::sql::code;
use crate::sql::definition::TIMER_COLUMNS;

/// A timer with nothing left to expand (`next_run IS NULL`), put so that
/// SQLite and PostgreSQL find such timers in the due index's NULL window
/// instead of reading every enabled timer's entry.
pub(crate) const NOTHING_LEFT: &str = formatcp!("next_run IS NULL AND next_run / {DUE_WINDOW_MS} IS NULL");

/// `statement` (one of the completion statements, whose first condition is
/// the timer's status) narrowed to the timers of `scope`, given as literal
/// integers (a primary-key probe each).
pub(crate) fn scoped<'s>(statement: &'s str, scope: Option<&[i64]>) -> std::borrow::Cow<'s, str> {
    match scope {
        None => std::borrow::Cow::Borrowed(statement),
        Some(ids) => {
            let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
            let list = if list.is_empty() { "NULL".to_owned() } else { list };
            std::borrow::Cow::Owned(statement.replacen(
                "WHERE status = ",
                &format!("WHERE timer_id IN ({list}) AND status = "),
                1,
            ))
        }
    }
}

/// Width of the windows the due index groups timers by (the divisor in
/// migration `0011_due_index` on SQLite, `0012` on PostgreSQL).
pub(crate) const DUE_WINDOW_MS: i64 = 600_000;

/// Enabled timers due before `$2`, earliest window first. The window
/// bound (`$1`, the window after `$2`'s) selects the due index's entries on
/// SQLite and PostgreSQL, and the order is the index's own, so a page reads
/// `$3` entries and stops: ordered by `next_run`, every page sorted all the
/// timers still due (a 50,000-timer import read 2.5 million rows in 100
/// pages). A step plans every due timer before it indexes any fire, so the
/// order within a window does not matter.
pub(crate) const DUE: &str = formatcp!("{DUE_WHERE} ORDER BY next_run / {DUE_WINDOW_MS}, timer_id LIMIT $3");
/// What [`DUE`] and MySQL's `DUE_MYSQL` select.
pub(crate) const DUE_WHERE: &str = formatcp!(
    "SELECT {TIMER_COLUMNS} FROM t_timer WHERE status = {} AND next_run / {DUE_WINDOW_MS} < $1 AND next_run < $2",
    code::TIMER_ENABLED
);
/// An enabled timer that is over: nothing left to expand, no fire pending
/// or running, and for a one-shot its fire made and ended (a cron or
/// interval timer past its `endAt` or run limit may have made none).
pub(crate) const FINISHED: &str = formatcp!(
    "{NOTHING_LEFT}
       AND NOT EXISTS (SELECT 1 FROM t_timer_task f WHERE f.timer_id = t_timer.timer_id
                       AND f.status IN ({pending}, {running}))
       AND (kind <> 'once' OR EXISTS (SELECT 1 FROM t_timer_task f WHERE f.timer_id = t_timer.timer_id))",
    pending = code::PENDING,
    running = code::RUNNING
);
pub(crate) const COMPLETE_FIRED_ONCE: &str = formatcp!(
    "UPDATE t_timer SET status = CASE WHEN delete_after_run = 1 THEN {deleted} ELSE {completed} END,
         modify_time = $1
     WHERE status = {enabled} AND {FINISHED}
     RETURNING timer_id, app, CAST(status AS BIGINT)",
    completed = code::TIMER_COMPLETED,
    deleted = code::TIMER_DELETED,
    enabled = code::TIMER_ENABLED
);
/// Apps with a deleteAfterRun one-shot that a completion deletes, its
/// timers over as `$finished` ([`FINISHED`], or MySQL's) says: their usage
/// is locked before the timers are, the order every other write of a timer
/// takes (so the two cannot deadlock).
macro_rules! deleting_once_apps {
    ($finished:expr) => {
        const_format::formatcp!(
            "SELECT DISTINCT app FROM t_timer
     WHERE status = {} AND delete_after_run = 1 AND {}
     ORDER BY app",
            $crate::sql::code::TIMER_ENABLED,
            $finished
        )
    };
}
pub(crate) use deleting_once_apps;

/// The apps of [`COMPLETE_FIRED_ONCE`]'s deletes ([`deleting_once_apps!`]).
pub(crate) const DELETING_ONCE_APPS: &str = deleting_once_apps!(FINISHED);

/// Reads the timers of `$ids` on `$pool` in `IN` lists of binds, padded
/// to a power of two (at most `MAX_PARAMS`) so each shape is prepared once.
macro_rules! timers_by_id_lists {
    ($pool:expr, $ids:expr) => {{
        use $crate::driver::Dialect;
        let pool = $pool;
        let mut out = Vec::with_capacity($ids.len());
        for chunk in $ids.chunks(16_384) {
            let mut qb = sqlx::QueryBuilder::new(pool.sql(const_format::formatcp!(
                "SELECT {} FROM t_timer WHERE timer_id IN (",
                $crate::sql::definition::TIMER_COLUMNS
            )));
            $crate::sql::push_list(&mut qb, $crate::sql::padded(chunk).copied());
            qb.push(")");
            for row in qb.build().fetch_all(pool).await? {
                out.push($crate::sql::timer_from_row(&row)?);
            }
        }
        Ok(out)
    }};
}
pub(crate) use timers_by_id_lists;
