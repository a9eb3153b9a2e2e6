//! Timer status reads for retries, many at a time.
//!
//! A retry re-reads its timer's status (disabling a timer stops its
//! retries too). One read per retry would be a query per retry: a thousand
//! timers retrying against a dead host would take the database pool from
//! every healthy fire. So concurrent reads are gathered, [`MAX_IDS`] at a
//! time, into one `get_timers` query.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use xtimer_core::timer::TimerStatus;
use xtimer_store::TimerRepo;

/// Most timers read by one query.
const MAX_IDS: usize = 500;

type Ask = (i64, oneshot::Sender<Result<Option<TimerStatus>, ReadFailed>>);

/// The status could not be read (the database failed); the caller decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("reading the timer's status failed")]
pub struct ReadFailed;

/// Cloneable handle of the reader task; the task ends with the last handle.
#[derive(Clone)]
pub struct StatusReader {
    asks: mpsc::Sender<Ask>,
}

impl StatusReader {
    /// Starts the reader task over `timers` (call within a Tokio runtime).
    pub fn spawn(timers: Arc<dyn TimerRepo>) -> Self {
        let (asks, rx) = mpsc::channel(4 * MAX_IDS);
        tokio::spawn(read_loop(timers, rx));
        Self { asks }
    }

    /// The timer's status now; `None` when it is gone.
    pub async fn status(&self, timer_id: i64) -> Result<Option<TimerStatus>, ReadFailed> {
        let (tx, rx) = oneshot::channel();
        self.asks.send((timer_id, tx)).await.map_err(|_| ReadFailed)?;
        rx.await.map_err(|_| ReadFailed)?
    }
}

async fn read_loop(timers: Arc<dyn TimerRepo>, mut rx: mpsc::Receiver<Ask>) {
    let mut batch = Vec::with_capacity(MAX_IDS);
    // Whatever queued while the previous query ran goes in the next one.
    while rx.recv_many(&mut batch, MAX_IDS).await > 0 {
        let mut ids: Vec<i64> = batch.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        let found: Option<HashMap<i64, TimerStatus>> = match timers.get_timers(&ids).await {
            Ok(list) => Some(list.into_iter().map(|t| (t.id, t.status)).collect()),
            Err(err) => {
                tracing::warn!(timers = ids.len(), error = %xtimer_core::error::error_chain(&err), "Reading timer statuses for retries failed.");
                None
            }
        };
        for (id, reply) in batch.drain(..) {
            let _ = reply.send(found.as_ref().map(|f| f.get(&id).copied()).ok_or(ReadFailed));
        }
    }
}
