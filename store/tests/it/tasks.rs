//! `TaskStore` holds of a `fair_by_user` type, on every SQL backend: due
//! tasks are taken round-robin across user_ids, each user's oldest first;
//! a type without the flag is still held strictly oldest first; the flag
//! is kept in the cfg.
//!
//! Like `calendars`, this file opens each database itself (SQLite on a temp
//! file, PostgreSQL and MySQL on a fresh schema or database of the servers
//! the other backends use) and runs each body on all three.

use std::collections::{HashMap, HashSet};

use xtimer_core::config::DatabaseConfig;
use xtimer_core::task::{TaskData, TaskScheduleCfg, TaskStatus};
use xtimer_store::tasks::{Positions, Registration};
use xtimer_store::{Database, TaskStore};

use crate::backend_pg::chain;
use crate::helpers::T0;

/// A backend's task store, and what keeps its storage alive.
struct Tasks {
    store: TaskStore,
    _keep: Option<tempfile::TempDir>,
}

/// SQLite on a fresh temp file.
async fn embedded() -> Tasks {
    let dir = tempfile::tempdir().expect("temp dir");
    let config =
        DatabaseConfig { url: format!("sqlite://{}", dir.path().join("xtimer.db").display()), max_connections: 4 };
    let db = Database::connect(&config).await.expect("SQLite opens");
    Tasks { store: TaskStore::new(db), _keep: Some(dir) }
}

/// A fresh schema `t_<random hex>` of the PostgreSQL test server, migrated.
async fn postgres() -> Tasks {
    let url = crate::backend_pg::database_url();
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections: 8 };
    match xtimer_store::postgres::connect(&config, Some(&schema)).await {
        Ok(db) => Tasks { store: TaskStore::new(db), _keep: None },
        Err(e) => panic!("PostgreSQL at {url} (set XTIMER_TEST_DATABASE_URL): {}", chain(&e)),
    }
}

/// A fresh database `t_<random hex>` of the MySQL (or MariaDB) test server, migrated.
async fn mysql() -> Tasks {
    let url = crate::backend_mysql::database_url();
    let database = format!("t_{:016x}", rand::random::<u64>());
    let config = DatabaseConfig { url: url.clone(), max_connections: 8 };
    match xtimer_store::mysql::connect(&config, Some(&database)).await {
        Ok(db) => Tasks { store: TaskStore::new(db), _keep: None },
        Err(e) => panic!("MySQL at {url} (set XTIMER_TEST_MYSQL_URL): {}", chain(&e)),
    }
}

/// One `#[tokio::test]` per body and backend: `tasks::<backend>::<body>`.
macro_rules! on_every_backend {
    ($($body:ident),* $(,)?) => {
        on_every_backend!(@backend embedded: $($body),*);
        on_every_backend!(@backend postgres: $($body),*);
        on_every_backend!(@backend mysql: $($body),*);
    };
    (@backend $backend:ident: $($body:ident),*) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $body() {
                    let tasks = super::$backend().await;
                    super::$body(&tasks.store).await;
                }
            )*
        }
    };
}

on_every_backend!(
    a_fair_type_is_held_round_robin_across_users,
    a_type_without_the_flag_is_held_strictly_oldest_first,
    concurrent_fair_holds_never_share_a_task,
    the_cfg_keeps_fair_by_user_and_a_change_without_it_keeps_it,
);

/// Due by [`T0`], in Unix seconds.
const NOW_S: i64 = T0 / 1_000;

/// Registers `task_type` (fair or not) and returns its positions.
async fn register(store: &TaskStore, task_type: &str, fair: bool) -> Positions {
    let cfg = TaskScheduleCfg {
        task_type: task_type.into(),
        schedule_limit: 100,
        fair_by_user: Some(fair),
        ..TaskScheduleCfg::default()
    };
    match store.register(&cfg, None, T0).await.unwrap() {
        Registration::Registered(pos) => pos,
        other => panic!("{task_type} registers: {other:?}"),
    }
}

