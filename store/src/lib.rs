//! Everything that touches SQL or the shard index.
//!
//! # Layout
//!
//! - [`repo`]: the repository traits the other crates program against
//!   ([`TimerRepo`], [`FireRepo`]) and their input and output types.
//! - [`sqlite`]: those traits over SQLite (WAL), the embedded default.
//! - [`postgres`]: those traits over PostgreSQL, for clusters.
//! - [`redis`]: the shard index and locks over Redis, for clusters.
//! - [`shard`]: the shard index ([`ShardStore`]) and its in-process implementation.
//! - [`lock`]: leased locks with owner tokens ([`LockStore`]) and the in-process implementation.
//! - [`auth`]: API tokens and callback signing secrets ([`AuthRepo`]), over either dialect.
//! - [`error`]: this crate's error type.

pub mod auth;
pub mod error;
pub mod lock;
pub mod postgres;
mod postgres_nodes;
pub mod redis;
pub mod repo;
mod rows;
pub mod shard;
pub mod sqlite;

use std::sync::Arc;

pub use auth::AuthRepo;
pub use error::{Error, Result};
pub use lock::{LockStore, MemoryLocks};
pub use repo::{ClaimOutcome, FireRepo, FireResult, NewFire, NodeRepo, Overdue, TimerRepo};
pub use shard::{MemoryShards, ShardStore};

use xtimer_core::config::{DatabaseConfig, RedisConfig, ShardConfig};
use xtimer_core::SharedClock;

/// Every store a node needs, chosen by configuration.
#[derive(Clone)]
pub struct Stores {
    pub timers: Arc<dyn TimerRepo>,
    pub fires: Arc<dyn FireRepo>,
    pub shards: Arc<dyn ShardStore>,
    pub locks: Arc<dyn LockStore>,
    pub nodes: Arc<dyn NodeRepo>,
    /// The SQL database itself, for the parts that keep their own tables
    /// there (the asyncflow engine).
    pub database: Database,
    /// Human-readable description of the backends, for the start-up log.
    pub description: String,
}

impl Stores {
    /// Connects the database named by `db.url` (SQLite or PostgreSQL,
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
        type Sql = (Arc<dyn TimerRepo>, Arc<dyn FireRepo>, Arc<dyn NodeRepo>, Database, String);
        let (timers, fires, nodes, database, sql): Sql = if db.url.starts_with("sqlite:") {
            let repo = Arc::new(sqlite::SqliteRepo::connect(db).await.map_err(at("database.url", &db.url))?);
            let database = repo.database();
            (repo.clone(), repo.clone(), repo, database, format!("SQLite at {}", db.url))
        } else if db.url.starts_with("postgres:") || db.url.starts_with("postgresql:") {
            let repo = Arc::new(postgres::PgRepo::connect(db, None).await.map_err(at("database.url", &db.url))?);
            let database = Database::Postgres(repo.pool().clone());
            (repo.clone(), repo.clone(), repo, database, format!("PostgreSQL at {}", redact(&db.url)))
        } else {
            return Err(Error::UnsupportedUrl(redact(&db.url)));
        };
        let (shards, locks, index): (Arc<dyn ShardStore>, Arc<dyn LockStore>, String) = if redis.url.is_empty() {
            (
                Arc::new(MemoryShards::new(shard.clone(), clock.clone())),
                Arc::new(MemoryLocks::new(clock)),
                "the embedded shard index and locks".into(),
            )
        } else {
            let store =
                redis::RedisStore::connect(&redis.url, shard.clone()).await.map_err(at("redis.url", &redis.url))?;
            let store = Arc::new(store.with_clock(clock));
            (store.clone(), store, format!("Redis at {}", redact(&redis.url)))
        };
        Ok(Self { timers, fires, shards, locks, nodes, database, description: format!("{sql} with {index}") })
    }
}

/// Runs `$body` with `$pool` bound to the write pool (`write`) or a read
/// pool (`read`) of either dialect of a [`Database`]: one statement text
/// (with `$n` placeholders, which SQLite reads too) serves both.
#[macro_export]
macro_rules! on_db {
    ($db:expr, write, $pool:ident => $body:expr) => {
        match $db {
            $crate::Database::Sqlite { write: $pool, .. } => $body,
            $crate::Database::Postgres($pool) => $body,
        }
    };
    ($db:expr, read, $pool:ident => $body:expr) => {
        match $db {
            $crate::Database::Sqlite { read: $pool, .. } => $body,
            $crate::Database::Postgres($pool) => $body,
        }
    };
}

/// The SQL database a node runs on, as pools.
#[derive(Debug, Clone)]
pub enum Database {
    /// SQLite: every write goes through `write` (one connection), reads use `read`.
    Sqlite { write: sqlx::SqlitePool, read: sqlx::SqlitePool },
    /// PostgreSQL: one pool for all.
    Postgres(sqlx::PgPool),
}

impl Database {
    /// Closes every connection, for a clean stop. On SQLite the WAL is
    /// copied into the database file first, and closing the last
    /// connection removes the `-wal` and `-shm` files: a stopped node
    /// leaves one file behind.
    pub async fn close(&self) {
        match self {
            Self::Sqlite { write, read } => {
                if let Err(err) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(write).await {
                    tracing::warn!(error = %err, "Final WAL checkpoint failed; SQLite replays the WAL at the next start.");
                }
                read.close().await;
                write.close().await;
            }
            Self::Postgres(pool) => pool.close().await,
        }
    }

    /// The WAL checkpointer a node runs on SQLite; none on PostgreSQL.
    pub fn checkpointer(&self, period: std::time::Duration) -> Option<sqlite::Checkpointer> {
        match self {
            Self::Sqlite { read, .. } => Some(sqlite::Checkpointer::new(read.clone(), period)),
            Self::Postgres(_) => None,
        }
    }
}

/// A URL with its password replaced by `***`, for logs and errors.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
