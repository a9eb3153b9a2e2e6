//! A timer's life after its create: `enable`, `disable`, `delete`,
//! `update` (a new definition, history kept), `trigger` (one extra fire
//! now) and `backfill` (the missed times of a past window).

use xtimer_core::config::LimitsConfig;
use xtimer_core::spec::{TimerPatch, TimerSpec, CREATE_ONLY_FIELDS, DEDUPE_KEY_FIELD, MAX_FIRES_FIELD};
use xtimer_core::timer::{NewTimer, Notify, Schedule, Timer, TimerStatus};

use crate::checks::{check_callback, check_task_type, refused, schedule_field, NOTIFY_URL};
use crate::error::{Result, ServiceError};
use crate::history::{diff, Changes};
use crate::key::TimerKey;
use crate::timer_service::TimerService;
use xtimer_store::{Change, Quota};

/// What `backfill` is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backfill {
    /// Start of the window (included), Unix ms.
    pub from_ms: i64,
    /// End of the window (excluded), Unix ms; times after now are left to
    /// the schedule.
    pub to_ms: i64,
    /// Most fires to make; `limits.backfill_max_fires` when absent, and at
    /// most that.
    pub max_fires: Option<i64>,
}

impl TimerService {
    /// Enables the timer `key` names (found as [`Self::get`] finds it) and
    /// expands it into its fires before the answer; enabling an enabled
    /// timer is a no-op that succeeds. The timer as it is now.
    pub async fn enable(&self, key: &TimerKey) -> Result<Timer> {
        self.enable_as(key, "enable").await
    }

    /// [`Self::enable`], noted in the history as `action`.
    pub(crate) async fn enable_as(&self, key: &TimerKey, action: &str) -> Result<Timer> {
        let mut timer = self.get(key).await?;
        let now = self.0.clock.now_ms();
        let by = key.by.name();
        let change = Change { action, by: &by };
        match self.0.timers.set_status_within(key.id, TimerStatus::Enabled, now, &self.quota(), change).await {
            Ok(true) => {}
            Ok(false) => return Err(key.not_found()),
            Err(xtimer_store::Error::Refused { app, refusal, .. }) => {
                return Err(refused(&app, refusal, schedule_field(&timer.schedule), None))
            }
            Err(err) => return Err(err.into()),
        }
        // As stored now: a one-shot's definition is handed to its fire as it
        // is, and one older than the stored change would not be used.
        timer.status = TimerStatus::Enabled;
        timer.modify_time = now;
        timer.pause_reason = None;
        self.0.expander.expand_timer(&timer).await?;
        Ok(timer)
    }

    /// Disables the timer `key` names. Its pending fires are skipped, not
    /// fired, when their time comes.
    pub async fn disable(&self, key: &TimerKey) -> Result<()> {
        self.set_status(key, TimerStatus::Disabled, "disable").await
    }

    /// Deletes the timer `key` names; its name is free again, and from then
    /// on it is [`ServiceError::NotFound`] everywhere (a second delete too).
    pub async fn delete(&self, key: &TimerKey) -> Result<()> {
        self.set_status(key, TimerStatus::Deleted, "delete").await
    }

    /// Sets the status of the timer [`Self::get`] finds, the store noting
    /// it as `action` when it changes; not found if it was deleted in
    /// between (the store refuses to change a deleted timer).
    pub(crate) async fn set_status(&self, key: &TimerKey, status: TimerStatus, action: &str) -> Result<()> {
        self.get(key).await?;
        let by = key.by.name();
        let change = Change { action, by: &by };
        let now = self.0.clock.now_ms();
        if !self.0.timers.set_status_within(key.id, status, now, &Quota::default(), change).await? {
            return Err(key.not_found());
        }
        Ok(())
    }

    /// Replaces the definition of the timer `key` names by what `edit`
    /// makes of the stored one (given with now, Unix ms), checked as
    /// [`Self::create`] checks a timer (a callback URL or task type only
    /// when it changed). Its scheduled fires not yet claimed are made again
    /// from the new definition before the answer (none fires at an old
    /// time after it, none is lost at a new time); fires already made,
    /// manual ones and the history stay. Updates of one app's timers on
    /// this node take turns. The timer as it is now.
    pub async fn update<E: From<ServiceError>>(
        &self,
        key: &TimerKey,
        edit: impl FnOnce(&Timer, i64) -> Result<NewTimer, E>,
    ) -> Result<Timer, E> {
        self.update_planning(key, edit, false, "update").await
    }

