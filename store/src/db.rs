//! The SQL database a node runs on, and the one way the repositories reach
//! it.
//!
//! Every repository (timers, fires, nodes, auth, tasks) is implemented once,
//! on [`Database`]. A statement that reads the same in every dialect is
//! written once, with `$n` placeholders, and run on any pool through
//! [`on_db!`], its text passed through
//! `Dialect::sql` (`crate::driver`): SQLite and PostgreSQL
//! read it as written, MySQL gets `?` placeholders (so a shared statement
//! uses each `$n` once, in order) and `SIGNED` for `BIGINT` in casts. What
//! really differs (a batch insert, a claim, an upsert, anything with
//! dialect-only syntax) comes from the backend's driver
//! (`crate::driver`), which `backend` hands the repository; the
//! repository never asks which backend it runs on.

use crate::driver::{Dialect, Statements};
use crate::{Error, Result};

/// Runs `$body` with `$pool` bound to the write pool (`write`) or a read
/// pool (`read`) of any dialect of a [`Database`]. The body is compiled
/// once per dialect, so one statement text serves them all.
macro_rules! on_db {
    ($db:expr, write, $pool:ident => $body:expr) => {
        match $db {
            $crate::Database::Sqlite { write: $pool, .. } => $body,
            $crate::Database::Postgres($pool) => $body,
            $crate::Database::Mysql($pool) => $body,
        }
    };
    ($db:expr, read, $pool:ident => $body:expr) => {
        match $db {
            $crate::Database::Sqlite { read: $pool, .. } => $body,
            $crate::Database::Postgres($pool) => $body,
            $crate::Database::Mysql($pool) => $body,
        }
    };
}
pub(crate) use on_db;

/// A transaction on the write pool of any dialect.
pub(crate) enum Tx {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
    Mysql(sqlx::Transaction<'static, sqlx::MySql>),
}

/// Runs `$body` with `$c` bound to the connection of a [`Tx`], once per
/// dialect, so one statement text serves them all (as `on_db!` does for
/// pools; shared text goes through [`Dialect::sql`] of `$c`).
macro_rules! on_tx {
    ($tx:expr, $c:ident => $body:expr) => {
        match $tx {
            $crate::db::Tx::Sqlite(t) => {
                let $c: &mut sqlx::SqliteConnection = &mut *t;
                $body
            }
            $crate::db::Tx::Postgres(t) => {
                let $c: &mut sqlx::PgConnection = &mut *t;
                $body
            }
            $crate::db::Tx::Mysql(t) => {
                let $c: &mut sqlx::MySqlConnection = &mut *t;
                $body
            }
        }
    };
}
pub(crate) use on_tx;

impl Tx {
    /// Begins a transaction on `db`'s write pool.
    pub(crate) async fn begin(db: &Database) -> Result<Self> {
        Ok(match db {
            Database::Sqlite { write, .. } => Self::Sqlite(write.begin().await?),
            Database::Postgres(pool) => Self::Postgres(pool.begin().await?),
            Database::Mysql(pool) => Self::Mysql(pool.begin().await?),
        })
    }

    /// The texts of the statements that differ, as this transaction's
    /// backend writes them.
    pub(crate) fn statements(&self) -> &'static Statements {
        match self {
            Self::Sqlite(t) => (**t).statements(),
            Self::Postgres(t) => (**t).statements(),
            Self::Mysql(t) => (**t).statements(),
        }
    }

    pub(crate) async fn commit(self) -> Result<()> {
        match self {
            Self::Sqlite(t) => t.commit().await?,
            Self::Postgres(t) => t.commit().await?,
            Self::Mysql(t) => t.commit().await?,
        }
        Ok(())
    }

    pub(crate) async fn rollback(self) -> Result<()> {
        match self {
            Self::Sqlite(t) => t.rollback().await?,
            Self::Postgres(t) => t.rollback().await?,
            Self::Mysql(t) => t.rollback().await?,
        }
        Ok(())
    }
}

/// The SQL database a node runs on, as pools.
#[derive(Debug, Clone)]
pub enum Database {
    /// SQLite: every write goes through `write` (one connection, so writers
    /// queue in order instead of colliding on the file lock), reads use
    /// `read` and never block the writer (WAL).
    Sqlite { write: sqlx::SqlitePool, read: sqlx::SqlitePool },
    /// PostgreSQL: one pool for all.
    Postgres(sqlx::PgPool),
    /// MySQL 8 (or MariaDB): one pool for all.
    Mysql(sqlx::MySqlPool),
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
            Self::Mysql(pool) => pool.close().await,
        }
    }
}

/// Creates database `name` on the PostgreSQL or MySQL server of
/// `admin_url` and returns the URL of the new database (tests and
/// benchmarks start each run on a fresh one). `name` must be a plain
/// identifier (letters, digits, `_`).
pub async fn create_database(admin_url: &str, name: &str) -> Result<String> {
    on_server(admin_url, name, format!("CREATE DATABASE {name}"), format!("CREATE DATABASE {name}")).await?;
    let (base, _) = admin_url.split_once('?').unwrap_or((admin_url, ""));
    let base = match base.find("://").map(|s| s + 3) {
        Some(host) => match base[host..].find('/') {
            Some(slash) => &base[..host + slash],
            None => base,
        },
        None => base,
    };
    Ok(format!("{base}/{name}"))
}

/// Drops database `name` (as [`create_database`] made it) on the server
/// of `admin_url`, ending any session still in it on PostgreSQL.
pub async fn drop_database(admin_url: &str, name: &str) -> Result<()> {
    let mysql = format!("DROP DATABASE IF EXISTS {name}");
    on_server(admin_url, name, mysql, format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await
}

/// Runs `mysql` or `postgres` (a statement on database `name`, which must
/// be a plain identifier) on the server of `admin_url`, by its scheme.
async fn on_server(admin_url: &str, name: &str, mysql: String, postgres: String) -> Result<()> {
    use sqlx::Connection;
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(Error::Corrupt(format!("not a plain database name: {name}")));
    }
    if admin_url.starts_with("mysql:") || admin_url.starts_with("mariadb:") {
        let mut conn = sqlx::MySqlConnection::connect(admin_url).await?;
        sqlx::query(&mysql).execute(&mut conn).await?;
    } else {
        let mut conn = sqlx::PgConnection::connect(admin_url).await?;
        sqlx::query(&postgres).execute(&mut conn).await?;
    }
    Ok(())
}

/// Bytes the database of a PostgreSQL or MySQL `url` takes on its server
/// (benchmarks report it); `None` for any other URL. On MySQL it is
/// InnoDB's estimate of its tables' data and indexes.
pub async fn server_database_bytes(url: &str) -> Result<Option<u64>> {
    use sqlx::Connection;
    let bytes: i64 = if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        sqlx::query_scalar("SELECT pg_database_size(current_database())").fetch_one(&mut conn).await?
    } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
        let mut conn = sqlx::MySqlConnection::connect(url).await?;
        sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS SIGNED) FROM information_schema.tables \
             WHERE table_schema = DATABASE()",
        )
        .fetch_one(&mut conn)
        .await?
    } else {
        return Ok(None);
    };
    Ok(Some(bytes.max(0) as u64))
}
