//! Pure expansion of one timer's fire times over a window.

use xtimer_core::cron::CronSchedule;
use xtimer_core::timer::{Schedule, Timer};

/// Fire times of `timer` in `[from_ms, to_ms)`, at most `limit`.
///
/// A one-shot timer yields its time when it falls in the window, or, when
/// `enabling` and its time has passed, yields it anyway (it fires late,
/// once) rather than never.
pub fn fire_times(
    timer: &Timer,
    from_ms: i64,
    to_ms: i64,
    limit: usize,
    enabling: bool,
) -> xtimer_core::Result<Vec<i64>> {
    match &timer.schedule {
        Schedule::Once { run_at_ms } => {
            let due = *run_at_ms < to_ms && (*run_at_ms >= from_ms || enabling);
            Ok(if due { vec![*run_at_ms] } else { Vec::new() })
        }
        Schedule::Cron { expr, timezone } => {
            let schedule = CronSchedule::parsed(expr, timezone)?;
            Ok(schedule.fires_between(from_ms, to_ms, limit))
        }
    }
}

/// The first fire time of `timer` at or after `at_ms`: where its next
/// expansion starts. `None` when it has none (a one-shot whose time is
/// before `at_ms`, or a schedule that does not parse).
pub fn next_fire_at_or_after(timer: &Timer, at_ms: i64) -> Option<i64> {
    timer.schedule.next_fire_at_or_after(at_ms)
}
