//! The PostgreSQL backend: the repositories on a fresh schema of the server at
//! `XTIMER_TEST_DATABASE_URL`, with the in-process shard index and locks
//! (the Redis half has its own backend). Also the tests only PostgreSQL
//! needs: concurrent claimers, and a clear error for an unreachable server.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use xtimer_core::config::DatabaseConfig;
use xtimer_core::fire::{FireKey, FireStatus};
use xtimer_core::timer::TimerStatus;
use xtimer_store::{postgres, Database};
use xtimer_store::{Error, FireRepo, NewFire, TimerRepo};

use crate::helpers::{self, timer, Backend, APP, T0};

/// The test server; a throwaway local one by default.
pub fn database_url() -> String {
    std::env::var("XTIMER_TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:15432/postgres".into())
}

/// The repositories on a fresh PostgreSQL schema `t_<random hex>`, migrated, with the embedded
/// shard index and locks on a `ManualClock` at [`T0`].
///
/// The schema is left behind: dropping it needs a guard in
/// `Backend::_keep`, which only `helpers` can set. For the same reason this
/// starts from the embedded backend (whose shard index, locks and clock are
/// the ones wanted) and swaps in the repositories; its SQLite file goes
/// unused.
pub async fn postgres() -> Backend {
    let url = database_url();
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections: 4 };
    let repo = match postgres::connect(&config, Some(&schema)).await {
        Ok(repo) => Arc::new(repo),
        Err(e) => panic!("PostgreSQL at {url} (set XTIMER_TEST_DATABASE_URL): {}", chain(&e)),
    };
    let mut backend = helpers::embedded().await;
    backend.timers = repo.clone();
    backend.nodes = repo.clone();
    backend.notifications = repo.clone();
    backend.db = (*repo).clone();
    backend.fires = repo;
    backend
}

/// The pool of a PostgreSQL [`Database`].
fn pool(db: &Database) -> &sqlx::PgPool {
    match db {
        Database::Postgres(pool) => pool,
        _ => unreachable!("connected to PostgreSQL"),
    }
}

