//! What the backends' fire statements share.

use const_format::formatcp;

use crate::sql::code;

/// A manual fire, after `INSERT INTO` (or MySQL's `INSERT IGNORE INTO`).
pub(crate) const MANUAL_FIRE: &str = "t_timer_task (timer_id, app, run_timer, manual, create_time, modify_time)
             VALUES ($1, $2, $3, 1, $4, $5)";
/// A manual fire unless the timer has a fire at that time (SQLite, PostgreSQL).
pub(crate) const INSERT_MANUAL: &str =
    formatcp!("INSERT INTO {MANUAL_FIRE} ON CONFLICT (timer_id, run_timer) DO NOTHING");

/// Gives a running fire back (pending, no owner) if `$3` still owns it:
/// binds the modify time, the fire and its owner.
pub(crate) const RELEASE_ONE: &str = formatcp!(
    "UPDATE t_timer_task SET status = {}, owner = NULL, lease_until = NULL, modify_time = $1
     WHERE task_id = $2 AND owner = $3 AND status = {}",
    code::PENDING,
    code::RUNNING
);

/// Releases `$claims` on `$pool` one statement per fire ([`RELEASE_ONE`]),
/// in one transaction; how many it gave back.
macro_rules! release_one_by_one {
    ($pool:expr, $claims:expr, $now_ms:expr) => {{
        use $crate::driver::Dialect;
        let pool = $pool;
        let sql = pool.sql($crate::sql::fires::RELEASE_ONE);
        let mut released = 0;
        let mut tx = pool.begin().await?;
        for c in $claims {
            released +=
                sqlx::query(&sql).bind($now_ms).bind(c.task_id).bind(&c.owner).execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(released)
    }};
}
pub(crate) use release_one_by_one;
