//! The sweep of owed notifications whose sender stopped or crashed (see
//! [`notify`](crate::notify)): every node's [`NotifySweeper`] takes those
//! whose lease lapsed and sends them through its executor's notifier.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use xtimer_core::period::Period;

use crate::error::Result;
use crate::handle::ExecutorHandle;
use crate::notify::SWEEP_PAGE;

/// Sends the notifications whose sender stopped or crashed: every
/// [`NOTIFY_SWEEP_PERIOD`](crate::notify::NOTIFY_SWEEP_PERIOD) it takes those whose lease lapsed and sends them
/// (any number of nodes may sweep at once: each notification has one taker).
pub struct NotifySweeper {
    executor: ExecutorHandle,
    period: Duration,
}

impl NotifySweeper {
    /// A sweeper sending through `executor`'s HTTP client, every `period`.
    pub fn new(executor: &ExecutorHandle, period: Duration) -> Self {
        Self { executor: executor.clone(), period }
    }

    /// Sweeps every period until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let mut period = Period::new(self.period);
        while period.tick(&shutdown).await {
            match self.run_once().await {
                Ok(0) => {}
                Ok(taken) => {
                    tracing::info!(taken, "Sending alert notifies left owed by another node or a missed mark.")
                }
                Err(err) => tracing::warn!(error = %err, "Sweeping owed alert notifies failed."),
            }
        }
        Ok(())
    }

    /// One pass: takes the notifications whose lease lapsed (a page at
    /// most) and sends each in its own task; returns how many it took.
    pub async fn run_once(&self) -> Result<usize> {
        self.executor.take_owed().await
    }
}

impl ExecutorHandle {
    /// Takes the notifications whose lease lapsed, or that no one holds (a
    /// page at most), and sends each in its own task; how many it took.
    pub(crate) async fn take_owed(&self) -> Result<usize> {
        let inner = &self.inner;
        let notifier = &inner.notifier;
        let now = inner.clock.now_ms();
        let owner = self.owner_token();
        let taken = notifier.parts.notes.take_owed(&owner, notifier.lease_until(now), now, SWEEP_PAGE).await?;
        let n = taken.len();
        for owed in taken {
            notifier.send(owed);
        }
        Ok(n)
    }
}