/// An error and its causes, one line.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[tokio::test]
async fn concurrent_claims_split_the_fires_without_overlap() {
    let b = postgres().await;
    let t = timer(&b, "busy", TimerStatus::Enabled).await;
    for round in 0..3_i64 {
        let base = T0 + round * 10_000_000;
        let keys: Vec<FireKey> = (0..2_000).map(|i| FireKey { timer_id: t.id, run_ms: base + i }).collect();
        let new: Vec<NewFire> = keys.iter().map(|&key| NewFire { key, app: APP.into() }).collect();
        assert_eq!(b.fires.insert_fires(&new, b.now()).await.unwrap(), 2_000);

        // The second claimer takes the keys in the opposite order.
        let reversed: Vec<FireKey> = keys.iter().rev().copied().collect();
        let (a, c) = tokio::join!(
            b.fires.claim(&keys, "node-a:1", 60_000, b.now()),
            b.fires.claim(&reversed, "node-b:1", 60_000, b.now()),
        );
        let (a, c) = (a.unwrap(), c.unwrap());
        assert_eq!((a.skipped, c.skipped), (0, 0));
        assert!(a.claimed.iter().all(|f| f.owner == "node-a:1") && c.claimed.iter().all(|f| f.owner == "node-b:1"));
        let won_a: HashSet<FireKey> = a.claimed.iter().map(|f| f.key).collect();
        let won_c: HashSet<FireKey> = c.claimed.iter().map(|f| f.key).collect();
        assert_eq!((won_a.len(), won_c.len()), (a.claimed.len(), c.claimed.len()), "no fire twice to one claimer");
        assert!(won_a.is_disjoint(&won_c), "round {round}: a fire was claimed by both");
        assert_eq!(won_a.len() + won_c.len(), keys.len(), "round {round}: together they claim every fire");
        assert!(b.fires.pending_between(Some(t.id), base, base + 2_000, 10).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn an_unreachable_server_fails_fast_and_says_which() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://xtimer:secret@127.0.0.1:{port}/xtimer");
    let started = Instant::now();
    let err = postgres::connect(&DatabaseConfig { url, max_connections: 2 }, None).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(matches!(err, Error::Database(_)), "{err:?}");
    let message = chain(&err);
    assert!(message.contains(&format!("postgres://xtimer:***@127.0.0.1:{port}/xtimer")), "{message}");
    assert!(!message.contains("secret"), "{message}");
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[tokio::test]
async fn nodes_starting_at_once_create_and_migrate_one_schema() {
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: database_url(), max_connections: 2 };
    let mut nodes = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (config, schema) = (config.clone(), schema.clone());
        nodes.spawn(async move { postgres::connect(&config, Some(&schema)).await });
    }
    let mut repos = Vec::new();
    while let Some(started) = nodes.join_next().await {
        repos.push(started.unwrap().unwrap_or_else(|e| panic!("every node starts: {}", chain(&e))));
    }
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(pool(&repos[0]))
        .await
        .unwrap();
    assert_eq!(applied as usize, sqlx::migrate!("../migrations/postgres").iter().count(), "each migration once");
    let schema_of: String = sqlx::query_scalar("SELECT current_schema()").fetch_one(pool(&repos[3])).await.unwrap();
    assert_eq!(schema_of, schema);
}

// ---- Daily partitions of t_timer_task ------------------------------------

/// One UTC day, ms.
const DAY: i64 = 86_400_000;

/// A fresh migrated schema, as a [`Database`] (whose repositories the
/// partition tests call directly).
async fn fresh_database() -> Database {
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: database_url(), max_connections: 4 };
    postgres::connect(&config, Some(&schema)).await.unwrap_or_else(|e| panic!("connect: {}", chain(&e)))
}

/// The wall clock: start-up makes partitions around the real today.
fn wall_now() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The partition of UTC day `day` (days since the epoch).
fn partition_of(day: i64) -> String {
    chrono::DateTime::from_timestamp_millis(day * DAY).unwrap().format("t_timer_task_p%Y%m%d").to_string()
}

/// The partitions of `t_timer_task`, by name.
async fn partitions(db: &Database) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 't_timer_task'::regclass ORDER BY 1",
    )
    .fetch_all(pool(db))
    .await
    .unwrap()
}

/// The partition that holds fire `key`.
async fn partition_holding(db: &Database, key: FireKey) -> String {
    sqlx::query_scalar("SELECT tableoid::regclass::text FROM t_timer_task WHERE timer_id = $1 AND run_timer = $2")
        .bind(key.timer_id)
        .bind(key.run_ms)
        .fetch_one(pool(db))
        .await
        .unwrap()
}

/// Inserts `timer`'s fires at `runs` straight into `db`; their keys.
async fn insert_into(db: &Database, timer_id: i64, runs: &[i64], now_ms: i64) -> Vec<FireKey> {
    let keys: Vec<FireKey> = runs.iter().map(|&run_ms| FireKey { timer_id, run_ms }).collect();
    let new: Vec<NewFire> = keys.iter().map(|&key| NewFire { key, app: APP.into() }).collect();
    assert_eq!(db.insert_fires(&new, now_ms).await.unwrap(), keys.len() as u64);
    keys
}

/// The status of each fire of `timer_id`, by run time.
async fn statuses(db: &Database, timer_id: i64) -> Vec<(i64, FireStatus)> {
    let (mut fires, _) = db.list_fires(timer_id, None, 0, 1_000).await.unwrap();
    fires.sort_by_key(|f| f.run_ms);
    fires.iter().map(|f| (f.run_ms, f.status)).collect()
}

