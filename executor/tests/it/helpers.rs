//! A reconciler and executor on a real SQLite file with a `ManualClock`,
//! and a real HTTP receiver on loopback.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Router;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use xtimer_core::clock::ManualClock;
use xtimer_core::config::{DatabaseConfig, ExecutorConfig, ReconcilerConfig, ShardConfig};
use xtimer_core::fire::{Fire, FireKey, FireStatus};
use xtimer_core::handover::Handover;
use xtimer_core::node::{Liveness, NodeContext};
use xtimer_core::pause::PauseWatch;
use xtimer_core::timer::{HttpNotify, MisfirePolicy, NewTimer, Notify, RetryPolicy, Schedule, Timer, TimerStatus};
use xtimer_core::Clock;
use xtimer_executor::{Callbacks, Executor, ExecutorHandle, Reconciler, Wiring};
use xtimer_store::Database;
use xtimer_store::{FireRepo, MemoryLocks, MemoryShards, NewFire, Stores, TimerRepo};

/// 2026-03-01 12:34:00 UTC: where every test's clock starts.
pub const T0: i64 = 1_772_368_440_000;

/// How long to wait for an HTTP request or a recorded result.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// The executor's claim lease in these tests.
pub const LEASE_MS: u64 = 60_000;

/// Polls `check` until it holds or [`PATIENCE`] runs out; returns whether it held.
pub async fn eventually<F, Fut>(mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

type Hits = Arc<Mutex<HashMap<String, u32>>>;
/// Each request's `X-Xtimer-Signature` (empty when missing) and body.
type Signed = Arc<Mutex<Vec<(String, Bytes)>>>;
/// Each request's `Idempotency-Key`, in arrival order.
type Arrivals = Arc<Mutex<Vec<String>>>;

/// A callback receiver on 127.0.0.1 that counts requests per `Idempotency-Key`.
pub struct Receiver {
    pub addr: SocketAddr,
    hits: Hits,
    signed: Signed,
    arrivals: Arrivals,
}

async fn count(
    State((hits, signed, arrivals)): State<(Hits, Signed, Arrivals)>,
    headers: HeaderMap,
    body: Bytes,
) -> &'static str {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let key = header("idempotency-key");
    let key = if key.is_empty() { "<none>".to_string() } else { key };
    *hits.lock().unwrap().entry(key.clone()).or_default() += 1;
    arrivals.lock().unwrap().push(key);
    signed.lock().unwrap().push((header("x-xtimer-signature"), body));
    "ok"
}

impl Receiver {
    /// Starts on a free port.
    pub async fn start() -> Self {
        let (hits, signed, arrivals) = (Hits::default(), Signed::default(), Arrivals::default());
        let app = Router::new().fallback(count).with_state((hits.clone(), signed.clone(), arrivals.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, hits, signed, arrivals }
    }

    /// The `Idempotency-Key` of every request, in arrival order.
    pub fn arrivals(&self) -> Vec<String> {
        self.arrivals.lock().unwrap().clone()
    }

    /// Every request's signature header and body, in arrival order.
    pub fn signed(&self) -> Vec<(String, Bytes)> {
        self.signed.lock().unwrap().clone()
    }

    /// Requests seen with the idempotency key of `key`.
    pub fn hits(&self, key: FireKey) -> u32 {
        self.hits.lock().unwrap().get(&key.to_string()).copied().unwrap_or(0)
    }

    /// Requests seen in all.
    pub fn total(&self) -> u32 {
        self.hits.lock().unwrap().values().sum()
    }

    /// Waits until every one of `keys` has arrived at least once.
    pub async fn wait_for(&self, keys: &[FireKey]) {
        let arrived = eventually(|| async { keys.iter().all(|&k| self.hits(k) > 0) }).await;
        assert!(arrived, "callbacks {keys:?} did not arrive in {PATIENCE:?}; got {:?}", self.hits.lock().unwrap());
    }
}

/// An enabled timer of app `it` on `schedule`, POSTing `{}` to `url`, one
/// attempt per fire, firing every missed fire.
fn new_timer(name: &str, schedule: Schedule, url: &str) -> NewTimer {
    NewTimer {
        timing: Default::default(),
        labels: Default::default(),
        dedupe: None,
        app: "it".into(),
        name: name.into(),
        status: TimerStatus::Enabled,
        schedule,
        notify: Notify::Http(HttpNotify {
            url: url.to_string(),
            method: "POST".into(),
            headers: Default::default(),
            body: Some("{}".into()),
            timeout_ms: None,
            template: false,
            flow_key: None,
        }),
        retry: RetryPolicy { max_attempts: 1, backoff_ms: 0, no_retry_statuses: None },
        misfire: MisfirePolicy::FireAll,
        delete_after_run: false,
        on_failure: None,
        on_missed: None,
        on_late: None,
        pause_after_failures: None,
        overlap: Default::default(),
    }
}

/// Which database a [`Harness`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    /// A SQLite file in the harness's temporary folder.
    Sqlite,
    /// A fresh database on the PostgreSQL server of `XTIMER_TEST_DATABASE_URL`.
    Postgres,
    /// A fresh database on the MySQL server of `XTIMER_TEST_MYSQL_URL`.
    Mysql,
}

