//! The MySQL backend: the repositories on a fresh database of the server at
//! `XTIMER_TEST_MYSQL_URL` (MySQL 8 or MariaDB), with the in-process shard
//! index and locks (the Redis half has its own backend). Also the tests
//! only a server needs: concurrent claimers and holders, concurrent first
//! counts of an app's usage, nodes migrating at once, and a clear error for
//! an unreachable server.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use xtimer_core::config::DatabaseConfig;
use xtimer_core::fire::FireKey;
use xtimer_core::task::{TaskData, TaskScheduleCfg, TaskStatus};
use xtimer_core::timer::TimerStatus;
use xtimer_store::tasks::{Positions, Registration};
use xtimer_store::{mysql, Database, TaskStore, TimerRepo};
use xtimer_store::{Error, NewFire, Quota, Refusal};

use crate::backend_pg::chain;
use crate::helpers::{self, new_timer, timer, Backend, APP, T0};

/// The test server; a throwaway local one by default (scripts/test starts one).
pub fn database_url() -> String {
    std::env::var("XTIMER_TEST_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:13306/mysql".into())
}

/// A fresh database `t_<random hex>` on the test server, migrated.
async fn fresh(max_connections: u32) -> Database {
    let url = database_url();
    let database = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections };
    match mysql::connect(&config, Some(&database)).await {
        Ok(db) => db,
        Err(e) => panic!("MySQL at {url} (set XTIMER_TEST_MYSQL_URL): {}", chain(&e)),
    }
}

/// The repositories on a fresh MySQL database, with the embedded shard
/// index and locks on a `ManualClock` at [`T0`] (see `backend_pg::postgres`
/// for why it starts from the embedded backend).
pub async fn mysql() -> Backend {
    let repo = Arc::new(fresh(4).await);
    let mut backend = helpers::embedded().await;
    backend.timers = repo.clone();
    backend.nodes = repo.clone();
    backend.notifications = repo.clone();
    backend.db = (*repo).clone();
    backend.fires = repo;
    backend
}

/// The pool of a MySQL [`Database`].
fn pool(db: &Database) -> &sqlx::MySqlPool {
    match db {
        Database::Mysql(pool) => pool,
        _ => unreachable!("connected to MySQL"),
    }
}

#[tokio::test]
async fn concurrent_claims_split_the_fires_without_overlap() {
    let b = mysql().await;
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
async fn concurrent_holds_never_share_a_task_and_take_only_due_ones() {
    let store = TaskStore::new(fresh(8).await);
    let cfg = TaskScheduleCfg { task_type: "mail".into(), schedule_limit: 100, ..TaskScheduleCfg::default() };
    let Registration::Registered(pos) = store.register(&cfg, None, T0).await.unwrap() else { panic!("registers") };
    assert_eq!(pos, Positions { begin: 1, end: 1 });
    let now_s = T0 / 1_000;
    let task = |i: i64, order_time: i64| TaskData {
        task_id: format!("t{i:04}"),
        task_type: "mail".into(),
        status: TaskStatus::Pending.code(),
        order_time,
        ..TaskData::default()
    };
    let mut tasks: Vec<TaskData> = (0..1_000).map(|i| task(i, now_s - 1_000 + i)).collect();
    tasks.push(task(9_999, now_s + 3_600));
    store.insert("mail", 1, &tasks, T0).await.unwrap();
    store.insert("mail", 1, &tasks[..10], T0).await.unwrap();
    assert_eq!(store.count("mail", 1).await.unwrap(), 1_001, "a task id is inserted once");

    let mut holders = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let store = store.clone();
        holders.spawn(async move {
            let mut mine = Vec::new();
            loop {
                let batch = store.hold("mail", pos, 50, T0).await.unwrap();
                if batch.is_empty() {
                    return mine;
                }
                assert!(batch.windows(2).all(|w| w[0].order_time <= w[1].order_time), "oldest first");
                assert!(batch.iter().all(|t| t.status == TaskStatus::Processing.code()));
                mine.extend(batch.into_iter().map(|t| t.task_id));
            }
        });
    }
    let mut seen = HashSet::new();
    while let Some(mine) = holders.join_next().await {
        for id in mine.unwrap() {
            assert!(seen.insert(id.clone()), "{id} held twice");
        }
    }
    assert_eq!(seen.len(), 1_000, "every due task held once");
    assert!(!seen.contains("t9999"), "a task whose order_time has not come stays");
    let stored = store.get("mail", 1, "t0007").await.unwrap().unwrap();
    assert_eq!((stored.data.status, stored.modify_ms), (TaskStatus::Processing.code(), T0));
}

