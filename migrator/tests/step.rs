//! A migrator step on a real SQLite file and a manual clock: it reads only
//! the timers due before its horizon, and completes fired one-shots.

use std::collections::BTreeMap;
use std::sync::Arc;

use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, MigratorConfig, RedisConfig, ShardConfig};
use xtimer_core::fire::{FireKey, FireStatus};
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};
use xtimer_migrator::Migrator;
use xtimer_store::{FireResult, Stores};

/// 2026-01-01T00:00:00Z: the daily timers below fire hours later.
const T0: i64 = 1_767_225_600_000;

fn timer(name: &str, schedule: Schedule) -> NewTimer {
    NewTimer {
        app: "step".into(),
        name: name.into(),
        status: TimerStatus::Enabled,
        schedule,
        notify: Notify::Http(HttpNotify {
            url: "http://127.0.0.1:9/hook".into(),
            method: "POST".into(),
            headers: BTreeMap::new(),
            body: None,
            timeout_ms: None,
        }),
        retry: RetryPolicy::default(),
        misfire: MisfirePolicy::FireAll,
    }
}

fn cron(expr: &str) -> Schedule {
    Schedule::Cron { expr: expr.into(), timezone: "UTC".into() }
}

#[tokio::test]
async fn a_step_reads_only_the_timers_due_before_its_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("m.db").display());
    let clock = Arc::new(ManualClock::new(T0));
    let db = DatabaseConfig { url, max_connections: 2 };
    let stores = Stores::connect(&db, &RedisConfig::default(), &ShardConfig::default(), clock.clone()).await.unwrap();
    let ctx = NodeContext::new(clock.clone(), "node-a", "xtimer-test");
    let migrator = Migrator::new(MigratorConfig::default(), &stores, &ctx, None);

    let mut batch: Vec<NewTimer> = (0..50).map(|i| timer(&format!("daily{i}"), cron("0 0 3 * * *"))).collect();
    batch.push(timer("second-a", cron("* * * * * *")));
    batch.push(timer("second-b", cron("* * * * * *")));
    batch.push(timer("once", Schedule::Once { run_at_ms: T0 + 30_000 }));
    let ids = stores.timers.create_timers(&batch, T0).await.unwrap();
    let once = *ids.last().unwrap();

    let first = migrator.catch_up().await.unwrap();
    assert_eq!(first.timers, 53, "new timers are all read once");
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
