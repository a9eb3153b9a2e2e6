//! Group commit of `createTimer`: creates that arrive while a batch is
//! being written wait and go together in the next one, one transaction
//! and one expansion for all of them, so the database commits once for
//! many callers. Each caller still gets its own answer (its id, a taken
//! name, a limit), exactly as if it had been alone.
//!
//! No background loop: the first create to find the queue idle spawns the
//! drain, which writes batches until the queue is empty and then stops.

use std::sync::Mutex;

use tokio::sync::oneshot;
use xtimer_core::timer::{NewTimer, Timer, TimerStatus};
use xtimer_store::Refusal;

use super::{quota, refusal_error};
use crate::error::error_chain;
use crate::{ApiError, AppState};

/// Most creates written in one transaction.
const MAX_GROUP: usize = 512;

/// The creates waiting for the next batch.
#[derive(Default)]
pub struct CreateQueue(Mutex<Queue>);

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    draining: bool,
}

struct Waiting {
    timer: NewTimer,
    reply: oneshot::Sender<Result<Timer, ApiError>>,
}

impl CreateQueue {
    /// Stores `timer` (expanded, if enabled) in the next batch; its stored
    /// form, or why not.
    pub async fn create(&self, state: &AppState, timer: NewTimer) -> Result<Timer, ApiError> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = self.0.lock().expect("create queue lock");
            queue.waiting.push(Waiting { timer, reply });
            !std::mem::replace(&mut queue.draining, true)
        };
        if start {
            // Spawned, so a caller that goes away cannot stop a batch midway.
            tokio::spawn(drain(state.clone()));
        }
        answer.await.unwrap_or(Err(ApiError::Interrupted))
    }

    /// The next batch, or none (and the drain stops) when nothing waits.
    fn next_batch(&self) -> Vec<Waiting> {
        let mut queue = self.0.lock().expect("create queue lock");
        let take = queue.waiting.len().min(MAX_GROUP);
        let batch: Vec<Waiting> = queue.waiting.drain(..take).collect();
        if batch.is_empty() {
            queue.draining = false;
        }
        batch
    }
}

/// Stops a drain that did not end by itself: a panic drops the waiting
/// creates (their callers get [`ApiError::Interrupted`]) and lets the next
/// create start a new drain. A drain that ran out of creates has already
/// stopped ([`CreateQueue::next_batch`]), and a create queued since then has
/// started a drain of its own, which this one must leave alone.
struct Draining {
    state: AppState,
    ended: bool,
}

impl Drop for Draining {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        if let Ok(mut queue) = self.state.creates().0.lock() {
            if queue.draining {
                queue.waiting.clear();
                queue.draining = false;
            }
        }
    }
}

async fn drain(state: AppState) {
    let mut guard = Draining { state, ended: false };
    loop {
        let batch = guard.state.creates().next_batch();
        if batch.is_empty() {
            guard.ended = true;
            return;
        }
        write_batch(&guard.state, batch).await;
    }
}

/// Writes one batch; if the batch as a whole fails (a database error),
/// each create is tried alone so that each caller gets its own error.
async fn write_batch(state: &AppState, batch: Vec<Waiting>) {
    let timers: Vec<NewTimer> = batch.iter().map(|w| w.timer.clone()).collect();
    match store_and_expand(state, &timers).await {
        Ok(outcomes) => {
            for (waiting, outcome) in batch.into_iter().zip(outcomes) {
                let _ = waiting.reply.send(outcome);
            }
        }
        Err(_) if batch.len() > 1 => {
            for waiting in batch {
                let outcome = match store_and_expand(state, std::slice::from_ref(&waiting.timer)).await {
                    Ok(mut one) => one.pop().unwrap_or(Err(ApiError::Interrupted)),
                    Err(err) => Err(err),
                };
                let _ = waiting.reply.send(outcome);
            }
        }
        Err(err) => {
            if let Some(waiting) = batch.into_iter().next() {
                let _ = waiting.reply.send(Err(err));
            }
        }
    }
}

/// Stores `timers` in one transaction and expands the enabled ones
/// together; each one's outcome. If the expansion fails, the batch's
/// timers are deleted again (as if never created: a caller seeing a 500
/// retries, and a kept timer would turn the retry into a 409).
async fn store_and_expand(state: &AppState, timers: &[NewTimer]) -> Result<Vec<Result<Timer, ApiError>>, ApiError> {
    let now = state.clock.now_ms();
    let outcomes = state.timers.create_each(timers, now, &quota(state)).await?;
    let stored: Vec<Timer> = timers
        .iter()
        .zip(&outcomes)
        .filter_map(|(t, outcome)| outcome.as_ref().ok().map(|id| t.stored(*id, now)))
        .collect();
    let enabled: Vec<Timer> = stored.iter().filter(|t| t.status == TimerStatus::Enabled).cloned().collect();
    let expanded = if enabled.is_empty() { Ok(0) } else { state.expander.expand_created(&enabled).await };
    if let Err(err) = expanded {
        for timer in &stored {
            if let Err(undo) = state.timers.set_timer_status(timer.id, TimerStatus::Deleted, state.clock.now_ms()).await
            {
                tracing::error!(
                    timer_id = timer.id,
                    error = %error_chain(&undo),
                    "Deleting a timer whose expansion failed failed too; the migrator's next step expands it."
                );
            }
        }
        return Err(err.into());
    }
    Ok(timers
        .iter()
        .zip(outcomes)
        .map(|(t, outcome)| match outcome {
            Ok(id) => Ok(t.stored(id, now)),
            Err(Refusal::NameTaken) => Err(ApiError::NameTaken { app: t.app.clone(), name: t.name.clone() }),
            Err(refusal) => Err(refusal_error(&t.app, refusal, super::schedule_field(&t.schedule), None)),
        })
        .collect())
}