#[tokio::test]
async fn a_hold_takes_the_next_due_tasks_in_place_of_ones_other_transactions_lock() {
    let db = fresh(4).await;
    let store = TaskStore::new(db.clone());
    let cfg = TaskScheduleCfg { task_type: "mail".into(), schedule_limit: 100, ..TaskScheduleCfg::default() };
    let Registration::Registered(pos) = store.register(&cfg, None, T0).await.unwrap() else { panic!("registers") };
    let now_s = T0 / 1_000;
    let tasks: Vec<TaskData> = (0..100)
        .map(|i| TaskData {
            task_id: format!("t{i:04}"),
            task_type: "mail".into(),
            status: TaskStatus::Pending.code(),
            order_time: now_s - 1_000 + i,
            ..TaskData::default()
        })
        .collect();
    store.insert("mail", 1, &tasks, T0).await.unwrap();
    let ids = |held: Vec<TaskData>| held.into_iter().map(|t| t.task_id).collect::<Vec<_>>();
    let expected = |range: std::ops::Range<i64>| range.map(|i| format!("t{i:04}")).collect::<Vec<_>>();

    // Another node's hold has locked the ten oldest, not yet committed:
    // they are still the oldest pending to a plain read.
    let other = lock_tasks(&db, &expected(0..10)).await;
    assert_eq!(ids(store.hold("mail", pos, 20, T0).await.unwrap()), expected(10..30), "the next twenty instead");
    other.rollback().await.unwrap();
    let mut after = expected(0..10);
    after.extend(expected(30..40));
    assert_eq!(ids(store.hold("mail", pos, 20, T0).await.unwrap()), after, "released, they come first again");

    // Locked ones fill the first read of a hold of five: its second read
    // reads further, and it takes the first five free there.
    let other = lock_tasks(&db, &expected(40..55)).await;
    assert_eq!(ids(store.hold("mail", pos, 5, T0).await.unwrap()), expected(55..60));
    other.rollback().await.unwrap();
}

/// A transaction (as another node's hold) that has locked the tasks
/// `task_ids` of table `t_mail_task_1`, by equality on the unique key (a
/// range would lock the row after it too).
async fn lock_tasks(db: &Database, task_ids: &[String]) -> sqlx::Transaction<'static, sqlx::MySql> {
    let mut tx = pool(db).begin().await.unwrap();
    let list = task_ids.iter().map(|id| format!("'{id}'")).collect::<Vec<_>>().join(", ");
    sqlx::query(&format!("SELECT id FROM t_mail_task_1 WHERE task_id IN ({list}) FOR UPDATE"))
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    tx
}

#[tokio::test]
async fn concurrent_first_counts_of_an_app_neither_deadlock_nor_pass_the_quota() {
    let db = Arc::new(fresh(24).await);
    let quota = Quota { timers_per_app: 10, ..Quota::default() };
    let before = [new_timer(APP, "old-1", TimerStatus::Enabled), new_timer(APP, "old-2", TimerStatus::Enabled)];
    db.create_timers_within(&before, T0, &quota).await.unwrap();
    // As an app from before the counters: its timers, no usage row.
    sqlx::query("DELETE FROM t_app_usage").execute(pool(&db)).await.unwrap();

    // Each create its own transaction, all counting the app first at once.
    let mut creates = tokio::task::JoinSet::new();
    for i in 0..16 {
        let db = db.clone();
        creates.spawn(async move {
            db.create_each(&[new_timer(APP, &format!("new-{i}"), TimerStatus::Enabled)], T0, &quota).await
        });
    }
    let (mut made, mut refused) = (0, 0);
    while let Some(outcome) = creates.join_next().await {
        match outcome.unwrap().unwrap_or_else(|e| panic!("no create fails: {}", chain(&e)))[0] {
            Ok(_) => made += 1,
            Err(Refusal::TooManyTimers { max: 10, .. }) => refused += 1,
            ref other => panic!("{other:?}"),
        }
    }
    assert_eq!((made, refused), (8, 8), "the quota of 10, 2 of them old");
    let (timers, cron_fpm): (i64, i64) = sqlx::query_as("SELECT timers, cron_fpm FROM t_app_usage WHERE app = ?")
        .bind(APP)
        .fetch_one(pool(&db))
        .await
        .unwrap();
    // Every timer here fires every 5 s: 12 a minute.
    assert_eq!((timers, cron_fpm), (10, 10 * 12), "counted once, then kept");
}