impl Db {
    /// Every database a test runs on.
    pub const ALL: [Db; 3] = [Db::Sqlite, Db::Postgres, Db::Mysql];

    /// The URL of a fresh database (`scripts/test` starts the servers).
    async fn fresh(self, dir: &tempfile::TempDir) -> String {
        let (var, default) = match self {
            Db::Sqlite => return format!("sqlite://{}", dir.path().join("xtimer.db").display()),
            Db::Postgres => ("XTIMER_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:15432/postgres"),
            Db::Mysql => ("XTIMER_TEST_MYSQL_URL", "mysql://root@127.0.0.1:13306/mysql"),
        };
        let admin = std::env::var(var).unwrap_or_else(|_| default.into());
        let name = format!("exec_{}_{}", std::process::id(), NEXT_DB.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        xtimer_store::db::create_database(&admin, &name)
            .await
            .unwrap_or_else(|e| panic!("the server at {var} (scripts/test starts one): {e}"))
    }
}

static NEXT_DB: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// An executor (and its running recorder), a reconciler over it, the
/// stores they share and a receiver.
pub struct Harness {
    pub repo: Arc<Database>,
    pub stores: Stores,
    pub clock: Arc<ManualClock>,
    pub executor: ExecutorHandle,
    pub reconciler: Reconciler,
    pub config: ReconcilerConfig,
    pub receiver: Receiver,
    /// The node's handover of one-shot definitions, which the executor takes from.
    pub handover: Arc<Handover>,
    /// The node's stalls (no detector runs unless a test starts one).
    pub pause: Arc<PauseWatch>,
    _dir: tempfile::TempDir,
}

/// The reconciler settings of these tests (the defaults, spelled out).
pub fn reconciler_config() -> ReconcilerConfig {
    ReconcilerConfig { period_ms: 5_000, ..ReconcilerConfig::default() }
}

impl Harness {
    /// Everything on a fresh database, the clock at [`T0`].
    pub async fn start(config: ReconcilerConfig) -> Self {
        Self::start_with(config, Callbacks::default()).await
    }

    /// Everything on a fresh database, callbacks obeying `callbacks`.
    pub async fn start_with(config: ReconcilerConfig, callbacks: Callbacks) -> Self {
        Self::start_node(config, callbacks, Arc::new(Liveness::steady())).await
    }

    /// Everything on a fresh database, the node's heartbeats as `liveness`
    /// tells (and its stalls in [`Harness::pause`]).
    pub async fn start_node(config: ReconcilerConfig, callbacks: Callbacks, liveness: Arc<Liveness>) -> Self {
        Self::start_on(Db::Sqlite, config, callbacks, liveness).await
    }

    /// [`Harness::start_node`] on a fresh database of `db`.
    pub async fn start_on(db: Db, config: ReconcilerConfig, callbacks: Callbacks, liveness: Arc<Liveness>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = db.fresh(&dir).await;
        let repo = Arc::new(Database::connect(&DatabaseConfig { url, max_connections: 4 }).await.expect("db"));
        let clock = Arc::new(ManualClock::new(T0));
        let locks = Arc::new(MemoryLocks::new(clock.clone()));
        let executor_config = ExecutorConfig { timeout_ms: 5_000, lease_ms: LEASE_MS, ..ExecutorConfig::default() };
        let (_due_tx, due_rx) = mpsc::channel(16);
        let stores = Stores::over(
            repo.as_ref().clone(),
            Arc::new(MemoryShards::new(ShardConfig::default(), clock.clone())),
            locks.clone(),
            "SQLite with the embedded shard index".into(),
        );
        let wiring = Wiring {
            due: due_rx,
            callbacks,
            tasks: None,
            steering: None,
            stop_claiming: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
            traces: None,
        };
        let ctx = NodeContext::new(clock.clone(), "node-a", "xtimer-test").with_liveness(liveness);
        let (executor, recorder) = Executor::new(executor_config, &stores, &ctx, wiring).expect("executor");
        tokio::spawn(recorder.run());
        let handle = executor.handle();
        let reconciler = Self::reconciler_on(&config, &stores, &clock, &handle, "node-a");
        let receiver = Receiver::start().await;
        let (handover, pause) = (ctx.handover, ctx.pause);
        Self { repo, stores, clock, executor: handle, reconciler, config, receiver, handover, pause, _dir: dir }
    }

