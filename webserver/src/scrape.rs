//! What `/metrics` reads of this node when scraped: the count of timers
//! by status (reused for a while after it is made, [`TimerCounts`]) and
//! the shards it holds ([`ShardsHeld`]).

use std::future::Future;
use std::sync::Arc;

use xtimer_core::timer::TimerStatus;
use xtimer_core::SharedClock;

/// How many shards this node holds now (the trigger knows).
pub type ShardsHeld = Arc<dyn Fn() -> usize + Send + Sync>;

/// A count of the timers is reused for this many times as long as it took.
pub const COUNT_REUSE_FACTOR: u32 = 50;

/// The last count of timers by status, reused for [`COUNT_REUSE_FACTOR`]
/// times as long as it took to make: a count that takes 1 ms is made again
/// after 50 ms, one that takes two seconds (ten million timers) after 100 s.
/// Only the first scrape waits for a count: later ones get the last count
/// while a fresh one is made in the background. A fresh count that fails
/// drops the last one, so the next scrape counts (and reports) itself.
/// Times are read on the injected clock.
pub struct TimerCounts {
    last: Arc<tokio::sync::Mutex<Option<Counted>>>,
    clock: SharedClock,
}

struct Counted {
    /// When it was made (or last marked fresh), Unix ms.
    at_ms: i64,
    /// How long making it took, ms.
    took_ms: i64,
    counts: Vec<(TimerStatus, u64)>,
}

impl Counted {
    async fn make(clock: SharedClock, count: impl Future<Output = TimerCountsResult>) -> xtimer_service::Result<Self> {
        let started = clock.now_ms();
        let counts = count.await?;
        let at_ms = clock.now_ms();
        Ok(Self { at_ms, took_ms: (at_ms - started).max(0), counts })
    }
}

type TimerCountsResult = xtimer_service::Result<Vec<(TimerStatus, u64)>>;

impl TimerCounts {
    /// No count yet; times read on `clock`.
    pub fn new(clock: SharedClock) -> Self {
        Self { last: Arc::default(), clock }
    }

    /// The counts: the last ones (starting a fresh count in the background
    /// once they are stale), else `count()`'s. Concurrent first scrapes
    /// wait for one count rather than each making one.
    pub async fn get<F, Fut>(&self, count: F) -> TimerCountsResult
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = TimerCountsResult> + Send + 'static,
    {
        let mut last = self.last.lock().await;
        let Some(c) = last.as_mut() else {
            let counted = Counted::make(self.clock.clone(), count()).await?;
            let counts = counted.counts.clone();
            *last = Some(counted);
            return Ok(counts);
        };
        let now_ms = self.clock.now_ms();
        if now_ms - c.at_ms >= c.took_ms * i64::from(COUNT_REUSE_FACTOR) {
            // Fresh again for another reuse time, so no other count
            // starts while the background one runs.
            c.at_ms = now_ms;
            let (shared, clock, fresh) = (self.last.clone(), self.clock.clone(), count());
            tokio::spawn(async move {
                let made = Counted::make(clock, fresh).await;
                *shared.lock().await = made.ok();
            });
        }
        Ok(c.counts.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use xtimer_core::clock::TokioClock;

    use super::*;

    /// A count that takes `took` and answers how many counts were made.
    fn counter(made: &Arc<AtomicU64>, took: Duration) -> impl Future<Output = TimerCountsResult> + Send + 'static {
        let made = made.clone();
        async move {
            tokio::time::sleep(took).await;
            let n = made.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(vec![(TimerStatus::Enabled, n)])
        }
    }

    fn enabled(n: u64) -> Vec<(TimerStatus, u64)> {
        vec![(TimerStatus::Enabled, n)]
    }

    #[tokio::test(start_paused = true)]
    async fn a_count_is_reused_for_fifty_times_as_long_as_it_took() {
        let (counts, made) = (TimerCounts::new(Arc::new(TokioClock::new(0))), Arc::new(AtomicU64::new(0)));
        let took = Duration::from_millis(20);
        assert_eq!(counts.get(|| counter(&made, took)).await.unwrap(), enabled(1));
        // Within 50 × 20 ms = 1 s of the count: reused.
        tokio::time::sleep(Duration::from_millis(990)).await;
        assert_eq!(counts.get(|| counter(&made, took)).await.unwrap(), enabled(1));
        assert_eq!(made.load(Ordering::SeqCst), 1);
        // After it: this scrape still gets the last count, at once, and a
        // fresh one is made for the next.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let asked = tokio::time::Instant::now();
        assert_eq!(counts.get(|| counter(&made, took)).await.unwrap(), enabled(1));
        assert_eq!(asked.elapsed(), Duration::ZERO, "a stale count is served without waiting");
        assert_eq!(counts.get(|| counter(&made, took)).await.unwrap(), enabled(1), "one fresh count at a time");
        tokio::time::sleep(took * 2).await;
        assert_eq!(counts.get(|| counter(&made, took)).await.unwrap(), enabled(2));
        assert_eq!(made.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_count_is_not_kept() {
        let (counts, made) = (TimerCounts::new(Arc::new(TokioClock::new(0))), Arc::new(AtomicU64::new(0)));
        let failed = counts.get(|| async { Err(xtimer_store::Error::UnsupportedUrl("down".into()).into()) }).await;
        assert!(failed.is_err());
        assert_eq!(counts.get(|| counter(&made, Duration::from_millis(1))).await.unwrap(), enabled(1));

        // A fresh count that fails drops the last one: the next scrape counts itself.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stale = counts.get(|| async { Err(xtimer_store::Error::UnsupportedUrl("down".into()).into()) }).await;
        assert_eq!(stale.unwrap(), enabled(1));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let asked = tokio::time::Instant::now();
        assert_eq!(counts.get(|| counter(&made, Duration::from_millis(5))).await.unwrap(), enabled(2));
        assert_eq!(asked.elapsed(), Duration::from_millis(5), "counted while the scrape waited");
    }
}
