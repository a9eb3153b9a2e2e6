//! The finisher: completes timers with nothing left (a one-shot whose fire
//! ended; a cron or interval timer past its `endAt` or run limit) within a
//! moment of their last fire's result, instead of at the next migrator step.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use xtimer_core::node::NodeContext;
use xtimer_core::SharedClock;
use xtimer_store::{Stores, TimerRepo};

/// Shortest time between two passes: results written meanwhile wait for
/// the next one, so a node writing results all the time runs one pass a
/// quarter second.
const MIN_GAP: Duration = Duration::from_millis(250);

/// Runs [`TimerRepo::complete_fired_once`] each time results are written
/// (at most every [`MIN_GAP`]).
pub struct Finisher {
    timers: Arc<dyn TimerRepo>,
    clock: SharedClock,
    written: Arc<Notify>,
}

impl Finisher {
    /// A finisher woken by `ctx.results_written`.
    pub fn new(stores: &Stores, ctx: &NodeContext) -> Self {
        Self { timers: stores.timers.clone(), clock: ctx.clock.clone(), written: ctx.results_written.clone() }
    }

    /// Completes what is over after each batch of results, until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.written.notified() => {}
            }
            match self.timers.complete_fired_once(self.clock.now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(timers = n, "Timers with nothing left completed."),
                Err(err) => {
                    tracing::debug!(error = %xtimer_core::error::error_chain(&err), "Completing timers failed; the migrator's step retries.")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(MIN_GAP) => {}
            }
        }
    }
}