#[tokio::test]
async fn a_migrated_schema_has_partitions_for_today_and_the_days_ahead_and_a_fire_now_lands_in_todays() {
    let db = fresh_database().await;
    let now = wall_now();
    let today = now.div_euclid(DAY);
    let names = partitions(&db).await;
    for day in today..=today + xtimer_store::partition::DAYS_AHEAD {
        assert!(names.contains(&partition_of(day)), "{} in {names:?}", partition_of(day));
    }
    assert!(names.iter().any(|n| n == "t_timer_task_default"), "{names:?}");

    let t = db.create_timer(&helpers::new_timer(APP, "now", TimerStatus::Enabled), now).await.unwrap();
    let keys = insert_into(&db, t.id, &[now, T0], now).await;
    assert_eq!(partition_holding(&db, keys[0]).await, partition_of(today));
    assert_eq!(partition_holding(&db, keys[1]).await, "t_timer_task_default", "no partition for a day long gone");

    // The statements that name the run time find the fire in its partition.
    let claimed = db.claim(&keys, "node-a:1", 60_000, now).await.unwrap().claimed;
    assert_eq!(claimed.len(), 2);
    assert_eq!(db.release(&claimed[1..], now).await.unwrap(), 1);
    assert_eq!(db.record(&[helpers::succeeded(&claimed[0], 3)], now).await.unwrap(), 1);
    assert_eq!(statuses(&db, t.id).await, [(T0, FireStatus::Pending), (now, FireStatus::Succeeded)]);
}

#[tokio::test]
async fn an_expired_partition_is_dropped_whole_unless_it_holds_a_fire_under_way() {
    const KEEP: i64 = 7 * DAY;
    let db = fresh_database().await;
    let now = wall_now();
    let today = now.div_euclid(DAY);
    let t = db.create_timer(&helpers::new_timer(APP, "aging", TimerStatus::Enabled), now).await.unwrap();
    // Tomorrow's fire ends; the next day's stays pending; the one after is running.
    let runs = [(today + 1) * DAY + 1_000, (today + 2) * DAY + 1_000, (today + 3) * DAY + 1_000];
    let keys = insert_into(&db, t.id, &runs, now).await;
    let claimed = db.claim(&[keys[0], keys[2]], "node-a:1", 60_000, now).await.unwrap().claimed;
    let ended = claimed.iter().find(|c| c.key == keys[0]).unwrap();
    assert_eq!(db.record(&[helpers::succeeded(ended, 1)], now).await.unwrap(), 1);

    // A week after the day of the running fire: today's (empty) and
    // tomorrow's partitions go whole; the two holding fires under way stay.
    let later = (today + 4) * DAY + KEEP;
    let report = db.maintain_partitions(later, KEEP).await.unwrap();
    assert_eq!(report.dropped, [partition_of(today), partition_of(today + 1)]);
    assert_eq!(report.kept, [partition_of(today + 2), partition_of(today + 3)]);
    let later_day = later.div_euclid(DAY);
    let ahead: Vec<String> = (later_day..=later_day + xtimer_store::partition::DAYS_AHEAD).map(partition_of).collect();
    assert_eq!(report.created, ahead, "the days ahead of the new now");
    let names = partitions(&db).await;
    assert!(!names.contains(&partition_of(today)) && !names.contains(&partition_of(today + 1)), "{names:?}");
    assert_eq!(statuses(&db, t.id).await, [(runs[1], FireStatus::Pending), (runs[2], FireStatus::Running)]);

    let again = db.maintain_partitions(later, KEEP).await.unwrap();
    assert_eq!((again.created.len(), again.dropped.len()), (0, 0), "nothing left to do: {again:?}");

    // Once the pending fire has ended, its partition goes too.
    assert_eq!(db.mark_missed(&[fire_id(&db, keys[1]).await], "missed", later).await.unwrap(), 1);
    let last = db.maintain_partitions(later, KEEP).await.unwrap();
    assert_eq!((last.dropped, last.kept), (vec![partition_of(today + 2)], vec![partition_of(today + 3)]));
    assert_eq!(statuses(&db, t.id).await, [(runs[2], FireStatus::Running)]);
}

