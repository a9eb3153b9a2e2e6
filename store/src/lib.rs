//! Everything that touches SQL or the shard index.
//!
//! # Layout
//!
//! The interface, which imports from no implementation:
//!
//! - [`repo`]: the repository traits the other crates program against
//!   ([`TimerRepo`], [`FireRepo`], [`NodeRepo`], ...) and their input and
//!   output types; [`shard`] ([`ShardStore`]), [`lock`] ([`LockStore`]) and
//!   [`flow_tokens`] ([`FlowTokens`]): what nodes share besides the database.
//! - [`lease`]: the shard lease protocol (acquire, renew, finish, release),
//!   [`ShardLeases`], and [`PassLease`], the turn of a singleton pass.
//! - `change`: a change to a timer as its history keeps it
//!   ([`HistoryEntry`], [`Change`]).
//! - [`error`]: this crate's error type; `redact`: URLs with their
//!   passwords hidden, for logs and errors.
//!
//! The SQL repositories, written once for the three dialects on
//! [`Database`] ([`db`]: the pools and transactions, and the one way every
//! repository reaches them, naming no backend), in the shape of their
//! drivers: a repository never asks which database it runs on, and what
//! differs comes from the backend's driver (`driver`: `Dialect` with its
//! `Statements`, `Driver` on its pools, `TxDriver` on its connection),
//! which `backend` hands it (`on_driver!`) and which also connects the
//! one a URL names. The conformance suite (`store/tests/it`) runs every
//! repository on every backend.
//!
//! - `timers`, `fires`, `nodes`, `notify`, [`auth`], [`tasks`], `calendars`,
//!   `apps`, `flows`, `history`: one file per repository; `plan` (the
//!   writes of an expansion plan), `placement` (spread send times),
//!   [`usage`] (what each app uses, kept as its timers change),
//!   `timer_stats` (the per-timer figures rolled up by the hour).
//! - `sql`: what the backends share: status codes, a timer's columns
//!   listed once (`sql::definition`), SQL fragments, row decoding, and per
//!   repository the statements and rows two or three backends share
//!   (`sql::tasks`, `sql::timers`, `sql::usage`, `sql::fence`, ...).
//!
//! One folder per backend, each a driver: the one place its SQL is chosen.
//!
//! - [`sqlite`], [`postgres`], [`mysql`]: `driver.rs` (its `Statements`
//!   and its `Driver` and `TxDriver`), opening each database (pragmas,
//!   session settings, pools, migrations) and that backend's statements
//!   (`fires`: insert, claim, reclaim, record; `plan`, `notify`, `tasks`,
//!   `timers`, `usage`). PostgreSQL also keeps [`partition`]: its daily
//!   partitions of `t_timer_task`.
//! - [`redis`]: the shard index, locks and flow tokens over Redis or Redis
//!   Cluster, for clusters.
//! - `memory`: the same three in process ([`MemoryShards`],
//!   [`MemoryLocks`], [`MemoryFlowTokens`]), for the embedded default.
//! - [`backup`]: an online copy of a SQLite database (`VACUUM INTO`).

mod apps;
pub mod auth;
mod backend;
pub mod backup;
mod calendars;
mod change;
pub mod conflict;
pub mod db;
mod driver;
pub mod error;
mod fire_log;
mod fires;
pub mod flow_tokens;
mod flows;
pub mod history;
pub mod lease;
pub mod lock;
mod memory;
pub mod mysql;
mod nodes;
mod notify;

mod placement;
mod plan;
pub mod postgres;
mod primary;
pub use postgres::partition;
mod redact;
pub mod redis;
pub mod repo;
pub mod shard;
mod sql;
pub mod sqlite;
pub mod tasks;
mod timer_stats;
mod timers;
pub mod usage;

use std::sync::Arc;

pub use apps::{AppPause, AppRepo, AppSummary};
pub use auth::AuthRepo;
pub use calendars::CalendarRepo;
pub use db::Database;
pub use error::{Error, Result};
pub use flow_tokens::{FlowFigures, FlowGrant, FlowTokens, FlowTurn};
pub use flows::{FlowLimit, FlowRepo};
pub use history::{status_action, Change, HistoryEntry};
pub use lease::{PassLease, ShardLeases};
pub use lock::LockStore;
pub use memory::{MemoryFlowTokens, MemoryLocks, MemoryShards};
pub use redact::redact;
pub use repo::{
    AttemptRecord, BackfillFire, ClaimOutcome, ClaimRecord, FireDetail, FireLog, FireOutcome, FireRepo, FireResult,
    FireWindow, NewFire, NextRun, NodeRepo, NotifyRepo, Overdue, OwedKind, OwedNotification, PartitionReport,
    PlannedFire, Recorded, TimerFigures, TimerQuery, TimerRepo, LATE_BUCKETS, LATE_BUCKET_BOUNDS_MS, STATS_HOUR_MS,
};
pub use repo::{Quota, Refusal};
pub use shard::{IndexMark, IndexMarks, ShardStore};
pub use sql::SKIPPED_OUTPUT;
pub use tasks::TaskStore;

