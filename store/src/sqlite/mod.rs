//! Opening SQLite, the embedded default: its pragmas, its two pools, and
//! the WAL checkpointer. The repositories themselves are written once for
//! every dialect (see [`crate::db`]).
//!
//! WAL journal, `synchronous = NORMAL` (a committed fire survives a process
//! crash; a power cut may lose the last few milliseconds of commits), and a
//! busy timeout so writers queue instead of failing. Hot paths (insert,
//! claim, record) are one statement per batch: SQLite does ~25k single-row
//! transactions per second here, but ~200k rows per second in batches.

pub(crate) mod driver;
pub(crate) mod fires;
pub(crate) mod json_row;
pub(crate) mod notify;
pub(crate) mod plan;
pub(crate) mod tasks;
pub(crate) mod timers;

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, QueryBuilder, Sqlite, SqlitePool};
use xtimer_core::config::DatabaseConfig;

use crate::sql::SQLITE_BATCH_ROWS;
use crate::{Database, Result};

/// WAL pages after which a commit checkpoints by itself (SQLite's default
/// is 1,000): 40 MB, far above what the [`Checkpointer`] lets the WAL reach.
const AUTOCHECKPOINT_PAGES: &str = "10000";
/// Page cache of the one writer connection (KiB, as a negative
/// `cache_size`). Kept small on purpose: SQLite scans the whole cache at
/// the end of every transaction in which a b-tree page was split or merged
/// (`balance_nonroot` parks a page at the lock-byte page number, and the
/// commit's truncate then walks every cached page). At 64 MiB that scan was
/// ~5% of the node's CPU at 10,000 fires/s. Pages it misses come from the
/// OS's page cache.
const WRITER_CACHE: &str = "-8192";
/// No pool reads the file through `mmap`. Mapped pages count in the
/// process's RSS (and so in its OOM score), once per connection that maps
/// them: with a 3 GB file (ten million timers) the node showed 3.3 GB of
/// RSS, for reads no faster than through the page cache.
const MMAP_SIZE: &str = "0";
/// Bytes the WAL file is cut back to after a checkpoint resets it.
const WAL_SIZE_LIMIT: &str = "67108864";

/// Opens (creating if missing) the database file and applies the schema.
pub(crate) async fn connect(config: &DatabaseConfig) -> Result<Database> {
    let options = SqliteConnectOptions::from_str(&config.url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .pragma("cache_size", "-16384")
        .pragma("temp_store", "memory")
        .pragma("mmap_size", MMAP_SIZE)
        // The node's Checkpointer keeps the WAL short; this is the backstop.
        .pragma("wal_autocheckpoint", AUTOCHECKPOINT_PAGES)
        .pragma("journal_size_limit", WAL_SIZE_LIMIT)
        .log_slow_statements(log::LevelFilter::Debug, Duration::from_secs(1));
    // Writes go through a pool of one connection, so writers queue in order
    // instead of colliding on SQLite's file lock and backing off in its busy
    // handler (which costs whole milliseconds per collision); reads use the
    // other pool and never block writers (WAL).
    let write = SqlitePoolOptions::new()
        .max_connections(1)
        .after_release(|conn, _| Box::pin(still_in_step(conn)))
        .connect_with(options.clone().pragma("cache_size", WRITER_CACHE))
        .await?;
    sqlx::migrate!("../migrations/sqlite").run(&write).await?;
    let read = SqlitePoolOptions::new().max_connections(config.max_connections).connect_with(options).await?;
    Ok(Database::Sqlite { write, read })
}

/// Whether the write connection may go back to the pool: it must be outside
/// any transaction, in SQLite's view and in sqlx's.
///
/// A disk-full (or I/O) error inside a transaction makes SQLite roll the
/// whole transaction back on its own. sqlx does not see that: its ROLLBACK
/// then fails, it still counts one transaction open, and from then on it
/// opens transactions with `SAVEPOINT` and rolls them back with `ROLLBACK
/// TO`, which leaves a transaction open that nothing ever commits: every
/// later write would vanish without an error. So a connection that is out
/// of step is closed (its open transaction, if any, rolls back) and the
/// pool opens a fresh one. The probe runs after the rollback sqlx queues on
/// a dropped transaction, so it sees the settled state.
///
/// Every way out of step starts with sqlx counting a transaction open (a
/// failed ROLLBACK or COMMIT leaves its count as it was; a dropped
/// transaction counts as open until its queued rollback has run), and this
/// code never opens one behind sqlx's back. So a connection whose count is
/// zero goes back without the probe, which would cost two more trips to the
/// connection's thread after every write.
async fn still_in_step(conn: &mut sqlx::SqliteConnection) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::{Connection, Executor};
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    if conn.execute("BEGIN").await.is_err() {
        tracing::warn!("A write connection was left inside a transaction (after a disk or I/O error); reopening it.");
        return Ok(false);
    }
    conn.execute("ROLLBACK").await?;
    if conn.is_in_transaction() {
        tracing::warn!("A write connection's transaction count was off (after a disk or I/O error); reopening it.");
        return Ok(false);
    }
    Ok(true)
}