    /// A reconciler of node `node_id` sharing this harness's stores and executor.
    pub fn reconciler(&self, node_id: &str) -> Reconciler {
        Self::reconciler_on(&self.config, &self.stores, &self.clock, &self.executor, node_id)
    }

    fn reconciler_on(
        config: &ReconcilerConfig,
        stores: &Stores,
        clock: &Arc<ManualClock>,
        executor: &ExecutorHandle,
        node_id: &str,
    ) -> Reconciler {
        let ctx = NodeContext::new(clock.clone(), node_id, "xtimer-test");
        let liveness = Arc::new(xtimer_core::node::Liveness::steady());
        Reconciler::new(config.clone(), LEASE_MS, stores, &ctx, executor.clone(), liveness)
    }

    /// The clock's reading.
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// A cron timer calling the receiver, one attempt per fire.
    pub async fn timer(&self, name: &str, status: TimerStatus, misfire: MisfirePolicy) -> Timer {
        let url = format!("http://{}/hook", self.receiver.addr);
        self.timer_to(
            name,
            status,
            misfire,
            &url,
            RetryPolicy { max_attempts: 1, backoff_ms: 0, no_retry_statuses: None },
        )
        .await
    }

    /// A cron timer of app `it` calling `url`.
    pub async fn timer_to(
        &self,
        name: &str,
        status: TimerStatus,
        misfire: MisfirePolicy,
        url: &str,
        retry: RetryPolicy,
    ) -> Timer {
        let every_ten_seconds = Schedule::Cron { expr: "*/10 * * * * *".into(), timezone: "UTC".into() };
        self.create(NewTimer { status, misfire, retry, ..new_timer(name, every_ten_seconds, url) }).await
    }

    /// An enabled one-shot timer of app `it` calling `url` at `run_ms`, one attempt.
    pub async fn one_shot_to(&self, name: &str, run_ms: i64, url: &str) -> Timer {
        self.create(new_timer(name, Schedule::Once { run_at_ms: run_ms }, url)).await
    }

    async fn create(&self, timer: NewTimer) -> Timer {
        self.repo.create_timer(&timer, self.now()).await.expect("create timer")
    }

    /// Inserts `timer`'s fires at `T0 + offset` for each offset; returns their keys.
    pub async fn fires(&self, timer: &Timer, offsets: &[i64]) -> Vec<FireKey> {
        let keys: Vec<FireKey> = offsets.iter().map(|o| FireKey { timer_id: timer.id, run_ms: T0 + o }).collect();
        let new: Vec<NewFire> = keys.iter().map(|&key| NewFire { key, app: timer.app.clone() }).collect();
        let inserted = self.repo.insert_fires(&new, self.now()).await.expect("insert fires");
        assert_eq!(inserted as usize, keys.len());
        keys
    }

    /// The stored fire with `key`.
    pub async fn fire(&self, key: FireKey) -> Fire {
        let (list, _) = self.repo.list_fires(key.timer_id, None, 0, 1_000).await.expect("list fires");
        list.into_iter().find(|f| f.run_ms == key.run_ms).unwrap_or_else(|| panic!("fire {key} is stored"))
    }

    /// The stored status of `key`.
    pub async fn status(&self, key: FireKey) -> FireStatus {
        self.fire(key).await.status
    }

    /// Waits until the recorder has written `status` for every one of `keys`.
    pub async fn wait_for_status(&self, keys: &[FireKey], status: FireStatus) {
        let reached = eventually(|| async {
            for &k in keys {
                if self.status(k).await != status {
                    return false;
                }
            }
            true
        })
        .await;
        let mut now = Vec::new();
        for &k in keys {
            now.push((k, self.status(k).await));
        }
        assert!(reached, "fires did not all reach {status:?} in {PATIENCE:?}: {now:?}");
    }

    /// Waits until every fire dispatched so far has finished its attempts.
    pub async fn wait_idle(&self) {
        tokio::time::timeout(PATIENCE, self.executor.idle()).await.expect("executor went idle");
    }
}