    /// `updateTimer`: `patch` over the stored timer's spec
    /// ([`TimerSpec::apply`]), checked as a created timer is against
    /// `limits` (a one-shot's time kept as it was may be past by now: it
    /// stays valid). The timer as it is now.
    pub async fn update_with(&self, key: &TimerKey, patch: &TimerPatch, limits: &LimitsConfig) -> Result<Timer> {
        if let Some(field) = CREATE_ONLY_FIELDS.into_iter().find(|f| patch.0.contains_key(*f)) {
            return Err(ServiceError::invalid(
                field,
                format!("is taken by createTimer only: it says what a create does when its {DEDUPE_KEY_FIELD} is held"),
            ));
        }
        self.update(key, |stored, now| {
            let check_at = match stored.schedule {
                Schedule::Once { run_at_ms } if !patch.changes_schedule() => now.min(run_at_ms),
                _ => now,
            };
            Ok(TimerSpec::of(stored).apply(patch)?.validate_with(check_at, limits)?)
        })
        .await
    }

    /// [`Self::update`], its fires not yet claimed planned again even if
    /// the definition did not change (a calendar it excludes did).
    pub(crate) async fn update_replanning<E: From<ServiceError>>(
        &self,
        key: &TimerKey,
        edit: impl FnOnce(&Timer, i64) -> Result<NewTimer, E>,
    ) -> Result<Timer, E> {
        self.update_planning(key, edit, true, "update").await
    }

    /// [`Self::update`] (with `replan`, [`Self::update_replanning`]), noted
    /// in the history as `action`.
    pub(crate) async fn update_planning<E: From<ServiceError>>(
        &self,
        key: &TimerKey,
        edit: impl FnOnce(&Timer, i64) -> Result<NewTimer, E>,
        replan: bool,
        action: &str,
    ) -> Result<Timer, E> {
        let _app_lock = self.0.app_locks.lock(&key.app).await;
        self.update_locked(key, edit, replan, action).await
    }

    /// [`Self::update_planning`] with the app's lock already held.
    pub(crate) async fn update_locked<E: From<ServiceError>>(
        &self,
        key: &TimerKey,
        edit: impl FnOnce(&Timer, i64) -> Result<NewTimer, E>,
        replan: bool,
        action: &str,
    ) -> Result<Timer, E> {
        let stored = self.get(key).await?;
        let now = self.0.clock.now_ms();
        let mut new = edit(&stored, now)?;
        keep_dedupe_key(&mut new, &stored)?;
        self.settle_timing(&mut new, stored.create_time, None).await?;
        self.check_changed_targets(&new, &stored).await?;
        let changes = serde_json::Value::Object(diff(&stored, &new));
        let by = key.by.name();
        let change = Change { action, by: &by };
        match self.0.timers.update_timer(stored.id, &new, now, &self.quota(), change, &changes).await {
            Ok(true) => {}
            Ok(false) => return Err(key.not_found().into()),
            Err(xtimer_store::Error::Refused { app, refusal, .. }) => {
                return Err(refused(&app, refusal, schedule_field(&new.schedule), None).into())
            }
            Err(err) => return Err(ServiceError::from(err).into()),
        }
        if replan
            || new.schedule != stored.schedule
            || new.timing != stored.timing
            || new.status != TimerStatus::Enabled
        {
            self.0.fires.delete_pending_from(stored.id, now).await.map_err(ServiceError::from)?;
        }
        let timer = Timer { create_time: stored.create_time, ..new.stored(stored.id, now) };
        if timer.status == TimerStatus::Enabled {
            self.0.expander.expand_timer(&timer).await.map_err(ServiceError::from)?;
        }
        Ok(timer)
    }

