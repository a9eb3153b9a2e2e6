//! Stalls of the node itself: a stopped process (`SIGSTOP`, a frozen VM, a
//! stop-the-world pause) or a runtime starved of CPU.
//!
//! While a node stands still, the others judge it dead and take over its
//! claimed fires, and every timer it holds runs out at once when it
//! resumes. [`PauseWatch`] tells the parts of a node whether such a stall
//! happened since a given moment ([`PauseWatch::crossed`]), so the executor
//! re-checks a claim it held across one before sending it, and does not
//! count the stall against a receiver (a callback's timeout, its circuit
//! breaker). [`PauseDetector`] is the loop that finds stalls: it wakes
//! every tick and measures, on the monotonic clock, how late it woke.
//!
//! Times are tokio's monotonic clock, so tests with a paused runtime can
//! make a stall with `tokio::time::advance`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often the detector wakes.
pub const PAUSE_TICK: Duration = Duration::from_millis(100);

/// A wake-up this much later than its tick counts as a stall of the node.
/// Well under the node timeout (3 s by default), well over the scheduling
/// jitter of a busy two-core machine.
pub const PAUSE_MIN_GAP: Duration = Duration::from_millis(500);

/// "Never": the detector has not ticked yet, or no stall was seen.
const NONE: u64 = u64::MAX;

/// A moment on the node's monotonic clock, to ask later whether a stall
/// happened since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark(u64);

/// What the node knows of its own stalls; shared by every part of a node.
#[derive(Debug)]
pub struct PauseWatch {
    origin: Instant,
    /// Longest wake-up delay that is not a stall.
    min_gap: Duration,
    tick: Duration,
    /// Microseconds since `origin` of the detector's last wake-up; [`NONE`]
    /// while no detector runs.
    last_tick_us: AtomicU64,
    /// Microseconds since `origin` at which the last stall ended; [`NONE`]
    /// if none.
    last_stall_end_us: AtomicU64,
    stalls: AtomicU64,
}

impl Default for PauseWatch {
    fn default() -> Self {
        Self::new(PAUSE_TICK, PAUSE_MIN_GAP)
    }
}

impl PauseWatch {
    /// A watch whose detector wakes every `tick` and counts a wake-up later
    /// than `tick + min_gap` as a stall. Until a [`PauseDetector`] runs it,
    /// it reports no stall.
    pub fn new(tick: Duration, min_gap: Duration) -> Self {
        Self {
            origin: Instant::now(),
            min_gap,
            tick,
            last_tick_us: AtomicU64::new(NONE),
            last_stall_end_us: AtomicU64::new(NONE),
            stalls: AtomicU64::new(0),
        }
    }

    fn elapsed_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    /// Now, to ask [`PauseWatch::crossed`] about later.
    pub fn mark(&self) -> Mark {
        Mark(self.elapsed_us())
    }

    /// Whether the node may have stood still since `since`: a stall ended
    /// after it, or the detector has not woken for longer than a stall
    /// (the node is resuming from one right now and the detector has not
    /// run yet).
    pub fn crossed(&self, since: Mark) -> bool {
        let ended = self.last_stall_end_us.load(Ordering::Acquire);
        if ended != NONE && ended > since.0 {
            return true;
        }
        let last = self.last_tick_us.load(Ordering::Acquire);
        last != NONE && self.elapsed_us().saturating_sub(last) > self.limit_us()
    }

    /// Stalls seen since start.
    pub fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    fn limit_us(&self) -> u64 {
        (self.tick + self.min_gap).as_micros() as u64
    }

    /// Records a wake-up of the detector now; returns the stall it ends,
    /// if the wake-up came that late.
    fn wake(&self) -> Option<Duration> {
        let now = self.elapsed_us();
        let last = self.last_tick_us.swap(now, Ordering::AcqRel);
        if last == NONE || now.saturating_sub(last) <= self.limit_us() {
            return None;
        }
        self.last_stall_end_us.store(now, Ordering::Release);
        self.stalls.fetch_add(1, Ordering::Relaxed);
        Some(Duration::from_micros(now - last))
    }
}

/// The loop that finds the node's stalls for its [`PauseWatch`].
pub struct PauseDetector {
    /// The watch it keeps.
    pub watch: Arc<PauseWatch>,
}

impl PauseDetector {
    /// Wakes every tick until `shutdown`, recording each stall.
    pub async fn run(self, shutdown: CancellationToken) {
        self.watch.wake();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(self.watch.tick) => {}
            }
            if let Some(stall) = self.watch.wake() {
                tracing::warn!(
                    stall_ms = stall.as_millis() as u64,
                    "This node stood still (a pause, a frozen VM or a starved runtime): claims held across it \
                     are checked again before they are sent, and the stall is not counted against receivers."
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_late_wake_up_is_a_stall_seen_by_marks_before_it() {
        let watch = Arc::new(PauseWatch::default());
        let before = watch.mark();
        assert!(!watch.crossed(before), "no detector: no stall");
        let stop = CancellationToken::new();
        let detector = tokio::spawn(PauseDetector { watch: watch.clone() }.run(stop.clone()));
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert!(!watch.crossed(before), "steady ticks are no stall");
        assert_eq!(watch.stalls(), 0);

        // The whole process stands still: every timer is late at once.
        let mid = watch.mark();
        std::thread::sleep(Duration::from_millis(1)); // (the runtime's clock is paused)
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(watch.crossed(mid), "before the detector ran again, the silence itself tells");
        tokio::time::sleep(Duration::from_millis(1)).await;
        tokio::task::yield_now().await;
        assert!(watch.crossed(before) && watch.crossed(mid));
        assert_eq!(watch.stalls(), 1);

        let after = watch.mark();
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert!(!watch.crossed(after), "a mark after the stall does not see it");
        stop.cancel();
        detector.await.unwrap();
    }
}
