//! Nodes for the tests of owed notifications and database outages: each an
//! executor (its recorder running) and a notify sweeper over shared stores
//! on SQLite, PostgreSQL or MySQL, all on one `ManualClock`; a fire
//! repository that can be switched off (a database outage); and timers
//! with an `onFailure`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, ExecutorConfig, ShardConfig};
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};
use xtimer_core::node::NodeContext;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, Timer, TimerStatus};
use xtimer_core::Clock;
use xtimer_executor::notify::NOTIFY_SWEEP_PERIOD;
use xtimer_executor::{Callbacks, Executor, ExecutorHandle, NotifySweeper, Reconciler, Wiring};
use xtimer_store::{
    mysql, postgres, BackfillFire, ClaimOutcome, Database, Error, FireRepo, FireResult, FireWindow, MemoryLocks,
    MemoryShards, NewFire, Overdue, PartitionReport, Stores, TimerRepo,
};

use crate::helpers::{eventually, reconciler_config, LEASE_MS, PATIENCE, T0};

/// The database a test runs on.
#[derive(Debug, Clone, Copy)]
pub enum Db {
    Sqlite,
    /// The server at `XTIMER_TEST_DATABASE_URL`, a fresh schema.
    Postgres,
    /// The server at `XTIMER_TEST_MYSQL_URL`, a fresh database.
    Mysql,
}

/// Stores shared by the nodes of a test, on one clock.
pub struct Cluster {
    pub repo: Arc<Database>,
    pub stores: Stores,
    pub clock: Arc<ManualClock>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Fresh storage on `db`, the embedded shard index and locks, the clock at [`T0`].
    pub async fn start(db: Db) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let name = format!("t_{:016x}", rand::random::<u64>());
        let database = match db {
            Db::Sqlite => {
                let url = format!("sqlite://{}", dir.path().join("xtimer.db").display());
                Database::connect(&DatabaseConfig { url, max_connections: 4 }).await
            }
            Db::Postgres => {
                let url = std::env::var("XTIMER_TEST_DATABASE_URL")
                    .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:15432/postgres".into());
                postgres::connect(&DatabaseConfig { url, max_connections: 4 }, Some(&name)).await
            }
            Db::Mysql => {
                let url = std::env::var("XTIMER_TEST_MYSQL_URL")
                    .unwrap_or_else(|_| "mysql://root@127.0.0.1:13306/mysql".into());
                mysql::connect(&DatabaseConfig { url, max_connections: 4 }, Some(&name)).await
            }
        };
        let repo = Arc::new(database.unwrap_or_else(|e| panic!("{db:?} (see scripts/test): {e:?}")));
        let clock = Arc::new(ManualClock::new(T0));
        let stores = Stores::over(
            repo.as_ref().clone(),
            Arc::new(MemoryShards::new(ShardConfig::default(), clock.clone())),
            Arc::new(MemoryLocks::new(clock.clone())),
            format!("{db:?} with the embedded shard index"),
        );
        Self { repo, stores, clock, _dir: dir }
    }

    /// The clock's reading.
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// A node `node_id` over these stores.
    pub fn node(&self, node_id: &str, config: ExecutorConfig) -> Node {
        Node::start(&self.stores, &self.clock, node_id, config)
    }

    /// An enabled cron timer of app `it` calling `url`, one attempt per
    /// fire, its failures told to `on_failure` when given.
    pub async fn timer(&self, name: &str, url: &str, on_failure: Option<&str>) -> Timer {
        self.timer_with(name, url, |t| t.on_failure = on_failure.map(http)).await
    }

    /// [`Cluster::timer`] with no alerts, then `change`d.
    pub async fn timer_with(&self, name: &str, url: &str, change: impl FnOnce(&mut NewTimer)) -> Timer {
        let mut timer = NewTimer {
            timing: Default::default(),
            labels: Default::default(),
            dedupe: None,
            app: "it".into(),
            name: name.into(),
            status: TimerStatus::Enabled,
            schedule: Schedule::Cron { expr: "*/10 * * * * *".into(), timezone: "UTC".into() },
            notify: Notify::Http(http(url)),
            retry: RetryPolicy { max_attempts: 1, backoff_ms: 0, no_retry_statuses: None },
            misfire: MisfirePolicy::FireAll,
            delete_after_run: false,
            on_failure: None,
            on_missed: None,
            on_late: None,
            pause_after_failures: None,
            overlap: Default::default(),
        };
        change(&mut timer);
        self.repo.create_timer(&timer, self.now()).await.expect("create timer")
    }

    /// Inserts `timer`'s fires at `T0 + offset` for each offset; returns their keys.
    pub async fn fires(&self, timer: &Timer, offsets: &[i64]) -> Vec<FireKey> {
        let keys: Vec<FireKey> = offsets.iter().map(|o| FireKey { timer_id: timer.id, run_ms: T0 + o }).collect();
        let new: Vec<NewFire> = keys.iter().map(|&key| NewFire { key, app: timer.app.clone() }).collect();
        assert_eq!(self.repo.insert_fires(&new, self.now()).await.expect("insert fires") as usize, keys.len());
        keys
    }

    /// The stored fire with `key`.
    pub async fn fire(&self, key: FireKey) -> Fire {
        let (list, _) = self.repo.list_fires(key.timer_id, None, 0, 1_000).await.expect("list fires");
        list.into_iter().find(|f| f.run_ms == key.run_ms).unwrap_or_else(|| panic!("fire {key} is stored"))
    }

    /// Waits until every one of `keys` is stored with `status`.
    pub async fn wait_for_status(&self, keys: &[FireKey], status: FireStatus) {
        let reached = eventually(|| async {
            for &k in keys {
                if self.fire(k).await.status != status {
                    return false;
                }
            }
            true
        })
        .await;
        let mut now = Vec::new();
        for &k in keys {
            now.push((k, self.fire(k).await.status));
        }
        assert!(reached, "fires did not all reach {status:?} in {PATIENCE:?}: {now:?}");
    }
}