/// A pending task `id` of `user` at `order_time`.
fn task(task_type: &str, user: &str, id: String, order_time: i64) -> TaskData {
    TaskData {
        user_id: user.into(),
        task_id: id,
        task_type: task_type.into(),
        status: TaskStatus::Pending.code(),
        order_time,
        ..TaskData::default()
    }
}

/// User `a` has 2,000 due tasks (two a second, the oldest 3,000 s ago);
/// `b` has 10 and `c` 3, all created after every one of `a`'s, and `b` one
/// more that is not due yet. Task ids read `<user><n>`, n from 0 oldest.
async fn crowd(store: &TaskStore, task_type: &str) {
    let mut tasks: Vec<TaskData> =
        (0..2_000).map(|i| task(task_type, "a", format!("a{i:04}"), NOW_S - 3_000 + i / 2)).collect();
    tasks.extend((0..10).map(|i| task(task_type, "b", format!("b{i:04}"), NOW_S - 900 + i)));
    tasks.extend((0..3).map(|i| task(task_type, "c", format!("c{i:04}"), NOW_S - 500 + i * 100)));
    tasks.push(task(task_type, "b", "b_later".into(), NOW_S + 3_600));
    store.insert(task_type, 1, &tasks, T0).await.unwrap();
}

fn ids(tasks: &[TaskData]) -> Vec<&str> {
    tasks.iter().map(|t| t.task_id.as_str()).collect()
}

async fn a_fair_type_is_held_round_robin_across_users(store: &TaskStore) {
    let pos = register(store, "fair_mail", true).await;
    crowd(store, "fair_mail").await;

    let first = store.hold_fair_by_user("fair_mail", pos, 20, T0).await.unwrap();
    // Round k has every user's k-th oldest task, oldest first (a's, then
    // b's, then c's); `c` runs out after round 3.
    let mut want = Vec::new();
    for round in 0..10 {
        want.push(format!("a{round:04}"));
        want.push(format!("b{round:04}"));
        if round < 3 {
            want.push(format!("c{round:04}"));
        }
    }
    let want: Vec<&str> = want.iter().map(String::as_str).take(20).collect();
    assert_eq!(ids(&first), want, "round-robin across users");
    assert!(first.iter().all(|t| t.status == TaskStatus::Processing.code() && t.task_type == "fair_mail"));

    // The next hold ranks what is left afresh: b's last two come in its
    // first two rounds.
    let second = store.hold_fair_by_user("fair_mail", pos, 5, T0).await.unwrap();
    assert_eq!(ids(&second), ["a0009", "b0008", "a0010", "b0009", "a0011"]);

    // The rest, in holds of 500: every due task once, each user's in
    // order_time order, b's task that is not due left pending.
    let mut held = first;
    held.extend(second);
    loop {
        let batch = store.hold_fair_by_user("fair_mail", pos, 500, T0).await.unwrap();
        if batch.is_empty() {
            break;
        }
        held.extend(batch);
    }
    assert_eq!(held.len(), 2_013, "every due task held");
    assert_eq!(held.iter().map(|t| &t.task_id).collect::<HashSet<_>>().len(), 2_013, "each once");
    let mut by_user: HashMap<&str, Vec<&str>> = HashMap::new();
    for t in &held {
        by_user.entry(t.user_id.as_str()).or_default().push(t.task_id.as_str());
    }
    for (user, got) in by_user {
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(got, sorted, "{user}'s tasks in order_time order");
    }
    let later = store.get("fair_mail", 1, "b_later").await.unwrap().unwrap();
    assert_eq!(later.data.status, TaskStatus::Pending.code(), "a task not yet due stays");
}

