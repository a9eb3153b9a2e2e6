//! Many nodes on one PostgreSQL (or MySQL) + Redis (or Redis Cluster):
//! every fire once, under crashes.
//!
//! Each test starts its own database server and Redis (so it can kill,
//! flush or stop them) and runs `xtimer serve` processes against them, with
//! a callback receiver in the test. Real clock, generous waits. Each test
//! runs once per database ([`on_both_databases!`]); MariaDB stands in for
//! MySQL.

mod flows;
mod nodes;
mod proxy;
mod servers;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use sqlx::Row;
use xtimer::receiver::Receiver;

use nodes::ProcNode;
use servers::{Mariadb, Postgres, Redis, RedisCluster};

/// Which database server a test runs on.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Postgres,
    Mysql,
}

/// A throwaway database server of either kind.
enum Db {
    Postgres(Postgres),
    Mysql(Mariadb),
}

impl Db {
    fn start(kind: Kind) -> Self {
        match kind {
            Kind::Postgres => Self::Postgres(Postgres::start()),
            Kind::Mysql => Self::Mysql(Mariadb::start()),
        }
    }

    fn url(&self) -> &str {
        match self {
            Self::Postgres(db) => &db.url,
            Self::Mysql(db) => &db.url,
        }
    }

    fn down(&self) {
        match self {
            Self::Postgres(db) => db.down(),
            Self::Mysql(db) => db.down(),
        }
    }

    fn up(&self) {
        match self {
            Self::Postgres(db) => db.up(),
            Self::Mysql(db) => db.up(),
        }
    }

    /// (status, owner) of every fire due in [from, to).
    async fn fires_between(&self, from: i64, to: i64) -> Vec<(i64, Option<String>)> {
        match self {
            Self::Postgres(db) => {
                let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
                sqlx::query(
                    "SELECT status::BIGINT AS status, owner FROM t_timer_task WHERE run_timer >= $1 AND run_timer < $2",
                )
                .bind(from)
                .bind(to)
                .fetch_all(&pool)
                .await
                .unwrap()
                .iter()
                .map(|row| (row.get("status"), row.get("owner")))
                .collect()
            }
            Self::Mysql(db) => {
                let pool = sqlx::MySqlPool::connect(&db.url).await.unwrap();
                sqlx::query(
                    "SELECT CAST(status AS SIGNED) AS status, owner FROM t_timer_task WHERE run_timer >= ? AND run_timer < ?",
                )
                .bind(from)
                .bind(to)
                .fetch_all(&pool)
                .await
                .unwrap()
                .iter()
                // Unchecked: MySQL reports byte-compared (`_bin`) text as binary.
                .map(|row| (row.get("status"), row.try_get_unchecked("owner").unwrap()))
                .collect()
            }
        }
    }
}

/// A place among the cluster tests running at once: at most two, whatever
/// the test threads (`scripts/test` runs three for the end-to-end tests):
/// each starts two or three nodes under load, and more at once would make
/// the 2-core machine the thing under test.
pub struct Slot(usize);

static RUNNING: std::sync::Mutex<usize> = std::sync::Mutex::new(0);
static FREED: std::sync::Condvar = std::sync::Condvar::new();

impl Slot {
    /// Waits for a place (blocking: taken before the test's first await).
    pub fn take() -> Slot {
        Self::places(1)
    }

    /// Waits until no other cluster test runs, and keeps them out: for
    /// the failovers that count on replication keeping up.
    pub fn alone() -> Slot {
        Self::places(2)
    }

    fn places(n: usize) -> Slot {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        while *running + n > 2 {
            running = FREED.wait(running).unwrap_or_else(|e| e.into_inner());
        }
        *running += n;
        Slot(n)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) -= self.0;
        FREED.notify_all();
    }
}

/// Runs each listed `async fn(Kind)` body as two tests, `postgres` and
/// `mysql`, under a module named after the body.
macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let _slot = crate::Slot::take();
                super::$name(super::Kind::Postgres).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                let _slot = crate::Slot::take();
                super::$name(super::Kind::Mysql).await
            }
        }
    )*};
}

on_both_databases!(
    three_nodes_fire_every_timer_once_and_share_the_shards,
    kill_9_of_a_node_mid_minute_loses_nothing_and_its_fires_are_taken_over,
    redis_flushall_mid_run_loses_nothing_and_repeats_nothing,
    a_database_down_for_ten_seconds_delays_fires_but_loses_and_repeats_none,
);

