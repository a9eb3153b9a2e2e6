//! [`WorkerConfig`]: the worker's pace, and the jittered poll interval.

use std::time::Duration;

use xtimer_asyncflow::wire::TaskScheduleCfg;

/// How a [`Worker`](crate::Worker) paces itself. The defaults are the Go
/// worker's; tests shorten them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// How often the cfg list (schedule_interval, schedule_limit,
    /// max_retry_interval of every type) is reloaded. After a failed load
    /// the worker retries every second until one succeeds. Defaults to 20 s.
    pub cfg_reload: Duration,
    /// Poll interval of a type whose schedule_interval is 0. Defaults to 10 s.
    pub default_poll_interval: Duration,
    /// Replaces every type's schedule_interval when set, so a test can poll
    /// faster than the cfg's whole seconds allow. Defaults to `None`.
    pub poll_interval: Option<Duration>,
    /// The shortest wait between two polls of a type, after jitter, so a
    /// small interval minus jitter never turns into a busy loop.
    /// Defaults to 100 ms.
    pub min_poll_interval: Duration,
    /// Each wait between polls is moved by a random amount in
    /// [-jitter, +jitter], so workers started together drift apart instead
    /// of holding in lockstep. Defaults to 500 ms.
    pub jitter: Duration,
    /// Handlers running at once, over every type. Defaults to 64.
    pub concurrency: usize,
    /// Tasks held but not yet reported, over every type; a poll that finds
    /// the backlog at this cap is skipped, and a poll never asks for more
    /// than the room left (the Go worker stops pulling past a threshold,
    /// seed 001). Defaults to 1000.
    pub backlog_cap: usize,
    /// How long [`run`](crate::Worker::run) waits for in-flight handlers
    /// after shutdown; handlers still running then are abandoned and the
    /// server's governance takes their tasks back after
    /// max_processing_time. Defaults to 30 s.
    pub shutdown_grace: Duration,
    /// Tries of a set_task report before the worker gives up on it (the
    /// governance then recovers the task). Defaults to 3.
    pub report_attempts: u32,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            cfg_reload: Duration::from_secs(20),
            default_poll_interval: Duration::from_secs(10),
            poll_interval: None,
            min_poll_interval: Duration::from_millis(100),
            jitter: Duration::from_millis(500),
            concurrency: 64,
            backlog_cap: 1000,
            shutdown_grace: Duration::from_secs(30),
            report_attempts: 3,
        }
    }
}

/// Most tasks one hold_tasks may return (the server's cap).
pub const MAX_HOLD: i64 = 2000;

/// Tasks a hold asks for when the cfg's schedule_limit is 0 (the server's default).
pub const DEFAULT_HOLD: i64 = 100;

impl WorkerConfig {
    /// The un-jittered interval between polls of a type with `cfg`.
    pub fn base_poll_interval(&self, cfg: Option<&TaskScheduleCfg>) -> Duration {
        if let Some(interval) = self.poll_interval {
            return interval;
        }
        match cfg.map(|c| c.schedule_interval) {
            Some(secs) if secs > 0 => Duration::from_secs(secs as u64),
            _ => self.default_poll_interval,
        }
    }

    /// `base` moved by `unit * jitter` (`unit` in [-1, 1], clamped), never
    /// below [`min_poll_interval`](Self::min_poll_interval).
    pub fn jittered(&self, base: Duration, unit: f64) -> Duration {
        let shift = self.jitter.as_secs_f64() * unit.clamp(-1.0, 1.0);
        let secs = (base.as_secs_f64() + shift).max(self.min_poll_interval.as_secs_f64());
        Duration::from_secs_f64(secs)
    }

    /// The next wait between polls of a type with `cfg`, with fresh jitter.
    pub fn next_poll_interval(&self, cfg: Option<&TaskScheduleCfg>) -> Duration {
        let unit = rand::random_range(-1.0..=1.0);
        self.jittered(self.base_poll_interval(cfg), unit)
    }

    /// Tasks one hold asks for, before the backlog's room: the cfg's
    /// schedule_limit (or its default), at most [`MAX_HOLD`].
    pub fn hold_want(&self, cfg: &TaskScheduleCfg) -> usize {
        let limit = if cfg.schedule_limit > 0 { cfg.schedule_limit } else { DEFAULT_HOLD };
        limit.min(MAX_HOLD) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(interval: i64, limit: i64) -> TaskScheduleCfg {
        TaskScheduleCfg { schedule_interval: interval, schedule_limit: limit, ..Default::default() }
    }

    #[test]
    fn interval_comes_from_cfg_with_a_default_for_zero_and_an_override() {
        let c = WorkerConfig::default();
        assert_eq!(c.base_poll_interval(Some(&cfg(3, 0))), Duration::from_secs(3));
        assert_eq!(c.base_poll_interval(Some(&cfg(0, 0))), Duration::from_secs(10));
        assert_eq!(c.base_poll_interval(None), Duration::from_secs(10));
        let fast = WorkerConfig { poll_interval: Some(Duration::from_millis(50)), ..c };
        assert_eq!(fast.base_poll_interval(Some(&cfg(3, 0))), Duration::from_millis(50));
    }

    #[test]
    fn jitter_stays_within_half_a_second_either_way() {
        let c = WorkerConfig::default();
        let base = Duration::from_secs(10);
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for _ in 0..10_000 {
            let d = c.next_poll_interval(Some(&cfg(10, 0)));
            assert!(d >= base - c.jitter && d <= base + c.jitter, "{d:?}");
            lo = lo.min(d);
            hi = hi.max(d);
        }
        // Both sides are used, not just [0, 500) ms as the Go worker does.
        assert!(lo < base - Duration::from_millis(400) && hi > base + Duration::from_millis(400), "{lo:?} {hi:?}");
        assert_eq!(c.jittered(base, -1.0), Duration::from_millis(9_500));
        assert_eq!(c.jittered(base, 7.0), Duration::from_millis(10_500));
    }

    #[test]
    fn jitter_never_goes_below_the_minimum() {
        let c = WorkerConfig { min_poll_interval: Duration::from_millis(100), ..Default::default() };
        assert_eq!(c.jittered(Duration::from_millis(200), -1.0), Duration::from_millis(100));
    }

    #[test]
    fn hold_asks_for_the_schedule_limit_capped_by_the_server_max() {
        let c = WorkerConfig::default();
        assert_eq!(c.hold_want(&cfg(0, 0)), 100);
        assert_eq!(c.hold_want(&cfg(0, 7)), 7);
        assert_eq!(c.hold_want(&cfg(0, 50_000)), 2000);
    }
}