async fn a_type_without_the_flag_is_held_strictly_oldest_first(store: &TaskStore) {
    let pos = register(store, "plain_mail", false).await;
    crowd(store, "plain_mail").await;
    let first = store.hold("plain_mail", pos, 20, T0).await.unwrap();
    assert!(first.iter().all(|t| t.user_id == "a"), "a's are older: {:?}", ids(&first));
    let mut orders: Vec<i64> = first.iter().map(|t| t.order_time).collect();
    assert!(orders.windows(2).all(|w| w[0] <= w[1]), "oldest first: {orders:?}");
    orders.dedup();
    assert_eq!(orders, (0..10).map(|i| NOW_S - 3_000 + i).collect::<Vec<_>>(), "the 20 oldest");
    // b's and c's come only after all of a's.
    let rest = store.hold("plain_mail", pos, 2_000, T0).await.unwrap();
    assert_eq!(rest.len(), 1_993);
    assert!(rest[..1_980].iter().all(|t| t.user_id == "a"), "a's other 1,980 first");
    let last: Vec<&str> = ids(&rest[1_980..]);
    assert_eq!(&last[..2], ["b0000", "b0001"]);
    assert_eq!(&last[10..], ["c0000", "c0001", "c0002"]);
}

async fn concurrent_fair_holds_never_share_a_task(store: &TaskStore) {
    let pos = register(store, "fair_many", true).await;
    // 20 users with 50 due tasks each.
    let tasks: Vec<TaskData> = (0..1_000)
        .map(|i| task("fair_many", &format!("u{:02}", i % 20), format!("t{i:04}"), NOW_S - 1_000 + i / 20))
        .collect();
    store.insert("fair_many", 1, &tasks, T0).await.unwrap();
    let mut holders = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let store = store.clone();
        holders.spawn(async move {
            let mut mine = Vec::new();
            let mut empty = 0;
            // A hold may find every task it ranked taken by another: it
            // returns fewer, and the next one ranks afresh.
            while empty < 3 {
                let batch = store.hold_fair_by_user("fair_many", pos, 30, T0).await.unwrap();
                if batch.is_empty() {
                    empty += 1;
                    continue;
                }
                empty = 0;
                assert!(batch.iter().all(|t| t.status == TaskStatus::Processing.code()));
                mine.extend(batch.into_iter().map(|t| t.task_id));
            }
            mine
        });
    }
    let mut seen = HashSet::new();
    while let Some(mine) = holders.join_next().await {
        for id in mine.unwrap() {
            assert!(seen.insert(id.clone()), "{id} held twice");
        }
    }
    assert_eq!(seen.len(), 1_000, "every task held once");
}

async fn the_cfg_keeps_fair_by_user_and_a_change_without_it_keeps_it(store: &TaskStore) {
    register(store, "fair_cfg", true).await;
    let plain = TaskScheduleCfg { task_type: "plain_cfg".into(), schedule_limit: 10, ..TaskScheduleCfg::default() };
    assert!(matches!(store.register(&plain, None, T0).await.unwrap(), Registration::Registered(_)));
    let fair_of =
        |task_type: &'static str| async move { store.cfg(task_type).await.unwrap().unwrap().cfg.fair_by_user };
    assert_eq!(fair_of("fair_cfg").await, Some(true));
    assert_eq!(fair_of("plain_cfg").await, Some(false), "left out on register: false");

    // A change that leaves it out keeps it; one that sends it sets it.
    let mut cfg = store.cfg("fair_cfg").await.unwrap().unwrap().cfg;
    cfg.schedule_limit = 7;
    cfg.fair_by_user = None;
    assert!(store.set_cfg(&cfg, T0 + 1).await.unwrap());
    let now = store.cfg("fair_cfg").await.unwrap().unwrap().cfg;
    assert_eq!((now.schedule_limit, now.fair_by_user), (7, Some(true)));
    cfg.fair_by_user = Some(false);
    assert!(store.set_cfg(&cfg, T0 + 2).await.unwrap());
    assert_eq!(fair_of("fair_cfg").await, Some(false));
    let mut plain = store.cfg("plain_cfg").await.unwrap().unwrap().cfg;
    plain.fair_by_user = Some(true);
    assert!(store.set_cfg(&plain, T0 + 3).await.unwrap());
    let listed: Vec<(String, Option<bool>)> =
        store.cfgs().await.unwrap().into_iter().map(|r| (r.cfg.task_type, r.cfg.fair_by_user)).collect();
    assert_eq!(listed, [("fair_cfg".to_string(), Some(false)), ("plain_cfg".to_string(), Some(true))]);
}
