//! A migrator step on a real SQLite file and a manual clock: it reads only
//! the timers due before its horizon, and completes fired one-shots.

use std::sync::Arc;

use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, MigratorConfig, RedisConfig, ShardConfig};
use xtimer_core::fire::{ClaimedFire, FireKey, FireStatus};
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};
use xtimer_migrator::Migrator;
use xtimer_store::{FireResult, Stores};

/// 2026-01-01T00:00:00Z: the daily timers below fire hours later.
const T0: i64 = 1_767_225_600_000;

fn timer(name: &str, schedule: Schedule) -> NewTimer {
    NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: "step".into(),
        name: name.into(),
        status: TimerStatus::Enabled,
        schedule,
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

fn cron(expr: &str) -> Schedule {
    Schedule::Cron { expr: expr.into(), timezone: "UTC".into() }
}

/// Stores on a fresh SQLite file (kept while the folder lives) and their
/// clock, at `T0`.
async fn sqlite_stores() -> (tempfile::TempDir, Arc<ManualClock>, Stores) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("step.db").display());
    let clock = Arc::new(ManualClock::new(T0));
    let db = DatabaseConfig { url, max_connections: 2 };
    let stores = Stores::connect(&db, &RedisConfig::default(), &ShardConfig::default(), clock.clone()).await.unwrap();
    (dir, clock, stores)
}

#[tokio::test]
async fn a_step_reads_only_the_timers_due_before_its_horizon() {
    let (_dir, clock, stores) = sqlite_stores().await;
    let ctx = NodeContext::new(clock.clone(), "node-a", "xtimer-test");
    let migrator = Migrator::new(MigratorConfig::default(), &stores, &ctx, None);

    let mut batch: Vec<NewTimer> = (0..50).map(|i| timer(&format!("daily{i}"), cron("0 0 3 * * *"))).collect();
    batch.push(timer("second-a", cron("* * * * * *")));
    batch.push(timer("second-b", cron("* * * * * *")));
    batch.push(timer("once", Schedule::Once { run_at_ms: T0 + 30_000 }));
    let ids = stores.timers.create_timers(&batch, T0).await.unwrap();
    let once = *ids.last().unwrap();

    let first = migrator.catch_up().await.unwrap();
    assert_eq!(first.timers, 3, "new timers due before the horizon are read; the daily ones are not");
    assert_eq!(first.inserted, 2 * 120 + 1, "two minutes of two per-second timers, and the one-shot");

    clock.advance(60_000);
    let second = migrator.catch_up().await.unwrap();
    assert_eq!(second.timers, 2, "the daily timers and the expanded one-shot are not read again");
    assert_eq!(second.inserted, 2 * 60, "each fire is expanded once");
    assert_eq!(second.completed, 0, "the one-shot's fire has not ended");

    // The one-shot fires and succeeds: the next step completes it.
    let key = FireKey { timer_id: once, run_ms: T0 + 30_000 };
    let claimed = stores.fires.claim(&[key], "node-a:1", 60_000, T0 + 60_000).await.unwrap().claimed;
    assert_eq!(claimed.len(), 1);
    let result = FireResult {
        task_id: claimed[0].task_id,
        run_ms: claimed[0].key.run_ms,
        owner: claimed[0].owner.clone(),
        status: FireStatus::Succeeded,
        attempt: 1,
        output: "HTTP 200".into(),
        cost_time: 1,
        lease_until: None,
    };
    assert_eq!(stores.fires.record(&[result], T0 + 60_000).await.unwrap(), 1);
    clock.advance(60_000);
    let third = migrator.catch_up().await.unwrap();
    assert_eq!((third.timers, third.completed), (2, 1));
    assert_eq!(stores.timers.get_timer(once).await.unwrap().unwrap().status, TimerStatus::Completed);
}

