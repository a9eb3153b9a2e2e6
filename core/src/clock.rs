//! The wall clock, injected so loops and tests agree on "now".
//!
//! Every time inside xtimer is Unix milliseconds in UTC; nothing reads the
//! process's local time zone.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A source of the current time in Unix milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch, UTC.
    fn now_ms(&self) -> i64;
}

/// A clock shared between the parts of one process.
pub type SharedClock = Arc<dyn Clock>;

/// The system's real-time clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

/// A clock that moves only when told to; for deterministic tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        Self(AtomicI64::new(now_ms))
    }
    /// Sets the time.
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }
    /// Moves the time forward by `ms`.
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A wall clock that follows tokio's clock from a fixed origin, so tests with
/// a paused tokio runtime (`start_paused`, `time::advance`) see wall time move
/// exactly as far as tokio time does.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin_ms: i64,
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading `origin_ms` now.
    pub fn new(origin_ms: i64) -> Self {
        Self { origin_ms, origin: tokio::time::Instant::now() }
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> i64 {
        self.origin_ms + self.origin.elapsed().as_millis() as i64
    }
}

/// Formats Unix milliseconds as RFC 3339 in UTC (`2026-01-02T03:04:05.678Z`).
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}