/// A POST to `url` with a body of `{}`.
pub fn http(url: &str) -> HttpNotify {
    HttpNotify {
        url: url.to_string(),
        method: "POST".into(),
        headers: Default::default(),
        body: Some("{}".into()),
        timeout_ms: None,
        template: false,
        flow_key: None,
    }
}

/// The executor settings of these tests: the defaults, a 5 s callback
/// timeout and the helpers' lease.
pub fn executor_config() -> ExecutorConfig {
    ExecutorConfig { timeout_ms: 5_000, lease_ms: LEASE_MS, ..ExecutorConfig::default() }
}

/// One node: an executor with its recorder running, its notify sweeper
/// and its reconciler.
pub struct Node {
    pub executor: ExecutorHandle,
    pub sweeper: NotifySweeper,
    pub reconciler: Reconciler,
    pub hard_stop: CancellationToken,
    /// The recorder's task: it ends once the executor is gone and its
    /// results are written (or given up).
    pub recorder: JoinHandle<()>,
    /// Keeps the claim loop's input open.
    _due: mpsc::Sender<Vec<FireKey>>,
    _executor: Executor,
}

impl Node {
    fn start(stores: &Stores, clock: &Arc<ManualClock>, node_id: &str, config: ExecutorConfig) -> Self {
        let (due, due_rx) = mpsc::channel(16);
        let hard_stop = CancellationToken::new();
        let wiring = Wiring {
            due: due_rx,
            callbacks: Callbacks::default(),
            tasks: None,
            steering: None,
            stop_claiming: hard_stop.child_token(),
            hard_stop: hard_stop.clone(),
            traces: None,
        };
        let ctx = NodeContext::new(clock.clone(), node_id, "xtimer-test");
        let (executor, recorder) = Executor::new(config, stores, &ctx, wiring).expect("executor");
        let handle = executor.handle();
        let liveness = Arc::new(xtimer_core::node::Liveness::steady());
        let reconciler = Reconciler::new(reconciler_config(), LEASE_MS, stores, &ctx, handle.clone(), liveness);
        Self {
            sweeper: NotifySweeper::new(&handle, NOTIFY_SWEEP_PERIOD),
            reconciler,
            executor: handle,
            hard_stop,
            recorder: tokio::spawn(recorder.run()),
            _due: due,
            _executor: executor,
        }
    }

    /// Waits until every fire and notification this node dispatched has
    /// finished.
    pub async fn wait_idle(&self) {
        tokio::time::timeout(PATIENCE, self.executor.idle()).await.expect("node went idle");
    }

    /// Drops everything that feeds the recorder, leaving it to finish.
    pub fn stop(self) -> JoinHandle<()> {
        self.hard_stop.cancel();
        self.recorder
    }
}

/// How many requests carried `key` as their `Idempotency-Key`.
pub fn count(arrivals: &[String], key: &str) -> usize {
    arrivals.iter().filter(|k| k.as_str() == key).count()
}

