//! The finisher: completes timers with nothing left (a one-shot whose fire
//! ended; a cron or interval timer past its `endAt` or run limit) within a
//! moment of their last fire's result, instead of at the next migrator step.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_core::node::{EndedFires, NodeContext};
use xtimer_core::SharedClock;
use xtimer_store::{Stores, TimerRepo};

/// Shortest time between two passes: timers whose fires end meanwhile wait
/// for the next one, so a node writing results all the time runs one
/// statement (a key probe per timer) a second. (Every 250 ms it cost ~7%
/// of the node's CPU at 2,000 one-shot fires a second on SQLite: four
/// smaller statements rewriting the same pages of `t_timer`.)
const MIN_GAP: Duration = Duration::from_millis(1_000);

/// Runs [`TimerRepo::complete_ended`] for the timers whose fires' ends
/// were just written (gathered for at most [`MIN_GAP`]).
pub struct Finisher {
    timers: Arc<dyn TimerRepo>,
    clock: SharedClock,
    ended: Arc<EndedFires>,
}

impl Finisher {
    /// A finisher of the timers the recorder notes in `ctx.ended`.
    pub fn new(stores: &Stores, ctx: &NodeContext) -> Self {
        Self { timers: stores.timers.clone(), clock: ctx.clock.clone(), ended: ctx.ended.clone() }
    }

    /// Completes what is over after each batch of results, until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let timers = tokio::select! {
                _ = shutdown.cancelled() => return,
                timers = self.ended.next() => timers,
            };
            match self.timers.complete_ended(&timers, self.clock.now_ms()).await {
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
