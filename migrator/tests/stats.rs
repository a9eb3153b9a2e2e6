//! The roll-up of the per-timer figures on a real SQLite file and a manual
//! clock: each settled hour once, one node at a time, the figures read
//! from the rolled hours, old hours forgotten.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, RedisConfig, ShardConfig};
use xtimer_core::fire::{FireKey, FireStatus};
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};
use xtimer_core::Clock;
use xtimer_migrator::StatsRollup;
use xtimer_store::{FireResult, NewFire, Stores, STATS_HOUR_MS as HOUR};

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;

fn every_ten_minutes() -> NewTimer {
    NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: "stats".into(),
        name: "every-ten-minutes".into(),
        status: TimerStatus::Enabled,
        schedule: Schedule::Cron { expr: "0 */10 * * * *".into(), timezone: "UTC".into() },
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

#[tokio::test]
async fn each_settled_hour_is_rolled_up_once_by_one_node_and_forgotten_when_no_read_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("stats.db").display());
    let clock = Arc::new(ManualClock::new(T0));
    let db = DatabaseConfig { url, max_connections: 2 };
    let stores = Stores::connect(&db, &RedisConfig::default(), &ShardConfig::default(), clock.clone()).await.unwrap();
    let id = stores.timers.create_timer(&every_ten_minutes(), T0 - 31 * HOUR).await.unwrap().id;
    // Every ten minutes of the last 30 hours, sent 7 ms late.
    let keys: Vec<FireKey> =
        (T0 - 30 * HOUR..T0).step_by(600_000).map(|run_ms| FireKey { timer_id: id, run_ms }).collect();
    let new: Vec<NewFire> = keys.iter().map(|&key| NewFire { key, app: "stats".into() }).collect();
    stores.fires.insert_fires(&new, T0 - 31 * HOUR).await.unwrap();
    let claimed = stores.fires.claim(&keys, "node-a:1", 60_000, T0).await.unwrap().claimed;
    let results: Vec<FireResult> = claimed
        .iter()
        .map(|c| FireResult {
            task_id: c.task_id,
            run_ms: c.key.run_ms,
            owner: c.owner.clone(),
            status: FireStatus::Succeeded,
            attempt: 1,
            output: "HTTP 200".into(),
            cost_time: 7,
            lease_until: None,
        })
        .collect();
    assert_eq!(stores.fires.record(&results, T0).await.unwrap(), keys.len() as u64);

    let a = StatsRollup::new(&stores, &NodeContext::new(clock.clone(), "node-a", "xtimer-test"));
    let b = StatsRollup::new(&stores, &NodeContext::new(clock.clone(), "node-b", "xtimer-test"));
    let stop = CancellationToken::new();
    let pass = a.run_once(&stop).await.unwrap().expect("node a's turn");
    // From 25 hours back to the last hour settled (the one that just ended is not yet).
    assert_eq!(pass.hours, (T0 - 25 * HOUR..T0 - HOUR).step_by(HOUR as usize).collect::<Vec<_>>());
    assert_eq!(b.run_once(&stop).await.unwrap(), None, "one node at a time");
    assert_eq!(a.run_once(&stop).await.unwrap().unwrap().hours, Vec::<i64>::new(), "each hour once");

    clock.advance(11 * 60_000);
    assert_eq!(a.run_once(&stop).await.unwrap().unwrap().hours, vec![T0 - HOUR], "settled");
    let now = clock.now_ms();
    let figures = stores.fires.timer_figures(id, now - 24 * HOUR, now).await.unwrap();
    assert_eq!((figures.fires, figures.succeeded, figures.late_percentile(99)), (144, 144, Some(7)));
    assert_eq!((figures.rolled_hours, figures.raw_fires), (24, 0), "read from the rolled hours alone");

    // Two days on: every hour rolled then is past what a read covers.
    clock.advance(49 * HOUR);
    let pass = a.run_once(&stop).await.unwrap().unwrap();
    assert_eq!(pass.forgotten, 25, "{pass:?}");
}
