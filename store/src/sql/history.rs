//! What the backends' statements for timers' history share.

/// The start of a history insert: its columns, in the order
/// [`insert_history_values!`] binds them.
pub(crate) const INSERT: &str = "INSERT INTO t_timer_history (timer_id, app, at_ms, action, by_who, changes) ";
/// Rows per insert statement (six parameters each).
pub(crate) const ROWS_PER_STATEMENT: usize = crate::sql::MAX_PARAMS / 6;

/// Writes `$entries` on connection `$c` (a transaction's): multi-row
/// `VALUES` statements of [`ROWS_PER_STATEMENT`] rows. The one way every
/// backend writes history inside a transaction, and SQLite's and MySQL's
/// on their own.
macro_rules! insert_history_values {
    ($c:expr, $entries:expr) => {{
        let entries: &[$crate::change::HistoryEntry] = $entries;
        for chunk in entries.chunks($crate::sql::history::ROWS_PER_STATEMENT) {
            let mut qb = sqlx::QueryBuilder::new($crate::sql::history::INSERT);
            qb.push_values(chunk, |mut row, e| {
                row.push_bind(e.timer_id)
                    .push_bind(e.app.as_str())
                    .push_bind(e.at_ms)
                    .push_bind(e.action.as_str())
                    .push_bind(e.by.as_str())
                    .push_bind(e.changes.as_str());
            });
            qb.build().execute(&mut *$c).await?;
        }
        Ok(())
    }};
}
pub(crate) use insert_history_values;