/// Waits up to `wait` for `check`; true once it holds.
pub async fn within(wait: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    while !check() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// A fire repository over a real one that can be taken down: `records`
/// fails result writes only, `all` fails every call (the database is
/// unreachable), each at once with an error that says so.
pub struct Flaky {
    pub inner: Arc<Database>,
    records: AtomicBool,
    all: AtomicBool,
}

impl Flaky {
    pub fn over(inner: Arc<Database>) -> Arc<Self> {
        Arc::new(Self { inner, records: AtomicBool::new(false), all: AtomicBool::new(false) })
    }

    /// Result writes fail (or work again).
    pub fn records_down(&self, down: bool) {
        self.records.store(down, Ordering::SeqCst);
    }

    /// Every call fails (or works again).
    pub fn all_down(&self, down: bool) {
        self.all.store(down, Ordering::SeqCst);
    }

    fn up(&self) -> xtimer_store::Result<()> {
        if self.all.load(Ordering::SeqCst) {
            return Err(unreachable_database());
        }
        Ok(())
    }
}

/// What a call to an unreachable database returns.
fn unreachable_database() -> Error {
    Error::Connect {
        setting: "database.url",
        url: "test://down".into(),
        source: Box::new(Error::Corrupt("the database is down (a test's outage)".into())),
    }
}

#[async_trait]
impl FireRepo for Flaky {
    async fn insert_fires(&self, fires: &[NewFire], now_ms: i64) -> xtimer_store::Result<u64> {
        self.up()?;
        self.inner.insert_fires(fires, now_ms).await
    }
    async fn insert_manual_fire(&self, fire: &NewFire, now_ms: i64) -> xtimer_store::Result<bool> {
        self.up()?;
        self.inner.insert_manual_fire(fire, now_ms).await
    }
    async fn insert_backfill(&self, fires: &[BackfillFire], now_ms: i64) -> xtimer_store::Result<u64> {
        self.up()?;
        self.inner.insert_backfill(fires, now_ms).await
    }
    async fn run_times_between(&self, timer_id: i64, from_ms: i64, to_ms: i64) -> xtimer_store::Result<Vec<i64>> {
        self.up()?;
        self.inner.run_times_between(timer_id, from_ms, to_ms).await
    }
    async fn running_before(&self, timer_id: i64, task_id: i64, run_ms: i64) -> xtimer_store::Result<u64> {
        self.up()?;
        self.inner.running_before(timer_id, task_id, run_ms).await
    }
    async fn delete_pending_from(&self, timer_id: i64, from_ms: i64) -> xtimer_store::Result<u64> {
        self.up()?;
        self.inner.delete_pending_from(timer_id, from_ms).await
    }
    async fn pending_between(
        &self,
        timer_id: Option<i64>,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> xtimer_store::Result<Vec<FireKey>> {
        self.up()?;
        self.inner.pending_between(timer_id, from_ms, to_ms, limit).await
    }
    async fn claim(
        &self,
        keys: &[FireKey],
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> xtimer_store::Result<ClaimOutcome> {
        self.up()?;
        self.inner.claim(keys, owner, lease_ms, now_ms).await
    }
    async fn reclaim(
        &self,
        task_ids: &[i64],
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
    ) -> xtimer_store::Result<ClaimOutcome> {
        self.up()?;
        self.inner.reclaim(task_ids, owner, lease_ms, now_ms, alive_since_ms).await
    }
    async fn record(&self, results: &[FireResult], now_ms: i64) -> xtimer_store::Result<u64> {
        self.up()?;
        if self.records.load(Ordering::SeqCst) {
            return Err(unreachable_database());
        }
        self.inner.record(results, now_ms).await
    }
    async fn release(&self, claims: &[ClaimedFire], now_ms: i64) -> xtimer_store::Result<u64> {
        self.up()?;
        self.inner.release(claims, now_ms).await
    }
    async fn confirm_claims(
        &self,
        node_id: &str,
        claims: &[ClaimedFire],
        lease_ms: i64,
        now_ms: i64,
    ) -> xtimer_store::Result<Vec<i64>> {
        self.up()?;
        self.inner.confirm_claims(node_id, claims, lease_ms, now_ms).await
    }
    async fn mark_missed(&self, task_ids: &[i64], output: &str, now_ms: i64) -> xtimer_store::Result<u64> {
        self.up()?;
        self.inner.mark_missed(task_ids, output, now_ms).await
    }
    async fn overdue(
        &self,
        pending_before_ms: i64,
        now_ms: i64,
        alive_since_ms: i64,
        limit: u32,
    ) -> xtimer_store::Result<Vec<Overdue>> {
        self.up()?;
        self.inner.overdue(pending_before_ms, now_ms, alive_since_ms, limit).await
    }
    async fn delete_ended_before(&self, before_ms: i64, limit: u32) -> xtimer_store::Result<u64> {
        self.up()?;
        self.inner.delete_ended_before(before_ms, limit).await
    }
    async fn maintain_partitions(&self, now_ms: i64, keep_ms: i64) -> xtimer_store::Result<PartitionReport> {
        self.up()?;
        self.inner.maintain_partitions(now_ms, keep_ms).await
    }
    async fn list_fires_in(
        &self,
        timer_id: i64,
        status: Option<FireStatus>,
        window: FireWindow,
        offset: u64,
        limit: u64,
    ) -> xtimer_store::Result<(Vec<Fire>, u64)> {
        self.up()?;
        self.inner.list_fires_in(timer_id, status, window, offset, limit).await
    }
    async fn ended_since(&self, since_ms: i64, limit: u32) -> xtimer_store::Result<Vec<Fire>> {
        self.up()?;
        self.inner.ended_since(since_ms, limit).await
    }
    async fn list_fires(
        &self,
        timer_id: i64,
        status: Option<FireStatus>,
        offset: u64,
        limit: u64,
    ) -> xtimer_store::Result<(Vec<Fire>, u64)> {
        self.up()?;
        self.inner.list_fires(timer_id, status, offset, limit).await
    }
}
