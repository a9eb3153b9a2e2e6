//! A migrator step and an `updateTimer` of one of its timers, interleaved
//! deterministically: the update commits after the step read its page of
//! due timers and before it writes what it planned from them. Nothing the
//! step planned from the old definition may land: no fire at an old-only
//! time, and no next fire position that hides the new definition's fires.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, MigratorConfig, RedisConfig, ShardConfig};
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, Timer, TimerStatus};
use xtimer_migrator::Migrator;
use xtimer_store::{Change, NextRun, Quota, Refusal, Stores, TimerQuery, TimerRepo};

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;

/// When the step runs: ten seconds after the timers were created.
const NOW: i64 = T0 + 10_000;

type Hook = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `real`'s timers, but `hook` runs once, right after the first read of due
/// timers returned: an update committing between a step's read and its writes.
struct UpdateAfterRead {
    real: Arc<dyn TimerRepo>,
    hook: Mutex<Option<Hook>>,
}

#[async_trait]
impl TimerRepo for UpdateAfterRead {
    async fn due_timers(&self, before_ms: i64, limit: u32) -> xtimer_store::Result<Vec<Timer>> {
        let page = self.real.due_timers(before_ms, limit).await?;
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook.await;
        }
        Ok(page)
    }
    async fn set_planned_next_runs(&self, next: &[NextRun]) -> xtimer_store::Result<()> {
        self.real.set_planned_next_runs(next).await
    }
    async fn create_each(
        &self,
        timers: &[NewTimer],
        now_ms: i64,
        quota: &Quota,
    ) -> xtimer_store::Result<Vec<Result<i64, Refusal>>> {
        self.real.create_each(timers, now_ms, quota).await
    }
    async fn create_timers_within(
        &self,
        timers: &[NewTimer],
        now_ms: i64,
        quota: &Quota,
    ) -> xtimer_store::Result<Vec<i64>> {
        self.real.create_timers_within(timers, now_ms, quota).await
    }
    async fn set_status_within(
        &self,
        id: i64,
        status: TimerStatus,
        now_ms: i64,
        quota: &Quota,
        change: Change<'_>,
    ) -> xtimer_store::Result<bool> {
        self.real.set_status_within(id, status, now_ms, quota, change).await
    }
    async fn forget_minutes(&self, before_minute: i64) -> xtimer_store::Result<u64> {
        self.real.forget_minutes(before_minute).await
    }
    async fn get_timer(&self, id: i64) -> xtimer_store::Result<Option<Timer>> {
        self.real.get_timer(id).await
    }
    async fn get_timers(&self, ids: &[i64]) -> xtimer_store::Result<Vec<Timer>> {
        self.real.get_timers(ids).await
    }
    async fn find_timers(
        &self,
        app: &str,
        query: &TimerQuery,
        offset: u64,
        limit: u64,
    ) -> xtimer_store::Result<(Vec<Timer>, u64)> {
        self.real.find_timers(app, query, offset, limit).await
    }
    async fn find_timer_ids(
        &self,
        app: &str,
        query: &TimerQuery,
        after_id: i64,
        limit: u32,
    ) -> xtimer_store::Result<Vec<(i64, TimerStatus)>> {
        self.real.find_timer_ids(app, query, after_id, limit).await
    }
    async fn update_timer(
        &self,
        id: i64,
        timer: &NewTimer,
        now_ms: i64,
        quota: &Quota,
        change: Change<'_>,
        changes: &serde_json::Value,
    ) -> xtimer_store::Result<bool> {
        self.real.update_timer(id, timer, now_ms, quota, change, changes).await
    }
    #[allow(clippy::too_many_arguments)]
    async fn pause_if_failing_as(
        &self,
        timer_id: i64,
        task_id: i64,
        n: u32,
        since_ms: i64,
        reason: &str,
        now_ms: i64,
        change: Change<'_>,
    ) -> xtimer_store::Result<bool> {
        self.real.pause_if_failing_as(timer_id, task_id, n, since_ms, reason, now_ms, change).await
    }
    async fn enabled_timers(&self, after_id: i64, limit: u32) -> xtimer_store::Result<Vec<Timer>> {
        self.real.enabled_timers(after_id, limit).await
    }
    async fn set_next_runs(&self, next: &[(i64, Option<i64>)]) -> xtimer_store::Result<()> {
        self.real.set_next_runs(next).await
    }
    async fn complete_fired_once(&self, now_ms: i64) -> xtimer_store::Result<u64> {
        self.real.complete_fired_once(now_ms).await
    }
    async fn count_timers_by_status(&self) -> xtimer_store::Result<Vec<(TimerStatus, u64)>> {
        self.real.count_timers_by_status().await
    }
}

