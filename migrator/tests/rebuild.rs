//! The shard index rebuilt after Redis lost writes: fires planned into a
//! real Redis (`XTIMER_TEST_REDIS_URL`, scripts/test starts it; a SQLite
//! file holds the fires), the keys of the test's prefix deleted (a flush,
//! without flushing the shared server) or set back (a failover to a
//! replica that missed the last writes), and the index whole again after
//! one check.

use std::process::Command;
use std::sync::Arc;

use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, MigratorConfig, RedisConfig, ShardConfig};
use xtimer_core::fire::FireKey;
use xtimer_core::node::NodeContext;
use xtimer_core::shard::{ShardKey, MINUTE_MS};
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, TimerStatus};
use xtimer_migrator::rebuild::Check;
use xtimer_migrator::{IndexRebuild, Migrator};
use xtimer_store::Stores;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;

fn redis_url() -> String {
    std::env::var("XTIMER_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A key prefix no other run of these tests uses.
fn unique_prefix() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("xtimer-rebuild-{:016x}", nanos as u64 ^ u64::from(std::process::id()))
}

fn every_second(name: &str) -> NewTimer {
    NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: "rebuild".into(),
        name: name.into(),
        status: TimerStatus::Enabled,
        schedule: Schedule::Cron { expr: "* * * * * *".into(), timezone: "UTC".into() },
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

fn redis_cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli").arg("-u").arg(redis_url()).args(args).output().expect("redis-cli runs");
    assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The keys of `prefix`, as `pattern` (after the prefix) picks them.
fn keys(prefix: &str, pattern: &str) -> Vec<String> {
    redis_cli(&["--scan", "--pattern", &format!("{prefix}{pattern}")]).lines().map(str::to_string).collect()
}

/// Deletes the keys of `prefix` that `pattern` picks: what a flush (or a
/// failover that lost them) does to this test's keys, and to no others.
fn delete(prefix: &str, pattern: &str) -> usize {
    let found = keys(prefix, pattern);
    for key in &found {
        redis_cli(&["DEL", key]);
    }
    found.len()
}

/// Every fire the index holds in the first three minutes from [`T0`].
async fn indexed(stores: &Stores) -> Vec<FireKey> {
    let mut all = Vec::new();
    for minute in 0..3 {
        for bucket in 0..stores.shards.buckets() {
            let shard = ShardKey { minute_ms: T0 + minute * MINUTE_MS, bucket };
            all.extend(stores.shards.range(shard, shard.minute_ms, shard.end_ms()).await.unwrap());
        }
    }
    all.sort_by_key(|f| (f.run_ms, f.timer_id));
    all
}

#[tokio::test]
async fn a_flushed_or_rolled_back_index_is_rebuilt_from_the_database_by_one_node() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        DatabaseConfig { url: format!("sqlite://{}", dir.path().join("rebuild.db").display()), max_connections: 2 };
    let redis = RedisConfig { url: redis_url(), ..RedisConfig::default() };
    let prefix = unique_prefix();
    let shard = ShardConfig { key_prefix: prefix.clone(), ..ShardConfig::default() };
    let clock = Arc::new(ManualClock::new(T0));
    let stores = Stores::connect(&db, &redis, &shard, clock.clone()).await.unwrap();
    let (a, b) =
        (NodeContext::new(clock.clone(), "node-a", &prefix), NodeContext::new(clock.clone(), "node-b", &prefix));
    let migrator = Migrator::new(MigratorConfig::default(), &stores, &a, None);
    let rebuild_a = IndexRebuild::new(&stores, &a, migrator.expander()).expect("Redis can lose writes");
    let rebuild_b = IndexRebuild::new(&stores, &b, migrator.expander()).unwrap();

    stores.timers.create_timers(&[every_second("one"), every_second("two")], T0).await.unwrap();
    migrator.catch_up().await.unwrap();
    let planned = indexed(&stores).await;
    assert_eq!(planned.len(), 2 * 120, "two minutes of two per-second timers");

    // A new cluster has no marker: the first check writes it (indexing once more).
    assert!(matches!(rebuild_a.run_once().await.unwrap(), Check::Rebuilt(240)));
    assert_eq!(rebuild_b.run_once().await.unwrap(), Check::Whole, "b takes a's epoch as it is");
    assert_eq!(rebuild_a.run_once().await.unwrap(), Check::Whole);

    // A flush: every key of the prefix gone, the marker and the locks with it.
    assert!(delete(&prefix, ":*") > 0);
    assert!(indexed(&stores).await.is_empty(), "the index lost its fires");
    clock.advance(1_000);
    match rebuild_b.run_once().await.unwrap() {
        Check::Rebuilt(n) => assert_eq!(n, 240, "the pending fires from 3 s ago to the horizon"),
        other => panic!("b noticed the flush and rebuilt: {other:?}"),
    }
    assert_eq!(indexed(&stores).await, planned, "whole again");
    assert_eq!(rebuild_a.run_once().await.unwrap(), Check::Whole, "a sees b's rebuild and makes none");
    assert_eq!(rebuild_b.run_once().await.unwrap(), Check::Whole);

    // A failover to a replica that missed the last writes: b's last check
    // and the shard writes made around it are gone, the epoch is not.
    assert_eq!(rebuild_b.run_once().await.unwrap(), Check::Whole);
    let seq_key = format!("{prefix}:{{index}}:seq:node-b");
    let seq: i64 = redis_cli(&["GET", &seq_key]).trim().parse().unwrap();
    redis_cli(&["SET", &seq_key, &(seq - 1).to_string()]);
    assert!(delete(&prefix, ":shard:*") > 0);
    assert!(indexed(&stores).await.is_empty());
    assert!(matches!(rebuild_b.run_once().await.unwrap(), Check::Rebuilt(_)), "b noticed its lost check");
    assert_eq!(indexed(&stores).await, planned, "whole again");
    assert_eq!(rebuild_a.run_once().await.unwrap(), Check::Whole);
    assert_eq!(rebuild_b.run_once().await.unwrap(), Check::Whole);

    // A loss noticed while another node has the turn: owed, not rebuilt
    // twice; the other's rebuild settles it.
    let seq_key = format!("{prefix}:{{index}}:seq:node-a");
    let seq: i64 = redis_cli(&["GET", &seq_key]).trim().parse().unwrap();
    redis_cli(&["SET", &seq_key, &(seq - 1).to_string()]);
    assert_eq!(rebuild_a.run_once().await.unwrap(), Check::Owed, "b holds the rebuild's turn");
    redis_cli(&["DEL", &format!("{prefix}:{{index}}:epoch")]);
    assert!(matches!(rebuild_b.run_once().await.unwrap(), Check::Rebuilt(_)));
    assert_eq!(rebuild_a.run_once().await.unwrap(), Check::Whole, "a new epoch since a's loss: b rebuilt after it");

    delete(&prefix, ":*");
}

#[tokio::test]
async fn the_embedded_index_has_no_rebuild_loop() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        DatabaseConfig { url: format!("sqlite://{}", dir.path().join("embedded.db").display()), max_connections: 2 };
    let clock = Arc::new(ManualClock::new(T0));
    let stores = Stores::connect(&db, &RedisConfig::default(), &ShardConfig::default(), clock.clone()).await.unwrap();
    let ctx = NodeContext::new(clock, "node-a", "xtimer");
    let migrator = Migrator::new(MigratorConfig::default(), &stores, &ctx, None);
    assert!(IndexRebuild::new(&stores, &ctx, migrator.expander()).is_none());
}