/// [`a_node_that_lost_its_database_steps_back_and_the_others_fire_on_time`]
/// on PostgreSQL (the step-back reads only the node's own heartbeats, the
/// same on every backend; MariaDB passed it too, and a whole run of both
/// costs CI three minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_postgres_steps_back_and_the_others_fire_on_time() {
    let _slot = crate::Slot::take();
    a_node_that_lost_its_database_steps_back_and_the_others_fire_on_time(Kind::Postgres).await
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// What a run looked like from the receiver and the database.
#[derive(Debug)]
struct Outcome {
    expected: usize,
    /// (timer, run) never delivered.
    lost: Vec<(i64, i64)>,
    /// Keys delivered more than once, with their run times.
    duplicates: Vec<(String, i64)>,
    /// Fires in the window not recorded succeeded.
    not_succeeded: usize,
    /// Fires recorded per node (from the final owner token).
    split: BTreeMap<String, usize>,
}

/// Creates `n` per-second timers through `node`, fires them over a window
/// of `seconds` starting shortly after, runs `during` at `at_s` seconds into
/// the window, waits for every fire and checks them.
async fn run_window(
    node: &ProcNode,
    db: &Db,
    rx: &Receiver,
    n: usize,
    seconds: i64,
    at_s: i64,
    during: impl std::future::Future<Output = ()>,
) -> Outcome {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(node.create_every_second(&format!("t{i}"), &rx.url("/hook")).await);
    }
    let start = (now_ms() / 1000 + 2) * 1000;
    let end = start + seconds * 1000;
    tokio::time::sleep(Duration::from_millis((start + at_s * 1000 - now_ms()).max(0) as u64)).await;
    during.await;
    let expected: HashSet<String> =
        ids.iter().flat_map(|id| (0..seconds).map(move |s| format!("{id}_{}", start + s * 1000))).collect();
    let in_window = |run: i64| run >= start && run < end;
    rx.wait_until(Duration::from_millis((end - now_ms()).max(0) as u64 + 60_000), |hits| {
        hits.iter().filter(|h| in_window(h.run_ms)).map(|h| &h.key).collect::<HashSet<_>>().len() >= expected.len()
    })
    .await;
    // Time for a repeated fire to show up, if there were one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for id in &ids {
        node.disable(*id).await;
    }

    let mut seen: HashMap<String, (usize, i64)> = HashMap::new();
    for h in rx.hits().iter().filter(|h| in_window(h.run_ms)) {
        seen.entry(h.key.clone()).or_insert((0, h.run_ms)).0 += 1;
    }
    let lost = expected
        .iter()
        .filter(|k| !seen.contains_key(*k))
        .map(|k| {
            let (id, run) = k.split_once('_').unwrap();
            (id.parse().unwrap(), run.parse().unwrap())
        })
        .collect();
    let duplicates = seen.iter().filter(|(_, (n, _))| *n > 1).map(|(k, (_, run))| (k.clone(), *run)).collect();

    let rows = db.fires_between(start, end).await;
    let mut split = BTreeMap::new();
    let mut not_succeeded = 0;
    for (status, owner) in rows.iter().cloned() {
        if status != 2 {
            not_succeeded += 1;
        }
        let node = owner.and_then(|o| o.rsplit_once(':').map(|(n, _)| n.to_string())).unwrap_or_default();
        *split.entry(node).or_insert(0) += 1;
    }
    assert_eq!(rows.len(), expected.len(), "one row per (timer, run time)");
    Outcome { expected: expected.len(), lost, duplicates, not_succeeded, split }
}

async fn three_nodes_fire_every_timer_once_and_share_the_shards(kind: Kind) {
    let (db, redis) = (Db::start(kind), Redis::start().await);
    let rx = Receiver::start(false).await.unwrap();
    let nodes = [
        ProcNode::start(db.url(), &redis.url, &[]).await,
        ProcNode::start(db.url(), &redis.url, &[]).await,
        ProcNode::start(db.url(), &redis.url, &[]).await,
    ];
    // The nodes share a minute's shards from the first minute that starts
    // after they are up (the minute they start in goes whole to the first to
    // tick). Up, between seconds 32 and 50 of a minute, the window (about
    // 3 s later, once the timers are made) crosses the next minute 7 to 25 s
    // into its 30 s; else wait for second 32 (the servers' start overlaps
    // the wait, where waiting first added it).
    let second = now_ms() / 1000 % 60;
    if !(32..50).contains(&second) {
        tokio::time::sleep(Duration::from_millis((32_000 - now_ms() % 60_000).rem_euclid(60_000) as u64)).await;
    }
    let out = run_window(&nodes[0], &db, &rx, 200, 30, 0, async {}).await;
    eprintln!("three nodes, 200 timers x 30 s: split by node {:?}", out.split);
    assert!(out.lost.is_empty(), "lost: {:?}", &out.lost[..out.lost.len().min(10)]);
    assert!(out.duplicates.is_empty(), "duplicates: {:?}", &out.duplicates[..out.duplicates.len().min(10)]);
    assert_eq!(out.not_succeeded, 0);
    assert_eq!(out.expected, 6_000);
    assert_eq!(out.split.len(), 3, "every node fired some: {:?}", out.split);
}

