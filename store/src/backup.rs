//! `xtimer backup --to FILE`: a consistent copy of the SQLite database,
//! taken while a node may be running on it.
//!
//! SQLite's `VACUUM INTO` writes a compacted snapshot of the database as
//! one transaction sees it (the WAL's committed pages included) to a new
//! file; it only reads the source, so a running node keeps writing (WAL
//! readers do not block the writer). The copy is a plain database file,
//! restored by stopping the node and putting it in place of the
//! database (with no `-wal`/`-shm` files beside it).
//!
//! PostgreSQL is backed up with its own tools (`pg_dump`); this refuses
//! it, saying so.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection};

use crate::{redact, Error};

/// Copies the SQLite database at `url` to the new file `to`; returns the
/// copy's size in bytes.
pub async fn backup(url: &str, to: &Path) -> Result<u64, Error> {
    if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        return Err(Error::BackupPostgres(redact(url)));
    }
    if url.starts_with("mysql:") || url.starts_with("mariadb:") {
        return Err(Error::BackupMysql(redact(url)));
    }
    if !url.starts_with("sqlite:") {
        return Err(Error::BackupNotSqlite(redact(url)));
    }
    // `exists` follows links: a dangling link is refused by SQLite below.
    if to.exists() || to.is_symlink() {
        return Err(Error::BackupTargetExists(to.to_path_buf()));
    }
    let failed = |source| Error::Backup { url: url.to_string(), to: to.to_path_buf(), source };
    let options = SqliteConnectOptions::from_str(url)
        .map_err(failed)?
        // Never create a database where the URL points by mistake.
        .create_if_missing(false)
        // A node's writer may hold the lock for a moment; wait, as it does.
        .busy_timeout(Duration::from_secs(10))
        .disable_statement_logging();
    let mut conn: SqliteConnection = match options.connect().await {
        Ok(conn) => conn,
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("14") => {
            return Err(Error::BackupNoDatabase(url.to_string()))
        }
        Err(err) => return Err(failed(err)),
    };
    let target = to.to_string_lossy().into_owned();
    let copied = sqlx::query("VACUUM INTO ?").bind(&target).execute(&mut conn).await;
    conn.close().await.map_err(failed)?;
    copied.map_err(failed)?;
    Ok(std::fs::metadata(to).map(|m| m.len()).unwrap_or(0))
}
