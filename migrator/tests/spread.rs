//! Two planners placing the same minute's spread fires at once, on each
//! database: each one's choices are recorded before the other reads the
//! load, so together they stay as flat as one planner would (the per-second
//! bound), not each flat on its own with the same seconds chosen twice.
//!
//! SQLite: one node, two planners (a migrator step and an `updateTimer`,
//! say) over its in-process lock. PostgreSQL and MySQL: two nodes, each
//! its own pools and Redis locks, on one database; the servers come from
//! `XTIMER_TEST_DATABASE_URL`, `XTIMER_TEST_MYSQL_URL` and
//! `XTIMER_TEST_REDIS_URL` (scripts/test starts them).

use std::collections::BTreeMap;
use std::sync::Arc;

use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, RedisConfig, ShardConfig};
use xtimer_migrator::spread::{Candidate, Placer};
use xtimer_store::Stores;

/// A whole minute: 2026-01-01T00:01:00Z.
const MINUTE: i64 = 1_767_225_660_000;
/// Fires each planner places, all scheduled at [`MINUTE`] with a minute's spread.
const EACH: i64 = 90;

/// A name no other run of these tests uses.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}_{:016x}", nanos as u64 ^ u64::from(std::process::id()))
}

/// Stores on `url` (locks in Redis when `redis` names one), at [`MINUTE`].
async fn stores(url: &str, redis: &str) -> Stores {
    let db = DatabaseConfig { url: url.into(), max_connections: 4 };
    let redis = RedisConfig { url: redis.into(), ..RedisConfig::default() };
    let clock = Arc::new(ManualClock::new(MINUTE - 60_000));
    Stores::connect(&db, &redis, &ShardConfig::default(), clock).await.unwrap()
}

/// A planner on `stores` under the lock `key`, as node `token`.
fn placer(stores: &Stores, key: &str, token: &str) -> Placer {
    Placer::new(stores.fires.clone(), stores.locks.clone(), key.into(), token.into())
}

/// [`EACH`] fires of timers from `first_id` on, each with the minute's window.
fn candidates(first_id: i64) -> Vec<Candidate> {
    (first_id..first_id + EACH)
        .map(|timer_id| Candidate { timer_id, scheduled_ms: MINUTE, until_ms: MINUTE + 60_000 })
        .collect()
}

/// Runs both planners at once and checks the minute they placed: every
/// fire in its window, at most `2 * EACH / 60` in any second.
async fn two_planners_at_once_keep_the_bound(a: Placer, b: Placer) {
    let (one, two) = tokio::join!(a.place(candidates(1)), b.place(candidates(1_001)));
    let placed: Vec<i64> = one.unwrap().into_values().chain(two.unwrap().into_values()).collect();
    assert_eq!(placed.len() as i64, 2 * EACH);
    assert!(placed.iter().all(|t| (MINUTE..MINUTE + 60_000).contains(t)), "{placed:?}");
    let mut per_second = BTreeMap::<i64, i64>::new();
    for t in placed {
        *per_second.entry((t - MINUTE) / 1000).or_default() += 1;
    }
    let bound = (2 * EACH + 59) / 60;
    assert!(per_second.values().all(|n| *n <= bound), "at most {bound} a second: {per_second:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_two_planners_at_once_keep_the_per_second_bound() {
    let dir = tempfile::tempdir().unwrap();
    let node = stores(&format!("sqlite://{}", dir.path().join("spread.db").display()), "").await;
    let key = unique("spread");
    two_planners_at_once_keep_the_bound(placer(&node, &key, "step"), placer(&node, &key, "update")).await;
    node.close().await;
}

/// Two nodes on a fresh database of the server at `var` (else `default`).
async fn two_nodes(var: &str, default: &str) {
    let admin = std::env::var(var).unwrap_or_else(|_| default.into());
    let redis = std::env::var("XTIMER_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:16379".into());
    let name = unique("spread");
    let url = xtimer_store::db::create_database(&admin, &name)
        .await
        .unwrap_or_else(|e| panic!("the server at {var} (scripts/test starts one): {e}"));
    let (a, b) = (stores(&url, &redis).await, stores(&url, &redis).await);
    let key = unique("xtimer-test:lock:spread");
    two_planners_at_once_keep_the_bound(placer(&a, &key, "node-a"), placer(&b, &key, "node-b")).await;
    a.close().await;
    b.close().await;
    xtimer_store::db::drop_database(&admin, &name).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_two_nodes_at_once_keep_the_per_second_bound() {
    two_nodes("XTIMER_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:15432/postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mysql_two_nodes_at_once_keep_the_per_second_bound() {
    two_nodes("XTIMER_TEST_MYSQL_URL", "mysql://root@127.0.0.1:13306/mysql").await;
}