use xtimer_core::config::{DatabaseConfig, RedisConfig, ShardConfig};
use xtimer_core::SharedClock;

/// What nodes share besides the database: the shard index, the locks, the
/// flows' state, and their description.
type Shared = (Arc<dyn ShardStore>, Arc<dyn LockStore>, Arc<dyn FlowTokens>, String);

/// Every store a node needs, chosen by configuration.
#[derive(Clone)]
pub struct Stores {
    pub timers: Arc<dyn TimerRepo>,
    pub fires: Arc<dyn FireRepo>,
    pub nodes: Arc<dyn NodeRepo>,
    /// Notifications fires owe (`onFailure`), stored with their results.
    pub notifications: Arc<dyn NotifyRepo>,
    pub auth: Arc<dyn AuthRepo>,
    /// The apps' calendars of excluded days.
    pub calendars: Arc<dyn CalendarRepo>,
    /// What is kept per app: its pause, its counts.
    pub apps: Arc<dyn AppRepo>,
    /// The flows' limits (API 1g).
    pub flows: Arc<dyn FlowRepo>,
    /// The asyncflow task tables.
    pub tasks: TaskStore,
    pub shards: Arc<dyn ShardStore>,
    pub locks: Arc<dyn LockStore>,
    /// The flows' shared limits state: in Redis beside the shard index,
    /// else in process.
    pub flow_tokens: Arc<dyn FlowTokens>,
    /// The shard index's marker, by which nodes notice that it lost
    /// writes: Redis's; `None` for the embedded index, which loses none.
    pub marks: Option<Arc<dyn IndexMarks>>,
    database: Database,
    /// Human-readable description of the backends, for the start-up log.
    pub description: String,
}

impl Stores {
    /// Connects the database named by `db.url` (SQLite, PostgreSQL or MySQL,
    /// applying the schema) and, when `redis.url` is set, the Redis shard
    /// index and locks; otherwise the embedded ones (one node only).
    pub async fn connect(
        db: &DatabaseConfig,
        redis: &RedisConfig,
        shard: &ShardConfig,
        clock: SharedClock,
    ) -> Result<Self> {
        let at = |setting: &'static str, url: &str| {
            let url = redact(url);
            move |source: Error| match source {
                Error::UnsupportedUrl(_) => source,
                source => Error::Connect { setting, url, source: Box::new(source) },
            }
        };
        let database = Database::connect(db).await.map_err(at("database.url", &db.url))?;
        let sql = database.describe(&db.url);
        let mut marks: Option<Arc<dyn IndexMarks>> = None;
        let (shards, locks, flow_tokens, index): Shared = if redis.url.is_empty() {
            (
                Arc::new(MemoryShards::new(shard.clone(), clock.clone())),
                Arc::new(MemoryLocks::new(clock.clone())),
                Arc::new(MemoryFlowTokens::new(clock)),
                "the embedded shard index and locks".into(),
            )
        } else {
            let store = redis::RedisStore::open(redis, shard.clone()).await.map_err(at("redis.url", &redis.url))?;
            let store = Arc::new(store.with_clock(clock));
            let kind = match (redis::is_sentinel(redis), redis::is_cluster(redis)) {
                (true, _) => "Redis under Sentinel",
                (_, true) => "Redis Cluster",
                _ => "Redis",
            };
            marks = Some(store.clone());
            (store.clone(), store.clone(), store, format!("{kind} at {}", redact(&redis.url)))
        };
        let mut stores = Self::over(database, shards, locks, format!("{sql} with {index}"));
        stores.flow_tokens = flow_tokens;
        stores.marks = marks;
        Ok(stores)
    }

    /// The stores over an open database and shard index, with the flows'
    /// state in process (set `flow_tokens` for a cluster's).
    pub fn over(
        database: Database,
        shards: Arc<dyn ShardStore>,
        locks: Arc<dyn LockStore>,
        description: String,
    ) -> Self {
        let db = Arc::new(database.clone());
        Self {
            timers: db.clone(),
            fires: db.clone(),
            nodes: db.clone(),
            notifications: db.clone(),
            calendars: db.clone(),
            apps: db.clone(),
            flows: db.clone(),
            auth: db,
            tasks: TaskStore::new(database.clone()),
            shards,
            locks,
            flow_tokens: Arc::new(MemoryFlowTokens::new(Arc::new(xtimer_core::clock::SystemClock))),
            marks: None,
            database,
            description,
        }
    }

    /// The WAL checkpointer a node runs on SQLite; none on the servers.
    pub fn checkpointer(&self, period: std::time::Duration) -> Option<sqlite::Checkpointer> {
        self.database.checkpointer(period)
    }

    /// The database under the repositories (tools and tests that need SQL
    /// of their own).
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Closes the database for a clean stop (see [`Database::close`]).
    pub async fn close(&self) {
        self.database.close().await
    }
}
