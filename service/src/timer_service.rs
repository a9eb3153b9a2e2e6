//! [`TimerService`]: what every use case shares (its repositories, planner,
//! clock and settings), how it is built, the reads of one timer or page,
//! and the queue that group-commits single creates (see `create`).

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use xtimer_core::config::{Config, LimitsConfig, RetentionConfig};
use xtimer_core::fire::{Fire, FireStatus};
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{NewTimer, Timer, TimerStatus};
use xtimer_core::SharedClock;
use xtimer_migrator::Expander;
use xtimer_store::{AppRepo, CalendarRepo, FireRepo, FireWindow, FlowRepo, FlowTokens, Quota, TimerRepo};

use crate::checks::{self, Targets};
use crate::error::{Result, ServiceError};
use crate::key::{Actor, Page, TimerKey};

/// Most creates written in one transaction.
const MAX_GROUP: usize = 512;

/// The timer use cases. Cheap to clone: one `Arc`.
#[derive(Clone)]
pub struct TimerService(pub(crate) Arc<Inner>);

/// What every use case shares.
pub(crate) struct Inner {
    pub(crate) timers: Arc<dyn TimerRepo>,
    pub(crate) fires: Arc<dyn FireRepo>,
    pub(crate) calendars: Arc<dyn CalendarRepo>,
    pub(crate) apps: Arc<dyn AppRepo>,
    pub(crate) flows: Arc<dyn FlowRepo>,
    pub(crate) flow_tokens: Arc<dyn FlowTokens>,
    pub(crate) expander: Expander,
    pub(crate) targets: Arc<dyn Targets>,
    pub(crate) clock: SharedClock,
    pub(crate) config: ServiceConfig,
    pub(crate) creates: CreateQueue,
    pub(crate) app_locks: checks::AppLocks,
    pub(crate) replaces: crate::replaces::Replaces,
}

/// What the service works with.
pub struct Parts {
    /// Where timers are stored.
    pub timers: Arc<dyn TimerRepo>,
    /// Where fires are stored (read, and cleared on an update).
    pub fires: Arc<dyn FireRepo>,
    /// Where the apps' calendars are stored.
    pub calendars: Arc<dyn CalendarRepo>,
    /// What is kept per app (its pause, its counts).
    pub apps: Arc<dyn AppRepo>,
    /// Where the flows' limits are stored.
    pub flows: Arc<dyn FlowRepo>,
    /// The flows' shared state (their waiting fires and open callbacks).
    pub flow_tokens: Arc<dyn FlowTokens>,
    /// Plans an enabled timer's fires the moment it is created or enabled.
    pub expander: Expander,
    /// Where callbacks may point and which task types an app may use.
    pub targets: Arc<dyn Targets>,
}

/// The settings the use cases follow.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The limits (timers per app, fires per minute, backfill).
    pub limits: LimitsConfig,
    /// How long fire records are kept (`retention.keep_fires_ms`): a
    /// backfill may not reach further back.
    pub keep_fires_ms: u64,
    /// How far ahead the reconciler claims paced fires
    /// (`reconciler.period_ms`): a replay's first fire is due that far
    /// ahead, so every one of them is claimed before its time and the pace
    /// holds from the first.
    pub paced_lead_ms: u64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            limits: LimitsConfig::default(),
            keep_fires_ms: RetentionConfig::default().keep_fires_ms,
            paced_lead_ms: xtimer_core::config::ReconcilerConfig::default().period_ms,
        }
    }
}

impl ServiceConfig {
    /// The settings `config` names.
    pub fn from_config(config: &Config) -> Self {
        Self {
            limits: config.limits.clone(),
            keep_fires_ms: config.retention.keep_fires_ms,
            paced_lead_ms: config.reconciler.period_ms,
        }
    }
}

impl TimerService {
    /// The service over `parts`, on `ctx`'s clock, following `config`.
    pub fn new(ctx: &NodeContext, parts: Parts, config: ServiceConfig) -> Self {
        Self(Arc::new(Inner {
            timers: parts.timers,
            fires: parts.fires,
            calendars: parts.calendars,
            apps: parts.apps,
            flows: parts.flows,
            flow_tokens: parts.flow_tokens,
            expander: parts.expander,
            targets: parts.targets,
            clock: ctx.clock.clone(),
            config,
            creates: CreateQueue::default(),
            app_locks: checks::AppLocks::default(),
            replaces: crate::replaces::Replaces::default(),
        }))
    }

