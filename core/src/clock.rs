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

/// The smallest move of an [`OffsetClock`]: clocks that agree this well
/// (NTP does better) are left alone; the correction is for a clock that is
/// off by much more.
pub const MIN_CORRECTION_MS: i64 = 20;

/// A clock that reads another and adds an offset: a node's clock set to
/// the database's, so that every node of a cluster judges heartbeats and
/// leases on one clock and a node whose own clock is skewed neither looks
/// dead to the others nor fires early or late (the heartbeat loop measures
/// the offset). Until the first measurement it reads its inner clock.
#[derive(Debug)]
pub struct OffsetClock {
    inner: SharedClock,
    offset_ms: AtomicI64,
}

impl OffsetClock {
    /// `inner`, offset by nothing yet.
    pub fn new(inner: SharedClock) -> Self {
        Self { inner, offset_ms: AtomicI64::new(0) }
    }

    /// The inner clock's reading, without the offset.
    pub fn inner_now_ms(&self) -> i64 {
        self.inner.now_ms()
    }

    /// The offset in ms (reference clock minus inner clock).
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Acquire)
    }

    /// Takes one reading of the reference clock, `reference_ms`, made
    /// between `sent_ms` and `received_ms` of the inner clock (its midpoint
    /// is taken as the reading's moment, so it is off by at most half the
    /// round trip, and by two milliseconds of rounding). A reading moves
    /// the offset only when the offset kept (none at first) lies outside the
    /// reading's own error and differs by more than [`MIN_CORRECTION_MS`],
    /// so the clock does not jitter with round-trip times, and clocks that
    /// agree that well keep the node's own. A reading whose
    /// round trip took longer than `max_round_trip_ms` is too vague and
    /// ignored. Returns the offset after the reading.
    pub fn observe(&self, sent_ms: i64, reference_ms: i64, received_ms: i64, max_round_trip_ms: i64) -> i64 {
        let round_trip = received_ms - sent_ms;
        let kept = self.offset_ms();
        if !(0..=max_round_trip_ms).contains(&round_trip) {
            return kept;
        }
        let offset = reference_ms - (sent_ms + round_trip / 2);
        // The reading's error: half the round trip, and two milliseconds of
        // rounding (each of the three readings is whole milliseconds).
        let error = round_trip / 2 + 2;
        if (offset - kept).abs() > error.max(MIN_CORRECTION_MS) {
            self.offset_ms.store(offset, Ordering::Release);
            return offset;
        }
        kept
    }
}

impl Clock for OffsetClock {
    fn now_ms(&self) -> i64 {
        self.inner.now_ms() + self.offset_ms.load(Ordering::Acquire)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_clock_reads_the_reference_from_the_middle_of_the_round_trip() {
        let inner = Arc::new(ManualClock::new(10_000));
        let clock = OffsetClock::new(inner.clone());
        assert_eq!(clock.now_ms(), 10_000, "no reading yet");
        // Clocks that agree within the reading's error, or within 20 ms,
        // keep the node's own.
        assert_eq!(clock.observe(10_000, 10_002, 10_001, 1_000), 0);
        assert_eq!(clock.observe(10_000, 10_019, 10_002, 1_000), 0);
        // The reference said 12,000 between 10,000 and 10,040 here: 1,980 ahead.
        assert_eq!(clock.observe(10_000, 12_000, 10_040, 1_000), 1_980);
        assert_eq!(clock.now_ms(), 11_980);
        inner.advance(500);
        assert_eq!(clock.now_ms(), 12_480);
        assert_eq!(clock.inner_now_ms(), 10_500);
        assert_eq!(clock.observe(10_000, 5_000, 12_000, 1_000), 1_980, "a slow reading is ignored");
        // 1,990 +- 22: the offset kept is within the reading's error.
        assert_eq!(clock.observe(11_000, 13_010, 11_040, 1_000), 1_980);
        // 2,500 +- 7: the kept offset is far outside it; the clock moves.
        assert_eq!(clock.observe(11_000, 13_505, 11_010, 1_000), 2_500);
        assert_eq!(clock.offset_ms(), 2_500);
    }
}
