//! Group commit of fire results.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use xtimer_core::SharedClock;
use xtimer_store::{FireRepo, FireResult};

/// Attempts to write one batch before it is given up (its leases then expire
/// and the fires are reclaimed: at-least-once still holds).
const WRITE_TRIES: u32 = 120;

/// Writes results in batches: whatever is waiting goes in one transaction.
pub struct Recorder {
    fires: Arc<dyn FireRepo>,
    clock: SharedClock,
    rx: mpsc::Receiver<FireResult>,
    batch_size: usize,
    linger: Duration,
}

impl Recorder {
    /// A recorder reading `rx`; a batch waits up to `linger` for more results.
    pub fn new(
        fires: Arc<dyn FireRepo>,
        clock: SharedClock,
        rx: mpsc::Receiver<FireResult>,
        batch_size: usize,
        linger: Duration,
    ) -> Self {
        Self { fires, clock, rx, batch_size, linger }
    }

    /// Writes until every sender is gone (the executor dropped), so nothing
    /// recorded is cut off by shutdown: this path is never cancelled.
    pub async fn run(mut self) {
        let mut batch = Vec::with_capacity(self.batch_size);
        while self.rx.recv_many(&mut batch, self.batch_size).await > 0 {
            let linger = tokio::time::Instant::now() + self.linger;
            while batch.len() < self.batch_size {
                let room = self.batch_size - batch.len();
                match tokio::time::timeout_at(linger, self.rx.recv_many(&mut batch, room)).await {
                    Ok(n) if n > 0 => {}
                    _ => break,
                }
            }
            self.write(&batch).await;
            batch.clear();
        }
    }

    async fn write(&self, batch: &[FireResult]) {
        for attempt in 1..=WRITE_TRIES {
            match self.fires.record(batch, self.clock.now_ms()).await {
                Ok(_) => return,
                Err(err) => {
                    tracing::warn!(results = batch.len(), attempt, error = %err, "Writing results failed; retrying.");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        tracing::error!(results = batch.len(), "Results dropped after retries; their fires will be reclaimed.");
    }
}
