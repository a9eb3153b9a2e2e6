//! What the backends' statements for apps' usage share.

use const_format::formatcp;

use crate::sql::code;

/// An app's usage row, not locked (SQLite: one writer).
pub(crate) const READ_USAGE: &str = "SELECT timers, cron_fpm FROM t_app_usage WHERE app = $1";
/// PostgreSQL and MySQL: the row, locked for the transaction.
pub(crate) const READ_USAGE_LOCKED: &str = "SELECT timers, cron_fpm FROM t_app_usage WHERE app = $1 FOR UPDATE";
/// MySQL: the `timers` of a usage row not counted yet (see
/// `AppUsage::read`).
pub(crate) const UNCOUNTED: i64 = -1;
/// An app's first usage row, unless another transaction made it first.
pub(crate) const INSERT_USAGE: &str =
    "INSERT INTO t_app_usage (app, timers, cron_fpm) VALUES ($1, $2, $3) ON CONFLICT (app) DO NOTHING";
/// An app's enabled one-shots counted by minute from `$2` on (SQLite,
/// PostgreSQL).
pub(crate) const INSERT_MINUTES: &str = formatcp!(
    "INSERT INTO t_app_minute (app, minute, fires)
     SELECT app, run_at / 60000, COUNT(*) FROM t_timer
     WHERE app = $1 AND status = {} AND kind = 'once' AND run_at >= $2
     GROUP BY app, run_at / 60000
     ON CONFLICT (app, minute) DO NOTHING",
    code::TIMER_ENABLED
);
/// Adds `$3` fires to an app's minute (SQLite, PostgreSQL).
pub(crate) const ADD_MINUTE: &str = "INSERT INTO t_app_minute (app, minute, fires) VALUES ($1, $2, $3)
     ON CONFLICT (app, minute) DO UPDATE SET fires = t_app_minute.fires + excluded.fires";
/// Ends a batch insert of usage counts: a taken app's counts go up by the
/// row's (SQLite, PostgreSQL).
pub(crate) const ADD_USAGE_COUNTS: &str =
    " ON CONFLICT (app) DO UPDATE SET timers = t_app_usage.timers + excluded.timers, \
     cron_fpm = t_app_usage.cron_fpm + excluded.cron_fpm";
/// Ends a batch insert of minute fires: a taken minute's fires go up by the
/// row's (SQLite, PostgreSQL).
pub(crate) const ADD_MINUTE_FIRES: &str =
    " ON CONFLICT (app, minute) DO UPDATE SET fires = t_app_minute.fires + excluded.fires";

/// Adds `$fires` to `$app`'s `$minute` on connection `$c` ([`ADD_MINUTE`]).
macro_rules! add_minute {
    ($c:expr, $app:expr, $minute:expr, $fires:expr) => {{
        sqlx::query($crate::sql::usage::ADD_MINUTE).bind($app).bind($minute).bind($fires).execute(&mut *$c).await?;
        Ok(())
    }};
}
pub(crate) use add_minute;

/// Makes `$app`'s usage row with its counts on connection `$c` unless
/// another transaction made it first, and counts its minutes from
/// `$minute_from` into a row it made ([`INSERT_USAGE`], [`INSERT_MINUTES`]).
macro_rules! insert_usage {
    ($c:expr, $app:expr, $timers:expr, $cron_fpm:expr, $minute_from:expr) => {{
        use $crate::driver::Dialect;
        let made = sqlx::query($crate::sql::usage::INSERT_USAGE)
            .bind($app)
            .bind($timers)
            .bind($cron_fpm)
            .execute(&mut *$c)
            .await?
            .rows_affected();
        if made == 1 {
            let sql = $c.sql($crate::sql::usage::INSERT_MINUTES);
            sqlx::query(&sql).bind($app).bind($minute_from).execute(&mut *$c).await?;
        }
        Ok(())
    }};
}
pub(crate) use insert_usage;
