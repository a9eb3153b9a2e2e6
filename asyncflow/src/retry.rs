//! The order_time and retry rules (API.md), applied alike by Go workers, the
//! Rust SDK and the server's governance.

use crate::wire::{TaskData, TaskStatus};

/// Largest head start a task may ask for (ten years, in seconds); keeps
/// `now - priority` far from overflow.
pub const MAX_PRIORITY: i64 = 315_360_000;

/// order_time of a task created, or moved to its next stage, at `now` (Unix seconds).
pub fn order_time_ready(now: i64, priority: Option<i64>) -> i64 {
    now.saturating_sub(priority.unwrap_or(0).clamp(-MAX_PRIORITY, MAX_PRIORITY))
}

/// Applies a failed attempt to `task` at `now` (Unix seconds): a positive
/// interval doubles, capped by `cfg_max_retry_interval` when that is
/// positive; the task waits |interval|; it fails for good once
/// crt_retry_num has reached max_retry_num, else it counts the retry and
/// goes back to pending.
pub fn apply_failure(task: &mut TaskData, cfg_max_retry_interval: i64, now: i64) {
    if task.max_retry_interval > 0 {
        let doubled = task.max_retry_interval.saturating_mul(2);
        task.max_retry_interval =
            if cfg_max_retry_interval > 0 { doubled.min(cfg_max_retry_interval) } else { doubled.min(MAX_PRIORITY) };
    }
    let delay = task.max_retry_interval.saturating_abs().min(MAX_PRIORITY);
    task.order_time = now.saturating_add(delay);
    if task.crt_retry_num >= task.max_retry_num {
        task.status = TaskStatus::Failed.code();
    } else {
        task.crt_retry_num += 1;
        task.status = TaskStatus::Pending.code();
    }
}

/// Applies a successful stage that is not the last: pending again, at the
/// back of the queue less its head start.
pub fn apply_next_stage(task: &mut TaskData, now: i64) {
    task.status = TaskStatus::Pending.code();
    task.order_time = order_time_ready(now, task.priority);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(max_retry_num: i64, interval: i64) -> TaskData {
        TaskData { status: 2, max_retry_num, max_retry_interval: interval, ..Default::default() }
    }

    #[test]
    fn progressive_interval_doubles_up_to_the_cap_then_fails() {
        let mut t = task(3, 1);
        let mut delays = Vec::new();
        for _ in 0..4 {
            apply_failure(&mut t, 5, 1_000);
            delays.push(t.order_time - 1_000);
        }
        assert_eq!(delays, [2, 4, 5, 5]);
        assert_eq!(t.crt_retry_num, 3);
        assert_eq!(t.status, TaskStatus::Failed.code());
    }

    #[test]
    fn negative_interval_is_fixed() {
        let mut t = task(5, -7);
        apply_failure(&mut t, 100, 50);
        apply_failure(&mut t, 100, 50);
        assert_eq!((t.max_retry_interval, t.order_time, t.crt_retry_num, t.status), (-7, 57, 2, 1));
    }

    #[test]
    fn next_stage_takes_the_head_start() {
        let mut t = TaskData { priority: Some(30), status: 2, ..Default::default() };
        apply_next_stage(&mut t, 1_000);
        assert_eq!((t.status, t.order_time), (1, 970));
        assert_eq!(order_time_ready(10, Some(i64::MIN)), 10 + MAX_PRIORITY);
    }
}