#[tokio::test]
async fn an_expanded_one_shot_leaves_its_definition_for_its_fire_until_it_ages_out() {
    let (_dir, clock, stores) = sqlite_stores().await;
    let ctx = NodeContext::new(clock.clone(), "node-a", "xtimer-test");
    let migrator = Migrator::new(MigratorConfig::default(), &stores, &ctx, None);
    let batch = vec![
        timer("soon", Schedule::Once { run_at_ms: T0 + 30_000 }),
        timer("in-an-hour", Schedule::Once { run_at_ms: T0 + 3_600_000 }),
        timer("every-second", cron("* * * * * *")),
    ];
    let ids = stores.timers.create_timers(&batch, T0).await.unwrap();

    migrator.catch_up().await.unwrap();
    assert_eq!(ctx.handover.len(), 1, "the one-shot due before the horizon; a cron timer's is kept by the executor");
    let stored = stores.timers.get_timer(ids[0]).await.unwrap().unwrap();
    assert_eq!(ctx.handover.take(ids[0]), Some(stored), "the definition as stored");

    // Enabling (or creating) expands through the expander: the same.
    let later = stores.timers.get_timer(ids[1]).await.unwrap().unwrap();
    clock.advance(3_600_000 - 60_000);
    migrator.expander().expand_timer(&later).await.unwrap();
    assert_eq!(ctx.handover.len(), 1);

    // Not taken (its fire went to another node): dropped once aged out.
    clock.advance(xtimer_core::handover::HANDOVER_TTL.as_millis() as i64 - 1);
    assert_eq!(ctx.handover.purge_expired(), 0);
    clock.advance(1);
    assert_eq!(ctx.handover.purge_expired(), 1);
    assert!(ctx.handover.take(ids[1]).is_none());
}

#[tokio::test]
async fn fires_due_in_the_same_second_are_stored_side_by_side() {
    let (_dir, clock, stores) = sqlite_stores().await;
    let ctx = NodeContext::new(clock.clone(), "node-a", "xtimer-test");
    let migrator = Migrator::new(MigratorConfig::default(), &stores, &ctx, None);
    let batch: Vec<NewTimer> = (0..5).map(|i| timer(&format!("s{i}"), cron("* * * * * *"))).collect();
    stores.timers.create_timers(&batch, T0).await.unwrap();
    migrator.catch_up().await.unwrap();

    // The claim of one second's fires takes rows stored together (one page
    // of the table, not one page per timer).
    let keys = stores.fires.pending_between(None, T0 + 10_000, T0 + 11_000, 100).await.unwrap();
    assert_eq!(keys.len(), 5);
    let mut ids: Vec<i64> =
        stores.fires.claim(&keys, "node-a:1", 60_000, T0).await.unwrap().claimed.iter().map(|c| c.task_id).collect();
    ids.sort_unstable();
    assert_eq!(ids[4] - ids[0], 4, "task ids of one second are consecutive: {ids:?}");
}

#[tokio::test]
async fn retention_deletes_ended_fires_past_their_keep_time_one_node_at_a_time() {
    use xtimer_core::config::RetentionConfig;
    use xtimer_migrator::Retention;
    use xtimer_store::NewFire;

    let (_dir, clock, stores) = sqlite_stores().await;
    let id = stores.timers.create_timer(&timer("kept", cron("* * * * * *")), T0).await.unwrap().id;
    // Five fires two minutes ago, all ended, and one a second ago.
    let runs: Vec<i64> = (0..5).map(|i| T0 - 120_000 + i * 1_000).chain([T0 - 1_000]).collect();
    let new: Vec<NewFire> =
        runs.iter().map(|&run_ms| NewFire { key: FireKey { timer_id: id, run_ms }, app: "step".into() }).collect();
    stores.fires.insert_fires(&new, T0 - 130_000).await.unwrap();
    let keys: Vec<FireKey> = new.iter().map(|f| f.key).collect();
    let claimed = stores.fires.claim(&keys, "node-a:1", 60_000, T0).await.unwrap().claimed;
    let results = succeeded(&claimed);
    assert_eq!(stores.fires.record(&results, T0).await.unwrap(), 6);

    let config = RetentionConfig { keep_fires_ms: 60_000, period_ms: 60_000, batch_size: 2 };
    let a = Retention::new(config.clone(), &stores, &NodeContext::new(clock.clone(), "node-a", "xtimer-test"));
    let b = Retention::new(config, &stores, &NodeContext::new(clock.clone(), "node-b", "xtimer-test"));
    let stop = tokio_util::sync::CancellationToken::new();
    assert_eq!(a.run_once(&stop).await.unwrap(), Some(5), "every old record, in batches of two");
    assert_eq!(b.run_once(&stop).await.unwrap(), None, "one node at a time");
    let (left, total) = stores.fires.list_fires(id, None, 0, 10).await.unwrap();
    assert_eq!((left[0].run_ms, total), (T0 - 1_000, 1), "a record younger than the keep time stays");
}