/// The task id of fire `key`.
async fn fire_id(db: &Database, key: FireKey) -> i64 {
    sqlx::query_scalar("SELECT task_id FROM t_timer_task WHERE timer_id = $1 AND run_timer = $2")
        .bind(key.timer_id)
        .bind(key.run_ms)
        .fetch_one(pool(db))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_new_partition_takes_over_its_days_fires_from_the_default_partition() {
    let db = fresh_database().await;
    let now = wall_now();
    let today = now.div_euclid(DAY);
    let t = db.create_timer(&helpers::new_timer(APP, "ahead", TimerStatus::Enabled), now).await.unwrap();
    // Ten days ahead: no partition yet.
    let far = (today + 10) * DAY + 5_000;
    let keys = insert_into(&db, t.id, &[far, far + 1_000], now).await;
    assert_eq!(partition_holding(&db, keys[0]).await, "t_timer_task_default");
    let id = fire_id(&db, keys[0]).await;

    let report = db.maintain_partitions(far, 7 * DAY).await.unwrap();
    assert!(report.created.contains(&partition_of(today + 10)), "{report:?}");
    for key in &keys {
        assert_eq!(partition_holding(&db, *key).await, partition_of(today + 10));
    }
    assert_eq!(fire_id(&db, keys[0]).await, id, "moved, not made again");
    let claimed = db.claim(&keys, "node-a:1", 60_000, far).await.unwrap().claimed;
    assert_eq!(claimed.len(), 2, "claimed where they moved to");
}

#[tokio::test]
async fn fires_stored_before_partitioning_survive_the_migration_and_ids_keep_increasing() {
    use sqlx::Connection;

    // A schema migrated up to 0010, the last before partitioning.
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let mut conn = sqlx::PgConnection::connect(&database_url()).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {schema}")).execute(&mut conn).await.unwrap();
    sqlx::query(&format!("SET search_path TO {schema}")).execute(&mut conn).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/postgres");
    for entry in std::fs::read_dir(source).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.as_str() < "0011" {
            std::fs::copy(&path, dir.path().join(name)).unwrap();
        }
    }
    let up_to_0010 = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
    assert_eq!(up_to_0010.iter().count(), 10);
    up_to_0010.run_direct(&mut conn).await.unwrap();

    // Fires of a day long gone (ended), today (pending) and far ahead.
    let now = wall_now();
    let today = now.div_euclid(DAY);
    let t = {
        let db = Database::Postgres(
            sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .connect_with(
                    <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(&database_url())
                        .unwrap()
                        .options([("search_path", schema.as_str())]),
                )
                .await
                .unwrap(),
        );
        // The columns today's code writes, there only while it writes the timer (0015, 0019 and 0023 add them).
        let Database::Postgres(pool) = &db else { unreachable!() };
        sqlx::query(
            "ALTER TABLE t_timer ADD COLUMN every_ms BIGINT, ADD COLUMN timing TEXT, \
             ADD COLUMN on_missed TEXT, ADD COLUMN on_late TEXT, \
             ADD COLUMN dedupe_key TEXT, ADD COLUMN dedupe_first_run BIGINT",
        )
        .execute(pool)
        .await
        .unwrap();
        let t = db.create_timer(&helpers::new_timer(APP, "old", TimerStatus::Enabled), now).await.unwrap();
        sqlx::query(
            "ALTER TABLE t_timer DROP COLUMN every_ms, DROP COLUMN timing, DROP COLUMN on_missed, DROP COLUMN on_late, \
             DROP COLUMN dedupe_key, DROP COLUMN dedupe_first_run",
        )
        .execute(pool)
        .await
        .unwrap();
        db.close().await;
        t
    };
    let runs = [T0, now, (today + 30) * DAY];
    for (i, run) in runs.iter().enumerate() {
        sqlx::query(
            "INSERT INTO t_timer_task (timer_id, app, run_timer, status, output, create_time, modify_time)
             VALUES ($1, $2, $3, $4, 'before', $5, $5)",
        )
        .bind(t.id)
        .bind(APP)
        .bind(run)
        .bind(if i == 0 { FireStatus::Succeeded.code() as i16 } else { 0 })
        .bind(now)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let before: Vec<(i64, i64)> = sqlx::query_as("SELECT task_id, run_timer FROM t_timer_task ORDER BY task_id")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    // Start-up applies 0011 and makes today's partitions.
    let config = DatabaseConfig { url: database_url(), max_connections: 2 };
    let db = postgres::connect(&config, Some(&schema)).await.unwrap_or_else(|e| panic!("connect: {}", chain(&e)));
    let after: Vec<(i64, i64)> = sqlx::query_as("SELECT task_id, run_timer FROM t_timer_task ORDER BY task_id")
        .fetch_all(pool(&db))
        .await
        .unwrap();
    assert_eq!(after, before, "every fire kept, with its id");
    let key = |run_ms| FireKey { timer_id: t.id, run_ms };
    assert_eq!(partition_holding(&db, key(T0)).await, "t_timer_task_default");
    assert_eq!(partition_holding(&db, key(now)).await, partition_of(today), "today's moved into its partition");
    assert_eq!(partition_holding(&db, key(runs[2])).await, "t_timer_task_default");
    let (fires, total) = db.list_fires(t.id, None, 0, 10).await.unwrap();
    assert_eq!(total, 3);
    assert!(fires.iter().all(|f| f.output == "before"));

    // New fires get ids past the old ones, and the old ones still claim.
    let new = insert_into(&db, t.id, &[now + 1_000], now).await;
    let max_before = before.iter().map(|(id, _)| *id).max().unwrap();
    assert!(fire_id(&db, new[0]).await > max_before);
    let claimed = db.claim(&[key(now), new[0]], "node-a:1", 60_000, now).await.unwrap().claimed;
    assert_eq!(claimed.len(), 2);
}

// ---- A plan racing an update of its timer ----------------------------------

/// A plan of timer `t`'s fire at `T0 + 1 s`, made from `t` as given.
fn stale_plan(t: &xtimer_core::timer::Timer) -> Vec<xtimer_store::PlannedFire> {
    let fire = NewFire { key: FireKey { timer_id: t.id, run_ms: T0 + 1_000 }, app: APP.into() };
    vec![xtimer_store::PlannedFire { fire, timer_modified: t.modify_time, scheduled_ms: None }]
}

/// READ COMMITTED would read the timer as it was before an update still in
/// flight, so a plain join would insert the old definition's fire and
/// commit it after the update's delete of pending fires looked. The plan's
/// writes wait for the update instead and then compare the committed
/// `modify_time`: nothing of the old definition is written.
#[tokio::test]
async fn a_plan_waits_for_an_update_in_flight_and_then_writes_nothing() {
    use xtimer_store::NextRun;
    let db = Arc::new(fresh_database().await);
    let t = db.create_timer(&helpers::new_timer(APP, "t", TimerStatus::Enabled), T0).await.unwrap();
    let touch = "UPDATE t_timer SET modify_time = $1, next_run = 0 WHERE timer_id = $2";

    let mut update = pool(&db).begin().await.unwrap();
    sqlx::query(touch).bind(T0 + 1).bind(t.id).execute(&mut *update).await.unwrap();
    let stale = stale_plan(&t);
    let insert = tokio::spawn({
        let db = db.clone();
        async move { db.insert_planned_fires(&stale, T0 + 1).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!insert.is_finished(), "the insert waits for the update in flight");
    update.commit().await.unwrap();
    assert_eq!(insert.await.unwrap().unwrap(), 0, "then reads the new definition: nothing inserted");
    assert!(db.run_times_between(t.id, 0, i64::MAX).await.unwrap().is_empty());

    let mut update = pool(&db).begin().await.unwrap();
    sqlx::query(touch).bind(T0 + 2).bind(t.id).execute(&mut *update).await.unwrap();
    let stale = [NextRun { timer_id: t.id, run_ms: Some(T0 + 86_400_000), timer_modified: T0 + 1 }];
    let moved = tokio::spawn({
        let db = db.clone();
        async move { db.set_planned_next_runs(&stale).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!moved.is_finished(), "the next-fire move waits for the update in flight");
    update.commit().await.unwrap();
    moved.await.unwrap().unwrap();
    let due = db.due_timers(T0 + 60_000, 10).await.unwrap();
    assert_eq!(due.len(), 1, "the updated timer is still marked for expansion");
}

/// How many times `t_timer` was analyzed other than by autovacuum.
async fn analyzed(db: &Database) -> i64 {
    sqlx::query_scalar("SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 't_timer'::regclass")
        .fetch_one(pool(db))
        .await
        .unwrap()
}

/// After a bulk create, the finisher's pass refreshes `t_timer`'s planner
/// statistics before it runs (stale ones planned its statement as a scan of
/// every enabled timer); with nothing changed it leaves them be.
#[tokio::test]
async fn a_finisher_pass_after_a_bulk_create_analyzes_the_timers_first() {
    let db = fresh_database().await;
    sqlx::query("ANALYZE t_timer").execute(pool(&db)).await.unwrap();
    let before = analyzed(&db).await;
    let now = wall_now();
    assert_eq!(db.complete_ended(&[1], now).await.unwrap(), 0);
    assert_eq!(analyzed(&db).await, before, "fresh statistics are left be");

    let quota = xtimer_store::Quota { timers_per_app: 1_000_000, fires_per_minute_per_app: 1_000_000 };
    for batch in 0..3 {
        let timers: Vec<_> =
            (0..1_000).map(|i| helpers::new_timer(APP, &format!("bulk-{batch}-{i}"), TimerStatus::Disabled)).collect();
        assert!(db.create_each(&timers, now, &quota).await.unwrap().iter().all(Result::is_ok));
    }
    // A connection's counts reach the statistics views within seconds.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert_eq!(db.complete_ended(&[1], now).await.unwrap(), 0);
        if analyzed(&db).await > before {
            break;
        }
        assert!(Instant::now() < deadline, "t_timer was not analyzed after 3,000 creates");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let estimate: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE oid = 't_timer'::regclass")
        .fetch_one(pool(&db))
        .await
        .unwrap();
    assert_eq!(estimate, 3_000.0, "the planner counts the new rows");
}

/// `url` with a host that refuses connections (a free port) put before its own.
pub fn with_a_dead_host_first(url: &str) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (scheme, rest) = url.split_once("://").unwrap();
    let (userinfo, hosts) = rest.rsplit_once('@').map_or((String::new(), rest), |(u, h)| (format!("{u}@"), h));
    format!("{scheme}://{userinfo}127.0.0.1:{port},{hosts}")
}

/// A libpq multi-host URL whose first host is down: the node connects to
/// the next one that takes writes, and works.
#[tokio::test]
async fn a_multi_host_url_connects_past_a_host_that_is_down() {
    let url = with_a_dead_host_first(&database_url());
    let url = format!("{url}{}target_session_attrs=read-write", if url.contains('?') { '&' } else { '?' });
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let db = postgres::connect(&DatabaseConfig { url, max_connections: 2 }, Some(&schema)).await.unwrap();
    let created = db.create_timer(&helpers::new_timer(APP, "multi-host", TimerStatus::Enabled), T0).await.unwrap();
    assert_eq!(db.get_timer(created.id).await.unwrap().map(|t| t.id), Some(created.id));
    db.close().await;
}