fn timer(name: &str, cron: &str) -> NewTimer {
    NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: "race".into(),
        name: name.into(),
        status: TimerStatus::Enabled,
        schedule: Schedule::Cron { expr: cron.into(), timezone: "UTC".into() },
        notify: Notify::Http(HttpNotify::post("http://127.0.0.1:9/hook")),
        retry: RetryPolicy::default(),
        misfire: MisfirePolicy::FireAll,
        delete_after_run: false,
        on_failure: None,
        on_missed: None,
        on_late: None,
        pause_after_failures: None,
        overlap: Default::default(),
    }
}

/// A step's migrator and the stores, on a fresh SQLite file at `NOW`,
/// with one timer of schedule `old` (created at `T0`) whose schedule
/// becomes `new` right after the step's first read, as `updateTimer` does
/// it: the update, its pending fires from now on deleted, its new
/// definition expanded by the request's own expander.
struct Race {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    stores: Stores,
    step: Migrator,
    id: i64,
}

async fn race(old: &str, new: &str) -> Race {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("race.db").display());
    let clock = Arc::new(ManualClock::new(T0));
    let db = DatabaseConfig { url, max_connections: 2 };
    let stores = Stores::connect(&db, &RedisConfig::default(), &ShardConfig::default(), clock.clone()).await.unwrap();
    let created = stores.timers.create_timer(&timer("t", old), T0).await.unwrap();
    clock.set(NOW);

    let request = Migrator::new(MigratorConfig::default(), &stores, &NodeContext::new(clock.clone(), "web", "x"), None);
    let (timers, fires, new) = (stores.timers.clone(), stores.fires.clone(), timer("t", new));
    let update: Hook = Box::pin(async move {
        assert!(timers
            .update_timer(created.id, &new, NOW, &Quota::default(), Change::system("update"), &serde_json::json!({}))
            .await
            .unwrap());
        fires.delete_pending_from(created.id, NOW).await.unwrap();
        let stored = Timer { create_time: created.create_time, ..new.stored(created.id, NOW) };
        request.expander().expand_timer(&stored).await.unwrap();
    });
    let mut raced = stores.clone();
    raced.timers = Arc::new(UpdateAfterRead { real: stores.timers.clone(), hook: Mutex::new(Some(update)) });
    let step = Migrator::new(MigratorConfig::default(), &raced, &NodeContext::new(clock.clone(), "step", "x"), None);
    Race { _dir: dir, clock, stores, step, id: created.id }
}

#[tokio::test]
async fn a_step_racing_an_update_inserts_no_fire_of_the_old_definition() {
    let r = race("* * * * * *", "*/2 * * * * *").await;
    let report = r.step.catch_up().await.unwrap();
    assert_eq!(report.inserted, 0, "the step's plan was of the old definition");
    let runs = r.stores.fires.run_times_between(r.id, NOW, i64::MAX).await.unwrap();
    let old_only: Vec<i64> = runs.iter().copied().filter(|run| (run / 1_000) % 2 != 0).collect();
    assert!(old_only.is_empty(), "fires at old-only times after the update: {old_only:?}");
    assert_eq!(runs.len(), 60, "the new definition's two minutes, every other second");
}

#[tokio::test]
async fn a_step_racing_an_update_does_not_move_the_new_definitions_next_fire() {
    // Daily at 00:00:30, due in this step; then every second. The old
    // definition's next fire after the step's horizon is tomorrow.
    let r = race("30 0 0 * * *", "* * * * * *").await;
    r.step.catch_up().await.unwrap();
    r.clock.advance(60_000);
    let next = r.step.catch_up().await.unwrap();
    assert_eq!((next.timers, next.inserted), (1, 60), "the next step expands the new definition's next minute");
    let pending = r.stores.fires.pending_between(Some(r.id), T0 + 130_000, T0 + 190_000, 100).await.unwrap();
    assert_eq!(pending.len(), 60);
}
