//! MySQL's statements for apps' usage: an app's first count starts from a
//! placeholder row the counting transaction holds, and upserts say
//! `ON DUPLICATE KEY UPDATE`.

use const_format::formatcp;

use crate::sql::code;
use crate::sql::usage::UNCOUNTED;

/// MySQL: a placeholder usage row, or the existing row, locked either way.
/// An upsert takes the row's exclusive lock at once where `INSERT IGNORE`
/// would take a shared one: two transactions each holding a shared lock and
/// then asking for the exclusive one would deadlock.
pub(crate) const PLACEHOLDER_USAGE_MYSQL: &str = formatcp!(
    "INSERT INTO t_app_usage (app, timers, cron_fpm) VALUES ($1, {UNCOUNTED}, 0) ON DUPLICATE KEY UPDATE app = app"
);
/// MySQL: the timers of a usage row this transaction holds.
pub(crate) const USAGE_TIMERS: &str = "SELECT timers FROM t_app_usage WHERE app = $1";
/// MySQL: the counts of the placeholder row.
pub(crate) const SET_USAGE_MYSQL: &str = "UPDATE t_app_usage SET timers = $1, cron_fpm = $2 WHERE app = $3";
/// [`INSERT_MINUTES`](crate::sql::usage::INSERT_MINUTES) on MySQL, whose `/` divides exactly (`DIV` is the
/// integer division). Under the app's usage lock, so no other transaction
/// writes the app's minutes meanwhile.
pub(crate) const INSERT_MINUTES_MYSQL: &str = formatcp!(
    "INSERT IGNORE INTO t_app_minute (app, minute, fires)
     SELECT app, run_at DIV 60000, COUNT(*) FROM t_timer
     WHERE app = $1 AND status = {} AND kind = 'once' AND run_at >= $2
     GROUP BY app, run_at DIV 60000",
    code::TIMER_ENABLED
);
/// [`ADD_MINUTE`](crate::sql::usage::ADD_MINUTE) on MySQL: the added fires are bound twice (MySQL 8 and
/// MariaDB share no other way to name the new row).
pub(crate) const ADD_MINUTE_MYSQL: &str = "INSERT INTO t_app_minute (app, minute, fires) VALUES ($1, $2, $3)
     ON DUPLICATE KEY UPDATE fires = fires + $4";
/// Ends a batch insert of usage counts: a taken app's counts go up by the
/// row's.
pub(crate) const ADD_USAGE_COUNTS: &str =
    " ON DUPLICATE KEY UPDATE timers = timers + VALUES(timers), cron_fpm = cron_fpm + VALUES(cron_fpm)";
/// Ends a batch insert of minute fires: a taken minute's fires go up by the
/// row's.
pub(crate) const ADD_MINUTE_FIRES: &str = " ON DUPLICATE KEY UPDATE fires = fires + VALUES(fires)";