    /// The clock the service runs on.
    pub fn clock(&self) -> &SharedClock {
        &self.0.clock
    }

    /// The settings it follows.
    pub fn config(&self) -> &ServiceConfig {
        &self.0.config
    }

    /// The timer `key` names, if it is not deleted and belongs to
    /// `key.app`. A deleted timer (of any app) and an unknown id are
    /// [`ServiceError::NotFound`]; so is another app's timer unless the
    /// caller proved its app ([`ServiceError::Forbidden`] then).
    pub async fn get(&self, key: &TimerKey) -> Result<Timer> {
        checks::check_app(&key.app)?;
        match self.0.timers.get_timer(key.id).await? {
            Some(timer) if timer.status == TimerStatus::Deleted => Err(key.not_found()),
            Some(timer) if timer.app == key.app => Ok(timer),
            Some(timer) if key.proven => Err(ServiceError::Forbidden { id: timer.id, app: key.app.clone() }),
            _ => Err(key.not_found()),
        }
    }

    /// A page of `app`'s timers that are not deleted, by id, and how many
    /// there are.
    pub async fn list(&self, app: &str, page: Page) -> Result<(Vec<Timer>, u64)> {
        Ok(self.0.timers.list_app_timers(app, page.offset, page.limit).await?)
    }

    /// A page of the fires of the timer `key` names (as [`Self::get`] finds
    /// it), optionally of one `status`, and how many there are: those due
    /// by now, newest first, or with `upcoming` the planned ones, soonest
    /// first.
    pub async fn fires(
        &self,
        key: &TimerKey,
        status: Option<FireStatus>,
        upcoming: bool,
        page: Page,
    ) -> Result<(Vec<Fire>, u64)> {
        self.get(key).await?;
        let now = self.0.clock.now_ms();
        let window = if upcoming { FireWindow::UpcomingAfter(now) } else { FireWindow::DueBy(now) };
        Ok(self.0.fires.list_fires_in(key.id, status, window, page.offset, page.limit).await?)
    }

    /// The fires that ended since `since_ms`, at most `limit`, newest first
    /// (the console's overview), each with whether it was paced
    /// (backfilled or replayed: late by design).
    pub async fn ended_fires(&self, since_ms: i64, limit: u32) -> Result<Vec<(Fire, bool)>> {
        Ok(self.0.fires.ended_since_paced(since_ms, limit).await?)
    }

    /// The timers of `ids` that exist, deleted ones included (to name the
    /// timers of fires).
    pub async fn timers_named(&self, ids: &[i64]) -> Result<Vec<Timer>> {
        Ok(self.0.timers.get_timers(ids).await?)
    }

    /// How many timers there are of each status.
    pub async fn count_timers(&self) -> Result<Vec<(TimerStatus, u64)>> {
        Ok(self.0.timers.count_timers_by_status().await?)
    }

    /// A timer [`Self::get`] found that must be enabled to `verb` it
    /// (trigger, backfill): an invalid `id` otherwise.
    pub(crate) async fn enabled(&self, key: &TimerKey, verb: &str) -> Result<Timer> {
        let timer = self.get(key).await?;
        if timer.status != TimerStatus::Enabled {
            return Err(ServiceError::invalid(
                "id",
                format!("timer {} is not enabled (status {}): enable it to {verb} it", timer.id, timer.status.code()),
            ));
        }
        Ok(timer)
    }

    /// The create-time limits as the store checks them.
    pub(crate) fn quota(&self) -> Quota {
        let limits = &self.0.config.limits;
        Quota { timers_per_app: limits.timers_per_app, fires_per_minute_per_app: limits.fires_per_minute_per_app }
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
    pub(crate) async fn create(&self, service: &TimerService, timer: NewTimer, by: &Actor) -> Result<Timer> {
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
