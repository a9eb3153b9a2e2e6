//! What the dialects' statements for planned fires share.

/// The columns a planned fire is inserted into.
pub(crate) const INSERT_INTO: &str =
    "INTO t_timer_task (timer_id, app, run_timer, scheduled_timer, create_time, modify_time) ";
