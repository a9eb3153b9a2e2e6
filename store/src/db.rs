//! The SQL database a node runs on, and the one way the repositories reach
//! it.
//!
//! Every repository (timers, fires, nodes, auth, tasks) is implemented once,
//! on [`Database`]. A statement that reads the same in every dialect is
//! written once, with `$n` placeholders (SQLite reads `$1` as parameter 1
//! too), and run on either pool through [`on_db!`]; a statement that really
//! differs (a batch insert, a claim, anything with dialect-only syntax) is a
//! function per dialect, side by side in its repository's file.

use xtimer_core::config::DatabaseConfig;

use crate::{postgres, redact, sqlite, Error, Result};

/// Runs `$body` with `$pool` bound to the write pool (`write`) or a read
/// pool (`read`) of either dialect of a [`Database`]. The body is compiled
/// once per dialect, so one statement text serves both.
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
pub(crate) use on_db;

/// The SQL database a node runs on, as pools.
#[derive(Debug, Clone)]
pub enum Database {
    /// SQLite: every write goes through `write` (one connection, so writers
    /// queue in order instead of colliding on the file lock), reads use
    /// `read` and never block the writer (WAL).
    Sqlite { write: sqlx::SqlitePool, read: sqlx::SqlitePool },
    /// PostgreSQL: one pool for all.
    Postgres(sqlx::PgPool),
}

impl Database {
    /// Connects the database `config.url` names (`sqlite://PATH` or
    /// `postgres://...`) and applies its schema.
    pub async fn connect(config: &DatabaseConfig) -> Result<Self> {
        let url = config.url.as_str();
        if url.starts_with("sqlite:") {
            sqlite::connect(config).await
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            postgres::connect(config, None).await
        } else {
            Err(Error::UnsupportedUrl(redact(url)))
        }
    }

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

    /// Whether this is PostgreSQL.
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, Self::Postgres(_))
    }
}
