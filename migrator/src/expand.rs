//! Pure expansion of one timer's fire times over a window.

use xtimer_core::timer::{Schedule, Timer};
use xtimer_core::when::{self, Exclusions};

/// Fire times of `timer` in `[from_ms, to_ms)`, at most `limit`: its
/// schedule's times within its bounds and run limit, less those its
/// calendars exclude.
///
/// A one-shot timer yields its time when it falls in the window, or, when
/// `enabling` and its time has passed, yields it anyway (it fires late,
/// once) rather than never. A one-shot names its own time: calendars do
/// not apply to it.
pub fn fire_times(
    timer: &Timer,
    exclusions: &Exclusions,
    from_ms: i64,
    to_ms: i64,
    limit: usize,
    enabling: bool,
) -> Vec<i64> {
    match &timer.schedule {
        Schedule::Once { run_at_ms } => {
            let due = *run_at_ms < to_ms && (*run_at_ms >= from_ms || enabling);
            if due {
                vec![*run_at_ms]
            } else {
                Vec::new()
            }
        }
        schedule => when::fire_times(schedule, &timer.timing, exclusions, from_ms, to_ms, limit),
    }
}

/// The first fire time of `timer` at or after `at_ms` within its bounds:
/// where its next expansion starts. `None` when it has none (a one-shot
/// whose time is before `at_ms`, a schedule past its end or run limit, or
/// one that does not parse).
pub fn next_fire_at_or_after(timer: &Timer, at_ms: i64) -> Option<i64> {
    match &timer.schedule {
        Schedule::Once { .. } => timer.schedule.next_fire_at_or_after(at_ms),
        schedule => timer.timing.next_at_or_after(schedule, at_ms),
    }
}