    /// The targets of `new` that differ from `stored`'s, checked.
    async fn check_changed_targets(&self, new: &NewTimer, stored: &Timer) -> Result<()> {
        let targets = &self.0.targets;
        match (&new.notify, &stored.notify) {
            (Notify::Http(new), Notify::Http(old)) if new.url == old.url => {}
            (Notify::Http(notify), _) => check_callback(targets, NOTIFY_URL, &notify.url).await?,
            (Notify::Asyncflow(task), _) => check_task_type(targets, &new.app, &task.task_type).await?,
        }
        let old: Vec<_> = stored.alerts().map(|(field, n)| (field, n.url.as_str())).collect();
        for (field, notify) in new.alerts() {
            if !old.contains(&(field, notify.url.as_str())) {
                check_callback(targets, field, &notify.url).await?;
            }
        }
        Ok(())
    }

    /// One extra fire of the enabled timer `key` names, now, recorded like
    /// any other as manual and sent with its own idempotency key. The
    /// schedule is left as it is. The fire's run time, Unix ms.
    pub async fn trigger(&self, key: &TimerKey) -> Result<i64> {
        self.trigger_as(key, "trigger").await
    }

    /// [`Self::trigger`], noted in the history as `action`.
    pub(crate) async fn trigger_as(&self, key: &TimerKey, action: &str) -> Result<i64> {
        let timer = self.enabled(key, "trigger").await?;
        let run_ms = self.0.expander.fire_now(&timer).await?;
        let mut changes = Changes::new();
        changes.insert("runTimer".into(), serde_json::json!([null, run_ms]));
        self.note(timer.id, &timer.app, action, &key.by, changes).await;
        Ok(run_ms)
    }

    /// Every scheduled time of the enabled timer `key` names in the window
    /// that has no fire record gets one (the oldest first, at most
    /// `max_fires`), sent at `limits.backfill_fires_per_second` whatever
    /// the timer's misfire policy. The window must lie within
    /// `keep_fires_ms`: older records are deleted, so older times could not
    /// be told apart from missed ones. How many fires it made.
    pub async fn backfill(&self, key: &TimerKey, window: Backfill) -> Result<u64> {
        let now = self.0.clock.now_ms();
        let limits = &self.0.config.limits;
        let keep_fires_ms = i64::try_from(self.0.config.keep_fires_ms).unwrap_or(i64::MAX);
        let (from, to) = (window.from_ms, window.to_ms.min(now));
        let oldest = now.saturating_sub(keep_fires_ms);
        if from < oldest {
            return Err(ServiceError::invalid(
                "from",
                format!(
                    "must be within the kept fire history ({keep_fires_ms} ms, retention.keep_fires_ms): not before {}",
                    xtimer_core::clock::rfc3339(oldest)
                ),
            ));
        }
        if from >= to {
            return Err(ServiceError::invalid("to", "must be after `from` (a time after now counts as now)"));
        }
        let most = i64::from(limits.backfill_max_fires);
        let max_fires = window.max_fires.unwrap_or(most);
        if !(1..=most).contains(&max_fires) {
            return Err(ServiceError::invalid(
                MAX_FIRES_FIELD,
                format!("must be 1 to {most} (limits.backfill_max_fires), got {max_fires}"),
            ));
        }
        let timer = self.enabled(key, "backfill").await?;
        let count =
            self.0.expander.backfill(&timer, from, to, max_fires as usize, limits.backfill_fires_per_second).await?;
        let mut changes = Changes::new();
        changes.insert("window".into(), serde_json::json!([null, [from, to]]));
        changes.insert("count".into(), serde_json::json!([null, count]));
        self.note(timer.id, &timer.app, "backfill", &key.by, changes).await;
        Ok(count)
    }
}

/// An update keeps the timer's `dedupeKey` (and the run time its first
/// create asked for, which a replace's `maxDelayMs` counts from) or drops
/// it; another key is refused: a key is given at create.
fn keep_dedupe_key(new: &mut NewTimer, stored: &Timer) -> Result<()> {
    match (&mut new.dedupe, &stored.dedupe) {
        (None, _) => Ok(()),
        (Some(new), Some(old)) if new.key == old.key => {
            new.first_run_ms = old.first_run_ms;
            Ok(())
        }
        (Some(_), _) => Err(ServiceError::invalid(
            DEDUPE_KEY_FIELD,
            "is given at create and kept by updates: it cannot be changed (null drops it)",
        )),
    }
}