#[tokio::test]
async fn retention_with_the_defaults_keeps_a_week_of_history() {
    use xtimer_core::config::RetentionConfig;
    use xtimer_migrator::Retention;
    use xtimer_store::NewFire;

    const DAY: i64 = 24 * 3_600_000;
    let (_dir, clock, stores) = sqlite_stores().await;
    let id = stores.timers.create_timer(&timer("week", cron("0 0 12 * * *")), T0).await.unwrap().id;
    let runs = [T0 - 8 * DAY, T0 - 6 * DAY, T0 - DAY];
    let new: Vec<NewFire> =
        runs.iter().map(|&run_ms| NewFire { key: FireKey { timer_id: id, run_ms }, app: "step".into() }).collect();
    stores.fires.insert_fires(&new, T0 - 9 * DAY).await.unwrap();
    let keys: Vec<FireKey> = new.iter().map(|f| f.key).collect();
    let claimed = stores.fires.claim(&keys, "node-a:1", 60_000, T0).await.unwrap().claimed;
    let results = succeeded(&claimed);
    assert_eq!(stores.fires.record(&results, T0).await.unwrap(), 3);

    let retention =
        Retention::new(RetentionConfig::default(), &stores, &NodeContext::new(clock.clone(), "node-a", "xtimer-test"));
    let stop = tokio_util::sync::CancellationToken::new();
    assert_eq!(retention.run_once(&stop).await.unwrap(), Some(1), "only the record older than 7 days");
    let (left, total) = stores.fires.list_fires(id, None, 0, 10).await.unwrap();
    let mut kept: Vec<i64> = left.iter().map(|f| f.run_ms).collect();
    kept.sort();
    assert_eq!((kept, total), (vec![T0 - 6 * DAY, T0 - DAY], 2));
}

#[tokio::test]
async fn retention_on_postgres_drops_an_expired_days_partition_whole() {
    use xtimer_core::config::RetentionConfig;
    use xtimer_migrator::Retention;
    use xtimer_store::NewFire;

    const DAY: i64 = 24 * 3_600_000;
    let admin = std::env::var("XTIMER_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:15432/postgres".into());
    let name = format!(
        "mig_{:016x}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    );
    let url = xtimer_store::db::create_database(&admin, &name).await.unwrap();
    // Start-up makes partitions around the real today.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let today = now.div_euclid(DAY);
    let clock = Arc::new(ManualClock::new(now));
    let db = DatabaseConfig { url, max_connections: 2 };
    let stores = Stores::connect(&db, &RedisConfig::default(), &ShardConfig::default(), clock.clone()).await.unwrap();
    let id = stores.timers.create_timer(&timer("daily", cron("0 0 12 * * *")), now).await.unwrap().id;
    // Tomorrow: two fires that end. The day after: one still pending.
    let runs = [(today + 1) * DAY + 1_000, (today + 1) * DAY + 2_000, (today + 2) * DAY + 1_000];
    let new: Vec<NewFire> =
        runs.iter().map(|&run_ms| NewFire { key: FireKey { timer_id: id, run_ms }, app: "step".into() }).collect();
    stores.fires.insert_fires(&new, now).await.unwrap();
    let claimed = stores.fires.claim(&[new[0].key, new[1].key], "node-a:1", 60_000, now).await.unwrap().claimed;
    let results = succeeded(&claimed);
    assert_eq!(stores.fires.record(&results, now).await.unwrap(), 2);

    // A week after both days have ended.
    clock.set((today + 3) * DAY + 7 * DAY);
    let retention =
        Retention::new(RetentionConfig::default(), &stores, &NodeContext::new(clock.clone(), "node-a", "xtimer-test"));
    let stop = tokio_util::sync::CancellationToken::new();
    assert_eq!(retention.run_once(&stop).await.unwrap(), Some(0), "dropped whole, not deleted by the batches");
    let (left, total) = stores.fires.list_fires(id, None, 0, 10).await.unwrap();
    assert_eq!(
        (total, left[0].run_ms, left[0].status),
        (1, runs[2], FireStatus::Pending),
        "the pending fire's day stays"
    );
    stores.close().await;
}

/// The results of claimed fires that all succeeded on their first attempt.
fn succeeded(claimed: &[ClaimedFire]) -> Vec<FireResult> {
    claimed
        .iter()
        .map(|c| FireResult {
            task_id: c.task_id,
            run_ms: c.key.run_ms,
            owner: c.owner.clone(),
            status: FireStatus::Succeeded,
            attempt: 1,
            output: "HTTP 200".into(),
            cost_time: 1,
            lease_until: None,
        })
        .collect()
}
