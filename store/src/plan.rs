//! The writes of an expansion plan (the migrator's step, or a timer
//! expanded when it is created, enabled or updated): its fires
//! ([`FireRepo::insert_planned_fires`]) and its timers' next fire
//! positions ([`TimerRepo::set_planned_next_runs`]), each written only
//! while its timer still has the `modify_time` the plan read.
//!
//! A plan is made from timers read before it is written; an `updateTimer`
//! (or a status change) may commit in between, delete the pending fires of
//! the old definition and expand the new one. Each statement therefore
//! joins its rows to `t_timer` on the id and the `modify_time` read, under
//! the timer row's lock: a shared one for inserts (`FOR SHARE`, `LOCK IN
//! SHARE MODE`; SQLite has one writer), the update's own for the next
//! fire position. Under that lock the row is the latest committed one, so either
//! the plan's write commits before the update takes the row (and the
//! update's delete, which follows its commit, sees and removes the fires)
//! or it reads the new `modify_time` and writes nothing. Still one
//! statement per batch, as the unchecked writes.
//!
//! [`FireRepo::insert_planned_fires`]: crate::FireRepo::insert_planned_fires
//! [`TimerRepo::set_planned_next_runs`]: crate::TimerRepo::set_planned_next_runs

use crate::backend::on_driver;
use crate::driver::Driver;
use crate::repo::{NextRun, PlannedFire};
use crate::{Database, Result};

/// [`crate::FireRepo::insert_planned_fires`] on `db`.
pub(crate) async fn insert_fires(db: &Database, fires: &[PlannedFire], now_ms: i64) -> Result<u64> {
    if fires.is_empty() {
        return Ok(0);
    }
    on_driver!(db, d => d.insert_planned_fires(fires, now_ms).await)
}

/// [`crate::TimerRepo::set_planned_next_runs`] on `db`.
pub(crate) async fn set_next_runs(db: &Database, next: &[NextRun]) -> Result<()> {
    if next.is_empty() {
        return Ok(());
    }
    on_driver!(db, d => d.set_planned_next_runs(next).await)
}
