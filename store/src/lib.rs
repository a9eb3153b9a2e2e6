//! Everything that touches SQL or the shard index.
//!
//! # Layout
//!
//! - [`repo`]: the repository traits the other crates program against
//!   ([`TimerRepo`], [`FireRepo`]) and their input and output types.
//! - [`sqlite`]: those traits over SQLite (WAL), the embedded default.
//! - [`shard`]: the shard index ([`ShardStore`]) and its in-process implementation.
//! - [`lock`]: leased locks with owner tokens ([`LockStore`]) and the in-process implementation.
//! - [`error`]: this crate's error type.

pub mod error;
pub mod lock;
pub mod repo;
pub mod shard;
pub mod sqlite;

use std::sync::Arc;

pub use error::{Error, Result};
pub use lock::{LockStore, MemoryLocks};
pub use repo::{ClaimOutcome, FireRepo, FireResult, NewFire, Overdue, TimerRepo};
pub use shard::{MemoryShards, ShardStore};

use xtimer_core::config::{DatabaseConfig, ShardConfig};
use xtimer_core::SharedClock;

/// Every store a node needs, chosen by configuration.
#[derive(Clone)]
pub struct Stores {
    pub timers: Arc<dyn TimerRepo>,
    pub fires: Arc<dyn FireRepo>,
    pub shards: Arc<dyn ShardStore>,
    pub locks: Arc<dyn LockStore>,
    /// Human-readable description of the backends, for the start-up log.
    pub description: String,
}

impl Stores {
    /// Connects the database named by `db.url` (applying the schema) and
    /// the embedded shard index and locks.
    pub async fn connect(db: &DatabaseConfig, shard: &ShardConfig, clock: SharedClock) -> Result<Self> {
        if !db.url.starts_with("sqlite:") {
            return Err(Error::UnsupportedUrl(db.url.clone()));
        }
        let sql = Arc::new(sqlite::SqliteRepo::connect(db).await?);
        Ok(Self {
            timers: sql.clone(),
            fires: sql,
            shards: Arc::new(MemoryShards::new(shard.clone(), clock.clone())),
            locks: Arc::new(MemoryLocks::new(clock)),
            description: format!("SQLite at {} with the embedded shard index and locks", db.url),
        })
    }
}
