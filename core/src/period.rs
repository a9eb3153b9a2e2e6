//! The beat of a background loop: [`Period`].

use std::time::Duration;

use tokio::time::{interval, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// Ticks at once, then every period; a pass that overruns delays the next
/// tick rather than bunching the missed ones. Every background loop runs
/// `while period.tick(&shutdown).await { ... }`.
#[derive(Debug)]
pub struct Period(Interval);

impl Period {
    /// A beat of `every` (at least a millisecond).
    pub fn new(every: Duration) -> Self {
        let mut tick = interval(every.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self(tick)
    }

    /// A beat of `ms` milliseconds.
    pub fn ms(ms: u64) -> Self {
        Self::new(Duration::from_millis(ms))
    }

    /// Waits for the next tick: true when it came, false once `shutdown`
    /// is cancelled (checked first, so a cancelled loop never runs again).
    pub async fn tick(&mut self, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => false,
            _ = self.0.tick() => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ticks_at_once_then_every_period_until_shutdown() {
        let shutdown = CancellationToken::new();
        let mut period = Period::ms(100);
        let start = tokio::time::Instant::now();
        assert!(period.tick(&shutdown).await);
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(period.tick(&shutdown).await);
        assert_eq!(start.elapsed(), Duration::from_millis(100));
        // An overrun delays the next tick instead of bunching ticks.
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert!(period.tick(&shutdown).await);
        assert!(period.tick(&shutdown).await);
        assert_eq!(start.elapsed(), Duration::from_millis(550));
        shutdown.cancel();
        assert!(!period.tick(&shutdown).await);
    }
}