#[tokio::test]
async fn an_unreachable_server_fails_fast_and_says_which() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("mysql://xtimer:secret@127.0.0.1:{port}/xtimer");
    let started = Instant::now();
    let err = mysql::connect(&DatabaseConfig { url, max_connections: 2 }, None).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(matches!(err, Error::Database(_)), "{err:?}");
    let message = chain(&err);
    assert!(message.contains(&format!("mysql://xtimer:***@127.0.0.1:{port}/xtimer")), "{message}");
    assert!(!message.contains("secret"), "{message}");
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[tokio::test]
async fn nodes_starting_at_once_create_and_migrate_one_database() {
    let database = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: database_url(), max_connections: 2 };
    let mut nodes = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (config, database) = (config.clone(), database.clone());
        nodes.spawn(async move { mysql::connect(&config, Some(&database)).await });
    }
    let mut repos = Vec::new();
    while let Some(started) = nodes.join_next().await {
        repos.push(started.unwrap().unwrap_or_else(|e| panic!("every node starts: {}", chain(&e))));
    }
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(pool(&repos[0]))
        .await
        .unwrap();
    assert_eq!(applied as usize, sqlx::migrate!("../migrations/mysql").iter().count(), "each migration once");
    let database_of: String = sqlx::query_scalar("SELECT DATABASE()").fetch_one(pool(&repos[3])).await.unwrap();
    assert_eq!(database_of, database);
}

