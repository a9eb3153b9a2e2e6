//! What the dialects' statements for timers share.

use const_format::formatcp;

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
