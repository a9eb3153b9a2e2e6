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

use xtimer_core::error::error_chain;
use xtimer_core::timer::{NewTimer, Notify, Timer, TimerStatus};
use xtimer_store::Refusal;

use crate::checks::{check_callback, check_task_type, refused, schedule_field, NOTIFY_URL};
use crate::dedupe::Created;
use crate::error::{Result, ServiceError};
use crate::history::Changes;
use crate::key::Actor;
use crate::timer_service::TimerService;

impl TimerService {
    /// Stores `timer` (checked against the callback target policy and, for
    /// a task, its type's owner); an enabled one is expanded into its fires
    /// before the answer, so a timer due in a moment fires on time. Its
    /// stored form, or why not. A one-shot whose `dedupeKey` is held
    /// answers as [`Self::create_or_dedupe`] does, the timer kept or
    /// replaced as it is now.
    pub async fn create(&self, timer: NewTimer, by: &Actor) -> Result<Timer> {
        match self.create_or_dedupe(timer, by).await? {
            Created::New(timer) => Ok(*timer),
            Created::Kept(id) | Created::Replaced(id) => {
                self.0.timers.get_timer(id).await?.ok_or(ServiceError::Interrupted)
            }
        }
    }

    /// [`Self::create`], saying what it did: a one-shot with a `dedupeKey`
    /// held by a live timer of its app does as its `onDuplicate` says
    /// ([`Created`]; see `dedupe`).
    pub async fn create_or_dedupe(&self, mut timer: NewTimer, by: &Actor) -> Result<Created> {
        self.settle_timing(&mut timer, self.0.clock.now_ms(), None).await?;
        let targets = &self.0.targets;
        match &timer.notify {
            Notify::Http(notify) => check_callback(targets, NOTIFY_URL, &notify.url).await?,
            Notify::Asyncflow(task) => check_task_type(targets, &timer.app, &task.task_type).await?,
        }
        for (field, notify) in timer.alerts() {
            check_callback(targets, field, &notify.url).await?;
        }
        if timer.dedupe.is_some() {
            return self.create_keyed(timer, by).await;
        }
        // Noted with the rest of its batch, before the answer.
        self.0.creates.create(self, timer, by).await.map(|timer| Created::New(Box::new(timer)))
    }

    /// Stores `timers` in one transaction, all or none, and expands the
    /// enabled ones together; their ids in order. A refused item is named
    /// by its index (`timers[3].cron`). Each distinct callback URL and
    /// (app, task type) is checked once, naming the first item using it.
    pub async fn create_timers(&self, timers: &[NewTimer], by: &Actor) -> Result<Vec<i64>> {
        crate::checks::no_dedupe_keys(timers)?;
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
        let ids = self.store_all_or_none(timers, now, Some, "batch").await?;
        let created: Vec<(i64, &str)> = ids.iter().zip(timers).map(|(id, t)| (*id, t.app.as_str())).collect();
        self.note_all(&created, "create", by, Changes::new()).await;
        Ok(ids)
    }

    /// Stores `timers` in one transaction checked against the quota, all or
    /// none, and expands the enabled ones together; their ids in order. A
    /// refused timer is named by `item` of its index (its place in the
    /// caller's request). If the expansion fails, the answer is as if
    /// nothing was created, and that is made true: every timer is deleted
    /// again (`call` names the call in the log of an undo that fails).
    pub(crate) async fn store_all_or_none(
        &self,
        timers: &[NewTimer],
        now: i64,
        item: impl Fn(usize) -> Option<usize>,
        call: &str,
    ) -> Result<Vec<i64>> {
        let ids = match self.0.timers.create_timers_within(timers, now, &self.quota()).await {
            Ok(ids) => ids,
            Err(xtimer_store::Error::Refused { app, index, refusal }) => {
                let field = timers.get(index).map_or("name", |t| schedule_field(&t.schedule));
                return Err(refused(&app, refusal, field, item(index)));
            }
            Err(err) => return Err(err.into()),
        };
        let enabled: Vec<Timer> = timers
            .iter()
            .zip(&ids)
            .filter(|(t, _)| t.status == TimerStatus::Enabled)
            .map(|(t, id)| t.stored(*id, now))
            .collect();
        if enabled.is_empty() {
            return Ok(ids);
        }
        if let Err(err) = self.0.expander.expand_created(&enabled).await {
            for id in &ids {
                if let Err(undo) =
                    self.0.timers.set_timer_status(*id, TimerStatus::Deleted, self.0.clock.now_ms()).await
                {
                    tracing::error!(timer_id = id, error = %error_chain(&undo), "Deleting a timer of a failed {call} failed.");
                }
            }
            return Err(err.into());
        }
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
    pub(crate) async fn store_and_expand(&self, timers: &[NewTimer]) -> Result<Vec<Result<Timer>>> {
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
                Err(Refusal::KeyHeld { id, .. }) => Err(crate::dedupe::held(t, id)),
                Err(Refusal::KeyContended) => Err(crate::dedupe::contended(t)),
                Err(refusal) => Err(refused(&t.app, refusal, schedule_field(&t.schedule), None)),
            })
            .collect())
    }
}
