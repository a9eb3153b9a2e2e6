//! The store's error type.

/// Errors from the database or the shard index.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The (app, name) pair is taken by a timer that is not deleted.
    #[error("a timer named `{name}` already exists in app `{app}`")]
    NameTaken { app: String, name: String },
    /// A timer (the `index`-th of a call) was refused by a limit or a
    /// taken name; nothing of the call was stored.
    #[error("timer {index} of app `{app}` refused: {refusal:?}")]
    Refused { app: String, index: usize, refusal: Refusal },
    /// A database URL this build cannot serve.
    #[error("unsupported database url `{0}`: expected sqlite://PATH or postgres://USER@HOST:PORT/DB")]
    UnsupportedUrl(String),
    /// The database failed or is unreachable.
    #[error("database error")]
    Database(#[from] sqlx::Error),
    /// Redis failed or is unreachable.
    #[error("redis error")]
    Redis(#[from] redis::RedisError),
    /// The schema could not be applied.
    #[error("applying the schema failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A server named by a setting could not be reached or opened at start.
    #[error("cannot connect to {url} ({setting}): {}", xtimer_core::error::error_chain(source.as_ref()))]
    Connect {
        /// The setting that names the server (`database.url`, `redis.url`).
        setting: &'static str,
        /// The URL, its password hidden.
        url: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// `xtimer backup`: the target exists (a backup never overwrites a file).
    #[error("backup target {} already exists: a backup never overwrites a file; name a new one", .0.display())]
    BackupTargetExists(std::path::PathBuf),
    /// `xtimer backup` on PostgreSQL, which has its own tools.
    #[error(
        "database.url is PostgreSQL ({0}): back it up with PostgreSQL's own tools, e.g. \
         `pg_dump --format=custom --file=xtimer.dump URL`; `xtimer backup` copies SQLite databases"
    )]
    BackupPostgres(String),
    /// `xtimer backup` on a MySQL URL: MySQL has its own tools.
    #[error(
        "database.url is MySQL ({0}): back it up with MySQL's own tools, e.g. \
         `mysqldump --single-transaction DATABASE > xtimer.sql`; `xtimer backup` copies SQLite databases"
    )]
    BackupMysql(String),
    /// `xtimer backup` on a URL that is not SQLite.
    #[error("database.url `{0}` is not a SQLite URL (`sqlite://PATH`)")]
    BackupNotSqlite(String),
    /// `xtimer backup`: no database file at the URL's path.
    #[error("no SQLite database at {0}: check database.url (or --database-url)")]
    BackupNoDatabase(String),
    /// `xtimer backup`: SQLite failed to open the database or to write the copy.
    #[error("backing up {url} to {}", .to.display())]
    Backup {
        /// The database URL.
        url: String,
        /// The target.
        to: std::path::PathBuf,
        /// What SQLite said.
        #[source]
        source: sqlx::Error,
    },
    /// A stored row that does not decode (edited by hand, or a newer version).
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

impl Error {
    /// A connection failed or timed out (`kind`), said as `message`.
    pub(crate) fn io(kind: std::io::ErrorKind, message: String) -> Self {
        Self::Database(sqlx::Error::Io(std::io::Error::new(kind, message)))
    }

    /// The database, or the way to it, failed for now: unreachable, a
    /// connection lost, no connection free, a lock or a deadlock, a server
    /// shutting down or read-only. The same statement may succeed later.
    /// Anything else (a statement the database refuses as it is, a row that
    /// does not decode) fails again however often it is tried.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Database(err) => transient_sqlx(err),
            Self::Redis(_) | Self::Connect { .. } => true,
            _ => false,
        }
    }
}

/// [`Error::is_transient`] of a database error.
fn transient_sqlx(err: &sqlx::Error) -> bool {
    use sqlx::Error as E;
    match err {
        E::Io(_) | E::Tls(_) | E::Protocol(_) | E::PoolTimedOut | E::PoolClosed | E::WorkerCrashed => true,
        E::Database(db) => {
            if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                // Lock wait timeout, deadlock, too many connections, shutdown,
                // interrupted, killed, read-only.
                return matches!(mysql.number(), 1205 | 1213 | 1040 | 1053 | 1317 | 1927 | 1290 | 1836);
            }
            if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                // Busy, locked, I/O error, disk full, cannot open, read-only (primary codes).
                let primary = db.code().and_then(|c| c.parse::<i64>().ok()).map(|c| c & 0xff);
                return matches!(primary, Some(5 | 6 | 8 | 10 | 13 | 14));
            }
            // PostgreSQL's SQLSTATE: connection exceptions, serialization
            // failures and deadlocks, insufficient resources, a server
            // shutting down or not accepting connections yet, a lock not
            // available, a statement cancelled (timeout), a read-only
            // server (a failover under way).
            let code = db.code();
            let code = code.as_deref().unwrap_or("");
            code.starts_with("08")
                || code.starts_with("53")
                || code.starts_with("57P")
                || matches!(code, "40001" | "40P01" | "55P03" | "57014" | "25006")
        }
        _ => false,
    }
}

/// Result with the store error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the store did not take a timer (or a change of status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Another timer of the app that is not deleted has the name.
    NameTaken,
    /// The app holds `has` timers; with `adding` more (this one and those
    /// before it in the same call) it would pass `max`.
    TooManyTimers { has: u64, adding: u64, max: u64 },
    /// The app's busiest minute would reach `fires` (this timer's own share
    /// is `own`), more than `max`.
    TooManyFires { fires: u64, own: u64, max: u64 },
    /// Its `dedupeKey` is held by live timer `id` of the app (disabled or
    /// enabled), whose key's first create asked for a run at `first_run_ms`.
    KeyHeld { id: i64, first_run_ms: i64 },
    /// Its `dedupeKey` was asked for by an earlier timer of the same call
    /// that was refused itself: the key may be free, so it may be tried again.
    KeyContended,
}
