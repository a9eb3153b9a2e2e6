//! Creating timers: `create` (one timer, group-committed) and
//! `create_timers` (a batch, all or none).
//!
//! Group commit of `create`: creates that arrive while a batch is being
//! written wait and go together in the next one, one transaction and one
//! expansion for all of them, so the database commits once for many
//! callers. Each caller still gets its own answer (its timer, a taken name,
//! a limit), exactly as if it had been alone. No background loop: the
//! first create to find the queue idle spawns the drain, which writes
//! batches until the queue is empty and then stops.
//!
//! Either way, when planning the new timers' fires fails, the timers are
//! deleted again: the caller is told it failed, and a kept timer would turn
//! its retry into a taken name.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::oneshot;
use xtimer_core::error::error_chain;
use xtimer_core::timer::{NewTimer, Notify, Timer, TimerStatus};
use xtimer_store::Refusal;

use crate::checks::{check_callback, check_task_type, refused, schedule_field, NOTIFY_URL};
use crate::error::{Result, ServiceError};
use crate::history::Changes;
use crate::{Actor, TimerService};

/// Most creates written in one transaction.
const MAX_GROUP: usize = 512;

impl TimerService {
    /// Stores `timer` (checked against the callback target policy and, for
    /// a task, its type's owner); an enabled one is expanded into its fires
    /// before the answer, so a timer due in a moment fires on time. Its
    /// stored form, or why not.
    pub async fn create(&self, mut timer: NewTimer, by: &Actor) -> Result<Timer> {
        self.settle_timing(&mut timer, self.0.clock.now_ms(), None).await?;
        let targets = &self.0.targets;
        match &timer.notify {
            Notify::Http(notify) => check_callback(targets, NOTIFY_URL, &notify.url).await?,
            Notify::Asyncflow(task) => check_task_type(targets, &timer.app, &task.task_type).await?,
        }
        for (field, notify) in timer.alerts() {
            check_callback(targets, field, &notify.url).await?;
        }
        // Noted with the rest of its batch, before the answer.
        self.0.creates.create(self, timer, by).await
    }

    /// Stores `timers` in one transaction, all or none, and expands the
    /// enabled ones together; their ids in order. A refused item is named
    /// by its index (`timers[3].cron`). Each distinct callback URL and
    /// (app, task type) is checked once, naming the first item using it.
    pub async fn create_timers(&self, timers: &[NewTimer], by: &Actor) -> Result<Vec<i64>> {
        let now = self.0.clock.now_ms();
        let settled: Cow<[NewTimer]> = if timers.iter().all(|t| t.timing.is_plain()) {
            Cow::Borrowed(timers)
        } else {
            let mut owned = timers.to_vec();
            for (i, timer) in owned.iter_mut().enumerate() {
                self.settle_timing(timer, now, Some(i)).await?;
            }
            Cow::Owned(owned)
        };
        let timers = &settled[..];
        self.check_batch_targets(timers).await?;
        let ids = match self.0.timers.create_timers_within(timers, now, &self.quota()).await {
            Ok(ids) => ids,
            Err(xtimer_store::Error::Refused { app, index, refusal }) => {
                return Err(refused(&app, refusal, schedule_field(&timers[index].schedule), Some(index)))
            }
            Err(err) => return Err(err.into()),
        };
        let enabled: Vec<_> = timers
            .iter()
            .zip(&ids)
            .filter(|(t, _)| t.status == TimerStatus::Enabled)
            .map(|(t, id)| t.stored(*id, now))
            .collect();
        if let Err(err) = self.0.expander.expand_created(&enabled).await {
            // As `create`: answer as if nothing was created, and make that true.
            for id in &ids {
                if let Err(undo) =
                    self.0.timers.set_timer_status(*id, TimerStatus::Deleted, self.0.clock.now_ms()).await
                {
                    tracing::error!(timer_id = id, error = %error_chain(&undo), "Deleting a timer of a failed batch failed.");
                }
            }
            return Err(err.into());
        }
        let created: Vec<(i64, &str)> = ids.iter().zip(timers).map(|(id, t)| (*id, t.app.as_str())).collect();
        self.note_all(&created, "create", by, Changes::new()).await;
        Ok(ids)
    }

    /// The callback target policy for each distinct URL, and the task type
    /// of each distinct (app, type), naming the first item that uses it.
    async fn check_batch_targets(&self, timers: &[NewTimer]) -> Result<()> {
        let mut urls: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        let mut types: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (i, t) in timers.iter().enumerate() {
            for (field, n) in t.alerts() {
                urls.entry((field, n.url.as_str())).or_insert(i);
            }
            match &t.notify {
                Notify::Http(n) => {
                    urls.entry((NOTIFY_URL, n.url.as_str())).or_insert(i);
                }
                Notify::Asyncflow(task) => {
                    types.entry((t.app.as_str(), task.task_type.as_str())).or_insert(i);
                }
            }
        }
        let at = |i: usize| {
            move |err: ServiceError| match err {
                ServiceError::Invalid { field, problem } => {
                    ServiceError::Invalid { field: format!("timers[{i}].{field}"), problem }
                }
                other => other,
            }
        };
        let targets = &self.0.targets;
        for ((field, url), i) in urls {
            check_callback(targets, field, url).await.map_err(at(i))?;
        }
        for ((app, task_type), i) in types {
            check_task_type(targets, app, task_type).await.map_err(at(i))?;
        }
        Ok(())
    }