/// A migrator that crashed holding the lock row (no renewal) holds the
/// others back until its lock expires, no longer; the row is gone after.
#[tokio::test]
async fn a_crashed_migrators_lock_row_is_taken_over_once_expired() {
    use sqlx::Connection;
    let database = format!("t_{:016x}", rand::random::<u64>());
    let url = database_url();
    let mut conn = sqlx::MySqlConnection::connect(&url).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE `{database}`")).execute(&mut conn).await.unwrap();
    sqlx::query(&format!(
        "CREATE TABLE `{database}`.t_migration_lock (id INT NOT NULL PRIMARY KEY, owner VARCHAR(100) NOT NULL, \
         expires_at BIGINT NOT NULL)"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query(&format!(
        "INSERT INTO `{database}`.t_migration_lock VALUES \
         (1, 'crashed', CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + 1500)"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let started = Instant::now();
    let config = DatabaseConfig { url, max_connections: 2 };
    let db = mysql::connect(&config, Some(&database)).await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1_000), "waited for the lock to expire: {waited:?}");
    assert!(waited < Duration::from_secs(10), "then took it over: {waited:?}");
    let applied: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success").fetch_one(pool(&db)).await.unwrap();
    assert_eq!(applied as usize, sqlx::migrate!("../migrations/mysql").iter().count());
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t_migration_lock").fetch_one(pool(&db)).await.unwrap();
    assert_eq!(rows, 0, "the lock released");
}

/// Plain MariaDB (or MySQL 8) is no Galera node: sessions read as ever.
#[tokio::test]
async fn a_server_that_is_not_a_galera_node_sets_no_sync_wait() {
    let db = fresh(2).await;
    let wsrep: Option<(String, String)> =
        sqlx::query_as("SHOW VARIABLES LIKE 'wsrep_on'").fetch_optional(pool(&db)).await.unwrap();
    if let Some((_, on)) = wsrep {
        assert_eq!(on, "OFF", "the test server is no Galera node");
        let wait: (String, String) =
            sqlx::query_as("SHOW SESSION VARIABLES LIKE 'wsrep_sync_wait'").fetch_one(pool(&db)).await.unwrap();
        assert_eq!(wait.1, "0", "untouched");
    }
}

#[tokio::test]
async fn a_deadlock_victim_is_run_again() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let db = fresh(4).await;
    let pool = pool(&db).clone();
    for sql in [
        "CREATE TABLE lock_pair (id INT PRIMARY KEY, v INT NOT NULL)",
        "CREATE TABLE ballast (id INT PRIMARY KEY)",
        "INSERT INTO lock_pair VALUES (1, 0), (2, 0)",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    // A transaction that holds row 1 and has written much: InnoDB rolls
    // back the lighter side of a deadlock, which is the one under test.
    let mut heavy = pool.begin().await.unwrap();
    sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 1").execute(&mut *heavy).await.unwrap();
    let rows: Vec<String> = (0..500).map(|i| format!("({i})")).collect();
    sqlx::query(&format!("INSERT INTO ballast VALUES {}", rows.join(","))).execute(&mut *heavy).await.unwrap();

    let (attempts, holds_2) = (AtomicU32::new(0), tokio::sync::Notify::new());
    let light = mysql::retry_deadlocks(|| async {
        attempts.fetch_add(1, Ordering::SeqCst);
        let mut tx = pool.begin().await?;
        sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 2").execute(&mut *tx).await?;
        holds_2.notify_one();
        sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 1").execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    });
    let closing = async {
        holds_2.notified().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Row 2 is the light transaction's, which waits for row 1: a deadlock.
        sqlx::query("UPDATE lock_pair SET v = v + 1 WHERE id = 2").execute(&mut *heavy).await.unwrap();
        heavy.commit().await.unwrap();
    };
    let (light, ()) = tokio::join!(light, closing);
    light.expect("run again after the deadlock");
    assert_eq!(attempts.load(Ordering::SeqCst), 2, "the victim ran twice");
    let v: Vec<i32> = sqlx::query_scalar("SELECT v FROM lock_pair ORDER BY id").fetch_all(&pool).await.unwrap();
    assert_eq!(v, [2, 2], "both transactions' writes, once each");
}

/// A plan of a timer whose update is in flight waits for it, then writes
/// nothing of the old definition (READ COMMITTED alone would read the row
/// as before the update: see `backend_pg`'s test of the same name).
#[tokio::test]
async fn a_plan_waits_for_an_update_in_flight_and_then_writes_nothing() {
    use xtimer_store::{FireRepo, NextRun, PlannedFire};
    let db = Arc::new(fresh(4).await);
    let t = db.create_timer(&new_timer(APP, "t", TimerStatus::Enabled), T0).await.unwrap();
    let touch = "UPDATE t_timer SET modify_time = ?, next_run = 0 WHERE timer_id = ?";

    let mut update = pool(&db).begin().await.unwrap();
    sqlx::query(touch).bind(T0 + 1).bind(t.id).execute(&mut *update).await.unwrap();
    let fire = NewFire { key: FireKey { timer_id: t.id, run_ms: T0 + 1_000 }, app: APP.into() };
    let stale = vec![PlannedFire { scheduled_ms: None, fire, timer_modified: t.modify_time }];
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

/// A multi-host URL whose first host is down: the node connects to the
/// next one that takes writes (`read_only` off), and works.
#[tokio::test]
async fn a_multi_host_url_connects_past_a_host_that_is_down() {
    let url = crate::backend_pg::with_a_dead_host_first(&database_url());
    let database = format!("t_{:016x}", rand::random::<u64>());
    let db = mysql::connect(&DatabaseConfig { url, max_connections: 2 }, Some(&database)).await.unwrap();
    let created = db.create_timer(&new_timer(APP, "multi-host", TimerStatus::Enabled), T0).await.unwrap();
    assert_eq!(db.get_timer(created.id).await.unwrap().map(|t| t.id), Some(created.id));
    db.close().await;
}