/// Copies the WAL into the database file off the write path. SQLite's
/// auto-checkpoint runs inside a committing write, so the one writer would
/// wait for the copy and its fsyncs (a quarter of a busy writer's time);
/// this runs a passive checkpoint on a read connection every `period`
/// instead, which never blocks the writer.
pub struct Checkpointer {
    pool: SqlitePool,
    period: Duration,
}

impl Checkpointer {
    /// A checkpointer over `pool` (any connection to the file).
    pub fn new(pool: SqlitePool, period: Duration) -> Self {
        Self { pool, period }
    }

    /// Checkpoints every `period` until `shutdown`, then once more.
    pub async fn run(self, shutdown: tokio_util::sync::CancellationToken) -> Result<()> {
        loop {
            let stop = tokio::select! {
                _ = shutdown.cancelled() => true,
                _ = tokio::time::sleep(self.period) => false,
            };
            if let Err(err) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&self.pool).await {
                tracing::warn!(error = %err, "WAL checkpoint failed; the next one retries.");
            }
            if stop {
                return Ok(());
            }
        }
    }
}

/// Runs `statement` over `items` in chunks of [`SQLITE_BATCH_ROWS`]: one
/// chunk alone (no transaction), several in one transaction.
pub(crate) async fn execute_chunked<T>(
    write: &SqlitePool,
    items: &[T],
    statement: impl for<'a> Fn(&'a [T]) -> QueryBuilder<'a, Sqlite>,
) -> Result<u64> {
    if items.len() <= SQLITE_BATCH_ROWS {
        return Ok(statement(items).build().execute(write).await?.rows_affected());
    }
    let mut done = 0;
    let mut tx = write.begin().await?;
    for chunk in items.chunks(SQLITE_BATCH_ROWS) {
        done += statement(chunk).build().execute(&mut *tx).await?.rows_affected();
    }
    tx.commit().await?;
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of `t_timer` in the database file alone, WAL ignored.
    async fn timers_in_main_file(path: &std::path::Path) -> i64 {
        let url = format!("sqlite://{}?immutable=1", path.display());
        let mut conn = SqliteConnectOptions::from_str(&url).unwrap().read_only(true).connect().await.unwrap();
        let count = sqlx::query_scalar("SELECT COUNT(*) FROM t_timer").fetch_one(&mut conn).await;
        count.unwrap_or(0)
    }

    #[tokio::test]
    async fn the_checkpointer_moves_commits_from_the_wal_into_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let config = DatabaseConfig { url: format!("sqlite://{}", path.display()), max_connections: 2 };
        let Database::Sqlite { write, read } = connect(&config).await.unwrap() else { unreachable!() };
        for i in 0..3 {
            let sql = "INSERT INTO t_timer (app, name, status, kind, cron, timezone, run_at, notify, retry, misfire, \
                       create_time, modify_time) VALUES ('a', $1, 1, 1, '* * * * *', 'UTC', NULL, '{}', '{}', 1, 0, 0)";
            sqlx::query(sql).bind(format!("t{i}")).execute(&write).await.unwrap();
        }
        assert_eq!(timers_in_main_file(&path).await, 0, "commits wait in the WAL (no auto-checkpoint yet)");

        let stop = tokio_util::sync::CancellationToken::new();
        stop.cancel();
        Checkpointer::new(read.clone(), Duration::from_secs(60)).run(stop).await.unwrap();
        assert_eq!(timers_in_main_file(&path).await, 3, "the checkpoint copied them into the file");
    }

    #[tokio::test]
    async fn the_writer_caches_little_and_no_pool_maps_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let config =
            DatabaseConfig { url: format!("sqlite://{}", dir.path().join("x.db").display()), max_connections: 2 };
        let Database::Sqlite { write, read } = connect(&config).await.unwrap() else { unreachable!() };
        for pool in [&write, &read] {
            let mmap: i64 = sqlx::query_scalar("PRAGMA mmap_size").fetch_one(pool).await.unwrap();
            assert_eq!(mmap.to_string(), MMAP_SIZE);
        }
        let writer: i64 = sqlx::query_scalar("PRAGMA cache_size").fetch_one(&write).await.unwrap();
        let reader: i64 = sqlx::query_scalar("PRAGMA cache_size").fetch_one(&read).await.unwrap();
        assert_eq!((writer.to_string().as_str(), reader), (WRITER_CACHE, -16384));
    }
}