    /// Stores `timers` in one transaction and expands the enabled ones
    /// together; each one's outcome. If the expansion fails, the batch's
    /// timers are deleted again (as if never created: a caller seeing a 500
    /// retries, and a kept timer would turn the retry into a 409).
    async fn store_and_expand(&self, timers: &[NewTimer]) -> Result<Vec<Result<Timer>>> {
        let now = self.0.clock.now_ms();
        let outcomes = self.0.timers.create_each(timers, now, &self.quota()).await?;
        let stored: Vec<Timer> = timers
            .iter()
            .zip(&outcomes)
            .filter_map(|(t, outcome)| outcome.as_ref().ok().map(|id| t.stored(*id, now)))
            .collect();
        let enabled: Vec<Timer> = stored.iter().filter(|t| t.status == TimerStatus::Enabled).cloned().collect();
        let expanded = if enabled.is_empty() { Ok(0) } else { self.0.expander.expand_created(&enabled).await };
        if let Err(err) = expanded {
            for timer in &stored {
                let undone =
                    self.0.timers.set_timer_status(timer.id, TimerStatus::Deleted, self.0.clock.now_ms()).await;
                if let Err(undo) = undone {
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
                Err(Refusal::NameTaken) => Err(ServiceError::NameTaken { app: t.app.clone(), name: t.name.clone() }),
                Err(refusal) => Err(refused(&t.app, refusal, schedule_field(&t.schedule), None)),
            })
            .collect())
    }
}

/// The creates waiting for the next batch.
#[derive(Default)]
pub(crate) struct CreateQueue(Mutex<Queue>);

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    draining: bool,
}

struct Waiting {
    timer: NewTimer,
    by: Actor,
    reply: oneshot::Sender<Result<Timer>>,
}

impl CreateQueue {
    /// Stores `timer` (expanded, if enabled) in the next batch; its stored
    /// form, or why not.
    async fn create(&self, service: &TimerService, timer: NewTimer, by: &Actor) -> Result<Timer> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = self.0.lock().expect("create queue lock");
            queue.waiting.push(Waiting { timer, by: by.clone(), reply });
            !std::mem::replace(&mut queue.draining, true)
        };
        if start {
            // Spawned, so a caller that goes away cannot stop a batch midway.
            tokio::spawn(drain(service.clone()));
        }
        answer.await.unwrap_or(Err(ServiceError::Interrupted))
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
/// creates (their callers get [`ServiceError::Interrupted`]) and lets the
/// next create start a new drain. A drain that ran out of creates has
/// already stopped ([`CreateQueue::next_batch`]), and a create queued since
/// then has started a drain of its own, which this one must leave alone.
struct Draining {
    service: TimerService,
    ended: bool,
}

impl Drop for Draining {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        if let Ok(mut queue) = self.service.0.creates.0.lock() {
            if queue.draining {
                queue.waiting.clear();
                queue.draining = false;
            }
        }
    }
}

async fn drain(service: TimerService) {
    let mut guard = Draining { service, ended: false };
    loop {
        let batch = guard.service.0.creates.next_batch();
        if batch.is_empty() {
            guard.ended = true;
            return;
        }
        write_batch(&guard.service, batch).await;
    }
}

/// Writes one batch and notes its creates in the timers' history, in one
/// write each; if the batch as a whole fails (a database error), each
/// create is tried alone so that each caller gets its own error.
async fn write_batch(service: &TimerService, batch: Vec<Waiting>) {
    let timers: Vec<NewTimer> = batch.iter().map(|w| w.timer.clone()).collect();
    match service.store_and_expand(&timers).await {
        Ok(outcomes) => {
            let created: Vec<(i64, &str, &Actor)> = outcomes
                .iter()
                .zip(&batch)
                .filter_map(|(outcome, w)| Some((outcome.as_ref().ok()?.id, w.timer.app.as_str(), &w.by)))
                .collect();
            service.note_each(&created, "create", "{}").await;
            for (waiting, outcome) in batch.into_iter().zip(outcomes) {
                let _ = waiting.reply.send(outcome);
            }
        }
        Err(_) if batch.len() > 1 => {
            for waiting in batch {
                let outcome = match service.store_and_expand(std::slice::from_ref(&waiting.timer)).await {
                    Ok(mut one) => one.pop().unwrap_or(Err(ServiceError::Interrupted)),
                    Err(err) => Err(err),
                };
                if let Ok(timer) = &outcome {
                    service.note_each(&[(timer.id, timer.app.as_str(), &waiting.by)], "create", "{}").await;
                }
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