async fn kill_9_of_a_node_mid_minute_loses_nothing_and_its_fires_are_taken_over(kind: Kind) {
    let (db, redis) = (Db::start(kind), Redis::start().await);
    let rx = Receiver::start(false).await.unwrap();
    let mut victim = ProcNode::start(db.url(), &redis.url, &[]).await;
    let nodes = [ProcNode::start(db.url(), &redis.url, &[]).await, ProcNode::start(db.url(), &redis.url, &[]).await];
    let (mut killed_at, mut held) = (0, 0);
    let out = run_window(&nodes[0], &db, &rx, 50, 30, 10, async {
        // Kill it while it holds shards (its heartbeat reports them).
        for _ in 0..50 {
            held = victim.shards_held().await;
            if held > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        killed_at = now_ms();
        victim.kill9();
    })
    .await;
    eprintln!(
        "kill -9 at {killed_at} holding {held} shards: split {:?}, duplicates {}",
        out.split,
        out.duplicates.len()
    );
    assert!(held > 0, "the victim held shards when it was killed");
    assert!(out.lost.is_empty(), "lost: {:?}", &out.lost[..out.lost.len().min(10)]);
    assert_eq!(out.not_succeeded, 0);
    // Only fires the dead node had claimed (due within its claim-ahead and
    // callback timeout of the kill) may be delivered twice: at-least-once.
    for (key, run) in &out.duplicates {
        assert!((killed_at - 3_000..=killed_at + 1_000).contains(run), "duplicate {key} far from the kill");
    }
    // A takeover, with the default settings, is seconds: every fire of the
    // dead node's shards reached the receiver within 5 s of its time.
    let worst = rx.hits().iter().map(|h| h.lateness_ms()).fold(0.0, f64::max);
    eprintln!("worst lateness across the kill: {worst:.0} ms");
    assert!(worst <= 5_000.0, "a fire arrived {worst:.0} ms late");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_redis_cluster_three_nodes_lose_nothing_to_a_kill_9_and_a_masters_flushall() {
    let _slot = crate::Slot::take();
    let (db, redis) = (Db::start(Kind::Postgres), RedisCluster::start().await);
    let rx = Receiver::start(false).await.unwrap();
    let mut victim = ProcNode::start(db.url(), &redis.url, &[]).await;
    let nodes = [ProcNode::start(db.url(), &redis.url, &[]).await, ProcNode::start(db.url(), &redis.url, &[]).await];
    let (mut killed_at, mut held, mut spread) = (0, 0, Vec::new());
    let out = run_window(&nodes[0], &db, &rx, 50, 30, 10, async {
        spread = redis.keys_per_master();
        for _ in 0..50 {
            held = victim.shards_held().await;
            if held > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        killed_at = now_ms();
        victim.kill9();
        // Then one master loses its shards and locks, while the survivors take over.
        tokio::time::sleep(Duration::from_secs(3)).await;
        redis.flushall(0);
    })
    .await;
    let worst = rx.hits().iter().map(|h| h.lateness_ms()).fold(0.0, f64::max);
    eprintln!(
        "Redis Cluster: keys per master {spread:?}; kill -9 holding {held} shards, FLUSHALL of a master: \
         split {:?}, duplicates {}, worst lateness {worst:.0} ms",
        out.split,
        out.duplicates.len()
    );
    assert!(spread.iter().all(|&keys| keys > 0), "shards and locks on every master: {spread:?}");
    assert!(held > 0, "the victim held shards when it was killed");
    assert!(out.lost.is_empty(), "lost: {:?}", &out.lost[..out.lost.len().min(10)]);
    assert_eq!(out.not_succeeded, 0);
    // At-least-once: only fires the dead node had claimed may come twice.
    for (key, run) in &out.duplicates {
        assert!((killed_at - 3_000..=killed_at + 1_000).contains(run), "duplicate {key} far from the kill");
    }
}

async fn redis_flushall_mid_run_loses_nothing_and_repeats_nothing(kind: Kind) {
    let (db, redis) = (Db::start(kind), Redis::start().await);
    let rx = Receiver::start(false).await.unwrap();
    let nodes = [ProcNode::start(db.url(), &redis.url, &[]).await, ProcNode::start(db.url(), &redis.url, &[]).await];
    // The window starts about 2 s after now, and the flush comes 8 s into
    // it: started between seconds 38 and 45 of a minute, the flush comes
    // between seconds 48 and 56, so some of its minute's fires are due 3 s
    // after it and the window's last 4 to 8 s fall in the next minute,
    // whose shards are taken after it. Outside that span, wait for its
    // start (up to 53 s; one fixed second cost up to 60).
    let second_ms = now_ms() % 60_000;
    if !(38_000..45_000).contains(&second_ms) {
        tokio::time::sleep(Duration::from_millis((38_000 - second_ms).rem_euclid(60_000) as u64)).await;
    }
    let flushed_at = std::sync::atomic::AtomicI64::new(0);
    let out = run_window(&nodes[0], &db, &rx, 50, 24, 8, async {
        flushed_at.store(now_ms(), std::sync::atomic::Ordering::SeqCst);
        redis.flushall();
    })
    .await;
    eprintln!("FLUSHALL: split {:?}", out.split);
    assert!(out.lost.is_empty(), "lost: {:?}", &out.lost[..out.lost.len().min(10)]);
    assert!(out.duplicates.is_empty(), "duplicates: {:?}", out.duplicates);
    assert_eq!(out.not_succeeded, 0);

    // The nodes notice the flush within a second and one rebuilds the
    // index from the database: from a few seconds after the flush, the
    // fires go out on time, not seconds late through the reconciler, both
    // in the flush's minute (shards taken again after the flush took their
    // locks) and in the next one (shards taken after the flush). The window
    // ends 16 s after the flush.
    let flushed_at = flushed_at.into_inner();
    let next_minute = (flushed_at / 60_000 + 1) * 60_000;
    let hits = rx.hits();
    let lateness = |from: i64, to: i64| -> Vec<f64> {
        hits.iter().filter(|h| h.run_ms >= from && h.run_ms < to).map(|h| h.lateness_ms()).collect()
    };
    let worst = |late: &[f64]| late.iter().copied().fold(0.0, f64::max);
    let over_1s = |late: &[f64]| late.iter().filter(|ms| **ms > 1_000.0).count();
    let settled_at = flushed_at + 3_000;
    let (first, same_minute, next) = (
        lateness(flushed_at, settled_at),
        lateness(settled_at, next_minute),
        lateness(next_minute, flushed_at + 16_000),
    );
    eprintln!(
        "FLUSHALL {kind:?}: worst lateness {:.0} ms in the 3 s after the flush ({} of {} fires over 1 s late), \
         {:.0} ms in the rest of its minute ({} of {}), {:.0} ms in the next minute ({} of {})",
        worst(&first),
        over_1s(&first),
        first.len(),
        worst(&same_minute),
        over_1s(&same_minute),
        same_minute.len(),
        worst(&next),
        over_1s(&next),
        next.len(),
    );
    assert!(next.len() >= 200 && !same_minute.is_empty(), "{} and {} fires", same_minute.len(), next.len());
    let late: Vec<f64> = same_minute.iter().chain(&next).copied().filter(|ms| *ms > 1_500.0).collect();
    assert!(
        late.is_empty(),
        "{kind:?}: {} of {} fires from 3 s after the flush over 1.5 s late: {late:?}",
        late.len(),
        same_minute.len() + next.len()
    );
}

async fn a_database_down_for_ten_seconds_delays_fires_but_loses_and_repeats_none(kind: Kind) {
    let (db, redis) = (Db::start(kind), Redis::start().await);
    let rx = Receiver::start(false).await.unwrap();
    let nodes = [ProcNode::start(db.url(), &redis.url, &[]).await, ProcNode::start(db.url(), &redis.url, &[]).await];
    let out = run_window(&nodes[0], &db, &rx, 20, 30, 5, async {
        db.down();
        tokio::time::sleep(Duration::from_secs(10)).await;
        db.up();
    })
    .await;
    eprintln!("{kind:?} down 10 s: split {:?}", out.split);
    assert!(out.lost.is_empty(), "lost: {:?}", &out.lost[..out.lost.len().min(10)]);
    assert!(out.duplicates.is_empty(), "duplicates: {:?}", out.duplicates);
    assert_eq!(out.not_succeeded, 0);
}

/// Two nodes with the defaults; node A reaches the database through a fault
/// proxy that goes silent (sockets open, no byte moves: a dead route, or a
/// Galera node dropped from its cluster), while both still reach Redis. A
/// steps back within a few seconds: the fires of the shards it held go out
/// on time from B, not seconds late through B's reconciler. Healed, A takes
/// shards again; cut again and asked to stop, it stops within its bound.
async fn a_node_that_lost_its_database_steps_back_and_the_others_fire_on_time(kind: Kind) {
    let (db, redis) = (Db::start(kind), Redis::start().await);
    let rx = Receiver::start(false).await.unwrap();
    let upstream = db.url().split_once("://").unwrap().1.rsplit_once('@').map_or(db.url(), |(_, h)| h);
    let upstream: std::net::SocketAddr = upstream.split('/').next().unwrap().parse().unwrap();
    let link = proxy::Proxy::start(upstream).await;
    let mut a = ProcNode::start(&link.url_for(db.url()), &redis.url, &[]).await;
    let b = ProcNode::start(db.url(), &redis.url, &[]).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(b.create_every_second(&format!("t{i}"), &rx.url("/hook")).await);
    }
    let both_hold = async { a.shards_held().await > 0 && b.shards_held().await > 0 };
    let mut shared = both_hold.await;
    for _ in 0..90 {
        if shared {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        shared = a.shards_held().await > 0 && b.shards_held().await > 0;
    }
    assert!(shared, "both nodes hold shards before the cut");

    let cut_at = now_ms();
    link.cut_silent();
    // Stepped back within the node timeout (3 s) and a tick or two.
    let from = (cut_at / 1000 + 6) * 1000;
    let to = from + 10_000;
    let expected: HashSet<String> =
        ids.iter().flat_map(|id| (from..to).step_by(1000).map(move |run| format!("{id}_{run}"))).collect();
    let in_window = |h: &xtimer::receiver::Hit| h.run_ms >= from && h.run_ms < to;
    rx.wait_until(Duration::from_millis((to - now_ms()).max(0) as u64 + 30_000), |hits| {
        hits.iter().filter(|h| in_window(h)).map(|h| &h.key).collect::<HashSet<_>>().len() >= expected.len()
    })
    .await;
    let hits: Vec<_> = rx.hits().into_iter().filter(in_window).collect();
    let got: HashSet<&String> = hits.iter().map(|h| &h.key).collect();
    assert_eq!(got.len(), expected.len(), "every fire of the 10 s after the step-back arrived");
    // Node A says it is not ready (its process is alive: it answers).
    let ready = reqwest::get(format!("{}/readyz", a.base)).await.unwrap();
    assert_eq!(ready.status(), 503, "{kind:?}: a node without its database is not ready");
    assert_eq!(ready.headers()["retry-after"], "1");
    let late: Vec<f64> = hits.iter().map(|h| h.lateness_ms()).filter(|ms| *ms > 1_000.0).collect();
    assert!(late.is_empty(), "{kind:?}: {} of {} fires over 1 s late: {late:?}", late.len(), hits.len());

    link.heal().await;
    // Its heartbeats reach the database again: ready, and its scheduler
    // takes shards again from its next tick (the scheduler's unit test
    // `a_node_without_its_database_takes_no_shard_until_a_heartbeat_goes_through`;
    // here B holds the current minute, so A's next would be a minute away).
    let mut ready = false;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if reqwest::get(format!("{}/readyz", a.base)).await.is_ok_and(|r| r.status() == 200) {
            ready = true;
            break;
        }
    }
    assert!(ready, "{kind:?}: healed, node A is ready again");

    link.cut_silent();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Its bound: `server.shutdown_grace_ms` (10 s) plus 5 s; 3 s more for
    // the process to exit on a busy machine.
    let stopped = a.terminate_within(Duration::from_secs(30)).await;
    assert!(stopped.is_some_and(|took| took <= Duration::from_secs(18)), "{kind:?}: stopped after {stopped:?}");
    eprintln!("{kind:?}: a node without its database stopped in {stopped:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_and_restart_on_sqlite_refires_what_the_dead_node_held_and_loses_nothing() {
    let _slot = crate::Slot::take();
    // The embedded default: one node on a SQLite file. Its successor takes
    // over the fires the dead one had claimed once the dead one's heartbeat
    // is `reconciler.node_timeout_ms` old, not after the claims' minute-long lease.
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("xtimer.db").display());
    let rx = Receiver::start(false).await.unwrap();
    let mut first = ProcNode::start(&db, "", &[]).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(first.create_every_second(&format!("t{i}"), &rx.url("/hook")).await);
    }
    // Five seconds of steady fires before the kill.
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Kill it just before a second's fires leave: they are claimed (500 ms
    // ahead) but not sent.
    tokio::time::sleep(Duration::from_millis((1_000 - now_ms() % 1_000 + 800) as u64 % 1_000)).await;
    let killed_at = now_ms();
    first.kill9();
    let mut second = ProcNode::start(&db, "", &[]).await;
    let restarted_at = now_ms();
    let until = restarted_at + 10_000;
    let keys = |from: i64, to: i64| -> HashSet<String> {
        ids.iter()
            .flat_map(|id| ((from / 1_000 + 1)..=(to / 1_000)).map(move |s| format!("{id}_{}", s * 1_000)))
            .collect()
    };
    let expected = keys(killed_at - 3_000, until);
    let arrived = rx
        .wait_until(Duration::from_secs(40), |hits| {
            let got: HashSet<&String> = hits.iter().map(|h| &h.key).collect();
            expected.iter().all(|k| got.contains(k))
        })
        .await;
    // Time for a repeated fire to show up, if there were one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let hits = rx.hits();
    let mut seen: HashMap<&str, Vec<f64>> = HashMap::new();
    for h in &hits {
        seen.entry(h.key.as_str()).or_default().push(h.lateness_ms());
    }
    let lost: Vec<_> = expected.iter().filter(|k| !seen.contains_key(k.as_str())).collect();
    assert!(arrived && lost.is_empty(), "lost across the crash: {lost:?}");
    // Each fire arrives within 5 s of its time, or of the restart for fires
    // due while no node ran (the dead node's claims included).
    let run_of = |key: &str| key.rsplit('_').next().unwrap().parse::<i64>().unwrap();
    let mut worst = (0.0, String::new());
    for key in &expected {
        let first_arrival = seen[key.as_str()].iter().copied().fold(f64::MAX, f64::min);
        let past = first_arrival - (restarted_at - run_of(key)).max(0) as f64;
        if past > worst.0 {
            worst = (past, key.clone());
        }
    }
    eprintln!("killed at {killed_at}, back after {} ms; worst delay {worst:?}", restarted_at - killed_at);
    assert!(worst.0 <= 5_000.0, "a fire arrived {:.0} ms late: {}", worst.0, worst.1);
    for (key, lates) in &seen {
        if lates.len() > 1 {
            let run: i64 = key.rsplit('_').next().unwrap().parse().unwrap();
            assert!((killed_at - 3_000..=killed_at + 1_000).contains(&run), "{key} repeated far from the kill");
        }
    }
    second.kill9();
}

/// Issue 30's stampede on a two-node PostgreSQL + Redis cluster, with the
/// defaults: 3,000 timers on `0 * * * * ?` with `spreadMs: 60000`, made
/// through both nodes at once, arrive at most 60 in any second of their
/// minute (instead of 3,000 in one), each within its window, none twice;
/// `getForecast` shows that flat profile before the minute starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_spread_three_thousand_aligned_crons_over_their_minute() {
    let _slot = crate::Slot::take();
    let second = now_ms() / 1000 % 60;
    if second > 35 {
        tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
    }
    let (db, redis) = (Db::start(Kind::Postgres), Redis::start().await);
    let rx = Receiver::start(false).await.unwrap();
    let nodes = [ProcNode::start(db.url(), &redis.url, &[]).await, ProcNode::start(db.url(), &redis.url, &[]).await];
    let minute = (now_ms() / 60_000 + 1) * 60_000;
    let create = |node: &ProcNode, batch: usize| {
        let (base, url) = (node.base.clone(), rx.url("/hook"));
        async move {
            let timers: Vec<serde_json::Value> = (0..1_000)
                .map(|i| {
                    serde_json::json!({"app": "herd", "name": format!("t{batch}-{i}"), "cron": "0 * * * * ?",
                        "spreadMs": 60_000, "status": 2, "notifyHTTPParam": {"url": url},
                        "retry": {"maxAttempts": 1, "backoffMs": 0}})
                })
                .collect();
            let reply: serde_json::Value = reqwest::Client::new()
                .post(format!("{base}/api/xtimer/createTimers"))
                .json(&serde_json::json!({ "timers": timers }))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(reply["code"], 0, "{reply}");
        }
    };
    // Both nodes plan at once: the placement reads the shared load.
    tokio::join!(create(&nodes[0], 0), create(&nodes[1], 1), create(&nodes[0], 2));
    assert!(now_ms() < minute, "made before the minute started");
    let forecast: serde_json::Value =
        reqwest::get(format!("{}/api/xtimer/getForecast?app=herd&from={minute}&seconds=60", nodes[1].base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(forecast["result"]["total"], 3_000, "{forecast}");
    assert!(forecast["result"]["peak"]["fires"].as_u64().unwrap() <= 60, "flat before the minute: {forecast}");

    // This minute's fires: named by their scheduled time (the next
    // minute's start arriving at its end).
    let this_minute = |key: &str| key.ends_with(&format!("_{minute}"));
    let arrived = rx
        .wait_until(Duration::from_millis((minute + 60_000 - now_ms()).max(0) as u64 + 30_000), |hits| {
            hits.iter().filter(|h| this_minute(&h.key)).count() >= 3_000
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = rx.hits();
    let all_keys: HashSet<&str> = all.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(all_keys.len(), all.len(), "no fire twice");
    let hits: Vec<_> = all.iter().filter(|h| this_minute(&h.key)).collect();
    assert!(arrived, "{} of 3,000 fires arrived", hits.len());
    assert_eq!(hits.len(), 3_000, "every fire of the minute once");
    assert!(
        hits.iter().all(|h| (minute..minute + 60_000).contains(&h.run_ms)),
        "each sent within its window [scheduled, scheduled + 60 s)"
    );
    let mut per_second: BTreeMap<i64, usize> = BTreeMap::new();
    for h in &hits {
        *per_second.entry(h.arrival_us / 1_000_000).or_default() += 1;
    }
    let peak = per_second.values().max().copied().unwrap_or(0);
    eprintln!("3,000 aligned crons spread over a minute by two nodes: peak {peak} a second");
    assert!(peak <= 60, "at most 60 arrive in any one second: {per_second:?}");
}

/// `createTimer` of a one-shot an hour away through `base`: the HTTP
/// status, and the envelope.
async fn create_one_shot(base: &str, name: &str) -> (u16, serde_json::Value) {
    let body = serde_json::json!({
        "app": "cluster", "name": name, "runAt": now_ms() + 3_600_000, "status": 2,
        "notifyHTTPParam": {"url": "http://127.0.0.1:9/never"}
    });
    let reply = reqwest::Client::new()
        .post(format!("{base}/api/xtimer/createTimer"))
        .timeout(Duration::from_secs(15))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    (status, reply.json().await.unwrap_or_default())
}

/// A `database.url` naming a standby first and its primary second, as a
/// libpq multi-host URL: the node writes to the primary (the standby is in
/// recovery). The primary crashes and, 8 s later, the standby is promoted:
/// the node follows it, with no restart; creates meanwhile answer 503 (not
/// 500), every create acknowledged before the crash is kept, and the
/// per-second timer fires again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_url_follows_the_standby_promoted_after_the_primary_crashed() {
    let _slot = crate::Slot::alone();
    let primary = Postgres::start();
    let standby = Postgres::standby_of(&primary);
    let redis = Redis::start().await;
    let rx = Receiver::start(false).await.unwrap();
    let url =
        format!("postgres://postgres@{},{}/postgres?target_session_attrs=read-write", standby.host(), primary.host());
    let node = ProcNode::start(&url, &redis.url, &[]).await;
    node.create_every_second("steady", &rx.url("/hook")).await;
    assert!(rx.wait_until(Duration::from_secs(20), |hits| hits.len() >= 3).await, "fires flow");
    let mut acked = Vec::new();
    for i in 0..5 {
        let (status, reply) = create_one_shot(&node.base, &format!("before-{i}")).await;
        assert_eq!((status, &reply["code"]), (200, &serde_json::json!(0)), "{reply}");
        acked.push(reply["result"]["id"].as_i64().unwrap());
    }
    // Asynchronous replication: wait until the standby replayed every write.
    let lsn = |url: String, sql: &'static str| async move {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        let lsn: String = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        lsn
    };
    let written = lsn(primary.url.clone(), "SELECT pg_current_wal_lsn()::text").await;
    let mut replayed_all = false;
    // Up to 30 s: on a loaded machine replay can lag seconds.
    for _ in 0..300 {
        let replayed = lsn(standby.url.clone(), "SELECT pg_last_wal_replay_lsn()::text").await;
        let caught_up: bool = {
            let pool = sqlx::PgPool::connect(&standby.url).await.unwrap();
            let done = sqlx::query_scalar("SELECT $1::pg_lsn >= $2::pg_lsn")
                .bind(&replayed)
                .bind(&written)
                .fetch_one(&pool)
                .await
                .unwrap();
            pool.close().await;
            done
        };
        if caught_up {
            replayed_all = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(replayed_all, "the standby replayed the primary's writes before the crash (the test's premise)");

    let crashed_at = now_ms();
    primary.crash();
    // Creates go on from the crash, one at a time, until one goes through.
    let creating = {
        let base = node.base.clone();
        tokio::spawn(async move {
            let mut answers = BTreeMap::new();
            for i in 0..150 {
                let (status, reply) = create_one_shot(&base, &format!("after-{i}")).await;
                *answers.entry(status).or_insert(0) += 1;
                if status == 200 && reply["code"] == 0 {
                    return (answers, Some(now_ms()));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            (answers, None)
        })
    };
    // Longer than a call waits for a connection (5 s): the calls meanwhile answer 503.
    tokio::time::sleep(Duration::from_secs(8)).await;
    standby.promote();
    let promoted_at = now_ms();
    let (answers, recovered_at) = creating.await.unwrap();
    let recovered_at =
        recovered_at.unwrap_or_else(|| panic!("no create went through after the promotion: {answers:?}"));
    assert!(answers.keys().all(|s| [200, 503].contains(s)), "only 503 while no primary, then 200: {answers:?}");
    assert!(answers.contains_key(&503), "a call with no primary for 5 s answers 503: {answers:?}");
    for id in acked {
        let reply: serde_json::Value = reqwest::get(format!("{}/api/xtimer/getTimer?id={id}&app=cluster", node.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(reply["code"], 0, "a create acknowledged before the crash is kept: {reply}");
    }
    let flowing = rx.wait_until(Duration::from_secs(30), |hits| hits.iter().any(|h| h.run_ms > recovered_at)).await;
    assert!(flowing, "the per-second timer fires again after the failover");
    eprintln!(
        "primary crashed, standby promoted 8 s later: creates through {} ms after the crash ({} ms after the \
         promotion); answers {answers:?}",
        recovered_at - crashed_at,
        recovered_at - promoted_at
    );
}

/// The same failover with asynchronous replication that missed the
/// primary's last second: the standby's link to the primary is cut, five
/// timers are created (acknowledged by the primary alone) and a second of
/// fires is recorded there, then the primary crashes and the standby is
/// promoted at once. Measured, not hidden: how many acknowledged creates
/// the promotion lost, and how many fires were sent again; asserted: no
/// fire of the per-second timer is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asynchronous_standby_that_missed_the_last_second_loses_no_fire() {
    let _slot = crate::Slot::alone();
    let primary = Postgres::start();
    let upstream: std::net::SocketAddr = primary.host().parse().unwrap();
    let link = proxy::Proxy::start(upstream).await;
    let link_port = link.url_for("postgres://x").rsplit(':').next().unwrap().parse().unwrap();
    let standby = Postgres::standby_through(&primary, link_port);
    let redis = Redis::start().await;
    let rx = Receiver::start(false).await.unwrap();
    let url = format!("postgres://postgres@{},{}/postgres", standby.host(), primary.host());
    let node = ProcNode::start(&url, &redis.url, &[]).await;
    let steady = node.create_every_second("steady", &rx.url("/hook")).await;
    assert!(rx.wait_until(Duration::from_secs(20), |hits| hits.len() >= 3).await, "fires flow");
    tokio::time::sleep(Duration::from_secs(2)).await;

    let cut_at = now_ms();
    link.cut_silent();
    let mut acked = Vec::new();
    for i in 0..5 {
        let (status, reply) = create_one_shot(&node.base, &format!("unreplicated-{i}")).await;
        assert_eq!(status, 200, "{reply}");
        acked.push(reply["result"]["id"].as_i64().unwrap());
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    primary.crash();
    standby.promote();
    let promoted_at = now_ms();
    let mut through = None;
    for i in 0..100 {
        let (status, reply) = create_one_shot(&node.base, &format!("after-{i}")).await;
        assert!([200, 503].contains(&status), "{status}: {reply}");
        if status == 200 {
            through = Some(now_ms());
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let through = through.expect("creates go through after the promotion");
    let until = now_ms() + 5_000;
    let runs: Vec<i64> = ((cut_at / 1000 - 2) * 1000..(until / 1000) * 1000).step_by(1000).collect();
    let arrived = |hits: &[xtimer::receiver::Hit]| {
        let key = |run: i64| format!("{steady}_{run}");
        runs.iter().all(|run| hits.iter().any(|h| h.key == key(*run)))
    };
    let all = rx.wait_until(Duration::from_millis((until - now_ms()).max(0) as u64 + 30_000), arrived).await;
    let mut lost_creates = 0;
    for id in &acked {
        let reply: serde_json::Value = reqwest::get(format!("{}/api/xtimer/getTimer?id={id}&app=cluster", node.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if reply["code"] != 0 {
            lost_creates += 1;
        }
    }
    let hits = rx.hits();
    let repeated =
        runs.iter().filter(|run| hits.iter().filter(|h| h.key == format!("{steady}_{run}")).count() > 1).count();
    eprintln!(
        "asynchronous standby, last {} ms unreplicated: {lost_creates} of {} acknowledged creates lost, {repeated} of {} \
         fires sent twice, none lost: {all}; creates through {} ms after the promotion",
        promoted_at - cut_at,
        acked.len(),
        runs.len(),
        through - promoted_at
    );
    assert!(all, "no fire of the per-second timer lost to the promotion");
}
